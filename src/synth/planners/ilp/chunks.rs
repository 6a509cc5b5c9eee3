//! Per-chunk facts the model is built from (holders, targets, TEN distances from and to them),
//! and the horizon lower bounds they give.

use crate::synth::phase::Problem;
use crate::ten::Ten;
use std::collections::HashMap;

/// Per chunk: who holds it, who still needs it, and the TEN distances from and to them.
pub(super) struct ChunkInfo {
    /// Chunks with at least one target, with their holders and targets.
    pub(super) chunks: Vec<Chunk>,
    npus: usize,
}

#[derive(Clone)]
pub(super) struct Chunk {
    pub(super) id: u32,
    pub(super) holders: Vec<u32>,
    pub(super) targets: Vec<u32>,
    /// Timesteps from the nearest holder (`u32::MAX`: unreachable).
    pub(super) from: Vec<u32>,
    /// Timesteps to the nearest target.
    pub(super) to: Vec<u32>,
}

impl ChunkInfo {
    pub(super) fn new(p: &Problem) -> ChunkInfo {
        let mut holders = vec![Vec::new(); p.num_chunks];
        for &[v, c] in p.pre {
            holders[c as usize].push(v);
        }
        let mut targets = vec![Vec::new(); p.num_chunks];
        for &[v, c] in p.post {
            if !holders[c as usize].contains(&v) {
                targets[c as usize].push(v);
            }
        }
        Self::from_sets(p.ten, holders, targets)
    }

    pub(super) fn from_sets(ten: &Ten, holders: Vec<Vec<u32>>, targets: Vec<Vec<u32>>) -> ChunkInfo {
        let chunks = holders
            .into_iter()
            .zip(targets)
            .enumerate()
            .filter(|(_, (_, t))| !t.is_empty())
            .map(|(id, (holders, targets))| Chunk {
                id: id as u32,
                from: ten.distances_from(&holders),
                to: ten.distances_to(&targets),
                holders,
                targets,
            })
            .collect();
        ChunkInfo { chunks, npus: ten.npus }
    }

    /// The same facts for the chunks `ids` only.
    pub(super) fn only(&self, ids: &[u32]) -> ChunkInfo {
        let chunks = self.chunks.iter().filter(|c| ids.contains(&c.id)).cloned().collect();
        ChunkInfo { chunks, npus: self.npus }
    }

    /// The farthest target from its chunk's holders.
    pub(super) fn distance_bound(&self) -> u32 {
        self.chunks
            .iter()
            .flat_map(|c| c.targets.iter().map(|&n| c.from[n as usize]))
            .filter(|&d| d != u32::MAX)
            .max()
            .unwrap_or(0)
    }

    /// Resource-timesteps needed over those available per timestep: every delivery occupies a
    /// resource for at least a timestep, and a chunk with a single target occupies one for at
    /// least its distance.
    fn load_bound(&self, ten: &Ten) -> u32 {
        let mut used = vec![false; ten.resources];
        for e in &ten.edges {
            for &r in &e.resources {
                used[r as usize] = true;
            }
        }
        let resources = used.iter().filter(|&&u| u).count() as u64;
        if resources == 0 {
            return 0;
        }
        let need: u64 = self
            .chunks
            .iter()
            .map(|c| match c.targets.as_slice() {
                [t] => c.from[*t as usize].min(u32::MAX - 1) as u64,
                ts => ts.len() as u64,
            })
            .sum();
        need.div_ceil(resources).min(u32::MAX as u64) as u32
    }

    /// The distance bound, and per NPU the time its ingress needs for the chunks it lacks:
    /// edges into an NPU that share their last resource (the link into it) deliver one chunk
    /// at a time, each taking at least the group's shortest span.
    pub(super) fn lower_bound(&self, ten: &Ten) -> u32 {
        self.cut_bound(ten, self.basic_bound(ten))
    }

