//! The algorithm registry: every algorithm the engine runs (the synthesizers and the
//! hand-built baselines), what each serves, which options it reads and how it produces.
//! Doors list and check algorithms here only. A test's or an embedder's synthesizer joins
//! with one `register` call (`Produce::Plain`); a new built-in one is an entry in `BUILT_IN`,
//! an `Algorithm` variant (parsed in `Algorithm::parse`) and, to join `auto`, an entry in
//! `portfolio::candidates`; a baseline is an entry in `baselines::registry()`.

use super::{Control, Error, Output, Request};
use crate::collective::{Collective, CollectiveKind};
use crate::error::InputError;
use crate::schedule::Schedule;
use crate::topology::Topology;
use serde::Serialize;
use std::sync::RwLock;

pub use crate::baselines::BaselineInfo;

/// An algorithm the engine can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The portfolio: the synthesizers and every applicable baseline of `compare`'s default
    /// set within the time limit; the fastest validated schedule wins (`engine::portfolio`).
    Auto,
    /// The randomized greedy matcher on the time-expanded network.
    Greedy,
    /// The integer program on the time-expanded network (HiGHS).
    Ilp,
    /// A hand-built algorithm, by its registry name (`ring`, `swing-bandwidth`, `kolmakov-r2`).
    Baseline(String),
    /// A synthesizer added to the table at run time (`register`), by its name.
    Registered(&'static str),
}

impl Algorithm {
    /// The algorithm of that name (baseline variants such as `kolmakov-r2` included).
    pub fn parse(name: &str) -> Option<Algorithm> {
        match name {
            PORTFOLIO => Some(Algorithm::Auto),
            "greedy" => Some(Algorithm::Greedy),
            "ilp" => Some(Algorithm::Ilp),
            b if crate::baselines::is_known(b) => Some(Algorithm::Baseline(b.to_string())),
            other => registered().into_iter().find(|s| s.name == other).map(|s| Algorithm::Registered(s.name)),
        }
    }

    /// Its name as requests and schedules spell it.
    pub fn name(&self) -> &str {
        match self {
            Algorithm::Auto => PORTFOLIO,
            Algorithm::Greedy => "greedy",
            Algorithm::Ilp => "ilp",
            Algorithm::Baseline(b) => b,
            Algorithm::Registered(name) => name,
        }
    }

    /// Its entry in the synthesizers' table (`None` for a baseline).
    pub fn synthesizer(&self) -> Option<Synthesizer> {
        synthesizers().into_iter().find(|s| s.name == self.name() && self.is_synthesizer())
    }

