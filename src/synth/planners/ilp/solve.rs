//! One HiGHS solve of a model (through good_lp): conversion, solver options, the C callback
//! (log lines to tracing; the work done; an interrupt on cancel, past the solve's work budget
//! or past its deadline) and the mapping of HiGHS's status to a `SolveResult`.

use super::model::{Goal, Model};
use super::{IlpError, SolveResult, ms};
use std::cell::Cell;
use std::time::Instant;

pub(super) struct Solved {
    pub(super) result: SolveResult,
    pub(super) values: Option<Vec<f64>>,
    pub(super) mip_gap: Option<f64>,
    /// Handing the model to HiGHS (through good_lp): part of model building.
    pub(super) convert_ms: f64,
    pub(super) highs_ms: f64,
    /// LP iterations and branch-and-bound nodes HiGHS spent (as of its last interrupt check,
    /// then its final count): the solve's work, the same on any machine.
    pub(super) lp_iterations: u64,
    pub(super) nodes: u64,
    /// The wall clock stopped the solve (its deadline or HiGHS's time limit), not its work
    /// budget or its own end.
    pub(super) out_of_time: bool,
}

impl Model {
    /// Solves the model within `max_lp_iterations` (the work budget: HiGHS is interrupted at
    /// its first check past it, the same point on any machine) and by `deadline` at the latest.
    pub(super) fn solve(
        &self,
        deadline: Instant,
        max_lp_iterations: Option<u64>,
        threads: u32,
        goal: Goal,
        fixed: &[u32],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Solved, IlpError> {
        let converting = Instant::now();
        let mut model = self.to_highs(fixed)?;
        let convert_ms = ms(converting);
        set_options(&mut model, deadline, threads, goal);
        // HiGHS calls back during the solve: its log goes to tracing, and the cancel flag is
        // polled at its interrupt points, so a cancelled solve stops within moments.
        let hooks = Hooks {
            cancelled,
            deadline,
            max_lp_iterations: max_lp_iterations.unwrap_or(u64::MAX),
            lp_iterations: Cell::new(0),
            nodes: Cell::new(0),
            out_of_work: Cell::new(false),
            out_of_time: Cell::new(false),
        };
        register_hooks(&mut model, &hooks);
        let solving = Instant::now();
        let solved = model.try_solve().map_err(|e| IlpError::Solver(format!("{e:?}")))?;
        // `hooks` (which HiGHS calls back into through a raw pointer) lives to the end of this
        // function, past the solve.
        let highs_ms = ms(solving);
        let (lp_iterations, nodes) = work_of(&solved, &hooks);
        use highs::{HighsModelStatus as S, HighsSolutionStatus};
        let has_solution = solved.primal_solution_status() == HighsSolutionStatus::Feasible;
        let values = has_solution.then(|| solved.get_solution().columns().to_vec());
        let mip_gap = has_solution.then(|| solved.mip_gap()).filter(|g| g.is_finite());
        let result = result_of(&solved, goal, has_solution, &hooks)?;
        let out_of_time = hooks.out_of_time.get() || solved.status() == S::ReachedTimeLimit;
        Ok(Solved { result, values, mip_gap, convert_ms, highs_ms, lp_iterations, nodes, out_of_time })
    }

    /// The model handed to HiGHS through good_lp, with the columns `fixed` bounded below by 1.
    fn to_highs(&self, fixed: &[u32]) -> Result<highs::Model, IlpError> {
        use good_lp::{Expression, ProblemVariables, SolverModel, variable};
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
        problem.try_into_inner().map_err(|e| IlpError::Solver(e.to_string()))
    }
}

/// The solver options that make a solve quiet, bounded by `deadline` and reproducible.
fn set_options(model: &mut highs::Model, deadline: Instant, threads: u32, goal: Goal) {
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
}

/// Registers `on_highs_event` with `hooks`, which the caller keeps alive past the solve.
fn register_hooks(model: &mut highs::Model, hooks: &Hooks<'_>) {
    let log = tracing::enabled!(target: "ccsynth::highs", tracing::Level::DEBUG);
    if log {
        let _ = model.try_set_option("output_flag", true);
        let _ = model.try_set_option("log_to_console", false);
    }
    // SAFETY: `hooks` outlives the solve (it is dropped after `try_solve` returns), and
    // `on_highs_event` only reads it through a shared reference.
    unsafe {
        let ptr = model.as_mut_ptr();
        highs_sys::Highs_setCallback(ptr, Some(on_highs_event), hooks as *const Hooks as *mut std::ffi::c_void);
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
}

/// The solve's work, LP iterations and nodes: the larger of the callbacks' and HiGHS's counts.
fn work_of(solved: &highs::SolvedModel, hooks: &Hooks<'_>) -> (u64, u64) {
    // After a MIP, HiGHS reports its total LP iterations as the simplex count; a solve
    // presolve decided has none. The callbacks' counts cover a solve stopped early.
    let lp_iterations = hooks.lp_iterations.get().max(solved.simplex_iteration_count().max(0) as u64);
    let mut node_count: i64 = 0;
    // SAFETY: the model is alive, the name is NUL-terminated, and `mip_node_count` is an
    // int64 info value (HiGHS refuses, and leaves 0, otherwise).
    unsafe {
        highs_sys::Highs_getInt64InfoValue(solved.as_ptr(), c"mip_node_count".as_ptr(), &mut node_count);
    }
    let nodes = hooks.nodes.get().max(node_count.max(0) as u64);
    (lp_iterations, nodes)
}

/// HiGHS's model status as a `SolveResult`, telling a spent work budget from the clock.
fn result_of(
    solved: &highs::SolvedModel,
    goal: Goal,
    has_solution: bool,
    hooks: &Hooks<'_>,
) -> Result<SolveResult, IlpError> {
    use highs::HighsModelStatus as S;
    Ok(match solved.status() {
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
            } else if hooks.out_of_work.get() && !hooks.out_of_time.get() {
                SolveResult::WorkLimit
            } else {
                SolveResult::TimeLimit
            }
        }
        other => return Err(IlpError::Solver(format!("unexpected model status {other:?}"))),
    })
}

