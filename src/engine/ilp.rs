//! The `ilp` algorithm behind the engine: its budget options checked, and its runs over the
//! TEN timesteps it tries (coarsest first), the fastest kept.

use super::check::gate_until;
use super::search::{Outcomes, Stop};
use super::{Control, Error, Reporter, SynthJob, SynthOutput, base_stats};
use crate::collective::Collective;

/// The ILP on the request's collective (or tenants), reporting progress as the share of its
/// time limit used (an upper bound on what is left).
pub(super) fn synthesize_ilp_reporting(
    req: &SynthJob<'_>,
    c: &Collective,
    tenants: Option<&[Collective]>,
    started: std::time::Instant,
    ctl: Control,
) -> Result<SynthOutput, Error> {
    let reporter = Reporter { cancelled: ctl.cancelled, progress: ctl.progress, last: std::sync::Mutex::new(None) };
    let limit = req.ilp.time_limit_s;
    let polled = || {
        reporter.poll(&|| {
            let spent = started.elapsed().as_secs_f64();
            (spent / limit, format!("ilp: {spent:.0} s of the {} s limit", crate::units::format_seconds(limit)))
        })
    };
    synthesize_ilp(req, c, tenants, started, &polled)
}

/// Checks the budget options a request carries against a cap on `time_limit_s` (JSON paths
/// as the service names them) against the caller's `Limits::max_solve_s`: `Request::new`'s
/// one budget check.
pub(crate) fn check_ilp_options(o: &crate::synth::ilp::IlpOptions, max: f64) -> Result<(), crate::error::InputError> {
    use crate::error::InputError;
    if !(o.time_limit_s.is_finite() && o.time_limit_s > 0.0 && o.time_limit_s <= max) {
        return Err(InputError::new(
            "options.time_limit_s",
            format!("{}: expected seconds in (0, {max}]", o.time_limit_s),
        ));
    }
    if let Some(t) = o.solve_time_limit_s
        && !(t.is_finite() && t > 0.0)
    {
        return Err(InputError::new("options.solve_time_limit_s", format!("{t}: expected seconds > 0")));
    }
    if o.window == Some(0) {
        return Err(InputError::new("options.window", "0: expected a window of at least 1 timestep"));
    }
    Ok(())
}

