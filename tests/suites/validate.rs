//! Validator: one deliberately broken schedule per violation kind (exact verdicts), the
//! step semantics, and valid schedules that must pass.

use crate::common::*;
use ccsynth::collective::{CollectiveKind as K, CollectiveSpec};
use ccsynth::engine;
use ccsynth::schedule::{Op, Schedule, Transfer};
use ccsynth::validate::{ViolationKind as V, validate};

/// All-gather on ring:3:uni, 3 chunks: two steps of i -> i+1.
fn ag3() -> Schedule {
    let t = topo("ring:3:uni");
    let c = coll(&t, K::AllGather, 3000);
    sched(&t, &c, ring_all_gather(&[0, 1, 2], 1, &no_path))
}

/// All-reduce on ring:3, 3 chunks: ring reduce-scatter then ring all-gather.
fn ar3() -> Schedule {
    let t = topo("ring:3");
    let c = coll(&t, K::AllReduce, 3000);
    sched(&t, &c, ring_all_reduce(&[0, 1, 2], &no_path))
}

/// All-gather on switch:2 through the switch (node 2).
fn ag_switch() -> Schedule {
    let t = topo("switch:2");
    let c = coll(&t, K::AllGather, 2000);
    sched(
        &t,
        &c,
        vec![Transfer::copy(0, 0, 1, vec![0]).via(vec![0, 2, 1]), Transfer::copy(0, 1, 0, vec![1]).via(vec![1, 2, 0])],
    )
}

/// Custom combining collective on ring:3: contributions to chunk 0 at NPUs 0 and 1,
/// needed reduced at NPU 2.
fn custom_reduce() -> Schedule {
    let t = topo("ring:3");
    let mut spec = CollectiveSpec::new(K::Custom, 1000);
    spec.num_chunks = Some(1);
    spec.precondition = Some(vec![[0, 0], [1, 0]]);
    spec.postcondition = Some(vec![[2, 0]]);
    spec.combining = Some(true);
    let c = coll_spec(&t, spec);
    sched(&t, &c, vec![Transfer::reduce(0, 0, 1, vec![0]), Transfer::copy(1, 1, 2, vec![0])])
}

/// `custom_reduce` through a scratch slot: NPU 0's contribution lands in NPU 1's scratch slot
/// for chunk 0 (slot 1), a local reduce folds it into the chunk's slot, which goes on to 2.
fn custom_reduce_via_scratch() -> Schedule {
    let mut s = custom_reduce();
    s.scratch = vec![0];
    s.transfers = vec![
        Transfer::copy(0, 0, 1, vec![0]).into_slots(vec![1]),
        Transfer::reduce(1, 1, 1, vec![1]).into_slots(vec![0]),
        Transfer::copy(2, 1, 2, vec![0]),
    ]
    .into();
    s
}

fn kinds(s: &Schedule) -> Vec<V> {
    let mut k = engine::check(s).violations.iter().map(|v| v.kind).collect::<Vec<_>>();
    k.dedup();
    k
}

#[test]
fn bases_are_valid() {
    for s in [ag3(), ar3(), ag_switch(), custom_reduce(), custom_reduce_via_scratch()] {
        let r = engine::check(&s);
        assert!(r.valid, "{:?}", r.violations);
        assert_eq!(r.violation_count, 0);
    }
}

