//! Bucket (Swing paper 2.3.4): per-dimension ring reduce-scatters, then all-gathers in the
//! reverse order, 2D concurrent buckets (each part starting at another dimension, either way
//! round); a whole mesh or torus only (the engine reroutes it onto one less a few links:
//! `engine::rerouted`).

use super::butterfly::sub_block;
use super::{Algorithm, BaselineError, BaselineInfo, Ctx, Out};
use crate::collective::CollectiveKind as K;
use crate::schedule::{ChunkList, Op, Transfers};
use crate::topology::Grid;

pub(super) const BUCKET: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "bucket",
        collectives: vec![K::AllReduce, K::ReduceScatter, K::AllGather],
        topologies: "meshes and tori (whole grid as the group), also less up to 64 links (built whole, rerouted)",
        source: "Swing paper 2.3.4 (bucket / per-dimension rings, 2D concurrent buckets)",
    },
    chunking: |t, s| {
        let d = t.infer_grid().map(|g| g.dims.len()).unwrap_or(1) as u32;
        s.chunks().max(1).next_multiple_of(2 * d)
    },
    build: bucket,
};

fn bucket(ctx: &Ctx) -> Result<Transfers, BaselineError> {
    let g = ctx.grid.clone().ok_or(BaselineError::Unsupported {
        algorithm: "bucket",
        what: "topologies that are not a whole mesh or torus of 4 NPUs or more".into(),
    })?;
    let kind = ctx.c.spec.kind;
    let dims = g.dims.len();
    let parts = 2 * dims;
    let p = ctx.p();
    let mut out = Out::new(ctx);
    let stride = strides(&g);
    for part in 0..parts {
        let dir: i64 = if part < dims { 1 } else { -1 };
        let order: Vec<usize> = (0..dims).map(|i| (part + i) % dims).collect();
        let chunks_of =
            |blocks: &[usize]| -> Vec<u32> { blocks.iter().flat_map(|&b| sub_block(ctx, b, part, parts)).collect() };
        let mut step: u32;
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
                    let first = first_of(&g, &stride, v, done, j, gcoord);
                    let chunks = lists[first]
                        .get_or_insert_with(|| {
                            let blocks = group(&g, v, done, j, gcoord);
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
        // The t-th phase of every part starts at the same step, `t` times the longest line
        // apart. A link serves its messages in step order, and on a torus of unequal sides
        // one part's short messages (a dimension it reduces late) share links with another's
        // long ones (the same dimension, reduced first): numbered side by side, each short
        // message waited for the long one of the step before it, and the part's last phase
        // started only when the other's long phase was half done (bucket on torus:16x32 ran
        // 1.50x its bound). Aligned, the short phases of the all-gather precede the long
        // ones. On equal sides nothing moves.
        let line = g.dims.iter().max().map_or(0, |&d| d - 1) as u32;
        for (start, j, done, reduce) in phases(kind, &order, line) {
            step = start;
            line_phase(&mut out, &mut step, j, &order[..done], reduce);
        }
    }
    Ok(out.transfers)
}

pub(super) const BUCKET_BIDIR: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "bucket-bidir",
        collectives: vec![K::AllReduce, K::ReduceScatter, K::AllGather],
        topologies: "tori of sides 3 or more and meshes (whole grid as the group), also less up to 64 links (built whole, rerouted)",
        source: "bucket (Swing paper 2.3.4) with each ring run as two chains, one each way round (half the steps); on a mesh each line as two chains toward the owner",
    },
    chunking: BUCKET.chunking,
    build: bucket_bidir,
};

