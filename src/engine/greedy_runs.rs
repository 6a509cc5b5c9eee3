//! The greedy's runs for one request: which planners run at which chunkings, seeds and
//! timesteps (`plan`), each run's schedule (`produce`), and the fastest kept
//! (`synthesize_greedy`).

mod pipelined;
mod plan;
mod reserve;

use super::check::Gate;
use super::check::gate_timed_until;
use super::error::Error;
use super::search::{self, Finished, Outcomes, Stop};
use super::{Control, GreedySearch, Reporter, SynthJob, SynthOutput, TreesPolish, base_stats};
use crate::collective::Collective;
use crate::schedule::Schedule;
use crate::synth::producers::Memo;
pub use crate::synth::producers::Mode;
use crate::synth::producers::Run;
use crate::synth::trees::Resume;
pub use pipelined::Pipelining;
use pipelined::pipeline_winner;
pub use plan::{GROUPED_ONLY_NPUS, LATENCY_MODE_MAX_NPUS, PLAIN_MAX_NPUS};
use plan::{RunPlan, plan_runs};
use reserve::check_reserve;

/// One greedy run's schedule (not yet ranked or validated): its row of `synth::producers`.
fn produce(
    req: &SynthJob<'_>,
    plan: &RunPlan,
    variants: &[&Collective],
    tenants: Option<&[Collective]>,
    r: &Run,
    memo: &Memo,
    polled: &(dyn Fn() -> bool + Sync),
) -> Produced {
    let opts = crate::synth::PlanOptions {
        seed: r.seed,
        switch_model: req.switch_model,
        discretization_ns: r.mode.discretization().and_then(|f| plan.factors[r.variant][f]),
    };
    if let Some(t) = tenants {
        return crate::synth::greedy_multi(req.topology, t, &opts, polled).map(|j| crate::synth::producers::Produced {
            schedule: j.schedule,
            stats: j.stats,
            resume: None,
        });
    }
    let input = crate::synth::producers::Input {
        topology: req.topology,
        collective: variants[r.variant],
        first: variants[0],
        opts,
        effort: req.effort,
        pattern: plan.pattern(r),
        memo,
    };
    r.mode.produce(&input, polled)
}

