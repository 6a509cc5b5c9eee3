//! The multicommodity-flow linear program (HiGHS): the least time at which the links, each
//! carrying at most its bandwidth times that time, move every holder's chunks to their needers
//! as a fractional flow. Commodities are aggregated by holder (one flow per holder, its
//! needers as sinks), so it has holders × links variables. `bounds` reads its optimum (the
//! flow bound); the routed planner also reads the flows, as routes.

use crate::topology::Topology;

/// Variables (holders × links) above which the program is not built: mesh:8x8 has 14,336
/// (about 1 s), torus:4x4x4 24,576, a 512-NPU torus 1.5 M.
pub const MAX_VARIABLES: usize = 20_000;
/// Wall time one solve may take, seconds.
const TIME_LIMIT_S: f64 = 5.0;

/// One holder's demands: (needer, chunks).
pub struct Demands {
    pub holder: u32,
    pub needers: Vec<(u32, f64)>,
}

/// The optimum: the time in chunks over the fastest link, and each holder's flow per link
/// (in chunks, indexed like the demands given).
pub struct Solution {
    pub chunks_on_fastest: f64,
    pub beta_ref: f64,
    pub flows: Vec<Vec<f64>>,
}

/// Solves the program; `Err` names why not (too large, no optimum in time).
pub fn solve(topo: &Topology, demands: &[Demands]) -> Result<Solution, String> {
    use good_lp::{Expression, ProblemVariables, SolverModel, variable};
    let links = topo.links();
    let vars_needed = demands.len().saturating_mul(links.len());
    if vars_needed > MAX_VARIABLES {
        return Err(format!("{vars_needed} variables exceed the limit of {MAX_VARIABLES}"));
    }
    let beta_ref = links.iter().map(|l| l.bandwidth_gb_per_s).fold(0.0, f64::max);
    if beta_ref <= 0.0 {
        return Err("no link has bandwidth".into());
    }
    let mut vars = ProblemVariables::new();
    let u = vars.add(variable().min(0.0));
    let f: Vec<Vec<good_lp::Variable>> =
        demands.iter().map(|_| links.iter().map(|_| vars.add(variable().min(0.0))).collect()).collect();
    let mut problem = vars.minimise(u).using(good_lp::solvers::highs::highs);
    for (k, d) in demands.iter().enumerate() {
        let total: f64 = d.needers.iter().map(|&(_, x)| x).sum();
        let mut want = vec![0.0; topo.nodes()];
        for &(v, x) in &d.needers {
            want[v as usize] += x;
        }
        want[d.holder as usize] -= total;
        // Net inflow at each node: its demand; at the holder, minus everything it sends.
        let mut net: Vec<Expression> = (0..topo.nodes()).map(|_| Expression::with_capacity(4)).collect();
        for (l, link) in links.iter().enumerate() {
            net[link.dst].add_mul(1.0, f[k][l]);
            net[link.src].add_mul(-1.0, f[k][l]);
        }
        for (v, e) in net.into_iter().enumerate() {
            problem.add_constraint(e.eq(want[v]));
        }
    }
    for (l, link) in links.iter().enumerate() {
        let mut e = Expression::with_capacity(demands.len() + 1);
        for fk in &f {
            e.add_mul(1.0, fk[l]);
        }
        e.add_mul(-link.bandwidth_gb_per_s / beta_ref, u);
        problem.add_constraint(e.leq(0.0));
    }
    let mut model = problem.try_into_inner().map_err(|e| e.to_string())?;
    model.make_quiet();
    let _ = model.try_set_option("time_limit", TIME_LIMIT_S);
    let _ = model.try_set_option("threads", 1);
    // Interior point (with crossover): on a 64-NPU torus about 1 s, where the simplex method
    // took more than 5.
    let _ = model.try_set_option("solver", "ipm");
    let solved = model.try_solve().map_err(|e| format!("the solver failed: {e:?}"))?;
    if solved.status() != highs::HighsModelStatus::Optimal {
        return Err(format!("no optimum within {TIME_LIMIT_S} s ({:?})", solved.status()));
    }
    let chunks_on_fastest = solved.objective_value();
    let cols = solved.get_solution().columns().to_vec();
    // The columns in the order the variables were added: u, then holder k's link l at
    // 1 + k·links + l.
    let flows = (0..demands.len()).map(|k| cols[1 + k * links.len()..1 + (k + 1) * links.len()].to_vec()).collect();
    Ok(Solution { chunks_on_fastest, beta_ref, flows })
}
