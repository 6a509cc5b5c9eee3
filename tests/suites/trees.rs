//! The all-reduce of per-chunk trees (`synth::trees`): a closed form on two NPUs, validity and
//! the one-message-a-link-and-timestep cost model on random tori with failed links, the trees'
//! balance, and where it serves.

use crate::common::*;
use ccsynth::collective::{Collective, CollectiveKind as K, CollectiveSpec};
use ccsynth::engine;
use ccsynth::schedule::{Op, Schedule};
use ccsynth::synth::{Effort, trees};
use ccsynth::topology::{DegradedLink, Failures, Topology};
use proptest::prelude::*;
use std::collections::HashMap;

const MIB: u64 = 1 << 20;

fn plan(t: &Topology, spec: CollectiveSpec, group: usize, seed: u64) -> (Collective, Schedule, u32) {
    let c = Collective::build(&spec, t).unwrap();
    let (s, st) = trees::all_reduce(t, &c, group, seed, &|| false).unwrap();
    (c, s, st.ten_timesteps)
}

/// Messages on the busiest directed link.
fn busiest(s: &Schedule) -> u32 {
    let mut per: HashMap<(u32, u32), u32> = HashMap::new();
    for t in s.transfers.iter() {
        *per.entry((t.src, t.dst)).or_default() += 1;
    }
    per.into_values().max().unwrap_or(0)
}

/// Two NPUs, k chunks each: every tree is the one link, rooted at either end (the roots
/// alternate), so each direction carries one partial and one result per chunk, 2k messages,
/// and the timeline keeps both directions busy from the first timestep to the last: the
/// all-reduce takes 2k messages' time, (2k)·α + M/β, the same as a ring all-reduce on two NPUs.
#[test]
fn two_npus_take_one_message_per_chunk_each_way() {
    let t = topo("ring:2");
    for k in [1u32, 2, 3, 8] {
        let size = 64 * MIB;
        let (_, s, steps) = plan(&t, CollectiveSpec::new(K::AllReduce, size).with_chunks_per_npu(k), 1, 3);
        let c = 2 * k;
        assert_eq!(steps, c, "k = {k}");
        assert_eq!(s.transfers.len(), 2 * c as usize);
        assert_eq!(busiest(&s), c);
        let r = engine::check(&s);
        assert!(r.valid, "{:?}", r.violations);
        let expected = c as f64 * 500.0 + size as f64 / 100.0;
        let time = r.collective_time_ns.unwrap();
        assert!(close(time, expected), "k = {k}: {time} ns, expected {expected} ns");
    }
}

/// Every tree uses each of its edges once each way, so a balanced set of trees loads every
/// link alike: on torus:8x8 less three links (125 links left, 256 trees of 63 edges) the
/// busiest link carries ⌈256 · 63 / 125⌉ = 130 messages, and the timeline is within a few
/// timesteps of that. The NPUs beside the failed links are leaves of more trees than the
/// others: over three links they carry about as many messages a link as the rest over four.
#[test]
fn the_trees_load_every_link_alike() {
    let t = topo("torus:8x8")
        .with_failures(&Failures { links: vec![[0, 1], [9, 10], [20, 21]], ..Failures::default() })
        .unwrap();
    let (_, s, steps) = plan(&t, CollectiveSpec::new(K::AllReduce, 256 * MIB).with_chunks_per_npu(4), 1, 0);
    assert!(engine::check(&s).valid);
    let top = busiest(&s);
    assert_eq!(top, (256u32 * 63).div_ceil(125));
    assert!(steps >= top && steps <= top + 3, "{steps} timesteps, busiest link {top}");
    // Partials into and results out of NPU 0 (three links) against NPU 27 (four).
    let into = |v: u32| s.transfers.iter().filter(|t| t.dst == v).count() as f64;
    let per_link_0 = into(0) / 3.0;
    let per_link_27 = into(27) / 4.0;
    assert!((per_link_0 - per_link_27).abs() <= 0.05 * per_link_27, "{per_link_0} against {per_link_27}");
}

