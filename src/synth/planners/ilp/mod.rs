//! The ILP synthesizer (TACOS V) on the time-expanded network, solved by HiGHS through good_lp:
//! binary `hold`/`sent` variables over a horizon of T timesteps, the search for the least
//! feasible T between the TEN's lower bound and the greedy's step count, time limits with a
//! complete fallback, time clustering with shortest-path recovery, and the TACCL-like variant
//! that ignores congestion.
//!
//! The model moves chunks without combining; combining collectives reach it through the same
//! inversion as the greedy (`synth::movement_core`), one model per phase.
//!
//! Invariants of the model (they are what make a solution a valid plan):
//! - `hold[c,n,t] = hold[c,n,t-1] + Σ arrivals of c at n at t` with `hold` binary, so holding is
//!   monotone, a new hold needs a delivery, and no (npu, chunk) is delivered twice (a reduce
//!   phase reversed from the plan would otherwise count a contribution twice);
//! - a send starting at t needs `hold[c,src,t]` (arrivals at t may be forwarded at t);
//! - a resource carries at most one chunk per timestep, for an edge's whole span.
//!
//! Layout: this module holds the public types and the per-phase entry point [`plan`];
//! `chunks` the per-chunk facts and horizon lower bounds, `model` the integer program, `lp` its
//! LP text, `extract` the translation between plans and columns, `solve` one HiGHS solve,
//! `search` the horizon search, `cluster` time clustering and `recover` shortest-path recovery.

mod chunks;
mod cluster;
mod extract;
mod lp;
mod model;
mod recover;
mod search;
mod solve;
mod symmetric;

pub use recover::recover;

use crate::synth::SynthError;
use crate::synth::matcher;
use crate::synth::phase::{Plan, Problem};
use chunks::ChunkInfo;
use search::Search;
use serde::Serialize;
use std::time::Instant;

/// Variables one model may have; a larger model is not built (the greedy plan is returned,
/// marked `feasible`, with the reason).
pub const MAX_VARIABLES: usize = 3_000_000;

/// Nonzero coefficients one model may have; a larger model is not built (as for
/// `MAX_VARIABLES`). A fine TEN timestep makes every send a term of each congestion row it
/// spans: on rail:5x5 at a 166 ns timestep (a 2 µs link latency), 2.9 M variables carried
/// 138 M nonzeros, which took 26 s to build, 23 s in HiGHS's presolve (which its time limit
/// does not interrupt) and 12.7 GB at the peak, for a request with a 30 s limit. About 90
/// bytes per nonzero at the peak: this cap keeps a model near 2 GB.
pub const MAX_NONZEROS: usize = 20_000_000;

/// TEN timesteps one link's transfer may span in a model; a model on a finer grid is not
/// built. A send is a term of every congestion row it spans: at a 1 ns grid (2 µs links) a
/// symmetric model of 15,044 columns had 7.6 M nonzeros, about 500 a column, and HiGHS's
/// presolve took 34 s of a 20 s limit without one LP iteration. The grids `auto` picks span
/// at most 32 times the fastest link's ratio to the slowest (`auto_discretizations`).
pub const MAX_SPAN: u32 = 256;

#[derive(Clone, Debug)]
pub struct IlpOptions {
    /// Wall-clock budget of all the ILP work of one synthesis (every phase, every solve): a
    /// run that reaches it stops with what it has, and says so (`cut_by_time_limit`).
    pub time_limit_s: f64,
    /// The budget the search shares out between phases, horizons and solves, in nominal
    /// seconds of HiGHS work (`work_seconds`: LP iterations, the same on any machine), so the
    /// same request decides the same on a busy machine as on an idle one, unless the wall
    /// clock's `time_limit_s` cuts it first. `None`: `time_limit_s`.
    pub work_limit_s: Option<f64>,
    /// Cap on a single HiGHS solve (default: what is left of the overall budget).
    pub solve_time_limit_s: Option<f64>,
    /// HiGHS threads per solve.
    pub threads: u32,
    /// TACCL-like: no congestion constraint (the result is still scored on the simulator).
    pub ignore_congestion: bool,
    /// Time clustering (TACOS V-C): windows of this many timesteps solved one after another.
    pub window: Option<u32>,
    /// Keep the LP text of each phase's model at its chosen horizon (for `--dump-lp`).
    pub keep_lp: bool,
    /// The whole run's deadline, past the share `time_limit_s` gives this run: the greedy
    /// warm start, without which the search has nothing to return, stops there as on a cancel
    /// (at 250,000 chunks an NPU on ring:4 it alone took 3 s of a 3 s limit, then the checks
    /// as long again). `None`: only a cancel stops it.
    pub warm_start_by: Option<Instant>,
}

impl Default for IlpOptions {
    fn default() -> Self {
        IlpOptions {
            time_limit_s: 60.0,
            work_limit_s: None,
            solve_time_limit_s: None,
            threads: 1,
            ignore_congestion: false,
            window: None,
            keep_lp: false,
            warm_start_by: None,
        }
    }
}

