//! Translation schedules on tori (a planner of the greedy): on a torus every NPU sees the
//! same network, so one broadcast pattern from NPU 0, moved by translation to every source,
//! is an all-gather. If the pattern sends at most one chunk in each link direction (+x, −x,
//! +y, …) per step, its translates never meet on a link: link (v, v+d) at step t carries the
//! pattern's one d-move of that step, translated by the one source that puts it there. So the
//! all-gather is conflict-free by construction and each step delivers a chunk on every link.
//!
//! The pattern is grown step by step: a maximum matching between the directions and the
//! (chunk, NPU) pairs a direction can reach next (an informed NPU's neighbour that lacks the
//! chunk), ties broken at random. Each NPU must receive k(N−1) chunks over |D| links, so no
//! schedule that moves one chunk per link per step takes fewer than ⌈k(N−1)/|D|⌉ steps; the
//! matching reaches that bound on every torus tried (8×8 in 16, 6×6 in 9, 4×4×4 in 11,
//! 16×16 in 64, 8×8×8 in 86), where the matcher takes one or more steps more.
//!
//! Reduce-scatter is the pattern reversed on the transposed torus (the same torus), as every
//! reduction phase is (`synth::movement_core`); all-reduce is that, then the all-gather.

use crate::collective::{Collective, CollectiveKind};
use crate::rng::Rng;
use crate::synth::SynthError;
use crate::synth::phase::{GreedyError, Move, Plan, Problem};
use crate::topology::{Grid, Topology};

pub mod rounds;

/// Pattern searches tried (with consecutive seeds) before the best is kept; the first one has
/// reached the bound on every torus tried.
const ATTEMPTS: u64 = 4;

/// A torus whose links are all alike, with its link directions.
#[derive(Clone, Debug)]
pub struct Torus {
    grid: Grid,
    /// (dimension, ±1); a dimension of size 2 has one direction (both neighbours are one).
    dirs: Vec<(usize, i64)>,
    /// `next[v · |D| + d]`: v's neighbour in direction d; `prev` the NPU whose neighbour in
    /// direction d is v.
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Every NPU's coordinates, `dims.len()` per NPU.
    coords: Vec<u32>,
}

impl Torus {
    /// The torus `topo` is, if it is one (a ring and a hypercube are tori) and every link has
    /// the same bandwidth and latency: translation must map each link onto an equal one.
    pub fn of(topo: &Topology) -> Option<Torus> {
        let grid = topo.infer_grid().filter(|g| g.torus)?;
        let first = topo.links().first()?;
        let alike = |l: &crate::topology::Link| {
            l.bandwidth_gb_per_s == first.bandwidth_gb_per_s && l.latency_ns == first.latency_ns
        };
        if !topo.links().iter().all(alike) {
            return None;
        }
        let dirs: Vec<(usize, i64)> = grid
            .dims
            .iter()
            .enumerate()
            .flat_map(|(dim, &d)| if d > 2 { vec![(dim, 1), (dim, -1)] } else { vec![(dim, 1)] })
            .collect();
        let n: usize = grid.dims.iter().product();
        let mut next = vec![0u32; n * dirs.len()];
        let mut prev = vec![0u32; n * dirs.len()];
        for v in 0..n {
            for (d, &(dim, sign)) in dirs.iter().enumerate() {
                let w = grid.path_along(v, dim, sign)[1] as usize;
                next[v * dirs.len() + d] = w as u32;
                prev[w * dirs.len() + d] = v as u32;
            }
        }
        let coords = (0..n).flat_map(|v| grid.coords(v)).map(|c| c as u32).collect();
        Some(Torus { grid, dirs, next, prev, coords })
    }

    pub fn npus(&self) -> usize {
        self.grid.dims.iter().product()
    }

    /// Link directions: the links into (and out of) every NPU.
    pub fn directions(&self) -> usize {
        self.dirs.len()
    }

