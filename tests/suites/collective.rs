//! Collectives: chunk counts, sizes and conditions of every kind; bad requests; reachability
//! measured only where the collective needs it.

use crate::common::*;
use ccsynth::collective::{Collective, CollectiveKind as K, CollectiveSpec};
use ccsynth::topology::{Failures, Topology};

fn pairs(v: &ccsynth::collective::Pairs) -> Vec<(u32, u32)> {
    v.iter().map(|p| (p[0], p[1])).collect()
}

#[test]
fn every_kind_has_the_documented_shape() {
    let t = topo("ring:3");
    let k2 = |kind| coll_spec(&t, CollectiveSpec::new(kind, 6000).with_chunks_per_npu(2));
    let ag = k2(K::AllGather);
    assert_eq!((ag.num_chunks, ag.chunk_size_bytes, ag.combining), (6, 1000.0, false));
    assert_eq!(pairs(&ag.precondition), [(0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (2, 5)]);
    assert_eq!(ag.postcondition.len(), 18);
    let rs = k2(K::ReduceScatter);
    assert_eq!((rs.num_chunks, rs.chunk_size_bytes, rs.combining), (6, 1000.0, true));
    assert_eq!(rs.precondition.len(), 18);
    assert_eq!(pairs(&rs.postcondition), [(0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (2, 5)]);
    let ar = k2(K::AllReduce);
    assert_eq!((ar.num_chunks, ar.combining, ar.precondition.len(), ar.postcondition.len()), (6, true, 18, 18));
    let rooted = |kind| coll_spec(&t, CollectiveSpec::new(kind, 6000).with_chunks_per_npu(2).with_root(1));
    let b = rooted(K::Broadcast);
    assert_eq!((b.num_chunks, b.chunk_size_bytes, b.combining), (2, 3000.0, false));
    assert_eq!(pairs(&b.precondition), [(1, 0), (1, 1)]);
    assert_eq!(b.postcondition.len(), 6);
    let r = rooted(K::Reduce);
    assert_eq!((r.num_chunks, r.combining, r.precondition.len()), (2, true, 6));
    assert_eq!(pairs(&r.postcondition), [(1, 0), (1, 1)]);
    let sc = rooted(K::Scatter);
    assert_eq!((sc.num_chunks, sc.chunk_size_bytes), (6, 1000.0));
    assert_eq!(sc.precondition.len(), 6);
    assert_eq!(pairs(&sc.postcondition), pairs(&ag.precondition));
    let ga = rooted(K::Gather);
    assert_eq!(pairs(&ga.precondition), pairs(&ag.precondition));
    assert!(ga.postcondition.iter().all(|p| p[0] == 1));
    let a2a = k2(K::AllToAll);
    // Chunk (i·p + j)·k + x goes from rank i to rank j; each NPU receives size_bytes.
    assert_eq!((a2a.num_chunks, a2a.chunk_size_bytes), (18, 1000.0));
    assert!(a2a.precondition.contains(&[0, 2 * 2 + 1]) && a2a.postcondition.contains(&[2, 2 * 2 + 1]));
    assert!(a2a.precondition.contains(&[1, (3 + 2) * 2]) && a2a.postcondition.contains(&[2, (3 + 2) * 2]));
    // Uneven sizes give fractional chunks.
    let odd = coll(&t, K::AllGather, 1000);
    assert!(close(odd.chunk_size_bytes, 1000.0 / 3.0));
}

#[test]
fn groups_and_ranks_follow_the_given_order() {
    let t = topo("ring:6");
    let mut spec = CollectiveSpec::new(K::AllGather, 300);
    spec.group = Some(vec![4, 1, 2]);
    let c = coll_spec(&t, spec);
    assert_eq!(c.group, [4, 1, 2]);
    assert_eq!(pairs(&c.precondition), [(1, 1), (2, 2), (4, 0)]);
    assert!(c.postcondition.iter().all(|p| [1, 2, 4].contains(&p[0])));
}

#[test]
fn custom_collectives_take_explicit_conditions() {
    let t = topo("ring:4");
    let mut spec = CollectiveSpec::new(K::Custom, 4000);
    spec.num_chunks = Some(2);
    spec.precondition = Some(vec![[0, 0], [3, 1]]);
    spec.postcondition = Some(vec![[2, 0], [2, 1], [1, 0]]);
    let c = coll_spec(&t, spec.clone());
    assert_eq!((c.num_chunks, c.chunk_size_bytes, c.combining), (2, 2000.0, false));
    assert_eq!(c.needed().len(), 3);
    spec.postcondition = Some(vec![[2, 5]]);
    let e = Collective::build(&spec, &t).unwrap_err();
    assert_eq!(e.errors[0].path, "postcondition[0]");
}

#[test]
fn bad_requests_name_the_field() {
    let t = topo("ring:4");
    let failed = t.with_failures(&Failures { npus: vec![3], ..Default::default() }).unwrap();
    let cases: Vec<(CollectiveSpec, &Topology, &str)> = vec![
        (CollectiveSpec::new(K::Broadcast, 10), &t, "root"),
        (CollectiveSpec::new(K::Broadcast, 10).with_root(9), &t, "root"),
        (CollectiveSpec::new(K::Broadcast, 10).with_root(3), &failed, "root"),
        (CollectiveSpec::new(K::AllGather, 10).with_root(0), &t, "root"),
        (CollectiveSpec::new(K::AllGather, 0), &t, "size_bytes"),
        (CollectiveSpec::new(K::AllGather, 10).with_chunks_per_npu(0), &t, "chunks_per_npu"),
        (CollectiveSpec { group: Some(vec![0, 0]), ..CollectiveSpec::new(K::AllGather, 10) }, &t, "group[1]"),
        (CollectiveSpec { group: Some(vec![0, 7]), ..CollectiveSpec::new(K::AllGather, 10) }, &t, "group[1]"),
        (CollectiveSpec { group: Some(vec![]), ..CollectiveSpec::new(K::AllGather, 10) }, &t, "group"),
        (CollectiveSpec { num_chunks: Some(3), ..CollectiveSpec::new(K::AllGather, 10) }, &t, "."),
        (CollectiveSpec::new(K::Custom, 10), &t, "num_chunks"),
        (
            CollectiveSpec { gamma_ns_per_byte: Some(-1.0), ..CollectiveSpec::new(K::AllReduce, 10) },
            &t,
            "gamma_ns_per_byte",
        ),
        (
            CollectiveSpec { gamma_ns_per_byte: Some(1e308), ..CollectiveSpec::new(K::AllReduce, 10) },
            &t,
            "gamma_ns_per_byte",
        ),
        (CollectiveSpec::new(K::AllToAll, 10).with_chunks_per_npu(4_000_000), &t, "chunks_per_npu"),
    ];
    for (spec, topo, path) in cases {
        let e = Collective::build(&spec, topo).expect_err(path);
        assert_eq!(e.errors[0].path, path, "{e}");
    }
    // A failed NPU is left out of the default group.
    assert_eq!(coll(&failed, K::AllGather, 30).group, [0, 1, 2]);
}

#[test]
fn connectivity_is_checked_only_where_the_collective_needs_it() {
    // A star pointing out of NPU 0: 0 reaches everyone, nobody reaches 0.
    let t = Topology::from_json(
        r#"{"npus": 3, "default_link": {"latency_ns": 1, "bandwidth_gb_per_s": 1},
            "links": [{"src": 0, "dst": 1}, {"src": 0, "dst": 2}]}"#,
    )
    .unwrap();
    assert!(Collective::build(&CollectiveSpec::new(K::Broadcast, 9).with_root(0), &t).is_ok());
    assert!(Collective::build(&CollectiveSpec::new(K::Scatter, 9).with_root(0), &t).is_ok());
    for spec in [
        CollectiveSpec::new(K::Broadcast, 9).with_root(1),
        CollectiveSpec::new(K::Reduce, 9).with_root(0),
        CollectiveSpec::new(K::Gather, 9).with_root(0),
        CollectiveSpec::new(K::AllGather, 9),
        CollectiveSpec::new(K::AllReduce, 9),
    ] {
        let e = Collective::build(&spec, &t).unwrap_err();
        assert!(e.to_string().contains("not connected"), "{e}");
    }
    // A group inside a connected part of a split topology is fine.
    let split = topo("ring:6").with_failures(&Failures { links: vec![[0, 1], [3, 4]], ..Default::default() }).unwrap();
    let mut spec = CollectiveSpec::new(K::AllReduce, 9);
    spec.group = Some(vec![1, 2, 3]);
    assert!(Collective::build(&spec, &split).is_ok());
    spec.group = Some(vec![1, 2, 4]);
    let e = Collective::build(&spec, &split).unwrap_err();
    assert_eq!(e.errors[0].path, "group", "{e}");
    assert!(
        e.errors[0].message.ends_with(
            "it falls into 2 parts (NPU 4; NPUs [1, 2]): fail the NPUs cut off too, or give a group inside one part"
        ),
        "{e}"
    );
    // The whole ring, split in two halves of three.
    let e = Collective::build(&CollectiveSpec::new(K::AllGather, 9), &split).unwrap_err();
    assert!(e.errors[0].message.contains("it falls into 2 parts (NPUs [0, 4, 5]; NPUs [1, 2, 3])"), "{e}");
}

#[test]
fn kinds_parse_from_their_names() {
    for k in K::ALL {
        assert_eq!(K::parse(k.name()), Some(k));
        assert_eq!(serde_json::to_value(k).unwrap(), k.name());
    }
    assert_eq!(K::parse("all-reduce"), Some(K::AllReduce));
    assert_eq!(K::parse("allreduce"), None);
}
