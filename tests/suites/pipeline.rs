//! The critical paths pipelined (`synth::pipeline`, issue 63): a relay's forward of what it
//! has just received sent piece by piece, in closed form on a path of three NPUs and on
//! dragonfly:4:5@bw=400,200 (its pieces replayed by every runtime's export); the pipelined
//! schedule valid, faster and timed as the simulator times it, on random fabrics.

use crate::common::*;
use ccsynth::collective::{Collective, CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, RequestSpec};
use ccsynth::schedule::{Schedule, Transfer};
use ccsynth::synth::pipeline::pipeline;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

/// A broadcast of 4 MiB from NPU 0 down mesh:3 (a path, 100 GB/s and 500 ns a link) in two
/// whole messages, 0 → 1 then 1 → 2: 2 (α + V/β) = 84.886 µs. In m pieces the forward starts
/// with the first: (m + 1) α + V/β + V/(mβ); four pieces (2.5 + 41.943 + 10.486 µs = 54.929 µs)
/// beat two (64.415 µs), and the pass keeps four. Everything is on the critical path, so
/// every message is split.
#[test]
fn a_relay_forwards_piece_by_piece() {
    let t = topo("mesh:3");
    let c = Collective::build(&CollectiveSpec::new(K::Broadcast, 4 * MIB).with_root(0), &t).unwrap();
    let mut s = Schedule::new(t.clone(), &c, "hand");
    let all: Vec<u32> = (0..c.num_chunks as u32).collect();
    s.transfers.push(Transfer::copy(0, 0, 1, all.clone()));
    s.transfers.push(Transfer::copy(1, 1, 2, all));
    let (s, before) = {
        let (s, report) = engine::finalize(s).unwrap();
        assert!(report.valid, "{:?}", report.violations);
        let ns = s.collective_time_ns.unwrap();
        (s, ns)
    };
    let (alpha, v_over_beta) = (500.0, (4 * MIB) as f64 / 100.0);
    assert!(close(before, 2.0 * (alpha + v_over_beta)), "{before}");
    let p = pipeline(&s, before, &|| false).unwrap().expect("pipelining the path is faster");
    assert_eq!((p.pieces, p.split), (4, 2));
    assert!(close(p.time_ns, 5.0 * alpha + v_over_beta + v_over_beta / 4.0), "{}", p.time_ns);
    assert_eq!(p.schedule.transfers.len(), 8);
    assert_eq!(p.schedule.collective.chunks(), 4 * s.collective.chunks());
    let (piped, report) = engine::finalize(p.schedule).unwrap();
    assert!(report.valid, "{:?}", report.violations);
    assert!(close(piped.collective_time_ns.unwrap(), p.time_ns));
    // Nothing to gain where the messages are already as small as α allows: with α at 40 µs
    // (more than the 10.5 µs a quarter of the vector saves), the two whole messages stay.
    let slow = topo("mesh:3@lat=40000");
    let c = Collective::build(&CollectiveSpec::new(K::Broadcast, 4 * MIB).with_root(0), &slow).unwrap();
    let mut s = Schedule::new(slow, &c, "hand");
    let all: Vec<u32> = (0..c.num_chunks as u32).collect();
    s.transfers.push(Transfer::copy(0, 0, 1, all.clone()));
    s.transfers.push(Transfer::copy(1, 1, 2, all));
    let (s, _) = engine::finalize(s).unwrap();
    let before = s.collective_time_ns.unwrap();
    assert!(pipeline(&s, before, &|| false).unwrap().is_none());
}

/// The pass stops when its poll says so (`SimError::Stopped`), and leaves alone what it does
/// not follow: the same broadcast sent 0 → 2 in one transfer relayed through NPU 1 (stored and
/// forwarded hop by hop, which pieces would pipeline too) is not cut.
#[test]
fn the_pass_stops_when_told_and_leaves_relays_alone() {
    let t = topo("mesh:3");
    let c = Collective::build(&CollectiveSpec::new(K::Broadcast, 4 * MIB).with_root(0), &t).unwrap();
    let all: Vec<u32> = (0..c.num_chunks as u32).collect();
    let mut s = Schedule::new(t.clone(), &c, "hand");
    s.transfers.push(Transfer::copy(0, 0, 1, all.clone()));
    s.transfers.push(Transfer::copy(1, 1, 2, all.clone()));
    let (s, _) = engine::finalize(s).unwrap();
    let before = s.collective_time_ns.unwrap();
    assert_eq!(pipeline(&s, before, &|| true).unwrap_err(), ccsynth::sim::SimError::Stopped);
    let mut relayed = Schedule::new(t, &c, "hand");
    relayed.transfers.push(Transfer::copy(0, 0, 1, all.clone()));
    relayed.transfers.push(Transfer { path: Some(vec![0u32, 1, 2].into()), ..Transfer::copy(0, 0, 2, all) });
    let (relayed, report) = engine::finalize(relayed).unwrap();
    assert!(report.valid, "{:?}", report.violations);
    let before = relayed.collective_time_ns.unwrap();
    assert!(pipeline(&relayed, before, &|| false).unwrap().is_none());
}