#[test]
fn one_broken_schedule_per_violation_kind() {
    type Case = (&'static str, Schedule, Vec<V>);
    let with = |mut s: Schedule, f: &dyn Fn(&mut Schedule)| {
        f(&mut s);
        s
    };
    let cases: Vec<Case> = vec![
        (
            "invalid collective: a root on all_gather",
            with(ag3(), &|s| s.collective.root = Some(0)),
            vec![V::InvalidCollective],
        ),
        ("num_chunks disagrees", with(ag3(), &|s| s.num_chunks = 4), vec![V::CollectiveMismatch]),
        ("chunk size disagrees", with(ag3(), &|s| s.chunk_size_bytes = 999.0), vec![V::CollectiveMismatch]),
        ("combining flag disagrees", with(ag3(), &|s| s.combining = true), vec![V::CollectiveMismatch]),
        (
            "postcondition pair dropped",
            with(ag3(), &|s| {
                s.postcondition.edit(|p| p.pop());
            }),
            vec![V::CollectiveMismatch],
        ),
        (
            "precondition pair out of range",
            with(ag3(), &|s| s.precondition.edit(|p| p.push([7, 0]))),
            vec![V::CollectiveMismatch, V::InvalidCondition],
        ),
        ("unknown dst", with(ag3(), &|s| s.transfers.push(Transfer::copy(1, 0, 7, vec![0]))), vec![V::UnknownNode]),
        (
            "unknown path node",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(1, 0, 1, vec![0]).via(vec![0, 9, 1]))),
            vec![V::UnknownNode],
        ),
        (
            "switch as dst",
            with(ag_switch(), &|s| s.transfers.push(Transfer::copy(1, 0, 2, vec![0]))),
            vec![V::NotAnNpu],
        ),
        ("self transfer", with(ag3(), &|s| s.transfers.push(Transfer::copy(1, 0, 0, vec![0]))), vec![V::SelfTransfer]),
        ("empty transfer", with(ag3(), &|s| s.transfers.push(Transfer::copy(1, 0, 1, vec![]))), vec![V::EmptyTransfer]),
        (
            "chunk out of range",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(1, 0, 1, vec![3]))),
            vec![V::ChunkOutOfRange],
        ),
        (
            "chunk twice in one transfer",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(5, 0, 1, vec![0, 0]))),
            vec![V::DuplicateChunk],
        ),
        (
            "no such link (uni ring)",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(5, 1, 0, vec![1]))),
            vec![V::MissingLink],
        ),
        (
            "path from the wrong node",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(5, 0, 2, vec![0]).via(vec![1, 2]))),
            vec![V::InvalidPath],
        ),
        (
            "path over a missing link",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(5, 0, 2, vec![0]).via(vec![0, 2]))),
            vec![V::InvalidPath],
        ),
        (
            "path visits a node twice",
            with(ag_switch(), &|s| s.transfers.push(Transfer::copy(5, 0, 1, vec![0]).via(vec![0, 2, 0, 2, 1]))),
            vec![V::InvalidPath],
        ),
        (
            "reduce in all_gather",
            with(ag3(), &|s| s.transfers.push(Transfer::reduce(5, 0, 1, vec![0]))),
            vec![V::ReduceInNonCombining],
        ),
        (
            // NPU 1 receives chunk 0 at the end of step 0, so it cannot forward it in step 0.
            "source reads a same-step write",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(0, 1, 2, vec![0]))),
            vec![V::SourceMissingChunk],
        ),
        (
            "reduce into an NPU without a partial",
            with(custom_reduce(), &|s| s.transfers.edit(|ts| ts[1].op = Op::Reduce)),
            vec![V::ReduceWithoutPartial],
        ),
        (
            // NPU 1 already holds {0,1} of chunk 0 after step 0; NPU 0's {0} again counts 0 twice.
            "contribution counted twice",
            with(ar3(), &|s| s.transfers.push(Transfer::reduce(1, 0, 1, vec![0]))),
            vec![V::DoubleCount],
        ),
        (
            // NPU 1 holds its own contribution to chunk 1; a copy of NPU 0's {0} would drop it.
            "copy drops a contribution",
            with(ar3(), &|s| s.transfers.push(Transfer::copy(1, 0, 1, vec![1]))),
            vec![V::CopyDropsContribution],
        ),
        (
            "two copies into one slot in one step",
            with(ag3(), &|s| s.transfers.push(Transfer::copy(0, 0, 1, vec![0]))),
            vec![V::WriteConflict],
        ),
        (
            "a copy and a reduce into one slot in one step",
            with(ar3(), &|s| s.transfers.push(Transfer::copy(0, 2, 0, vec![2]))),
            vec![V::WriteConflict],
        ),
        (
            "last delivery missing",
            with(ag3(), &|s| {
                s.transfers.edit(|ts| ts.pop());
            }),
            vec![V::PostconditionUnmet],
        ),
        (
            "a contribution never arrives",
            with(custom_reduce(), &|s| {
                s.transfers.edit(|ts| ts.remove(0));
            }),
            vec![V::IncompleteReduction],
        ),
        // Scratch slots, dst_chunks and local moves (the format's optional extension). A
        // malformed transfer is skipped, so what it should have delivered is missing later.
        (
            "a scratch slot for a chunk that does not exist",
            with(custom_reduce_via_scratch(), &|s| s.scratch = vec![1]),
            vec![V::InvalidScratch],
        ),
        (
            "dst_chunks shorter than chunks",
            with(custom_reduce_via_scratch(), &|s| s.transfers.edit(|ts| ts[0].chunks = vec![0, 0].into())),
            // The malformed transfer is skipped, so the scratch slot stays empty.
            vec![V::SlotMismatch, V::SourceMissingChunk, V::IncompleteReduction],
        ),
        (
            "a chunk written into another chunk's slot",
            with(ag3(), &|s| s.transfers.edit(|ts| ts[0] = ts[0].clone().into_slots(vec![1]))),
            vec![V::SlotMismatch, V::SourceMissingChunk, V::PostconditionUnmet],
        ),
        (
            "a local move onto the slot it reads",
            with(custom_reduce_via_scratch(), &|s| {
                s.transfers.edit(|ts| ts[1].dst_chunks = Some(Box::new(vec![1].into())))
            }),
            vec![V::SelfTransfer, V::IncompleteReduction],
        ),
        (
            "a local move with a path",
            with(custom_reduce_via_scratch(), &|s| s.transfers.edit(|ts| ts[1].path = Some(vec![1, 2, 1].into()))),
            vec![V::SelfTransfer, V::IncompleteReduction],
        ),
        (
            "one message writing a slot twice",
            with(custom_reduce_via_scratch(), &|s| {
                s.transfers.edit(|ts| ts[0] = Transfer::copy(0, 0, 1, vec![0, 0]).into_slots(vec![1, 1]))
            }),
            vec![V::DuplicateChunk, V::SourceMissingChunk, V::IncompleteReduction],
        ),
        (
            "a scratch slot out of range",
            with(custom_reduce_via_scratch(), &|s| {
                s.transfers.edit(|ts| ts[0].dst_chunks = Some(Box::new(vec![2].into())))
            }),
            vec![V::ChunkOutOfRange, V::SourceMissingChunk, V::IncompleteReduction],
        ),
        (
            "the result left in a scratch slot",
            with(custom_reduce_via_scratch(), &|s| {
                s.transfers.edit(|ts| ts[2] = Transfer::copy(2, 1, 2, vec![0]).into_slots(vec![1]))
            }),
            vec![V::PostconditionUnmet],
        ),
        (
            "a local reduce of a contribution the slot already has",
            with(custom_reduce_via_scratch(), &|s| {
                s.transfers.edit(|ts| ts.insert(1, Transfer::reduce(0, 0, 1, vec![0])));
                s.transfers.set_step(2, 1);
            }),
            vec![V::DoubleCount],
        ),
        (
            "a local move reads an empty scratch slot",
            with(custom_reduce_via_scratch(), &|s| s.transfers.edit(|ts| ts[1].step = 0)),
            vec![V::SourceMissingChunk, V::IncompleteReduction],
        ),
        (
            "declared time is not the simulated time",
            with(ag3(), &|s| s.collective_time_ns = Some(1.0)),
            vec![V::TimeMismatch],
        ),
    ];
    for (name, s, want) in cases {
        let got = kinds(&s);
        assert_eq!(got, want, "{name}: {:#?}", engine::check(&s).violations);
        let r = engine::check(&s);
        assert!(!r.valid, "{name}");
        for v in &r.violations {
            assert!(!v.message.is_empty());
        }
    }
}

