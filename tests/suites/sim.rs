//! Simulator: closed-form α-β times, link sharing, paths, γ, and the hand-written example.

use crate::common::*;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine;
use ccsynth::schedule::{Schedule, Transfer};
use ccsynth::sim::simulate;
use ccsynth::topology::Topology;

const ALPHA: f64 = 500.0;
const BW: f64 = 100.0;

#[test]
fn unidirectional_ring_all_gather_takes_p_minus_1_hops() {
    for p in 2..=12usize {
        for k in [1usize, 3] {
            let n = 1_000_003u64;
            let t = topo(&format!("ring:{p}:uni"));
            let c = coll_spec(&t, CollectiveSpec::new(K::AllGather, n).with_chunks_per_npu(k as u32));
            let order: Vec<usize> = (0..p).collect();
            let s = sched(&t, &c, ring_all_gather(&order, k, &no_path));
            let r = engine::check(&s);
            assert!(r.valid, "p={p}: {:?}", r.violations);
            let m = n as f64 / p as f64; // k chunks of n/(pk) travel as one message
            let want = (p - 1) as f64 * (ALPHA + m / BW);
            assert!(
                close(r.collective_time_ns.unwrap(), want),
                "p={p} k={k}: {} vs {want}",
                r.collective_time_ns.unwrap()
            );
            assert_eq!(r.rounds, p - 1);
        }
    }
}

#[test]
fn ring_all_reduce_takes_2_p_minus_1_hops() {
    for p in 2..=12usize {
        let n = 1u64 << 20;
        let t = topo(&format!("ring:{p}"));
        let c = coll(&t, K::AllReduce, n);
        let order: Vec<usize> = (0..p).collect();
        let s = sched(&t, &c, ring_all_reduce(&order, &no_path));
        let r = engine::check(&s);
        assert!(r.valid, "p={p}: {:?}", r.violations);
        let want = 2.0 * (p - 1) as f64 * (ALPHA + (n as f64 / p as f64) / BW);
        assert!(close(r.collective_time_ns.unwrap(), want), "p={p}");
    }
}

#[test]
fn gamma_is_charged_on_reduces_only() {
    let p = 5usize;
    let n = 50_000u64;
    let t = topo(&format!("ring:{p}"));
    let mut spec = CollectiveSpec::new(K::AllReduce, n);
    spec.gamma_ns_per_byte = Some(0.25);
    let c = coll_spec(&t, spec);
    let order: Vec<usize> = (0..p).collect();
    let s = sched(&t, &c, ring_all_reduce(&order, &no_path));
    let m = n as f64 / p as f64;
    let want = (p - 1) as f64 * (ALPHA + m / BW + 0.25 * m) + (p - 1) as f64 * (ALPHA + m / BW);
    assert!(close(simulate(&s).unwrap().collective_time_ns, want));
}

/// The committed example: a ring all-reduce on torus:4x4 in row-major order, whose four
/// row-wrapping hops are routed over two links each (`path`s) through an NPU, which stores and
/// forwards. No link is shared, and a relay's second hop overlaps the next step's first: the
/// time is the longest chain of a chunk's hops, 2(p−1) of them, of which a chain starting at a
/// wrap crosses one 8 times (every fourth hop): (2(p−1) + 8)(α + (n/p)β).
#[test]
fn hand_written_torus_example_validates_and_simulates_as_specified() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ring-allreduce-torus4x4.json")).unwrap();
    let s = Schedule::from_json(&text).unwrap();
    let r = engine::check(&s);
    assert!(r.valid, "{:?}", r.violations);
    let want = (2.0 * 15.0 + 8.0) * (ALPHA + 65536.0 / BW);
    assert!(close(r.collective_time_ns.unwrap(), want));
    assert_eq!(r.rounds, 30);
    assert!(s.transfers.iter().any(|t| t.path.as_ref().is_some_and(|p| p.len() == 3)));
    // Built in code from the same rule, it is the same schedule.
    let t = topo("torus:4x4");
    let c = coll(&t, K::AllReduce, 1 << 20);
    let path = |a: usize, b: usize| (a % 4 == 3).then(|| vec![a as u32, ((a + 4) % 16) as u32, b as u32]);
    let order: Vec<usize> = (0..16).collect();
    let built = sched(&t, &c, ring_all_reduce(&order, &path));
    assert_eq!(built.transfers, s.transfers);
    // A relay's links are each busy for their own hop only: the first link of the 3 → 7 → 4
    // detour 30 hops of α + (n/p)β, a 30/38 share of the time.
    let timing = r.timing.unwrap();
    let l = timing.links.iter().find(|l| l.src == 3 && l.dst == 7).unwrap();
    assert!(close(l.busy_ns, 30.0 * (ALPHA + 65536.0 / BW)));
    assert!(close(l.utilization, 30.0 / 38.0));
    assert_eq!(l.transfers, 30);
}

