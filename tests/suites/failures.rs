//! After failures: unequal shares (a closed form on a broken ring, the all-reduce after any
//! single link failure on small tori against the intact one), the repair (untouched transfers
//! byte for byte, detours around the failure) and regeneration through the engine's door.

use crate::common::*;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, Kept, Options, RequestSpec};
use ccsynth::schedule::{Schedule, Transfer};
use ccsynth::synth::repair;
use ccsynth::topology::{Failures, Topology};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn greedy_at(t: &Topology, spec: CollectiveSpec) -> engine::Output {
    run_request(t, RequestSpec { algorithm: "greedy".parse().unwrap(), ..RequestSpec::new(spec) }).unwrap()
}

fn auto(t: &Topology, spec: CollectiveSpec) -> engine::Output {
    run_request(t, RequestSpec { algorithm: engine::Algorithm::Auto, ..RequestSpec::new(spec) }).unwrap()
}

fn failed(t: &Topology, links: &[[usize; 2]]) -> Topology {
    t.with_failures(&Failures { links: links.to_vec(), ..Failures::default() }).unwrap()
}

/// torus:8x8 less NPU 9, its all-reduce at 256 MiB and four chunks a NPU, and the planners'
/// options (seed 0, native switches): the matcher's own tests of that case.
fn less_npu_9() -> (Topology, ccsynth::collective::Collective, ccsynth::synth::PlanOptions) {
    let t = topo("torus:8x8").with_failures(&Failures { npus: vec![9], ..Failures::default() }).unwrap();
    let spec = CollectiveSpec::new(K::AllReduce, 256 * MIB).with_chunks_per_npu(4);
    let c = ccsynth::collective::Collective::build(&spec, &t).unwrap();
    let opts = ccsynth::synth::PlanOptions {
        seed: 0,
        switch_model: ccsynth::engine::SwitchModel::Native,
        discretization_ns: None,
    };
    (t, c, opts)
}

/// The links a transfer occupies.
fn hops(s: &Schedule, i: usize) -> Vec<(u32, u32)> {
    let t = s.transfers.at(i);
    match t.path_nodes() {
        Some(p) => p.windows(2).map(|w| (w[0], w[1])).collect(),
        None => vec![(t.src, t.dst)],
    }
}

/// A ring of four with the link 3–0 gone is a line: the two ends have one link each, the
/// middle NPUs two. With shares weighted by what each NPU moves, the ends are the roots of
/// half the chunks each (then every directed end link carries C = 4k chunk transfers in the
/// two phases together: the middle NPUs own nothing, so an end receives the other end's half
/// and sends its partials of it, and relays nothing); each phase takes C/2 + 2 TEN steps (the
/// first chunk from the far end arrives after 3 hops), and the simulated time is (C + 2) chunk
/// transfers, as the phases overlap by the pipeline's two steps. Equal shares would make an
/// end send 3C/4 partials in the reduce phase and receive as many in the forward phase, over
/// its one link: at least 3C/2 transfers.
#[test]
fn a_broken_ring_reduces_at_its_ends() {
    let t = failed(&topo("ring:4"), &[[3, 0]]);
    let (size, k) = (256 * MIB, 4u32);
    let out = greedy_at(&t, CollectiveSpec::new(K::AllReduce, size).with_chunks_per_npu(k));
    assert!(out.report.valid);
    let st = out.stats.synthesis().unwrap();
    assert_eq!(st.greedy_mode(), Some("matching"));
    let c = 4 * k;
    let shares = st.shares.as_ref().expect("unequal shares on a line");
    assert_eq!((shares.chunks, shares.per_npu_min, shares.per_npu_max, shares.npus_owning), (c as usize, 0, c / 2, 2));
    assert_eq!(st.phase_timesteps, vec![c / 2 + 2, c / 2 + 2]);
    let step = 500.0 + size as f64 / c as f64 / 100.0;
    let time = out.schedule.collective_time_ns.unwrap();
    assert!(close(time, (c + 2) as f64 * step), "{time} ns, expected {} ns", (c + 2) as f64 * step);
    assert!(time < (3 * c / 2) as f64 * step);
    // The intact ring has equal capacities: equal shares, as before.
    let intact = greedy_at(&topo("ring:4"), CollectiveSpec::new(K::AllReduce, size).with_chunks_per_npu(k));
    assert!(intact.stats.synthesis().unwrap().shares.is_none());
}

/// Two NPUs of 64 with three links of four own 33 chunks of 128 each, the others one: the
/// forward phase then asks 95 chunks of a weak NPU (31.7 steps over 3 links) and 127 of the
/// others (31.75 over 4). The greedy meets that step count per phase, and the all-reduce stays
/// within 4% of the intact torus's (equal shares would make it at least 4/3 of it).
#[test]
fn one_failed_link_on_a_torus_costs_a_few_percent() {
    let t = failed(&topo("torus:8x8"), &[[5, 6]]);
    let spec = CollectiveSpec::new(K::AllReduce, 256 * MIB).with_chunks_per_npu(2);
    let out = greedy_at(&t, spec.clone());
    let st = out.stats.synthesis().unwrap();
    let shares = st.shares.as_ref().unwrap();
    assert_eq!((shares.per_npu_min, shares.per_npu_max, shares.npus_owning), (1, 33, 64));
    assert!(st.phase_timesteps.iter().all(|&s| s <= 33), "{:?}", st.phase_timesteps);
    let intact = auto(&topo("torus:8x8"), CollectiveSpec::new(K::AllReduce, 256 * MIB));
    let ratio = out.schedule.collective_time_ns.unwrap() / intact.schedule.collective_time_ns.unwrap();
    assert!(ratio < 1.04, "{ratio}");
}

