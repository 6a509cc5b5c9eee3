//! The two phases of an all-reduce in one timeline. The reduce phase and the forward phase are
//! planned one after the other on the TEN; with unequal shares (`shares`) the forward phase's
//! first steps leave the NPUs far from the large roots idle (nothing has reached them), and the
//! reduce phase's last steps leave them idle too (they sent their partials early). Here every
//! move of both plans keeps its edge and chunk and waits only for its data (a partial goes on
//! once every partial into it arrived; a copy once its source holds the reduced chunk), and a
//! list scheduler starts each on the TEN as soon as its data and its ports allow, in the plans'
//! order of urgency: the broadcast of chunks reduced early overlaps the reduction of the rest.
//! The result is used only when it takes fewer TEN timesteps than the two phases in sequence.

use super::greedy::Move;
use crate::schedule::{ChunkList, Op, Transfer, Transfers};
use crate::ten::Ten;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// (npu, chunk) slots up to which the scheduler's per-slot tables are kept (beyond, the phases
/// stay in sequence: at thousands of NPUs the tables would cost more than the overlap wins).
pub(crate) const MAX_SLOTS: usize = 1 << 22;

/// The overlapped schedule of `reduce` (the reversed reduce phase, every transfer one chunk,
/// on links of `ten`) and `forward` (moves on `ten`), and its TEN timesteps; `None` when it is
/// not shorter than `sequential` timesteps, or when the phases do not fit the scheduler (a
/// relay's first partial is a copy, a path `ten` lacks, too many slots).
pub fn overlap(
    ten: &Ten,
    reduce: &Transfers,
    forward: &[Move],
    roots: &[u32],
    num_chunks: usize,
    sequential: u32,
    cancelled: &dyn Fn() -> bool,
) -> Option<(Transfers, u32)> {
    // Urgency: the plans' own order, the reduce phase first.
    let after = reduce.steps().iter().copied().max().map_or(0, |s| s as u64 + 1);
    overlap_keyed(ten, reduce, forward, roots, num_chunks, after, sequential, cancelled)
}