/// What HiGHS's callback sees.
struct Hooks<'a> {
    cancelled: &'a dyn Fn() -> bool,
    /// The solve's own deadline: HiGHS checks its `time_limit` only now and then (measured:
    /// solves overran theirs by up to 0.6 s), so its interrupt points check it too.
    deadline: Instant,
    /// The solve's work budget: HiGHS is interrupted at its first check past it.
    max_lp_iterations: u64,
    /// The work seen so far (the largest counts any interrupt check reported).
    lp_iterations: Cell<u64>,
    nodes: Cell<u64>,
    /// Why an interrupt was asked for.
    out_of_work: Cell<bool>,
    out_of_time: Cell<bool>,
}

/// HiGHS's C callback: log lines to tracing (target `ccsynth::highs`, debug); at interrupt
/// points, the work done so far, and an interrupt when the cancel flag is set, the solve's
/// work budget is spent or its deadline has passed. Never unwinds into C.
unsafe extern "C" fn on_highs_event(
    kind: std::ffi::c_int,
    message: *const std::ffi::c_char,
    out: *const highs_sys::HighsCallbackDataOut,
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
            return;
        }
        if !out.is_null() {
            // SAFETY: HiGHS passes a valid output struct for interrupt callbacks.
            let out = unsafe { &*out };
            let iterations = if kind == highs_sys::kHighsCallbackMipInterrupt as std::ffi::c_int {
                hooks.nodes.set(hooks.nodes.get().max(out.mip_node_count.max(0) as u64));
                out.mip_total_lp_iterations
            } else {
                i64::from(out.simplex_iteration_count)
            };
            hooks.lp_iterations.set(hooks.lp_iterations.get().max(iterations.max(0) as u64));
        }
        if data_in.is_null() {
            return;
        }
        let out_of_work = hooks.lp_iterations.get() >= hooks.max_lp_iterations;
        let out_of_time = Instant::now() >= hooks.deadline;
        if out_of_work || out_of_time || (hooks.cancelled)() {
            hooks.out_of_work.set(hooks.out_of_work.get() || out_of_work);
            hooks.out_of_time.set(hooks.out_of_time.get() || out_of_time);
            // SAFETY: HiGHS passes a valid input struct for interrupt callbacks.
            unsafe { (*data_in).user_interrupt = 1 };
        }
    }));
}