    /// The `options` fields it reads: a synthesizer's table entry's, a baseline's chunking, time
    /// limit and threads (it is built, checked and stopped like any run, and has no search).
    pub fn options(&self) -> &'static [OptionName] {
        const BASELINE: &[OptionName] = &[OptionName::Threads, OptionName::ChunksPerNpu, OptionName::TimeLimitS];
        match self.synthesizer() {
            Some(s) => s.options,
            None => BASELINE,
        }
    }

    /// Of the options `given`, those it does not read, in `given`'s order (a door says so: they
    /// were ignored silently, `--window 3` with `--algo ring`).
    pub fn unread(&self, given: &[OptionName]) -> Vec<OptionName> {
        let reads = self.options();
        given.iter().copied().filter(|o| !reads.contains(o)).collect()
    }

    /// Its budget, seconds, where `options.time_limit_s` leaves it open: the `effort`'s default
    /// where it reads `effort`, the standard one where it does not (`default_time_limit_s`).
    pub fn default_time_limit_s(&self, effort: Option<crate::synth::Effort>) -> f64 {
        let reads = self.options().contains(&OptionName::Effort);
        super::default_time_limit_s(effort.filter(|_| reads).unwrap_or_default())
    }

    /// `options` as far as they can change what it gives: those it does not read at their
    /// defaults, so requests that differ only there are one request (the API's result cache:
    /// `seed` on a ring, `window` on the greedy solved again). The time limit and the chunking
    /// are kept (every built-in algorithm reads them).
    pub fn read_options(&self, options: &super::CheckedOptions) -> super::CheckedOptions {
        let reads = |o: OptionName| self.options().contains(&o);
        let mut o = options.clone();
        if !reads(OptionName::Seed) {
            o.seed = 0;
        }
        if !reads(OptionName::Seeds) {
            o.seeds = 1;
        }
        if !reads(OptionName::Threads) {
            o.threads = None;
        }
        if !reads(OptionName::SolveTimeLimitS) {
            o.solve_time_limit_s = None;
        }
        if !reads(OptionName::SwitchModel) {
            o.switch_model = Default::default();
        }
        if !reads(OptionName::Discretization) {
            o.discretization = None;
        }
        if !reads(OptionName::IgnoreCongestion) {
            o.ignore_congestion = false;
        }
        if !reads(OptionName::Window) {
            o.window = None;
        }
        if !reads(OptionName::Effort) {
            o.effort = None;
        }
        o
    }

    /// Whether it synthesizes (rather than builds a fixed pattern): the portfolio counts, as
    /// it serves several collectives at once through its synthesizers.
    pub fn is_synthesizer(&self) -> bool {
        !matches!(self, Algorithm::Baseline(_))
    }

    /// Why `name` is no algorithm, in the words every door uses (the field is `algorithm`).
    fn unknown(name: &str) -> String {
        not_a_variant(name).unwrap_or_else(|| format!("{name:?}: expected one of {}", names().join(", ")))
    }
}

/// The parser of every door: the CLI's `--algo`, the API's `algorithm` (through serde) and
/// the library's callers; an unknown name is refused naming the field `algorithm`.
impl std::str::FromStr for Algorithm {
    type Err = InputError;

    fn from_str(name: &str) -> Result<Algorithm, InputError> {
        Algorithm::parse(name).ok_or_else(|| InputError::new("algorithm", Algorithm::unknown(name)))
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// As requests and schedules spell it: its name.
impl Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Algorithm, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Algorithm::parse(&name).ok_or_else(|| serde::de::Error::custom(Algorithm::unknown(&name)))
    }
}

/// The synthesizers the engine offers, besides the portfolio.
pub const SYNTHESIZERS: &[&str] = &["greedy", "ilp"];

/// The portfolio's name, the default algorithm of `synth` and of the API.
pub const PORTFOLIO: &str = "auto";

/// A synthesizer from outside the engine: the schedule of the collective on the topology, or
/// why it does not serve the case; polls the stop flag.
pub type MakeSchedule = fn(&Topology, &Collective, &dyn Fn() -> bool) -> Result<Schedule, String>;

/// The engine's own runner: the checked request, the door's control, when the run must stop
/// and the time a schedule must beat to be worth a full check, if any.
pub type RunRequest = fn(&Request, Control<'_>, super::Stop<'_>, Option<f64>) -> Result<Output, Error>;

/// How a synthesizer produces a schedule.
#[derive(Clone, Copy)]
pub enum Produce {
    /// The engine's own runner for it (the greedy, the ILP), which checks what it makes.
    Engine(RunRequest),
    /// The portfolio (`auto`): the engine runs it (`portfolio::run_against`), which checks
    /// what it makes. Named here, not pointed to, as the portfolio reads this table.
    Portfolio,
    /// Code outside the engine (a test's reference producer, an embedder's), whose schedule
    /// the engine checks like a baseline's before anything leaves.
    Plain(MakeSchedule),
}

/// Live NPUs up to which the greedy (alone or in `auto`) tries `FEW_NPUS_SEEDS` seeds when a
/// request leaves `seeds` out: its runs take milliseconds there (a tenth to a few tenths of a
/// second for all four), and the matcher's random ties decide a timestep now and then
/// (dragonfly:4:5's all-gather at 256 MiB: 1.030× its bound at seed 0, 1.015× at seed 1).
pub const FEW_NPUS: usize = 32;
/// Seeds tried by default on up to `FEW_NPUS` live NPUs (one above).
pub const FEW_NPUS_SEEDS: usize = 4;

