//! The engine: the only front door to the core. Doors (CLI, HTTP workers, batches, bench)
//! build a `Request` and call `run`; every schedule leaves through `finalize` (validate,
//! simulate, bound). The registry says which algorithms exist and what they serve.

#![deny(missing_docs)]

mod check;
pub mod chunking;
mod compare;
mod greedy_runs;
pub mod portfolio;
pub mod regenerate;
pub mod registry;
pub mod request;

pub use check::{CheckReport, EngineError, check, check_within, finalize};
use check::{Gate, check_bounded, finalize_deferred, finalize_until, gate_timed_until, gate_until};
pub use compare::{Comparison, ComparisonRow, compare, compare_among, compare_until};
pub use greedy_runs::{GROUPED_ONLY_NPUS, LATENCY_MODE_MAX_NPUS, Mode, PLAIN_MAX_NPUS};
use greedy_runs::{Variants, synthesize_greedy};

pub use crate::bounds::LowerBounds;
pub use crate::export::chakra::ChakraExport;
pub use crate::export::msccl::{MscclOptions, MscclProtocol, MscclTarget};
pub use crate::export::mscclpp::MscclppOptions;
pub use crate::export::plot::{BOUND_SERIES as GOODPUT_BOUND_SERIES, GoodputChart, Series};
pub use crate::synth::ilp::{IlpStats, IlpStatus, PhaseLp};
pub use portfolio::{PortfolioEntry, PortfolioRun, PortfolioStats};
pub use regenerate::{Kept, RegenerationRun, RegenerationStats, regenerate, regeneration_target};
pub use registry::{Algorithm, SYNTHESIZERS};
pub use request::{Chunking, Limits, Options, Request, RequestSpec, Target};

use crate::collective::Collective;
use crate::schedule::Schedule;
use serde::Serialize;

/// A schedule as MSCCL XML (docs/FORMAT.md, "MSCCL XML"): refused when it cannot fit the
/// executor's limits (a cheap estimate first, before anything is built), when it is not
/// valid, or when the file would break a limit of the executor (each error names it).
pub fn export_msccl(s: &Schedule, opts: &MscclOptions) -> Result<String, Error> {
    use crate::export::msccl;
    msccl::fits(s).map_err(|e| Error::Unsupported(format!("MSCCL XML: {e}")))?;
    require_valid(s)?;
    msccl::to_xml(s, opts).map_err(|e| Error::Unsupported(format!("MSCCL XML: {e}")))
}

/// A schedule as an MSCCL++ execution plan (docs/FORMAT.md, "MSCCL++ execution plans"):
/// refused when it cannot fit the executor's limits (a cheap estimate first), when it is not
/// valid, or when the plan would break a limit (each error names it).
pub fn export_mscclpp(s: &Schedule, opts: &MscclppOptions) -> Result<String, Error> {
    use crate::export::mscclpp;
    mscclpp::fits(s).map_err(|e| Error::Unsupported(format!("MSCCL++ plan: {e}")))?;
    require_valid(s)?;
    mscclpp::to_plan(s, opts).map_err(|e| Error::Unsupported(format!("MSCCL++ plan: {e}")))
}

/// A schedule as Chakra execution traces for ASTRA-sim (docs/FORMAT.md, "Chakra ET export"):
/// validated first; `prefix` names the files, `dir` (absolute) is where they will be, named in
/// the system configuration (without it, the bare prefix). A bad prefix is the caller's error
/// (field `prefix`).
pub fn export_chakra(s: &Schedule, prefix: &str, dir: Option<&str>) -> Result<ChakraExport, Error> {
    use crate::export::chakra::{self, ChakraError};
    if s.transfers.len() > chakra::MAX_TRANSFERS {
        let e = ChakraError::TooManyTransfers { transfers: s.transfers.len() };
        return Err(Error::Unsupported(format!("Chakra ET: {e}")));
    }
    require_valid(s)?;
    chakra::to_chakra(s, prefix, dir).map_err(|e| match e {
        ChakraError::Prefix { .. } => Error::Input(crate::error::InputError::new("prefix", e.to_string())),
        e => Error::Unsupported(format!("Chakra ET: {e}")),
    })
}

