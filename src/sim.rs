//! The α-β simulator: replays a schedule's transfers in (step, position) order on the links
//! they use and reports the collective time, per-link busy time and bytes.

use crate::schedule::{Op, Schedule};
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

/// `simulate`, with each transfer's start and end (indexed as `s.transfers`). Opt-in: a
/// 33-million-transfer schedule would need half a gigabyte for them.
pub fn simulate_with_times(s: &Schedule) -> Result<(Timing, Vec<TransferTime>), SimError> {
    let mut times = vec![TransferTime { start_ns: 0.0, end_ns: 0.0 }; s.transfers.len()];
    let timing = replay(s, Some(&mut times), &|| false)?;
    Ok((timing, times))
}

fn replay(s: &Schedule, mut times: Option<&mut [TransferTime]>, stop: &dyn Fn() -> bool) -> Result<Timing, SimError> {
    let mut poll = crate::schedule::StopPoll::new(stop);
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
    let topo = &s.topology;
    let chunk = s.chunk_size_bytes;
    let gamma = s.collective.gamma_ns_per_byte.unwrap_or(0.0);
    let slots = s.slots();
    // Chunks laid out so that the evenly spaced lists most messages carry sit side by side.
    let layout = crate::slots::SlotOrder::new(s.num_chunks, s.transfers.dominant_spacing());
    let pos: Vec<u32> = (0..s.num_chunks as u32)
        .map(|c| layout.of(c))
        .chain((0..s.scratch.len() as u32).map(|i| layout.len() as u32 + i))
        .collect();
    let pos = |c: u32| pos[c as usize] as usize;
    // A slot's contents are final when the transfer that wrote them last ends: the table holds
    // that transfer (index + 1; 0 for a slot never written, final at time 0) and `ends` its end,
    // 4 bytes a slot instead of 8 (bucket on torus:64x64 in 4 parts: 2^26 slots).
    // Every postcondition pair is written (and every precondition pair read) at least once.
    let filled = s.precondition.len().max(s.postcondition.len());
    let mut ready: SlotTable<u32> = SlotTable::for_filled(topo.npus(), layout.len() + s.scratch.len(), filled);
    let mut ends = vec![0.0f64; s.transfers.len() + 1];
    let mut link_free = vec![0.0f64; topo.links().len()];
    let mut busy = vec![0.0f64; topo.links().len()];
    let mut bytes_on = vec![0.0f64; topo.links().len()];
    let mut count = vec![0usize; topo.links().len()];
    let order = s.replay_order();
    let mut path_links: Vec<usize> = Vec::new();
    // (transfer, end) of the current step: their writes land after every read of the step.
    let mut pending: Vec<(usize, f64)> = Vec::new();
    let mut round_end_ns = Vec::new();
    let mut total = 0.0f64;
    for steps in order.steps(&s.transfers) {
        if poll.stopped(steps.start) {
            return Err(SimError::Stopped);
        }
        let mut round_end = 0.0f64;
        pending.clear();
        for k in steps {
            let i = order.get(k);
            let t = s.transfers.at(i);
            if t.is_local() {
                path_links.clear();
            } else {
                route(topo, i, t.src, t.dst, t.path_nodes(), &mut path_links)?;
            }
            if t.src as usize >= topo.npus() || t.dst as usize >= topo.npus() {
                return Err(SimError::Unroutable { transfer: i, message: "an endpoint is not an NPU".into() });
            }
            let dst_slots: &[u32] = t.dst_chunks.unwrap_or(&[]);
            if let Some(&c) = t.chunks.iter().chain(dst_slots).find(|&&c| c as usize >= slots) {
                return Err(SimError::Unroutable { transfer: i, message: format!("chunk {c} is out of range") });
            }
            if t.written().len() != t.chunks.len() {
                return Err(SimError::Unroutable {
                    transfer: i,
                    message: "dst_chunks and chunks differ in length".into(),
                });
            }
            // On the wire each distinct chunk once; a reduce combines into every slot written.
            let bytes = chunk * t.wire_chunks() as f64;
            let combined = chunk * t.written().len() as f64;
            let mut start = 0.0f64;
            for &c in t.chunks {
                start = start.max(ends[*ready.get(t.src as usize, pos(c)) as usize]);
            }
            let mut latency = 0.0;
            let mut min_bw = f64::INFINITY;
            for &l in &path_links {
                start = start.max(link_free[l]);
                latency += topo.links()[l].latency_ns;
                min_bw = min_bw.min(topo.links()[l].bandwidth_gb_per_s);
            }
            let mut duration = if path_links.is_empty() { 0.0 } else { latency + bytes / min_bw };
            if t.op == Op::Reduce {
                duration += gamma * combined;
            }
            let end = start + duration;
            for &l in &path_links {
                link_free[l] = end;
                busy[l] += duration;
                bytes_on[l] += bytes;
                count[l] += 1;
            }
            if let Some(times) = times.as_deref_mut() {
                times[i] = TransferTime { start_ns: start, end_ns: end };
            }
            pending.push((i, end));
            round_end = round_end.max(end);
        }
        for &(i, end) in &pending {
            ends[i + 1] = end;
            let t = s.transfers.at(i);
            for &c in t.written() {
                let old = *ready.get(t.dst as usize, pos(c));
                if end > ends[old as usize] {
                    ready.set(t.dst as usize, pos(c), i as u32 + 1);
                }
            }
        }
        round_end_ns.push(round_end);
        total = total.max(round_end);
    }
    let mut links = Vec::new();
    for (i, l) in topo.links().iter().enumerate() {
        if count[i] > 0 {
            links.push(LinkUsage {
                src: l.src,
                dst: l.dst,
                transfers: count[i],
                bytes: bytes_on[i],
                busy_ns: busy[i],
                utilization: if total > 0.0 { busy[i] / total } else { 0.0 },
            });
        }
    }
    let used = links.len().max(1) as f64;
    Ok(Timing {
        collective_time_ns: total,
        rounds: round_end_ns.len(),
        transfers: s.transfers.len(),
        bytes_on_links: bytes_on.iter().sum(),
        mean_link_utilization: links.iter().map(|l| l.utilization).sum::<f64>() / used,
        max_link_utilization: links.iter().map(|l| l.utilization).fold(0.0, f64::max),
        round_end_ns,
        links,
    })
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
