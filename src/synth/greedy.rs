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

use super::SynthError;
use crate::rng::Rng;
use crate::slots::SlotTable;
use crate::ten::Ten;
use std::collections::HashMap;

/// Chunk movement to plan on a TEN: `pre` pairs are held at t = 0, `post` pairs must be held
/// at the end; both sorted by (npu, chunk) without duplicates. `live_npus` is the number of NPUs that can take part (not failed).
pub struct Problem<'a> {
    pub ten: &'a Ten,
    pub num_chunks: usize,
    pub pre: &'a [[u32; 2]],
    pub post: &'a [[u32; 2]],
    pub live_npus: usize,
    /// Each edge takes the requested chunk with the fewest copies among a few it looks at,
    /// instead of one at random: with unequal shares (`synth::shares`, a few roots holding
    /// most chunks) random picks leave NPUs idle late in a phase that rarest-first keeps busy.
    /// The synthesizers set it for combining collectives; the others keep the random pick.
    pub rarest_first: bool,
    /// Chunks an edge may start in one timestep (1: the TACOS matcher). Above one the TEN's
    /// timestep is that many chunks' message (`synth::greedy_grouped` on an all-gather), and
    /// the moves of one edge and timestep become one message.
    pub capacity: u32,
}

/// One chunk on one TEN edge, starting at timestep `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub step: u32,
    pub edge: u32,
    pub chunk: u32,
}

#[derive(Clone, Debug)]
pub struct Plan {
    /// Moves in the order they were made (by step).
    pub moves: Vec<Move>,
    /// Timesteps until the last arrival.
    pub timesteps: u32,
    /// Moves re-targeted or dropped because a faster edge delivered their chunk.
    pub replacements: usize,
}

/// Why the greedy (or a latency-mode planner) found no plan. A cancel is not one of these:
/// it is `SynthError::Cancelled`, the one way every planner stops on its caller's poll.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum GreedyError {
    #[error("no progress possible: {0} requested (npu, chunk) pairs cannot be reached")]
    Stuck(usize),
    #[error("relay tables would need {0} entries, over the limit of {1}")]
    TooManyRelayTables(usize, usize),
    #[error("the plan exceeds {0} timesteps; use a coarser discretization")]
    Horizon(u32),
    /// A planner that serves only some problems was given another (a caller's bug: the
    /// engine checks first).
    #[error("{0}")]
    Unsupported(&'static str),
    /// A pipelined all-reduce (`staged`) whose stages did not overlap (or that the overlap
    /// could not schedule): the one-stage plan serves.
    #[error("the stages in one timeline are no shorter than one after another")]
    StagesNotShorter,
}

/// Candidates an edge into another island looks through for one that island lacks.
const NOVEL_SCAN: usize = 256;
/// Random candidates `pick` compares by their copies before taking the rarest.
const RAREST_PROBES: usize = 8;
/// Random probes `pick` makes for a requested chunk before it scans the whole list.
const RANDOM_PROBES: usize = 4;
/// Free edges per timestep up to which crossbar ports are matched with augmenting paths.
const MATCHING_LIMIT: usize = 4_096;
const FREE: u32 = u32::MAX;
const REQ: u32 = u32::MAX - 1;
const INFLIGHT: u32 = u32::MAX - 2;
/// Entries of per-holder-set distance tables allowed for relaying (4 bytes each).
const MAX_RELAY_ENTRIES: usize = 1 << 26;

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