impl Algorithm {
    /// The seeds a request that leaves `seeds` out tries with this algorithm on `topology`.
    pub fn default_seeds(&self, topology: &Topology) -> usize {
        match self {
            Algorithm::Greedy | Algorithm::Auto if topology.live_npus().len() <= FEW_NPUS => FEW_NPUS_SEEDS,
            _ => 1,
        }
    }
}

/// A field of a request's `options` (`engine::Options`), named as serde (and so the API and
/// `/v1/algorithms`) spells it. `Options::named` lists the ones a request sets, by an
/// exhaustive match of its fields, so an option added to `Options` is added here too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OptionName {
    /// `seed`: the random seed.
    Seed,
    /// `seeds`: how many seeds are tried.
    Seeds,
    /// `threads`: the threads of the greedy's runs and HiGHS.
    Threads,
    /// `chunks_per_npu`: the chunking, or the search for one when absent.
    ChunksPerNpu,
    /// `time_limit_s`: the run's budget.
    TimeLimitS,
    /// `solve_time_limit_s`: the ILP's cap on one solve.
    SolveTimeLimitS,
    /// `switch_model`: how switches appear in the TEN.
    SwitchModel,
    /// `discretization`: the TEN's timestep.
    Discretization,
    /// `ignore_congestion`: the ILP without its congestion constraint.
    IgnoreCongestion,
    /// `window`: the ILP's time clustering window.
    Window,
    /// `effort`: how much the greedy searches.
    Effort,
}

/// A synthesizer: its name, what it serves, the options it reads and how it produces.
#[derive(Clone, Copy)]
pub struct Synthesizer {
    /// Its name in requests.
    pub name: &'static str,
    /// `synthesizer`, or `portfolio` for `auto`.
    pub kind: &'static str,
    /// The collectives it serves.
    pub collectives: fn() -> Vec<CollectiveKind>,
    /// The `options` fields it reads.
    pub options: &'static [OptionName],
    /// How it produces.
    pub produce: Produce,
}

/// Every collective kind, `custom` too: what the built-in synthesizers serve (leaving `custom`
/// out made `GET /v1/algorithms` say none did, and a baseline refused for it listed no choice).
fn every_kind() -> Vec<CollectiveKind> {
    CollectiveKind::ALL.to_vec()
}

use OptionName as O;

/// The engine's synthesizers, the portfolio first (`listing` and `auto`'s order).
const BUILT_IN: [Synthesizer; 3] = [
    Synthesizer {
        name: PORTFOLIO,
        kind: "portfolio",
        collectives: every_kind,
        options: &[
            O::Seed,
            O::Seeds,
            O::Threads,
            O::ChunksPerNpu,
            O::TimeLimitS,
            O::SolveTimeLimitS,
            O::SwitchModel,
            O::Discretization,
            O::IgnoreCongestion,
            O::Window,
            O::Effort,
        ],
        produce: Produce::Portfolio,
    },
    Synthesizer {
        name: "greedy",
        kind: "synthesizer",
        collectives: every_kind,
        options: &[
            O::Seed,
            O::Seeds,
            O::Threads,
            O::ChunksPerNpu,
            O::TimeLimitS,
            O::SwitchModel,
            O::Discretization,
            O::Effort,
        ],
        produce: Produce::Engine(super::run_greedy),
    },
    Synthesizer {
        name: "ilp",
        kind: "synthesizer",
        collectives: every_kind,
        options: &[
            O::Seed,
            O::Threads,
            O::ChunksPerNpu,
            O::TimeLimitS,
            O::SolveTimeLimitS,
            O::SwitchModel,
            O::Discretization,
            O::IgnoreCongestion,
            O::Window,
        ],
        produce: Produce::Engine(super::run_ilp),
    },
];

/// Synthesizers added at run time, after the built-in ones.
static REGISTERED: RwLock<Vec<Synthesizer>> = RwLock::new(Vec::new());

