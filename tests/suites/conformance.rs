//! The shared conformance suite: one body run over every producer × topology × collective.
//! The producers come from the engine's registry (every synthesizer, with option variants
//! where listed here, and every baseline), and all go through the engine's one front door,
//! `engine::Request::new` + `engine::run`, so a new registry entry joins the suite without
//! an edit here; a test-only synthesizer joins by one `registry::register` line
//! (`register_test_producers`: the reference flooding of `reference.rs`). Every schedule a producer emits must validate, must not beat the lower bound
//! and must declare its simulated time; a producer may refuse a case, with a reason, but never
//! emit an invalid schedule or panic.

use crate::common::*;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, registry};
use ccsynth::schedule::Schedule;
use ccsynth::topology::{Failures, Topology};

/// The ILP runs only where it has a chance within its short budget.
const ILP_MAX_NPUS: usize = 9;

/// One way of producing schedules: an algorithm of the registry with its options.
struct Producer {
    /// How failures name it: `greedy`, `greedy/unwind:1`, `ilp`, `baseline ring`.
    name: String,
    /// The registry name the request carries.
    algorithm: String,
    options: engine::Options,
    /// Cases on more NPUs are not given to it.
    max_npus: Option<usize>,
    /// Cases on fewer NPUs are not given to it.
    min_npus: usize,
}

impl Producer {
    fn new(name: impl Into<String>, algorithm: &str, options: engine::Options) -> Producer {
        Producer { name: name.into(), algorithm: algorithm.to_string(), options, max_npus: None, min_npus: 0 }
    }

    fn serves(&self, t: &Topology) -> bool {
        self.max_npus.is_none_or(|max| t.npus() <= max) && t.npus() >= self.min_npus
    }

    /// A baseline, or a synthesizer from outside the engine, may refuse a case it does not
    /// serve; the engine's own synthesizers serve every valid request.
    fn may_refuse(&self) -> bool {
        !registry::SYNTHESIZERS.contains(&self.algorithm.as_str()) && self.algorithm != registry::PORTFOLIO
    }
}

/// The synthesizers this suite adds to the engine's table, once per process.
fn register_test_producers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        registry::register(crate::reference::FLOOD).unwrap();
    });
}

/// Every producer: each synthesizer of the registry (the greedy with seed 7 under each switch
/// model, the ILP with a 2 s budget on small cases, any other with its defaults), the
/// portfolio `auto` (on topologies beyond the size where it adds the ILP, whose candidate
/// `auto_on_small_topologies_includes_the_ilp` covers), then every baseline and three
/// Kolmakov variants.
fn producers() -> Vec<Producer> {
    register_test_producers();
    let mut v = Vec::new();
    for entry in registry::synthesizers() {
        let name = entry.name;
        match name {
            registry::PORTFOLIO => {
                let auto = engine::Options { time_limit_s: Some(600.0), ..Default::default() };
                v.push(Producer {
                    min_npus: engine::portfolio::ILP_MAX_NPUS + 1,
                    ..Producer::new("auto", registry::PORTFOLIO, auto)
                });
            }
            "greedy" => {
                for model in [None, Some("unwind:1"), Some("unwind:bi")] {
                    let switch_model = model.map(|m| ccsynth::engine::SwitchModel::parse(m).unwrap());
                    let options = engine::Options { seed: Some(7), switch_model, ..Default::default() };
                    let display = model.map_or_else(|| name.to_string(), |m| format!("{name}/{m}"));
                    v.push(Producer::new(display, name, options));
                }
            }
            "ilp" => {
                let options = engine::Options { time_limit_s: Some(2.0), ..Default::default() };
                v.push(Producer { max_npus: Some(ILP_MAX_NPUS), ..Producer::new(name, name, options) });
            }
            other => v.push(Producer::new(other, other, engine::Options::default())),
        }
    }
    for name in registry::baseline_names().into_iter().chain(["kolmakov-r1", "kolmakov-r2", "kolmakov-r3"]) {
        v.push(Producer::new(format!("baseline {name}"), name, engine::Options::default()));
    }
    v
}