/// The files of a Chakra export as one tar archive.
pub fn chakra_tar(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    crate::export::chakra::to_tar(files)
}

/// Validates and simulates a schedule a caller gives (without the lower bounds): an invalid one
/// is the caller's error, naming the violation count and the first violation.
pub fn require_valid(s: &Schedule) -> Result<CheckReport, Error> {
    let r = check_bounded(s, false);
    if !r.valid {
        let first = r.violations.first().map(|v| v.message.as_str()).unwrap_or("unknown");
        return Err(Error::Input(crate::error::InputError::new(
            "schedule",
            format!("not a valid schedule ({} violations; the first: {first})", r.violation_count),
        )));
    }
    Ok(r)
}

/// Slices a Chrome trace written by the CLI may hold (one per transfer and link of its path;
/// about 300 bytes each).
pub const MAX_TRACE_SLICES: usize = 2_000_000;
/// The same for the HTTP service, where one request must not take hundreds of megabytes.
pub const API_MAX_TRACE_SLICES: usize = 200_000;

/// The replay's per-transfer times and links, for the pictures: refused when the schedule
/// cannot be simulated or would draw more than `max_slices` slices (estimated first).
fn replayed(s: &Schedule, max_slices: usize) -> Result<(Vec<crate::sim::TransferTime>, Vec<Vec<usize>>), Error> {
    let n = crate::export::trace::slices(s);
    if n > max_slices {
        return Err(Error::Unsupported(format!(
            "the picture would hold {n} slices (one per transfer and link of its path); at most {max_slices}"
        )));
    }
    let r = check_bounded(s, false);
    if r.timing.is_none() {
        let first = r.violations.first().map(|v| v.message.as_str()).unwrap_or("unknown");
        return Err(Error::Input(crate::error::InputError::new("schedule", format!("cannot be simulated: {first}"))));
    }
    let internal = |e: crate::sim::SimError| Error::Unsupported(e.to_string());
    let (_, times) = crate::sim::simulate_with_times(s).map_err(internal)?;
    let links =
        (0..s.transfers.len()).map(|i| crate::sim::links_of(s, i)).collect::<Result<_, _>>().map_err(internal)?;
    Ok((times, links))
}

/// Each transfer's start and end in the replay (indexed as `s.transfers`).
pub fn transfer_times(s: &Schedule) -> Result<Vec<crate::sim::TransferTime>, Error> {
    crate::sim::simulate_with_times(s).map(|(_, t)| t).map_err(|e| Error::Unsupported(e.to_string()))
}

/// The schedule's replay as a Chrome/Perfetto trace (JSON): one track per link, one slice per
/// transfer on each link of its path, times in µs; refused beyond `max_slices` slices
/// (`MAX_TRACE_SLICES` for the CLI, `API_MAX_TRACE_SLICES` for the service). Invalid but simulatable schedules are
/// drawn too (that is when one looks).
pub fn export_trace(s: &Schedule, max_slices: usize) -> Result<String, Error> {
    let (times, links) = replayed(s, max_slices)?;
    Ok(crate::export::trace::chrome_trace(s, &times, &links))
}

/// The schedule's replay as an SVG timeline of link use.
pub fn plot_timeline(s: &Schedule) -> Result<String, Error> {
    let (times, links) = replayed(s, crate::export::plot::MAX_TIMELINE_SLICES)?;
    Ok(crate::export::plot::timeline_svg(s, &times, &links))
}

/// Goodput against message size as SVG, one chart per entry.
pub fn plot_goodput(charts: &[GoodputChart]) -> String {
    crate::export::plot::goodput_svg(charts)
}

