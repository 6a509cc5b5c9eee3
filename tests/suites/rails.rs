//! Rail fabrics: their recognition (`Topology::infer_rails`), the `pxn` all-to-all against its
//! closed-form time and the targets, its refusals, and a property test that its
//! schedules validate and take exactly the time its plan says, on rails of any shape and speeds;
//! recursive doubling with its groups interleaved over the two uplinks, in closed form and by
//! default on rail:8x32.

use crate::common::*;
use ccsynth::baselines;
use ccsynth::bounds::lower_bounds;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::schedule::Schedule;
use ccsynth::synth::doubling::Shape;
use ccsynth::topology::Failures;
use ccsynth::validate::validate;
use proptest::prelude::*;

const ALPHA: f64 = 500.0;
const BW: f64 = 100.0;

#[test]
fn rails_are_recognized_with_the_node_class_the_one_of_fewer_switches() {
    // rail:4x8: NPU node·8 + g, node switches 32–35, rail switches 36–43.
    let r = topo("rail:4x8").infer_rails().expect("a rail fabric");
    assert_eq!((r.nodes(), r.gpus()), (4, 8));
    assert_eq!(r.node_switches, vec![32, 33, 34, 35]);
    assert_eq!(r.rail_switches, (36..44).collect::<Vec<_>>());
    for a in 0..4 {
        for g in 0..8 {
            assert_eq!(r.npu(a, g), a * 8 + g);
        }
    }
    // rail:8x4: eight node switches of four GPUs and four rails of eight: the four rails are
    // the class of fewer switches, so the roles swap.
    let r = topo("rail:8x4").infer_rails().expect("a rail fabric");
    assert_eq!((r.nodes(), r.gpus()), (4, 8));
    assert_eq!(r.node_switches, (40..44).collect::<Vec<_>>());
    for a in 0..4 {
        for g in 0..8 {
            assert_eq!(r.npu(a, g), g * 4 + a);
        }
    }
    assert!(topo("rail:2x2").infer_rails().is_some());
    // Not rail fabrics: no switches, one switch, a lost link or NPU, a hierarchy, one node.
    for spec in ["torus:4x4", "switch:8", "fc:8", "hier:ring2,fc4,switch4", "dragonfly:4:5", "rail:1x8"] {
        assert!(topo(spec).infer_rails().is_none(), "{spec}");
    }
    let t = topo("rail:4x8");
    let lost_link = t.with_failures(&Failures { links: vec![[0, 32]], ..Default::default() }).unwrap();
    assert!(lost_link.infer_rails().is_none());
    let lost_npu = t.with_failures(&Failures { npus: vec![5], ..Default::default() }).unwrap();
    assert!(lost_npu.infer_rails().is_none());
}

fn pxn(spec: &str, n: u64) -> ccsynth::schedule::Schedule {
    let (s, r) = baseline("pxn", &topo(spec), CollectiveSpec::new(K::AllToAll, n))
        .unwrap_or_else(|e| panic!("pxn on {spec}: {e}"));
    assert!(r.valid, "pxn on {spec}");
    s
}

/// Transfers from each NPU through its node switch (the first node of the path after it).
fn node_messages(s: &ccsynth::schedule::Schedule, rails: &ccsynth::topology::Rails) -> Vec<usize> {
    let mut per = vec![0usize; s.topology.npus()];
    for i in 0..s.transfers.len() {
        let t = s.transfers.at(i);
        let path = t.path.expect("every message goes through a switch");
        if rails.node_switches.contains(&(path[1] as usize)) {
            per[t.src as usize] += 1;
        }
    }
    per
}

#[test]
fn pxn_on_rail_4x8_sends_one_message_of_four_chunks_to_each_gpu_of_its_node() {
    // Each GPU's node uplink carries 28 pair blocks (7 for its own node, 21 on their way to or
    // from a rail), the bound; in 7 messages, one to each other GPU of its node, so 7 times the
    // two link latencies on top and nothing else.
    let t = topo("rail:4x8");
    let rails = t.infer_rails().unwrap();
    for n in [16u64 << 20, 64 << 20] {
        let s = pxn("rail:4x8", n);
        let pair = n as f64 / 32.0;
        let want = 28.0 * pair / BW + 7.0 * 2.0 * ALPHA;
        assert!(close(s.collective_time_ns.unwrap(), want), "{n}: {:?} vs {want}", s.collective_time_ns);
        assert!(node_messages(&s, &rails).iter().all(|&m| m == 7), "{n}");
        let b = lower_bounds(&t, &coll(&t, K::AllToAll, n)).lower_bound_ns.unwrap();
        assert!(close(b, 28.0 * pair / BW), "{b}");
        // The target, 1.15× the bound, with room: 1.048× at 16 MiB.
        assert!(s.collective_time_ns.unwrap() <= 1.05 * b);
    }
}

