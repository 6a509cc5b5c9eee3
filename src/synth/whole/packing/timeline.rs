//! The packing's timeline (`timeline`): every chunk's move down every arc of its tree
//! list-scheduled onto its route's links, then improved forward–backward.
//!
//! The first pass places the moves by their latest start in their tree's pipeline (a chunk's
//! index in its tree less the hops below the NPU), then by earliest start (the index plus the
//! depth), then the larger subtree first. By earliest start alone (the wavefront) the moves
//! into deep subtrees queued behind shallow ones: the all-gathers at 256 MiB ended 1.084× their
//! bound on ring:8 and 1.160× on torus:4x4, by latest start 1.003× and 1.012× (the broadcasts
//! measured the same).
//!
//! Then forward–backward improvement (a standard of project scheduling, as the per-chunk trees
//! use it): the moves reversed (a move waits for the moves out of its NPU in the same chunk
//! and tree) are placed from the end by the forward pass's finish times, and the forward moves
//! again by the latest starts that gives. A pass is kept only where it ends sooner, so no
//! timeline is longer than the first pass's. For trees of many roots only (`improve`): a
//! broadcast's chunks pipeline down its root's trees, and the passes found nothing shorter on
//! mesh:8x8, torus:4x4, dragonfly:4:5, torus:4x4x4 or hypercube:6 at 256 MiB, for 1.2–1.75×
//! the wall; all-gathers at 256 MiB (thorough): mesh:8x8 1.056 → 1.040× the bound, rail:4x8
//! 1.132 → 1.108×, dragonfly:8:9 (72 NPUs) 1.123 → 1.098×.

use super::Tree;
use crate::topology::Topology;

/// Forward–backward rounds after the first pass, each stopping the improvement where it did
/// not shorten the timeline.
const IMPROVE_ROUNDS: usize = 4;

/// The trees' moves list-scheduled (see the module doc). A route through switches holds all
/// its links at once, for the sum of their latencies and the bytes over the slowest (cut
/// through, as `sim` times it); improved forward–backward where `improve`. Returns (start ns,
/// route, chunk) by start.
pub(super) fn timeline(
    topo: &Topology,
    routes: &[Vec<usize>],
    trees: &[Tree<'_>],
    chunk_bytes: f64,
    improve: bool,
) -> Vec<(f64, usize, u32)> {
    let m = Moves::new(topo, routes, trees, chunk_bytes);
    let first = m.first_order();
    let mut best = m.place(&first, false);
    // Ties in the later passes' keys go to the first pass's order.
    let mut rank = vec![0u32; m.count()];
    for (r, &j) in first.iter().enumerate() {
        rank[j as usize] = r as u32;
    }
    let rounds = if improve { IMPROVE_ROUNDS } else { 0 };
    for _ in 0..rounds {
        // Backward: the last to end first; forward: by the latest start the backward pass gives.
        // Both keys put a move's predecessors first (a move starts after the move into its
        // parent ends), as `place` needs. Noisy keys (40 restarts, a DAG-ordered heap) found
        // nothing shorter on mesh:8x8, dragonfly:8:9, dragonfly:4:5 or hypercube:5.
        let back = m.place(&m.order_by(|j| -best.end[j], &rank), true);
        let fwd = m.place(&m.order_by(|j| back.start[j], &rank), false);
        if fwd.len >= best.len * (1.0 - 1e-12) {
            break;
        }
        best = fwd;
    }
    let mut moves: Vec<(f64, usize, u32)> =
        first.iter().map(|&j| (best.start[j as usize], m.arc[j as usize] as usize, m.chunk(j as usize))).collect();
    let ends = |arc: usize| (routes[arc][0], routes[arc][routes[arc].len() - 1], arc);
    moves.sort_by(|a, b| a.0.total_cmp(&b.0).then((ends(a.1), a.2).cmp(&(ends(b.1), b.2))));
    moves
}

/// The moves of every tree: move `j` carries chunk `i` of tree `t` into NPU `v`, where
/// `j = (base[t] + i) · n + v` (the slots of the roots and of NPUs without a parent hold no
/// move).
struct Moves<'a> {
    trees: &'a [Tree<'a>],
    n: usize,
    /// Each tree's first chunk slot.
    base: Vec<usize>,
    /// Each move's arc, and the links of each arc's route.
    arc: Vec<u32>,
    links: Vec<Vec<usize>>,
    link_count: usize,
    /// Each arc's time for one chunk.
    time: Vec<f64>,
    /// Each tree's children of each NPU: `kids[t][off[t][v]..off[t][v + 1]]`.
    kids: Vec<Vec<u32>>,
    off: Vec<Vec<u32>>,
    /// Each move's tree.
    tree: Vec<u32>,
}

/// A placement: each move's start and end (NaN for a slot without a move), and the latest end.
struct Placed {
    start: Vec<f64>,
    end: Vec<f64>,
    len: f64,
}