/// Forward–backward passes stop in a local optimum; restarts from noisy priorities leave it.
/// On torus:8x8x8 less link 5-6 at three chunks a message (171 trees, busiest link 57) the
/// passes alone take 58 timesteps with this seed (62 with the trees' parents fixed); the
/// restarts bring it to 57, the busiest link's load, a valid schedule that still keeps one
/// message a link and timestep.
#[test]
fn restarts_shorten_the_timeline() {
    let t = topo("torus:8x8x8").with_failures(&Failures { links: vec![[5, 6]], ..Failures::default() }).unwrap();
    let (_, s, steps) = plan(&t, CollectiveSpec::new(K::AllReduce, 64 * MIB), 3, 0);
    assert!(engine::check(&s).valid);
    let top = busiest(&s);
    assert_eq!((top, steps), (57, 57), "timesteps against the busiest link");
    let mut slots = std::collections::HashSet::new();
    assert!(s.transfers.iter().all(|x| slots.insert((x.src, x.dst, x.step))));
}

/// What the restarts' budget leaves beyond their count goes to a second walk that rebalances
/// the links: on torus:8x8 less three links at 64 MiB in 86 trees of three chunks (four per
/// NPU) the plain walk stays at 45 timesteps against a busiest link of 44; the rebalancing one
/// reaches 44. Through the default door that run wins: 368.0 µs, 1.088 times the intact
/// all-reduce (338.3 µs, bucket-bidir's time, which the greedy's translation in rounds ties:
/// issue 26's 1.08 is missed by 0.8% since the intact got faster).
#[test]
fn a_spare_walk_rebalances_the_links() {
    let three = Failures { links: vec![[0, 1], [9, 10], [20, 21]], ..Failures::default() };
    let t = topo("torus:8x8").with_failures(&three).unwrap();
    let (_, s, steps) = plan(&t, CollectiveSpec::new(K::AllReduce, 64 * MIB).with_chunks_per_npu(4), 3, 0);
    assert!(engine::check(&s).valid);
    assert_eq!((steps, busiest(&s)), (44, 44));
    let spec = CollectiveSpec::new(K::AllReduce, 64 * MIB);
    let (out, ratio) = trees_against_intact("torus:8x8", &three, &spec, intact_ns("torus:8x8", &spec));
    assert!(ratio <= 1.09, "{ratio}");
    let st = out.stats.synthesis().unwrap();
    assert_eq!((st.chunks_per_message, out.schedule.num_chunks), (Some(3), 4 * 64));
}

/// The attempt shortest after its passes is not always the one shortest after restarts, so
/// the best two are restarted and the shorter kept. On torus:16x16 less three links at 64 MiB
/// in messages of three chunks (171 trees, two chunks per NPU) with seed 0 the attempts take
/// 92, 90, 90 and 90 timesteps after their passes; restarted, the first 90 ends at 89 and the
/// second at 88, a valid schedule of one message a link and timestep.
#[test]
fn the_two_best_attempts_are_restarted() {
    let three = Failures { links: vec![[0, 1], [17, 18], [100, 101]], ..Failures::default() };
    let t = topo("torus:16x16").with_failures(&three).unwrap();
    let (_, s, steps) = plan(&t, CollectiveSpec::new(K::AllReduce, 64 * MIB).with_chunks_per_npu(2), 3, 0);
    assert!(steps <= 88, "{steps} timesteps: only the best attempt restarted (89)?");
    assert!(busiest(&s) <= steps);
    assert!(engine::check(&s).valid);
    let mut slots = std::collections::HashSet::new();
    assert!(s.transfers.iter().all(|x| slots.insert((x.src, x.dst, x.step))));
}

