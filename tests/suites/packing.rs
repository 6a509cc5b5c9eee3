//! The tree packing (`synth::packing`): its rate against the min-cut bound, exactly on small
//! cases computed by hand (direct links and through switches) and on random graphs, switches
//! among them, against `bounds::min_cut`; the trees spanning and within their links; its
//! schedules valid and no faster than the bound.

use crate::common::*;
use ccsynth::bounds::min_cut;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::synth::packing::{Packing, Packings, packing, produce};
use ccsynth::topology::{LinkInput, Topology, TopologyInput};
use proptest::prelude::*;

fn all(t: &Topology) -> (Vec<usize>, Vec<bool>) {
    ((0..t.npus()).collect(), vec![true; t.npus()])
}

/// Every tree spans the group from its root, each NPU's arc in a route from its parent over
/// the topology's links (through switches alone between its ends), and no link carries more
/// trees than its capacity at the packing's time, ⌊τ·k·b⌋.
fn check_trees(t: &Topology, p: &Packing) {
    let n = t.npus();
    let mut on: std::collections::HashMap<(usize, usize), u32> = Default::default();
    for ((parent, arcs), &root) in p.parents.iter().zip(&p.arcs).zip(&p.tree_roots) {
        assert_eq!(parent[root], u32::MAX, "the root has no parent");
        for v in (0..n).filter(|&v| v != root) {
            let route = &p.routes[arcs[v] as usize];
            assert_eq!((route[0], route[route.len() - 1]), (parent[v] as usize, v), "NPU {v}'s arc");
            assert!(route[1..route.len() - 1].iter().all(|&w| t.is_switch(w)), "{route:?} relays at switches alone");
            for w in route.windows(2) {
                assert!(t.link(w[0], w[1]).is_some(), "{} -> {} is a link", w[0], w[1]);
                *on.entry((w[0], w[1])).or_default() += 1;
            }
            let (mut u, mut hops) = (v, 0);
            while u != root {
                u = parent[u] as usize;
                hops += 1;
                assert!(hops <= n, "NPU {v} reaches its tree's root");
            }
        }
    }
    for (&(u, v), &trees) in &on {
        let cap: f64 = t
            .links()
            .iter()
            .filter(|l| l.src == u && l.dst == v)
            .map(|l| (p.ns_per_byte * p.k as f64 * l.bandwidth_gb_per_s * (1.0 + 1e-9)).floor())
            .sum();
        assert!(trees as f64 <= cap, "{u} -> {v}: {trees} trees over a capacity of {cap}");
    }
}

/// By hand, links of 100 GB/s (100 bytes a ns): on ring:8 the seven NPUs but one send it their
/// shards over its two links, 7/200 ns a byte, and two trees per root fit exactly (seven a
/// link); on torus:2x2 (a ring of four) 3/200, exactly at two trees per root, while one tree per
/// root needs two a link (2/100: 1.33× the bound); a broadcast from NPU 0 of torus:4x4 leaves
/// over its four links, 1/400, exactly at four trees (at three, one a link: 1/300).
#[test]
fn the_packing_meets_the_bound_exactly_on_small_cases() {
    let cases: [(&str, Option<usize>, usize, f64, f64); 5] = [
        ("ring:8", None, 2, 7.0 / 200.0, 7.0 / 200.0),
        ("torus:2x2", None, 2, 3.0 / 200.0, 3.0 / 200.0),
        ("torus:2x2", None, 1, 3.0 / 200.0, 2.0 / 100.0),
        ("torus:4x4", Some(0), 4, 1.0 / 400.0, 1.0 / 400.0),
        ("torus:4x4", Some(0), 3, 1.0 / 400.0, 1.0 / 300.0),
    ];
    for (spec, root, k, optimal, got) in cases {
        let (t, p) = packed_by_hand(spec, root, k, optimal, got);
        assert_eq!(p.parents.len(), k * root.map_or(t.npus(), |_| 1));
    }
}

/// The packing of `spec` (an all-gather, or a broadcast from `root`) at `k` trees per root,
/// its bound `optimal` and its rate `got` as computed by hand, its trees checked.
fn packed_by_hand(spec: &str, root: Option<usize>, k: usize, optimal: f64, got: f64) -> (Topology, Packing) {
    let t = topo(spec);
    let (group, mut roots) = all(&t);
    if let Some(r) = root {
        roots = (0..t.npus()).map(|v| v == r).collect();
    }
    let p = packing(&t, &group, &roots, k, &|| false).unwrap().expect("served");
    assert!(close(p.optimal_ns_per_byte, optimal), "{spec} k={k}: bound {}", p.optimal_ns_per_byte);
    assert!(close(p.ns_per_byte, got), "{spec} k={k}: {} against {got}", p.ns_per_byte);
    check_trees(&t, &p);
    (t, p)
}

