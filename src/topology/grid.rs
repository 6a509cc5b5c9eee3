//! Recognizes meshes and tori among arbitrary topologies (dimension 0 fastest in the id), so
//! torus-aware baselines can use coordinates without the topology carrying its generator.

use super::Topology;

/// Links per slower link at least, for `Topology::grid_before_changes` to take the slower ones
/// for a slowdown rather than a design (mesh:4x4@bw=50,100 runs half its links at 50).
const FEW_SLOWER_PER_LINKS: usize = 8;

/// A D-dimensional mesh or torus shape over NPUs `0..npus`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grid {
    pub dims: Vec<usize>,
    pub torus: bool,
}

impl Grid {
    pub fn coords(&self, v: usize) -> Vec<usize> {
        let mut v = v;
        self.dims
            .iter()
            .map(|&d| {
                let c = v % d;
                v /= d;
                c
            })
            .collect()
    }
    /// Coordinate `dim` of `v` (`coords(v)[dim]`, without the vector).
    pub fn coord(&self, v: usize, dim: usize) -> usize {
        let stride: usize = self.dims[..dim].iter().product();
        (v / stride) % self.dims[dim]
    }
    pub fn node(&self, coords: &[usize]) -> usize {
        let mut v = 0;
        for (i, &d) in self.dims.iter().enumerate().rev() {
            v = v * d + coords[i];
        }
        v
    }
    /// Links on a shortest path from `u` to `v` (around the wrap links on a torus).
    pub fn distance(&self, u: usize, v: usize) -> usize {
        let (a, b) = (self.coords(u), self.coords(v));
        self.dims
            .iter()
            .zip(a.iter().zip(&b))
            .map(|(&d, (&x, &y))| {
                let straight = x.abs_diff(y);
                if self.torus && d > 2 { straight.min(d - straight) } else { straight }
            })
            .sum()
    }
    pub fn stride(&self, dim: usize) -> usize {
        self.dims[..dim].iter().product()
    }
    /// The node list from `v` moving `delta` steps along `dim` (signed; wraps on a torus).
    pub fn path_along(&self, v: usize, dim: usize, delta: i64) -> Vec<u32> {
        let d = self.dims[dim] as i64;
        let mut c = self.coords(v);
        let mut out = vec![v as u32];
        let step = delta.signum();
        for _ in 0..delta.abs() {
            c[dim] = (c[dim] as i64 + step).rem_euclid(d) as usize;
            out.push(self.node(&c) as u32);
        }
        out
    }
}

impl Topology {
    /// The mesh or torus this topology is, link for link (ignoring link parameters), if any.
    /// Prefers more dimensions; a failed NPU or any extra link means no grid.
    pub fn infer_grid(&self) -> Option<Grid> {
        self.candidate_grids().into_iter().find(|g| self.matches_grid(g))
    }

    /// The meshes and tori of this topology's NPU count, more dimensions first, each as a
    /// torus then as a mesh; none with a switch, a failed NPU or fewer than 4 NPUs.
    fn candidate_grids(&self) -> Vec<Grid> {
        let n = self.npus();
        if self.switches() != 0 || !self.failed_npus().is_empty() || n < 4 {
            return Vec::new();
        }
        let mut all = Vec::new();
        factorizations(n, 6, &mut Vec::new(), &mut all);
        all.sort_by_key(|f| std::cmp::Reverse(f.len()));
        all.into_iter().flat_map(|dims| [true, false].map(|torus| Grid { dims: dims.clone(), torus })).collect()
    }

    fn matches_grid(&self, g: &Grid) -> bool {
        // The grid's link count first, from its sides alone. Only a topology with that many
        // links is walked (a dense one, `hier:fc1400`, has every neighbour link a grid needs,
        // so the walk never stopped early: 1.4 M link lookups for each of thousands of
        // factorizations, minutes before any synthesis started, deaf to its deadline).
        g.link_count() == self.links().len()
            && (0..self.npus()).all(|v| g.neighbours(v).into_iter().all(|u| self.link_index(v, u).is_some()))
    }
}

impl Topology {
    /// The mesh or torus this topology is less between one and `max_missing` links (a link
    /// failed one way or both), and the whole grid with those links put back (each taking its
    /// reverse's parameters, else the first link's): the network a failure took them from.
    /// Of several such grids, the one missing the fewest links (then `infer_grid`'s order).
    /// None on an intact grid, with a failed NPU (it left the group), a switch or a link no
    /// grid of the NPU count has.
    pub fn grid_less_links(&self, max_missing: usize) -> Option<(Grid, Topology)> {
        let g = self.grid_missing_links(max_missing)?;
        self.put_back(&g)
    }

    /// The grid of `infer_grid`, else the one this topology is less a few links of
    /// (`limits::REROUTE_MAX_MISSING_LINKS`): the coordinates a schedule's chunk numbering
    /// follows where only the cost of reading it depends on them.
    pub fn grid_or_whole(&self) -> Option<Grid> {
        self.infer_grid().or_else(|| self.grid_missing_links(crate::limits::REROUTE_MAX_MISSING_LINKS))
    }

