//! All-gather and broadcast by spanning-tree packing (`produce`): every root's data dealt to k
//! spanning out-trees of its own, the trees packed so that every link
//! carries its share of them (ForestColl, arXiv 2402.06787, for the idea; the construction here
//! is Edmonds' branching theorem made constructive, as Lovász proved it).
//!
//! The bound (`Packing::optimal_ns_per_byte`, `bounds::data_cut`): the NPUs of a set S hold |S|
//! shards that every NPU outside needs, so they leave S over its outgoing bandwidth B⁺(S); a
//! shard's time is at least max_S |S| / B⁺(S) per byte (the min-cut bound). Give each
//! link e a capacity c(e) = ⌊τ·k·b(e)⌋ trees for a time τ per byte of shard: by Edmonds' theorem
//! k spanning out-trees per root fit those capacities exactly when every set S takes in
//! c⁺(S) ≥ k·|V \ S| (every root outside S has k trees to bring in), which is one max-flow per
//! NPU (`feasible`). The least such τ (`pack`, walking the capacities' breakpoints up from the
//! bound) is the packing's time: the bound itself where k·τ*·b(e) is whole on every link.
//!
//! The trees (`grow`): a root's k at once, each grown an arc in turn, an arc kept only if the
//! trees still fit (a max-flow into the arc's head, `still_fits`, each growing tree a root set
//! of its own); Lovász's proof says one always does. Arcs are tried nearest the root first,
//! then on the link with the most capacity left, so trees are shallow and links evenly used.
//!
//! Switches (`split`): the capacities are packed with the switches as nodes the trees pass
//! through, then each switch is split off, its links in paired with its links out into arcs
//! from NPU to NPU through it (ForestColl's switch removal), and the trees grow on those.
//!
//! The schedule (`produce`): a root's chunks dealt to its trees in turn, every chunk's move down
//! every arc list-scheduled into the first gap of its route's links after the chunk reaches the
//! parent, improved forward–backward for many roots (`timeline`), one transfer a move and one
//! step per distinct start, so the simulator replays the timeline. Serves all-gather and
//! broadcast of every live NPU, on up to `MAX_NPUS`.

use crate::collective::{Collective, CollectiveKind};
use crate::maxflow::FlowNet;
use crate::schedule::{ChunkList, Route, Schedule, Transfer};
use crate::synth::{GreedyError, PlanStats, SynthError};
use crate::topology::Topology;

mod split;
mod timeline;

use timeline::timeline;

/// NPUs up to which the packing runs: it grows n·k trees of n − 1 arcs, each arc one max-flow
/// on the fabric (mesh:8x8 at one chunk per NPU: about 4,000). dragonfly:8:9's 72 NPUs are in
/// (its all-gather at 128 MiB 1.185 → 1.041× the bound, 0.1 → 0.7 s); on 128 NPUs
/// (torus:4x4x8 less a link) the trees grew in 3 s and lost to the matcher, 1.072 to 1.042×.
pub const MAX_NPUS: usize = 80;
/// Trees per root up to which it runs.
pub const MAX_TREES_PER_ROOT: usize = 8;
/// Trees in all up to which it runs: an all-gather on mesh:8x8 at four trees per root grows
/// its 256 in about 0.4 s, at eight 0.8 s.
pub const MAX_TREES: usize = 256;
/// The packing at each number of trees per root (1 to `MAX_TREES_PER_ROOT`), worked out once
/// for every chunking of one synthesis (it depends on the fabric, the roots and k alone).
pub type Packings = [std::sync::OnceLock<Result<Option<Packing>, SynthError>>; MAX_TREES_PER_ROOT];

/// Capacity breakpoints `pack` walks above the bound before it gives up.
const MAX_BREAKPOINTS: usize = 4096;

/// The group's NPUs (local 0..n) and the fabric's switches (n..nodes), and the links among
/// them; once the switches are split off (`split`), the NPUs alone and arcs among them.
struct Graph {
    n: usize,
    nodes: usize,
    /// The NPUs whose data the trees carry (every NPU for an all-gather, the root for a
    /// broadcast).
    roots: Vec<bool>,
    /// (from, to, bandwidth in bytes per ns) of each link (NaN for an arc split off a switch:
    /// its capacity is what counts).
    arcs: Vec<(usize, usize, f64)>,
    /// Each local node's id in the topology.
    global: Vec<usize>,
}

