//! The routed planner's paths fixed before any slot is packed: spread over the shortest-path
//! DAG by load and rerouted until a pass gains nothing (`route`), or along the multicommodity
//! flow program's optimum (`flow_routes`).

use super::{Item, LARGE_HOPS, MAX_HOPS, tie, too_many_hops};
use crate::synth::SynthError;
use crate::topology::Topology;
use ordered_float::OrderedFloat;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Reroute passes at most after the first placement (each takes every chunk off its path and
/// walks it again against the others' loads; they stop early once a pass gains nothing).
/// Six even out torus:8x8 to 0.8% above the mean and reach mesh:8x8's bisection load exactly.
const REROUTE_PASSES: usize = 6;

/// Routes along the flow program's optimum (`mcf`), where it is worth solving: a fabric
/// of at most `mcf::MAX_VARIABLES` holders × links that is not a grid of equal links (there the
/// shortest paths spread evenly already). Each holder's flow is cut into paths (largest flow
/// first), and each pair's chunks take them in proportion (the path with the most flow left
/// next). `None` where not solved, or the flow did not decompose (solver tolerances).
pub(super) fn flow_routes(
    topo: &Topology,
    items: &[Item],
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Routes>, SynthError> {
    use crate::mcf;
    let links = topo.links();
    let uniform_grid =
        topo.infer_grid().is_some() && links.windows(2).all(|w| w[0].bandwidth_gb_per_s == w[1].bandwidth_gb_per_s);
    if uniform_grid || links.is_empty() {
        return Ok(None);
    }
    let mut pairs: std::collections::BTreeMap<(u32, u32), Vec<usize>> = Default::default();
    for (i, it) in items.iter().enumerate() {
        pairs.entry((it.src, it.dst)).or_default().push(i);
    }
    let mut demands: Vec<mcf::Demands> = Vec::new();
    for (&(s, v), list) in &pairs {
        if demands.last().is_none_or(|d| d.holder != s) {
            demands.push(mcf::Demands { holder: s, needers: Vec::new() });
        }
        demands.last_mut().expect("pushed").needers.push((v, list.len() as f64));
    }
    if demands.len().saturating_mul(links.len()) > mcf::MAX_VARIABLES {
        return Ok(None);
    }
    if cancelled() {
        return Err(SynthError::Cancelled);
    }
    let Ok(sol) = mcf::solve(topo, &demands) else { return Ok(None) };
    const EPS: f64 = 1e-6;
    let mut paths: Vec<Vec<u32>> = vec![Vec::new(); items.len()];
    for (d, flow) in demands.iter().zip(sol.flows) {
        let mut flow = flow;
        for &(v, want) in &d.needers {
            // Paths from the holder to v along links with flow left, each taking its bottleneck.
            let mut found: Vec<(Vec<u32>, f64)> = Vec::new();
            let mut left = want;
            while left > EPS {
                let Some(path) = flow_path(topo, &flow, d.holder as usize, v as usize) else { break };
                let amount = path.iter().map(|&l| flow[l as usize]).fold(left, f64::min);
                for &l in &path {
                    flow[l as usize] -= amount;
                }
                left -= amount;
                found.push((path, amount));
            }
            if left > 1e-3 * want.max(1.0) || found.is_empty() {
                return Ok(None);
            }
            for &i in &pairs[&(d.holder, v)] {
                let k = (0..found.len()).max_by(|&a, &b| found[a].1.total_cmp(&found[b].1)).expect("non-empty");
                found[k].1 -= 1.0;
                paths[i] = found[k].0.clone();
            }
        }
    }
    let mut start = Vec::with_capacity(items.len() + 1);
    start.push(0);
    let mut flat = Vec::new();
    for p in paths {
        flat.extend_from_slice(&p);
        start.push(flat.len());
    }
    Ok(Some(Routes { start, links: flat }))
}

/// A path from `s` to `t` along links with flow left, the most flow first at each node
/// (depth first, each node once).
fn flow_path(topo: &Topology, flow: &[f64], s: usize, t: usize) -> Option<Vec<u32>> {
    let links = topo.links();
    let mut seen = vec![false; topo.nodes()];
    let mut path: Vec<u32> = Vec::new();
    let mut stack: Vec<(usize, Vec<usize>)> = Vec::new();
    let outs = |u: usize| -> Vec<usize> {
        let mut o: Vec<usize> = topo.out_links(u).filter(|&l| flow[l] > 1e-9).collect();
        o.sort_by(|&a, &b| flow[a].total_cmp(&flow[b]));
        o // popped from the back: the most flow first
    };
    seen[s] = true;
    stack.push((s, outs(s)));
    while let Some((u, cand)) = stack.last_mut() {
        if *u == t {
            return Some(path);
        }
        match cand.pop() {
            Some(l) => {
                let v = links[l].dst;
                if !seen[v] {
                    seen[v] = true;
                    path.push(l as u32);
                    stack.push((v, outs(v)));
                }
            }
            None => {
                stack.pop();
                path.pop();
            }
        }
    }
    None
}

/// Each item's path as link indices (CSR: `start[i]..start[i + 1]` into `links`).
pub(super) struct Routes {
    start: Vec<usize>,
    pub(super) links: Vec<u32>,
}

impl Routes {
    pub(super) fn of(&self, i: usize) -> &[u32] {
        &self.links[self.start[i]..self.start[i + 1]]
    }
}

/// Per-item paths on shortest-time paths (a link costs its latency plus one chunk's wire
/// time) to each needer: for each item in turn the path of the shortest-path DAG whose most
/// loaded link is least loaded (`best_route`; load: bytes over bandwidth); then every item is
/// rerouted against the others' loads, up to `REROUTE_PASSES` times.
pub(super) fn route(
    topo: &Topology,
    items: &[Item],
    chunk_bytes: f64,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<Routes, SynthError> {
    let links = topo.links();
    let cost: Vec<f64> = links.iter().map(|l| l.latency_ns + chunk_bytes / l.bandwidth_gb_per_s).collect();
    let wire: Vec<f64> = links.iter().map(|l| chunk_bytes / l.bandwidth_gb_per_s).collect();
    // Items by needer, so each needer's distances are computed once.
    let mut by_dst: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, it) in items.iter().enumerate() {
        by_dst.entry(it.dst).or_default().push(i);
    }
    let mut dsts: Vec<u32> = by_dst.keys().copied().collect();
    dsts.sort_unstable();
    let dag_of = needer_dags(topo, &dsts, &cost, cancelled)?;
    let order = round_robin(&by_dst, &dsts, items.len());
    let mut placer = Placer::new(topo, items, &wire, &dag_of, seed);
    let mut hops = 0usize;
    let mut last = (f64::INFINITY, f64::INFINITY);
    for pass in 0..=REROUTE_PASSES {
        for (n, &i) in order.iter().enumerate() {
            if n.is_multiple_of(4096) && cancelled() {
                return Err(SynthError::Cancelled);
            }
            let len = placer.place(i)?;
            if pass == 0 {
                hops += len;
                if hops > MAX_HOPS {
                    return Err(too_many_hops(hops));
                }
            }
        }
        // Large instances take one reroute pass (each pass costs about a second per 1.5 M hops;
        // torus:8x8x8's largest load is 2.5% above the mean after it, 0.2% after six, and its
        // schedule no faster).
        if hops > LARGE_HOPS && pass >= 2 {
            break;
        }
        // Stop once a pass no longer lowers the largest load or Σ load².
        let now = peak_and_squares(&placer.load);
        if now.0 >= last.0 * (1.0 - 1e-12) && now.1 >= last.1 * (1.0 - 1e-12) {
            break;
        }
        last = now;
    }
    Ok(flatten(placer.paths, hops))
}

/// Each needer's shortest-path DAG, built once for all the items it needs.
fn needer_dags(
    topo: &Topology,
    dsts: &[u32],
    cost: &[f64],
    cancelled: &dyn Fn() -> bool,
) -> Result<HashMap<u32, Dag>, SynthError> {
    let mut dag_of: HashMap<u32, Dag> = HashMap::with_capacity(dsts.len());
    for &t in dsts {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        dag_of.insert(t, Dag::of(topo, &to_target(topo, t as usize, cost), cost));
    }
    Ok(dag_of)
}

/// The order items are placed in: the k-th item of every needer (sorted) before any k+1-th.
fn round_robin(by_dst: &HashMap<u32, Vec<usize>>, dsts: &[u32], items: usize) -> Vec<usize> {
    // Placement order: interleaved over needers (round robin), so the loads build up evenly.
    let mut order: Vec<usize> = Vec::with_capacity(items);
    let lists: Vec<&Vec<usize>> = dsts.iter().map(|t| &by_dst[t]).collect();
    let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
    for k in 0..longest {
        for l in &lists {
            if let Some(&i) = l.get(k) {
                order.push(i);
            }
        }
    }
    order
}

/// The largest link load and Σ load², which a reroute pass must lower to earn another.
fn peak_and_squares(load: &[f64]) -> (f64, f64) {
    (load.iter().copied().fold(0.0, f64::max), load.iter().map(|x| x * x).sum::<f64>())
}

/// The paths in CSR form (`hops`: their total length, known from the first pass).
fn flatten(paths: Vec<Vec<u32>>, hops: usize) -> Routes {
    let mut start = Vec::with_capacity(paths.len() + 1);
    start.push(0);
    let mut flat = Vec::with_capacity(hops);
    for p in paths {
        flat.extend_from_slice(&p);
        start.push(flat.len());
    }
    Routes { start, links: flat }
}

/// The placement state across passes: every item's path and the loads they put on the links.
struct Placer<'a> {
    topo: &'a Topology,
    items: &'a [Item],
    wire: &'a [f64],
    dag_of: &'a HashMap<u32, Dag>,
    seed: u64,
    load: Vec<f64>,
    paths: Vec<Vec<u32>>,
    /// Reused by every search (`stamp` tells this search's entries apart), not allocated per item.
    memo: Vec<Memo>,
    stamp: u32,
}

impl<'a> Placer<'a> {
    /// No item placed yet: no load on any link, every path empty.
    fn new(
        topo: &'a Topology,
        items: &'a [Item],
        wire: &'a [f64],
        dag_of: &'a HashMap<u32, Dag>,
        seed: u64,
    ) -> Placer<'a> {
        Placer {
            topo,
            items,
            wire,
            dag_of,
            seed,
            load: vec![0.0f64; wire.len()],
            paths: vec![Vec::new(); items.len()],
            memo: vec![Memo { stamp: 0, max: 0.0, sum: 0.0, link: u32::MAX }; topo.nodes()],
            stamp: 0,
        }
    }

    /// Takes item `i` off its path and walks it again against the others' loads; the new
    /// path's length. Its old path's buffer is reused.
    fn place(&mut self, i: usize) -> Result<usize, SynthError> {
        let topo = self.topo;
        let links = topo.links();
        let it = self.items[i];
        for &l in &self.paths[i] {
            self.load[l as usize] -= self.wire[l as usize];
        }
        let dag_of = self.dag_of;
        let dag = &dag_of[&it.dst];
        let mut path = std::mem::take(&mut self.paths[i]);
        path.clear();
        self.stamp += 1;
        let found = best_route(
            &mut Walk {
                topo,
                wire: self.wire,
                load: &self.load,
                dag,
                seed: self.seed,
                item: i,
                stamp: self.stamp,
                memo: &mut self.memo,
            },
            it.src as usize,
            it.dst as usize,
        );
        if !found.0.is_finite() {
            return Err(crate::error::InputError::new(
                "collective",
                format!("NPU {} cannot reach NPU {}", it.src, it.dst),
            )
            .into());
        }
        let mut u = it.src as usize;
        while u != it.dst as usize {
            let l = self.memo[u].link as usize;
            path.push(l as u32);
            self.load[l] += self.wire[l];
            u = links[l].dst;
        }
        let len = path.len();
        self.paths[i] = path;
        Ok(len)
    }
}