/// `overlap` with the forward moves' urgency their step plus `after` (the reduce transfers'
/// urgency their step): with `after` 0, several plans' phases in one timeline, each by the
/// urgency its caller gave it (`staged`: stage s's forward phase beside stage s + 1's reduce).
#[allow(clippy::too_many_arguments)]
pub fn overlap_keyed(
    ten: &Ten,
    reduce: &Transfers,
    forward: &[Move],
    roots: &[u32],
    num_chunks: usize,
    after: u64,
    sequential: u32,
    cancelled: &dyn Fn() -> bool,
) -> Option<(Transfers, u32)> {
    let n = ten.npus;
    if n.checked_mul(num_chunks).is_none_or(|s| s > MAX_SLOTS) {
        return None;
    }
    let slot = |v: u32, c: u32| v as usize * num_chunks + c as usize;
    let last_key = after + forward.iter().map(|m| m.step as u64).max().unwrap_or(0);
    if last_key > u32::MAX as u64 {
        return None;
    }
    let n_rs = reduce.len();
    let total = n_rs + forward.len();
    if total > u32::MAX as usize {
        return None;
    }
    // Every move's edge, chunk and urgency side by side: the scheduler reads them at random,
    // one cache line a move (at 4096 NPUs there are 8 M moves, and memory, not arithmetic, is
    // what the scheduler waits on).
    let mut mv: Vec<Mv> = Vec::with_capacity(total);
    for t in reduce.iter() {
        // Every NPU of an all-reduce contributes: a copy here is a relay's first partial, which
        // must come before the reductions into it.
        if t.op != Op::Reduce || t.chunks.len() != 1 || t.dst_chunks.is_some() {
            return None;
        }
        // The forward TEN's edge of the transfer (same ends and route).
        let e = ten.out_edges(t.src as usize).iter().copied().find(|&e| {
            let te = &ten.edges[e as usize];
            te.dst == t.dst && te.path.as_deref() == t.path.map(|p| &p[..])
        })?;
        mv.push(Mv { edge: e, chunk: t.chunks[0], key: t.step });
    }
    mv.extend(forward.iter().map(|m| Mv { edge: m.edge, chunk: m.chunk, key: (after + m.step as u64) as u32 }));
    let ends: Vec<(u32, u32)> = ten.edges.iter().map(|e| (e.src, e.dst)).collect();
    let src = |m: &Mv| ends[m.edge as usize].0;
    let dst = |m: &Mv| ends[m.edge as usize].1;
    // Partials still due into each slot, and the moves leaving each slot (CSR).
    let slots = n * num_chunks;
    let mut due = vec![0u32; slots];
    let mut start = vec![0u32; slots + 1];
    for (i, m) in mv.iter().enumerate() {
        if i < n_rs {
            due[slot(dst(m), m.chunk)] += 1;
        }
        start[slot(src(m), m.chunk) + 1] += 1;
    }
    for s in 0..slots {
        start[s + 1] += start[s];
    }
    let mut fill = start.clone();
    let mut leaving = vec![0u32; total];
    for (i, m) in mv.iter().enumerate() {
        let s = slot(src(m), m.chunk);
        leaving[fill[s] as usize] = i as u32;
        fill[s] += 1;
    }
    drop(fill);
    let mut q = Queues {
        ready: vec![BinaryHeap::new(); ten.edges.len()],
        active: Vec::new(),
        is_active: vec![false; ten.edges.len()],
    };
    // A slot's data is final for the moves leaving it: the reduction once no partial is due
    // (its root's broadcasts, or its own partial), the broadcast once its copy arrived.
    let release = |s: usize, broadcast: bool, q: &mut Queues| {
        let (v, c) = ((s / num_chunks) as u32, (s % num_chunks) as u32);
        for &i in &leaving[start[s] as usize..start[s + 1] as usize] {
            let wanted = if (i as usize) < n_rs { !broadcast } else { broadcast || roots[c as usize] == v };
            if wanted {
                let m = &mv[i as usize];
                q.offer(m.edge, m.key, i);
            }
        }
    };
    for s in 0..slots {
        if due[s] == 0 && start[s] < start[s + 1] {
            release(s, false, &mut q);
        }
    }
    // Where no resource is shared between edges, an edge starts whenever it is free, whatever
    // the others do: only the edges offered a move or freed at a timestep are looked at then
    // (`wake`, by timestep), not every edge with moves waiting.
    let mut seen = vec![false; ten.resources];
    let exclusive =
        ten.edges.iter().all(|e| e.resources.iter().all(|&r| !std::mem::replace(&mut seen[r as usize], true)));
    drop(seen);
    let mut wake: Option<Vec<Vec<u32>>> = (exclusive && !scan_all()).then(Vec::new);
    let mut busy = vec![0u32; ten.resources];
    let mut arrivals: Vec<Vec<u32>> = Vec::new();
    // Moves by the timestep they start at, in order of urgency within it.
    let mut started: Vec<u64> = Vec::with_capacity(total);
    // Where each timestep's moves begin in `started`, and the timestep.
    let mut batches: Vec<(usize, u32)> = Vec::new();
    let (mut done, mut time, mut last) = (0usize, 0u32, 0u32);
    let mut tops: Vec<(u32, u32)> = Vec::new();
    let mut now: Vec<u32> = Vec::new();
    while done < total {
        if time.is_multiple_of(256) && cancelled() {
            return None;
        }
        // Past the sequential plan's length the overlap cannot be shorter.
        if time > sequential {
            return None;
        }
        if let Some(list) = arrivals.get_mut(time as usize) {
            for i in std::mem::take(list) {
                done += 1;
                let m = &mv[i as usize];
                let s = slot(dst(m), m.chunk);
                if (i as usize) < n_rs {
                    due[s] -= 1;
                    if due[s] == 0 {
                        release(s, false, &mut q);
                    }
                } else {
                    release(s, true, &mut q);
                }
            }
        }
        let batch = started.len();
        let mut begin = |e: u32, busy: &mut [u32], ready: &mut [BinaryHeap<Reverse<u64>>]| -> Option<u32> {
            let te = &ten.edges[e as usize];
            if te.resources.iter().any(|&r| busy[r as usize] > time) {
                return None;
            }
            let Reverse(packed) = ready[e as usize].pop()?;
            for &r in &te.resources {
                busy[r as usize] = time + te.span;
            }
            let end = time + te.span;
            last = last.max(end);
            if arrivals.len() <= end as usize {
                arrivals.resize_with(end as usize + 1, Vec::new);
            }
            arrivals[end as usize].push(packed as u32);
            started.push(packed);
            Some(end)
        };
        if let Some(wake) = wake.as_mut() {
            now.append(&mut q.active);
            if let Some(freed) = wake.get_mut(time as usize) {
                now.append(freed);
            }
            for &e in &now {
                q.is_active[e as usize] = false;
            }
            for &e in &now {
                if let Some(end) = begin(e, &mut busy, &mut q.ready) {
                    let end = end as usize;
                    if wake.len() <= end {
                        wake.resize_with(end + 1, Vec::new);
                    }
                    wake[end].push(e);
                }
            }
            now.clear();
        } else {
            tops.clear();
            tops.extend(
                q.active.iter().filter_map(|&e| q.ready[e as usize].peek().map(|Reverse(k)| ((k >> 32) as u32, e))),
            );
            tops.sort_unstable();
            for &(_, e) in &tops {
                begin(e, &mut busy, &mut q.ready);
            }
            let Queues { ready, active, is_active } = &mut q;
            active.retain(|&e| {
                let keep = !ready[e as usize].is_empty();
                if !keep {
                    is_active[e as usize] = false;
                }
                keep
            });
        }
        if started.len() > batch {
            started[batch..].sort_unstable();
            batches.push((batch, time));
        }
        time += 1;
    }
    if last >= sequential {
        return None;
    }
    let mut out = Transfers::with_capacity(total);
    for (b, &(from, step)) in batches.iter().enumerate() {
        let to = batches.get(b + 1).map_or(started.len(), |x| x.0);
        for &packed in &started[from..to] {
            let i = packed as u32 as usize;
            let mut t = if i < n_rs {
                reduce.owned(i)
            } else {
                let e = &ten.edges[mv[i].edge as usize];
                let mut t = Transfer::copy(0, e.src as usize, e.dst as usize, ChunkList::One(mv[i].chunk));
                t.path = e.path.clone();
                t
            };
            t.step = step;
            out.push(t);
        }
    }
    Some((out, last))
}

