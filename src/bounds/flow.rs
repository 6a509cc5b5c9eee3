//! The flow bound: the multicommodity-flow linear program (HiGHS) for the chunks that each go
//! from one holder to their needers. Every delivered chunk crossed some path from its holder
//! to its needer, so the bytes on each link over the collective form a flow that meets every
//! demand; no link carries more than its bandwidth times the collective's time. The least
//! time at which such a flow exists is a lower bound, and it sees what the distance and cut
//! bounds miss: a class of links every route must use (a rail fabric's node-switch links), a
//! group with few links out (a dragonfly group) that no candidate cut names.
//!
//! The program itself is `mcf` (the routed planner also routes along its flows).

use super::spread::Demand;
use crate::mcf;
use crate::topology::Topology;
use std::collections::BTreeMap;

/// The solver's optimum is shaded by this fraction, so its tolerances cannot overstate the
/// bound.
const SHADE: f64 = 1e-6;

/// The flow bound, ns; `Ok(None)` where nothing is to be delivered, `Err` (a note) where it is
/// skipped or the solver gave no optimum.
pub(super) fn flow(topo: &Topology, d: &Demand) -> Result<Option<f64>, String> {
    // Demands per holder: needer -> chunks (chunks with one holder; others are left out, which
    // only weakens the bound). A chunk several NPUs need is copied where its routes part, so
    // its bytes on a link serve them all: it stands for one route only, to its needer farthest
    // in hops, which its delivery contains whatever tree it takes (counted once per needer, the
    // bound overstated a custom all-gather's twofold, above the schedules that meet it).
    let mut by_holder: BTreeMap<u32, BTreeMap<u32, f64>> = BTreeMap::new();
    let mut hops: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (h, n) in d.chunks() {
        if let [u] = h {
            let mut others = n.iter().copied().filter(|&v| v != *u);
            let far = match n.len() {
                0 | 1 => others.next(),
                _ => {
                    let dist = hops.entry(*u).or_insert_with(|| super::shortest(topo, &[*u], |_| 1.0));
                    others.max_by(|&a, &b| dist[a as usize].total_cmp(&dist[b as usize]).then(b.cmp(&a)))
                }
            };
            if let Some(v) = far {
                *by_holder.entry(*u).or_default().entry(v).or_default() += 1.0;
            }
        }
    }
    if by_holder.is_empty() {
        return Ok(None);
    }
    let demands: Vec<mcf::Demands> =
        by_holder.into_iter().map(|(holder, n)| mcf::Demands { holder, needers: n.into_iter().collect() }).collect();
    let sol = mcf::solve(topo, &demands).map_err(|e| format!("flow: {e}"))?;
    Ok(Some(sol.chunks_on_fastest * d.chunk_bytes / sol.beta_ref * (1.0 - SHADE)))
}

/// An intact torus (or hypercube) of equal sides whose links all have one bandwidth: every link
/// is like every other, so spreading each route over its shortest paths by symmetry loads
/// every link alike, and the flow bound is the distance bound for an all-to-all.
pub(super) fn symmetric(topo: &Topology) -> bool {
    let Some(g) = topo.infer_grid() else { return false };
    let bw = topo.links().first().map(|l| l.bandwidth_gb_per_s);
    (g.torus || g.dims.iter().all(|&d| d == 2))
        && g.dims.windows(2).all(|w| w[0] == w[1])
        && topo.links().iter().all(|l| Some(l.bandwidth_gb_per_s) == bw)
}
