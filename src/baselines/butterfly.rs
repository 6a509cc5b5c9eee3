//! Butterfly algorithms over a power-of-two core of ranks, in one engine:
//! - recursive doubling (latency-optimal all-reduce: the whole vector each step) and
//!   Rabenseifner (recursive-halving reduce-scatter, recursive-doubling all-gather) — Thakur,
//!   Rabenseifner & Gropp 2005; torus-aware dimension order as in the Swing paper 2.3.2–2.3.3;
//! - BDE all-gather / reduce-scatter (lecture notes 1.8), the same halving/doubling exchange;
//! - Swing (De Sensi et al., NSDI'24): peers at ±ρ(s) = Σ(−2)^i, dimension ω(s) = s mod D with
//!   relative step σ(s), latency-optimal (whole vector) and bandwidth-optimal (reduce-scatter
//!   then all-gather), multi-port with D plain and D mirrored collectives on 2D ports;
//! - bucket (per-dimension ring reduce-scatters then all-gathers, 2D concurrent buckets).
//!
//! In a reduce-scatter step s, rank r sends peer q the blocks of every rank q reaches through
//! steps after s (including q); the all-gather replays the steps backwards with the same sets.
//! Bandwidth-optimal Swing serves any p with its own schemes (§3.2, Appendix A.2): for even p
//! (and tori with even sides) it runs ⌈log₂⌉ steps per dimension and each rank sends every
//! block once, at the last step whose peer reaches it; for odd p it runs on p − 1 ranks while
//! the last rank trades blocks directly with ⌈m/2⌉ of the m ranks left at each step. Other
//! non-power-of-two groups are folded: the extra ranks p' + j first hand everything to rank j
//! and get the result back at the end. Where the group is a whole mesh or torus with
//! power-of-two sides (or a torus with even sides, for Swing), peers follow coordinates and
//! messages the grid lines; elsewhere ranks are a logical line and messages take shortest
//! paths.

use super::{Algorithm, BaselineError, BaselineInfo, Ctx, Out};
use crate::collective::CollectiveKind as K;
use crate::schedule::{ChunkList, Op, Transfers};

#[derive(Clone, Copy, PartialEq)]
enum Family {
    RecursiveDoubling,
    Halving,
    Swing,
}

pub(super) const RECURSIVE_DOUBLING: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "recursive-doubling",
        collectives: vec![K::AllReduce],
        topologies: "any; torus-aware on tori with power-of-two sides",
        source: "Thakur, Rabenseifner & Gropp 2005; Swing paper 2.3.2",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| latency_optimal(ctx, Family::RecursiveDoubling, 1),
};

pub(super) const RABENSEIFNER: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "rabenseifner",
        collectives: vec![K::AllReduce, K::ReduceScatter, K::AllGather],
        topologies: "any; torus-aware on tori with power-of-two sides",
        source: "Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005; Swing paper 2.3.3",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| bandwidth_optimal(ctx, Family::Halving, 1),
};

pub(super) const BDE: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "bde",
        collectives: vec![K::AllGather, K::ReduceScatter],
        topologies: "any",
        source: "lecture notes 1.8 (bidirectional exchange)",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| bandwidth_optimal(ctx, Family::Halving, 1),
};

pub(super) const SWING_LATENCY: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "swing-latency",
        collectives: vec![K::AllReduce],
        topologies: "any; multi-port on tori with even sides; other p folded to a power of two",
        source: "De Sensi et al., Swing, NSDI 2024, §3 (latency-optimal)",
    },
    chunking: swing_chunks,
    build: |ctx| {
        let parts = ports(ctx);
        latency_optimal(ctx, Family::Swing, parts)
    },
};

pub(super) const SWING_BANDWIDTH: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "swing-bandwidth",
        collectives: vec![K::AllReduce, K::ReduceScatter, K::AllGather],
        topologies: "any; multi-port on tori with even sides; any p without folding (§3.2)",
        source: "De Sensi et al., Swing, NSDI 2024, §3–4 (bandwidth-optimal)",
    },
    chunking: swing_chunks,
    build: |ctx| {
        let parts = ports(ctx);
        bandwidth_optimal(ctx, Family::Swing, parts)
    },
};

