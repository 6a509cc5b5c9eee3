//! Bounds for collectives whose chunks travel from their holders to the NPUs that need them
//! without combining (all-to-all, scatter, gather, non-combining custom collectives): the
//! distance bound (every chunk crosses a whole path, and the links together carry it all) and
//! the cut bound (the chunks that must leave a set of nodes cross the links out of it).

use crate::collective::Holders;
use crate::topology::Topology;
use std::collections::BTreeMap;

/// Work (chunk entries scanned) the cut bound may spend over all its candidate sets; beyond,
/// fewer sets are tried (the bound stays sound: a maximum over fewer sets).
const CUT_WORK_BUDGET: usize = 20_000_000;
/// NPUs the cut bound grows hop balls around (evenly spread over the NPUs).
const BALL_CENTRES: usize = 8;

/// The chunks to deliver: each chunk's needing NPUs (empty: nothing to deliver).
pub(super) struct Demand<'a> {
    pub holders: &'a Holders,
    pub needers: Vec<Vec<u32>>,
    pub chunk_bytes: f64,
}

impl<'a> Demand<'a> {
    pub fn new(holders: &'a Holders, needed: &[[u32; 2]], num_chunks: usize, chunk_bytes: f64) -> Demand<'a> {
        let mut needers: Vec<Vec<u32>> = vec![Vec::new(); num_chunks];
        for &[v, ch] in needed {
            needers[ch as usize].push(v);
        }
        Demand { holders, needers, chunk_bytes }
    }

    pub(super) fn chunks(&self) -> impl Iterator<Item = (&[u32], &[u32])> {
        self.needers.iter().enumerate().filter(|(_, n)| !n.is_empty()).map(|(c, n)| (self.holders.of(c), &n[..]))
    }
}

/// The distance bound: each chunk crosses, on its way to its farthest needer, at least the
/// links of the cheapest path from its nearest holder (cost of a link: chunk bytes over its
/// bandwidth), and no link is busy for longer than the collective, so the time is at least the
/// summed cost over the number of links. `Err` names why it was skipped.
pub(super) fn distance(topo: &Topology, d: &Demand) -> Result<Option<f64>, String> {
    let links = topo.links().len();
    if links == 0 {
        return Ok(None);
    }
    // In holder order, so the sum rounds the same way every run (a hash map's order is the
    // process's: the bound differed in its last bits run to run).
    let mut groups: BTreeMap<&[u32], Vec<&[u32]>> = BTreeMap::new();
    for (h, n) in d.chunks() {
        groups.entry(h).or_default().push(n);
    }
    let work = groups.len().saturating_mul(topo.nodes() + links);
    if work > crate::limits::MIN_CUT_BUDGET {
        return Err(format!(
            "distance: skipped, {} shortest-path passes on {} nodes exceed the work budget",
            groups.len(),
            topo.nodes()
        ));
    }
    let mut total = 0.0f64;
    for (h, chunks) in groups {
        let dist = byte_cost(topo, h);
        for n in chunks {
            let far = n.iter().map(|&v| dist[v as usize]).fold(0.0, f64::max);
            if !far.is_finite() {
                return Ok(None);
            }
            total += far;
        }
    }
    Ok(Some(total * d.chunk_bytes / links as f64))
}

/// Cheapest ns per byte from the nearest source to every node (a link costs 1 / bandwidth).
fn byte_cost(topo: &Topology, sources: &[u32]) -> Vec<f64> {
    super::shortest(topo, sources, |l| 1.0 / l.bandwidth_gb_per_s)
}

/// The cut bound: for a set S of nodes, the chunks whose holders are all inside and some
/// needer outside cross the links out of S, so the time is at least their bytes over those
/// links' bandwidth (and likewise into S). The sets tried: each NPU alone (its egress and
/// ingress), on a mesh or torus every slab of coordinates `< b` along each dimension (the
/// bisections), hop balls of every radius around a few NPUs, and each switch with the NPUs it
/// joins. Sound for whatever sets are tried; exact over them.
pub(super) fn cut(topo: &Topology, d: &Demand) -> Option<f64> {
    let nodes = topo.nodes();
    let mut best = single_npus(topo, d);
    // A set costs a pass over the chunks and one over the links.
    let per_set: usize = d.chunks().map(|(h, n)| h.len() + n.len()).sum::<usize>() + topo.links().len();
    let mut sets_left = CUT_WORK_BUDGET / per_set;
    let try_set = |inside: &[bool], best: &mut f64| {
        let (mut out_bw, mut in_bw) = (0.0, 0.0);
        for l in topo.links() {
            match (inside[l.src], inside[l.dst]) {
                (true, false) => out_bw += l.bandwidth_gb_per_s,
                (false, true) => in_bw += l.bandwidth_gb_per_s,
                _ => {}
            }
        }
        let (mut out_chunks, mut in_chunks) = (0usize, 0usize);
        for (h, n) in d.chunks() {
            let first = inside[h[0] as usize];
            if h.iter().any(|&u| inside[u as usize] != first) {
                continue; // holders on both sides: nothing forced across
            }
            if n.iter().any(|&v| inside[v as usize] != first) {
                if first { out_chunks += 1 } else { in_chunks += 1 }
            }
        }
        for (chunks, bw) in [(out_chunks, out_bw), (in_chunks, in_bw)] {
            if chunks > 0 {
                // No bandwidth across a cut some chunk must cross: the collective cannot be
                // served, which the reachability check reports; no bound from it.
                if bw > 0.0 {
                    *best = best.max(chunks as f64 * d.chunk_bytes / bw);
                }
            }
        }
    };
    let mut inside = vec![false; nodes];
    if let Some(g) = topo.infer_grid() {
        for (dim, &len) in g.dims.iter().enumerate() {
            for b in 1..len {
                if sets_left == 0 {
                    break;
                }
                sets_left -= 1;
                for (v, x) in inside.iter_mut().enumerate() {
                    *x = g.coords(v)[dim] < b;
                }
                try_set(&inside, &mut best);
            }
        }
    }
    let npus = topo.npus();
    let centres = BALL_CENTRES.min(npus);
    for i in 0..centres {
        let centre = i * npus / centres;
        let hops = topo.hop_distances(centre);
        let radius = hops.iter().copied().filter(|&h| h != usize::MAX).max().unwrap_or(0);
        for r in 1..radius {
            if sets_left == 0 {
                break;
            }
            sets_left -= 1;
            for (x, &h) in inside.iter_mut().zip(&hops) {
                *x = h <= r;
            }
            try_set(&inside, &mut best);
        }
    }
    // Each switch with the NPUs it joins: on a rail fabric a rail's chunks for other rails
    // leave only over its NPUs' node-switch links (rail:8x16: 120 chunks per node uplink,
    // above the distance bound's 116 and the hop balls' 110). The smallest first: a star of
    // few NPUs has few links out, the tightest bound when the budget left after the balls
    // runs short.
    let mut switches: Vec<usize> = (topo.npus()..nodes).collect();
    switches.sort_by_key(|&sw| topo.out_links(sw).len());
    for sw in switches {
        if sets_left == 0 {
            break;
        }
        sets_left -= 1;
        inside.fill(false);
        inside[sw] = true;
        for l in &topo.links()[topo.out_links(sw)] {
            inside[l.dst] = topo.is_npu(l.dst);
        }
        for &i in topo.in_links(sw) {
            let u = topo.links()[i].src;
            inside[u] = inside[u] || topo.is_npu(u);
        }
        try_set(&inside, &mut best);
    }
    (best > 0.0).then_some(best)
}

/// Each NPU alone: the chunks only it holds and another NPU needs leave over its outgoing
/// links (the egress bound; the ingress side is `bounds::ingress`).
fn single_npus(topo: &Topology, d: &Demand) -> f64 {
    let mut egress = vec![0usize; topo.npus()];
    for (h, n) in d.chunks() {
        if let [u] = h
            && n.iter().any(|v| v != u)
        {
            egress[*u as usize] += 1;
        }
    }
    let mut best = 0.0f64;
    for (u, &chunks) in egress.iter().enumerate() {
        let bw: f64 = topo.links()[topo.out_links(u)].iter().map(|l| l.bandwidth_gb_per_s).sum();
        if chunks > 0 && bw > 0.0 {
            best = best.max(chunks as f64 * d.chunk_bytes / bw);
        }
    }
    best
}
