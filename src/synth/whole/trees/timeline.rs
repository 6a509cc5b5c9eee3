//! The timeline of `synth::trees`: every tree's moves, identified without being stored
//! (`Moves`), the scheduler that places them one by one and lets each choose its parent as it
//! goes (`place`), its forward–backward passes (`timeline`) and their restarts from noisy
//! priorities (`perturbed`).
//!
//! Why the parents are chosen while placing: with every tree's parents fixed, a list schedule
//! of the trees ended 11–14 timesteps over the busiest link's load on torus:32x32 less a link
//! at 64 MiB (142 against 128 in fours), every link idle now and then for want of a ready
//! move while a neighbouring link had a queue. An NPU off its tree's axes has two or more
//! neighbours one hop nearer the root, so a partial may go to whichever of them takes it first
//! and a result may come from whichever has it first. Placed so, the same trees take 131
//! timesteps there without a restart (docs/BENCHMARKS.md, "Parents chosen as the moves are
//! placed"). The trees stay shortest-path trees (every choice is one hop nearer the root), so
//! each move's chain is as short as before; the up and the down tree of a unit may now differ.

use super::Fabric;
use super::build::Trees;
use crate::synth::SynthError;

mod place;
#[cfg(test)]
mod tests;

use place::{place, place_noisy};

/// Forward–backward passes after the first forward pass (each a backward and a forward pass),
/// unless one reaches the busiest link's load first.
const IMPROVEMENT_PASSES: usize = 6;

/// Moves beyond which two passes are the most made.
const LARGE_MOVES: usize = 1 << 22;

/// Moves beyond which a pass that does not shorten the timeline ends the passes (one where a
/// pass costs a tenth of a second or more; two below).
const PATIENT_BELOW: usize = 1 << 19;

/// `perturbed`: the noise added to each move's priority, up to this many timesteps (in eighths;
/// 1, 2, 4, 6 and 10 were tried on torus:8x8x8 less a link with the parents fixed: 3 did best).
const NOISE_TIMESTEPS: usize = 3;

/// Each move's parent in its tree, the partials' (`up`) and the results' (`down`) apart, at
/// `tree * n + npu` (`u32::MAX` at the root). A move's link is its NPU's edge to that parent.
/// Both start as the built trees' parents; every `place` may change them.
#[derive(Clone, PartialEq, Debug)]
pub(super) struct Parents {
    pub(super) up: Vec<u32>,
    pub(super) down: Vec<u32>,
}

impl Parents {
    pub(super) fn of(t: &Trees) -> Parents {
        Parents { up: t.parent.clone(), down: t.parent.clone() }
    }
}

/// A schedule of every move: each move's start, the timesteps until the last arrives, the
/// parents the moves took, and whether they chose them as they were placed (`place`) or kept
/// their trees' (the passes and restarts from it go on the same way).
#[derive(Clone)]
pub(super) struct Timeline {
    pub(super) start: Vec<u32>,
    pub(super) len: u32,
    pub(super) par: Parents,
    pub(super) chosen: bool,
}

impl Timeline {
    /// `place`'s cap for a timeline shorter than `beat`: each link under `beat` moves where the
    /// parents are chosen, none but the move's own where they are fixed.
    fn cap(&self, beat: u32) -> u32 {
        if self.chosen { beat.saturating_sub(1) } else { 0 }
    }
}

/// The moves of every tree, identified without being stored: tree t's moves are `t * 2m + i`
/// with m = n − 1, the partial of the ith non-root NPU up (i < m), then its result down
/// (m + i). What each move waits for depends on the parents a schedule gives them (`Parents`).
pub(super) struct Moves<'a> {
    pub(super) f: &'a Fabric,
    pub(super) t: &'a Trees,
    m: usize,
    /// `nearer[u * n + v]`: bit k set where v's kth neighbour is one hop nearer tree u's root
    /// (every bit where v has more than 32 neighbours: `place` then reads their depths).
    nearer: Vec<u32>,
    /// `floor`'s, once asked for.
    floor: std::sync::OnceLock<u32>,
}