    /// `lower_bound` without the cut bounds of pods.
    pub(super) fn basic_bound(&self, ten: &Ten) -> u32 {
        // Per NPU: chunks it must receive, and the earliest any of them can arrive.
        let mut needed = vec![(0u64, u32::MAX); self.npus];
        // Per NPU: chunks only it holds that must leave it, and the least of their farthest
        // target distances.
        let mut sourced = vec![(0u64, u32::MAX); self.npus];
        for c in &self.chunks {
            for &n in &c.targets {
                let slot = &mut needed[n as usize];
                slot.0 += 1;
                slot.1 = slot.1.min(c.from[n as usize]);
            }
            if let [s] = c.holders.as_slice() {
                let far = c.targets.iter().map(|&t| c.from[t as usize]).filter(|&d| d != u32::MAX).max();
                if let Some(far) = far {
                    let slot = &mut sourced[*s as usize];
                    slot.0 += 1;
                    slot.1 = slot.1.min(far);
                }
            }
        }
        let mut bound = self.distance_bound().max(self.load_bound(ten));
        for n in 0..self.npus {
            let (k, first) = needed[n];
            if k > 0 && first != u32::MAX {
                // Edges into n that share their last resource (the link into n) deliver one
                // chunk at a time.
                let spans = port_spans(ten, ten.in_edges(n), |e| e.resources.last().copied());
                bound = bound.max(port_bound(&spans, k, first));
            }
            let (k, far) = sourced[n];
            if k > 0 {
                // Each chunk only n holds leaves it at least once, one at a time per group of
                // edges sharing their first resource; the one that leaves last still has to
                // reach its farthest target.
                let spans = port_spans(ten, ten.out_edges(n), |e| e.resources.first().copied());
                if let Some(&min_span) = spans.first() {
                    let last_departure = (k.div_ceil(spans.len() as u64) - 1) * min_span as u64;
                    bound = bound.max(port_bound(&spans, k, 0));
                    bound = bound.max((last_departure + far as u64).min(u32::MAX as u64) as u32);
                }
            }
        }
        bound
    }
}

impl ChunkInfo {
    /// The best of the cut bounds, from `from` up, over the groups of NPUs joined by edges
    /// faster than the slowest (the pods of a hierarchical fabric), for each span but the
    /// largest: data from outside a pod enters through its few slow ports, and what enters late
    /// has to spread inside it before the horizon (`Pod::cover_bound`) and to come into each
    /// NPU of the pod through that NPU's own few links (`Pod::ingress_feasible`).
    fn cut_bound(&self, ten: &Ten, from: u32) -> u32 {
        let mut spans: Vec<u32> = ten.edges.iter().map(|e| e.span).collect();
        spans.sort_unstable();
        spans.dedup();
        spans.pop();
        let mut seen: std::collections::HashSet<Vec<u32>> = std::collections::HashSet::new();
        let mut bound = from;
        // Every pod is tried (they differ on irregular fabrics), within a budget of work: NPUs
        // whose distances are computed, and max-flows.
        let (mut npus, mut flows) = (4096usize, 1024usize);
        for &limit in &spans {
            for set in groups_within(ten, limit) {
                if set.len() < 2
                    || set.len() == self.npus
                    || set.len() > Pod::MAX_NPUS
                    || npus < set.len()
                    || !seen.insert(set.clone())
                {
                    continue;
                }
                npus -= set.len();
                let Some(pod) = Pod::new(self, ten, &set) else { continue };
                bound = bound.max(pod.cover_bound());
                if set.len() > Pod::MAX_FLOW_NPUS {
                    continue;
                }
                for &v in &set {
                    // Feasibility only grows with the horizon: double the step past the
                    // bound, then halve it back (a handful of flows per NPU).
                    let mut feasible = |t: u32| {
                        flows = flows.saturating_sub(1);
                        flows == 0 || pod.ingress_feasible(self, ten, v, t)
                    };
                    if feasible(bound) {
                        continue;
                    }
                    let (mut lo, mut step) = (bound, 1u32);
                    let hi = loop {
                        let t = lo.saturating_add(step);
                        if t == u32::MAX || feasible(t) {
                            break t;
                        }
                        (lo, step) = (t, step.saturating_mul(2));
                    };
                    // lo infeasible, hi feasible.
                    let (mut lo, mut hi) = (lo, hi);
                    while lo + 1 < hi {
                        let mid = lo + (hi - lo) / 2;
                        if feasible(mid) { hi = mid } else { lo = mid }
                    }
                    bound = hi;
                }
            }
        }
        bound
    }
}

