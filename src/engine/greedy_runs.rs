//! The greedy's runs for one request: which planners run at which chunkings, seeds and
//! timesteps (`plan_runs`), each run's schedule (`produce`), and the fastest kept
//! (`synthesize_greedy`).

use super::fastest::{Fastest, Least, time};
use super::*;

/// The greedy's runs for one request: what each run plans, and what they share.
struct RunPlan {
    /// Every run: the matcher per (chunking, seed, TEN timestep), translation per chunking on
    /// a torus, the latency-mode planners where their rounds can pay.
    runs: Vec<Run>,
    /// TEN timesteps to try per variant (`Mode::Matching(f)` is the `f`th).
    factors: Vec<Vec<Option<f64>>>,
    /// Each variant's translation pattern, where translation serves.
    patterns: Vec<Option<TranslationPattern>>,
}

/// Lays out the greedy's runs over `variants` (the same collective at each chunks-per-NPU
/// value to try; the matcher runs on the first `matcher_variants`).
fn plan_runs(
    req: &SynthJob<'_>,
    variants: &[&Collective],
    matcher_variants: usize,
    tenants: Option<&[Collective]>,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<RunPlan, Error> {
    let c = variants[0];
    // Discretizations to try per variant: the given one, or the default and, when link times
    // are not multiples of the fastest, finer ones (a coarse grid misjudges the slower links).
    let nothing_needed = |c: &Collective| c.needed_iter(&c.holders()).next().is_none();
    let trivial = match tenants {
        None => nothing_needed(c),
        Some(t) => t.iter().all(nothing_needed),
    };
    let mut factors: Vec<Vec<Option<f64>>> = variants
        .iter()
        .map(|v| match req.discretization_ns {
            _ if trivial => Ok(vec![None]), // nothing moves: no TEN is built
            Some(f) => Ok(vec![Some(f)]),
            None => crate::synth::auto_discretizations(req.topology, v.chunk_size_bytes, req.switch_model)
                .map(|fs| fs.into_iter().map(Some).collect())
                .map_err(|e| Error::from(crate::synth::SynthError::from(e))),
        })
        .collect::<Result<_, _>>()?;
    let mut runs: Vec<Run> = (0..matcher_variants.clamp(1, variants.len()))
        .flat_map(|variant| {
            let fs = factors[variant].len();
            (0..req.seeds.max(1) as u64).flat_map(move |i| {
                (0..fs).map(move |f| Run { variant, seed: req.seed.wrapping_add(i), mode: Mode::Matching(f) })
            })
        })
        .collect();
    // Combining collectives: the matcher as it was before unequal shares and rarest-first picks
    // runs beside it (same seeds and timesteps), the faster kept, on up to `PLAIN_MAX_NPUS`.
    if tenants.is_none() && !trivial && c.combining && req.topology.npus() <= PLAIN_MAX_NPUS {
        let plain: Vec<Run> = runs
            .iter()
            .filter_map(|r| match r.mode {
                Mode::Matching(f) => Some(Run { mode: Mode::Plain(f), ..*r }),
                _ => None,
            })
            .collect();
        runs.extend(plain);
    }
    // An all-reduce on NPUs of unequal rates: also in pipelined stages (`synth::staged`), at the
    // matcher's chunkings, seeds and timesteps, on up to `STAGED_MAX_NPUS`.
    if tenants.is_none() && !trivial && req.topology.npus() <= STAGED_MAX_NPUS {
        let staged: Vec<Run> = runs
            .iter()
            .filter_map(|r| match r.mode {
                Mode::Matching(f) => Some((r, f)),
                _ => None,
            })
            .flat_map(|(r, f)| {
                crate::synth::staged::STAGES
                    .into_iter()
                    .filter(|&n| crate::synth::staged::applies(req.topology, variants[r.variant], n))
                    .map(move |n| Run { mode: Mode::Staged(n, f), ..*r })
            })
            .collect();
        runs.extend(staged);
    }
    // An all-reduce whose balanced shares sit on a few NPUs: also with the shares spread
    // (`synth::shares::spread`), at the matcher's chunkings, seeds and timesteps, below the
    // size where the matcher at one chunk a message gives way to the groups.
    if tenants.is_none() && !trivial && req.topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS {
        let spread: Vec<Run> = runs
            .iter()
            .filter_map(|r| match r.mode {
                Mode::Matching(f) if crate::synth::shares::concentrated(req.topology, variants[r.variant]) => {
                    Some(Run { mode: Mode::Spread(f), ..*r })
                }
                _ => None,
            })
            .collect();
        runs.extend(spread);
    }
    // Edges of mixed times on a small fabric: the matcher also at finer timesteps
    // (`synth::fine_discretizations`), on up to `FINE_GRID_MAX_NPUS`. Only the matcher: the
    // runs derived from it above keep the usual timesteps. Not where the routed planner serves
    // (all-to-all, scatter, gather: in the size sweep the finer runs never won there).
    if tenants.is_none()
        && !trivial
        && req.discretization_ns.is_none()
        && req.topology.npus() <= FINE_GRID_MAX_NPUS
        && !crate::synth::routed::applies(c)
    {
        for variant in 0..matcher_variants.clamp(1, variants.len()) {
            let fine =
                crate::synth::fine_discretizations(req.topology, variants[variant].chunk_size_bytes, req.switch_model)
                    .map_err(|e| Error::from(crate::synth::SynthError::from(e)))?;
            for d in fine {
                if factors[variant].iter().flatten().any(|&f| (f - d).abs() <= 1e-9 * d) {
                    continue;
                }
                factors[variant].push(Some(d));
                let f = factors[variant].len() - 1;
                for i in 0..req.seeds.max(1) as u64 {
                    runs.push(Run { variant, seed: req.seed.wrapping_add(i), mode: Mode::Matching(f) });
                }
            }
        }
    }
    // Translation on tori: one pattern per chunking, searched here (it is cheap). Where it
    // reaches the bound of any schedule moving one chunk per link per step, the matcher at
    // that chunking cannot be faster and does not run.
    let patterns = translation_patterns(req, variants, tenants.is_none() && !trivial, cancelled);
    // The cheapest pattern's price, when the caller has a schedule to price it against: the
    // busiest link's load of its schedule, a lower bound on its time (`translate::link_load_ns`).
    let mut cheapest_pattern: Option<f64> = None;
    for (variant, pattern) in patterns.iter().enumerate() {
        let Some((torus, pattern, optimal)) = pattern else { continue };
        if *optimal {
            runs.retain(|r| {
                r.variant != variant
                    || !matches!(r.mode, Mode::Matching(_) | Mode::Plain(_) | Mode::Staged(..) | Mode::Spread(_))
            });
        }
        if req.incumbent_ns.is_some() {
            let link = &req.topology.links()[0];
            let price = crate::synth::translate::link_load_ns(torus, pattern, variants[variant], link);
            cheapest_pattern = Some(cheapest_pattern.map_or(price, |p: f64| p.min(price)));
        }
        runs.push(Run { variant, seed: pattern.seed, mode: Mode::Translation });
    }
    // An all-reduce or all-gather whose chunks are mostly latency also moves them in groups
    // (at k = 1), but not where translation serves (an intact uniform torus keeps its runs as
    // they were). On thousands of NPUs the matcher at one chunk per message is both the slowest
    // run and, its messages a fifth latency, not the fastest schedule (torus:64x64 at 1 GiB
    // after three link failures: all-reduce 7.6 ms, in groups of four 6.8 ms; all-gather after
    // one: 4.26 ms, eight chunks a message 3.70 ms): the groups run instead.
    let grouping: &[u32] = if patterns.first().is_some_and(Option::is_some) { &[] } else { &req.grouping };
    if tenants.is_none() && !trivial && !grouping.is_empty() {
        let only = match variants[0].spec.kind {
            crate::collective::CollectiveKind::AllReduce => GROUPED_ONLY_ALL_REDUCE_NPUS,
            _ => GROUPED_ONLY_NPUS,
        };
        if req.topology.npus() >= only {
            runs.retain(|r| !(r.variant == 0 && matches!(r.mode, Mode::Matching(_))));
        }
        for &g in grouping {
            for i in 0..req.seeds.max(1) as u64 {
                runs.push(Run { variant: 0, seed: req.seed.wrapping_add(i), mode: Mode::Grouped(g) });
            }
        }
    }
    // Chunks that each go their own way (all-to-all, scatter, gather): the routed planner at
    // every chunking.
    let routed_only =
        tenants.is_none() && !trivial && crate::synth::routed::applies(c) && req.topology.npus() >= ROUTED_ONLY_NPUS;
    if tenants.is_none() && !trivial && crate::synth::routed::applies(c) {
        if routed_only {
            runs.clear();
        }
        for variant in 0..variants.len() {
            runs.push(Run { variant, seed: req.seed, mode: Mode::Routed });
        }
    }
    // The latency-mode planners (batched messages, doubling, the contribution flood) run
    // beside the matcher for one collective, where their rounds can pay.
    if tenants.is_none() && !trivial && !routed_only && latency_mode_pays(req.topology, c) {
        // Deterministic on direct links and cheap: the first seed. The contribution flood's
        // bytes do not depend on the chunking: the request's alone.
        if crate::synth::flood::contributions_apply(c, req.topology.npus())
            && crate::synth::flood::contributions_pay(req.topology, c)
        {
            runs.push(Run { variant: 0, seed: req.seed, mode: Mode::Contributions });
        }
        // The batched planner balances finer chunks better over an NPU's incoming links, and
        // the doubling patterns put every owner's block in every port's group: both run at
        // every chunking tried.
        for (variant, v) in variants.iter().enumerate() {
            runs.push(Run { variant, seed: req.seed, mode: Mode::Batched });
            if crate::synth::doubling::applies(v) {
                for shape in crate::synth::doubling::Shape::for_collective(v) {
                    runs.push(Run { variant, seed: req.seed, mode: Mode::Doubling(shape) });
                }
            }
        }
    }
    // Where every run is a translation pattern (the matcher cannot beat an optimal one) and
    // each is priced above the caller's schedule, the greedy cannot win: none is built (a
    // translation all-reduce on torus:64x64 is 4 M transfers). Runs of other planners are not
    // priced, so a greedy that has them runs whole, its statistics what it gives alone.
    if let (Some(price_ns), Some(incumbent_ns)) = (cheapest_pattern, req.incumbent_ns)
        && price_ns > incumbent_ns
        && runs.iter().all(|r| r.mode == Mode::Translation)
    {
        return Err(Error::PricedOut { price_ns, incumbent_ns });
    }
    Ok(RunPlan { runs, factors, patterns })
}

/// The doubling planners' labelling, searched once for every shape and chunking (runs wait
/// for the first).
type Labels = std::sync::OnceLock<Result<Vec<usize>, crate::synth::SynthError>>;

/// One greedy run's schedule (not yet ranked or validated).
fn produce(
    req: &SynthJob<'_>,
    plan: &RunPlan,
    variants: &[&Collective],
    tenants: Option<&[Collective]>,
    r: &Run,
    labels: &Labels,
    polled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, crate::synth::PlanStats), crate::synth::SynthError> {
    let opts = crate::synth::PlanOptions {
        seed: r.seed,
        switch_model: req.switch_model,
        discretization_ns: match r.mode {
            Mode::Matching(f) | Mode::Plain(f) | Mode::Staged(_, f) | Mode::Spread(f) => plan.factors[r.variant][f],
            _ => None,
        },
    };
    let c = variants[r.variant];
    match (tenants, r.mode) {
        (Some(t), _) => crate::synth::greedy_multi(req.topology, t, &opts, polled).map(|j| (j.schedule, j.stats)),
        (None, Mode::Matching(_)) => crate::synth::greedy(req.topology, c, &opts, polled),
        (None, Mode::Grouped(g)) => crate::synth::greedy_grouped(req.topology, c, g as usize, &opts, polled),
        (None, Mode::Plain(_)) => crate::synth::greedy_plain(req.topology, c, &opts, polled),
        (None, Mode::Staged(n, _)) => crate::synth::greedy_staged(req.topology, c, n, &opts, polled),
        (None, Mode::Spread(_)) => crate::synth::greedy_spread(req.topology, c, &opts, polled),
        (None, Mode::Batched) => crate::synth::batched(req.topology, c, &opts, polled),
        (None, Mode::Doubling(shape)) => {
            let at = labels.get_or_init(|| {
                crate::synth::doubling::labelling(req.topology, variants[0], req.switch_model, r.seed, polled)
            });
            at.clone()
                .and_then(|at| {
                    crate::synth::doubling::synthesize(req.topology, c, req.switch_model, shape, &at, r.seed)
                })
                .map(|(s, rounds, discretization_ns)| (s, flat_stats(rounds, discretization_ns)))
        }
        (None, Mode::Translation) => {
            let (torus, pattern, _) = plan.patterns[r.variant].as_ref().expect("a translation run has its pattern");
            crate::synth::translated(req.topology, c, &opts, torus, pattern, polled)
        }
        (None, Mode::Routed) => {
            let groups = crate::synth::routed::groups(req.topology, c.chunk_size_bytes);
            crate::synth::routed::synthesize(req.topology, c, &groups, r.seed, polled)
        }
        (None, Mode::Contributions) => {
            crate::synth::flood::all_reduce_by_contributions(req.topology, c, req.switch_model, r.seed, polled)
                .map(|(s, rounds, discretization_ns)| (s, flat_stats(rounds, discretization_ns)))
        }
    }
}

/// The greedy on collectives already built on the request's topology: every run of
/// `plan_runs` on the pool (the request's own with `threads`, else the caller's), the fastest
/// kept, reporting progress by runs finished. Runs the `deadline` cuts are dropped; if none
/// finished, the run fails with `Error::TimeLimit`. The request was checked by `Request::new`.
pub(super) fn synthesize_greedy(
    req: &SynthJob<'_>,
    variants: Variants,
    tenants: Option<&[Collective]>,
    started: std::time::Instant,
    deadline: std::time::Instant,
    ctl: Control,
) -> Result<SynthOutput, Error> {
    use rayon::prelude::*;
    let Variants { all: variants, matcher: matcher_variants } = variants;
    let cancelled = ctl.cancelled;
    let reporter = Reporter { cancelled, progress: ctl.progress, last: std::sync::Mutex::new(None) };
    let plan = plan_runs(req, variants, matcher_variants, tenants, cancelled)?;
    let runs = &plan.runs;
    let single = runs.len() == 1;
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let total = runs.len();
    let past_deadline = || std::time::Instant::now() >= deadline;
    let polled = || {
        reporter.poll(&|| {
            let done = finished.load(std::sync::atomic::Ordering::Relaxed);
            (done as f64 / total as f64, format!("greedy: {done} of {total} runs done"))
        }) || past_deadline()
    };
    let polled: &(dyn Fn() -> bool + Sync) = &polled;
    let labels = Labels::new();
    let incumbent = super::check::Incumbent::new(req.incumbent_ns);
    let run = |(index, r): (usize, &Run)| -> Outcome {
        // Checked before a run builds anything: a cancel or the deadline skips every run not
        // yet started at once (a run's own first poll comes only after its problem is built).
        if cancelled() {
            return Outcome { cancelled: true, ..Outcome::default() };
        }
        if past_deadline() {
            return Outcome::cut();
        }
        let t0 = std::time::Instant::now();
        let produced = produce(req, &plan, variants, tenants, r, &labels, polled);
        tracing::debug!(target: "ccsynth::timing", mode = ?r.mode, variant = r.variant, wall_ms = t0.elapsed().as_secs_f64() * 1e3, "greedy: run produced");
        finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match produced {
            // Several under a deferred gate: each is simulated and, while it is the fastest so
            // far, validated beside (on the pool's threads left by runs still going), so the
            // winner leaves validated.
            Ok((schedule, stats)) if !single && req.gate == Gate::Deferred => {
                let checked = super::check::gate_speculative_until(schedule, &incumbent, polled);
                if cancelled() {
                    return Outcome { cancelled: true, ..Outcome::default() };
                }
                match checked {
                    Ok((schedule, report)) => {
                        let time_ns = report.collective_time_ns.unwrap_or(f64::INFINITY);
                        tracing::debug!(target: "ccsynth::timing", mode = ?r.mode, time_ns, validated = report.valid, "greedy: run ranked");
                        let (timing, checked) = match report.valid {
                            true => (None, Some(report)),
                            false => (report.timing, None),
                        };
                        let best = Candidate { time_ns, timing, checked, run: *r, schedule, stats };
                        Outcome::won(best)
                    }
                    Err(Error::Cancelled) => Outcome::cut(),
                    Err(e) => Outcome { error: Least::of(index, e), ..Outcome::default() },
                }
            }
            Ok((schedule, stats)) => {
                // One candidate needs no ranking; the gate simulates it anyway. Several are
                // ranked by their simulation, which the winner's gate then reuses.
                let timing = if single {
                    None
                } else {
                    match crate::sim::simulate_until(&schedule, polled) {
                        Err(crate::sim::SimError::Stopped) if cancelled() => {
                            return Outcome { cancelled: true, ..Outcome::default() };
                        }
                        Err(crate::sim::SimError::Stopped) => return Outcome::cut(),
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
                let best = Candidate { time_ns, timing, checked: None, run: *r, schedule, stats };
                Outcome::won(best)
            }
            Err(e) if e.is_cancelled() && cancelled() => Outcome { cancelled: true, ..Outcome::default() },
            Err(e) if e.is_cancelled() => Outcome::cut(),
            // Stages that did not overlap: no candidate (the one-stage run serves), and not the
            // error to report if nothing else finished.
            Err(crate::synth::SynthError::Greedy(crate::synth::greedy::GreedyError::StagesNotShorter)) => {
                Outcome::default()
            }
            Err(e) => Outcome { error: Least::of(index, e.into()), ..Outcome::default() },
        }
    };
    // The winner does not depend on the threads (`Outcome::merge`), only the wall time does.
    let all_runs = || runs.par_iter().enumerate().map(run).reduce(Outcome::default, Outcome::merge);
    let outcome = match req.threads {
        _ if single => run((0, &runs[0])),
        // The caller's pool: the process's (one thread per core), a service worker's, or
        // `auto`'s.
        None => all_runs(),
        Some(n) => match rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build() {
            Ok(pool) => pool.install(all_runs),
            // No threads to be had: the same runs, one after another.
            Err(_) => runs.iter().enumerate().map(run).fold(Outcome::default(), Outcome::merge),
        },
    };
    if outcome.cancelled {
        return Err(Error::Cancelled);
    }
    let Some(best) = outcome.best.into_inner() else {
        return Err(outcome.error.into_inner().unwrap_or(Error::TimeLimit { limit_s: req.time_limit_s }));
    };
    let Candidate { run, schedule, stats: gst, timing, checked: report, .. } = best;
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
        discretizations_tried: plan.factors[run.variant].len(),
        replacements: gst.replacements,
        greedy_mode: run.mode.name(),
        modes_tried: runs.iter().map(|r| r.mode.name()).fold(Vec::new(), |mut m, name| {
            if !m.contains(&name) {
                m.push(name);
            }
            m
        }),
        runs_cut: outcome.cut,
    };
    let mut stats = base_stats(req, gst, &schedule, &report, tenants, synthesis_ms, checked);
    stats.chosen_seed = run.seed;
    stats.chunks_per_npu_tried = variants.iter().map(|v| v.spec.chunks()).collect();
    stats.greedy = Some(search);
    Ok(SynthOutput { schedule, report, stats, lp: Vec::new() })
}

/// Each variant's translation pattern (`synth::translate`), where it serves: the torus, the
/// pattern, and whether it is optimal among schedules of one chunk per link per step (every
/// NPU receives k(N−1) chunks per phase over its links; with a reduce cost γ the two phases'
/// transfers differ in length, so a two-phase bound is not claimed then).
type TranslationPattern = (crate::synth::translate::Torus, crate::synth::translate::Pattern, bool);

fn translation_patterns(
    req: &SynthJob<'_>,
    variants: &[&Collective],
    eligible: bool,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Vec<Option<TranslationPattern>> {
    use crate::synth::translate;
    let torus = if eligible { translate::Torus::of(req.topology) } else { None };
    variants
        .iter()
        .map(|v| {
            let torus = torus.as_ref().filter(|t| translate::applies(t, v))?;
            let k = v.spec.chunks() as usize;
            let pattern = translate::search(torus, k, req.seed, cancelled).ok()?;
            let phases: u32 = if v.spec.kind == crate::collective::CollectiveKind::AllReduce { 2 } else { 1 };
            let per_npu = (phases as usize * k * (torus.npus() - 1)).div_ceil(torus.directions()) as u32;
            let no_gamma = v.spec.gamma_ns_per_byte.is_none_or(|g| g == 0.0) || phases == 1;
            let optimal = no_gamma && phases * pattern.steps <= per_npu.max(phases * torus.diameter());
            Some((torus.clone(), pattern, optimal))
        })
        .collect()
}

/// NPUs up to which the matcher as it was before unequal shares (`Mode::Plain`) runs beside
/// the matcher on combining collectives. It was 256; on 2026-11-28 (docs/BENCHMARKS.md,
/// "Where the plain matcher wins") it won only on heterogeneous fabrics of 12–42 NPUs
/// (irregular-hetero.json by 1.08–1.37×, mesh:4x4 with slow edges by 1.075×,
/// dragonfly:6:7 with slow global links by 1.004×) and never in 29 all-reduces and
/// reduce-scatters of 65–256 NPUs (tori with and without failures, meshes with slow edges,
/// hypercubes, rails, hier, dragonflies, switches), where its run is the slowest of the
/// greedy's (1.4 s of Ring(2)_FC(4)_Switch(32)'s 1.5 s).
pub const PLAIN_MAX_NPUS: usize = 64;

/// NPUs up to which the matcher also runs at finer timesteps where edge times are mixed
/// (`synth::fine_discretizations`): each run is cheap there (0.1–0.2 s at 64 NPUs).
pub const FINE_GRID_MAX_NPUS: usize = 64;

/// NPUs up to which an all-reduce on NPUs of unequal rates also runs in pipelined stages
/// (`Mode::Staged`).
pub const STAGED_MAX_NPUS: usize = 256;

/// NPUs from which an all-reduce or all-gather that moves chunks in groups
/// (`chunking::grouping`) does not also run the matcher at one chunk per message.
pub const GROUPED_ONLY_NPUS: usize = 2048;

/// `GROUPED_ONLY_NPUS` for an all-reduce: on torus:32x32 at 256 MiB after one or three failed
/// links the matcher at one chunk per message took 2.2–2.6 s, the longest run, for a schedule
/// 5–8% slower than the grouped runs' (1.704 against 1.571 ms, 1.848 against 1.729 ms).
pub const GROUPED_ONLY_ALL_REDUCE_NPUS: usize = 1024;

/// NPUs from which an all-to-all, scatter or gather runs the routed planner alone: the
/// matcher's time grows with every chunk's candidate edges (7.3 s of a 512-NPU all-to-all) and
/// its schedules are slower there (torus:8x8x8 at 64 MiB: 1066.5 µs against the routed
/// planner's 765 µs); the batched planner relays every chunk everywhere (torus:8x8x8 at
/// 16 MiB: 80 s and 8 GB beside the routed planner).
pub const ROUTED_ONLY_NPUS: usize = 256;

/// NPUs up to which the greedy always tries its latency mode; beyond, only where one chunk is
/// mostly latency (its transfer time on the fastest link below the smallest link latency),
/// as the batched planner relays every chunk everywhere and the ranking then simulates every
/// candidate: on thousands of NPUs at large sizes it costs more than it can win.
pub const LATENCY_MODE_MAX_NPUS: usize = 256;

/// Whether the greedy tries its latency mode on `c` (see `LATENCY_MODE_MAX_NPUS`).
fn latency_mode_pays(topo: &crate::topology::Topology, c: &Collective) -> bool {
    if topo.npus() <= LATENCY_MODE_MAX_NPUS {
        return true;
    }
    chunking::beta_over_alpha(topo, c.chunk_size_bytes) < 1.0
}

/// The collective at each chunks per NPU a synthesis tries: the first `matcher` for every
/// planner, the rest (finer chunkings that cost the latency-mode planners no extra rounds) for
/// those alone.
#[derive(Clone, Copy)]
pub(super) struct Variants<'a> {
    pub(super) all: &'a [&'a Collective],
    pub(super) matcher: usize,
}

/// One greedy run's parameters: which variant (chunks per NPU), seed and planner.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// Index into the variants tried.
    variant: usize,
    seed: u64,
    mode: Mode,
}