#[test]
fn pxn_on_rail_8x16_meets_the_target_and_auto_takes_it() {
    let t = topo("rail:8x16");
    for n in [16u64 << 20, 32 << 20, 64 << 20] {
        // The cut around a rail switch and its 8 GPUs: their chunks for the other 15 rails
        // (8 · 8 · 15 pair blocks) leave over their 8 node-switch links.
        let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
        let pair = n as f64 / 128.0;
        assert!(close(b.cut_ns.unwrap(), 120.0 * pair / BW), "{b:?}");
        let s = pxn("rail:8x16", n);
        let time = s.collective_time_ns.unwrap();
        assert!(time <= 1.15 * b.lower_bound_ns.unwrap(), "{n}: {time} vs {:?}", b.lower_bound_ns);
        let planned = baselines::pxn_planned_ns_for_tests(&t, 1, pair).unwrap();
        assert!(close(time, planned), "{n}: simulated {time}, planned {planned}");
    }
    let auto = ccsynth::engine::RequestSpec {
        algorithm: "auto".parse().unwrap(),
        ..ccsynth::engine::RequestSpec::new(CollectiveSpec::new(K::AllToAll, 16 << 20))
    };
    let out = run_request(&t, auto).unwrap();
    assert!(out.report.valid);
    let (auto, alone) =
        (out.schedule.collective_time_ns.unwrap(), pxn("rail:8x16", 16 << 20).collective_time_ns.unwrap());
    assert!(auto <= alone, "auto {auto} ({:?}), pxn {alone}", out.schedule.algorithm);
}