    /// The mesh or torus this topology is less between none and `max_changed` links and with
    /// up to `max_changed` links slower than the rest, one way each (lower bandwidth or higher
    /// latency than the parameters most of its links share), at least one link missing or
    /// slower; and the whole grid with the missing links put back (as `grid_less_links`) and
    /// the slower ones at the common parameters: the network before a failure and a slowdown.
    /// A grid of many speeds by design (a link faster than the common parameters, more than
    /// `max_changed` slower, or more than one in `FEW_SLOWER_PER_LINKS`) keeps its speeds: it
    /// is `grid_less_links`' answer. None on an intact grid of one speed or many.
    pub fn grid_before_changes(&self, max_changed: usize) -> Option<(Grid, Topology)> {
        let (g, put_back) = match self.infer_grid() {
            Some(g) => (g, None),
            None => self.grid_less_links(max_changed).map(|(g, w)| (g, Some(w)))?,
        };
        let whole = put_back.as_ref().unwrap_or(self);
        let key = |l: &super::Link| (l.bandwidth_gb_per_s.to_bits(), l.latency_ns.to_bits());
        let mut counts: std::collections::HashMap<(u64, u64), usize> = Default::default();
        for l in whole.links() {
            *counts.entry(key(l)).or_default() += 1;
        }
        let common = counts.iter().max_by_key(|&(k, c)| (*c, std::cmp::Reverse(*k))).map(|(&k, _)| k)?;
        let (bw, lat) = (f64::from_bits(common.0), f64::from_bits(common.1));
        let changed: Vec<usize> = (0..whole.links().len()).filter(|&i| key(&whole.links()[i]) != common).collect();
        let slower = |l: &super::Link| l.bandwidth_gb_per_s <= bw && l.latency_ns >= lat;
        let few_slower = !changed.is_empty()
            && changed.len() <= max_changed
            && changed.len() * FEW_SLOWER_PER_LINKS <= whole.links().len()
            && changed.iter().all(|&i| slower(&whole.links()[i]));
        if !few_slower {
            // Uniform, or links of many speeds by design: `grid_less_links`' answer.
            return put_back.map(|w| (g, w));
        }
        let mut input = super::TopologyInput { npus: whole.npus(), ..Default::default() };
        input.links = whole
            .links()
            .iter()
            .map(|l| super::LinkInput {
                src: l.src,
                dst: l.dst,
                latency_ns: Some(lat),
                bandwidth_gb_per_s: Some(bw),
                bidirectional: false,
            })
            .collect();
        let nominal = Topology::from_input(input).ok()?;
        Some((g, nominal))
    }

    /// The grid `grid_less_links` puts the links back into.
    /// The directed links this topology lacks of the fewest-missing mesh or torus it is part
    /// of (none where it is whole or no such grid): what an error says when that is too many
    /// to reroute round.
    pub fn grid_missing_link_count(&self) -> Option<usize> {
        self.grid_missing_links(usize::MAX).map(|g| g.link_count() - self.links().len())
    }

    fn grid_missing_links(&self, max_missing: usize) -> Option<Grid> {
        if self.links().is_empty() {
            return None;
        }
        let mut best: Option<(usize, Grid)> = None;
        for g in self.candidate_grids() {
            let Some(missing) = g.link_count().checked_sub(self.links().len()) else { continue };
            if missing == 0 || missing > max_missing || best.as_ref().is_some_and(|(m, _)| *m <= missing) {
                continue;
            }
            if self.links().iter().all(|l| g.adjacent(l.src, l.dst)) {
                best = Some((missing, g));
            }
        }
        best.map(|(_, g)| g)
    }
}

impl Topology {
    /// This topology with the links of `g` it lacks added, and the grid the result is.
    fn put_back(&self, g: &Grid) -> Option<(Grid, Topology)> {
        let n = self.npus();
        let first = &self.links()[0];
        let mut input = super::TopologyInput { npus: n, ..Default::default() };
        for l in self.links() {
            input.links.push(super::LinkInput {
                src: l.src,
                dst: l.dst,
                latency_ns: Some(l.latency_ns),
                bandwidth_gb_per_s: Some(l.bandwidth_gb_per_s),
                bidirectional: false,
            });
        }
        for v in 0..n {
            for u in g.neighbours(v) {
                if self.link_index(v, u).is_none() {
                    let like = self.link(u, v).unwrap_or(first);
                    input.links.push(super::LinkInput {
                        src: v,
                        dst: u,
                        latency_ns: Some(like.latency_ns),
                        bandwidth_gb_per_s: Some(like.bandwidth_gb_per_s),
                        bidirectional: false,
                    });
                }
            }
        }
        let whole = Topology::from_input(input).ok()?;
        whole.infer_grid().map(|g| (g, whole))
    }
}

impl Grid {
    /// The grid's directed links: each of a dimension's n / d lines has 2d around a ring of
    /// more than 2, 2(d − 1) along a line.
    fn link_count(&self) -> usize {
        let n: usize = self.dims.iter().product();
        self.dims.iter().map(|&d| (n / d) * if self.torus && d > 2 { 2 * d } else { 2 * (d - 1) }).sum()
    }

