//! The time-expanded network (TACOS IV): the topology as NPU-to-NPU edges, each spanning a
//! whole number of timesteps at a given chunk size and occupying named link resources. The
//! greedy and the ILP both read it; it knows nothing about either.

use crate::topology::Topology;
use ordered_float::OrderedFloat;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How switches appear in the TEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SwitchModel {
    /// A switch is a crossbar: an edge `a -> b` through it occupies the uplink `a -> sw` and
    /// the downlink `sw -> b`; each port carries one chunk per timestep.
    #[default]
    Native,
    /// TACOS IV-D: NPU n of a switch's N NPUs gets edges to n+1..n+d (mod N), each with the
    /// port bandwidth divided by d, and no sharing between them (d is capped at N−1).
    Unwind { degree: usize },
    /// The degree-1 variant as a bidirectional ring (edges to n+1 and n−1, half bandwidth each).
    UnwindBiRing,
}

impl SwitchModel {
    /// Parses `native`, `unwind:D` or `unwind:bi`.
    pub fn parse(s: &str) -> Result<SwitchModel, String> {
        match s {
            "native" => Ok(SwitchModel::Native),
            "unwind:bi" => Ok(SwitchModel::UnwindBiRing),
            _ => match s.strip_prefix("unwind:").map(str::parse::<usize>) {
                Some(Ok(d)) if d >= 1 => Ok(SwitchModel::Unwind { degree: d }),
                _ => Err(format!("switch model {s:?}: expected native, unwind:D (D >= 1) or unwind:bi")),
            },
        }
    }
    pub fn name(&self) -> String {
        match self {
            SwitchModel::Native => "native".into(),
            SwitchModel::Unwind { degree } => format!("unwind:{degree}"),
            SwitchModel::UnwindBiRing => "unwind:bi".into(),
        }
    }
}

impl Serialize for SwitchModel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for SwitchModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        SwitchModel::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// One TEN edge: a way to move one chunk from NPU `src` to NPU `dst`.
#[derive(Clone, Debug, PartialEq)]
pub struct TenEdge {
    pub src: u32,
    pub dst: u32,
    /// Timesteps one chunk occupies the edge: ⌈time_ns / discretization_ns⌉ ≥ 1.
    pub span: u32,
    /// α-β time of one chunk: Σ latency over the path + chunk / min bandwidth.
    pub time_ns: f64,
    /// The node path for the transfer (`None`: the direct link `src -> dst`).
    pub path: Option<crate::schedule::Route>,
    /// Resources the edge occupies for its whole span, each carrying one chunk per timestep:
    /// topology link indices, or ids ≥ `links().len()` for unwound virtual links.
    pub resources: Vec<u32>,
}

/// An edge before discretization: src, dst, time of one chunk, path, resources.
type RawEdge = (u32, u32, f64, Option<Vec<u32>>, Vec<u32>);

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum TenError {
    #[error(
        "switch model {model}: switch {switch} is linked to another switch ({other}); only native switches may chain"
    )]
    SwitchChain { model: String, switch: usize, other: usize },
    #[error("discretization {0} ns is invalid: expected a finite value > 0")]
    Discretization(f64),
    #[error("the TEN has no edges: nothing can move")]
    Empty,
    #[error("discretization {factor} ns is too fine: a link spans {span} timesteps, over the limit of {limit}")]
    TooFine { factor: f64, span: u64, limit: u64 },
}

#[derive(Clone, Debug)]
pub struct Ten {
    pub npus: usize,
    pub edges: Vec<TenEdge>,
    pub resources: usize,
    pub discretization_ns: f64,
    pub chunk_size_bytes: f64,
    pub switch_model: SwitchModel,
    in_start: Vec<usize>,
    in_edges: Vec<u32>,
    out_start: Vec<usize>,
    out_edges: Vec<u32>,
}