fn two_chunk_broadcast(transfers: Vec<Transfer>) -> f64 {
    let t = topo("fc:2");
    let c = coll_spec(&t, CollectiveSpec::new(K::Broadcast, 2000).with_root(0).with_chunks_per_npu(2));
    let s = sched(&t, &c, transfers);
    let r = engine::check(&s);
    assert!(r.valid, "{:?}", r.violations);
    r.collective_time_ns.unwrap()
}

#[test]
fn one_message_pays_alpha_once_and_shared_links_serialize() {
    let d = ALPHA + 1000.0 / BW;
    // Two messages on one link in one step run back to back.
    let two = two_chunk_broadcast(vec![Transfer::copy(0, 0, 1, vec![0]), Transfer::copy(0, 0, 1, vec![1])]);
    assert!(close(two, 2.0 * d));
    // One message with both chunks pays α once.
    let one = two_chunk_broadcast(vec![Transfer::copy(0, 0, 1, vec![0, 1])]);
    assert!(close(one, ALPHA + 2000.0 / BW));
}

#[test]
fn a_path_pays_every_latency_and_the_slowest_bandwidth() {
    let t = Topology::from_json(
        r#"{"npus": 2, "switches": 1, "links": [
            {"src": 0, "dst": 2, "latency_ns": 100, "bandwidth_gb_per_s": 50, "bidirectional": true},
            {"src": 2, "dst": 1, "latency_ns": 300, "bandwidth_gb_per_s": 20, "bidirectional": true}]}"#,
    )
    .unwrap();
    let c = coll(&t, K::AllGather, 8000);
    let s = sched(
        &t,
        &c,
        vec![Transfer::copy(0, 0, 1, vec![0]).via(vec![0, 2, 1]), Transfer::copy(0, 1, 0, vec![1]).via(vec![1, 2, 0])],
    );
    let r = engine::check(&s);
    assert!(r.valid, "{:?}", r.violations);
    assert!(close(r.collective_time_ns.unwrap(), 400.0 + 4000.0 / 20.0));
    let timing = r.timing.unwrap();
    assert_eq!(timing.links.len(), 4);
    assert!(close(timing.bytes_on_links, 4.0 * 4000.0));
}

/// A relay through an NPU stores and forwards: on ring:4:uni a broadcast from 0 sends chunk 0
/// to NPU 2 through NPU 1 (two hops, each α + n/β, one after the other) and chunk 1 to NPU 1
/// directly, after it in the step: 0 -> 1 carries chunk 0 then chunk 1, and 1 -> 2 carries
/// chunk 0 from when it arrived. Through a switch the path is cut through (the test above).
#[test]
fn a_relay_through_an_npu_stores_and_forwards() {
    let t = topo("ring:4:uni");
    let c = coll_spec(&t, CollectiveSpec::new(K::Broadcast, 2000).with_root(0).with_chunks_per_npu(2));
    let d = ALPHA + 1000.0 / BW;
    let relayed = Transfer::copy(0, 0, 2, vec![0]).via(vec![0, 1, 2]);
    let s = sched(&t, &c, vec![relayed.clone(), Transfer::copy(0, 0, 1, vec![1])]);
    let (timing, times) = ccsynth::sim::simulate_with_times(&s).unwrap();
    // 0 -> 2: [0, d] on 0 -> 1, then [d, 2d] on 1 -> 2; 0 -> 1 (chunk 1) queues: [d, 2d].
    assert!(close(times[0].start_ns, 0.0) && close(times[0].end_ns, 2.0 * d), "{:?}", times[0]);
    assert!(close(times[1].start_ns, d) && close(times[1].end_ns, 2.0 * d), "{:?}", times[1]);
    assert!(close(timing.collective_time_ns, 2.0 * d));
    // Each link is busy for its own hop only, and the load bound sees that.
    let busy: Vec<f64> = timing.links.iter().map(|l| l.busy_ns).collect();
    assert!(busy.len() == 2 && close(busy[0], 2.0 * d) && close(busy[1], d), "{busy:?}");
    assert!(close(ccsynth::sim::link_load_bound_ns(&s).unwrap(), 2.0 * d));
    // Cut through, 0 -> 2 would hold both links for 2α + n/β and chunk 1 end at 3α + 2n/β.
}