#[cfg(test)]
thread_local! {
    /// Tests set it to run the scan of every edge where the wake-ups would serve.
    static SCAN_ALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn scan_all() -> bool {
    SCAN_ALL.with(|s| s.get())
}

#[cfg(not(test))]
fn scan_all() -> bool {
    false
}

/// One move of either phase: its TEN edge, its chunk, and its urgency (the step its plan gave
/// it, the forward phase's after the reduce phase's).
struct Mv {
    edge: u32,
    chunk: u32,
    key: u32,
}

/// Per TEN edge, the moves ready to start on it (most urgent first), and the edges with any.
struct Queues {
    /// Moves packed as urgency << 32 | move.
    ready: Vec<BinaryHeap<Reverse<u64>>>,
    active: Vec<u32>,
    is_active: Vec<bool>,
}

impl Queues {
    fn offer(&mut self, e: u32, key: u32, i: u32) {
        self.ready[e as usize].push(Reverse((key as u64) << 32 | i as u64));
        if !self.is_active[e as usize] {
            self.is_active[e as usize] = true;
            self.active.push(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
    use crate::synth::{PlanOptions, greedy};
    use crate::topology::{Failures, parse_topology};

    /// Where no resource is shared, waking only the edges offered a move or freed schedules
    /// exactly what scanning every edge at every timestep does (the scan orders the edges by
    /// urgency, which only matters where they share a resource): the same transfers, overlapped.
    #[test]
    fn waking_the_free_edges_schedules_what_the_scan_does() {
        let t = parse_topology("torus:8x8").unwrap();
        let t = t.with_failures(&Failures { npus: vec![9], ..Failures::default() }).unwrap();
        let spec = CollectiveSpec::new(CollectiveKind::AllReduce, 256 << 20).with_chunks_per_npu(4);
        let c = Collective::build(&spec, &t).unwrap();
        let opts = PlanOptions { seed: 1, switch_model: crate::ten::SwitchModel::Native, discretization_ns: None };
        let run = |scan: bool| {
            SCAN_ALL.with(|s| s.set(scan));
            let out = greedy(&t, &c, &opts, &|| false).unwrap();
            SCAN_ALL.with(|s| s.set(false));
            out
        };
        let (woken, a) = run(false);
        let (scanned, b) = run(true);
        assert!(a.overlapped && b.overlapped, "{a:?}");
        assert_eq!(a.ten_timesteps, b.ten_timesteps);
        assert_eq!(woken.transfers, scanned.transfers);
    }
}