fn registered() -> Vec<Synthesizer> {
    REGISTERED.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Adds a synthesizer to the table for the rest of the process: every door then lists,
/// checks and runs it by name like the built-in ones (the conformance suite adds its reference
/// producer this way); `auto` does not run it. Its schedules pass the engine's gate like every other. Refused when
/// the name is taken by an algorithm (one registered before included).
pub fn register(s: Synthesizer) -> Result<(), String> {
    let mut all = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    if BUILT_IN.iter().chain(all.iter()).any(|r| r.name == s.name) || crate::baselines::is_known(s.name) {
        return Err(format!("{:?} names an algorithm already", s.name));
    }
    // Every run is chunked as its request says and stopped at its time limit (`Produce::Plain`
    // is given the built collective and the stop), so both are read whatever the entry lists
    // (a door called them ignored). Registration is once a name, so the slice is leaked once.
    let engine_reads = [O::ChunksPerNpu, O::TimeLimitS];
    let mut s = s;
    if engine_reads.iter().any(|o| !s.options.contains(o)) {
        let extra = engine_reads.into_iter().filter(|o| !s.options.contains(o));
        s.options = Box::leak(s.options.iter().copied().chain(extra).collect::<Vec<_>>().into_boxed_slice());
    }
    all.push(s);
    Ok(())
}

/// Every synthesizer: the built-in ones, then those registered.
pub fn synthesizers() -> Vec<Synthesizer> {
    BUILT_IN.iter().copied().chain(registered()).collect()
}

/// A synthesizer as `/v1/algorithms` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct SynthesizerInfo {
    /// Its name in requests.
    pub name: &'static str,
    /// `synthesizer`, or `portfolio` for `auto`.
    pub kind: &'static str,
    /// The collectives it serves.
    pub collectives: Vec<CollectiveKind>,
    /// The `options` fields it reads.
    pub options: &'static [OptionName],
}

/// Every algorithm, as `GET /v1/algorithms` answers.
#[derive(Clone, Debug, Serialize)]
pub struct Listing {
    /// The synthesizers.
    pub synthesizers: Vec<SynthesizerInfo>,
    /// The hand-built algorithms.
    pub baselines: Vec<BaselineInfo>,
}

/// The whole registry.
pub fn listing() -> Listing {
    Listing {
        synthesizers: synthesizers()
            .into_iter()
            .map(|s| SynthesizerInfo { name: s.name, kind: s.kind, collectives: (s.collectives)(), options: s.options })
            .collect(),
        baselines: baselines(),
    }
}

/// Every baseline with what it supports (`ccsynth baseline --list`).
pub fn baselines() -> Vec<BaselineInfo> {
    crate::baselines::list()
}

/// The baselines `compare` runs by default.
pub fn baseline_names() -> Vec<&'static str> {
    crate::baselines::names()
}

/// Every algorithm name: the portfolio, the synthesizers (those registered too), then the
/// baselines (variants by their pattern).
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = synthesizers().iter().map(|s| s.name).collect();
    v.extend(baseline_names());
    v.push(crate::baselines::KOLMAKOV_VARIANTS);
    v
}

/// Whether the named baseline serves `kind` (false for unknown names).
pub fn baseline_supports(name: &str, kind: CollectiveKind) -> bool {
    crate::baselines::info(name).is_some_and(|b| b.collectives.contains(&kind))
}

/// The algorithms that serve `kind` (the portfolio and synthesizers, then the baselines), for
/// a message refusing one that does not.
pub fn serving(kind: CollectiveKind) -> Vec<&'static str> {
    let mut v: Vec<&'static str> =
        synthesizers().into_iter().filter(|s| (s.collectives)().contains(&kind)).map(|s| s.name).collect();
    v.extend(baselines().into_iter().filter(|b| b.collectives.contains(&kind)).map(|b| b.name));
    v
}

