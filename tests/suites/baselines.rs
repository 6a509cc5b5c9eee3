//! Baselines against the papers: closed forms on their home topologies, Swing's peer function
//! and deficiency, refusals. Each runs through the engine's front door (`common::baseline`).

use crate::common::*;
use ccsynth::baselines::{self, BaselineError};
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine;

const ALPHA: f64 = 500.0;
const BW: f64 = 100.0;

fn time(name: &str, topo_spec: &str, spec: CollectiveSpec) -> (f64, ccsynth::schedule::Schedule) {
    let (s, r) = baseline(name, &topo(topo_spec), spec).unwrap_or_else(|e| panic!("{name} on {topo_spec}: {e}"));
    assert!(r.valid);
    (s.collective_time_ns.unwrap(), s)
}

#[test]
fn ring_all_reduce_on_a_ring_is_2_p_minus_1_hops_of_n_over_p() {
    for p in 2..=16usize {
        let n = 1u64 << 20;
        let (t, s) = time("ring", &format!("ring:{p}"), CollectiveSpec::new(K::AllReduce, n));
        let want = 2.0 * (p - 1) as f64 * (ALPHA + (n as f64 / p as f64) / BW);
        assert!(close(t, want), "p={p}: {t} vs {want}");
        assert_eq!(s.num_chunks, p);
    }
}

#[test]
fn bidirectional_ring_halves_the_bandwidth_term() {
    for p in [3usize, 8, 13] {
        let n = 1u64 << 20;
        let (t, _) = time("ring-bidir", &format!("ring:{p}"), CollectiveSpec::new(K::AllReduce, n));
        let want = 2.0 * (p - 1) as f64 * (ALPHA + (n as f64 / p as f64 / 2.0) / BW);
        assert!(close(t, want), "p={p}: {t} vs {want}");
    }
}

#[test]
fn mst_broadcast_on_fully_connected_is_log_p_full_messages() {
    for p in 2..=20usize {
        let n = 1u64 << 20;
        let (t, s) = time("mst", &format!("fc:{p}"), CollectiveSpec::new(K::Broadcast, n).with_root(p / 3));
        // Offset o of the binomial tree is popcount(o) hops from the root. Links are
        // independent in the simulator, so a parent's sends overlap and the time is the
        // deepest chain: ⌈log2 p⌉ hops when p is a power of two (the lecture's single-port
        // formula), fewer otherwise.
        let deepest = (1..p).map(|o| o.count_ones()).max().unwrap() as f64;
        assert!(close(t, deepest * (ALPHA + n as f64 / BW)), "p={p}");
        if p.is_power_of_two() {
            assert!(close(t, (p as f64).log2().ceil() * (ALPHA + n as f64 / BW)));
        }
        assert_eq!(s.transfers.len(), p - 1, "P−1 messages");
    }
}

#[test]
fn rabenseifner_on_fully_connected_power_of_two() {
    for lg in 1..=6u32 {
        let p = 1usize << lg;
        let n = 1u64 << 22;
        let (t, s) = time("rabenseifner", &format!("fc:{p}"), CollectiveSpec::new(K::AllReduce, n));
        let want = 2.0 * lg as f64 * ALPHA + 2.0 * ((p - 1) as f64 / p as f64) * n as f64 / BW;
        assert!(close(t, want), "p={p}: {t} vs {want}");
        assert_eq!(s.rounds(), 2 * lg as usize);
    }
}

#[test]
fn swing_peers_follow_the_paper() {
    use baselines::swing_peer_for_tests as peer;
    // ρ(s) = 1, −1, 3, −5, 11: node 0 of a 16-node ring swings right, left, right, left (Fig. 1).
    assert_eq!((0..4).map(|s| peer(0, s, 16)).collect::<Vec<_>>(), vec![1, 15, 3, 11]);
    assert_eq!((0..4).map(|s| peer(1, s, 16)).collect::<Vec<_>>(), vec![0, 2, 14, 6]);
    for s in 0..4 {
        for r in 0..16 {
            assert_eq!(peer(peer(r, s, 16), s, 16), r, "a pairing");
        }
    }
    // Every node reaches every other exactly once in log2 p steps (Appendix A).
    for r in 0..16 {
        let mut reached = vec![r];
        for s in 0..4 {
            let next: Vec<usize> = reached.iter().map(|&x| peer(x, s, 16)).collect();
            reached.extend(next);
        }
        reached.sort();
        reached.dedup();
        assert_eq!(reached.len(), 16);
    }
    // Odd p breaks the pairing (Fig. 4, 7 nodes): nodes 1 and 6 both pick 0 at step 0.
    assert_eq!((peer(1, 0, 7), peer(6, 0, 7)), (0, 0));
}