/// With unequal shares the matcher's two phases run in one timeline where that is shorter: a
/// failed NPU's neighbours are the large roots, and the broadcast of what they reduced early
/// overlaps the rest of the reduction. The schedule is valid and its TEN length is shorter
/// than the two phases in sequence. (The matcher itself, with the balanced shares: the
/// engine's greedy keeps the spread shares here, `a_failed_npus_neighbours_share_their_roots`.)
#[test]
fn the_phases_overlap_where_that_is_shorter() {
    let (t, c, opts) = less_npu_9();
    let (s, st) = ccsynth::synth::greedy(&t, &c, &opts, &|| false).unwrap();
    assert!(engine::check(&s).valid);
    assert!(st.overlapped, "{st:?}");
    assert!(st.ten_timesteps < st.phase_timesteps.iter().sum::<u32>(), "{st:?}");
    // The steps interleave the two phases: a broadcast copy starts before the last reduction.
    let s = &s;
    let last_reduce =
        s.transfers.iter().filter(|t| t.op == ccsynth::schedule::Op::Reduce).map(|t| t.step).max().unwrap();
    let first_copy = s.transfers.iter().filter(|t| t.op == ccsynth::schedule::Op::Copy).map(|t| t.step).min().unwrap();
    assert!(
        first_copy < last_reduce,
        "the phases do not overlap: copies from {first_copy}, reduces until {last_reduce}"
    );
    // Equal capacities: no shares, no overlap (the same schedules as before).
    let intact = greedy_at(&topo("hier:ring2,fc4,switch4"), CollectiveSpec::new(K::AllReduce, 256 * MIB));
    assert!(!intact.stats.synthesis().unwrap().overlapped);
}

/// On 512 NPUs at 256 MiB a chunk per NPU is half a MiB, a tenth of whose time is a link's
/// latency: the greedy also moves chunks in pairs and fours (planned on the all-reduce of fewer,
/// larger chunks), and after a failed link the pairs are what keep the all-reduce within 8% of
/// the intact torus's. Every message carries an aligned run of consecutive chunks.
#[test]
fn at_scale_chunks_move_in_groups() {
    let c = CollectiveSpec::new(K::AllReduce, 256 * MIB);
    let intact = auto(&topo("torus:8x8x8"), c.clone()).schedule.collective_time_ns.unwrap();
    let out = auto(&failed(&topo("torus:8x8x8"), &[[5, 6]]), c);
    assert!(out.report.valid);
    let st = out.stats.synthesis().expect("the greedy wins");
    let g = st.chunks_per_message.expect("chunks moved in groups");
    assert!(g == 2 || g == 4, "{g}");
    for t in out.schedule.transfers.iter() {
        assert_eq!(t.chunks.len(), g as usize);
        assert!(t.chunks[0] % g == 0 && t.chunks.windows(2).all(|w| w[1] == w[0] + 1), "{:?}", t.chunks);
    }
    let ratio = out.schedule.collective_time_ns.unwrap() / intact;
    assert!(ratio <= 1.08, "{ratio}");
}