impl<'a> Moves<'a> {
    fn new(topo: &Topology, routes: &[Vec<usize>], trees: &'a [Tree<'a>], chunk_bytes: f64) -> Moves<'a> {
        let n = trees.first().map_or(0, |t| t.parent.len());
        let links: Vec<Vec<usize>> = routes
            .iter()
            .map(|r| r.windows(2).map(|w| topo.link_index(w[0], w[1]).expect("a route follows links")).collect())
            .collect();
        let time = links
            .iter()
            .map(|ls| {
                let alpha: f64 = ls.iter().map(|&l| topo.links()[l].latency_ns).sum();
                let beta = ls.iter().map(|&l| topo.links()[l].bandwidth_gb_per_s).fold(f64::INFINITY, f64::min);
                alpha + chunk_bytes / beta
            })
            .collect();
        let mut base = Vec::with_capacity(trees.len());
        let mut slots = 0;
        for t in trees {
            base.push(slots);
            slots += t.chunks.len();
        }
        let (mut kids, mut off) = (Vec::with_capacity(trees.len()), Vec::with_capacity(trees.len()));
        for t in trees {
            let mut o = vec![0u32; n + 1];
            for &p in t.parent.iter().filter(|&&p| p != u32::MAX) {
                o[p as usize + 1] += 1;
            }
            for v in 0..n {
                o[v + 1] += o[v];
            }
            let mut fill = o.clone();
            let mut k = vec![0u32; o[n] as usize];
            for (v, &p) in t.parent.iter().enumerate().filter(|&(_, &p)| p != u32::MAX) {
                k[fill[p as usize] as usize] = v as u32;
                fill[p as usize] += 1;
            }
            kids.push(k);
            off.push(o);
        }
        let mut arc = vec![u32::MAX; slots * n];
        let mut tree = vec![u32::MAX; slots * n];
        for (t, tr) in trees.iter().enumerate() {
            for i in 0..tr.chunks.len() {
                for v in (0..n).filter(|&v| tr.parent[v] != u32::MAX) {
                    arc[(base[t] + i) * n + v] = tr.arc[v];
                    tree[(base[t] + i) * n + v] = t as u32;
                }
            }
        }
        Moves { trees, n, base, arc, links, link_count: topo.links().len(), time, kids, off, tree }
    }

    /// Move slots (moves and empty ones).
    fn count(&self) -> usize {
        self.arc.len()
    }

    /// (tree, chunk index in it, NPU) of move `j`.
    fn decode(&self, j: usize) -> (usize, usize, usize) {
        let t = self.tree[j] as usize;
        (t, j / self.n - self.base[t], j % self.n)
    }

    /// The chunk move `j` carries.
    fn chunk(&self, j: usize) -> u32 {
        let (t, i, _) = self.decode(j);
        self.trees[t].chunks[i]
    }

    /// The first pass's order (see the module doc).
    fn first_order(&self) -> Vec<u32> {
        let n = self.n;
        let mut order = Vec::new();
        for (t, tree) in self.trees.iter().enumerate() {
            let depth = depths(tree.parent, tree.root);
            let mut below = vec![1u32; n];
            let mut deepest_first: Vec<usize> = (0..n).collect();
            deepest_first.sort_by_key(|&v| std::cmp::Reverse(depth[v]));
            // Each NPU's height: the hops below it to its subtree's deepest leaf.
            let mut height = vec![0u32; n];
            for &v in &deepest_first {
                if tree.parent[v] != u32::MAX {
                    let p = tree.parent[v] as usize;
                    below[p] += below[v];
                    height[p] = height[p].max(height[v] + 1);
                }
            }
            for i in 0..tree.chunks.len() {
                for v in (0..n).filter(|&v| tree.parent[v] != u32::MAX) {
                    // The latest start a move has in its own tree's pipeline (chunk i, then
                    // height hops below), offset to stay unsigned; then its earliest start.
                    let latest = i as u32 + n as u32 - height[v];
                    let j = ((self.base[t] + i) * n + v) as u32;
                    order.push((latest, i as u32 + depth[v], std::cmp::Reverse(below[v]), t, i, j));
                }
            }
        }
        order.sort_unstable();
        order.into_iter().map(|o| o.5).collect()
    }

    /// The moves by `key` (smallest first), ties by `rank`.
    fn order_by(&self, key: impl Fn(usize) -> f64, rank: &[u32]) -> Vec<u32> {
        let mut order: Vec<(f64, u32, u32)> =
            (0..self.count()).filter(|&j| self.arc[j] != u32::MAX).map(|j| (key(j), rank[j], j as u32)).collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        order.into_iter().map(|o| o.2).collect()
    }

    /// The moves placed one by one in `order`, each into the first gap its route's links share
    /// once the moves it waits for have ended: forward, the move into its parent (the root
    /// holds its chunks at 0); `backward` (time reversed), the moves out of its NPU. `order`
    /// must put those first.
    fn place(&self, order: &[u32], backward: bool) -> Placed {
        let n = self.n;
        let mut start = vec![f64::NAN; self.count()];
        let mut end = vec![f64::NAN; self.count()];
        let mut busy: Vec<Vec<(f64, f64)>> = vec![Vec::new(); self.link_count];
        let mut len = 0.0f64;
        for &j in order {
            let j = j as usize;
            let (t, i, v) = self.decode(j);
            let slot = (self.base[t] + i) * n;
            let ready = if backward {
                let o = &self.off[t];
                self.kids[t][o[v] as usize..o[v + 1] as usize]
                    .iter()
                    .map(|&c| end[slot + c as usize])
                    .fold(0.0, f64::max)
            } else {
                let p = self.trees[t].parent[v] as usize;
                if p == self.trees[t].root { 0.0 } else { end[slot + p] }
            };
            let arc = self.arc[j] as usize;
            let dur = self.time[arc];
            // The first gap at or after `ready` that every link of the route has.
            let mut at = ready;
            while let Some(later) = self.links[arc].iter().map(|&l| first_gap(&busy[l], at, dur)).find(|&s| s > at) {
                at = later;
            }
            for &l in &self.links[arc] {
                let k = busy[l].partition_point(|&(b, _)| b < at);
                busy[l].insert(k, (at, at + dur));
            }
            start[j] = at;
            end[j] = at + dur;
            len = len.max(at + dur);
        }
        if backward {
            // Back into forward time: a move that ends at e reversed starts at len − e.
            for j in order.iter().map(|&j| j as usize) {
                let s = len - end[j];
                end[j] = len - start[j];
                start[j] = s;
            }
        }
        Placed { start, end, len }
    }
}