impl<'a> Moves<'a> {
    pub(super) fn new(f: &'a Fabric, t: &'a Trees) -> Moves<'a> {
        let (n, units) = (t.n, t.roots.len());
        let mut nearer = vec![0u32; units * n];
        for u in 0..units {
            let depth = &t.depth[u * n..(u + 1) * n];
            for v in 0..n as u32 {
                let nb = f.neighbours(v);
                nearer[u * n + v as usize] = if nb.len() > 32 {
                    u32::MAX
                } else {
                    nb.iter()
                        .enumerate()
                        .filter(|&(_, &(p, _))| depth[p as usize] + 1 == depth[v as usize])
                        .fold(0, |m, (k, _)| m | 1 << k)
                };
            }
        }
        Moves { f, t, m: n - 1, nearer, floor: std::sync::OnceLock::new() }
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
    /// Timesteps move `i` holds its link under `par` (one where every link is alike).
    fn cost(&self, i: usize, par: &Parents) -> u32 {
        if self.f.uniform {
            return 1;
        }
        let (u, v, up) = self.decode(i);
        let p = if up { par.up[u * self.t.n + v as usize] } else { par.down[u * self.t.n + v as usize] };
        self.f.cost_between(v, p)
    }
    /// Each move's end under `par` mirrored from `len` (its start in a timeline run backwards
    /// from there): a key that takes the move that ended last first.
    fn mirrored(&self, start: &[u32], par: &Parents, len: u32) -> Vec<u32> {
        start.iter().enumerate().map(|(i, &s)| len - (s + self.cost(i, par))).collect()
    }
    pub(super) fn id(&self, u: usize, v: u32, up: bool) -> usize {
        let root = self.t.roots[u];
        let k = if v < root { v } else { v - 1 } as usize;
        u * 2 * self.m + if up { k } else { self.m + k }
    }

    /// The fewest timesteps a timeline of these moves takes: on their trees' own parents
    /// (`fixed`) the busiest link's load, or more where a link's moves cannot all be early or
    /// all be late (`jackson_floor`; from `LARGE_MOVES` the load alone, the bound sorts every
    /// move). Where the parents are chosen a move may leave the busiest link, and no bound is
    /// known: the load, where the passes and restarts stop all the same (as they always have).
    pub(super) fn floor(&self, fixed: bool) -> u32 {
        if !fixed {
            return self.t.busiest();
        }
        *self.floor.get_or_init(|| {
            let load = self.t.busiest();
            // Jackson's rule is optimal for moves of one timestep each: not where links differ.
            if self.count() > LARGE_MOVES || !self.f.uniform { load } else { load.max(jackson_floor(self.f, self.t)) }
        })
    }
}

/// Each link alone as one machine with a job per move: a move can start no earlier than the
/// chain of moves before it (its head: a partial after its subtree's height, a result after
/// the tree's height and its parent's depth) and is followed by a chain after it (its tail: a
/// partial's way to the root and the tree's height down; a result's subtree height). With
/// moves of one timestep and whole heads, Jackson's rule (of the moves released, the longest
/// tail first) is optimal for one machine (Carlier's bound: its preemptive schedule is then a
/// schedule), so the most over links of its finish plus tail bounds every timeline. On
/// dragonfly:4:5 it is the load plus two, where every restart ends.
fn jackson_floor(f: &Fabric, t: &Trees) -> u32 {
    let (n, units) = (t.n, t.roots.len());
    let mut height = vec![0u32; n];
    // (link, head, tail) of every move.
    let mut jobs: Vec<(u32, u32, u32)> = Vec::with_capacity(units * 2 * n.saturating_sub(1));
    for u in 0..units {
        let (order, parent, depth) =
            (&t.order[u * n..(u + 1) * n], &t.parent[u * n..(u + 1) * n], &t.depth[u * n..(u + 1) * n]);
        height.fill(0);
        for &v in order.iter().rev() {
            let p = parent[v as usize];
            if p != u32::MAX {
                height[p as usize] = height[p as usize].max(height[v as usize] + 1);
            }
        }
        let tree = height[t.roots[u] as usize];
        for &v in order {
            let p = parent[v as usize];
            if p == u32::MAX {
                continue;
            }
            let (d, h) = (depth[v as usize], height[v as usize]);
            let e = super::build::edge_between(f, v, p);
            jobs.push((f.link(e, v, p), h, d - 1 + tree));
            jobs.push((f.link(e, p, v), tree + d - 1, h));
        }
    }
    jobs.sort_unstable();
    let mut floor = 0;
    let mut tails = std::collections::BinaryHeap::new();
    let mut i = 0;
    while i < jobs.len() {
        let link = jobs[i].0;
        let mut time = jobs[i].1;
        loop {
            while i < jobs.len() && jobs[i].0 == link && jobs[i].1 <= time {
                tails.push(jobs[i].2);
                i += 1;
            }
            match tails.pop() {
                Some(tail) => {
                    floor = floor.max(time + 1 + tail);
                    time += 1;
                }
                None if i < jobs.len() && jobs[i].0 == link => time = jobs[i].1,
                None => break,
            }
        }
    }
    floor
}

