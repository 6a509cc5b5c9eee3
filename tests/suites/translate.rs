//! Translation schedules on tori (`synth::translate`, the greedy's `translation` mode): the
//! step optimum of all-gather on 2D and 3D tori with one chunk per NPU (issue 14 point 5:
//! torus:8x8 in 16 steps, torus:6x6 in 9, where the matcher takes 17 and 10), the α-β time in
//! closed form, one chunk per link per step, reduce-scatter and all-reduce by inversion under
//! the no-double-counting rule, where it does not apply, and a property test over random tori.

use crate::common::*;
use ccsynth::collective::{Collective, CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, Options, RequestSpec};
use ccsynth::schedule::Schedule;
use ccsynth::synth::{self, PlanOptions, translate};
use ccsynth::topology::Topology;
use proptest::prelude::*;
use std::collections::HashSet;

const GIB: u64 = 1 << 30;

fn opts() -> PlanOptions {
    PlanOptions { seed: 0, switch_model: Default::default(), discretization_ns: None }
}

/// The translation schedule of `c` on `t`, and its pattern's steps.
fn translated(t: &Topology, c: &Collective) -> (Schedule, u32) {
    let torus = translate::Torus::of(t).expect("a torus");
    assert!(translate::applies(&torus, c));
    let pattern = translate::search(&torus, c.spec.chunks() as usize, 0, &|| false).unwrap();
    let s = synth::translated(t, c, &opts(), &torus, &pattern, &|| false).unwrap().0;
    (s, pattern.steps)
}

/// `--algo greedy --chunks-per-npu k --seeds 1` through the engine's front door.
fn greedy(t: &Topology, kind: K, size: u64, k: u32) -> engine::Output {
    let rs = RequestSpec {
        algorithm: "greedy".parse().unwrap(),
        options: Options { chunks_per_npu: Some(k), seeds: Some(1), ..Options::default() },
        ..RequestSpec::new(CollectiveSpec::new(kind, size))
    };
    let req = engine::Request::new(t.clone(), rs, &engine::Limits::default()).unwrap();
    engine::run(&req, engine::Control::none()).unwrap()
}

/// α + chunk / β on the generators' default links (500 ns, 100 GB/s) unless given.
fn step_ns(chunk_bytes: f64, alpha_ns: f64, gb_per_s: f64) -> f64 {
    alpha_ns + chunk_bytes / gb_per_s
}

#[test]
fn all_gather_reaches_the_step_optimum_on_tori() {
    // ⌈(N−1)/|D|⌉ steps: every NPU receives N−1 chunks over |D| links, one per link per step.
    for (spec, steps, matcher_steps) in
        [("torus:8x8", 16u32, 17usize), ("torus:6x6", 9, 10), ("torus:4x4x4", 11, 12), ("torus:4x4", 4, 5)]
    {
        let t = topo(spec);
        let c = coll_spec(&t, CollectiveSpec::new(K::AllGather, GIB).with_chunks_per_npu(1));
        let (s, pattern_steps) = translated(&t, &c);
        let r = engine::check(&s);
        assert!(r.valid, "{spec}: {:?}", r.violations.first());
        assert_eq!((r.rounds, pattern_steps), (steps as usize, steps), "{spec}");
        assert_eq!(translate::Torus::of(&t).unwrap().bound(1), steps, "{spec}");
        let chunk = GIB as f64 / t.npus() as f64;
        let expected = steps as f64 * step_ns(chunk, 500.0, 100.0);
        let got = r.collective_time_ns.unwrap();
        assert!(close(got, expected), "{spec}: {got} ns, expected {expected} ns");
        // Through the engine: a translation (the step pattern, or the rounds pattern where
        // paying α once a round is faster), never slower than the step optimum; the matcher is
        // not run where translation reaches the bound: it cannot do better.
        let out = greedy(&t, K::AllGather, GIB, 1);
        let st = out.stats.synthesis().unwrap();
        assert!(out.report.valid, "{spec}: {:?}", out.report.violations.first());
        assert!(matches!(st.greedy_mode(), Some("translation" | "translation_rounds")), "{spec}");
        assert!(out.schedule.collective_time_ns.unwrap() <= got * (1.0 + 1e-12), "{spec}");
        let modes = &st.greedy.as_ref().unwrap().modes_tried;
        assert!(!modes.contains(&"matching"), "{spec}: {modes:?}");
        // The matcher alone, for the record of what translation gains.
        let m = synth::greedy(&t, &c, &opts(), &|| false).unwrap().0;
        assert_eq!(engine::check(&m).rounds, matcher_steps, "{spec}: the matcher's steps");
    }
}

