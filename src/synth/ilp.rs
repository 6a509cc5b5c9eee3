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

use super::greedy::{self, Move, Plan, Problem};
use crate::ten::Ten;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

/// A probe at horizon T first tries to repair the best plan: its deliveries that arrive by
/// these shares of T are fixed and HiGHS completes the rest, a small MIP after presolve.
/// Measured (docs/BENCHMARKS.md): on Ring(2)_FC(4)_Switch(4), torus:4x4 and mesh:4x4
/// all-to-all, repairs found in under a second horizons the full model did not in 20 s.
const REPAIR_KEEP_PERCENT: [u32; 2] = [80, 50];

const OUT_OF_TIME: &str = "time limit reached";

/// Variables one model may have; a larger model is not built (the greedy plan is returned,
/// marked `feasible`, with the reason).
pub const MAX_VARIABLES: usize = 3_000_000;

#[derive(Clone, Debug)]
pub struct IlpOptions {
    /// Wall-clock budget of all the ILP work of one synthesis (every phase, every solve).
    pub time_limit_s: f64,
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
    pub build_ms: f64,
    pub highs_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mip_gap: Option<f64>,
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
    pub ignore_congestion: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    pub phases: Vec<PhaseStats>,
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
            ignore_congestion: opts.ignore_congestion,
            window: opts.window,
            phases,
        }
    }
}

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum IlpError {
    #[error("cancelled")]
    Cancelled,
    #[error("greedy warm start: {0}")]
    Greedy(greedy::GreedyError),
    #[error("HiGHS: {0}")]
    Solver(String),
}

/// One phase's result: the plan, its statistics and (if asked) the LP text of its last model.
pub struct PhasePlan {
    pub plan: Plan,
    pub stats: PhaseStats,
    pub lp: Option<String>,
}

/// Plans the movement of `p` with the ILP. Polls `cancelled` between solves and while
/// building; stops searching at `deadline` and returns the best complete plan found.
pub fn plan(
    p: &Problem,
    seed: u64,
    opts: &IlpOptions,
    deadline: Instant,
    phase: &'static str,
    cancelled: &dyn Fn() -> bool,
) -> Result<PhasePlan, IlpError> {
    let greedy_plan = greedy::plan(p, seed, cancelled).map_err(|e| match e {
        greedy::GreedyError::Cancelled => IlpError::Cancelled,
        e => IlpError::Greedy(e),
    })?;
    let greedy_moves = super::prune_dead_ends(p.ten, p.num_chunks, greedy_plan.moves.clone(), p.post);
    let info = ChunkInfo::new(p);
    let ub = greedy_plan.timesteps;
    let lb = if opts.ignore_congestion { info.distance_bound() } else { info.lower_bound(p.ten) }.min(ub);
    let mut search =
        Search { p, info: &info, opts, deadline, cancelled, solves: Vec::new(), lp: Vec::new(), whole_budget: false };
    let mut stats = PhaseStats {
        phase,
        status: IlpStatus::Feasible,
        horizon: ub,
        lower_bound: lb,
        greedy_horizon: ub,
        mip_gap: None,
        reason: None,
        source: "greedy",
        solves: Vec::new(),
    };
    if let Some(w) = opts.window {
        let (moves, recovered) = search.clustered(w)?;
        let plan = plan_of(p.ten, moves);
        // Clustering trades optimality for speed; keep the greedy when it is better.
        let result = if plan.timesteps <= ub {
            stats.source = if recovered { "clustered+recovery" } else { "clustered" };
            if recovered {
                stats.reason = Some("time clustering stopped early; unmet chunks finished by shortest paths".into());
            }
            plan
        } else {
            stats.reason = Some(format!("time clustering took {} timesteps, the greedy {ub}", plan.timesteps));
            plan_of(p.ten, greedy_moves)
        };
        stats.horizon = result.timesteps;
        if stats.horizon == lb {
            stats.status = IlpStatus::Optimal;
        }
        stats.solves = search.solves;
        let lp = search.lp.pop().map(|(_, t)| t);
        return Ok(PhasePlan { plan: result, stats, lp });
    }
    // Search T in [lo, hi); hi is known feasible (the greedy, or a solution found). The first
    // probe is hi − 1: refuting it proves the greedy optimal at once, and a solution there is
    // found fast. Then bisection, upward from lo once the range is small. A probe that times out
    // without an answer moves the search above it, unproven.
    let (mut proven_lo, mut lo, mut hi) = (lb, lb, ub);
    let mut best: Option<Vec<Move>> = None;
    let mut stopped: Option<String> = None;
    let mut undecided: Vec<u32> = Vec::new();
    let mut first = true;
    while lo < hi {
        let t = if first || opts.ignore_congestion {
            // Without congestion the distance bound is always feasible.
            if opts.ignore_congestion { lo } else { hi - 1 }
        } else if hi - lo <= 2 {
            lo
        } else {
            lo + (hi - lo) / 2
        };
        first = false;
        // The best plan so far, for a repair at T.
        let plan: &[Move] = best.as_deref().unwrap_or(&greedy_moves);
        match search.solve(t, Goal::Probe, Some(plan))? {
            Outcome::Solved(moves) => {
                // A probe has no objective: drop deliveries that lead nowhere.
                let moves = super::prune_dead_ends(p.ten, p.num_chunks, moves, p.post);
                hi = plan_of(p.ten, moves.clone()).timesteps.min(t);
                best = Some(moves);
            }
            Outcome::Infeasible => {
                lo = t + 1;
                proven_lo = proven_lo.max(t + 1);
            }
            Outcome::Undecided => {
                undecided.push(t);
                lo = t + 1;
            }
            Outcome::OutOfTime(why) => {
                stopped = Some(why);
                break;
            }
        }
    }
    // Horizons left undecided: the highest below the best gets whatever time is left.
    if stopped.is_none()
        && let Some(&t) = undecided.iter().filter(|&&t| t < hi).max()
        && search.time_left() > 1.0
    {
        search.whole_budget = true;
        let plan: &[Move] = best.as_deref().unwrap_or(&greedy_moves);
        match search.solve(t, Goal::Probe, Some(plan))? {
            Outcome::Solved(moves) => {
                let moves = super::prune_dead_ends(p.ten, p.num_chunks, moves, p.post);
                hi = plan_of(p.ten, moves.clone()).timesteps.min(t);
                best = Some(moves);
                undecided.retain(|&u| u != t);
            }
            Outcome::Infeasible => {
                proven_lo = proven_lo.max(t + 1);
                undecided.retain(|&u| u != t);
            }
            Outcome::Undecided => {}
            Outcome::OutOfTime(why) => stopped = Some(why),
        }
    }
    let proven = proven_lo >= hi;
    // No solve after the search: polishing arrival times at the chosen horizon was tried and
    // never changed a simulated time on the test topologies, at up to 100× the search's cost.
    let source = if best.is_some() { "ilp" } else { "greedy" };
    let moves = best.unwrap_or(greedy_moves);
    stats.mip_gap = search
        .solves
        .iter()
        .rev()
        .find(|s| s.horizon == hi && s.result != SolveResult::Infeasible)
        .and_then(|s| s.mip_gap);
    if opts.keep_lp && !search.lp.iter().any(|(h, _)| *h == hi) {
        // The dump shows the model at the chosen horizon even when no solve needed it.
        if let Ok(Some(m)) = Model::build(p.ten, &info, hi, Goal::Probe, opts.ignore_congestion, &|| false) {
            search.lp.push((hi, m.lp_text(p.ten, hi, Goal::Probe)));
        }
    }
    let lp = search.lp.iter().rev().find(|(h, _)| *h == hi).or(search.lp.last()).map(|(_, t)| t.clone());
    let result = plan_of(p.ten, moves);
    stats.horizon = result.timesteps;
    stats.lower_bound = proven_lo.min(stats.horizon);
    stats.source = source;
    if proven {
        stats.status = IlpStatus::Optimal;
    }
    let mut why = Vec::new();
    if !proven {
        if !undecided.is_empty() {
            why.push(format!("time limit reached at T = {undecided:?} without an answer"));
        }
        why.push(format!("horizons {proven_lo}..{} not refuted; best plan from the {source}", stats.horizon));
    }
    match stopped {
        // Undecided horizons already say the time ran out.
        Some(s) if s == OUT_OF_TIME && !undecided.is_empty() => {}
        Some(s) => why.insert(0, s),
        None => {}
    }
    if !why.is_empty() {
        stats.reason = Some(why.join("; "));
    }
    stats.solves = search.solves;
    Ok(PhasePlan { plan: result, stats, lp })
}

