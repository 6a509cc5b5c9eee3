//! The α-β simulator: replays a schedule's transfers in (step, position) order on the links
//! they use (relays stored and forwarded, hop-major) and reports the collective time, per-link
//! busy time and bytes.

use crate::schedule::{Op, ReplayOrder, Schedule, TransferRef};
use crate::topology::Topology;
use ready::{RangeReady, Ready, SlotReady};
use serde::Serialize;

mod ready;

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

/// The simulator's model, bumped when it times a schedule differently: 2 since relays are
/// stored and forwarded (1: a relayed transfer held its whole path, cut through). Results
/// timed under another model are not reused (the service's cache keys carry it).
pub const MODEL: u32 = 2;

/// One hop of a transfer relayed through NPUs, as the replay booked it (a transfer's hops are
/// logged in hop order).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HopTime {
    pub transfer: usize,
    pub start_ns: f64,
    pub end_ns: f64,
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
/// final (end of the last write into them in an earlier step) and the links of its first hop
/// are free. A path is cut into hops at the NPUs it relays through (a switch is cut through):
/// each hop takes Σ latency over its links + bytes / min bandwidth over them, keeps its links
/// busy until it ends, and starts once the hop before it has ended at the relay and its own
/// links are free (store and forward, as a runtime relays: a receive, then a send); a step's
/// second hops are booked after all its first hops, and so on (hop-major). The last hop adds
/// γ·bytes for a reduce and makes the destination's contents final at its end. Reads within a
/// step never see writes of the same step. Bytes count each distinct chunk once (one
/// received chunk may feed several slots); a local move between slots uses no link and takes
/// only its γ time.
pub fn simulate(s: &Schedule) -> Result<Timing, SimError> {
    replay(s, None, &|| false)
}

/// About the bytes the simulator's table of slots comes to for `s`, before it is allocated:
/// an upper bound, since the replay on ranges (schedules whose messages carry long chunk lists)
/// holds runs instead and falls back on the table only when its rows fragment.
pub fn table_bytes(s: &Schedule) -> u64 {
    let layout = crate::slots::SlotOrder::new(s.num_chunks, s.transfers.dominant_spacing());
    let filled = ready::filled(s);
    let npus = s.topology.npus();
    let positions = layout.len() + s.scratch.len();
    // Past the cell limit the table is refused, never allocated.
    let table = match npus.checked_mul(positions) {
        Some(cells) if cells <= crate::limits::MAX_CHECKED_CELLS => {
            crate::slots::table_bytes(npus, positions, filled, 4)
        }
        _ => 0,
    };
    table + 8 * s.transfers.len() as u64 + 4 * s.slots() as u64
}

/// `simulate`, asking `stop` every so many transfers; `SimError::Stopped` once it says so.
pub fn simulate_until(s: &Schedule, stop: &dyn Fn() -> bool) -> Result<Timing, SimError> {
    replay(s, None, stop)
}

/// `simulate` on a table of slots whatever the schedule (the replay on ranges never runs):
/// for tests that the two agree, and for benchmarks.
#[doc(hidden)]
pub fn simulate_on_slots(s: &Schedule) -> Result<Timing, SimError> {
    replay_on(s, None, None, &|| false, false)
}

/// `simulate` on ranges whatever the schedule: `None` when the schedule is not replayed that
/// way (destination slots, a chunk out of range) or its rows fragment. For tests that the two
/// agree.
#[doc(hidden)]
pub fn simulate_on_ranges(s: &Schedule) -> Option<Result<Timing, SimError>> {
    let ranges = crate::runs::ChunkRanges::new(s)?;
    run(s, RangeReady::new(s, ranges), None, None, &|| false).transpose()
}

/// `simulate`, with each transfer's start and end (indexed as `s.transfers`). Opt-in: a
/// 33-million-transfer schedule would need half a gigabyte for them.
pub fn simulate_with_times(s: &Schedule) -> Result<(Timing, Vec<TransferTime>), SimError> {
    let mut times = vec![TransferTime { start_ns: 0.0, end_ns: 0.0 }; s.transfers.len()];
    let timing = replay(s, Some(&mut times), &|| false)?;
    Ok((timing, times))
}

