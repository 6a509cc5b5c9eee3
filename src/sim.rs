//! The α-β simulator: replays a schedule's transfers in (step, position) order on the links
//! they use and reports the collective time, per-link busy time and bytes.

use crate::schedule::{Op, ReplayOrder, Schedule, TransferRef};
use crate::slots::SlotTable;
use crate::topology::Topology;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkUsage {
    pub src: usize,
    pub dst: usize,
    pub transfers: usize,
    pub bytes: f64,
    pub busy_ns: f64,
    /// `busy_ns / collective_time_ns`.
    pub utilization: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timing {
    pub collective_time_ns: f64,
    /// Distinct steps that carry transfers.
    pub rounds: usize,
    pub transfers: usize,
    /// Bytes summed over every link of every transfer's path.
    pub bytes_on_links: f64,
    /// Mean utilization over the links that carried anything.
    pub mean_link_utilization: f64,
    pub max_link_utilization: f64,
    /// Latest end time of any transfer of each round, in round order.
    pub round_end_ns: Vec<f64>,
    /// Links that carried at least one transfer, sorted by (src, dst).
    pub links: Vec<LinkUsage>,
}

/// When one transfer occupies its path in the replay: from `start_ns` to `end_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TransferTime {
    pub start_ns: f64,
    pub end_ns: f64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SimError {
    #[error("transfer {transfer}: {message}")]
    Unroutable { transfer: usize, message: String },
    /// The caller's stop poll said stop.
    #[error("stopped")]
    Stopped,
    /// More chunk or scratch slots than a collective may have (`limits::MAX_CHUNKS`): nothing
    /// is laid out for them.
    #[error("{0}")]
    TooLarge(String),
}

/// Replays the schedule. Each transfer starts when the source's contents for its chunks are
/// final (end of the last write into them in an earlier step) and every link on its path is
/// free; it takes Σ latency over the path + bytes / min bandwidth over the path (+ γ·bytes for
/// a reduce), keeps every path link busy until it ends, and makes the destination's contents
/// final at its end. Reads within a step never see writes of the same step. Bytes count each
/// distinct chunk once (one received chunk may feed several slots); a local move between
/// slots uses no link and takes only its γ time.
pub fn simulate(s: &Schedule) -> Result<Timing, SimError> {
    replay(s, None, &|| false)
}

/// `simulate`, asking `stop` every so many transfers; `SimError::Stopped` once it says so.
pub fn simulate_until(s: &Schedule, stop: &dyn Fn() -> bool) -> Result<Timing, SimError> {
    replay(s, None, stop)
}

/// `simulate` on a table of slots whatever the schedule (the replay on ranges never runs):
/// for tests that the two agree, and for benchmarks.
#[doc(hidden)]
pub fn simulate_on_slots(s: &Schedule) -> Result<Timing, SimError> {
    replay_on(s, None, &|| false, false)
}

/// `simulate` on ranges whatever the schedule: `None` when the schedule is not replayed that
/// way (destination slots, a chunk out of range) or its rows fragment. For tests that the two
/// agree.
#[doc(hidden)]
pub fn simulate_on_ranges(s: &Schedule) -> Option<Result<Timing, SimError>> {
    let ranges = crate::runs::ChunkRanges::new(s)?;
    run(s, RangeReady::new(s, ranges), None, &|| false).transpose()
}

/// `simulate`, with each transfer's start and end (indexed as `s.transfers`). Opt-in: a
/// 33-million-transfer schedule would need half a gigabyte for them.
pub fn simulate_with_times(s: &Schedule) -> Result<(Timing, Vec<TransferTime>), SimError> {
    let mut times = vec![TransferTime { start_ns: 0.0, end_ns: 0.0 }; s.transfers.len()];
    let timing = replay(s, Some(&mut times), &|| false)?;
    Ok((timing, times))
}

fn replay(s: &Schedule, times: Option<&mut [TransferTime]>, stop: &dyn Fn() -> bool) -> Result<Timing, SimError> {
    replay_on(s, times, stop, crate::runs::worth_ranges(s))
}

/// The replay, on ranges first when `ranges` says so.
fn replay_on(
    s: &Schedule,
    mut times: Option<&mut [TransferTime]>,
    stop: &dyn Fn() -> bool,
    ranges: bool,
) -> Result<Timing, SimError> {
    // Checked before any table is sized by them (a file may declare any number; the chunk ids
    // below are u32).
    let max = crate::limits::MAX_CHUNKS;
    if s.num_chunks > max || s.scratch.len() > max {
        return Err(SimError::TooLarge(format!(
            "num_chunks {} and {} scratch slots: over the limit of {max} each",
            s.num_chunks,
            s.scratch.len()
        )));
    }
    // On ranges where messages carry long chunk lists (the cost then follows transfers, not
    // chunk moves); on a table of slots otherwise, or when the rows fragment.
    if ranges
        && let Some(ranges) = crate::runs::ChunkRanges::new(s)
        && let Some(timing) = run(s, RangeReady::new(s, ranges), times.as_deref_mut(), stop)?
    {
        return Ok(timing);
    }
    // The table holds a cell per (npu, slot): sized before it is allocated (bucket's all-reduce
    // on torus:128x256 would need 2^32 of them; on ranges it needs none).
    let cells = s.topology.npus().saturating_mul(s.slots());
    if cells > crate::limits::MAX_CHECKED_CELLS {
        return Err(SimError::TooLarge(format!(
            "{cells} (npu, slot) cells for the simulator's table, over the limit of {}; past it only a schedule it replays on ranges (messages carrying runs of chunks) is simulated",
            crate::limits::MAX_CHECKED_CELLS
        )));
    }
    let ready = SlotReady::new(s);
    Ok(run(s, ready, times, stop)?.expect("a table of slots never gives up"))
}

/// When each slot's contents are final, as a replay keeps them.
trait Ready {
    /// When transfer `i`'s source slots are all final.
    fn ready(&mut self, s: &Schedule, i: usize) -> f64;
    /// Transfer `i`'s written slots are final at `end` (unless a later end already stands
    /// there). `false` when this store gives up (a fragmented row).
    fn land(&mut self, s: &Schedule, i: usize, end: f64) -> bool;
}

/// A table cell per (npu, slot).
struct SlotReady {
    /// Chunks laid out so that the evenly spaced lists most messages carry sit side by side.
    pos: Vec<u32>,
    /// A slot's contents are final when the transfer that wrote them last ends: the table holds
    /// that transfer (index + 1; 0 for a slot never written, final at time 0) and `ends` its
    /// end, 4 bytes a slot instead of 8 (bucket on torus:64x64 in 4 parts: 2^26 slots).
    table: SlotTable<u32>,
    ends: Vec<f64>,
}

impl SlotReady {
    fn new(s: &Schedule) -> SlotReady {
        let layout = crate::slots::SlotOrder::new(s.num_chunks, s.transfers.dominant_spacing());
        let pos: Vec<u32> = (0..s.num_chunks as u32)
            .map(|c| layout.of(c))
            .chain((0..s.scratch.len() as u32).map(|i| layout.len() as u32 + i))
            .collect();
        // Every postcondition pair is written (and every precondition pair read) at least once.
        let filled = s.precondition.len().max(s.postcondition.len());
        let table = SlotTable::for_filled(s.topology.npus(), layout.len() + s.scratch.len(), filled);
        SlotReady { pos, table, ends: vec![0.0f64; s.transfers.len() + 1] }
    }
}

impl Ready for SlotReady {
    fn ready(&mut self, s: &Schedule, i: usize) -> f64 {
        let t = s.transfers.at(i);
        let mut start = 0.0f64;
        for &c in t.chunks {
            start = start.max(self.ends[*self.table.get(t.src as usize, self.pos[c as usize] as usize) as usize]);
        }
        start
    }

    fn land(&mut self, s: &Schedule, i: usize, end: f64) -> bool {
        self.ends[i + 1] = end;
        let t = s.transfers.at(i);
        for &c in t.written() {
            let p = self.pos[c as usize] as usize;
            let old = *self.table.get(t.dst as usize, p);
            if end > self.ends[old as usize] {
                self.table.set(t.dst as usize, p, i as u32 + 1);
            }
        }
        true
    }
}

/// Each NPU's row of slots as runs of one end time (`runs::Runs`), each transfer's chunks as
/// ranges of it.
struct RangeReady {
    rows: crate::runs::Runs<f64>,
    ranges: crate::runs::ChunkRanges,
    pieces: Vec<(u32, u32, f64)>,
    scratch: (Vec<f64>, Vec<f64>),
}

impl RangeReady {
    fn new(s: &Schedule, ranges: crate::runs::ChunkRanges) -> RangeReady {
        RangeReady {
            rows: crate::runs::Runs::new(s.topology.npus(), ranges.positions(), 0.0, |_| Vec::new()),
            ranges,
            pieces: Vec::new(),
            scratch: (Vec::new(), Vec::new()),
        }
    }
}

impl Ready for RangeReady {
    fn ready(&mut self, s: &Schedule, i: usize) -> f64 {
        let src = s.transfers.at(i).src as usize;
        self.pieces.clear();
        if let Some(rs) = self.ranges.of(s, i) {
            for &(lo, hi) in rs.as_slice() {
                self.rows.read(src, lo, hi, &mut self.pieces);
            }
        }
        self.pieces.iter().fold(0.0, |a, p| a.max(p.2))
    }

    fn land(&mut self, s: &Schedule, i: usize, end: f64) -> bool {
        let dst = s.transfers.at(i).dst as usize;
        let Some(rs) = self.ranges.of(s, i) else { return true };
        for &(lo, hi) in rs.as_slice() {
            self.pieces.clear();
            self.rows.read(dst, lo, hi, &mut self.pieces);
            for p in &mut self.pieces {
                p.2 = p.2.max(end);
            }
            let (removed, added) = &mut self.scratch;
            removed.clear();
            added.clear();
            if self.rows.write(dst, lo, hi, &self.pieces, |a, b| a == b, removed, added).is_err() {
                return false;
            }
        }
        true
    }
}

/// The replay on `ready`'s store: `None` when the store gives up.
fn run(
    s: &Schedule,
    mut ready: impl Ready,
    mut times: Option<&mut [TransferTime]>,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Timing>, SimError> {
    let mut poll = crate::schedule::StopPoll::new(stop);
    let mut replay = Replay::new(s);
    let order = s.replay_order();
    let mut round_end_ns = Vec::new();
    let mut total = 0.0f64;
    for steps in order.steps(&s.transfers) {
        if poll.stopped(steps.start) {
            return Err(SimError::Stopped);
        }
        let Some(round_end) = replay.step(&mut ready, &order, steps, times.as_deref_mut())? else {
            return Ok(None);
        };
        round_end_ns.push(round_end);
        total = total.max(round_end);
    }
    Ok(Some(replay.timing(round_end_ns, total)))
}

/// A replay's state across steps: constants read once and the per-link tallies the result reports.
struct Replay<'a> {
    s: &'a Schedule,
    topo: &'a Topology,
    chunk: f64,
    gamma: f64,
    slots: usize,
    /// The highest slot each distinct list names, so a transfer's slots are checked once a list.
    list_max: Vec<u32>,
    link_free: Vec<f64>,
    busy: Vec<f64>,
    bytes_on: Vec<f64>,
    count: Vec<usize>,
    path_links: Vec<usize>,
    /// (transfer, end) of the current step: their writes land after every read of the step.
    pending: Vec<(usize, f64)>,
}

impl<'a> Replay<'a> {
    /// Reads the schedule's constants once, so the per-transfer loop does not.
    fn new(s: &'a Schedule) -> Replay<'a> {
        let topo = &s.topology;
        Replay {
            s,
            topo,
            chunk: s.chunk_size_bytes,
            gamma: s.collective.gamma_ns_per_byte.unwrap_or(0.0),
            slots: s.slots(),
            list_max: s.transfers.lists().map(|l| l.iter().copied().max().unwrap_or(0)).collect(),
            link_free: vec![0.0f64; topo.links().len()],
            busy: vec![0.0f64; topo.links().len()],
            bytes_on: vec![0.0f64; topo.links().len()],
            count: vec![0usize; topo.links().len()],
            path_links: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// One step: every transfer reads, then all their writes land (reads never see the step's
    /// writes). Its latest end; `None` when the store gives up.
    fn step(
        &mut self,
        ready: &mut impl Ready,
        order: &ReplayOrder,
        steps: std::ops::Range<usize>,
        mut times: Option<&mut [TransferTime]>,
    ) -> Result<Option<f64>, SimError> {
        let mut round_end = 0.0f64;
        self.pending.clear();
        for k in steps {
            let i = order.get(k);
            let time = self.transfer(ready, i)?;
            if let Some(times) = times.as_deref_mut() {
                times[i] = time;
            }
            self.pending.push((i, time.end_ns));
            round_end = round_end.max(time.end_ns);
        }
        for &(i, end) in &self.pending {
            if !ready.land(self.s, i, end) {
                return Ok(None);
            }
        }
        Ok(Some(round_end))
    }

    /// Times transfer `i` once its sources are final and its path is free, and books the path busy.
    #[inline]
    fn transfer(&mut self, ready: &mut impl Ready, i: usize) -> Result<TransferTime, SimError> {
        let (s, topo) = (self.s, self.topo);
        let t = s.transfers.at(i);
        self.route_checked(i, t)?;
        // On the wire each distinct chunk once; a reduce combines into every slot written.
        let bytes = self.chunk * t.wire_chunks() as f64;
        let combined = self.chunk * t.written().len() as f64;
        let mut start = ready.ready(s, i);
        let mut latency = 0.0;
        let mut min_bw = f64::INFINITY;
        for &l in &self.path_links {
            start = start.max(self.link_free[l]);
            latency += topo.links()[l].latency_ns;
            min_bw = min_bw.min(topo.links()[l].bandwidth_gb_per_s);
        }
        let mut duration = if self.path_links.is_empty() { 0.0 } else { latency + bytes / min_bw };
        if t.op == Op::Reduce {
            duration += self.gamma * combined;
        }
        let end = start + duration;
        for &l in &self.path_links {
            self.link_free[l] = end;
            self.busy[l] += duration;
            self.bytes_on[l] += bytes;
            self.count[l] += 1;
        }
        Ok(TransferTime { start_ns: start, end_ns: end })
    }

    /// Routes transfer `i` into `path_links` and rejects what the stores cannot index unchecked.
    #[inline]
    fn route_checked(&mut self, i: usize, t: TransferRef<'_>) -> Result<(), SimError> {
        let topo = self.topo;
        if t.is_local() {
            self.path_links.clear();
        } else {
            route(topo, i, t.src, t.dst, t.path_nodes(), &mut self.path_links)?;
        }
        if t.src as usize >= topo.npus() || t.dst as usize >= topo.npus() {
            return Err(SimError::Unroutable { transfer: i, message: "an endpoint is not an NPU".into() });
        }
        let highest = match self.s.transfers.list_index(i) {
            Some(l) => self.list_max[l as usize],
            None => t.chunks.iter().copied().max().unwrap_or(0),
        };
        let dst_slots: &[u32] = t.dst_chunks.unwrap_or(&[]);
        let slots = self.slots;
        let over = |c: &u32| *c as usize >= slots;
        if over(&highest) || dst_slots.iter().any(over) {
            let c = t.chunks.iter().chain(dst_slots).copied().find(over).unwrap_or(highest);
            return Err(SimError::Unroutable { transfer: i, message: format!("chunk {c} is out of range") });
        }
        if t.written().len() != t.chunks.len() {
            return Err(SimError::Unroutable { transfer: i, message: "dst_chunks and chunks differ in length".into() });
        }
        Ok(())
    }

    /// The result from the tallies, once every step has landed (links that carried nothing left out).
    fn timing(&self, round_end_ns: Vec<f64>, total: f64) -> Timing {
        let mut links = Vec::new();
        for (i, l) in self.topo.links().iter().enumerate() {
            if self.count[i] > 0 {
                links.push(LinkUsage {
                    src: l.src,
                    dst: l.dst,
                    transfers: self.count[i],
                    bytes: self.bytes_on[i],
                    busy_ns: self.busy[i],
                    utilization: if total > 0.0 { self.busy[i] / total } else { 0.0 },
                });
            }
        }
        let used = links.len().max(1) as f64;
        Timing {
            collective_time_ns: total,
            rounds: round_end_ns.len(),
            transfers: self.s.transfers.len(),
            bytes_on_links: self.bytes_on.iter().sum(),
            mean_link_utilization: links.iter().map(|l| l.utilization).sum::<f64>() / used,
            max_link_utilization: links.iter().map(|l| l.utilization).fold(0.0, f64::max),
            round_end_ns,
            links,
        }
    }
}

/// A lower bound on the simulated time that needs no replay: the busiest link's total busy
/// time (each transfer keeps every link of its path busy for its whole duration, and a link
/// carries one transfer at a time). `None` when a transfer does not route. Linear in the
/// transfers' path lengths, so the portfolio can drop a candidate that cannot win before
/// validating and simulating it.
pub fn link_load_bound_ns(s: &Schedule) -> Option<f64> {
    let topo = &s.topology;
    let gamma = s.collective.gamma_ns_per_byte.unwrap_or(0.0);
    let mut busy = vec![0.0f64; topo.links().len()];
    let mut links = Vec::new();
    for (i, t) in s.transfers.iter().enumerate() {
        if t.is_local() {
            continue;
        }
        route(topo, i, t.src, t.dst, t.path_nodes(), &mut links).ok()?;
        let (mut latency, mut min_bw) = (0.0, f64::INFINITY);
        for &l in &links {
            latency += topo.links()[l].latency_ns;
            min_bw = min_bw.min(topo.links()[l].bandwidth_gb_per_s);
        }
        let mut duration = latency + s.chunk_size_bytes * t.wire_chunks() as f64 / min_bw;
        if t.op == Op::Reduce {
            duration += gamma * s.chunk_size_bytes * t.written().len() as f64;
        }
        for &l in &links {
            busy[l] += duration;
        }
    }
    Some(busy.into_iter().fold(0.0, f64::max))
}

/// The link indices a transfer occupies (none for a local move).
pub fn links_of(s: &Schedule, i: usize) -> Result<Vec<usize>, SimError> {
    let t = s.transfers.at(i);
    let mut out = Vec::new();
    if !t.is_local() {
        route(&s.topology, i, t.src, t.dst, t.path_nodes(), &mut out)?;
    }
    Ok(out)
}

/// The link indices a transfer occupies.
fn route(
    topo: &Topology,
    i: usize,
    src: u32,
    dst: u32,
    path: Option<&[u32]>,
    out: &mut Vec<usize>,
) -> Result<(), SimError> {
    out.clear();
    let direct = [src, dst];
    let nodes: &[u32] = match path {
        None => &direct,
        Some(p) => {
            if p.len() < 2 || p[0] != src || p[p.len() - 1] != dst {
                return Err(SimError::Unroutable {
                    transfer: i,
                    message: format!("path {p:?} does not run from {src} to {dst}"),
                });
            }
            p
        }
    };
    for w in nodes.windows(2) {
        let (a, b) = (w[0], w[1]);
        match topo.link_index(a as usize, b as usize) {
            Some(l) => out.push(l),
            None => {
                return Err(SimError::Unroutable { transfer: i, message: format!("no link {a}->{b}") });
            }
        }
    }
    Ok(())
}
