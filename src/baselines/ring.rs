//! Ring algorithms (Patarasuk and Yuan; the lecture notes §1.7, §1.10; Swing paper §2.3.1):
//! reduce-scatter and all-gather in p−1 steps around a ring, all-reduce as both, broadcast as
//! a binomial scatter then a ring all-gather, reduce as a ring reduce-scatter then a binomial
//! gather. Unidirectional, or bidirectional with every block split over two opposite rings.
//!
//! The ring follows a Hamiltonian cycle where one is found (a return column on 2D meshes, snake
//! order on tori, Warnsdorff's rule elsewhere); hops between NPUs without a link carry the
//! shortest path. On 2D tori that allow it it runs on two edge-disjoint Hamiltonian cycles at once
//! (and the bidirectional ring on both in both directions: all four ports, Swing 2.3.1).

use super::{Algorithm, BaselineInfo, Ctx, Out, mst};
use crate::collective::CollectiveKind as K;
use crate::schedule::{Op, Transfers};

const KINDS: [K; 5] = [K::AllReduce, K::ReduceScatter, K::AllGather, K::Broadcast, K::Reduce];

pub(super) const UNI: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "ring",
        collectives: KINDS.to_vec(),
        topologies: "any (logical ring with routed hops where the topology has no Hamiltonian cycle)",
        source: "Patarasuk & Yuan 2009; lecture notes 1.7, 1.10",
    },
    chunking: |t, s| rooted_chunks(t, s, ring_count(t, false)),
    build: |ctx| build(ctx, false),
};

pub(super) const BIDIR: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "ring-bidir",
        collectives: KINDS.to_vec(),
        topologies: "any",
        source: "two half-size rings in opposite directions (Swing paper 2.3.1)",
    },
    chunking: |t, s| rooted_chunks(t, s, ring_count(t, true)),
    build: |ctx| build(ctx, true),
};

/// A 2D torus with two edge-disjoint Hamiltonian cycles (Swing 2.3.1): `c` × `r` with the
/// smaller size `c` ≥ 3 dividing the larger `r` and gcd(r, c − 1) = 1 (every square torus is
/// one). The ring then runs on both cycles, and the bidirectional ring on both in both
/// directions (all four ports). `x_first`: the size-`c` dimension is the topology's first
/// (fastest-varying node id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct HamiltonianTorus {
    pub c: usize,
    pub r: usize,
    pub x_first: bool,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn hamiltonian_torus(t: &crate::topology::Topology) -> Option<HamiltonianTorus> {
    let g = t.infer_grid().filter(|g| g.torus && g.dims.len() == 2)?;
    let (a, b) = (g.dims[0], g.dims[1]);
    let fits = |c: usize, r: usize| c >= 3 && r.is_multiple_of(c) && gcd(r, c - 1) == 1;
    if fits(a, b) {
        Some(HamiltonianTorus { c: a, r: b, x_first: true })
    } else if fits(b, a) {
        Some(HamiltonianTorus { c: b, r: a, x_first: false })
    } else {
        None
    }
}

/// Rings the algorithm runs at once: 1 or 2 (bidirectional), doubled on tori with two
/// edge-disjoint Hamiltonian cycles.
pub(super) fn ring_count(t: &crate::topology::Topology, bidir: bool) -> u32 {
    (1 + u32::from(bidir)) * if hamiltonian_torus(t).is_some() { 2 } else { 1 }
}

