//! Translation in rounds (`synth::translate::rounds`, the greedy's `translation_rounds` mode):
//! a ring of four by hand, the α-β time in closed form on torus:4x4x8 (a link carries the
//! bound's ⌈k(N−1)/|D|⌉ chunks in as many messages as there are rounds), the schedule's price
//! known from the pattern, its indexed merge against the hashed one, the portfolio's answer on
//! unequal tori at their bound, and a property test over random tori.

use crate::common::*;
use ccsynth::collective::{Collective, CollectiveKind as K, CollectiveSpec};
use ccsynth::schedule::Schedule;
use ccsynth::synth::{self, PlanOptions, translate};
use ccsynth::topology::Topology;
use proptest::prelude::*;
use std::collections::HashMap;

fn opts() -> PlanOptions {
    PlanOptions { seed: 0, switch_model: Default::default(), discretization_ns: None }
}

/// The rounds schedule of `c` on `t`, and its pattern.
fn in_rounds(t: &Topology, c: &Collective, seed: u64) -> (Schedule, translate::Pattern) {
    let torus = translate::Torus::of(t).expect("a torus");
    assert!(translate::applies(&torus, c));
    let pattern = translate::rounds::search(&torus, c.spec.chunks() as usize, seed, &|| false).unwrap().unwrap();
    assert!(pattern.rounds);
    let s = synth::translated(t, c, &opts(), &torus, &pattern, &|| false).unwrap().0;
    (s, pattern)
}

/// Per step, the most chunks one message carries; and whether any link carries two messages
/// in one step.
fn per_step(s: &Schedule) -> (Vec<usize>, bool) {
    let steps = s.transfers.iter().map(|x| x.step as usize + 1).max().unwrap_or(0);
    let mut most = vec![0; steps];
    let mut seen: HashMap<(u32, u32, u32), usize> = HashMap::new();
    let mut twice = false;
    for x in &s.transfers {
        most[x.step as usize] = most[x.step as usize].max(x.chunks.len());
        let n = seen.entry((x.step, x.src, x.dst)).or_default();
        *n += 1;
        twice |= *n > 1;
    }
    (most, twice)
}

#[test]
fn a_ring_of_four_in_two_rounds() {
    // ring:4, two chunks per NPU, 1 MiB: round 0 sends a source's two chunks to each
    // neighbour in one message; round 1 brings one chunk on to the NPU opposite, from each
    // side. 2α + 3 chunks on a 100 GB/s link.
    let t = topo("torus:4");
    let c = coll_spec(&t, CollectiveSpec::new(K::AllGather, 1 << 20).with_chunks_per_npu(2));
    let (s, p) = in_rounds(&t, &c, 3);
    assert_eq!(p.steps, 2);
    let r = ccsynth::engine::check(&s);
    assert!(r.valid, "{:?}", r.violations.first());
    let (most, twice) = per_step(&s);
    assert_eq!((most, twice), (vec![2, 1], false));
    assert_eq!(s.transfers.len(), 16, "a message per link and round");
    let chunk = (1u64 << 20) as f64 / 8.0;
    let expected = 2.0 * 500.0 + 3.0 * chunk / 100.0;
    assert!(close(r.collective_time_ns.unwrap(), expected), "{:?} against {expected}", r.collective_time_ns);
}

#[test]
fn torus_4x4x8_takes_the_bounds_chunks_in_as_many_messages_as_rounds() {
    // Four chunks per NPU: each link carries ⌈4·127/6⌉ = 85 chunks per phase, in one message a
    // round; the time is the rounds' α plus those chunks, per phase (no reduce cost).
    let t = topo("torus:4x4x8");
    let size = 256u64 << 20;
    for (kind, phases) in [(K::AllGather, 1.0), (K::ReduceScatter, 1.0), (K::AllReduce, 2.0)] {
        let c = coll_spec(&t, CollectiveSpec::new(kind, size).with_chunks_per_npu(4));
        let (s, p) = in_rounds(&t, &c, 0);
        let r = ccsynth::engine::check(&s);
        assert!(r.valid, "{kind:?}: {:?}", r.violations.first());
        let (most, twice) = per_step(&s);
        assert!(!twice, "{kind:?}: a link carries one message a round");
        assert_eq!(most.iter().sum::<usize>() as f64, phases * 85.0, "{kind:?}: {most:?}");
        assert!(p.steps <= 9, "{kind:?}: {} rounds (the diameter is 8)", p.steps);
        let expected = phases * (p.steps as f64 * 500.0 + 85.0 * c.chunk_size_bytes / 100.0);
        let got = r.collective_time_ns.unwrap();
        assert!(close(got, expected), "{kind:?}: {got} ns, expected {expected} ns");
    }
}

#[test]
fn a_rounds_pattern_is_priced_at_its_schedules_busiest_link() {
    for spec in ["torus:4x4x8", "torus:4x2", "torus:3x5", "torus:6x6@lat=2000"] {
        let t = topo(spec);
        let link = t.links()[0].clone();
        let torus = translate::Torus::of(&t).expect("a torus");
        for (kind, k, gamma) in [(K::AllGather, 3u32, None), (K::ReduceScatter, 2, Some(0.01)), (K::AllReduce, 4, None)]
        {
            let mut cs = CollectiveSpec::new(kind, 3 << 20);
            cs.chunks_per_npu = Some(k);
            cs.gamma_ns_per_byte = gamma;
            let c = Collective::build(&cs, &t).unwrap();
            let pattern = translate::rounds::search(&torus, k as usize, 0, &|| false).unwrap().unwrap();
            let s = synth::translated(&t, &c, &opts(), &torus, &pattern, &|| false).unwrap().0;
            let built = ccsynth::sim::link_load_bound_ns(&s).expect("routes");
            let priced = translate::link_load_ns(&torus, &pattern, &c, &link);
            assert!((priced - built).abs() <= 1e-9 * built, "{spec} {kind:?} k={k}: priced {priced}, built {built}");
        }
    }
}

