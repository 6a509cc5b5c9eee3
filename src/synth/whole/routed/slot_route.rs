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
    let cap = group.map_or(u32::MAX, |g| g.max(1));
    let order = longest_first(items, dist, seed);
    let mut slots = Slots::new(links.len(), cap);
    let mut front = Front::new(topo, seed);
    let mut paths: Vec<Vec<(u32, u32)>> = vec![Vec::new(); items.len()];
    for (k, &i) in order.iter().enumerate() {
        if k.is_multiple_of(4096) && cancelled() {
            return Err(SynthError::Cancelled);
        }
        let it = &items[i];
        front.spread(&slots, &dist.of[&it.dst], it, i, k as u32);
        let path = &mut paths[i];
        front.trace(it, path);
        slots.take(path);
    }
    let (hops, slot_of) = link_hops(links.len(), items.len(), &paths);
    let plan = timed(topo, &hops, items.len(), chunk_bytes, &slot_of);
    Ok((plan, hops))
}

/// The items that move, in the order they are placed: longest first, seeded ties.
fn longest_first(items: &[Item], dist: &Dist, seed: u64) -> Vec<usize> {
    // Longest path first (each item's hop count read once, not at every comparison).
    let mut keyed: Vec<(std::cmp::Reverse<u32>, u64, usize)> = (0..items.len())
        .filter(|&i| items[i].src != items[i].dst)
        .map(|i| (std::cmp::Reverse(dist.hops(&items[i])), tie(seed, i, 3), i))
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, i)| i).collect()
}

/// The slots taken so far, per link, so each chunk sees the ones before it.
struct Slots {
    // Per link: chunks in each slot, the first slot with room, and chunks placed in all.
    used: Vec<Vec<u32>>,
    open: Vec<u32>,
    load: Vec<u32>,
    /// Chunks a slot holds at most (a message's size).
    cap: u32,
}

impl Slots {
    /// Empty slots on `links` links, `cap` chunks each.
    fn new(links: usize, cap: u32) -> Slots {
        Slots { used: vec![Vec::new(); links], open: vec![0u32; links], load: vec![0u32; links], cap }
    }

    /// The first slot of link `l` at or after `from` with room (full slots below `open` skipped).
    fn first_free(&self, l: usize, from: u32) -> u32 {
        let u = &self.used[l];
        let mut x = from.max(self.open[l]);
        while (x as usize) < u.len() && u[x as usize] >= self.cap {
            x += 1;
        }
        x
    }

    /// Books a placed chunk's (link, slot) hops, so the chunks after it see them taken.
    fn take(&mut self, path: &[(u32, u32)]) {
        for &(l, x) in path {
            let (l, x) = (l as usize, x as usize);
            let u = &mut self.used[l];
            if u.len() <= x {
                u.resize(x + 1, 0);
            }
            u[x] += 1;
            self.load[l] += 1;
            let o = &mut self.open[l];
            while (*o as usize) < u.len() && u[*o as usize] >= self.cap {
                *o += 1;
            }
        }
    }
}

/// The dynamic program's state for one item, kept across items so nothing is allocated per chunk.
struct Front<'a> {
    topo: &'a Topology,
    seed: u64,
    // Per node, for the item being placed: its stamp, earliest arrival and the link it came by.
    stamp: Vec<u32>,
    arrive: Vec<u32>,
    via: Vec<u32>,
    /// The nodes reached at the current hop count, and at the next.
    layer: Vec<u32>,
    next_layer: Vec<u32>,
}

impl<'a> Front<'a> {
    /// No node stamped yet (stamps are the items' places in the order).
    fn new(topo: &'a Topology, seed: u64) -> Front<'a> {
        let n = topo.nodes();
        Front {
            topo,
            seed,
            stamp: vec![u32::MAX; n],
            arrive: vec![0u32; n],
            via: vec![u32::MAX; n],
            layer: Vec::new(),
            next_layer: Vec::new(),
        }
    }

    /// Earliest arrivals of item `i` (`d`: hops to its needer) over its shortest-path DAG, layer
    /// by layer, given the slots taken; ties by the less loaded link, then a seeded hash.
    fn spread(&mut self, slots: &Slots, d: &[u32], it: &Item, i: usize, key: u32) {
        let topo = self.topo;
        let links = topo.links();
        self.stamp[it.src as usize] = key;
        self.arrive[it.src as usize] = 0;
        self.via[it.src as usize] = u32::MAX;
        self.layer.clear();
        self.layer.push(it.src);
        while !self.layer.is_empty() {
            self.next_layer.clear();
            for &u in &self.layer {
                let u = u as usize;
                if u == it.dst as usize {
                    continue;
                }
                for l in topo.out_links(u) {
                    let w = links[l].dst;
                    if d[w] == u32::MAX || d[w] + 1 != d[u] {
                        continue;
                    }
                    let x = slots.first_free(l, self.arrive[u]);
                    let better = self.stamp[w] != key || {
                        let (a, b) = (x + 1, self.arrive[w]);
                        let v = self.via[w] as usize;
                        a < b
                            || (a == b && (slots.load[l], tie(self.seed, i, l)) < (slots.load[v], tie(self.seed, i, v)))
                    };
                    if better {
                        if self.stamp[w] != key {
                            self.next_layer.push(w as u32);
                        }
                        self.stamp[w] = key;
                        self.arrive[w] = x + 1;
                        self.via[w] = l as u32;
                    }
                }
            }
            std::mem::swap(&mut self.layer, &mut self.next_layer);
        }
    }

    /// Appends the item's (link, slot) hops, source first, as `spread` last chose them.
    fn trace(&self, it: &Item, path: &mut Vec<(u32, u32)>) {
        let links = self.topo.links();
        // Back from the needer: each link's slot is the arrival at its far end less one.
        let mut w = it.dst as usize;
        while w != it.src as usize {
            let l = self.via[w] as usize;
            path.push((l as u32, self.arrive[w] - 1));
            w = links[l].src;
        }
        path.reverse();
    }
}

/// The paths as hops over one-link segments, and each hop's slot (for `timed`).
fn link_hops(n_links: usize, items: usize, paths: &[Vec<(u32, u32)>]) -> (Hops, Vec<u32>) {
    // The hops: every link a segment of its own.
    let mut segs = Segments { ids: HashMap::new(), links: Vec::with_capacity(n_links) };
    for l in 0..n_links {
        segs.ids.insert(vec![l as u32], l as u32);
        segs.links.push(vec![l as u32]);
    }
    let mut start = Vec::with_capacity(items + 1);
    let mut seg = Vec::new();
    let mut slot_of = Vec::new();
    start.push(0);
    for p in paths {
        for &(l, x) in p {
            seg.push(l);
            slot_of.push(x);
        }
        start.push(seg.len());
    }
    (Hops { segs, start, seg }, slot_of)
}
