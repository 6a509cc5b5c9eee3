//! The program an MSCCL file holds: thread blocks per peer, direction and channel, their steps
//! in the schedule's order with per-cell dependencies, channels chosen so that bounded buffers
//! cannot deadlock (see the parent module), the executor's limits checked, and the XML written.
use super::{MAX_COUNT, MscclError, MscclTarget};
use crate::export::layout::{Cell, Layout, Placement};
use crate::schedule::{Op, Schedule};
use std::collections::{HashMap, HashSet};

mod blocks;
mod write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepType {
    Send,
    Recv,
    RecvReduceCopy,
    Copy,
    Reduce,
}

impl StepType {
    fn code(self) -> &'static str {
        match self {
            StepType::Send => "s",
            StepType::Recv => "r",
            StepType::RecvReduceCopy => "rrc",
            StepType::Copy => "cpy",
            StepType::Reduce => "re",
        }
    }
}

/// A step of a thread block, as generated (dependencies are resolved to step indices when
/// the file is written, after the no-op steps that carry extra dependencies are counted).
struct OpStep {
    ty: StepType,
    src: Option<Cell>,
    dst: Option<Cell>,
    cnt: u32,
    /// At most one per other thread block: the latest step waited for.
    deps: Vec<OpId>,
    /// Another step waits for this one (the executor then signals its completion).
    has_dep: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct OpId {
    tb: u32,
    idx: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    Send(u32),
    Recv(u32),
    Local,
}

struct Tb {
    rank: u32,
    role: Role,
    chan: u32,
    ops: Vec<OpStep>,
    /// Steps including the no-ops that carry extra dependencies.
    steps: usize,
}

/// A send in flight on a channel, from its generation to its receive's.
struct Flight {
    send: OpId,
    /// Calls at one chunk per call (the executor's largest messages).
    calls: u32,
    /// It does not fit the channel's buffer, so it completes only with its receive.
    deferred: bool,
}

/// Hazard state of one storage cell.
#[derive(Default)]
struct CellState {
    last_write: Option<OpId>,
    readers: Vec<OpId>,
}

/// One contiguous piece of a transfer: `cnt` chunks read from `src` at the sender.
struct Run {
    src: Cell,
    cnt: u32,
    /// Where the last hop lands: a run of target cells and, for a reduce, the receiver's
    /// current partials.
    land: Land,
}

enum Land {
    /// Received straight into the slots' target cells (`r`, or `rrc` with `partial`).
    Direct { dst: Cell, partial: Option<Cell>, slots: Vec<u32> },
    /// Received into scratch, then copied or reduced into several slots with local steps
    /// (a transfer that writes one chunk into several slots).
    Fanout { entries: Vec<Vec<u32>> },
}

/// The schedule step being generated: its number, its transfers and the ranks each one visits.
struct StepBatch<'b> {
    step: u32,
    batch: &'b [usize],
    hops: &'b [Vec<u32>],
}

/// The receiving end of a message: connection a→b on channel `ch`, received by block `tb`.
#[derive(Clone, Copy)]
struct Link {
    a: u32,
    b: u32,
    ch: u32,
    tb: u32,
}