pub(super) const BUCKET: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "bucket",
        collectives: vec![K::AllReduce, K::ReduceScatter, K::AllGather],
        topologies: "meshes and tori (whole grid as the group)",
        source: "Swing paper 2.3.4 (bucket / per-dimension rings, 2D concurrent buckets)",
    },
    chunking: |t, s| {
        let d = t.infer_grid().map(|g| g.dims.len()).unwrap_or(1) as u32;
        s.chunks().max(1).next_multiple_of(2 * d)
    },
    build: bucket,
};

fn swing_chunks(t: &crate::topology::Topology, s: &crate::collective::CollectiveSpec) -> u32 {
    let d = t.infer_grid().filter(swing_grid).map(|g| g.dims.len()).unwrap_or(1);
    s.chunks().max(1).next_multiple_of(2 * d as u32)
}

/// Tori on which Swing follows coordinates: every side even (a power of two, or served by the
/// even non-power-of-two scheme).
pub(super) fn swing_grid(g: &crate::topology::Grid) -> bool {
    g.torus && g.dims.iter().all(|d| d.is_multiple_of(2))
}

/// Parts run concurrently: 2D on a torus with even sides (D plain, D mirrored), else 2 (plain
/// and mirrored over the logical line).
fn ports(ctx: &Ctx) -> usize {
    parts_on(ctx.grid.as_ref())
}

/// `ports` for a group that is the whole `grid`, if any (the estimates' view).
pub(super) fn parts_on(grid: Option<&crate::topology::Grid>) -> usize {
    match grid {
        Some(g) if swing_grid(g) => 2 * g.dims.len(),
        _ => 2,
    }
}

/// Links each reduce-scatter step's messages cross on a torus with power-of-two sides, in the
/// order `pattern` takes the steps of a part starting at dimension `start`: Swing's |ρ(σ)|, or
/// recursive halving's shorter way round to the partner 2^bit away.
pub(super) fn grid_hops(g: &crate::topology::Grid, swing: bool, start: usize) -> Vec<u64> {
    let dims = g.dims.len();
    let logs: Vec<u32> = g.dims.iter().map(|&d| ceil_log2(d)).collect();
    let total: u32 = logs.iter().sum();
    let mut used = vec![0u32; dims];
    let mut out = Vec::with_capacity(total as usize);
    let mut j = start % dims;
    while out.len() < total as usize {
        if used[j] < logs[j] {
            let sigma = used[j];
            used[j] += 1;
            let d = g.dims[j] as i64;
            let h = if swing {
                rho(sigma).abs()
            } else {
                let fwd = (1i64 << (logs[j] - 1 - sigma)).rem_euclid(d);
                fwd.min(d - fwd)
            };
            out.push(h as u64);
        }
        j = (j + 1) % dims;
    }
    out
}

fn ceil_log2(n: usize) -> u32 {
    n.next_power_of_two().trailing_zeros()
}

/// ρ(s) = Σ_{i=0..s} (−2)^i.
pub fn rho(s: u32) -> i64 {
    (1 - (-2i64).pow(s + 1)) / 3
}

/// Swing's peer of rank r at step s on a 1D torus of p nodes (paper Eq. 2).
pub fn swing_peer(r: usize, s: u32, p: usize) -> usize {
    let d = rho(s);
    let x = if r.is_multiple_of(2) { r as i64 + d } else { r as i64 - d };
    x.rem_euclid(p as i64) as usize
}

/// One butterfly step: each core rank's peer and the route (grid dimension and signed
/// distance, or a logical-line route).
struct Step {
    peer: Vec<usize>,
    along: Vec<Option<(usize, i64)>>,
}

/// The pattern over core ranks 0..q: steps in reduce-scatter order.
struct Pattern {
    q: usize,
    steps: Vec<Step>,
}