/// By hand, through switches (links of 100 GB/s): on a star of four NPUs round one switch each
/// NPU takes the other three shards over its one link, 3/100 ns a byte, exactly at one tree per
/// root (three a link, one to each other NPU); a broadcast from NPU 0 of a star of eight leaves
/// over the root's one link, 1/100, exactly at one tree (a chain through the switch); on
/// hier:ring2,fc4,switch4 each NPU takes 31 shards over five links (a pair link, three inside
/// its group of four, one to its switch), 31/500, exactly at five trees per root, and at one
/// tree a link's share rounds up to seven trees: 7/100.
#[test]
fn the_packing_meets_the_bound_through_switches() {
    let cases: [(&str, Option<usize>, usize, f64, f64); 5] = [
        ("switch:4", None, 1, 3.0 / 100.0, 3.0 / 100.0),
        ("switch:4", None, 2, 3.0 / 100.0, 3.0 / 100.0),
        ("switch:8", Some(0), 1, 1.0 / 100.0, 1.0 / 100.0),
        ("hier:ring2,fc4,switch4", None, 5, 31.0 / 500.0, 31.0 / 500.0),
        ("hier:ring2,fc4,switch4", None, 1, 31.0 / 500.0, 7.0 / 100.0),
    ];
    for (spec, root, k, optimal, got) in cases {
        let (t, p) = packed_by_hand(spec, root, k, optimal, got);
        assert!(t.switches() > 0);
        assert!(p.routes.iter().any(|r| r.len() > 2), "{spec}: some arc crosses a switch");
    }
}

/// Its schedules (an all-gather and a broadcast, several trees per root, chunks pipelined down
/// them, over direct links and through switches) are valid, none beats its lower bound, and
/// each passes the conformance body (read back, exported and replayed).
#[test]
fn its_schedules_are_valid() {
    for (spec, kind, chunks, k) in [
        ("torus:4x4", K::AllGather, 2, 2),
        ("ring:8", K::AllGather, 4, 3),
        ("torus:4x4", K::Broadcast, 16, 4),
        ("mesh:3x3", K::Broadcast, 8, 2),
        ("switch:4", K::AllGather, 2, 1),
        ("hier:ring2,fc4,switch4", K::AllGather, 5, 5),
        ("rail:4x8", K::Broadcast, 8, 2),
        ("dragonfly:8:9", K::AllGather, 1, 1),
    ] {
        let t = topo(spec);
        let mut cs = CollectiveSpec::new(kind, 16 << 20).with_chunks_per_npu(chunks);
        if kind == K::Broadcast {
            cs = cs.with_root(0);
        }
        let c = coll_spec(&t, cs);
        let (s, _) = produce(&t, &c, k, 0, &Packings::default(), &|| false).unwrap();
        let report = ccsynth::validate::validate(&s);
        assert!(report.valid, "{spec} {kind:?}: {:?}", report.violations);
        let time = ccsynth::sim::simulate(&s).unwrap().collective_time_ns;
        let b = ccsynth::bounds::lower_bounds(&t, &c);
        let bound = [b.ingress_ns, b.latency_ns, b.min_cut_ns].into_iter().flatten().fold(0.0, f64::max);
        assert!(bound > 0.0);
        assert!(time >= bound * (1.0 - 1e-9), "{spec} {kind:?}: {time} below {bound}");
        let mut s = s;
        s.collective_time_ns = Some(time);
        crate::conformance::conform(&format!("packing k={k} on {spec}, {kind:?}"), &s);
    }
}