/// `optimal`: the horizon is proven minimal (T−1 infeasible, or T equals the lower bound).
/// `feasible`: a valid, complete plan whose horizon is not proven minimal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IlpStatus {
    Optimal,
    Feasible,
}

/// What one HiGHS solve ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SolveResult {
    /// Solved to the end (a feasibility probe: a solution exists; with an objective: proven
    /// within the MIP gap).
    Optimal,
    /// Stopped by the time limit with a solution in hand.
    Feasible,
    /// Proven to have no solution.
    Infeasible,
    /// Stopped by the time limit without a solution.
    TimeLimit,
    /// Stopped without a solution when its share of the work budget was spent (the same on
    /// any machine, unlike `time_limit`).
    WorkLimit,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SolveRecord {
    /// `repair` (the best plan's early deliveries fixed, the rest completed), `probe` (the full
    /// model: is horizon T feasible?) or `window` (time clustering).
    pub kind: &'static str,
    pub horizon: u32,
    pub result: SolveResult,
    pub variables: usize,
    pub constraints: usize,
    /// Nonzero coefficients of the model's rows.
    pub nonzeros: usize,
    pub build_ms: f64,
    pub highs_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mip_gap: Option<f64>,
    /// HiGHS's LP iterations and branch-and-bound nodes: the solve's work, the same on any
    /// machine (what its budget is counted in).
    pub lp_iterations: u64,
    pub nodes: u64,
}

/// Nominal seconds of HiGHS work per LP iteration: what the ILP's budget shares are counted
/// in. Measured on the ILP suite's hard solves (`bench --suite ilp`, 2026-11-27, one AMD EPYC
/// vCPU), where sub-MIP heuristics and cut rounds do most of the work and are counted in the
/// LP iterations they run: 0.37-0.55 ms per iteration, presolve included.
pub const SECONDS_PER_LP_ITERATION: f64 = 5e-4;

/// The nominal seconds that many LP iterations stand for.
pub fn work_seconds(lp_iterations: u64) -> f64 {
    lp_iterations as f64 * SECONDS_PER_LP_ITERATION
}

/// One phase's search (reduce phase or forward phase).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PhaseStats {
    pub phase: &'static str,
    pub status: IlpStatus,
    /// TEN timesteps of the returned plan.
    pub horizon: u32,
    /// The proven lower bound on the horizon: the TEN bound (distances, and arrivals per NPU
    /// over its ingress resources), raised past every horizon proven infeasible.
    pub lower_bound: u32,
    /// The greedy's timesteps on the same TEN (the search's first upper bound).
    pub greedy_horizon: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mip_gap: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where the plan came from: `ilp`, `greedy` (no ILP solution beat it), `clustered`
    /// (windows) or `clustered+recovery` (windows finished by shortest paths).
    pub source: &'static str,
    /// Nominal seconds of HiGHS work the phase spent (`work_seconds` of its LP iterations).
    pub work_s: f64,
    /// The wall clock's time limit stopped the phase (its result may differ from run to run
    /// with the machine's load); otherwise every decision came from the work budget.
    pub cut_by_time_limit: bool,
    pub solves: Vec<SolveRecord>,
}

/// The ILP part of a synthesis's `stats`, summed over phases.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct IlpStats {
    pub status: IlpStatus,
    pub horizon: u32,
    pub horizon_lower_bound: u32,
    /// (horizon − horizon_lower_bound) / horizon: how far from proven optimal the horizon may be.
    pub horizon_gap: f64,
    pub greedy_horizon: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mip_gap: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub solves: usize,
    pub highs_ms: f64,
    pub model_build_ms: f64,
    /// Nominal seconds of HiGHS work spent (the budget's unit), summed over phases.
    pub work_s: f64,
    /// Some phase was stopped by the wall clock's time limit: only then may the same request
    /// give another result on another run.
    pub cut_by_time_limit: bool,
    pub ignore_congestion: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    pub phases: Vec<PhaseStats>,
    /// Every TEN timestep the ILP was run at, in the order tried (filled by the engine, which
    /// keeps the one whose schedule simulates fastest; the fields above are that run's).
    pub grids: Vec<IlpGrid>,
}

/// One TEN timestep the ILP ran at, and what came of it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct IlpGrid {
    pub discretization_ns: f64,
    /// The run's result, or why it has none (`None` where the time was up before it started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<IlpStatus>,
    /// The horizon and its proven lower bound in this grid's timesteps, where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub horizon: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub horizon_lower_bound: Option<u32>,
    /// The simulated time of this run's schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collective_time_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Wall time of this grid's run, its schedule's check included.
    pub wall_ms: f64,
}