#[test]
fn swing_on_a_4x4_torus_first_step_and_step_count() {
    // Fig. 5: in the first step, (x, y) pairs with its neighbour along x: even x to the right
    // in the plain collective, to the left in the mirrored one.
    let (_, s) = time("swing-bandwidth", "torus:4x4", CollectiveSpec::new(K::ReduceScatter, 1 << 20));
    let first: Vec<(u32, u32)> = s.transfers.iter().filter(|t| t.step == 0).map(|t| (t.src, t.dst)).collect();
    assert!(first.contains(&(0, 1)) && first.contains(&(1, 0)) && first.contains(&(2, 3)));
    assert!(first.contains(&(0, 3)) && first.contains(&(3, 0)), "mirrored");
    assert!(first.contains(&(0, 4)), "the collective that starts on y");
    // ⌈log2 p⌉ steps for the reduce-scatter.
    for (topo_spec, p) in [("torus:4x4", 16usize), ("torus:8x8", 64), ("ring:16", 16), ("torus:4x8", 32)] {
        let (_, s) = time("swing-bandwidth", topo_spec, CollectiveSpec::new(K::ReduceScatter, 1 << 20));
        assert_eq!(s.rounds(), p.ilog2() as usize, "{topo_spec}");
    }
}

/// Swing §3.2 / Appendix A.2 for any p: even p runs ⌈log₂p⌉ steps and each rank sends each
/// block once ("never send a block twice"); odd p runs on p − 1 ranks while the last one trades
/// blocks directly. Either way every NPU sends exactly p − 1 blocks (k chunks each), for the
/// reduce-scatter and the all-gather alike: no folding, no block sent twice.
#[test]
fn swing_bandwidth_sends_every_block_once_for_any_p() {
    let spec = |kind| CollectiveSpec::new(kind, 1 << 20);
    let mut cases: Vec<(String, usize)> = (2..=40).map(|p| (format!("ring:{p}"), p)).collect();
    cases.extend((2..=24).map(|p| (format!("fc:{p}"), p)));
    cases.extend(
        [("torus:6x6", 36), ("torus:6x10", 60), ("torus:4x6", 24), ("torus:3x3", 9), ("torus:5x5", 25)]
            .map(|(t, p)| (t.to_string(), p)),
    );
    for (topo_spec, p) in cases {
        for kind in [K::ReduceScatter, K::AllGather] {
            let (_, s) = time("swing-bandwidth", &topo_spec, spec(kind));
            let k = s.collective.chunks() as usize;
            for r in 0..p as u32 {
                let sent: usize = s.transfers.iter().filter(|t| t.src == r).map(|t| t.chunks.len()).sum();
                assert_eq!(sent, (p - 1) * k, "{topo_spec} {kind:?} NPU {r}");
            }
            // Steps: ⌈log₂⌉ of the core (p, or p − 1 when p is odd) on a line; the sum of
            // ⌈log₂ side⌉ on tori with even sides.
            let core = if p % 2 == 1 { p - 1 } else { p };
            let want = match topo_spec.as_str() {
                "torus:6x6" => 6,
                "torus:6x10" => 7,
                "torus:4x6" => 5,
                _ => core.next_power_of_two().trailing_zeros() as usize,
            };
            assert_eq!(s.rounds(), want, "{topo_spec} {kind:?}");
        }
    }
}