    /// The neighbour of `v` in direction `dir`.
    fn shift(&self, v: usize, dir: usize) -> usize {
        self.next[v * self.dirs.len() + dir] as usize
    }

    /// The NPU whose neighbour in direction `dir` is `v`.
    fn unshift(&self, v: usize, dir: usize) -> usize {
        self.prev[v * self.dirs.len() + dir] as usize
    }

    /// `a` translated by `b` (coordinates added modulo the sides; dimension 0 fastest).
    fn add(&self, a: usize, b: usize) -> usize {
        let dims = &self.grid.dims;
        let (ca, cb) = (&self.coords[a * dims.len()..][..dims.len()], &self.coords[b * dims.len()..][..dims.len()]);
        let mut v = 0;
        for i in (0..dims.len()).rev() {
            v = v * dims[i] + (ca[i] + cb[i]) as usize % dims[i];
        }
        v
    }

    /// The fewest steps in which any schedule moving one chunk per link per step all-gathers
    /// `k` chunks per NPU: every NPU receives k(N−1) chunks over its links, and the farthest
    /// NPU is the diameter away.
    pub fn bound(&self, k: usize) -> u32 {
        ((k * (self.npus() - 1)).div_ceil(self.dirs.len()) as u32).max(self.diameter())
    }

    /// Hops between the farthest two NPUs.
    pub fn diameter(&self) -> u32 {
        self.grid.dims.iter().map(|d| d / 2).sum::<usize>() as u32
    }
}

/// The busiest link's busy time in the translation schedule of `c` by `pattern` on `torus`
/// (what `sim::link_load_bound_ns` gives once it is built), worked out from the pattern alone:
/// each link in direction d carries one chunk per pattern move in direction d in an
/// all-gather phase, and per move in the opposite direction in a reduction phase (the pattern
/// reversed on the transposed torus), one message per step (a rounds pattern's step may move
/// several chunks a direction). A lower bound on the schedule's time, known
/// before its millions of transfers are built: the portfolio skips a pattern priced above a
/// schedule it already has. `link` is any of the torus's links (they are all alike).
pub fn link_load_ns(torus: &Torus, pattern: &Pattern, c: &Collective, link: &crate::topology::Link) -> f64 {
    let dirs = torus.directions();
    // Chunks and messages per direction (a round's chunks of one direction are one message).
    let mut count = vec![0u64; dirs];
    let mut messages = vec![0u64; dirs];
    let mut last_step = vec![u32::MAX; dirs];
    for m in &pattern.moves {
        let d = m.dir as usize;
        count[d] += 1;
        if last_step[d] != m.step {
            last_step[d] = m.step;
            messages[d] += 1;
        }
    }
    let opposite = |d: usize| {
        let (dim, sign) = torus.dirs[d];
        torus.dirs.iter().position(|&x| x == (dim, -sign)).unwrap_or(d)
    };
    let (reduce, forward) = match c.spec.kind {
        CollectiveKind::AllReduce => (true, true),
        CollectiveKind::ReduceScatter => (true, false),
        _ => (false, true),
    };
    let copy_ns = link.latency_ns + c.chunk_size_bytes / link.bandwidth_gb_per_s;
    let gamma_ns = c.spec.gamma_ns_per_byte.unwrap_or(0.0) * c.chunk_size_bytes;
    let reduce_ns = copy_ns + gamma_ns;
    // A message per chunk: the step pattern's figure as it always was; else α per message.
    let load = |d: usize, per_chunk_ns: f64| match messages[d] == count[d] {
        true => count[d] as f64 * per_chunk_ns,
        false => messages[d] as f64 * link.latency_ns + count[d] as f64 * (per_chunk_ns - link.latency_ns),
    };
    (0..dirs)
        .map(|d| {
            let f = if forward { load(d, copy_ns) } else { 0.0 };
            let r = if reduce { load(opposite(d), reduce_ns) } else { 0.0 };
            f + r
        })
        .fold(0.0, f64::max)
}

