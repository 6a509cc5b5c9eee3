//! An all-reduce of per-chunk spanning trees (`all_reduce`): every chunk (or group of chunks
//! moved as one message) is reduced up a tree of its own into its root and broadcast back
//! down the same tree, the trees chosen so that every link carries about the same number of
//! them, and every move list-scheduled one message per link per timestep with
//! forward–backward improvement.
//!
//! Why: an all-reduce of two phases with a share per NPU is slow after a failure. An NPU left
//! with three links of four relays its share's worth in each phase over fewer links, and the
//! shares cannot make up for six such NPUs (docs/BENCHMARKS.md, "Notes on issue 26"). Trees
//! spread that relaying instead. A tree uses each of its edges once each way (a partial up, the
//! result down), so balanced trees load every link evenly, and an NPU with fewer links is a
//! leaf of more trees without anyone choosing it. The reduction of one chunk and the broadcast
//! of another share the timeline: no phase waits for the other.
//!
//! The trees: for each chunk the root is the NPU whose links carry the fewest trees so far, and
//! every other NPU takes as parent the least loaded neighbour one hop nearer the root (the
//! trees are shortest-path trees, as shallow as the fabric allows). A few rounds then rebuild
//! each tree against the others' loads.
//!
//! The timeline: a tree's moves form a DAG (a partial leaves once the partials into it have
//! arrived; the result goes down once its parent holds it). A list scheduler starts, on every
//! link and timestep, the ready move of highest priority. The first pass takes chunks in order.
//! Then the DAG reversed is scheduled by the forward pass's finish times, and the forward DAG
//! again by the latest starts that gives. This forward–backward improvement (a standard for
//! project scheduling) brought torus:8x8 less NPU 9 from 147 timesteps to 127, against the
//! busiest link's 127 trees.
//!
//! Serves an all-reduce over a group whose links among themselves all have the same latency
//! and bandwidth in both directions (no switches on the way): there one message a link and
//! timestep is the whole cost model.

use super::{PlanStats, SynthError};
use crate::collective::{Collective, CollectiveKind};
use crate::rng::Rng;
use crate::schedule::{ChunkList, Op, Schedule, Transfer};
use crate::topology::Topology;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Moves (2 (n − 1) per tree) up to which the planner runs: its tables take about 40 bytes a
/// move, so this bounds them near 700 MB (torus:64x64 in messages of four chunks: 8.4 M).
pub const MAX_MOVES: usize = 1 << 24;

/// Rounds that rebuild every tree against the others' loads.
const REBUILD_ROUNDS: usize = 2;

/// Passes of `balance` at most.
const BALANCE_PASSES: usize = 8;

/// Moves `unload_busiest` looks at, at most (a few tenths of a second).
const UNLOAD_WORK: usize = 1 << 26;

/// Forward–backward passes after the first forward pass (each a backward and a forward pass),
/// unless one reaches the busiest link's load first.
const IMPROVEMENT_PASSES: usize = 6;

/// Moves beyond which two passes are the most made.
const LARGE_MOVES: usize = 1 << 22;

/// Attempts (trees and timeline, each with its own tie-breaks) a run makes: as many as fit in
/// this many moves, at most `MAX_ATTEMPTS`.
const ATTEMPT_MOVES: usize = 1 << 19;
const MAX_ATTEMPTS: usize = 4;

/// The group's NPUs and links in the planner's terms: `npus[i]` is NPU i of the group, and
/// `adj[off[i]..off[i + 1]]` its (neighbour, undirected edge) pairs. `links[2e]` is edge e's
/// link from its lower-numbered end, `links[2e + 1]` the other way.
struct Fabric {
    npus: Vec<usize>,
    off: Vec<usize>,
    adj: Vec<(u32, u32)>,
    edges: usize,
    ends: Vec<(u32, u32)>,
    /// One message's time on every link.
    step_ns: f64,
}

/// Whether `all_reduce` serves `c` on `topo` at `group` chunks a message: an all-reduce whose
/// every group NPU holds and wants every chunk, over links among the group that all have the
/// same latency and bandwidth both ways and connect it, within `MAX_MOVES`.
pub fn applies(topo: &Topology, c: &Collective, group: usize) -> bool {
    fabric(topo, c, group).is_some()
}

