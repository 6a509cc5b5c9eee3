//! The textbook all-to-all algorithms beside `direct`: pairwise exchange (p − 1 shifts), Bruck's
//! log-step algorithm (few, batched messages where α dominates) and the dimension-ordered
//! all-to-all of meshes and tori (one phase per dimension). Chunk `(a·p + b)·k + j` goes from
//! rank a to rank b; intermediate ranks relay it in its own slot.

use super::{Algorithm, BaselineError, BaselineInfo, Ctx, Out};
use crate::collective::CollectiveKind as K;
use crate::schedule::Op;

/// Pairwise exchange (Thakur, Rabenseifner and Gropp 2005, MPICH's all-to-all for long
/// messages): in step s = 1 … p − 1 rank r sends its block for rank r + s (mod p), each
/// message along a shortest path.
pub(super) const PAIRWISE: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "pairwise",
        collectives: vec![K::AllToAll],
        topologies: "any (shortest-path routing)",
        source: "Thakur, Rabenseifner, Gropp 2005 (pairwise exchange)",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| {
        too_many(ctx, "pairwise")?;
        let mut out = Out::new(ctx);
        let p = ctx.p();
        for s in 1..p {
            for a in 0..p {
                let b = (a + s) % p;
                out.send(s as u32 - 1, a, b, pair(ctx, a, b).collect::<Vec<u32>>(), Op::Copy);
            }
        }
        Ok(out.transfers)
    },
};

/// Bruck's all-to-all (Bruck et al. 1997): ⌈log₂ p⌉ steps; in step i rank r sends to rank
/// r + 2^i (mod p) every chunk it holds whose rank distance (destination − source mod p) has
/// bit i set, so each chunk moves by its distance's bits in increasing order.
pub(super) const BRUCK: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "bruck",
        collectives: vec![K::AllToAll],
        topologies: "any (shortest-path routing)",
        source: "Bruck, Ho, Kipnis, Upfal, Weathersby 1997 (index algorithm)",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| {
        too_many(ctx, "bruck")?;
        let mut out = Out::new(ctx);
        let p = ctx.p();
        let mut bit = 0u32;
        while (1usize << bit) < p {
            let shift = 1usize << bit;
            for r in 0..p {
                // Chunks at r now: from a = r − (δ mod 2^bit) with δ's bit `bit` set.
                let mut chunks = Vec::new();
                for delta in (1..p).filter(|d| d & shift != 0) {
                    let a = (r + p - (delta & (shift - 1))) % p;
                    let b = (a + delta) % p;
                    chunks.extend(pair(ctx, a, b));
                }
                chunks.sort_unstable();
                out.send(bit, r, (r + shift) % p, chunks, Op::Copy);
            }
            bit += 1;
        }
        Ok(out.transfers)
    },
};

/// Bruck's step count on p ranks: ⌈log₂ p⌉ (0 for one rank).
pub fn bruck_steps(p: usize) -> u32 {
    if p <= 1 { 0 } else { usize::BITS - (p - 1).leading_zeros() }
}

/// The dimension-ordered all-to-all of a mesh or torus: D phases; in each, every NPU sends to
/// each NPU of its line along a dimension the chunks it holds whose destination lies at that
/// NPU's coordinate, so after D phases every chunk is home. The pairs are split by
/// (a + b) mod D into D rotations that take the dimensions in turn from a different first
/// one, so every phase keeps every dimension's links busy (one order alone leaves the other
/// dimensions idle: twice the bound on a 2D torus). Each message goes straight along the
/// line (the shorter way round a torus; at a tie, alternately by the sender's coordinate, so
/// both directions carry half).
pub(super) const DIMENSION_ORDERED: Algorithm = Algorithm {
    info: || BaselineInfo {
        name: "dimension-ordered",
        collectives: vec![K::AllToAll],
        topologies: "mesh, torus (whole group, in id order)",
        source: "Kumar et al. 2008 (BG/P all-to-all by dimensions); Swing paper §2 (tori)",
    },
    chunking: |_, s| s.chunks(),
    build: |ctx| {
        let Some(g) = ctx.grid.clone() else {
            return Err(BaselineError::Unsupported {
                algorithm: "dimension-ordered",
                what: "this topology: it needs a whole mesh or torus of 4 NPUs or more in id order".into(),
            });
        };
        too_many(ctx, "dimension-ordered")?;
        let mut out = Out::new(ctx);
        let p = ctx.p();
        let coords: Vec<Vec<usize>> = (0..p).map(|v| g.coords(v)).collect();
        let dims = g.dims.len();
        for phase in 0..dims {
            // Per rotation r (the chunks of pairs with (a + b) mod D = r go along dimensions
            // r, r + 1, …), per (holder, coordinate along the phase's dimension): the chunks.
            let lists_len: usize = g.dims.iter().map(|&n| p * n).sum();
            let mut lists: Vec<Vec<u32>> = vec![Vec::new(); lists_len];
            let offset = |dim: usize| -> usize { g.dims[..dim].iter().map(|&n| p * n).sum() };
            for a in 0..p {
                for b in (0..p).filter(|&b| b != a) {
                    let r = (a + b) % dims;
                    let dim = (r + phase) % dims;
                    if coords[a][dim] == coords[b][dim] {
                        continue;
                    }
                    // Where the chunk is: the destination's coordinates along the dimensions
                    // already done, the source's elsewhere.
                    let at: Vec<usize> = (0..dims)
                        .map(|d| if (d + dims - r) % dims < phase { coords[b][d] } else { coords[a][d] })
                        .collect();
                    let u = g.node(&at);
                    lists[offset(dim) + u * g.dims[dim] + coords[b][dim]].extend(pair(ctx, a, b));
                }
            }
            for (dim, &n) in g.dims.iter().enumerate() {
                for u in 0..p {
                    let x = coords[u][dim] as i64;
                    for y in 0..n {
                        let chunks = std::mem::take(&mut lists[offset(dim) + u * n + y]);
                        if chunks.is_empty() {
                            continue;
                        }
                        let up = y as i64 - x; // straight along the line
                        let delta = if g.torus && n > 2 {
                            let fwd = up.rem_euclid(n as i64);
                            let back = fwd - n as i64;
                            match fwd.cmp(&-back) {
                                std::cmp::Ordering::Less => fwd,
                                std::cmp::Ordering::Greater => back,
                                std::cmp::Ordering::Equal if x % 2 == 0 => fwd,
                                std::cmp::Ordering::Equal => back,
                            }
                        } else {
                            up
                        };
                        let (v, path) = ctx.route_along(u, dim, delta);
                        out.push(phase as u32, u, v, chunks, Op::Copy, path);
                    }
                }
            }
        }
        Ok(out.transfers)
    },
};

/// The k chunks from rank a to rank b.
pub(super) fn pair(ctx: &Ctx, a: usize, b: usize) -> impl Iterator<Item = u32> + use<> {
    let (p, k) = (ctx.p() as u32, ctx.k() as u32);
    let base = (a as u32 * p + b as u32) * k;
    base..base + k
}

/// The pairwise algorithms route p² messages: refused above `direct`'s limit.
pub(super) fn too_many(ctx: &Ctx, algorithm: &'static str) -> Result<(), BaselineError> {
    if ctx.p() > super::direct::MAX_DIRECT_NPUS {
        return Err(BaselineError::Unsupported {
            algorithm,
            what: format!("groups above {} NPUs (p² routed chunks)", super::direct::MAX_DIRECT_NPUS),
        });
    }
    Ok(())
}