/// From 1000 NPUs a standard run makes one attempt and neither restarts nor leaves its timeline
/// to the polish (a torus:32x32 regeneration has 2 s); a thorough one makes four, restarts the
/// best, and resumes for the polish: torus:32x32 less NPU 9 at 64 MiB in fours (256 trees),
/// 136 timesteps standard, 135 thorough (the polish then takes it to 132).
#[test]
fn a_thorough_effort_searches_on_from_a_thousand_npus() {
    let t = topo("torus:32x32").with_failures(&Failures { npus: vec![9], ..Failures::default() }).unwrap();
    let c = Collective::build(&CollectiveSpec::new(K::AllReduce, 64 * MIB).with_chunks_per_npu(1), &t).unwrap();
    let (_, standard, resume) = trees::all_reduce_resumable(&t, &c, 4, 0, Effort::Standard, &|| false).unwrap();
    assert!(resume.is_none(), "a standard run is not polished");
    assert_eq!(standard.ten_timesteps, 136);
    let (s, thorough, resume) = trees::all_reduce_resumable(&t, &c, 4, 0, Effort::Thorough, &|| false).unwrap();
    assert_eq!(thorough.ten_timesteps, 135, "one attempt, no restarts?");
    assert!(resume.is_some(), "a thorough run above its busiest link is left to the polish");
    assert!(busiest(&s) <= thorough.ten_timesteps);
    assert!(engine::check(&s).valid);
}

/// The polish runs at `Effort::Thorough` alone, goes on from where a run stopped and only ever
/// shortens it: on torus:4x8 less link 1-2 at 64 MiB (32 trees, one chunk each) a standard run
/// is left as it is, and a thorough one's 19 timesteps, over its busiest link, the polish's walks
/// bring to 18, a valid schedule of one message a link and timestep whose time is its
/// timesteps' worth of messages. A run already at its busiest link's load (two NPUs), or
/// longer than 200 timesteps, is not polished.
#[test]
fn the_polish_runs_at_a_thorough_effort_and_shortens_the_run() {
    let t = topo("torus:4x8").with_failures(&Failures { links: vec![[1, 2]], ..Failures::default() }).unwrap();
    let c = Collective::build(&CollectiveSpec::new(K::AllReduce, 64 * MIB).with_chunks_per_npu(1), &t).unwrap();
    let (_, _, resume) = trees::all_reduce_resumable(&t, &c, 1, 0, Effort::Standard, &|| false).unwrap();
    assert!(resume.is_none(), "a standard run is not polished");
    let (s, st, resume) = trees::all_reduce_resumable(&t, &c, 1, 0, Effort::Thorough, &|| false).unwrap();
    let top = busiest(&s);
    assert!(st.ten_timesteps > top, "the run is at its busiest link already: nothing to show");
    assert_eq!(st.ten_timesteps, 19);
    let (polished, pst) = trees::polish(resume.expect("a run above its busiest link resumes"), &t, &c, &|| false)
        .unwrap()
        .expect("the walks shorten it");
    assert_eq!(pst.ten_timesteps, 18);
    assert!(pst.ten_timesteps >= busiest(&polished));
    let r = engine::check(&polished);
    assert!(r.valid, "{:?}", &r.violations[..r.violations.len().min(3)]);
    assert_eq!(polished.transfers.len(), s.transfers.len());
    let mut slots = std::collections::HashSet::new();
    assert!(polished.transfers.iter().all(|x| slots.insert((x.src, x.dst, x.step))));
    let step = 500.0 + c.chunk_size_bytes / 100.0;
    assert!(r.collective_time_ns.unwrap() <= pst.ten_timesteps as f64 * step * (1.0 + 1e-9));
    // Two NPUs: every tree is the link, the timeline its load from the start.
    let t2 = topo("ring:2");
    let c2 = Collective::build(&CollectiveSpec::new(K::AllReduce, MIB).with_chunks_per_npu(4), &t2).unwrap();
    assert!(trees::all_reduce_resumable(&t2, &c2, 1, 0, Effort::Thorough, &|| false).unwrap().2.is_none());
    // Nor one of more than 200 timesteps, where a timestep is under 0.5% of the time: 512
    // trees on the intact mesh:8x8.
    let t3 = topo("mesh:8x8");
    let c3 = Collective::build(&CollectiveSpec::new(K::AllReduce, 256 * MIB).with_chunks_per_npu(8), &t3).unwrap();
    let (_, st3, resume3) = trees::all_reduce_resumable(&t3, &c3, 1, 0, Effort::Thorough, &|| false).unwrap();
    assert!(st3.ten_timesteps > 200 && resume3.is_none(), "{} timesteps", st3.ten_timesteps);
    // A cancel stops it.
    let (_, _, resume) = trees::all_reduce_resumable(&t, &c, 1, 0, Effort::Thorough, &|| false).unwrap();
    assert!(trees::polish(resume.unwrap(), &t, &c, &|| true).unwrap_err().is_cancelled());
}