/// What `run_synthesizer` hands the greedy or the ILP: a checked `Request` with the budget
/// left and the greedy's latency mode decided.
#[derive(Clone, Debug)]
struct SynthJob<'a> {
    /// Where to synthesize.
    topology: &'a crate::topology::Topology,
    /// `Greedy` or `Ilp`.
    algorithm: Algorithm,
    /// The first seed.
    seed: u64,
    /// Independent seeds `seed..seed+seeds`, run in parallel; the best by simulated time wins.
    seeds: usize,
    /// Threads for the seeds (and HiGHS).
    threads: Option<usize>,
    /// How switches appear in the time-expanded network.
    switch_model: crate::ten::SwitchModel,
    /// The TEN timestep; `None` tries the automatic ones.
    discretization_ns: Option<f64>,
    /// The request's overall budget, seconds (what a `TimeLimit` error names).
    time_limit_s: f64,
    /// Options of the `ilp` algorithm (its HiGHS threads come from `threads`; its time limit
    /// is what is left of the budget).
    ilp: crate::synth::ilp::IlpOptions,
    /// Chunks moved together per message the greedy also tries on an all-reduce
    /// (`synth::greedy_grouped`), when the request leaves the chunking open.
    grouping: Vec<u32>,
    /// How the kept schedule is checked (`auto` defers its candidates' validation and works
    /// out the bounds once, for the winner).
    gate: Gate,
    /// The time of a schedule the caller already has (`auto`'s fastest so far): a greedy run
    /// priced above it before it is built (a translation pattern's busiest link) is skipped.
    incumbent_ns: Option<f64>,
}

/// The top-level `stats` object of a synthesized schedule: what every synthesizer reports,
/// then the greedy's search (`greedy`) or the ILP's (`ilp`), flattened into the same object.
#[derive(Clone, Debug, Serialize)]
pub struct SynthStats {
    /// The synthesizer.
    pub algorithm: String,
    /// Wall time of the synthesis proper (every seed and discretization tried).
    pub synthesis_ms: f64,
    /// Wall time of validating, simulating and bounding the chosen schedule.
    pub check_ms: f64,
    /// The seed whose schedule was kept (the ILP's: its greedy warm start's).
    pub chosen_seed: u64,
    /// TEN timesteps of the kept schedule (all phases).
    pub ten_timesteps: u32,
    /// TEN timesteps per phase (reduce phase first for combining collectives).
    pub phase_timesteps: Vec<u32>,
    /// The kept schedule's TEN timestep.
    pub discretization_ns: f64,
    /// How switches appeared in the TEN.
    pub switch_model: crate::ten::SwitchModel,
    /// Transfers of the kept schedule.
    pub transfers: usize,
    /// Distinct steps of the kept schedule.
    pub rounds: usize,
    /// Chunks per NPU tried (the request's, or those the engine chose to search).
    pub chunks_per_npu_tried: Vec<u32>,
    /// Multi-tenant runs: each tenant's kind and its chunk ids `[start, end)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<TenantChunks>,
    /// An all-reduce whose NPUs move data at different rates (a failed link, a mesh's edges,
    /// slower links): the unequal shares the matcher reduced the chunks to (chunks, the fewest
    /// and most one NPU is the root of, how many NPUs are a root). Absent with equal shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<crate::synth::shares::ShareStats>,
    /// With unequal shares: the two phases run in one timeline (`synth::overlap`), the
    /// broadcast of chunks reduced early beside the reduction of the rest; `ten_timesteps` is
    /// then that schedule's, shorter than the sum of `phase_timesteps`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub overlapped: bool,
    /// Chunks moved together per message (fewer, larger messages where a chunk per NPU is
    /// mostly latency): an all-reduce's every message carries this many, an all-gather's at most
    /// this many; absent when one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks_per_message: Option<u32>,
    /// The `greedy` algorithm's search: seeds, discretizations and planners tried.
    #[serde(flatten)]
    pub greedy: Option<GreedySearch>,
    /// The `ilp` algorithm's search: status, horizon, bounds, gap, solves and times.
    #[serde(flatten)]
    pub ilp: Option<crate::synth::ilp::IlpStats>,
}

impl SynthStats {
    /// The greedy's planner that made the schedule (`None` for the ILP).
    pub fn greedy_mode(&self) -> Option<&'static str> {
        self.greedy.as_ref().map(|g| g.greedy_mode)
    }
}

