//! All-to-all (and scatter, gather): the distance and cut bounds in closed form, the textbook
//! baselines (pairwise exchange, Bruck, dimension-ordered) against their step counts and
//! times, the routed planner's even split on a torus, and a property test that no schedule
//! beats the bounds.

use crate::common::*;
use ccsynth::baselines;
use ccsynth::bounds::lower_bounds;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::synth::routed;
use proptest::prelude::*;

const ALPHA: f64 = 500.0;
const BW: f64 = 100.0;

#[test]
fn distance_bound_in_closed_form_on_a_ring_and_tori() {
    // ring:8: from each NPU the others are 1, 1, 2, 2, 3, 3, 4 hops away (16 in all); 8 · 16
    // pair-hops of n/8 bytes over 16 links at 100 GB/s.
    let n = 1u64 << 20;
    let t = topo("ring:8");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    let want = 8.0 * 16.0 * (n as f64 / 8.0) / BW / 16.0;
    assert!(close(b.distance_ns.unwrap(), want), "{:?} vs {want}", b.distance_ns);
    assert!(close(b.lower_bound_ns.unwrap(), want));
    // The ingress bound sees one hop per chunk: 7 chunks over two links, 4/7 of it here.
    assert!(b.ingress_ns.unwrap() < b.distance_ns.unwrap());
    // torus:4x4: each dimension's ring of 4 adds 0 + 1 + 2 + 1 hops per coordinate, so the 16
    // destinations of an NPU are 32 hops in all; 16 · 32 pair-hops of n/16 bytes over 64 links.
    let t = topo("torus:4x4");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    let want = 16.0 * 32.0 * (n as f64 / 16.0) / BW / 64.0;
    assert!(close(b.distance_ns.unwrap(), want), "{:?} vs {want}", b.distance_ns);
    // torus:8x8 at 64 MiB: 4 hops on average, 64 · 64 · 4 pair-hops of 1 MiB over 256 links.
    let t = topo("torus:8x8");
    let n = 64u64 << 20;
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    let want = 64.0 * 64.0 * 4.0 * (1u64 << 20) as f64 / BW / 256.0;
    assert!(close(b.distance_ns.unwrap(), want));
    assert!(close(want, 671_088.64));
    // Chunks per pair do not change it.
    let k4 = lower_bounds(&t, &coll_spec(&t, CollectiveSpec::new(K::AllToAll, n).with_chunks_per_npu(4)));
    assert!(close(k4.distance_ns.unwrap(), want));
}

#[test]
fn cut_bound_sees_a_mesh_bisection_and_a_scatter_root() {
    // mesh:8x8: the 32 NPUs of the left half send 32 · 32 pairs of n/64 bytes over 8 links.
    let n = 64u64 << 20;
    let t = topo("mesh:8x8");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    let pair = n as f64 / 64.0;
    assert!(close(b.cut_ns.unwrap(), 32.0 * 32.0 * pair / (8.0 * BW)));
    // Manhattan distance 2 · 21/8 on average over 224 links: 3/4 of the cut bound.
    assert!(close(b.distance_ns.unwrap(), 64.0 * 64.0 * 2.0 * 2.625 * pair / BW / 224.0));
    assert!(close(b.cut_ns.unwrap() / b.distance_ns.unwrap(), 4.0 / 3.0));
    assert!(close(b.lower_bound_ns.unwrap(), b.cut_ns.unwrap()));
    // A scatter's root sends p − 1 blocks over its two links; the ingress bound sees one.
    let t = topo("ring:8");
    let n = 8000u64;
    let c = coll_spec(&t, CollectiveSpec::new(K::Scatter, n).with_root(3));
    let b = lower_bounds(&t, &c);
    assert!(close(b.cut_ns.unwrap(), 7.0 * 1000.0 / (2.0 * BW)));
    assert!(b.ingress_ns.unwrap() < b.cut_ns.unwrap());
    // Gather: the same into the root.
    let c = coll_spec(&t, CollectiveSpec::new(K::Gather, n).with_root(3));
    assert!(close(lower_bounds(&t, &c).cut_ns.unwrap(), 7.0 * 1000.0 / (2.0 * BW)));
    // All-gather keeps its own bounds.
    assert!(lower_bounds(&t, &coll(&t, K::AllGather, n)).distance_ns.is_none());
}

fn a2a(name: &str, spec: &str, n: u64) -> ccsynth::schedule::Schedule {
    let (s, r) = baseline(name, &topo(spec), CollectiveSpec::new(K::AllToAll, n))
        .unwrap_or_else(|e| panic!("{name} on {spec}: {e}"));
    assert!(r.valid, "{name} on {spec}");
    s
}