/// An all-gather cannot group chunks (each has its own source), so the greedy lets each link
/// start several chunks a timestep and merges them into one message: after a failed link on
/// torus:8x8x8 at 256 MiB the NPUs left with five links receive 511 chunks at up to three a
/// message (35 timesteps where 103 single chunks took 1.10× the bound), and each pair of NPUs
/// exchanges at most one message a step. Within issue 26's 1.05× of the ingress bound (1.104× at
/// one chunk a message).
#[test]
fn an_all_gather_after_a_failure_moves_several_chunks_a_message() {
    let t = failed(&topo("torus:8x8x8"), &[[5, 6]]);
    let out = greedy_at(&t, CollectiveSpec::new(K::AllGather, 256 * MIB));
    assert!(out.report.valid);
    let st = out.stats.synthesis().expect("the greedy's stats");
    let g = st.chunks_per_message.expect("several chunks a message");
    assert!((2..=6).contains(&g), "{g}");
    let mut seen = std::collections::HashSet::new();
    let mut merged = 0;
    for t in out.schedule.transfers.iter() {
        assert!(t.chunks.len() <= g as usize, "{} chunks in one message of at most {g}", t.chunks.len());
        assert!(seen.insert((t.step, t.src, t.dst)), "two messages from {} to {} at step {}", t.src, t.dst, t.step);
        merged += (t.chunks.len() > 1) as usize;
    }
    assert!(merged > 0);
    let ratio = out.schedule.collective_time_ns.unwrap() / out.report.lower_bound_ns.unwrap();
    assert!(ratio <= 1.05, "{ratio}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// Issue 26's target for one failed link: the default door's all-reduce at 256 MiB on a
    /// torus of 36 to 64 NPUs, after any one link fails, takes at most 1.08 times the intact
    /// torus's.
    #[test]
    fn any_single_failed_link_costs_at_most_8_percent(sides in prop::sample::select(vec![(6usize, 6usize), (6, 8), (8, 6), (8, 8)]), at in 0usize..64, along_y in any::<bool>()) {
        let (a, b) = sides;
        let spec = format!("torus:{a}x{b}");
        let t = topo(&spec);
        let u = at % (a * b);
        let (x, y) = (u % a, u / a);
        let v = if along_y { x + a * ((y + 1) % b) } else { (x + 1) % a + a * y };
        let c = CollectiveSpec::new(K::AllReduce, 256 * MIB);
        let intact = auto(&t, c.clone()).schedule.collective_time_ns.unwrap();
        let out = auto(&failed(&t, &[[u, v]]), c);
        prop_assert!(out.report.valid);
        let ratio = out.schedule.collective_time_ns.unwrap() / intact;
        prop_assert!(ratio <= 1.08, "{spec} without {u}-{v}: {ratio}");
    }
}

/// The repair keeps every transfer the failure does not touch exactly as it was (its JSON byte
/// for byte), gives the others a detour between the same NPUs that avoids the failed link,
/// and the result is valid on the degraded topology: on schedules of the greedy, a baseline and
/// the translation planner, combining and not.
#[test]
fn the_repair_keeps_what_the_failure_does_not_touch() {
    let cases = [
        ("torus:4x4", K::AllReduce, "greedy", [0usize, 1]),
        ("torus:4x4", K::AllGather, "bucket", [5, 6]),
        ("torus:6x6", K::AllReduce, "ring-bidir", [0, 6]),
        ("mesh:4x4", K::ReduceScatter, "greedy", [5, 9]),
        ("hypercube:4", K::AllReduce, "rabenseifner", [0, 1]),
    ];
    for (spec, kind, algorithm, [u, v]) in cases {
        let t = topo(spec);
        let old = run_request(
            &t,
            RequestSpec {
                algorithm: algorithm.parse().unwrap(),
                ..RequestSpec::new(CollectiveSpec::new(kind, 4 * MIB))
            },
        )
        .unwrap()
        .schedule;
        let degraded = failed(&t, &[[u, v]]);
        let (new, stats) = repair::reroute(old.clone(), &degraded, &|| false).unwrap();
        let what = format!("{algorithm} {kind:?} on {spec} without {u}-{v}");
        // A detoured message may be cut into pieces: the first keeps its place, the others
        // come after every old transfer, with its step, ends and op.
        assert_eq!(new.transfers.len(), old.transfers.len() + stats.pieces, "{what}");
        let touches = |s: &Schedule, i: usize| {
            hops(s, i).iter().any(|&(a, b)| (a as usize, b as usize) == (u, v) || (a as usize, b as usize) == (v, u))
        };
        type Key = (u32, u32, u32, bool);
        let mut moved: std::collections::BTreeMap<Key, (Vec<u32>, Vec<u32>)> = Default::default();
        let mut rerouted = 0;
        for i in 0..old.transfers.len() {
            let (a, b) = (old.transfers.at(i), new.transfers.at(i));
            if touches(&old, i) {
                rerouted += 1;
                assert_eq!((a.step, a.src, a.dst, a.op), (b.step, b.src, b.dst, b.op), "{what}: #{i}");
                let e = moved.entry((a.step, a.src, a.dst, a.op == ccsynth::schedule::Op::Reduce)).or_default();
                e.0.extend(a.chunks);
                e.1.extend(b.chunks);
                assert!(!touches(&new, i), "{what}: #{i} still crosses the failed link");
            } else {
                assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap(), "{what}: #{i}");
            }
        }
        for i in old.transfers.len()..new.transfers.len() {
            let b = new.transfers.at(i);
            assert!(!touches(&new, i), "{what}: piece #{i} crosses the failed link");
            let reduce = b.op == ccsynth::schedule::Op::Reduce;
            let e =
                moved.get_mut(&(b.step, b.src, b.dst, reduce)).unwrap_or_else(|| panic!("{what}: #{i} is no piece"));
            e.1.extend(b.chunks);
        }
        for (key, (mut was, mut now)) in moved {
            was.sort_unstable();
            now.sort_unstable();
            assert_eq!(was, now, "{what}: the chunks of {key:?}");
        }
        assert!(rerouted > 0, "{what}: the case needs a schedule over the link");
        assert_eq!((stats.rerouted, stats.kept), (rerouted, old.transfers.len() - rerouted), "{what}");
        assert!(stats.rerouted_hops >= stats.replaced_hops + rerouted, "{what}: a detour is longer than the link");
        let (repaired, report) = engine::finalize(new).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(report.valid, "{what}");
        assert!(repaired.collective_time_ns.unwrap() >= old.collective_time_ns.unwrap() * (1.0 - 1e-9), "{what}");
    }
}