/// The greedy on collectives already built on the request's topology: every run of
/// `plan_runs` on the pool (the request's own with `threads`, else the caller's), the fastest
/// kept, reporting progress by runs finished. Runs `stop`'s clock cuts are dropped; if none
/// finished, the run fails with `Error::TimeLimit`. The request was checked by `Request::new`.
pub(super) fn synthesize_greedy(
    req: &SynthJob<'_>,
    variants: Variants,
    tenants: Option<&[Collective]>,
    started: std::time::Instant,
    stop: Stop,
    ctl: Control,
) -> Result<SynthOutput, Error> {
    let Variants { all: variants, matcher: matcher_variants } = variants;
    let cancelled = stop.cancel_poll();
    let reporter = Reporter { cancelled, progress: ctl.progress, last: std::sync::Mutex::new(None) };
    // The runs' planning searches the translation patterns (k chunks per NPU: O(k²) on a
    // ring), so the clock stops it too: 30,000 chunks an NPU on ring:4 took 5 s of a 3 s limit
    // before, 100,000 over a minute.
    let planning = || stop.now();
    let plan = match plan_runs(req, variants, matcher_variants, tenants, &planning) {
        Err(_) if stop.now() => return Err(stop.error()),
        other => other?,
    };
    let runs = &plan.runs;
    let single = runs.len() == 1;
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let total = runs.len();
    // Once a run has a schedule, the others stop early enough to leave the check and the
    // writing of the winner their time within the limit; before, they may take it all (a
    // schedule late beats none). The ranking and the check stop at the limit itself.
    let deadline = stop.deadline();
    let runs_deadline = deadline - check_reserve(variants, tenants, deadline.saturating_duration_since(started));
    let produced_any = std::sync::atomic::AtomicBool::new(false);
    let runs_stop = stop.with_reserve(runs_deadline, &produced_any);
    let reported = || {
        reporter.poll(&|| {
            let done = finished.load(std::sync::atomic::Ordering::Relaxed);
            (done as f64 / total as f64, format!("greedy: {done} of {total} runs done"))
        })
    };
    let (runs_polled, check_polled) = (runs_stop.polling(&reported), stop.polling(&reported));
    let polled = || runs_polled.now();
    let polled: &(dyn Fn() -> bool + Sync) = &polled;
    let checking = || check_polled.now();
    let checking: &(dyn Fn() -> bool + Sync) = &checking;
    let memo = Memo::default();
    let incumbent = super::search::Incumbent::new(req.incumbent_ns);
    let ranking = Ranking {
        single,
        deferred: !single && req.gate == Gate::Deferred,
        incumbent: &incumbent,
        cancelled,
        polled: checking,
    };
    let run = |index: usize, r: &Run| -> Outcome {
        // Checked before a run builds anything: a cancel or the deadline skips every run not
        // yet started at once (a run's own first poll comes only after its problem is built).
        if let Some(why) = runs_stop.why() {
            return Outcomes::stopped(why);
        }
        let t0 = std::time::Instant::now();
        let produced = produce(req, &plan, variants, tenants, r, &memo, polled);
        if produced.is_ok() {
            produced_any.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        tracing::debug!(target: "ccsynth::timing", mode = ?r.mode, variant = r.variant, wall_ms = t0.elapsed().as_secs_f64() * 1e3, "greedy: run produced");
        finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ranking.outcome(index, r, produced)
    };
    // The winner does not depend on the threads (`Outcomes::merge`), only the wall time does.
    let all_runs = || search::fold(runs, run);
    let outcome = match req.threads {
        _ if single => run(0, &runs[0]),
        // The caller's pool: the process's (one thread per core), a service worker's, or
        // `auto`'s.
        None => all_runs(),
        Some(n) => match rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build() {
            Ok(pool) => pool.install(all_runs),
            // No threads to be had: the same runs, one after another.
            Err(_) => search::fold_serial(runs, run),
        },
    };
    let Finished { best, runner_up, cut } = outcome.finish(req.time_limit_s)?;
    let (run, won, polish) = polish_winners(req.topology, variants, best, runner_up, single, cancelled, polled)?;
    let (won, pipelined) = match tenants {
        None => pipeline_winner(won, cancelled, polled)?,
        Some(_) => (won, None),
    };
    let won = pipelined::merge_winner(won, cancelled, polled)?;
    let Won { schedule, stats: gst, timing, report, .. } = won;
    let synthesis_ms = started.elapsed().as_secs_f64() * 1e3;
    let checked = std::time::Instant::now();
    // A winner nothing has simulated yet (a single run) is validated beside its simulation
    // under a deferred gate: it is likely the portfolio's winner.
    let (schedule, report) = match (report, timing) {
        (Some(report), _) => (schedule, report),
        (None, None) if req.gate == Gate::Deferred => {
            super::check::gate_speculative_until(schedule, &incumbent, cancelled)?
        }
        (None, timing) => gate_timed_until(schedule, timing, req.gate, cancelled)?,
    };
    tracing::debug!(target: "ccsynth::timing", wall_ms = checked.elapsed().as_secs_f64() * 1e3, runs = total, "greedy: the winner gated");
    let search = GreedySearch {
        seeds_tried: req.seeds.max(1),
        effort: req.effort,
        discretizations_tried: plan.factors[run.variant].len(),
        replacements: gst.replacements,
        greedy_mode: run.mode.name(),
        modes_tried: runs.iter().map(|r| r.mode.name()).fold(Vec::new(), |mut m, name| {
            if !m.contains(&name) {
                m.push(name);
            }
            m
        }),
        runs_cut: cut,
        polish,
        pipelined,
        mirrored_from: None,
    };
    let mut stats = base_stats(req, gst, &schedule, &report, tenants, synthesis_ms, checked);
    stats.chosen_seed = run.seed;
    stats.chunks_per_npu_tried = variants.iter().map(|v| v.spec.chunks()).collect();
    stats.greedy = Some(search);
    Ok(SynthOutput { schedule, report, stats, lp: Vec::new() })
}

/// The winning run's schedule, statistics, the simulator's report on it and its full check
/// where it has them, and its simulated time (none when it was the only run).
struct Won {
    schedule: Schedule,
    stats: crate::synth::PlanStats,
    timing: Option<crate::sim::Timing>,
    report: Option<crate::engine::CheckReport>,
    time_ns: Option<f64>,
}

impl Won {
    /// Its simulated time where something has simulated it already.
    fn known_time_ns(&self) -> Option<f64> {
        self.time_ns.or(self.timing.as_ref().map(|t| t.collective_time_ns))
    }
    /// Its simulated time, simulated now (until `polled`) where nothing has yet.
    fn time_ns_until(&self, polled: &(dyn Fn() -> bool + Sync)) -> Result<f64, crate::sim::SimError> {
        match self.known_time_ns() {
            Some(t) => Ok(t),
            None => crate::sim::simulate_until(&self.schedule, polled).map(|t| t.collective_time_ns),
        }
    }
}

/// A trees run that comes second within this share of the winner's time is polished too, and
/// the faster of the two after their polish wins. Two runs of the trees often finish within a
/// timestep of each other, and the polish shortens one more than the other: on torus:8x8x8 less
/// three links at 64 MiB, pairs 274.69 µs and threes 274.79 µs before it, pairs 268.44 µs and
/// threes 265.93 µs after it. Each gets the whole budget: with half each, the winner's polish
/// fell short where the runner-up's did not help (torus:8x8x8 less NPU 9: 261.95 → 266.39 µs).
const POLISH_BOTH_WITHIN: f64 = 0.01;

/// The winning run, polished where it is a trees run (`polish_trees`); with the runner-up
/// polished after it where that is a trees run within `POLISH_BOTH_WITHIN` of it, the faster of
/// the two kept (ties to the winner). The run kept, its schedule and what its polish did.
fn polish_winners(
    topology: &crate::topology::Topology,
    variants: &[&Collective],
    best: Candidate,
    runner_up: Option<Candidate>,
    single: bool,
    cancelled: &(dyn Fn() -> bool + Sync),
    polled: &(dyn Fn() -> bool + Sync),
) -> Result<(Run, Won, Option<TreesPolish>), Error> {
    let won = |c: Candidate| -> (Run, Option<Resume>, Won) {
        let Candidate { run, schedule, stats, timing, checked: report, time_ns, resume } = c;
        (run, resume, Won { schedule, stats, timing, report, time_ns: (!single).then_some(time_ns) })
    };
    let second = runner_up.filter(|r| r.resume.is_some() && r.time_ns <= best.time_ns * (1.0 + POLISH_BOTH_WITHIN));
    let (run, resume, first) = won(best);
    let (first, polish) = match resume {
        Some(resume) => polish_trees(topology, variants[run.variant], resume, first, cancelled, polled)?,
        None => (first, None),
    };
    let Some((run2, Some(resume2), other)) = second.map(won) else { return Ok((run, first, polish)) };
    let (other, polish2) = polish_trees(topology, variants[run2.variant], resume2, other, cancelled, polled)?;
    let after = |w: &Won| w.known_time_ns().unwrap_or(f64::INFINITY);
    tracing::debug!(target: "ccsynth::timing", winner = after(&first), runner_up = after(&other), "greedy: the runner-up polished too");
    if after(&other) < after(&first) { Ok((run2, other, polish2)) } else { Ok((run, first, polish)) }
}

/// A trees run polished (`synth::trees::polish`: its timeline searched on with a larger
/// budget, for the winner and a close runner-up alone), kept when the simulator finds it
/// faster; with what the polish did. A deadline that cuts the polish keeps the run's own
/// schedule and says so (`TreesPolish::cut`); a cancel cancels. `topology` and `c` are the
/// run's.
fn polish_trees(
    topology: &crate::topology::Topology,
    c: &Collective,
    resume: Resume,
    won: Won,
    cancelled: &(dyn Fn() -> bool + Sync),
    polled: &(dyn Fn() -> bool + Sync),
) -> Result<(Won, Option<TreesPolish>), Error> {
    let t0 = std::time::Instant::now();
    let said = |won: &Won, after: Option<u32>, kept: bool, cut: bool| TreesPolish {
        timesteps_before: won.stats.ten_timesteps,
        timesteps_after: after,
        kept,
        cut,
        wall_ms: t0.elapsed().as_secs_f64() * 1e3,
    };
    let stopped = |won: Won| {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let said = said(&won, None, false, true);
        Ok((won, Some(said)))
    };
    let (schedule, stats) = match crate::synth::trees::polish(resume, topology, c, polled) {
        Ok(Some(p)) => p,
        Ok(None) => {
            let said = said(&won, None, false, false);
            return Ok((won, Some(said)));
        }
        Err(e) if e.is_cancelled() => return stopped(won),
        Err(e) => {
            // The run planned these trees once already: a failure now is a bug, not an input.
            tracing::error!(error = %e, "trees: the polish failed");
            return Ok((won, None));
        }
    };
    let before = match won.time_ns_until(polled) {
        Ok(t) => t,
        Err(crate::sim::SimError::Stopped) => return stopped(won),
        Err(_) => return Ok((won, None)),
    };
    let timing = match crate::sim::simulate_until(&schedule, polled) {
        Ok(t) => t,
        Err(crate::sim::SimError::Stopped) => return stopped(won),
        Err(_) => return Ok((won, None)),
    };
    let after = timing.collective_time_ns;
    tracing::debug!(target: "ccsynth::timing", before, after, wall_ms = t0.elapsed().as_secs_f64() * 1e3, "greedy: a trees run polished");
    let kept = after < before;
    let said = said(&won, Some(stats.ten_timesteps), kept, false);
    if kept {
        // Left for the gate to simulate again: beside its validation where that is deferred.
        return Ok((Won { schedule, stats, timing: None, report: None, time_ns: Some(after) }, Some(said)));
    }
    Ok((won, Some(said)))
}

/// The collective at each chunks per NPU a synthesis tries: the first `matcher` for every
/// planner, the rest (finer chunkings that cost the latency-mode planners no extra rounds) for
/// those alone.
#[derive(Clone, Copy)]
pub(super) struct Variants<'a> {
    pub(super) all: &'a [&'a Collective],
    pub(super) matcher: usize,
}