fn fabric(topo: &Topology, c: &Collective, group: usize) -> Option<Fabric> {
    let mut npus = c.group.clone();
    npus.sort_unstable();
    npus.dedup();
    let n = npus.len();
    if c.spec.kind != CollectiveKind::AllReduce || n < 2 || group == 0 || !c.combining {
        return None;
    }
    let full = n.checked_mul(c.num_chunks)?;
    if c.precondition.len() != full || c.postcondition.len() != full {
        return None;
    }
    let units = c.num_chunks.div_ceil(group);
    if units.checked_mul(2 * (n - 1)).is_none_or(|m| m > MAX_MOVES) {
        return None;
    }
    let mut local = vec![u32::MAX; topo.nodes()];
    for (i, &v) in npus.iter().enumerate() {
        local[v] = i as u32;
    }
    let links = topo.links();
    let first = links.iter().find(|l| local[l.src] != u32::MAX && local[l.dst] != u32::MAX)?;
    let same = |l: &crate::topology::Link| {
        l.latency_ns == first.latency_ns && l.bandwidth_gb_per_s == first.bandwidth_gb_per_s
    };
    let mut off = vec![0usize; n + 1];
    let mut adj = Vec::new();
    let mut edge_of: std::collections::HashMap<(usize, usize), u32> = std::collections::HashMap::new();
    for (i, &u) in npus.iter().enumerate() {
        for li in topo.out_links(u) {
            let l = &links[li];
            let j = local[l.dst];
            if j == u32::MAX || l.dst == u {
                continue;
            }
            let back = topo.link(l.dst, u)?;
            if !same(l) || !same(back) {
                return None;
            }
            let key = (u.min(l.dst), u.max(l.dst));
            let next = edge_of.len() as u32;
            let e = *edge_of.entry(key).or_insert(next);
            adj.push((j, e));
        }
        off[i + 1] = adj.len();
    }
    let mut ends = vec![(0, 0); edge_of.len()];
    for (&(a, b), &e) in &edge_of {
        ends[e as usize] = (local[a], local[b]);
    }
    let step_ns = first.time_ns(c.chunk_size_bytes * group as f64);
    let fabric = Fabric { npus, off, adj, edges: edge_of.len(), ends, step_ns };
    // Connected: every NPU reached from the first.
    let mut seen = vec![false; n];
    let mut stack = vec![0u32];
    seen[0] = true;
    while let Some(u) = stack.pop() {
        for &(v, _) in fabric.neighbours(u) {
            if !std::mem::replace(&mut seen[v as usize], true) {
                stack.push(v);
            }
        }
    }
    seen.iter().all(|&s| s).then_some(fabric)
}

impl Fabric {
    fn neighbours(&self, u: u32) -> &[(u32, u32)] {
        &self.adj[self.off[u as usize]..self.off[u as usize + 1]]
    }
    fn n(&self) -> usize {
        self.npus.len()
    }
    /// The ends of undirected edge `e` (local indices).
    fn ends(&self, e: u32) -> (u32, u32) {
        self.ends[e as usize]
    }
    /// The directed link id of edge `e` from `u` to `v`.
    fn link(&self, e: u32, u: u32, v: u32) -> u32 {
        2 * e + u32::from(self.npus[u as usize] > self.npus[v as usize])
    }
}

#[derive(Clone)]
/// The trees: `parent[t * n + v]` is NPU v's parent in tree t (`u32::MAX` at its root).
struct Trees {
    n: usize,
    roots: Vec<u32>,
    parent: Vec<u32>,
    /// Each tree's NPUs, parents before children (breadth first from the root).
    order: Vec<u32>,
    /// `depth[t * n + v]`: NPU v's hops from tree t's root.
    depth: Vec<u32>,
    /// Trees on each undirected edge.
    load: Vec<u32>,
}

impl Trees {
    fn busiest(&self) -> u32 {
        self.load.iter().copied().max().unwrap_or(0)
    }
}