fn plan_of(ten: &Ten, mut moves: Vec<Move>) -> Plan {
    moves.sort_by_key(|m| (m.step, m.edge, m.chunk));
    let timesteps = moves.iter().map(|m| m.step + ten.edges[m.edge as usize].span).max().unwrap_or(0);
    Plan { moves, timesteps, replacements: 0 }
}

/// Per chunk: who holds it, who still needs it, and the TEN distances from and to them.
struct ChunkInfo {
    /// Chunks with at least one target, with their holders and targets.
    chunks: Vec<Chunk>,
    npus: usize,
}

struct Chunk {
    id: u32,
    holders: Vec<u32>,
    targets: Vec<u32>,
    /// Timesteps from the nearest holder (`u32::MAX`: unreachable).
    from: Vec<u32>,
    /// Timesteps to the nearest target.
    to: Vec<u32>,
}

impl ChunkInfo {
    fn new(p: &Problem) -> ChunkInfo {
        let mut holders = vec![Vec::new(); p.num_chunks];
        for &[v, c] in p.pre {
            holders[c as usize].push(v);
        }
        let mut targets = vec![Vec::new(); p.num_chunks];
        for &[v, c] in p.post {
            if !holders[c as usize].contains(&v) {
                targets[c as usize].push(v);
            }
        }
        Self::from_sets(p.ten, holders, targets)
    }

    fn from_sets(ten: &Ten, holders: Vec<Vec<u32>>, targets: Vec<Vec<u32>>) -> ChunkInfo {
        let chunks = holders
            .into_iter()
            .zip(targets)
            .enumerate()
            .filter(|(_, (_, t))| !t.is_empty())
            .map(|(id, (holders, targets))| Chunk {
                id: id as u32,
                from: ten.distances_from(&holders),
                to: ten.distances_to(&targets),
                holders,
                targets,
            })
            .collect();
        ChunkInfo { chunks, npus: ten.npus }
    }

    /// The farthest target from its chunk's holders.
    fn distance_bound(&self) -> u32 {
        self.chunks
            .iter()
            .flat_map(|c| c.targets.iter().map(|&n| c.from[n as usize]))
            .filter(|&d| d != u32::MAX)
            .max()
            .unwrap_or(0)
    }