/// How a run's result becomes an `Outcome`: with several runs, ranked by its simulation (under
/// a deferred gate also validated while it is the fastest so far, against `incumbent`); one
/// run alone is not ranked (the gate simulates it anyway). A cancel or the deadline met on the
/// way cuts it.
struct Ranking<'a> {
    single: bool,
    deferred: bool,
    incumbent: &'a super::search::Incumbent,
    cancelled: &'a (dyn Fn() -> bool + Sync),
    polled: &'a (dyn Fn() -> bool + Sync),
}

impl Ranking<'_> {
    fn outcome(&self, index: usize, r: &Run, produced: Produced) -> Outcome {
        let (single, incumbent, cancelled, polled) = (self.single, self.incumbent, self.cancelled, self.polled);
        match produced {
            // Several under a deferred gate: each is simulated and, while it is the fastest so
            // far, validated beside (on the pool's threads left by runs still going), so the
            // winner leaves validated.
            Ok(crate::synth::producers::Produced { schedule, stats, resume }) if self.deferred => {
                let checked = super::check::gate_speculative_until(schedule, incumbent, polled);
                if cancelled() {
                    return Outcomes::cancelled();
                }
                match checked {
                    Ok((schedule, report)) => {
                        let time_ns = report.collective_time_ns.unwrap_or(f64::INFINITY);
                        tracing::debug!(target: "ccsynth::timing", mode = ?r.mode, time_ns, validated = report.valid, "greedy: run ranked");
                        let (timing, checked) = match report.valid {
                            true => (None, Some(report)),
                            false => (report.timing, None),
                        };
                        let best = Candidate { time_ns, timing, checked, run: *r, schedule, stats, resume };
                        won(best)
                    }
                    Err(Error::Cancelled) => Outcomes::cut(),
                    Err(e) => Outcomes::failed(index, e),
                }
            }
            Ok(crate::synth::producers::Produced { schedule, stats, resume }) => {
                // One candidate needs no ranking; the gate simulates it anyway. Several are
                // ranked by their simulation, which the winner's gate then reuses.
                let timing = if single {
                    None
                } else {
                    match crate::sim::simulate_until(&schedule, polled) {
                        Err(crate::sim::SimError::Stopped) if cancelled() => return Outcomes::cancelled(),
                        Err(crate::sim::SimError::Stopped) => return Outcomes::cut(),
                        t => t.ok(),
                    }
                };
                let time_ns = match &timing {
                    _ if single => 0.0,
                    Some(t) => t.collective_time_ns,
                    None => f64::INFINITY,
                };
                if !single {
                    tracing::debug!(target: "ccsynth::timing", mode = ?r.mode, time_ns, "greedy: run ranked");
                }
                let best = Candidate { time_ns, timing, checked: None, run: *r, schedule, stats, resume };
                won(best)
            }
            Err(e) if e.is_cancelled() && cancelled() => Outcomes::cancelled(),
            Err(e) if e.is_cancelled() => Outcomes::cut(),
            // Stages that did not overlap: no candidate (the one-stage run serves), and not the
            // error to report if nothing else finished.
            Err(crate::synth::SynthError::Greedy(crate::synth::GreedyError::StagesNotShorter)) => Outcome::default(),
            Err(e) => Outcomes::failed(index, e.into()),
        }
    }
}