/// Fig. 4: on 7 nodes, nodes 0..5 run Swing and node 6 trades its blocks with nodes 0, 1, 2 in
/// step 0, 3 and 4 in step 1, and 5 in the last step; the others pair as on 6 nodes.
#[test]
fn swing_on_7_nodes_serves_the_last_node_directly() {
    let (_, s) = time("swing-bandwidth", "ring:7", CollectiveSpec::new(K::ReduceScatter, 7 << 10));
    let with_6 = |step: u32| -> Vec<u32> {
        let mut v: Vec<u32> = s.transfers.iter().filter(|t| t.step == step && t.src == 6).map(|t| t.dst).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    assert_eq!(with_6(0), [0, 1, 2]);
    assert_eq!(with_6(1), [3, 4]);
    assert_eq!(with_6(2), [5]);
    // Node 0 (plain collective) pairs with π(0, s) on 6 nodes: 1, 5 (= 0 − 1), 3.
    for (step, peer) in [(0u32, 1u32), (1, 5), (2, 3)] {
        assert!(s.transfers.iter().any(|t| t.step == step && t.src == 0 && t.dst == peer), "step {step}");
    }
}

/// Swing's deficiency model (Table 2): with α negligible, bandwidth-optimal Swing over the
/// ideal (n/D)·β tends to 1.19 on 2D square tori and 1.03 on 3D ones, from links that carry
/// more than one message a step. Relays stored and forwarded hop-major, the replay meets that
/// congestion exactly: the time is the busiest link's load. Measured here (see
/// docs/BASELINES.md): 1.137 on 16×16, 1.169 on 32×32, 1.025 on 8×8×8.
#[test]
fn swing_deficiency_matches_the_model() {
    let n = 1u64 << 30;
    for (spec, dims, lo, hi) in [("torus:16x16@lat=0", 2.0, 1.10, 1.19), ("torus:8x8x8@lat=0", 3.0, 1.0, 1.05)] {
        let (t, s) = time("swing-bandwidth", spec, CollectiveSpec::new(K::AllReduce, n));
        let ratio = t / (n as f64 / dims / BW);
        assert!((lo..hi).contains(&ratio), "{spec}: {ratio}");
        let load = ccsynth::sim::link_load_bound_ns(&s).unwrap();
        assert!(close(t, load), "{spec}: {t} against the busiest link's {load}");
    }
}

#[test]
fn refusals_are_clear() {
    let t = topo("fc:8");
    // A topology the baseline cannot serve: the baseline's own refusal.
    let e = baseline("bucket", &t, CollectiveSpec::new(K::AllReduce, 64)).unwrap_err();
    assert!(matches!(e, engine::Error::Unsupported { by: engine::Refuser::Baseline, .. }), "{e}");
    assert_eq!(e.kind(), engine::ErrorKind::Refused);
    // A collective it does not serve: refused by `Request::new`, naming `algorithm`.
    let e = baseline("mst", &t, CollectiveSpec::new(K::AllReduce, 64)).unwrap_err();
    assert!(matches!(e, engine::Error::Input(_)), "{e}");
    assert!(e.to_string().contains("does not support all_reduce"), "{e}");
    // An unknown name: refused by `Request::new`, listing the algorithms there are.
    let e = baseline("fastest", &t, CollectiveSpec::new(K::AllReduce, 64)).unwrap_err();
    assert!(matches!(e, engine::Error::Input(_)), "{e}");
    assert!(e.to_string().contains("\"fastest\": expected one of"), "{e}"); // CHECK: Request::new's text
    // `list` has the kolmakov-r<R> family besides what `compare` runs.
    assert_eq!(baselines::list().len(), baselines::names().len() + 1);
    for (name, p, why) in [
        ("kolmakov-r1", "fc:2", "1 ≤ R < ⌈log₂P⌉ = 1"),
        ("kolmakov-r3", "fc:8", "1 ≤ R < ⌈log₂P⌉ = 3"),
        ("kolmakov-r3", "fc:7", "1 ≤ R < ⌈log₂P⌉ = 3"),
        // Not names of the family: refused by `Request::new` as unknown algorithms.
        ("kolmakov-r0", "fc:8", "kolmakov-r0 is R = 0, which is kolmakov itself: name it kolmakov"),
        ("kolmakov-r02", "fc:8", "kolmakov-r02: write R without leading zeros (kolmakov-r2)"),
        ("kolmakov-r99999999999", "fc:8", "\"kolmakov-r99999999999\": expected one of"), // CHECK: Request::new's text
        ("kolmakov-rx", "fc:8", "\"kolmakov-rx\": expected one of"),                     // CHECK: Request::new's text
    ] {
        let e = baseline(name, &topo(p), CollectiveSpec::new(K::AllReduce, 1 << 20)).unwrap_err();
        assert!(e.to_string().contains(why), "{name}: {e}");
        // Every one of them before anything runs: an input error naming `algorithm`.
        match e {
            engine::Error::Input(e) => assert_eq!(e.errors[0].path, "algorithm", "{name}"),
            e => panic!("{name}: {e:?}"),
        }
    }
}

/// A comparison a door stops (a server shutting down) returns `Cancelled` instead of a table,
/// whichever baseline was building or being checked; one never stopped is the same table as
/// `compare`'s.
#[test]
fn a_comparison_stops_when_asked() {
    let (t, spec) = (topo("torus:8x8"), CollectiveSpec::new(K::AllReduce, 1 << 20));
    let names = baselines::names();
    let e = engine::compare_until(&t, &spec, None, &names, &|| true).unwrap_err();
    assert!(matches!(e, engine::Error::Cancelled), "{e}");
    // Stopped after some polls: mid-way through the builds and checks.
    let polls = std::sync::atomic::AtomicUsize::new(0);
    let later = || polls.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 3;
    assert!(matches!(engine::compare_until(&t, &spec, None, &names, &later), Err(engine::Error::Cancelled)));
    let full = engine::compare_until(&t, &spec, None, &names, &|| false).unwrap();
    let same = engine::compare(&t, &spec, None);
    let rows =
        |c: &engine::Comparison| c.rows.iter().map(|r| (r.algorithm.clone(), r.collective_time_ns)).collect::<Vec<_>>();
    assert_eq!(rows(&full), rows(&same));
}

#[test]
fn compare_ranks_every_applicable_baseline() {
    let c = engine::compare(&topo("torus:4x4"), &CollectiveSpec::new(K::AllReduce, 1 << 20), None);
    assert!(c.rows.len() >= 7);
    assert!(c.rows.windows(2).all(|w| w[0].collective_time_ns <= w[1].collective_time_ns));
    assert!(c.rows[0].best && c.rows[0].ratio_to_best == 1.0);
    assert!(c.rows.iter().all(|r| r.ratio_to_bound.unwrap() >= 1.0));
    assert!(c.refused.iter().any(|(n, _)| n == "mst"));
}

/// A baseline's own schedule compared (`synth --algo ring --compare`) is one row, not two of
/// one name; at a chunking of its own it is told apart from the baseline's row.
#[test]
fn a_baseline_s_own_schedule_is_one_row_of_its_comparison() {
    let t = topo("ring:8");
    let spec = CollectiveSpec::new(K::AllGather, 1 << 20);
    let (_, own) = time("ring", "ring:8", spec.clone());
    let c = engine::compare(&t, &spec, Some(("ring", &own)));
    let named = |c: &engine::Comparison, n: &str| c.rows.iter().filter(|r| r.algorithm == n).count();
    assert_eq!(named(&c, "ring"), 1, "{:?}", c.rows);
    assert_eq!(c.rows.len(), engine::compare(&t, &spec, None).rows.len());
    let finer = CollectiveSpec { chunks_per_npu: Some(4), ..spec.clone() };
    let (_, other) = time("ring-bidir", "ring:8", finer);
    let c = engine::compare(&t, &spec, Some(("ring-bidir", &other)));
    assert_eq!((named(&c, "ring-bidir"), named(&c, "ring-bidir (this schedule)")), (1, 1), "{:?}", c.rows);
}

/// The comparison's bound holds for every row, whatever its chunking: a broadcast's latency
/// bound carries one chunk over the farthest path, so it is taken at the finest chunking among
/// the rows (at one chunk an NPU it was 43.9 µs on torus:4x4, above `auto`'s valid 21.7 µs in
/// 32 chunks, "vs bound 0.494"); the rows' own check agrees with it.
#[test]
fn compare_s_bound_holds_for_rows_of_every_chunking() {
    let t = topo("torus:4x4");
    for spec in
        [CollectiveSpec::new(K::Broadcast, 4 << 20).with_root(5), CollectiveSpec::new(K::Reduce, 4 << 20).with_root(5)]
    {
        let auto = run_request(&t, engine::RequestSpec::new(spec.clone())).unwrap().schedule;
        assert!(auto.collective.chunks() > 1, "{:?}", auto.collective);
        let c = engine::compare(&t, &spec, Some(("auto", &auto)));
        let bound = c.lower_bound_ns.unwrap();
        assert!(c.rows.iter().all(|r| r.ratio_to_bound.unwrap() >= 1.0), "{:?}", c.rows);
        // The bound at the auto schedule's own chunking, as its check reports it.
        assert!((engine::check(&auto).lower_bound_ns.unwrap() - bound).abs() < 1e-6 * bound, "{bound}");
    }
}

#[test]
fn traff_reduce_scatter_is_round_and_volume_optimal_for_every_p() {
    for p in 2..=40usize {
        let n = 1u64 << 20;
        let (t, s) = time("traff", &format!("fc:{p}"), CollectiveSpec::new(K::ReduceScatter, n));
        let rounds = (p as f64).log2().ceil() as usize;
        assert_eq!(s.rounds(), rounds, "p={p}");
        for r in 0..p as u32 {
            let blocks: usize = s.transfers.iter().filter(|t| t.src == r).map(|t| t.chunks.len()).sum();
            assert_eq!(blocks, p - 1, "p={p} r={r}");
        }
        // Corollary 1 with γ = 0, α⌈log2 p⌉ + β(p−1)/p·m, charges every round in lock step;
        // the simulator starts a message once its own data is ready, so it is never slower,
        // and equal when every round depends on the one before (p a power of two).
        let bsp = rounds as f64 * ALPHA + (p - 1) as f64 / p as f64 * n as f64 / BW;
        assert!(t <= bsp * (1.0 + 1e-12), "p={p}: {t} vs {bsp}");
        if p.is_power_of_two() {
            assert!(close(t, bsp), "p={p}: {t} vs {bsp}");
        }
    }
}

#[test]
fn traff_and_kolmakov_all_reduce_are_bandwidth_optimal_for_any_p() {
    for p in [2usize, 3, 4, 5, 6, 7, 8, 12, 16, 22, 31] {
        let n = 3u64 << 20;
        for name in ["traff", "kolmakov"] {
            let (t, s) = time(name, &format!("fc:{p}"), CollectiveSpec::new(K::AllReduce, n));
            let rounds = (p as f64).log2().ceil();
            // Kolmakov eq. 25 with γ = 0, 2⌈log P⌉α + 2(P−1)uβ with u = m/P, is the lock-step
            // time; data-driven execution is never slower.
            let bsp = 2.0 * rounds * ALPHA + 2.0 * (p - 1) as f64 * (n as f64 / p as f64) / BW;
            assert!(t <= bsp * (1.0 + 1e-12), "{name} p={p}: {t} vs {bsp}");
            assert_eq!(s.rounds(), 2 * rounds as usize);
            if p.is_power_of_two() {
                assert!(close(t, bsp), "{name} p={p}: {t} vs {bsp}");
            }
        }
    }
}

/// Kolmakov eq. 36 with γ = 0: (2⌈log P⌉ − R)·α + (2(P − 1) + (2^R − 1)(⌈log P⌉ − 1))·u·β,
/// u = n/P, exact on `fc:P` for P = 4..128 powers of two and every 1 ≤ R < log₂P; R = 0 is
/// eq. 25 (`kolmakov`).
#[test]
fn kolmakov_variants_with_fewer_distribution_steps_match_eq_36() {
    let n = 1u64 << 22;
    for log in 2..=7u32 {
        let p = 1usize << log;
        let u = n as f64 / p as f64;
        for r in 0..log {
            let name = if r == 0 { "kolmakov".to_string() } else { format!("kolmakov-r{r}") };
            let (t, s) = time(&name, &format!("fc:{p}"), CollectiveSpec::new(K::AllReduce, n));
            assert_eq!(s.rounds(), (2 * log - r) as usize, "{name} P={p}");
            assert!(s.scratch.is_empty(), "{name} P={p}: a power of two needs no scratch");
            let blocks = 2.0 * (p - 1) as f64 + ((1u64 << r) - 1) as f64 * (log - 1) as f64;
            let eq36 = (2 * log - r) as f64 * ALPHA + blocks * u / BW;
            assert!(close(t, eq36), "{name} P={p}: {t} vs {eq36}");
        }
    }
}

/// The variants for any P (the paper's Fig. 6 is P = 7, R = 1). The last R reduction rounds
/// start from C = N_{L−R} blocks (N halving up from P, L = ⌈log₂P⌉ rounds), so each processor
/// ends with C complete blocks and sends, over all 2L − R rounds, exactly
/// 2(P − 1) + (C − 1)(L − 1) blocks: eq. 36's count with 2^R replaced by C ≤ 2^R. Rounds run in
/// lock step on `fc:P` at worst; data-driven execution is never slower.
#[test]
fn kolmakov_variants_for_any_p_send_eq_36_blocks_or_fewer() {
    for p in 3..=40usize {
        let n = 3u64 << 20;
        let u = n as f64 / p as f64;
        let mut sizes = vec![p];
        while *sizes.last().unwrap() > 1 {
            sizes.push(sizes.last().unwrap().div_ceil(2));
        }
        let l = sizes.len() - 1;
        for r in 1..l {
            let name = format!("kolmakov-r{r}");
            let (t, s) = time(&name, &format!("fc:{p}"), CollectiveSpec::new(K::AllReduce, n));
            let c = sizes[l - r];
            assert_eq!(s.rounds(), 2 * l - r, "{name} P={p}");
            let blocks = 2 * (p - 1) + (c - 1) * (l - 1);
            for x in 0..p as u32 {
                let sent: usize =
                    s.transfers.iter().filter(|t| t.src == x && !t.is_local()).map(|t| t.wire_chunks()).sum();
                assert_eq!(sent, blocks, "{name} P={p} processor {x}");
            }
            let lock_step = (2 * l - r) as f64 * ALPHA + blocks as f64 * u / BW;
            assert!(t <= lock_step * (1.0 + 1e-12), "{name} P={p}: {t} vs {lock_step}");
            let eq36 = 2 * (p - 1) + ((1 << r) - 1) * (l - 1);
            assert!(blocks <= eq36 && (blocks == eq36) == (c == 1 << r), "{name} P={p}");
            // Scratch slots exactly when some round is odd.
            assert_eq!(s.scratch.is_empty(), p.is_power_of_two(), "{name} P={p}");
        }
    }
    // Fig. 6: P = 7 with one distribution step fewer runs 5 rounds.
    let (_, s) = time("kolmakov-r1", "fc:7", CollectiveSpec::new(K::AllReduce, 7 << 10));
    assert_eq!(s.rounds(), 5);
}

#[test]
fn tori_with_r_a_multiple_of_c_get_two_edge_disjoint_hamiltonian_rings() {
    use std::collections::HashSet;
    // Swing 2.3.1: possible when r = c·k and gcd(r, c − 1) = 1; every square torus qualifies.
    let mut shapes: Vec<(usize, usize)> = (3..=12).map(|n| (n, n)).collect();
    shapes.extend([(3, 9), (4, 8), (4, 16), (5, 15), (6, 12), (6, 18), (8, 16)]);
    for (c, r) in shapes {
        let spec = format!("torus:{c}x{r}");
        let t = topo(&spec);
        let [h1, h2] = baselines::hamiltonian_cycles_for_tests(c, r);
        let mut edges: [HashSet<(usize, usize)>; 2] = Default::default();
        for (i, h) in [&h1, &h2].into_iter().enumerate() {
            let mut seen = h.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), c * r, "{spec}: every node once");
            for w in 0..h.len() {
                let (a, b) = (h[w], h[(w + 1) % h.len()]);
                assert!(t.link(a, b).is_some(), "{spec}: {a}->{b} is a torus link");
                edges[i].insert((a.min(b), a.max(b)));
            }
        }
        assert!(edges[0].is_disjoint(&edges[1]), "{spec}");
        // All four ports: four rings each carrying a quarter of every block, on disjoint links,
        // whichever dimension is the longer one.
        let p = (c * r) as f64;
        let size = 1u64 << 24;
        for shape in [format!("torus:{c}x{r}"), format!("torus:{r}x{c}")] {
            let (t4, s) = time("ring-bidir", &shape, CollectiveSpec::new(K::AllReduce, size));
            assert_eq!(s.collective.chunks_per_npu, Some(4), "{shape}");
            assert!(close(t4, 2.0 * (p - 1.0) * (ALPHA + size as f64 / p / 4.0 / BW)), "{shape}: {t4}");
        }
    }
    // Where the condition fails (3×6: gcd(6, 2) = 2; 5×10; 4×6: 4 does not divide 6) the
    // bidirectional ring is the plain pair of rings: two halves, one per direction.
    for shape in ["torus:3x6", "torus:5x10", "torus:4x6"] {
        let (_, s) = time("ring-bidir", shape, CollectiveSpec::new(K::AllReduce, 1 << 24));
        assert_eq!(s.collective.chunks_per_npu, Some(2), "{shape}");
    }
}

