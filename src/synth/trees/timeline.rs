//! The timeline of `synth::trees`: every tree's moves as a DAG derived from the trees, never
//! stored (`Moves`), the list scheduler (`list_schedule`, and `serial_schedule`, the same
//! schedule where the priorities follow the DAG), its forward–backward passes (`timeline`) and
//! their restarts from noisy priorities (`perturbed`).

use super::build::{Trees, edge_between};
use super::{ATTEMPT_MOVES, Fabric};
use crate::synth::SynthError;

/// Forward–backward passes after the first forward pass (each a backward and a forward pass),
/// unless one reaches the busiest link's load first.
const IMPROVEMENT_PASSES: usize = 6;

/// Moves beyond which two passes are the most made.
const LARGE_MOVES: usize = 1 << 22;

/// `perturbed`: the noise added to each move's priority, up to this many timesteps (in eighths;
/// 1, 2, 4, 6 and 10 were tried on torus:8x8x8 less a link: 3 did best).
const NOISE_TIMESTEPS: usize = 3;

/// The moves of every tree as a DAG the list scheduler walks without storing it: tree t's
/// moves are `t * 2m + i` with m = n − 1, the partial of the ith non-root NPU up (i < m), then
/// its result down (m + i). Children lists are kept per tree.
pub(super) struct Moves<'a> {
    f: &'a Fabric,
    t: &'a Trees,
    /// `first_child[t * n + v]`, `next_sibling[t * n + v]`: tree t's children lists.
    first_child: Vec<u32>,
    next_sibling: Vec<u32>,
    children: Vec<u32>,
    m: usize,
}

impl<'a> Moves<'a> {
    pub(super) fn new(f: &'a Fabric, t: &'a Trees) -> Moves<'a> {
        let n = t.n;
        let units = t.roots.len();
        let mut first_child = vec![u32::MAX; units * n];
        let mut next_sibling = vec![u32::MAX; units * n];
        let mut children = vec![0u32; units * n];
        for u in 0..units {
            for v in 0..n {
                let p = t.parent[u * n + v];
                if p != u32::MAX {
                    next_sibling[u * n + v] = first_child[u * n + p as usize];
                    first_child[u * n + p as usize] = v as u32;
                    children[u * n + p as usize] += 1;
                }
            }
        }
        Moves { f, t, first_child, next_sibling, children, m: n - 1 }
    }
    pub(super) fn count(&self) -> usize {
        self.t.roots.len() * 2 * self.m
    }
    /// (tree, NPU, up?) of move `i`.
    pub(super) fn decode(&self, i: usize) -> (usize, u32, bool) {
        let (u, r) = (i / (2 * self.m), i % (2 * self.m));
        let (k, up) = if r < self.m { (r, true) } else { (r - self.m, false) };
        let root = self.t.roots[u] as usize;
        let v = if k < root { k } else { k + 1 };
        (u, v as u32, up)
    }
    fn id(&self, u: usize, v: u32, up: bool) -> usize {
        let root = self.t.roots[u];
        let k = if v < root { v } else { v - 1 } as usize;
        u * 2 * self.m + if up { k } else { self.m + k }
    }
    pub(super) fn parent(&self, u: usize, v: u32) -> u32 {
        self.t.parent[u * self.t.n + v as usize]
    }
    fn kids(&self, u: usize, v: u32) -> impl Iterator<Item = u32> + '_ {
        let n = self.t.n;
        let first = self.first_child[u * n + v as usize];
        std::iter::successors((first != u32::MAX).then_some(first), move |&c| {
            let next = self.next_sibling[u * n + c as usize];
            (next != u32::MAX).then_some(next)
        })
    }
    /// The directed link move `i` takes.
    fn link(&self, i: usize) -> u32 {
        let (u, v, up) = self.decode(i);
        let p = self.parent(u, v);
        let e = edge_between(self.f, v, p);
        if up { self.f.link(e, v, p) } else { self.f.link(e, p, v) }
    }
    /// Moves that must finish before move `i` starts, counted: in the forward DAG (`rev`
    /// false) or reversed.
    fn preds(&self, i: usize, rev: bool) -> u32 {
        let (u, v, up) = self.decode(i);
        let n = self.t.n;
        let root = self.t.roots[u];
        let p = self.parent(u, v);
        match (up, rev) {
            (true, false) => self.children[u * n + v as usize],
            (false, false) if p == root => self.children[u * n + root as usize],
            (false, false) => 1,
            (true, true) if p == root => self.children[u * n + root as usize],
            (true, true) => 1,
            (false, true) => self.children[u * n + v as usize],
        }
    }
    /// Calls `k` with every move that waits for move `i`.
    fn succs(&self, i: usize, rev: bool, mut k: impl FnMut(usize)) {
        let (u, v, up) = self.decode(i);
        let root = self.t.roots[u];
        let p = self.parent(u, v);
        // Forward: a partial feeds its parent's partial, or at the root every result down;
        // a result feeds its children's. Reversed: the other way round.
        let down_from_root = |k: &mut dyn FnMut(usize)| {
            for w in self.kids(u, root) {
                k(self.id(u, w, false));
            }
        };
        let ups_into_root = |k: &mut dyn FnMut(usize)| {
            for w in self.kids(u, root) {
                k(self.id(u, w, true));
            }
        };
        match (up, rev) {
            (true, false) if p == root => down_from_root(&mut k),
            (true, false) => k(self.id(u, p, true)),
            (false, false) => self.kids(u, v).for_each(|w| k(self.id(u, w, false))),
            (true, true) => self.kids(u, v).for_each(|w| k(self.id(u, w, true))),
            (false, true) if p == root => ups_into_root(&mut k),
            (false, true) => k(self.id(u, p, false)),
        }
    }
}