/// How a greedy run plans: the matcher at one of the variant's discretizations, or the
/// latency mode (batched messages, or for all-reduce every contribution flooded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// The matcher, at this index into the discretizations tried.
    Matching(usize),
    /// Batched messages along shortest paths (`synth::flood::plan`).
    Batched,
    /// All-reduce by flooding every contribution (`synth::flood::all_reduce_by_contributions`).
    Contributions,
    /// Recursive doubling (or halving then doubling) on a searched hypercube labelling
    /// (`synth::doubling`).
    Doubling(crate::synth::doubling::Shape),
    /// One broadcast pattern translated to every source on a torus (`synth::translate`).
    Translation,
    /// The matcher on an all-reduce with this many chunks moved together in every message
    /// (`synth::greedy_grouped`), at the fastest edge's timestep.
    Grouped(u32),
    /// Every chunk on a path of its own, spread over the shortest paths and list-scheduled
    /// at the best of a few numbers of chunks per message (`synth::routed`).
    Routed,
    /// The matcher as before unequal shares (`synth::greedy_plain`), at this index into the
    /// discretizations tried: beside `Matching` on combining collectives of up to
    /// `PLAIN_MAX_NPUS` NPUs.
    Plain(usize),
    /// The matcher's all-reduce in this many pipelined stages (`synth::staged`), at this index
    /// into the discretizations tried: beside `Matching` where at least one NPU in eight moves
    /// data slower than the fastest (`synth::staged::applies`), on up to `STAGED_MAX_NPUS` NPUs.
    Staged(u32, usize),
    /// The matcher's all-reduce with spread shares (`synth::greedy_spread`), at this index into
    /// the discretizations tried: beside `Matching` where the balanced shares sit on fewer than
    /// one NPU in eight (`synth::shares::concentrated`).
    Spread(usize),
}