/// Every baseline polls the caller's stop flag as it builds: whenever the flag is raised
/// (at its first poll, or a few polls in), the build ends as `Stopped`, never with a panic
/// or a partial schedule; a flag that never rises changes nothing.
#[test]
fn every_baseline_stops_when_told_and_only_then() {
    use std::cell::Cell;
    let cases: [(&str, K); 5] = [
        ("torus:8x8", K::AllReduce),
        ("torus:8x8", K::AllGather),
        ("mesh:4x6", K::ReduceScatter),
        ("fc:16", K::AllToAll),
        ("rail:4x8", K::AllToAll),
    ];
    for (spec, kind) in cases {
        let t = topo(spec);
        let cs = CollectiveSpec::new(kind, 1 << 20);
        for name in baselines::names() {
            let Ok(whole) = baselines::build(name, &t, &cs) else { continue };
            let never = baselines::build_within(name, &t, &cs, &|| false).unwrap();
            assert_eq!(never.transfers, whole.transfers, "{name} on {spec}");
            for after in [0u32, 1, 3] {
                let polls = Cell::new(0u32);
                let stop = || {
                    polls.set(polls.get() + 1);
                    polls.get() > after
                };
                match baselines::build_within(name, &t, &cs, &stop) {
                    Err(BaselineError::Stopped) => {}
                    // Finished before the flag was read often enough to rise (never at the
                    // first poll: every baseline's first transfer reads it).
                    Ok(s) if after > 0 && polls.get() <= after => assert_eq!(s.transfers, whole.transfers, "{name}"),
                    other => panic!(
                        "{name} on {spec} ({kind:?}), stop after {after} polls: {:?}",
                        other.map(|s| s.transfers.len())
                    ),
                }
            }
        }
    }
}