/// List-schedules every move (one a link and timestep, the ready move of lowest `key` first,
/// ties by id): each move's start, and the timesteps until the last arrives.
fn list_schedule(
    mv: &Moves<'_>,
    links: &[u32],
    rev: bool,
    key: &[u32],
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, u32), SynthError> {
    let total = mv.count();
    let mut due: Vec<u32> = (0..total).map(|i| mv.preds(i, rev)).collect();
    // Each link's ready moves, (key, id) packed, unordered: a link holds few at a time, and a
    // scan for the least is cheaper than a heap's upkeep (the same move chosen).
    let mut ready: Vec<Vec<u64>> = vec![Vec::new(); 2 * mv.f.edges];
    let mut active: Vec<u32> = Vec::new();
    let mut is_active = vec![false; 2 * mv.f.edges];
    let offer = |i: usize, ready: &mut [Vec<u64>], active: &mut Vec<u32>, is_active: &mut [bool]| {
        let l = links[i] as usize;
        ready[l].push(((key[i] as u64) << 32) | i as u64);
        if !std::mem::replace(&mut is_active[l], true) {
            active.push(l as u32);
        }
    };
    for (i, _) in due.iter().enumerate().filter(|(_, d)| **d == 0) {
        offer(i, &mut ready, &mut active, &mut is_active);
    }
    let mut start = vec![0u32; total];
    let (mut done, mut time) = (0usize, 0u32);
    let mut fired: Vec<usize> = Vec::new();
    while done < total {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        if active.is_empty() {
            // A DAG of trees always has a ready move; reaching here is a bug, not an input.
            return Err(SynthError::Greedy(crate::synth::greedy::GreedyError::Unsupported("trees: no move is ready")));
        }
        fired.clear();
        let mut still = Vec::with_capacity(active.len());
        for &l in &active {
            let set = &mut ready[l as usize];
            if let Some((at, &packed)) = set.iter().enumerate().min_by_key(|&(_, &x)| x) {
                set.swap_remove(at);
                let i = (packed & 0xFFFF_FFFF) as usize;
                start[i] = time;
                fired.push(i);
            }
            if set.is_empty() {
                is_active[l as usize] = false;
            } else {
                still.push(l);
            }
        }
        active = still;
        for &i in &fired {
            done += 1;
            mv.succs(i, rev, |j| {
                due[j] -= 1;
                if due[j] == 0 {
                    offer(j, &mut ready, &mut active, &mut is_active);
                }
            });
        }
        time += 1;
    }
    Ok((start, time))
}

/// One forward–backward pass from the timeline `current`: the reversed DAG scheduled with the
/// move that started last going first, then the forward DAG by the latest starts that allows.
fn forward_backward(
    mv: &Moves<'_>,
    links: &[u32],
    current: &[u32],
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, u32), SynthError> {
    // Both keys follow their DAG (a move starts after those it waits for), so the serial
    // scheduler gives the list scheduler's timeline.
    let last = current.iter().copied().max().unwrap_or(0);
    let key: Vec<u32> = current.iter().map(|&s| last - s).collect();
    let (back, back_len) = schedule(mv, links, true, &key, cancelled)?;
    let key: Vec<u32> = back.iter().map(|&s| back_len - 1 - s).collect();
    schedule(mv, links, false, &key, cancelled)
}