/// A step's later hops are booked after all its first hops (hop-major), a static order the
/// MSCCL and MSCCL++ exports pin: the relay's forward of chunk 0 (through NPU 1, arrived at d)
/// waits on link 1 -> 2 behind NPU 1's own first hop of the step, whose chunk only arrives over
/// the slow link 3 -> 1 at 1500 ns. First come, first served would have sent it at d.
#[test]
fn a_steps_later_hops_go_after_its_first_hops() {
    let t = Topology::from_json(
        r#"{"npus": 4, "links": [
            {"src": 0, "dst": 1, "latency_ns": 500, "bandwidth_gb_per_s": 100, "bidirectional": true},
            {"src": 1, "dst": 2, "latency_ns": 500, "bandwidth_gb_per_s": 100, "bidirectional": true},
            {"src": 3, "dst": 1, "latency_ns": 500, "bandwidth_gb_per_s": 1, "bidirectional": true}]}"#,
    )
    .unwrap();
    let c = coll(&t, K::AllGather, 4000);
    let s = sched(
        &t,
        &c,
        vec![
            Transfer::copy(0, 3, 1, vec![3]),
            Transfer::copy(1, 0, 2, vec![0]).via(vec![0, 1, 2]),
            Transfer::copy(1, 1, 2, vec![3]),
        ],
    );
    let (_, times) = ccsynth::sim::simulate_with_times(&s).unwrap();
    let d = 500.0 + 1000.0 / 100.0;
    assert!(close(times[0].end_ns, 1500.0), "{:?}", times[0]);
    assert!(close(times[2].start_ns, 1500.0) && close(times[2].end_ns, 1500.0 + d), "{:?}", times[2]);
    assert!(close(times[1].start_ns, 0.0) && close(times[1].end_ns, 1500.0 + 2.0 * d), "{:?}", times[1]);
    // The pictures draw each hop for its own span: [0, d] on 0 -> 1, [1500 + d, 1500 + 2d] on 1 -> 2.
    let (_, times, hops) = ccsynth::sim::simulate_with_hops(&s).unwrap();
    let spans = ccsynth::sim::link_spans(&s, &times, &hops).unwrap();
    let relay: Vec<(f64, f64)> = spans[1].iter().map(|(_, t)| (t.start_ns, t.end_ns)).collect();
    assert_eq!(relay.len(), 2);
    assert!(close(relay[0].1, d) && close(relay[1].0, 1500.0 + d), "{relay:?}");
}

#[test]
fn a_transfer_waits_for_its_data_and_for_its_link() {
    // Chain 0 -> 1 -> 2 on ring:3:uni: the second hop starts when the first ends.
    let t = topo("ring:3:uni");
    let c = coll_spec(&t, CollectiveSpec::new(K::Broadcast, 1000).with_root(0));
    let s = sched(&t, &c, vec![Transfer::copy(0, 0, 1, vec![0]), Transfer::copy(1, 1, 2, vec![0])]);
    let timing = simulate(&s).unwrap();
    let d = ALPHA + 1000.0 / BW;
    assert!(close(timing.collective_time_ns, 2.0 * d));
    assert_eq!(timing.round_end_ns.len(), 2);
    assert!(close(timing.round_end_ns[0], d));
}