/// A detoured message is cut into pieces that pipeline over the NPUs it relays through (they
/// store and forward): a broadcast of 16 chunks along ring:4 whose first link failed goes
/// 0 → 3 → 2 → 1 as m pieces, the last arriving (m + 2) piece times after the start, not three
/// whole message times; m minimises that, and each later step is one message as before.
#[test]
fn a_detoured_message_pipelines_in_pieces() {
    let t = topo("ring:4");
    let c = coll_spec(&t, CollectiveSpec::new(K::Broadcast, 16 * MIB).with_chunks_per_npu(16).with_root(0));
    let all: Vec<u32> = (0..16).collect();
    let transfers = vec![
        Transfer::copy(0, 0, 1, all.clone()),
        Transfer::copy(1, 1, 2, all.clone()),
        Transfer::copy(2, 2, 3, all.clone()),
    ];
    let old = sched(&t, &c, transfers);
    let degraded = failed(&t, &[[0, 1]]);
    let (new, stats) = repair::reroute(old, &degraded, &|| false).unwrap();
    let (repaired, report) = engine::finalize(new).unwrap();
    assert!(report.valid, "{:?}", report.violations);
    let (alpha, message) = (500.0, 16.0 * MIB as f64 / 100.0);
    let piece_times = |m: usize| (m + 2) as f64 * (alpha + message / m as f64);
    let m = (1..=16).min_by(|&a, &b| piece_times(a).total_cmp(&piece_times(b))).unwrap();
    assert!(m > 4, "{m}");
    assert_eq!((stats.rerouted, stats.pieces), (1, m - 1));
    let want = piece_times(m) + 2.0 * (alpha + message);
    let got = repaired.collective_time_ns.unwrap();
    assert!(close(got, want), "{got} against {want}");
    // Whole, the detour took three message times.
    assert!(got < 3.0 * (alpha + message) + 2.0 * (alpha + message) - 10.0 * message / 16.0);
}

/// A baseline that needs the whole grid serves a torus less a few links: built on the whole
/// torus and its transfers over the failed links rerouted (the repair of that schedule, to the
/// byte), valid, and slower than on the whole torus. Not less a failed NPU (the group changed)
/// nor past `REROUTE_MAX_MISSING_LINKS`; `auto` has it among its candidates.
#[test]
fn a_grid_baseline_is_rerouted_around_failed_links() {
    let t = topo("torus:8x8");
    let spec = CollectiveSpec::new(K::AllReduce, 64 * MIB);
    let (whole, _) = baseline("bucket", &t, spec.clone()).unwrap();
    for links in [vec![[0usize, 1]], vec![[0, 1], [9, 17], [40, 41]]] {
        let degraded = failed(&t, &links);
        let (s, report) = baseline("bucket", &degraded, spec.clone()).unwrap_or_else(|e| panic!("{links:?}: {e}"));
        assert!(report.valid, "{links:?}");
        let (repaired, _) = repair::reroute(whole.clone(), &degraded, &|| false).unwrap();
        assert_eq!(s.transfers.len(), repaired.transfers.len());
        for i in 0..s.transfers.len() {
            let (a, b) = (s.transfers.at(i), repaired.transfers.at(i));
            assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap(), "{links:?}: #{i}");
        }
        assert!(s.collective_time_ns.unwrap() > whole.collective_time_ns.unwrap(), "{links:?}");
        let out = auto(&degraded, spec.clone());
        let engine::RunStats::Portfolio(p) = &out.stats else { panic!("auto runs a portfolio") };
        let bucket = p.portfolio.candidates.iter().find(|c| c.algorithm == "bucket").unwrap();
        assert!(
            bucket.collective_time_ns.is_some() || bucket.note.as_deref().is_some_and(|n| n.contains("skipped")),
            "{bucket:?}"
        );
    }
    let npu = t.with_failures(&Failures { npus: vec![9], ..Failures::default() }).unwrap();
    let mut less_npu = spec.clone();
    less_npu.group = Some((0..64).filter(|&v| v != 9).collect());
    assert!(baseline("bucket", &npu, less_npu).is_err());
    let big = topo("torus:16x16");
    let many: Vec<[usize; 2]> = (0..engine::REROUTE_MAX_MISSING_LINKS / 2 + 1).map(|i| [2 * i, 2 * i + 1]).collect();
    assert!(baseline("bucket", &failed(&big, &many), spec.clone()).is_err(), "too many links missing");
    assert!(baseline("bucket", &failed(&big, &many[1..]), spec).is_ok(), "as many links missing as rerouted");
}

/// A regeneration of a stored baseline schedule does not build that baseline rerouted again
/// in its fresh run (its entry says why): its repair is that schedule. Of another schedule it
/// does.
#[test]
fn a_regeneration_does_not_reroute_its_stored_baseline_twice() {
    let t = topo("torus:8x8");
    let spec = CollectiveSpec::new(K::AllReduce, 64 * MIB);
    let fresh_bucket = |previous: &Schedule| -> (Option<f64>, Option<String>) {
        let out = regenerate(previous, Failures { links: vec![[0, 1]], ..Failures::default() }, "auto");
        let engine::RunStats::Regeneration(run) = &out.stats else { panic!("a regeneration") };
        let Some(engine::RunStats::Portfolio(p)) = &run.fresh else { panic!("auto ran afresh") };
        let c = p.portfolio.candidates.iter().find(|c| c.algorithm == "bucket").expect("bucket is a candidate");
        (c.collective_time_ns, c.note.clone())
    };
    let (bucket, _) = baseline("bucket", &t, spec.clone()).unwrap();
    let (time, note) = fresh_bucket(&bucket);
    assert!(time.is_none() && note.as_deref().is_some_and(|n| n.contains("repair in hand")), "{note:?}");
    let (ring, _) = baseline("ring", &t, spec).unwrap();
    let (time, note) = fresh_bucket(&ring);
    assert!(time.is_some() || note.as_deref().is_some_and(|n| n.starts_with("skipped")), "{note:?}");
    // Off a grid the refusal is the baseline's own: pxn's rail less a link is not "the whole
    // grid" (the note said so on rail:2x4).
    let rail = topo("rail:2x4");
    let (pxn, _) = baseline("pxn", &rail, CollectiveSpec::new(K::AllToAll, MIB)).unwrap();
    let out = regenerate(&pxn, Failures { links: vec![[0, 8]], ..Failures::default() }, "auto");
    let engine::RunStats::Regeneration(run) = &out.stats else { panic!("a regeneration") };
    let Some(engine::RunStats::Portfolio(p)) = &run.fresh else { panic!("auto ran afresh") };
    let c = p.portfolio.candidates.iter().find(|c| c.algorithm == "pxn").expect("pxn is a candidate");
    let note = c.note.as_deref().unwrap_or_default();
    assert!(note.contains("rail") && !note.contains("grid"), "{note}");
}