/// What the `greedy` algorithm searched: its runs over seeds, discretizations, chunkings and
/// planners, and which one won.
#[derive(Clone, Debug, Serialize)]
pub struct GreedySearch {
    /// Greedy runs with distinct seeds.
    pub seeds_tried: usize,
    /// TEN timesteps tried at the kept schedule's chunking (the given one, or the automatic
    /// ones).
    pub discretizations_tried: usize,
    /// Greedy replacements of a chosen edge by a better one.
    pub replacements: usize,
    /// The planner that made the kept schedule: `matching` (the TEN matcher), `translation`,
    /// `batched`, `contributions`, `doubling` or `halving_doubling`.
    pub greedy_mode: &'static str,
    /// The planners tried.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub modes_tried: Vec<&'static str>,
    /// Runs the time limit cut before they finished (their schedules were not kept).
    pub runs_cut: usize,
}

/// One tenant of a multi-tenant synthesis and its chunk ids.
#[derive(Clone, Debug, Serialize)]
pub struct TenantChunks {
    /// The tenant's collective.
    pub kind: crate::collective::CollectiveKind,
    /// Its chunk ids `[start, end)` in the joint schedule.
    pub chunks: [usize; 2],
}

/// A synthesis's result (it passed `finalize`); `run_synthesizer` makes it an `Output`.
struct SynthOutput {
    schedule: Schedule,
    report: CheckReport,
    stats: SynthStats,
    /// The ILP's last model of each phase in LP format, when `ilp.keep_lp` was set.
    lp: Vec<crate::synth::ilp::PhaseLp>,
}

/// Where a synthesis reports how far it got: (fraction in [0, 1), message). Called from the
/// synthesizers' own cancel polls, at most a few times a second.
pub type Progress<'a> = &'a (dyn Fn(f64, &str) + Sync);

/// A cancel poll that also reports progress, throttled to one report per 200 ms.
struct Reporter<'a> {
    cancelled: &'a (dyn Fn() -> bool + Sync),
    progress: Progress<'a>,
    last: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Reporter<'_> {
    fn poll(&self, estimate: &dyn Fn() -> (f64, String)) -> bool {
        let now = std::time::Instant::now();
        let due = {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| now.duration_since(t).as_millis() >= 200);
            if due {
                *last = Some(now);
            }
            due
        };
        if due {
            let (fraction, message) = estimate();
            (self.progress)(fraction.clamp(0.0, 0.99), &message);
        }
        (self.cancelled)()
    }
}