/// The statistics of a planner that works in rounds, not on the matcher's TEN.
fn flat_stats(rounds: u32, discretization_ns: f64) -> crate::synth::PlanStats {
    crate::synth::PlanStats {
        ten_timesteps: rounds,
        phase_timesteps: vec![rounds],
        discretization_ns,
        replacements: 0,
        shares: None,
        overlapped: false,
        chunks_per_message: None,
        stages: None,
    }
}

impl Mode {
    /// The name `stats.greedy_mode` reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Matching(_) => "matching",
            Mode::Batched => "batched",
            Mode::Contributions => "contributions",
            Mode::Doubling(s) if s.halving => "halving_doubling",
            Mode::Doubling(_) => "doubling",
            Mode::Translation => "translation",
            Mode::Grouped(_) | Mode::Plain(_) | Mode::Staged(..) | Mode::Spread(_) => "matching",
            Mode::Routed => "routed",
        }
    }
}

/// The runs of a synthesis folded together: the fastest schedule, the first failure (by run
/// order), how many runs the deadline cut, and whether the caller cancelled. Merging is
/// associative and picks the same winner whatever order the threads finish in.
#[derive(Default)]
struct Outcome {
    /// The fastest run, ties to the smaller chunks per NPU, then the lower seed, then the
    /// earlier discretization or planner.
    best: Fastest<(usize, u64, Mode), Candidate>,
    /// The first run's failure, by run order.
    error: Least<usize, Error>,
    cut: usize,
    cancelled: bool,
}

impl Outcome {
    fn cut() -> Outcome {
        Outcome { cut: 1, ..Outcome::default() }
    }

    fn won(c: Candidate) -> Outcome {
        let key = (time(c.time_ns), (c.run.variant, c.run.seed, c.run.mode));
        Outcome { best: Fastest::of(key, c), ..Outcome::default() }
    }

    fn merge(self, other: Outcome) -> Outcome {
        Outcome {
            best: self.best.merge(other.best),
            error: self.error.merge(other.error),
            cut: self.cut + other.cut,
            cancelled: self.cancelled || other.cancelled,
        }
    }
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
}
