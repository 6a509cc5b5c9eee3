//! The compact form of a schedule (chunk runs as ranges, implied conditions left out) against
//! the explicit one: the same schedule read back from either, the same verdict, violations
//! and time; range mutations the validator must catch; old explicit files still read. The
//! ranges here are written by this file's own encoder (every evenly increasing run of two or
//! more, whether or not shorter), not by the library's writer.

use crate::common::*;
use crate::random_schedules::{KINDS, build, corrupt, scramble};
use ccsynth::collective::{Collective, CollectiveKind as K, CollectiveSpec, Pairs};
use ccsynth::engine;
use ccsynth::schedule::{Form, Schedule};
use ccsynth::validate::{ViolationKind, validate_in_groups};
use proptest::prelude::*;
use serde_json::{Value, json};

/// `list` with every evenly increasing run of two or more ids as a range object (the stride
/// written only when it is not 1).
fn ranges_of(list: &[Value]) -> Vec<Value> {
    let ids: Vec<u64> = list.iter().map(|v| v.as_u64().unwrap()).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut n = 1;
        if i + 1 < ids.len() && ids[i + 1] > ids[i] {
            let d = ids[i + 1] - ids[i];
            n = 2;
            while i + n < ids.len() && ids[i + n] == ids[i + n - 1] + d {
                n += 1;
            }
            out.push(if d == 1 {
                json!({"start": ids[i], "count": n})
            } else {
                json!({"count": n, "stride": d, "start": ids[i]})
            });
        } else {
            out.push(json!(ids[i]));
        }
        i += n;
    }
    out
}

/// `s` as JSON with every run a range and, where they are the collective's own, no conditions.
fn ranged(s: &Schedule) -> Value {
    let mut v = serde_json::to_value(s.written(Form::Explicit)).unwrap();
    for t in v["transfers"].as_array_mut().unwrap() {
        for field in ["chunks", "dst_chunks"] {
            if let Some(list) = t.get(field).and_then(Value::as_array) {
                t[field] = Value::Array(ranges_of(list));
            }
        }
    }
    let implied = Collective::build_unchecked(&s.collective, &s.topology)
        .is_ok_and(|c| c.precondition == s.precondition && c.postcondition == s.postcondition);
    if implied && s.collective.kind != K::Custom {
        let o = v.as_object_mut().unwrap();
        o.remove("precondition");
        o.remove("postcondition");
    }
    v
}

