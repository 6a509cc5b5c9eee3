//! The shared conformance suite: one body run over every producer (synthesizers, and the
//! baselines as they land) × topology × collective. Every schedule a producer emits must
//! validate and must not beat the lower bound; a producer may refuse a case, with a reason,
//! but never emit an invalid schedule or panic.

mod common;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, SynthFailure, SynthRequest};
use ccsynth::schedule::Schedule;
use ccsynth::ten::SwitchModel;
use ccsynth::topology::{Failures, Topology};
use common::*;

fn greedy_with(t: &Topology, spec: &CollectiveSpec, model: SwitchModel) -> Result<Schedule, String> {
    let mut req = SynthRequest::new(t.clone(), spec.clone());
    req.switch_model = model;
    req.seed = 7;
    match engine::synthesize(&req, &|| false) {
        Ok(out) => Ok(out.schedule),
        Err(SynthFailure::Engine(e)) => panic!("the engine let an invalid schedule through: {e}"),
        Err(e) => Err(e.to_string()),
    }
}

fn baseline(name: &str, t: &Topology, spec: &CollectiveSpec) -> Result<Schedule, String> {
    match engine::baseline(name, t, spec) {
        Ok((s, _)) => Ok(s),
        Err(engine::BaselineFailure::Engine(e)) => panic!("{name} produced an invalid schedule: {e}"),
        Err(e) => Err(format!("refused: {e}")),
    }
}