#[test]
fn bruck_takes_ceil_log2_p_steps() {
    for p in 2..=17usize {
        let want = (p as f64).log2().ceil() as u32;
        assert_eq!(baselines::bruck_steps_for_tests(p), want, "p={p}");
        let s = a2a("bruck", &format!("ring:{p}"), 64 * p as u64 * p as u64);
        assert_eq!(s.rounds(), want as usize, "p={p}");
        // Every rank sends one message per step.
        assert_eq!(s.transfers.len(), p * want as usize, "p={p}");
    }
    // On fc:8 every step is one message of half the buffer per NPU on its own link: three
    // steps of α + (p/2)·m/β.
    let n = 8u64 << 20;
    let s = a2a("bruck", "fc:8", n);
    let m = n as f64 / 8.0;
    assert!(close(s.collective_time_ns.unwrap(), 3.0 * (ALPHA + 4.0 * m / BW)));
}

#[test]
fn pairwise_exchange_takes_p_minus_1_steps_and_on_fc_one_message_time() {
    for p in [2usize, 5, 8] {
        let n = 1u64 << 20;
        let s = a2a("pairwise", &format!("fc:{p}"), n);
        assert_eq!(s.rounds(), p - 1);
        assert_eq!(s.transfers.len(), p * (p - 1));
        // Every pair has its own link and its data from the start: one message time.
        let m = n as f64 / p as f64;
        assert!(close(s.collective_time_ns.unwrap(), ALPHA + m / BW), "p={p}");
    }
}

#[test]
fn dimension_ordered_takes_one_phase_per_dimension_and_needs_a_grid() {
    let s = a2a("dimension-ordered", "torus:4x4x4", 1 << 20);
    assert_eq!(s.rounds(), 3);
    let s = a2a("dimension-ordered", "mesh:4x3", 1 << 20);
    assert_eq!(s.rounds(), 2);
    // On a ring (one dimension) it is direct along the ring: each message straight to its
    // destination, both ways round.
    let s = a2a("dimension-ordered", "ring:6", 6 << 10);
    assert_eq!(s.rounds(), 1);
    assert_eq!(s.transfers.len(), 30);
    let err = baseline("dimension-ordered", &topo("rail:2x4"), CollectiveSpec::new(K::AllToAll, 1 << 20))
        .expect_err("a rail is no grid");
    assert!(err.to_string().contains("mesh or torus"), "{err}");
    for name in ["pairwise", "bruck", "dimension-ordered"] {
        let list = baselines::list();
        let info = list.iter().find(|b| b.name == name).expect("listed");
        assert_eq!(info.collectives, vec![K::AllToAll]);
    }
}

#[test]
fn flow_bound_equals_the_hand_computed_split() {
    let n = 64u64 << 20;
    // rail:4x8: an intra-node pair has only its node switch, and every other pair crosses a
    // node switch and a rail switch in some order, so each GPU's node-switch links carry 7 + 21
    // pairs of n/32 (its rail links 3 + 21): 28 · n/32 at 100 GB/s, above the distance bound's
    // average of 26.
    let t = topo("rail:4x8");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    let pair = n as f64 / 32.0;
    assert!(close_to(b.flow_ns.unwrap(), 28.0 * pair / BW), "{b:?}");
    assert!(close_to(b.distance_ns.unwrap(), 26.0 * pair / BW), "{b:?}");
    assert!(close_to(b.lower_bound_ns.unwrap(), b.flow_ns.unwrap()));
    // dragonfly:4:5: the 16 pairs between two groups share their one global link (a detour
    // through a third group loads two global links instead of one).
    let t = topo("dragonfly:4:5");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    assert!(close_to(b.flow_ns.unwrap(), 16.0 * (n as f64 / 20.0) / BW), "{b:?}");
    // hier:ring2,fc4,switch4: 24 of an NPU's 31 destinations lie across the switch, and each
    // NPU has one link into it.
    let t = topo("hier:ring2,fc4,switch4");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    assert!(close_to(b.flow_ns.unwrap(), 24.0 * pair / BW), "{b:?}");
    // mesh:8x8: the bisection, as the cut bound says.
    let t = topo("mesh:8x8");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    assert!(close_to(b.flow_ns.unwrap(), b.cut_ns.unwrap()), "{b:?}");
    // On a torus of equal sides it is the distance bound, and not solved.
    let t = topo("torus:4x4");
    let b = lower_bounds(&t, &coll(&t, K::AllToAll, n));
    assert!(b.flow_ns.is_none() && b.notes.is_empty(), "{b:?}");
}

/// The flow bound is the solver's optimum shaded by a millionth.
fn close_to(a: f64, b: f64) -> bool {
    (a - b).abs() <= 2e-6 * a.abs().max(b.abs())
}

