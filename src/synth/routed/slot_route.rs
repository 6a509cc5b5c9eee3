//! Routing and slot packing at once, on fabrics of equal links between NPUs (tori, meshes,
//! hypercubes): each chunk, longest path first, takes the shortest path along which it arrives
//! earliest given the slots the chunks before it took (a dynamic program over its shortest-path
//! DAG in slot time), where the routed planner otherwise fixes every path first and packs the
//! slots after. A path fixed in advance can only queue behind a busy slot; here it turns to a
//! link whose slot is free.

use super::schedule::{Plan, timed};
use super::{Hops, Item, Segments, tie};
use crate::synth::SynthError;
use crate::topology::Topology;
use std::collections::{HashMap, VecDeque};

/// Whether `topo` suits: links all alike, between NPUs only.
pub(super) fn applies(topo: &Topology) -> bool {
    let links = topo.links();
    topo.switches() == 0
        && links.first().is_some_and(|f| {
            links.iter().all(|l| l.bandwidth_gb_per_s == f.bandwidth_gb_per_s && l.latency_ns == f.latency_ns)
        })
}

/// Hop counts to every needer of the items (BFS on the reversed links).
pub(super) struct Dist {
    of: HashMap<u32, Vec<u32>>,
}

impl Dist {
    pub(super) fn of(topo: &Topology, items: &[Item], cancelled: &dyn Fn() -> bool) -> Result<Dist, SynthError> {
        let links = topo.links();
        let mut targets: Vec<u32> = items.iter().map(|it| it.dst).collect();
        targets.sort_unstable();
        targets.dedup();
        let mut of = HashMap::with_capacity(targets.len());
        let mut queue = VecDeque::new();
        for (k, &t) in targets.iter().enumerate() {
            if k.is_multiple_of(64) && cancelled() {
                return Err(SynthError::Cancelled);
            }
            let mut d = vec![u32::MAX; topo.nodes()];
            d[t as usize] = 0;
            queue.push_back(t as usize);
            while let Some(v) = queue.pop_front() {
                for &l in topo.in_links(v) {
                    let u = links[l].src;
                    if d[u] == u32::MAX {
                        d[u] = d[v] + 1;
                        queue.push_back(u);
                    }
                }
            }
            of.insert(t, d);
        }
        Ok(Dist { of })
    }

    fn hops(&self, it: &Item) -> u32 {
        self.of[&it.dst][it.src as usize]
    }

    /// Every item's hops together; `None` if one cannot arrive.
    pub(super) fn total(&self, items: &[Item]) -> Option<usize> {
        items.iter().map(|it| Some(self.hops(it)).filter(|&h| h != u32::MAX).map(|h| h as usize)).sum()
    }
}

/// The plan and the hops it chose for `items` (on a fabric that `applies`) at up to `group`
/// chunks a message (`None`: every chunk waiting).
pub(super) fn slot_route(
    topo: &Topology,
    items: &[Item],
    dist: &Dist,
    chunk_bytes: f64,
    group: Option<u32>,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Plan, Hops), SynthError> {
    let links = topo.links();
    let n = topo.nodes();
    let cap = group.map_or(u32::MAX, |g| g.max(1));
    let dist_of = &dist.of;
    // Longest path first (each item's hop count read once, not at every comparison).
    let mut keyed: Vec<(std::cmp::Reverse<u32>, u64, usize)> = (0..items.len())
        .filter(|&i| items[i].src != items[i].dst)
        .map(|i| (std::cmp::Reverse(dist.hops(&items[i])), tie(seed, i, 3), i))
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|(_, _, i)| i).collect();
    // Per link: chunks in each slot, the first slot with room, and chunks placed in all.
    let mut used: Vec<Vec<u32>> = vec![Vec::new(); links.len()];
    let mut open = vec![0u32; links.len()];
    let mut load = vec![0u32; links.len()];
    // Per node, for the item being placed: its stamp, earliest arrival and the link it came by.
    let mut stamp = vec![u32::MAX; n];
    let mut arrive = vec![0u32; n];
    let mut via = vec![u32::MAX; n];
    let mut paths: Vec<Vec<(u32, u32)>> = vec![Vec::new(); items.len()];
    let mut layer: Vec<u32> = Vec::new();
    let mut next_layer: Vec<u32> = Vec::new();
    let first_free = |used: &[Vec<u32>], open: &[u32], l: usize, from: u32| -> u32 {
        let u = &used[l];
        let mut x = from.max(open[l]);
        while (x as usize) < u.len() && u[x as usize] >= cap {
            x += 1;
        }
        x
    };
    for (k, &i) in order.iter().enumerate() {
        if k.is_multiple_of(4096) && cancelled() {
            return Err(SynthError::Cancelled);
        }
        let it = &items[i];
        let d = &dist_of[&it.dst];
        let key = k as u32;
        stamp[it.src as usize] = key;
        arrive[it.src as usize] = 0;
        via[it.src as usize] = u32::MAX;
        layer.clear();
        layer.push(it.src);
        while !layer.is_empty() {
            next_layer.clear();
            for &u in &layer {
                let u = u as usize;
                if u == it.dst as usize {
                    continue;
                }
                for l in topo.out_links(u) {
                    let w = links[l].dst;
                    if d[w] == u32::MAX || d[w] + 1 != d[u] {
                        continue;
                    }
                    let x = first_free(&used, &open, l, arrive[u]);
                    let better = stamp[w] != key || {
                        let (a, b) = (x + 1, arrive[w]);
                        a < b
                            || (a == b
                                && (load[l], tie(seed, i, l)) < (load[via[w] as usize], tie(seed, i, via[w] as usize)))
                    };
                    if better {
                        if stamp[w] != key {
                            next_layer.push(w as u32);
                        }
                        stamp[w] = key;
                        arrive[w] = x + 1;
                        via[w] = l as u32;
                    }
                }
            }
            std::mem::swap(&mut layer, &mut next_layer);
        }
        // Back from the needer: each link's slot is the arrival at its far end less one.
        let path = &mut paths[i];
        let mut w = it.dst as usize;
        while w != it.src as usize {
            let l = via[w] as usize;
            path.push((l as u32, arrive[w] - 1));
            w = links[l].src;
        }
        path.reverse();
        for &(l, x) in path.iter() {
            let (l, x) = (l as usize, x as usize);
            let u = &mut used[l];
            if u.len() <= x {
                u.resize(x + 1, 0);
            }
            u[x] += 1;
            load[l] += 1;
            let o = &mut open[l];
            while (*o as usize) < u.len() && u[*o as usize] >= cap {
                *o += 1;
            }
        }
    }
    // The hops: every link a segment of its own.
    let mut segs = Segments { ids: HashMap::new(), links: Vec::with_capacity(links.len()) };
    for l in 0..links.len() {
        segs.ids.insert(vec![l as u32], l as u32);
        segs.links.push(vec![l as u32]);
    }
    let mut start = Vec::with_capacity(items.len() + 1);
    let mut seg = Vec::new();
    let mut slot_of = Vec::new();
    start.push(0);
    for p in &paths {
        for &(l, x) in p {
            seg.push(l);
            slot_of.push(x);
        }
        start.push(seg.len());
    }
    let hops = Hops { segs, start, seg };
    let plan = timed(topo, &hops, items.len(), chunk_bytes, &slot_of);
    Ok((plan, hops))
}