/// Issue 26's target at 64 MiB, with the parents chosen as the moves are placed and no polish:
/// torus:8x8 less NPU 9, the default door within 1.08 times the intact torus's all-reduce
/// (365.0 µs against 338.3: 1.079).
#[test]
fn at_64_mib_the_trees_stay_within_8_percent_of_intact_after_a_failed_npu_unpolished() {
    let spec = CollectiveSpec::new(K::AllReduce, 64 * MIB);
    let less_npu_9 = Failures { npus: vec![9], ..Failures::default() };
    let (out, ratio) = trees_against_intact("torus:8x8", &less_npu_9, &spec, intact_ns("torus:8x8", &spec));
    assert!(ratio <= 1.08, "{ratio}");
    let st = out.stats.synthesis().unwrap();
    assert!(st.greedy.as_ref().is_some_and(|g| g.polish.is_none()), "a standard synthesis polishes nothing");
}

/// Issue 26's case at 64 MiB on torus:16x16 less three links: the second chunking (two
/// chunks per NPU) in threes, 171 trees, wins (88 timesteps, 390.03 µs; the runs without it
/// reach 390.52): 1.114 times the intact all-reduce (350.2 µs, bucket-bidir's, which the
/// greedy's translation in rounds ties). Issue 26's 1.08 is missed here: it was met against
/// the greedy's intact translation (399.5 µs) before bucket-bidir and the rounds.
#[test]
fn at_64_mib_the_second_chunking_in_threes_wins_on_torus_16x16_less_three_links() {
    let spec = CollectiveSpec::new(K::AllReduce, 64 * MIB);
    let three = Failures { links: vec![[0, 1], [17, 18], [100, 101]], ..Failures::default() };
    let (out, ratio) = trees_against_intact("torus:16x16", &three, &spec, intact_ns("torus:16x16", &spec));
    let st = out.stats.synthesis().unwrap();
    assert_eq!((st.chunks_per_message, out.schedule.num_chunks), (Some(3), 2 * 256));
    assert!(ratio <= 1.12, "{ratio}");
}

/// Issue 63's all-reduce after a failure at 128 MiB on torus:4x4x8 less link 0-1: the trees
/// at 96 units (six chunks per NPU in eights), the busiest link's load a whole 32 messages
/// (`trees_units_by_load`): 463.4 µs, 1.041× the two-pass bound, against 1.061× in units of
/// 1 MiB (43 timesteps of 42.4 messages' load).
#[test]
fn at_128_mib_a_whole_load_of_units_takes_torus_4x4x8_less_a_link_within_5_percent() {
    let t = topo("torus:4x4x8").with_failures(&Failures { links: vec![[0, 1]], ..Failures::default() }).unwrap();
    let out = run_request(&t, engine::RequestSpec::new(CollectiveSpec::new(K::AllReduce, 128 * MIB))).unwrap();
    assert!(out.report.valid);
    let st = out.stats.synthesis().expect("the greedy wins");
    assert_eq!(st.greedy_mode(), Some("trees"));
    assert_eq!((out.schedule.num_chunks.div_ceil(st.chunks_per_message.unwrap_or(1) as usize), st.rounds), (96, 32));
    let (time, bound) = (out.schedule.collective_time_ns.unwrap(), out.report.lower_bound_ns.unwrap());
    assert!(time <= 1.05 * bound, "{time} against {bound}");
}

/// The default door's all-reduce `spec` on the intact `torus`: its time.
fn intact_ns(torus: &str, spec: &CollectiveSpec) -> f64 {
    run_request(&topo(torus), engine::RequestSpec::new(spec.clone())).unwrap().schedule.collective_time_ns.unwrap()
}

/// The default door's all-reduce `spec` on `torus` less `failures`, checked valid and won by
/// the trees, and its time over `intact_ns`.
fn trees_against_intact(
    torus: &str,
    failures: &Failures,
    spec: &CollectiveSpec,
    intact_ns: f64,
) -> (engine::Output, f64) {
    let t = topo(torus).with_failures(failures).unwrap();
    let out = run_request(&t, engine::RequestSpec::new(spec.clone())).unwrap();
    assert!(out.report.valid, "{failures:?}");
    let st = out.stats.synthesis().expect("the greedy wins");
    assert_eq!(st.greedy_mode(), Some("trees"), "{failures:?}");
    let ratio = out.schedule.collective_time_ns.unwrap() / intact_ns;
    (out, ratio)
}

