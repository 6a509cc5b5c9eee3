//! `engine::Request`: what every door (CLI, HTTP, batch, bench) asks the engine for, in one
//! wire form (`RequestSpec`), checked once against the caller's `Limits` into a `Request`
//! whose errors name the request's own fields (`collective.chunks_per_npu`, `options.seeds`).

use super::registry::{Algorithm, OptionName};
use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
use crate::error::InputError;
use crate::synth::Effort;
use crate::synth::ilp::IlpOptions;
use crate::ten::SwitchModel;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};

/// The options of a request, as the API's `options` object names them, each optional (`Request::new`
/// fills in the defaults). An algorithm ignores those it does not read (`Algorithm::unread`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct Options {
    /// Random seed (default 0); the same seed gives the same schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Seeds `seed..seed+seeds` are tried and the best by simulated time kept (default 1; the
    /// greedy and `auto` on up to 32 live NPUs 4: `Algorithm::default_seeds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<usize>,
    /// Threads for the greedy's runs (and HiGHS). Omitted: the runs share the process's
    /// rayon pool (one thread per core) and HiGHS takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Overrides `collective.chunks_per_npu`. Omitted from both: the engine chooses (`auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks_per_npu: Option<u32>,
    /// The overall budget in seconds of the run (default 60, 600 with `effort` thorough, at
    /// most `Limits::max_solve_s`):
    /// the greedy keeps its best finished run, `auto` its best finished candidate, the ILP its
    /// best schedule found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<f64>,
    /// The ILP's cap on one HiGHS solve, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solve_time_limit_s: Option<f64>,
    /// How switches appear in the TEN: `native`, `unwind:D` or `unwind:bi` (default
    /// `native`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_model: Option<SwitchModel>,
    /// TEN timestep in ns (default: chosen from the links).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discretization: Option<f64>,
    /// The ILP without its congestion constraint (TACCL-like).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_congestion: Option<bool>,
    /// The ILP's time clustering window, in timesteps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// How much the greedy searches for a shorter schedule: `standard` (default) or
    /// `thorough` (`synth::Effort`: more of the trees' search, from 1000 NPUs and in the
    /// polish, for several times the synthesis time; the default `time_limit_s` 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
    /// Keep each ILP phase's LP text in the output (`--dump-lp`): the CLI's alone (it writes the
    /// files), so never read from or written to JSON.
    #[serde(skip)]
    pub keep_lp: bool,
}
crate::strict::objects_only!(Options, "request options (an object)", serialize);

impl Options {
    /// The options this request sets, in field order. Every field is matched by name (no
    /// `..`), so a new one cannot be left out of `OptionName` and the registry's lists.
    pub fn named(&self) -> Vec<OptionName> {
        let Options {
            seed,
            seeds,
            threads,
            chunks_per_npu,
            time_limit_s,
            solve_time_limit_s,
            switch_model,
            discretization,
            ignore_congestion,
            window,
            effort,
            keep_lp: _,
        } = self;
        [
            (seed.is_some(), OptionName::Seed),
            (seeds.is_some(), OptionName::Seeds),
            (threads.is_some(), OptionName::Threads),
            (chunks_per_npu.is_some(), OptionName::ChunksPerNpu),
            (time_limit_s.is_some(), OptionName::TimeLimitS),
            (solve_time_limit_s.is_some(), OptionName::SolveTimeLimitS),
            (switch_model.is_some(), OptionName::SwitchModel),
            (discretization.is_some(), OptionName::Discretization),
            (ignore_congestion.is_some(), OptionName::IgnoreCongestion),
            (window.is_some(), OptionName::Window),
            (effort.is_some(), OptionName::Effort),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }
}

/// What is to be run: one collective, or several at once (multi-tenant).
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// One collective.
    One(CollectiveSpec),
    /// Several collectives synthesized jointly; a synthesizer's job only.
    Tenants(Vec<CollectiveSpec>),
}

/// A request in its wire form, before any check: the topology is given beside it.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestSpec {
    /// What to run.
    pub target: Target,
    /// An algorithm of the registry (`greedy`, `ilp`, a baseline), parsed by every door with
    /// the same words (`Algorithm::from_str`, serde).
    pub algorithm: Algorithm,
    /// How to run it.
    pub options: Options,
}