#[test]
fn routed_planner_spreads_a_torus_within_a_chunk_of_even() {
    // torus:4x4, two chunks per pair: the pairs two hops apart along a ring have two shortest
    // ways; spread, every link carries the distance bound's share, give or take a chunk.
    let t = topo("torus:4x4");
    let n = 1u64 << 20;
    let c = coll_spec(&t, CollectiveSpec::new(K::AllToAll, n).with_chunks_per_npu(2));
    let (s, _) = routed::synthesize(&t, &c, &[Some(1)], 3, &|| false).unwrap();
    assert!(ccsynth::validate::validate(&s).valid);
    let timing = ccsynth::sim::simulate(&s).unwrap();
    assert_eq!(timing.links.len(), 64);
    let even = 16.0 * 32.0 * (n as f64 / 16.0) / 64.0; // bytes per link
    let chunk = c.chunk_size_bytes;
    for l in &timing.links {
        assert!((l.bytes - even).abs() <= chunk + 1e-6, "link {}->{}: {} bytes, even {even}", l.src, l.dst, l.bytes);
    }
    // Only shortest paths: the bytes on the links are the distance bound's.
    let total: f64 = timing.links.iter().map(|l| l.bytes).sum();
    assert!(close(total, 64.0 * even));
}

#[test]
fn routed_planner_keeps_a_switchs_busiest_ports_busy_in_every_round() {
    // rail:4x8 at 32 MiB, one 1 MiB chunk a pair: every GPU's node-switch uplink carries 28 of
    // them (7 to its own node, 21 on their way to or from a rail), its rail uplink 24. A
    // message through a switch holds the sender's uplink and the receiver's downlink, so the
    // node switch is an all-to-all of 8 ports with four messages a pair: 28 rounds when every
    // round is a perfect matching (König), each 1 MiB at 100 GB/s plus two links' latency, and
    // no schedule of 1 MiB messages is faster. Filled first fit, item by item, it took 31 rounds
    // (356.1 µs). hier:ring2,fc4,switch4: 24 of each NPU's 31 chunks cross its one switch
    // uplink, 24 rounds (the last may be a faster direct link's).
    let msg = (1u64 << 20) as f64 / BW + 2.0 * ALPHA;
    for (spec, rounds) in [("rail:4x8", 28.0), ("hier:ring2,fc4,switch4", 24.0)] {
        let t = topo(spec);
        let c = coll_spec(&t, CollectiveSpec::new(K::AllToAll, 32 << 20).with_chunks_per_npu(1));
        for seed in 0..3 {
            let (s, _) = routed::synthesize(&t, &c, &[Some(1)], seed, &|| false).unwrap();
            assert!(ccsynth::validate::validate(&s).valid, "{spec} seed {seed}");
            let time = ccsynth::sim::simulate(&s).unwrap().collective_time_ns;
            let want = rounds * msg;
            assert!(time <= want * (1.0 + 1e-9), "{spec} seed {seed}: {time} ns, {rounds} rounds are {want}");
            if spec.starts_with("rail") {
                assert!(close_to(time, want), "{spec} seed {seed}: {time} ns, {rounds} rounds are {want}");
            }
        }
    }
}

#[test]
fn routed_planner_fills_its_messages_through_a_switch() {
    // hier:ring2,fc4,switch4 at 16 MiB: a chunk (512 KiB) takes 5.2 µs and a message through
    // the switch pays two latencies (1 µs) on top, so one message a chunk cannot come within
    // 1.15× of the flow bound (24 rounds of 6.2 µs: 1.19×). Two chunks a message, counted as
    // holding their links for two rounds, with half-full messages bidding half: 1.14×.
    let t = topo("hier:ring2,fc4,switch4");
    let c = coll_spec(&t, CollectiveSpec::new(K::AllToAll, 16 << 20).with_chunks_per_npu(1));
    let (s, _) = routed::synthesize(&t, &c, &routed::groups(&t, c.chunk_size_bytes), 0, &|| false).unwrap();
    assert!(ccsynth::validate::validate(&s).valid);
    let time = ccsynth::sim::simulate(&s).unwrap().collective_time_ns;
    let bound = lower_bounds(&t, &c).lower_bound_ns.unwrap();
    assert!(close_to(bound, 24.0 * (512u64 << 10) as f64 / BW), "{bound}");
    assert!(time <= 1.15 * bound, "{time} ns against the bound {bound}");
}

