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

use super::SynthError;
use super::greedy::{self, Plan, Problem};
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
    Greedy(greedy::GreedyError),
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
    let greedy_plan = greedy::plan(p, seed, cancelled).map_err(|e| match e {
        SynthError::Greedy(e) => IlpError::Greedy(e).into(),
        e => e,
    })?;
    let greedy_moves = super::prune_dead_ends(p.ten, p.num_chunks, greedy_plan.moves.clone(), p.post);
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
mod tests {
    use super::chunks::ChunkInfo;
    use super::model::{Congestion, Goal, Model};
    use super::symmetric::{Symmetry, congestion_free};
    use crate::collective::{Collective, CollectiveKind as K, CollectiveSpec};
    use crate::synth::greedy::Problem;
    use crate::ten::{SwitchModel, Ten};
    use crate::topology::parse_spec;
    use std::time::{Duration, Instant};

    /// The problem of a non-combining collective's one phase, as `movement_core` poses it.
    fn problem_parts(spec: &str, kind: K, chunks: u32) -> (Ten, Collective) {
        let topo = parse_spec(spec).unwrap();
        let mut cs = CollectiveSpec::new(kind, 1 << 30).with_chunks_per_npu(chunks);
        if kind.needs_root() {
            cs.root = Some(1);
        }
        let c = Collective::build(&cs, &topo).unwrap();
        let ten = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, None).unwrap();
        (ten, c)
    }

    /// The one phase of `c` on `ten`: every NPU live.
    fn problem<'a>(ten: &'a Ten, c: &'a Collective) -> Problem<'a> {
        Problem {
            ten,
            num_chunks: c.num_chunks,
            pre: &c.precondition,
            post: &c.postcondition,
            live_npus: ten.npus,
            rarest_first: false,
            capacity: 1,
        }
    }

    /// The horizon lower bound is sound: the full model one timestep below it has no solution
    /// (HiGHS proves it), on fabrics with pods behind slower links (where the cut bounds
    /// apply), meshes and rings with uneven links, for every non-combining collective.
    #[test]
    fn nothing_fits_below_the_lower_bound() {
        let specs = [
            "hier:ring2,fc2,switch2@bw=200,100,50;lat=500",
            "hier:ring2,switch3@bw=200,50;lat=500",
            "hier:fc3,switch2@bw=100,25;lat=0",
            "hier:ring2,fc2,switch2@bw=200,200,100;lat=0",
            "mesh:3x3@bw=100,60;lat=0,0",
            "ring:6@bw=100;lat=0",
            "rail:2x3@bw=400,50;lat=500",
        ];
        let kinds = [K::AllGather, K::Broadcast, K::Gather, K::Scatter, K::AllToAll];
        let (mut refuted, mut checked, mut by_cuts) = (0, 0, 0);
        for spec in specs {
            for kind in kinds {
                for chunks in [1] {
                    let (ten, c) = problem_parts(spec, kind, chunks);
                    let p = problem(&ten, &c);
                    let info = ChunkInfo::new(&p);
                    let lb = info.lower_bound(&ten);
                    if lb == 0 {
                        continue;
                    }
                    checked += 1;
                    by_cuts += usize::from(lb > info.basic_bound(&ten));
                    let below = Model::build(&ten, &info, lb - 1, Goal::Probe, Congestion::PerResource, &|| false);
                    let Ok(Some(model)) = below else {
                        refuted += 1; // a target farther than the horizon: trivially infeasible
                        continue;
                    };
                    // The limit leaves a few hard refutations undecided; none may find a plan.
                    let deadline = Instant::now() + Duration::from_secs(5);
                    let out = model.solve(deadline, None, 1, Goal::Probe, &[], &|| false).unwrap();
                    let found = out.values.is_some();
                    assert!(!found, "{spec} {kind:?} k={chunks}: a plan of {} timesteps, below the bound", lb - 1);
                    if out.result == super::SolveResult::Infeasible {
                        refuted += 1;
                    } else {
                        eprintln!("{spec} {kind:?} k={chunks}: T = {} undecided", lb - 1);
                    }
                }
            }
        }
        eprintln!("{refuted} of {checked} refuted, {by_cuts} bounds raised by the cut bounds");
        assert!(checked >= 30, "{checked} cases");
        assert!(refuted + 2 >= checked, "{refuted} of {checked} refuted");
        // The cut bounds decide some of them.
        assert!(by_cuts >= 5, "the cut bounds raised {by_cuts} bounds");
    }

    /// TACOS Table I's Ring(2)_FC(4)_Switch(4) at 1 GiB: the fabric spans 1, 2 and 4 timesteps
    /// (ring, FC, switch). All-gather needs 16, argued by hand: a pod of 8 NPUs must take in
    /// 24 chunks through its 8 switch ports, one per port every 4 timesteps from timestep 4,
    /// and a chunk entering at time a reaches the farthest NPU of the pod only at a + 3 (ring
    /// then FC), so entries at 4, 8 and 12 fill every port and the last round ends at 15 at
    /// the earliest; then an NPU v must take in, over [13, 15], its ring partner's last entry
    /// (through the ring), its three FC neighbours' (through the FC links, at 14 at the
    /// earliest) and their ring partners' (at 15): seven chunks, but three FC links carry
    /// one each in that window and the ring three, so 15 is too short. The cover bound gives
    /// 15, the ingress flow 16; the symmetric plan meets it.
    #[test]
    fn table_one_all_gather_bound_is_sixteen_and_a_symmetric_plan_meets_it() {
        let (ten, c) = problem_parts("hier:ring2,fc4,switch4@bw=200,100,50;lat=500", K::AllGather, 1);
        assert_eq!(
            ten.edges.iter().map(|e| e.span).collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>(),
            [1, 2, 4]
        );
        let p = Problem {
            ten: &ten,
            num_chunks: c.num_chunks,
            pre: &c.precondition,
            post: &c.postcondition,
            live_npus: 32,
            rarest_first: false,
            capacity: 1,
        };
        let info = ChunkInfo::new(&p);
        assert_eq!(info.lower_bound(&ten), 16);
        let sym = Symmetry::find(&ten).expect("Z2 x Z4 x Z4 acts on the fabric");
        let blocks = sym.pattern(&info, c.num_chunks).expect("every NPU spreads its own chunk");
        // One NPU's spread at T = 16: a model of one chunk, its translates congestion-free.
        let pattern = info.only(&blocks.blocks[0]);
        let model = Model::build(&ten, &pattern, 16, Goal::Probe, Congestion::PerClass(&sym.classes), &|| false)
            .ok()
            .flatten()
            .unwrap();
        assert!(model.cols.len() < 3000, "{} columns", model.cols.len());
        let out = model.solve(Instant::now() + Duration::from_secs(120), None, 1, Goal::Probe, &[], &|| false).unwrap();
        let moves = sym.translate(&ten, &blocks, &model.moves(&out.values.expect("feasible"))).unwrap();
        assert!(congestion_free(&ten, &moves));
        let plan = super::extract::plan_of(&ten, moves);
        assert_eq!(plan.timesteps, 16);
        // Every NPU receives every chunk it lacks.
        let mut got = std::collections::HashSet::new();
        for m in &plan.moves {
            got.insert((ten.edges[m.edge as usize].dst, m.chunk));
        }
        assert_eq!(got.len(), 32 * 31);
    }

    /// On fabrics a regular group maps onto itself (rings, tori, a hypercube, switched pods, a
    /// fully connected graph), the first horizon at which the symmetric model has a solution
    /// gives, translated, a complete plan free of congestion, no shorter than the lower bound.
    #[test]
    fn symmetric_plans_translate_to_complete_congestion_free_plans() {
        for spec in [
            "ring:6",
            "ring:5:uni",
            "torus:3x3",
            "torus:2x4",
            "hypercube:3",
            "fc:4",
            "hier:ring2,fc2,switch2@bw=200,100,50;lat=500",
            "hier:ring2,switch4@bw=200,50;lat=0",
        ] {
            for chunks in [1, 2] {
                let (ten, c) = problem_parts(spec, K::AllGather, chunks);
                let p = problem(&ten, &c);
                let info = ChunkInfo::new(&p);
                let sym = Symmetry::find(&ten).unwrap_or_else(|| panic!("{spec}: no symmetry"));
                let blocks = sym.pattern(&info, c.num_chunks).expect("all-gather is a pattern");
                let pattern = info.only(&blocks.blocks[0]);
                let lb = info.lower_bound(&ten);
                let found = (lb..lb + 8).find_map(|t| {
                    let m = Model::build(&ten, &pattern, t, Goal::Probe, Congestion::PerClass(&sym.classes), &|| false)
                        .ok()
                        .flatten()?;
                    let out = m
                        .solve(Instant::now() + Duration::from_secs(30), None, 1, Goal::Probe, &[], &|| false)
                        .unwrap();
                    out.values.map(|v| (t, m.moves(&v)))
                });
                let (t, moves) =
                    found.unwrap_or_else(|| panic!("{spec} k={chunks}: no symmetric plan up to {}", lb + 7));
                let all = sym.translate(&ten, &blocks, &moves).unwrap();
                assert!(congestion_free(&ten, &all), "{spec} k={chunks}");
                let plan = super::extract::plan_of(&ten, all);
                assert!(
                    plan.timesteps >= lb && plan.timesteps <= t,
                    "{spec} k={chunks}: {} vs {lb}..{t}",
                    plan.timesteps
                );
                // Every NPU receives every chunk it lacks, over an edge that starts where the
                // chunk already is.
                let mut have: std::collections::HashSet<(u32, u32)> =
                    c.precondition.iter().map(|&[v, c]| (v, c)).collect();
                let mut moves = plan.moves.clone();
                moves.sort_by_key(|m| m.step);
                let mut arrivals = Vec::new();
                for m in &moves {
                    let e = &ten.edges[m.edge as usize];
                    arrivals.retain(|&(at, v, ch)| {
                        if at <= m.step {
                            have.insert((v, ch));
                            false
                        } else {
                            true
                        }
                    });
                    assert!(
                        have.contains(&(e.src, m.chunk)),
                        "{spec} k={chunks}: {} sends chunk {} it lacks",
                        e.src,
                        m.chunk
                    );
                    arrivals.push((m.step + e.span, e.dst, m.chunk));
                }
                have.extend(arrivals.iter().map(|&(_, v, ch)| (v, ch)));
                assert_eq!(have.len(), ten.npus * c.num_chunks, "{spec} k={chunks}");
            }
        }
    }

    /// A fabric without a regular symmetry (a mesh: corners are not like centres) has none.
    #[test]
    fn meshes_have_no_symmetric_plans_and_tori_do() {
        let (mesh, _) = problem_parts("mesh:3x3", K::AllGather, 1);
        assert!(Symmetry::find(&mesh).is_none());
        let (torus, _) = problem_parts("torus:3x4", K::AllGather, 1);
        assert!(Symmetry::find(&torus).is_some());
    }

    /// The work budget decides, not the clock: the same request on a machine slowed down
    /// (every poll at HiGHS's interrupt points sleeps 50 ms) takes the same decisions, solve for
    /// solve, and returns the same schedule, as long as the wall clock's limit does not cut
    /// it. The budget is small enough that solves end on it (TACOS's Table I all-gather, whose
    /// symmetric probe at the bound needs about 13,000 LP iterations).
    #[test]
    fn the_work_budget_decides_the_same_on_a_slower_machine() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let topo = parse_spec("hier:ring2,fc4,switch4@bw=200,100,50;lat=500").unwrap();
        let c = Collective::build(&CollectiveSpec::new(K::AllGather, 1 << 30), &topo).unwrap();
        let plan = crate::synth::PlanOptions { seed: 1, switch_model: SwitchModel::Native, discretization_ns: None };
        let opts = super::IlpOptions { time_limit_s: 600.0, work_limit_s: Some(3.0), ..Default::default() };
        let run = |cancelled: &dyn Fn() -> bool| crate::synth::ilp(&topo, &c, &plan, &opts, cancelled).unwrap();
        let fast = run(&|| false);
        let polls = AtomicU64::new(0);
        let slow = run(&|| {
            polls.fetch_add(1, Ordering::Relaxed);
            // HiGHS polls at its interrupt points (a few dozen in these solves): each poll
            // costs what a busy machine would make its stretch of work cost.
            std::thread::sleep(Duration::from_millis(50));
            false
        });
        let (f, s) = (&fast.2.stats, &slow.2.stats);
        assert!(polls.load(Ordering::Relaxed) >= 10, "the slow run was polled {polls:?} times");
        assert!(!f.cut_by_time_limit && !s.cut_by_time_limit, "the wall clock cut a run");
        let decided = |st: &super::IlpStats| -> Vec<(&'static str, u32, super::SolveResult, u64, u64)> {
            st.phases
                .iter()
                .flat_map(|p| &p.solves)
                .map(|r| (r.kind, r.horizon, r.result, r.lp_iterations, r.nodes))
                .collect()
        };
        assert!(
            decided(f).iter().any(|d| d.2 == super::SolveResult::WorkLimit),
            "no solve ended on its work budget: {:?}",
            decided(f)
        );
        assert_eq!(decided(f), decided(s));
        assert_eq!((f.status, f.horizon, f.horizon_lower_bound), (s.status, s.horizon, s.horizon_lower_bound));
        assert_eq!(f.work_s, s.work_s);
        assert_eq!(fast.0.transfers, slow.0.transfers);
    }

    /// A model over `MAX_NONZEROS` is not built. At a fine TEN timestep every send is a term of
    /// each congestion row its link time spans: the request that found it (rail:5x5 with 2 µs
    /// links, an all-gather's finest grid of 166 ns) built 138 M nonzeros, peaked at 12.7 GB
    /// and ran 43 s past its 30 s limit. The build stops once over the cap and the search says
    /// why; a coarser grid's model is built and counts its nonzeros exactly.
    #[test]
    fn a_model_over_the_nonzero_limit_is_not_built_and_the_search_says_so() {
        use super::model::BuildStop;
        let topo = parse_spec("rail:5x5@bw=100,200;lat=2000").unwrap();
        let mut spec = CollectiveSpec::new(K::AllGather, 1 << 20).with_chunks_per_npu(2);
        spec.group = Some(vec![0, 1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 14, 17, 19, 21, 22, 24]);
        let c = Collective::build(&spec, &topo).unwrap();
        let fine = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, Some(166.0)).unwrap();
        let p = problem(&fine, &c);
        let info = ChunkInfo::new(&p);
        let horizon = 450;
        let built = Model::build(&fine, &info, horizon, Goal::Probe, Congestion::of(false), &|| false);
        assert!(
            matches!(built, Err(BuildStop::TooLarge { what: "nonzeros", count, limit })
                if limit == super::MAX_NONZEROS && count > limit),
            "the T = {horizon} model on the 166 ns grid is over the nonzero limit"
        );
        let lb = info.lower_bound(&fine);
        let deadline = Instant::now() + Duration::from_secs(600);
        let opts = super::IlpOptions { time_limit_s: 600.0, ..Default::default() };
        let out = super::plan(&p, 0, &opts, 600.0, deadline, "forward", &|| false).unwrap();
        let reason = out.stats.reason.unwrap_or_default();
        assert!(
            reason.contains(&format!("nonzeros (limit {})", super::MAX_NONZEROS)),
            "lower bound {lb}, greedy horizon {}: {reason}",
            out.stats.greedy_horizon
        );
        assert_eq!(out.stats.source, "greedy");
        let coarse = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, None).unwrap();
        let p = problem(&coarse, &c);
        let info = ChunkInfo::new(&p);
        let horizon = crate::synth::greedy::plan(&p, 0, &|| false).unwrap().timesteps;
        let Ok(Some(m)) = Model::build(&coarse, &info, horizon, Goal::Probe, Congestion::of(false), &|| false) else {
            panic!("the coarse grid's model at the greedy's horizon {horizon} is built");
        };
        assert_eq!(m.nonzeros, m.rows.iter().map(|r| r.terms.len()).sum::<usize>());
        assert!(m.nonzeros > m.cols.len() && m.nonzeros <= super::MAX_NONZEROS);
        // A horizon of a hundred million timesteps (a 1 ns grid): one chunk's candidate sends
        // alone would be billions; they are counted, not allocated (a 12 GB vector once
        // aborted the service here).
        let built = Model::build(&coarse, &info, 100_000_000, Goal::Probe, Congestion::of(false), &|| false);
        assert!(matches!(built, Err(BuildStop::TooLarge { what: "variables", count, .. }) if count > 100_000_000));
        // On a 1 ns grid a 2 µs link's transfer spans over 2,000 timesteps: the grid is refused
        // whatever the horizon (HiGHS's presolve once spent 34 s of a 20 s limit on such a
        // model of 15,044 columns).
        let nano = Ten::build(&topo, c.chunk_size_bytes, SwitchModel::Native, Some(1.0)).unwrap();
        let span = nano.edges.iter().map(|e| e.span).max().unwrap();
        let built =
            Model::build(&nano, &ChunkInfo::new(&problem(&nano, &c)), 10, Goal::Probe, Congestion::of(false), &|| {
                false
            });
        assert!(span > super::MAX_SPAN && matches!(built, Err(BuildStop::TooFine { span: s }) if s == span));
    }
}