/// k spanning out-trees per root, and the time their loads take.
#[derive(Clone, Debug)]
pub struct Packing {
    /// Trees per root.
    pub k: usize,
    /// Each tree's NPUs' parents (`u32::MAX` at the root), in local indices: k per root, the
    /// roots in order.
    pub parents: Vec<Vec<u32>>,
    /// Each tree's arc into each NPU (an index into `routes`; `u32::MAX` at the root).
    pub arcs: Vec<Vec<u32>>,
    /// Each arc's nodes in the topology, from the NPU that sends to the NPU that receives: the
    /// two ends of a link, or the switches between them where a switch was split off.
    pub routes: Vec<Vec<usize>>,
    /// Each tree's root.
    pub tree_roots: Vec<usize>,
    /// Trees through each arc (`routes`).
    pub load: Vec<u32>,
    /// Per byte of one NPU's shard, the time the busiest arc takes with its load (its trees
    /// each carrying 1/k of a shard): at least `optimal_ns_per_byte`.
    pub ns_per_byte: f64,
    /// max_S |S| / B⁺(S): the bound on any all-gather's time per byte of shard.
    pub optimal_ns_per_byte: f64,
}

impl Graph {
    /// The group's NPUs, the live switches and the links among them (links to NPUs outside
    /// the group are left out: `applies` asks for every live NPU).
    fn of(topo: &Topology, group: &[usize], roots: Vec<bool>) -> Graph {
        let switches = (0..topo.nodes()).filter(|&v| topo.is_switch(v) && !topo.is_failed(v));
        let global: Vec<usize> = group.iter().copied().chain(switches).collect();
        let mut local = vec![usize::MAX; topo.nodes()];
        for (i, &v) in global.iter().enumerate() {
            local[v] = i;
        }
        let mut arcs = Vec::new();
        for l in topo.links() {
            let (a, b) = (local[l.src], local[l.dst]);
            if a == usize::MAX || b == usize::MAX || a == b || l.bandwidth_gb_per_s <= 0.0 {
                continue;
            }
            arcs.push((a, b, l.bandwidth_gb_per_s));
        }
        Graph { n: group.len(), nodes: global.len(), roots, arcs, global }
    }

    /// Whether k spanning out-trees per root fit capacities `cap` (Edmonds): for every NPU v,
    /// the flow into v from a source feeding every root k is k times the roots.
    fn feasible(&self, cap: &[u32], k: usize) -> bool {
        let (n, s) = (self.n, self.nodes);
        let mut net = FlowNet::new(s + 1);
        for (e, &(a, b, _)) in self.arcs.iter().enumerate() {
            net.add(a, b, cap[e] as f64);
        }
        let mut roots = 0;
        for v in (0..n).filter(|&v| self.roots[v]) {
            net.add(s, v, k as f64);
            roots += 1;
        }
        (0..n).all(|v| {
            net.reset();
            net.max_flow(s, v) >= (k * roots) as f64 - 0.5
        })
    }

    /// Whether the trees still to start (`left[u]` rooted at u) and the ones growing (each
    /// over its `grown` NPUs) fit `cap`, for every set holding `v`: the max-flow into `v` from a
    /// source that feeds each NPU its roots' trees, and each growing tree once, anywhere in it.
    /// On NPUs alone (the switches split off).
    fn still_fits(&self, cap: &[u32], left: &[u32], growing: &[&[bool]], v: usize) -> bool {
        let n = self.n;
        debug_assert_eq!(n, self.nodes, "the switches are split off");
        let s = n;
        let mut net = FlowNet::new(n + 1 + growing.len());
        for (e, &(a, b, _)) in self.arcs.iter().enumerate() {
            if cap[e] > 0 {
                net.add(a, b, cap[e] as f64);
            }
        }
        for (u, &w) in left.iter().enumerate() {
            if w > 0 {
                net.add(s, u, w as f64);
            }
        }
        for (i, grown) in growing.iter().enumerate() {
            let z = n + 1 + i;
            net.add(s, z, 1.0);
            for (u, &g) in grown.iter().enumerate() {
                if g {
                    net.add(z, u, f64::INFINITY);
                }
            }
        }
        let demand = left.iter().sum::<u32>() as usize + growing.len();
        net.max_flow(s, v) >= demand as f64 - 0.5
    }
}