/// Random digraphs of 2–6 NPUs, links of 10–40 GB/s, and up to two switches, each linked both
/// ways at one speed to some of the NPUs (a switch's links come in pairs, as every generated
/// fabric's do) and to the other switch or not.
fn arb_fabric() -> impl Strategy<Value = Topology> {
    (2usize..7, 0usize..3).prop_flat_map(|(npus, switches)| {
        let pairs: Vec<(usize, usize)> =
            (0..npus).flat_map(|a| (0..npus).map(move |b| (a, b))).filter(|(a, b)| a != b).collect();
        let n = pairs.len();
        let ports: Vec<(usize, usize)> = (npus..npus + switches)
            .flat_map(|w| (0..npus).map(move |v| (v, w)))
            .chain((switches == 2).then_some((npus, npus + 1)))
            .collect();
        let m = ports.len();
        let links = (
            proptest::collection::vec((any::<bool>(), 1u32..5), n),
            proptest::collection::vec((any::<bool>(), 1u32..5), m),
        );
        (Just((npus, switches)), links, Just((pairs, ports))).prop_filter_map(
            "a switch with no link",
            |((npus, switches), (pick, port_pick), (pairs, ports))| {
                let link = |src, dst, bw: u32| LinkInput {
                    src,
                    dst,
                    latency_ns: Some(1.0),
                    bandwidth_gb_per_s: Some(bw as f64 * 10.0),
                    bidirectional: false,
                };
                let mut links: Vec<LinkInput> = pairs
                    .iter()
                    .zip(pick)
                    .filter(|(_, (on, _))| *on)
                    .map(|(&(src, dst), (_, bw))| link(src, dst, bw))
                    .collect();
                for (&(a, b), (on, bw)) in ports.iter().zip(port_pick) {
                    if on {
                        links.extend([link(a, b, bw), link(b, a, bw)]);
                    }
                }
                Topology::from_input(TopologyInput { npus, switches, links, ..Default::default() }).ok()
            },
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    /// The packing's bound is `bounds::min_cut`'s; its trees span within their links; at the
    /// trees per root that make every link's share whole (the critical cut's bandwidth in
    /// 10 GB/s units) its rate is the bound exactly, and at one to three trees it is never
    /// below the bound nor above the bound with each link's share rounded up.
    #[test]
    fn the_packed_rate_is_the_max_flow_bound(t in arb_fabric()) {
        let (group, roots) = all(&t);
        let n = group.len();
        let bound = min_cut(&t, &group, n as f64).unwrap();
        let p1 = packing(&t, &group, &roots, 1, &|| false).unwrap();
        let (Some(bound), Some(p1)) = (bound, p1) else {
            prop_assert!(bound.is_none(), "the packing serves every fabric the bound does");
            return Ok(());
        };
        prop_assert!(close(p1.optimal_ns_per_byte, bound), "{} against {bound}", p1.optimal_ns_per_byte);
        // τ* = |S| / B⁺(S) with B⁺ a multiple of 10: k = B⁺ / 10 makes every share whole.
        let whole = (1..=n).map(|s| s as f64 / (10.0 * bound)).find(|j| (j - j.round()).abs() < 1e-6);
        if let Some(k) = whole.map(|j| j.round() as usize).filter(|&k| k <= 12) {
            let p = packing(&t, &group, &roots, k, &|| false).unwrap().unwrap();
            prop_assert!(close(p.ns_per_byte, bound), "k={k}: {} against {bound}", p.ns_per_byte);
            check_trees(&t, &p);
        }
        for k in 1..=3usize {
            let p = packing(&t, &group, &roots, k, &|| false).unwrap().unwrap();
            let up = t.links().iter().map(|l| {
                let b = l.bandwidth_gb_per_s;
                (bound * k as f64 * b - 1e-9).ceil() / (k as f64 * b)
            }).fold(bound, f64::max);
            prop_assert!(p.ns_per_byte >= bound * (1.0 - 1e-9) && p.ns_per_byte <= up * (1.0 + 1e-9),
                "k={k}: {} outside [{bound}, {up}]", p.ns_per_byte);
            check_trees(&t, &p);
        }
    }
}

/// With default options the all-gather on dragonfly:8:9 at 128 MiB is the packing's (one tree
/// per root, the roots' trees grown an arc each in turn): nine message times of a shard, as the
/// hierarchical schedule takes (each NPU takes 71 shards over 8 links: 9 on some link), 1.041×
/// the min-cut bound where the matcher alone gave 1.185× and the trees grown root by root
/// 1.128×; the reduce-scatter mirrors it.
#[test]
fn the_packing_wins_dragonfly_8_9_by_default() {
    let t = topo("dragonfly:8:9");
    let shard_ns = 500.0 + (128u64 << 20) as f64 / 72.0 / 100.0;
    for kind in [K::AllGather, K::ReduceScatter] {
        let out = run_request(&t, ccsynth::engine::RequestSpec::new(CollectiveSpec::new(kind, 128 << 20))).unwrap();
        assert!(out.report.valid);
        let time = out.schedule.collective_time_ns.unwrap();
        assert!((time - 9.0 * shard_ns).abs() < 1e-6 * time, "{kind:?}: {time} ns, {} shards", time / shard_ns);
    }
}
