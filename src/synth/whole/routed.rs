//! The routed planner for collectives whose chunks each go from one holder to one needer
//! (all-to-all, scatter, gather): every chunk takes a path of its own and its hops are sent
//! store-and-forward, up to `group` chunks a message (fewer messages where α dominates). The
//! paths are either fixed first (`paths`: spread over the shortest-path DAG by load, or along
//! the flow program's optimum) and then placed in time by one of three schedulers
//! (`schedule`), or, on fabrics of equal links between NPUs, chosen chunk by chunk as the
//! slots fill (`slot_route`); the shortest plan is kept.
//!
//! The emitted steps keep the plan's order on every link and along every chunk's path, so the
//! simulator replays each transfer no later than planned: the schedule's time is at most the
//! planned makespan.

mod paths;
mod schedule;
mod slot_route;

use crate::collective::{Collective, CollectiveKind};
use crate::schedule::{Route, Schedule, Transfer, Transfers};
use crate::synth::{PlanStats, SynthError};
use crate::topology::Topology;
use ordered_float::OrderedFloat;
use paths::{Routes, flow_routes, route};
use schedule::{Job, Plan, list_schedule, round_schedule, slot_schedule};
use std::collections::HashMap;

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

/// The message sizes among `groups` of 8 to 32 chunks per α: the ones worth trying on large
/// instances.
fn near_groups(topo: &Topology, chunk_bytes: f64, groups: &[Option<u32>]) -> Vec<Option<u32>> {
    let q = chunks_per_alpha(topo, chunk_bytes);
    groups.iter().copied().filter(|g| g.is_some_and(|g| (8.0 * q..=32.0 * q).contains(&(g as f64)))).collect()
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
    let near = near_groups(topo, chunk_bytes, groups);
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
        .map(|&(group, by)| {
            let job = Job { topo, hops, items, chunk_bytes, group, seed, cancelled };
            let plan = match by {
                Scheduler::List => list_schedule(&job),
                Scheduler::Slots => slot_schedule(&job),
                Scheduler::Rounds => round_schedule(&job),
            };
            plan.map(|p| (p, group))
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
    let dist = if slot_route::applies(topo) { Some(slot_route::Dist::of(topo, &items, cancelled)?) } else { None };
    let joint_hops = dist.as_ref().and_then(|d| d.total(&items));
    let large = joint_hops.is_some_and(|h| h > LARGE_HOPS);
    if let Some(hops) = joint_hops.filter(|&h| h > MAX_HOPS) {
        return Err(too_many_hops(hops));
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
    let near = near_groups(topo, chunk_bytes, groups);
    // Large: the largest of them alone (torus:8x8x8: 8 chunks a message at 64 MiB, 712.0 µs
    // against 741.3 at 4; 32 at 16 MiB, 185.9 against 188.7 at 16).
    match near.last() {
        Some(&g) => vec![g],
        None => groups.to_vec(),
    }
}

/// The refusal of a collective whose paths take more than `MAX_HOPS` hops (`hops` or more).
fn too_many_hops(hops: usize) -> SynthError {
    crate::error::InputError::new(
        "collective",
        format!("the routed planner's {hops}+ hops exceed its limit of {MAX_HOPS}"),
    )
    .into()
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

/// A seeded hash of (item, link): the tie-break among equally loaded links.
fn tie(seed: u64, item: usize, link: usize) -> u64 {
    let mut x =
        seed ^ (item as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (link as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x
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
