//! Slow links (issue 63, point 4): a degraded link stays in the topology at its new speed, and
//! every mistake in saying so is named; the repair moves traffic off it only where a detour is
//! less busy; a regeneration after one stays near the intact schedule.

use crate::common::*;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, Options, RequestSpec};
use ccsynth::schedule::Schedule;
use ccsynth::synth::repair;
use ccsynth::topology::{DegradedLink, Failures, Topology};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn slow(link: [usize; 2], bandwidth_gb_per_s: Option<f64>, latency_ns: Option<f64>) -> DegradedLink {
    DegradedLink { link, bandwidth_gb_per_s, latency_ns }
}

fn degraded(links: Vec<DegradedLink>) -> Failures {
    Failures { degraded_links: links, ..Failures::default() }
}

/// (bandwidth, latency) of `u -> v`.
fn params(t: &Topology, u: usize, v: usize) -> (f64, f64) {
    let l = t.link(u, v).unwrap_or_else(|| panic!("no link {u}->{v}"));
    (l.bandwidth_gb_per_s, l.latency_ns)
}

#[test]
fn a_degraded_link_stays_at_its_new_speed() {
    let t = topo("torus:4x4");
    let d = t.with_failures(&degraded(vec![slow([0, 1], Some(25.0), None)])).unwrap();
    assert_eq!(d.links().len(), t.links().len(), "nothing is removed");
    assert_eq!((params(&d, 0, 1), params(&d, 1, 0)), ((25.0, 500.0), (25.0, 500.0)));
    let others = d.links().iter().filter(|l| ![(0, 1), (1, 0)].contains(&(l.src, l.dst)));
    assert!(others.into_iter().all(|l| (l.bandwidth_gb_per_s, l.latency_ns) == (100.0, 500.0)));
    // 1 MB over it: 500 ns and 1e6 / 25 ns.
    assert!(close(d.link(0, 1).unwrap().time_ns(1e6), 40_500.0));
    // Directed: one direction; latency alone; both.
    let f = Failures { directed: true, ..degraded(vec![slow([0, 1], None, Some(2000.0))]) };
    let d = t.with_failures(&f).unwrap();
    assert_eq!((params(&d, 0, 1), params(&d, 1, 0)), ((100.0, 2000.0), (100.0, 500.0)));
    let d = t.with_failures(&degraded(vec![slow([5, 6], Some(50.0), Some(700.0))])).unwrap();
    assert_eq!(params(&d, 6, 5), (50.0, 700.0));
    // The change as a regeneration reports it: each direction, before and after.
    let changes = d.changed_links(&t);
    assert_eq!(changes.len(), 2);
    assert_eq!(
        (changes[0].src, changes[0].dst, changes[0].bandwidth_gb_per_s, changes[0].was_bandwidth_gb_per_s),
        (5, 6, 50.0, 100.0)
    );
    assert_eq!((changes[1].src, changes[1].latency_ns, changes[1].was_latency_ns), (6, 700.0, 500.0));
    assert!(t.changed_links(&t).is_empty());
    // With failed links and NPUs beside them.
    let f = Failures {
        links: vec![[0, 1]],
        npus: vec![10],
        degraded_links: vec![slow([1, 2], Some(10.0), None)],
        directed: false,
    };
    let d = t.with_failures(&f).unwrap();
    assert!(d.link(0, 1).is_none() && d.is_failed(10));
    assert_eq!(params(&d, 2, 1), (10.0, 500.0));
}