/// The two edge-disjoint Hamiltonian cycles of a c × r torus (x of size c, y of size r, r = c·k,
/// gcd(r, c − 1) = 1), as node ids. H1 takes c − 1 steps along x then one along y, r times: it
/// covers each row once, shifting its start by −1 a row, and closes because c divides r. It
/// leaves out exactly the x-edge (−y−1, y)→(−y, y) of each row and uses only the y-edge
/// (−y−1, y)→(−y−1, y+1). H2 is what remains: c − 1 steps along y then one along x, r times;
/// after m such blocks it is at (m, m(c−1)), back at the start first when m = r exactly when
/// gcd(r, c − 1) = 1, so it visits every node once.
pub(super) fn disjoint_hamiltonian_cycles(h: HamiltonianTorus) -> [Vec<usize>; 2] {
    let HamiltonianTorus { c, r, x_first } = h;
    let id = |x: usize, y: usize| if x_first { x + c * y } else { y + r * x };
    let walk = |along_x: bool| -> Vec<usize> {
        let (mut x, mut y) = (0usize, 0usize);
        let mut out = Vec::with_capacity(c * r);
        for _ in 0..r {
            for i in 0..c {
                out.push(id(x, y));
                if i + 1 < c {
                    if along_x { x = (x + 1) % c } else { y = (y + 1) % r }
                }
            }
            if along_x { y = (y + 1) % r } else { x = (x + 1) % c }
        }
        out
    };
    [walk(true), walk(false)]
}

/// Broadcast and reduce need one block per rank (p·parts chunks); the others `parts` per rank.
fn rooted_chunks(t: &crate::topology::Topology, s: &crate::collective::CollectiveSpec, parts: u32) -> u32 {
    let p = s.group.as_ref().map(Vec::len).unwrap_or_else(|| t.live_npus().len()) as u32;
    let k = s.chunks().max(1).next_multiple_of(parts);
    match s.kind {
        K::Broadcast | K::Reduce => p * k,
        _ => k,
    }
}

/// The ring: positions → ranks.
pub(super) fn ring_order(ctx: &Ctx) -> Vec<usize> {
    let p = ctx.p();
    if let Some(g) = &ctx.grid {
        let ids = grid_cycle(g);
        return ids
            .into_iter()
            .map(|v| ctx.ranks.iter().position(|&r| r == v).expect("grid nodes are ranks"))
            .collect();
    }
    // Warnsdorff: walk to the unvisited linked neighbour with the fewest unvisited neighbours.
    let is_rank: std::collections::HashMap<usize, usize> = ctx.ranks.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let mut visited = vec![false; p];
    let mut order = vec![0usize];
    visited[0] = true;
    let neighbours = |r: usize| -> Vec<usize> {
        let v = ctx.ranks[r];
        ctx.topo.links()[ctx.topo.out_links(v)].iter().filter_map(|l| is_rank.get(&l.dst).copied()).collect()
    };
    while order.len() < p {
        let cur = *order.last().expect("non-empty");
        let next = neighbours(cur)
            .into_iter()
            .filter(|&r| !visited[r])
            .min_by_key(|&r| (neighbours(r).into_iter().filter(|&x| !visited[x]).count(), r))
            .unwrap_or_else(|| (0..p).find(|&r| !visited[r]).expect("some rank is unvisited"));
        visited[next] = true;
        order.push(next);
    }
    order
}

/// A Hamiltonian cycle of a grid where the shape allows: on a 2D mesh with an even number of
/// rows, snake through columns 1.. and return along column 0; otherwise snake order (on a torus
/// the wrap links close it).
fn grid_cycle(g: &crate::topology::Grid) -> Vec<usize> {
    if g.dims.len() == 2 && g.dims[1].is_multiple_of(2) && g.dims[0] > 1 {
        let (w, h) = (g.dims[0], g.dims[1]);
        let mut out = vec![0];
        for y in 0..h {
            let xs: Vec<usize> = if y % 2 == 0 { (1..w).collect() } else { (1..w).rev().collect() };
            out.extend(xs.into_iter().map(|x| y * w + x));
        }
        out.extend((1..h).rev().map(|y| y * w));
        return out;
    }
    snake(&g.dims)
}