    /// Whether `u` and `v` are one step apart along one dimension (around on a torus).
    fn adjacent(&self, u: usize, v: usize) -> bool {
        let n: usize = self.dims.iter().product();
        if u >= n || v >= n || u == v {
            return false;
        }
        let mut differ = 0;
        for (dim, &d) in self.dims.iter().enumerate() {
            let (a, b) = (self.coord(u, dim), self.coord(v, dim));
            if a == b {
                continue;
            }
            differ += 1;
            let gap = a.abs_diff(b);
            if !(gap == 1 || (self.torus && d > 2 && gap == d - 1)) {
                return false;
            }
        }
        differ == 1
    }

    /// `v`'s neighbours, each dimension's next then previous (around on a torus).
    fn neighbours(&self, v: usize) -> Vec<usize> {
        let c = self.coords(v);
        let mut out = Vec::with_capacity(2 * self.dims.len());
        for (dim, &d) in self.dims.iter().enumerate() {
            let s = self.stride(dim);
            if c[dim] + 1 < d {
                out.push(v + s);
            } else if self.torus && d > 2 {
                out.push(v + s - d * s);
            }
            if c[dim] > 0 {
                out.push(v - s);
            } else if self.torus && d > 2 {
                out.push(v + (d - 1) * s);
            }
        }
        out
    }
}

fn factorizations(n: usize, max_len: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    if n == 1 {
        if !cur.is_empty() {
            out.push(cur.clone());
        }
        return;
    }
    if cur.len() == max_len {
        return;
    }
    for f in 2..=n {
        if n.is_multiple_of(f) {
            cur.push(f);
            factorizations(n / f, max_len, cur, out);
            cur.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::topology::parse_spec;

    /// Grids are recognised by their links, and a topology with another link count is not
    /// one, whatever its NPU count factors into: a dense one (every neighbour link present) is
    /// refused by the count before any is looked up.
    #[test]
    fn grids_are_inferred_from_their_links_and_dense_topologies_are_not_grids() {
        let grid = |spec: &str| parse_spec(spec).unwrap().infer_grid().map(|g| (g.dims, g.torus));
        assert_eq!(grid("torus:4x4"), Some((vec![4, 4], true)));
        assert_eq!(grid("torus:3x5x2"), Some((vec![3, 5, 2], true)));
        assert_eq!(grid("mesh:4x6"), Some((vec![4, 6], false)));
        assert_eq!(grid("ring:12"), Some((vec![12], true)));
        assert_eq!(grid("hier:ring4,ring4"), Some((vec![4, 4], true)));
        for spec in ["fc:12", "hier:fc6,fc4", "hyperx:4x4", "hier:ring4,fc4", "switch:8"] {
            assert_eq!(grid(spec), None, "{spec}");
        }
    }

    /// A grid less a few links is found with those links put back, their parameters the
    /// reverse's; an intact grid, a failed NPU, too many missing links or a link no grid has
    /// give none.
    #[test]
    fn a_grid_less_links_is_found_with_them_put_back() {
        use crate::topology::Failures;
        let less = |spec: &str, links: Vec<[usize; 2]>, directed: bool| {
            let t = parse_spec(spec).unwrap();
            t.with_failures(&Failures { links, directed, ..Default::default() }).unwrap()
        };
        let whole = parse_spec("torus:4x4").unwrap();
        let one = less("torus:4x4", vec![[0, 1]], false);
        let (g, back) = one.grid_less_links(8).expect("torus:4x4 less a link");
        assert_eq!((g.dims, g.torus), (vec![4, 4], true));
        let pairs = |t: &crate::topology::Topology| {
            let mut v: Vec<_> = t.links().iter().map(|l| (l.src, l.dst, l.bandwidth_gb_per_s.to_bits())).collect();
            v.sort();
            v
        };
        assert_eq!(pairs(&back), pairs(&whole));
        // One way only; a mesh; three links of a 3-D torus.
        assert!(less("torus:4x4", vec![[5, 6]], true).grid_less_links(1).is_some());
        let (g, _) = less("mesh:3x5", vec![[0, 1], [7, 10]], false).grid_less_links(4).unwrap();
        assert_eq!((g.dims, g.torus), (vec![3, 5], false));
        let (g, back) = less("torus:4x4x4", vec![[0, 1], [0, 4], [21, 37]], false).grid_less_links(6).unwrap();
        assert_eq!((g.dims, back.links().len()), (vec![4, 4, 4], parse_spec("torus:4x4x4").unwrap().links().len()));
        // More missing than allowed, an intact grid, a failed NPU, not a grid at all.
        assert!(one.grid_less_links(1).is_none());
        assert!(whole.grid_less_links(8).is_none());
        let npu =
            parse_spec("torus:4x4").unwrap().with_failures(&Failures { npus: vec![3], ..Default::default() }).unwrap();
        assert!(npu.grid_less_links(64).is_none());
        assert!(less("fc:6", vec![[0, 1]], false).grid_less_links(8).is_none());
    }
}