/// A failed NPU of the collective's group makes another collective (its chunks are gone): the
/// repair refuses, naming it. One outside the group that only forwards along paths is routed
/// around; one the schedule stores chunks at on their way cannot be (refused, naming it).
#[test]
fn a_failed_member_cannot_be_repaired() {
    let t = topo("torus:4x4");
    let old = greedy_at(&t, CollectiveSpec::new(K::AllReduce, MIB)).schedule;
    let degraded = t.with_failures(&Failures { npus: vec![5], ..Failures::default() }).unwrap();
    assert_eq!(repair::reroute(old, &degraded, &|| false).unwrap_err(), repair::RepairError::GroupChanged(5));
    let mut spec = CollectiveSpec::new(K::AllGather, MIB);
    spec.group = Some((0..16).filter(|&v| v != 5).collect());
    let (old, _) = baseline("direct", &t, spec.clone()).unwrap();
    assert!(old.transfers.iter().any(|t| t.path.is_some_and(|p| p.contains(&5))), "paths through NPU 5");
    let (new, stats) = repair::reroute(old, &degraded, &|| false).unwrap();
    assert!(engine::finalize(new).unwrap().1.valid);
    assert!(stats.kept > 0 && stats.rerouted > 0);
    let old = greedy_at(&t, spec).schedule;
    assert!(old.transfers.iter().any(|t| t.dst == 5), "the matcher relays through NPU 5");
    assert_eq!(repair::reroute(old, &degraded, &|| false).unwrap_err(), repair::RepairError::RelayFailed(5));
}

fn regenerate(previous: &Schedule, failures: Failures, algorithm: &str) -> engine::Output {
    let (t, c) = engine::regeneration_target(previous, &failures).unwrap();
    let options = Options { time_limit_s: Some(60.0), ..Options::default() };
    let req = engine::Request::new(
        t,
        RequestSpec { algorithm: algorithm.parse().unwrap(), options, ..RequestSpec::new(c) },
        &engine::Limits::default(),
    )
    .unwrap();
    engine::regenerate(previous.clone(), &req, engine::Control::none()).unwrap()
}

/// `engine::regenerate` repairs, runs the request afresh, and keeps the repair only when it is
/// faster: against a slow fresh algorithm (ring on a torus) the repair is kept, against `auto`
/// the fresh schedule; the report names both times and the previous schedule's.
#[test]
fn regeneration_keeps_the_faster_of_repair_and_fresh() {
    let t = topo("torus:8x8");
    let previous = auto(&t, CollectiveSpec::new(K::AllReduce, 64 * MIB)).schedule;
    let link = Failures { links: vec![[5, 6]], ..Failures::default() };
    for (algorithm, kept) in [("ring", Kept::Repair), ("auto", Kept::Fresh)] {
        let out = regenerate(&previous, link.clone(), algorithm);
        assert!(out.report.valid);
        let r = out.stats.regeneration().expect("a regeneration reports itself");
        let (repair, fresh) = (r.repair.collective_time_ns.unwrap(), r.fresh.collective_time_ns);
        assert_eq!(r.kept, kept, "{algorithm}: repair {repair}, fresh {fresh:?}");
        let time = out.schedule.collective_time_ns.unwrap();
        match kept {
            Kept::Repair => {
                assert_eq!(time, repair);
                assert!(fresh.is_none_or(|f| f > repair));
                assert_eq!(out.schedule.algorithm.as_deref(), Some("repair"));
            }
            Kept::Fresh => assert!(fresh == Some(time) && time <= repair),
        }
        assert_eq!(r.previous_collective_time_ns, previous.collective_time_ns);
        assert!(close(r.slower_than_previous.unwrap(), time / previous.collective_time_ns.unwrap()));
        assert!(out.report.lower_bound_ns.is_some());
        assert!(out.schedule.topology.link(5, 6).is_none());
    }
    // A failed NPU: the repair says why it cannot serve, the fresh run answers.
    let out = regenerate(&previous, Failures { npus: vec![9], ..Failures::default() }, "auto");
    let r = out.stats.regeneration().unwrap();
    assert_eq!(r.kept, Kept::Fresh);
    assert!(r.repair.note.as_deref().unwrap().contains("NPU 9"), "{:?}", r.repair.note);
    assert_eq!(out.schedule.topology.live_npus().len(), 63);
}