impl RequestSpec {
    /// One collective with the default algorithm (`greedy`) and options.
    pub fn new(collective: CollectiveSpec) -> RequestSpec {
        RequestSpec { target: Target::One(collective), algorithm: Algorithm::Greedy, options: Options::default() }
    }
}

/// What a caller allows: the library's own limits by default, narrowed by a server's flags.
#[derive(Clone, Debug)]
pub struct Limits {
    /// NPUs in the topology.
    pub max_npus: usize,
    /// Links of a topology generator (`fc`, `hyperx`, `dragonfly` grow faster than their NPUs),
    /// estimated from the spec before anything is built.
    pub max_links: usize,
    /// Chunks of the collective (NPUs × chunks per NPU for most kinds), estimated before
    /// anything is allocated.
    pub max_chunks: usize,
    /// Cap on `options.time_limit_s`, seconds.
    pub max_solve_s: f64,
    /// Cap on `options.seeds`.
    pub max_seeds: usize,
    /// Cap on `options.threads`.
    pub max_threads: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_npus: crate::limits::MAX_NODES,
            max_links: crate::limits::MAX_LINKS,
            max_chunks: crate::limits::MAX_CHUNKS,
            max_solve_s: crate::limits::MAX_SOLVE_TIME_S,
            max_seeds: crate::limits::MAX_SEEDS,
            max_threads: crate::limits::MAX_THREADS,
        }
    }
}

/// The default budget of a request, seconds (capped by `Limits::max_solve_s`).
pub const DEFAULT_TIME_LIMIT_S: f64 = 60.0;
/// `DEFAULT_TIME_LIMIT_S` at `options.effort` thorough: its search on torus:32x32 after a
/// failure took 41–45 s at 64 MiB and 93 s at 128 MiB on a slow day of the 2-vCPU machine
/// (docs/BENCHMARKS.md), and a deadline that cuts the polish keeps the unpolished run
/// (`stats.greedy.polish.cut`).
pub const THOROUGH_TIME_LIMIT_S: f64 = 600.0;

/// A request's budget, seconds, where `options.time_limit_s` leaves it open (before the
/// caller's `Limits::max_solve_s`). Only an algorithm that reads `effort` takes its default (a
/// ring with `effort: thorough` ran, was keyed and was charged for 600 s, its effort ignored).
pub fn default_time_limit_s(effort: Effort) -> f64 {
    if effort == Effort::Thorough { THOROUGH_TIME_LIMIT_S } else { DEFAULT_TIME_LIMIT_S }
}

/// How chunks per NPU are decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunking {
    /// The request gave this number.
    Given(u32),
    /// Omitted: the engine picks from the link costs and the size (`engine::chunking`).
    Auto,
}

/// A checked request: everything `engine::run` needs, defaults filled in.
#[derive(Clone, Debug)]
pub struct Request {
    /// Where to run.
    pub topology: Topology,
    /// What to run (chunks per NPU as `options.chunks_per_npu` set it).
    pub target: Target,
    /// What runs it.
    pub algorithm: Algorithm,
    /// The first seed.
    pub seed: u64,
    /// Seeds tried (1 for everything but the greedy and `auto`: `Algorithm::default_seeds`).
    pub seeds: usize,
    /// Threads for the greedy's runs and HiGHS; `None`: the shared rayon pool (HiGHS: 1).
    pub threads: Option<usize>,
    /// How switches appear in the time-expanded network.
    pub switch_model: SwitchModel,
    /// The TEN timestep, if given.
    pub discretization_ns: Option<f64>,
    /// Chunks per NPU: given, or chosen by the engine (the greedy and `auto` search a few;
    /// the ILP, baselines and multi-tenant runs take 1 or their own minimum).
    pub chunking: Chunking,
    /// The run's overall budget, seconds (`options.time_limit_s`).
    pub time_limit_s: f64,
    /// The ILP's options (its `time_limit_s` is the request's budget).
    pub ilp: IlpOptions,
    /// How much the greedy searches (`options.effort`).
    pub effort: Effort,
    /// The collectives made concrete on the topology, in `target` order.
    pub(crate) built: Vec<Collective>,
    /// The caller's limits (the chunk search stays within them).
    pub(crate) limits: Limits,
    /// A baseline the caller already holds rerouted onto this topology (a regeneration's
    /// repair of a stored baseline schedule): `auto` does not build it again.
    pub(crate) rerouted_in_hand: Option<String>,
}