/// The ILP on the request's collective (or tenants), reporting progress as the share of its
/// time limit used (an upper bound on what is left).
fn synthesize_ilp_reporting(
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

/// The statistics every synthesizer reports, for one run with the request's seed.
fn base_stats(
    req: &SynthJob<'_>,
    gst: crate::synth::PlanStats,
    schedule: &Schedule,
    report: &CheckReport,
    tenants: Option<&[Collective]>,
    synthesis_ms: f64,
    checked: std::time::Instant,
) -> SynthStats {
    SynthStats {
        shares: gst.shares.clone(),
        overlapped: gst.overlapped,
        chunks_per_message: gst.chunks_per_message,
        algorithm: req.algorithm.name().to_string(),
        synthesis_ms,
        check_ms: checked.elapsed().as_secs_f64() * 1e3,
        chosen_seed: req.seed,
        ten_timesteps: gst.ten_timesteps,
        phase_timesteps: gst.phase_timesteps,
        discretization_ns: gst.discretization_ns,
        switch_model: req.switch_model,
        chunks_per_npu_tried: vec![schedule.collective.chunks()],
        transfers: schedule.transfers.len(),
        rounds: report.rounds,
        tenants: tenants
            .into_iter()
            .flatten()
            .scan(0usize, |base, t| {
                let r = TenantChunks { kind: t.spec.kind, chunks: [*base, *base + t.num_chunks] };
                *base += t.num_chunks;
                Some(r)
            })
            .collect(),
        greedy: None,
        ilp: None,
    }
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
    let not_run = |g: Option<f64>, reason: String, wall_ms: f64| crate::synth::ilp::IlpGrid {
        wall_ms,
        discretization_ns: g.unwrap_or(0.0),
        status: None,
        horizon: None,
        horizon_lower_bound: None,
        collective_time_ns: None,
        reason: Some(reason),
    };
    let deadline = started + std::time::Duration::from_secs_f64(req.ilp.time_limit_s);
    let mut best: Option<SynthOutput> = None;
    let mut tried = Vec::with_capacity(grids.len());
    let mut first_took: Option<f64> = None;
    for (i, &IlpGridPlan { grid, same_as }) in grids.iter().enumerate() {
        if let Some(f) = same_as {
            tried.push(not_run(grid, format!("not run: the model at {f} ns on another time scale"), 0.0));
            continue;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now()).as_secs_f64();
        // A finer grid's model is larger than the one before: with (almost) nothing left, the
        // ILP would return its greedy warm start, which the greedy algorithm covers already.
        if best.is_some() && left < 0.05 {
            tried.push(not_run(grid, "not run: the time limit was used up".into(), 0.0));
            continue;
        }
        let to_run = grids[i..].iter().filter(|p| p.same_as.is_none()).count();
        let mut share = (left / to_run as f64).max(1e-3);
        // A finer grid's model is larger and its optimum often no faster than the first
        // grid's: each gets at most twice what the first grid took (at least a second), so a
        // case the first grid settles in a second does not spend the whole limit on grids that
        // cannot be proven.
        if let Some(first) = first_took {
            share = share.min((2.0 * first).max(1.0));
        }
        let began = std::time::Instant::now();
        let ran = ilp_at(req, c, tenants, grid, share, started, cancelled);
        let took = began.elapsed().as_secs_f64();
        first_took.get_or_insert(took);
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
                let time = |o: &SynthOutput| o.report.collective_time_ns.unwrap_or(f64::INFINITY);
                if best.as_ref().is_none_or(|b| time(&out) < time(b)) {
                    best = Some(out);
                }
            }
            // The first grid's failure is the request's; a finer grid's only loses that grid
            // (a cancel and an invalid schedule, a bug, are never only a grid's).
            Err(e) if best.is_none() || matches!(e, Error::Cancelled | Error::Internal(_)) => return Err(e),
            Err(e) => tried.push(not_run(grid, e.to_string(), took * 1e3)),
        }
    }
    let mut out = best.expect("the first grid either succeeds or returns its error");
    out.stats.synthesis_ms = started.elapsed().as_secs_f64() * 1e3 - out.stats.check_ms;
    if let Some(ilp) = &mut out.stats.ilp {
        ilp.grids = tried;
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

/// One ILP run at one TEN timestep (`None`: the fastest edge's time) within `time_limit_s`.
fn ilp_at(
    req: &SynthJob<'_>,
    c: &Collective,
    tenants: Option<&[Collective]>,
    grid: Option<f64>,
    time_limit_s: f64,
    started: std::time::Instant,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<SynthOutput, Error> {
    let mut iopts = req.ilp.clone();
    iopts.threads = req.threads.unwrap_or(1).max(1) as u32;
    iopts.time_limit_s = time_limit_s;
    let opts = crate::synth::PlanOptions { seed: req.seed, switch_model: req.switch_model, discretization_ns: grid };
    let produced = match tenants {
        None => crate::synth::ilp(req.topology, c, &opts, &iopts, cancelled),
        Some(t) => {
            crate::synth::ilp_multi(req.topology, t, &opts, &iopts, cancelled).map(|(j, i)| (j.schedule, j.stats, i))
        }
    };
    let (schedule, gst, iout) = produced?;
    let synthesis_ms = started.elapsed().as_secs_f64() * 1e3;
    let checked = std::time::Instant::now();
    let (schedule, report) = gate_until(schedule, req.gate, cancelled)?;
    let mut stats = base_stats(req, gst, &schedule, &report, tenants, synthesis_ms, checked);
    stats.ilp = Some(iout.stats);
    Ok(SynthOutput { schedule, report, stats, lp: iout.lp })
}

/// How a door watches and stops a run: a cancel poll every algorithm calls, and where the
/// synthesizers report progress.
#[derive(Clone, Copy)]
pub struct Control<'a> {
    /// Polled by every algorithm; `true` stops the run with `Error::Cancelled`.
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
    /// Where the synthesizers report how far they got.
    pub progress: Progress<'a>,
}

impl Control<'static> {
    /// Runs to the end, reports nothing.
    pub fn none() -> Control<'static> {
        Control { cancelled: &|| false, progress: &|_, _| {} }
    }
}

