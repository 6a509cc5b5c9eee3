//! Recognizes meshes and tori among arbitrary topologies (dimension 0 fastest in the id), so
//! torus-aware baselines can use coordinates without the topology carrying its generator.

use super::Topology;

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
        let n = self.npus();
        if self.switches() != 0 || !self.failed_npus().is_empty() || n < 4 {
            return None;
        }
        let mut all = Vec::new();
        factorizations(n, 6, &mut Vec::new(), &mut all);
        all.sort_by_key(|f| std::cmp::Reverse(f.len()));
        for dims in all {
            for torus in [true, false] {
                let g = Grid { dims: dims.clone(), torus };
                if self.matches_grid(&g) {
                    return Some(g);
                }
            }
        }
        None
    }

    fn matches_grid(&self, g: &Grid) -> bool {
        let mut expected = 0usize;
        for v in 0..self.npus() {
            let c = g.coords(v);
            for (dim, &d) in g.dims.iter().enumerate() {
                let mut neigh = Vec::new();
                if c[dim] + 1 < d {
                    neigh.push(v + g.stride(dim));
                } else if g.torus && d > 2 {
                    neigh.push(v + g.stride(dim) - d * g.stride(dim));
                }
                if c[dim] > 0 {
                    neigh.push(v - g.stride(dim));
                } else if g.torus && d > 2 {
                    neigh.push(v + (d - 1) * g.stride(dim));
                }
                for u in neigh {
                    if self.link_index(v, u).is_none() {
                        return false;
                    }
                    expected += 1;
                }
            }
        }
        expected == self.links().len()
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
