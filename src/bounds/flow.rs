//! The flow bound: the multicommodity-flow linear program (HiGHS) for the chunks that each go
//! from one holder to their needers. Every delivered chunk crossed some path from its holder
//! to its needer, so the bytes on each link over the collective form a flow that meets every
//! demand; no link carries more than its bandwidth times the collective's time. The least
//! time at which such a flow exists is a lower bound, and it sees what the distance and cut
//! bounds miss: a class of links every route must use (a rail fabric's node-switch links), a
//! group with few links out (a dragonfly group) that no candidate cut names.
//!
//! Commodities are aggregated by holder (one flow per holder, its needers as sinks), so the
//! program has holders × links variables; beyond `MAX_VARIABLES` it is not built.

use super::spread::Demand;
use crate::topology::Topology;
use std::collections::HashMap;

/// Variables (holders × links) above which the flow bound is skipped: mesh:8x8 has 14,336
/// (about 1 s), torus:4x4x4 24,576, a 512-NPU torus 1.5 M.
pub const MAX_VARIABLES: usize = 20_000;
/// Wall time one solve may take, seconds.
const TIME_LIMIT_S: f64 = 5.0;
/// The solver's optimum is shaded by this fraction, so its tolerances cannot overstate the
/// bound.
const SHADE: f64 = 1e-6;

/// The flow bound, ns; `Ok(None)` where nothing is to be delivered, `Err` (a note) where it is
/// skipped or the solver gave no optimum.
pub(super) fn flow(topo: &Topology, d: &Demand) -> Result<Option<f64>, String> {
    use good_lp::{Expression, ProblemVariables, SolverModel, variable};
    // Demands per holder: needer -> chunks (chunks with one holder; others are left out, which
    // only weakens the bound).
    let mut by_holder: HashMap<u32, HashMap<u32, f64>> = HashMap::new();
    for (h, n) in d.chunks() {
        if let [u] = h {
            for &v in n.iter().filter(|&&v| v != *u) {
                *by_holder.entry(*u).or_default().entry(v).or_default() += 1.0;
            }
        }
    }
    if by_holder.is_empty() {
        return Ok(None);
    }
    let links = topo.links();
    let vars_needed = by_holder.len().saturating_mul(links.len());
    if vars_needed > MAX_VARIABLES {
        return Err(format!("flow: skipped, {vars_needed} variables exceed the limit of {MAX_VARIABLES}"));
    }
    let beta_ref = links.iter().map(|l| l.bandwidth_gb_per_s).fold(0.0, f64::max);
    if beta_ref <= 0.0 {
        return Ok(None);
    }
    let mut holders: Vec<u32> = by_holder.keys().copied().collect();
    holders.sort_unstable();
    let mut vars = ProblemVariables::new();
    // u: the time in chunks over the fastest link.
    let u = vars.add(variable().min(0.0));
    let f: Vec<Vec<good_lp::Variable>> =
        holders.iter().map(|_| links.iter().map(|_| vars.add(variable().min(0.0))).collect()).collect();
    let mut problem = vars.minimise(u).using(good_lp::solvers::highs::highs);
    for (k, &s) in holders.iter().enumerate() {
        let demand = &by_holder[&s];
        let total: f64 = demand.values().sum();
        // Net inflow at each node: its demand; at the holder, minus everything it sends.
        let mut net: Vec<Expression> = (0..topo.nodes()).map(|_| Expression::with_capacity(4)).collect();
        for (l, link) in links.iter().enumerate() {
            net[link.dst].add_mul(1.0, f[k][l]);
            net[link.src].add_mul(-1.0, f[k][l]);
        }
        for (v, e) in net.into_iter().enumerate() {
            let want = if v == s as usize { -total } else { demand.get(&(v as u32)).copied().unwrap_or(0.0) };
            problem.add_constraint(e.eq(want));
        }
    }
    for (l, link) in links.iter().enumerate() {
        let mut e = Expression::with_capacity(holders.len() + 1);
        for fk in &f {
            e.add_mul(1.0, fk[l]);
        }
        e.add_mul(-link.bandwidth_gb_per_s / beta_ref, u);
        problem.add_constraint(e.leq(0.0));
    }
    let mut model = problem.try_into_inner().map_err(|e| format!("flow: {e}"))?;
    model.make_quiet();
    let _ = model.try_set_option("time_limit", TIME_LIMIT_S);
    let _ = model.try_set_option("threads", 1);
    // Interior point (with crossover): on a 64-NPU torus about 1 s, where the simplex method
    // took more than 5.
    let _ = model.try_set_option("solver", "ipm");
    let solved = model.try_solve().map_err(|e| format!("flow: the solver failed: {e:?}"))?;
    if solved.status() != highs::HighsModelStatus::Optimal {
        return Err(format!("flow: no optimum within {TIME_LIMIT_S} s ({:?})", solved.status()));
    }
    let chunks_on_fastest = solved.objective_value();
    Ok(Some(chunks_on_fastest * d.chunk_bytes / beta_ref * (1.0 - SHADE)))
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