/// What `RequestSpec::precheck` reads from the options.
struct Checked {
    algorithm: Algorithm,
    seeds: usize,
    threads: Option<usize>,
    time_limit_s: f64,
    ilp: IlpOptions,
    switch_model: SwitchModel,
    effort: Effort,
}

impl RequestSpec {
    /// The checks that need no topology and build nothing (the algorithm's name, the options'
    /// ranges, the tenants' count): a batch runs them on every item before it builds any.
    /// `Request::new` runs them first too.
    pub fn precheck(&self, limits: &Limits) -> Result<(), InputError> {
        self.checked_options(limits).map(|_| ())
    }

    fn checked_options(&self, limits: &Limits) -> Result<Checked, InputError> {
        let algorithm = self.algorithm.clone();
        let o = &self.options;
        if let Target::Tenants(list) = &self.target {
            if list.is_empty() {
                return Err(InputError::new("tenants", "expected at least one collective"));
            }
            // A registered synthesizer makes one collective's schedule (`Produce::Plain`).
            if !algorithm.is_synthesizer() || matches!(algorithm, Algorithm::Registered(_)) {
                return Err(InputError::new(
                    "tenants",
                    format!("{} runs one collective; several at once need greedy or ilp", algorithm.name()),
                ));
            }
        }
        let seeds = o.seeds.unwrap_or(1);
        if seeds == 0 || seeds > limits.max_seeds {
            return Err(InputError::new("options.seeds", format!("{seeds}: expected 1..={}", limits.max_seeds)));
        }
        if let Some(threads) = o.threads
            && (threads == 0 || threads > limits.max_threads)
        {
            return Err(InputError::new("options.threads", format!("{threads}: expected 1..={}", limits.max_threads)));
        }
        let effort = o.effort.filter(|_| algorithm.options().contains(&OptionName::Effort)).unwrap_or_default();
        let default_s = algorithm.default_time_limit_s(o.effort);
        let time_limit_s = o.time_limit_s.unwrap_or(default_s.min(limits.max_solve_s));
        let ilp = IlpOptions {
            time_limit_s,
            work_limit_s: None,
            solve_time_limit_s: o.solve_time_limit_s,
            threads: o.threads.unwrap_or(1) as u32,
            ignore_congestion: o.ignore_congestion.unwrap_or(false),
            window: o.window,
            keep_lp: o.keep_lp,
            warm_start_by: None,
        };
        super::check_ilp_options(&ilp, limits.max_solve_s)?;
        let switch_model = o.switch_model.unwrap_or_default();
        if let Some(d) = o.discretization
            && !(d.is_finite() && d > 0.0)
        {
            return Err(InputError::new("options.discretization", format!("{d}: expected nanoseconds > 0")));
        }
        Ok(Checked { algorithm, seeds, threads: o.threads, time_limit_s, ilp, switch_model, effort })
    }
}

/// Refuses a discretization so fine that the time-expanded network cannot be built: some link
/// would span more than `MAX_TEN_SPAN` timesteps. The span counted is a lower bound of the one
/// the TEN computes (a link between NPUs: its latency, plus its chunk's transfer time when the
/// chunking is given), so no request the TEN would accept is refused here.
fn check_discretization(d: f64, topology: &Topology, built: &[Collective]) -> Result<(), InputError> {
    let chunk_bytes = built.iter().map(|c| c.chunk_size_bytes).fold(f64::INFINITY, f64::min);
    let chunk_bytes = if chunk_bytes.is_finite() && built.iter().all(|c| c.spec.chunks_per_npu.is_some()) {
        chunk_bytes
    } else {
        0.0
    };
    // Links between NPUs are edges of the TEN as they are (a switch's links join paths only
    // where they lie on one).
    let longest_ns = topology
        .links()
        .iter()
        .filter(|l| topology.is_npu(l.src) && topology.is_npu(l.dst))
        .map(|l| l.time_ns(chunk_bytes))
        .fold(0.0, f64::max);
    let limit = crate::limits::MAX_TEN_SPAN as f64;
    if longest_ns / d > limit {
        return Err(InputError::new(
            "options.discretization",
            format!(
                "{d:e} ns: a link of {longest_ns} ns would span {:.3e} timesteps, over the limit of {limit}; give at least {:.3e} ns",
                longest_ns / d,
                longest_ns / limit
            ),
        ));
    }
    Ok(())
}