/// Runs `p` on one case through the engine's front door. A refusal (bad input, or a case the
/// algorithm does not serve) is `Err` with its reason, prefixed `refused: ` where the producer
/// may refuse (`may_refuse`); a
/// schedule that fails the engine's own gate is a bug and panics.
fn produce(p: &Producer, t: &Topology, spec: &CollectiveSpec) -> Result<(Schedule, engine::RunStats), String> {
    let refusal = |reason: String| {
        assert!(!reason.is_empty(), "{}: a refusal without a reason", p.name);
        if p.may_refuse() { format!("refused: {reason}") } else { reason }
    };
    let rs = engine::RequestSpec {
        target: engine::Target::One(spec.clone()),
        algorithm: p.algorithm.parse().unwrap(),
        options: p.options.clone(),
    };
    let req = engine::Request::new(t.clone(), rs, &engine::Limits::default()).map_err(|e| refusal(e.to_string()))?;
    match engine::run(&req, engine::Control::none()) {
        Ok(out) => Ok((out.schedule, out.stats)),
        Err(engine::Error::Internal(e)) => panic!("{}: the engine let an invalid schedule through: {e}", p.name),
        Err(engine::Error::Cancelled) => panic!("{}: cancelled, though nothing asked it to stop", p.name),
        Err(e @ engine::Error::TimeLimit { .. }) => panic!("{}: {e} on a small case", p.name),
        Err(e @ engine::Error::PricedOut { .. }) => {
            panic!("{}: {e}, though no schedule was given to price against", p.name)
        }
        Err(e @ (engine::Error::Input(_) | engine::Error::Unsupported { .. })) => Err(refusal(e.to_string())),
    }
}

/// The conformance body: the schedule validates, does not beat the lower bound, declares the
/// time the simulator gives, reads back from the service's packed form as it was, exports to Chakra traces that the independent replay of ASTRA-sim's
/// model runs, and, when MSCCL++ and MSCCL run its collective, exports to an MSCCL++ plan and to
/// MSCCL XML that their independent replays accept. Returns whether it was replayed as MSCCL XML.
pub(crate) fn conform(what: &str, s: &Schedule) -> bool {
    let r = engine::check(s);
    assert!(r.valid, "{what}: {:?}", &r.violations[..r.violations.len().min(3)]);
    let time = r.collective_time_ns.unwrap_or_else(|| panic!("{what}: a valid schedule has no simulated time"));
    let bound = r.lower_bound_ns.unwrap_or_else(|| panic!("{what}: a valid schedule has no lower bound"));
    assert!(time >= bound * (1.0 - 1e-9), "{what}: {time} ns beats the bound {bound} ns");
    assert_eq!(s.collective_time_ns, Some(time), "{what}: the declared time is the simulated one");
    stores_packed(what, s);
    replays_the_same_on_ranges(what, s);
    crate::chakra::replays_as_chakra(what, s);
    crate::mscclpp::replays_if_mscclpp_runs_it(what, s).unwrap_or_else(|e| panic!("{e}"));
    crate::msccl::replays_if_msccl_runs_it(what, s).unwrap_or_else(|e| panic!("{e}"))
}

/// The packed form the service stores a large schedule in reads back equal, and records the
/// exact length of the explicit JSON it stands for; the compact and the explicit JSON read
/// back equal, each of the length counted for it.
fn stores_packed(what: &str, s: &Schedule) {
    use ccsynth::schedule::{Form, packed};
    let explicit = serde_json::to_string(&s.written(Form::Explicit)).unwrap();
    let p = packed::pack(&mut s.clone(), |_| {}).unwrap();
    assert_eq!(p.json_len, explicit.len() as u64, "{what}: the JSON length counted");
    let back = packed::decode(&p.bytes, str::to_string).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(back == *s, "{what}: the packed schedule reads back different");
    let compact = serde_json::to_string(s).unwrap();
    assert_eq!(packed::schedule_json_len(&mut s.clone()).unwrap(), compact.len() as u64, "{what}: compact length");
    for (form, text) in [("compact", &compact), ("explicit", &explicit)] {
        let back = Schedule::from_json(text).unwrap_or_else(|e| panic!("{what}: the {form} form: {e}"));
        assert!(back == *s, "{what}: the {form} form reads back different");
    }
}

/// The replays on ranges (what large schedules are checked by) agree with those on tables of
/// slots: the validator's finds the schedule valid (or declines it), the simulator's gives the
/// very timing.
pub(crate) fn replays_the_same_on_ranges(what: &str, s: &Schedule) {
    assert_ne!(ccsynth::validate::valid_on_ranges(s), Some(false), "{what}: invalid on ranges");
    if let Some(on_ranges) = ccsynth::sim::simulate_on_ranges(s) {
        assert_eq!(on_ranges, ccsynth::sim::simulate_on_slots(s), "{what}: simulated on ranges");
    }
}

/// `replays_the_same_on_ranges` for a schedule the validator found `valid` or not: the
/// simulators agree either way (where both run).
pub(crate) fn replays_the_same_on_ranges_if_valid(what: &str, s: &Schedule, valid: bool) {
    if valid {
        return replays_the_same_on_ranges(what, s);
    }
    if let Some(on_ranges) = ccsynth::sim::simulate_on_ranges(s) {
        assert_eq!(on_ranges, ccsynth::sim::simulate_on_slots(s), "{what}: simulated on ranges");
    }
}