fn pattern(ctx: &Ctx, fam: Family, part: usize, parts: usize, q: usize, on_grid: bool) -> Pattern {
    let mut steps = Vec::new();
    let mirrored = part >= parts / 2 && parts > 1;
    if on_grid {
        let g = ctx.grid.as_ref().expect("on_grid");
        let dims = g.dims.len();
        // Swing takes ⌈log₂ d⌉ steps on a side of d (even d: §3.2); the others need 2^k sides.
        let logs: Vec<u32> = g.dims.iter().map(|&d| ceil_log2(d)).collect();
        let start = part % dims;
        let mut used = vec![0u32; dims];
        // Round-robin over the dimensions that still have steps, starting at `start`.
        let total: u32 = logs.iter().sum();
        let mut j = start;
        while steps.len() < total as usize {
            if used[j] < logs[j] {
                let sigma = used[j];
                used[j] += 1;
                let mut peer = vec![0; q];
                let mut along = vec![None; q];
                for r in 0..q {
                    let c = g.coords(r);
                    let d = g.dims[j];
                    let a = c[j];
                    let delta: i64 = match fam {
                        Family::Swing => {
                            // Eq. 2 per dimension: even coordinates move by +ρ(σ), odd by −ρ(σ);
                            // ρ alternates in sign, so peers swing left and right.
                            let sign = if a.is_multiple_of(2) != mirrored { 1 } else { -1 };
                            sign * rho(sigma)
                        }
                        Family::RecursiveDoubling | Family::Halving => {
                            let bit = if fam == Family::Halving { logs[j] - 1 - sigma } else { sigma };
                            let b = a ^ (1 << bit);
                            let fwd = (b as i64 - a as i64).rem_euclid(d as i64);
                            let back = fwd - d as i64;
                            if !g.torus {
                                b as i64 - a as i64
                            } else if fwd <= -back {
                                fwd
                            } else {
                                back
                            }
                        }
                    };
                    let mut cc = c.clone();
                    cc[j] = (a as i64 + delta).rem_euclid(d as i64) as usize;
                    peer[r] = g.node(&cc);
                    along[r] = Some((j, delta));
                }
                steps.push(Step { peer, along });
            }
            j = (j + 1) % dims;
        }
    } else {
        let s_count = ceil_log2(q);
        for s in 0..s_count {
            let peer: Vec<usize> = (0..q)
                .map(|r| match fam {
                    Family::Swing => {
                        let x = swing_peer(r, s, q);
                        if mirrored { (2 * r + q - x) % q } else { x }
                    }
                    Family::RecursiveDoubling => r ^ (1 << s),
                    Family::Halving => r ^ (q >> (s + 1)),
                })
                .collect();
            steps.push(Step { peer, along: vec![None; q] });
        }
    }
    Pattern { q, steps }
}

/// Blocks (core ranks) that core `c` is responsible for after step `s` of the reduce-scatter:
/// itself and everything it reaches through later steps (with repeats when q is not a power
/// of two: Appendix A.2).
fn reach(p: &Pattern, c: usize, s: usize, out: &mut Vec<usize>) {
    out.push(c);
    for h in s + 1..p.steps.len() {
        reach(p, p.steps[h].peer[c], h, out);
    }
}

/// `sends[s][c]`: the blocks core c sends its peer in reduce-scatter step s. A block goes to
/// the peer of the *last* step whose peer reaches it (Swing §3.2: "if it would send a block
/// twice, send that only in the last step"), so each rank sends each block once, and a block
/// reaches a rank only at a step before the one in which that rank passes it on: the flows of
/// a block form a tree into its owner. None when the steps are not pairings or some rank
/// never reaches some block (then the caller folds instead).
fn send_sets(p: &Pattern) -> Option<Vec<Vec<Vec<usize>>>> {
    let (q, steps) = (p.q, p.steps.len());
    for st in &p.steps {
        if (0..q).any(|c| st.peer[c] >= q || st.peer[c] == c || st.peer[st.peer[c]] != c) {
            return None;
        }
    }
    let mut sends: Vec<Vec<Vec<usize>>> = vec![vec![Vec::new(); q]; steps];
    let mut last = vec![usize::MAX; q];
    let mut set = Vec::new();
    #[allow(clippy::needless_range_loop)] // c indexes the inner level of `sends`
    for c in 0..q {
        last.fill(usize::MAX);
        for (s, st) in p.steps.iter().enumerate() {
            set.clear();
            reach(p, st.peer[c], s, &mut set);
            for &b in &set {
                last[b] = s;
            }
        }
        for (b, &s) in last.iter().enumerate() {
            if b == c {
                continue;
            }
            if s == usize::MAX {
                return None;
            }
            sends[s][c].push(b);
        }
    }
    Some(sends)
}