/// `simulate_with_times` on the table of slots (for a caller that has bounded its cells: the
/// replay on ranges is slower where runs of a few chunks fragment its rows), asking `stop`
/// every so many transfers; `SimError::Stopped` once it says so.
pub fn simulate_with_times_on_slots_until(
    s: &Schedule,
    stop: &dyn Fn() -> bool,
) -> Result<(Timing, Vec<TransferTime>), SimError> {
    let mut times = vec![TransferTime { start_ns: 0.0, end_ns: 0.0 }; s.transfers.len()];
    let timing = replay_on(s, Some(&mut times), None, stop, false)?;
    Ok((timing, times))
}

/// `simulate_with_times`, with the hops of every transfer relayed through NPUs (a link of such
/// a transfer is busy for its hop only, not for the transfer's whole span): for pictures.
pub fn simulate_with_hops(s: &Schedule) -> Result<(Timing, Vec<TransferTime>, Vec<HopTime>), SimError> {
    let mut times = vec![TransferTime { start_ns: 0.0, end_ns: 0.0 }; s.transfers.len()];
    let mut hops = Vec::new();
    let timing = replay_on(s, Some(&mut times), Some(&mut hops), &|| false, crate::runs::worth_ranges(s))?;
    Ok((timing, times, hops))
}

/// Each link of each transfer's path (`links_of`) with the span it is busy for that transfer:
/// its hop's (from `simulate_with_hops`), the transfer's own where it relays through no NPU.
pub fn link_spans(
    s: &Schedule,
    times: &[TransferTime],
    hops: &[HopTime],
) -> Result<Vec<Vec<(usize, TransferTime)>>, SimError> {
    let mut of: std::collections::HashMap<usize, Vec<TransferTime>> = std::collections::HashMap::new();
    for h in hops {
        of.entry(h.transfer).or_default().push(TransferTime { start_ns: h.start_ns, end_ns: h.end_ns });
    }
    (0..s.transfers.len())
        .map(|i| {
            let links = links_of(s, i)?;
            let Some(spans) = of.get(&i) else { return Ok(links.into_iter().map(|l| (l, times[i])).collect()) };
            let mut out = Vec::with_capacity(links.len());
            let mut spans = spans.iter();
            for_each_hop(&s.topology, &links, |hop, _| {
                let span = *spans.next().expect("a relayed transfer's hops are all logged");
                out.extend(hop.iter().map(|&l| (l, span)));
            });
            Ok(out)
        })
        .collect()
}

fn replay(s: &Schedule, times: Option<&mut [TransferTime]>, stop: &dyn Fn() -> bool) -> Result<Timing, SimError> {
    replay_on(s, times, None, stop, crate::runs::worth_ranges(s))
}

/// The replay, on ranges first when `ranges` says so.
fn replay_on(
    s: &Schedule,
    mut times: Option<&mut [TransferTime]>,
    mut hops: Option<&mut Vec<HopTime>>,
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
        && let Some(timing) = run(s, RangeReady::new(s, ranges), times.as_deref_mut(), hops.as_deref_mut(), stop)?
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
    Ok(run(s, ready, times, hops, stop)?.expect("a table of slots never gives up"))
}