/// A baseline run through the engine stops at the request's time limit: `Error::TimeLimit`,
/// not a schedule built long past it.
#[test]
fn a_baseline_request_stops_at_its_time_limit() {
    let t = topo("torus:16x16");
    let rs = engine::RequestSpec {
        algorithm: "direct".parse().unwrap(),
        options: engine::Options { time_limit_s: Some(1e-9), ..Default::default() },
        ..engine::RequestSpec::new(CollectiveSpec::new(K::AllReduce, 1 << 20))
    };
    let req = engine::Request::new(t.clone(), rs, &engine::Limits::default()).unwrap();
    match engine::run(&req, engine::Control::none()) {
        Err(engine::Error::TimeLimit { .. }) => {}
        other => panic!("expected the time limit, got {:?}", other.map(|o| o.schedule.transfers.len())),
    }
    // Within a generous limit the same request is built.
    let rs = engine::RequestSpec {
        algorithm: "direct".parse().unwrap(),
        ..engine::RequestSpec::new(CollectiveSpec::new(K::AllReduce, 1 << 20))
    };
    let req = engine::Request::new(t, rs, &engine::Limits::default()).unwrap();
    assert!(engine::run(&req, engine::Control::none()).unwrap().report.valid);
}

/// The prices `auto` skips baselines by (`baselines::lower_bound_ns`, worked out from a
/// baseline's structure before it is built) never exceed the time of the schedule it builds,
/// on every baseline, collective, topology and size here: a skipped baseline could not have
/// won. The tori with power-of-two sides check the link-load bound, the others the chain.
#[test]
fn a_baselines_price_never_exceeds_its_simulated_time() {
    let topologies = [
        "ring:8",
        "ring:5",
        "torus:4x4",
        "torus:8x8",
        "torus:4x4x4",
        "torus:6x6",
        "torus:4x8",
        "mesh:4x4",
        "mesh:3x5@bw=50,100;lat=500,1000",
        "fc:6",
        "switch:8",
        "hypercube:4",
        "dragonfly:4:5",
        "hier:ring2,fc4,switch4",
    ];
    // After failures no grid is inferred: Swing runs on its logical line (p even) or that and a
    // lone rank (p odd), the others fold; p = 15, 14, 35, 63, 16.
    let failed = |spec: &str, links: &[[usize; 2]], npus: &[usize]| {
        let f = ccsynth::topology::Failures { links: links.to_vec(), npus: npus.to_vec(), ..Default::default() };
        (format!("{spec} less {links:?} {npus:?}"), topo(spec).with_failures(&f).unwrap(), None)
    };
    // Groups: the first NPUs of a grid are not that grid (no grid algorithm walks them).
    let grouped = |spec: &str, group: &[usize]| (format!("{spec} group {group:?}"), topo(spec), Some(group.to_vec()));
    let cases = topologies.iter().map(|s| (s.to_string(), topo(s), None)).chain([
        failed("torus:4x4", &[], &[5]),
        failed("torus:4x4", &[], &[5, 10]),
        failed("torus:6x6", &[[0, 1]], &[7]),
        failed("torus:8x8", &[], &[9]),
        failed("torus:4x4", &[[5, 6]], &[]),
        grouped("torus:4x4", &[0, 1, 2, 3, 4, 5, 6, 7]),
        grouped("torus:4x4", &[0, 1, 2, 3, 4, 5]),
        grouped("torus:8x8", &[0, 1, 5, 7, 8, 13, 30, 41, 50, 63]),
    ]);
    let kinds = [K::AllReduce, K::AllGather, K::ReduceScatter, K::Broadcast, K::Reduce, K::Scatter, K::Gather];
    let mut priced = 0;
    for (spec, t, group) in cases {
        for kind in kinds {
            for size in [4096u64, 3 << 20, 256 << 20] {
                let mut c = CollectiveSpec { group: group.clone(), ..CollectiveSpec::new(kind, size) };
                if kind.needs_root() {
                    c = c.with_root(1);
                }
                for name in baselines::names() {
                    let Some(bound) = baselines::lower_bound_ns(name, &t, &c) else { continue };
                    let Ok((s, r)) = baseline(name, &t, c.clone()) else { continue };
                    assert!(r.valid);
                    let time = s.collective_time_ns.unwrap();
                    assert!(
                        bound <= time * (1.0 + 1e-9),
                        "{name} {kind:?} {size} B on {spec}: priced at {bound} ns, simulates in {time} ns"
                    );
                    priced += 1;
                }
            }
        }
    }
    assert!(priced > 300, "only {priced} prices checked");
}