/// The `ilp` algorithm (the seed drives the greedy warm start). With no discretization given,
/// it runs at every TEN timestep the greedy tries (`synth::auto_discretizations`: the fastest
/// edge's time and, where link times are not multiples of it, finer grids down to one that
/// overstates no link by more than 0.5%), coarsest first (the first with an even share of the
/// time limit, each finer one at most twice what the first took), and keeps the schedule that
/// simulates fastest. So the horizon it
/// minimises is, on the finest grid, the collective's α-β time within that rounding, not a
/// count of coarse timesteps that treats a 1.4× link as a 2× one.
fn synthesize_ilp(
    req: &SynthJob<'_>,
    c: &Collective,
    tenants: Option<&[Collective]>,
    started: std::time::Instant,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<SynthOutput, Error> {
    let grids = ilp_grids(req, c, tenants)?;
    if grids.is_empty() {
        let reason = "no TEN timestep to run the ILP at".to_string();
        return Err(Error::Unsupported { by: super::Refuser::Synthesizer, reason });
    }
    let not_run = |g: Option<f64>, reason: String, wall_ms: f64| crate::synth::ilp::IlpGrid {
        wall_ms,
        discretization_ns: g.unwrap_or(0.0),
        status: None,
        horizon: None,
        horizon_lower_bound: None,
        collective_time_ns: None,
        reason: Some(reason),
    };
    let stop =
        Stop::new(cancelled, started + std::time::Duration::from_secs_f64(req.ilp.time_limit_s), req.time_limit_s);
    let work_limit_s = req.ilp.work_limit_s.unwrap_or(req.ilp.time_limit_s);
    // The fastest grid's schedule, ties to the earlier (coarser) grid.
    let mut best: Outcomes<usize, SynthOutput> = Outcomes::default();
    let mut tried = Vec::with_capacity(grids.len());
    // The first grid's wall time and work, and the work spent so far (nominal seconds).
    let mut first_took: Option<(f64, f64)> = None;
    let mut worked_s = 0.0;
    // The clock cut some grid (skipped it, or stopped it): the kept result says so too.
    let mut clock_cut = false;
    for (i, &IlpGridPlan { grid, same_as }) in grids.iter().enumerate() {
        if let Some(f) = same_as {
            tried.push(not_run(grid, format!("not run: the model at {f} ns on another time scale"), 0.0));
            continue;
        }
        let left = stop.left().as_secs_f64();
        // A finer grid's model is larger than the one before: with (almost) nothing left, the
        // ILP would return its greedy warm start, which the greedy algorithm covers already.
        if best.any() && left < 0.05 {
            clock_cut = true;
            tried.push(not_run(grid, "not run: the time limit was used up".into(), 0.0));
            continue;
        }
        let to_run = grids[i..].iter().filter(|p| p.same_as.is_none()).count();
        // Each grid gets an even share of what is left, of the work budget (which decides
        // what the ILP does) and of the wall clock (which also pays for what the work does not
        // count; a grid it stops says so, and so does the result).
        let mut share = (left / to_run as f64).max(1e-3);
        let mut work = ((work_limit_s - worked_s).max(0.0) / to_run as f64).max(1e-3);
        // A finer grid's model is larger and its optimum often no faster than the first
        // grid's: each gets at most twice what the first grid took (at least a second), so a
        // case the first grid settles in a second does not spend the whole limit on grids that
        // cannot be proven.
        if let Some((took, worked)) = first_took {
            share = share.min((2.0 * took).max(1.0));
            work = work.min((2.0 * worked).max(1.0));
        }
        let began = std::time::Instant::now();
        let ran = ilp_at(req, c, tenants, grid, Budget { wall_s: share, work_s: work }, started, &stop);
        let took = began.elapsed().as_secs_f64();
        let worked = ran.as_ref().ok().and_then(|o| o.stats.ilp.as_ref()).map_or(0.0, |s| s.work_s);
        clock_cut |= match &ran {
            Ok(o) => o.stats.ilp.as_ref().is_some_and(|s| s.cut_by_time_limit),
            Err(e) => matches!(e, Error::TimeLimit { .. }),
        };
        worked_s += worked;
        first_took.get_or_insert((took, worked));
        match ran {
            Ok(out) => {
                let ilp = out.stats.ilp.as_ref().expect("the ILP reports its stats");
                tried.push(crate::synth::ilp::IlpGrid {
                    discretization_ns: out.stats.discretization_ns,
                    status: Some(ilp.status),
                    horizon: Some(ilp.horizon),
                    horizon_lower_bound: Some(ilp.horizon_lower_bound),
                    collective_time_ns: out.report.collective_time_ns,
                    reason: ilp.reason.clone(),
                    wall_ms: took * 1e3,
                });
                best = best.merge(Outcomes::won_alone(out.report.collective_time_ns.unwrap_or(f64::INFINITY), i, out));
            }
            // The first grid's failure is the request's; a finer grid's only loses that grid
            // (a cancel and an invalid schedule, a bug, are never only a grid's).
            Err(e) if !best.any() || matches!(e, Error::Cancelled | Error::Internal(_)) => return Err(e),
            Err(e) => tried.push(not_run(grid, e.to_string(), took * 1e3)),
        }
    }
    // The first grid either succeeds or returned its error.
    let mut out = best.finish(req.time_limit_s)?.best;
    out.stats.synthesis_ms = started.elapsed().as_secs_f64() * 1e3 - out.stats.check_ms;
    if let Some(ilp) = &mut out.stats.ilp {
        ilp.grids = tried;
        ilp.cut_by_time_limit |= clock_cut;
    }
    Ok(out)
}

/// One TEN timestep the ILP may run at (`None`: the fastest edge's time), and the earlier grid
/// whose model it repeats on another time scale, if any (every link spans the same multiple of
/// its timesteps there): such a grid is not run.
struct IlpGridPlan {
    grid: Option<f64>,
    same_as: Option<f64>,
}

/// The TEN timesteps the ILP tries (see `synthesize_ilp`), coarsest first.
fn ilp_grids(req: &SynthJob<'_>, c: &Collective, tenants: Option<&[Collective]>) -> Result<Vec<IlpGridPlan>, Error> {
    let trivial = match tenants {
        None => c.needed().is_empty(),
        Some(t) => t.iter().all(|t| t.needed().is_empty()),
    };
    let grids: Vec<Option<f64>> = match req.discretization_ns {
        Some(f) => vec![Some(f)],
        None if trivial => vec![None],
        None => crate::synth::auto_discretizations(req.topology, c.chunk_size_bytes, req.switch_model)
            .map_err(|e| Error::from(crate::synth::SynthError::from(e)))?
            .into_iter()
            .map(Some)
            .collect(),
    };
    let mut tens: Vec<(f64, crate::ten::Ten)> = Vec::new();
    let mut plans = Vec::with_capacity(grids.len());
    for &grid in &grids {
        let Some(g) = grid.filter(|_| grids.len() > 1) else {
            plans.push(IlpGridPlan { grid, same_as: None });
            continue;
        };
        let ten = crate::ten::Ten::build(req.topology, c.chunk_size_bytes, req.switch_model, Some(g))
            .map_err(|e| Error::from(crate::synth::SynthError::from(e)))?;
        let same_as = tens.iter().find(|(_, t)| t.same_up_to_scale(&ten)).map(|(f, _)| *f);
        if same_as.is_none() {
            tens.push((g, ten));
        }
        plans.push(IlpGridPlan { grid, same_as });
    }
    Ok(plans)
}

/// A grid's share of the ILP's budget: wall-clock seconds and nominal seconds of work
/// (`IlpOptions::time_limit_s` and `work_limit_s`).
struct Budget {
    wall_s: f64,
    work_s: f64,
}

/// One ILP run at one TEN timestep (`None`: the fastest edge's time) within its budget.
fn ilp_at(
    req: &SynthJob<'_>,
    c: &Collective,
    tenants: Option<&[Collective]>,
    grid: Option<f64>,
    budget: Budget,
    started: std::time::Instant,
    stop: &Stop<'_>,
) -> Result<SynthOutput, Error> {
    let cancelled = stop.cancel_poll();
    let mut iopts = req.ilp.clone();
    iopts.threads = req.threads.unwrap_or(1).max(1) as u32;
    iopts.time_limit_s = budget.wall_s;
    iopts.work_limit_s = Some(budget.work_s);
    iopts.warm_start_by = Some(stop.deadline());
    let opts = crate::synth::PlanOptions { seed: req.seed, switch_model: req.switch_model, discretization_ns: grid };
    let produced = match tenants {
        None => crate::synth::ilp(req.topology, c, &opts, &iopts, cancelled),
        Some(t) => {
            crate::synth::ilp_multi(req.topology, t, &opts, &iopts, cancelled).map(|(j, i)| (j.schedule, j.stats, i))
        }
    };
    // A stop the caller did not ask for is the clock's: the warm start reached the deadline.
    let (schedule, gst, iout) = produced.map_err(|e| match e {
        crate::synth::SynthError::Cancelled if !stop.cancelled() => stop.error(),
        e => Error::from(e),
    })?;
    let synthesis_ms = started.elapsed().as_secs_f64() * 1e3;
    let checked = std::time::Instant::now();
    let (schedule, report) = gate_until(schedule, req.gate, cancelled)?;
    let mut stats = base_stats(req, gst, &schedule, &report, tenants, synthesis_ms, checked);
    stats.ilp = Some(iout.stats);
    Ok(SynthOutput { schedule, report, stats, lp: iout.lp })
}