/// The least time per byte of shard at which k trees per root fit, and the capacities then:
/// the breakpoints of ⌊τ·k·b(e)⌋ walked up from the bound.
fn pack(g: &Graph, k: usize, optimal: f64, cancelled: &dyn Fn() -> bool) -> Result<(f64, Vec<u32>), SynthError> {
    let cap_at = |tau: f64| -> Vec<u32> {
        g.arcs.iter().map(|a| (tau * k as f64 * a.2 * (1.0 + 1e-12)).floor().min(u32::MAX as f64) as u32).collect()
    };
    let mut tau = optimal;
    for _ in 0..MAX_BREAKPOINTS {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        let cap = cap_at(tau);
        if g.feasible(&cap, k) {
            return Ok((tau, cap));
        }
        // The next time at which some arc takes one more tree.
        tau = g.arcs.iter().zip(&cap).map(|(a, &c)| (c as f64 + 1.0) / (k as f64 * a.2)).fold(f64::INFINITY, f64::min);
    }
    Err(GreedyError::Unsupported("tree packing: no capacities within its breakpoints").into())
}

/// The trees grown within `cap` (which `feasible` accepted): each tree's parents and arcs
/// (`Packing::parents`, `Packing::arcs`), and the trees each arc carries.
type Grown = (Vec<Vec<u32>>, Vec<Vec<u32>>, Vec<u32>);

/// One tree as it grows: each NPU's parent, arc in and depth, and whether it is in yet.
struct Growing {
    parent: Vec<u32>,
    arc: Vec<u32>,
    depth: Vec<u32>,
    grown: Vec<bool>,
}

/// The trees, a root's k at once, each taking an arc in turn (so none takes the short ones
/// first): an arc out of a tree is kept only if the trees still fit (`still_fits`), tried
/// nearest the root first, then on the link with the most capacity left.
fn grow(g: &Graph, k: usize, mut cap: Vec<u32>, cancelled: &dyn Fn() -> bool) -> Result<Grown, SynthError> {
    let n = g.n;
    let mut load = vec![0u32; g.arcs.len()];
    let mut left: Vec<u32> = g.roots.iter().map(|&r| if r { k as u32 } else { 0 }).collect();
    let (mut trees, mut arcs) = (Vec::with_capacity(n * k), Vec::with_capacity(n * k));
    let mut out_arcs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (e, a) in g.arcs.iter().enumerate() {
        out_arcs[a.0].push(e);
    }
    // At one tree per root every root's tree grows an arc in turn: grown root by root the first
    // trees took the links' best arcs and the last went deep (dragonfly:8:9 at 128 MiB: 1.128×
    // the bound, 10 message times a link; in turn 1.041×, 9, the floor at a shard a message).
    // From two per root, root by root: every tree growing at once is in every max-flow (mesh:8x8
    // at k = 1 took 0.1 → 0.6 s).
    let roots: Vec<usize> = (0..n).filter(|&r| g.roots[r]).collect();
    let batch = if k == 1 { roots.len().max(1) } else { 1 };
    for batch in roots.chunks(batch) {
        let mut ts: Vec<Growing> = Vec::with_capacity(batch.len() * k);
        for &root in batch {
            left[root] = 0;
            for _ in 0..k {
                let none = vec![u32::MAX; n];
                let mut t = Growing { parent: none.clone(), arc: none.clone(), depth: none, grown: vec![false; n] };
                t.grown[root] = true;
                t.depth[root] = 0;
                ts.push(t);
            }
        }
        for _ in 1..n {
            for i in 0..ts.len() {
                if cancelled() {
                    return Err(SynthError::Cancelled);
                }
                let e = grow_arc(g, &mut cap, &left, &mut ts, i, &out_arcs)?;
                let (u, v, _) = g.arcs[e];
                load[e] += 1;
                let t = &mut ts[i];
                t.parent[v] = u as u32;
                t.arc[v] = e as u32;
                t.depth[v] = t.depth[u] + 1;
            }
        }
        for t in ts {
            trees.push(t.parent);
            arcs.push(t.arc);
        }
    }
    Ok((trees, arcs, load))
}