/// On the 64×64 torus at 1 GiB the prices alone rule out the baselines that cost the most to
/// build (ring's 33 M transfers, the butterflies' long messages) against bucket's 5.49 ms,
/// while bucket's own price stays below it.
#[test]
fn at_scale_the_prices_separate_bucket_from_the_rest() {
    let t = topo("torus:64x64");
    let c = CollectiveSpec::new(K::AllReduce, 1 << 30);
    let price = |name: &str| baselines::lower_bound_ns(name, &t, &c).unwrap_or_else(|| panic!("{name} has no price"));
    assert!(price("bucket") < 5.5e6, "bucket {}", price("bucket"));
    for name in [
        "ring",
        "ring-bidir",
        "recursive-doubling",
        "rabenseifner",
        "swing-latency",
        "swing-bandwidth",
        "traff",
        "kolmakov",
    ] {
        assert!(price(name) > 5.6e6, "{name} priced at {} ns", price(name));
    }
}

/// Past the 4,096 ranks whose hops the prices tabulate, a whole grid still prices traff and
/// kolmakov, dimension by dimension: on torus:16x32x32 their all-gather's halving rounds send
/// half the ranks' blocks 16 planes along Z (unpriced, both were built, 45 s, to lose 57× to
/// bucket's 1.89 ms).
#[test]
fn past_4096_ranks_a_grid_still_prices_the_circulants() {
    let t = topo("torus:16x32x32");
    let c = CollectiveSpec::new(K::AllGather, 1 << 30);
    let price = |name: &str| baselines::lower_bound_ns(name, &t, &c).unwrap_or_else(|| panic!("{name} has no price"));
    assert!(price("bucket") < 1.9e6, "bucket {}", price("bucket"));
    for name in ["traff", "kolmakov"] {
        assert!(price(name) > 1.0e7, "{name} priced at {} ns", price(name));
    }
}