fn describe(p: &Producer, tname: &str, spec: &CollectiveSpec) -> String {
    format!("{} on {tname}: {:?} k={} group={:?}", p.name, spec.kind, spec.chunks(), spec.group)
}

fn topologies() -> Vec<(String, Topology)> {
    let mut v: Vec<(String, Topology)> = [
        "ring:5",
        "ring:6:uni",
        "mesh:3x3",
        "torus:3x4",
        "fc:5",
        "switch:5",
        "hyperx:3x3",
        "dragonfly:2:4",
        "hier:ring2,fc2,switch2",
        "rail:2x3",
        "hammingmesh:2x2:2x1",
        "hypercube:3",
        "mesh:3x3@bw=50,100;lat=300,700",
        "ring:7",
        "torus:6x6",
        "torus:4x8",
        "torus:2x8",
        "torus:4x4x2",
    ]
    .iter()
    .map(|s| (s.to_string(), topo(s)))
    .collect();
    let failed =
        topo("mesh:4x4").with_failures(&Failures { links: vec![[5, 6], [1, 2]], npus: vec![10], ..Default::default() });
    v.push(("mesh:4x4 minus links 5-6, 1-2 and NPU 10".into(), failed.unwrap()));
    v
}

fn collectives(t: &Topology) -> Vec<CollectiveSpec> {
    let live = t.live_npus();
    let root = live[live.len() / 2];
    let mut v = Vec::new();
    for k in [1, 2] {
        for kind in [K::AllGather, K::ReduceScatter, K::AllReduce, K::AllToAll] {
            v.push(CollectiveSpec::new(kind, 1 << 20).with_chunks_per_npu(k));
        }
        for kind in [K::Broadcast, K::Reduce, K::Scatter, K::Gather] {
            v.push(CollectiveSpec::new(kind, 1 << 20).with_chunks_per_npu(k).with_root(root));
        }
    }
    // Subgroups: every other NPU, and all but the last (ranks 0.. in id order, as on a whole
    // grid: bucket once took that for its grid and indexed past the group). The others only
    // forward.
    let every_other: Vec<usize> = live.iter().copied().step_by(2).collect();
    let all_but_last: Vec<usize> = live[..live.len() - 1].to_vec();
    for sub in [every_other, all_but_last] {
        if sub.len() >= 2 {
            for kind in [K::AllGather, K::AllReduce] {
                v.push(CollectiveSpec { group: Some(sub.clone()), ..CollectiveSpec::new(kind, 999_999) });
            }
        }
    }
    // A custom non-combining and a custom combining collective.
    let (a, b, c) = (live[0], live[live.len() - 1], live[1]);
    v.push(CollectiveSpec {
        num_chunks: Some(3),
        precondition: Some(vec![[a as u32, 0], [b as u32, 1], [a as u32, 2], [c as u32, 2]]),
        postcondition: Some(vec![[b as u32, 0], [c as u32, 0], [a as u32, 1], [b as u32, 2]]),
        ..CollectiveSpec::new(K::Custom, 3000)
    });
    v.push(CollectiveSpec {
        num_chunks: Some(2),
        combining: Some(true),
        precondition: Some(vec![[a as u32, 0], [b as u32, 0], [c as u32, 0], [a as u32, 1], [c as u32, 1]]),
        postcondition: Some(vec![[b as u32, 0], [a as u32, 0], [b as u32, 1]]),
        ..CollectiveSpec::new(K::Custom, 2000)
    });
    // A combining chunk nobody needs (chunk 1: held by two NPUs, in no postcondition pair), and
    // one nobody holds or needs (chunk 2): the greedy once divided by their zero destinations.
    v.push(CollectiveSpec {
        num_chunks: Some(3),
        combining: Some(true),
        precondition: Some(vec![[a as u32, 0], [b as u32, 0], [a as u32, 1], [c as u32, 1]]),
        postcondition: Some(vec![[c as u32, 0]]),
        ..CollectiveSpec::new(K::Custom, 3000)
    });
    v
}

