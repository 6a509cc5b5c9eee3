//! The routed planner's schedulers: a plan's hops placed in time on their links, event-driven
//! (`list`), packed into slots item by item (`slots`), or round by round, the busiest links
//! first (`rounds`); each returns the messages in start order and the planned makespan.

use super::{Hops, Segments, tie};
use crate::synth::SynthError;
use crate::topology::Topology;
use ordered_float::OrderedFloat;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What each scheduler is given: the hops of the items' paths, at up to `group` chunks a
/// message (`None`: every chunk waiting), ties broken by `seed`.
#[derive(Clone, Copy)]
pub(super) struct Job<'a> {
    pub(super) topo: &'a Topology,
    pub(super) hops: &'a Hops,
    pub(super) items: usize,
    pub(super) chunk_bytes: f64,
    pub(super) group: Option<u32>,
    pub(super) seed: u64,
    pub(super) cancelled: &'a dyn Fn() -> bool,
}

/// A list schedule: its messages in start order, and when the last ends.
pub(super) struct Plan {
    pub(super) msgs: Vec<Msg>,
    pub(super) makespan_ns: f64,
}

/// One message of a plan: when it starts, on which segment, and its items.
pub(super) struct Msg {
    pub(super) start: f64,
    pub(super) seg: u32,
    pub(super) items: Vec<u32>,
}

/// List-schedules the hops (event-driven): whenever a segment's links are free and chunks
/// wait for it, it sends up to `group` of them, those with the most hops left first.
pub(super) fn list_schedule(job: &Job) -> Result<Plan, SynthError> {
    let Job { topo, hops, items, chunk_bytes, group, seed, cancelled } = *job;
    let links = topo.links();
    let Hops { segs, start: hop_start, seg: hop_seg } = hops;
    let nseg = segs.links.len();
    let cap = group.map_or(usize::MAX, |g| g.max(1) as usize);
    // Per segment, the items ready to take it: (hops left, seeded tie, item).
    type Key = (u32, u64, u32);
    let mut queue: Vec<BinaryHeap<Key>> = (0..nseg).map(|_| BinaryHeap::new()).collect();
    let mut link_free = vec![0.0f64; links.len()];
    let mut seg_pending = vec![false; nseg];
    let mut hop = vec![0u32; items]; // next hop of each item
    // Events: (time, kind 0 = arrival / 1 = segment may send, id).
    let mut events: BinaryHeap<Reverse<(OrderedFloat<f64>, u8, u32)>> = BinaryHeap::new();
    let key = |i: usize, h: u32| -> Key {
        let left = (hop_start[i + 1] - hop_start[i]) as u32 - h;
        (left, tie(seed, i, 0), i as u32)
    };
    for i in 0..items {
        if hop_start[i + 1] > hop_start[i] {
            events.push(Reverse((OrderedFloat(0.0), 0, i as u32)));
        }
    }
    let mut msgs: Vec<Msg> = Vec::new();
    let mut polls = 0usize;
    while let Some(Reverse((OrderedFloat(t), kind, id))) = events.pop() {
        polls += 1;
        if polls.is_multiple_of(8192) && cancelled() {
            return Err(SynthError::Cancelled);
        }
        if kind == 0 {
            let i = id as usize;
            let h = hop[i];
            let s = hop_seg[hop_start[i] + h as usize] as usize;
            queue[s].push(key(i, h));
            if !seg_pending[s] {
                seg_pending[s] = true;
                events.push(Reverse((OrderedFloat(t), 1, s as u32)));
            }
            continue;
        }
        let s = id as usize;
        seg_pending[s] = false;
        if queue[s].is_empty() {
            continue;
        }
        let free = segs.links[s].iter().map(|&l| link_free[l as usize]).fold(0.0f64, f64::max);
        if free > t {
            seg_pending[s] = true;
            events.push(Reverse((OrderedFloat(free), 1, s as u32)));
            continue;
        }
        let mut taken = Vec::new();
        while taken.len() < cap {
            let Some((_, _, i)) = queue[s].pop() else { break };
            taken.push(i);
        }
        let end = t + segs.time(topo, s, taken.len(), chunk_bytes);
        for &l in &segs.links[s] {
            link_free[l as usize] = end;
        }
        for &i in &taken {
            let i = i as usize;
            hop[i] += 1;
            if hop_start[i] + (hop[i] as usize) < hop_start[i + 1] {
                events.push(Reverse((OrderedFloat(end), 0, i as u32)));
            }
        }
        msgs.push(Msg { start: t, seg: s as u32, items: taken });
        if !queue[s].is_empty() {
            seg_pending[s] = true;
            events.push(Reverse((OrderedFloat(end), 1, s as u32)));
        }
    }
    let makespan_ns = link_free.iter().copied().fold(0.0, f64::max);
    Ok(Plan { msgs, makespan_ns })
}

