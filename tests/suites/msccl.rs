//! MSCCL XML export through the engine's front door: every collective MSCCL names, on a ring,
//! a torus and an irregular graph, from the synthesizers and the baselines alike, replayed by
//! the independent interpreter of `msccl_replay` in place and out of place; the executor's
//! limits and the collectives it has no name for give errors that name them.

use crate::common::run_seeded as run;
use crate::common::*;
use crate::link_order;
use crate::msccl_replay::{self, Executor, Mode};
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, MscclOptions, MscclTarget, registry};
use ccsynth::schedule::{Schedule, Transfer};
use ccsynth::topology::{Failures, Topology};

/// The collectives MSCCL runs, as ccsynth kinds (its broadcast and reduce cannot be bound to a
/// root: refused, see `broadcast_and_reduce_are_refused_for_want_of_a_root`).
pub const NAMED: [K; 4] = [K::AllReduce, K::AllGather, K::ReduceScatter, K::AllToAll];

/// The error of an export expected to be refused (without printing a whole file if not).
fn refused(r: Result<String, engine::Error>) -> engine::Error {
    match r {
        Ok(xml) => panic!("exported ({} bytes) instead of refusing", xml.len()),
        Err(e) => e,
    }
}

/// The root of a rooted collective: the middle live NPU.
pub fn spec(t: &Topology, kind: K, k: u32) -> CollectiveSpec {
    let mut s = CollectiveSpec::new(kind, 1 << 20).with_chunks_per_npu(k);
    if kind.needs_root() {
        let live = t.live_npus();
        s.root = Some(live[live.len() / 2]);
    }
    s
}

/// The root's rank: its position among the live NPUs.
fn root_rank(t: &Topology, s: &CollectiveSpec) -> Option<usize> {
    s.root.map(|r| t.live_npus().iter().position(|&v| v == r).expect("the root is live"))
}

pub fn irregular() -> Topology {
    topo("mesh:4x4")
        .with_failures(&Failures { links: vec![[5, 6], [1, 2]], npus: vec![10], ..Default::default() })
        .expect("a connected survivor")
}