/// One node's best way on to the needer in the current walk: the largest link load on it (with
/// the item added), the rise in Σ load² the item causes along it, and its first link.
#[derive(Clone, Copy)]
struct Memo {
    stamp: u32,
    max: f64,
    sum: f64,
    link: u32,
}

/// What a route search reads: the links' costs and loads, the needer's distances, and the
/// memo of the nodes already solved in this search (`stamp`).
struct Walk<'a> {
    topo: &'a Topology,
    wire: &'a [f64],
    load: &'a [f64],
    dag: &'a Dag,
    seed: u64,
    item: usize,
    stamp: u32,
    memo: &'a mut [Memo],
}

/// The path from `u` to `t` on the shortest-path DAG whose most loaded link (with the item
/// added) is least loaded, ties by the smaller rise in Σ load², then a seeded hash: a DFS over the
/// DAG below `u`, memoized per node. Returns (max, sum); infinite when `t` is unreachable.
fn best_route(w: &mut Walk, u: usize, t: usize) -> (f64, f64) {
    if u == t {
        return (0.0, 0.0);
    }
    if w.memo[u].stamp == w.stamp {
        return (w.memo[u].max, w.memo[u].sum);
    }
    let links = w.topo.links();
    let mut best = (f64::INFINITY, f64::INFINITY, u32::MAX);
    let dag = w.dag;
    for &l in &dag.links[dag.start[u] as usize..dag.start[u + 1] as usize] {
        let l = l as usize;
        let (m, s) = best_route(w, links[l].dst, t);
        let here = w.load[l] + w.wire[l];
        // The rise in Σ load² the item causes: spreads the load where maxima tie.
        let rise = s + here * here - w.load[l] * w.load[l];
        let cand = (m.max(here), rise);
        let better = match cand.partial_cmp(&(best.0, best.1)) {
            Some(std::cmp::Ordering::Less) => true,
            Some(std::cmp::Ordering::Equal) => tie(w.seed, w.item, l) < tie(w.seed, w.item, best.2 as usize),
            _ => best.2 == u32::MAX && cand.0.is_finite(),
        };
        if better {
            best = (cand.0, cand.1, l as u32);
        }
    }
    w.memo[u] = Memo { stamp: w.stamp, max: best.0, sum: best.1, link: best.2 };
    (best.0, best.1)
}