/// Less NPU 9 (4095 NPUs, no grid), Swing's logical line with a lone rank runs 248 ms: its
/// price, from the blocks each step must carry over the hops between the peers, rules it out
/// against the greedy's 5.71 ms (the chain alone priced it at 40 µs, and `auto` built it
/// beside the greedy: 2.3 s and most of a gigabyte).
#[test]
fn a_degraded_torus_prices_swing_off_its_grid() {
    let t = topo("torus:64x64")
        .with_failures(&ccsynth::topology::Failures { npus: vec![9], ..Default::default() })
        .unwrap();
    let c = CollectiveSpec::new(K::AllReduce, 1 << 30);
    let price = baselines::lower_bound_ns("swing-bandwidth", &t, &c).expect("a price");
    assert!(price > 6.0e6, "swing-bandwidth priced at {price} ns");
}

/// Bucket on a torus of unequal sides a < b (Swing 2.3.4's concurrent buckets): the t-th phase
/// of every part starts at the same step, so on each link one part's short messages go before
/// another's long ones. An all-gather then takes (b−1)(2α + s/β + m/(4bβ)), s = m/(4ab) a chunk:
/// the part that gathers along the long side last sends its b−1 long messages once the other
/// part's short ones have left its links; a reduce-scatter is the mirror image. Numbered side by
/// side (each part's phases back to back), a short message waited for the long one of the step
/// before it, and on 16x32 an all-reduce took 1.50x its bound (1.04x aligned).
#[test]
fn bucket_on_unequal_sides_starts_each_phase_together() {
    for (a, b) in [(4usize, 8usize), (3, 5), (3, 6), (4, 6)] {
        let m = (4 * a * b * 4096) as u64;
        let s = m as f64 / (4 * a * b) as f64;
        let want = (b - 1) as f64 * (2.0 * ALPHA + s / BW + m as f64 / (4 * b) as f64 / BW);
        for kind in [K::AllGather, K::ReduceScatter] {
            let (t, sched) = time("bucket", &format!("torus:{a}x{b}"), CollectiveSpec::new(kind, m));
            assert!(close(t, want), "{a}x{b} {kind:?}: {t} vs {want}");
            // Two phases of b−1 steps each, the first of the short side's parts idle after a−1.
            let steps: std::collections::BTreeSet<u32> = sched.transfers.iter().map(|t| t.step).collect();
            assert_eq!(steps, (0..2 * (b as u32 - 1)).collect(), "{a}x{b} {kind:?}");
        }
    }
    // On equal sides the schedule is the one it always was: d−1 steps a phase, back to back.
    let (_, sched) = time("bucket", "torus:4x4", CollectiveSpec::new(K::AllReduce, 1 << 20));
    let steps: std::collections::BTreeSet<u32> = sched.transfers.iter().map(|t| t.step).collect();
    assert_eq!(steps, (0..12).collect());
}