/// `list_schedule`'s timeline: by `serial_schedule` where `key` follows the DAG, else by the
/// list scheduler itself.
fn schedule(
    mv: &Moves<'_>,
    links: &[u32],
    rev: bool,
    key: &[u32],
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, u32), SynthError> {
    match serial_schedule(mv, links, rev, key, cancelled)? {
        Some(timeline) => Ok(timeline),
        None => list_schedule(mv, links, rev, key, cancelled),
    }
}

/// `list_schedule`'s timeline, built move by move instead of timestep by timestep, where `key`
/// follows the DAG (every move's key above those of the moves it waits for; `None` where one
/// is not): the moves in order of (key, id), each at the first timestep its link has free
/// after those it waits for. The same timeline: a move the list scheduler starts at t was ready
/// there and no ready move of lower key took its link, and every move of higher key that took
/// the link before t did so before the move was ready. On torus:32x32 less a link at 64 MiB a
/// run's seven schedules took 358 ms against 1309 in fours, 662 against 1687 in threes (no
/// per-timestep scan of every link's ready moves).
fn serial_schedule(
    mv: &Moves<'_>,
    links: &[u32],
    rev: bool,
    key: &[u32],
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<(Vec<u32>, u32)>, SynthError> {
    let total = mv.count();
    // The order by (key, id): a counting sort over the keys (a few hundred timesteps, or
    // eight times that with noise).
    let top = key.iter().copied().max().unwrap_or(0) as usize;
    let mut at = vec![0u32; top + 2];
    for &k in key {
        at[k as usize + 1] += 1;
    }
    for k in 1..at.len() {
        at[k] += at[k - 1];
    }
    let mut order = vec![0u32; total];
    for (i, &k) in key.iter().enumerate() {
        order[at[k as usize] as usize] = i as u32;
        at[k as usize] += 1;
    }
    drop(at);
    // Each link's taken timesteps, a bit each.
    let mut taken: Vec<Vec<u64>> = vec![Vec::new(); 2 * mv.f.edges];
    let mut start = vec![u32::MAX; total];
    let mut len = 0u32;
    for (n, &i) in order.iter().enumerate() {
        if n % (1 << 16) == 0 && cancelled() {
            return Err(SynthError::Cancelled);
        }
        let i = i as usize;
        // The moves `i` waits for are those waiting for it in the other direction's DAG.
        let (mut earliest, mut unplaced) = (0u32, false);
        mv.succs(i, !rev, |j| match start[j] {
            u32::MAX => unplaced = true,
            s => earliest = earliest.max(s + 1),
        });
        if unplaced {
            return Ok(None);
        }
        let bits = &mut taken[links[i] as usize];
        let mut t = earliest as usize;
        let t = loop {
            let w = t / 64;
            if w >= bits.len() {
                bits.resize(w + 1, 0);
            }
            let free = !bits[w] & (!0u64 << (t % 64));
            if free != 0 {
                break w * 64 + free.trailing_zeros() as usize;
            }
            t = (w + 1) * 64;
        };
        bits[t / 64] |= 1 << (t % 64);
        start[i] = t as u32;
        len = len.max(t as u32 + 1);
    }
    Ok(Some((start, len)))
}

fn links_of(mv: &Moves<'_>) -> Vec<u32> {
    (0..mv.count()).map(|i| mv.link(i)).collect()
}

/// The forward–backward timeline of every move of `mv`: each move's start, the timesteps,
/// and the busiest link's load (no timeline is shorter).
pub(super) fn timeline(mv: &Moves<'_>, cancelled: &dyn Fn() -> bool) -> Result<(Vec<u32>, u32, u32), SynthError> {
    let total = mv.count();
    let links = links_of(mv);
    let floor = mv.t.load.iter().copied().max().unwrap_or(0);
    // The first pass: tree by tree, within one the partials from the deepest NPUs first and
    // the results to the shallowest (its breadth-first order, reversed for the partials).
    let (n, units) = (mv.t.n, mv.t.roots.len());
    let mut depth_rank = vec![0u32; mv.t.order.len()];
    for u in 0..units {
        for (k, &v) in mv.t.order[u * n..(u + 1) * n].iter().enumerate() {
            depth_rank[u * n + v as usize] = k as u32;
        }
    }
    let first: Vec<u32> = (0..total)
        .map(|i| {
            let (u, v, up) = mv.decode(i);
            let k = depth_rank[u * n + v as usize];
            (u * 2 * n) as u32 + if up { n as u32 - k } else { n as u32 + k }
        })
        .collect();
    drop(depth_rank);
    let (mut best, mut best_len) = schedule(mv, &links, false, &first, cancelled)?;
    tracing::trace!(target: "ccsynth::timing", first_len = best_len, floor, "trees: first pass");
    let mut current = best.clone();
    // At millions of moves a pass costs a second or more, and the first two win most.
    let passes = if total > LARGE_MOVES { 2 } else { IMPROVEMENT_PASSES };
    // Passes that may not shorten it before the search stops: one where a pass costs a tenth
    // of a second or more.
    let patience = if total > ATTEMPT_MOVES { 1 } else { 2 };
    let mut stale = 0;
    for _ in 0..passes {
        if best_len <= floor || stale == patience {
            break;
        }
        let (fwd, len) = forward_backward(mv, &links, &current, cancelled)?;
        tracing::trace!(target: "ccsynth::timing", len, "trees: pass");
        // A pass that does not shorten the schedule may still reorder it for the next.
        if len < best_len {
            best.clone_from(&fwd);
            best_len = len;
            stale = 0;
        } else {
            stale += 1;
        }
        current = fwd;
    }
    Ok((best, best_len, floor))
}

/// Restarts the forward–backward passes `rounds` times from timeline `start` (`len` timesteps)
/// with noise in the priorities: each restart's keys are the last kept timeline's, each plus a
/// random fraction of up to `NOISE_TIMESTEPS`, then `passes` plain passes. A restart
/// within a timestep of the last kept one is kept to restart from (a walk, not a descent); the
/// shortest is returned. Forward–backward alone stops in a local optimum: on torus:8x8x8 less a
/// link at 64 MiB, 171 trees of three chunks take 62 timesteps against a busiest link of 57;
/// the six restarts the budget allows there bring that to 60, twenty to 59.
pub(super) fn perturbed(
    mv: &Moves<'_>,
    start: Vec<u32>,
    len: u32,
    rounds: usize,
    passes: usize,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, u32), SynthError> {
    let links = links_of(mv);
    let floor = mv.t.load.iter().copied().max().unwrap_or(0);
    let mut rng = crate::rng::Rng::new(seed);
    let noise = 8 * NOISE_TIMESTEPS + 1;
    let (mut best, mut best_len) = (start.clone(), len);
    let (mut cur, mut cur_len) = (start, len);
    for _ in 0..rounds {
        if best_len <= floor {
            break;
        }
        let last = cur.iter().copied().max().unwrap_or(0);
        let key: Vec<u32> = cur.iter().map(|&s| (last - s) * 8 + rng.below(noise) as u32).collect();
        let (back, back_len) = list_schedule(mv, &links, true, &key, cancelled)?;
        let key: Vec<u32> = back.iter().map(|&s| (back_len - 1 - s) * 8 + rng.below(noise) as u32).collect();
        let (mut fwd, mut fwd_len) = list_schedule(mv, &links, false, &key, cancelled)?;
        for _ in 0..passes {
            let (next, next_len) = forward_backward(mv, &links, &fwd, cancelled)?;
            if next_len <= fwd_len {
                (fwd, fwd_len) = (next, next_len);
            }
        }
        if fwd_len < best_len {
            best.clone_from(&fwd);
            best_len = fwd_len;
        }
        if fwd_len <= cur_len + 1 {
            (cur, cur_len) = (fwd, fwd_len);
        }
    }
    Ok((best, best_len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
    use crate::synth::trees::{build::build_trees, fabric};
    use crate::topology::{Failures, parse_spec};

    /// The serial scheduler against the list scheduler on one set of trees: the first pass's
    /// keys, a forward–backward pass's both ways, and noisy keys (which need not follow the
    /// DAG: `schedule` falls back to the list scheduler there).
    fn agree(spec: &str, failed: &[[usize; 2]], chunks: u32, group: usize, seed: u64) -> Result<(), String> {
        let t = parse_spec(spec).unwrap();
        let Ok(t) = t.with_failures(&Failures { links: failed.to_vec(), ..Failures::default() }) else { return Ok(()) };
        let Ok(c) =
            Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20).with_chunks_per_npu(chunks), &t)
        else {
            return Ok(());
        };
        let Some(f) = fabric(&t, &c, group) else { return Ok(()) };
        let trees = build_trees(&f, c.num_chunks.div_ceil(group), seed, &|| false).unwrap();
        let mv = Moves::new(&f, &trees);
        let links = links_of(&mv);
        let no = &|| false;
        let same = |rev: bool, key: &[u32], what: &str| -> Result<(Vec<u32>, u32), String> {
            let listed = list_schedule(&mv, &links, rev, key, no).unwrap();
            if let Some(serial) = serial_schedule(&mv, &links, rev, key, no).unwrap()
                && serial != listed
            {
                return Err(format!(
                    "{spec} less {failed:?}, {chunks} chunks in {group}s, seed {seed}: {what} ({} against {} timesteps)",
                    serial.1, listed.1
                ));
            }
            assert_eq!(schedule(&mv, &links, rev, key, no).unwrap(), listed);
            Ok(listed)
        };
        let (n, m) = (trees.n, mv.count());
        let first: Vec<u32> = (0..m)
            .map(|i| {
                let (u, v, up) = mv.decode(i);
                let k = trees.order[u * n..(u + 1) * n].iter().position(|&x| x == v).unwrap() as u32;
                (u * 2 * n) as u32 + if up { n as u32 - k } else { n as u32 + k }
            })
            .collect();
        assert!(
            serial_schedule(&mv, &links, false, &first, no).unwrap().is_some(),
            "the first pass's keys follow the DAG"
        );
        let (fwd, len) = same(false, &first, "the first pass")?;
        let key: Vec<u32> = fwd.iter().map(|&s| len - 1 - s).collect();
        let (back, back_len) = same(true, &key, "a backward pass")?;
        let key: Vec<u32> = back.iter().map(|&s| back_len - 1 - s).collect();
        same(false, &key, "a forward pass")?;
        // Keys by depth alone: every tree's moves of one level tie, broken by id.
        let level: Vec<u32> = (0..m)
            .map(|i| {
                let (u, v, up) = mv.decode(i);
                let d = trees.depth[u * n + v as usize];
                if up { n as u32 - d } else { n as u32 + d }
            })
            .collect();
        same(false, &level, "keys by depth")?;
        let mut rng = crate::rng::Rng::new(seed);
        let noisy: Vec<u32> = back.iter().map(|&s| (back_len - 1 - s) * 8 + rng.below(25) as u32).collect();
        same(false, &noisy, "noisy keys")?;
        Ok(())
    }

    proptest::proptest! {
        /// On random tori, less up to two random links (where they stay connected), at any
        /// chunking and seed: the serial scheduler's timeline is the list scheduler's.
        #[test]
        fn the_serial_schedule_is_the_list_schedule(
            a in 2usize..7,
            b in 2usize..7,
            cut in proptest::collection::vec((0usize..36, 0usize..4), 0..3),
            chunks in 1u32..4,
            group in 1usize..4,
            seed in 0u64..1000,
        ) {
            let n = a * b;
            // Link (x, y) to its neighbour one step along either dimension.
            let failed: Vec<[usize; 2]> = cut
                .iter()
                .map(|&(v, d)| {
                    let v = v % n;
                    let (x, y) = (v % a, v / a);
                    let w = match d { 0 => (x + 1) % a + y * a, 1 => x + ((y + 1) % b) * a, 2 => (x + a - 1) % a + y * a, _ => x + ((y + b - 1) % b) * a };
                    [v, w]
                })
                .filter(|[v, w]| v != w)
                .collect();
            if let Err(e) = agree(&format!("torus:{a}x{b}"), &failed, chunks, group, seed) {
                proptest::prop_assert!(false, "{}", e);
            }
        }
    }

    /// Keys that do not follow the DAG (a result down before the partials up): no serial
    /// timeline, and `schedule` is the list scheduler's.
    #[test]
    fn keys_against_the_dag_fall_back_to_the_list_scheduler() {
        let t = parse_spec("torus:3x3").unwrap();
        let c = Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20), &t).unwrap();
        let f = fabric(&t, &c, 1).unwrap();
        let trees = build_trees(&f, c.num_chunks, 1, &|| false).unwrap();
        let mv = Moves::new(&f, &trees);
        let links = links_of(&mv);
        // Downs first: every result's key below every partial's.
        let key: Vec<u32> = (0..mv.count()).map(|i| u32::from(mv.decode(i).2)).collect();
        assert!(serial_schedule(&mv, &links, false, &key, &|| false).unwrap().is_none());
        let listed = list_schedule(&mv, &links, false, &key, &|| false).unwrap();
        assert_eq!(schedule(&mv, &links, false, &key, &|| false).unwrap(), listed);
    }
}
