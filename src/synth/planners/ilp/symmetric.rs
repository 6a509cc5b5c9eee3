//! Symmetric plans on vertex-transitive fabrics: when a group of TEN automorphisms acts
//! regularly on the NPUs (a torus's translations; the coordinate shifts of a hierarchical
//! Ring × FC × Switch fabric) and every NPU spreads a block of its own chunks to every other,
//! one NPU's spread, translated to every NPU, is a whole plan. The integer program then has the
//! columns of one NPU's chunks only, and its congestion rows count, per class of resources the
//! group maps onto each other, the load the translates put on each resource: a model a few
//! hundred times smaller than the full one, solved in moments. Its optimum bounds the full
//! model's from above (a symmetric plan is a plan); when it meets the lower bound, it is optimal.

use super::chunks::ChunkInfo;
use crate::synth::phase::Move;
use crate::ten::Ten;
use std::collections::HashMap;

/// NPUs up to which a symmetry is looked for (the ILP's own reach is far below).
const MAX_NPUS: usize = 1024;

/// Resource classes of a symmetry: `of[r]` is resource r's class, and `weight[class]` the
/// number of translates that put one send's use of a class member on any one resource
/// (1 when the group moves every resource of the class: its orbit is as large as the group).
pub(crate) struct Classes {
    pub(crate) of: Vec<u32>,
    pub(crate) weight: Vec<f64>,
}

/// A group of TEN automorphisms acting regularly on the NPUs: the shifts of a mixed-radix
/// numbering of the NPU ids (`radix`, least significant first).
pub(crate) struct Symmetry {
    radix: Vec<u32>,
    /// Edge ids by (src, dst).
    edge_of: HashMap<(u32, u32), u32>,
    pub(crate) classes: Classes,
}

impl Symmetry {
    /// The first mixed-radix numbering (fewest digits first) whose unit shifts are all
    /// automorphisms of the TEN: edges onto edges of the same span, resources onto resources
    /// consistently. `None` when there is none (or the TEN has parallel edges).
    pub(crate) fn find(ten: &Ten) -> Option<Symmetry> {
        let n = ten.npus;
        if !(2..=MAX_NPUS).contains(&n) {
            return None;
        }
        let mut edge_of = HashMap::with_capacity(ten.edges.len());
        for (i, e) in ten.edges.iter().enumerate() {
            if edge_of.insert((e.src, e.dst), i as u32).is_some() {
                return None;
            }
        }
        let mut radices = factorizations(n as u32);
        radices.sort_by_key(|r| r.len());
        for radix in radices {
            let shifts: Vec<Vec<u32>> =
                (0..radix.len()).map(|d| (0..n as u32).map(|v| shift(&radix, v, d)).collect()).collect();
            let maps: Option<Vec<Vec<u32>>> = shifts.iter().map(|p| resource_map(ten, &edge_of, p)).collect();
            let Some(maps) = maps else { continue };
            let classes = classes(ten, &maps, n);
            return Some(Symmetry { radix, edge_of, classes });
        }
        None
    }

    /// The NPU that the group element taking NPU 0 to `g` takes `v` to.
    fn apply(&self, g: u32, v: u32) -> u32 {
        let (mut out, mut place, mut a, mut b) = (0, 1, g, v);
        for &r in &self.radix {
            out += ((a % r + b % r) % r) * place;
            place *= r;
            a /= r;
            b /= r;
        }
        out
    }

    /// The chunks of NPU 0 whose translates make up the problem, when it is one a symmetric plan
    /// serves: every NPU holds the same number of chunks (its block, in id order), no other
    /// NPU holds them, and every other NPU needs every one. `None` otherwise.
    pub(crate) fn pattern(&self, info: &ChunkInfo, num_chunks: usize) -> Option<Blocks> {
        let n = self.radix.iter().product::<u32>() as usize;
        let mut blocks = vec![Vec::new(); n];
        if info.chunks.len() != num_chunks {
            return None;
        }
        for c in &info.chunks {
            let [h] = c.holders[..] else { return None };
            if c.targets.len() != n - 1 {
                return None;
            }
            blocks[h as usize].push(c.id);
        }
        let k = blocks[0].len();
        if k == 0 || blocks.iter().any(|b| b.len() != k) {
            return None;
        }
        for b in &mut blocks {
            b.sort_unstable();
        }
        Some(Blocks { blocks })
    }

    /// Every NPU's translate of NPU 0's `moves` (chunks of `blocks.blocks[0]`), or `None` when
    /// an edge has no translate (never, for a symmetry `find` returned).
    pub(crate) fn translate(&self, ten: &Ten, blocks: &Blocks, moves: &[Move]) -> Option<Vec<Move>> {
        let index: HashMap<u32, usize> = blocks.blocks[0].iter().enumerate().map(|(j, &c)| (c, j)).collect();
        let mut out = Vec::with_capacity(moves.len() * blocks.blocks.len());
        for (g, block) in blocks.blocks.iter().enumerate() {
            for m in moves {
                let e = &ten.edges[m.edge as usize];
                let (src, dst) = (self.apply(g as u32, e.src), self.apply(g as u32, e.dst));
                let edge = *self.edge_of.get(&(src, dst))?;
                out.push(Move { step: m.step, edge, chunk: block[*index.get(&m.chunk)?] });
            }
        }
        Some(out)
    }
}