/// What one run produced: a schedule, its planner's statistics and where a polish resumes.
type Produced = Result<crate::synth::producers::Produced, crate::synth::SynthError>;

/// The runs of a synthesis folded together (`search::Outcomes`): the fastest run and the
/// runner-up, ties to the smaller chunks per NPU, then the lower seed, then the earlier
/// discretization or planner; the first failure by run order; the runs the clock cut.
type Outcome = Outcomes<(usize, u64, Mode), Candidate>;

/// A run that finished, as an outcome.
fn won(c: Candidate) -> Outcome {
    let key = (c.run.variant, c.run.seed, c.run.mode);
    Outcomes::won(c.time_ns, key, c)
}

/// One greedy run of a synthesis: its schedule, simulated time and where it came from.
struct Candidate {
    time_ns: f64,
    /// The simulator's report that ranked it (none when it was the only run, or validated).
    timing: Option<crate::sim::Timing>,
    /// Its full check, when it was validated as it was ranked (`gate_speculative_until`).
    checked: Option<crate::engine::CheckReport>,
    run: Run,
    schedule: Schedule,
    stats: crate::synth::PlanStats,
    /// Where the trees' run stopped, for its polish should it win.
    resume: Option<Resume>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{CollectiveKind, CollectiveSpec};
    use crate::topology::{Failures, parse_spec};