#[test]
fn empty_schedules_take_no_time() {
    let t = topo("ring:1");
    let c = coll(&t, K::AllReduce, 64);
    let s = sched(&t, &c, vec![]);
    let r = engine::check(&s);
    assert!(r.valid);
    assert_eq!(r.collective_time_ns, Some(0.0));
    assert_eq!(r.lower_bound_ns, Some(0.0));
}

/// A file may declare any `num_chunks`: beyond a collective's limit the simulator refuses it
/// before sizing a table by it, and the check (validation and simulation side by side) says
/// invalid. 2^32 chunks once wrapped to none in the simulator's layout and panicked there.
#[test]
fn a_declared_chunk_count_over_the_limit_is_refused_not_replayed() {
    let t = topo("ring:4");
    let c = coll(&t, K::AllGather, 4096);
    let ring = ccsynth::baselines::build("ring", &t, &c.spec).unwrap();
    assert!(simulate(&ring).is_ok());
    for n in [ccsynth::limits::MAX_CHUNKS + 1, 1 << 32] {
        let mut s = ring.clone();
        s.num_chunks = n;
        let err = simulate(&s).unwrap_err().to_string();
        assert!(err.contains(&format!("num_chunks {n}")) && err.contains("over the limit"), "{err}");
        let r = engine::check(&s);
        assert!(!r.valid && r.collective_time_ns.is_none(), "{n}");
    }
}

/// The link-load bound: exact for a ring all-gather on a uniform ring (every link busy back to
/// back), never above the simulated time on the conformance producers' schedules.
#[test]
fn the_link_load_bound_is_exact_on_a_ring_and_never_above_the_time() {
    let t = topo("ring:6@bw=50;lat=400");
    let c = coll(&t, K::AllGather, 6 << 20);
    let s = sched(&t, &c, ring_all_gather(&[0, 1, 2, 3, 4, 5], 1, &no_path));
    let time = ccsynth::sim::simulate(&s).unwrap().collective_time_ns;
    assert!(close(ccsynth::sim::link_load_bound_ns(&s).unwrap(), time));
    assert!(close(time, 5.0 * (400.0 + (1 << 20) as f64 / 50.0)));
    for spec in ["torus:4x4", "fc:6", "switch:5", "mesh:3x3@bw=50,100;lat=300,700"] {
        let t = topo(spec);
        for name in ["direct", "ring", "recursive-doubling", "bucket"] {
            let Ok((s, r)) = baseline(name, &t, CollectiveSpec::new(K::AllReduce, 1 << 20)) else {
                continue;
            };
            let bound = ccsynth::sim::link_load_bound_ns(&s).unwrap();
            let time = r.collective_time_ns.unwrap();
            assert!(bound > 0.0 && bound <= time * (1.0 + 1e-12), "{name} on {spec}: {bound} > {time}");
        }
    }
}

/// A schedule the simulator cannot replay on ranges gets a table of (npu, slot) cells, which
/// is sized before it is allocated: past `limits::MAX_CHECKED_CELLS` the simulation is
/// refused, naming the count and the limit (2^31 cells here: 8 GiB of table never allocated),
/// and the engine refuses such a candidate instead of handing it back untimed.
#[test]
fn a_table_past_the_cell_limit_is_refused_before_it_is_allocated() {
    let t = topo("ring:64");
    let c = coll_spec(&t, CollectiveSpec::new(K::AllGather, 1 << 30).with_chunks_per_npu(1 << 19));
    let s = sched(&t, &c, vec![Transfer::copy(0, 0, 1, vec![0])]);
    let cells = 64usize << 25;
    assert!(cells > ccsynth::limits::MAX_CHECKED_CELLS);
    match simulate(&s) {
        Err(ccsynth::sim::SimError::TooLarge(m)) => {
            assert!(
                m.contains(&cells.to_string()) && m.contains(&ccsynth::limits::MAX_CHECKED_CELLS.to_string()),
                "{m}"
            )
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // The check's door refuses it up front, saying why (bucket's torus:128x256 file, 2^32
    // cells of runs, is checked on ranges: docs/BENCHMARKS.md).
    let e = engine::check_within(&s, &engine::Limits::default()).unwrap_err();
    assert!(e.to_string().contains("not runs the check replays whole"), "{e}");
}