/// Builds one tree per unit: the root the NPU whose edges carry the fewest trees per edge, the
/// others' parents the least loaded neighbour one hop nearer the root, ties at random.
fn build_trees(f: &Fabric, units: usize, seed: u64, cancelled: &dyn Fn() -> bool) -> Result<Trees, SynthError> {
    let n = f.n();
    let mut rng = Rng::new(seed);
    let mut t = Trees {
        n,
        roots: vec![0; units],
        parent: vec![u32::MAX; units * n],
        order: vec![0; units * n],
        depth: vec![0; units * n],
        load: vec![0; f.edges],
    };
    let mut dist = vec![u32::MAX; n];
    let mut rooted = vec![0u32; n];
    // A rebuild may also make the busiest link busier: the best round is kept.
    let mut kept: Option<Trees> = None;
    for round in 0..=REBUILD_ROUNDS {
        for u in 0..units {
            if u % 64 == 0 && cancelled() {
                return Err(SynthError::Cancelled);
            }
            if round > 0 {
                rooted[t.roots[u] as usize] -= 1;
                for v in 0..n {
                    let p = t.parent[u * n + v];
                    if p != u32::MAX {
                        let e = edge_between(f, v as u32, p);
                        t.load[e as usize] -= 1;
                    }
                }
            }
            // The root: fewest trees per edge, then the fewest roots so far (a tree starts and
            // ends at its root: spread, the first and last timesteps have work everywhere),
            // ties at random.
            let mut best = (u64::MAX, u32::MAX, 0u64, 0u32);
            for v in 0..n as u32 {
                let nb = f.neighbours(v);
                let sum: u64 = nb.iter().map(|&(_, e)| t.load[e as usize] as u64).sum();
                // Compared as sum / degree, exactly: sum · 2^20 / degree.
                let key = (sum << 20) / nb.len().max(1) as u64;
                let tie = rng.next_u64();
                if (key, rooted[v as usize], tie) < (best.0, best.1, best.2) {
                    best = (key, rooted[v as usize], tie, v);
                }
            }
            let root = best.3;
            t.roots[u] = root;
            rooted[root as usize] += 1;
            // Breadth first from the root; each NPU's parent the least loaded edge back.
            dist.iter_mut().for_each(|d| *d = u32::MAX);
            dist[root as usize] = 0;
            let order = &mut t.order[u * n..(u + 1) * n];
            order[0] = root;
            let (mut head, mut tail) = (0usize, 1usize);
            while head < tail {
                let x = order[head];
                head += 1;
                for &(y, _) in f.neighbours(x) {
                    if dist[y as usize] == u32::MAX {
                        dist[y as usize] = dist[x as usize] + 1;
                        order[tail] = y;
                        tail += 1;
                    }
                }
            }
            let parent = &mut t.parent[u * n..(u + 1) * n];
            parent[root as usize] = u32::MAX;
            for &y in &order[1..] {
                let mut pick = (u32::MAX, u64::MAX, 0u32, 0u32);
                for &(x, e) in f.neighbours(y) {
                    if dist[x as usize] + 1 == dist[y as usize] {
                        let tie = rng.next_u64();
                        if (t.load[e as usize], tie) < (pick.0, pick.1) {
                            pick = (t.load[e as usize], tie, x, e);
                        }
                    }
                }
                parent[y as usize] = pick.2;
                t.load[pick.3 as usize] += 1;
            }
            for (v, &d) in dist.iter().enumerate() {
                t.depth[u * n + v] = d;
            }
        }
        if kept.as_ref().is_none_or(|k| t.busiest() < k.busiest()) {
            kept = Some(t.clone());
        }
    }
    let mut t = kept.unwrap_or(t);
    let t0 = std::time::Instant::now();
    balance(f, &mut t, cancelled)?;
    let t1 = std::time::Instant::now();
    unload_busiest(f, &mut t, cancelled)?;
    tracing::debug!(target: "ccsynth::timing", balance_ms = (t1 - t0).as_secs_f64() * 1e3, unload_ms = t1.elapsed().as_secs_f64() * 1e3, busiest = t.busiest(), "trees: balanced");
    Ok(t)
}