#[test]
fn every_step_moves_one_chunk_per_link_at_the_bound() {
    for (spec, k) in [("torus:8x8", 1u32), ("torus:6x6", 2), ("torus:4x4x4", 1), ("hypercube:4", 3), ("ring:9", 2)] {
        let t = topo(spec);
        let c = coll_spec(&t, CollectiveSpec::new(K::AllGather, 1 << 20).with_chunks_per_npu(k));
        let (s, steps) = translated(&t, &c);
        let r = engine::check(&s);
        assert!(r.valid, "{spec}: {:?}", r.violations.first());
        assert_eq!(r.rounds, steps as usize, "{spec}");
        assert_eq!(steps, translate::Torus::of(&t).unwrap().bound(k as usize), "{spec} k={k}");
        let mut used = HashSet::new();
        for x in &s.transfers {
            assert_eq!(x.chunks.len(), 1, "{spec}: one chunk per transfer");
            assert!(x.path.is_none(), "{spec}: neighbours only");
            assert!(used.insert((x.step, x.src, x.dst)), "{spec}: link {}->{} twice in step {}", x.src, x.dst, x.step);
        }
        // Every chunk reaches every other NPU exactly once.
        let p = t.npus();
        assert_eq!(s.transfers.len(), p * (p - 1) * k as usize, "{spec}");
        // Links idle for fewer than one step's worth of link-steps in all: the schedule is
        // at the bound of one chunk per link per step.
        let capacity = steps as usize * t.links().len();
        assert!(
            capacity - s.transfers.len() < t.links().len(),
            "{spec}: {capacity} link-steps for {}",
            s.transfers.len()
        );
    }
}

#[test]
fn reduce_scatter_and_all_reduce_are_the_pattern_reversed_then_forward() {
    // torus:8x8 at 1 GiB: reduce-scatter in 16 steps, all-reduce in 32, each step α plus a
    // 16 MiB chunk on a 100 GB/s link, every contribution reduced once.
    let t = topo("torus:8x8");
    let chunk = GIB as f64 / 64.0;
    for (kind, steps) in [(K::ReduceScatter, 16usize), (K::AllReduce, 32)] {
        let c = coll_spec(&t, CollectiveSpec::new(kind, GIB).with_chunks_per_npu(1));
        let r = engine::check(&translated(&t, &c).0);
        assert!(r.valid, "{kind:?}: {:?}", r.violations.first());
        assert_eq!(r.rounds, steps, "{kind:?}");
        let expected = steps as f64 * step_ns(chunk, 500.0, 100.0);
        assert!(close(r.collective_time_ns.unwrap(), expected), "{kind:?}");
        // The engine's greedy is a translation at least as fast.
        let out = greedy(&t, kind, GIB, 1);
        assert!(out.report.valid, "{kind:?}");
        assert!(out.stats.synthesis().unwrap().greedy_mode().is_some_and(|m| m.starts_with("translation")));
        assert!(out.schedule.collective_time_ns.unwrap() <= expected * (1.0 + 1e-12), "{kind:?}");
    }
    // The all-reduce sits within 2% of the two-pass bandwidth bound 2(p−1)/p · size / 400 GB/s.
    let ar = greedy(&t, K::AllReduce, GIB, 1);
    let two_pass = ar.report.lower_bounds.as_ref().and_then(|b| b.two_pass_ns).unwrap();
    let ratio = ar.schedule.collective_time_ns.unwrap() / two_pass;
    assert!((1.0..1.02).contains(&ratio), "ratio to the two-pass bound {ratio}");
    // A reduction copied once too often is a double count (the rule the inversion respects).
    let c = coll_spec(&t, CollectiveSpec::new(K::AllReduce, 1 << 20).with_chunks_per_npu(1));
    let (mut s, _) = translated(&t, &c);
    let first_reduce = s.transfers.iter().position(|x| x.op == ccsynth::schedule::Op::Reduce).unwrap();
    let mut again = s.transfers.at(first_reduce).to_owned();
    again.step = s.transfers.iter().map(|x| x.step).max().unwrap() + 1;
    s.transfers.push(again);
    let r = engine::check(&s);
    assert!(!r.valid);
}