/// One forward–backward pass from `cur`: the reversed DAG placed with the move that started
/// last going first, then the forward DAG by the latest starts that allows; the parents
/// chosen as `cur`'s were, within `cap` (`place`).
fn forward_backward(
    mv: &Moves<'_>,
    cur: &Timeline,
    cap: u32,
    cancelled: &dyn Fn() -> bool,
) -> Result<Timeline, SynthError> {
    let mut par = cur.par.clone();
    let key = mv.mirrored(&cur.start, &par, cur.len);
    let (back, back_len) = place(mv, &mut par, true, &key, cap, cancelled)?;
    let key = mv.mirrored(&back, &par, back_len);
    let (start, len) = place(mv, &mut par, false, &key, cap, cancelled)?;
    Ok(Timeline { start, len, par, chosen: cur.chosen })
}

/// The forward–backward timeline of every move of `mv`, from the built trees' parents: the
/// timeline and the floor of its kind where its passes stop (`Moves::floor`). The passes
/// are made both with every move on its tree's parent and with the parents chosen as the moves
/// are placed, the shorter kept (ties to the fixed parents): in full where `restarted` (the
/// restarts that follow cost ten times the passes, and which start is the better shows only at
/// the end: torus:16x16 less three links at 64 MiB, 171 trees of three chunks, fixed 95 and
/// chosen 92 timesteps, the fixed shorter after one pass), else the first pass and one more
/// each, the passes going on from the shorter. Where a link carries hundreds of moves against a
/// tree's height of tens, the trees' own balance is what the timeline needs and the fixed
/// parents reach it (torus:16x16 less three links at 64 MiB in 1024 trees: 514 timesteps, the
/// busiest link's load, against 517 with the parents chosen); where it carries a few times a
/// tree's height, the choice is what lets the links keep busy (in 256 trees of four chunks on
/// torus:32x32 less a link: 131 timesteps against 142).
pub(super) fn timeline(
    mv: &Moves<'_>,
    restarted: bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Timeline, u32), SynthError> {
    let total = mv.count();
    let floor = mv.t.busiest();
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
    // At millions of moves a pass costs a second or more, and the first two win most.
    let passes = if total > LARGE_MOVES { 2 } else { IMPROVEMENT_PASSES };
    let race = if restarted { passes } else { 1 };
    let mut kept: Option<Descent> = None;
    // At millions of moves, the fixed parents alone: a link there carries many times a tree's
    // height (on torus:64x64 less three links at 1 GiB, 1024 trees of four chunks, the choice
    // gained a timestep of 517 for 7 s more).
    let ways: &[bool] = if total > LARGE_MOVES { &[false] } else { &[false, true] };
    for &chosen in ways {
        if kept.as_ref().is_some_and(|k| k.best.len <= floor) {
            break;
        }
        let mut d = Descent::new(mv, &first, chosen, mv.floor(!chosen), cancelled)?;
        for _ in 0..race {
            d.pass(mv, cancelled)?;
        }
        if kept.as_ref().is_none_or(|k| d.best.len < k.best.len) {
            kept = Some(d);
        }
    }
    let mut kept = kept.expect("one way at least");
    for _ in race..passes {
        kept.pass(mv, cancelled)?;
    }
    Ok((kept.best, kept.floor))
}

/// Forward–backward passes from a first pass, the parents fixed or chosen: the shortest
/// timeline so far and the last, and how many passes in a row have not shortened it.
struct Descent {
    best: Timeline,
    current: Timeline,
    stale: usize,
    patience: usize,
    floor: u32,
}