/// Packs the hops into slots, offline: items with the longest paths first, each hop into the
/// earliest slot after its previous hop's where its links carry no other segment's message and
/// its segment's message has fewer than `group` chunks. Where the list schedule defers a
/// shorter chunk at its source until the longer ones are gone (and it then trails behind with
/// hops to go), this fixes every chunk's whole path at once. The slots' messages are then
/// timed as the simulator would (a message starts when its links are free and its chunks
/// have arrived), in slot order.
pub(super) fn slot_schedule(job: &Job) -> Result<Plan, SynthError> {
    let Job { topo, hops, items, chunk_bytes, group, seed, cancelled } = *job;
    let links = topo.links();
    let Hops { segs, start: hop_start, seg: hop_seg } = hops;
    let cap = group.map_or(u32::MAX, |g| g.max(1));
    let len = |i: usize| hop_start[i + 1] - hop_start[i];
    let mut order: Vec<usize> = (0..items).filter(|&i| len(i) > 0).collect();
    order.sort_unstable_by_key(|&i| (Reverse(len(i)), tie(seed, i, 1)));
    // Per link, per slot: the segment whose message uses it (u32::MAX: none) and its chunks.
    let mut used: Vec<Vec<(u32, u32)>> = vec![Vec::new(); links.len()];
    // Per link, the first slot that may still take a chunk.
    let mut open = vec![0usize; links.len()];
    let mut slot_of = vec![0u32; hop_seg.len()];
    for (n, &i) in order.iter().enumerate() {
        if n.is_multiple_of(4096) && cancelled() {
            return Err(SynthError::Cancelled);
        }
        let mut next = 0usize;
        for h in hop_start[i]..hop_start[i + 1] {
            let sg = hop_seg[h];
            let ls = &segs.links[sg as usize];
            let mut x = ls.iter().map(|&l| open[l as usize]).max().unwrap_or(0).max(next);
            loop {
                let fits = ls.iter().all(|&l| match used[l as usize].get(x) {
                    None => true,
                    Some(&(o, c)) => o == u32::MAX || (o == sg && c < cap),
                });
                if fits {
                    break;
                }
                x += 1;
            }
            for &l in ls {
                let u = &mut used[l as usize];
                if u.len() <= x {
                    u.resize(x + 1, (u32::MAX, 0));
                }
                u[x] = (sg, u[x].1 + 1);
                let o = &mut open[l as usize];
                while *o < u.len() && u[*o].1 >= cap {
                    *o += 1;
                }
            }
            slot_of[h] = x as u32;
            next = x + 1;
        }
    }
    Ok(timed(topo, hops, items, chunk_bytes, &slot_of))
}