/// The first start at or after `from` at which `slots` (busy intervals by start, apart) leave
/// `dur` free.
fn first_gap(slots: &[(f64, f64)], from: f64, dur: f64) -> f64 {
    let mut start = from;
    for &(b, e) in &slots[slots.partition_point(|&(_, e)| e <= from)..] {
        if start + dur <= b {
            break;
        }
        start = start.max(e);
    }
    start
}

/// Each NPU's depth in a tree given by `parent`, rooted at `root`.
fn depths(parent: &[u32], root: usize) -> Vec<u32> {
    let mut depth = vec![u32::MAX; parent.len()];
    depth[root] = 0;
    fn of(v: usize, parent: &[u32], depth: &mut [u32]) -> u32 {
        if depth[v] == u32::MAX {
            depth[v] = of(parent[v] as usize, parent, depth) + 1;
        }
        depth[v]
    }
    for v in 0..parent.len() {
        of(v, parent, &mut depth);
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::super::{packing, trees_of};
    use super::timeline;
    use crate::topology::{Topology, parse_spec};

    /// The all-gather's timeline on `spec` at `k` trees per root and `per_root` chunks of
    /// `bytes` each: its length after the first pass and after the improvement.
    fn lengths(spec: &str, k: usize, per_root: u32, bytes: f64) -> (f64, f64) {
        let t: Topology = parse_spec(spec).unwrap();
        let n = t.npus();
        let p = packing(&t, &(0..n).collect::<Vec<_>>(), &vec![true; n], k, &|| false).unwrap().unwrap();
        let chunks: Vec<Vec<u32>> = (0..n as u32).map(|r| (r * per_root..(r + 1) * per_root).collect()).collect();
        let trees = trees_of(&p, &chunks, k);
        let len = |improve: bool| {
            let moves = timeline(&t, &p.routes, &trees, bytes, improve);
            assert_eq!(moves.len(), n * (n - 1) * per_root as usize);
            moves
                .iter()
                .map(|&(start, arc, _)| {
                    let ls: Vec<_> =
                        p.routes[arc].windows(2).map(|w| &t.links()[t.link_index(w[0], w[1]).unwrap()]).collect();
                    let beta = ls.iter().map(|l| l.bandwidth_gb_per_s).fold(f64::INFINITY, f64::min);
                    start + ls.iter().map(|l| l.latency_ns).sum::<f64>() + bytes / beta
                })
                .fold(0.0, f64::max)
        };
        (len(false), len(true))
    }

    /// On mesh:8x8 at two trees per root and two chunks each (10.5 µs a move), the first pass
    /// takes 66 moves' time; the improvement 64, one over the corner's floor (126 chunks in
    /// over two links: 63). Elsewhere never longer than the first pass.
    #[test]
    fn forward_backward_shortens_the_all_gather_on_a_mesh() {
        let step = 10_500.0;
        let (first, improved) = lengths("mesh:8x8", 2, 2, 1e6);
        assert_eq!((first / step, improved / step), (66.0, 64.0));
        for (spec, k, per_root) in [("mesh:4x4", 2, 4), ("dragonfly:4:5", 1, 2), ("ring:8", 2, 4)] {
            let (first, improved) = lengths(spec, k, per_root, 1e6);
            assert!(improved <= first, "{spec}: {improved} after {first}");
        }
    }
}