/// What `run` reports beside the schedule: a synthesizer's full statistics, or a baseline's
/// name.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum RunStats {
    /// A synthesizer's statistics.
    Synthesis(Box<SynthStats>),
    /// A baseline's name.
    Baseline {
        /// The baseline.
        algorithm: String,
    },
    /// `auto`: the winner and every candidate.
    Portfolio(Box<PortfolioRun>),
    /// A regeneration after failures: the repair and the fresh run, and which was kept.
    Regeneration(Box<RegenerationRun>),
}

/// A run's result: a schedule that passed `finalize`, its check report and statistics.
pub struct Output {
    /// The schedule, with its simulated time.
    pub schedule: Schedule,
    /// Its check report.
    pub report: CheckReport,
    /// How it was made.
    pub stats: RunStats,
    /// The ILP's last model of each phase in LP format, when `options.keep_lp` was set.
    pub lp: Vec<PhaseLp>,
}

/// Why a run gave no schedule. Every door maps these the same way: `Input` is the caller's
/// mistake (exit 2, HTTP 422), naming the request's field; `Unsupported` is an algorithm that
/// cannot serve this case; `Internal` is a bug.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is wrong; the error names its field.
    #[error("{0}")]
    Input(#[from] crate::error::InputError),
    /// The algorithm cannot serve this case (a baseline's topology, a TEN too fine, …).
    #[error("{0}")]
    Unsupported(String),
    /// The cancel poll said stop.
    #[error("cancelled")]
    Cancelled,
    /// The time limit ran out before the algorithm had any schedule.
    #[error("the time limit of {limit_s} s ran out before any schedule was found; raise options.time_limit_s")]
    TimeLimit {
        /// The limit, seconds.
        limit_s: f64,
    },
    /// Every run of the synthesizer was priced above a schedule the caller already has
    /// (`auto`'s fastest so far): none was built.
    #[error(
        "skipped before it was built: its busiest link alone is busy {:.3} us, longer than a schedule already found ({:.3} us)",
        price_ns / 1e3,
        incumbent_ns / 1e3
    )]
    PricedOut {
        /// The lowest price of its runs, ns.
        price_ns: f64,
        /// The schedule already found, ns.
        incumbent_ns: f64,
    },
    /// A bug: a producer's schedule failed validation.
    #[error(transparent)]
    Internal(#[from] EngineError),
}

/// A synthesizer's failure as the doors see it. `SynthError::Cancelled` is the caller's
/// poll: the greedy's runs tell a deadline from a cancel before they get here.
impl From<crate::synth::SynthError> for Error {
    fn from(e: crate::synth::SynthError) -> Self {
        match e {
            crate::synth::SynthError::Input(e) => Error::Input(e),
            crate::synth::SynthError::Cancelled => Error::Cancelled,
            e => Error::Unsupported(e.to_string()),
        }
    }
}

/// A baseline's failure as the doors see it. `Stopped` comes only from `build_within`, whose
/// caller (`build_baseline`) tells a deadline from a cancel first.
impl From<crate::baselines::BaselineError> for Error {
    fn from(e: crate::baselines::BaselineError) -> Self {
        match e {
            crate::baselines::BaselineError::Input(e) => Error::Input(e),
            crate::baselines::BaselineError::Stopped => Error::Cancelled,
            e => Error::Unsupported(e.to_string()),
        }
    }
}

/// Parses a topology generator spec (`torus:8x8@bw=50`), refusing one of more than
/// `limits.max_npus` NPUs or `limits.max_links` links before building it.
pub fn topology_from_spec(spec: &str, limits: &Limits) -> Result<crate::topology::Topology, crate::error::InputError> {
    crate::topology::parse_spec_capped(spec, limits.max_npus, limits.max_links)
}