struct Setup {
    /// Core size and whether peers follow grid coordinates.
    q: usize,
    on_grid: bool,
    /// Rank q (= p − 1, p odd) trades blocks directly with the core (Swing §3.2), instead of
    /// being folded.
    lone: bool,
}

fn setup(ctx: &Ctx) -> Setup {
    let p = ctx.p();
    match &ctx.grid {
        Some(g) if g.dims.iter().all(|d| d.is_power_of_two()) => Setup { q: p, on_grid: true, lone: false },
        _ => fold_setup(p),
    }
}

fn fold_setup(p: usize) -> Setup {
    Setup { q: 1 << (usize::BITS - 1 - p.leading_zeros()), on_grid: false, lone: false }
}

/// Bandwidth-optimal Swing's shape: the grid when its sides are even, else the logical line
/// of p ranks (p even) or of p − 1 ranks and a lone one (p odd).
fn swing_setup(ctx: &Ctx) -> Setup {
    let p = ctx.p();
    match &ctx.grid {
        Some(g) if g.dims.iter().all(|d| d.is_power_of_two()) || swing_grid(g) => {
            Setup { q: p, on_grid: true, lone: false }
        }
        _ if p.is_multiple_of(2) => Setup { q: p, on_grid: false, lone: false },
        _ if p >= 3 => Setup { q: p - 1, on_grid: false, lone: true },
        _ => fold_setup(p),
    }
}

/// The lone rank's partners in step s of its reduce-scatter: of the m core ranks not yet
/// served, the first ⌈m/2⌉ (7 ranks: {0, 1, 2}, {3, 4}, {5}, as in the paper's Fig. 4).
fn lone_groups(q: usize, steps: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::with_capacity(steps);
    let mut next = 0;
    for s in 0..steps {
        let m = q - next;
        let take = if s + 1 == steps { m } else { m.div_ceil(2) };
        out.push(next..next + take);
        next += take;
    }
    out
}

/// Part `part` of `parts` of rank `r`'s block (a range: bucket on torus:64x64 takes 260 M of
/// them, one per block of each message).
fn sub_block(ctx: &Ctx, r: usize, part: usize, parts: usize) -> std::ops::Range<u32> {
    let b = ctx.block(r);
    let per = b.len() as u32 / parts as u32;
    b.start + part as u32 * per..b.start + (part as u32 + 1) * per
}

#[allow(clippy::too_many_arguments)]
fn send_step(
    out: &mut Out,
    ctx: &Ctx,
    step: u32,
    pat: &Pattern,
    s: usize,
    c: usize,
    chunks: impl Into<ChunkList>,
    op: Op,
) {
    let to = pat.steps[s].peer[c];
    match pat.steps[s].along[c] {
        Some((dim, delta)) => {
            let (v, path) = ctx.route_along(ctx.ranks[c], dim, delta);
            debug_assert_eq!(v, ctx.ranks[to]);
            out.push(step, ctx.ranks[c], ctx.ranks[to], chunks, op, path);
        }
        None => out.send(step, c, to, chunks, op),
    }
}

