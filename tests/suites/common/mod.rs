//! Shared helpers for the integration tests: small topologies, collectives and schedules.
#![allow(dead_code)]

use ccsynth::collective::{Collective, CollectiveKind, CollectiveSpec};
use ccsynth::schedule::{Schedule, Transfer};
use ccsynth::topology::{Topology, parse_spec};

pub fn topo(spec: &str) -> Topology {
    parse_spec(spec).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

pub fn coll(t: &Topology, kind: CollectiveKind, size: u64) -> Collective {
    Collective::build(&CollectiveSpec::new(kind, size), t).unwrap()
}

pub fn coll_spec(t: &Topology, spec: CollectiveSpec) -> Collective {
    Collective::build(&spec, t).unwrap()
}

pub fn sched(t: &Topology, c: &Collective, transfers: Vec<Transfer>) -> Schedule {
    let mut s = Schedule::new(t.clone(), c, "test");
    s.transfers = transfers;
    s
}

/// Unidirectional ring all-gather along `order` (hops may carry paths from `path_of`).
pub fn ring_all_gather(order: &[usize], k: usize, path_of: &dyn Fn(usize, usize) -> Option<Vec<u32>>) -> Vec<Transfer> {
    let p = order.len();
    let mut out = Vec::new();
    for s in 0..p - 1 {
        for i in 0..p {
            let owner = (i + p - s) % p;
            let chunks: Vec<u32> = (0..k).map(|x| (owner * k + x) as u32).collect();
            let (a, b) = (order[i], order[(i + 1) % p]);
            let mut t = Transfer::copy(s as u32, a, b, chunks);
            t.path = path_of(a, b).map(Into::into);
            out.push(t);
        }
    }
    out
}

/// Ring all-reduce along `order`: p−1 reduce steps, then p−1 copy steps. Chunk c belongs to
/// rank c; rank i ends the reduce-scatter holding chunk i+1 complete.
pub fn ring_all_reduce(order: &[usize], path_of: &dyn Fn(usize, usize) -> Option<Vec<u32>>) -> Vec<Transfer> {
    let p = order.len();
    let mut out = Vec::new();
    for s in 0..p - 1 {
        for i in 0..p {
            let c = ((i + p - s) % p) as u32;
            let (a, b) = (order[i], order[(i + 1) % p]);
            let mut t = Transfer::reduce(s as u32, a, b, vec![c]);
            t.path = path_of(a, b).map(Into::into);
            out.push(t);
        }
    }
    for j in 0..p - 1 {
        for i in 0..p {
            let c = ((i + 1 + p - j) % p) as u32;
            let (a, b) = (order[i], order[(i + 1) % p]);
            let mut t = Transfer::copy((p - 1 + j) as u32, a, b, vec![c]);
            t.path = path_of(a, b).map(Into::into);
            out.push(t);
        }
    }
    out
}

pub fn no_path(_: usize, _: usize) -> Option<Vec<u32>> {
    None
}

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}