/// The slots' messages (every hop `h` in slot `slot_of[h]`), timed as the simulator would: in
/// slot order, a message starts when its links are free and its chunks have arrived.
pub(super) fn timed(topo: &Topology, hops: &Hops, items: usize, chunk_bytes: f64, slot_of: &[u32]) -> Plan {
    let Hops { segs, start: hop_start, seg: hop_seg } = hops;
    // Every hop as (slot, segment, item), sorted: the messages are the runs of one (slot,
    // segment), in slot order, each with its chunks in item order.
    let mut keyed: Vec<(u64, u32)> = Vec::with_capacity(hop_seg.len());
    for i in 0..items {
        for h in hop_start[i]..hop_start[i + 1] {
            keyed.push(((slot_of[h] as u64) << 32 | hop_seg[h] as u64, i as u32));
        }
    }
    keyed.sort_unstable();
    let mut link_free = vec![0.0f64; topo.links().len()];
    let mut ready = vec![0.0f64; items];
    let mut msgs = Vec::new();
    let mut k = 0;
    while k < keyed.len() {
        let key = keyed[k].0;
        let mut its = Vec::new();
        while k < keyed.len() && keyed[k].0 == key {
            its.push(keyed[k].1);
            k += 1;
        }
        let seg = key as u32;
        let ls = &segs.links[seg as usize];
        let mut t = ls.iter().map(|&l| link_free[l as usize]).fold(0.0f64, f64::max);
        for &i in &its {
            t = t.max(ready[i as usize]);
        }
        let end = t + segs.time(topo, seg as usize, its.len(), chunk_bytes);
        for &l in ls {
            link_free[l as usize] = end;
        }
        for &i in &its {
            ready[i as usize] = end;
        }
        msgs.push(Msg { start: t, seg, items: its });
    }
    // `emit` reads the messages in start order.
    msgs.sort_by(|a, b| a.start.total_cmp(&b.start));
    let makespan_ns = link_free.iter().copied().fold(0.0, f64::max);
    Plan { msgs, makespan_ns }
}

/// A segment's bid for a round: (bid, seeded tie, segment).
type Bid = (OrderedFloat<f64>, u64, u32);