#[test]
fn violations_carry_transfer_step_npu_and_chunk() {
    let mut s = ag3();
    s.transfers.push(Transfer::copy(0, 1, 2, vec![0]));
    let r = validate(&s);
    let v = &r.violations[0];
    assert_eq!(
        (v.kind, v.transfer, v.step, v.npu, v.chunk),
        (V::SourceMissingChunk, Some(6), Some(0), Some(1), Some(0))
    );
    let json = serde_json::to_value(v).unwrap();
    assert_eq!(json["kind"], "source_missing_chunk");
}

#[test]
fn forwarding_in_the_next_step_is_valid_and_redundant_copies_are_allowed() {
    let mut s = ag3();
    // Step 1 sees step 0's writes: NPU 1 holds chunk 0 and may send it on (NPU 2 gets it twice).
    s.transfers.push(Transfer::copy(2, 1, 2, vec![0]));
    assert!(validate(&s).valid);
}

#[test]
fn several_disjoint_reduces_into_one_slot_in_one_step() {
    // Reduce to NPU 0 on fc:3 in one step, then broadcast back.
    let t = topo("fc:3");
    let c = coll(&t, K::AllReduce, 3000);
    let mut tr = Vec::new();
    for ch in 0..3u32 {
        tr.push(Transfer::reduce(0, 1, 0, vec![ch]));
        tr.push(Transfer::reduce(0, 2, 0, vec![ch]));
        tr.push(Transfer::copy(1, 0, 1, vec![ch]));
        tr.push(Transfer::copy(1, 0, 2, vec![ch]));
    }
    // Merge per-peer messages: one transfer with several chunks pays α once.
    let s = sched(&t, &c, tr);
    let r = engine::check(&s);
    assert!(r.valid, "{:?}", r.violations);
    // Steps are logical, not barriers: chunk x is final at NPU 0 at (x+1)·d (the three reduces
    // per link run back to back), so its copy runs in [(x+1)d, (x+2)d] and the last ends at 4d.
    let d = 500.0 + 1000.0 / 100.0;
    assert!(close(r.collective_time_ns.unwrap(), 4.0 * d), "{:?}", r.collective_time_ns);
}