/// The links on shortest paths to one needer, per node (CSR over the nodes).
struct Dag {
    start: Vec<u32>,
    links: Vec<u32>,
}

impl Dag {
    /// From the costs to the needer: a link is on a shortest path when it closes the gap
    /// exactly (relative slack for float sums).
    fn of(topo: &Topology, dist: &[f64], cost: &[f64]) -> Dag {
        let links = topo.links();
        let mut start = Vec::with_capacity(topo.nodes() + 1);
        let mut on = Vec::new();
        start.push(0u32);
        for u in 0..topo.nodes() {
            if dist[u].is_finite() {
                for l in topo.out_links(u) {
                    let v = links[l].dst;
                    if (cost[l] + dist[v] - dist[u]).abs() <= 1e-9 * dist[u].max(1.0) {
                        on.push(l as u32);
                    }
                }
            }
            start.push(on.len() as u32);
        }
        Dag { start, links: on }
    }
}

/// Shortest cost from every node to `t` (over the links' costs, on the reversed graph).
fn to_target(topo: &Topology, t: usize, cost: &[f64]) -> Vec<f64> {
    let links = topo.links();
    let mut dist = vec![f64::INFINITY; topo.nodes()];
    let mut heap = BinaryHeap::new();
    dist[t] = 0.0;
    heap.push(Reverse((OrderedFloat(0.0), t)));
    while let Some(Reverse((OrderedFloat(d), v))) = heap.pop() {
        if d > dist[v] {
            continue;
        }
        for &l in topo.in_links(v) {
            let u = links[l].src;
            let nd = d + cost[l];
            if nd < dist[u] {
                dist[u] = nd;
                heap.push(Reverse((OrderedFloat(nd), u)));
            }
        }
    }
    dist
}