#[test]
fn failures_read_and_write_degraded_links_as_json() {
    let f: Failures =
        serde_json::from_str(r#"{"links": [[0, 1]], "degraded_links": [{"link": [9, 10], "bandwidth_gb_per_s": 25}]}"#)
            .unwrap();
    assert_eq!(f.degraded_links, vec![slow([9, 10], Some(25.0), None)]);
    let text = serde_json::to_string(&f).unwrap();
    assert!(text.contains(r#""degraded_links":[{"link":[9,10],"bandwidth_gb_per_s":25.0}]"#), "{text}");
    // Without any, the document is written as before (stored failures keep their form).
    let plain = serde_json::to_string(&Failures { links: vec![[0, 1]], ..Failures::default() }).unwrap();
    assert_eq!(plain, r#"{"links":[[0,1]],"npus":[],"directed":false}"#);
    for bad in [
        r#"{"degraded_links": [{"link": [9, 10], "bw": 25}]}"#,
        r#"{"degraded_links": [[[9, 10], 25]]}"#,
        r#"{"degraded_links": [{"bandwidth_gb_per_s": 25}]}"#,
    ] {
        assert!(serde_json::from_str::<Failures>(bad).is_err(), "{bad}");
    }
}

/// Each mistake is one error at the entry's field, saying what the topology has.
#[test]
fn a_degradation_that_is_not_one_is_named() {
    let t = topo("torus:4x4");
    let cases: Vec<(Failures, &str, &str)> = vec![
        (degraded(vec![slow([0, 2], Some(5.0), None)]), "degraded_links[0].link", "no link 0->2 in the topology"),
        (degraded(vec![slow([0, 99], Some(5.0), None)]), "degraded_links[0].link", "99 is not a node"),
        (
            degraded(vec![slow([0, 1], Some(250.0), None)]),
            "degraded_links[0].bandwidth_gb_per_s",
            "250 GB/s is above 0->1's 100 GB/s: a degraded link cannot speed up",
        ),
        (
            degraded(vec![slow([0, 1], None, Some(100.0))]),
            "degraded_links[0].latency_ns",
            "100 ns is below 0->1's 500 ns",
        ),
        (degraded(vec![slow([0, 1], Some(0.0), None)]), "degraded_links[0].bandwidth_gb_per_s", "at least 1e-6"),
        (degraded(vec![slow([0, 1], Some(1e-300), None)]), "degraded_links[0].bandwidth_gb_per_s", "1e-300: expected"),
        (degraded(vec![slow([0, 1], None, Some(1e308))]), "degraded_links[0].latency_ns", "from 0 to 1e12"),
        (degraded(vec![slow([0, 1], Some(f64::INFINITY), None)]), "degraded_links[0].bandwidth_gb_per_s", "finite"),
        (degraded(vec![slow([0, 1], None, Some(-1.0))]), "degraded_links[0].latency_ns", "from 0 to 1e12"),
        (degraded(vec![slow([0, 1], None, None)]), "degraded_links[0]", "neither bandwidth_gb_per_s nor latency_ns"),
        (
            degraded(vec![slow([2, 3], Some(50.0), None), slow([3, 2], Some(40.0), None)]),
            "degraded_links[1].link",
            "3->2 is degraded twice",
        ),
        (
            Failures { links: vec![[0, 1]], ..degraded(vec![slow([1, 0], Some(50.0), None)]) },
            "degraded_links[0].link",
            "1->0 fails too",
        ),
        (
            Failures { npus: vec![1], ..degraded(vec![slow([0, 1], Some(50.0), None)]) },
            "degraded_links[0].link",
            "NPU 1 failed",
        ),
    ];
    for (f, path, says) in cases {
        let e = t.with_failures(&f).unwrap_err();
        assert_eq!(e.errors.len(), 1, "{f:?}: {e}");
        assert_eq!(e.errors[0].path, path, "{f:?}: {e}");
        assert!(e.errors[0].message.contains(says), "{f:?}: {e}");
    }
    // Directed, the other direction is free to be degraded on its own.
    let f =
        Failures { directed: true, ..degraded(vec![slow([2, 3], Some(50.0), None), slow([3, 2], Some(40.0), None)]) };
    let d = t.with_failures(&f).unwrap();
    assert_eq!((params(&d, 2, 3).0, params(&d, 3, 2).0), (50.0, 40.0));
}

/// The previous schedule on the degraded topology as it stands: every route kept.
fn as_it_stands(old: &Schedule, d: &Topology) -> f64 {
    let mut kept = old.clone();
    kept.topology = d.clone();
    kept.collective_time_ns = None;
    engine::finalize(kept).unwrap().0.collective_time_ns.unwrap()
}

fn crosses(s: &Schedule, i: usize, slowed: &[(u32, u32)]) -> bool {
    let t = s.transfers.at(i);
    let hops: Vec<(u32, u32)> = match t.path_nodes() {
        Some(p) => p.windows(2).map(|w| (w[0], w[1])).collect(),
        None if t.is_local() => Vec::new(),
        None => vec![(t.src, t.dst)],
    };
    hops.iter().any(|h| slowed.contains(h))
}

/// What a repair after slowed links may change, transfer by transfer: one that does not cross
/// them stays as it was; one that does stays, or goes whole (or in pieces, the first in its
/// place) onto a detour around them, or keeps
/// at least `share` of its chunks (rounded down; the first ones) on its route and sends the rest round in
/// pieces pushed after every old transfer (same step, ends and op, every chunk once). Returns
/// (moved whole, split).
fn check_slowed_repair(
    old: &Schedule,
    new: &Schedule,
    slowed: &[(u32, u32)],
    share: impl Fn(f64) -> f64,
) -> (usize, usize) {
    let n = old.transfers.len();
    let (mut whole, mut split) = (0, 0);
    let key = |s: &Schedule, i: usize| {
        let t = s.transfers.at(i);
        (t.step, t.src, t.dst, format!("{:?}", t.op))
    };
    let mut sent: std::collections::BTreeMap<_, Vec<u32>> = Default::default();
    for i in 0..n {
        let (a, b) = (old.transfers.at(i), new.transfers.at(i));
        assert_eq!(key(old, i), key(new, i), "#{i}");
        sent.entry(key(old, i)).or_default().extend_from_slice(a.chunks);
        if a.chunks == b.chunks && a.path_nodes() == b.path_nodes() {
            continue;
        }
        assert!(crosses(old, i, slowed), "#{i} did not cross a slowed link, and changed");
        if a.chunks == b.chunks || a.path_nodes() != b.path_nodes() {
            // Whole onto a detour, or (a link slowed by its latency, as a failed one) its
            // first piece on one, the others pushed after.
            whole += 1;
            assert!(!crosses(new, i, slowed), "#{i} went round, over a slowed link");
            assert_eq!(b.chunks, &a.chunks[..b.chunks.len()], "#{i} keeps its first chunks");
        } else {
            split += 1;
            assert_eq!(a.path_nodes(), b.path_nodes(), "#{i}'s share keeps its route");
            let at_least =
                (a.chunks.len() as f64 * share(a.chunks.len() as f64 * old.chunk_size_bytes)).floor() as usize;
            assert!(b.chunks.len() >= at_least.max(1) && b.chunks.len() < a.chunks.len(), "#{i}'s share");
            assert_eq!(b.chunks, &a.chunks[..b.chunks.len()], "#{i} keeps its first chunks");
        }
    }
    let mut got: std::collections::BTreeMap<_, Vec<u32>> = Default::default();
    for i in 0..new.transfers.len() {
        if i >= n {
            assert!(!crosses(new, i, slowed), "piece #{i} crosses a slowed link");
        }
        got.entry(key(new, i)).or_default().extend_from_slice(new.transfers.at(i).chunks);
    }
    for v in sent.values_mut().chain(got.values_mut()) {
        v.sort_unstable();
    }
    assert_eq!(sent, got, "every chunk of every (step, src, dst, op) sent once");
    (whole, split)
}

/// Bucket on torus:8x8 keeps every link busy every step, so a link at a quarter speed holds up
/// every step (4× the intact time as it stands). The repair keeps on it about the quarter of
/// each message it carries in the time the message took, and sends the rest round in pieces (a
/// message of one chunk goes whole while a detour's busiest link stays less busy): under half
/// the time as it stands, valid, and only transfers over the slow link change. A link slowed
/// by a hair keeps all.
#[test]
fn the_repair_moves_off_a_slow_link_what_a_detour_carries_sooner() {
    let t = topo("torus:8x8");
    let (old, _) = baseline("bucket", &t, CollectiveSpec::new(K::AllReduce, 256 * MIB)).unwrap();
    let d = t.with_failures(&degraded(vec![slow([9, 10], Some(25.0), None)])).unwrap();
    let (new, stats) = repair::reroute(old.clone(), &d, &|| false).unwrap();
    assert!(stats.rebalanced > 0, "{stats:?}");
    assert_eq!((stats.rerouted, stats.kept + stats.rerouted), (stats.rebalanced, old.transfers.len()));
    let (whole, split) = check_slowed_repair(&old, &new, &[(9, 10), (10, 9)], |_| 0.25);
    assert!(split > 0, "messages of several chunks keep a share");
    assert_eq!(whole + split, stats.rebalanced);
    assert_eq!(new.transfers.len() - old.transfers.len(), stats.pieces);
    let stands = as_it_stands(&old, &d);
    assert!(stands > 3.9 * old.collective_time_ns.unwrap(), "{stands}");
    let (repaired, report) = engine::finalize(new).unwrap();
    assert!(report.valid);
    let time = repaired.collective_time_ns.unwrap();
    assert!(time < 0.5 * stands, "repair {time} ns, as it stands {stands} ns");

    // Slowed by a tenth of a percent: no detour is less busy than the link, nothing moves.
    let d = t.with_failures(&degraded(vec![slow([9, 10], Some(99.9), None)])).unwrap();
    let (new, stats) = repair::reroute(old.clone(), &d, &|| false).unwrap();
    assert_eq!((stats.rebalanced, stats.kept), (0, old.transfers.len()));
    assert!((0..old.transfers.len()).all(|i| old.transfers.at(i).path_nodes() == new.transfers.at(i).path_nodes()));
}

/// A link whose latency rose by more than a message takes to send (1 ms against a few µs) is
/// left as a failed one is: every transfer over it goes round, in pieces, and the repair takes
/// the failed link's time. Busy time alone does not see latency: every transfer stayed, and
/// bucket took 13× its time.
#[test]
fn a_link_slowed_by_its_latency_is_left_as_a_failed_one_is() {
    let t = topo("torus:8x8");
    let (old, _) = baseline("bucket", &t, CollectiveSpec::new(K::AllReduce, 256 * MIB)).unwrap();
    let timed = |d: &Topology| {
        let (new, stats) = repair::reroute(old.clone(), d, &|| false).unwrap();
        let slowed = [(9, 10), (10, 9)];
        assert!((0..new.transfers.len()).all(|i| !crosses(&new, i, &slowed)), "{stats:?}");
        let (repaired, report) = engine::finalize(new).unwrap();
        assert!(report.valid);
        repaired.collective_time_ns.unwrap()
    };
    let slow_one = t.with_failures(&degraded(vec![slow([9, 10], None, Some(1e6))])).unwrap();
    let failed = t.with_failures(&Failures { links: vec![[9, 10]], ..Failures::default() }).unwrap();
    let (by_latency, by_failure) = (timed(&slow_one), timed(&failed));
    assert!(by_latency <= 1.01 * by_failure, "1 ms link {by_latency} ns, failed link {by_failure} ns");
    assert!(by_latency < 2.0 * old.collective_time_ns.unwrap(), "{by_latency}");
}

/// Links slowed, none failed: the stored schedule as it stands is a candidate of the repair,
/// so a regeneration is never slower than doing nothing (a link at 90 of 100 GB/s: the greedy's
/// all-reduce on torus:8x8 rerouted 1.676 ms, as it stood 1.476 ms).
#[test]
fn a_repair_after_a_slowdown_is_never_slower_than_the_schedule_as_it_stands() {
    let t = topo("torus:8x8");
    let spec = CollectiveSpec::new(K::AllReduce, 256 * MIB);
    let greedy = run_request(&t, RequestSpec { algorithm: "greedy".parse().unwrap(), ..RequestSpec::new(spec) });
    let old = greedy.unwrap().schedule;
    let ring = |c| RequestSpec { algorithm: "ring".parse().unwrap(), ..RequestSpec::new(c) };
    let mut as_stored = 0;
    for bw in [95.0, 90.0, 75.0, 50.0, 25.0] {
        let failures = degraded(vec![slow([9, 10], Some(bw), None)]);
        let stands = as_it_stands(&old, &t.with_failures(&failures).unwrap());
        let out = regenerate_by(&old, failures, ring);
        let engine::RunStats::Regeneration(run) = &out.stats else { panic!("a regeneration") };
        let repair = &run.regeneration.repair;
        let time = repair.collective_time_ns.unwrap();
        assert!(time <= stands, "{bw} GB/s: repair {time} ns, as it stands {stands} ns");
        let stats = repair.stats.as_ref().unwrap();
        if stats.as_stored {
            as_stored += 1;
            assert_eq!((time, stats.kept, stats.rerouted), (stands, old.transfers.len(), 0), "{bw}");
        }
    }
    assert!(as_stored > 0, "a slight slowdown keeps the schedule as it stands");
}

fn regenerate(previous: &Schedule, failures: Failures) -> engine::Output {
    regenerate_by(previous, failures, RequestSpec::new)
}

/// `regenerate` with the request `spec` makes of the regeneration's collective.
fn regenerate_by(
    previous: &Schedule,
    failures: Failures,
    spec: impl Fn(CollectiveSpec) -> RequestSpec,
) -> engine::Output {
    let (t, c) = engine::regeneration_target(previous, &failures).unwrap();
    let options = Options { time_limit_s: Some(60.0), ..Options::default() };
    let req = engine::Request::new(t, RequestSpec { options, ..spec(c) }, &engine::Limits::default()).unwrap();
    engine::regenerate(previous.clone(), &req, engine::Control::none()).unwrap()
}

/// Issue 63's case: torus:8x8 with link 9-10 at 25 of 100 GB/s, the all-reduce at 256 MiB,
/// synthesized on the degraded topology and regenerated from the intact schedule; the
/// regeneration names the slowed links. The trees' 64 messages reach their floor of 32
/// timesteps in a second round (`trees`' `FLOOR_ROUNDS`): 1.358 ms against the intact 1.329 ms
/// (bucket-bidir's time, which the greedy's translation in rounds ties), 1.022×; the issue's
/// target is 1.03× (the matcher's 1.374 ms, 1.034×, before).
#[test]
fn after_a_slow_link_the_all_reduce_stays_within_3_percent_of_the_intact_one() {
    let t = topo("torus:8x8");
    let spec = CollectiveSpec::new(K::AllReduce, 256 * MIB);
    let auto = |t: &Topology| run_request(t, RequestSpec::new(spec.clone())).unwrap();
    let intact = auto(&t).schedule;
    let slow_9_10 = degraded(vec![slow([9, 10], Some(25.0), None)]);
    let d = t.with_failures(&slow_9_10).unwrap();
    let fresh = auto(&d);
    assert!(fresh.report.valid);
    let ratio = |s: &Schedule| s.collective_time_ns.unwrap() / intact.collective_time_ns.unwrap();
    assert!(ratio(&fresh.schedule) <= 1.03, "synthesized: {:.4}x the intact", ratio(&fresh.schedule));
    let out = regenerate(&intact, slow_9_10);
    assert!(out.report.valid);
    assert!(ratio(&out.schedule) <= 1.03, "regenerated: {:.4}x the intact", ratio(&out.schedule));
    assert_eq!(params(&out.schedule.topology, 9, 10), (25.0, 500.0));
    let r = out.stats.regeneration().unwrap();
    let said: Vec<_> = r.degraded_links.iter().map(|c| (c.src, c.dst, c.bandwidth_gb_per_s)).collect();
    assert_eq!(said, vec![(9, 10, 25.0), (10, 9, 25.0)]);
    assert!(r.repair.collective_time_ns.is_some(), "a slow link is repaired, not refused: {:?}", r.repair.note);
}

/// A link slowed one way only leaves the links unpaired; the reduce-scatter's search then still
/// runs as the all-gather on the transposed topology, mirrored back. On dragonfly:4:5 with
/// 0 -> 1 at 50 of 100 GB/s, 64 MiB: the reduce-scatter's own search gives 1.043× its bound,
/// the mirror the all-gather's 1.030× (before, the mirror was refused where links were not
/// paired).
#[test]
fn a_link_slowed_one_way_keeps_the_reduce_scatter_at_the_all_gathers_time() {
    let t = topo("dragonfly:4:5");
    let f = Failures { directed: true, ..degraded(vec![slow([0, 1], Some(50.0), None)]) };
    let d = t.with_failures(&f).unwrap();
    assert!(!d.is_paired());
    let greedy = |t: &Topology, kind| {
        let spec = RequestSpec::new(CollectiveSpec::new(kind, 64 * MIB));
        run_request(t, RequestSpec { algorithm: "greedy".parse().unwrap(), ..spec }).unwrap()
    };
    let rs = greedy(&d, K::ReduceScatter);
    assert!(rs.report.valid);
    let g = rs.stats.synthesis().unwrap().greedy.as_ref().unwrap();
    assert_eq!(g.mirrored_from, Some(K::AllGather));
    let ratio = rs.schedule.collective_time_ns.unwrap() / rs.report.lower_bounds.as_ref().unwrap().min_cut_ns.unwrap();
    assert!(ratio <= 1.031, "{ratio:.4}x the bound");
    // The all-gather on the transposed topology: the search the mirror took.
    let ag = greedy(&d.transposed(), K::AllGather);
    assert!(close(rs.schedule.collective_time_ns.unwrap(), ag.schedule.collective_time_ns.unwrap()));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// On random tori, any link slowed by any factor (bandwidth, latency or both): the repair
    /// of a baseline's schedule is valid, and changes only transfers over the slowed link,
    /// each kept, sent whole round it, or cut into the share the link carries and pieces that
    /// go round (`check_slowed_repair`).
    #[test]
    fn a_repair_after_a_slow_link_changes_only_routes_over_it(
        sides in prop::sample::select(vec![(3usize, 3usize), (4, 4), (3, 5), (4, 6)]),
        at in 0usize..1000,
        factor in 0.05f64..1.0,
        latency in prop::option::of(500.0f64..5000.0),
        algorithm in prop::sample::select(vec!["ring-bidir", "bucket", "direct"]),
        kind in prop::sample::select(vec![K::AllReduce, K::AllGather]),
    ) {
        let t = topo(&format!("torus:{}x{}", sides.0, sides.1));
        let l = &t.links()[at % t.links().len()];
        let (u, v) = (l.src, l.dst);
        let d = t.with_failures(&degraded(vec![slow([u, v], Some(100.0 * factor), latency)])).unwrap();
        let Ok((old, _)) = baseline(algorithm, &t, CollectiveSpec::new(kind, 4 * MIB)) else { return Ok(()) };
        let (new, stats) = repair::reroute(old.clone(), &d, &|| false).unwrap();
        let slowed = [(u as u32, v as u32), (v as u32, u as u32)];
        // A message of b bytes keeps x with α' + x b / β' = α + b / β: what the link sends in
        // the time the whole message took (x = β' / β where only the bandwidth fell).
        let (alpha, beta) = (latency.unwrap_or(500.0), 100.0 * factor);
        let share = |b: f64| if alpha > 500.0 { ((500.0 + b / 100.0 - alpha) * beta / b).clamp(0.0, 1.0) } else { factor.min(1.0) };
        let (whole, split) = check_slowed_repair(&old, &new, &slowed, share);
        prop_assert_eq!(whole + split, stats.rebalanced);
        prop_assert_eq!(stats.kept + stats.rebalanced, old.transfers.len());
        let (_, report) = engine::finalize(new).unwrap();
        prop_assert!(report.valid, "{:?}", report.violations);
    }
}

/// The grid before the changes (`Topology::grid_before_changes`): a torus with a few slower
/// links is the torus at its common speed; one less a link is the whole torus (as
/// `grid_less_links`); an intact torus has nothing before it; a mesh of two speeds by design
/// (half its links at 50), and slower links beyond the number allowed, keep their speeds.
#[test]
fn the_grid_before_a_slowdown_runs_at_the_common_speed() {
    let t = topo("torus:8x8");
    assert!(t.grid_before_changes(64).is_none(), "intact");
    let d = t.with_failures(&degraded(vec![slow([9, 10], Some(25.0), Some(900.0))])).unwrap();
    let (g, before) = d.grid_before_changes(64).expect("a torus with a slower link");
    assert_eq!((g.dims.clone(), g.torus), (vec![8, 8], true));
    assert!(before.links().iter().all(|l| (l.bandwidth_gb_per_s, l.latency_ns) == params(&t, 0, 1)));
    assert_eq!(before.links().len(), t.links().len());
    let less = t.with_failures(&Failures { links: vec![[9, 10]], ..Failures::default() }).unwrap();
    let (_, whole) = less.grid_before_changes(64).expect("a torus less a link");
    assert_eq!(whole.links().len(), t.links().len());
    let mixed = topo("mesh:4x4@bw=50,100;lat=500,1000");
    assert!(mixed.links().iter().any(|l| l.bandwidth_gb_per_s == 50.0));
    assert!(mixed.grid_before_changes(64).is_none(), "two speeds by design");
    assert!(d.grid_before_changes(1).is_none(), "two slower links, one allowed");
}

/// A grid baseline on a torus with a slower link is built on the torus before the slowdown and
/// repaired (`engine::rerouted`): the intact schedule's repair, to the nanosecond, and under
/// half the time of the same baseline as it stands, where every ring waits on the slow link
/// (bucket-bidir on torus:8x8, link 9-10 at a quarter speed, 256 MiB).
#[test]
fn a_grid_baseline_after_a_slow_link_is_the_intact_ones_repair() {
    let t = topo("torus:8x8");
    let spec = CollectiveSpec::new(K::AllReduce, 256 * MIB);
    let (intact, _) = baseline("bucket-bidir", &t, spec.clone()).unwrap();
    let d = t.with_failures(&degraded(vec![slow([9, 10], Some(25.0), None)])).unwrap();
    let (got, report) = baseline("bucket-bidir", &d, spec).unwrap();
    assert!(report.valid);
    let (repaired, _) = repair::reroute(intact.clone(), &d, &|| false).unwrap();
    let repaired = engine::finalize(repaired).unwrap().0.collective_time_ns.unwrap();
    let time = got.collective_time_ns.unwrap();
    assert_eq!(time, repaired);
    let stands = as_it_stands(&intact, &d);
    assert!(time < 0.5 * stands, "{time} ns against {stands} ns as it stands");
}

/// A regeneration of a stored grid baseline after a slowdown does not build that baseline again
/// in its fresh run (its entry says why): its repair is that schedule rerouted, which is what
/// the fresh run would build (bucket-bidir on torus:128x128, link 0-1 at a quarter speed: the
/// same 7.724 ms twice, 58 s of the fresh run's).
#[test]
fn a_regeneration_after_a_slowdown_does_not_build_its_stored_baseline_again() {
    let t = topo("torus:8x8");
    let (bucket, _) = baseline("bucket", &t, CollectiveSpec::new(K::AllReduce, 64 * MIB)).unwrap();
    let auto = |c| RequestSpec { algorithm: "auto".parse().unwrap(), ..RequestSpec::new(c) };
    let out = regenerate_by(&bucket, degraded(vec![slow([9, 10], Some(25.0), None)]), auto);
    assert!(out.report.valid);
    let engine::RunStats::Regeneration(run) = &out.stats else { panic!("a regeneration") };
    let Some(engine::RunStats::Portfolio(p)) = &run.fresh else { panic!("auto ran afresh") };
    let c = p.portfolio.candidates.iter().find(|c| c.algorithm == "bucket").expect("bucket is a candidate");
    assert!(c.collective_time_ns.is_none(), "{c:?}");
    assert!(c.note.as_deref().is_some_and(|n| n.contains("repair in hand")), "{:?}", c.note);
}

/// A grid's baseline on slower links is built on the grid before the slowdown and rerouted, or
/// as it stands where that is faster; and `compare` builds each as `synth --algo` does. On
/// ring:8 with link 0-1 at 10 µs latency, direct's all-gather rerouted took 90.5 µs, as it
/// stands 30.8 µs; on torus:4x4 with link 0-1 at 10 GB/s and 2 µs, `compare` gave ring 158.3 µs
/// and `synth --algo ring` 35.4 µs.
#[test]
fn a_slowed_grid_s_baseline_is_the_faster_way_and_the_same_at_every_door() {
    let by = |t: &Topology, spec: &CollectiveSpec, name: &str| {
        let req = RequestSpec { algorithm: name.parse().unwrap(), ..RequestSpec::new(spec.clone()) };
        run_request(t, req).unwrap().schedule.collective_time_ns.unwrap()
    };
    let t = topo("ring:8").with_failures(&degraded(vec![slow([0, 1], None, Some(10_000.0))])).unwrap();
    let spec = CollectiveSpec::new(K::AllGather, MIB);
    let as_it_stands = ccsynth::baselines::build("direct", &t, &spec).unwrap();
    let plain = ccsynth::sim::simulate(&as_it_stands).unwrap().collective_time_ns;
    assert!(close(by(&t, &spec, "direct"), plain), "{} against {plain}", by(&t, &spec, "direct"));
    let t = topo("torus:4x4").with_failures(&degraded(vec![slow([0, 1], Some(10.0), Some(2000.0))])).unwrap();
    let spec = CollectiveSpec::new(K::AllReduce, MIB);
    let c = engine::compare(&t, &spec, None);
    assert!(c.rows.len() >= 10, "{:?}", c.refused);
    for r in &c.rows {
        let synth = by(&t, &spec, &r.algorithm);
        assert!(
            close(r.collective_time_ns, synth),
            "{}: compare {} against synth {synth}",
            r.algorithm,
            r.collective_time_ns
        );
    }
}

/// A link slowed past what a TEN edge may span (100 ms of latency beside 500 ns) is left out
/// of the greedy's network, which plans around it: `auto` returned direct through it, 300 ms,
/// where the schedule around it takes 11.6 µs (as with the link failed, or at 1 ms).
#[test]
fn the_greedy_plans_around_a_link_too_slow_for_its_network() {
    let t = topo("torus:4x4").with_failures(&degraded(vec![slow([0, 1], None, Some(1e8))])).unwrap();
    let spec = CollectiveSpec::new(K::AllReduce, MIB);
    for algorithm in ["greedy", "auto"] {
        let out =
            run_request(&t, RequestSpec { algorithm: algorithm.parse().unwrap(), ..RequestSpec::new(spec.clone()) })
                .unwrap();
        let time = out.schedule.collective_time_ns.unwrap();
        assert!(time < 20_000.0, "{algorithm}: {time} ns");
        let over = |s: u32, d: u32| out.schedule.transfers.iter().any(|x| (x.src, x.dst) == (s, d));
        assert!(!over(0, 1) && !over(1, 0), "{algorithm} sends over the slow link");
    }
}

/// A link too slow to plan the trees around (its message over 8 timesteps of the fastest's) is
/// left out of them, as the TEN leaves out what it cannot span, where one refused the trees
/// outright: torus:4x4 with link 0-1 at 1 ms, all-reduce 64 MiB, takes what it takes with the
/// link failed (340.6 µs; the matcher's 424.4 µs before), and fc:6 with 0-1 at 10 of 100 GB/s
/// runs the trees (19.98 µs, the matcher's 22.48 before; 18.73 with the link failed, at
/// another chunking).
#[test]
fn the_trees_leave_out_a_link_too_slow_to_plan_around() {
    let run = |spec: &str, f: Failures, size: u64| {
        let t = topo(spec).with_failures(&f).unwrap();
        let out = run_request(&t, RequestSpec::new(CollectiveSpec::new(K::AllReduce, size))).unwrap();
        let greedy = out.stats.portfolio().and_then(|p| p.candidates.iter().find(|c| c.algorithm == "greedy").cloned());
        (out.schedule.collective_time_ns.unwrap(), greedy.and_then(|c| c.greedy_mode))
    };
    let failed = || Failures { links: vec![[0, 1]], ..Failures::default() };
    let (slowed, mode) = run("torus:4x4", degraded(vec![slow([0, 1], None, Some(1e6))]), 64 * MIB);
    let (without, _) = run("torus:4x4", failed(), 64 * MIB);
    assert!(slowed <= without * 1.0001, "1 ms link: {slowed} ns, failed: {without} ns ({mode:?})");
    let (slowed, mode) = run("fc:6", degraded(vec![slow([0, 1], Some(10.0), None)]), 4 * MIB);
    assert!(slowed < 21_000.0, "{slowed} ns ({mode:?})");
}

/// A link of very high latency (NPU 0's only way in: 7 -> 0 at 1 ms and half speed, 1 -> 0
/// failed): the greedy sends its chunks one a message, each paying the millisecond (3.29 ms);
/// its winner's messages on that route are merged (`synth::merge`), so the chunks cross in
/// one message and the all-gather pays the latency once (1.42 ms, against 1.04 + 0.29 ms of
/// bound for that one message alone).
#[test]
fn messages_over_a_link_of_long_latency_are_merged() {
    let f = Failures {
        links: vec![[1, 0]],
        degraded_links: vec![slow([7, 0], Some(50.0), Some(1e6))],
        directed: true,
        ..Failures::default()
    };
    let t = topo("ring:8").with_failures(&f).unwrap();
    let s = run_seeded(&t, &CollectiveSpec::new(K::AllGather, 16 * MIB), "greedy").unwrap();
    let into_0: Vec<_> = s.transfers.iter().filter(|m| m.dst == 0).collect();
    assert!(into_0.iter().all(|m| m.src == 7));
    assert_eq!(into_0.len(), 1, "one message carries NPU 0's seven chunks");
    let time = ccsynth::sim::simulate(&s).unwrap().collective_time_ns;
    // One latency of the slow link and its seven chunks' wire time, then less than one more
    // millisecond: a second message over 7 -> 0 would pay the latency again.
    let one_message = 1e6 + (7 * 2 * MIB) as f64 / 50.0;
    assert!(time > one_message && time < one_message + 1e6, "{time}");
}