/// Each NPU's chunks, in id order; NPU 0's are the pattern's.
pub(crate) struct Blocks {
    pub(crate) blocks: Vec<Vec<u32>>,
}

/// Whether `moves` keep the TEN's congestion rule: one chunk per resource per timestep.
pub(crate) fn congestion_free(ten: &Ten, moves: &[Move]) -> bool {
    let mut used: std::collections::HashSet<(u32, u32)> = std::collections::HashSet::new();
    moves.iter().all(|m| {
        let e = &ten.edges[m.edge as usize];
        e.resources.iter().all(|&r| (m.step..m.step + e.span).all(|t| used.insert((r, t))))
    })
}

/// The ordered factorizations of `n` into factors of at least 2.
fn factorizations(n: u32) -> Vec<Vec<u32>> {
    if n == 1 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for f in 2..=n {
        if n.is_multiple_of(f) {
            for mut rest in factorizations(n / f) {
                rest.insert(0, f);
                out.push(rest);
            }
        }
    }
    out
}

/// `v` shifted by one along digit `d` of the mixed-radix numbering `radix`.
fn shift(radix: &[u32], v: u32, d: usize) -> u32 {
    let place: u32 = radix[..d].iter().product();
    let digit = (v / place) % radix[d];
    v - digit * place + ((digit + 1) % radix[d]) * place
}

/// The map on resources that the NPU permutation `p` induces, when `p` is a TEN automorphism
/// (every edge onto an edge of the same span, resources onto resources one to one).
fn resource_map(ten: &Ten, edge_of: &HashMap<(u32, u32), u32>, p: &[u32]) -> Option<Vec<u32>> {
    const UNSET: u32 = u32::MAX;
    let mut map = vec![UNSET; ten.resources];
    let mut back = vec![UNSET; ten.resources];
    for e in &ten.edges {
        let image = &ten.edges[*edge_of.get(&(p[e.src as usize], p[e.dst as usize]))? as usize];
        if image.span != e.span || image.resources.len() != e.resources.len() {
            return None;
        }
        for (&r, &s) in e.resources.iter().zip(&image.resources) {
            let (r, s) = (r as usize, s as usize);
            if (map[r] != UNSET && map[r] != s as u32) || (back[s] != UNSET && back[s] != r as u32) {
                return None;
            }
            map[r] = s as u32;
            back[s] = r as u32;
        }
    }
    Some(map)
}

/// The orbits of the resources under the group the shifts `maps` generate, and their weights:
/// a group of `n` elements moving a resource onto `n / w` others puts `w` translates of one
/// use on each.
fn classes(ten: &Ten, maps: &[Vec<u32>], n: usize) -> Classes {
    let mut parent: Vec<u32> = (0..ten.resources as u32).collect();
    fn root(parent: &mut [u32], mut v: u32) -> u32 {
        while parent[v as usize] != v {
            parent[v as usize] = parent[parent[v as usize] as usize];
            v = parent[v as usize];
        }
        v
    }
    for map in maps {
        for (r, &s) in map.iter().enumerate() {
            if s != u32::MAX {
                let (a, b) = (root(&mut parent, r as u32), root(&mut parent, s));
                parent[a as usize] = b;
            }
        }
    }
    let used: std::collections::HashSet<u32> = ten.edges.iter().flat_map(|e| e.resources.iter().copied()).collect();
    let mut id: HashMap<u32, u32> = HashMap::new();
    let mut size: Vec<usize> = Vec::new();
    let mut of = vec![u32::MAX; ten.resources];
    for r in 0..ten.resources as u32 {
        if !used.contains(&r) {
            continue;
        }
        let root = root(&mut parent, r);
        let next = id.len() as u32;
        let class = *id.entry(root).or_insert(next);
        if class as usize == size.len() {
            size.push(0);
        }
        size[class as usize] += 1;
        of[r as usize] = class;
    }
    Classes { of, weight: size.iter().map(|&s| n as f64 / s as f64).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factorizations_and_shifts() {
        assert_eq!(factorizations(8).len(), 4); // 8, 2·4, 4·2, 2·2·2
        assert!(factorizations(12).contains(&vec![2, 3, 2]));
        // Radix (2, 4): 5 = 1 + 2·2 → digit 1 shifted: 1 + 2·3 = 7; digit 0: 0 + 2·2 = 4.
        assert_eq!(shift(&[2, 4], 5, 1), 7);
        assert_eq!(shift(&[2, 4], 5, 0), 4);
        assert_eq!(shift(&[2, 4], 7, 1), 1);
    }
}