/// The crossbar matching's tables (`State::matching_first`), reused at every timestep.
#[derive(Default)]
struct Matching {
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

/// NPUs grouped by the edges faster than the slowest ones, and per (island, chunk) how many of
/// its NPUs hold the chunk or have it on its way. An edge into another island gets a chunk that
/// island has nowhere first: a second copy over the slow edges is bandwidth the cut lacks.
struct Islands {
    of: Vec<u32>,
    chunks: usize,
    reached: Vec<u32>,
    /// Per chunk, the islands it has reached.
    spread: Vec<u32>,
}

impl Islands {
    /// The islands of `ten`'s NPUs, when its slowest edges join two or more islands of at least
    /// two NPUs each.
    fn of(ten: &Ten, chunks: usize) -> Option<Islands> {
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

    fn reached(&self, v: u32, c: u32) -> u32 {
        self.reached[self.of[v as usize] as usize * self.chunks + c as usize]
    }

    fn add(&mut self, v: u32, c: u32) {
        let r = &mut self.reached[self.of[v as usize] as usize * self.chunks + c as usize];
        *r += 1;
        if *r == 1 {
            self.spread[c as usize] += 1;
        }
    }

    fn crosses(&self, u: u32, v: u32) -> bool {
        self.of[u as usize] != self.of[v as usize]
    }
}

struct Relay {
    field_of_chunk: Vec<u32>,
    fields: Vec<Vec<u32>>,
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

/// Plans the movement. Deterministic for a given seed. `cancelled` is polled once per timestep.
pub fn plan(p: &Problem, seed: u64, cancelled: &dyn Fn() -> bool) -> Result<Plan, SynthError> {
    let ten = p.ten;
    let mut st = State::new(p, seed)?;
    let mut tl = Timeline::new(ten);
    let crossbar = ten.edges.iter().any(|e| e.resources.len() == 2);
    let mut t: u32 = 0;
    loop {
        if let Some(list) = tl.arrivals.get_mut(t as usize) {
            for m in std::mem::take(list) {
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
    fn new(p: &'a Problem<'a>, seed: u64) -> Result<State<'a>, GreedyError> {
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
        for &[v, c] in p.post {
            if *st.slot.get(v as usize, c as usize) == FREE {
                st.request(v, c);
            }
        }
        for &[v, c] in p.pre {
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

/// What `plan` tracks from one timestep to the next besides the chunks: when moves land,
/// when ports free up, and the per-timestep edge order (kept to reuse its allocation).
struct Timeline {
    /// Moves by the timestep they land.
    arrivals: Vec<Vec<u32>>,
    /// Per TEN resource (port), the timestep it is free again.
    busy_until: Vec<u32>,
    latest_busy: u32,
    /// Free edges with something to carry, in the order they get to pick:
    /// (span, free edges into the destination, tie-break key, edge).
    order: Vec<(u32, u32, u64, u32)>,
    /// Per NPU, free edges into it this timestep (zero between timesteps).
    options: Vec<u32>,
    /// Active edges whose ports are busy, by the timestep they free up (still `is_active`).
    parked: Vec<Vec<u32>>,
}

impl Timeline {
    fn new(ten: &Ten) -> Timeline {
        Timeline {
            arrivals: Vec::new(),
            busy_until: vec![0u32; ten.resources],
            latest_busy: 0,
            order: Vec::new(),
            options: vec![0u32; ten.npus],
            parked: Vec::new(),
        }
    }

    /// Fills `order`: free edges with something to carry, shortest first, ties at random.
    fn rank(&mut self, st: &mut State, seed: u64, t: u32) {
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
    /// whether any edge got one.
    fn assign(&mut self, st: &mut State, t: u32) -> bool {
        let ten = st.p.ten;
        let mut matched = false;
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
            // Up to `capacity` chunks leave together (one message once merged).
            let mut next = Some(c);
            let mut started = 0;
            while let Some(c) = next {
                let idx = st.start_move(e, c, t);
                self.arrivals[at].push(idx);
                started += 1;
                next = if started < st.p.capacity { st.pick(e, t, span) } else { None };
            }
            matched = true;
        }
        matched
    }

    /// Whether every port is free after timestep `t` and no move lands after it.
    fn quiet_after(&self, t: u32) -> bool {
        self.latest_busy <= t && self.arrivals.iter().skip(t as usize + 1).all(Vec::is_empty)
    }
}

fn tie_key(seed: u64, t: u32, e: u32) -> u64 {
    let mut z = seed ^ ((t as u64) << 32 | e as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fill_free(npus: usize, chunks: usize) -> SlotTable<u32> {
    let mut t: SlotTable<u32> = SlotTable::new(npus, chunks);
    match &mut t {
        SlotTable::Dense { v, .. } => v.iter_mut().for_each(|x| *x = FREE),
        SlotTable::Sparse { default, .. } => *default = FREE,
    }
    t
}

/// Relaying is needed when some chunk is wanted by only part of the NPUs: then requests are
/// delegated back along shortest paths from the chunk's holders.
fn relay_tables(p: &Problem) -> Result<Option<Relay>, GreedyError> {
    // NPUs per chunk in pre ∪ post; both lists are sorted and free of duplicates.
    let mut count = vec![0usize; p.num_chunks];
    for &[_, c] in p.pre.iter().chain(p.post) {
        count[c as usize] += 1;
    }
    let (mut i, mut j) = (0, 0);
    while i < p.pre.len() && j < p.post.len() {
        match p.pre[i].cmp(&p.post[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                count[p.pre[i][1] as usize] -= 1;
                i += 1;
                j += 1;
            }
        }
    }
    if count.iter().all(|&n| n >= p.live_npus) {
        return Ok(None);
    }
    let holders = crate::collective::Holders::new(p.pre, p.num_chunks);
    let mut index: HashMap<&[u32], u32> = HashMap::new();
    let mut fields = Vec::new();
    let mut field_of_chunk = vec![0u32; p.num_chunks];
    for (c, slot) in field_of_chunk.iter_mut().enumerate() {
        let h = holders.of(c);
        let next = index.len() as u32;
        let id = *index.entry(h).or_insert(next);
        if id == next {
            let entries = (fields.len() + 1) * p.ten.npus;
            if entries > MAX_RELAY_ENTRIES {
                return Err(GreedyError::TooManyRelayTables(entries, MAX_RELAY_ENTRIES));
            }
            fields.push(p.ten.distances_from(h));
        }
        *slot = id;
    }
    Ok(Some(Relay { field_of_chunk, fields }))
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

    /// Crossbar edges (an uplink and a downlink port) compete for ports: a greedy pass can
    /// leave ports idle that a better pairing would use. Put a maximum matching of free
    /// uplinks to free downlinks (augmenting paths, seeded with the greedy order) first, so the
    /// pass below takes it; the other edges keep their order behind it.
    fn matching_first(&mut self, order: &mut Vec<(u32, u32, u64, u32)>, busy_until: &[u32], t: u32) {
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

    /// On an edge into another island: a requested chunk that island has nowhere yet, the one
    /// spread to the fewest islands, among at most `NOVEL_SCAN` candidates from a random
    /// start (the pick stays O(1) on long candidate lists; stale entries are left to `pick`).
    fn pick_novel(&mut self, e: u32, v: u32, t: u32, span: u32) -> Option<u32> {
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
