//! The time-expanded network: spans, native and unwound switches, distances.

use crate::common::*;
use ccsynth::ten::{SwitchModel, Ten, TenError};
use ccsynth::topology::Topology;

#[test]
fn spans_follow_the_discretization() {
    // x links 50 GB/s, y links 100 GB/s: with 1000-byte chunks, 520 ns and 510 ns.
    let t = topo("mesh:2x2@bw=50,100;lat=500");
    let ten = Ten::build(&t, 1000.0, SwitchModel::Native, None).unwrap();
    assert_eq!(ten.discretization_ns, 510.0);
    let span = |a: u32, b: u32| ten.edges.iter().find(|e| e.src == a && e.dst == b).unwrap().span;
    assert_eq!((span(0, 1), span(0, 2)), (2, 1));
    let fine = Ten::build(&t, 1000.0, SwitchModel::Native, Some(10.0)).unwrap();
    let span = |a: u32, b: u32| fine.edges.iter().find(|e| e.src == a && e.dst == b).unwrap().span;
    assert_eq!((span(0, 1), span(0, 2)), (52, 51));
    assert_eq!(Ten::build(&t, 1000.0, SwitchModel::Native, Some(0.0)).unwrap_err(), TenError::Discretization(0.0));
    // A time exactly k·f spans k steps.
    let exact = Ten::build(&t, 1000.0, SwitchModel::Native, Some(260.0)).unwrap();
    assert_eq!(exact.edges.iter().find(|e| e.src == 0 && e.dst == 1).unwrap().span, 2);
}

#[test]
fn native_switches_are_crossbars_of_ports() {
    let t = topo("switch:4@bw=10;lat=100");
    let ten = Ten::build(&t, 1000.0, SwitchModel::Native, None).unwrap();
    assert_eq!(ten.edges.len(), 12);
    let e = ten.edges.iter().find(|e| e.src == 1 && e.dst == 3).unwrap();
    assert_eq!(e.path.as_deref(), Some(&[1, 4, 3][..]));
    assert_eq!(e.resources, vec![t.link_index(1, 4).unwrap() as u32, t.link_index(4, 3).unwrap() as u32]);
    assert!(close(e.time_ns, 200.0 + 100.0));
    // Rail: NPUs reach each other through the node switch or the rail switch, never both.
    let t = topo("rail:2x2");
    let ten = Ten::build(&t, 1.0, SwitchModel::Native, None).unwrap();
    let paths: Vec<Vec<u32>> =
        ten.edges.iter().filter(|e| e.src == 0).map(|e| e.path.as_deref().unwrap().to_vec()).collect();
    assert_eq!(paths, vec![vec![0, 4, 1], vec![0, 6, 2]]);
    // Switch chains (a two-level tree) work natively.
    let t = Topology::from_json(
        r#"{"npus": 2, "switches": 2, "default_link": {"latency_ns": 1, "bandwidth_gb_per_s": 1},
            "links": [{"src": 0, "dst": 2, "bidirectional": true}, {"src": 2, "dst": 3, "bidirectional": true},
                      {"src": 3, "dst": 1, "bidirectional": true}]}"#,
    )
    .unwrap();
    let ten = Ten::build(&t, 1.0, SwitchModel::Native, None).unwrap();
    assert_eq!(ten.edges.iter().find(|e| e.src == 0).unwrap().path.as_deref(), Some(&[0, 2, 3, 1][..]));
    assert!(matches!(Ten::build(&t, 1.0, SwitchModel::Unwind { degree: 1 }, None), Err(TenError::SwitchChain { .. })));
}

#[test]
fn unwinding_follows_tacos() {
    let t = topo("switch:4@bw=120;lat=100");
    for (model, edges, bw) in [
        (SwitchModel::Unwind { degree: 1 }, 4, 120.0),
        (SwitchModel::Unwind { degree: 2 }, 8, 60.0),
        (SwitchModel::Unwind { degree: 3 }, 12, 40.0),
        (SwitchModel::UnwindBiRing, 8, 60.0),
    ] {
        let ten = Ten::build(&t, 1200.0, model, None).unwrap();
        assert_eq!(ten.edges.len(), edges, "{model:?}");
        for e in &ten.edges {
            assert!(close(e.time_ns, 200.0 + 1200.0 / bw), "{model:?}");
            assert_eq!(e.resources.len(), 1);
        }
    }
    let ten = Ten::build(&t, 1.0, SwitchModel::Unwind { degree: 1 }, None).unwrap();
    let mut pairs: Vec<(u32, u32)> = ten.edges.iter().map(|e| (e.src, e.dst)).collect();
    pairs.sort();
    assert_eq!(pairs, vec![(0, 1), (1, 2), (2, 3), (3, 0)]);
    // A degree beyond N−1 unwinds fully.
    assert_eq!(Ten::build(&t, 1.0, SwitchModel::Unwind { degree: 9 }, None).unwrap().edges.len(), 12);
    for s in ["native", "unwind:3", "unwind:bi"] {
        assert_eq!(SwitchModel::parse(s).unwrap().name(), s);
    }
    assert!(SwitchModel::parse("unwind:0").is_err() && SwitchModel::parse("crossbar").is_err());
}

#[test]
fn distances_and_diameter() {
    let t = topo("ring:8:uni");
    let ten = Ten::build(&t, 1.0, SwitchModel::Native, None).unwrap();
    assert_eq!(ten.distances_from(&[0]), vec![0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(ten.distances_from(&[0, 4]), vec![0, 1, 2, 3, 0, 1, 2, 3]);
    assert_eq!(ten.diameter(&(0..8).collect::<Vec<_>>()), 7);
    let ten = Ten::build(&topo("torus:4x4"), 1.0, SwitchModel::Native, None).unwrap();
    assert_eq!(ten.diameter(&(0..16).collect::<Vec<_>>()), 4);
}

/// A link that would span more timesteps than a TEN edge may is left out, the rest kept: link
/// 0-1 of torus:4x4 at 100 ms of latency beside 500 ns (2·10^5 timesteps of the fastest edge).
#[test]
fn a_link_too_slow_for_the_ten_is_left_out() {
    use ccsynth::topology::{DegradedLink, Failures};
    let slow = DegradedLink { link: [0, 1], bandwidth_gb_per_s: None, latency_ns: Some(1e8) };
    let t = topo("torus:4x4").with_failures(&Failures { degraded_links: vec![slow], ..Failures::default() }).unwrap();
    let ten = Ten::build(&t, 1000.0, SwitchModel::Native, None).unwrap();
    let pairs: Vec<(u32, u32)> = ten.edges.iter().map(|e| (e.src, e.dst)).collect();
    assert_eq!(pairs.len(), t.links().len() - 2);
    assert!(!pairs.contains(&(0, 1)) && !pairs.contains(&(1, 0)));
    assert_eq!(ten.distances_from(&[0])[1], 3, "around the slow link");
}

#[test]
fn a_discretization_too_fine_is_refused() {
    let t = topo("ring:4");
    let e = Ten::build(&t, 10.0, SwitchModel::Native, Some(0.001)).unwrap_err();
    assert!(matches!(e, TenError::TooFine { .. }), "{e}");
    assert!(e.to_string().contains("too fine"));
}
