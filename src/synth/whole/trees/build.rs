//! The trees of `synth::trees`: one shortest-path tree per unit, rooted where the links are
//! least loaded (`build_trees`), then balanced by moving NPUs to other parents one hop nearer
//! the root, alone (`balance`) or in chains (`unload_busiest`).

use super::Fabric;
use crate::rng::Rng;
use crate::synth::SynthError;

/// Rounds that rebuild every tree against the others' loads.
const REBUILD_ROUNDS: usize = 2;

/// Passes of `balance` at most.
const BALANCE_PASSES: usize = 8;

/// Moves `unload_busiest` looks at, at most (a few tenths of a second).
const UNLOAD_WORK: usize = 1 << 26;

/// The trees: `parent[t * n + v]` is NPU v's parent in tree t (`u32::MAX` at its root).
#[derive(Clone)]
pub(super) struct Trees {
    pub(super) n: usize,
    pub(super) roots: Vec<u32>,
    pub(super) parent: Vec<u32>,
    /// Each tree's NPUs, parents before children (breadth first from the root).
    pub(super) order: Vec<u32>,
    /// `depth[t * n + v]`: NPU v's hops from tree t's root.
    pub(super) depth: Vec<u32>,
    /// Timesteps of messages each undirected edge carries either way: its trees, each at the
    /// edge's cost (`Fabric::cost`; one a tree where every link is alike).
    pub(super) load: Vec<u32>,
}

impl Trees {
    pub(super) fn busiest(&self) -> u32 {
        self.load.iter().copied().max().unwrap_or(0)
    }
}

/// Builds one tree per unit: the root the NPU whose edges carry the fewest trees per edge, the
/// others' parents the least loaded neighbour one hop nearer the root, ties at random.
pub(super) fn build_trees(
    f: &Fabric,
    units: usize,
    seed: u64,
    cancelled: &dyn Fn() -> bool,
) -> Result<Trees, SynthError> {
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
                uproot(f, &mut t, &mut rooted, u);
            }
            let root = pick_root(f, &t, &rooted, &mut rng);
            t.roots[u] = root;
            rooted[root as usize] += 1;
            grow_tree(f, &mut t, &mut dist, u, root, &mut rng);
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
    tracing::trace!(target: "ccsynth::timing", balance_ms = (t1 - t0).as_secs_f64() * 1e3, unload_ms = t1.elapsed().as_secs_f64() * 1e3, busiest = t.busiest(), "trees: balanced");
    Ok(t)
}

/// Takes tree u's root count and edge loads back out, so a rebuild sees only the other trees.
fn uproot(f: &Fabric, t: &mut Trees, rooted: &mut [u32], u: usize) {
    let n = t.n;
    rooted[t.roots[u] as usize] -= 1;
    for v in 0..n {
        let p = t.parent[u * n + v];
        if p != u32::MAX {
            let e = edge_between(f, v as u32, p);
            t.load[e as usize] -= f.cost(e);
        }
    }
}

/// Picks the next tree's root, drawing one tie-breaker per NPU in NPU order.
fn pick_root(f: &Fabric, t: &Trees, rooted: &[u32], rng: &mut Rng) -> u32 {
    // The root: fewest trees per edge, then the fewest roots so far (a tree starts and
    // ends at its root: spread, the first and last timesteps have work everywhere),
    // ties at random.
    let mut best = (u64::MAX, u32::MAX, 0u64, 0u32);
    for v in 0..t.n as u32 {
        let nb = f.neighbours(v);
        let sum: u64 = nb.iter().map(|&(_, e)| t.load[e as usize] as u64).sum();
        // Compared as sum / degree, exactly: sum · 2^20 / degree.
        let key = (sum << 20) / nb.len().max(1) as u64;
        let tie = rng.next_u64();
        if (key, rooted[v as usize], tie) < (best.0, best.1, best.2) {
            best = (key, rooted[v as usize], tie, v);
        }
    }
    best.3
}

/// Grows tree u from its root: its order, parents, depths and the loads its edges add.
fn grow_tree(f: &Fabric, t: &mut Trees, dist: &mut [u32], u: usize, root: u32, rng: &mut Rng) {
    let n = t.n;
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
        // The edge least loaded with this tree on it.
        let mut pick = (u32::MAX, u64::MAX, 0u32, 0u32);
        for &(x, e) in f.neighbours(y) {
            if dist[x as usize] + 1 == dist[y as usize] {
                let tie = rng.next_u64();
                let after = t.load[e as usize] + f.cost(e);
                if (after, tie) < (pick.0, pick.1) {
                    pick = (after, tie, x, e);
                }
            }
        }
        parent[y as usize] = pick.2;
        t.load[pick.3 as usize] += f.cost(pick.3);
    }
    for (v, &d) in dist.iter().enumerate() {
        t.depth[u * n + v] = d;
    }
}

/// Lowers the busiest load by chains of moves `balance` cannot make one at a time: NPU a moves
/// off the busiest edge onto another edge, whose NPU b moves on to another, until an edge that
/// stays under the busiest load with the last takes it (two trees below where every link is
/// alike; a search over edges, breadth first). Stops when an
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
                        // Its load with the last pair on it still under the busiest.
                        if t.load[e as usize] + f.cost(e) < top {
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
                t.load[x as usize] -= f.cost(x);
                t.load[e as usize] += f.cost(e);
                let (a, b) = f.ends(e);
                t.parent[u * n + v as usize] = if a == v { b } else { a };
                e = x;
            }
        }
    }
}

/// Local search on the trees' parents: an NPU moves to another parent one hop nearer its
/// tree's root (its subtree comes along; the tree stays a shortest-path tree) when that
/// parent's edge with it would carry less than its own edge does now (two trees fewer where
/// every link is alike), until no NPU moves.
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
                    if t.depth[u * n + x as usize] + 1 == d && t.load[e as usize] + f.cost(e) < pick.0 {
                        pick = (t.load[e as usize] + f.cost(e), x, e);
                    }
                }
                if pick.1 != p {
                    t.load[cur as usize] -= f.cost(cur);
                    t.load[pick.2 as usize] += f.cost(pick.2);
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

pub(super) fn edge_between(f: &Fabric, u: u32, v: u32) -> u32 {
    f.neighbours(u).iter().find(|&&(x, _)| x == v).map(|&(_, e)| e).expect("a tree edge is a fabric edge")
}