/// Bucket's parts in pairs: the two that take the dimensions in one order, either way round,
/// become one part whose rings are chains toward a block's owner from both sides (a reduction
/// from the nodes below it on the + links, from those above on the − links; the all-gather
/// the same chains backwards). A ring of n takes ⌈(n−1)/2⌉ steps instead of n−1, each message
/// carrying both halves, so the latency term halves and the links carry what they did: the
/// pair's two halves take chains of ⌈(n−1)/2⌉ and ⌊(n−1)/2⌋ from below, so on a side of even
/// n every link carries n−1 halves, not n (the longer chain for both halves: +1/(n−1)).
fn bucket_bidir(ctx: &Ctx) -> Result<Transfers, BaselineError> {
    // On a side of 2 both ways round are one link: a pair's halves would queue there, the
    // later one holding up every message that carries both (bucket on torus:2x4 runs its two
    // parts apart: 425 µs at 64 MiB against 465).
    let g = ctx.grid.clone().filter(chains_apply).ok_or(BaselineError::Unsupported {
        algorithm: "bucket-bidir",
        what: "topologies that are not a whole mesh, or a whole torus of sides 3 or more, of 4 NPUs or more".into(),
    })?;
    if on_a_mesh(&g) {
        return chains_on_mesh(ctx, g);
    }
    let kind = ctx.c.spec.kind;
    let dims = g.dims.len();
    let p = ctx.p();
    let stride = strides(&g);
    let mut out = Out::new(ctx);
    // As bucket's: the t-th phase of every part starts at the same step, t longest chains apart.
    let line = g.dims.iter().map(|&d| d / 2).max().unwrap_or(0) as u32;
    for part in 0..dims {
        let order: Vec<usize> = (0..dims).map(|i| (part + i) % dims).collect();
        let halves = [part, part + dims];
        // A step's message on one link carries the same chunks as every other one whose half
        // groups match: built once a step per (direction, the first half's group).
        let mut lists: [Vec<Option<ChunkList>>; 2] = [vec![None; p], vec![None; p]];
        let mut phase = |out: &mut Out, step0: u32, j: usize, done: &[usize], reduce: bool| {
            let n = g.dims[j];
            // Each half's chain from below (toward the owner on the + links); the rest come
            // from above.
            let below = [n / 2, (n - 1) / 2];
            for s in 0..n / 2 {
                lists.iter_mut().flatten().for_each(|l| *l = None);
                for v in 0..p {
                    let a = g.coord(v, j);
                    for (di, dir) in [1i64, -1].into_iter().enumerate() {
                        // The group coordinate each half's message at step s carries.
                        let at = |h: usize| -> Option<usize> {
                            let r = n - 1 - h;
                            match (reduce, dir > 0) {
                                (true, true) => (s < h).then(|| (a + h - s) % n),
                                (true, false) => (s < r).then(|| (a + n - r + s) % n),
                                (false, true) => (s < r).then(|| (a + n - s) % n),
                                (false, false) => (s < h).then(|| (a + s) % n),
                            }
                        };
                        let sends = [at(below[0]), at(below[1])];
                        let Some(key) = sends.iter().flatten().next() else { continue };
                        let first = first_of(&g, &stride, v, done, j, *key);
                        let chunks = lists[di][first]
                            .get_or_insert_with(|| {
                                let sent = (0..2).filter_map(|x| sends[x].map(|gc| (halves[x], gc)));
                                halves_message(ctx, &g, v, done, j, sent)
                            })
                            .clone();
                        send(ctx, &mut *out, step0 + s as u32, v, j, dir, chunks, reduce);
                    }
                }
            }
        };
        for (start, j, done, reduce) in phases(kind, &order, line) {
            phase(&mut out, start, j, &order[..done], reduce);
        }
    }
    Ok(out.transfers)
}

/// A bucket-bidir message's chunks: for each (half, group coordinate) sent, the group's blocks'
/// share of that half. Half A's chunks, then half B's: each an evenly spaced run, so the list
/// is two ranges (sorted together they interleave, and torus:64x64's file tripled).
fn halves_message(
    ctx: &Ctx,
    g: &Grid,
    v: usize,
    done: &[usize],
    j: usize,
    sent: impl Iterator<Item = (usize, usize)>,
) -> ChunkList {
    let parts = 2 * g.dims.len();
    sent.flat_map(|(half, gc)| group(g, v, done, j, gc).into_iter().flat_map(move |b| sub_block(ctx, b, half, parts)))
        .collect::<Vec<u32>>()
        .into()
}

/// v's message along dimension j, one link `dir`.
#[allow(clippy::too_many_arguments)]
fn send(ctx: &Ctx, out: &mut Out, step: u32, v: usize, j: usize, dir: i64, chunks: ChunkList, reduce: bool) {
    let (w, path) = ctx.route_along(v, j, dir);
    out.push(step, v, w, chunks, if reduce { Op::Reduce } else { Op::Copy }, path);
}

/// Where bucket-bidir's chains run: a torus of sides 3 or more, or a mesh.
pub(super) fn chains_apply(g: &Grid) -> bool {
    on_a_mesh(g) || g.dims.iter().all(|&n| n > 2)
}

/// A mesh, or a torus of sides 2 (its wrap-around links are its mesh links: `mesh:2x2x2` is
/// inferred as one).
pub(super) fn on_a_mesh(g: &Grid) -> bool {
    !g.torus || g.dims.iter().all(|&n| n == 2)
}

