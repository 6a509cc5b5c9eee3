//! Butterfly algorithms over a power-of-two core of ranks, in one engine:
//! - recursive doubling (latency-optimal all-reduce: the whole vector each step) and
//!   Rabenseifner (recursive-halving reduce-scatter, recursive-doubling all-gather) — Thakur,
//!   Rabenseifner & Gropp 2005; torus-aware dimension order as in the Swing paper 2.3.2–2.3.3;
//! - BDE all-gather / reduce-scatter (lecture notes 1.8), the same halving/doubling exchange;
//! - Swing (De Sensi et al., NSDI'24): peers at ±ρ(s) = Σ(−2)^i, dimension ω(s) = s mod D with
//!   relative step σ(s), latency-optimal (whole vector) and bandwidth-optimal (reduce-scatter
//!   then all-gather), multi-port with D plain and D mirrored collectives on 2D ports.
//!
//! Who pairs with whom at each step, and which blocks go, is `pattern`; bucket (its own module)
//! shares the blocks' parts (`sub_block`).
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
pub(super) use pattern::grid_hops;
pub use pattern::swing_peer;
use pattern::{Pattern, pattern, send_sets};

mod pattern;

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
pub(super) fn sub_block(ctx: &Ctx, r: usize, part: usize, parts: usize) -> std::ops::Range<u32> {
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