fn bandwidth_optimal(ctx: &Ctx, fam: Family, parts: usize) -> Result<Transfers, BaselineError> {
    let p = ctx.p();
    let kind = ctx.c.spec.kind;
    let mut out = Out::new(ctx);
    for part in 0..parts {
        let first = if fam == Family::Swing { swing_setup(ctx) } else { setup(ctx) };
        let built = pattern(ctx, fam, part, parts, first.q, first.on_grid);
        let (Setup { q, lone, .. }, pat, sends) = match send_sets(&built) {
            Some(sends) => (first, built, sends),
            None => {
                let f = fold_setup(p);
                let pat = pattern(ctx, fam, part, parts, f.q, f.on_grid);
                let sends = send_sets(&pat).expect("power-of-two butterflies pair every rank with every block");
                (f, pat, sends)
            }
        };
        let extra = |c: usize| (!lone && c + q < p).then_some(c + q);
        let fold = q < p && !lone;
        let body = u32::from(fold);
        let s_count = pat.steps.len();
        let groups = if lone { lone_groups(q, s_count) } else { Vec::new() };
        let blocks_of = |cores: &[usize]| -> Vec<u32> {
            let mut v = Vec::new();
            for &c in cores {
                v.extend(sub_block(ctx, c, part, parts));
                if let Some(e) = extra(c) {
                    v.extend(sub_block(ctx, e, part, parts));
                }
            }
            v
        };
        let everything: ChunkList = (0..p).flat_map(|r| sub_block(ctx, r, part, parts)).collect();
        let mut step = 0u32;
        let rs = matches!(kind, K::AllReduce | K::ReduceScatter);
        let ag = matches!(kind, K::AllReduce | K::AllGather);
        if fold {
            for c in 0..q {
                if let Some(e) = extra(c) {
                    let what = if rs { everything.clone() } else { sub_block(ctx, e, part, parts).collect() };
                    out.send(0, e, c, what, if rs { Op::Reduce } else { Op::Copy });
                }
            }
            step = body;
        }
        if rs {
            for s in 0..s_count {
                for (c, set) in sends[s].iter().enumerate() {
                    send_step(&mut out, ctx, step, &pat, s, c, blocks_of(set), Op::Reduce);
                }
                if lone {
                    for b in groups[s].clone() {
                        out.send(step, q, b, sub_block(ctx, b, part, parts).collect::<ChunkList>(), Op::Reduce);
                        out.send(step, b, q, sub_block(ctx, q, part, parts).collect::<ChunkList>(), Op::Reduce);
                    }
                }
                step += 1;
            }
        }
        if ag {
            // The reduce-scatter backwards: what c's peer sent c, c now sends back.
            for s in (0..s_count).rev() {
                for c in 0..pat.q {
                    let peer = pat.steps[s].peer[c];
                    send_step(&mut out, ctx, step, &pat, s, c, blocks_of(&sends[s][peer]), Op::Copy);
                }
                if lone {
                    for b in groups[s].clone() {
                        out.send(step, q, b, sub_block(ctx, q, part, parts).collect::<ChunkList>(), Op::Copy);
                        out.send(step, b, q, sub_block(ctx, b, part, parts).collect::<ChunkList>(), Op::Copy);
                    }
                }
                step += 1;
            }
        }
        if fold {
            for c in 0..q {
                if let Some(e) = extra(c) {
                    let what = if ag { everything.clone() } else { sub_block(ctx, e, part, parts).collect() };
                    out.send(step, c, e, what, Op::Copy);
                }
            }
        }
    }
    Ok(out.transfers)
}

fn latency_optimal(ctx: &Ctx, fam: Family, parts: usize) -> Result<Transfers, BaselineError> {
    let p = ctx.p();
    let Setup { q, on_grid, .. } = setup(ctx);
    let mut out = Out::new(ctx);
    let extra = |c: usize| (c + q < p).then_some(c + q);
    for part in 0..parts {
        // Latency-optimal: doubling distances for recursive doubling, Swing's own order.
        let pat = pattern(ctx, fam, part, parts, q, on_grid);
        let everything: ChunkList = (0..p).flat_map(|r| sub_block(ctx, r, part, parts)).collect();
        let mut step = 0u32;
        if q < p {
            for c in 0..q {
                if let Some(e) = extra(c) {
                    out.send(0, e, c, everything.clone(), Op::Reduce);
                }
            }
            step = 1;
        }
        for s in 0..pat.steps.len() {
            for c in 0..pat.q {
                send_step(&mut out, ctx, step, &pat, s, c, everything.clone(), Op::Reduce);
            }
            step += 1;
        }
        if q < p {
            for c in 0..q {
                if let Some(e) = extra(c) {
                    out.send(step, c, e, everything.clone(), Op::Copy);
                }
            }
        }
    }
    Ok(out.transfers)
}

