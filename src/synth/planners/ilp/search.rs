//! The search for the least feasible horizon: each probe (a repair of the best plan, then the
//! full model) under its share of the work budget, the bisection over horizons between the
//! lower bound and the greedy's, and why a search stopped short.
//!
//! Every share is counted in work (HiGHS's LP iterations, `work_seconds`), not in wall time:
//! which horizons are decided, and so the plan, are the same on a busy machine as on an idle
//! one. Only the wall clock's deadline, the request's time limit, can cut a search short
//! differently from run to run, and a search it cuts says so (`cut_by_time_limit`).

use super::chunks::ChunkInfo;
use super::extract::plan_of;
use super::model::{BuildStop, Congestion, Goal, Model};
use super::solve::Solved;
use super::symmetric::{Blocks, Classes, Symmetry, congestion_free};
use super::{
    IlpOptions, IlpStatus, PhasePlan, PhaseStats, SECONDS_PER_LP_ITERATION, SolveRecord, SolveResult, ms, work_seconds,
};
use crate::synth::phase::{Move, Plan, Problem};
use crate::synth::{SynthError, prune_dead_ends};
use std::fmt;
use std::time::Instant;

/// A probe at horizon T first tries to repair the best plan: its deliveries that arrive by
/// these shares of T are fixed and HiGHS completes the rest, a small MIP after presolve.
/// Measured (docs/BENCHMARKS.md): on Ring(2)_FC(4)_Switch(4), torus:4x4 and mesh:4x4
/// all-to-all, repairs found in under a second horizons the full model did not in 20 s.
const REPAIR_KEEP_PERCENT: [u32; 2] = [80, 50];

/// Why a search stopped before deciding every horizon; `Display` is the text reported in
/// `PhaseStats::reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StopReason {
    /// No time left for another solve (the wall clock's deadline).
    OutOfTime,
    /// The work budget is spent.
    OutOfWork,
    /// The time ran out while building the model at this horizon.
    OutOfTimeBuilding { horizon: u32 },
    /// The model at this horizon needs more than `MAX_VARIABLES` variables or `MAX_NONZEROS`
    /// nonzeros (`what`: over `count`, of at most `limit`).
    TooLarge { horizon: u32, what: &'static str, count: usize, limit: usize },
    /// A link's transfer spans `span` timesteps of the grid, over `MAX_SPAN`.
    TooFine { span: u32 },
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StopReason::OutOfTime => f.write_str("time limit reached"),
            StopReason::OutOfWork => f.write_str("work budget spent"),
            StopReason::OutOfTimeBuilding { horizon } => {
                write!(f, "time limit reached while building the T = {horizon} model")
            }
            StopReason::TooLarge { horizon, what, count, limit } => {
                write!(f, "the T = {horizon} model needs over {count} {what} (limit {limit})")
            }
            StopReason::TooFine { span } => {
                write!(
                    f,
                    "a link's transfer spans {span} timesteps of this grid (limit {}): too fine a grid",
                    super::MAX_SPAN
                )
            }
        }
    }
}

pub(super) enum Outcome {
    Solved(Vec<Move>),
    Infeasible,
    /// The solve's share was spent without an answer (of the work budget, or the wall clock's
    /// cap on one solve); some is left for other horizons.
    Undecided,
    /// No time left (or the model cannot be built): the search stops.
    Stopped(StopReason),
}

pub(super) struct Search<'a> {
    pub(super) p: &'a Problem<'a>,
    info: &'a ChunkInfo,
    opts: &'a IlpOptions,
    /// The work budget of the search, nominal seconds (`work_seconds`), and what is spent.
    budget_s: f64,
    spent_s: f64,
    /// The wall clock's deadline: past it nothing is started, and a solve running is stopped.
    deadline: Instant,
    /// The deadline stopped something: the result may differ from run to run.
    cut_by_time: bool,
    cancelled: &'a dyn Fn() -> bool,
    pub(super) solves: Vec<SolveRecord>,
    /// LP texts of the models solved, by horizon (only with `keep_lp`).
    pub(super) lp: Vec<(u32, String)>,
    /// The next solve may use all the work left (a last try), not a probe's third.
    whole_budget: bool,
    /// Seconds the last model took to build: a model that could not be built and solved
    /// before the deadline is not started.
    last_build_s: f64,
    /// Set while solving a symmetric model (`symmetric`): its congestion classes.
    classes: Option<&'a Classes>,
    /// The most work the next solves may take, nominal seconds (a quick try's).
    cap_s: Option<f64>,
}

