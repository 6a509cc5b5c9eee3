//! The routed planner for collectives whose chunks each go from one holder to one needer
//! (all-to-all, scatter, gather): every chunk takes a path of its own, the paths spread over
//! the shortest-path DAG so every link carries its share (load-aware, then rerouted), and
//! the hops are list-scheduled store-and-forward on each link, the chunk with the most hops
//! left first, up to `group` chunks per message (fewer messages where α dominates).
//!
//! The emitted steps keep the plan's order on every link and along every chunk's path, so the
//! simulator replays each transfer no later than planned: the schedule's time is at most the
//! planned makespan.

mod schedule;
mod slot_route;

use super::{PlanStats, SynthError};
use crate::collective::{Collective, CollectiveKind};
use crate::schedule::{Route, Schedule, Transfer, Transfers};
use crate::topology::Topology;
use ordered_float::OrderedFloat;
use schedule::{Plan, list_schedule, round_schedule, slot_schedule};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Reroute passes at most after the first placement (each takes every chunk off its path and
/// walks it again against the others' loads; they stop early once a pass gains nothing).
/// Six even out torus:8x8 to 0.8% above the mean and reach mesh:8x8's bisection load exactly.
const REROUTE_PASSES: usize = 6;
/// Hops (chunks × path links) above which the planner reroutes twice at most and packs slots
/// only (the list schedule trails there: torus:8x8x8, 1.57 M hops, 886 µs against the slots'
/// 759).
const LARGE_HOPS: usize = 1 << 19;

/// Segments × the busiest link's hops up to which the round scheduler runs (rail:8x16, 2.8 K
/// segments under 135 hops, gains 6% at 64 MiB; switch:256, 65 K under 255, gains nothing).
const ROUNDS_WORK: usize = 1 << 22;

/// Transfers (chunks × hops) above which the planner refuses (memory: a 1000-NPU all-to-all
/// at one chunk per pair is 7.5 M).
pub const MAX_HOPS: usize = 1 << 26;

/// Whether the routed planner serves `c`: uncombined, every chunk with one holder and at most
/// one needer.
pub fn applies(c: &Collective) -> bool {
    !c.combining && matches!(c.spec.kind, CollectiveKind::AllToAll | CollectiveKind::Scatter | CollectiveKind::Gather)
}

/// Chunks per message to try for chunks of `chunk_bytes` on `topo`: the three largest powers
/// of two up to about 50 chunks per link latency (more chunks per message pay fewer α, fewer
/// pipeline better; the best is mostly the largest or the next), and all that are ready
/// (`None`) where a chunk is mostly latency.
pub fn groups(topo: &Topology, chunk_bytes: f64) -> Vec<Option<u32>> {
    let q = chunks_per_alpha(topo, chunk_bytes);
    let mut out: Vec<Option<u32>> =
        [1u32, 2, 4, 8, 16, 32, 64].into_iter().filter(|&g| g == 1 || (g as f64) <= 50.0 * q).map(Some).collect();
    out.drain(..out.len().saturating_sub(3));
    if q >= 1.0 {
        out.push(None);
    }
    out
}

/// How many chunks' wire time one link latency is worth (largest latency, fastest link).
fn chunks_per_alpha(topo: &Topology, chunk_bytes: f64) -> f64 {
    let links = topo.links();
    let bw = links.iter().map(|l| l.bandwidth_gb_per_s).fold(0.0, f64::max);
    let alpha = links.iter().map(|l| l.latency_ns).fold(0.0, f64::max);
    if bw > 0.0 && chunk_bytes > 0.0 { alpha * bw / chunk_bytes } else { 0.0 }
}

/// How a plan's hops are placed in time (`schedule`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scheduler {
    List,
    Slots,
    Rounds,
}