/// The options a checked request runs with, every default filled in: what a stored request
/// keeps (the API's job request flattens it) and runs again (`options`). Serialized in this
/// field order, which the API's result cache hashes; the `Option`s that are left out when
/// absent were added later, so requests without them keep their keys.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct CheckedOptions {
    /// The first seed.
    pub seed: u64,
    /// Seeds tried.
    pub seeds: usize,
    /// The run's budget, seconds.
    pub time_limit_s: f64,
    /// How switches appear in the TEN.
    pub switch_model: SwitchModel,
    /// The TEN timestep, if given.
    pub discretization: Option<f64>,
    /// The ILP without its congestion constraint.
    pub ignore_congestion: bool,
    /// The ILP's time clustering window, if given.
    pub window: Option<u32>,
    /// The ILP's cap on one solve, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solve_time_limit_s: Option<f64>,
    /// Threads, if given: how many run it, not what it gives (the API's cache key leaves it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// How much the greedy searches, where not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<Effort>,
}

impl CheckedOptions {
    /// The request options that run the same again (`Request::new` on them gives these
    /// options back: the chunks per NPU travel in the collective, as the checked request left
    /// them). Every field of `Options` is named (no `..`): a new option does not compile until
    /// the checked options carry it, so no door drops one silently.
    pub fn options(&self) -> Options {
        Options {
            seed: Some(self.seed),
            seeds: Some(self.seeds),
            threads: self.threads,
            chunks_per_npu: None,
            time_limit_s: Some(self.time_limit_s),
            solve_time_limit_s: self.solve_time_limit_s,
            switch_model: Some(self.switch_model),
            discretization: self.discretization,
            ignore_congestion: Some(self.ignore_congestion),
            window: self.window,
            effort: self.effort,
            // The CLI's alone (`--dump-lp`).
            keep_lp: false,
        }
    }
}

impl Request {
    /// The options this request runs with, every default filled in (`CheckedOptions`).
    pub fn checked_options(&self) -> CheckedOptions {
        CheckedOptions {
            seed: self.seed,
            seeds: self.seeds,
            time_limit_s: self.time_limit_s,
            switch_model: self.switch_model,
            discretization: self.discretization_ns,
            ignore_congestion: self.ilp.ignore_congestion,
            window: self.ilp.window,
            solve_time_limit_s: self.ilp.solve_time_limit_s,
            threads: self.threads,
            effort: (self.effort != Effort::default()).then_some(self.effort),
        }
    }
}