impl<'a> Search<'a> {
    pub(super) fn new(
        p: &'a Problem<'a>,
        info: &'a ChunkInfo,
        opts: &'a IlpOptions,
        budget_s: f64,
        deadline: Instant,
        cancelled: &'a dyn Fn() -> bool,
    ) -> Search<'a> {
        Search {
            p,
            info,
            opts,
            budget_s,
            spent_s: 0.0,
            deadline,
            cut_by_time: false,
            cancelled,
            solves: Vec::new(),
            lp: Vec::new(),
            whole_budget: false,
            last_build_s: 0.0,
            classes: None,
            cap_s: None,
        }
    }
}

/// Where a horizon search stands, kept between its steps: T is searched in [lo, hi).
struct Range {
    /// Every horizon below this is refuted.
    proven_lo: u32,
    lo: u32,
    /// Known feasible: the best plan's horizon (or the greedy's).
    hi: u32,
    /// The best plan found, if better than the greedy's.
    best: Option<Vec<Move>>,
    stopped: Option<StopReason>,
    /// Horizons whose solve spent its share without an answer.
    undecided: Vec<u32>,
}

impl<'a> Search<'a> {
    /// Wall-clock seconds to the deadline.
    fn time_left(&self) -> f64 {
        self.deadline.saturating_duration_since(Instant::now()).as_secs_f64()
    }

    /// Nominal seconds of work left in the budget: what shares are taken from.
    fn work_left(&self) -> f64 {
        (self.budget_s - self.spent_s).max(0.0)
    }

    /// A plan a solve found, without deliveries that lead nowhere (a probe has no objective),
    /// and its horizon.
    fn settled(&self, moves: Vec<Move>) -> (u32, Vec<Move>) {
        let p = self.p;
        let moves = prune_dead_ends(p.ten, p.num_chunks, moves, p.post);
        (plan_of(p.ten, moves.clone()).timesteps, moves)
    }