/// Messages of several chunks carry aligned runs of consecutive chunks (the last run short
/// where the chunks do not divide), reductions go up and copies down.
#[test]
fn groups_move_as_one_message() {
    let t = topo("torus:4x4").with_failures(&Failures { npus: vec![5], ..Failures::default() }).unwrap();
    let (c, s, _) = plan(&t, CollectiveSpec::new(K::AllReduce, 16 * MIB).with_chunks_per_npu(2), 4, 9);
    assert_eq!(c.num_chunks, 30);
    assert!(engine::check(&s).valid);
    let units = 30usize.div_ceil(4);
    assert_eq!(s.transfers.len(), units * 2 * 14);
    for t in s.transfers.iter() {
        assert!(t.chunks[0] % 4 == 0 && t.chunks.windows(2).all(|w| w[1] == w[0] + 1), "{:?}", t.chunks);
        assert_eq!(t.chunks.len(), if t.chunks[0] == 28 { 2 } else { 4 });
    }
    let reduces = s.transfers.iter().filter(|t| t.op == Op::Reduce).count();
    assert_eq!(reduces * 2, s.transfers.len());
}

/// Where it does not serve: another collective, switches; a link more than eight times slower
/// than the fastest is left out (a quarter of the bandwidth is planned around: four timesteps
/// a message), and refuses the trees only where the rest does not connect the group.
#[test]
fn it_serves_an_all_reduce_over_direct_links_up_to_eight_times_slower() {
    let ar = CollectiveSpec::new(K::AllReduce, 16 * MIB);
    let serves = |t: &str, spec: &CollectiveSpec| {
        let t = topo(t);
        let c = Collective::build(spec, &t).unwrap();
        trees::applies(&t, &c, 1)
    };
    assert!(serves("torus:4x4", &ar));
    assert!(serves("hypercube:4", &ar));
    assert!(!serves("torus:4x4", &CollectiveSpec::new(K::AllGather, 16 * MIB)));
    assert!(!serves("torus:4x4", &CollectiveSpec::new(K::ReduceScatter, 16 * MIB)));
    assert!(serves("mesh:4x4@bw=50,100;lat=500,1000", &ar));
    assert!(!serves("switch:8", &ar));
    let slowed = |bw: f64| {
        let link = DegradedLink { link: [0, 1], bandwidth_gb_per_s: Some(bw), latency_ns: None };
        let t =
            topo("torus:4x4").with_failures(&Failures { degraded_links: vec![link], ..Failures::default() }).unwrap();
        let c = Collective::build(&ar, &t).unwrap();
        trees::applies(&t, &c, 1)
    };
    // 16 MiB on 16 NPUs: a chunk is 1 MiB, 10.99 µs at 100 GB/s; 42.4 µs at 25, 105.4 at 10.
    assert!(slowed(25.0));
    // Left out: the torus without it still connects (the trees were refused outright).
    assert!(slowed(10.0));
    let line = topo("mesh:4x1")
        .with_failures(&Failures {
            degraded_links: vec![DegradedLink { link: [0, 1], bandwidth_gb_per_s: Some(10.0), latency_ns: None }],
            ..Failures::default()
        })
        .unwrap();
    let c = Collective::build(&ar, &line).unwrap();
    assert!(!trees::applies(&line, &c, 1), "NPU 0's only link left out: the line is cut");
    let t = topo("torus:4x4");
    let c = Collective::build(&ar, &t).unwrap();
    assert!(
        trees::all_reduce(&t, &Collective::build(&CollectiveSpec::new(K::AllGather, MIB), &t).unwrap(), 1, 0, &|| {
            false
        })
        .is_err()
    );
    // A cancel stops it.
    assert!(trees::all_reduce(&t, &c, 1, 0, &|| true).unwrap_err().is_cancelled());
}