#[test]
fn a_copy_that_keeps_every_contribution_is_valid() {
    // NPU 1 holds {0,1} of chunk 0 after step 0; NPU 2 reduces into NPU 1... then a superset
    // copy from NPU 1 into NPU 0 (which holds {0}) keeps NPU 0's contribution.
    let s = custom_reduce();
    let mut s2 = s.clone();
    s2.transfers.push(Transfer::copy(1, 1, 0, vec![0]));
    assert!(validate(&s2).valid, "{:?}", validate(&s2).violations);
}

#[test]
fn the_report_is_capped_but_counts_everything() {
    let mut s = ag3();
    for _ in 0..2000 {
        s.transfers.push(Transfer::copy(9, 0, 0, vec![0]));
    }
    let r = validate(&s);
    assert_eq!(r.violation_count, 2000);
    assert_eq!(r.violations.len(), ccsynth::limits::MAX_REPORTED_VIOLATIONS);
}

/// Counting stops at `MAX_COUNTED_VIOLATIONS`, and the report says so: a transfer naming that
/// many chunks out of range is counted whole and not capped; one more is capped (before, a
/// 1.6 KB file naming 2^26 took 14 s, and 2,000 transfers sharing a list of a million chunks
/// 55 s, to count).
#[test]
fn counting_stops_at_the_cap_and_says_so() {
    let cap = ccsynth::limits::MAX_COUNTED_VIOLATIONS as u32;
    for (extra, capped) in [(0, false), (1, true)] {
        let mut s = ag3();
        s.transfers.push(Transfer::copy(0, 0, 1, (3..3 + cap + extra).collect::<Vec<u32>>()));
        let r = validate(&s);
        assert_eq!((r.valid, r.violation_count, r.violation_count_capped), (false, cap as usize, capped));
        assert_eq!(r.violations[0].kind, V::ChunkOutOfRange);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json.get("violation_count_capped").is_some(), capped, "written only when true");
    }
}