    /// Resource-timesteps needed over those available per timestep: every delivery occupies a
    /// resource for at least a timestep, and a chunk with a single target occupies one for at
    /// least its distance.
    fn load_bound(&self, ten: &Ten) -> u32 {
        let mut used = vec![false; ten.resources];
        for e in &ten.edges {
            for &r in &e.resources {
                used[r as usize] = true;
            }
        }
        let resources = used.iter().filter(|&&u| u).count() as u64;
        if resources == 0 {
            return 0;
        }
        let need: u64 = self
            .chunks
            .iter()
            .map(|c| match c.targets.as_slice() {
                [t] => c.from[*t as usize].min(u32::MAX - 1) as u64,
                ts => ts.len() as u64,
            })
            .sum();
        need.div_ceil(resources).min(u32::MAX as u64) as u32
    }

    /// The distance bound, and per NPU the time its ingress needs for the chunks it lacks:
    /// edges into an NPU that share their last resource (the link into it) deliver one chunk
    /// at a time, each taking at least the group's shortest span.
    fn lower_bound(&self, ten: &Ten) -> u32 {
        // Per NPU: chunks it must receive, and the earliest any of them can arrive.
        let mut needed = vec![(0u64, u32::MAX); self.npus];
        // Per NPU: chunks only it holds that must leave it, and the least of their farthest
        // target distances.
        let mut sourced = vec![(0u64, u32::MAX); self.npus];
        for c in &self.chunks {
            for &n in &c.targets {
                let slot = &mut needed[n as usize];
                slot.0 += 1;
                slot.1 = slot.1.min(c.from[n as usize]);
            }
            if let [s] = c.holders.as_slice() {
                let far = c.targets.iter().map(|&t| c.from[t as usize]).filter(|&d| d != u32::MAX).max();
                if let Some(far) = far {
                    let slot = &mut sourced[*s as usize];
                    slot.0 += 1;
                    slot.1 = slot.1.min(far);
                }
            }
        }
        let mut bound = self.distance_bound().max(self.load_bound(ten));
        for n in 0..self.npus {
            let (k, first) = needed[n];
            if k > 0 && first != u32::MAX {
                // Edges into n that share their last resource (the link into n) deliver one
                // chunk at a time.
                let spans = port_spans(ten, ten.in_edges(n), |e| e.resources.last().copied());
                bound = bound.max(port_bound(&spans, k, first));
            }
            let (k, far) = sourced[n];
            if k > 0 {
                // Each chunk only n holds leaves it at least once, one at a time per group of
                // edges sharing their first resource; the one that leaves last still has to
                // reach its farthest target.
                let spans = port_spans(ten, ten.out_edges(n), |e| e.resources.first().copied());
                if let Some(&min_span) = spans.first() {
                    let last_departure = (k.div_ceil(spans.len() as u64) - 1) * min_span as u64;
                    bound = bound.max(port_bound(&spans, k, 0));
                    bound = bound.max((last_departure + far as u64).min(u32::MAX as u64) as u32);
                }
            }
        }
        bound
    }
}

/// The least span of each group of an NPU's TEN edges that share a resource (`key`).
fn port_spans(ten: &Ten, edges: &[u32], key: impl Fn(&crate::ten::TenEdge) -> Option<u32>) -> Vec<u32> {
    let mut groups: HashMap<Option<u32>, u32> = HashMap::new();
    for &e in edges {
        let e = &ten.edges[e as usize];
        let span = groups.entry(key(e)).or_insert(u32::MAX);
        *span = (*span).min(e.span);
    }
    let mut spans: Vec<u32> = groups.into_values().collect();
    spans.sort_unstable();
    spans
}

/// `k` chunks through port groups with least spans `spans`, none arriving before `first`: a
/// group's arrivals are at least its span apart, so some group's last one is no earlier than
/// `first + (⌈k/G⌉−1)·min span`; and over T timesteps a group of span s carries at most ⌊T/s⌋.
fn port_bound(spans: &[u32], k: u64, first: u32) -> u32 {
    let Some(&min_span) = spans.first() else { return 0 };
    let capacity = |t: u64| spans.iter().map(|&s| t / s as u64).sum::<u64>();
    let (mut lo, mut hi) = (1u64, k * min_span as u64);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if capacity(mid) >= k { hi = mid } else { lo = mid + 1 }
    }
    let turns = first as u64 + (k.div_ceil(spans.len() as u64) - 1) * min_span as u64;
    lo.max(turns).min(u32::MAX as u64) as u32
}

#[derive(Clone, Copy, PartialEq)]
enum Goal {
    /// Is horizon T feasible? Every target held at T, earlier arrivals rewarded (TACOS's sum
    /// of holds); HiGHS stops at the first solution, which answers the question.
    Probe,
    /// A time-clustering window: no target required; deliveries, and progress towards the
    /// targets, rewarded.
    Window,
}

enum Outcome {
    Solved(Vec<Move>),
    Infeasible,
    /// The solve's own time limit passed without an answer; time is left for other horizons.
    Undecided,
    /// No time left (or the model cannot be built): the search stops.
    OutOfTime(String),
}

struct Search<'a> {
    p: &'a Problem<'a>,
    info: &'a ChunkInfo,
    opts: &'a IlpOptions,
    deadline: Instant,
    cancelled: &'a dyn Fn() -> bool,
    solves: Vec<SolveRecord>,
    /// LP texts of the models solved, by horizon (only with `keep_lp`).
    lp: Vec<(u32, String)>,
    /// The next solve may use all the time left (a last try), not a probe's third.
    whole_budget: bool,
}