#[test]
fn pxn_refuses_what_is_not_a_whole_rail_fabric() {
    let a2a = CollectiveSpec::new(K::AllToAll, 1 << 20);
    let err = baseline("pxn", &topo("torus:4x4"), a2a.clone()).expect_err("no rails");
    assert!(err.to_string().contains("rail fabric"), "{err}");
    let t = topo("rail:4x8").with_failures(&Failures { links: vec![[0, 32]], ..Default::default() }).unwrap();
    let err = baseline("pxn", &t, a2a.clone()).expect_err("a lost link");
    assert!(err.to_string().contains("rail fabric"), "{err}");
    let some = CollectiveSpec { group: Some((0..16).collect()), ..a2a.clone() };
    let err = baseline("pxn", &topo("rail:4x8"), some).expect_err("a group");
    assert!(err.to_string().contains("every NPU"), "{err}");
    let err = baseline("pxn", &topo("rail:4x8"), CollectiveSpec::new(K::AllGather, 1 << 20)).expect_err("all-gather");
    assert!(err.to_string().contains("all_gather") || err.to_string().contains("all-gather"), "{err}");
    let info = baselines::list().into_iter().find(|b| b.name == "pxn").expect("listed");
    assert_eq!(info.collectives, vec![K::AllToAll]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// On rails of any shape, link speeds and latencies, chunks per pair and size, the schedule
    /// validates, never beats the lower bound, and the simulator times it exactly as planned
    /// (the plan of one GPU holds for all: every round is a permutation of a switch's ports).
    #[test]
    fn pxn_validates_and_takes_its_planned_time(
        nodes in 2usize..6,
        gpus in 2usize..7,
        bw in (1u32..4, 1u32..4),
        lat in (0u32..3, 0u32..3),
        k in 1u32..3,
        size in 1u64..(32 << 20),
    ) {
        let spec = format!("rail:{nodes}x{gpus}@bw={},{};lat={},{}", 50 * bw.0, 50 * bw.1, 400 * lat.0, 400 * lat.1);
        let t = topo(&spec);
        let p = (nodes * gpus) as u64;
        let cs = CollectiveSpec::new(K::AllToAll, (size / (p * p * k as u64)).max(1) * p * p * k as u64)
            .with_chunks_per_npu(k);
        let (s, r) = baseline("pxn", &t, cs.clone()).map_err(|e| TestCaseError::fail(format!("{spec}: {e}")))?;
        prop_assert!(r.valid, "{spec}");
        let time = s.collective_time_ns.unwrap();
        let c = coll_spec(&t, cs);
        let bound = lower_bounds(&t, &c).lower_bound_ns.unwrap();
        prop_assert!(time >= bound * (1.0 - 1e-9), "{spec}: {time} < {bound}");
        let planned = baselines::pxn_planned_ns_for_tests(&t, k as usize, c.chunk_size_bytes).unwrap();
        prop_assert!(close(time, planned), "{spec}: simulated {time}, planned {planned}");
    }
}

const INTERLEAVED: Shape = Shape { halving: false, multiport: true, interleaved: true };

/// rail:4x4 (two bits through the node's switch, two through the rail's): the interleaved
/// groups take turns on the two uplinks, one message each a round, every round a doubling of
/// the last, so the all-gather is exactly the bound plus one α a round (two links' latency
/// through a switch), and the all-reduce (halving, then doubling back) the two-pass bound plus
/// two a round. The rotations put both groups' last rounds on one uplink: slower.
#[test]
fn interleaved_doubling_on_rail_4x4_is_the_bound_plus_an_alpha_a_round() {
    let t = topo("rail:4x4");
    let size = 16u64 << 20;
    let through_a_switch = 2.0 * ALPHA;
    let ag = coll_spec(&t, CollectiveSpec::new(K::AllGather, size).with_chunks_per_npu(2));
    let s = doubled(&t, &ag, INTERLEAVED).unwrap();
    let report = validate(&s);
    assert!(report.valid, "{:?}", report.violations.first());
    let bound = lower_bounds(&t, &ag).min_cut_ns.unwrap();
    assert!(close(bound, 7.5 * (size as f64 / 16.0) / BW), "{bound}");
    assert!(close(time(&s), bound + 4.0 * through_a_switch), "{} vs {bound}", time(&s));
    // Every round, every NPU sends one message up each of its two links.
    let rails = t.infer_rails().unwrap();
    for step in 0..4 {
        for v in 0..16 {
            let sent: Vec<usize> = s
                .transfers
                .iter()
                .filter(|x| x.step == step && x.src == v)
                .map(|x| x.path.as_ref().unwrap()[1] as usize)
                .collect();
            assert_eq!(sent.len(), 2, "step {step}, NPU {v}");
            assert!(
                sent.iter().any(|&w| rails.node_switches.contains(&w))
                    && sent.iter().any(|&w| rails.rail_switches.contains(&w)),
                "step {step}, NPU {v}: {sent:?}"
            );
        }
    }
    let rotated = doubled(&t, &ag, Shape { interleaved: false, ..INTERLEAVED }).unwrap();
    assert!(time(&rotated) > time(&s) * 1.05, "rotated {} vs {}", time(&rotated), time(&s));

    let ar = coll_spec(&t, CollectiveSpec::new(K::AllReduce, size).with_chunks_per_npu(2));
    let mut s = doubled(&t, &ar, Shape { halving: true, ..INTERLEAVED }).unwrap();
    let report = validate(&s);
    assert!(report.valid, "{:?}", report.violations.first());
    let two_pass = lower_bounds(&t, &ar).two_pass_ns.unwrap();
    assert!(close(two_pass, 2.0 * bound), "{two_pass}");
    assert!(close(time(&s), two_pass + 8.0 * through_a_switch), "{} vs {two_pass}", time(&s));
    s.collective_time_ns = Some(time(&s));
    crate::conformance::conform("interleaved halving-doubling on rail:4x4", &s);

    // One switch: every partner through it, one class, no interleaving to do.
    let one = topo("switch:8");
    let c = coll_spec(&one, CollectiveSpec::new(K::AllGather, size).with_chunks_per_npu(2));
    assert!(doubled(&one, &c, INTERLEAVED).is_err());
}

/// Rail fabrics of 256 and 512 GPUs by default (`auto`): the interleaved doubling takes the
/// all-gather and the all-reduce at 128 MiB on rail:8x32 from 1.103× and 1.151× the bound to
/// 1.027×, and rail:64x8's all-gather, beyond the greedy's latency mode, from 1.135× to 1.032×.
#[test]
fn auto_on_rails_of_256_and_512_gpus_is_within_four_percent_of_the_bound() {
    for (spec, kind, within) in
        [("rail:8x32", K::AllGather, 1.03), ("rail:8x32", K::AllReduce, 1.03), ("rail:64x8", K::AllGather, 1.035)]
    {
        let t = topo(spec);
        let collective = CollectiveSpec::new(kind, 128 << 20);
        let bound = lower_bounds(&t, &coll(&t, kind, 128 << 20)).lower_bound_ns.unwrap();
        let auto = ccsynth::engine::RequestSpec {
            algorithm: "auto".parse().unwrap(),
            ..ccsynth::engine::RequestSpec::new(collective)
        };
        let out = run_request(&t, auto).unwrap();
        assert!(out.report.valid);
        let got = out.schedule.collective_time_ns.unwrap();
        assert!(got <= within * bound, "{spec} {kind:?}: {got} vs {bound} ({:?})", out.schedule.algorithm);
    }
}

fn time(s: &Schedule) -> f64 {
    ccsynth::sim::simulate(s).unwrap().collective_time_ns
}