/// Lowers the busiest load by chains of moves `balance` cannot make one at a time: NPU a moves
/// off the busiest edge onto an edge one tree below it, whose NPU b moves on to another, until
/// an edge two trees below takes the last (a search over edges, breadth first). Stops when an
/// edge at the busiest load has no such chain, or after `UNLOAD_WORK` looks at a move.
fn unload_busiest(f: &Fabric, t: &mut Trees, cancelled: &dyn Fn() -> bool) -> Result<(), SynthError> {
    let (n, units) = (t.n, t.roots.len());
    // The (tree, NPU) pairs whose parent edge each edge is.
    let mut on: Vec<Vec<u32>> = vec![Vec::new(); f.edges];
    for u in 0..units {
        for v in 0..n as u32 {
            let p = t.parent[u * n + v as usize];
            if p != u32::MAX {
                on[edge_between(f, v, p) as usize].push((u * n) as u32 + v);
            }
        }
    }
    let mut work = 0usize;
    // Per edge: the edge and pair it was reached from in this search, and the search's stamp.
    let mut from = vec![(u32::MAX, u32::MAX); f.edges];
    let mut seen = vec![0u32; f.edges];
    let mut stamp = 0u32;
    let mut queue: Vec<u32> = Vec::new();
    loop {
        let top = t.busiest();
        let busiest: Vec<u32> = (0..f.edges as u32).filter(|&e| t.load[e as usize] == top).collect();
        for &start in &busiest {
            if cancelled() {
                return Err(SynthError::Cancelled);
            }
            stamp += 1;
            seen[start as usize] = stamp;
            queue.clear();
            queue.push(start);
            let mut found = None;
            let mut head = 0;
            'search: while head < queue.len() {
                let x = queue[head];
                head += 1;
                for &job in &on[x as usize] {
                    let (u, v) = (job as usize / n, job % n as u32);
                    let d = t.depth[u * n + v as usize];
                    for &(y, e) in f.neighbours(v) {
                        work += 1;
                        if t.depth[u * n + y as usize] + 1 != d || seen[e as usize] == stamp {
                            continue;
                        }
                        seen[e as usize] = stamp;
                        from[e as usize] = (x, job);
                        if t.load[e as usize] + 2 <= top {
                            found = Some(e);
                            break 'search;
                        }
                        queue.push(e);
                    }
                }
                if work > UNLOAD_WORK {
                    return Ok(());
                }
            }
            let Some(mut e) = found else { return Ok(()) };
            // Move each pair on the chain one edge on, from its end back to the busiest edge.
            while e != start {
                let (x, job) = from[e as usize];
                let (u, v) = (job as usize / n, job % n as u32);
                let list = &mut on[x as usize];
                let at = list.iter().position(|&j| j == job).expect("the pair is on the edge it was reached from");
                list.swap_remove(at);
                on[e as usize].push(job);
                t.load[x as usize] -= 1;
                t.load[e as usize] += 1;
                let (a, b) = f.ends(e);
                t.parent[u * n + v as usize] = if a == v { b } else { a };
                e = x;
            }
        }
    }
}