#[test]
fn unknown_fields_and_bad_formats_are_parse_errors() {
    // Transfers as objects (the compact form writes rows, which have no fields to add).
    let good = serde_json::to_value(ag3().written(ccsynth::schedule::Form::Explicit)).unwrap();
    // Unknown top-level fields (producer statistics) are ignored.
    let mut v = good.clone();
    v["stats"] = serde_json::json!({"synthesis_ms": 3});
    assert!(Schedule::from_json(&v.to_string()).is_ok());
    // Optional fields may be absent.
    let mut v = good.clone();
    v.as_object_mut().unwrap().remove("algorithm");
    assert!(Schedule::from_json(&v.to_string()).is_ok());
    for (path, mutate) in [
        (
            "transfers[0].hops",
            &(|v: &mut serde_json::Value| v["transfers"][0]["hops"] = 1.into()) as &dyn Fn(&mut serde_json::Value),
        ),
        ("collective.flavour", &|v| v["collective"]["flavour"] = 1.into()),
        ("topology", &|v| v["topology"]["colour"] = 1.into()),
        ("format", &|v| v["format"] = "ccsynth.schedule.v0".into()),
        ("transfers[1].op", &|v| v["transfers"][1]["op"] = "send".into()),
        ("transfers[2]", &|v| v["transfers"][2] = serde_json::json!([0, 1, 2])),
        ("transfers[2][4]", &|v| v["transfers"][2] = serde_json::json!([0, 1, 2, [0], "send"])),
    ] {
        let mut v = good.clone();
        mutate(&mut v);
        let e = Schedule::from_json(&v.to_string()).unwrap_err();
        assert!(e.errors[0].path.starts_with(path), "{path}: got {e}");
    }
    // A size that is no size is refused as it is read (1e308 simulated as null, −262144 in
    // 0 ns); a pair of three is too long, not malformed JSON.
    let said = |field: &str, value: serde_json::Value| {
        let mut v = good.clone();
        v[field] = value;
        let e = Schedule::from_json(&v.to_string()).unwrap_err();
        (e.errors[0].path.clone(), e.errors[0].message.clone())
    };
    for size in [serde_json::json!(1e308), serde_json::json!(-262144)] {
        let (path, message) = said("chunk_size_bytes", size.clone());
        assert_eq!(path, "chunk_size_bytes", "{size}");
        assert!(message.ends_with("expected a size in bytes, from 0 to 2^64"), "{size}: {message}");
    }
    let (path, message) = said("precondition", serde_json::json!([[0, 0, 0]]));
    assert_eq!(
        (path.as_str(), message.as_str()),
        ("precondition[0]", "invalid length: an array of more elements than expected")
    );
}

#[test]
fn fractional_chunk_sizes_are_used_as_is() {
    let t = topo("ring:3:uni");
    let c = coll(&t, K::AllGather, 1000);
    assert!(close(c.chunk_size_bytes, 1000.0 / 3.0));
    let s = sched(&t, &c, ring_all_gather(&[0, 1, 2], 1, &no_path));
    let r = engine::check(&s);
    assert!(r.valid);
    assert!(close(r.collective_time_ns.unwrap(), 2.0 * (500.0 + (1000.0 / 3.0) / 100.0)));
    let json = serde_json::to_value(&s).unwrap();
    assert!(json["chunk_size_bytes"].as_f64().unwrap().fract() != 0.0);
}

/// The optional extension in use: a received chunk written into two slots crosses the wire
/// once, and a local move takes no time (γ = 0) and no link.
#[test]
fn scratch_slots_fan_out_once_on_the_wire_and_local_moves_are_free() {
    let s = custom_reduce_via_scratch();
    let r = engine::check(&s);
    assert!(r.valid, "{:?}", r.violations);
    let hop = 500.0 + 1000.0 / 100.0; // the generators' default α and bandwidth
    assert!(close(r.collective_time_ns.unwrap(), 2.0 * hop), "{r:?}");
    // Fan-out: NPU 0's chunk also lands in NPU 1's scratch slot, in the same message.
    let mut fan = ag3();
    fan.scratch = vec![0, 1, 2];
    let first = fan.transfers.iter().position(|t| t.src == 0 && t.dst == 1).unwrap();
    let t = fan.transfers.at(first);
    let (c, step) = (t.chunks[0], t.step);
    fan.transfers.edit(|ts| ts[first] = Transfer::copy(step, 0, 1, vec![c, c]).into_slots(vec![c, c + 3]));
    let r = engine::check(&fan);
    assert!(r.valid, "{:?}", r.violations);
    assert!(close(r.collective_time_ns.unwrap(), engine::check(&ag3()).collective_time_ns.unwrap()));
    let sim = ccsynth::sim::simulate(&fan).unwrap();
    let link = sim.links.iter().find(|l| (l.src, l.dst) == (0, 1)).unwrap();
    assert_eq!(link.bytes, 2000.0, "two messages of one 1000-byte chunk each");
    // JSON: the fields appear only when used, and round-trip.
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["scratch"], serde_json::json!([0]));
    assert_eq!(json["transfers"][1]["dst_chunks"], serde_json::json!([0]));
    assert!(serde_json::to_value(ag3()).unwrap().get("scratch").is_none());
    assert_eq!(Schedule::from_json(&json.to_string()).unwrap(), s);
}