/// The three texts of `s` (the library's compact and explicit forms, and this file's ranges)
/// read back as `s`, and get `s`'s report.
fn every_form_reads_the_same(s: &Schedule) -> Result<(), TestCaseError> {
    let want = engine::check(s);
    let texts = [
        serde_json::to_string(s).unwrap(),
        serde_json::to_string(&s.written(Form::Explicit)).unwrap(),
        ranged(s).to_string(),
    ];
    prop_assert!(!texts[1].contains("\"chunks\":[["), "the explicit form has a range");
    prop_assert!(!texts[1].contains("\"transfers\":[["), "the explicit form has a row");
    prop_assert!(texts[1].contains("\"precondition\""), "the explicit form has no precondition");
    let built = Collective::build_unchecked(&s.collective, &s.topology).ok();
    for text in &texts {
        let back = Schedule::from_json(text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert!(back == *s, "{text} reads back different");
        // A condition that is its collective's every chunk at every NPU is held as that, read
        // from any form (an explicit file's list is not kept).
        if let Some(c) = &built {
            for (read, own) in [(&back.precondition, &c.precondition), (&back.postcondition, &c.postcondition)] {
                if own.as_every().is_some() && read == own {
                    prop_assert!(read.as_every().is_some(), "a condition read as a list: {:?}", read);
                }
            }
        }
        let got = engine::check(&back);
        prop_assert_eq!(got.valid, want.valid);
        prop_assert_eq!(&got.violations, &want.violations);
        prop_assert_eq!(got.violation_count, want.violation_count);
        prop_assert_eq!(got.collective_time_ns, want.collective_time_ns);
    }
    // The same conditions held as lists get the same report (the validator's path for sets of
    // every chunk at every NPU against its path for lists), in one group of chunks and in
    // several.
    let mut listed = s.clone();
    listed.precondition = Pairs::from(s.precondition.to_vec());
    listed.postcondition = Pairs::from(s.postcondition.to_vec());
    prop_assert!(listed.precondition.as_listed().is_some() && listed == *s);
    let got = engine::check(&listed);
    prop_assert_eq!((got.valid, got.violation_count), (want.valid, want.violation_count));
    prop_assert_eq!(&got.violations, &want.violations);
    for groups in [2, 5] {
        let (a, b) = (validate_in_groups(s, groups), validate_in_groups(&listed, groups));
        prop_assert_eq!((a.valid, a.violation_count), (b.valid, b.violation_count));
        prop_assert_eq!(a.violations, b.violations);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_form_of_a_random_schedule_gets_the_same_report(
        seed in any::<u64>(),
        kind in 0usize..KINDS.len(),
        how in 0usize..3,
    ) {
        let (mut s, mut rng) = build(seed, KINDS[kind]);
        match how {
            0 => {}
            1 => scramble(&mut s, &mut rng),
            _ if s.transfers.is_empty() => {}
            _ => {
                corrupt(&mut s, &mut rng);
            }
        }
        every_form_reads_the_same(&s)?;
    }
}

/// Schedules of baselines whose messages carry long runs: bucket's every k-th chunk, the
/// ring's blocks, recursive halving's halves.
fn long_runs() -> Vec<(String, Schedule)> {
    let mut out = Vec::new();
    for (algo, topo_spec, kind, k) in [
        ("bucket", "torus:16x16", K::AllReduce, 4),
        ("ring", "ring:6", K::AllGather, 16),
        ("rabenseifner", "hypercube:4", K::AllReduce, 16),
        ("ring", "ring:5", K::ReduceScatter, 16),
    ] {
        let t = topo(topo_spec);
        let spec = CollectiveSpec::new(kind, 1 << 20).with_chunks_per_npu(k);
        let (s, r) = baseline(algo, &t, spec).unwrap_or_else(|e| panic!("{algo} on {topo_spec}: {e}"));
        assert!(r.valid);
        out.push((format!("{algo} {kind:?} on {topo_spec}"), s));
    }
    out
}

#[test]
fn long_runs_are_written_as_ranges_and_read_back() {
    for (what, s) in long_runs() {
        let compact = serde_json::to_string(&s).unwrap();
        let explicit = serde_json::to_string(&s.written(Form::Explicit)).unwrap();
        // Rows (an object only where a transfer writes other slots), with ranges in them.
        let v: Value = serde_json::from_str(&compact).unwrap();
        let rows = v["transfers"].as_array().unwrap();
        assert!(rows.iter().all(|t| t.is_array() || t.get("dst_chunks").is_some()), "{what}: an object written");
        let ranged = |t: &Value| t.is_array() && t[3].as_array().unwrap().iter().any(Value::is_array);
        assert!(rows.iter().any(ranged), "{what}: no range written");
        assert!(!compact.contains("\"start\""), "{what}: a range object written");
        assert!(!compact.contains("precondition") && !compact.contains("postcondition"), "{what}");
        assert!(compact.len() < explicit.len(), "{what}: {} >= {}", compact.len(), explicit.len());
        every_form_reads_the_same(&s).unwrap_or_else(|e| panic!("{what}: {e}"));
        // These are what the replays on ranges are for: they run them, not decline them.
        assert_eq!(ccsynth::validate::valid_on_ranges(&s), Some(true), "{what}");
        assert_eq!(ccsynth::sim::simulate_on_ranges(&s), Some(ccsynth::sim::simulate_on_slots(&s)), "{what}");
    }
}

/// The ids a document's lists expand to, read from its JSON before it is decoded (what the
/// service holds from its budget while reading), are at least what the read lists hold: in
/// every form, and for a few bytes of ranges that expand to many.
#[test]
fn a_document_s_lists_are_sized_before_they_are_read() {
    use ccsynth::schedule::wire::declared_list_ids;
    for (what, s) in long_runs() {
        let held = s.transfers.list_entries() as u64;
        for text in [serde_json::to_string(&s).unwrap(), serde_json::to_string(&s.written(Form::Explicit)).unwrap()] {
            let v: Value = serde_json::from_str(&text).unwrap();
            let declared = declared_list_ids(&v);
            let read = Schedule::from_json(&text).unwrap().transfers.list_entries() as u64;
            assert!(declared >= read && read == held, "{what}: declared {declared}, read {read}, held {held}");
        }
    }
    // Four rows of one range of 2^26 ids each (a body of 1 kB, 1 GiB of lists), and a list
    // written twice counted once; ranges as arrays and as objects.
    let rows: Vec<Value> = (0..4u64)
        .map(|k| json!([0, 0, 1, [[k, 1u64 << 26, 1]], "copy"]))
        .chain([json!([1, 0, 1, [[0, 1u64 << 26, 1]], "copy"])])
        .chain([json!({"step": 2, "src": 0, "dst": 1, "chunks": [{"start": 0, "count": 5, "stride": 2}, 99]})])
        .collect();
    assert_eq!(declared_list_ids(&json!({"transfers": rows})), 4 * (1 << 26) + 6);
    // Destination slots are kept per transfer, so each counts, alike or not (ten of 2^26 were
    // counted as one, and read 2.5 GiB).
    let slots = json!({"step": 0, "src": 0, "dst": 1, "chunks": [0], "dst_chunks": [[0, 1u64 << 26, 1]]});
    assert_eq!(declared_list_ids(&json!({"transfers": vec![slots; 10]})), 10 * (1 << 26) + 1);
}

/// Applies `f` to the `at`-th range object in `v`'s transfers (in order), returning whether there
/// was one.
fn edit_range(v: &mut Value, mut at: usize, f: &dyn Fn(&mut Vec<Value>, usize)) -> bool {
    for t in v["transfers"].as_array_mut().unwrap() {
        let list = t["chunks"].as_array_mut().unwrap();
        for i in 0..list.len() {
            if list[i].is_object() && list[i]["count"].as_u64().unwrap() >= 2 {
                if at == 0 {
                    f(list, i);
                    return true;
                }
                at -= 1;
            }
        }
    }
    false
}

/// How many range objects of two or more ids `v`'s transfers hold (what `edit_range` counts).
fn range_count(v: &Value) -> usize {
    let lists = v["transfers"].as_array().unwrap().iter().map(|t| t["chunks"].as_array().unwrap());
    lists.flatten().filter(|e| e.is_object() && e["count"].as_u64().unwrap() >= 2).count()
}

fn field(r: &Value, name: &str) -> u64 {
    r.get(name).and_then(Value::as_u64).unwrap_or(1)
}

/// What the validator reports on `v` (read as a schedule: it must read).
fn verdict(what: &str, v: &Value) -> ccsynth::validate::Report {
    let s = Schedule::from_json(&v.to_string()).unwrap_or_else(|e| panic!("{what}: {e}"));
    ccsynth::validate::validate(&s)
}

/// `v` with every range object replaced by the ids it stands for (this file's reading of a
/// range, the oracle).
fn expanded(v: &Value) -> Value {
    let mut v = v.clone();
    for t in v["transfers"].as_array_mut().unwrap() {
        let list = t["chunks"].as_array().unwrap();
        let ids: Vec<Value> = list
            .iter()
            .flat_map(|e| match e.as_u64() {
                Some(id) => vec![json!(id)],
                None => {
                    let (start, count, stride) = (field(e, "start"), field(e, "count"), field(e, "stride"));
                    (0..count).map(|k| json!(start + k * stride)).collect()
                }
            })
            .collect();
        t["chunks"] = Value::Array(ids);
    }
    v
}

#[test]
fn the_validator_catches_every_range_mutation() {
    // (what, the edit, whether every schedule here breaks under it, the violation it must name).
    // One chunk more at the end may be a chunk the source holds and the destination may take
    // (an all-gather's copy): there the verdict must only be the explicit list's.
    type Mutation = (&'static str, &'static dyn Fn(&mut Vec<Value>, usize), bool, Option<ViolationKind>);
    let mutations: [Mutation; 6] = [
        ("one chunk more at the end", &|l, i| l[i]["count"] = json!(field(&l[i], "count") + 1), false, None),
        ("one chunk fewer at the end", &|l, i| l[i]["count"] = json!(field(&l[i], "count") - 1), true, None),
        (
            "one chunk fewer at the start",
            &|l, i| {
                let (start, stride, count) = (field(&l[i], "start"), field(&l[i], "stride"), field(&l[i], "count"));
                l[i]["start"] = json!(start + stride);
                l[i]["count"] = json!(count - 1);
            },
            true,
            None,
        ),
        ("a wrong stride", &|l, i| l[i]["stride"] = json!(field(&l[i], "stride") + 1), true, None),
        (
            "overlapping ranges",
            &|l, i| {
                let second = json!({"start": field(&l[i], "start") + field(&l[i], "stride"), "count": 1});
                l.push(second);
            },
            true,
            Some(ViolationKind::DuplicateChunk),
        ),
        (
            "a range past the chunk count",
            &|l, i| l[i]["start"] = json!(1_000_000),
            true,
            Some(ViolationKind::ChunkOutOfRange),
        ),
    ];
    for (what, s) in long_runs() {
        let v = ranged(&s);
        assert!(verdict(&what, &v).valid, "{what}: the unmutated ranges");
        let ranges = range_count(&v);
        assert!(ranges >= 4, "{what}: {ranges} ranges");
        // Four ranges spread over the schedule, each mutated every way.
        for at in [0, ranges / 3, 2 * ranges / 3, ranges - 1] {
            for (how, f, breaks, kind) in &mutations {
                let mut m = v.clone();
                assert!(edit_range(&mut m, at, *f));
                let r = verdict(&what, &m);
                let oracle = verdict(&what, &expanded(&m));
                assert_eq!(
                    (r.valid, &r.violations, r.violation_count),
                    (oracle.valid, &oracle.violations, oracle.violation_count),
                    "{what}: {how} in range {at}: not what the ids it stands for give"
                );
                if *breaks {
                    assert!(!r.valid, "{what}: {how} in range {at} went unnoticed");
                }
                let read = Schedule::from_json(&m.to_string()).unwrap();
                let on_ranges = ccsynth::validate::valid_on_ranges(&read);
                assert!(on_ranges.is_none_or(|v| v == r.valid), "{what}: {how} in range {at}: {on_ranges:?} on ranges");
                crate::conformance::replays_the_same_on_ranges_if_valid(&what, &read, r.valid);
                if let Some(kind) = kind {
                    assert!(r.kinds().contains(kind), "{what}: {how} in range {at}: {:?}", r.kinds());
                }
            }
        }
    }
}

#[test]
fn an_off_by_one_range_is_named_exactly() {
    // A ring all-gather on ring:4 with 4 chunks per NPU: each message carries one NPU's four
    // chunks, consecutive. One chunk fewer in NPU 0's first message: nothing else breaks, but
    // NPU 1, and everyone after it on the ring, never gets chunk 3.
    let t = topo("ring:4");
    let spec = CollectiveSpec::new(K::AllGather, 1 << 16).with_chunks_per_npu(4);
    let (s, r) = baseline("ring", &t, spec).unwrap();
    assert!(r.valid);
    let mut v = ranged(&s);
    let first = v["transfers"]
        .as_array()
        .unwrap()
        .iter()
        .position(|t| t["src"] == 0 && t["chunks"] == json!([{"start": 0, "count": 4}]))
        .expect("NPU 0 sends chunks 0..4 in one range");
    v["transfers"][first]["chunks"] = json!([{"start": 0, "count": 3}]);
    let r = verdict("ring", &v);
    let unmet: Vec<_> = r.violations.iter().map(|x| (x.kind, x.npu, x.chunk)).collect();
    assert_eq!(
        unmet,
        vec![
            (ViolationKind::SourceMissingChunk, Some(1), Some(3)),
            (ViolationKind::SourceMissingChunk, Some(2), Some(3)),
            (ViolationKind::PostconditionUnmet, Some(1), Some(3)),
            (ViolationKind::PostconditionUnmet, Some(2), Some(3)),
            (ViolationKind::PostconditionUnmet, Some(3), Some(3)),
        ],
        "{:?}",
        r.violations
    );
}

#[test]
fn old_explicit_files_still_read_and_are_what_the_explicit_form_writes() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ring-allreduce-torus4x4.json")).unwrap();
    let s = Schedule::from_json(&text).unwrap();
    assert!(engine::check(&s).valid);
    // Written before the compact form: the explicit form writes the same document (its chunk
    // size, a float, was written as an integer by hand).
    let mut old: Value = serde_json::from_str(&text).unwrap();
    let mut new = serde_json::to_value(s.written(Form::Explicit)).unwrap();
    assert_eq!(old["chunk_size_bytes"].as_f64(), new["chunk_size_bytes"].as_f64());
    old["chunk_size_bytes"] = Value::Null;
    new["chunk_size_bytes"] = Value::Null;
    assert_eq!(new, old);
    // Its compact form leaves the all-reduce's conditions out and reads back the same.
    let compact = serde_json::to_string(&s).unwrap();
    assert!(!compact.contains("precondition"));
    assert_eq!(Schedule::from_json(&compact).unwrap(), s);
}

#[test]
fn conditions_a_custom_collective_or_an_edit_gives_are_written() {
    let t = topo("ring:4");
    // A custom collective keeps its conditions.
    let mut spec = CollectiveSpec::new(K::Custom, 1 << 10);
    spec.num_chunks = Some(2);
    spec.precondition = Some(vec![[0, 0], [1, 1]]);
    spec.postcondition = Some(vec![[0, 0], [0, 1], [1, 1], [2, 0]]);
    let c = Collective::build(&spec, &t).unwrap();
    let s = Schedule::new(t.clone(), &c, "test");
    let text = serde_json::to_string(&s).unwrap();
    assert!(text.contains("\"precondition\":[[0,0],[1,1]]"), "{text}");
    assert_eq!(Schedule::from_json(&text).unwrap(), s);
    // A standard collective whose condition was changed keeps the change, and the validator
    // sees it.
    let c = coll(&t, K::AllGather, 1 << 10);
    let mut s = Schedule::new(t, &c, "test");
    s.postcondition.edit(|post| post.pop());
    let text = serde_json::to_string(&s).unwrap();
    assert!(text.contains("postcondition"), "{text}");
    let back = Schedule::from_json(&text).unwrap();
    assert_eq!(back, s);
    assert!(ccsynth::validate::validate(&back).kinds().contains(&ViolationKind::CollectiveMismatch));
}

#[test]
fn ranges_that_cannot_be_read_name_their_place() {
    let t = topo("ring:4");
    let c = coll(&t, K::AllGather, 1 << 10);
    let s = Schedule::new(t, &c, "test");
    let mut v = serde_json::to_value(&s).unwrap();
    v["transfers"] = json!([{"step": 0, "src": 0, "dst": 1, "chunks": [0, {"start": 1, "count": 0}]}]);
    let e = Schedule::from_json(&v.to_string()).unwrap_err();
    assert_eq!(e.errors[0].path, "transfers[0].chunks[1]");
    assert!(e.errors[0].message.contains("count 0"), "{e}");
    v["transfers"] = json!([{"step": 0, "src": 0, "dst": 1, "chunks": {"start": 1, "count": 2}}]);
    let e = Schedule::from_json(&v.to_string()).unwrap_err();
    assert_eq!(e.errors[0].path, "transfers[0].chunks");
}

/// The replay on ranges, where it runs, says what the chunk replay says: on bucket's
/// all-reduce over tori of two and three dimensions and a mesh (whose parts reduce along
/// different axes first, each held in its own NPU numbering) and on every breakage of a few
/// transfers of them.
#[test]
fn the_replay_on_ranges_finds_what_the_chunk_replay_finds() {
    type Edit<'a> = dyn Fn(&mut Vec<ccsynth::Transfer>) + 'a;
    use ccsynth::schedule::Op;
    for spec in ["torus:8x8", "torus:4x4x4", "mesh:4x6", "torus:4x8"] {
        let t = topo(spec);
        let (s, r) = baseline("bucket", &t, CollectiveSpec::new(K::AllReduce, 1 << 20)).unwrap();
        assert!(r.valid, "{spec}");
        assert_eq!(ccsynth::validate::valid_on_ranges(&s), Some(true), "{spec}: bucket on ranges");
        let n = s.transfers.len();
        let mut broken = 0;
        for k in [0, n / 5, n / 3, n / 2, 2 * n / 3, n - 1] {
            let reduce = s.transfers.at(k).op == Op::Reduce;
            let edits: [(&str, &Edit<'_>); 4] = [
                ("dropped", &|v| {
                    v.remove(k);
                }),
                ("op flipped", &|v| v[k].op = if reduce { Op::Copy } else { Op::Reduce }),
                ("a step early", &|v| v[k].step = v[k].step.saturating_sub(1)),
                ("sent twice", &|v| {
                    let again = v[k].clone();
                    v.insert(k, again);
                }),
            ];
            for (how, edit) in edits {
                let mut m = s.clone();
                m.transfers.edit(|v| edit(v));
                let chunks = ccsynth::validate::validate(&m);
                let on_ranges = ccsynth::validate::valid_on_ranges(&m);
                assert!(on_ranges.is_none_or(|v| v == chunks.valid), "{spec}: transfer {k} {how}: {on_ranges:?}");
                broken += usize::from(on_ranges == Some(false));
            }
        }
        assert!(broken >= 12, "{spec}: the replay on ranges found only {broken} breakages");
    }
}