impl Search<'_> {
    fn time_left(&self) -> f64 {
        self.deadline.saturating_duration_since(Instant::now()).as_secs_f64()
    }

    fn solve(&mut self, horizon: u32, goal: Goal, start: Option<&[Move]>) -> Result<Outcome, IlpError> {
        self.solve_with(self.info, horizon, goal, start)
    }

    fn solve_with(
        &mut self,
        info: &ChunkInfo,
        horizon: u32,
        goal: Goal,
        start: Option<&[Move]>,
    ) -> Result<Outcome, IlpError> {
        if (self.cancelled)() {
            return Err(IlpError::Cancelled);
        }
        let left = self.time_left();
        if left < 0.01 {
            return Ok(Outcome::OutOfTime(OUT_OF_TIME.into()));
        }
        let built_at = Instant::now();
        let model = match Model::build(self.p.ten, info, horizon, goal, self.opts.ignore_congestion, &|| {
            (self.cancelled)() || Instant::now() >= self.deadline
        }) {
            Ok(Some(m)) => m,
            Ok(None) => {
                // Some target is farther than the horizon: infeasible without a solve.
                self.solves.push(SolveRecord {
                    kind: goal.name(),
                    horizon,
                    result: SolveResult::Infeasible,
                    variables: 0,
                    constraints: 0,
                    build_ms: ms(built_at),
                    highs_ms: 0.0,
                    mip_gap: None,
                });
                return Ok(Outcome::Infeasible);
            }
            Err(BuildStop::Interrupted) => {
                if (self.cancelled)() {
                    return Err(IlpError::Cancelled);
                }
                return Ok(Outcome::OutOfTime(format!("time limit reached while building the T = {horizon} model")));
            }
            Err(BuildStop::TooLarge(n)) => {
                return Ok(Outcome::OutOfTime(format!(
                    "the T = {horizon} model needs over {n} variables (limit {MAX_VARIABLES})"
                )));
            }
        };
        let build_ms = ms(built_at);
        if self.opts.keep_lp {
            self.lp.push((horizon, model.lp_text(self.p.ten, horizon, goal)));
        }
        let mut build_ms = build_ms;
        // Repair first: the best plan's early deliveries fixed, HiGHS completes the rest.
        // Presolve shrinks this to a small MIP; a solution answers the probe. Neither
        // "infeasible" nor a time-out proves anything here: the full model follows.
        for percent in REPAIR_KEEP_PERCENT {
            let Some(plan) = start else { break };
            let fixed = model.partial_start(self.p.ten, info, plan, horizon * percent / 100);
            if fixed.is_empty() {
                break;
            }
            let out = self.run(&model, horizon, "repair", &fixed, build_ms)?;
            build_ms = 0.0;
            if let (SolveResult::Optimal | SolveResult::Feasible, Some(values)) = (out.result, out.values) {
                return Ok(Outcome::Solved(model.moves(&values)));
            }
            if (self.cancelled)() {
                return Err(IlpError::Cancelled);
            }
        }
        let out = self.run(&model, horizon, goal.name(), &[], build_ms)?;
        Ok(match (out.result, out.values) {
            (SolveResult::Infeasible, _) => Outcome::Infeasible,
            (_, Some(values)) => Outcome::Solved(model.moves(&values)),
            (_, None) => Outcome::Undecided,
        })
    }

    /// One HiGHS solve of `model` with the columns `fixed` at 1, recorded in `solves`.
    fn run(
        &mut self,
        model: &Model,
        horizon: u32,
        kind: &'static str,
        fixed: &[u32],
        build_ms: f64,
    ) -> Result<Solved, IlpError> {
        // A probe gets at most a third of what is left (at least a second), so one hard
        // horizon cannot use up the budget; a window or a last try may use all of it.
        let left = self.time_left();
        let probe = kind != Goal::Window.name();
        let share = if probe && !self.whole_budget { (left / 3.0).max(1.0).min(left) } else { left };
        let limit = match self.opts.solve_time_limit_s {
            Some(cap) => cap.min(share),
            None => share,
        };
        // The limit runs from now: handing the model to HiGHS counts against it.
        let deadline = Instant::now() + std::time::Duration::from_secs_f64(limit.max(0.01));
        let goal = if probe { Goal::Probe } else { Goal::Window };
        let out = model.solve(deadline, self.opts.threads, goal, fixed, self.cancelled)?;
        let (build_ms, highs_ms) = (build_ms + out.convert_ms, out.highs_ms);
        tracing::debug!(
            horizon,
            kind,
            variables = model.cols.len(),
            constraints = model.rows.len(),
            fixed = fixed.len(),
            result = ?out.result,
            highs_ms,
            "HiGHS solve"
        );
        self.solves.push(SolveRecord {
            kind,
            horizon,
            result: out.result,
            variables: model.cols.len(),
            constraints: model.rows.len() + fixed.len(),
            build_ms,
            highs_ms,
            mip_gap: out.mip_gap,
        });
        Ok(out)
    }

    /// TACOS V-C: windows of `w` timesteps from the current holders, one after another, then
    /// shortest paths for whatever is left. Returns the moves and whether recovery was needed.
    fn clustered(&mut self, w: u32) -> Result<(Vec<Move>, bool), IlpError> {
        let ten = self.p.ten;
        let w = w.max(ten.edges.iter().map(|e| e.span).max().unwrap_or(1));
        let mut holders: Vec<Vec<u32>> = vec![Vec::new(); self.p.num_chunks];
        for &[v, c] in self.p.pre {
            holders[c as usize].push(v);
        }
        let mut held: std::collections::HashSet<(u32, u32)> = self.p.pre.iter().map(|&[v, c]| (v, c)).collect();
        let mut moves = Vec::new();
        let mut offset = 0u32;
        loop {
            let targets: Vec<Vec<u32>> = {
                let mut t = vec![Vec::new(); self.p.num_chunks];
                for &[v, c] in self.p.post {
                    if !held.contains(&(v, c)) {
                        t[c as usize].push(v);
                    }
                }
                t
            };
            if targets.iter().all(Vec::is_empty) {
                return Ok((moves, false));
            }
            let info = ChunkInfo::from_sets(ten, holders.clone(), targets);
            let window = match self.solve_with(&info, w, Goal::Window, None)? {
                Outcome::Solved(m) if !m.is_empty() => m,
                _ => break,
            };
            for m in window {
                let e = &ten.edges[m.edge as usize];
                if held.insert((e.dst, m.chunk)) {
                    holders[m.chunk as usize].push(e.dst);
                }
                moves.push(Move { step: m.step + offset, ..m });
            }
            offset += w;
        }
        let missing: Vec<[u32; 2]> = self.p.post.iter().copied().filter(|&[v, c]| !held.contains(&(v, c))).collect();
        let start = moves.iter().map(|m| m.step + ten.edges[m.edge as usize].span).max().unwrap_or(0);
        moves.extend(recover(ten, &mut holders, &missing, start));
        Ok((moves, true))
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

impl Goal {
    fn name(self) -> &'static str {
        match self {
            Goal::Probe => "probe",
            Goal::Window => "window",
        }
    }
}