impl Ten {
    /// Builds the TEN of `topo` for chunks of `chunk_size_bytes`. `discretization_ns` defaults
    /// to the fastest edge's time, so the fastest edge spans one timestep.
    pub fn build(
        topo: &Topology,
        chunk_size_bytes: f64,
        switch_model: SwitchModel,
        discretization_ns: Option<f64>,
    ) -> Result<Ten, TenError> {
        let links = topo.links();
        let mut raw: Vec<RawEdge> = Vec::new();
        for (i, l) in links.iter().enumerate() {
            if topo.is_npu(l.src) && topo.is_npu(l.dst) {
                raw.push((l.src as u32, l.dst as u32, l.time_ns(chunk_size_bytes), None, vec![i as u32]));
            }
        }
        match switch_model {
            SwitchModel::Native => native_switch_edges(topo, chunk_size_bytes, &mut raw),
            m => unwound_switch_edges(topo, chunk_size_bytes, m, &mut raw)?,
        }
        if raw.is_empty() {
            return Err(TenError::Empty);
        }
        let f = match discretization_ns {
            Some(f) if f.is_finite() && f > 0.0 => f,
            Some(f) => return Err(TenError::Discretization(f)),
            None => raw.iter().map(|e| e.2).fold(f64::INFINITY, f64::min),
        };
        let f = if f > 0.0 { f } else { 1.0 };
        let longest = raw.iter().map(|e| e.2).fold(0.0, f64::max);
        // A link that would span more timesteps than a TEN edge may is left out of the network
        // (a detour of fast links is sooner, unless there is none: then no route is found);
        // only a network left with none is refused. A link slowed to 100 ms of latency beside
        // links of 500 ns refused the whole TEN, and `auto` then returned a baseline through it,
        // 300 ms where the greedy around it takes 11.6 µs.
        raw.retain(|e| e.2 / f <= crate::limits::MAX_TEN_SPAN as f64);
        if raw.is_empty() {
            return Err(TenError::TooFine {
                factor: f,
                span: (longest / f).ceil() as u64,
                limit: crate::limits::MAX_TEN_SPAN as u64,
            });
        }
        let resources = raw.iter().flat_map(|e| e.4.iter()).map(|&r| r as usize + 1).max().unwrap_or(0);
        let edges: Vec<TenEdge> = raw
            .into_iter()
            .map(|(src, dst, time_ns, path, resources)| TenEdge {
                src,
                dst,
                span: span(time_ns, f),
                time_ns,
                path: path.map(Into::into),
                resources,
            })
            .collect();
        let (in_start, in_edges) = csr(topo.npus(), edges.iter().map(|e| e.dst as usize));
        let (out_start, out_edges) = csr(topo.npus(), edges.iter().map(|e| e.src as usize));
        Ok(Ten {
            npus: topo.npus(),
            edges,
            resources: resources.max(links.len()),
            discretization_ns: f,
            chunk_size_bytes,
            switch_model,
            in_start,
            in_edges,
            out_start,
            out_edges,
        })
    }

    /// Whether every edge spans the same multiple of its span in `other` (built from the same
    /// topology and switch model, so with the same edges in the same order): then the two TENs
    /// are one network on two time scales, and a plan on one is a plan on the other.
    pub fn same_up_to_scale(&self, other: &Ten) -> bool {
        let (Some(a), Some(b)) = (self.edges.first(), other.edges.first()) else { return false };
        self.edges.len() == other.edges.len()
            && self.edges.iter().zip(&other.edges).all(|(x, y)| {
                (x.src, x.dst) == (y.src, y.dst) && x.span as u64 * b.span as u64 == y.span as u64 * a.span as u64
            })
    }

    /// Edge ids entering NPU `v`.
    pub fn in_edges(&self, v: usize) -> &[u32] {
        &self.in_edges[self.in_start[v]..self.in_start[v + 1]]
    }
    /// Edge ids leaving NPU `v`.
    pub fn out_edges(&self, v: usize) -> &[u32] {
        &self.out_edges[self.out_start[v]..self.out_start[v + 1]]
    }

    /// Shortest distance in timesteps from the nearest of `sources` to every NPU
    /// (`u32::MAX` where unreachable).
    pub fn distances_from(&self, sources: &[u32]) -> Vec<u32> {
        // The greedy computes one of these per holder set: no edge table it would not read.
        self.dijkstra(sources, None)
    }