/// Runs a checked request: the synthesizer, baseline or portfolio it names, then the gate.
/// The one entry point of every door. `options.time_limit_s` is the run's overall budget.
pub fn run(req: &Request, ctl: Control) -> Result<Output, Error> {
    // Progress only moves forward: the ILP's grids and `auto`'s candidates each report their
    // own share, and a door shows the furthest any of them got.
    let furthest = std::sync::Mutex::new(0.0f64);
    let forward = |fraction: f64, message: &str| {
        let shown = {
            let mut f = furthest.lock().unwrap_or_else(|e| e.into_inner());
            *f = f.max(fraction);
            *f
        };
        (ctl.progress)(shown, message)
    };
    let ctl = Control { cancelled: ctl.cancelled, progress: &forward };
    let started = std::time::Instant::now();
    let deadline = started + std::time::Duration::from_secs_f64(req.time_limit_s);
    match &req.algorithm {
        Algorithm::Baseline(name) => run_baseline(req, name, ctl, deadline),
        Algorithm::Greedy | Algorithm::Ilp => {
            run_synthesizer(req, &req.algorithm, ctl, deadline, Gate::Full { bounds: true }, None)
        }
        Algorithm::Auto => portfolio::run(req, ctl, deadline),
    }
}

/// A baseline on the request's collective (the chunks it asks for, or its own minimum).
/// Its construction stops at `deadline` (`Error::TimeLimit`) or on cancel, and its check on
/// cancel.
fn run_baseline(req: &Request, name: &str, ctl: Control, deadline: std::time::Instant) -> Result<Output, Error> {
    if (ctl.cancelled)() {
        return Err(Error::Cancelled);
    }
    let s = build_baseline(req, name, ctl, deadline)?;
    let (schedule, report) = finalize_until(s, true, ctl.cancelled)?;
    Ok(Output { schedule, report, stats: RunStats::Baseline { algorithm: name.to_string() }, lp: Vec::new() })
}

/// Builds baseline `name` on the request's collective, stopping at `deadline`
/// (`Error::TimeLimit`) or on cancel (`Error::Cancelled`); not yet validated or timed.
fn build_baseline(req: &Request, name: &str, ctl: Control, deadline: std::time::Instant) -> Result<Schedule, Error> {
    let stop = || (ctl.cancelled)() || std::time::Instant::now() >= deadline;
    match crate::baselines::build_within(name, &req.topology, req.collective(), &stop) {
        Err(crate::baselines::BaselineError::Stopped) if (ctl.cancelled)() => Err(Error::Cancelled),
        Err(crate::baselines::BaselineError::Stopped) => Err(Error::TimeLimit { limit_s: req.time_limit_s }),
        other => Ok(other?),
    }
}