pub(super) struct Builder<'a> {
    s: &'a Schedule,
    layout: &'a Layout,
    target: MscclTarget,
    tbs: Vec<Tb>,
    tb_of: HashMap<(u32, Role, u32), u32>,
    tbs_on_channel: HashMap<(u32, u32), u32>,
    tbs_per_rank: Vec<u32>,
    /// Per rank, the connection blocks it needs that are not open yet.
    unopened: Vec<u32>,
    opened: std::collections::HashSet<(u32, Role)>,
    local_tb: Vec<Option<u32>>,
    /// Per connection and channel, the sends generated but not yet received, oldest first.
    outstanding: HashMap<(u32, u32, u32), std::collections::VecDeque<Flight>>,
    /// Steps of the current hop that cannot complete at their place in generation order: the
    /// deferred sends whose receives are not generated yet, and the local steps that wait for
    /// one (or follow one in their block). No receive may wait for any of them.
    blocked: std::collections::HashSet<OpId>,
    /// Messages generated per connection (for error messages).
    messages: HashMap<(u32, u32), u32>,
    /// Where each slot's value lives.
    pub(super) place: Placement<'a>,
    cells: Vec<HashMap<Cell, CellState>>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(s: &'a Schedule, layout: &'a Layout, target: MscclTarget) -> Builder<'a> {
        let p = layout.p;
        let cells: Vec<HashMap<Cell, CellState>> = (0..p).map(|_| HashMap::new()).collect();
        Builder {
            s,
            layout,
            target,
            tbs: Vec::new(),
            tb_of: HashMap::new(),
            tbs_on_channel: HashMap::new(),
            tbs_per_rank: vec![0; p],
            unopened: vec![0; p],
            opened: Default::default(),
            local_tb: vec![None; p],
            outstanding: HashMap::new(),
            blocked: std::collections::HashSet::new(),
            messages: HashMap::new(),
            place: Placement::new(s, layout),
            cells,
        }
    }

    fn rank(&self, transfer: usize, v: u32) -> Result<u32, MscclError> {
        self.layout.rank_of.get(&v).copied().ok_or(MscclError::OutsideGroup { transfer, npu: v })
    }

    /// The ranks transfer `ti` visits, in order (switches are transparent to MSCCL: a GPU sends
    /// to a GPU); one rank for a local move.
    fn hop_ranks(&self, ti: usize) -> Result<Vec<u32>, MscclError> {
        let s = self.s;
        let t = s.transfers.at(ti);
        let mut h = Vec::new();
        if t.is_local() {
            h.push(self.rank(ti, t.src)?);
        } else if let Some(path) = &t.path {
            for &v in path.iter() {
                if s.topology.is_npu(v as usize) {
                    h.push(self.rank(ti, v)?);
                }
            }
        } else {
            h.push(self.rank(ti, t.src)?);
            h.push(self.rank(ti, t.dst)?);
        }
        Ok(h)
    }

    /// Per rank, the connection blocks (send to or receive from a peer) the schedule needs at
    /// least one of, so that opening more channels for one never leaves another without a
    /// block.
    fn count_connections(&mut self) -> Result<(), MscclError> {
        let mut roles: Vec<std::collections::HashSet<Role>> = vec![Default::default(); self.layout.p];
        for ti in 0..self.s.transfers.len() {
            for w in self.hop_ranks(ti)?.windows(2) {
                roles[w[0] as usize].insert(Role::Send(w[1]));
                roles[w[1] as usize].insert(Role::Recv(w[0]));
            }
        }
        self.unopened = roles.iter().map(|r| r.len() as u32).collect();
        Ok(())
    }

    /// Generates every step: the schedule's steps in order, then the copies that put each
    /// result in its output cell.
    pub(super) fn run(&mut self) -> Result<(), MscclError> {
        self.count_connections()?;
        let order = self.s.replay_order();
        for steps in order.steps(&self.s.transfers) {
            let step = self.s.transfers.step(order.get(steps.start));
            let batch: Vec<usize> = steps.map(|k| order.get(k)).collect();
            self.schedule_step(step, &batch)?;
        }
        self.final_copies();
        Ok(())
    }

    /// One step of the schedule: snapshots for local moves whose source is overwritten in
    /// this step, then hop by hop every message's sends before its receives, then the local
    /// moves.
    fn schedule_step(&mut self, step: u32, batch: &[usize]) -> Result<(), MscclError> {
        let hops: Vec<Vec<u32>> = batch.iter().map(|&ti| self.hop_ranks(ti)).collect::<Result<_, _>>()?;
        let ctx = StepBatch { step, batch, hops: &hops };
        let local_src = self.snapshot_local_sources(&ctx);
        let runs = self.plan_network(&ctx);
        self.generate_messages(&ctx, &runs)?;
        self.apply_local_moves(&ctx, local_src);
        Ok(())
    }

    /// The (rank, slot) pairs the batch writes at each transfer's last rank.
    fn written_slots(&self, ctx: &StepBatch<'_>) -> HashSet<(u32, u32)> {
        let s = self.s;
        let mut written = HashSet::new();
        for (bi, &ti) in ctx.batch.iter().enumerate() {
            let r = *ctx.hops[bi].last().expect("a transfer has a destination");
            for &w in s.transfers.at(ti).written() {
                written.insert((r, w));
            }
        }
        written
    }

    /// Per local move (by batch index), the cells it reads: sources this step writes go to scratch first.
    fn snapshot_local_sources(&mut self, ctx: &StepBatch<'_>) -> HashMap<usize, Vec<Cell>> {
        let s = self.s;
        // Local moves read the slots as they were before this step: snapshot a source that
        // this step also writes.
        let written = self.written_slots(ctx);
        let mut local_src: HashMap<usize, Vec<Cell>> = HashMap::new();
        for (bi, &ti) in ctx.batch.iter().enumerate() {
            let t = s.transfers.at(ti);
            if !t.is_local() {
                continue;
            }
            let r = ctx.hops[bi][0];
            local_src.insert(bi, self.local_sources(r, t.chunks, &written));
        }
        local_src
    }

    /// The cells a local move at rank `r` reads for `chunks`, snapshotting those in `written` to scratch.
    fn local_sources(&mut self, r: u32, chunks: &[u32], written: &HashSet<(u32, u32)>) -> Vec<Cell> {
        let mut srcs = Vec::with_capacity(chunks.len());
        for &c in chunks.iter() {
            let cell = self.place.at(r, c).expect("a valid schedule reads held slots");
            if written.contains(&(r, c)) {
                let tmp = self.place.alloc_scratch(r, 1);
                self.local_op(r, StepType::Copy, Some(cell), tmp, 1);
                srcs.push(tmp);
            } else {
                srcs.push(cell);
            }
        }
        srcs
    }

    /// Every network transfer's runs, by batch index (planned in landing order: see within).
    fn plan_network(&mut self, ctx: &StepBatch<'_>) -> Vec<(usize, Vec<Run>)> {
        let (s, batch, hops) = (self.s, ctx.batch, ctx.hops);
        // Plan each network transfer's runs in landing order (last hop, then position), so a
        // chain of reduces into one slot reads each partial where the previous one left it.
        let mut net: Vec<usize> = (0..batch.len()).filter(|&bi| !s.transfers.at(batch[bi]).is_local()).collect();
        net.sort_by_key(|&bi| (hops[bi].len(), bi));
        let mut runs: Vec<(usize, Vec<Run>)> = Vec::with_capacity(net.len());
        let mut pending: HashMap<(u32, u32), Cell> = HashMap::new();
        for &bi in &net {
            let planned = self.plan_runs(ctx.step, batch[bi], &hops[bi], &mut pending);
            runs.push((bi, planned));
        }
        runs.sort_by_key(|(bi, _)| *bi);
        runs
    }

    /// The batch's messages hop by hop: a hop's sends, then its receives, which settle what it blocked.
    fn generate_messages(&mut self, ctx: &StepBatch<'_>, runs: &[(usize, Vec<Run>)]) -> Result<(), MscclError> {
        let max_hops = ctx.hops.iter().map(Vec::len).max().unwrap_or(0);
        // The cells each run is read from at the current hop.
        let mut at: Vec<Vec<Cell>> = runs.iter().map(|(_, rs)| rs.iter().map(|r| r.src).collect()).collect();
        for h in 0..max_hops.saturating_sub(1) {
            let chans = self.send_hop(ctx, h, runs, &at)?;
            self.receive_hop(ctx, h, runs, &mut at, &chans);
            // Every send of this hop is received: what waited for one runs by the hop's end.
            debug_assert!(self.outstanding.values().all(|q| q.is_empty()));
            self.blocked.clear();
        }
        Ok(())
    }

    /// The sends of hop `h` of every run that goes that far; returns their channels for the receives.
    fn send_hop(
        &mut self,
        ctx: &StepBatch<'_>,
        h: usize,
        runs: &[(usize, Vec<Run>)],
        at: &[Vec<Cell>],
    ) -> Result<Vec<Vec<u32>>, MscclError> {
        let mut chans: Vec<Vec<u32>> = vec![Vec::new(); runs.len()];
        for (ri, (bi, rs)) in runs.iter().enumerate() {
            let hs = &ctx.hops[*bi];
            if hs.len() <= h + 1 {
                continue;
            }
            let (a, b) = (hs[h], hs[h + 1]);
            for (k, run) in rs.iter().enumerate() {
                let ch = self.send_run(a, b, at[ri][k], run.cnt)?;
                chans[ri].push(ch);
            }
        }
        Ok(chans)
    }

    /// Sends `cnt` chunks from `src` on a→b, recorded in flight (blocked if deferred); returns its channel.
    fn send_run(&mut self, a: u32, b: u32, src: Cell, cnt: u32) -> Result<u32, MscclError> {
        // Steps the send needs, dependencies' no-ops included. (Its receive needs
        // one step at least: see the receive below.)
        let need_send = self.dep_tbs(a, Some(src), None, cnt);
        let (ch, deferred) = self.channel_for(a, b, cnt, need_send + 1)?;
        let tb = self.tb(a, Role::Send(b), ch);
        let send = self.push_op(tb, StepType::Send, Some(src), None, cnt);
        if deferred {
            self.blocked.insert(send);
        }
        let flight = Flight { send, calls: cnt, deferred };
        self.outstanding.entry((a, b, ch)).or_default().push_back(flight);
        Ok(ch)
    }

    /// The receives of hop `h` in the sends' order: into scratch to forward (updating `at`), or landed.
    fn receive_hop(
        &mut self,
        ctx: &StepBatch<'_>,
        h: usize,
        runs: &[(usize, Vec<Run>)],
        at: &mut [Vec<Cell>],
        chans: &[Vec<u32>],
    ) {
        let s = self.s;
        for (ri, (bi, rs)) in runs.iter().enumerate() {
            let hs = &ctx.hops[*bi];
            if hs.len() <= h + 1 {
                continue;
            }
            let (a, b) = (hs[h], hs[h + 1]);
            let last = h + 2 == hs.len();
            for (k, run) in rs.iter().enumerate() {
                let ch = chans[ri][k];
                let flight = self.outstanding.get_mut(&(a, b, ch)).and_then(|q| q.pop_front());
                // Received in order: from here on the send is complete.
                self.blocked.remove(&flight.expect("sent before received").send);
                let tb = self.tb(b, Role::Recv(a), ch);
                if !last {
                    let fwd = self.place.alloc_scratch(b, run.cnt);
                    self.push_op(tb, StepType::Recv, None, Some(fwd), run.cnt);
                    at[ri][k] = fwd;
                    continue;
                }
                let link = Link { a, b, ch, tb };
                match &run.land {
                    Land::Direct { dst, partial, slots } => self.land_direct(link, run.cnt, *dst, *partial, slots),
                    Land::Fanout { entries } => {
                        let op = s.transfers.at(ctx.batch[*bi]).op;
                        self.land_fanout(link, ctx.step, run.cnt, entries, op);
                    }
                }
            }
        }
    }

    /// Lands a run in its target cells: straight in when that completes in order, else via scratch.
    fn land_direct(&mut self, link: Link, cnt: u32, dst: Cell, partial: Option<Cell>, slots: &[u32]) {
        let Link { a, b, ch, tb } = link;
        // The block keeps a step for each receive still queued on it.
        let later = self.outstanding.get(&(a, b, ch)).map_or(0, |q| q.len());
        let deps = self.dep_tbs(b, partial, Some(dst), cnt);
        let full = self.tbs[tb as usize].steps + deps + later > self.target.max_steps();
        let unfused = partial.is_some() && !self.target.fused_receive();
        if full || unfused || self.waits_for_blocked(b, partial, Some(dst), cnt) {
            // Straight in, it would wait for a send that completes only
            // with a later receive (or need more no-ops than its block
            // has room for, or an `rrc` the executor lacks): land in
            // scratch, and move it into place with local steps that wait
            // instead.
            self.land_via_scratch(b, tb, cnt, dst, partial);
        } else {
            let ty = if partial.is_some() { StepType::RecvReduceCopy } else { StepType::Recv };
            self.push_op(tb, ty, partial, Some(dst), cnt);
        }
        for (i, &slot) in slots.iter().enumerate() {
            self.place.moved(b, slot, dst.plus(i as u32));
        }
    }

    /// Receives into scratch, then copies or reduces into `dst` with local steps (which may wait).
    fn land_via_scratch(&mut self, b: u32, tb: u32, cnt: u32, dst: Cell, partial: Option<Cell>) {
        let tmp = self.place.alloc_scratch(b, cnt);
        self.push_op(tb, StepType::Recv, None, Some(tmp), cnt);
        match partial {
            Some(p) => {
                if p != dst {
                    self.local_op(b, StepType::Copy, Some(p), dst, cnt);
                }
                self.local_op(b, StepType::Reduce, Some(tmp), dst, cnt);
            }
            None => self.local_op(b, StepType::Copy, Some(tmp), dst, cnt),
        }
    }

    /// Lands a fanout run: into scratch, then each wire chunk copied or reduced into every slot it feeds.
    fn land_fanout(&mut self, link: Link, step: u32, cnt: u32, entries: &[Vec<u32>], op: Op) {
        let Link { b, tb, .. } = link;
        let tmp = self.place.alloc_scratch(b, cnt);
        self.push_op(tb, StepType::Recv, None, Some(tmp), cnt);
        for (i, slots) in entries.iter().enumerate() {
            for &slot in slots {
                self.apply_local(b, step, slot, tmp.plus(i as u32), op);
            }
        }
    }

    /// The batch's local moves, in batch order, from the sources snapshotted before the messages.
    fn apply_local_moves(&mut self, ctx: &StepBatch<'_>, mut local_src: HashMap<usize, Vec<Cell>>) {
        let s = self.s;
        for (bi, &ti) in ctx.batch.iter().enumerate() {
            let Some(srcs) = local_src.remove(&bi) else { continue };
            let t = s.transfers.at(ti);
            let r = ctx.hops[bi][0];
            for (i, &slot) in t.written().iter().enumerate() {
                self.apply_local(r, ctx.step, slot, srcs[i], t.op);
            }
        }
    }

    /// Splits a network transfer into runs of consecutive cells (at the sender, at the
    /// receiver's targets and partials), at most `MAX_COUNT` chunks each, and decides the
    /// target cell of every slot it writes.
    fn plan_runs(&mut self, step: u32, ti: usize, hops: &[u32], pending: &mut HashMap<(u32, u32), Cell>) -> Vec<Run> {
        let t = self.s.transfers.at(ti);
        let (a, b) = (hops[0], *hops.last().expect("two hops"));
        let reduce = t.op == Op::Reduce;
        let fanout = t.dst_chunks.is_some() && t.wire_chunks() < t.chunks.len();
        if fanout {
            // One entry per distinct chunk on the wire, with every slot it feeds.
            let mut by_src: Vec<(u32, Vec<u32>)> = Vec::new();
            for (i, &c) in t.chunks.iter().enumerate() {
                let w = t.written()[i];
                match by_src.iter_mut().find(|(x, _)| *x == c) {
                    Some((_, v)) => v.push(w),
                    None => by_src.push((c, vec![w])),
                }
            }
            let mut entries: Vec<(Cell, Vec<u32>)> = by_src
                .into_iter()
                .map(|(c, w)| (self.place.at(a, c).expect("a valid schedule sends held slots"), w))
                .collect();
            entries.sort_by_key(|e| e.0);
            let mut runs: Vec<Run> = Vec::new();
            for (src, slots) in entries {
                if let Some(Run { src: s0, cnt, land: Land::Fanout { entries } }) = runs.last_mut()
                    && s0.buf == src.buf
                    && s0.off + *cnt == src.off
                    && *cnt < MAX_COUNT
                {
                    *cnt += 1;
                    entries.push(slots);
                    continue;
                }
                runs.push(Run { src, cnt: 1, land: Land::Fanout { entries: vec![slots] } });
            }
            return runs;
        }
        struct Entry {
            src: Cell,
            dst: Cell,
            partial: Option<Cell>,
            slot: u32,
        }
        let mut entries: Vec<Entry> = Vec::with_capacity(t.chunks.len());
        for (i, &c) in t.chunks.iter().enumerate() {
            let slot = t.written()[i];
            let src = self.place.at(a, c).expect("a valid schedule sends held slots");
            let partial = if reduce {
                Some(
                    pending
                        .get(&(b, slot))
                        .copied()
                        .or(self.place.at(b, slot))
                        .expect("a valid schedule reduces into held partials"),
                )
            } else {
                None
            };
            let dst = self.place.target(b, slot, step);
            pending.insert((b, slot), dst);
            entries.push(Entry { src, dst, partial, slot });
        }
        entries.sort_by_key(|e| e.src);
        let mut runs: Vec<Run> = Vec::new();
        for e in entries {
            if let Some(Run { src, cnt, land: Land::Direct { dst, partial, slots } }) = runs.last_mut() {
                let n = *cnt;
                let next = |c: Cell, x: Cell| c.buf == x.buf && c.off + n == x.off;
                let partial_ok = match (partial, e.partial) {
                    (Some(p0), Some(p)) => next(*p0, p),
                    (None, None) => true,
                    _ => false,
                };
                if n < MAX_COUNT && next(*src, e.src) && next(*dst, e.dst) && partial_ok {
                    *cnt += 1;
                    slots.push(e.slot);
                    continue;
                }
            }
            runs.push(Run {
                src: e.src,
                cnt: 1,
                land: Land::Direct { dst: e.dst, partial: e.partial, slots: vec![e.slot] },
            });
        }
        runs
    }

    /// A local copy or reduce of the value in `src` into `slot` at rank `r`.
    fn apply_local(&mut self, r: u32, step: u32, slot: u32, src: Cell, op: Op) {
        let dst = self.place.target(r, slot, step);
        match op {
            Op::Copy => self.local_op(r, StepType::Copy, Some(src), dst, 1),
            Op::Reduce => {
                let cur = self.place.at(r, slot).expect("a valid schedule reduces into held partials");
                if cur != dst {
                    self.local_op(r, StepType::Copy, Some(cur), dst, 1);
                }
                self.local_op(r, StepType::Reduce, Some(src), dst, 1);
            }
        }
        self.place.moved(r, slot, dst);
    }

    /// Copies every result not yet in its output cell there, in runs.
    fn final_copies(&mut self) {
        for r in 0..self.layout.p {
            for (from, to, n) in self.place.final_runs(r, MAX_COUNT) {
                self.local_op(r as u32, StepType::Copy, Some(from), to, n);
            }
        }
    }
}