/// Whether translation serves `c` on `torus`: all-gather, reduce-scatter or all-reduce over
/// every NPU, one block of chunks per NPU.
pub fn applies(torus: &Torus, c: &Collective) -> bool {
    let p = torus.npus();
    matches!(c.spec.kind, CollectiveKind::AllGather | CollectiveKind::ReduceScatter | CollectiveKind::AllReduce)
        && c.group.len() == p
        && c.num_chunks == p * c.spec.chunks() as usize
}

/// One move of the pattern: at `step`, chunk `block` of NPU 0's block goes from `from` (an
/// NPU relative to the source) in direction `dir`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PatternMove {
    step: u32,
    block: u32,
    from: u32,
    dir: u8,
}

/// NPU 0's broadcast of its `k` chunks to every NPU: at most one move per direction per step
/// (`search`), or per round as many as the round gives every direction (`rounds::search`).
#[derive(Clone, Debug)]
pub struct Pattern {
    pub k: usize,
    pub steps: u32,
    /// The seed of the search that found it.
    pub seed: u64,
    moves: Vec<PatternMove>,
    /// In rounds (`rounds::search`): a direction may carry several chunks a step, which the
    /// translated schedule sends as one message per link.
    pub rounds: bool,
}

/// The pattern with the fewest steps over `ATTEMPTS` searches (stopping at the bound).
pub fn search(torus: &Torus, k: usize, seed: u64, cancelled: &dyn Fn() -> bool) -> Result<Pattern, SynthError> {
    let mut best: Option<Pattern> = None;
    for attempt in 0..ATTEMPTS {
        let p = grow(torus, k, seed.wrapping_add(attempt), cancelled)?;
        let done = p.steps <= torus.bound(k);
        if best.as_ref().is_none_or(|b| p.steps < b.steps) {
            best = Some(p);
        }
        if done {
            break;
        }
    }
    Ok(best.expect("at least one attempt"))
}

/// One search: per step, a maximum matching of directions to reachable (chunk, NPU) pairs
/// (Kuhn's augmenting paths; at most 12 directions), candidates in random order.
fn grow(torus: &Torus, k: usize, seed: u64, cancelled: &dyn Fn() -> bool) -> Result<Pattern, SynthError> {
    let n = torus.npus();
    let dirs = torus.directions();
    let mut rng = Rng::new(seed);
    // Item j·n + v: chunk j of the block at NPU v (relative to the source).
    let mut informed = vec![false; k * n];
    let mut cand: Vec<Vec<u32>> = vec![Vec::new(); dirs];
    let offer = |informed: &[bool], cand: &mut Vec<Vec<u32>>, item: usize| {
        let (j, v) = (item / n, item % n);
        for (d, list) in cand.iter_mut().enumerate() {
            let w = j * n + torus.shift(v, d);
            if !informed[w] {
                list.push(w as u32);
            }
        }
    };
    for j in 0..k {
        informed[j * n] = true;
    }
    for j in 0..k {
        offer(&informed, &mut cand, j * n);
    }
    let mut left = k * (n - 1);
    let mut moves = Vec::with_capacity(left);
    // Which direction took each item this step (u8::MAX: none), and the visit stamps of the
    // augmenting-path search.
    let mut taken_by = vec![u8::MAX; k * n];
    let mut seen = vec![0u32; k * n];
    let mut stamp = 0u32;
    let mut step = 0u32;
    while left > 0 {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        for list in &mut cand {
            list.retain(|&w| !informed[w as usize]);
            rng.shuffle(list);
        }
        let mut owned: Vec<Option<u32>> = vec![None; dirs];
        let mut order: Vec<usize> = (0..dirs).collect();
        rng.shuffle(&mut order);
        for d in order {
            stamp += 1;
            augment(d, &cand, &mut taken_by, &mut owned, &mut seen, stamp);
        }
        let mut arrived = Vec::new();
        for (d, item) in owned.iter().enumerate() {
            let Some(w) = *item else { continue };
            let w = w as usize;
            taken_by[w] = u8::MAX;
            let (j, v) = (w / n, w % n);
            // The sender is v's neighbour against direction d: the NPU whose d-neighbour is v.
            let from = torus.unshift(v, d);
            debug_assert!(informed[j * n + from], "a matched item is reachable in its direction");
            moves.push(PatternMove { step, block: j as u32, from: from as u32, dir: d as u8 });
            arrived.push(w);
        }
        if arrived.is_empty() {
            return Err(GreedyError::Stuck(left).into());
        }
        for &w in &arrived {
            informed[w] = true;
            left -= 1;
        }
        for w in arrived {
            offer(&informed, &mut cand, w);
        }
        step += 1;
    }
    Ok(Pattern { k, steps: step, seed, moves, rounds: false })
}