/// The best plan of `hops` over the message sizes and the schedulers.
#[allow(clippy::too_many_arguments)]
fn best_plan(
    topo: &Topology,
    hops: &Hops,
    items: usize,
    chunk_bytes: f64,
    groups: &[Option<u32>],
    seed: u64,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Plan, Option<u32>), SynthError> {
    use rayon::prelude::*;
    // Large instances: slots only, at the message sizes of 8 to 32 chunks per α among those
    // given (one round on two cores; the best on torus:8x8x8: 8 chunks at 64 MiB, where a chunk
    // is 0.38 α, and 16 at 16 MiB, 1.5 α).
    let large = hops.seg.len() > LARGE_HOPS;
    let q = chunks_per_alpha(topo, chunk_bytes);
    let near: Vec<Option<u32>> =
        groups.iter().copied().filter(|g| g.is_some_and(|g| (8.0 * q..=32.0 * q).contains(&(g as f64)))).collect();
    let groups = if large && !near.is_empty() { &near[..] } else { groups };
    let switched = hops.segs.links.iter().any(|ls| ls.len() > 1);
    // Each round weighs every segment with chunks waiting: about segments × the busiest link's
    // hops in all. Past a budget rounds cost more than they are worth (switch:256 at 64 MiB:
    // 65 K segments, 255 rounds, 1.8 s for the same time as slot packing).
    let rounds_cheap = switched && {
        let mut per_link = vec![0usize; topo.links().len()];
        for &sg in &hops.seg {
            for &l in &hops.segs.links[sg as usize] {
                per_link[l as usize] += 1;
            }
        }
        let busiest = per_link.into_iter().max().unwrap_or(0);
        hops.segs.links.len().saturating_mul(busiest) <= ROUNDS_WORK
    };
    let tries: Vec<(Option<u32>, Scheduler)> = groups
        .iter()
        .flat_map(|&g| [(g, Scheduler::List), (g, Scheduler::Slots), (g, Scheduler::Rounds)])
        .filter(|&(_, by)| match by {
            Scheduler::List => !large,
            Scheduler::Slots => true,
            // Rounds match the ports of switches; between NPUs every link is a segment of its
            // own and rounds only repeat the other two (torus:8x8x8: 1.3 s more for nothing).
            Scheduler::Rounds => rounds_cheap,
        })
        .collect();
    let plans: Vec<Result<(Plan, Option<u32>), SynthError>> = tries
        .par_iter()
        .map(|&(g, by)| {
            let plan = match by {
                Scheduler::List => list_schedule(topo, hops, items, chunk_bytes, g, seed, cancelled),
                Scheduler::Slots => slot_schedule(topo, hops, items, chunk_bytes, g, seed, cancelled),
                Scheduler::Rounds => round_schedule(topo, hops, items, chunk_bytes, g, seed, cancelled),
            };
            plan.map(|p| (p, g))
        })
        .collect();
    let mut best: Option<(Plan, Option<u32>)> = None;
    for plan in plans {
        let (plan, g) = plan?;
        if best.as_ref().is_none_or(|(b, _)| plan.makespan_ns < b.makespan_ns) {
            best = Some((plan, g));
        }
    }
    best.ok_or_else(|| {
        crate::error::InputError::new("options", "the routed planner needs a message size to try").into()
    })
}

