//! The matcher's timeline: when moves land, when ports free up, and each timestep's order of
//! the free edges (shortest first, the most constrained destination first, ties at random),
//! each of which then takes a chunk.

use super::State;
use crate::ten::Ten;

/// What `plan` tracks from one timestep to the next besides the chunks: when moves land,
/// when ports free up, and the per-timestep edge order (kept to reuse its allocation).
pub(super) struct Timeline {
    /// Moves by the timestep they land.
    pub(super) arrivals: Vec<Vec<u32>>,
    /// Per TEN resource (port), the timestep it is free again.
    pub(super) busy_until: Vec<u32>,
    latest_busy: u32,
    /// Free edges with something to carry, in the order they get to pick:
    /// (span, free edges into the destination, tie-break key, edge).
    pub(super) order: Vec<(u32, u32, u64, u32)>,
    /// Per NPU, free edges into it this timestep (zero between timesteps).
    options: Vec<u32>,
    /// Active edges whose ports are busy, by the timestep they free up (still `is_active`).
    parked: Vec<Vec<u32>>,
    /// (span, edge) of the messages started this timestep (kept to reuse its allocation).
    opened: Vec<(u32, u32)>,
}

impl Timeline {
    pub(super) fn new(ten: &Ten) -> Timeline {
        Timeline {
            arrivals: Vec::new(),
            busy_until: vec![0u32; ten.resources],
            latest_busy: 0,
            order: Vec::new(),
            options: vec![0u32; ten.npus],
            parked: Vec::new(),
            opened: Vec::new(),
        }
    }

    /// Fills `order`: free edges with something to carry, shortest first, ties at random.
    pub(super) fn rank(&mut self, st: &mut State, seed: u64, t: u32) {
        let ten = st.p.ten;
        if let Some(list) = self.parked.get_mut(t as usize) {
            st.active.append(list);
        }
        self.order.clear();
        let mut k = 0;
        while k < st.active.len() {
            let e = st.active[k];
            if st.cand[e as usize].is_empty() {
                st.is_active[e as usize] = false;
                st.active.swap_remove(k);
                continue;
            }
            let edge = &ten.edges[e as usize];
            let wake = edge.resources.iter().map(|&r| self.busy_until[r as usize]).max().unwrap_or(0);
            if wake > t {
                // Busy: park it until its ports free up instead of rechecking every timestep.
                st.active.swap_remove(k);
                if self.parked.len() <= wake as usize {
                    self.parked.resize_with(wake as usize + 1, Vec::new);
                }
                self.parked[wake as usize].push(e);
                continue;
            }
            // Tie-break keys hash (seed, timestep, edge), so the order does not depend on how
            // the active list happens to be arranged.
            self.order.push((edge.span, 0, tie_key(seed, t, e), e));
            self.options[edge.dst as usize] += 1;
            k += 1;
        }
        // Most constrained destination first: an NPU reachable over few free edges now gets
        // its pick before the ports it needs are taken by NPUs with other options.
        for o in self.order.iter_mut() {
            o.1 = self.options[ten.edges[o.3 as usize].dst as usize];
        }
        for o in self.order.iter() {
            self.options[ten.edges[o.3 as usize].dst as usize] = 0;
        }
        self.order.sort_unstable();
    }

    /// Gives each edge of `order` whose ports are still free a chunk, if it has one to carry;
    /// whether any edge got one. Where a message carries up to `capacity` chunks, the edges
    /// that started one then take a second chunk each, in the same order, and so on: an NPU's
    /// chunks are spread over its free edges before any edge's message grows, so a timestep
    /// short of work sends smaller messages over more links, not full ones over a few
    /// (mesh:8x8's all-gather at 256 MiB, a shard a message: 1.024 → 1.012× its bound).
    pub(super) fn assign(&mut self, st: &mut State, t: u32) -> bool {
        let ten = st.p.ten;
        self.opened.clear();
        for &(span, _, _, e) in &self.order {
            let edge = &ten.edges[e as usize];
            if edge.resources.iter().any(|&r| self.busy_until[r as usize] > t) {
                continue; // a shared port was taken earlier in this timestep
            }
            let Some(c) = st.pick(e, t, span) else { continue };
            for &r in &edge.resources {
                self.busy_until[r as usize] = t + span;
            }
            self.latest_busy = self.latest_busy.max(t + span);
            let at = (t + span) as usize;
            if self.arrivals.len() <= at {
                self.arrivals.resize_with(at + 1, Vec::new);
            }
            let idx = st.start_move(e, c, t);
            self.arrivals[at].push(idx);
            self.opened.push((span, e));
        }
        let matched = !self.opened.is_empty();
        // Up to `capacity` chunks leave together (one message once merged); an edge that has
        // no more to carry drops out.
        for _ in 1..st.p.capacity {
            let arrivals = &mut self.arrivals;
            self.opened.retain(|&(span, e)| match st.pick(e, t, span) {
                Some(c) => {
                    arrivals[(t + span) as usize].push(st.start_move(e, c, t));
                    true
                }
                None => false,
            });
            if self.opened.is_empty() {
                break;
            }
        }
        matched
    }

    /// Whether every port is free after timestep `t` and no move lands after it.
    pub(super) fn quiet_after(&self, t: u32) -> bool {
        self.latest_busy <= t && self.arrivals.iter().skip(t as usize + 1).all(Vec::is_empty)
    }
}

fn tie_key(seed: u64, t: u32, e: u32) -> u64 {
    let mut z = seed ^ ((t as u64) << 32 | e as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