/// Local search on the trees' parents: an NPU moves to another parent one hop nearer its
/// tree's root (its subtree comes along; the tree stays a shortest-path tree) when that
/// parent's edge carries at least two trees fewer, until no NPU moves.
fn balance(f: &Fabric, t: &mut Trees, cancelled: &dyn Fn() -> bool) -> Result<(), SynthError> {
    let (n, units) = (t.n, t.roots.len());
    for _ in 0..BALANCE_PASSES {
        let mut moved = false;
        for u in 0..units {
            if u % 64 == 0 && cancelled() {
                return Err(SynthError::Cancelled);
            }
            for v in 0..n as u32 {
                let p = t.parent[u * n + v as usize];
                if p == u32::MAX {
                    continue;
                }
                let cur = edge_between(f, v, p);
                let d = t.depth[u * n + v as usize];
                let mut pick = (t.load[cur as usize], p, cur);
                for &(x, e) in f.neighbours(v) {
                    if t.depth[u * n + x as usize] + 1 == d && t.load[e as usize] + 1 < pick.0 {
                        pick = (t.load[e as usize] + 1, x, e);
                    }
                }
                if pick.1 != p {
                    t.load[cur as usize] -= 1;
                    t.load[pick.2 as usize] += 1;
                    t.parent[u * n + v as usize] = pick.1;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    Ok(())
}

fn edge_between(f: &Fabric, u: u32, v: u32) -> u32 {
    f.neighbours(u).iter().find(|&&(x, _)| x == v).map(|&(_, e)| e).expect("a tree edge is a fabric edge")
}

/// The moves of every tree as a DAG the list scheduler walks without storing it: tree t's
/// moves are `t * 2m + i` with m = n − 1, the partial of the ith non-root NPU up (i < m), then
/// its result down (m + i). Children lists are kept per tree.
struct Moves<'a> {
    f: &'a Fabric,
    t: &'a Trees,
    /// `first_child[t * n + v]`, `next_sibling[t * n + v]`: tree t's children lists.
    first_child: Vec<u32>,
    next_sibling: Vec<u32>,
    children: Vec<u32>,
    m: usize,
}

impl<'a> Moves<'a> {
    fn new(f: &'a Fabric, t: &'a Trees) -> Moves<'a> {
        let n = t.n;
        let units = t.roots.len();
        let mut first_child = vec![u32::MAX; units * n];
        let mut next_sibling = vec![u32::MAX; units * n];
        let mut children = vec![0u32; units * n];
        for u in 0..units {
            for v in 0..n {
                let p = t.parent[u * n + v];
                if p != u32::MAX {
                    next_sibling[u * n + v] = first_child[u * n + p as usize];
                    first_child[u * n + p as usize] = v as u32;
                    children[u * n + p as usize] += 1;
                }
            }
        }
        Moves { f, t, first_child, next_sibling, children, m: n - 1 }
    }
    fn count(&self) -> usize {
        self.t.roots.len() * 2 * self.m
    }
    /// (tree, NPU, up?) of move `i`.
    fn decode(&self, i: usize) -> (usize, u32, bool) {
        let (u, r) = (i / (2 * self.m), i % (2 * self.m));
        let (k, up) = if r < self.m { (r, true) } else { (r - self.m, false) };
        let root = self.t.roots[u] as usize;
        let v = if k < root { k } else { k + 1 };
        (u, v as u32, up)
    }
    fn id(&self, u: usize, v: u32, up: bool) -> usize {
        let root = self.t.roots[u];
        let k = if v < root { v } else { v - 1 } as usize;
        u * 2 * self.m + if up { k } else { self.m + k }
    }
    fn parent(&self, u: usize, v: u32) -> u32 {
        self.t.parent[u * self.t.n + v as usize]
    }
    fn kids(&self, u: usize, v: u32) -> impl Iterator<Item = u32> + '_ {
        let n = self.t.n;
        let first = self.first_child[u * n + v as usize];
        std::iter::successors((first != u32::MAX).then_some(first), move |&c| {
            let next = self.next_sibling[u * n + c as usize];
            (next != u32::MAX).then_some(next)
        })
    }
    /// The directed link move `i` takes.
    fn link(&self, i: usize) -> u32 {
        let (u, v, up) = self.decode(i);
        let p = self.parent(u, v);
        let e = edge_between(self.f, v, p);
        if up { self.f.link(e, v, p) } else { self.f.link(e, p, v) }
    }
    /// Moves that must finish before move `i` starts, counted: in the forward DAG (`rev`
    /// false) or reversed.
    fn preds(&self, i: usize, rev: bool) -> u32 {
        let (u, v, up) = self.decode(i);
        let n = self.t.n;
        let root = self.t.roots[u];
        let p = self.parent(u, v);
        match (up, rev) {
            (true, false) => self.children[u * n + v as usize],
            (false, false) if p == root => self.children[u * n + root as usize],
            (false, false) => 1,
            (true, true) if p == root => self.children[u * n + root as usize],
            (true, true) => 1,
            (false, true) => self.children[u * n + v as usize],
        }
    }
    /// Calls `k` with every move that waits for move `i`.
    fn succs(&self, i: usize, rev: bool, mut k: impl FnMut(usize)) {
        let (u, v, up) = self.decode(i);
        let root = self.t.roots[u];
        let p = self.parent(u, v);
        // Forward: a partial feeds its parent's partial, or at the root every result down;
        // a result feeds its children's. Reversed: the other way round.
        let down_from_root = |k: &mut dyn FnMut(usize)| {
            for w in self.kids(u, root) {
                k(self.id(u, w, false));
            }
        };
        let ups_into_root = |k: &mut dyn FnMut(usize)| {
            for w in self.kids(u, root) {
                k(self.id(u, w, true));
            }
        };
        match (up, rev) {
            (true, false) if p == root => down_from_root(&mut k),
            (true, false) => k(self.id(u, p, true)),
            (false, false) => self.kids(u, v).for_each(|w| k(self.id(u, w, false))),
            (true, true) => self.kids(u, v).for_each(|w| k(self.id(u, w, true))),
            (false, true) if p == root => ups_into_root(&mut k),
            (false, true) => k(self.id(u, p, false)),
        }
    }
}

/// List-schedules every move (one a link and timestep, the ready move of lowest `key` first,
/// ties by id): each move's start, and the timesteps until the last arrives.
fn list_schedule(
    mv: &Moves<'_>,
    links: &[u32],
    rev: bool,
    key: &[u32],
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, u32), SynthError> {
    let total = mv.count();
    let mut due: Vec<u32> = (0..total).map(|i| mv.preds(i, rev)).collect();
    let mut ready: Vec<BinaryHeap<Reverse<u64>>> = vec![BinaryHeap::new(); 2 * mv.f.edges];
    let mut active: Vec<u32> = Vec::new();
    let mut is_active = vec![false; 2 * mv.f.edges];
    let offer = |i: usize, ready: &mut [BinaryHeap<Reverse<u64>>], active: &mut Vec<u32>, is_active: &mut [bool]| {
        let l = links[i] as usize;
        ready[l].push(Reverse(((key[i] as u64) << 32) | i as u64));
        if !std::mem::replace(&mut is_active[l], true) {
            active.push(l as u32);
        }
    };
    for (i, _) in due.iter().enumerate().filter(|(_, d)| **d == 0) {
        offer(i, &mut ready, &mut active, &mut is_active);
    }
    let mut start = vec![0u32; total];
    let (mut done, mut time) = (0usize, 0u32);
    let mut fired: Vec<usize> = Vec::new();
    while done < total {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        if active.is_empty() {
            // A DAG of trees always has a ready move; reaching here is a bug, not an input.
            return Err(SynthError::Greedy(super::greedy::GreedyError::Unsupported("trees: no move is ready")));
        }
        fired.clear();
        let mut still = Vec::with_capacity(active.len());
        for &l in &active {
            let heap = &mut ready[l as usize];
            if let Some(Reverse(packed)) = heap.pop() {
                let i = (packed & 0xFFFF_FFFF) as usize;
                start[i] = time;
                fired.push(i);
            }
            if heap.is_empty() {
                is_active[l as usize] = false;
            } else {
                still.push(l);
            }
        }
        active = still;
        for &i in &fired {
            done += 1;
            mv.succs(i, rev, |j| {
                due[j] -= 1;
                if due[j] == 0 {
                    offer(j, &mut ready, &mut active, &mut is_active);
                }
            });
        }
        time += 1;
    }
    Ok((start, time))
}

/// The forward–backward timeline of every move of `mv`: each move's start, the timesteps,
/// and the busiest link's load (no timeline is shorter).
fn timeline(mv: &Moves<'_>, cancelled: &dyn Fn() -> bool) -> Result<(Vec<u32>, u32, u32), SynthError> {
    let total = mv.count();
    let links: Vec<u32> = (0..total).map(|i| mv.link(i)).collect();
    let floor = mv.t.load.iter().copied().max().unwrap_or(0);
    // The first pass: tree by tree, within one the partials from the deepest NPUs first and
    // the results to the shallowest (its breadth-first order, reversed for the partials).
    let (n, units) = (mv.t.n, mv.t.roots.len());
    let mut depth_rank = vec![0u32; mv.t.order.len()];
    for u in 0..units {
        for (k, &v) in mv.t.order[u * n..(u + 1) * n].iter().enumerate() {
            depth_rank[u * n + v as usize] = k as u32;
        }
    }
    let first: Vec<u32> = (0..total)
        .map(|i| {
            let (u, v, up) = mv.decode(i);
            let k = depth_rank[u * n + v as usize];
            (u * 2 * n) as u32 + if up { n as u32 - k } else { n as u32 + k }
        })
        .collect();
    drop(depth_rank);
    let (mut best, mut best_len) = list_schedule(mv, &links, false, &first, cancelled)?;
    tracing::debug!(target: "ccsynth::timing", first_len = best_len, floor, "trees: first pass");
    let mut current = best.clone();
    // At millions of moves a pass costs a second or more, and the first two win most.
    let passes = if total > LARGE_MOVES { 2 } else { IMPROVEMENT_PASSES };
    // Passes that may not shorten it before the search stops: one where a pass costs a tenth
    // of a second or more.
    let patience = if total > ATTEMPT_MOVES { 1 } else { 2 };
    let mut stale = 0;
    for _ in 0..passes {
        if best_len <= floor || stale == patience {
            break;
        }
        // Backward: the move that started last in the forward pass goes first.
        let last = current.iter().copied().max().unwrap_or(0);
        let key: Vec<u32> = current.iter().map(|&s| last - s).collect();
        let (back, back_len) = list_schedule(mv, &links, true, &key, cancelled)?;
        // Forward again by the latest start the backward pass allows.
        let key: Vec<u32> = back.iter().map(|&s| back_len - 1 - s).collect();
        let (fwd, len) = list_schedule(mv, &links, false, &key, cancelled)?;
        tracing::debug!(target: "ccsynth::timing", back_len, len, "trees: pass");
        // A pass that does not shorten the schedule may still reorder it for the next.
        if len < best_len {
            best.clone_from(&fwd);
            best_len = len;
            stale = 0;
        } else {
            stale += 1;
        }
        current = fwd;
    }
    Ok((best, best_len, floor))
}

/// The all-reduce `c` of per-chunk trees on `topo`, `group` chunks a message (see the module
/// doc); `Unsupported` where `applies` does not hold.
pub fn all_reduce(
    topo: &Topology,
    c: &Collective,
    group: usize,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Schedule, PlanStats), SynthError> {
    let Some(f) = fabric(topo, c, group) else {
        return Err(SynthError::Greedy(super::greedy::GreedyError::Unsupported(
            "trees: an all-reduce over links alike both ways",
        )));
    };
    let units = c.num_chunks.div_ceil(group);
    // Attempts with other tie-breaks where a plan is cheap: the busiest link's load and how
    // close the timeline comes to it vary by a few timesteps between them.
    let moves = units * 2 * (f.n() - 1);
    let attempts = (ATTEMPT_MOVES / moves.max(1)).clamp(1, MAX_ATTEMPTS);
    let mut kept: Option<(Trees, Vec<u32>, u32, u32)> = None;
    for a in 0..attempts as u64 {
        let t0 = std::time::Instant::now();
        let trees = build_trees(&f, units, seed.wrapping_add(a.wrapping_mul(0x9E37_79B9)), cancelled)?;
        tracing::debug!(target: "ccsynth::timing", trees_ms = t0.elapsed().as_secs_f64() * 1e3, "trees: built");
        let t0 = std::time::Instant::now();
        let (starts, len, floor) = timeline(&Moves::new(&f, &trees), cancelled)?;
        tracing::debug!(target: "ccsynth::timing", timeline_ms = t0.elapsed().as_secs_f64() * 1e3, "trees: timeline");
        tracing::debug!(target: "ccsynth::timing", attempt = a, floor, timesteps = len, "trees: attempt");
        if kept.as_ref().is_none_or(|k| len < k.2) {
            kept = Some((trees, starts, len, floor));
        }
    }
    let (trees, best, best_len, floor) = kept.expect("at least one attempt");
    let mv = Moves::new(&f, &trees);
    let total = mv.count();
    tracing::debug!(target: "ccsynth::timing", units, group, floor, timesteps = best_len, "trees: scheduled");
    let mut order: Vec<u32> = (0..total as u32).collect();
    order.sort_by_key(|&i| (best[i as usize], i));
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = Some(seed);
    s.transfers.reserve(total);
    let chunks_of = |u: usize| -> ChunkList {
        let lo = (u * group) as u32;
        let hi = ((u + 1) * group).min(c.num_chunks) as u32;
        (lo..hi).collect()
    };
    let lists: Vec<ChunkList> = (0..units).map(chunks_of).collect();
    for &i in &order {
        let (u, v, up) = mv.decode(i as usize);
        let p = mv.parent(u, v);
        let (src, dst) = if up { (v, p) } else { (p, v) };
        s.transfers.push(Transfer {
            op: if up { Op::Reduce } else { Op::Copy },
            ..Transfer::copy(best[i as usize], f.npus[src as usize], f.npus[dst as usize], lists[u].clone())
        });
    }
    let stats = PlanStats {
        ten_timesteps: best_len,
        phase_timesteps: vec![best_len],
        discretization_ns: f.step_ns,
        overlapped: true,
        chunks_per_message: (group > 1).then_some(group as u32),
        ..PlanStats::default()
    };
    Ok((s, stats))
}