/// TACOS V-B: each missing (npu, chunk) gets the chunk over a shortest TEN path from its
/// nearest holder, every hop at the first time from `start` on when the edge's resources are
/// free for its whole span. Holders grow as chunks pass, so later paths may start nearer.
pub fn recover(ten: &Ten, holders: &mut [Vec<u32>], missing: &[[u32; 2]], start: u32) -> Vec<Move> {
    let mut busy: std::collections::HashSet<(u32, u32)> = std::collections::HashSet::new();
    let mut out = Vec::new();
    for &[n, c] in missing {
        let hs = &holders[c as usize];
        if hs.contains(&n) {
            continue;
        }
        let Some(path) = shortest_path(ten, hs, n) else { continue };
        let mut ready = start;
        for e in path {
            let edge = &ten.edges[e as usize];
            let mut t = ready;
            while (t..t + edge.span).any(|s| edge.resources.iter().any(|&r| busy.contains(&(r, s)))) {
                t += 1;
            }
            for s in t..t + edge.span {
                for &r in &edge.resources {
                    busy.insert((r, s));
                }
            }
            out.push(Move { step: t, edge: e, chunk: c });
            holders[c as usize].push(edge.dst);
            ready = t + edge.span;
        }
    }
    out
}

/// Edge ids of a shortest (in timesteps) path from the nearest of `from` to `to`.
fn shortest_path(ten: &Ten, from: &[u32], to: u32) -> Option<Vec<u32>> {
    let (dist, via) = ten.shortest_tree(from);
    if dist[to as usize] == u32::MAX {
        return None;
    }
    let mut path = Vec::new();
    let mut v = to;
    while dist[v as usize] != 0 {
        let e = via[v as usize];
        path.push(e);
        v = ten.edges[e as usize].src;
    }
    path.reverse();
    Some(path)
}

/// A column: `sent[chunk, edge, t]` or `hold[chunk, npu, t]`.
#[derive(Clone, Copy)]
enum Col {
    Sent { c: u32, e: u32, t: u32 },
    Hold { c: u32, n: u32, t: u32 },
}

/// A constraint family, for names in an LP dump.
#[derive(Clone, Copy)]
enum Family {
    /// Holding is monotone and a new hold needs a delivery (one delivery at most).
    Holding { c: u32, n: u32, t: u32 },
    /// A send needs the source to hold the chunk when it starts.
    Consistency { c: u32, e: u32, t: u32 },
    /// One chunk per resource per timestep.
    Congestion { r: u32, t: u32 },
    /// The target holds the chunk at the horizon.
    Post { c: u32, n: u32 },
}

struct Row {
    family: Family,
    terms: Vec<(u32, f64)>,
    lo: f64,
    hi: f64,
}

enum BuildStop {
    Interrupted,
    TooLarge(usize),
}

struct Model {
    cols: Vec<Col>,
    obj: Vec<f64>,
    rows: Vec<Row>,
    /// Per (chunk, npu) with hold columns: the first timestep and the column of hold at it.
    holds: HashMap<(u32, u32), (u32, u32)>,
    /// Column of `sent[c,e,t]`.
    sents: HashMap<(u32, u32, u32), u32>,
    horizon: u32,
}