#[test]
fn a_schedule_holds_a_single_chunk_transfer_in_17_bytes() {
    // The 64×64 all-reduce holds 33.5 M transfers: each byte of a transfer is 33.5 MB. A
    // schedule keeps them as columns (step, src, dst, chunk, flags); lists, paths and slots
    // go to side tables, which single-chunk transfers without a path leave empty.
    let n = 10_000;
    let mut ts = ccsynth::schedule::Transfers::with_capacity(n);
    for i in 0..n {
        ts.push(Transfer::reduce(i as u32 / 7, i % 13, (i + 1) % 13, vec![i as u32 % 5]));
    }
    assert_eq!(ts.heap_bytes(), 17 * n);
    // A path adds a 4-byte route index per transfer (the route itself is stored once).
    let route: ccsynth::schedule::Route = vec![0u32, 13, 1].into();
    let mut routed = ccsynth::schedule::Transfers::with_capacity(n);
    for i in 0..n {
        routed.push(Transfer::copy(i as u32, 0, 1, vec![0]).via(route.clone()));
    }
    assert!(routed.heap_bytes() <= 21 * n + 64, "{} bytes", routed.heap_bytes());
    // Single-chunk lists stay inline in the struct form too.
    assert_eq!(std::mem::size_of::<ccsynth::schedule::ChunkList>(), 16);
}

/// Bucket on a 2D torus sends evenly spaced chunk lists (every fourth chunk along one
/// dimension, every 4·X-th along the other): the validator and the simulator lay their per-NPU
/// tables out so that the most used spacing's chunks sit side by side, and the validator's
/// groups take ranges of that layout. Neither may change a verdict, a violation or a time: any
/// number of groups finds what one finds, on the schedule and on broken copies of it.
#[test]
fn spaced_chunk_lists_replay_the_same_in_any_grouping() {
    for (spec, kind) in [("torus:4x6", K::AllReduce), ("torus:4x4", K::AllGather), ("mesh:3x5", K::ReduceScatter)] {
        let t = topo(spec);
        let (s, report) = baseline("bucket", &t, CollectiveSpec::new(kind, 1 << 20)).unwrap();
        assert!(report.valid, "{spec}");
        assert!(s.transfers.dominant_spacing() > 1, "{spec}: bucket's lists are spaced");
        for g in 1..=9 {
            assert!(ccsynth::validate::validate_in_groups(&s, g).valid, "{spec}: {g} groups");
        }
        // Nor the simulator's time: each list rotated by one (the same chunks, no longer evenly
        // spaced, so the tables keep the chunks' own order) gives exactly the same time.
        let mut rotated = s.clone();
        rotated.transfers.edit(|v| {
            for t in v.iter_mut().filter(|t| t.chunks.len() > 2) {
                let mut l = t.chunks.to_vec();
                l.rotate_left(1);
                t.chunks = l.into();
            }
        });
        assert_eq!(rotated.transfers.dominant_spacing(), 1, "{spec}");
        let time = |s: &Schedule| ccsynth::sim::simulate(s).unwrap().collective_time_ns;
        assert_eq!(time(&rotated), time(&s), "{spec}");
        assert!(validate(&rotated).valid, "{spec}");
        let mut broken = s.clone();
        broken.transfers.edit(|v| {
            v.remove(v.len() / 2);
        });
        let mut flipped = s.clone();
        flipped.transfers.edit(|v| {
            let i = v.len() / 3;
            v[i].op = if v[i].op == Op::Copy { Op::Reduce } else { Op::Copy };
        });
        for b in [broken, flipped] {
            let whole = validate(&b);
            assert!(!whole.valid, "{spec}");
            for g in 2..=9 {
                let r = ccsynth::validate::validate_in_groups(&b, g);
                assert_eq!((r.valid, r.violation_count), (whole.valid, whole.violation_count), "{spec}: {g} groups");
                let sorted = |r: &ccsynth::validate::Report| {
                    let mut v: Vec<String> = r.violations.iter().map(|x| format!("{x:?}")).collect();
                    v.sort();
                    v
                };
                assert_eq!(sorted(&r), sorted(&whole), "{spec}: {g} groups");
            }
        }
    }
}

