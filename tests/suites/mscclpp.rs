//! MSCCL++ execution plans through the engine's front door: every collective a plan runs, on a
//! ring, a torus, a switch and an irregular graph, from the synthesizers and the baselines,
//! replayed by the independent interpreter of `mscclpp_replay` (races, nops, handshakes,
//! balanced semaphores, two launches, in place and out of place); the plan's shape on a small
//! case exactly; and the limits and refusals, each naming what it hits.

use crate::common::run_seeded as run;
use crate::common::*;
use crate::link_order;
use crate::msccl::{NAMED, irregular, spec};
use crate::mscclpp_replay;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine::{self, MscclppOptions, registry};
use ccsynth::schedule::Schedule;
use serde_json::Value;

fn plan(s: &Schedule, opts: &MscclppOptions) -> Value {
    let text = engine::export_mscclpp(s, opts).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text).expect("a plan is JSON")
}

fn export_and_replay(what: &str, s: &Schedule) {
    let text = engine::export_mscclpp(s, &MscclppOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    mscclpp_replay::replay_all(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mode = mscclpp_replay::Mode {
        in_place: false,
        policy: mscclpp_replay::Policy::Random(7),
        launches: 1,
        max_tbs: mscclpp_replay::MAX_TBS,
    };
    let sent = mscclpp_replay::replay_logged(&text, mode).unwrap_or_else(|e| panic!("{what}: {e}"));
    link_order::sends_in_order(&link_order::hops_by_link(s), &sent).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// For the conformance body: `Ok(false)` when a plan cannot express the schedule (a collective
/// it has no name for, a rank outside the group); `Err` when the export is wrong or refused
/// for any other reason. Replayed in place under one order and out of place under another.
pub fn replays_if_mscclpp_runs_it(what: &str, s: &Schedule) -> Result<bool, String> {
    let text = match engine::export_mscclpp(s, &MscclppOptions::default()) {
        Ok(text) => text,
        Err(engine::Error::Unsupported { by: engine::Refuser::MscclppPlan, reason: why })
            if why.contains("has no plan collective") || why.contains("not a rank of the collective's group") =>
        {
            return Ok(false);
        }
        Err(e) => return Err(format!("{what}: {e}")),
    };
    let hops = link_order::hops_by_link(s);
    for (in_place, policy) in [(true, mscclpp_replay::Policy::Reverse), (false, mscclpp_replay::Policy::Random(7))] {
        let mode = mscclpp_replay::Mode { in_place, policy, launches: 2, max_tbs: mscclpp_replay::MAX_TBS };
        let sent =
            mscclpp_replay::replay_logged(&text, mode).map_err(|e| format!("{what} (in place {in_place}): {e}"))?;
        // Each thread block puts in the simulator's order of its link (issue 66).
        link_order::sends_in_order(&hops, &sent).map_err(|e| format!("{what}: MSCCL++ plan: {e}"))?;
    }
    Ok(true)
}

/// Ops of one thread block with the given name.
fn count(tb: &Value, name: &str) -> usize {
    tb["ops"].as_array().unwrap().iter().filter(|o| o["name"] == name).count()
}

#[test]
fn the_ring_all_gather_plan_has_one_block_per_direction_and_its_handshake() {
    let t = topo("ring:4");
    let s = run(&t, &CollectiveSpec::new(K::AllGather, 64 << 10), "ring").expect("ring serves ring:4");
    let p = plan(&s, &MscclppOptions::default());
    assert_eq!((p["collective"].as_str(), p["protocol"].as_str()), (Some("allgather"), Some("Simple")));
    assert_eq!(p["inplace"], false);
    // The executor reuses the context of a plan with the same name over the same buffers, so the
    // default name carries a digest of the program: the same plan names itself the same, a
    // different one (another size range, another collective) differently.
    let name = p["name"].as_str().unwrap().to_string();
    assert!(
        name.starts_with("ccsynth-ring-allgather-4gpus-") && name.len() == "ccsynth-ring-allgather-4gpus-".len() + 12
    );
    assert_eq!(plan(&s, &MscclppOptions::default())["name"].as_str(), Some(name.as_str()));
    let small = MscclppOptions { max_bytes: Some(1 << 20), ..Default::default() };
    assert_ne!(plan(&s, &small)["name"].as_str(), Some(name.as_str()));
    let rs = run(&t, &CollectiveSpec::new(K::ReduceScatter, 64 << 10), "ring").unwrap();
    assert!(
        plan(&rs, &MscclppOptions::default())["name"]
            .as_str()
            .unwrap()
            .starts_with("ccsynth-ring-reducescatter-4gpus-")
    );
    let named = MscclppOptions { name: Some("mine".into()), ..Default::default() };
    assert_eq!(plan(&s, &named)["name"], "mine");
    // Offsets are 32-bit: the largest buffer is the output's 4 chunks, so a chunk is at most
    // ⌊(2^32 − 1) / 4⌋ rounded down to 16 bytes, and all-gather's size counts the output.
    assert_eq!(p["max_message_size"].as_u64(), Some((u32::MAX as u64 / 4) / 16 * 16 * 4));
    for (r, g) in p["gpus"].as_array().unwrap().iter().enumerate() {
        assert_eq!(g["id"], r);
        assert_eq!((g["input_chunks"].as_u64(), g["output_chunks"].as_u64()), (Some(1), Some(4)));
        // Three messages in, each into fresh scratch.
        assert_eq!(g["scratch_chunks"], 3);
        // One memory channel to the next GPU (its sends) and one from the previous (its
        // receives), listed by peer.
        let (next, prev) = ((r + 1) % 4, (r + 3) % 4);
        let peers: Vec<u64> =
            g["channels"][0]["connected_to"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(g["channels"][0]["channel_type"], "memory");
        let mut want = vec![next as u64, prev as u64];
        want.sort();
        assert_eq!(peers, want, "GPU {r}");
        assert_eq!(
            g["remote_buffers"],
            serde_json::json!([{"rank": next, "type": "s", "access_channel_types": ["memory"]}])
        );
        // A sending block, a receiving block, a local block (its own chunk into the output).
        let tbs = g["threadblocks"].as_array().unwrap();
        assert_eq!(tbs.len(), 3, "GPU {r}");
        let (send, recv, local) = (&tbs[0], &tbs[1], &tbs[2]);
        // The sender: the opening wait, then per message a put and its signal.
        assert_eq!(send["ops"][0]["name"], "wait");
        assert_eq!((count(send, "put"), count(send, "signal"), count(send, "wait")), (3, 3, 1));
        // The receiver: the opening signal, then per message a wait and a copy into place.
        assert_eq!(recv["ops"][0]["name"], "signal");
        assert_eq!((count(recv, "wait"), count(recv, "copy"), count(recv, "signal")), (3, 3, 1));
        assert_eq!(count(local, "copy"), 1);
        // Every semaphore is released once and acquired once.
        let sems = g["semaphores"].as_array().unwrap().len();
        let mut released = vec![0; sems];
        let mut acquired = vec![0; sems];
        for tb in tbs {
            for op in tb["ops"].as_array().unwrap() {
                for id in op["semaphore_ids"].as_array().into_iter().flatten() {
                    let id = id.as_u64().unwrap() as usize;
                    match op["name"].as_str().unwrap() {
                        "sem_release" => released[id] += 1,
                        "sem_acquire" => acquired[id] += 1,
                        other => panic!("{other} names a semaphore"),
                    }
                }
            }
        }
        assert!(released.iter().chain(&acquired).all(|&n| n == 1), "GPU {r}: {released:?} {acquired:?}");
    }
    mscclpp_replay::replay_all(&serde_json::to_string(&p).unwrap()).unwrap();
}

#[test]
fn every_collective_a_plan_runs_replays_on_a_ring_a_torus_a_switch_and_an_irregular_graph() {
    let topologies = [
        ("ring:6", topo("ring:6")),
        ("torus:3x3", topo("torus:3x3")),
        ("switch:5", topo("switch:5")),
        ("mesh:4x4 degraded", irregular()),
    ];
    let algorithms: Vec<&str> = ["greedy", registry::PORTFOLIO].into_iter().chain(registry::baseline_names()).collect();
    let mut replayed = 0;
    for (tname, t) in &topologies {
        for kind in NAMED {
            for k in [1, 2] {
                let spec = spec(t, kind, k);
                for &alg in &algorithms {
                    let Ok(s) = run(t, &spec, alg) else { continue };
                    export_and_replay(&format!("{alg} {kind:?} k={k} on {tname}"), &s);
                    replayed += 1;
                }
            }
        }
    }
    assert!(replayed >= 150, "{replayed}");
}

/// Each pair's messages leave in the simulator's order, relays included (issue 66): in the ring
/// 0→2→1→3 on ring:4, 0→2 goes through 1 and 1→3 through 2, so in every step the link 1→2
/// carries 1→3's first hop and 0→2's second; the simulator books a step's first hops before
/// its second hops (hop-major), so 1→3's goes first, while 0→2's chunk is still on its way to
/// GPU 1. GPU 1's block sending to GPU 2 sends its own chunk (from its buffers) first, then the
/// relayed one (from scratch); the plan still replays. The simulator's time: 2(α + n/β) a step.
#[test]
fn a_pairs_messages_keep_the_simulators_order_through_relays() {
    let t = topo("ring:4");
    let c = coll(&t, K::AllGather, 64 << 10);
    let s = sched(&t, &c, ring_0213_relayed());
    assert!(engine::check(&s).valid);
    let p = plan(&s, &MscclppOptions::default());
    let g = &p["gpus"][1];
    let peers = g["channels"][0]["connected_to"].as_array().unwrap();
    let to_2 = g["threadblocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tb| count(tb, "put") > 0)
        .find(|tb| peers[tb["channels"][0]["channel_ids"][0].as_u64().unwrap() as usize] == 2)
        .expect("a block sends to GPU 2");
    let sources: Vec<&str> = to_2["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["name"] == "put")
        .map(|o| o["src_buff"][0]["type"].as_str().unwrap())
        .collect();
    assert_eq!(sources.len(), 6, "{sources:?}");
    for step in sources.chunks(2) {
        assert!(step[0] != "s" && step[1] == "s", "{sources:?}");
    }
    // Each step: the first hops [0, d] on 0->1 and 1->2 (and 2->3, 3->0), the second hops
    // [d, 2d] once they have arrived: 2d a step, 6d in all.
    let d = 500.0 + (64 << 10) as f64 / 4.0 / 100.0;
    let time = engine::check(&s).collective_time_ns.unwrap();
    assert!(close(time, 6.0 * d), "{time} against {}", 6.0 * d);
    export_and_replay("the ring 0-2-1-3 on ring:4, relayed", &s);
}

#[test]
fn paths_through_a_switch_use_port_channels_and_relays_forward_from_scratch() {
    // switch:4: every message crosses the switch, so every channel is a port channel and
    // every send a put-with-signal-and-flush.
    let t = topo("switch:4");
    let s = run(&t, &CollectiveSpec::new(K::AllReduce, 1 << 20), "greedy").unwrap();
    let p = plan(&s, &MscclppOptions::default());
    for g in p["gpus"].as_array().unwrap() {
        for c in g["channels"].as_array().unwrap() {
            assert_eq!(c["channel_type"], "port");
        }
        for tb in g["threadblocks"].as_array().unwrap() {
            assert_eq!(count(tb, "put"), 0);
            // The proxy reads the input and output from the start of the caller's allocation,
            // so every port put reads scratch, where a copy staged the input's chunks.
            for op in tb["ops"].as_array().unwrap().iter().filter(|o| o["name"] == "pwsf") {
                assert!(op["src_buff"].as_array().unwrap().iter().all(|b| b["type"] == "s"), "{op}");
            }
        }
        assert!(g["threadblocks"].as_array().unwrap().iter().any(|tb| count(tb, "pwsf") > 0));
        assert!(
            g["remote_buffers"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| b["access_channel_types"] == serde_json::json!(["port"]))
        );
    }
    export_and_replay("greedy all_reduce on switch:4", &s);
    // A ring baseline on a mesh routes some hops through other NPUs: they receive into scratch
    // and send on from there.
    let t = topo("mesh:3x3");
    let s = run(&t, &CollectiveSpec::new(K::AllGather, 1 << 20), "ring").unwrap();
    assert!(s.transfers.iter().any(|t| t.path.as_ref().is_some_and(|p| p.len() > 2)), "some hop is routed");
    export_and_replay("ring all_gather on mesh:3x3", &s);
}

#[test]
fn a_lane_longer_than_64_operations_continues_in_a_chained_thread_block() {
    // The ring all-reduce on 16 NPUs: 30 messages each way per GPU, about 100 operations for
    // each of its sending and receiving lanes.
    let t = topo("ring:16");
    let s = run(&t, &CollectiveSpec::new(K::AllReduce, 1 << 20), "ring").unwrap();
    let p = plan(&s, &MscclppOptions::default());
    let mut chained = 0;
    for g in p["gpus"].as_array().unwrap() {
        for tb in g["threadblocks"].as_array().unwrap() {
            let ops = tb["ops"].as_array().unwrap();
            assert!(ops.len() <= 64, "{} ops", ops.len());
            if ops[0]["name"] == "sem_acquire" && ops[1]["name"] == "nop" {
                chained += 1;
            }
        }
    }
    assert!(chained >= 2 * 16, "{chained} chained blocks");
    export_and_replay("ring all_reduce on ring:16", &s);
}

#[test]
fn more_thread_blocks_than_can_be_resident_is_refused_naming_the_limit() {
    // direct all-to-all on fc:64: each GPU sends to 63 peers and receives from 63, one block
    // each, plus its local block: 127 > 108. The writer counts the 126 lanes of messages from
    // the schedule alone, before laying anything out.
    let t = topo("fc:64");
    let s = run(&t, &CollectiveSpec::new(K::AllToAll, 1 << 20), "direct").unwrap();
    let e = engine::export_mscclpp(&s, &MscclppOptions::default()).unwrap_err().to_string();
    assert!(e.contains("NPU 0 needs at least 126 thread blocks") && e.contains("at most 108"), "{e}");
    // fc:32: 63 blocks, within the limit.
    let t = topo("fc:32");
    let s = run(&t, &CollectiveSpec::new(K::AllToAll, 1 << 20), "direct").unwrap();
    let p = plan(&s, &MscclppOptions::default());
    assert_eq!(p["gpus"][0]["threadblocks"].as_array().unwrap().len(), 63);
}

#[test]
fn options_name_mark_in_place_and_bound_the_sizes() {
    let t = topo("torus:2x2");
    let s = run(&t, &CollectiveSpec::new(K::ReduceScatter, 1 << 20), "greedy").unwrap();
    let opts = MscclppOptions {
        name: Some("rs".into()),
        in_place: true,
        min_bytes: Some(4096),
        max_bytes: Some(1 << 40),
        rank: None,
    };
    let p = plan(&s, &opts);
    assert_eq!((p["name"].as_str(), p["inplace"].as_bool()), (Some("rs"), Some(true)));
    assert_eq!(p["min_message_size"], 4096);
    // 2^40 is beyond what 32-bit offsets reach: the declared range stops there.
    let max = p["max_message_size"].as_u64().unwrap();
    assert!(max < 1 << 34 && max > 1 << 31, "{max}");
    let opts = MscclppOptions { min_bytes: Some(1 << 40), ..Default::default() };
    let e = engine::export_mscclpp(&s, &opts).unwrap_err().to_string();
    assert!(e.contains("min_bytes 1099511627776 is above max_bytes"), "{e}");
}

#[test]
fn rooted_and_other_collectives_are_refused_with_the_reason() {
    let t = topo("ring:4");
    for kind in [K::Broadcast, K::Reduce] {
        let s = run(&t, &spec(&t, kind, 1), "greedy").unwrap();
        let e = engine::export_mscclpp(&s, &MscclppOptions::default()).unwrap_err().to_string();
        assert!(e.contains("never by root"), "{e}");
    }
    let s = run(&t, &spec(&t, K::Scatter, 1), "greedy").unwrap();
    let e = engine::export_mscclpp(&s, &MscclppOptions::default()).unwrap_err().to_string();
    assert!(e.contains("scatter has no plan collective"), "{e}");
}

#[test]
fn the_ilp_and_the_latency_planners_export_too() {
    let t = topo("torus:2x4");
    for kind in [K::AllReduce, K::AllGather, K::ReduceScatter] {
        let s = run(&t, &CollectiveSpec::new(kind, 1 << 20), "ilp").expect("the ilp serves torus:2x4");
        export_and_replay(&format!("ilp {kind:?}"), &s);
    }
    for size in [64u64, 4096] {
        for tspec in ["torus:4x4", "ring:8", "fc:8"] {
            let t = topo(tspec);
            let s = run(&t, &CollectiveSpec::new(K::AllReduce, size), "greedy").expect("the greedy serves all");
            export_and_replay(&format!("greedy all_reduce {size} B on {tspec}"), &s);
        }
    }
}

/// Rank r's view (`rank: Some(r)`) is the whole plan with every other GPU's thread blocks and
/// semaphores left out: the same name and header, every GPU's id, buffers, channels and remote
/// buffers (the executor pairs connections from them), and r's own entry whole. The views put
/// back together are the whole plan, and replay as it does.
#[test]
fn every_rank_view_is_the_whole_plan_sliced_for_that_rank() {
    let cases = [
        ("ring:4", K::AllGather, "ring"),
        ("torus:3x3", K::AllReduce, "greedy"),
        ("switch:4", K::AllReduce, "greedy"),
        ("torus:2x4", K::AllToAll, registry::PORTFOLIO),
        ("ring:6", K::ReduceScatter, "ring"),
    ];
    for (name, kind, alg) in cases {
        let t = topo(name);
        let s = run(&t, &spec(&t, kind, 2), alg).unwrap_or_else(|e| panic!("{alg} on {name}: {e}"));
        let whole = plan(&s, &MscclppOptions::default());
        let gpus = whole["gpus"].as_array().unwrap();
        let mut rebuilt = whole.clone();
        for r in 0..gpus.len() {
            let view = plan(&s, &MscclppOptions { rank: Some(r as u32), ..Default::default() });
            let what = format!("{alg} {kind:?} on {name}, rank {r}");
            for (key, v) in view.as_object().unwrap() {
                if key != "gpus" {
                    assert_eq!(v, &whole[key], "{what}: {key}");
                }
            }
            let vg = view["gpus"].as_array().unwrap();
            assert_eq!(vg.len(), gpus.len(), "{what}");
            for (g, (a, b)) in vg.iter().zip(gpus).enumerate() {
                for key in ["id", "input_chunks", "output_chunks", "scratch_chunks", "channels", "remote_buffers"] {
                    assert_eq!(a[key], b[key], "{what}: gpu {g} {key}");
                }
                if g == r {
                    assert_eq!(a, b, "{what}: its own entry");
                    assert!(!a["threadblocks"].as_array().unwrap().is_empty(), "{what}");
                } else {
                    assert_eq!(
                        (a["threadblocks"].as_array().map(Vec::len), a["semaphores"].as_array().map(Vec::len)),
                        (Some(0), Some(0)),
                        "{what}: gpu {g}"
                    );
                }
            }
            rebuilt["gpus"][r] = vg[r].clone();
        }
        assert_eq!(rebuilt, whole, "{alg} {kind:?} on {name}");
        mscclpp_replay::replay_all(&serde_json::to_string(&rebuilt).unwrap())
            .unwrap_or_else(|e| panic!("{alg} {kind:?} on {name}: {e}"));
    }
}

#[test]
fn a_rank_outside_the_plan_is_the_callers_error_naming_the_ranks() {
    let t = topo("ring:4");
    let s = run(&t, &CollectiveSpec::new(K::AllGather, 64 << 10), "ring").unwrap();
    let e = engine::export_mscclpp(&s, &MscclppOptions { rank: Some(4), ..Default::default() }).unwrap_err();
    assert_eq!(e.kind(), engine::ErrorKind::Input, "{e}");
    let text = e.to_string();
    assert!(text.contains("rank") && text.contains("rank 4 is not a rank of the plan: its ranks are 0..=3"), "{text}");
}

/// A schedule whose transfer has an empty path is the caller's error, named by the validator:
/// the plan's cheap first test, which runs before the validation, reads no hop of it (it
/// sliced `path[1..]` and panicked).
#[test]
fn an_empty_path_is_refused_not_a_panic() {
    let t = topo("ring:4");
    let mut s = run(&t, &CollectiveSpec::new(K::AllGather, 64 << 10), "ring").unwrap();
    s.transfers.set_path(0, Some(Vec::<u32>::new().into()));
    use ccsynth::export::mscclpp::{MAX_TBS, fewest_thread_blocks};
    assert!(fewest_thread_blocks(&s).iter().all(|&(tbs, _)| tbs <= MAX_TBS));
    let e = engine::export_mscclpp(&s, &MscclppOptions::default()).unwrap_err();
    assert_eq!(e.kind(), engine::ErrorKind::Input, "{e}");
}

/// Each export's cheap first test on an outline (the schedule's fields without its transfer
/// list, and how many transfers it has: what the service reads of a packed schedule before it
/// decodes it) refuses exactly as the export of the whole schedule does, and lets through what
/// that test lets through.
#[test]
fn an_outline_is_refused_as_the_whole_schedule_is() {
    use ccsynth::schedule::Transfer;
    let t = topo("ring:2");
    let c = ccsynth::collective::Collective::build(&CollectiveSpec::new(K::AllGather, 1 << 10), &t).unwrap();
    // 4,097 messages on two ranks: past MSCCL's 8,192 steps (a send and a receive each) and
    // below MSCCL++'s 13,824 operations; 4,609 past those too; 2^22 + 1 past Chakra's limit.
    let mut refused = [false; 3];
    for n in [4_097usize, 4_609, (1 << 22) + 1] {
        let mut s = Schedule::new(t.clone(), &c, "test");
        for i in 0..n {
            s.transfers.push(Transfer::copy(i as u32, i % 2, 1 - i % 2, [(i % 2) as u32]));
        }
        let outline = Schedule::new(t.clone(), &c, "test");
        let message = |r: Result<String, engine::Error>| r.err().map(|e| (e.kind(), e.to_string()));
        let cheap = |r: Result<(), engine::Error>| r.err().map(|e| (e.kind(), e.to_string()));
        let tests = [
            (cheap(engine::msccl_fits(&outline, n)), message(engine::export_msccl(&s, &Default::default()))),
            (cheap(engine::mscclpp_fits(&outline, n)), message(engine::export_mscclpp(&s, &MscclppOptions::default()))),
            (
                cheap(engine::chakra_fits(&outline, n)),
                message(engine::export_chakra(&s, "p", None).map(|_| String::new())),
            ),
        ];
        for (i, (cheap, whole)) in tests.into_iter().enumerate() {
            if let Some(refusal) = cheap {
                assert_eq!(refusal.0, engine::ErrorKind::Refused);
                assert_eq!(whole, Some(refusal), "{n} transfers, format {i}");
                refused[i] = true;
            }
        }
    }
    assert_eq!(refused, [true; 3], "each cheap test refuses one of these");
}

/// The writer's cheap count of thread blocks (`fewest_thread_blocks`, from the messages alone)
/// never exceeds what the plan then takes, per GPU, in blocks and in operations: on rings, a
/// torus, switches (port channels) and a hierarchy, from the baselines and the greedy. And a
/// schedule it counts past the executor's resident blocks is refused before a plan is built.
#[test]
fn the_fewest_thread_blocks_never_exceed_the_plan_s() {
    use ccsynth::export::mscclpp::{MAX_TBS, fewest_thread_blocks};
    let cases = [
        ("ring:8", K::AllGather, "ring"),
        ("ring:8", K::AllReduce, "ring-bidir"),
        ("torus:8x8", K::AllReduce, "bucket"),
        ("torus:4x4", K::ReduceScatter, "greedy"),
        ("switch:8", K::AllGather, "greedy"),
        ("switch:6", K::AllToAll, "direct"),
        ("hier:ring2,fc4,switch4", K::AllReduce, "greedy"),
        ("mesh:3x3", K::AllReduce, "recursive-doubling"),
    ];
    let mut tight = 0;
    for (spec_text, kind, algorithm) in cases {
        let t = topo(spec_text);
        let what = format!("{algorithm} {kind:?} on {spec_text}");
        let s = run(&t, &CollectiveSpec::new(kind, 1 << 20), algorithm).unwrap_or_else(|e| panic!("{what}: {e}"));
        let p = plan(&s, &MscclppOptions::default());
        let fewest = fewest_thread_blocks(&s);
        for (r, g) in p["gpus"].as_array().unwrap().iter().enumerate() {
            // The group is every NPU in id order here: rank r is NPU r.
            let tbs = g["threadblocks"].as_array().unwrap();
            let ops: usize = tbs.iter().map(|tb| tb["ops"].as_array().unwrap().len()).sum();
            let (least_tbs, least_ops) = fewest[r];
            assert!(
                least_tbs <= tbs.len() && least_ops <= ops,
                "{what}, GPU {r}: {fewest:?} against {} blocks, {ops} ops",
                tbs.len()
            );
            tight += usize::from(least_tbs * 2 >= tbs.len());
        }
    }
    assert!(tight > 0, "the count is never within half of the plan's blocks");
    // In a step that relays, a receiving lane's landings come after its waits, behind one
    // `nop`: two messages into GPU 2 from GPU 1 in one step (0→1→2 relayed, then 1→2) take at
    // least its opening signal, two waits, one `nop` and two copies (6 operations); without the
    // relay, a `nop` before each copy (7).
    let ring4 = topo("ring:4");
    let c4 = ccsynth::collective::Collective::build(&CollectiveSpec::new(K::AllGather, 1 << 10), &ring4).unwrap();
    for (relayed, ops) in [(true, 6), (false, 7)] {
        let mut s = Schedule::new(ring4.clone(), &c4, "test");
        let mut first = ccsynth::schedule::Transfer::copy(0, if relayed { 0 } else { 1 }, 2, [0u32]);
        if relayed {
            first.path = Some(vec![0u32, 1, 2].into());
        }
        s.transfers.push(first);
        s.transfers.push(ccsynth::schedule::Transfer::copy(0, 1, 2, [1u32]));
        assert_eq!(fewest_thread_blocks(&s)[2], (1, ops), "relayed {relayed}");
    }
    // 3,000 messages between two GPUs: below the whole plan's operation limit (13,824), but
    // each GPU's 1,500 sends and 1,500 landings take at least 142 blocks of 64 operations.
    let t = topo("ring:2");
    let c = ccsynth::collective::Collective::build(&CollectiveSpec::new(K::AllGather, 1 << 10), &t).unwrap();
    let mut s = Schedule::new(t, &c, "test");
    for i in 0..3000usize {
        s.transfers.push(ccsynth::schedule::Transfer::copy(i as u32, i % 2, 1 - i % 2, [(i % 2) as u32]));
    }
    assert!(fewest_thread_blocks(&s).iter().all(|&(tbs, _)| tbs > MAX_TBS));
    // Where the messages alone do not tell (bucket's all-gather on torus:32x32: 127 lanes'
    // worth of copies into scattered cells), the layout stops at the first step after which a
    // GPU's operations so far fill more than 108 blocks, not after the whole plan.
    let t32 = topo("torus:32x32");
    let b = run(&t32, &CollectiveSpec::new(K::AllGather, 64 << 20), "bucket").unwrap();
    assert!(fewest_thread_blocks(&b).iter().all(|&(tbs, _)| tbs <= MAX_TBS));
    let e = engine::export_mscclpp(&b, &MscclppOptions::default()).unwrap_err().to_string();
    let rounds = b.transfers.iter().map(|t| t.step).max().unwrap();
    let by = e.split("by step ").nth(1).and_then(|x| x.split(' ').next()).and_then(|x| x.parse::<u32>().ok());
    assert!(by.is_some_and(|step| step < rounds) && e.contains("at most 108"), "{e} ({rounds} steps)");
    let e = engine::export_mscclpp(&s, &MscclppOptions::default()).unwrap_err();
    assert_eq!(e.kind(), engine::ErrorKind::Refused);
    assert!(e.to_string().contains("needs at least 142 thread blocks"), "{e}");
}

/// A local move of a chunk aside in the step another lands over its cell in place reads it
/// first (`common::all_to_all_moved_aside_while_landing`).
#[test]
fn a_landing_never_overwrites_what_a_local_move_of_its_step_reads() {
    export_and_replay("all-to-all with a local move beside a landing", &all_to_all_moved_aside_while_landing());
}