    /// Distances from the nearest of `sources` (as `distances_from`) and, per NPU, the edge
    /// that reaches it on a shortest path (`u32::MAX` for sources and unreachable NPUs).
    pub fn shortest_tree(&self, sources: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let mut via = vec![u32::MAX; self.npus];
        let dist = self.dijkstra(sources, Some(&mut via));
        (dist, via)
    }

    /// `distances_from`, over edges whose both ends are `within` (a pod of NPUs): `u32::MAX`
    /// for NPUs not reached that way.
    pub fn distances_within(&self, sources: &[u32], within: &[bool]) -> Vec<u32> {
        self.dijkstra_in(sources, None, Some(within))
    }

    fn dijkstra(&self, sources: &[u32], via: Option<&mut Vec<u32>>) -> Vec<u32> {
        self.dijkstra_in(sources, via, None)
    }

    fn dijkstra_in(&self, sources: &[u32], mut via: Option<&mut Vec<u32>>, within: Option<&[bool]>) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.npus];
        let mut heap = BinaryHeap::new();
        for &s in sources {
            dist[s as usize] = 0;
            heap.push(std::cmp::Reverse((0u32, s)));
        }
        while let Some(std::cmp::Reverse((d, u))) = heap.pop() {
            if d > dist[u as usize] {
                continue;
            }
            for &e in self.out_edges(u as usize) {
                let edge = &self.edges[e as usize];
                if within.is_some_and(|w| !w[edge.dst as usize]) {
                    continue;
                }
                let nd = d + edge.span;
                if nd < dist[edge.dst as usize] {
                    dist[edge.dst as usize] = nd;
                    if let Some(via) = via.as_deref_mut() {
                        via[edge.dst as usize] = e;
                    }
                    heap.push(std::cmp::Reverse((nd, edge.dst)));
                }
            }
        }
        dist
    }

    /// Shortest distance in timesteps from every NPU to the nearest of `targets`
    /// (`u32::MAX` where none is reachable).
    pub fn distances_to(&self, targets: &[u32]) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.npus];
        let mut heap = BinaryHeap::new();
        for &s in targets {
            dist[s as usize] = 0;
            heap.push(std::cmp::Reverse((0u32, s)));
        }
        while let Some(std::cmp::Reverse((d, v))) = heap.pop() {
            if d > dist[v as usize] {
                continue;
            }
            for &e in self.in_edges(v as usize) {
                let e = &self.edges[e as usize];
                let nd = d + e.span;
                if nd < dist[e.src as usize] {
                    dist[e.src as usize] = nd;
                    heap.push(std::cmp::Reverse((nd, e.src)));
                }
            }
        }
        dist
    }

    /// The largest finite shortest distance between two NPUs of `group` (timesteps).
    pub fn diameter(&self, group: &[usize]) -> u32 {
        let mut worst = 0;
        for &s in group {
            let d = self.distances_from(&[s as u32]);
            for &v in group {
                if d[v] != u32::MAX {
                    worst = worst.max(d[v]);
                }
            }
        }
        worst
    }
}

fn span(time_ns: f64, f: f64) -> u32 {
    // A hair of tolerance so that a time equal to k·f spans k steps, not k+1.
    let s = (time_ns / f - 1e-9).ceil();
    s.clamp(1.0, u32::MAX as f64) as u32
}