/// A schedule may declare more chunks than its collective has: the verdict names the mismatch,
/// an all-reduce's postcondition is checked over the chunks it names (an every-pair
/// precondition of fewer chunks than declared once indexed past its contributor sets), and
/// nothing is sized by groups × declared chunks (a 43 KB file declaring 2^25 chunks on 16 NPUs
/// made 512 groups of 128 MiB each and took the service down). Past the check's cell limit
/// the service's door refuses it, naming the field and the limit.
#[test]
fn a_declared_chunk_count_above_the_collective_is_a_mismatch_not_a_crash() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ring-allreduce-torus4x4.json")).unwrap();
    let s = Schedule::from_json(&text).unwrap();
    assert!(engine::check(&s).valid);
    for n in [17, 1 << 25] {
        let mut big = s.clone();
        big.num_chunks = n;
        let r = engine::check(&big);
        assert!(!r.valid, "{n}");
        assert_eq!(r.violations.iter().map(|v| v.kind).collect::<Vec<_>>(), [V::CollectiveMismatch], "{n}");
        assert!(r.violations[0].message.contains(&format!("num_chunks is {n}")), "{:?}", r.violations);
    }
    let mut over = s.clone();
    over.num_chunks = 1 << 27;
    let e = engine::check_within(&over, &engine::Limits::default()).unwrap_err();
    assert_eq!(e.errors[0].path, "num_chunks");
    assert!(e.errors[0].message.contains(&ccsynth::limits::MAX_CHECKED_CELLS.to_string()), "{e}");
    // The cost estimate refuses it the same way, before anything is sized by it.
    let e2 = engine::check_cost_within(&over, &engine::Limits::default()).unwrap_err();
    assert_eq!(e2.to_string(), e.to_string());
}

/// A schedule on a ring of `n` NPUs: an all-gather of `k` chunks each, `transfers` as JSON rows.
fn ring_of(n: u32, k: u64, transfers: &[String]) -> Schedule {
    let links: Vec<String> = (0..n)
        .flat_map(|v| [(v, (v + 1) % n), ((v + 1) % n, v)])
        .map(|(a, b)| format!(r#"{{"src": {a}, "dst": {b}, "latency_ns": 500.0, "bandwidth_gb_per_s": 100.0}}"#))
        .collect();
    let chunks = n as u64 * k;
    let text = format!(
        r#"{{"format": "ccsynth.schedule.v1", "topology": {{"npus": {n}, "switches": 0, "links": [{}]}},
        "collective": {{"kind": "all_gather", "size_bytes": 1073741824, "chunks_per_npu": {k}}},
        "num_chunks": {chunks}, "chunk_size_bytes": {}, "combining": false, "transfers": [{}]}}"#,
        links.join(","),
        (1u64 << 30) as f64 / chunks as f64,
        transfers.join(",")
    );
    Schedule::from_json(&text).unwrap()
}