#[test]
fn routed_planner_routes_and_packs_at_once_on_a_large_torus() {
    // torus:8x8x8 at 16 MiB: a chunk (32 KiB) is under one α, so messages carry 32 of them, and
    // a 12-hop path pipelines through few, long messages. Routes fixed first and packed into
    // slots after left 5 of 37 slots idle on the busiest links: 208.6 µs, 1.24× the distance
    // bound. Each chunk taking the shortest path on which it arrives earliest, given the slots
    // taken before it, packs them within 1.15×.
    let t = topo("torus:8x8x8");
    let c = coll_spec(&t, CollectiveSpec::new(K::AllToAll, 16 << 20));
    let (s, _) = routed::synthesize(&t, &c, &routed::groups(&t, c.chunk_size_bytes), 0, &|| false).unwrap();
    let r = ccsynth::validate::validate(&s);
    assert!(r.valid, "{:?}", r.violations.first());
    let time = ccsynth::sim::simulate(&s).unwrap().collective_time_ns;
    let bound = lower_bounds(&t, &c).distance_ns.unwrap();
    assert!(close_to(bound, 167_772.16), "{bound}");
    assert!(time <= 1.15 * bound, "{time} ns against the distance bound {bound}");
}

#[test]
fn routed_planner_serves_every_kind_it_claims_on_many_fabrics() {
    for spec in ["ring:5", "torus:4x4", "mesh:3x4", "rail:2x4", "hier:ring2,switch4", "dragonfly:3:3", "hypercube:4"] {
        let t = topo(spec);
        for kind in [K::AllToAll, K::Scatter, K::Gather] {
            for n in [4096u64, 16 << 20] {
                let mut cs = CollectiveSpec::new(kind, n);
                if kind != K::AllToAll {
                    cs = cs.with_root(1);
                }
                let c = coll_spec(&t, cs);
                assert!(routed::applies(&c));
                let groups = routed::groups(&t, c.chunk_size_bytes);
                let (s, _) = routed::synthesize(&t, &c, &groups, 1, &|| false).unwrap();
                let r = ccsynth::validate::validate(&s);
                assert!(r.valid, "{spec} {kind:?} {n}: {:?}", r.violations.first());
                let time = ccsynth::sim::simulate(&s).unwrap().collective_time_ns;
                let bound = lower_bounds(&t, &c).lower_bound_ns.unwrap();
                assert!(time >= bound * (1.0 - 1e-9), "{spec} {kind:?} {n}: {time} < {bound}");
            }
        }
    }
    // A cancel stops it.
    let t = topo("torus:4x4");
    let c = coll(&t, K::AllToAll, 1 << 20);
    assert!(routed::synthesize(&t, &c, &[Some(1)], 1, &|| true).unwrap_err().is_cancelled());
}

#[test]
fn the_greedy_picks_the_routed_planner_for_a_large_all_to_all_on_a_torus() {
    let t = topo("torus:8x8");
    let spec = ccsynth::engine::RequestSpec {
        algorithm: "greedy".parse().unwrap(),
        ..ccsynth::engine::RequestSpec::new(CollectiveSpec::new(K::AllToAll, 64 << 20))
    };
    let out = run_request(&t, spec).unwrap();
    let bound = out.report.lower_bound_ns.unwrap();
    let time = out.schedule.collective_time_ns.unwrap();
    // Within 1.15× of the distance bound (the matcher alone: 1.34×).
    assert!(time <= 1.15 * bound, "{time} vs {bound}");
}

fn arb_fabric() -> impl Strategy<Value = String> {
    prop_oneof![
        (2usize..9).prop_map(|p| format!("ring:{p}")),
        (2usize..5, 2usize..5).prop_map(|(a, b)| format!("torus:{a}x{b}")),
        (2usize..5, 2usize..5).prop_map(|(a, b)| format!("mesh:{a}x{b}@bw=50,100;lat=300,700")),
        (2usize..7).prop_map(|p| format!("fc:{p}")),
        (1u32..5).prop_map(|d| format!("hypercube:{d}")),
        (2usize..4, 2usize..4).prop_map(|(n, g)| format!("rail:{n}x{g}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn no_all_to_all_beats_its_bounds(spec in arb_fabric(), size in 1u64..(64 << 20), k in 1u32..3) {
        let t = topo(&spec);
        let cs = CollectiveSpec::new(K::AllToAll, size.max(64)).with_chunks_per_npu(k);
        let c = coll_spec(&t, cs.clone());
        let bound = lower_bounds(&t, &c).lower_bound_ns.unwrap();
        let mut times = Vec::new();
        for name in ["direct", "pairwise", "bruck", "dimension-ordered", "pxn"] {
            if let Ok((s, r)) = baseline(name, &t, cs.clone()) {
                prop_assert!(r.valid, "{name} on {spec}");
                times.push((name, s.collective_time_ns.unwrap()));
            }
        }
        let (s, _) = routed::synthesize(&t, &c, &routed::groups(&t, c.chunk_size_bytes), 5, &|| false).unwrap();
        prop_assert!(ccsynth::validate::validate(&s).valid, "routed on {spec}");
        times.push(("routed", ccsynth::sim::simulate(&s).unwrap().collective_time_ns));
        for (name, time) in times {
            prop_assert!(time >= bound * (1.0 - 1e-9), "{name} on {spec}: {time} < {bound}");
        }
    }
}