#[test]
fn translation_serves_only_whole_uniform_tori() {
    assert!(translate::Torus::of(&topo("mesh:4x4")).is_none(), "a mesh is not vertex-transitive");
    assert!(translate::Torus::of(&topo("torus:4x4@bw=50,100")).is_none(), "unequal links");
    assert!(translate::Torus::of(&topo("fc:8")).is_none(), "not a grid");
    let t = topo("torus:4x4");
    let torus = translate::Torus::of(&t).unwrap();
    assert_eq!((torus.npus(), torus.directions()), (16, 4));
    assert_eq!(translate::Torus::of(&topo("hypercube:4")).unwrap().directions(), 4);
    assert_eq!(translate::Torus::of(&topo("ring:5")).unwrap().directions(), 2);
    let sub = coll_spec(&t, CollectiveSpec { group: Some((0..8).collect()), ..CollectiveSpec::new(K::AllGather, 64) });
    assert!(!translate::applies(&torus, &sub), "a subgroup");
    for kind in [K::Broadcast, K::AllToAll] {
        let mut spec = CollectiveSpec::new(kind, 64);
        if kind.needs_root() {
            spec = spec.with_root(0);
        }
        assert!(!translate::applies(&torus, &coll_spec(&t, spec)), "{kind:?}");
    }
    // Where it does not apply, the greedy still runs the matcher.
    let out = greedy(&topo("mesh:4x4"), K::AllGather, GIB, 1);
    let st = out.stats.synthesis().unwrap();
    let modes = &st.greedy.as_ref().unwrap().modes_tried;
    assert!(modes.contains(&"matching") && !modes.contains(&"translation"), "{modes:?}");
}

#[test]
fn the_contribution_flood_is_not_built_where_its_bytes_cannot_pay() {
    let t = topo("torus:4x4");
    let at = |size| synth::flood::contributions_pay(&t, &coll(&t, K::AllReduce, size));
    assert!(at(32) && at(32 << 10));
    assert!(!at(2 << 20) && !at(GIB));
    // Where it won the size sweep: mesh:4x4 (heterogeneous) at 32 KiB.
    let m = topo("mesh:4x4@bw=50,100;lat=500,1000");
    assert!(synth::flood::contributions_pay(&m, &coll(&m, K::AllReduce, 32 << 10)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random tori of 1 to 3 dimensions (sides 2 to 6), k in 1..=3, all-gather, reduce-scatter
    /// and all-reduce: the schedule validates, takes the pattern's steps per phase, and the
    /// pattern reaches ⌈k(N−1)/|D|⌉ (or the diameter).
    #[test]
    fn translation_is_valid_and_step_optimal_on_random_tori(
        dims in proptest::collection::vec(2usize..7, 1..4),
        k in 1u32..4,
        kind in 0usize..3,
    ) {
        let Some((spec, t, torus)) = random_torus(&dims) else { return Err(TestCaseError::reject("too small or not a torus")) };
        let kind = [K::AllGather, K::ReduceScatter, K::AllReduce][kind];
        let c = coll_spec(&t, CollectiveSpec::new(kind, 1 << 20).with_chunks_per_npu(k));
        let (s, steps) = translated(&t, &c);
        let r = engine::check(&s);
        prop_assert!(r.valid, "{spec} {kind:?} k={k}: {:?}", r.violations.first());
        let phases = if kind == K::AllReduce { 2 } else { 1 };
        prop_assert_eq!(r.rounds, phases * steps as usize);
        prop_assert_eq!(steps, torus.bound(k as usize), "{} k={}", spec, k);
    }
}

/// A translation schedule's price, worked out from its pattern before it is built
/// (`translate::link_load_ns`), is exactly the busiest link's load of the schedule once built
/// (`sim::link_load_bound_ns`): so it is a lower bound on the schedule's time, and the
/// portfolio may skip a pattern priced above a schedule it already has. Tori with a side of 2
/// (one direction per dimension), 2D and 3D, every phase mix, with and without a reduce cost.
#[test]
fn a_pattern_is_priced_at_its_schedules_busiest_link() {
    for spec in ["torus:8x8", "torus:4x2", "torus:4x4x4", "torus:6x6@lat=2000", "torus:3x5"] {
        let t = topo(spec);
        let link = t.links()[0].clone();
        let torus = translate::Torus::of(&t).expect("a torus");
        for (kind, k, gamma) in [
            (K::AllGather, 1u32, None),
            (K::AllGather, 2, None),
            (K::ReduceScatter, 1, Some(0.01)),
            (K::AllReduce, 1, None),
            (K::AllReduce, 2, Some(0.02)),
        ] {
            let mut cs = CollectiveSpec::new(kind, 3 << 20);
            cs.chunks_per_npu = Some(k);
            cs.gamma_ns_per_byte = gamma;
            let c = Collective::build(&cs, &t).unwrap();
            let pattern = translate::search(&torus, k as usize, 0, &|| false).unwrap();
            let s = synth::translated(&t, &c, &opts(), &torus, &pattern, &|| false).unwrap().0;
            let built = ccsynth::sim::link_load_bound_ns(&s).expect("routes");
            let priced = translate::link_load_ns(&torus, &pattern, &c, &link);
            assert!((priced - built).abs() <= 1e-9 * built, "{spec} {kind:?} k={k}: priced {priced}, built {built}");
            assert!(priced > 0.0);
        }
    }
}
