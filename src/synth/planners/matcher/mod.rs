//! The randomized greedy matcher (TACOS VI) on the time-expanded network: moves chunks
//! (no combining) from where they are to where they are requested, one timestep at a time.
//!
//! Per timestep, every free TEN edge whose destination requests a chunk its source holds is
//! matched with one such chunk; shorter edges go first (shorter-link-first), ties in random
//! order, chunks at random. A chunk can be forwarded only once it has arrived (arrival-time
//! analysis). If a faster edge can deliver a chunk that is already on its way over a slower
//! one, the slower transfer is given another chunk its destination still needs, or dropped
//! (chunk replacement).
//!
//! Work per timestep is proportional to what can still move: each TEN edge keeps the list of
//! chunks its source holds and its destination requests, filled when a chunk arrives or a
//! request appears; stale entries are dropped lazily.

mod crossbar;
mod islands;
mod relay;
mod timeline;

use crate::rng::Rng;
use crate::slots::SlotTable;
use crate::synth::SynthError;
use crate::synth::phase::{GreedyError, Move, Plan, Problem};
use crossbar::Matching;
use islands::Islands;
use relay::{Relay, relay_tables};
use std::collections::HashMap;
use timeline::Timeline;

/// Random candidates `pick` compares by their copies before taking the rarest.
const RAREST_PROBES: usize = 8;
/// Random probes `pick` makes for a requested chunk before it scans the whole list.
const RANDOM_PROBES: usize = 4;
/// Arrivals a timestep takes (and requests and offers the start makes) between two polls of
/// the caller's stop.
const ARRIVALS_PER_POLL: usize = 1 << 14;
/// Whether the caller's stop, polled at every `ARRIVALS_PER_POLL`-th item `k` of a long loop
/// within a timestep (and only there), says stop.
#[inline]
fn polled_stop(k: usize, cancelled: &dyn Fn() -> bool) -> bool {
    k % ARRIVALS_PER_POLL == ARRIVALS_PER_POLL - 1 && cancelled()
}

/// Free edges per timestep up to which crossbar ports are matched with augmenting paths.
const MATCHING_LIMIT: usize = 4_096;
const FREE: u32 = u32::MAX;
const REQ: u32 = u32::MAX - 1;
const INFLIGHT: u32 = u32::MAX - 2;

struct State<'a> {
    p: &'a Problem<'a>,
    rng: Rng,
    slot: SlotTable<u32>,
    cand: Vec<Vec<u32>>,
    active: Vec<u32>,
    is_active: Vec<bool>,
    inflight: HashMap<u64, u32>,
    moves: Vec<Move>,
    dropped: Vec<bool>,
    outstanding: usize,
    uniform_spans: bool,
    relay: Option<Relay>,
    replacements: usize,
    /// Islands of fast links, where the slowest edges join several of them (the pods behind
    /// a switch): `None` on fabrics without that shape.
    islands: Option<Islands>,
    /// `matching_first`'s tables, kept from timestep to timestep.
    matching: Matching,
    /// Per chunk, the NPUs that hold it or have it on its way (`pick` prefers the rarest).
    copies: Vec<u32>,
}

fn key(v: u32, c: u32) -> u64 {
    (v as u64) << 32 | c as u64
}

#[derive(PartialEq)]
enum Class {
    /// Requested, and no faster neighbour will bring it sooner.
    Req,
    /// On its way over a slower edge; this one would deliver it sooner.
    Replace,
    Stale,
}

/// Plans the movement. Deterministic for a given seed. `cancelled` is polled once per timestep
/// and every `ARRIVALS_PER_POLL` arrivals within one.
pub fn plan(p: &Problem, seed: u64, cancelled: &dyn Fn() -> bool) -> Result<Plan, SynthError> {
    let ten = p.ten;
    let mut st = State::new(p, seed, cancelled)?;
    let mut tl = Timeline::new(ten);
    let crossbar = ten.edges.iter().any(|e| e.resources.len() == 2);
    let mut t: u32 = 0;
    loop {
        if let Some(list) = tl.arrivals.get_mut(t as usize) {
            // Polled within the timestep too: on fc:1024 the million arrivals of one timestep
            // each offer their chunk over 1023 edges, half a minute without a poll.
            for (k, m) in std::mem::take(list).into_iter().enumerate() {
                if polled_stop(k, cancelled) {
                    return Err(SynthError::Cancelled);
                }
                st.arrive(m, t);
            }
        }
        if st.outstanding == 0 {
            break;
        }
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        if t >= crate::limits::MAX_GREEDY_TIMESTEPS {
            return Err(GreedyError::Horizon(crate::limits::MAX_GREEDY_TIMESTEPS).into());
        }
        tl.rank(&mut st, seed, t);
        if crossbar && tl.order.len() <= MATCHING_LIMIT {
            st.matching_first(&mut tl.order, &tl.busy_until, t);
        }
        let matched = tl.assign(&mut st, t);
        if !matched && tl.quiet_after(t) {
            return Err(GreedyError::Stuck(st.outstanding).into());
        }
        t += 1;
    }
    Ok(st.into_plan(t))
}