/// Why a name that reads as a Kolmakov variant is none (`kolmakov-r0` is `kolmakov`; R is
/// written without leading zeros), for the message refusing it: it got the generic "expected
/// a baseline" where `kolmakov-r64` got the precise range.
fn not_a_variant(name: &str) -> Option<String> {
    let r = name.strip_prefix("kolmakov-r")?;
    let digits = r.trim_start_matches('0');
    if r.is_empty() || !r.bytes().all(|b| b.is_ascii_digit()) || !r.starts_with('0') {
        return None;
    }
    Some(if digits.is_empty() {
        format!("{name} is R = 0, which is kolmakov itself: name it kolmakov")
    } else {
        format!("{name}: write R without leading zeros (kolmakov-r{digits})")
    })
}

/// Checks that the baseline `name` serves `kind` (`ccsynth baseline --algo`): an unknown name,
/// or one that does not serve it, is refused at `field` listing the baselines that do (the
/// synthesizers, which that verb refuses, were listed as choices).
pub fn check_baseline(field: &str, name: &str, kind: CollectiveKind) -> Result<(), InputError> {
    let serving: Vec<&str> = serving(kind).into_iter().filter(|n| crate::baselines::is_known(n)).collect();
    let variants = match kind {
        CollectiveKind::AllReduce => format!(", {}", crate::baselines::KOLMAKOV_VARIANTS),
        _ => String::new(),
    };
    if !crate::baselines::is_known(name) {
        let why = not_a_variant(name).unwrap_or_else(|| {
            format!("{name:?}: expected a baseline serving {}: {}{variants}", kind.name(), serving.join(", "))
        });
        return Err(InputError::new(field, why));
    }
    if !baseline_supports(name, kind) {
        let why =
            format!("{name} does not support {}; these baselines do: {}{variants}", kind.name(), serving.join(", "));
        return Err(InputError::new(field, why));
    }
    Ok(())
}