/// The arc tree `i` of `ts` grows by: the first, nearest its root and then with the most
/// capacity left, that keeps every tree fitting (`Graph::still_fits`); its capacity taken.
fn grow_arc(
    g: &Graph,
    cap: &mut [u32],
    left: &[u32],
    ts: &mut [Growing],
    i: usize,
    out_arcs: &[Vec<usize>],
) -> Result<usize, SynthError> {
    let t = &ts[i];
    let mut candidates: Vec<usize> = (0..g.n)
        .filter(|&u| t.grown[u])
        .flat_map(|u| out_arcs[u].iter().copied())
        .filter(|&e| cap[e] > 0 && !t.grown[g.arcs[e].1])
        .collect();
    candidates.sort_by_key(|&e| (t.depth[g.arcs[e].0], std::cmp::Reverse(cap[e]), e));
    for e in candidates {
        let v = g.arcs[e].1;
        cap[e] -= 1;
        ts[i].grown[v] = true;
        let growing: Vec<&[bool]> = ts.iter().map(|t| t.grown.as_slice()).collect();
        if g.still_fits(cap, left, &growing, v) {
            return Ok(e);
        }
        cap[e] += 1;
        ts[i].grown[v] = false;
    }
    Err(GreedyError::Unsupported("tree packing: no arc keeps the trees fitting").into())
}