impl<'a> State<'a> {
    /// The state at t = 0: the precondition held, the postcondition requested, and held chunks
    /// offered on the edges towards NPUs that request them.
    fn new(p: &'a Problem<'a>, seed: u64, cancelled: &dyn Fn() -> bool) -> Result<State<'a>, SynthError> {
        let ten = p.ten;
        let first_span = ten.edges.first().map(|e| e.span).unwrap_or(1);
        let mut st = State {
            p,
            rng: Rng::new(seed),
            slot: fill_free(ten.npus, p.num_chunks),
            cand: vec![Vec::new(); ten.edges.len()],
            active: Vec::new(),
            is_active: vec![false; ten.edges.len()],
            inflight: HashMap::new(),
            moves: Vec::new(),
            dropped: Vec::new(),
            outstanding: 0,
            uniform_spans: ten.edges.iter().all(|e| e.span == first_span),
            relay: None,
            replacements: 0,
            islands: Islands::of(ten, p.num_chunks),
            matching: Matching::default(),
            copies: vec![0; p.num_chunks],
        };
        for &[v, c] in p.pre {
            st.slot.set(v as usize, c as usize, 0);
            st.copies[c as usize] += 1;
            if let Some(i) = &mut st.islands {
                i.add(v, c);
            }
        }
        st.relay = relay_tables(p)?;
        // Polled as the arrivals are: on fc:1448 an all-gather's two million requests, each
        // over 1447 edges, took eight seconds.
        for (k, &[v, c]) in p.post.iter().enumerate() {
            if polled_stop(k, cancelled) {
                return Err(SynthError::Cancelled);
            }
            if *st.slot.get(v as usize, c as usize) == FREE {
                st.request(v, c);
            }
        }
        for (k, &[v, c]) in p.pre.iter().enumerate() {
            if polled_stop(k, cancelled) {
                return Err(SynthError::Cancelled);
            }
            st.push_out(v, c);
        }
        Ok(st)
    }

    /// Move `m` lands at timestep `t` (unless it was dropped): its destination holds the chunk
    /// and offers it on.
    #[inline]
    fn arrive(&mut self, m: u32, t: u32) {
        if self.dropped[m as usize] {
            return;
        }
        let mv = self.moves[m as usize];
        let v = self.p.ten.edges[mv.edge as usize].dst;
        self.slot.set(v as usize, mv.chunk as usize, t);
        self.inflight.remove(&key(v, mv.chunk));
        self.outstanding -= 1;
        self.push_out(v, mv.chunk);
    }

    /// Records chunk `c` leaving over edge `e` at timestep `t`; returns the move's index.
    #[inline]
    fn start_move(&mut self, e: u32, c: u32, t: u32) -> u32 {
        let idx = self.moves.len() as u32;
        self.moves.push(Move { step: t, edge: e, chunk: c });
        self.dropped.push(false);
        let v = self.p.ten.edges[e as usize].dst;
        if *self.slot.get(v as usize, c as usize) != INFLIGHT {
            self.copies[c as usize] += 1;
            if let Some(i) = &mut self.islands {
                i.add(v, c);
            }
        }
        self.slot.set(v as usize, c as usize, INFLIGHT);
        self.inflight.insert(key(v, c), idx);
        idx
    }

    /// The moves that were not dropped, in order, and the plan's length `t`.
    fn into_plan(self, t: u32) -> Plan {
        let mut moves = Vec::with_capacity(self.moves.len());
        for (m, gone) in self.moves.iter().zip(&self.dropped) {
            if !gone {
                moves.push(*m);
            }
        }
        Plan { moves, timesteps: t, replacements: self.replacements }
    }
}

