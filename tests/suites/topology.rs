//! Topology JSON (errors name their path), canonical output, generators and failures.

use crate::common::*;
use ccsynth::topology::{Failures, Topology, parse_spec, parse_topology};

#[test]
fn rejections_name_the_path_and_what_was_expected() {
    let cases: &[(&str, &str, &str)] = &[
        (r#"{"npus": 2, "colour": 1}"#, "colour", "unknown field"),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 1, "speed": 2}]}"#,
            "links[0].speed",
            "unknown field",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 5, "latency_ns": 1, "bandwidth_gb_per_s": 1}]}"#,
            "links[0].dst",
            "out of range",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 1, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 1}]}"#,
            "links[0].dst",
            "self-loop",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 1, "bidirectional": true},
                                     {"src": 1, "dst": 0, "latency_ns": 1, "bandwidth_gb_per_s": 1}]}"#,
            "links[1]",
            "duplicate link 1->0",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 0}]}"#,
            "links[0].bandwidth_gb_per_s",
            "at least 1e-6 GB/s",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": -3}]}"#,
            "links[0].bandwidth_gb_per_s",
            "at least 1e-6 GB/s",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": -1, "bandwidth_gb_per_s": 1}]}"#,
            "links[0].latency_ns",
            "from 0 to 1e12 ns",
        ),
        // Values whose times overflow: a latency of 1e308 summed to infinity, a subnormal
        // bandwidth made every transfer infinite (the schedule's time then read null).
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1e308, "bandwidth_gb_per_s": 1}]}"#,
            "links[0].latency_ns",
            "1e308 is invalid: expected a latency from 0 to 1e12 ns",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 1e-320}]}"#,
            "links[0].bandwidth_gb_per_s",
            "1e-320 is invalid: expected a finite bandwidth of at least 1e-6 GB/s",
        ),
        (r#"{"npus": 2, "links": [{"src": 0, "dst": 1}]}"#, "links[0].latency_ns", "default_link"),
        (r#"{"npus": 0}"#, "npus", "at least 1"),
        (r#"{"npus": -4}"#, "npus", "non-negative integer"),
        (r#"{"switches": 1}"#, "npus", "missing field `npus`"),
        (
            r#"{"npus": 2, "default_link": {"latency_ns": 1, "bandwidth_gb_per_s": 1e400}}"#,
            "default_link.bandwidth_gb_per_s",
            "",
        ),
        (
            r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 1}"#,
            "links",
            "malformed JSON",
        ),
        (r#"{"npus": 2, "failed_npus": [2]}"#, "failed_npus[0]", "not an NPU"),
        (r#"{"npus": 4, "failed_npus": [3, 1, 3]}"#, "failed_npus[2]", "NPU 3 is listed twice"),
        (
            r#"{"npus": 2, "failed_npus": [1], "links": [{"src": 0, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 1}]}"#,
            "links[0]",
            "failed NPU 1",
        ),
    ];
    for (json, path, msg) in cases {
        let e = Topology::from_json(json).expect_err(json);
        assert!(
            e.errors.iter().any(|f| f.path == *path && f.message.contains(msg)),
            "{json}\n  wanted {path}: {msg}\n  got {e}"
        );
    }
}

#[test]
fn all_problems_are_reported_at_once() {
    let e = Topology::from_json(
        r#"{"npus": 2, "links": [{"src": 0, "dst": 9, "latency_ns": 1, "bandwidth_gb_per_s": 1},
                                 {"src": 1, "dst": 0, "latency_ns": -1, "bandwidth_gb_per_s": 0}]}"#,
    )
    .unwrap_err();
    let paths: Vec<&str> = e.errors.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["links[0].dst", "links[1].latency_ns", "links[1].bandwidth_gb_per_s"]);
    assert_eq!(e.omitted, 0);
}