impl IlpStats {
    pub fn from_phases(phases: Vec<PhaseStats>, opts: &IlpOptions) -> IlpStats {
        let all = || phases.iter().flat_map(|p| p.solves.iter());
        let reasons: Vec<String> =
            phases.iter().filter_map(|p| p.reason.as_ref().map(|r| format!("{}: {r}", p.phase))).collect();
        IlpStats {
            status: if phases.iter().all(|p| p.status == IlpStatus::Optimal) {
                IlpStatus::Optimal
            } else {
                IlpStatus::Feasible
            },
            horizon: phases.iter().map(|p| p.horizon).sum(),
            horizon_lower_bound: phases.iter().map(|p| p.lower_bound).sum(),
            horizon_gap: {
                let (h, l) =
                    (phases.iter().map(|p| p.horizon).sum::<u32>(), phases.iter().map(|p| p.lower_bound).sum::<u32>());
                if h == 0 { 0.0 } else { (h - l.min(h)) as f64 / h as f64 }
            },
            greedy_horizon: phases.iter().map(|p| p.greedy_horizon).sum(),
            mip_gap: phases.iter().filter_map(|p| p.mip_gap).reduce(f64::max),
            reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
            solves: all().count(),
            // `+ 0.0`: an empty float sum is −0.0.
            highs_ms: all().map(|s| s.highs_ms).sum::<f64>() + 0.0,
            model_build_ms: all().map(|s| s.build_ms).sum::<f64>() + 0.0,
            work_s: phases.iter().map(|p| p.work_s).sum::<f64>() + 0.0,
            cut_by_time_limit: phases.iter().any(|p| p.cut_by_time_limit),
            ignore_congestion: opts.ignore_congestion,
            window: opts.window,
            phases,
            grids: Vec::new(),
        }
    }
}

/// Why the ILP found no schedule (a cancel is `SynthError::Cancelled`, as for every planner).
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum IlpError {
    #[error("greedy warm start: {0}")]
    Greedy(crate::synth::GreedyError),
    #[error("HiGHS: {0}")]
    Solver(String),
}

/// One phase's last model in LP format (`--dump-lp`, `options.keep_lp`).
#[derive(Clone, Debug)]
pub struct PhaseLp {
    /// `reduce` or `forward`.
    pub phase: &'static str,
    /// The model in CPLEX LP format.
    pub text: String,
}

/// One phase's result: the plan, its statistics and (if asked) the LP text of its last model.
pub struct PhasePlan {
    pub plan: Plan,
    pub stats: PhaseStats,
    pub lp: Option<String>,
}

/// Plans the movement of `p` with the ILP. Polls `cancelled` between solves and while
/// building; shares out `work_budget_s` (nominal seconds, `work_seconds`) between its solves,
/// stops searching at `deadline` (wall clock) and returns the best complete plan found.
pub fn plan(
    p: &Problem,
    seed: u64,
    opts: &IlpOptions,
    work_budget_s: f64,
    deadline: Instant,
    phase: &'static str,
    cancelled: &dyn Fn() -> bool,
) -> Result<PhasePlan, SynthError> {
    let by = opts.warm_start_by;
    let stop_warm_start = || cancelled() || by.is_some_and(|at| Instant::now() >= at);
    let greedy_plan = matcher::plan(p, seed, &stop_warm_start).map_err(|e| match e {
        SynthError::Greedy(e) => IlpError::Greedy(e).into(),
        e => e,
    })?;
    let greedy_moves = crate::synth::prune_dead_ends(p.ten, p.num_chunks, greedy_plan.moves.clone(), p.post);
    let info = ChunkInfo::new(p);
    let ub = greedy_plan.timesteps;
    let lb = if opts.ignore_congestion { info.distance_bound() } else { info.lower_bound(p.ten) }.min(ub);
    // A symmetric plan first, where the fabric and the collective allow one: a model of one
    // NPU's chunks, which may meet the lower bound (then it is optimal) or at least start the
    // search well below the greedy.
    let symmetry = (!opts.ignore_congestion && opts.window.is_none() && lb < ub)
        .then(|| symmetric::Symmetry::find(p.ten))
        .flatten()
        .and_then(|s| s.pattern(&info, p.num_chunks).map(|b| (s, b)));
    let mut search = Search::new(p, &info, opts, work_budget_s, deadline, cancelled);
    let seeded = match &symmetry {
        Some((sym, blocks)) => search.symmetric(sym, blocks, lb, ub)?,
        None => None,
    };
    let stats = PhaseStats {
        phase,
        status: IlpStatus::Feasible,
        horizon: ub,
        lower_bound: lb,
        greedy_horizon: ub,
        mip_gap: None,
        reason: None,
        source: "greedy",
        work_s: 0.0,
        cut_by_time_limit: false,
        solves: Vec::new(),
    };
    match opts.window {
        Some(w) => search.clustered_plan(w, lb, ub, greedy_moves, stats),
        None => search.horizons(lb, ub, greedy_moves, seeded, stats),
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests;