fn csr(n: usize, keys: impl Iterator<Item = usize> + Clone) -> (Vec<usize>, Vec<u32>) {
    let mut start = vec![0usize; n + 1];
    for k in keys.clone() {
        start[k + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut out = vec![0u32; start[n]];
    for (i, k) in keys.enumerate() {
        out[fill[k]] = i as u32;
        fill[k] += 1;
    }
    (start, out)
}

/// For every NPU a, the fastest path through switches only to every other NPU b it reaches
/// that way: an edge `a -> b` occupying every link on the path.
fn native_switch_edges(topo: &Topology, chunk: f64, raw: &mut Vec<RawEdge>) {
    if topo.switches() == 0 {
        return;
    }
    let links = topo.links();
    let n = topo.nodes();
    let mut dist = vec![f64::INFINITY; n];
    let mut via = vec![usize::MAX; n]; // link index used to reach the node
    let mut touched = Vec::new();
    for a in 0..topo.npus() {
        if !topo.links()[topo.out_links(a)].iter().any(|l| topo.is_switch(l.dst)) {
            continue;
        }
        for &v in &touched {
            dist[v] = f64::INFINITY;
            via[v] = usize::MAX;
        }
        touched.clear();
        let mut heap = BinaryHeap::new();
        dist[a] = 0.0;
        touched.push(a);
        heap.push(Reverse((OrderedFloat(0.0), a)));
        let mut reached = Vec::new();
        while let Some(Reverse((OrderedFloat(d), u))) = heap.pop() {
            if d > dist[u] {
                continue;
            }
            if u != a && topo.is_npu(u) {
                reached.push(u);
                continue; // NPUs end a switch path; they do not forward inside this edge
            }
            for li in topo.out_links(u) {
                let l = &links[li];
                if u == a && !topo.is_switch(l.dst) {
                    continue;
                }
                // Per-hop time orders the routes; the edge's real time is computed below.
                let nd = d + l.time_ns(chunk);
                if nd < dist[l.dst] {
                    if dist[l.dst].is_infinite() {
                        touched.push(l.dst);
                    }
                    dist[l.dst] = nd;
                    via[l.dst] = li;
                    heap.push(Reverse((OrderedFloat(nd), l.dst)));
                }
            }
        }
        reached.sort_unstable();
        for b in reached {
            let mut path = vec![b as u32];
            let mut res = Vec::new();
            let mut v = b;
            while v != a {
                let li = via[v];
                res.push(li as u32);
                v = links[li].src;
                path.push(v as u32);
            }
            path.reverse();
            res.reverse();
            let lat: f64 = res.iter().map(|&li| links[li as usize].latency_ns).sum();
            let bw = res.iter().map(|&li| links[li as usize].bandwidth_gb_per_s).fold(f64::INFINITY, f64::min);
            raw.push((a as u32, b as u32, lat + chunk / bw, Some(path), res));
        }
    }
}

fn unwound_switch_edges(
    topo: &Topology,
    chunk: f64,
    model: SwitchModel,
    raw: &mut Vec<RawEdge>,
) -> Result<(), TenError> {
    let links = topo.links();
    let mut next_virtual = links.len() as u32;
    for sw in topo.npus()..topo.nodes() {
        let mut npus = Vec::new();
        for l in &links[topo.out_links(sw)] {
            if topo.is_switch(l.dst) {
                return Err(TenError::SwitchChain { model: model.name(), switch: sw, other: l.dst });
            }
            if topo.link_index(l.dst, sw).is_some() {
                npus.push(l.dst);
            }
        }
        let n = npus.len();
        if n < 2 {
            continue;
        }
        let offsets: Vec<(usize, usize)> = match model {
            SwitchModel::Unwind { degree } => {
                // A switch with fewer NPUs than the degree is unwound fully (degree N−1).
                let d = degree.min(n - 1);
                (1..=d).map(|k| (k, d)).collect()
            }
            SwitchModel::UnwindBiRing => {
                if n == 2 {
                    vec![(1, 1)]
                } else {
                    vec![(1, 2), (n - 1, 2)]
                }
            }
            SwitchModel::Native => unreachable!("native switches are not unwound"),
        };
        for i in 0..n {
            let a = npus[i];
            for &(d, share) in &offsets {
                let b = npus[(i + d) % n];
                let up = &links[topo.link_index(a, sw).expect("attached NPUs have an uplink")];
                let down = &links[topo.link_index(sw, b).expect("attached NPUs have a downlink")];
                let bw = up.bandwidth_gb_per_s.min(down.bandwidth_gb_per_s) / share as f64;
                let time = up.latency_ns + down.latency_ns + chunk / bw;
                raw.push((a as u32, b as u32, time, Some(vec![a as u32, sw as u32, b as u32]), vec![next_virtual]));
                next_virtual += 1;
            }
        }
    }
    Ok(())
}