impl Model {
    /// `Ok(None)`: some target cannot be reached within the horizon (trivially infeasible).
    fn build(
        ten: &Ten,
        info: &ChunkInfo,
        horizon: u32,
        goal: Goal,
        ignore_congestion: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Model>, BuildStop> {
        let mut m = Model {
            cols: Vec::new(),
            obj: Vec::new(),
            rows: Vec::new(),
            holds: HashMap::new(),
            sents: HashMap::new(),
            horizon,
        };
        let soft = goal == Goal::Window;
        let mut congestion: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        let mut polled = 0usize;
        for ch in &info.chunks {
            if !soft && ch.targets.iter().any(|&n| ch.from[n as usize] > horizon) {
                return Ok(None);
            }
            let holder = |n: u32| ch.holders.contains(&n);
            // Candidate sends: after the source can have the chunk, early enough for the
            // destination to still reach a target (a window only needs progress).
            let mut sends: Vec<(u32, u32, u32)> = Vec::new(); // (edge, t, dst)
            for (ei, e) in ten.edges.iter().enumerate() {
                let (from, to_dst) = (ch.from[e.src as usize], ch.to[e.dst as usize]);
                if from == u32::MAX || to_dst == u32::MAX || holder(e.dst) {
                    continue;
                }
                let last = if soft {
                    if to_dst != 0 && to_dst >= ch.to[e.src as usize] {
                        continue; // a window relays only towards the targets
                    }
                    horizon.checked_sub(e.span)
                } else {
                    horizon.checked_sub(e.span + to_dst)
                };
                let Some(last) = last else { continue };
                for t in from..=last {
                    sends.push((ei as u32, t, e.dst));
                }
            }
            // Hold columns from each receiving NPU's earliest arrival to the horizon.
            let mut first: HashMap<u32, u32> = HashMap::new();
            for &(e, t, dst) in &sends {
                let a = t + ten.edges[e as usize].span;
                let f = first.entry(dst).or_insert(a);
                *f = (*f).min(a);
            }
            let mut receivers: Vec<(u32, u32)> = first.into_iter().collect();
            receivers.sort_unstable();
            for &(n, t0) in &receivers {
                let base = m.cols.len() as u32;
                m.holds.insert((ch.id, n), (t0, base));
                let target = ch.to[n as usize] == 0;
                for t in t0..=horizon {
                    m.cols.push(Col::Hold { c: ch.id, n, t });
                    m.obj.push(match goal {
                        Goal::Probe => f64::from(target),
                        Goal::Window if target => 1.0,
                        Goal::Window => 0.5 / (1.0 + ch.to[n as usize] as f64),
                    });
                }
            }
            if !soft {
                for &n in &ch.targets {
                    if !m.holds.contains_key(&(ch.id, n)) {
                        return Ok(None);
                    }
                }
            }
            // Send columns whose source can hold the chunk at their start.
            let mut arrivals: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
            for &(e, t, dst) in &sends {
                let edge = &ten.edges[e as usize];
                let src_hold = if holder(edge.src) {
                    None
                } else {
                    match m.holds.get(&(ch.id, edge.src)) {
                        Some(&(t0, base)) if t >= t0 => Some(base + (t - t0)),
                        _ => continue,
                    }
                };
                let col = m.cols.len() as u32;
                m.cols.push(Col::Sent { c: ch.id, e, t });
                m.obj.push(0.0);
                m.sents.insert((ch.id, e, t), col);
                arrivals.entry((dst, t + edge.span)).or_default().push(col);
                if let Some(h) = src_hold {
                    m.rows.push(Row {
                        family: Family::Consistency { c: ch.id, e, t },
                        terms: vec![(col, 1.0), (h, -1.0)],
                        lo: f64::NEG_INFINITY,
                        hi: 0.0,
                    });
                }
                if !ignore_congestion {
                    for &r in &edge.resources {
                        for s in t..t + edge.span {
                            congestion.entry((r, s)).or_default().push(col);
                        }
                    }
                }
                polled += 1;
                if polled.is_multiple_of(4096) {
                    if stop() {
                        return Err(BuildStop::Interrupted);
                    }
                    if m.cols.len() > MAX_VARIABLES {
                        return Err(BuildStop::TooLarge(m.cols.len()));
                    }
                }
            }
            for &(n, t0) in &receivers {
                let base = m.holds[&(ch.id, n)].1;
                for t in t0..=horizon {
                    let h = base + (t - t0);
                    let mut terms = vec![(h, 1.0)];
                    if t > t0 {
                        terms.push((h - 1, -1.0));
                    }
                    for &a in arrivals.get(&(n, t)).map(Vec::as_slice).unwrap_or(&[]) {
                        terms.push((a, -1.0));
                    }
                    m.rows.push(Row { family: Family::Holding { c: ch.id, n, t }, terms, lo: 0.0, hi: 0.0 });
                }
            }
            if !soft {
                for &n in &ch.targets {
                    let (t0, base) = m.holds[&(ch.id, n)];
                    m.rows.push(Row {
                        family: Family::Post { c: ch.id, n },
                        terms: vec![(base + (horizon - t0), 1.0)],
                        lo: 1.0,
                        hi: 1.0,
                    });
                }
            }
            if m.cols.len() > MAX_VARIABLES {
                return Err(BuildStop::TooLarge(m.cols.len()));
            }
        }
        let mut keys: Vec<(u32, u32)> = congestion.keys().copied().filter(|k| congestion[k].len() > 1).collect();
        keys.sort_unstable();
        for (r, t) in keys {
            let terms = congestion[&(r, t)].iter().map(|&c| (c, 1.0)).collect();
            m.rows.push(Row { family: Family::Congestion { r, t }, terms, lo: f64::NEG_INFINITY, hi: 1.0 });
        }
        Ok(Some(m))
    }

    /// Columns to fix at 1 from a complete plan with a longer horizon: its deliveries that
    /// arrive by `keep_until` (≤ the horizon), with their holds; the rest is left free.
    /// Deliveries the model has no column for (useless at this horizon) are skipped.
    fn partial_start(&self, ten: &Ten, info: &ChunkInfo, plan: &[Move], keep_until: u32) -> Vec<u32> {
        let tracked: std::collections::HashSet<u32> = info.chunks.iter().map(|c| c.id).collect();
        // Earliest arrival per (chunk, npu); later deliveries are dropped (holding is monotone).
        let mut arrival: HashMap<(u32, u32), (u32, Move)> = HashMap::new();
        for m in plan {
            let e = &ten.edges[m.edge as usize];
            let a = m.step + e.span;
            if !tracked.contains(&m.chunk) || a > keep_until.min(self.horizon) {
                continue;
            }
            let slot = arrival.entry((m.chunk, e.dst)).or_insert((a, *m));
            if a < slot.0 {
                *slot = (a, *m);
            }
        }
        let mut fixed = Vec::new();
        let mut keys: Vec<_> = arrival.into_iter().collect();
        keys.sort_unstable_by_key(|&(k, (a, _))| (k, a));
        for ((c, n), (a, mv)) in keys {
            let (Some(&col), Some(&(t0, base))) = (self.sents.get(&(c, mv.edge, mv.step)), self.holds.get(&(c, n)))
            else {
                continue;
            };
            if a < t0 {
                continue;
            }
            fixed.push(col);
            fixed.extend((a..=self.horizon).map(|t| base + (t - t0)));
        }
        fixed
    }

    fn moves(&self, values: &[f64]) -> Vec<Move> {
        self.cols
            .iter()
            .zip(values)
            .filter_map(|(col, &v)| match *col {
                Col::Sent { c, e, t } if v > 0.5 => Some(Move { step: t, edge: e, chunk: c }),
                _ => None,
            })
            .collect()
    }

    fn solve(
        &self,
        deadline: Instant,
        threads: u32,
        goal: Goal,
        fixed: &[u32],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Solved, IlpError> {
        use good_lp::{Expression, ProblemVariables, SolverModel, variable};
        let converting = Instant::now();
        let mut vars = ProblemVariables::new();
        let mut lower = vec![0.0; self.cols.len()];
        for &c in fixed {
            lower[c as usize] = 1.0;
        }
        let cols: Vec<good_lp::Variable> = lower.iter().map(|&lo| vars.add(variable().binary().min(lo))).collect();
        let mut objective = Expression::with_capacity(self.cols.len());
        for (v, &w) in cols.iter().zip(&self.obj) {
            if w != 0.0 {
                objective.add_mul(w, *v);
            }
        }
        let mut problem = vars.maximise(objective).using(good_lp::solvers::highs::highs);
        for row in &self.rows {
            let mut e = Expression::with_capacity(row.terms.len());
            for &(c, k) in &row.terms {
                e.add_mul(k, cols[c as usize]);
            }
            let constraint = if row.lo == row.hi {
                e.eq(row.lo)
            } else if row.lo == f64::NEG_INFINITY {
                e.leq(row.hi)
            } else {
                e.geq(row.lo)
            };
            problem.add_constraint(constraint);
        }
        let mut model = problem.try_into_inner().map_err(|e| IlpError::Solver(e.to_string()))?;
        let convert_ms = ms(converting);
        model.make_quiet();
        let time_limit_s = deadline.saturating_duration_since(Instant::now()).as_secs_f64().max(0.01);
        let _ = model.try_set_option("time_limit", time_limit_s);
        let _ = model.try_set_option("threads", threads.max(1) as i32);
        let _ = model.try_set_option("random_seed", 0);
        if goal == Goal::Probe {
            // Feasibility is the question: the first solution answers it.
            let _ = model.try_set_option("mip_max_improving_sols", 1);
            // And any solution is good enough: a gap of 100% stops on solutions found by
            // heuristics that do not count as "improving".
            let _ = model.try_set_option("mip_rel_gap", 1.0);
        }
        // HiGHS calls back during the solve: its log goes to tracing, and the cancel flag is
        // polled at its interrupt points, so a cancelled solve stops within moments.
        let hooks = Hooks { cancelled };
        let log = tracing::enabled!(target: "ccsynth::highs", tracing::Level::DEBUG);
        if log {
            let _ = model.try_set_option("output_flag", true);
            let _ = model.try_set_option("log_to_console", false);
        }
        // SAFETY: `hooks` outlives the solve (it is dropped after `try_solve` returns), and
        // `on_highs_event` only reads it through a shared reference.
        unsafe {
            let ptr = model.as_mut_ptr();
            highs_sys::Highs_setCallback(ptr, Some(on_highs_event), &hooks as *const Hooks as *mut std::ffi::c_void);
            for kind in [
                highs_sys::kHighsCallbackMipInterrupt,
                highs_sys::kHighsCallbackSimplexInterrupt,
                highs_sys::kHighsCallbackIpmInterrupt,
            ] {
                highs_sys::Highs_startCallback(ptr, kind);
            }
            if log {
                highs_sys::Highs_startCallback(ptr, highs_sys::kHighsCallbackLogging);
            }
        }
        let solving = Instant::now();
        let solved = model.try_solve().map_err(|e| IlpError::Solver(format!("{e:?}")))?;
        drop(hooks);
        let highs_ms = ms(solving);
        use highs::{HighsModelStatus as S, HighsSolutionStatus};
        let has_solution = solved.primal_solution_status() == HighsSolutionStatus::Feasible;
        let values = has_solution.then(|| solved.get_solution().columns().to_vec());
        let mip_gap = has_solution.then(|| solved.mip_gap()).filter(|g| g.is_finite());
        let result = match solved.status() {
            S::Infeasible => SolveResult::Infeasible,
            S::Optimal | S::ObjectiveBound | S::ObjectiveTarget => {
                if has_solution {
                    SolveResult::Optimal
                } else {
                    SolveResult::TimeLimit
                }
            }
            // The first-solution limit of a probe.
            S::ReachedSolutionLimit => match (has_solution, goal) {
                (true, Goal::Probe) => SolveResult::Optimal,
                (true, _) => SolveResult::Feasible,
                (false, _) => SolveResult::TimeLimit,
            },
            S::ReachedTimeLimit | S::ReachedInterrupt | S::ReachedIterationLimit | S::ReachedMemoryLimit => {
                if has_solution {
                    SolveResult::Feasible
                } else {
                    SolveResult::TimeLimit
                }
            }
            other => return Err(IlpError::Solver(format!("unexpected model status {other:?}"))),
        };
        Ok(Solved { result, values, mip_gap, convert_ms, highs_ms })
    }

    /// The model in CPLEX LP format, with readable names.
    fn lp_text(&self, ten: &Ten, horizon: u32, goal: Goal) -> String {
        let name = |i: u32| -> String {
            match self.cols[i as usize] {
                Col::Sent { c, e, t } => {
                    let edge = &ten.edges[e as usize];
                    format!("sent_c{c}_{}to{}_e{e}_t{t}", edge.src, edge.dst)
                }
                Col::Hold { c, n, t } => format!("hold_c{c}_n{n}_t{t}"),
            }
        };
        let mut s = String::new();
        let _ = writeln!(s, "\\ ccsynth ILP ({}): horizon {horizon} timesteps", goal.name());
        let _ = writeln!(s, "\\ {} variables, {} constraints", self.cols.len(), self.rows.len());
        s.push_str("Maximize\n obj:");
        let mut terms = 0;
        for (i, &w) in self.obj.iter().enumerate() {
            if w != 0.0 {
                let _ = write!(s, " + {w} {}", name(i as u32));
                terms += 1;
                if terms % 6 == 0 {
                    s.push_str("\n ");
                }
            }
        }
        if terms == 0 {
            s.push_str(" 0 ");
            if let Some(i) = (0..self.cols.len()).next() {
                let _ = write!(s, "{}", name(i as u32));
            }
        }
        s.push_str("\nSubject To\n");
        for row in &self.rows {
            let label = match row.family {
                Family::Holding { c, n, t } => format!("holding_c{c}_n{n}_t{t}"),
                Family::Consistency { c, e, t } => format!("consistency_c{c}_e{e}_t{t}"),
                Family::Congestion { r, t } => format!("congestion_r{r}_t{t}"),
                Family::Post { c, n } => format!("post_c{c}_n{n}"),
            };
            let _ = write!(s, " {label}:");
            for (k, &(c, coef)) in row.terms.iter().enumerate() {
                let sign = if coef < 0.0 { '-' } else { '+' };
                let mag = coef.abs();
                if mag == 1.0 {
                    let _ = write!(s, " {sign} {}", name(c));
                } else {
                    let _ = write!(s, " {sign} {mag} {}", name(c));
                }
                if k % 6 == 5 {
                    s.push_str("\n   ");
                }
            }
            if row.lo == row.hi {
                let _ = writeln!(s, " = {}", row.lo);
            } else if row.lo == f64::NEG_INFINITY {
                let _ = writeln!(s, " <= {}", row.hi);
            } else {
                let _ = writeln!(s, " >= {}", row.lo);
            }
        }
        s.push_str("Binary\n");
        for i in 0..self.cols.len() {
            let _ = writeln!(s, " {}", name(i as u32));
        }
        s.push_str("End\n");
        s
    }
}

/// What HiGHS's callback sees.
struct Hooks<'a> {
    cancelled: &'a dyn Fn() -> bool,
}

/// HiGHS's C callback: log lines to tracing (target `ccsynth::highs`, debug), and an interrupt
/// when the cancel flag is set. Never unwinds into C.
unsafe extern "C" fn on_highs_event(
    kind: std::ffi::c_int,
    message: *const std::ffi::c_char,
    _out: *const highs_sys::HighsCallbackDataOut,
    data_in: *mut highs_sys::HighsCallbackDataIn,
    user: *mut std::ffi::c_void,
) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if user.is_null() {
            return;
        }
        // SAFETY: `user` is the `Hooks` that `Model::solve` registered and keeps alive.
        let hooks = unsafe { &*(user as *const Hooks) };
        if kind == highs_sys::kHighsCallbackLogging as std::ffi::c_int {
            if !message.is_null() {
                // SAFETY: HiGHS passes a NUL-terminated string valid for the call.
                let text = unsafe { std::ffi::CStr::from_ptr(message) }.to_string_lossy();
                tracing::debug!(target: "ccsynth::highs", "{}", text.trim_end());
            }
        } else if !data_in.is_null() && (hooks.cancelled)() {
            // SAFETY: HiGHS passes a valid input struct for interrupt callbacks.
            unsafe { (*data_in).user_interrupt = 1 };
        }
    }));
}

struct Solved {
    result: SolveResult,
    values: Option<Vec<f64>>,
    mip_gap: Option<f64>,
    /// Handing the model to HiGHS (through good_lp): part of model building.
    convert_ms: f64,
    highs_ms: f64,
}