/// dragonfly:4:5@bw=400,200 (groups of 4 NPUs at 400 GB/s, one 200 GB/s global link an NPU):
/// the greedy's all-gather at 4 chunks an NPU sends 16 whole chunks (c = 256 MiB / 80) over
/// each global link and hands the last on to three groupmates after it:
/// 16 (α + c/200) + α + c/400 = 285.324 µs, 1.063× the min-cut bound, the best of every
/// chunking. Pipelined, each last global message goes in four pieces and its hand-on follows
/// the last piece: 16 (α + c/200) + 3α + α + c/1600 = 280.533 µs, 1.045×. The all-reduce
/// there (the dragonfly of 4-NPU groups) meets its 1.05× target: 1.063 → 1.048.
#[test]
fn dragonfly_hand_ons_are_pipelined() {
    let t = topo("dragonfly:4:5@bw=400,200");
    let greedy = |kind| {
        let spec = RequestSpec::new(CollectiveSpec::new(kind, 256 * MIB));
        run_request(&t, RequestSpec { algorithm: "greedy".parse().unwrap(), ..spec }).unwrap()
    };
    let ag = greedy(K::AllGather);
    assert!(ag.report.valid);
    let c = (256 * MIB) as f64 / 80.0;
    let alpha = 500.0;
    let whole = 16.0 * (alpha + c / 200.0) + alpha + c / 400.0;
    let piped = 16.0 * (alpha + c / 200.0) + 4.0 * alpha + c / 1600.0;
    let g = ag.stats.synthesis().unwrap().greedy.as_ref().unwrap();
    let p = g.pipelined.as_ref().expect("the all-gather is pipelined");
    assert_eq!(p.pieces, 4);
    assert!(close(p.before_ns, whole), "{} against {whole}", p.before_ns);
    assert!(close(ag.schedule.collective_time_ns.unwrap(), piped), "{}", ag.schedule.collective_time_ns.unwrap());
    assert_eq!(ag.schedule.collective.chunks(), 16);
    let json = serde_json::to_value(&ag.stats).unwrap();
    assert_eq!(json["pipelined"]["pieces"], 4, "{json}");
    // The run's chunking is one of those tried; the schedule's (16) is not.
    assert_eq!(json["pipelined"]["chunks_per_npu"], 4, "{json}");
    let tried = &ag.stats.synthesis().unwrap().chunks_per_npu_tried;
    assert!(tried.contains(&p.chunks_per_npu) && !tried.contains(&16), "{tried:?}");
    // Pieces on one link at one step: every runtime's export replays them in the simulator's
    // order of the link.
    for (what, s) in
        [("all-gather", &ag.schedule), ("its mirror, the reduce-scatter", &greedy(K::ReduceScatter).schedule)]
    {
        assert_eq!(crate::msccl::replays_if_msccl_runs_it(what, s), Ok(true));
        assert_eq!(crate::mscclpp::replays_if_mscclpp_runs_it(what, s), Ok(true));
        crate::chakra::replays_as_chakra(what, s);
    }
    let ar = run_request(&t, RequestSpec::new(CollectiveSpec::new(K::AllReduce, 256 * MIB))).unwrap();
    assert!(ar.report.valid);
    let ratio =
        ar.schedule.collective_time_ns.unwrap() / ar.report.lower_bounds.as_ref().unwrap().lower_bound_ns.unwrap();
    assert!(ratio <= 1.05, "all-reduce {ratio:.4}x its bound");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// On random fabrics, collectives and sizes, the pass on the greedy's schedule (pipelined
    /// already or not) or recursive doubling's (whose every step forwards what the last one
    /// received: on rail:2x4 and hier:ring2,fc4 at 4 MiB and up its all-reduce pipelines to
    /// 0.50–0.80× its time) returns only a valid schedule that is faster, timed as the
    /// simulator times it, at its pieces' chunking.
    #[test]
    fn a_pipelined_schedule_is_valid_and_faster(
        spec in prop::sample::select(vec!["torus:4x4", "mesh:3x5", "rail:2x4", "hier:ring2,fc4", "dragonfly:3:4", "mesh:4x4@bw=50,100;lat=500,1000", "dragonfly:4:5@bw=400,200"]),
        kind in prop::sample::select(vec![K::AllGather, K::ReduceScatter, K::AllReduce, K::Broadcast]),
        algorithm in prop::sample::select(vec!["greedy", "recursive-doubling"]),
        k in 1u32..4,
        size in prop::sample::select(vec![64u64 << 10, 4 * MIB, 64 * MIB]),
        seed in 0u64..1000,
    ) {
        let t = topo(spec);
        let mut spec = CollectiveSpec::new(kind, size);
        if algorithm == "greedy" {
            spec = spec.with_chunks_per_npu(k);
        }
        if kind == K::Broadcast {
            spec = spec.with_root(seed as usize % t.npus());
        }
        let options = engine::Options { seed: Some(seed), ..engine::Options::default() };
        let Ok(out) = run_request(&t, RequestSpec { algorithm: algorithm.parse().unwrap(), options, ..RequestSpec::new(spec) }) else { return Ok(()) };
        prop_assert!(out.report.valid);
        let s = out.schedule;
        let before = s.collective_time_ns.unwrap();
        let Some(p) = pipeline(&s, before, &|| false).unwrap() else { return Ok(()) };
        prop_assert!(p.time_ns < before);
        prop_assert_eq!(p.schedule.collective.chunks(), s.collective.chunks() * p.pieces);
        let (m, report) = engine::finalize(p.schedule).unwrap();
        prop_assert!(report.valid, "{:?}", report.violations);
        prop_assert!(close(m.collective_time_ns.unwrap(), p.time_ns));
    }
}