    fn congestion(&self) -> Congestion<'a> {
        match self.classes {
            Some(classes) => Congestion::PerClass(classes),
            None => Congestion::of(self.opts.ignore_congestion),
        }
    }

    /// A symmetric plan (`symmetric`): one NPU's chunks spread by a model whose congestion
    /// rows count every translate, at horizons from `lb` up, until one is feasible or its
    /// share of the work is spent. The translated plan, and its horizon, when one is below
    /// `ub` (the greedy's).
    pub(super) fn symmetric(
        &mut self,
        sym: &'a Symmetry,
        blocks: &Blocks,
        lb: u32,
        ub: u32,
    ) -> Result<Option<(u32, Vec<Move>)>, SynthError> {
        let pattern = self.info.only(&blocks.blocks[0]);
        // A third of the work at most; each horizon a third of what is left of it (at least a
        // nominal second).
        let until = self.spent_s + self.work_left() / 3.0;
        let mut found = None;
        for t in lb..ub {
            let left = until - self.spent_s;
            if left <= 0.0 {
                break;
            }
            (self.classes, self.cap_s) = (Some(&sym.classes), Some((left / 3.0).max(1.0).min(left)));
            let out = self.solve_with(&pattern, t, Goal::Probe, None);
            (self.classes, self.cap_s) = (None, None);
            match out? {
                Outcome::Solved(moves) => {
                    let Some(all) = sym.translate(self.p.ten, blocks, &moves) else { break };
                    // By construction; checked, since a plan claimed optimal must be one.
                    if !congestion_free(self.p.ten, &all) {
                        break;
                    }
                    let (horizon, all) = self.settled(all);
                    if horizon < ub {
                        found = Some((horizon, all));
                    }
                    break;
                }
                // Undecided: a larger horizon may still be found in the time left.
                Outcome::Infeasible | Outcome::Undecided => continue,
                Outcome::Stopped(_) => break,
            }
        }
        Ok(found)
    }

    /// The horizon search of one phase: the least feasible T from `lb` up to `ub`, the greedy's
    /// (feasible) horizon; returns the best plan found with its statistics.
    pub(super) fn horizons(
        mut self,
        lb: u32,
        ub: u32,
        greedy_moves: Vec<Move>,
        seeded: Option<(u32, Vec<Move>)>,
        stats: PhaseStats,
    ) -> Result<PhasePlan, SynthError> {
        // Search T in [lo, hi); hi is known feasible (the greedy, a symmetric plan, or a
        // solution found). The first probe is hi − 1: refuting it proves the plan optimal at
        // once, and a solution there is found fast. Then bisection, upward from lo once the
        // range is small. A probe that times out without an answer moves the search above it,
        // unproven.
        let (hi, best) = match seeded {
            Some((t, moves)) => (t, Some(moves)),
            None => (ub, None),
        };
        let mut r = Range { proven_lo: lb, lo: lb, hi, best, stopped: None, undecided: Vec::new() };
        self.try_lower_bound(&mut r, &greedy_moves)?;
        self.bisect(&mut r, &greedy_moves)?;
        self.retry_undecided(&mut r, &greedy_moves)?;
        Ok(self.conclude(r, greedy_moves, stats))
    }

    /// A quick try at the lower bound, capped at a twelfth of the work left: a plan there is optimal.
    fn try_lower_bound(&mut self, r: &mut Range, greedy_moves: &[Move]) -> Result<(), SynthError> {
        // A quick try at the lower bound first: a plan there is optimal at once (a gather on a
        // mesh: 12 timesteps found in a second, where the way down from the greedy's 22 took
        // four probes).
        if !self.opts.ignore_congestion && r.lo + 1 < r.hi {
            self.cap_s = Some((self.work_left() / 12.0).max(1.0));
            let plan: &[Move] = r.best.as_deref().unwrap_or(greedy_moves);
            let out = self.solve(r.lo, Goal::Probe, Some(plan));
            self.cap_s = None;
            match out? {
                Outcome::Solved(moves) => {
                    let (h, moves) = self.settled(moves);
                    r.hi = h.min(r.lo);
                    r.best = Some(moves);
                }
                Outcome::Infeasible => {
                    r.lo += 1;
                    r.proven_lo = r.proven_lo.max(r.lo);
                }
                Outcome::Undecided => {}
                Outcome::Stopped(why) => r.stopped = Some(why),
            }
        }
        Ok(())
    }

    /// The probes proper: hi − 1 first, then bisection, until the range is empty or a stop.
    fn bisect(&mut self, r: &mut Range, greedy_moves: &[Move]) -> Result<(), SynthError> {
        let ignore_congestion = self.opts.ignore_congestion;
        let mut first = true;
        while r.lo < r.hi && r.stopped.is_none() {
            let t = if first || ignore_congestion {
                // Without congestion the distance bound is always feasible.
                if ignore_congestion { r.lo } else { r.hi - 1 }
            } else if r.hi - r.lo <= 2 {
                r.lo
            } else {
                r.lo + (r.hi - r.lo) / 2
            };
            first = false;
            // The best plan so far, for a repair at T.
            let plan: &[Move] = r.best.as_deref().unwrap_or(greedy_moves);
            match self.solve(t, Goal::Probe, Some(plan))? {
                Outcome::Solved(moves) => {
                    let (h, moves) = self.settled(moves);
                    r.hi = h.min(t);
                    r.best = Some(moves);
                }
                Outcome::Infeasible => {
                    r.lo = t + 1;
                    r.proven_lo = r.proven_lo.max(t + 1);
                }
                Outcome::Undecided => {
                    r.undecided.push(t);
                    r.lo = t + 1;
                }
                Outcome::Stopped(why) => {
                    r.stopped = Some(why);
                    break;
                }
            }
        }
        Ok(())
    }

    /// A last try, with all the work left, at the highest undecided horizon below the best.
    fn retry_undecided(&mut self, r: &mut Range, greedy_moves: &[Move]) -> Result<(), SynthError> {
        // Horizons left undecided: the highest below the best gets whatever time is left.
        if r.stopped.is_none()
            && let Some(&t) = r.undecided.iter().filter(|&&t| t < r.hi).max()
            && self.work_left() > 1.0
        {
            self.whole_budget = true;
            let plan: &[Move] = r.best.as_deref().unwrap_or(greedy_moves);
            match self.solve(t, Goal::Probe, Some(plan))? {
                Outcome::Solved(moves) => {
                    let (h, moves) = self.settled(moves);
                    r.hi = h.min(t);
                    r.best = Some(moves);
                    r.undecided.retain(|&u| u != t);
                }
                Outcome::Infeasible => {
                    r.proven_lo = r.proven_lo.max(t + 1);
                    r.undecided.retain(|&u| u != t);
                }
                Outcome::Undecided => {}
                Outcome::Stopped(why) => r.stopped = Some(why),
            }
        }
        Ok(())
    }

    /// The phase's plan where the search ended: the best found (or the greedy's), its statistics
    /// and, when not proven optimal, why.
    fn conclude(mut self, r: Range, greedy_moves: Vec<Move>, mut stats: PhaseStats) -> PhasePlan {
        let p = self.p;
        let Range { proven_lo, hi, best, stopped, undecided, .. } = r;
        let proven = proven_lo >= hi;
        // No solve after the search: polishing arrival times at the chosen horizon was tried and
        // never changed a simulated time on the test topologies, at up to 100× the search's cost.
        let source = if best.is_some() { "ilp" } else { "greedy" };
        let moves = best.unwrap_or(greedy_moves);
        stats.mip_gap = self
            .solves
            .iter()
            .rev()
            .find(|s| s.horizon == hi && s.result != SolveResult::Infeasible)
            .and_then(|s| s.mip_gap);
        let lp = self.chosen_lp(hi);
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
                why.push(format!("no answer at T = {undecided:?} within their share of the budget"));
            }
            why.push(format!("horizons {proven_lo}..{} not refuted; best plan from the {source}", stats.horizon));
        }
        match stopped {
            // Undecided horizons already say the work ran out.
            Some(StopReason::OutOfWork) if !undecided.is_empty() => {}
            Some(s) => why.insert(0, s.to_string()),
            None if self.cut_by_time => why.insert(0, StopReason::OutOfTime.to_string()),
            None => {}
        }
        if !why.is_empty() {
            stats.reason = Some(why.join("; "));
        }
        self.finish(result, stats, lp)
    }

    /// The LP text reported: the model at the chosen horizon `hi` (built now if no solve did).
    fn chosen_lp(&mut self, hi: u32) -> Option<String> {
        let (p, opts) = (self.p, self.opts);
        if opts.keep_lp && !self.lp.iter().any(|(h, _)| *h == hi) {
            // The dump shows the model at the chosen horizon even when no solve needed it.
            if let Ok(Some(m)) =
                Model::build(p.ten, self.info, hi, Goal::Probe, Congestion::of(opts.ignore_congestion), &|| false)
            {
                self.lp.push((hi, m.lp_text(p.ten, hi, Goal::Probe)));
            }
        }
        self.lp.iter().rev().find(|(h, _)| *h == hi).or(self.lp.last()).map(|(_, t)| t.clone())
    }

    fn solve(&mut self, horizon: u32, goal: Goal, start: Option<&[Move]>) -> Result<Outcome, SynthError> {
        self.solve_with(self.info, horizon, goal, start)
    }

    pub(super) fn solve_with(
        &mut self,
        info: &ChunkInfo,
        horizon: u32,
        goal: Goal,
        start: Option<&[Move]>,
    ) -> Result<Outcome, SynthError> {
        if (self.cancelled)() {
            return Err(SynthError::Cancelled);
        }
        // A solve needs its model built and some time in HiGHS: with less than twice the
        // last build left, it would only run past the deadline.
        if self.time_left() < 2.0 * self.last_build_s {
            self.cut_by_time = true;
            return Ok(Outcome::Stopped(StopReason::OutOfTime));
        }
        if let Some(stop) = self.out_of_budget() {
            return Ok(Outcome::Stopped(stop));
        }
        let built_at = Instant::now();
        let model = match Model::build(self.p.ten, info, horizon, goal, self.congestion(), &|| {
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
                    nonzeros: 0,
                    build_ms: ms(built_at),
                    highs_ms: 0.0,
                    mip_gap: None,
                    lp_iterations: 0,
                    nodes: 0,
                });
                return Ok(Outcome::Infeasible);
            }
            Err(BuildStop::Interrupted) => {
                if (self.cancelled)() {
                    return Err(SynthError::Cancelled);
                }
                self.cut_by_time = true;
                return Ok(Outcome::Stopped(StopReason::OutOfTimeBuilding { horizon }));
            }
            Err(BuildStop::TooLarge { what, count, limit }) => {
                return Ok(Outcome::Stopped(StopReason::TooLarge { horizon, what, count, limit }));
            }
            Err(BuildStop::TooFine { span }) => return Ok(Outcome::Stopped(StopReason::TooFine { span })),
        };
        let build_ms = ms(built_at);
        self.last_build_s = build_ms / 1e3;
        if self.opts.keep_lp {
            self.lp.push((horizon, model.lp_text(self.p.ten, horizon, goal)));
        }
        let mut build_ms = build_ms;
        // Repair first: the best plan's early deliveries fixed, HiGHS completes the rest.
        // Presolve shrinks this to a small MIP; a solution answers the probe. Neither
        // "infeasible" nor a time-out proves anything here: the full model follows.
        for percent in REPAIR_KEEP_PERCENT {
            let Some(plan) = start else { break };
            if let Some(stop) = self.out_of_budget() {
                return Ok(Outcome::Stopped(stop));
            }
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
                return Err(SynthError::Cancelled);
            }
        }
        if let Some(stop) = self.out_of_budget() {
            return Ok(Outcome::Stopped(stop));
        }
        let out = self.run(&model, horizon, goal.name(), &[], build_ms)?;
        Ok(match (out.result, out.values) {
            (SolveResult::Infeasible, _) => Outcome::Infeasible,
            (_, Some(values)) => Outcome::Solved(model.moves(&values)),
            // The deadline stopped it: nothing is left for another solve (a solve stopped by
            // `solve_time_limit_s` leaves time for other horizons).
            (SolveResult::TimeLimit, None) if self.time_left() < 0.01 => Outcome::Stopped(StopReason::OutOfTime),
            (_, None) => Outcome::Undecided,
        })
    }

    /// The phase's plan with what the search did: its work, whether the clock cut it, its
    /// solves.
    pub(super) fn finish(self, plan: Plan, mut stats: PhaseStats, lp: Option<String>) -> PhasePlan {
        stats.work_s = self.spent_s;
        stats.cut_by_time_limit = self.cut_by_time;
        stats.solves = self.solves;
        PhasePlan { plan, stats, lp }
    }

    /// Whether the deadline has passed or the work budget is spent (no solve is started then).
    fn out_of_budget(&mut self) -> Option<StopReason> {
        if self.time_left() < 0.01 {
            self.cut_by_time = true;
            Some(StopReason::OutOfTime)
        } else if self.work_left() <= 0.0 {
            Some(StopReason::OutOfWork)
        } else {
            None
        }
    }

    /// One HiGHS solve of `model` with the columns `fixed` at 1, recorded in `solves`.
    fn run(
        &mut self,
        model: &Model,
        horizon: u32,
        kind: &'static str,
        fixed: &[u32],
        build_ms: f64,
    ) -> Result<Solved, SynthError> {
        // A probe gets at most a third of the work left (at least a nominal second), so one
        // hard horizon cannot use up the budget; a window or a last try may use all of it.
        let left = self.work_left();
        let probe = kind != Goal::Window.name();
        let share = if probe && !self.whole_budget { (left / 3.0).max(1.0).min(left) } else { left };
        let share = self.cap_s.map_or(share, |cap| share.min(cap));
        let max_lp_iterations = (share / SECONDS_PER_LP_ITERATION).ceil() as u64;
        let kind = if self.classes.is_some() { "symmetric" } else { kind };
        // The wall clock stops a solve only at the deadline (the phase's share of the wall
        // time), or at the caller's own cap on one solve (`solve_time_limit_s`); either marks
        // the search as cut. HiGHS checks the work only between its MIP rounds, not inside
        // presolve, the root LP or a heuristic's sub-MIP, so a solve may run past its share by
        // what one of those takes (11,883 LP iterations for a share of 6,667 in the ILP suite);
        // a wall cap of a few shares was tried and cut idle runs for that reason.
        let wall = match self.opts.solve_time_limit_s {
            Some(cap) => cap.min(self.time_left()),
            None => self.time_left(),
        };
        let deadline = Instant::now() + std::time::Duration::from_secs_f64(wall.max(0.01));
        let goal = if probe { Goal::Probe } else { Goal::Window };
        let out = model.solve(deadline, Some(max_lp_iterations), self.opts.threads, goal, fixed, self.cancelled)?;
        self.spent_s += work_seconds(out.lp_iterations);
        self.cut_by_time |= out.out_of_time;
        let (build_ms, highs_ms) = (build_ms + out.convert_ms, out.highs_ms);
        tracing::debug!(
            target: "ccsynth::synth::ilp::search",
            horizon,
            kind,
            variables = model.cols.len(),
            constraints = model.rows.len(),
            nonzeros = model.nonzeros,
            fixed = fixed.len(),
            result = ?out.result,
            highs_ms,
            lp_iterations = out.lp_iterations,
            nodes = out.nodes,
            "HiGHS solve"
        );
        self.solves.push(SolveRecord {
            kind,
            horizon,
            result: out.result,
            variables: model.cols.len(),
            constraints: model.rows.len() + fixed.len(),
            nonzeros: model.nonzeros + fixed.len(),
            build_ms,
            highs_ms,
            mip_gap: out.mip_gap,
            lp_iterations: out.lp_iterations,
            nodes: out.nodes,
        });
        Ok(out)
    }
}