/// Issue 26's targets on torus:8x8 that the shares could not meet: three failed links and a
/// failed NPU, the default door within 1.08 times the intact torus's all-reduce, by trees.
#[test]
fn after_three_failed_links_or_a_failed_npu_the_trees_stay_within_8_percent() {
    let spec = CollectiveSpec::new(K::AllReduce, 256 * MIB);
    let intact = intact_ns("torus:8x8", &spec);
    for failures in [
        Failures { links: vec![[0, 1], [9, 10], [20, 21]], ..Failures::default() },
        Failures { npus: vec![9], ..Failures::default() },
    ] {
        let (_, ratio) = trees_against_intact("torus:8x8", &failures, &spec, intact);
        assert!(ratio <= 1.08, "{failures:?}: {ratio}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// On tori of 3 to 6 a side with up to three failed links (as long as the torus stays in
    /// one part), 1 to 3 chunks a NPU and 1 to 3 chunks a message: the schedule validates,
    /// moves each message up and down its tree once (2 (n − 1) messages a tree), takes no fewer
    /// timesteps than its busiest link's messages, and its simulated time is its timesteps'
    /// worth of one message each (every link alike).
    #[test]
    fn trees_validate_on_tori_with_failed_links(a in 3usize..7, b in 3usize..7, fails in prop::collection::vec((0usize..36, any::<bool>()), 0..4), k in 1u32..4, group in 1usize..4, seed in 0u64..1000) {
        let t = topo(&format!("torus:{a}x{b}"));
        let n = a * b;
        let links: Vec<[usize; 2]> = fails
            .iter()
            .map(|&(at, along_y)| {
                let u = at % n;
                let (x, y) = (u % a, u / a);
                let v = if along_y { x + a * ((y + 1) % b) } else { (x + 1) % a + a * y };
                [u, v]
            })
            .collect();
        let Ok(t) = t.with_failures(&Failures { links, ..Failures::default() }) else { return Ok(()) };
        let spec = CollectiveSpec::new(K::AllReduce, 8 * MIB).with_chunks_per_npu(k);
        let Ok(c) = Collective::build(&spec, &t) else { return Ok(()) };
        let (s, st) = trees::all_reduce(&t, &c, group, seed, &|| false).unwrap();
        let r = engine::check(&s);
        prop_assert!(r.valid, "{:?}", &r.violations[..r.violations.len().min(3)]);
        prop_assert_eq!(s.transfers.len(), c.num_chunks.div_ceil(group) * 2 * (n - 1));
        prop_assert!(st.ten_timesteps >= busiest(&s));
        let step = 500.0 + c.chunk_size_bytes * group as f64 / 100.0;
        let time = r.collective_time_ns.unwrap();
        prop_assert!(time <= st.ten_timesteps as f64 * step * (1.0 + 1e-9), "{} > {} steps", time, st.ten_timesteps);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    /// With links of other speeds (up to three slowed to 20–90% of their bandwidth, or a mesh
    /// of two): the schedule validates, each timestep holds what it carries (its simulated time
    /// is within its timesteps of the fastest link's message, 2% slack aside, since a slow link's message holds
    /// its link for its time rounded up to whole timesteps), and the busiest link's messages,
    /// each counted at its timesteps, fit in them.
    #[test]
    fn trees_on_slow_links_keep_each_link_busy_as_long_as_its_messages_take(a in 3usize..6, b in 3usize..6, slow in prop::collection::vec((0usize..25, 20u32..90), 1..4), k in 1u32..3, group in 1usize..3, seed in 0u64..1000, mixed in any::<bool>()) {
        let n = a * b;
        let t = if mixed {
            topo(&format!("mesh:{a}x{b}@bw=50,100;lat=500,1000"))
        } else {
            let mut links: Vec<DegradedLink> = Vec::new();
            for &(at, pct) in &slow {
                let u = at % n;
                let v = (u % a + 1) % a + a * (u / a);
                // Each link slowed once (a link named twice is the caller's error).
                if !links.iter().any(|l| l.link == [u, v] || l.link == [v, u]) {
                    links.push(DegradedLink { link: [u, v], bandwidth_gb_per_s: Some(pct as f64), latency_ns: None });
                }
            }
            topo(&format!("torus:{a}x{b}")).with_failures(&Failures { degraded_links: links, ..Failures::default() }).unwrap()
        };
        let spec = CollectiveSpec::new(K::AllReduce, 8 * MIB).with_chunks_per_npu(k);
        let c = Collective::build(&spec, &t).unwrap();
        prop_assume!(trees::applies(&t, &c, group));
        let (s, st) = trees::all_reduce(&t, &c, group, seed, &|| false).unwrap();
        let r = engine::check(&s);
        prop_assert!(r.valid, "{:?}", &r.violations[..r.violations.len().min(3)]);
        prop_assert_eq!(s.transfers.len(), c.num_chunks.div_ceil(group) * 2 * (n - 1));
        let bytes = c.chunk_size_bytes * group as f64;
        let time_of = |u: u32, v: u32| t.link(u as usize, v as usize).unwrap().time_ns(bytes);
        let step = t.links().iter().map(|l| l.time_ns(bytes)).fold(f64::INFINITY, f64::min);
        prop_assert!((st.discretization_ns - step).abs() <= 1e-9 * step);
        // A message within 2% of a whole number of timesteps counts as that number
        // (`trees::Fabric::cost`), so each may run up to 2% of a timestep late.
        let slack = 0.02;
        let cost = |u: u32, v: u32| (time_of(u, v).max(time_of(v, u)) / step - slack).ceil().max(1.0) as u32;
        let mut held: HashMap<(u32, u32), u32> = HashMap::new();
        for m in s.transfers.iter() {
            *held.entry((m.src, m.dst)).or_default() += cost(m.src, m.dst);
        }
        prop_assert!(st.ten_timesteps >= held.into_values().max().unwrap_or(0));
        let time = r.collective_time_ns.unwrap();
        prop_assert!(time <= st.ten_timesteps as f64 * step * (1.0 + slack + 1e-9), "{} > {} steps of {}", time, st.ten_timesteps, step);
    }
}

/// On the mixed-bandwidth mesh of issue 63's table (links of 50 and 100 GB/s), `auto`'s
/// all-reduce at 256 MiB is the trees' (with each link's messages at its own speed): 2.439 ms,
/// 1.090× the bound, against 2.764 ms (1.236×) with the trees refused there (9ef0df7).
#[test]
fn the_mixed_mesh_all_reduce_is_the_trees_within_10_percent_of_its_bound() {
    let t = topo("mesh:4x4@bw=50,100;lat=500,1000");
    let auto = engine::RequestSpec {
        algorithm: "auto".parse().unwrap(),
        ..engine::RequestSpec::new(CollectiveSpec::new(K::AllReduce, 256 * MIB))
    };
    let out = run_request(&t, auto).unwrap();
    let (time, bound) = (out.schedule.collective_time_ns.unwrap(), out.report.lower_bound_ns.unwrap());
    assert!(time <= 1.10 * bound, "{time} against {bound}");
    assert_eq!(out.stats.synthesis().and_then(|s| s.greedy_mode()), Some("trees"));
}

/// The shared conformance body on trees' schedules (the engine's greedy keeps them only where
/// they are the fastest, so the suite's own cases may not meet them): valid, no faster than the
/// bound, stored packed, and replayed as Chakra traces, an MSCCL++ plan and MSCCL XML where
/// those run an all-reduce.
#[test]
fn trees_schedules_conform() {
    let cases: [(&str, Failures, u32, usize); 4] = [
        ("torus:4x4", Failures { links: vec![[0, 1]], ..Failures::default() }, 2, 1),
        ("torus:4x4", Failures { npus: vec![5], ..Failures::default() }, 2, 3),
        ("hypercube:3", Failures::default(), 1, 1),
        ("ring:2", Failures::default(), 3, 2),
    ];
    for (spec, failures, k, group) in cases {
        let t = topo(spec).with_failures(&failures).unwrap();
        let (_, mut s, _) = plan(&t, CollectiveSpec::new(K::AllReduce, 4 * MIB).with_chunks_per_npu(k), group, 5);
        s.collective_time_ns = engine::check(&s).collective_time_ns;
        crate::conformance::conform(&format!("trees on {spec} {failures:?} k={k} group={group}"), &s);
    }
}
