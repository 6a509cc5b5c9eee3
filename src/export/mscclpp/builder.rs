//! The program an MSCCL++ plan holds, before it is written: per GPU, lanes (one per peer it
//! sends to, one per peer it receives from, one for local moves) of data and synchronisation
//! items in the schedule's order, with the per-cell hazards between lanes turned into device
//! semaphores (see the parent module for the argument).
use super::{ChanType, MscclppError};
use crate::export::layout::{Buf, Cell, Layout, Placement};
use crate::schedule::{Op, Schedule};
use std::collections::{HashMap, HashSet};

/// What a lane does: send to a peer, receive from one, or move data locally.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Kind {
    Send(u32),
    Recv(u32),
    Local,
}

/// One item of a lane, as generated.
#[derive(Clone, Debug)]
pub(super) enum Item {
    /// Memory: each piece (local source, offset in the peer's scratch, chunks) is written
    /// into the peer's scratch by the whole block; all sources in one buffer. Port: one
    /// piece, pushed with its signal (`pwsf`).
    Put {
        pieces: Vec<(Cell, u32, u32)>,
    },
    Signal,
    Wait,
    Copy {
        src: Cell,
        dst: Cell,
        cnt: u32,
    },
    Reduce {
        srcs: [Cell; 2],
        dst: Cell,
        cnt: u32,
    },
    /// Device semaphores to acquire before the next item.
    Acquire(Vec<u32>),
}

pub(super) struct Entry {
    pub(super) item: Item,
    /// Device semaphores released once this item is done (other lanes wait for it).
    pub(super) releases: Vec<u32>,
}

pub(super) struct Lane {
    pub(super) rank: u32,
    pub(super) kind: Kind,
    pub(super) entries: Vec<Entry>,
    /// Per other lane of the GPU, the last of its entries this lane has waited for.
    seen: HashMap<u32, u32>,
}

/// A place in a lane.
type At = (u32, u32);

/// Who touched a storage cell last.
#[derive(Default)]
struct Hazard {
    last_write: Option<At>,
    /// The last reader per lane since the last write (a lane runs in order, so its last
    /// reader done means every earlier one is).
    readers: Vec<At>,
}

/// One hop of a message: from one GPU to the next on the transfer's path.
#[derive(Clone, Copy)]
struct Hop {
    from: u32,
    to: u32,
}