fn fill_free(npus: usize, chunks: usize) -> SlotTable<u32> {
    let mut t: SlotTable<u32> = SlotTable::new(npus, chunks);
    match &mut t {
        SlotTable::Dense { v, .. } => v.iter_mut().for_each(|x| *x = FREE),
        SlotTable::Sparse { default, .. } => *default = FREE,
    }
    t
}

impl State<'_> {
    fn held(&self, v: u32, c: u32) -> bool {
        *self.slot.get(v as usize, c as usize) < INFLIGHT
    }

    fn activate(&mut self, e: u32) {
        if !self.is_active[e as usize] {
            self.is_active[e as usize] = true;
            self.active.push(e);
        }
    }

    /// `u` now holds `c`: offer it on every edge to an NPU that wants it.
    fn push_out(&mut self, u: u32, c: u32) {
        let ten = self.p.ten;
        for &e in ten.out_edges(u as usize) {
            let w = ten.edges[e as usize].dst;
            let s = *self.slot.get(w as usize, c as usize);
            if s == REQ || (s == INFLIGHT && !self.uniform_spans) {
                self.cand[e as usize].push(c);
                self.activate(e);
            }
        }
    }

    /// `v` requests `c`; with relaying, make sure some shortest-path predecessor will have it.
    fn request(&mut self, v: u32, c: u32) {
        let ten = self.p.ten;
        let mut v = v;
        loop {
            self.slot.set(v as usize, c as usize, REQ);
            self.outstanding += 1;
            for &e in ten.in_edges(v as usize) {
                let u = ten.edges[e as usize].src;
                if self.held(u, c) {
                    self.cand[e as usize].push(c);
                    self.activate(e);
                }
            }
            let Some(relay) = &self.relay else { return };
            let field = &relay.fields[relay.field_of_chunk[c as usize] as usize];
            let dv = field[v as usize];
            let mut preds = Vec::new();
            for &e in ten.in_edges(v as usize) {
                let edge = &ten.edges[e as usize];
                let du = field[edge.src as usize];
                if du != u32::MAX && du + edge.span == dv {
                    if *self.slot.get(edge.src as usize, c as usize) != FREE {
                        return; // held, requested or on its way: it will be offered to v
                    }
                    preds.push(edge.src);
                }
            }
            if preds.is_empty() {
                return; // unreachable; the stuck check reports it
            }
            v = preds[self.rng.below(preds.len())];
        }
    }

    /// When `c` will be at `w`: its arrival if held or on its way, else never.
    fn available_at(&self, w: u32, c: u32) -> u32 {
        match *self.slot.get(w as usize, c as usize) {
            REQ | FREE => u32::MAX,
            INFLIGHT => {
                let m = self.moves[self.inflight[&key(w, c)] as usize];
                m.step + self.p.ten.edges[m.edge as usize].span
            }
            at => at,
        }
    }

    /// `v` gets `c` about as soon as `t + span` (within half a span: the slow edge is the scarce
    /// one) over a much shorter edge (a third of the span or less: a fast domain such as a node's
    /// switch beside a slow rail) from a neighbour that has it or is getting it: the slow edge
    /// should not carry it (arrival-time analysis).
    fn covered(&self, v: u32, c: u32, t: u32, span: u32) -> bool {
        let ten = self.p.ten;
        ten.in_edges(v as usize).iter().any(|&e| {
            let edge = &ten.edges[e as usize];
            edge.span * 3 <= span && self.available_at(edge.src, c).saturating_add(edge.span) <= t + span + span / 2
        })
    }

    fn classify(&self, v: u32, c: u32, t: u32, span: u32) -> Class {
        match *self.slot.get(v as usize, c as usize) {
            // Covered chunks stay covered (availability only improves): the fast edge brings them.
            REQ if !self.uniform_spans && self.covered(v, c, t, span) => Class::Stale,
            REQ => Class::Req,
            INFLIGHT => {
                let m = self.moves[self.inflight[&key(v, c)] as usize];
                let arrival = m.step + self.p.ten.edges[m.edge as usize].span;
                if t + span < arrival { Class::Replace } else { Class::Stale }
            }
            _ => Class::Stale,
        }
    }

    /// Whether edge `e` has a requested chunk to carry now (drops stale entries on the way).
    fn viable(&mut self, e: u32, t: u32, span: u32) -> bool {
        let v = self.p.ten.edges[e as usize].dst;
        let mut i = 0;
        while i < self.cand[e as usize].len() {
            let c = self.cand[e as usize][i];
            match self.classify(v, c, t, span) {
                Class::Req => return true,
                Class::Stale => {
                    self.cand[e as usize].swap_remove(i);
                }
                _ => i += 1,
            }
        }
        false
    }

    /// Chooses a chunk for edge `e` at timestep `t`, or `None`.
    fn pick(&mut self, e: u32, t: u32, span: u32) -> Option<u32> {
        let v = self.p.ten.edges[e as usize].dst;
        let u = self.p.ten.edges[e as usize].src;
        if self.islands.as_ref().is_some_and(|i| i.crosses(u, v))
            && let Some(c) = self.pick_novel(e, v, t, span)
        {
            return Some(c);
        }
        // Fast path: a few random probes. Rarest first (`Problem::rarest_first`): of the
        // requested chunks among them, the one with the fewest copies (held or on their way) so
        // far, which keeps every chunk spreading at the same pace, so late in a phase each NPU's
        // neighbours still have chunks it lacks. Otherwise the first requested one.
        let probes = if self.p.rarest_first { RAREST_PROBES } else { RANDOM_PROBES };
        let mut best: Option<(u32, u32)> = None;
        for _ in 0..probes {
            let n = self.cand[e as usize].len();
            if n == 0 {
                break;
            }
            let i = self.rng.below(n);
            let c = self.cand[e as usize][i];
            match self.classify(v, c, t, span) {
                Class::Req => {
                    if best.is_none_or(|(_, b)| self.copies[c as usize] < self.copies[b as usize]) {
                        best = Some((i as u32, c));
                    }
                    if !self.p.rarest_first {
                        break;
                    }
                }
                Class::Stale => {
                    self.cand[e as usize].swap_remove(i);
                    // The swap moved the last entry to `i`: the kept index may be stale.
                    if let Some((j, b)) = best
                        && (j as usize >= self.cand[e as usize].len() || self.cand[e as usize][j as usize] != b)
                    {
                        best = Some((i as u32, b));
                    }
                }
                Class::Replace => {}
            }
        }
        if let Some((i, c)) = best {
            let list = &mut self.cand[e as usize];
            debug_assert_eq!(list[i as usize], c);
            list.swap_remove(i as usize);
            return Some(c);
        }
        if self.cand[e as usize].is_empty() {
            return None;
        }
        // Slow path: drop every stale entry, then choose by preference.
        let mut list = std::mem::take(&mut self.cand[e as usize]);
        let mut classes: Vec<Class> = Vec::with_capacity(list.len());
        list.retain(|&c| {
            let k = self.classify(v, c, t, span);
            let keep = k != Class::Stale;
            if keep {
                classes.push(k);
            }
            keep
        });
        let of = |want: Class, classes: &[Class]| -> Vec<usize> {
            (0..classes.len()).filter(|&i| classes[i] == want).collect()
        };
        let mut chosen = None;
        for want in [Class::Req, Class::Replace] {
            let idx = of(want, &classes);
            if idx.is_empty() {
                continue;
            }
            let i = idx[self.rng.below(idx.len())];
            let c = list.swap_remove(i);
            if classes[i] == Class::Replace {
                self.replace(v, c);
            }
            chosen = Some(c);
            break;
        }
        self.cand[e as usize] = list;
        chosen
    }

    /// `c` will reach `v` sooner over another edge: give its current move another chunk its
    /// source held when it started, or drop it.
    fn replace(&mut self, v: u32, c: u32) {
        self.replacements += 1;
        let old = self.inflight[&key(v, c)];
        let m = self.moves[old as usize];
        let u = self.p.ten.edges[m.edge as usize].src;
        let list = &self.cand[m.edge as usize];
        let found = (0..list.len()).find(|&i| {
            let c2 = list[i];
            *self.slot.get(v as usize, c2 as usize) == REQ && *self.slot.get(u as usize, c2 as usize) <= m.step
        });
        // The new move for c is recorded by the caller and overwrites inflight[(v, c)].
        self.inflight.remove(&key(v, c));
        match found {
            Some(i) => {
                let c2 = self.cand[m.edge as usize].swap_remove(i);
                self.moves[old as usize].chunk = c2;
                self.copies[c2 as usize] += 1;
                if let Some(i) = &mut self.islands {
                    i.add(v, c2);
                }
                self.slot.set(v as usize, c2 as usize, INFLIGHT);
                self.inflight.insert(key(v, c2), old);
            }
            None => {
                self.dropped[old as usize] = true;
                // The dropped move was one delivery of an outstanding request; the new move
                // for `c` takes its place, so the count stays.
            }
        }
    }
}