impl Request {
    /// Checks `spec` against `topology` and `limits`: every field once, sizes before anything
    /// is allocated for them. Errors name the request's fields (`algorithm`,
    /// `collective.root`, `options.seeds`, `tenants[1].kind`, …).
    pub fn new(topology: Topology, spec: RequestSpec, limits: &Limits) -> Result<Request, InputError> {
        let Checked { algorithm, seeds, threads, time_limit_s, ilp, switch_model, effort } =
            spec.checked_options(limits)?;
        check_npus(&topology, limits)?;
        let o = &spec.options;
        // Seeds given to an algorithm that runs one (the ILP: the seed picks its greedy warm
        // start) are ignored and named, as every option it does not read is (they were a 422,
        // though `GET /v1/algorithms` does not list `seeds` for it).
        let reads = algorithm.options().contains(&OptionName::Seeds);
        let seeds = if o.seeds.is_some() && reads { seeds } else { algorithm.default_seeds(&topology) };
        let tenants = matches!(spec.target, Target::Tenants(_));
        let mut targets: Vec<(String, CollectiveSpec)> = match spec.target {
            Target::One(c) => vec![("collective".to_string(), c)],
            Target::Tenants(list) => list.into_iter().enumerate().map(|(i, c)| (format!("tenants[{i}]"), c)).collect(),
        };
        let mut built = Vec::with_capacity(targets.len());
        for (path, c) in &mut targets {
            if let Some(k) = o.chunks_per_npu {
                c.chunks_per_npu = Some(k);
            }
            // A chunking from `options.chunks_per_npu` is named there, not at the collective.
            let own = format!("{path}.chunks_per_npu");
            let chunking = if o.chunks_per_npu.is_some() { "options.chunks_per_npu" } else { own.as_str() };
            let group = format!("{path}.group");
            let at = |e: InputError| npus_named(e.within(path).renamed(&own, chunking), c, &group);
            check_chunks(c, &topology, limits).map_err(at)?;
            // The greedy and the ILP by name hold every pair: refused before the request is queued.
            if matches!(algorithm, Algorithm::Greedy | Algorithm::Ilp) {
                check_synthesis_pairs(c, &topology, algorithm.name()).map_err(at)?;
            }
            built.push(Collective::build(c, &topology).map_err(at)?);
        }
        if let Some(entry) = algorithm.synthesizer().filter(|_| matches!(algorithm, Algorithm::Registered(_))) {
            let kind = targets[0].1.kind;
            if !(entry.collectives)().contains(&kind) {
                return Err(InputError::new(
                    "algorithm",
                    format!("{} does not serve {}; {}", entry.name, kind.name(), served_by(kind)),
                ));
            }
        }
        if let Algorithm::Baseline(name) = &algorithm {
            let kind = targets[0].1.kind;
            if !super::registry::baseline_supports(name, kind) {
                return Err(InputError::new(
                    "algorithm",
                    format!("{name} does not support {}; {}", kind.name(), served_by(kind)),
                ));
            }
            // A variant's parameter against the group (kolmakov-r64 on 8 NPUs), here rather
            // than when the queued job builds it.
            crate::baselines::check_variant(name, built[0].group.len())
                .map_err(|why| InputError::new("algorithm", why))?;
        }
        // Only the synthesizers build a time-expanded network (a baseline ignores the option).
        if let Some(d) = o.discretization
            && algorithm.is_synthesizer()
        {
            check_discretization(d, &topology, &built)?;
        }
        let chunking = match targets[0].1.chunks_per_npu {
            Some(k) => Chunking::Given(k),
            None if tenants => Chunking::Given(1),
            None => Chunking::Auto,
        };
        let mut specs = targets.into_iter().map(|(_, c)| c);
        let target = match (tenants, specs.next()) {
            (false, Some(one)) => Target::One(one),
            (_, first) => Target::Tenants(first.into_iter().chain(specs).collect()),
        };
        Ok(Request {
            topology,
            target,
            algorithm,
            seed: o.seed.unwrap_or(0),
            seeds,
            threads,
            switch_model,
            discretization_ns: o.discretization,
            chunking,
            time_limit_s,
            ilp,
            effort,
            built,
            limits: limits.clone(),
            rerouted_in_hand: None,
        })
    }

    /// The first (or only) collective of the request.
    pub fn collective(&self) -> &CollectiveSpec {
        match &self.target {
            Target::One(c) => c,
            Target::Tenants(list) => &list[0],
        }
    }
}

/// "these serve all_reduce: auto, greedy, …": the choices a refused `algorithm` leaves.
fn served_by(kind: CollectiveKind) -> String {
    format!("these serve {}: {}", kind.name(), super::registry::serving(kind).join(", "))
}

/// `e` of collective `c` with its errors at `group` named at the request's `topology` where no group
/// was given: its NPUs are the topology's live ones (a split, or too many, is not a group's).
pub(crate) fn npus_named(e: InputError, c: &CollectiveSpec, group: &str) -> InputError {
    if c.group.is_some() { e } else { e.renamed(group, "topology") }
}