/// The rounds schedule's merge by (step, NPU, direction, operation) index gives what the
/// hashed merge (`flood::batch`) gives, message for message and in the same order, on the
/// schedule's transfers cut back into one chunk each (an all-reduce: copies and reductions; a
/// torus with a side of 2: one direction reaching both neighbours); and it declines a transfer
/// that is not one chunk between neighbours.
#[test]
fn the_indexed_merge_is_the_hashed_one() {
    use ccsynth::schedule::{Transfer, Transfers};
    for spec in ["torus:4x4x8", "torus:2x4", "torus:3x5"] {
        let t = topo(spec);
        let torus = translate::Torus::of(&t).unwrap();
        let c = coll_spec(&t, CollectiveSpec::new(K::AllReduce, 1 << 20).with_chunks_per_npu(3));
        let (s, _) = in_rounds(&t, &c, 1);
        let single: Transfers = s
            .transfers
            .iter()
            .flat_map(|x| x.chunks.iter().map(move |&ch| Transfer { chunks: vec![ch].into(), ..x.to_owned() }))
            .collect();
        let indexed = translate::rounds::batch(&torus, &single).expect("neighbour moves");
        let hashed = synth::flood::batch(&single);
        assert_eq!(indexed.len(), s.transfers.len(), "{spec}");
        assert!(indexed.iter().eq(hashed.iter()), "{spec}");
    }
    let t = topo("torus:4x4");
    let torus = translate::Torus::of(&t).unwrap();
    let far: Transfers = [Transfer::copy(0, 0, 5, vec![1u32])].into_iter().collect();
    assert!(translate::rounds::batch(&torus, &far).is_none(), "NPUs 0 and 5 are not neighbours");
}

/// `auto` on unequal tori, 256 MiB: all-gather and reduce-scatter within 1.02× the min-cut
/// bound, all-reduce within 1.05× the two-pass bound (issue 63's targets; the step patterns
/// gave torus:4x4x8 1.064 in each).
#[test]
fn auto_reaches_the_bound_on_unequal_tori() {
    for spec in ["torus:4x4x8", "torus:2x4x8"] {
        let t = topo(spec);
        for (kind, target) in [(K::AllGather, 1.02), (K::ReduceScatter, 1.02), (K::AllReduce, 1.05)] {
            let out = run_request(&t, ccsynth::engine::RequestSpec::new(CollectiveSpec::new(kind, 256 << 20))).unwrap();
            assert!(out.report.valid, "{spec} {kind:?}");
            let bound = out.report.lower_bounds.as_ref().and_then(|b| b.lower_bound_ns).unwrap();
            let ratio = out.schedule.collective_time_ns.unwrap() / bound;
            assert!((1.0..=target).contains(&ratio), "{spec} {kind:?}: {ratio}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random tori of 1 to 3 dimensions (sides 2 to 6), k in 1..=4, all-gather,
    /// reduce-scatter and all-reduce, with and without a reduce cost: the schedule validates,
    /// a link carries one message a round, the rounds' busiest messages add up to the bound's
    /// ⌈k(N−1)/|D|⌉ chunks per phase or at most 2 more (a link seldom waits for want of chunks
    /// to send; exact in all of 18,800 searches with seeds 0 to 19, not always:
    /// `rounds::tests`), and the time lies between the pattern's price and its rounds one after
    /// another.
    #[test]
    fn rounds_are_valid_and_carry_the_bound_on_random_tori(
        dims in proptest::collection::vec(2usize..7, 1..4),
        k in 1u32..5,
        kind in 0usize..3,
        seed in 0u64..1000,
        gamma in proptest::option::of(0.0f64..0.05),
    ) {
        let Some((spec, t, torus)) = random_torus(&dims) else { return Err(TestCaseError::reject("too small or not a torus")) };
        let kind = [K::AllGather, K::ReduceScatter, K::AllReduce][kind];
        let mut cs = CollectiveSpec::new(kind, 1 << 20).with_chunks_per_npu(k);
        cs.gamma_ns_per_byte = gamma;
        let c = coll_spec(&t, cs);
        let (s, p) = in_rounds(&t, &c, seed);
        let r = ccsynth::engine::check(&s);
        prop_assert!(r.valid, "{spec} {kind:?} k={k}: {:?}", r.violations.first());
        let (most, twice) = per_step(&s);
        prop_assert!(!twice);
        let phases = if kind == K::AllReduce { 2 } else { 1 };
        let bound = (k as usize * (torus.npus() - 1)).div_ceil(torus.directions());
        let carried = most.iter().sum::<usize>();
        prop_assert!((phases * bound..=phases * (bound + 2)).contains(&carried), "{} k={} carries {}", spec, k, carried);
        // Its time lies between the price (the busiest link's load) and the rounds taken one
        // after another: what the portfolio keeps and drops rounds runs by.
        let link = &t.links()[0];
        let (price, estimate) = (translate::link_load_ns(&torus, &p, &c, link), translate::rounds::estimate_ns(&torus, &p, &c, link));
        let time = r.collective_time_ns.unwrap();
        prop_assert!(price <= time * (1.0 + 1e-9) && time <= estimate * (1.0 + 1e-9), "{} {:?} k={}: {} {} {}", spec, kind, k, price, time, estimate);
    }
}
