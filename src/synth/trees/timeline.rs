//! The timeline of `synth::trees`: every tree's moves as a DAG derived from the trees, never
//! stored (`Moves`), the list scheduler (`list_schedule`), its forward–backward passes
//! (`timeline`) and their restarts from noisy priorities (`perturbed`).

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
    let last = current.iter().copied().max().unwrap_or(0);
    let key: Vec<u32> = current.iter().map(|&s| last - s).collect();
    let (back, back_len) = list_schedule(mv, links, true, &key, cancelled)?;
    let key: Vec<u32> = back.iter().map(|&s| back_len - 1 - s).collect();
    list_schedule(mv, links, false, &key, cancelled)
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
    let (mut best, mut best_len) = list_schedule(mv, &links, false, &first, cancelled)?;
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
