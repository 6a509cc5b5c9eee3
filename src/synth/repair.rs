//! Repair of a schedule after failures: every transfer whose links all survive is kept byte
//! for byte; a transfer over a failed link is rerouted along a detour between the same two
//! NPUs, spread over a few alternatives by the load they would add. Steps, chunks and ops do
//! not change, so the data flow, and with it the validity, is the stored schedule's; the
//! simulator re-times the result (detours share links with the kept transfers).
//!
//! What a reroute cannot do: serve a collective whose group lost an NPU (its chunks are
//! another collective's), or move data out of a failed NPU. Those need a fresh synthesis.

use crate::schedule::{Route, Schedule};
use crate::topology::Topology;
use serde::Serialize;

/// Detours computed per pair of NPUs whose transfers lost a link.
const DETOURS_PER_PAIR: usize = 4;

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum RepairError {
    #[error("the topology has {new} nodes, the schedule's {old}: not the same network")]
    Nodes { old: usize, new: usize },
    #[error("NPU {0} failed and takes part in the collective: its chunks need a new schedule")]
    GroupChanged(usize),
    #[error("NPU {0} failed and the schedule stores chunks there on their way")]
    RelayFailed(u32),
    #[error("NPU {src} can no longer reach NPU {dst}")]
    Unreachable { src: u32, dst: u32 },
    #[error("stopped")]
    Stopped,
}

/// What a repair did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RepairStats {
    /// Transfers kept as they were.
    pub kept: usize,
    /// Transfers given a detour.
    pub rerouted: usize,
    /// Links the rerouted transfers cross, summed (their old routes' links, summed, for
    /// comparison: the detours' extra hops).
    pub rerouted_hops: usize,
    pub replaced_hops: usize,
}

/// The links transfer `i` occupies, as (src, dst) pairs (none for a local move).
fn hops_of(s: &Schedule, i: usize, out: &mut Vec<(u32, u32)>) {
    out.clear();
    let t = s.transfers.at(i);
    if t.is_local() {
        return;
    }
    match t.path_nodes() {
        Some(p) => out.extend(p.windows(2).map(|w| (w[0], w[1]))),
        None => out.push((t.src, t.dst)),
    }
}