fn snake(dims: &[usize]) -> Vec<usize> {
    if dims.len() == 1 {
        return (0..dims[0]).collect();
    }
    let inner = snake(&dims[..dims.len() - 1]);
    let stride: usize = dims[..dims.len() - 1].iter().product();
    let mut out = Vec::new();
    for y in 0..dims[dims.len() - 1] {
        if y % 2 == 0 {
            out.extend(inner.iter().map(|&v| y * stride + v));
        } else {
            out.extend(inner.iter().rev().map(|&v| y * stride + v));
        }
    }
    out
}

/// Rank r's block for ring `i` of `rings`: its share of the block's chunks.
fn share(ctx: &Ctx, r: usize, i: usize, rings: usize) -> Vec<u32> {
    let b: Vec<u32> = ctx.block(r).collect();
    let per = b.len().div_ceil(rings);
    b[(i * per).min(b.len())..((i + 1) * per).min(b.len())].to_vec()
}

/// Ring reduce-scatter (`reduce`) or all-gather from step `step0`: `blocks[r]` are rank r's
/// chunks; in the reduce-scatter position i ends with the block of rank order[i] complete.
pub(super) fn ring_phase(out: &mut Out, order: &[usize], blocks: &[Vec<u32>], step0: u32, reduce: bool) -> u32 {
    let p = order.len();
    for s in 0..p.saturating_sub(1) {
        for i in 0..p {
            let b = if reduce { (i + 2 * p - s - 1) % p } else { (i + p - s) % p };
            out.send(
                step0 + s as u32,
                order[i],
                order[(i + 1) % p],
                blocks[order[b]].clone(),
                if reduce { Op::Reduce } else { Op::Copy },
            );
        }
    }
    step0 + p.saturating_sub(1) as u32
}

fn build(ctx: &Ctx, bidir: bool) -> Result<Transfers, super::BaselineError> {
    let phases = if ctx.c.spec.kind == K::AllReduce { 2 } else { 1 };
    let estimate = ring_count(ctx.topo, bidir) as usize * phases * ctx.p() * ctx.p().saturating_sub(1);
    if estimate > super::MAX_TRANSFERS {
        return Err(super::BaselineError::Unsupported {
            algorithm: if bidir { "ring-bidir" } else { "ring" },
            what: format!("{} NPUs here: {estimate} transfers exceed the limit of {}", ctx.p(), super::MAX_TRANSFERS),
        });
    }
    let mut out = Out::new(ctx);
    let mut orders: Vec<Vec<usize>> = match hamiltonian_torus(ctx.topo).filter(|_| ctx.grid.is_some()) {
        Some(h) => disjoint_hamiltonian_cycles(h).into(),
        None => vec![ring_order(ctx)],
    };
    if bidir {
        let reversed: Vec<Vec<usize>> = orders.iter().map(|o| o.iter().rev().copied().collect()).collect();
        orders.extend(reversed);
    }
    let count = orders.len();
    let rings: Vec<(&[usize], Vec<Vec<u32>>)> = orders
        .iter()
        .enumerate()
        .map(|(i, o)| (o.as_slice(), (0..ctx.p()).map(|r| share(ctx, r, i, count)).collect()))
        .collect();
    for (ring, blocks) in &rings {
        match ctx.c.spec.kind {
            K::AllGather => {
                ring_phase(&mut out, ring, blocks, 0, false);
            }
            K::ReduceScatter => {
                ring_phase(&mut out, ring, blocks, 0, true);
            }
            K::AllReduce => {
                let s = ring_phase(&mut out, ring, blocks, 0, true);
                ring_phase(&mut out, ring, blocks, s, false);
            }
            K::Broadcast => {
                let s = mst::scatter(&mut out, ctx.root_rank(), blocks, 0);
                ring_phase(&mut out, ring, blocks, s, false);
            }
            K::Reduce => {
                let s = ring_phase(&mut out, ring, blocks, 0, true);
                mst::gather(&mut out, ctx.root_rank(), blocks, s);
            }
            _ => unreachable!("checked against KINDS"),
        }
    }
    Ok(out.transfers)
}