/// Kuhn's augmenting path from direction `d`: takes a free candidate, or one whose direction
/// can move to another.
fn augment(
    d: usize,
    cand: &[Vec<u32>],
    taken_by: &mut [u8],
    owned: &mut [Option<u32>],
    seen: &mut [u32],
    stamp: u32,
) -> bool {
    for &w in &cand[d] {
        let w = w as usize;
        if seen[w] == stamp {
            continue;
        }
        seen[w] = stamp;
        let holder = taken_by[w];
        if holder == u8::MAX || augment(holder as usize, cand, taken_by, owned, seen, stamp) {
            taken_by[w] = d as u8;
            owned[d] = Some(w as u32);
            return true;
        }
    }
    false
}

/// Plans one phase by translating `pattern`: every chunk's holder in `p.pre` is its source,
/// and the chunks of each source, in id order, are the pattern's blocks. Needs what
/// `applies` promises: every NPU holding `pattern.k` chunks, every NPU requesting every
/// chunk, and a TEN edge of one timestep from every NPU in every direction.
pub fn plan(p: &Problem, torus: &Torus, pattern: &Pattern, cancelled: &dyn Fn() -> bool) -> Result<Plan, SynthError> {
    let ten = p.ten;
    let n = torus.npus();
    let unsupported = || GreedyError::Unsupported("translation needs one block of chunks per NPU, wanted by every NPU");
    if ten.npus != n || p.post.len() != n * p.num_chunks || p.pre.len() != p.num_chunks {
        return Err(unsupported().into());
    }
    // The pre pairs are sorted by (npu, chunk): each NPU's block in id order.
    let mut blocks: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &[v, c] in p.pre {
        blocks[v as usize].push(c);
    }
    if blocks.iter().any(|b| b.len() != pattern.k) {
        return Err(unsupported().into());
    }
    let dirs = torus.directions();
    let mut edge_of = vec![u32::MAX; n * dirs];
    for v in 0..n {
        for d in 0..dirs {
            let w = torus.shift(v, d) as u32;
            let e = ten.out_edges(v).iter().copied().find(|&e| ten.edges[e as usize].dst == w);
            match e {
                Some(e) if ten.edges[e as usize].span == 1 => edge_of[v * dirs + d] = e,
                _ => {
                    return Err(
                        GreedyError::Unsupported("translation needs one-timestep edges in every direction").into()
                    );
                }
            }
        }
    }
    let mut moves = Vec::with_capacity(pattern.moves.len() * n);
    let mut step = u32::MAX;
    for pm in &pattern.moves {
        if pm.step != step {
            step = pm.step;
            if cancelled() {
                return Err(SynthError::Cancelled);
            }
        }
        for (source, block) in blocks.iter().enumerate() {
            let from = torus.add(pm.from as usize, source);
            let edge = edge_of[from * dirs + pm.dir as usize];
            moves.push(Move { step: pm.step, edge, chunk: block[pm.block as usize] });
        }
    }
    Ok(Plan { moves, timesteps: pattern.steps, replacements: 0 })
}