fn producers() -> Vec<(String, Box<dyn Fn(&Topology, &CollectiveSpec) -> Result<Schedule, String>>)> {
    let mut v: Vec<(String, Box<dyn Fn(&Topology, &CollectiveSpec) -> Result<Schedule, String>>)> = vec![
        ("greedy".into(), Box::new(|t, s| greedy_with(t, s, SwitchModel::Native))),
        ("greedy/unwind:1".into(), Box::new(|t, s| greedy_with(t, s, SwitchModel::Unwind { degree: 1 }))),
        ("greedy/unwind:bi".into(), Box::new(|t, s| greedy_with(t, s, SwitchModel::UnwindBiRing))),
    ];
    for name in ccsynth::baselines::names() {
        v.push((format!("baseline {name}"), Box::new(move |t, s| baseline(name, t, s))));
    }
    for name in ["kolmakov-r1", "kolmakov-r2", "kolmakov-r3"] {
        v.push((format!("baseline {name}"), Box::new(move |t, s| baseline(name, t, s))));
    }
    v
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
    // A subgroup: the others only forward.
    let sub: Vec<usize> = live.iter().copied().step_by(2).collect();
    if sub.len() >= 2 {
        for kind in [K::AllGather, K::AllReduce] {
            v.push(CollectiveSpec { group: Some(sub.clone()), ..CollectiveSpec::new(kind, 999_999) });
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
    v
}

#[test]
fn every_producer_on_every_topology_and_collective() {
    let mut produced = 0;
    let mut refused = Vec::new();
    for (tname, t) in topologies() {
        for spec in collectives(&t) {
            for (pname, produce) in &producers() {
                let what =
                    format!("{pname} on {tname}: {:?} k={} group={:?}", spec.kind, spec.chunks_per_npu, spec.group);
                match produce(&t, &spec) {
                    Ok(s) => {
                        let r = engine::check(&s);
                        assert!(r.valid, "{what}: {:?}", &r.violations[..r.violations.len().min(3)]);
                        let time = r.collective_time_ns.unwrap();
                        let bound = r.lower_bound_ns.unwrap();
                        assert!(time >= bound * (1.0 - 1e-9), "{what}: {time} ns beats the bound {bound} ns");
                        assert_eq!(s.collective_time_ns, Some(time), "{what}: the declared time is the simulated one");
                        produced += 1;
                    }
                    Err(reason) => {
                        assert!(!reason.is_empty());
                        refused.push(format!("{what}: {reason}"));
                    }
                }
            }
        }
    }
    // The greedy serves every case; only baselines may refuse.
    let greedy_refused: Vec<&String> = refused.iter().filter(|r| r.starts_with("greedy")).collect();
    assert!(greedy_refused.is_empty(), "refused: {greedy_refused:#?}");
    assert!(refused.iter().all(|r| r.contains("refused: ")));
    assert!(produced > 1500, "{produced}");
}

#[test]
fn every_producer_for_p_from_2_to_33() {
    let mut produced = 0;
    for p in 2..=33usize {
        for spec in [format!("ring:{p}"), format!("fc:{p}")] {
            let t = topo(&spec);
            for kind in [K::AllReduce, K::AllGather, K::ReduceScatter, K::Broadcast, K::Reduce] {
                let mut c = CollectiveSpec::new(kind, 3 << 20);
                if kind.needs_root() {
                    c.root = Some(p / 2);
                }
                for (pname, produce) in &producers() {
                    if let Ok(s) = produce(&t, &c) {
                        let r = engine::check(&s);
                        assert!(r.valid, "{pname} on {spec} {kind:?}: {:?}", &r.violations[..1]);
                        assert!(r.collective_time_ns.unwrap() >= r.lower_bound_ns.unwrap() * (1.0 - 1e-9));
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
    let mut produced = 0;
    for kind in [K::Broadcast, K::Scatter] {
        let spec = CollectiveSpec::new(kind, 4096).with_root(0);
        for (pname, produce) in &producers() {
            if let Ok(s) = produce(&star, &spec) {
                assert!(engine::check(&s).valid, "{pname} {kind:?}");
                produced += 1;
            }
        }
        // Everything else is refused as bad input, never a panic.
        for other in [K::AllGather, K::AllReduce, K::Gather] {
            let mut bad = CollectiveSpec::new(other, 4096);
            if other.needs_root() {
                bad.root = Some(0);
            }
            for (_, produce) in &producers() {
                assert!(produce(&star, &bad).is_err());
            }
        }
    }
    assert!(produced >= 4, "{produced}");
}

/// The ILP through the same body, on every case small enough to solve (≤ 9 NPUs), with a short
/// budget so that large ones end on the time-out path: each result validates, never beats the
/// bound, and never takes more TEN steps than the greedy warm start it began from.
#[test]
fn the_ilp_on_every_small_topology_and_collective() {
    let mut produced = 0;
    let mut optimal = 0;
    for (tname, t) in topologies().into_iter().filter(|(_, t)| t.npus() <= 9) {
        for spec in collectives(&t) {
            let what = format!("ilp on {tname}: {:?} k={} group={:?}", spec.kind, spec.chunks_per_npu, spec.group);
            let mut req = SynthRequest::new(t.clone(), spec.clone());
            req.algorithm = "ilp".into();
            req.ilp.time_limit_s = 2.0;
            let out = match engine::synthesize(&req, &|| false) {
                Ok(out) => out,
                Err(SynthFailure::Engine(e)) => panic!("{what}: the engine let an invalid schedule through: {e}"),
                Err(e) => panic!("{what}: refused: {e}"),
            };
            let r = engine::check(&out.schedule);
            assert!(r.valid, "{what}: {:?}", &r.violations[..r.violations.len().min(3)]);
            assert!(r.collective_time_ns.unwrap() >= r.lower_bound_ns.unwrap() * (1.0 - 1e-9), "{what}");
            let s = out.stats.ilp.as_ref().unwrap();
            assert!(s.horizon <= s.greedy_horizon && s.horizon_lower_bound <= s.horizon, "{what}: {s:?}");
            assert_eq!(s.horizon, out.stats.ten_timesteps, "{what}");
            optimal += (s.status == ccsynth::synth::ilp::IlpStatus::Optimal) as usize;
            produced += 1;
        }
    }
    assert!(produced > 200, "{produced}");
    // Most small cases are proven optimal within two seconds.
    assert!(optimal * 10 >= produced * 7, "{optimal} of {produced}");
}