/// Routes along the flow program's optimum (`synth::mcf`), where it is worth solving: a fabric
/// of at most `mcf::MAX_VARIABLES` holders × links that is not a grid of equal links (there the
/// shortest paths spread evenly already). Each holder's flow is cut into paths (largest flow
/// first), and each pair's chunks take them in proportion (the path with the most flow left
/// next). `None` where not solved, or the flow did not decompose (solver tolerances).
fn flow_routes(topo: &Topology, items: &[Item], cancelled: &dyn Fn() -> bool) -> Result<Option<Routes>, SynthError> {
    use super::mcf;
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

/// One chunk to deliver: the chunk, its holder and its needer.
#[derive(Clone, Copy)]
struct Item {
    chunk: u32,
    src: u32,
    dst: u32,
}

/// Synthesizes `c` (see `applies`): the routes once, then the list schedule at each number of
/// chunks per message in `groups` (`None`: all that are ready; see `groups`), the shortest
/// planned makespan kept (the first at a tie); ties among chunks broken by `seed`.
pub fn synthesize(
    topo: &Topology,
    c: &Collective,
    groups: &[Option<u32>],
    seed: u64,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    let items = items(c);
    // Fabrics of equal links between NPUs (tori, meshes, hypercubes) are also routed and packed
    // at once (`slot_route`); large ones only so (torus:8x8x8 at 64 MiB: 712.0 µs against the
    // fixed routes' 765.1, in about half their time).
    let dist = slot_route::applies(topo).then(|| slot_route::Dist::of(topo, &items));
    let joint_hops = dist.as_ref().and_then(|d| d.total(&items));
    let large = joint_hops.is_some_and(|h| h > LARGE_HOPS);
    if let Some(hops) = joint_hops.filter(|&h| h > MAX_HOPS) {
        return Err(crate::error::InputError::new(
            "collective",
            format!("the routed planner's {hops} hops exceed its limit of {MAX_HOPS}"),
        )
        .into());
    }
    let mut best: Option<(Plan, Option<u32>, Hops)> = None;
    if !large {
        // The routes: spread over shortest paths, and on small fabrics that are not a uniform
        // grid also along the flow program's optimum (near-shortest paths where the shortest
        // crowd the fast links); each scheduled, the shortest plan kept.
        let mut route_sets = vec![route(topo, &items, c.chunk_size_bytes, seed, cancelled)?];
        if let Some(r) = flow_routes(topo, &items, cancelled)? {
            route_sets.push(r);
        }
        for routes in &route_sets {
            let hops = Hops::of(topo, &items, routes);
            let (plan, g) = best_plan(topo, &hops, items.len(), c.chunk_size_bytes, groups, seed, cancelled)?;
            if best.as_ref().is_none_or(|(b, _, _)| plan.makespan_ns < b.makespan_ns) {
                best = Some((plan, g, hops));
            }
        }
    }
    if let (Some(dist), Some(_)) = (&dist, joint_hops) {
        use rayon::prelude::*;
        let tries = slot_route_groups(topo, c.chunk_size_bytes, groups, large);
        let plans: Vec<Result<(Plan, Hops), SynthError>> = tries
            .par_iter()
            .map(|&g| slot_route::slot_route(topo, &items, dist, c.chunk_size_bytes, g, seed, cancelled))
            .collect();
        for (plan, &g) in plans.into_iter().zip(&tries) {
            let (plan, hops) = plan?;
            if best.as_ref().is_none_or(|(b, _, _)| plan.makespan_ns < b.makespan_ns) {
                best = Some((plan, g, hops));
            }
        }
    }
    let Some((plan, group, hops)) = best else {
        return Err(crate::error::InputError::new("options", "the routed planner needs a message size to try").into());
    };
    let (transfers, steps) = emit(topo, &items, &hops, &plan);
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = Some(seed);
    s.transfers = transfers;
    let stats = PlanStats {
        ten_timesteps: steps,
        phase_timesteps: vec![steps],
        discretization_ns: 0.0,
        chunks_per_message: group.filter(|&g| g > 1),
        ..PlanStats::default()
    };
    Ok((s, stats))
}

/// The message sizes the joint router tries: those `best_plan` tries on large instances (8 to
/// 32 chunks per α) where any, else all.
fn slot_route_groups(topo: &Topology, chunk_bytes: f64, groups: &[Option<u32>], large: bool) -> Vec<Option<u32>> {
    if !large {
        return groups.to_vec();
    }
    let q = chunks_per_alpha(topo, chunk_bytes);
    let near: Vec<Option<u32>> =
        groups.iter().copied().filter(|g| g.is_some_and(|g| (8.0 * q..=32.0 * q).contains(&(g as f64)))).collect();
    // Large: the largest of them alone (torus:8x8x8: 8 chunks a message at 64 MiB, 712.0 µs
    // against 741.3 at 4; 32 at 16 MiB, 185.9 against 188.7 at 16).
    match near.last() {
        Some(&g) => vec![g],
        None => groups.to_vec(),
    }
}

fn items(c: &Collective) -> Vec<Item> {
    let holders = c.holders();
    c.needed_with(&holders)
        .into_iter()
        .filter_map(|[v, ch]| {
            let h = holders.of(ch as usize);
            // One holder for the kinds served; the first otherwise.
            h.first().map(|&u| Item { chunk: ch, src: u, dst: v })
        })
        .collect()
}

/// Each item's path as link indices (CSR: `start[i]..start[i + 1]` into `links`).
struct Routes {
    start: Vec<usize>,
    links: Vec<u32>,
}

impl Routes {
    fn of(&self, i: usize) -> &[u32] {
        &self.links[self.start[i]..self.start[i + 1]]
    }
}

/// Per-item paths on shortest-time paths (a link costs its latency plus one chunk's wire
/// time) to each needer: for each item in turn the path of the shortest-path DAG whose most
/// loaded link is least loaded (`best_route`; load: bytes over bandwidth); then every item is
/// rerouted against the others' loads, up to `REROUTE_PASSES` times.
fn route(
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
    let mut dag_of: HashMap<u32, Dag> = HashMap::with_capacity(dsts.len());
    for &t in &dsts {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        dag_of.insert(t, Dag::of(topo, &to_target(topo, t as usize, &cost), &cost));
    }
    let mut load = vec![0.0f64; links.len()];
    let mut paths: Vec<Vec<u32>> = vec![Vec::new(); items.len()];
    // Placement order: interleaved over needers (round robin), so the loads build up evenly.
    let mut order: Vec<usize> = Vec::with_capacity(items.len());
    let lists: Vec<&Vec<usize>> = dsts.iter().map(|t| &by_dst[t]).collect();
    let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
    for k in 0..longest {
        for l in &lists {
            if let Some(&i) = l.get(k) {
                order.push(i);
            }
        }
    }
    let mut hops = 0usize;
    let mut memo = vec![Memo { stamp: 0, max: 0.0, sum: 0.0, link: u32::MAX }; topo.nodes()];
    let mut stamp = 0u32;
    let mut last = (f64::INFINITY, f64::INFINITY);
    for pass in 0..=REROUTE_PASSES {
        for (n, &i) in order.iter().enumerate() {
            if n.is_multiple_of(4096) && cancelled() {
                return Err(SynthError::Cancelled);
            }
            let it = items[i];
            for &l in &paths[i] {
                load[l as usize] -= wire[l as usize];
            }
            let dag = &dag_of[&it.dst];
            let mut path = std::mem::take(&mut paths[i]);
            path.clear();
            stamp += 1;
            let found = best_route(
                &mut Walk { topo, wire: &wire, load: &load, dag, seed, item: i, stamp, memo: &mut memo },
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
                let l = memo[u].link as usize;
                path.push(l as u32);
                load[l] += wire[l];
                u = links[l].dst;
            }
            if pass == 0 {
                hops += path.len();
                if hops > MAX_HOPS {
                    return Err(crate::error::InputError::new(
                        "collective",
                        format!("the routed planner's {hops}+ hops exceed its limit of {MAX_HOPS}"),
                    )
                    .into());
                }
            }
            paths[i] = path;
        }
        // Large instances take one reroute pass (each pass costs about a second per 1.5 M hops;
        // torus:8x8x8's largest load is 2.5% above the mean after it, 0.2% after six, and its
        // schedule no faster).
        if hops > LARGE_HOPS && pass >= 2 {
            break;
        }
        // Stop once a pass no longer lowers the largest load or Σ load².
        let now = (load.iter().copied().fold(0.0, f64::max), load.iter().map(|x| x * x).sum::<f64>());
        if now.0 >= last.0 * (1.0 - 1e-12) && now.1 >= last.1 * (1.0 - 1e-12) {
            break;
        }
        last = now;
    }
    let mut start = Vec::with_capacity(items.len() + 1);
    start.push(0);
    let mut flat = Vec::with_capacity(hops);
    for p in paths {
        flat.extend_from_slice(&p);
        start.push(flat.len());
    }
    Ok(Routes { start, links: flat })
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

/// A seeded hash of (item, link): the tie-break among equally loaded links.
fn tie(seed: u64, item: usize, link: usize) -> u64 {
    let mut x =
        seed ^ (item as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (link as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x
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

/// A hop of an item: the links from one NPU to the next along its path (through switches).
/// Segments are interned: items on the same NPU-to-NPU path share one queue.
struct Segments {
    ids: HashMap<Vec<u32>, u32>,
    links: Vec<Vec<u32>>,
}

impl Segments {
    /// How long a message of `chunks` takes on segment `s`: its links' latencies and the
    /// chunks over its slowest link (the simulator's time for a routed transfer).
    fn time(&self, topo: &Topology, s: usize, chunks: usize, chunk_bytes: f64) -> f64 {
        let links = topo.links();
        let ls = &self.links[s];
        let lat: f64 = ls.iter().map(|&l| links[l as usize].latency_ns).sum();
        let bw = ls.iter().map(|&l| links[l as usize].bandwidth_gb_per_s).fold(f64::INFINITY, f64::min);
        lat + chunks as f64 * chunk_bytes / bw
    }
}

/// Each item's hops as segment ids (CSR like the routes), and the segments.
struct Hops {
    segs: Segments,
    start: Vec<usize>,
    seg: Vec<u32>,
}

impl Hops {
    fn of(topo: &Topology, items: &[Item], routes: &Routes) -> Hops {
        let links = topo.links();
        let npus = topo.npus();
        let mut segs = Segments { ids: HashMap::new(), links: Vec::new() };
        let mut hop_start = Vec::with_capacity(items.len() + 1);
        let mut hop_seg: Vec<u32> = Vec::with_capacity(routes.links.len());
        hop_start.push(0usize);
        let mut cur: Vec<u32> = Vec::new();
        for i in 0..items.len() {
            for &l in routes.of(i) {
                cur.push(l);
                if links[l as usize].dst < npus {
                    let next = segs.links.len() as u32;
                    let id = *segs.ids.entry(cur.clone()).or_insert(next);
                    if id == next {
                        segs.links.push(cur.clone());
                    }
                    hop_seg.push(id);
                    cur.clear();
                }
            }
            hop_start.push(hop_seg.len());
        }
        Hops { segs, start: hop_start, seg: hop_seg }
    }
}

/// The plan as transfers in step order, and the number of steps.
fn emit(topo: &Topology, items: &[Item], hops: &Hops, plan: &Plan) -> (Transfers, u32) {
    let links = topo.links();
    let segs = &hops.segs;
    let msgs = &plan.msgs;
    // Steps: after the previous message on each of the segment's links and one after each
    // item's previous hop; messages are already in start order.
    let mut link_step = vec![0u32; links.len()];
    let mut item_step = vec![0u32; items.len()]; // step after the item's last hop
    let mut step_of = Vec::with_capacity(msgs.len());
    let mut steps = 0u32;
    for m in msgs {
        let mut st = 0u32;
        for &l in &segs.links[m.seg as usize] {
            st = st.max(link_step[l as usize]);
        }
        for &i in &m.items {
            st = st.max(item_step[i as usize]);
        }
        for &l in &segs.links[m.seg as usize] {
            link_step[l as usize] = st;
        }
        for &i in &m.items {
            item_step[i as usize] = st + 1;
        }
        steps = steps.max(st + 1);
        step_of.push(st);
    }
    let mut order: Vec<usize> = (0..msgs.len()).collect();
    order.sort_by(|&a, &b| {
        (step_of[a], OrderedFloat(msgs[a].start), a).cmp(&(step_of[b], OrderedFloat(msgs[b].start), b))
    });
    let mut routes_of: HashMap<u32, Option<Route>> = HashMap::new();
    let mut out = Transfers::new();
    for k in order {
        let m = &msgs[k];
        let ls = &segs.links[m.seg as usize];
        let src = links[ls[0] as usize].src;
        let dst = links[*ls.last().expect("a segment has links") as usize].dst;
        let path = routes_of
            .entry(m.seg)
            .or_insert_with(|| {
                (ls.len() > 1).then(|| {
                    let mut nodes = vec![src as u32];
                    nodes.extend(ls.iter().map(|&l| links[l as usize].dst as u32));
                    Route::from(nodes)
                })
            })
            .clone();
        let mut chunks: Vec<u32> = m.items.iter().map(|&i| items[i as usize].chunk).collect();
        chunks.sort_unstable();
        let mut t = Transfer::copy(step_of[k], src, dst, chunks);
        t.path = path;
        out.push(t);
    }
    (out, steps)
}