impl Descent {
    /// The first pass by `first`, the parents fixed or `chosen`.
    fn new(
        mv: &Moves<'_>,
        first: &[u32],
        chosen: bool,
        floor: u32,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Descent, SynthError> {
        let mut par = Parents::of(mv.t);
        let cap = if chosen { u32::MAX } else { 0 };
        let (start, len) = place(mv, &mut par, false, first, cap, cancelled)?;
        let best = Timeline { start, len, par, chosen };
        tracing::trace!(target: "ccsynth::timing", chosen, first_len = best.len, floor, "trees: first pass");
        // Passes that may not shorten it before the search stops: one where a pass costs a
        // tenth of a second or more.
        let patience = if mv.count() > PATIENT_BELOW { 1 } else { 2 };
        Ok(Descent { current: best.clone(), best, stale: 0, patience, floor })
    }

    /// Whether the passes stop: at the floor, or out of patience.
    fn done(&self) -> bool {
        self.best.len <= self.floor || self.stale >= self.patience
    }

    /// One more forward–backward pass, unless `done`.
    fn pass(&mut self, mv: &Moves<'_>, cancelled: &dyn Fn() -> bool) -> Result<(), SynthError> {
        if self.done() {
            return Ok(());
        }
        let next = forward_backward(mv, &self.current, self.current.cap(self.best.len), cancelled)?;
        tracing::trace!(target: "ccsynth::timing", chosen = next.chosen, len = next.len, "trees: pass");
        // A pass that does not shorten the timeline may still reorder it for the next.
        if next.len < self.best.len {
            self.best = next.clone();
            self.stale = 0;
        } else {
            self.stale += 1;
        }
        self.current = next;
        Ok(())
    }
}

/// Restarts the forward–backward passes `rounds` times from `start` with noise in the
/// priorities: each restart's keys are the last kept timeline's, each plus a random fraction
/// of up to `NOISE_TIMESTEPS`, then `passes` plain passes. A restart within a timestep of the
/// last kept one is kept to restart from (a walk, not a descent); the shortest is returned.
/// Forward–backward alone stops in a local optimum (with the parents fixed, on torus:8x8x8 less
/// a link at 64 MiB, 171 trees of three chunks took 62 timesteps against a busiest link of 57;
/// six restarts 60, twenty 59). `rebalancing` (where the parents are chosen): every other
/// restart's noisy placements, from the first, move a move off its own parent's link wherever
/// that link carries more than a shorter timeline allows (`place`'s rebalancing), even to a
/// later timestep.
pub(super) fn perturbed(
    mv: &Moves<'_>,
    start: Timeline,
    rounds: usize,
    passes: usize,
    seed: u64,
    rebalancing: bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<Timeline, SynthError> {
    let floor = mv.floor(!start.chosen);
    let mut rng = crate::rng::Rng::new(seed);
    let noise = 8 * NOISE_TIMESTEPS + 1;
    let mut best = start.clone();
    let mut cur = start;
    for round in 0..rounds {
        if best.len <= floor {
            break;
        }
        let rebalance = rebalancing && cur.chosen && round % 2 == 0;
        let mut par = cur.par.clone();
        let noisy = |key: Vec<u32>, rng: &mut crate::rng::Rng| -> Vec<u32> {
            key.into_iter().map(|k| k * 8 + rng.below(noise) as u32).collect()
        };
        let key = noisy(mv.mirrored(&cur.start, &par, cur.len), &mut rng);
        let cap = cur.cap(best.len);
        // Noisy keys need not follow the DAG: the heap's order.
        let (back, back_len) = place_noisy(mv, &mut par, true, &key, cap, rebalance, cancelled)?;
        let key = noisy(mv.mirrored(&back, &par, back_len), &mut rng);
        let (fwd, fwd_len) = place_noisy(mv, &mut par, false, &key, cap, rebalance, cancelled)?;
        let mut next = Timeline { start: fwd, len: fwd_len, par, chosen: cur.chosen };
        for _ in 0..passes {
            let again = forward_backward(mv, &next, cap, cancelled)?;
            if again.len <= next.len {
                next = again;
            }
        }
        if next.len < best.len {
            best = next.clone();
        }
        if next.len <= cur.len + 1 {
            cur = next;
        }
    }
    Ok(best)
}