/// k spanning out-trees per root (`roots[i]`: NPU `group[i]` has data) on `topo`'s links
/// among the group and its switches (split off: `split`), packed at the least time their
/// integer loads allow; `None` where the packing does not serve (a group some root does not
/// reach, a switch that does not split off).
pub fn packing(
    topo: &Topology,
    group: &[usize],
    roots: &[bool],
    k: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Packing>, SynthError> {
    let g = Graph::of(topo, group, roots.to_vec());
    if g.n < 2 || k == 0 || !roots.contains(&true) {
        return Ok(None);
    }
    let holders: Vec<usize> = group.iter().zip(roots).filter(|(_, r)| **r).map(|(&v, _)| v).collect();
    let Ok(Some(optimal)) = crate::bounds::data_cut(topo, group, &holders) else { return Ok(None) };
    let (tau, cap) = pack(&g, k, optimal, cancelled)?;
    let global = g.global.clone();
    let (g, cap, routes) = if g.nodes > g.n {
        match split::split_off(&g, &cap, k, cancelled)? {
            Some(split) => split,
            None => return Ok(None),
        }
    } else {
        let routes = g.arcs.iter().map(|a| vec![a.0, a.1]).collect();
        (g, cap, routes)
    };
    let (parents, arcs, load) = grow(&g, k, cap, cancelled)?;
    let routes: Vec<Vec<usize>> = routes.into_iter().map(|r| r.into_iter().map(|v| global[v]).collect()).collect();
    let ns_per_byte = busiest_ns_per_byte(topo, &routes, &load, k);
    debug_assert!(ns_per_byte <= tau * (1.0 + 1e-9));
    tracing::debug!(target: "ccsynth::timing", k, over_bound = ns_per_byte / optimal, arcs = routes.len(), "packing: packed");
    let tree_roots = (0..g.n).filter(|&r| roots[r]).flat_map(|r| std::iter::repeat_n(r, k)).collect();
    Ok(Some(Packing { k, parents, arcs, routes, tree_roots, load, ns_per_byte, optimal_ns_per_byte: optimal }))
}

/// Per byte of a shard, the time the busiest link takes with the trees of every arc whose
/// route crosses it (each tree carrying 1/k of a shard).
fn busiest_ns_per_byte(topo: &Topology, routes: &[Vec<usize>], load: &[u32], k: usize) -> f64 {
    let mut on = vec![0u32; topo.links().len()];
    for (r, &l) in routes.iter().zip(load) {
        for w in r.windows(2) {
            on[topo.link_index(w[0], w[1]).expect("a route follows links")] += l;
        }
    }
    topo.links().iter().zip(&on).map(|(link, &l)| l as f64 / (k as f64 * link.bandwidth_gb_per_s)).fold(0.0, f64::max)
}

/// Whether `produce` serves `c` on `topo` at `k` trees per root: an all-gather or a broadcast
/// of every live NPU (the trees relay through NPUs of the group, and through switches split
/// off), on up to `MAX_NPUS` NPUs, at most `MAX_TREES_PER_ROOT`
/// trees per root, no more than a root's chunks, and `MAX_TREES` in all.
pub fn applies(topo: &Topology, c: &Collective, k: usize) -> bool {
    let (per_root, roots) = match c.spec.kind {
        CollectiveKind::AllGather => (c.spec.chunks() as usize, c.group.len()),
        CollectiveKind::Broadcast => (c.num_chunks, 1),
        _ => return false,
    };
    c.group.len() == topo.live_npus().len()
        && (2..=MAX_NPUS).contains(&c.group.len())
        && (1..=MAX_TREES_PER_ROOT.min(per_root)).contains(&k)
        && roots * k <= MAX_TREES
}

/// The all-gather or broadcast `c` down `k` packed spanning trees per root (taken from
/// `packings`, or packed there): a root's chunks dealt to its trees in turn and pipelined down
/// each, every move list-scheduled (`timeline`).
pub fn produce(
    topo: &Topology,
    c: &Collective,
    k: usize,
    seed: u64,
    packings: &Packings,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Schedule, PlanStats), SynthError> {
    if !applies(topo, c, k) {
        return Err(GreedyError::Unsupported("tree packing: an all-gather or broadcast of every live NPU").into());
    }
    let group: Vec<usize> = c.group.clone();
    let mut local = vec![usize::MAX; topo.nodes()];
    for (i, &v) in group.iter().enumerate() {
        local[v] = i;
    }
    // Each root's chunks, in id order.
    let mut chunks: Vec<Vec<u32>> = vec![Vec::new(); group.len()];
    for [v, ch] in c.precondition.iter() {
        chunks[local[v as usize]].push(ch);
    }
    let roots: Vec<bool> = chunks.iter().map(|h| !h.is_empty()).collect();
    let p = match packings[k - 1].get_or_init(|| packing(topo, &group, &roots, k, cancelled)) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Err(
                GreedyError::Unsupported("tree packing: a group its roots reach, switches that split off").into()
            );
        }
        Err(e) => return Err(e.clone()),
    };
    let trees = trees_of(p, &chunks, k);
    if cancelled() {
        return Err(SynthError::Cancelled);
    }
    let many_roots = roots.iter().filter(|&&r| r).count() > 1;
    let moves = timeline(topo, &p.routes, &trees, c.chunk_size_bytes, many_roots);
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = Some(seed);
    // A step per distinct start: a move reads what landed in an earlier step, and each link
    // replays its moves in the timeline's order.
    let mut steps = 0u32;
    let mut last = f64::NEG_INFINITY;
    let paths: Vec<Option<Route>> = p
        .routes
        .iter()
        .map(|r| (r.len() > 2).then(|| Route::from(r.iter().map(|&v| v as u32).collect::<Vec<u32>>())))
        .collect();
    for (i, &(start, arc, chunk)) in moves.iter().enumerate() {
        if i > 0 && start > last {
            steps += 1;
        }
        last = start;
        let route = &p.routes[arc];
        let mut t = Transfer::copy(steps, route[0], route[route.len() - 1], ChunkList::One(chunk));
        t.path = paths[arc].clone();
        s.transfers.push(t);
    }
    let steps = steps + 1;
    let stats = PlanStats {
        ten_timesteps: steps,
        phase_timesteps: vec![steps],
        // A message of one chunk on the fastest link.
        discretization_ns: topo.links().iter().map(|l| l.time_ns(c.chunk_size_bytes)).fold(f64::INFINITY, f64::min),
        ..PlanStats::default()
    };
    Ok((s, stats))
}

/// The trees of packing `p` at `k` trees per root, each root's `chunks` dealt to its trees:
/// tree j of a root carries its chunks j, j + k, j + 2k, …
fn trees_of<'a>(p: &'a Packing, chunks: &[Vec<u32>], k: usize) -> Vec<Tree<'a>> {
    p.parents
        .iter()
        .zip(&p.tree_roots)
        .enumerate()
        .map(|(t, (parent, &root))| Tree {
            root,
            parent,
            arc: &p.arcs[t],
            chunks: chunks[root].iter().skip(t % k).step_by(k).copied().collect(),
        })
        .collect()
}

/// One tree of a packing as the schedule moves it: its root, each NPU's parent (local
/// indices) and arc in (`Packing::routes`), and the chunks it carries, in order.
struct Tree<'a> {
    root: usize,
    parent: &'a [u32],
    arc: &'a [u32],
    chunks: Vec<u32>,
}