/// Packs the hops into rounds, one round at a time: every segment with chunks ready (their
/// previous hop placed in an earlier round) bids the work left on its busiest link plus the
/// hops its first chunk has still to go, and the bids are taken highest first wherever all of
/// a segment's links are still free in the round. Serving the busiest links in every round is
/// what edge-colours a switch's all-to-all in about as many rounds as its busiest port has
/// messages (König's bound), where first fit, item by item (`slot_schedule`), leaves ports
/// idle that wait for a partner (rail:4x8 at 32 MiB: 1.21× the flow bound). A round is one
/// chunk's time: a message of n chunks holds its links for n rounds, and a segment with fewer
/// chunks ready than a message may carry bids in proportion.
pub(super) fn round_schedule(job: &Job) -> Result<Plan, SynthError> {
    let Job { topo, hops, items, chunk_bytes, group, seed, cancelled } = *job;
    let links = topo.links();
    let Hops { segs, start: hop_start, seg: hop_seg } = hops;
    let cap = group.map_or(usize::MAX, |g| g.max(1) as usize);
    let nseg = segs.links.len();
    // A chunk's time on each segment, and the work left on each link: the time of every hop
    // still to be placed over it.
    let unit: Vec<f64> = (0..nseg).map(|s| segs.time(topo, s, 1, chunk_bytes)).collect();
    let mut left = vec![0.0f64; links.len()];
    for &s in hop_seg {
        for &l in &segs.links[s as usize] {
            left[l as usize] += unit[s as usize];
        }
    }
    // Per segment, its ready items: (hops left, seeded tie, item), most hops left first.
    type Queue = BinaryHeap<(u32, u64, u32)>;
    let mut queue: Vec<Queue> = (0..nseg).map(|_| BinaryHeap::new()).collect();
    let mut active: Vec<u32> = Vec::new();
    let mut is_active = vec![false; nseg];
    let mut next = hop_start[..items].to_vec(); // each item's next hop (an index into the hops)
    let enqueue = |i: usize, h: usize, queue: &mut [Queue], active: &mut Vec<u32>, is_active: &mut [bool]| {
        let s = hop_seg[h] as usize;
        queue[s].push(((hop_start[i + 1] - h) as u32, tie(seed, i, 2), i as u32));
        if !is_active[s] {
            is_active[s] = true;
            active.push(s as u32);
        }
    };
    for (i, &h) in next.iter().enumerate() {
        if h < hop_start[i + 1] {
            enqueue(i, h, &mut queue, &mut active, &mut is_active);
        }
    }
    let mut slot_of = vec![0u32; hop_seg.len()];
    let mut pick = Pick::new(links.len());
    let mut placed = 0usize;
    let mut round = 0u32;
    let mut bids: Vec<Bid> = Vec::new();
    // Items whose next hop is ready from a later round: (round, item).
    let mut arrivals: BinaryHeap<Reverse<(u32, u32)>> = BinaryHeap::new();
    while placed < hop_seg.len() {
        while let Some(&Reverse((r, i))) = arrivals.peek() {
            if r > round {
                break;
            }
            arrivals.pop();
            let i = i as usize;
            enqueue(i, next[i], &mut queue, &mut active, &mut is_active);
        }
        if round.is_multiple_of(64) && cancelled() {
            return Err(SynthError::Cancelled);
        }
        bids.clear();
        for &s in &active {
            let s = s as usize;
            let Some(&(to_go, _, _)) = queue[s].peek() else { continue };
            let busiest = segs.links[s].iter().map(|&l| left[l as usize]).fold(0.0f64, f64::max);
            let mut bid = busiest + f64::from(to_go - 1) * unit[s];
            // A message of fewer chunks than it may carry pays a whole α for less: it bids in
            // proportion (hier:ring2,fc4,switch4 at 16 MiB, two chunks a message: 1.19× -> 1.14×
            // the flow bound).
            if cap != usize::MAX {
                bid *= queue[s].len().min(cap) as f64 / cap as f64;
            }
            bids.push((OrderedFloat(bid), tie(seed, s, round as usize), s as u32));
        }
        bids.sort_unstable_by(|a, b| b.cmp(a));
        let chosen = pick.round(segs, &bids, round);
        for s in chosen {
            let ls = &segs.links[s];
            // A message of n chunks holds its links for n rounds (a round is one chunk's time).
            let n = queue[s].len().min(cap) as u32;
            for &l in ls {
                pick.busy_until[l as usize] = round + n;
            }
            for _ in 0..cap {
                let Some((_, _, i)) = queue[s].pop() else { break };
                let i = i as usize;
                slot_of[next[i]] = round;
                next[i] += 1;
                placed += 1;
                for &l in ls {
                    left[l as usize] -= unit[s];
                }
                if next[i] < hop_start[i + 1] {
                    arrivals.push(Reverse((round + n, i as u32)));
                }
            }
        }
        active.retain(|&s| {
            let keep = !queue[s as usize].is_empty();
            is_active[s as usize] = keep;
            keep
        });
        round += 1;
    }
    Ok(timed(topo, hops, items, chunk_bytes, &slot_of))
}

/// One round's choice of segments: no two share a link. Segments of one link (between two
/// NPUs) share it with none; those through several switches are taken greedily, highest bid
/// first; those through one switch (an uplink and a downlink) form a bipartite graph, matched
/// uplink by uplink in bid order with augmenting paths (Kuhn), so a port that must send in
/// every round is not left idle because a lower bid took the downlink it needed.
struct Pick {
    /// Per link, the round that took it last, and (in that round) the segment that took it.
    taken_in: Vec<u32>,
    owner: Vec<u32>,
    /// Per link, the first round after the message it carries.
    busy_until: Vec<u32>,
    /// Per link, the augmenting search that last visited it, and the current search.
    seen_in: Vec<u32>,
    search_id: u32,
    /// The current round's single-switch candidates, by uplink: (uplink, rank, segment).
    adj: Vec<(u32, u32, u32)>,
    /// Per uplink, its candidates' range in `adj` (stamped by round).
    range_in: Vec<u32>,
    range: Vec<(u32, u32)>,
    /// Edge visits the augmenting searches may still make this round.
    budget: usize,
}