/// The replay on `ready`'s store: `None` when the store gives up. `hops`, when given, gets
/// the relayed transfers' hops.
fn run(
    s: &Schedule,
    mut ready: impl Ready,
    mut times: Option<&mut [TransferTime]>,
    hops: Option<&mut Vec<HopTime>>,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Timing>, SimError> {
    let mut poll = crate::schedule::StopPoll::new(stop);
    let mut replay = Replay::new(s);
    replay.hop_log = hops.as_ref().map(|_| Vec::new());
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
    if let (Some(out), Some(log)) = (hops, replay.hop_log.take()) {
        *out = log;
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
    tally: Tally,
    path_links: Vec<usize>,
    /// (transfer, start, end) of the current step: their writes land after every read of the step.
    pending: Vec<(usize, f64, f64)>,
    /// The current step's relayed transfers past their first hop, and their later hops' links.
    relayed: Vec<Relayed>,
    relay_links: Vec<usize>,
    /// The relayed transfers' hops, when asked for.
    hop_log: Option<Vec<HopTime>>,
}

/// Per link: when it is next free, and what the result reports of it.
struct Tally {
    free: Vec<f64>,
    busy: Vec<f64>,
    bytes: Vec<f64>,
    count: Vec<usize>,
}

impl Tally {
    /// Books one hop on `links` from `at` (or once they are all free): Σ latency + bytes / min
    /// bandwidth over them, plus `extra`. Its (start, end).
    #[inline]
    fn book(&mut self, topo: &Topology, links: &[usize], at: f64, bytes: f64, extra: f64) -> (f64, f64) {
        let free = links.iter().fold(0.0f64, |a, &l| a.max(self.free[l]));
        let (start, duration) = (at.max(free), hop_ns(topo, links, bytes) + extra);
        let end = start + duration;
        for &l in links {
            self.free[l] = end;
            self.busy[l] += duration;
            self.bytes[l] += bytes;
            self.count[l] += 1;
        }
        (start, end)
    }
}

/// A relayed transfer of the current step whose later hops wait for the step's earlier hops:
/// `pending[slot]`'s, with hops `relay_links[from..to]` left, at the relay since `at`.
#[derive(Clone, Copy)]
struct Relayed {
    slot: usize,
    from: usize,
    to: usize,
    at: f64,
    bytes: f64,
    gamma: f64,
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
            tally: Tally {
                free: vec![0.0f64; topo.links().len()],
                busy: vec![0.0f64; topo.links().len()],
                bytes: vec![0.0f64; topo.links().len()],
                count: vec![0usize; topo.links().len()],
            },
            path_links: Vec::new(),
            pending: Vec::new(),
            relayed: Vec::new(),
            relay_links: Vec::new(),
            hop_log: None,
        }
    }

    /// One step: every transfer reads, then all their writes land (reads never see the step's
    /// writes). Relayed transfers are booked hop-major: every first hop in (step, position)
    /// order, then every second hop, and so on, as a runtime forwards what it has received. Its
    /// latest end; `None` when the store gives up.
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
            self.transfer(ready, i)?;
        }
        self.forward();
        for &(i, start_ns, end_ns) in &self.pending {
            if let Some(times) = times.as_deref_mut() {
                times[i] = TransferTime { start_ns, end_ns };
            }
            round_end = round_end.max(end_ns);
            if !ready.land(self.s, i, end_ns) {
                return Ok(None);
            }
        }
        Ok(Some(round_end))
    }

    /// Times transfer `i`'s first hop once its sources are final and the hop's links are free,
    /// books them busy, and leaves its later hops, if any, to `forward`.
    #[inline]
    fn transfer(&mut self, ready: &mut impl Ready, i: usize) -> Result<(), SimError> {
        let (s, topo) = (self.s, self.topo);
        let t = s.transfers.at(i);
        self.route_checked(i, t)?;
        // On the wire each distinct chunk once; a reduce combines into every slot written.
        let bytes = self.chunk * t.wire_chunks() as f64;
        let combined = self.chunk * t.written().len() as f64;
        let gamma = if t.op == Op::Reduce { self.gamma * combined } else { 0.0 };
        let ready_ns = ready.ready(s, i);
        if self.path_links.is_empty() {
            self.pending.push((i, ready_ns, ready_ns + gamma));
            return Ok(());
        }
        let path = &self.path_links;
        let first = hop_len(topo, path);
        let last = first == path.len();
        let (start, end) = self.tally.book(topo, &path[..first], ready_ns, bytes, if last { gamma } else { 0.0 });
        if !last {
            if let Some(log) = &mut self.hop_log {
                log.push(HopTime { transfer: i, start_ns: start, end_ns: end });
            }
            let from = self.relay_links.len();
            self.relay_links.extend_from_slice(&path[first..]);
            let (slot, to) = (self.pending.len(), self.relay_links.len());
            self.relayed.push(Relayed { slot, from, to, at: end, bytes, gamma });
        }
        self.pending.push((i, start, end));
        Ok(())
    }

    /// Books the step's relayed transfers' later hops hop-major: every second hop in (step,
    /// position) order, then every third, and so on; each from when its hop before ended at the
    /// relay and its links are free. A static order, so the exports can pin it: a thread block
    /// that sends a relay's forward and its NPU's own messages over one link sends the step's
    /// first hops first.
    fn forward(&mut self) {
        let topo = self.topo;
        while !self.relayed.is_empty() {
            let mut kept = 0;
            for k in 0..self.relayed.len() {
                let mut r = self.relayed[k];
                let links = &self.relay_links[r.from..r.to];
                let hop = hop_len(topo, links);
                let last = hop == links.len();
                let (start, end) =
                    self.tally.book(topo, &links[..hop], r.at, r.bytes, if last { r.gamma } else { 0.0 });
                if let Some(log) = &mut self.hop_log {
                    log.push(HopTime { transfer: self.pending[r.slot].0, start_ns: start, end_ns: end });
                }
                if last {
                    self.pending[r.slot].2 = end;
                } else {
                    (r.from, r.at) = (r.from + hop, end);
                    self.relayed[kept] = r;
                    kept += 1;
                }
            }
            self.relayed.truncate(kept);
        }
        self.relay_links.clear();
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
            let tally = &self.tally;
            if tally.count[i] > 0 {
                links.push(LinkUsage {
                    src: l.src,
                    dst: l.dst,
                    transfers: tally.count[i],
                    bytes: tally.bytes[i],
                    busy_ns: tally.busy[i],
                    utilization: if total > 0.0 { tally.busy[i] / total } else { 0.0 },
                });
            }
        }
        let used = links.len().max(1) as f64;
        Timing {
            collective_time_ns: total,
            rounds: round_end_ns.len(),
            transfers: self.s.transfers.len(),
            // Folded from +0.0: an empty float sum is -0.0, printed so for a schedule of no
            // transfers.
            bytes_on_links: self.tally.bytes.iter().fold(0.0, |a, b| a + b),
            mean_link_utilization: links.iter().map(|l| l.utilization).fold(0.0, |a, b| a + b) / used,
            max_link_utilization: links.iter().map(|l| l.utilization).fold(0.0, f64::max),
            round_end_ns,
            links,
        }
    }
}