/// Checks a list of baseline names (`compare --algos`); the error names `field`.
pub fn check_baselines<'a>(field: &str, list: &'a [String]) -> Result<Vec<&'a str>, InputError> {
    match list.iter().find(|a| !crate::baselines::is_known(a.trim())) {
        Some(a) => Err(InputError::new(
            field,
            format!(
                "unknown baseline {a:?}; expected some of {}, {}",
                baseline_names().join(", "),
                crate::baselines::KOLMAKOV_VARIANTS
            ),
        )),
        None => {
            let names: Vec<&str> = list.iter().map(|a| a.trim()).collect();
            match names.iter().enumerate().find(|(i, a)| names[..*i].contains(a)) {
                Some((_, a)) => Err(InputError::new(field, format!("{a} is named twice"))),
                None => Ok(names),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options `/v1/algorithms` says each synthesizer reads are fields of the request's
    /// options (as serde names them), and `auto`, which passes its options on to the
    /// greedy and the ILP, reads every one that either reads.
    #[test]
    fn the_listed_options_are_the_requests_options() {
        // Every field set: serialized, serde's name of every option; named, the typed list.
        let all = super::super::Options {
            seed: Some(0),
            seeds: Some(1),
            threads: Some(1),
            chunks_per_npu: Some(1),
            time_limit_s: Some(1.0),
            solve_time_limit_s: Some(1.0),
            switch_model: Some(Default::default()),
            discretization: Some(1.0),
            ignore_congestion: Some(true),
            window: Some(1),
            effort: Some(Default::default()),
            keep_lp: true,
        };
        let json = serde_json::to_value(&all).unwrap();
        let mut fields: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        let named = all.named();
        let mut spelled: Vec<String> =
            named.iter().map(|o| serde_json::to_value(o).unwrap().as_str().unwrap().to_string()).collect();
        spelled.sort_unstable();
        assert_eq!(spelled, fields, "the typed options and serde's fields");
        assert_eq!(super::super::Options::default().named(), vec![], "none set");
        let listing = listing();
        let auto = &listing.synthesizers[0];
        assert_eq!(auto.name, PORTFOLIO);
        for s in &listing.synthesizers[1..] {
            for o in s.options {
                assert!(auto.options.contains(o), "auto does not list {o:?}, which {} reads", s.name);
            }
        }
        // Every option is read by some synthesizer.
        for o in &named {
            assert!(auto.options.contains(o), "no synthesizer lists {o:?}");
        }
    }

    /// Every door reads an algorithm with the same parser: each name round-trips through
    /// `FromStr`, `Display` and serde, and an unknown one is refused in the same words by
    /// `FromStr` (naming the field `algorithm`) and by serde.
    #[test]
    fn an_algorithm_reads_the_same_at_every_door() {
        for name in names().into_iter().filter(|n| !n.contains('<')).chain(["kolmakov-r2"]) {
            let a: Algorithm = name.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(a.to_string(), name);
            assert_eq!(serde_json::to_value(&a).unwrap(), serde_json::json!(name));
            assert_eq!(serde_json::from_value::<Algorithm>(serde_json::json!(name)).unwrap(), a);
        }
        let e = "fastest".parse::<Algorithm>().unwrap_err();
        assert_eq!(e.errors[0].path, "algorithm");
        assert!(e.errors[0].message.starts_with("\"fastest\": expected one of auto, greedy, ilp, "), "{e}");
        let de = serde_json::from_value::<Algorithm>(serde_json::json!("fastest")).unwrap_err();
        assert_eq!(de.to_string(), e.errors[0].message);
        assert!(serde_json::from_value::<Algorithm>(serde_json::json!(3)).is_err());
    }

    /// A synthesizer registered at run time is listed, parsed and run by the engine like a
    /// built-in one, and what it makes passes the same gate: one that forgets its transfers
    /// is caught as a bug, never returned. Names are never shared.
    #[test]
    fn a_registered_synthesizer_is_run_through_the_gate() {
        use crate::collective::CollectiveSpec;
        fn nothing(topo: &Topology, c: &Collective, _: &dyn Fn() -> bool) -> Result<Schedule, String> {
            Ok(Schedule::new(topo.clone(), c, "unit-test-nothing"))
        }
        let entry = Synthesizer {
            name: "unit-test-nothing",
            kind: "synthesizer",
            collectives: || vec![CollectiveKind::AllGather],
            options: &[],
            produce: Produce::Plain(nothing),
        };
        register(entry).unwrap();
        assert!(register(entry).unwrap_err().contains("names an algorithm already"));
        assert!(register(Synthesizer { name: "ring", ..entry }).is_err());
        assert!(register(Synthesizer { name: "greedy", ..entry }).is_err());
        assert_eq!("unit-test-nothing".parse::<Algorithm>().unwrap(), Algorithm::Registered("unit-test-nothing"));
        // It lists no option, yet its runs are chunked and stopped as requested.
        let given = [O::Seed, O::ChunksPerNpu, O::TimeLimitS];
        assert_eq!(Algorithm::Registered("unit-test-nothing").unread(&given), [O::Seed]);
        assert!(listing().synthesizers.iter().any(|s| s.name == "unit-test-nothing"));
        let topo = crate::topology::parse_spec("ring:4").unwrap();
        let request = |kind| {
            let spec = super::super::RequestSpec {
                algorithm: "unit-test-nothing".parse().unwrap(),
                ..super::super::RequestSpec::new(CollectiveSpec::new(kind, 4096))
            };
            super::super::Request::new(topo.clone(), spec, &super::super::Limits::default())
        };
        let e = request(CollectiveKind::AllReduce).unwrap_err();
        assert_eq!(e.errors[0].path, "algorithm", "{e}");
        assert!(e.errors[0].message.contains("does not serve all_reduce"), "{e}");
        let req = request(CollectiveKind::AllGather).unwrap();
        match super::super::run(&req, super::super::Control::none()) {
            Err(super::super::Error::Internal(e)) => assert!(e.to_string().contains("failed validation"), "{e}"),
            other => panic!("the gate let it through: {:?}", other.map(|o| o.report.valid)),
        }
    }
}