/// Beyond `MAX_FIELD_ERRORS` the validator counts instead of listing: 5000 self-loops are 1000
/// errors listed and 4000 counted, so refusing them costs bounded memory.
#[test]
fn a_million_problems_are_counted_not_listed() {
    let links: Vec<String> =
        (0..5000).map(|_| r#"{"src": 1, "dst": 1, "latency_ns": 1, "bandwidth_gb_per_s": 1}"#.to_string()).collect();
    let e = Topology::from_json(&format!(r#"{{"npus": 2, "links": [{}]}}"#, links.join(","))).unwrap_err();
    assert_eq!((e.errors.len(), e.omitted), (ccsynth::error::MAX_FIELD_ERRORS, 4000));
    // Shown (by the CLI, say): the first 20, and the rest counted.
    let shown = e.to_string();
    assert!(shown.ends_with("; and 4980 more errors"), "{}", &shown[..200]);
    assert_eq!(shown.matches("self-loop").count(), ccsynth::error::SHOWN_FIELD_ERRORS);
    // A long value is clipped where it is shown.
    let long = ccsynth::error::InputError::new("spec", "x".repeat(100_000));
    assert!(long.to_string().len() < 400 && long.to_string().ends_with("(100000 characters)"), "{}", long);
}

#[test]
fn conveniences_expand_into_the_canonical_form() {
    let t = Topology::from_json(
        r#"{"npus": 3, "default_link": {"latency_ns": 7, "bandwidth_gb_per_s": 3},
            "links": [{"src": 2, "dst": 0, "bidirectional": true}, {"src": 0, "dst": 1, "bandwidth_gb_per_s": 9}]}"#,
    )
    .unwrap();
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"npus": 3, "switches": 0, "links": [
            {"src": 0, "dst": 1, "latency_ns": 7.0, "bandwidth_gb_per_s": 9.0},
            {"src": 0, "dst": 2, "latency_ns": 7.0, "bandwidth_gb_per_s": 3.0},
            {"src": 2, "dst": 0, "latency_ns": 7.0, "bandwidth_gb_per_s": 3.0}]})
    );
    // The canonical form reads back as itself.
    let back = Topology::from_json(&v.to_string()).unwrap();
    assert_eq!(back, t);
    assert_eq!(parse_topology(&v.to_string()).unwrap(), t);
    // A latency of -0 is written as 0: one topology, one canonical form.
    let neg = r#"{"npus": 2, "links": [{"src": 0, "dst": 1, "latency_ns": -0.0, "bandwidth_gb_per_s": 1}]}"#;
    let json = serde_json::to_string(&Topology::from_json(neg).unwrap()).unwrap();
    assert!(json.contains(r#""latency_ns":0.0"#), "{json}");
}

fn degree_stats(t: &Topology) -> (usize, usize) {
    let d: Vec<usize> = (0..t.npus()).map(|v| t.out_links(v).len()).collect();
    (*d.iter().min().unwrap(), *d.iter().max().unwrap())
}

#[test]
fn generators_build_the_named_shapes() {
    // (spec, npus, switches, directed links, min and max NPU out-degree)
    type Case = (&'static str, usize, usize, usize, (usize, usize));
    let cases: &[Case] = &[
        ("ring:8", 8, 0, 16, (2, 2)),
        ("ring:8:uni", 8, 0, 8, (1, 1)),
        ("ring:2", 2, 0, 2, (1, 1)),
        ("mesh:5x5", 25, 0, 80, (2, 4)),
        ("mesh:4x4x4", 64, 0, 288, (3, 6)),
        ("torus:8x8x8", 512, 0, 3072, (6, 6)),
        ("torus:2x4", 8, 0, 24, (3, 3)),
        ("torus:4x4", 16, 0, 64, (4, 4)),
        ("fc:8", 8, 0, 56, (7, 7)),
        ("switch:8", 8, 1, 16, (1, 1)),
        ("hypercube:4", 16, 0, 64, (4, 4)),
        ("hyperx:4x4", 16, 0, 96, (6, 6)),
        // 8 global links per group spread over 4 routers: 3 local + 2 global each.
        ("dragonfly:4:9", 36, 0, 180, (5, 5)),
        ("hammingmesh:2x2:4x4", 64, 16, 384, (4, 4)),
        ("hier:ring2,fc4,switch8", 64, 8, 384, (5, 5)),
        ("rail:4x8", 32, 12, 128, (2, 2)),
    ];
    for &(spec, npus, switches, links, deg) in cases {
        let t = topo(spec);
        assert_eq!((t.npus(), t.switches(), t.links().len()), (npus, switches, links), "{spec}");
        assert_eq!(degree_stats(&t), deg, "{spec}");
        assert!(t.connectivity().connected, "{spec}");
    }
}

#[test]
fn generator_details() {
    // Dimension 0 varies fastest; per-dimension parameters.
    let t = topo("mesh:32x16@bw=50,100;lat=500,1000");
    let x = t.link(0, 1).unwrap();
    let y = t.link(0, 32).unwrap();
    assert_eq!((x.bandwidth_gb_per_s, x.latency_ns), (50.0, 500.0));
    assert_eq!((y.bandwidth_gb_per_s, y.latency_ns), (100.0, 1000.0));
    assert!(t.link(31, 32).is_none());
    // One value applies to every dimension; the default is 100 GB/s and 500 ns.
    let t = topo("torus:3x3@bw=25");
    assert!(t.links().iter().all(|l| l.bandwidth_gb_per_s == 25.0 && l.latency_ns == 500.0));
    assert!(t.link(2, 0).is_some() && t.link(6, 0).is_some());
    // Unidirectional ring goes i -> i+1.
    let t = topo("ring:4:uni");
    assert!(t.link(3, 0).is_some() && t.link(0, 3).is_none());
    // Switch nodes follow the NPUs; rail: GPU g of node n is n·G + g.
    let t = topo("rail:4x8@bw=400,50");
    assert_eq!(t.link(9, 32 + 1).unwrap().bandwidth_gb_per_s, 400.0); // node 1's switch
    assert_eq!(t.link(9, 36 + 1).unwrap().bandwidth_gb_per_s, 50.0); // rail 1's switch
    // Dragonfly: one global link per group pair.
    let t = topo("dragonfly:2:5");
    let global = t.links().iter().filter(|l| l.src / 2 != l.dst / 2).count();
    assert_eq!(global, 2 * 10);
    // hier: ring2 pairs 0-1, fc4 joins 0,2,4,6, switch8 joins stride-8 NPUs.
    let t = topo("hier:ring2,fc4,switch8@bw=200,100,50");
    assert_eq!(t.link(0, 1).unwrap().bandwidth_gb_per_s, 200.0);
    assert_eq!(t.link(0, 6).unwrap().bandwidth_gb_per_s, 100.0);
    assert_eq!(t.link(0, 64).unwrap().bandwidth_gb_per_s, 50.0);
    assert!(t.link(8, 64).is_some());
}

#[test]
fn bad_specs_are_rejected_clearly() {
    for (spec, msg) in [
        ("torus", "NAME:ARGS"),
        ("blob:4", "unknown generator"),
        ("ring:0", "at least 1"),
        ("ring:x", "not a count"),
        // A whole number too large for a count is too large, not "not a count".
        ("ring:99999999999999999999", "99999999999999999999 exceeds the limit of"),
        ("ring:4:both", "unknown ring option"),
        ("mesh:4x4@bw=1,2,3", "3 bw values for 2 dimensions"),
        ("mesh:4x4@bw=-1", "bandwidth -1 is invalid"),
        ("mesh:4x4@lat=-1", "latency -1 is invalid"),
        ("ring:4@lat=1e308", "latency 1e308 is invalid: expected a value from 0 to 1e12 ns"),
        ("ring:4@bw=1e-320", "bandwidth 1e-320 is invalid: expected a finite value of at least 1e-6 GB/s"),
        ("mesh:4x4@speed=1", "unknown parameter"),
        ("ring:4@bw=1;bw=2", "bw is given twice"),
        ("ring:4@ lat=1; bw=3 ;lat=2", "lat is given twice"),
        ("ring:4@", "nothing after '@'"),
        ("ring:4@;", "nothing after '@'"),
        ("ring:4@bw=50,60", "2 bw values for 1 dimension: expected 1"),
        ("torus:1024x1024x2", "more than"),
        ("dragonfly:4", "dragonfly:A:G"),
        ("hier:ring2,tree4", "expected ringN"),
    ] {
        let e = parse_spec(spec).unwrap_err().to_string();
        assert!(e.contains(msg), "{spec}: {e}");
    }
    // A long spec is echoed in part: the reason is still said (the echo filled the message).
    let long = format!("hier:{},bogus7", vec!["switch1"; 100].join(","));
    let e = parse_spec(&long).unwrap_err().to_string();
    assert!(e.contains("(811 characters)") && e.contains("\"bogus7\": expected ringN"), "{e}");
}

#[test]
fn failures_remove_links_and_npus_and_report_connectivity() {
    let t = topo("ring:6");
    let f = t.with_failures(&Failures { links: vec![[0, 1]], ..Default::default() }).unwrap();
    assert!(f.link(0, 1).is_none() && f.link(1, 0).is_none());
    assert_eq!(f.links().len(), 10);
    assert!(f.connectivity().connected);
    // A second cut splits the ring.
    let f2 = f.with_failures(&Failures { links: vec![[3, 4]], ..Default::default() }).unwrap();
    let c = f2.connectivity();
    assert!(!c.connected);
    // Largest first, ties by smallest id.
    assert_eq!(c.components, vec![vec![0, 4, 5], vec![1, 2, 3]]);
    // A directed failure removes one direction only; the other arc keeps everything reachable.
    let d = t.with_failures(&Failures { links: vec![[0, 1]], directed: true, ..Default::default() }).unwrap();
    assert!(d.link(0, 1).is_none() && d.link(1, 0).is_some());
    assert!(d.connectivity().connected);
    // An NPU failure keeps ids, removes links, and leaves the NPU out of the default group.
    let n = topo("mesh:3x3").with_failures(&Failures { npus: vec![4], ..Default::default() }).unwrap();
    assert_eq!(n.npus(), 9);
    assert_eq!(n.failed_npus(), &[4]);
    assert!(n.out_links(4).is_empty() && n.in_links(4).is_empty());
    assert_eq!(n.connectivity().live_npus, 8);
    assert!(n.connectivity().connected);
    // The degraded topology round-trips through JSON with its failed NPUs.
    let back = Topology::from_json(&serde_json::to_string(&n).unwrap()).unwrap();
    assert_eq!(back, n);
    // Failing what does not exist is an error.
    let e = t.with_failures(&Failures { links: vec![[0, 3]], npus: vec![17], ..Default::default() }).unwrap_err();
    assert_eq!(e.errors.len(), 2);
    assert_eq!(e.errors[0].path, "links[0]");
    assert_eq!(e.errors[1].path, "npus[0]");
    // A failure listed twice is refused, as a topology file's failed NPU listed twice is (a link
    // named from both ends is not twice: many write a link that fails both ways so); so is
    // failing every NPU, in a file too.
    let twice =
        |f: Failures| t.with_failures(&f).unwrap_err().errors.iter().map(|e| e.path.clone()).collect::<Vec<_>>();
    assert_eq!(twice(Failures { links: vec![[0, 1], [2, 3], [0, 1]], ..Default::default() }), ["links[2]"]);
    let ends = t.with_failures(&Failures { links: vec![[0, 1], [1, 0]], ..Default::default() }).unwrap();
    assert!(ends.link(0, 1).is_none() && ends.link(1, 0).is_none());
    assert_eq!(twice(Failures { npus: vec![3, 3], ..Default::default() }), ["npus[1]"]);
    let both_ways = Failures { links: vec![[0, 1], [1, 0]], directed: true, ..Default::default() };
    assert!(t.with_failures(&both_ways).unwrap().link(1, 0).is_none());
    let all = topo("ring:2").with_failures(&Failures { npus: vec![0, 1], ..Default::default() }).unwrap_err();
    assert_eq!(all.errors[0].path, "npus");
    assert!(all.errors[0].message.contains("at least one must stay"), "{all}");
    let e = Topology::from_json(r#"{"npus": 2, "links": [], "failed_npus": [0, 1]}"#).unwrap_err();
    assert_eq!(e.errors[0].path, "failed_npus", "{e}");
}

/// Strong components are found without recursing along paths: a one-way ring of 2^18 NPUs
/// (one component, a path of 2^18 nodes for a depth-first walk) overflowed the stack of the
/// thread that asked (`synth` on torus:128x256 aborted).
#[test]
fn a_long_one_way_ring_is_one_part() {
    let n = 1usize << 18;
    let t = parse_topology(&format!("ring:{n}:uni")).unwrap();
    let live: Vec<usize> = (0..n).collect();
    let parts = t.parts_of(&live);
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].len(), n);
    // Cut once, the ring is a path: every NPU its own part, smallest (all 1) in id order.
    let cut = t.with_failures(&Failures { links: vec![[n - 1, 0]], directed: true, ..Default::default() }).unwrap();
    let parts = cut.parts_of(&live);
    assert_eq!(parts.len(), n);
    assert_eq!(parts[0], vec![0]);
}