/// A mesh whose links run at two speeds: its corners (two links) and edges (three) move less
/// than its middle, so the shares make the corners the roots of every chunk, and each phase on
/// its own waits for them. In stages (`synth::staged`) one stage's forward phase runs beside the
/// next one's reduce phase (1.22–1.24× the two-pass bound at 256 MiB, where one stage took
/// 1.28×: the issue's 1.25×). Since dd865bd the per-chunk trees serve links of two speeds, and
/// they do better, seed after seed: no phases, and each link's messages at its own speed
/// (seeds 0–5: 2.417–2.439 ms, 1.080–1.090×; issue 63's target, 1.05×, is not met).
#[test]
fn a_mesh_of_two_speeds_reduces_within_ten_percent_of_its_bound() {
    let t = topo("mesh:4x4@bw=50,100;lat=500,1000");
    for seed in [0u64, 1, 2] {
        let spec = RequestSpec {
            algorithm: "greedy".parse().unwrap(),
            options: Options { seed: Some(seed), ..Options::default() },
            ..RequestSpec::new(CollectiveSpec::new(K::AllReduce, 256 * MIB))
        };
        let out = run_request(&t, spec).unwrap();
        assert!(out.report.valid);
        let st = out.stats.synthesis().unwrap();
        assert_eq!(st.greedy_mode(), Some("trees"), "seed {seed}: {st:?}");
        let bound = out.report.lower_bounds.as_ref().and_then(|b| b.two_pass_ns).unwrap();
        let time = out.schedule.collective_time_ns.unwrap();
        assert!(time <= 1.10 * bound, "seed {seed}: {time} ns is {:.3}× the bound {bound} ns", time / bound);
    }
}

