//! The engine: the only front door to the core. Doors (CLI, HTTP workers, batches, bench)
//! build a `Request` and call `run`; every schedule leaves through `finalize` (validate,
//! simulate, bound). The registry says which algorithms exist and what they serve.

#![deny(missing_docs)]

mod check;
pub mod chunking;
mod compare;
mod error;
mod export;
mod fastest;
mod greedy_runs;
mod ilp;
mod mirror;
pub mod portfolio;
pub mod regenerate;
pub mod registry;
pub mod request;
mod rerouted;
mod search;
mod source;

pub use check::{CheckReport, EngineError, check, check_cost_within, check_within, check_within_until, finalize};
use check::{Gate, finalize_deferred, finalize_until, gate_until};
pub use compare::{Comparison, ComparisonRow, compare, compare_among, compare_until};
pub use error::{Error, ErrorKind, Refuser};
pub use export::{
    API_MAX_TRACE_SLICES, ExportOption, ExportOptionError, MAX_NAME_BYTES, MAX_TRACE_SLICES, MSCCL_MAX_BYTES, Writer,
    chakra_fits, chakra_rank_fits, chakra_tar, check_export_options, export_chakra, export_chakra_rank, export_msccl,
    export_mscclpp, export_mscclpp_reached, export_trace, msccl_fits, mscclpp_fits, plot_goodput, plot_timeline,
    require_valid, transfer_times, unread_option, unwritable_kind,
};
pub use greedy_runs::{GROUPED_ONLY_NPUS, LATENCY_MODE_MAX_NPUS, Mode, PLAIN_MAX_NPUS, Pipelining};
use greedy_runs::{Variants, synthesize_greedy};
pub(crate) use ilp::check_ilp_options;
use ilp::synthesize_ilp_reporting;
pub use mirror::MIRROR_MAX_NPUS;
use mirror::run_synthesizer;
pub use rerouted::REROUTE_MAX_MISSING_LINKS;
pub use search::Stop;

pub use crate::bounds::LowerBounds;
pub use crate::export::chakra::ChakraExport;
pub use crate::export::msccl::{MscclOptions, MscclProtocol, MscclTarget};
pub use crate::export::mscclpp::MscclppOptions;
pub use crate::export::plot::{BOUND_SERIES as GOODPUT_BOUND_SERIES, GoodputChart, Series};
pub use crate::synth::Effort;
pub use crate::synth::ilp::{IlpStats, IlpStatus, PhaseLp};
pub use crate::ten::SwitchModel;
pub use portfolio::{PortfolioEntry, PortfolioRun, PortfolioStats};
pub use regenerate::{
    Kept, RegenerationRun, RegenerationStats, degraded, options_for_algorithm, regenerate, regeneration_target,
    surviving_group, survivors_serve,
};
pub use registry::{Algorithm, SYNTHESIZERS};
pub use request::{CheckedOptions, Chunking, Limits, Options, Request, RequestSpec, Target, default_time_limit_s};
pub use source::TopologySource;

use crate::collective::Collective;
use crate::schedule::Schedule;
use serde::Serialize;

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
    /// How much the greedy's planners search.
    effort: crate::synth::Effort,
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
    /// The search is the other collective's, for its mirror (`run_synthesizer`): runs whose
    /// schedules do not mirror (the contribution flood's scratch slots) are left out.
    mirroring: bool,
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
    /// Chunks per NPU tried (the request's, or those the engine chose to search). A pipelined
    /// winner's schedule has `pipelined.pieces` times its run's (`pipelined.chunks_per_npu`).
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
    /// An all-reduce planned in this many pipelined stages (`synth::staged`: each stage's
    /// forward phase beside the next one's reduce phase, each with its own shares); absent
    /// when one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<u32>,
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
    /// The search's effort (`options.effort`).
    pub effort: crate::synth::Effort,
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
    /// The schedule is this collective's (all-gather or reduce-scatter), mirrored: its search
    /// found the faster schedule (`synth::inversion::mirrored`); the statistics are its run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirrored_from: Option<crate::collective::CollectiveKind>,
    /// Runs the time limit cut before they finished (their schedules were not kept).
    pub runs_cut: usize,
    /// The winning trees run's polish (`synth::trees::polish`), where one ran (to its end,
    /// or until the time limit: `TreesPolish::cut`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub polish: Option<TreesPolish>,
    /// The winner's critical paths pipelined (`synth::pipeline`), where that was faster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipelined: Option<Pipelining>,
}