/// The test body: export through the engine, then replay under every scheduling policy, in
/// place and out of place, and check the collective's postcondition.
fn export_and_replay(what: &str, s: &Schedule, root: Option<usize>) {
    let xml = engine::export_msccl(s, &MscclOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    msccl_replay::replay_all(&xml, root, Executor::Current).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// For the conformance body: exports a schedule every producer made and replays it (in place
/// under `WritesFirst`, out of place under a random order). `Ok(false)` when MSCCL cannot
/// express it (a collective it has no name for, a rank outside the group); `Err` when the
/// export is wrong or refused for any other reason (a limit of the executor).
pub fn replays_if_msccl_runs_it(what: &str, s: &Schedule) -> Result<bool, String> {
    let xml = match engine::export_msccl(s, &MscclOptions::default()) {
        Ok(xml) => xml,
        // Only what MSCCL has no way to express: a collective it has no name for, or a rank
        // outside the group. A schedule beyond the executor's limits would fail the suite.
        Err(engine::Error::Unsupported { by: engine::Refuser::MscclXml, reason: why })
            if why.starts_with("MSCCL has no collective")
                || why.starts_with("MSCCL cannot run a")
                || why.contains("not a rank of the collective's group") =>
        {
            return Ok(false);
        }
        Err(e) => return Err(format!("{what}: {e}")),
    };
    let ranks: Vec<usize> = match &s.collective.group {
        Some(g) => g.clone(),
        None => s.topology.live_npus(),
    };
    let root = s.collective.root.and_then(|r| ranks.iter().position(|&v| v == r));
    let sent = msccl_replay::replay_ends(&xml, root, Executor::Current).map_err(|e| format!("{what}: {e}"))?;
    // Each thread block sends in the simulator's order of its link (issue 66).
    let hops = link_order::hops_by_link(s);
    link_order::sends_in_order(&hops, &sent).map_err(|e| format!("{what}: MSCCL XML: {e}"))?;
    // For RCCL too: every file written replays under its rules (no fused receives, 64 blocks);
    // what does not fit is refused naming one of its limits.
    let rccl = MscclOptions { target: MscclTarget::Rccl, ..Default::default() };
    match engine::export_msccl(s, &rccl) {
        Ok(xml) => {
            let sent =
                msccl_replay::replay_ends(&xml, root, Executor::Rccl).map_err(|e| format!("{what} (rccl): {e}"))?;
            link_order::sends_in_order(&hops, &sent).map_err(|e| format!("{what}: MSCCL XML (rccl): {e}"))?;
        }
        Err(engine::Error::Unsupported { by: engine::Refuser::MscclXml, reason })
            if ["in the rccl executor", "the rccl executor allows", "signed bits", "XML nodes"]
                .iter()
                .any(|limit| reason.contains(limit)) => {}
        Err(e) => return Err(format!("{what} (rccl): {e}")),
    }
    Ok(true)
}

#[test]
fn every_collective_msccl_names_replays_on_a_ring_a_torus_and_an_irregular_graph() {
    let topologies = [("ring:6", topo("ring:6")), ("torus:3x3", topo("torus:3x3")), ("mesh:4x4 degraded", irregular())];
    let algorithms: Vec<&str> = ["greedy", registry::PORTFOLIO].into_iter().chain(registry::baseline_names()).collect();
    let mut replayed = 0;
    for (tname, t) in &topologies {
        for kind in NAMED {
            let mut synthesized = 0;
            let mut baselines = 0;
            for k in [1, 2] {
                let spec = spec(t, kind, k);
                for &alg in &algorithms {
                    let Ok(s) = run(t, &spec, alg) else { continue };
                    export_and_replay(&format!("{alg} {kind:?} k={k} on {tname}"), &s, root_rank(t, &spec));
                    replayed += 1;
                    if registry::SYNTHESIZERS.contains(&alg) || alg == registry::PORTFOLIO {
                        synthesized += 1;
                    } else {
                        baselines += 1;
                    }
                }
            }
            assert_eq!(synthesized, 4, "{kind:?} on {tname}: the greedy and auto at k = 1 and 2");
            // Every baseline family is topology-specific; the direct and ring ones serve all three.
            assert!(baselines >= 1, "{kind:?} on {tname}: no baseline replayed");
        }
    }
    assert!(replayed >= 150, "{replayed}");
}

#[test]
fn the_ilp_and_the_latency_planners_export_too() {
    // The ILP on a small case; the greedy's latency planners (contributions with scratch
    // slots and local reduces, doubling) at small sizes.
    let t = topo("torus:2x4");
    for kind in [K::AllReduce, K::AllGather, K::ReduceScatter] {
        let s = run(&t, &CollectiveSpec::new(kind, 1 << 20), "ilp").expect("the ilp serves torus:2x4");
        export_and_replay(&format!("ilp {kind:?}"), &s, None);
    }
    // The greedy's recursive halving on 64 NPUs at 6 chunks each: its messages carry
    // scattered chunk ids, which the export numbers so that each is one step (else 6,977
    // steps on GPU 0, beyond the reader's 4,096).
    let t = topo("torus:4x4x4");
    let s = run(&t, &CollectiveSpec::new(K::AllReduce, 32 << 10), registry::PORTFOLIO).unwrap();
    export_and_replay("auto all_reduce 32 KiB on torus:4x4x4", &s, None);
    for size in [64u64, 4096, 1 << 16] {
        for tspec in ["torus:4x4", "ring:8", "fc:8", "fc:16"] {
            let t = topo(tspec);
            let s = run(&t, &CollectiveSpec::new(K::AllReduce, size), "greedy").expect("the greedy serves all");
            export_and_replay(&format!("greedy all_reduce {size} B on {tspec}"), &s, None);
        }
    }
}

/// A hand-checked file: the ring all-reduce on 4 NPUs is, at every GPU, one block sending to
/// the next GPU and one receiving from the previous, with 6 steps each (3 reduce-scatter, 3
/// all-gather); each receive waits for the send that last read its cell.
#[test]
fn the_ring_all_reduce_on_four_npus_is_two_blocks_of_six_steps_per_gpu() {
    let t = topo("ring:4");
    let s = run(&t, &CollectiveSpec::new(K::AllReduce, 1 << 20).with_chunks_per_npu(1), "ring").unwrap();
    let xml = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    assert!(xml.starts_with("<algo name=\"ccsynth-ring\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"4\" ngpus=\"4\" coll=\"allreduce\" inplace=\"1\" outofplace=\"1\""), "{xml}");
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let gpus: Vec<_> = doc.root_element().children().filter(|n| n.has_tag_name("gpu")).collect();
    assert_eq!(gpus.len(), 4);
    for (r, g) in gpus.iter().enumerate() {
        let tbs: Vec<_> = g.children().filter(|n| n.has_tag_name("tb")).collect();
        assert_eq!(tbs.len(), 2, "gpu {r}");
        let next = ((r + 1) % 4).to_string();
        let prev = ((r + 3) % 4).to_string();
        let find = |send: &str, recv: &str| {
            *tbs.iter()
                .find(|t| t.attribute("send") == Some(send) && t.attribute("recv") == Some(recv))
                .unwrap_or_else(|| panic!("gpu {r}: no tb sending to {send} and receiving from {recv}"))
        };
        let types = |tb: roxmltree::Node| -> Vec<String> {
            tb.children().filter(|n| n.has_tag_name("step")).map(|n| n.attribute("type").unwrap().to_string()).collect()
        };
        assert_eq!(types(find(&next, "-1")), ["s"; 6]);
        assert_eq!(types(find("-1", &prev)), ["rrc", "rrc", "rrc", "r", "r", "r"]);
        assert_eq!(g.attribute("s_chunks"), Some("0"), "nothing goes through scratch");
    }
    msccl_replay::replay_all(&xml, None, Executor::Current).unwrap();
}

/// Each connection's sends keep the simulator's order through relays (issue 66): in the ring
/// 0→2→1→3 on ring:4 (0→2 through 1, 1→3 through 2), the link 1→2 carries 1→3's first hop and
/// 0→2's second in every step; the simulator books a step's first hops first (hop-major), and
/// so does the file: GPU 1's block sending to GPU 2 sends its own chunk (from its buffers),
/// then the relayed one (from scratch), on one channel.
#[test]
fn a_connections_sends_keep_the_simulators_order_through_relays() {
    let t = topo("ring:4");
    let c = coll(&t, K::AllGather, 64 << 10);
    let s = sched(&t, &c, ring_0213_relayed());
    assert!(engine::check(&s).valid);
    let xml = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let gpu1 = doc.root_element().children().find(|n| n.has_tag_name("gpu") && n.attribute("id") == Some("1")).unwrap();
    let to_2: Vec<_> = gpu1.children().filter(|n| n.has_tag_name("tb") && n.attribute("send") == Some("2")).collect();
    assert_eq!(to_2.len(), 1, "one block, one channel");
    let sources: Vec<&str> = to_2[0]
        .children()
        .filter(|n| n.has_tag_name("step") && n.attribute("type") == Some("s"))
        .map(|n| n.attribute("srcbuf").unwrap())
        .collect();
    assert_eq!(sources.len(), 6, "{sources:?}");
    for step in sources.chunks(2) {
        assert!(step[0] != "s" && step[1] == "s", "{sources:?}");
    }
    msccl_replay::replay_all(&xml, None, Executor::Current).unwrap();
}

/// Recursive doubling on 2 GPUs: the exchange receives and reduces into the cells it has just
/// sent (2 chunks: the send fits the connection's 2 calls, so the receive reduces straight into
/// place). The receive's wait for that send is what makes the file correct in place; without
/// it the replay finds the race (the peer is sent an already reduced value: a double count),
/// while out of place, where the two are different cells, it is still correct.
#[test]
fn the_write_after_read_dependency_is_what_makes_in_place_correct() {
    let t = topo("fc:2");
    let s = run(&t, &CollectiveSpec::new(K::AllReduce, 4096), "recursive-doubling").unwrap();
    let xml = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    msccl_replay::replay_all(&xml, None, Executor::Current).unwrap();
    let waits = r#"type="rrc" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="0" deps="0""#;
    assert!(xml.contains(waits), "{xml}");
    let broken = xml.replacen(
        waits,
        r#"type="rrc" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1""#,
        1,
    );
    let outcome = |inplace, policy| {
        let mode = Mode { inplace, policy, fifo_capacity: 2, chunks_per_call: 71, max_steps: 64, max_tbs: 1024 };
        msccl_replay::replay(&broken, mode).and_then(|r| msccl_replay::check(&r, None))
    };
    for policy in msccl_replay::POLICIES {
        assert!(outcome(false, policy).is_ok(), "out of place, {policy:?}: {:?}", outcome(false, policy));
    }
    let caught: Vec<String> = msccl_replay::POLICIES.iter().filter_map(|&p| outcome(true, p).err()).collect();
    assert!(!caught.is_empty(), "no policy finds the write-after-read race");
    assert!(caught.iter().all(|e| e.contains("double")), "{caught:?}");
}

#[test]
fn the_legacy_target_spells_reduce_scatter_and_allows_256_steps() {
    let t = topo("ring:4");
    let s = run(&t, &CollectiveSpec::new(K::ReduceScatter, 1 << 20), "greedy").unwrap();
    let legacy = MscclOptions { target: MscclTarget::Legacy, ..Default::default() };
    let xml = engine::export_msccl(&s, &legacy).unwrap();
    assert!(xml.contains(r#"coll="reduce_scatter""#), "{}", &xml[..200]);
    msccl_replay::replay_all(&xml, None, Executor::Legacy).unwrap();
    let current = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    assert!(current.contains(r#"coll="reducescatter""#));
    // The legacy executor has no broadcast.
    let b = run(&t, &CollectiveSpec::new(K::Broadcast, 1 << 20).with_root(0), "greedy").unwrap();
    let e = refused(engine::export_msccl(&b, &legacy)).to_string();
    assert!(e.contains("no collective for broadcast in the legacy executor"), "{e}");
}

#[test]
fn options_name_the_algorithm_its_protocol_and_size_range() {
    let t = topo("ring:4");
    let s = run(&t, &CollectiveSpec::new(K::AllGather, 1 << 20), "greedy").unwrap();
    let o = MscclOptions {
        protocol: engine::MscclProtocol::Ll128,
        name: Some("ag \"ring\" <4>".into()),
        min_bytes: Some(1024),
        max_bytes: Some(1 << 30),
        ..Default::default()
    };
    let xml = engine::export_msccl(&s, &o).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let algo = doc.root_element();
    assert_eq!(algo.attribute("name"), Some("ag \"ring\" <4>"), "escaped and read back");
    assert_eq!(algo.attribute("proto"), Some("LL128"));
    assert_eq!((algo.attribute("minBytes"), algo.attribute("maxBytes")), (Some("1024"), Some("1073741824")));
    let bad = MscclOptions { min_bytes: Some(10), max_bytes: Some(5), ..Default::default() };
    let e = refused(engine::export_msccl(&s, &bad)).to_string();
    assert!(e.contains("min_bytes 10 is above max_bytes 5"), "{e}");
    // Past the largest maximum the file states (2^63 − 1, the default), given or not: it wrote
    // minBytes="9223372036854775808" maxBytes="9223372036854775807", a file no size selects.
    for max_bytes in [None, Some(u64::MAX)] {
        let bad = MscclOptions { min_bytes: Some(1 << 63), max_bytes, ..Default::default() };
        let e = refused(engine::export_msccl(&s, &bad)).to_string();
        assert!(e.contains("min_bytes 9223372036854775808 is above max_bytes 9223372036854775807 (the largest"), "{e}");
    }
    // The default name comes from the schedule's `algorithm`, any text a file holds: its control
    // characters (a raw U+0001 made the file not well-formed) written as `?`, and cut to what
    // the executor's 256-byte attribute buffer holds (a longer name overruns it).
    let mut odd = s.clone();
    odd.algorithm = Some(format!("a\"b<\n\u{1}c{}", "é".repeat(200)));
    let xml = engine::export_msccl(&odd, &MscclOptions::default()).unwrap();
    let name = roxmltree::Document::parse(&xml).unwrap().root_element().attribute("name").unwrap().to_string();
    assert!(name.starts_with("ccsynth-a\"b<??c"), "{name}");
    // Counted as the file holds it, escapes and all (the executor copies it undecoded): `"` is
    // `&quot;` and `<` `&lt;`, so 8 + 15 + 2 × 116 bytes, the next é past 255.
    let written = xml.split("name=\"").nth(1).unwrap().split('"').next().unwrap();
    assert!(written.starts_with("ccsynth-a&quot;b&lt;??c"), "{written}");
    assert_eq!(written.len(), 8 + 15 + 2 * 116, "{written}");
    let plan: serde_json::Value =
        serde_json::from_str(&engine::export_mscclpp(&odd, &engine::MscclppOptions::default()).unwrap()).unwrap();
    let name = plan["name"].as_str().unwrap();
    assert!(
        name.starts_with("ccsynth-a\"b<??c") && ccsynth::export::escaped_len(name) <= engine::MAX_NAME_BYTES,
        "{name}"
    );
}

#[test]
fn what_msccl_cannot_run_is_refused_with_the_limit_named() {
    let t = topo("ring:4");
    // Collectives MSCCL has no name for.
    for kind in [K::Scatter, K::Gather] {
        let s = run(&t, &CollectiveSpec::new(kind, 1 << 20).with_root(0), "greedy").unwrap();
        let e = refused(engine::export_msccl(&s, &MscclOptions::default()));
        assert!(matches!(e, engine::Error::Unsupported { by: engine::Refuser::MscclXml, .. }), "{e:?}");
        assert!(e.to_string().contains(&format!("MSCCL has no collective for {}", kind.name())), "{e}");
        // What it lists is what the export writes (it listed broadcast and reduce, refused too).
        assert!(e.to_string().ends_with("writes allreduce, allgather, reducescatter and alltoall"), "{e}");
    }
    // A subgroup whose schedule forwards through an NPU outside it.
    let line = topo("ring:6");
    let sub = CollectiveSpec { group: Some(vec![0, 3]), ..CollectiveSpec::new(K::AllGather, 1 << 20) };
    let s = run(&line, &sub, "greedy").unwrap();
    let e = refused(engine::export_msccl(&s, &MscclOptions::default())).to_string();
    assert!(e.contains("not a rank of the collective's group"), "{e}");
    // Too many steps for the executor's reader: refused before the schedule is even validated.
    let mut big = run(&t, &CollectiveSpec::new(K::AllGather, 1 << 20), "ring").unwrap();
    let one = big.transfers.clone();
    while big.transfers.len() < 9000 {
        big.transfers.extend(one.iter().map(|t| t.to_owned()));
    }
    let e = refused(engine::export_msccl(&big, &MscclOptions::default())).to_string();
    assert!(e.contains("at least 18000 steps; the executor's reader keeps at most 16384 for 4 ranks"), "{e}");
    // A table of where every chunk of every rank lives that would be too large: refused up
    // front (a 4096-NPU all-reduce at 4,096 chunks per NPU is 2^36 cells).
    let mut huge = run(&t, &CollectiveSpec::new(K::AllGather, 1 << 20), "ring").unwrap();
    huge.num_chunks = 1 << 23;
    let e = refused(engine::export_msccl(&huge, &MscclOptions::default())).to_string();
    assert!(e.contains("4 ranks × 8388608 chunk slots is more than the 4194304 (rank, slot) cells"), "{e}");
    // More messages on one link than the blocks RCCL allows can carry: an all-gather on two
    // GPUs sending 2,000 chunks each way one per step, at most 64 thread blocks per GPU of 64
    // steps each.
    let two = topo("ring:2");
    let c = coll_spec(&two, CollectiveSpec::new(K::AllGather, 4000 << 10).with_chunks_per_npu(2000));
    let transfers = (0..2000).flat_map(|ch| [Transfer::copy(ch, 0, 1, [ch]), Transfer::copy(ch, 1, 0, [2000 + ch])]);
    let many = sched(&two, &c, transfers.collect());
    let rccl = MscclOptions { target: MscclTarget::Rccl, ..Default::default() };
    let e = refused(engine::export_msccl(&many, &rccl)).to_string();
    assert!(e.contains("no channel has room for message"), "{e}");
    assert!(e.contains("64 thread blocks per GPU and 64 steps per thread block in the rccl executor"), "{e}");
    // An invalid schedule is the caller's error, named as such.
    let mut broken = run(&t, &CollectiveSpec::new(K::AllGather, 1 << 20), "ring").unwrap();
    broken.transfers.edit(|ts| ts.pop());
    let e = refused(engine::export_msccl(&broken, &MscclOptions::default()));
    assert!(matches!(e, engine::Error::Input(_)), "{e:?}");
    assert!(e.to_string().contains("not a valid schedule"), "{e}");
}

/// Many messages on one connection in one step of the schedule (200 one-chunk transfers each
/// way): more than the channels' buffers hold, so most sends complete only with their
/// receives. Once refused as a burst; the file replays at every size.
#[test]
fn a_burst_of_messages_on_one_connection_exports_and_replays() {
    let two = topo("ring:2");
    let c = coll_spec(&two, CollectiveSpec::new(K::AllGather, 400 << 10).with_chunks_per_npu(200));
    let transfers =
        (0..400).map(|ch| if ch < 200 { Transfer::copy(0, 0, 1, [ch]) } else { Transfer::copy(0, 1, 0, [ch]) });
    let burst = sched(&two, &c, transfers.collect());
    let xml = engine::export_msccl(&burst, &MscclOptions::default()).unwrap();
    msccl_replay::replay_all(&xml, None, Executor::Current).unwrap();
}

/// Finding 1 of issue 27: all-to-all with 3 chunks per pair between neighbours. Each GPU sends
/// 3 chunks to a neighbour and, in place, receives the neighbour's 3 into the cells it sends
/// from. Above 12 MiB the executor moves one chunk per call, so the send is 3 calls and blocks
/// after 2 until the neighbour receives, whose receive waits for its own blocked send: the old
/// file deadlocked. It now replays at one chunk per call, in place and out of place.
#[test]
fn all_to_all_with_three_chunks_a_pair_replays_at_one_chunk_per_call() {
    let t = topo("ring:4");
    let spec = CollectiveSpec::new(K::AllToAll, 12 << 20).with_chunks_per_npu(3);
    let s = run(&t, &spec, "greedy").unwrap();
    let xml = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    assert_eq!(doc.root_element().attribute("maxBytes"), Some("9223372036854775807"), "every size");
    let three = doc.descendants().filter(|n| n.attribute("type") == Some("s") && n.attribute("cnt") == Some("3"));
    assert!(three.count() > 0, "a send of 3 chunks: 3 calls at the largest sizes");
    msccl_replay::replay_all(&xml, None, Executor::Current).unwrap();
    // The same at every protocol: LL and LL128 hold more calls.
    for protocol in [engine::MscclProtocol::Ll, engine::MscclProtocol::Ll128] {
        let xml = engine::export_msccl(&s, &MscclOptions { protocol, ..Default::default() }).unwrap();
        msccl_replay::replay_all(&xml, None, Executor::Current).unwrap();
    }
}

/// Finding 2 of issue 27: a dependency names its thread block in 8 signed bits. Swing's
/// reduce-scatter on torus:4x4x4 once had 192 thread blocks per GPU and waited for blocks up
/// to 191; now a GPU opens at most 128 blocks for its connections (the blocks waited for take
/// the lowest ids), and sends beyond them share blocks.
#[test]
fn dependencies_name_thread_blocks_below_128() {
    let t = topo("torus:4x4x4");
    let s = run(&t, &CollectiveSpec::new(K::ReduceScatter, 12 << 20), "swing-bandwidth").unwrap();
    let xml = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    for gpu in doc.root_element().children().filter(|n| n.has_tag_name("gpu")) {
        let tbs = gpu.children().filter(|n| n.has_tag_name("tb")).count();
        assert!((12..=129).contains(&tbs), "{tbs}: 6 neighbours both ways, at most 128 and a local block");
    }
    let depids = doc.descendants().filter_map(|n| n.attribute("depid")).map(|d| d.parse::<i64>().unwrap());
    assert!(depids.clone().max().unwrap() <= 127, "{:?}", depids.max());
    msccl_replay::replay_ends(&xml, None, Executor::Current).unwrap();
}

/// Finding 3 of issue 27: RCCL allows 64 thread blocks per GPU. The greedy's all-gather on
/// torus:4x4x4 takes 193 under the current executor; for RCCL it fits 64, and replays under
/// RCCL's limits.
#[test]
fn the_rccl_target_keeps_to_64_thread_blocks_per_gpu() {
    let t = topo("torus:4x4x4");
    let s = run(&t, &CollectiveSpec::new(K::AllGather, 12 << 20), "greedy").unwrap();
    let blocks = |xml: &str| {
        let doc = roxmltree::Document::parse(xml).unwrap();
        let gpus: Vec<usize> = doc
            .root_element()
            .children()
            .filter(|n| n.has_tag_name("gpu"))
            .map(|g| g.children().filter(|n| n.has_tag_name("tb")).count())
            .collect();
        gpus.into_iter().max().unwrap()
    };
    let current = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    assert!(blocks(&current) > 64, "{}", blocks(&current));
    let xml = engine::export_msccl(&s, &MscclOptions { target: MscclTarget::Rccl, ..Default::default() }).unwrap();
    assert!(blocks(&xml) <= 64, "{}", blocks(&xml));
    msccl_replay::replay_all(&xml, None, Executor::Rccl).unwrap();
    // The interpreter holds a file to the limit.
    let e = msccl_replay::replay_ends(&current, None, Executor::Rccl).unwrap_err();
    assert!(e.contains("more than max_tbs = 64"), "{e}");
}

/// RCCL's MSCCL parses the fused receives (rrc, ...) but refuses at launch any algorithm that
/// has one: for the `rccl` target reductions are received into scratch and combined with `re`.
/// The interpreter refuses a fused receive for RCCL, so the current target's file fails there.
#[test]
fn the_rccl_target_receives_reductions_without_fused_steps() {
    for (tspec, kind, alg) in [
        ("ring:4", K::AllReduce, "ring"),
        ("ring:4", K::ReduceScatter, "ring"),
        ("torus:3x3", K::AllReduce, "greedy"),
        ("mesh:3x3", K::ReduceScatter, "greedy"),
    ] {
        let s = run(&topo(tspec), &CollectiveSpec::new(kind, 1 << 20), alg).unwrap();
        let what = format!("{alg} {kind:?} on {tspec}");
        let current = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
        assert!(current.contains(r#"type="rrc""#), "{what}: the current executor's file receives reductions fused");
        let e = msccl_replay::replay_ends(&current, None, Executor::Rccl).unwrap_err();
        assert!(e.contains("is a fused receive, which RCCL's MSCCL refuses at launch"), "{what}: {e}");
        let xml = engine::export_msccl(&s, &MscclOptions { target: MscclTarget::Rccl, ..Default::default() }).unwrap();
        for fused in ["rrc", "rcs", "rrs", "rrcs"] {
            assert!(!xml.contains(&format!(r#"type="{fused}""#)), "{what}: {fused} in the rccl file");
        }
        assert!(xml.contains(r#"type="re""#), "{what}: reductions combine locally");
        msccl_replay::replay_all(&xml, None, Executor::Rccl).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// The executor stores a step's chunk offsets in 16 signed bits: a file whose offsets pass 32767
/// would address other chunks. Refused, the limit named; just under it, the file replays.
#[test]
fn chunk_offsets_stay_within_sixteen_signed_bits() {
    let t = topo("fc:2");
    let spec = |k: u32| CollectiveSpec::new(K::AllGather, 1 << 30).with_chunks_per_npu(k);
    // 32,768 output chunks, received in steps of 71: the last step starts at 32,714.
    let s = run(&t, &spec(16_384), "direct").unwrap();
    let xml = engine::export_msccl(&s, &MscclOptions::default()).unwrap();
    assert!(xml.contains(r#"o_chunks="32768""#) && xml.contains(r#"dstoff="32714""#), "the last step is written");
    msccl_replay::replay_ends(&xml, None, Executor::Current).unwrap();
    // 34,000: steps would start past 32,767.
    let s = run(&t, &spec(17_000), "direct").unwrap();
    let e = refused(engine::export_msccl(&s, &MscclOptions::default())).to_string();
    assert!(e.contains("of its output buffer; the executor stores a step's offsets in 16 signed bits"), "{e}");
    assert!(e.contains("so at most 32767"), "{e}");
}

/// Finding 4 of issue 27: the executor picks a file by collective, ranks, size and in place, so
/// a broadcast or reduce file would run for every root. Refused, the reason named.
#[test]
fn broadcast_and_reduce_are_refused_for_want_of_a_root() {
    let t = topo("ring:4");
    for kind in [K::Broadcast, K::Reduce] {
        let s = run(&t, &CollectiveSpec::new(kind, 1 << 20).with_root(2), "greedy").unwrap();
        for target in [MscclTarget::Current, MscclTarget::Rccl] {
            let e = refused(engine::export_msccl(&s, &MscclOptions { target, ..Default::default() })).to_string();
            assert!(e.contains(&format!("MSCCL cannot run a {} for its root", kind.name())), "{e}");
            assert!(e.contains("written for root 2 would run for every root"), "{e}");
        }
    }
}

/// Finding 5 of issue 27: the executor's range is inclusive, and maxBytes = 0 means no upper
/// limit to it; a requested max_bytes of 0 is refused rather than written.
#[test]
fn max_bytes_zero_is_refused_and_the_range_is_inclusive() {
    let t = topo("ring:4");
    let s = run(&t, &CollectiveSpec::new(K::AllGather, 1 << 20), "greedy").unwrap();
    let zero = MscclOptions { max_bytes: Some(0), ..Default::default() };
    let e = refused(engine::export_msccl(&s, &zero)).to_string();
    assert!(e.contains("max_bytes 0: the executor reads maxBytes = 0 as no upper limit"), "{e}");
    // min = max is one size, which the executor selects (nBytes <= maxBytes).
    let one = MscclOptions { min_bytes: Some(4 << 20), max_bytes: Some(4 << 20), ..Default::default() };
    let xml = engine::export_msccl(&s, &one).unwrap();
    msccl_replay::replay_all(&xml, None, Executor::Current).unwrap();
}

/// A local move of a chunk aside in the step another lands over its cell in place reads it
/// first (`common::all_to_all_moved_aside_while_landing`).
#[test]
fn a_receive_never_overwrites_what_a_local_move_of_its_step_reads() {
    export_and_replay("all-to-all with a local move beside a receive", &all_to_all_moved_aside_while_landing(), None);
}