/// `old` with every transfer that crosses a link `topo` lacks rerouted on `topo`; `stop` is
/// polled every 65,536 transfers.
pub fn reroute(
    old: Schedule,
    topo: &Topology,
    stop: &dyn Fn() -> bool,
) -> Result<(Schedule, RepairStats), RepairError> {
    if old.topology.nodes() != topo.nodes() {
        return Err(RepairError::Nodes { old: old.topology.nodes(), new: topo.nodes() });
    }
    let group: Vec<usize> = match &old.collective.group {
        Some(g) => g.clone(),
        None => old.topology.live_npus(),
    };
    if let Some(&v) = group.iter().find(|&&v| topo.is_failed(v)) {
        return Err(RepairError::GroupChanged(v));
    }
    let bytes = |i: usize| old.transfers.at(i).wire_chunks() as f64 * old.chunk_size_bytes;
    // Busy time per link of the new topology from the transfers that keep their routes, and
    // the transfers that lose one.
    let mut load = vec![0.0f64; topo.links().len()];
    let mut broken: Vec<u32> = Vec::new();
    let mut hops = Vec::new();
    for i in 0..old.transfers.len() {
        if i % 65_536 == 0 && stop() {
            return Err(RepairError::Stopped);
        }
        hops_of(&old, i, &mut hops);
        let links: Option<Vec<usize>> = hops.iter().map(|&(a, b)| topo.link_index(a as usize, b as usize)).collect();
        match links {
            Some(links) => {
                for l in links {
                    load[l] += bytes(i) / topo.links()[l].bandwidth_gb_per_s;
                }
            }
            None => {
                let t = old.transfers.at(i);
                if let Some(v) = [t.src, t.dst].into_iter().find(|&v| topo.is_failed(v as usize)) {
                    return Err(RepairError::RelayFailed(v));
                }
                broken.push(i as u32)
            }
        }
    }
    let mut stats = RepairStats { kept: old.transfers.len() - broken.len(), ..RepairStats::default() };
    // (src, dst, transfer, bytes, hops it had) of every transfer to reroute, by pair.
    let mut pairs: Vec<(u32, u32, u32, f64, usize)> = broken
        .iter()
        .map(|&i| {
            let t = old.transfers.at(i as usize);
            hops_of(&old, i as usize, &mut hops);
            (t.src, t.dst, i, bytes(i as usize), hops.len())
        })
        .collect();
    pairs.sort_unstable_by_key(|p| (p.0, p.1, p.2));
    drop(broken);
    let mut s = old;
    s.topology = topo.clone();
    s.collective_time_ns = None;
    if pairs.is_empty() {
        return Ok((s, stats));
    }
    // Per (src, dst) pair, a few detours, each found on the links' busy time so far (so the
    // second avoids what the first loads), then each transfer onto the detour whose busiest
    // link would be least busy with it.
    let mean = (load.iter().sum::<f64>() / load.len().max(1) as f64).max(1e-9);
    let mut k = 0;
    while k < pairs.len() {
        if stop() {
            return Err(RepairError::Stopped);
        }
        let (src, dst) = (pairs[k].0, pairs[k].1);
        let mut end = k;
        while end < pairs.len() && (pairs[end].0, pairs[end].1) == (src, dst) {
            end += 1;
        }
        let share: f64 = pairs[k..end].iter().map(|p| p.3).sum::<f64>();
        let mut detours: Vec<(Vec<usize>, Route)> = Vec::new();
        let mut penalty = load.clone();
        for _ in 0..DETOURS_PER_PAIR {
            let Some(links) = cheapest_path(topo, src as usize, dst as usize, &penalty, mean) else { break };
            if detours.iter().any(|(l, _)| *l == links) {
                break;
            }
            for &l in &links {
                penalty[l] += share / topo.links()[l].bandwidth_gb_per_s / DETOURS_PER_PAIR as f64;
            }
            let mut nodes = vec![src];
            nodes.extend(links.iter().map(|&l| topo.links()[l].dst as u32));
            detours.push((links, Route::from(nodes)));
        }
        if detours.is_empty() {
            return Err(RepairError::Unreachable { src, dst });
        }
        for &(_, _, i, b, had) in &pairs[k..end] {
            let i = i as usize;
            let busiest = |links: &[usize]| {
                links.iter().map(|&l| load[l] + b / topo.links()[l].bandwidth_gb_per_s).fold(0.0, f64::max)
            };
            let (links, route) = detours
                .iter()
                .min_by(|x, y| busiest(&x.0).total_cmp(&busiest(&y.0)).then(x.0.len().cmp(&y.0.len())))
                .expect("at least one detour");
            for &l in links {
                load[l] += b / topo.links()[l].bandwidth_gb_per_s;
            }
            stats.replaced_hops += had;
            stats.rerouted_hops += links.len();
            stats.rerouted += 1;
            s.transfers.set_path(i, if links.len() == 1 { None } else { Some(route.clone()) });
        }
        k = end;
    }
    Ok((s, stats))
}

/// The links of the cheapest path from `src` to `dst` where a link costs one hop plus its busy
/// time over the mean busy time (so detours prefer idle links, at most a few hops longer).
/// Intermediate nodes may be switches or NPUs; failed NPUs have no links.
fn cheapest_path(topo: &Topology, src: usize, dst: usize, busy: &[f64], mean: f64) -> Option<Vec<usize>> {
    use ordered_float::OrderedFloat;
    use std::cmp::Reverse;
    let n = topo.nodes();
    let mut dist = vec![f64::INFINITY; n];
    let mut via = vec![usize::MAX; n];
    let mut heap = std::collections::BinaryHeap::new();
    dist[src] = 0.0;
    heap.push(Reverse((OrderedFloat(0.0), src)));
    while let Some(Reverse((OrderedFloat(d), u))) = heap.pop() {
        if d > dist[u] {
            continue;
        }
        if u == dst {
            break;
        }
        for l in topo.out_links(u) {
            let v = topo.links()[l].dst;
            let nd = d + 1.0 + busy[l] / mean;
            if nd < dist[v] {
                dist[v] = nd;
                via[v] = l;
                heap.push(Reverse((OrderedFloat(nd), v)));
            }
        }
    }
    if !dist[dst].is_finite() {
        return None;
    }
    let mut links = Vec::new();
    let mut v = dst;
    while v != src {
        let l = via[v];
        links.push(l);
        v = topo.links()[l].src;
    }
    links.reverse();
    Some(links)
}