/// What the polish of a winning trees run did.
#[derive(Clone, Debug, Serialize)]
pub struct TreesPolish {
    /// The run's timeline, in timesteps.
    pub timesteps_before: u32,
    /// The polished timeline's, when a walk was shorter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timesteps_after: Option<u32>,
    /// Whether the polished schedule was kept (faster in the simulator).
    pub kept: bool,
    /// Whether the time limit stopped the polish before its end: the run's own schedule is
    /// kept (a thorough search needs the room: `options.time_limit_s`).
    pub cut: bool,
    /// The polish's wall time, its simulations included.
    pub wall_ms: f64,
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
        stages: gst.stages,
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

/// How a door watches and stops a run: a cancel poll every algorithm calls, where the
/// synthesizers report progress, and when its clock started.
#[derive(Clone, Copy)]
pub struct Control<'a> {
    /// Polled by every algorithm; `true` stops the run with `Error::Cancelled`.
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
    /// Where the synthesizers report how far they got.
    pub progress: Progress<'a>,
    /// Where the time limit starts, if before the call (a service job's building of its topology counts).
    pub since: Option<std::time::Instant>,
}

impl Control<'static> {
    /// Runs to the end, reports nothing.
    pub fn none() -> Control<'static> {
        Control { cancelled: &|| false, progress: &|_, _| {}, since: None }
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
    let ctl = Control { progress: &forward, ..ctl };
    let started = ctl.since.unwrap_or_else(std::time::Instant::now);
    let deadline = started + std::time::Duration::from_secs_f64(req.time_limit_s);
    produce(req, ctl, Stop::new(ctl.cancelled, deadline, req.time_limit_s), None)
}

/// The request's algorithm by its registry entry: a baseline's construction, or the
/// synthesizer's `Produce`, until `stop`; `incumbent_ns` is a time already at hand (a
/// regeneration's repair) that the portfolio prices its baselines against.
fn produce(req: &Request, ctl: Control, stop: Stop, incumbent_ns: Option<f64>) -> Result<Output, Error> {
    if let Algorithm::Baseline(name) = &req.algorithm {
        return run_baseline(req, name, stop);
    }
    // A request names a table entry (`Request::new` parsed it), unless a caller built an
    // `Algorithm::Registered` by hand for a name never registered.
    let entry = req.algorithm.synthesizer().ok_or_else(|| {
        Error::Input(crate::error::InputError::new(
            "algorithm",
            format!("{:?}: no synthesizer of that name is registered", req.algorithm.name()),
        ))
    })?;
    match entry.produce {
        registry::Produce::Engine(run) => run(req, ctl, stop, incumbent_ns),
        registry::Produce::Portfolio => portfolio::run_against(req, ctl, stop, incumbent_ns),
        registry::Produce::Plain(make) => run_plain(req, entry.name, make, stop),
    }
}

/// The greedy's entry in the table.
fn run_greedy(req: &Request, ctl: Control, stop: Stop, _: Option<f64>) -> Result<Output, Error> {
    run_synthesizer(req, &Algorithm::Greedy, ctl, stop, Gate::Full { bounds: true }, None)
}

/// The ILP's entry in the table.
fn run_ilp(req: &Request, ctl: Control, stop: Stop, _: Option<f64>) -> Result<Output, Error> {
    run_synthesizer(req, &Algorithm::Ilp, ctl, stop, Gate::Full { bounds: true }, None)
}

/// A synthesizer from outside the engine (`registry::Produce::Plain`): its schedule of the
/// request's collective, stopped by `stop`, then the full gate, as a baseline's. A refusal
/// is `Error::Unsupported`, unless the run was stopped.
fn run_plain(req: &Request, name: &str, make: registry::MakeSchedule, stop: Stop) -> Result<Output, Error> {
    let s = match make(&req.topology, &req.built[0], &|| stop.now()) {
        Ok(s) => s,
        Err(reason) => return Err(stop.halted().unwrap_or(Error::Unsupported { by: Refuser::Synthesizer, reason })),
    };
    let (schedule, report) = finalize_until(s, true, stop.cancel_poll())?;
    Ok(Output { schedule, report, stats: RunStats::Baseline { algorithm: name.to_string() }, lp: Vec::new() })
}