/// A set S of NPUs seen from the chunks it lacks: the ports into it, the distances inside it.
struct Pod<'a> {
    members: &'a [u32],
    inside: Vec<bool>,
    /// Per member (by position in `members`): distances inside S to every NPU (`u64::MAX`:
    /// not within S).
    dist: Vec<Vec<u64>>,
    /// Chunks no NPU of S holds that some NPU of S needs (indices into `ChunkInfo::chunks`).
    external: Vec<usize>,
    /// Targets in S of the external chunks, counted per (chunk, NPU).
    need: u64,
    ports: Vec<Port>,
}

/// The edges from outside into S that share their last resource (the link or downlink into
/// S): one arrival per `gap` timesteps, the first no earlier than `first`, at any of `entries`.
struct Port {
    first: u64,
    gap: u64,
    entries: Vec<u32>,
}

impl<'a> Pod<'a> {
    /// Members up to which the per-NPU ingress bound is computed.
    const MAX_FLOW_NPUS: usize = 64;
    /// Members up to which a pod is looked at (its distances are members × NPUs).
    const MAX_NPUS: usize = 1024;
    /// Edges of an ingress flow network beyond which the flow is not built (no bound then).
    const MAX_FLOW_EDGES: usize = 200_000;

    /// `None` when a way into S occupies no resource (no limit on entries) or S lacks nothing.
    fn new(info: &ChunkInfo, ten: &Ten, members: &'a [u32]) -> Option<Pod<'a>> {
        let mut inside = vec![false; info.npus];
        for &v in members {
            inside[v as usize] = true;
        }
        let mut need = 0u64;
        let mut external = Vec::new();
        // Per NPU, the earliest any chunk needed in S can be there (chunks of S too: they may
        // leave and come back through a port).
        let mut earliest = vec![u32::MAX; info.npus];
        for (i, c) in info.chunks.iter().enumerate() {
            let here = c.targets.iter().filter(|&&n| inside[n as usize]).count() as u64;
            if here == 0 {
                continue;
            }
            for (v, e) in earliest.iter_mut().enumerate() {
                *e = (*e).min(c.from[v]);
            }
            if !c.holders.iter().any(|&h| inside[h as usize]) {
                need += here;
                external.push(i);
            }
        }
        if need == 0 {
            return None;
        }
        let mut ports: HashMap<u32, Port> = HashMap::new();
        for &u in members {
            for &e in ten.in_edges(u as usize) {
                let e = &ten.edges[e as usize];
                if inside[e.src as usize] || earliest[e.src as usize] == u32::MAX {
                    continue;
                }
                let r = e.resources.last().copied()?;
                let port =
                    ports.entry(r).or_insert_with(|| Port { first: u64::MAX, gap: u64::MAX, entries: Vec::new() });
                port.first = port.first.min(earliest[e.src as usize] as u64 + e.span as u64);
                port.gap = port.gap.min(e.span as u64);
                if !port.entries.contains(&u) {
                    port.entries.push(u);
                }
            }
        }
        let mut ports: Vec<Port> = ports.into_values().collect();
        ports.sort_by_key(|p| (p.first, p.gap, p.entries.clone()));
        // Distances inside S, widened so that sums with times cannot overflow.
        let widen = |d: u32| if d == u32::MAX { u64::MAX } else { d as u64 };
        let dist =
            members.iter().map(|&u| ten.distances_within(&[u], &inside).into_iter().map(widen).collect()).collect();
        Some(Pod { members, inside, dist, external, need, ports })
    }

    fn dist(&self, u: u32, v: u32) -> u64 {
        let i = self.members.binary_search(&u).expect("a member");
        self.dist[i][v as usize]
    }

    /// The cover bound: an entry arriving at u at time a can reach only the NPUs of S within
    /// T − a of u (over edges inside S); the targets in S of a chunk are covered by its
    /// entries together, so over all entry slots (each port one arrival per gap from its
    /// first) the balls' sizes must add up to `need`. The least T for which they can.
    fn cover_bound(&self) -> u32 {
        // Per port, the best reach among its entries: sorted distances, elementwise least.
        let reach: Vec<Vec<u64>> = self
            .ports
            .iter()
            .map(|p| {
                let mut best: Vec<u64> = Vec::new();
                for &u in &p.entries {
                    let i = self.members.binary_search(&u).expect("a member");
                    let mut d: Vec<u64> = self.dist[i].iter().copied().filter(|&x| x != u64::MAX).collect();
                    d.sort_unstable();
                    if best.len() < d.len() {
                        best.resize(d.len(), u64::MAX);
                    }
                    for (a, b) in best.iter_mut().zip(d) {
                        *a = (*a).min(b);
                    }
                }
                best
            })
            .collect();
        let cover = |t: u64| -> u64 {
            let mut sum = 0u64;
            for (p, reach) in self.ports.iter().zip(&reach) {
                let mut a = p.first;
                while a <= t {
                    sum += reach.partition_point(|&d| d <= t - a) as u64;
                    a += p.gap;
                }
            }
            sum
        };
        let Some(most) = self.ports.iter().map(|p| p.first).min() else { return 0 };
        let (mut lo, mut hi) = (most, most + 1);
        while cover(hi) < self.need {
            if hi > u32::MAX as u64 / 2 {
                return 0;
            }
            lo = hi;
            hi *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cover(mid) >= self.need { hi = mid } else { lo = mid + 1 }
        }
        hi.min(u32::MAX as u64) as u32
    }

    /// The ingress bound of NPU `v` of S at horizon `t`: can every chunk v needs arrive by t?
    /// A chunk from outside arrives at v either through a port into v (an entry slot of its
    /// own), or enters S at some u and comes from inside, through one of v's links from inside
    /// S, no earlier than its entry plus the way from u; a chunk from inside arrives through
    /// v's links no earlier than its distance, or through a port. A link carries one arrival
    /// per span, so its k-th last arrival is no later than t − k·span. As a flow: entry slots
    /// and v's arrival slots, each taking one chunk; feasible when it carries every chunk.
    fn ingress_feasible(&self, info: &ChunkInfo, ten: &Ten, v: u32, t: u32) -> bool {
        use petgraph::graph::{DiGraph, NodeIndex};
        let t = t as u64;
        let external = self.external.iter().filter(|&&i| info.chunks[i].targets.contains(&v)).count() as u32;
        let internal: Vec<&Chunk> = info
            .chunks
            .iter()
            .filter(|c| c.targets.contains(&v) && c.holders.iter().any(|&h| self.inside[h as usize]))
            .collect();
        if external == 0 && internal.is_empty() {
            return true;
        }
        // v's links from inside S, grouped by their last resource: (least span, edges).
        let mut links: HashMap<u32, (u64, Vec<u32>)> = HashMap::new();
        for &e in ten.in_edges(v as usize) {
            let edge = &ten.edges[e as usize];
            if !self.inside[edge.src as usize] {
                continue;
            }
            let Some(&r) = edge.resources.last() else { return true };
            let g = links.entry(r).or_insert((u64::MAX, Vec::new()));
            g.0 = g.0.min(edge.span as u64);
            g.1.push(e);
        }
        let mut links: Vec<(u64, Vec<u32>)> = links.into_values().collect();
        links.sort_unstable();
        // Earliest arrival over v's link k of a chunk at `u` at time 0: the way inside S, then
        // the link.
        let via = |k: usize, u: u32| -> u64 {
            let way = |e: &u32| {
                let e = &ten.edges[*e as usize];
                let d = if e.src == u { 0 } else { self.dist(u, e.src) };
                d.saturating_add(e.span as u64)
            };
            links[k].1.iter().map(way).min().unwrap_or(u64::MAX)
        };
        // One arrival slot per link time up to t: too many gives no bound.
        let arrivals: u64 = links.iter().map(|&(gap, _)| t / gap.max(1) + 1).sum();
        if arrivals > Self::MAX_FLOW_EDGES as u64 / 16 {
            return true;
        }
        let mut g: DiGraph<(), u32> = DiGraph::new();
        let (source, sink, outside) = (g.add_node(()), g.add_node(()), g.add_node(()));
        g.add_edge(source, outside, external);
        // Arrival slots on v's links, the latest first: (node, time, link).
        let mut slots: Vec<(NodeIndex, u64, usize)> = Vec::new();
        for (k, &(gap, _)) in links.iter().enumerate() {
            let mut b = t;
            while b >= 1 {
                let n = g.add_node(());
                g.add_edge(n, sink, 1);
                slots.push((n, b, k));
                b = b.saturating_sub(gap);
            }
        }
        // Every entry slot may lead to every arrival slot: too large a network gives no bound.
        let entry_slots: u64 =
            self.ports.iter().map(|p| if p.first <= t { (t - p.first) / p.gap + 1 } else { 0 }).sum();
        if entry_slots.saturating_mul(slots.len() as u64 + 1) > Self::MAX_FLOW_EDGES as u64 {
            return true;
        }
        // Entry slots: one chunk each (an in and an out node), straight to the sink when the
        // port enters at v.
        let mut entries: Vec<(NodeIndex, u64, usize)> = Vec::new();
        for (pi, p) in self.ports.iter().enumerate() {
            let ways: Vec<u64> =
                (0..links.len()).map(|k| p.entries.iter().map(|&u| via(k, u)).min().unwrap_or(u64::MAX)).collect();
            let mut a = p.first;
            while a <= t {
                let (i, o) = (g.add_node(()), g.add_node(()));
                g.add_edge(i, o, 1);
                g.add_edge(outside, i, 1);
                if p.entries.contains(&v) {
                    g.add_edge(o, sink, 1);
                }
                for &(n, b, k) in &slots {
                    if a.saturating_add(ways[k]) <= b {
                        g.add_edge(o, n, 1);
                    }
                }
                entries.push((i, a, pi));
                a += p.gap;
            }
        }
        // Chunks from inside: over v's links no earlier than their distance, or through a port.
        for c in &internal {
            let n = g.add_node(());
            g.add_edge(source, n, 1);
            let release: Vec<u64> = links
                .iter()
                .map(|(_, es)| {
                    let at = |e: &u32| {
                        let e = &ten.edges[*e as usize];
                        (c.from[e.src as usize] as u64).saturating_add(e.span as u64)
                    };
                    es.iter().map(at).min().unwrap_or(u64::MAX)
                })
                .collect();
            for &(s, b, k) in &slots {
                if release[k] <= b {
                    g.add_edge(n, s, 1);
                }
            }
            for &(i, _, _) in &entries {
                g.add_edge(n, i, 1);
            }
        }
        let (flow, _) = petgraph::algo::dinics(&g, source, sink);
        flow >= external + internal.len() as u32
    }
}

/// The NPUs joined by edges of at most `limit` timesteps (either way), as sorted sets.
fn groups_within(ten: &Ten, limit: u32) -> Vec<Vec<u32>> {
    let mut parent: Vec<u32> = (0..ten.npus as u32).collect();
    fn root(parent: &mut [u32], mut v: u32) -> u32 {
        while parent[v as usize] != v {
            parent[v as usize] = parent[parent[v as usize] as usize];
            v = parent[v as usize];
        }
        v
    }
    for e in ten.edges.iter().filter(|e| e.span <= limit) {
        let (a, b) = (root(&mut parent, e.src), root(&mut parent, e.dst));
        parent[a as usize] = b;
    }
    let mut sets: HashMap<u32, Vec<u32>> = HashMap::new();
    for v in 0..ten.npus as u32 {
        let r = root(&mut parent, v);
        sets.entry(r).or_default().push(v);
    }
    let mut out: Vec<Vec<u32>> = sets.into_values().collect();
    out.sort_unstable();
    out
}

/// The least span of each group of an NPU's TEN edges that share a resource (`key`).
fn port_spans(ten: &Ten, edges: &[u32], key: impl Fn(&crate::ten::TenEdge) -> Option<u32>) -> Vec<u32> {
    let mut groups: HashMap<Option<u32>, u32> = HashMap::new();
    for &e in edges {
        let e = &ten.edges[e as usize];
        let span = groups.entry(key(e)).or_insert(u32::MAX);
        *span = (*span).min(e.span);
    }
    let mut spans: Vec<u32> = groups.into_values().collect();
    spans.sort_unstable();
    spans
}

/// `k` chunks through port groups with least spans `spans`, none arriving before `first`: a
/// group's arrivals are at least its span apart, so some group's last one is no earlier than
/// `first + (⌈k/G⌉−1)·min span`; and over T timesteps a group of span s carries at most ⌊T/s⌋.
fn port_bound(spans: &[u32], k: u64, first: u32) -> u32 {
    let Some(&min_span) = spans.first() else { return 0 };
    let capacity = |t: u64| spans.iter().map(|&s| t / s as u64).sum::<u64>();
    let (mut lo, mut hi) = (1u64, k * min_span as u64);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if capacity(mid) >= k { hi = mid } else { lo = mid + 1 }
    }
    let turns = first as u64 + (k.div_ceil(spans.len() as u64) - 1) * min_span as u64;
    lo.max(turns).min(u32::MAX as u64) as u32
}
