//! Islands of fast links in the matcher (the pods behind a switch): an edge into another
//! island carries a chunk that island has nowhere yet first.

use super::{Class, State};
use crate::ten::Ten;

/// Candidates an edge into another island looks through for one that island lacks.
const NOVEL_SCAN: usize = 256;

/// NPUs grouped by the edges faster than the slowest ones, and per (island, chunk) how many of
/// its NPUs hold the chunk or have it on its way. An edge into another island gets a chunk that
/// island has nowhere first: a second copy over the slow edges is bandwidth the cut lacks.
pub(super) struct Islands {
    of: Vec<u32>,
    chunks: usize,
    reached: Vec<u32>,
    /// Per chunk, the islands it has reached.
    spread: Vec<u32>,
}

impl Islands {
    /// The islands of `ten`'s NPUs, when its slowest edges join two or more islands of at least
    /// two NPUs each.
    pub(super) fn of(ten: &Ten, chunks: usize) -> Option<Islands> {
        let slow = ten.edges.iter().map(|e| e.span).max()?;
        if ten.edges.iter().all(|e| e.span == slow) {
            return None;
        }
        let mut uf = petgraph::unionfind::UnionFind::<u32>::new(ten.npus);
        for e in ten.edges.iter().filter(|e| e.span < slow) {
            uf.union(e.src, e.dst);
        }
        let labels = uf.into_labeling();
        let mut index = std::collections::HashMap::new();
        let of: Vec<u32> = labels
            .iter()
            .map(|&l| {
                let n = index.len() as u32;
                *index.entry(l).or_insert(n)
            })
            .collect();
        let islands = index.len();
        if islands < 2 || islands * 2 > ten.npus {
            return None;
        }
        Some(Islands { of, chunks, reached: vec![0; islands * chunks], spread: vec![0; chunks] })
    }

    pub(super) fn reached(&self, v: u32, c: u32) -> u32 {
        self.reached[self.of[v as usize] as usize * self.chunks + c as usize]
    }

    pub(super) fn add(&mut self, v: u32, c: u32) {
        let r = &mut self.reached[self.of[v as usize] as usize * self.chunks + c as usize];
        *r += 1;
        if *r == 1 {
            self.spread[c as usize] += 1;
        }
    }

    pub(super) fn crosses(&self, u: u32, v: u32) -> bool {
        self.of[u as usize] != self.of[v as usize]
    }
}

impl State<'_> {
    /// On an edge into another island: a requested chunk that island has nowhere yet, the one
    /// spread to the fewest islands, among at most `NOVEL_SCAN` candidates from a random
    /// start (the pick stays O(1) on long candidate lists; stale entries are left to `pick`).
    pub(super) fn pick_novel(&mut self, e: u32, v: u32, t: u32, span: u32) -> Option<u32> {
        let list = &self.cand[e as usize];
        let n = list.len();
        if n == 0 {
            return None;
        }
        let islands = self.islands.as_ref().expect("islands");
        let start = self.rng.below(n);
        let mut best: Option<(u32, usize)> = None;
        for j in 0..n.min(NOVEL_SCAN) {
            let i = (start + j) % n;
            let c = list[i];
            if islands.reached(v, c) != 0 || self.classify(v, c, t, span) != Class::Req {
                continue;
            }
            let spread = islands.spread[c as usize];
            if best.is_none_or(|(s, _)| spread < s) {
                best = Some((spread, i));
            }
        }
        best.map(|(_, i)| self.cand[e as usize].swap_remove(i))
    }
}
