//! Who a butterfly's ranks pair with at each step (`pattern`: grid coordinates or a logical
//! line; Swing's ±ρ(s) peers, recursive halving and doubling), the links those steps cross on
//! a torus (`grid_hops`, for the estimates) and the blocks each rank sends at each step
//! (`send_sets`).

use super::Family;
use crate::baselines::Ctx;

/// Links each reduce-scatter step's messages cross on a torus with power-of-two sides, in the
/// order `pattern` takes the steps of a part starting at dimension `start`: Swing's |ρ(σ)|, or
/// recursive halving's shorter way round to the partner 2^bit away.
pub(in crate::baselines) fn grid_hops(g: &crate::topology::Grid, swing: bool, start: usize) -> Vec<u64> {
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
pub(super) struct Step {
    pub(super) peer: Vec<usize>,
    pub(super) along: Vec<Option<(usize, i64)>>,
}

/// The pattern over core ranks 0..q: steps in reduce-scatter order.
pub(super) struct Pattern {
    pub(super) q: usize,
    pub(super) steps: Vec<Step>,
}

pub(super) fn pattern(ctx: &Ctx, fam: Family, part: usize, parts: usize, q: usize, on_grid: bool) -> Pattern {
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
pub(super) fn send_sets(p: &Pattern) -> Option<Vec<Vec<Vec<usize>>>> {
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