/// The check's cost is estimated from the schedule's sizes before it allocates: on a ring of
/// 256 NPUs with 256 chunks each (2^24 cells), 255 messages of every chunk writing all but
/// 2^16 of them, the simulator's table is 4 bytes a cell, the validator's replay two tables of
/// 4 bytes a cell per group of its 8, of which at least one and at most all run side by side.
#[test]
fn the_check_s_cost_is_its_tables_estimated_before_they_are_built() {
    let every = |n: u32, chunks: u64| -> Vec<String> {
        (0..n - 1).map(|v| format!(r#"[0, {v}, {}, [[0, {chunks}, 1]], "copy"]"#, v + 1)).collect()
    };
    let s = ring_of(256, 256, &every(256, 65536));
    let cost = engine::check_cost_within(&s, &engine::Limits::default()).unwrap();
    let (sim, group) = (4u64 << 24, 2 * 4 * (1u64 << 24) / 8);
    // The simulator's table, its per-transfer ends and its slot positions; then the groups.
    let fixed = sim + 8 * 255 + 4 * 65536;
    assert!(cost >= fixed + group && cost <= fixed + 8 * group, "{cost}");
    assert_eq!((cost - fixed) % group, 0, "{cost}: whole groups");
    // Within a server's narrower limits it is refused as the check itself would be.
    let narrow = engine::Limits { max_npus: 128, ..engine::Limits::default() };
    let e = engine::check_cost_within(&s, &narrow).unwrap_err();
    assert_eq!(e.to_string(), engine::check_within(&s, &narrow).unwrap_err().to_string());
    // A postcondition the transfers never reach sizes nothing: 1,024 NPUs of 1,024 chunks each
    // (2^30 cells) and one message of 1,024 chunks write 2^20 + 1,024 cells, hashed (the tables
    // were sized by the postcondition's 2^30 pairs: 5 GB estimated, 2.1 GB held, 4 GiB for the
    // simulator's alone with no message at all).
    for transfers in [vec![], vec![r#"[0, 0, 1, [[0, 1024, 1]], "copy"]"#.to_string()]] {
        let big = ring_of(1024, 1024, &transfers);
        let cost = engine::check_cost_within(&big, &engine::Limits::default()).unwrap();
        assert!(cost < 128 << 20, "{} transfers: {cost}", transfers.len());
        let r = engine::check(&big);
        assert!(!r.valid && r.violation_count >= ccsynth::limits::MAX_COUNTED_VIOLATIONS, "{}", r.violation_count);
    }
}

/// A chunk list's own rules are checked once per distinct list; a list that breaks them is
/// still reported at every transfer carrying it, and a good list shared by many messages
/// leaves them valid.
#[test]
fn a_shared_bad_list_is_reported_at_every_transfer_carrying_it() {
    let carried = |list: Vec<u32>| {
        let mut s = ag3();
        for step in 5..8 {
            s.transfers.push(Transfer::copy(step, 0, 1, list.clone()));
        }
        s
    };
    let bad = |list: Vec<u32>, kind: V| {
        let s = carried(list);
        let r = validate(&s);
        let at: Vec<Option<usize>> = r.violations.iter().filter(|v| v.kind == kind).map(|v| v.transfer).collect();
        let n = s.transfers.len();
        assert_eq!(at, vec![Some(n - 3), Some(n - 2), Some(n - 1)], "{kind:?}: {:?}", r.violations);
    };
    bad(vec![0, 0, 1], V::DuplicateChunk);
    bad(vec![0, 1, 3], V::ChunkOutOfRange);
    // The same good list in three more messages (ring:3:uni, 0 -> 1 holds link 0-1).
    let s = carried(vec![0, 2]);
    assert!(validate(&s).valid, "{:?}", validate(&s).violations);
}

/// A condition pair out of range names the ids it may take as an inclusive range (as every
/// error does, `error::ids`): "0..3" read as allowing 3.
#[test]
fn an_out_of_range_condition_names_the_ids_inclusively() {
    let mut s = ag3();
    s.precondition.edit(|p| p.push([7, 5]));
    let r = engine::check(&s);
    let v = r.violations.iter().find(|v| v.kind == V::InvalidCondition).expect("an invalid condition");
    assert!(v.message.contains("[7, 5]: expected an NPU in 0..=2 and a chunk in 0..=2"), "{}", v.message);
}

/// A condition out of range is one violation, naming its first pair and counting the rest:
/// conditions left out of a file are the collective's own, and where `collective` names more
/// chunks than `num_chunks` one a pair (32) drowned the 2 `collective_mismatch` they follow from.
#[test]
fn implied_conditions_out_of_range_are_one_violation_each() {
    let mut v = serde_json::to_value(ag3().written(ccsynth::schedule::Form::Compact)).unwrap();
    assert!(v.get("precondition").is_none(), "the compact form leaves them out: {v}");
    v["collective"]["chunks_per_npu"] = 4.into();
    let r = validate(&Schedule::from_json(&v.to_string()).unwrap());
    let of = |k: V| r.violations.iter().filter(|x| x.kind == k).collect::<Vec<_>>();
    assert_eq!(of(V::InvalidCondition).len(), 2, "{:?}", r.violations);
    assert!(!of(V::CollectiveMismatch).is_empty(), "{:?}", r.violations);
    let pre = &of(V::InvalidCondition)[0].message;
    let want = "precondition[3] = [0, 3]: expected an NPU in 0..=2 and a chunk in 0..=2; 8 more pairs out of range too";
    assert_eq!(pre, want);
    let post = &of(V::InvalidCondition)[1].message;
    assert_eq!(
        post,
        "postcondition: every chunk of 0..=11 at each of 3 NPUs: expected NPUs in 0..=2 and chunks in 0..=2"
    );
}