/// The stages share one timeline: a copy of stage 0's forward phase starts before stage 1's
/// last reduction, the timeline is shorter than the stages one after another, every stage
/// has its own roots (the shares add up to every chunk), and the schedule validates. Where
/// every NPU moves data at the same rate there is nothing to overlap, and where few NPUs are
/// weak the stages were measured to gain nothing: refused.
#[test]
fn the_stages_run_side_by_side() {
    use ccsynth::collective::Collective;
    use ccsynth::schedule::Op;
    use ccsynth::synth::{PlanOptions, greedy_staged};
    let opts = PlanOptions { seed: 1, switch_model: ccsynth::engine::SwitchModel::Native, discretization_ns: None };
    for name in [
        "mesh:4x4@bw=50,100;lat=500,1000",
        "mesh:4x4",
        "mesh:3x5@bw=50,100;lat=500,1000",
        "mesh:3x4",
        "mesh:5x5@bw=100,50;lat=300,700",
        "mesh:3x3",
    ] {
        let t = topo(name);
        let c = Collective::build(&CollectiveSpec::new(K::AllReduce, 64 * MIB).with_chunks_per_npu(4), &t).unwrap();
        for n in [2u32, 4] {
            let what = format!("{name}, {n} stages");
            let (s, st) = match greedy_staged(&t, &c, n, &opts, &|| false) {
                Ok(x) => x,
                // Stages that would not overlap are refused, never emitted.
                Err(e) => panic!("{what}: {e}"),
            };
            let r = engine::check(&s);
            assert!(r.valid, "{what}: {:?}", &r.violations[..r.violations.len().min(3)]);
            assert_eq!(st.stages, Some(n), "{what}");
            assert_eq!(st.phase_timesteps.len(), 2 * n as usize, "{what}");
            assert!(st.ten_timesteps < st.phase_timesteps.iter().sum::<u32>(), "{what}: {st:?}");
            assert_eq!(st.shares.as_ref().map(|x| x.chunks), Some(c.num_chunks), "{what}");
            let stage_of =
                |ch: u32| (0..n).find(|&s| (ch as usize) < (s as usize + 1) * c.num_chunks / n as usize).unwrap();
            // The steps of one phase (by op) of one stage.
            let steps = |op: Op, stage: u32| {
                s.transfers.iter().filter(move |x| x.op == op && stage_of(x.chunks[0]) == stage).map(|x| x.step)
            };
            let first_copy = steps(Op::Copy, 0).min().unwrap();
            let last_reduce = steps(Op::Reduce, 1).max().unwrap();
            assert!(
                first_copy < last_reduce,
                "{what}: stage 0 forwards from {first_copy}, stage 1 reduces until {last_reduce}"
            );
        }
    }
    // Equal rates, and a torus whose one failed link leaves 2 weak NPUs of 36: not staged.
    for t in [topo("torus:4x4"), failed(&topo("torus:6x6"), &[[0, 1]])] {
        let c = Collective::build(&CollectiveSpec::new(K::AllReduce, 64 * MIB), &t).unwrap();
        assert!(!ccsynth::synth::staged::applies(&t, &c, 2));
        assert!(greedy_staged(&t, &c, 2, &opts, &|| false).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    /// Every staged all-reduce validates, on meshes of random sides, two link speeds in either
    /// order, a few chunks per NPU and 2 to 4 stages (more stages than chunks in a stage's
    /// share included), and its timeline is shorter than its stages one after another; where
    /// the stages do not overlap it is refused, never emitted.
    #[test]
    fn staged_all_reduces_validate(a in 2usize..6, b in 2usize..6, fast_first in any::<bool>(), k in 1u32..4, stages in 2u32..5, seed in 0u64..1000) {
        use ccsynth::collective::Collective;
        use ccsynth::synth::{PlanOptions, greedy_staged, staged};
        let bw = if fast_first { "100,50" } else { "50,100" };
        let t = topo(&format!("mesh:{a}x{b}@bw={bw};lat=300,700"));
        let c = Collective::build(&CollectiveSpec::new(K::AllReduce, 64 * MIB).with_chunks_per_npu(k), &t).unwrap();
        let opts = PlanOptions { seed, switch_model: ccsynth::engine::SwitchModel::Native, discretization_ns: None };
        match greedy_staged(&t, &c, stages, &opts, &|| false) {
            Ok((s, st)) => {
                prop_assert!(staged::applies(&t, &c, stages));
                let r = engine::check(&s);
                prop_assert!(r.valid, "{:?}", &r.violations[..r.violations.len().min(3)]);
                prop_assert_eq!(st.stages, Some(stages));
                prop_assert!(st.ten_timesteps < st.phase_timesteps.iter().sum::<u32>());
            }
            Err(e) => prop_assert!(
                !staged::applies(&t, &c, stages) || e.to_string().contains("no shorter"),
                "{}", e
            ),
        }
    }
}

/// A failed NPU leaves its four neighbours with three links of four; the balanced shares make
/// them the roots of every chunk, so each phase starts from four places and most of the torus
/// waits for its first chunk. The greedy also runs the shares spread (`shares::spread`: the
/// neighbours' phase 3% longer, the chunks that frees on a few of the other NPUs), which is
/// faster than the balanced shares here: within 1.11× of the intact torus (1.103×; balanced
/// alone: 1.119×). (The engine's greedy keeps the trees here, `synth::trees`: 1.052×.)
#[test]
fn a_failed_npus_neighbours_share_their_roots() {
    let intact = auto(&topo("torus:8x8"), CollectiveSpec::new(K::AllReduce, 256 * MIB));
    let (t, c, opts) = less_npu_9();
    let (s, st) = ccsynth::synth::greedy_spread(&t, &c, &opts, &|| false).unwrap();
    let r = engine::check(&s);
    assert!(r.valid);
    let owning = st.shares.as_ref().map(|s| s.npus_owning).unwrap();
    assert!(owning > 4, "the roots stayed on the four neighbours: {st:?}");
    let ratio = r.collective_time_ns.unwrap() / intact.schedule.collective_time_ns.unwrap();
    assert!(ratio <= 1.11, "{ratio:.4}× the intact torus");
}

/// Failures that cut a collective's group apart are refused as the failures' fault (the user
/// gave no group), naming what is cut off; failures on a one-way fabric whose group was never in
/// one part are left to the collective's own reachability check.
#[test]
fn failures_that_split_the_group_are_named_as_such() {
    let ring = topo("ring:6");
    let two_breaks = Failures { links: vec![[0, 1], [3, 4]], ..Failures::default() };
    let e = engine::degraded(&ring, &[], &two_breaks).unwrap_err();
    assert_eq!(e.errors[0].path, "", "{e}");
    assert!(e.errors[0].message.contains("it falls into 2 parts (NPUs [0, 4, 5]; NPUs [1, 2, 3])"), "{e}");
    let gather = |g: &[usize]| CollectiveSpec { group: Some(g.to_vec()), ..CollectiveSpec::new(K::AllGather, MIB) };
    let e = engine::degraded(&ring, &[CollectiveSpec::new(K::AllGather, MIB)], &two_breaks).unwrap_err();
    assert!(e.errors[0].message.starts_with("they split the collective's group: it falls into 2 parts"), "{e}");
    // A group inside one half is not split.
    assert!(engine::degraded(&ring, &[gather(&[1, 2, 3])], &two_breaks).is_ok());
    // A failed NPU leaves the group (it is no part of its own), and an id that is no NPU is
    // left to the collective's check (not a panic).
    let npu_and_link = Failures { links: vec![[3, 4]], npus: vec![0], ..Failures::default() };
    assert!(engine::degraded(&ring, &[gather(&[0, 1, 2, 3])], &npu_and_link).is_ok());
    assert!(engine::degraded(&ring, &[gather(&[1, 2, 3, 99])], &two_breaks).is_ok());
    // One break leaves a line: connected.
    assert!(engine::degraded(&ring, &[], &Failures { links: vec![[0, 1]], ..Failures::default() }).is_ok());
    // Each tenant on its own: two halves of ring:8, each still a line, run; the halves as one
    // group (or every NPU) are cut.
    let ring8 = topo("ring:8");
    let halves = Failures { links: vec![[3, 4], [7, 0]], ..Failures::default() };
    assert!(engine::degraded(&ring8, &[gather(&[0, 1, 2, 3]), gather(&[4, 5, 6, 7])], &halves).is_ok());
    let e = engine::degraded(&ring8, &[gather(&[0, 1, 2, 3]), gather(&[2, 3, 4, 5])], &halves).unwrap_err();
    assert!(e.errors[0].message.starts_with("they split tenants[1]'s group: "), "{e}");
    // A split the collective does not need: the switch no longer sends to NPU 0, but a
    // broadcast from 0 still reaches every NPU (refused by the flags, run from a file);
    // an all-gather, which must reach NPU 0, is refused.
    let switch = topo("switch:4");
    let into_0 = Failures { links: vec![[4, 0]], directed: true, ..Failures::default() };
    let from_0 = CollectiveSpec::new(K::Broadcast, MIB).with_root(0);
    let after = engine::degraded(&switch, std::slice::from_ref(&from_0), &into_0).unwrap();
    assert!(ccsynth::collective::Collective::build(&from_0, &after).is_ok());
    assert!(engine::degraded(&switch, &[CollectiveSpec::new(K::AllGather, MIB)], &into_0).is_err());
    // A root whose links out are all cut is told so (it was told to fail the NPUs cut off,
    // and failing the root then was refused); a root cut from some NPUs, to fail those.
    let ring4 = topo("ring:4");
    let from_3 = [CollectiveSpec::new(K::Broadcast, MIB).with_root(3)];
    let mute = Failures { links: vec![[3, 0], [3, 2]], directed: true, ..Failures::default() };
    let e = engine::degraded(&ring4, &from_3, &mute).unwrap_err();
    assert!(
        e.errors[0]
            .message
            .ends_with("its root, NPU 3, is cut off from every other NPU of it, so the collective cannot run"),
        "{e}"
    );
    let e = engine::degraded(&ring, &[CollectiveSpec::new(K::Broadcast, MIB).with_root(0)], &two_breaks).unwrap_err();
    assert!(e.errors[0].message.ends_with("fail the NPUs cut off from its root, NPU 0, too"), "{e}");
    // A star pointing out of NPU 0 is in four parts already; failing a link does not refuse.
    let star = Topology::from_json(
        r#"{"npus": 4, "default_link": {"latency_ns": 1, "bandwidth_gb_per_s": 1},
            "links": [{"src": 0, "dst": 1}, {"src": 0, "dst": 2}, {"src": 0, "dst": 3}]}"#,
    )
    .unwrap();
    let one_way = Failures { links: vec![[0, 3]], directed: true, ..Failures::default() };
    assert!(engine::degraded(&star, &[], &one_way).is_ok());
    // Through regeneration: the failures, by name.
    let previous = greedy_at(&ring, CollectiveSpec::new(K::AllReduce, MIB)).schedule;
    let e = engine::regeneration_target(&previous, &two_breaks).unwrap_err();
    assert_eq!(e.errors[0].path, "failures", "{e}");
}

/// A failure that changes nothing is refused, naming it: an NPU that has failed already, as a
/// link already gone is, and a link of an NPU that fails too (each was a list of failures other
/// than the one meant; the NPU and the link were accepted silently).
#[test]
fn failing_what_has_failed_already_is_refused() {
    let t =
        topo("ring:4").with_failures(&Failures { npus: vec![3], links: vec![[0, 1]], ..Default::default() }).unwrap();
    let e = t.with_failures(&Failures { npus: vec![1, 3], ..Default::default() }).unwrap_err();
    assert_eq!(e.errors.len(), 1, "{e}");
    assert_eq!(
        (e.errors[0].path.as_str(), e.errors[0].message.as_str()),
        ("npus[1]", "3 has failed already in this topology")
    );
    let e = t.with_failures(&Failures { links: vec![[0, 1]], ..Default::default() }).unwrap_err();
    assert_eq!(e.errors[0].path, "links[0]", "{e}");
    assert!(e.errors[0].message.starts_with("no link 0->1"), "{e}");
    assert!(t.with_failures(&Failures { npus: vec![1], ..Default::default() }).is_ok());
    // A link of an NPU failing in the same list: the NPU takes it (it was accepted silently).
    let e = topo("ring:4").with_failures(&Failures { npus: vec![0], links: vec![[0, 1]], ..Default::default() });
    let e = e.unwrap_err();
    assert_eq!(
        (e.errors[0].path.as_str(), e.errors[0].message.as_str()),
        ("links[0]", "0->1: NPU 0 fails too, with all its links")
    );
    let other = Failures { npus: vec![0], links: vec![[1, 2]], ..Default::default() };
    assert!(topo("ring:4").with_failures(&other).is_ok());
}

/// A grid baseline refused where no reroute goes round what failed says why (it said only that
/// the topology was no whole mesh or torus): a failed NPU, or more missing links than the
/// reroute's limit (33 links of torus:16x16, 66 directed); at the limit it is rerouted.
#[test]
fn a_grid_baseline_that_is_not_rerouted_says_why() {
    let spec = CollectiveSpec::new(K::AllReduce, 16 << 20);
    let less_npu = topo("torus:4x4").with_failures(&Failures { npus: vec![5], ..Failures::default() }).unwrap();
    let e = run_seeded(&less_npu, &spec, "bucket").unwrap_err();
    assert!(e.ends_with("(NPU 5 failed: a baseline is rerouted round failed links, not NPUs)"), "{e}");
    // Links between columns 1-2, 5-6 and 9-10 of rows 0..11: no row is cut off.
    let links: Vec<[usize; 2]> = (0..11).flat_map(|r| [1, 5, 9].map(|c| [r * 16 + c, r * 16 + c + 1])).collect();
    let many = failed(&topo("torus:16x16"), &links);
    let e = run_seeded(&many, &spec, "bucket").unwrap_err();
    assert!(e.ends_with("(a mesh or torus less 66 directed links: a baseline is rerouted round at most 64)"), "{e}");
    let at_limit = failed(&topo("torus:16x16"), &links[..32]);
    assert!(run_seeded(&at_limit, &spec, "bucket").is_ok());
}