    /// torus:4x8 less link 1-2 at one chunk a NPU and a message, thorough: a trees run whose
    /// timeline the polish shortens (`trees::the_polish_runs_at_a_thorough_effort_and_shortens_the_run`).
    fn resumable() -> (crate::topology::Topology, Collective, Resume, Won) {
        let t = parse_spec("torus:4x8")
            .unwrap()
            .with_failures(&Failures { links: vec![[1, 2]], ..Failures::default() })
            .unwrap();
        let c = Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, 64 << 20).with_chunks_per_npu(1), &t)
            .unwrap();
        let (schedule, stats, resume) =
            crate::synth::trees::all_reduce_resumable(&t, &c, 1, 0, crate::synth::Effort::Thorough, &|| false).unwrap();
        let won = Won { schedule, stats, timing: None, report: None, time_ns: None };
        (t, c, resume.expect("above its busiest link"), won)
    }

    /// A polish the deadline stops keeps the run's schedule and says it was cut; one that runs
    /// to its end says it was not; a cancel is an error.
    #[test]
    fn a_polish_the_deadline_stops_says_so() {
        let (t, c, resume, won) = resumable();
        let before = won.schedule.transfers.len();
        let (kept, said) = polish_trees(&t, &c, resume, won, &|| false, &|| true).unwrap();
        let said = said.expect("a cut polish is reported");
        assert!(said.cut && !said.kept && said.timesteps_after.is_none(), "{said:?}");
        assert_eq!(kept.schedule.transfers.len(), before);
        assert_eq!(kept.stats.ten_timesteps, said.timesteps_before);

        let (t, c, resume, won) = resumable();
        let (kept, said) = polish_trees(&t, &c, resume, won, &|| false, &|| false).unwrap();
        let said = said.expect("the polish ran");
        assert!(!said.cut && said.kept, "{said:?}");
        assert!(said.timesteps_after.is_some_and(|a| a < said.timesteps_before), "{said:?}");
        assert_eq!(kept.stats.ten_timesteps, said.timesteps_after.unwrap());

        let (t, c, resume, won) = resumable();
        assert!(matches!(polish_trees(&t, &c, resume, won, &|| true, &|| true), Err(Error::Cancelled)));
    }

    /// A trees run ranked second within `POLISH_BOTH_WITHIN` of the winner is polished too and
    /// wins where its polish makes it the faster: a winner that cannot be polished, 0.5%
    /// faster than the runner-up, loses to the runner-up's 19 → 18 timesteps; 2% faster, the
    /// runner-up is left as it is and the winner kept.
    #[test]
    fn a_close_runner_up_is_polished_and_may_win() {
        let (t, c, resume, won) = resumable();
        let runner_ns = crate::sim::simulate(&won.schedule).unwrap().collective_time_ns;
        let candidate = |won: Won, seed: u64, time_ns: f64, resume: Option<Resume>| Candidate {
            time_ns,
            timing: None,
            checked: None,
            run: Run { variant: 0, seed, mode: Mode::Trees(1) },
            schedule: won.schedule,
            stats: won.stats,
            resume,
        };
        for (ahead, polished) in [(0.995, true), (0.98, false)] {
            let winner = resumable().3;
            let (run, kept, said) = polish_winners(
                &t,
                &[&c],
                candidate(winner, 7, runner_ns * ahead, None),
                Some(candidate(resumable().3, 8, runner_ns, Some(resumable().2))),
                false,
                &|| false,
                &|| false,
            )
            .unwrap();
            if polished {
                assert_eq!(run.seed, 8, "the polished runner-up wins");
                let said = said.expect("its polish is reported");
                assert!(said.kept && said.timesteps_after == Some(18), "{said:?}");
                assert!(kept.known_time_ns().is_some_and(|ns| ns < runner_ns * ahead));
            } else {
                assert_eq!(run.seed, 7, "a runner-up 2% behind is not polished");
                assert!(said.is_none());
            }
        }
        drop((resume, won));
    }
}
