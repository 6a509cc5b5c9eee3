//! Per-chunk facts the model is built from (holders, targets, TEN distances from and to them),
//! and the horizon lower bounds they give.

use crate::synth::greedy::Problem;
use crate::ten::Ten;
use std::collections::HashMap;

/// Per chunk: who holds it, who still needs it, and the TEN distances from and to them.
pub(super) struct ChunkInfo {
    /// Chunks with at least one target, with their holders and targets.
    pub(super) chunks: Vec<Chunk>,
    npus: usize,
}

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