/// Refuses a topology of more NPUs than the limit.
pub(crate) fn check_npus(topology: &Topology, limits: &Limits) -> Result<(), InputError> {
    if topology.npus() > limits.max_npus {
        return Err(InputError::new(
            "topology.npus",
            format!("{} NPUs: at most {} are accepted", topology.npus(), limits.max_npus),
        ));
    }
    Ok(())
}

/// Refuses a collective a synthesizer (the greedy, the ILP) would track too many (npu, chunk)
/// pairs of: the larger of its conditions, over `limits::MAX_CONDITION_PAIRS` (it holds state
/// per pair; the baselines, which do not, are bounded by `check_chunks` alone).
pub(crate) fn check_synthesis_pairs(
    c: &CollectiveSpec,
    topology: &Topology,
    algorithm: &str,
) -> Result<(), InputError> {
    if c.kind == CollectiveKind::Custom {
        return Ok(());
    }
    let p = c.group.as_ref().map_or_else(|| topology.live_npus().len(), Vec::len);
    let k = c.chunks() as usize;
    let pairs = crate::collective::chunk_count(c.kind, p, k)
        .and_then(|n| crate::collective::condition_pairs(c.kind, p, n).map(|pairs| (n, pairs)));
    match pairs {
        Some((_, pairs)) if pairs <= crate::limits::MAX_CONDITION_PAIRS => Ok(()),
        _ => Err(chunking_refused(
            c,
            format!(
                "{} chunks on {p} NPUs make more than {} (npu, chunk) pairs for the {algorithm} to track; \
                 the baselines (\"auto\" tries them) take more",
                pairs.map_or_else(|| "more than 2^64".to_string(), |(n, _)| n.to_string()),
                crate::limits::MAX_CONDITION_PAIRS
            ),
        )),
    }
}

/// A chunking over a limit, named where the caller can change it: the `chunks_per_npu` given, else
/// the group (`npus_named`): too many NPUs at the least chunking (it named an unwritten field).
fn chunking_refused(c: &CollectiveSpec, why: String) -> InputError {
    match c.chunks_per_npu {
        Some(k) => InputError::new("chunks_per_npu", format!("{k}: {why}")),
        None => InputError::new("group", format!("at one chunk per NPU (the least), {why}")),
    }
}

/// Refuses a collective whose chunk count, or the (npu, chunk) cells its schedules' check
/// tracks (`limits::MAX_CHECKED_CELLS`), would exceed the limits, from its parameters alone:
/// nothing is allocated for it yet.
pub(crate) fn check_chunks(c: &CollectiveSpec, topology: &Topology, limits: &Limits) -> Result<(), InputError> {
    let Some(n) = check_chunk_count(c, topology, limits)? else { return Ok(()) };
    let npus = topology.npus();
    if n.checked_mul(npus).is_some_and(|cells| cells <= crate::limits::MAX_CHECKED_CELLS) {
        return Ok(());
    }
    let why = format!(
        "{n} chunks on {npus} NPUs make more than {} (npu, chunk) cells for the check of a schedule to track",
        crate::limits::MAX_CHECKED_CELLS
    );
    Err(chunking_refused(c, why))
}

/// Refuses a collective of more chunks than `limits` accept; gives the chunk count (`None` for
/// a custom collective, whose conditions in the request already bound it).
pub(crate) fn check_chunk_count(
    c: &CollectiveSpec,
    topology: &Topology,
    limits: &Limits,
) -> Result<Option<usize>, InputError> {
    if c.kind == CollectiveKind::Custom {
        return match c.num_chunks {
            Some(n) if n > limits.max_chunks => {
                Err(InputError::new("num_chunks", format!("{n} chunks: at most {} are accepted", limits.max_chunks)))
            }
            _ => Ok(None),
        };
    }
    let p = c.group.as_ref().map_or_else(|| topology.live_npus().len(), Vec::len);
    let k = c.chunks() as usize;
    match crate::collective::chunk_count(c.kind, p, k) {
        Some(n) if n <= limits.max_chunks => Ok(Some(n)),
        n => {
            let n = n.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
            Err(chunking_refused(c, format!("{n} chunks on {p} NPUs; at most {} are accepted", limits.max_chunks)))
        }
    }
}