#[test]
fn every_producer_on_every_topology_and_collective() {
    // The ILP runs these very cases, with its statistics checked too, in
    // `the_ilp_on_every_small_topology_and_collective` below: not twice.
    let producers: Vec<Producer> = producers().into_iter().filter(|p| p.algorithm != "ilp").collect();
    let mut produced = 0;
    let mut replayed = 0;
    let mut flooded = 0;
    let mut refused = Vec::new();
    for (tname, t) in topologies() {
        for spec in collectives(&t) {
            for p in producers.iter().filter(|p| p.serves(&t)) {
                let what = describe(p, &tname, &spec);
                match produce(p, &t, &spec) {
                    Ok((s, _)) => {
                        replayed += conform(&what, &s) as usize;
                        produced += 1;
                        flooded += usize::from(p.algorithm == crate::reference::FLOOD.name);
                    }
                    Err(reason) => refused.push(format!("{what}: {reason}")),
                }
            }
        }
    }
    // The greedy serves every case; only baselines and test producers may refuse.
    let greedy_refused: Vec<&String> = refused.iter().filter(|r| r.starts_with("greedy")).collect();
    assert!(greedy_refused.is_empty(), "refused: {greedy_refused:#?}");
    assert!(refused.iter().all(|r| r.contains("refused: ")), "{refused:#?}");
    assert!(produced > 1500, "{produced}");
    // The test-only producer joined through the registry and its schedules passed the gate.
    assert!(flooded >= 20, "the registered test producer made {flooded} schedules");
    // Most schedules are of a collective MSCCL runs, and export.
    assert!(replayed > 900, "{replayed} of {produced} replayed as MSCCL XML");
}

#[test]
fn every_producer_for_p_from_2_to_33() {
    let producers = producers();
    let mut produced = 0;
    for p in 2..=33usize {
        for tspec in [format!("ring:{p}"), format!("fc:{p}")] {
            let t = topo(&tspec);
            for kind in [K::AllReduce, K::AllGather, K::ReduceScatter, K::Broadcast, K::Reduce] {
                let mut c = CollectiveSpec::new(kind, 3 << 20);
                if kind.needs_root() {
                    c.root = Some(p / 2);
                }
                for producer in producers.iter().filter(|x| x.serves(&t)) {
                    if let Ok((s, _)) = produce(producer, &t, &c) {
                        conform(&format!("{} on {tspec}: {kind:?}", producer.name), &s);
                        produced += 1;
                    }
                }
            }
        }
    }
    assert!(produced > 2000, "{produced}");
}

#[test]
fn directed_topologies_never_make_a_producer_panic() {
    // A star pointing out of NPU 0: only rooted spreads from 0 are servable.
    let star = Topology::from_json(
        r#"{"npus": 4, "default_link": {"latency_ns": 1, "bandwidth_gb_per_s": 1},
            "links": [{"src": 0, "dst": 1}, {"src": 0, "dst": 2}, {"src": 0, "dst": 3}]}"#,
    )
    .unwrap();
    let producers: Vec<Producer> = producers().into_iter().filter(|p| p.serves(&star)).collect();
    let mut produced = 0;
    for kind in [K::Broadcast, K::Scatter] {
        let spec = CollectiveSpec::new(kind, 4096).with_root(0);
        for p in &producers {
            if let Ok((s, _)) = produce(p, &star, &spec) {
                conform(&describe(p, "the out-star", &spec), &s);
                produced += 1;
            }
        }
    }
    // Everything else is refused as bad input, never a panic.
    for other in [K::AllGather, K::AllReduce, K::Gather] {
        let mut bad = CollectiveSpec::new(other, 4096);
        if other.needs_root() {
            bad.root = Some(0);
        }
        for p in &producers {
            assert!(produce(p, &star, &bad).is_err(), "{}", describe(p, "the out-star", &bad));
        }
    }
    assert!(produced >= 4, "{produced}");
}

/// The ILP through the same body, on every case small enough to solve (≤ 9 NPUs), with a short
/// budget so that large ones end on the time-out path: each result validates, never beats the
/// bound, and never takes more TEN steps than the greedy warm start it began from.
#[test]
fn the_ilp_on_every_small_topology_and_collective() {
    let ilp = producers().into_iter().find(|p| p.algorithm == "ilp").expect("the registry offers the ilp");
    let mut produced = 0;
    let mut optimal = 0;
    for (tname, t) in topologies().into_iter().filter(|(_, t)| ilp.serves(t)) {
        for spec in collectives(&t) {
            let what = describe(&ilp, &tname, &spec);
            let (s, stats) = produce(&ilp, &t, &spec).unwrap_or_else(|reason| panic!("{what}: refused: {reason}"));
            conform(&what, &s);
            let st = stats.synthesis().unwrap_or_else(|| panic!("{what}: no synthesis statistics"));
            let i = st.ilp.as_ref().unwrap_or_else(|| panic!("{what}: no ILP statistics"));
            assert!(i.horizon <= i.greedy_horizon && i.horizon_lower_bound <= i.horizon, "{what}: {i:?}");
            assert_eq!(i.horizon, st.ten_timesteps, "{what}");
            optimal += (i.status == engine::IlpStatus::Optimal) as usize;
            produced += 1;
        }
    }
    assert!(produced > 200, "{produced}");
    // Most small cases are proven optimal within two seconds.
    assert!(optimal * 10 >= produced * 7, "{optimal} of {produced}");
}