fn bucket(ctx: &Ctx) -> Result<Transfers, BaselineError> {
    let g = ctx.grid.clone().ok_or(BaselineError::Unsupported {
        algorithm: "bucket",
        what: "topologies that are not a whole mesh or torus".into(),
    })?;
    let kind = ctx.c.spec.kind;
    let dims = g.dims.len();
    let parts = 2 * dims;
    let p = ctx.p();
    let mut out = Out::new(ctx);
    let stride: Vec<usize> = (0..dims).map(|i| g.dims[..i].iter().product()).collect();
    let rs = matches!(kind, K::AllReduce | K::ReduceScatter);
    let ag = matches!(kind, K::AllReduce | K::AllGather);
    for part in 0..parts {
        let dir: i64 = if part < dims { 1 } else { -1 };
        let order: Vec<usize> = (0..dims).map(|i| (part + i) % dims).collect();
        let chunks_of =
            |blocks: &[usize]| -> Vec<u32> { blocks.iter().flat_map(|&b| sub_block(ctx, b, part, parts)).collect() };
        // Blocks node v is responsible for once dims `done` are reduced: those agreeing with v there.
        // Blocks agreeing with node v on the reduced dimensions `done` and with coordinate
        // `gcoord` on dimension j: enumerated directly over the free dimensions.
        let group = |v: usize, done: &[usize], j: usize, gcoord: usize| -> Vec<usize> {
            let mut c = g.coords(v);
            c[j] = gcoord;
            let free: Vec<usize> = (0..dims).filter(|i| *i != j && !done.contains(i)).collect();
            for &i in &free {
                c[i] = 0;
            }
            let mut out = Vec::new();
            loop {
                out.push(g.node(&c));
                let mut k = 0;
                while k < free.len() {
                    let i = free[k];
                    c[i] += 1;
                    if c[i] < g.dims[i] {
                        break;
                    }
                    c[i] = 0;
                    k += 1;
                }
                if k == free.len() {
                    return out;
                }
            }
        };
        let mut step = 0u32;
        // A step's messages carry one chunk list per group (the group's first block names it):
        // built once and shared (on torus:64x64, 16,384 messages a step, 64 or 4,096 lists).
        let mut lists: Vec<Option<ChunkList>> = vec![None; p];
        let mut line_phase = |out: &mut Out, step: &mut u32, j: usize, done: &[usize], reduce: bool| {
            let d = g.dims[j];
            for s in 0..d - 1 {
                lists.iter_mut().for_each(|l| *l = None);
                for v in 0..p {
                    let a = g.coord(v, j);
                    // Position along the ring in direction `dir`.
                    let pos = if dir > 0 { a } else { (d - a) % d };
                    let gpos = if reduce { (pos + 2 * d - s - 1) % d } else { (pos + d - s) % d };
                    let gcoord = if dir > 0 { gpos } else { (d - gpos) % d };
                    // The group's first block: v with coordinate gcoord on j, 0 on the free dims.
                    let first = (0..dims)
                        .filter(|&i| i == j || !done.contains(&i))
                        .fold(v, |r, i| r - g.coord(v, i) * stride[i])
                        + gcoord * stride[j];
                    let chunks = lists[first]
                        .get_or_insert_with(|| {
                            let blocks = group(v, done, j, gcoord);
                            debug_assert_eq!(blocks[0], first);
                            chunks_of(&blocks).into()
                        })
                        .clone();
                    let (w, path) = ctx.route_along(v, j, dir);
                    out.push(*step, v, w, chunks, if reduce { Op::Reduce } else { Op::Copy }, path);
                }
                *step += 1;
            }
        };
        if rs {
            for i in 0..dims {
                line_phase(&mut out, &mut step, order[i], &order[..i], true);
            }
        }
        if ag {
            for i in (0..dims).rev() {
                line_phase(&mut out, &mut step, order[i], &order[..i], false);
            }
        }
    }
    Ok(out.transfers)
}
