//! Crossbar ports in the matcher: a crossbar edge holds an uplink and a downlink port, and a
//! greedy pass over the free edges can leave ports idle that a better pairing would use; each
//! timestep a maximum matching of free uplinks to free downlinks goes first.

use super::State;
use std::collections::HashMap;

/// The crossbar matching's tables (`State::matching_first`), reused at every timestep.
#[derive(Default)]
pub(super) struct Matching {
    /// Positions in the order of the free crossbar edges.
    cand_edges: Vec<usize>,
    /// Compact port ids.
    up_id: HashMap<u32, usize>,
    down_id: HashMap<u32, usize>,
    /// Uplink → (downlink, position).
    adj: Vec<Vec<(usize, usize)>>,
    /// Downlink → (uplink, position) matched to it.
    match_down: Vec<Option<(usize, usize)>>,
    seen: Vec<bool>,
    first: Vec<bool>,
    reordered: Vec<(u32, u32, u64, u32)>,
}

impl State<'_> {
    /// Crossbar edges (an uplink and a downlink port) compete for ports: a greedy pass can
    /// leave ports idle that a better pairing would use. Put a maximum matching of free
    /// uplinks to free downlinks (augmenting paths, seeded with the greedy order) first, so the
    /// pass below takes it; the other edges keep their order behind it.
    pub(super) fn matching_first(&mut self, order: &mut Vec<(u32, u32, u64, u32)>, busy_until: &[u32], t: u32) {
        let ten = self.p.ten;
        let mut m = std::mem::take(&mut self.matching);
        m.cand_edges.clear();
        for (i, o) in order.iter().enumerate() {
            let edge = &ten.edges[o.3 as usize];
            if edge.resources.len() == 2
                && edge.resources.iter().all(|&r| busy_until[r as usize] <= t)
                && self.viable(o.3, t, o.0)
            {
                m.cand_edges.push(i);
            }
        }
        if m.cand_edges.len() < 2 {
            self.matching = m;
            return;
        }
        // Compact port ids.
        m.up_id.clear();
        m.down_id.clear();
        m.adj.iter_mut().for_each(Vec::clear);
        let mut ups = 0;
        for &i in &m.cand_edges {
            let r = &ten.edges[order[i].3 as usize].resources;
            let n = m.up_id.len();
            let u = *m.up_id.entry(r[0]).or_insert(n);
            let n = m.down_id.len();
            let d = *m.down_id.entry(r[1]).or_insert(n);
            if m.adj.len() <= u {
                m.adj.resize_with(u + 1, Vec::new);
            }
            ups = ups.max(u + 1);
            m.adj[u].push((d, i));
        }
        m.match_down.clear();
        m.match_down.resize(m.down_id.len(), None);
        fn augment(
            u: usize,
            adj: &[Vec<(usize, usize)>],
            seen: &mut [bool],
            match_down: &mut [Option<(usize, usize)>],
        ) -> bool {
            for &(d, pos) in &adj[u] {
                if seen[d] {
                    continue;
                }
                seen[d] = true;
                let free = match match_down[d] {
                    None => true,
                    Some((u2, _)) => augment(u2, adj, seen, match_down),
                };
                if free {
                    match_down[d] = Some((u, pos));
                    return true;
                }
            }
            false
        }
        for u in 0..ups {
            m.seen.clear();
            m.seen.resize(m.down_id.len(), false);
            augment(u, &m.adj[..ups], &mut m.seen, &mut m.match_down);
        }
        m.first.clear();
        m.first.resize(order.len(), false);
        for &(_, pos) in m.match_down.iter().flatten() {
            m.first[pos] = true;
        }
        m.reordered.clear();
        m.reordered.extend(order.iter().enumerate().filter(|(i, _)| m.first[*i]).map(|(_, o)| *o));
        m.reordered.extend(order.iter().enumerate().filter(|(i, _)| !m.first[*i]).map(|(_, o)| *o));
        std::mem::swap(order, &mut m.reordered);
        self.matching = m;
    }
}