impl Pick {
    fn new(links: usize) -> Pick {
        Pick {
            taken_in: vec![u32::MAX; links],
            owner: vec![u32::MAX; links],
            busy_until: vec![0; links],
            seen_in: vec![u32::MAX; links],
            search_id: 0,
            adj: Vec::new(),
            range_in: vec![u32::MAX; links],
            range: vec![(0, 0); links],
            budget: 0,
        }
    }

    fn free(&self, l: u32, round: u32) -> bool {
        self.taken_in[l as usize] != round && self.busy_until[l as usize] <= round
    }

    fn take(&mut self, l: u32, s: u32, round: u32) {
        self.taken_in[l as usize] = round;
        self.owner[l as usize] = s;
    }

    /// The segments to send in `round`, from its bids (highest first).
    fn round(&mut self, segs: &Segments, bids: &[Bid], round: u32) -> Vec<usize> {
        let mut chosen = Vec::new();
        self.adj.clear();
        for (rank, b) in bids.iter().enumerate() {
            let s = b.2;
            let ls = &segs.links[s as usize];
            if ls.len() == 2 {
                self.adj.push((ls[0], rank as u32, s));
            } else if ls.iter().all(|&l| self.free(l, round)) {
                for &l in ls {
                    self.take(l, s, round);
                }
                chosen.push(s as usize);
            }
        }
        // Uplinks in the order of their best bid; each one's candidates in bid order.
        self.adj.sort_unstable_by_key(|&(up, rank, _)| (up, rank));
        let mut ups: Vec<(u32, u32)> = Vec::new(); // (best rank, uplink)
        let mut k = 0;
        while k < self.adj.len() {
            let up = self.adj[k].0;
            let start = k;
            while k < self.adj.len() && self.adj[k].0 == up {
                k += 1;
            }
            self.range_in[up as usize] = round;
            self.range[up as usize] = (start as u32, k as u32);
            ups.push((self.adj[start].1, up));
        }
        ups.sort_unstable();
        self.budget = 8 * self.adj.len() + 1024;
        for &(_, up) in &ups {
            if self.free(up, round) {
                // A search's visits are its own: the next uplink may pass the same downlinks.
                self.search_id = self.search_id.wrapping_add(1);
                self.search(segs, up, round);
            }
        }
        for &(_, up) in &ups {
            if self.taken_in[up as usize] == round {
                chosen.push(self.owner[up as usize] as usize);
            }
        }
        chosen.sort_unstable();
        chosen.dedup();
        chosen
    }

    /// An augmenting path from the free uplink `up`: a candidate whose downlink is free, or
    /// whose downlink's holder can move to another downlink.
    fn search(&mut self, segs: &Segments, up: u32, round: u32) -> bool {
        if self.range_in[up as usize] != round {
            return false;
        }
        let (a, b) = self.range[up as usize];
        for k in a..b {
            // Out of budget, a free downlink is still taken; only moving holders stops.
            self.budget = self.budget.saturating_sub(1);
            let s = self.adj[k as usize].2;
            let down = segs.links[s as usize][1];
            if self.seen_in[down as usize] == self.search_id {
                continue;
            }
            self.seen_in[down as usize] = self.search_id;
            let moved = if self.free(down, round) {
                true
            } else {
                // Only a holder of this round through a single switch can move (its uplink is
                // then free again); one still sending from an earlier round cannot.
                let holder = self.owner[down as usize];
                self.budget > 0 && self.taken_in[down as usize] == round && segs.links[holder as usize].len() == 2 && {
                    let hl = &segs.links[holder as usize];
                    let other = hl[0];
                    self.taken_in[other as usize] = u32::MAX;
                    let ok = self.search(segs, other, round);
                    if !ok {
                        self.take(other, holder, round);
                    }
                    ok
                }
            };
            if moved {
                self.take(up, s, round);
                self.take(down, s, round);
                return true;
            }
        }
        false
    }
}