pub(super) struct Builder<'a> {
    s: &'a Schedule,
    layout: &'a Layout,
    pub(super) place: Placement<'a>,
    pub(super) lanes: Vec<Lane>,
    lane_of: HashMap<(u32, Kind), u32>,
    /// Per rank, per storage cell (canonical).
    cells: Vec<HashMap<Cell, Hazard>>,
    /// Per rank, device semaphores handed out.
    pub(super) sems: Vec<u32>,
    /// Per ordered pair (sender, receiver) of ranks that exchange messages, the channel type.
    pub(super) pairs: HashMap<(u32, u32), ChanType>,
    /// Per lane, the operations it takes at least so far (`count_ops`), per rank the thread
    /// blocks its lanes then take at least (a block holds `MAX_OPS`), and the first rank past
    /// `MAX_TBS`: the build stops at the end of that step instead of laying out a plan the
    /// executor cannot hold (a torus:32x32 all-gather's took 13 s and 4.3 GB to be refused at
    /// the end).
    least_ops: Vec<usize>,
    least_tbs: Vec<usize>,
    over: Option<u32>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(s: &'a Schedule, layout: &'a Layout) -> Builder<'a> {
        let p = layout.p;
        Builder {
            s,
            layout,
            place: Placement::new(s, layout),
            lanes: Vec::new(),
            lane_of: HashMap::new(),
            cells: (0..p).map(|_| HashMap::new()).collect(),
            sems: vec![0; p],
            pairs: HashMap::new(),
            least_ops: Vec::new(),
            least_tbs: vec![0; p],
            over: None,
        }
    }

    /// The storage cell `c` of rank `r` is (input and output alias in place).
    pub(super) fn canonical(&self, r: usize, c: Cell) -> Cell {
        self.layout.canonical(r, c)
    }

    fn rank(&self, transfer: usize, v: u32) -> Result<u32, MscclppError> {
        self.layout.rank_of.get(&v).copied().ok_or(MscclppError::OutsideGroup { transfer, npu: v })
    }

    /// The hops of transfer `ti` (GPU to GPU; a path through switches is one hop, over a port
    /// channel), with each hop's channel type.
    fn hops(&self, ti: usize) -> Result<Vec<(Hop, ChanType)>, MscclppError> {
        let t = self.s.transfers.at(ti);
        let topo = &self.s.topology;
        let mut out = Vec::new();
        match t.path_nodes() {
            None => {
                let (from, to) = (self.rank(ti, t.src)?, self.rank(ti, t.dst)?);
                out.push((Hop { from, to }, ChanType::Memory));
            }
            Some(path) => {
                let mut from = self.rank(ti, path[0])?;
                let mut switched = false;
                for &v in &path[1..] {
                    if topo.is_npu(v as usize) {
                        let to = self.rank(ti, v)?;
                        out.push((Hop { from, to }, if switched { ChanType::Port } else { ChanType::Memory }));
                        from = to;
                        switched = false;
                    } else {
                        switched = true;
                    }
                }
            }
        }
        Ok(out)
    }

    /// Every message's hops first, to fix each connection's channel type (a port channel if
    /// any message between the two crosses a switch).
    fn channel_types(&mut self) -> Result<(), MscclppError> {
        for ti in 0..self.s.transfers.len() {
            if self.s.transfers.at(ti).is_local() {
                continue;
            }
            for (h, ty) in self.hops(ti)? {
                let e = self.pairs.entry((h.from, h.to)).or_insert(ty);
                if ty == ChanType::Port {
                    *e = ChanType::Port;
                }
            }
        }
        Ok(())
    }

    /// Generates every item: the schedule's steps in order, then the copies that put each
    /// result in its output cell.
    pub(super) fn run(&mut self) -> Result<(), MscclppError> {
        self.channel_types()?;
        let order = self.s.replay_order();
        for steps in order.steps(&self.s.transfers) {
            let step = self.s.transfers.step(order.get(steps.start));
            let batch: Vec<usize> = steps.map(|k| order.get(k)).collect();
            self.schedule_step(step, &batch)?;
            if let Some(gpu) = self.over {
                let tbs = self.least_tbs[gpu as usize];
                return Err(MscclppError::TooManyThreadBlocksBy { gpu, tbs, step });
            }
        }
        for r in 0..self.layout.p {
            for (from, to, n) in self.place.final_runs(r, u32::MAX) {
                let lane = self.lane(r as u32, Kind::Local);
                self.push(lane, Item::Copy { src: from, dst: to, cnt: n }, &[(from, n)], &[(to, n)]);
            }
        }
        Ok(())
    }

    /// One step of the schedule: snapshots for local moves whose source this step
    /// overwrites, then the messages (all sends before the receives where none relays; hop by
    /// hop, by position within a hop, where one does), then the local moves.
    fn schedule_step(&mut self, step: u32, batch: &[usize]) -> Result<(), MscclppError> {
        let s = self.s;
        let mut hops: Vec<Vec<(Hop, ChanType)>> = Vec::with_capacity(batch.len());
        let mut written = HashSet::new();
        for &ti in batch {
            let t = s.transfers.at(ti);
            let h = if t.is_local() { Vec::new() } else { self.hops(ti)? };
            let r = self.rank(ti, t.dst)?;
            written.extend(t.written().iter().map(|&w| (r, w)));
            hops.push(h);
        }
        // Local moves read the slots as they were before this step.
        let mut local_src: HashMap<usize, Vec<Cell>> = HashMap::new();
        for (bi, &ti) in batch.iter().enumerate() {
            let t = s.transfers.at(ti);
            if !t.is_local() {
                continue;
            }
            let r = self.rank(ti, t.src)?;
            let mut srcs = Vec::with_capacity(t.chunks.len());
            for &c in t.chunks.iter() {
                let cell = self.place.at(r, c).expect("a valid schedule reads held slots");
                if written.contains(&(r, c)) {
                    let tmp = self.place.alloc_scratch(r, 1);
                    let lane = self.lane(r, Kind::Local);
                    self.push(lane, Item::Copy { src: cell, dst: tmp, cnt: 1 }, &[(cell, 1)], &[(tmp, 1)]);
                    srcs.push(tmp);
                } else {
                    srcs.push(cell);
                }
            }
            local_src.insert(bi, srcs);
        }
        // The distinct chunks each message carries, ordered by where they are read at the
        // sender, and the cells they are read from at the current hop.
        let mut wire: Vec<Vec<u32>> = vec![Vec::new(); batch.len()];
        let mut at: Vec<Vec<Cell>> = vec![Vec::new(); batch.len()];
        for (bi, &ti) in batch.iter().enumerate() {
            let t = s.transfers.at(ti);
            if t.is_local() {
                continue;
            }
            let a = hops[bi][0].0.from;
            let mut seen = HashSet::new();
            let mut chunks: Vec<(Cell, u32)> = Vec::new();
            for &c in t.chunks.iter() {
                if seen.insert(c) {
                    chunks.push((self.place.at(a, c).expect("a valid schedule sends held slots"), c));
                }
            }
            chunks.sort();
            at[bi] = chunks.iter().map(|&(cell, _)| cell).collect();
            wire[bi] = chunks.into_iter().map(|(_, c)| c).collect();
        }
        let max_hops = hops.iter().map(Vec::len).max().unwrap_or(0);
        if max_hops > 1 {
            // A step that relays goes hop by hop (hop-major, as the simulator books it): every
            // message's first hop by position, each send then its receive, then every second
            // hop, and so on, and lands every message at the end. A block that carries one
            // message's second hop and another's first hop over one link then sends the first
            // hop first, in the simulator's order, as a runtime running each block in order
            // will. Every hop lands in fresh scratch, so the step's sends still read the cells
            // as they were, and each hop's send waits only for a receive generated before it.
            let mut landings = Vec::new();
            for h in 0..max_hops {
                for (bi, &ti) in batch.iter().enumerate() {
                    let Some(&(hop, _)) = hops[bi].get(h) else { continue };
                    let n = at[bi].len() as u32;
                    let (region, signals) = self.send_hop(hop, &at[bi]);
                    let lane = self.receive_hop(hop, region, n, signals);
                    at[bi] = (0..n).map(|i| region.plus(i)).collect();
                    if h + 1 == hops[bi].len() {
                        landings.push((bi, ti, hop.to, lane, region));
                    }
                }
            }
            landings.sort_by_key(|l| l.0);
            for (bi, ti, to, lane, region) in landings {
                self.land_message(ti, to, lane, step, region, &wire[bi]);
            }
        } else if max_hops == 1 {
            // Every send before the receives and their landings, so that no landing
            // overwrites a cell a later send of the step reads.
            let landed: Vec<Option<(Cell, u32)>> =
                (0..batch.len()).map(|bi| hops[bi].first().map(|&(hop, _)| self.send_hop(hop, &at[bi]))).collect();
            // Their receives, in the same order (a connection's waits match its signals in
            // order).
            for (bi, &ti) in batch.iter().enumerate() {
                let Some((region, signals)) = landed[bi] else { continue };
                let (hop, _) = hops[bi][0];
                let lane = self.receive_hop(hop, region, at[bi].len() as u32, signals);
                self.land_message(ti, hop.to, lane, step, region, &wire[bi]);
            }
        }
        for (bi, &ti) in batch.iter().enumerate() {
            let Some(srcs) = local_src.remove(&bi) else { continue };
            let t = s.transfers.at(ti);
            let r = self.rank(ti, t.src)?;
            let writes: Vec<(u32, Cell)> = t.written().iter().copied().zip(srcs).collect();
            let lane = self.lane(r, Kind::Local);
            self.land(r, lane, step, t.op, &writes);
        }
        Ok(())
    }

    /// A hop's send of the cells `from` into fresh scratch at its receiver: that region, and
    /// the signals sent.
    fn send_hop(&mut self, hop: Hop, from: &[Cell]) -> (Cell, u32) {
        let region = self.place.alloc_scratch(hop.to, from.len() as u32);
        let signals = self.send(hop, from, region);
        (region, signals)
    }

    /// The receiver's waits for a hop's `signals` into `region` (`n` cells); its lane.
    fn receive_hop(&mut self, hop: Hop, region: Cell, n: u32, signals: u32) -> u32 {
        let lane = self.lane(hop.to, Kind::Recv(hop.from));
        for _ in 0..signals {
            self.push(lane, Item::Wait, &[], &[(region, n)]);
        }
        lane
    }

    /// Transfer `ti`'s chunks, landed at rank `to` in `region` in the order of `wire`, written
    /// into their slots from `lane`.
    fn land_message(&mut self, ti: usize, to: u32, lane: u32, step: u32, region: Cell, wire: &[u32]) {
        let t = self.s.transfers.at(ti);
        let index: HashMap<u32, u32> = wire.iter().enumerate().map(|(i, &c)| (c, i as u32)).collect();
        let writes: Vec<(u32, Cell)> =
            t.chunks.iter().zip(t.written()).map(|(c, &w)| (w, region.plus(index[c]))).collect();
        self.land(to, lane, step, t.op, &writes);
    }

    /// The sender's part of a hop: the data into `region` at the receiver, then the signal,
    /// over the connection's channel type (a port channel if any of its hops crosses a
    /// switch, even this one).
    /// Memory: `put` (pieces of consecutive cells, at most `MAX_BUFFS` per op, one source
    /// buffer per op), then `signal`. Port: one `pwsf` per piece, each its own signal.
    /// Returns the signals sent (the receiver waits for each).
    fn send(&mut self, hop: Hop, from: &[Cell], region: Cell) -> u32 {
        let mut pieces: Vec<(Cell, u32, u32)> = Vec::new();
        for (i, &c) in from.iter().enumerate() {
            if let Some(last) = pieces.last_mut()
                && last.0.buf == c.buf
                && last.0.off + last.2 == c.off
            {
                last.2 += 1;
                continue;
            }
            pieces.push((c, region.off + i as u32, 1));
        }
        let lane = self.lane(hop.from, Kind::Send(hop.to));
        match self.pairs[&(hop.from, hop.to)] {
            ChanType::Memory => {
                let mut i = 0;
                while i < pieces.len() {
                    let buf = pieces[i].0.buf;
                    let n = pieces[i..].iter().take(super::MAX_BUFFS).take_while(|p| p.0.buf == buf).count();
                    let group = pieces[i..i + n].to_vec();
                    let reads: Vec<(Cell, u32)> = group.iter().map(|&(c, _, k)| (c, k)).collect();
                    self.push(lane, Item::Put { pieces: group }, &reads, &[]);
                    i += n;
                }
                self.push(lane, Item::Signal, &[], &[]);
                1
            }
            ChanType::Port => {
                for &(src, to, k) in &pieces {
                    // A port channel's proxy reads the source through the memory the executor
                    // registered, which for the input and the output is the caller's whole
                    // allocation (`Executor::execute` registers the allocation bases), at the
                    // plan's offset alone: from a caller's buffer that does not start its
                    // allocation (a caching allocator's) it would read other bytes. Scratch is
                    // the executor's own, so a piece of the input or output is copied there first.
                    let src = if src.buf == Buf::S {
                        src
                    } else {
                        let tmp = self.place.alloc_scratch(hop.from, k);
                        self.push(lane, Item::Copy { src, dst: tmp, cnt: k }, &[(src, k)], &[(tmp, k)]);
                        tmp
                    };
                    self.push(lane, Item::Put { pieces: vec![(src, to, k)] }, &[(src, k)], &[]);
                }
                pieces.len() as u32
            }
        }
    }

    /// Writes slot values at rank `r` from the cells `writes` names (slot, source), as copies
    /// or reductions into each slot's target cell, in runs of consecutive cells.
    fn land(&mut self, r: u32, lane: u32, step: u32, op: Op, writes: &[(u32, Cell)]) {
        // (slot, source, partial, target), decided before any of them moves.
        let mut plan: Vec<(u32, Cell, Option<Cell>, Cell)> = Vec::with_capacity(writes.len());
        let partials: HashSet<Cell> = match op {
            Op::Copy => HashSet::new(),
            Op::Reduce => writes
                .iter()
                .map(|&(w, _)| self.place.at(r, w).expect("a valid schedule reduces into held partials"))
                .map(|c| self.layout.canonical(r as usize, c))
                .collect(),
        };
        for &(w, src) in writes {
            let partial = match op {
                Op::Copy => None,
                Op::Reduce => Some(self.place.at(r, w).expect("a valid schedule reduces into held partials")),
            };
            let mut dst = self.place.target(r, w, step);
            // Never onto another slot's partial that this landing still reads.
            let canon = self.layout.canonical(r as usize, dst);
            if partials.contains(&canon) && partial.map(|p| self.layout.canonical(r as usize, p)) != Some(canon) {
                dst = self.place.alloc_scratch(r, 1);
            }
            plan.push((w, src, partial, dst));
        }
        plan.sort_by_key(|e| (e.1, e.3));
        let mut i = 0;
        while i < plan.len() {
            let (_, src, partial, dst) = plan[i];
            let mut n = 1u32;
            while let Some(&(_, s2, p2, d2)) = plan.get(i + n as usize)
                && s2 == src.plus(n)
                && d2 == dst.plus(n)
                && p2 == partial.map(|p| p.plus(n))
            {
                n += 1;
            }
            match partial {
                None => self.push(lane, Item::Copy { src, dst, cnt: n }, &[(src, n)], &[(dst, n)]),
                Some(p) => {
                    self.push(lane, Item::Reduce { srcs: [p, src], dst, cnt: n }, &[(p, n), (src, n)], &[(dst, n)])
                }
            };
            i += n as usize;
        }
        for (w, _, _, dst) in plan {
            self.place.moved(r, w, dst);
        }
    }

    /// The lane of (rank, kind), opened on first use: a send lane starts by waiting for its
    /// receiver's go-ahead, a receive lane by giving it (the opening handshake).
    fn lane(&mut self, r: u32, kind: Kind) -> u32 {
        if let Some(&l) = self.lane_of.get(&(r, kind)) {
            return l;
        }
        let id = self.lanes.len() as u32;
        let first = match kind {
            Kind::Send(_) => Some(Item::Wait),
            Kind::Recv(_) => Some(Item::Signal),
            Kind::Local => None,
        };
        let entries: Vec<Entry> = first.into_iter().map(|item| Entry { item, releases: Vec::new() }).collect();
        let opening = entries.len();
        self.lanes.push(Lane { rank: r, kind, entries, seen: HashMap::new() });
        self.least_ops.push(0);
        self.count_ops(id, opening);
        self.lane_of.insert((r, kind), id);
        id
    }

    /// Adds `ops` to what `lane` takes at least, and the thread blocks that makes to its rank's.
    fn count_ops(&mut self, lane: u32, ops: usize) {
        let before = self.least_ops[lane as usize];
        let after = before + ops;
        self.least_ops[lane as usize] = after;
        let r = self.lanes[lane as usize].rank;
        self.least_tbs[r as usize] += after.div_ceil(super::MAX_OPS) - before.div_ceil(super::MAX_OPS);
        if self.least_tbs[r as usize] > super::MAX_TBS && self.over.is_none() {
            self.over = Some(r);
        }
    }

    /// Appends `item` to `lane`, after acquiring a semaphore from every other lane of the
    /// GPU whose earlier access to the cells it reads or writes it must follow
    /// (read-after-write, write-after-read, write-after-write), and records its accesses.
    fn push(&mut self, lane: u32, item: Item, reads: &[(Cell, u32)], writes: &[(Cell, u32)]) -> u32 {
        let r = self.lanes[lane as usize].rank as usize;
        let mut deps: Vec<At> = Vec::new();
        let mut add = |d: At| {
            if d.0 == lane {
                return;
            }
            match deps.iter_mut().find(|x| x.0 == d.0) {
                Some(x) => x.1 = x.1.max(d.1),
                None => deps.push(d),
            }
        };
        for &(cell, n) in reads {
            for i in 0..n {
                let c = self.layout.canonical(r, cell.plus(i));
                if let Some(w) = self.cells[r].get(&c).and_then(|h| h.last_write) {
                    add(w);
                }
            }
        }
        for &(cell, n) in writes {
            for i in 0..n {
                let c = self.layout.canonical(r, cell.plus(i));
                if let Some(h) = self.cells[r].get(&c) {
                    h.last_write.into_iter().chain(h.readers.iter().copied()).for_each(&mut add);
                }
            }
        }
        let mut acquire = Vec::new();
        for (m, idx) in deps {
            let seen = &mut self.lanes[lane as usize].seen;
            if seen.get(&m).is_some_and(|&x| x >= idx) {
                continue;
            }
            seen.insert(m, idx);
            let id = self.sems[r];
            self.sems[r] += 1;
            let releases = &mut self.lanes[m as usize].entries[idx as usize].releases;
            releases.push(id);
            if releases.len() == 1 {
                // Its `sem_release`.
                self.count_ops(m, 1);
            }
            acquire.push(id);
        }
        let entries = &mut self.lanes[lane as usize].entries;
        let mut ops = 1;
        if !acquire.is_empty() {
            entries.push(Entry { item: Item::Acquire(acquire), releases: Vec::new() });
            ops += 1;
        }
        // A data op right after a wait or an acquire, and a signal right after a data op,
        // take a `nop` between them (`emit`).
        let data = |i: &Item| matches!(i, Item::Put { .. } | Item::Copy { .. } | Item::Reduce { .. });
        let after = entries.last().map(|e| &e.item);
        if (data(&item) && matches!(after, Some(Item::Wait | Item::Acquire(_))))
            || (matches!(item, Item::Signal) && after.is_some_and(data))
        {
            ops += 1;
        }
        let me = (lane, entries.len() as u32);
        entries.push(Entry { item, releases: Vec::new() });
        self.count_ops(lane, ops);
        for &(cell, n) in reads {
            for i in 0..n {
                let c = self.layout.canonical(r, cell.plus(i));
                let h = self.cells[r].entry(c).or_default();
                match h.readers.iter_mut().find(|x| x.0 == lane) {
                    Some(x) => x.1 = me.1,
                    None => h.readers.push(me),
                }
            }
        }
        for &(cell, n) in writes {
            for i in 0..n {
                let c = self.layout.canonical(r, cell.plus(i));
                let h = self.cells[r].entry(c).or_default();
                h.last_write = Some(me);
                h.readers.clear();
            }
        }
        me.1
    }
}