/// bucket-bidir on a mesh: each line a chain toward a block's owner from both ends, the +
/// links carrying the reduction of the NPUs below it, the − links of those above (the
/// all-gather the same chains backwards). A line of n takes n − 1 steps, each link one message
/// a step: on link a → a+1 the reduce-scatter's step s carries block n − 1 + a − s, the
/// all-gather's block a − s, so every message forwards what arrived the step before. A corner
/// sends its whole share over its d links as a torus NPU does over 2d: bucket on a mesh routes
/// round the missing wrap links (5.6× the bound on mesh:16x16), these chains reach the min-cut
/// bound's bytes (a d-dimensional corner's).
fn chains_on_mesh(ctx: &Ctx, g: Grid) -> Result<Transfers, BaselineError> {
    let kind = ctx.c.spec.kind;
    let dims = g.dims.len();
    let p = ctx.p();
    let stride = strides(&g);
    let mut out = Out::new(ctx);
    let line = g.dims.iter().map(|&d| d - 1).max().unwrap_or(0) as u32;
    for part in 0..dims {
        let order: Vec<usize> = (0..dims).map(|i| (part + i) % dims).collect();
        // Bucket's two parts of this order: one message carries both (the whole block moves
        // along one chain, toward its owner from either end).
        let halves = [part, part + dims];
        let mut lists: [Vec<Option<ChunkList>>; 2] = [vec![None; p], vec![None; p]];
        let mut phase = |out: &mut Out, step0: u32, j: usize, done: &[usize], reduce: bool| {
            let n = g.dims[j];
            for s in 0..n - 1 {
                lists.iter_mut().flatten().for_each(|l| *l = None);
                for v in 0..p {
                    let a = g.coord(v, j);
                    for (di, dir) in [1i64, -1].into_iter().enumerate() {
                        // The block coordinate v's message carries at step s, if any.
                        let (up, last) = (dir > 0, n - 1);
                        let at = match (reduce, up) {
                            (true, true) => (a < last && s >= a).then(|| last + a - s),
                            (true, false) => (a > 0 && s >= last - a).then(|| s - (last - a)),
                            (false, true) => (a < last && s <= a).then(|| a - s),
                            (false, false) => (a > 0 && a + s <= last).then(|| a + s),
                        };
                        let Some(gc) = at else { continue };
                        let first = first_of(&g, &stride, v, done, j, gc);
                        let chunks = lists[di][first]
                            .get_or_insert_with(|| {
                                halves_message(ctx, &g, v, done, j, halves.iter().map(|&half| (half, gc)))
                            })
                            .clone();
                        send(ctx, &mut *out, step0 + s as u32, v, j, dir, chunks, reduce);
                    }
                }
            }
        };
        for (start, j, done, reduce) in phases(kind, &order, line) {
            phase(&mut out, start, j, &order[..done], reduce);
        }
    }
    Ok(out.transfers)
}

/// A part's phases, taking the dimensions in `order`: (first step, dimension, how many of
/// `order` are reduced before it, reduce?), the reduce-scatter's then the all-gather's in the
/// reverse order; the t-th phase of every part starts at t × `line` (bucket's alignment).
fn phases(kind: K, order: &[usize], line: u32) -> Vec<(u32, usize, usize, bool)> {
    let dims = order.len();
    let rs = matches!(kind, K::AllReduce | K::ReduceScatter);
    let mut out = Vec::new();
    if rs {
        out.extend((0..dims).map(|i| (i as u32 * line, order[i], i, true)));
    }
    let ag_from = if rs { dims as u32 * line } else { 0 };
    if matches!(kind, K::AllReduce | K::AllGather) {
        out.extend((0..dims).rev().enumerate().map(|(t, i)| (ag_from + t as u32 * line, order[i], i, false)));
    }
    out
}

/// Each dimension's stride in node ids.
fn strides(g: &Grid) -> Vec<usize> {
    (0..g.dims.len()).map(|i| g.dims[..i].iter().product()).collect()
}

/// The blocks agreeing with node v on the reduced dimensions `done` and with coordinate
/// `gcoord` on dimension j (a step's group: what v is responsible for once `done` are
/// reduced), enumerated directly over the free dimensions, in ascending order.
fn group(g: &Grid, v: usize, done: &[usize], j: usize, gcoord: usize) -> Vec<usize> {
    let mut c = g.coords(v);
    c[j] = gcoord;
    let free: Vec<usize> = (0..g.dims.len()).filter(|i| *i != j && !done.contains(i)).collect();
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
}

/// The group's first block, which names it: v with coordinate gcoord on j, 0 on the free dims.
fn first_of(g: &Grid, stride: &[usize], v: usize, done: &[usize], j: usize, gcoord: usize) -> usize {
    (0..g.dims.len()).filter(|&i| i == j || !done.contains(&i)).fold(v, |r, i| r - g.coord(v, i) * stride[i])
        + gcoord * stride[j]
}