/// A lower bound on the simulated time that needs no replay: the busiest link's total busy
/// time (each hop of a transfer keeps its links busy for the hop's whole duration, and a link
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
        let bytes = s.chunk_size_bytes * t.wire_chunks() as f64;
        for_each_hop(topo, &links, |hop, last| {
            let mut duration = hop_ns(topo, hop, bytes);
            if last && t.op == Op::Reduce {
                duration += gamma * s.chunk_size_bytes * t.written().len() as f64;
            }
            for &l in hop {
                busy[l] += duration;
            }
        });
    }
    Some(busy.into_iter().fold(0.0, f64::max))
}

/// Calls `f` on each hop of a path's links, in order, and whether it is the last.
#[inline]
fn for_each_hop(topo: &Topology, mut links: &[usize], mut f: impl FnMut(&[usize], bool)) {
    while !links.is_empty() {
        let hop = hop_len(topo, links);
        f(&links[..hop], hop == links.len());
        links = &links[hop..];
    }
}

/// How many of a path's links its first hop takes: up to the first NPU it relays through (a
/// switch between two links is cut through, an NPU stores and forwards); all of them when it
/// relays through none.
#[inline]
fn hop_len(topo: &Topology, links: &[usize]) -> usize {
    let npus = topo.npus();
    links.iter().position(|&l| topo.links()[l].dst < npus).map_or(links.len(), |k| k + 1)
}

/// One hop's time on its links: Σ latency + bytes / min bandwidth.
fn hop_ns(topo: &Topology, links: &[usize], bytes: f64) -> f64 {
    let (mut latency, mut min_bw) = (0.0, f64::INFINITY);
    for &l in links {
        latency += topo.links()[l].latency_ns;
        min_bw = min_bw.min(topo.links()[l].bandwidth_gb_per_s);
    }
    latency + bytes / min_bw
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