/// A baseline on the request's collective (the chunks it asks for, or its own minimum).
/// Its construction stops as `stop` says, and its check on cancel.
fn run_baseline(req: &Request, name: &str, stop: Stop) -> Result<Output, Error> {
    if stop.cancelled() {
        return Err(Error::Cancelled);
    }
    let s = build_baseline(req, name, stop)?;
    let (schedule, report) = finalize_until(s, true, stop.cancel_poll())?;
    Ok(Output { schedule, report, stats: RunStats::Baseline { algorithm: name.to_string() }, lp: Vec::new() })
}

/// Builds baseline `name` on the request's collective until `stop` (`Error::TimeLimit` or
/// `Error::Cancelled`, as it says); not yet validated or timed.
fn build_baseline(req: &Request, name: &str, stop: Stop) -> Result<Schedule, Error> {
    let poll = || stop.now();
    let in_hand = req.rerouted_in_hand.as_deref() == Some(name);
    match rerouted::baseline_on(name, &req.topology, req.collective(), in_hand, &poll) {
        Err(Error::Cancelled) => Err(stop.error()),
        built => built,
    }
}

/// The greedy or the ILP on the request, until `stop`, its schedule checked as `gate`
/// says. The greedy with `Chunking::Auto` searches the chunks per NPU `chunking::candidates`
/// proposes; the ILP takes 1 (its model grows with the chunks).
fn run_synthesizer_once(
    req: &Request,
    algorithm: &Algorithm,
    ctl: Control,
    stop: Stop,
    gate: Gate,
    incumbent_ns: Option<f64>,
    mirroring: bool,
) -> Result<Output, Error> {
    if let Target::One(spec) = &req.target {
        request::check_synthesis_pairs(spec, &req.topology, algorithm.name())
            .map_err(|e| request::npus_named(e, spec, "group"))?;
    }
    let remaining_s = stop.left().as_secs_f64();
    let sr = SynthJob {
        topology: &req.topology,
        algorithm: algorithm.clone(),
        seed: req.seed,
        seeds: req.seeds,
        threads: req.threads,
        switch_model: req.switch_model,
        discretization_ns: req.discretization_ns,
        effort: req.effort,
        time_limit_s: req.time_limit_s,
        ilp: crate::synth::ilp::IlpOptions {
            time_limit_s: req.ilp.time_limit_s.min(remaining_s).max(1e-3),
            // The work budget is the request's, not what the clock left of it: the ILP's
            // decisions do not depend on the machine's load (`IlpOptions::work_limit_s`).
            work_limit_s: Some(req.ilp.work_limit_s.unwrap_or(req.ilp.time_limit_s)),
            ..req.ilp.clone()
        },
        grouping: match (algorithm, req.chunking) {
            (Algorithm::Greedy, Chunking::Auto) => chunking::grouping(&req.topology, &req.built[0]),
            _ => Vec::new(),
        },
        gate,
        incumbent_ns,
        mirroring,
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
    // Chunkings for some planners alone (`offers::extra_chunkings`: the doubling's even split
    // over its groups, an all-gather's whole load on its busiest NPU's links).
    let even: Vec<Collective> = match (algorithm, req.chunking, &req.target) {
        (Algorithm::Greedy, Chunking::Auto, Target::One(spec)) => {
            crate::synth::producers::offers::extra_chunkings(&req.topology, &req.built[0], req.switch_model)
                .into_iter()
                .filter(|&k| !searched.iter().any(|c| c.spec.chunks() == k))
                .filter_map(|k| {
                    let mut at_k = spec.clone();
                    at_k.chunks_per_npu = Some(k);
                    request::check_chunks(&at_k, &req.topology, &req.limits).ok()?;
                    request::check_synthesis_pairs(&at_k, &req.topology, "greedy").ok()?;
                    Collective::build(&at_k, &req.topology).ok()
                })
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
            stop,
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