/// The greedy or the ILP on the request, within `deadline`, its schedule checked as `gate`
/// says. The greedy with `Chunking::Auto` searches the chunks per NPU `chunking::candidates`
/// proposes; the ILP takes 1 (its model grows with the chunks).
fn run_synthesizer(
    req: &Request,
    algorithm: &Algorithm,
    ctl: Control,
    deadline: std::time::Instant,
    gate: Gate,
    incumbent_ns: Option<f64>,
) -> Result<Output, Error> {
    let remaining_s = deadline.saturating_duration_since(std::time::Instant::now()).as_secs_f64();
    let sr = SynthJob {
        topology: &req.topology,
        algorithm: algorithm.clone(),
        seed: req.seed,
        seeds: req.seeds,
        threads: req.threads,
        switch_model: req.switch_model,
        discretization_ns: req.discretization_ns,
        time_limit_s: req.time_limit_s,
        ilp: crate::synth::ilp::IlpOptions {
            time_limit_s: req.ilp.time_limit_s.min(remaining_s).max(1e-3),
            ..req.ilp.clone()
        },
        grouping: match (algorithm, req.chunking) {
            (Algorithm::Greedy, Chunking::Auto) => chunking::grouping(&req.topology, &req.built[0]),
            _ => Vec::new(),
        },
        gate,
        incumbent_ns,
    };
    let tenants = matches!(req.target, Target::Tenants(_)).then_some(req.built.as_slice());
    let searched: Vec<Collective> = match (algorithm, req.chunking, &req.target) {
        (Algorithm::Greedy, Chunking::Auto, Target::One(spec)) => {
            chunking::candidates(&req.topology, spec, &req.limits)
                .into_iter()
                .skip(1) // k = 1 is the collective the request already built
                .filter_map(|k| {
                    let mut at_k = spec.clone();
                    at_k.chunks_per_npu = Some(k);
                    Collective::build(&at_k, &req.topology).ok()
                })
                .collect()
        }
        _ => Vec::new(),
    };
    // The doubling patterns split every block over the ports when k is a multiple of them: that
    // k joins for the latency-mode planners alone (finer chunks cost them no extra rounds,
    // unlike the matcher).
    let even: Vec<Collective> = match (algorithm, req.chunking, &req.target) {
        (Algorithm::Greedy, Chunking::Auto, Target::One(spec)) if crate::synth::doubling::applies(&req.built[0]) => {
            crate::synth::doubling::even_chunks(&req.topology, &req.built[0], req.switch_model)
                .ok()
                .filter(|&k| k > 1 && !searched.iter().any(|c| c.spec.chunks() == k))
                .and_then(|k| {
                    let mut at_k = spec.clone();
                    at_k.chunks_per_npu = Some(k);
                    request::check_chunks(&at_k, &req.topology, &req.limits).ok()?;
                    Collective::build(&at_k, &req.topology).ok()
                })
                .into_iter()
                .collect()
        }
        _ => Vec::new(),
    };
    let variants: Vec<&Collective> = std::iter::once(&req.built[0]).chain(&searched).chain(&even).collect();
    let started = std::time::Instant::now();
    let out = match algorithm {
        Algorithm::Ilp => synthesize_ilp_reporting(&sr, variants[0], tenants, started, ctl)?,
        _ => synthesize_greedy(
            &sr,
            Variants { all: &variants, matcher: 1 + searched.len() },
            tenants,
            started,
            deadline,
            ctl,
        )?,
    };
    Ok(Output {
        schedule: out.schedule,
        report: out.report,
        stats: RunStats::Synthesis(Box::new(out.stats)),
        lp: out.lp,
    })
}

impl RunStats {
    /// A synthesizer's statistics (`None` for a baseline, or a portfolio a baseline won; for a
    /// regeneration, the fresh run's when it was kept).
    pub fn synthesis(&self) -> Option<&SynthStats> {
        match self {
            RunStats::Synthesis(s) => Some(s),
            RunStats::Portfolio(p) => p.synthesis.as_ref(),
            RunStats::Baseline { .. } => None,
            RunStats::Regeneration(r) => r.fresh.as_ref().filter(|_| r.regeneration.kept == Kept::Fresh)?.synthesis(),
        }
    }

    /// The portfolio's candidates, when `auto` ran (for a regeneration, its fresh run).
    pub fn portfolio(&self) -> Option<&PortfolioStats> {
        match self {
            RunStats::Portfolio(p) => Some(&p.portfolio),
            RunStats::Regeneration(r) => r.fresh.as_ref()?.portfolio(),
            _ => None,
        }
    }

    /// The regeneration's report, when the run was one.
    pub fn regeneration(&self) -> Option<&RegenerationStats> {
        match self {
            RunStats::Regeneration(r) => Some(&r.regeneration),
            _ => None,
        }
    }

    /// The algorithm that made the schedule (the winner, for `auto` and regenerations).
    pub fn algorithm(&self) -> Option<String> {
        match self {
            RunStats::Synthesis(s) => Some(s.algorithm.clone()),
            RunStats::Baseline { algorithm } => Some(algorithm.clone()).filter(|a| !a.is_empty()),
            RunStats::Portfolio(p) => Some(p.algorithm.clone()),
            RunStats::Regeneration(r) => Some(r.algorithm.clone()),
        }
    }
}
