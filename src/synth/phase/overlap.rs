//! The two phases of an all-reduce in one timeline. The reduce phase and the forward phase are
//! planned one after the other on the TEN; with unequal shares (`shares`) the forward phase's
//! first steps leave the NPUs far from the large roots idle (nothing has reached them), and the
//! reduce phase's last steps leave them idle too (they sent their partials early). Here every
//! move of both plans keeps its edge and chunk and waits only for its data (a partial goes on
//! once every partial into it arrived; a copy once its source holds the reduced chunk), and a
//! list scheduler starts each on the TEN as soon as its data and its ports allow, in the plans'
//! order of urgency: the broadcast of chunks reduced early overlaps the reduction of the rest.
//! The result is used only when it takes fewer TEN timesteps than the two phases in sequence.

use crate::schedule::{ChunkList, Op, Transfer, Transfers};
use crate::synth::phase::Move;
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
    let last_key = after + forward.iter().map(|m| m.step as u64).max().unwrap_or(0);
    if last_key > u32::MAX as u64 {
        return None;
    }
    let n_rs = reduce.len();
    let total = n_rs + forward.len();
    if total > u32::MAX as usize {
        return None;
    }
    let mv = moves(ten, reduce, forward, after, total)?;
    let mut sched = Scheduler::new(ten, roots, num_chunks, n_rs, mv);
    sched.release_initial();
    let last = sched.run(sequential, cancelled)?;
    if last >= sequential {
        return None;
    }
    Some((sched.transfers(reduce), last))
}

/// Where NPU `v`'s chunk `c` sits in the per-slot tables (one row of `num_chunks` an NPU).
fn slot(v: u32, c: u32, num_chunks: usize) -> usize {
    v as usize * num_chunks + c as usize
}

/// Both phases' moves in one table, so the scheduler reads one cache line a move; `None` on a misfit.
fn moves(ten: &Ten, reduce: &Transfers, forward: &[Move], after: u64, total: usize) -> Option<Vec<Mv>> {
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
    Some(mv)
}

/// Whether no resource is shared between edges (then only the edges woken need a look).
fn exclusive(ten: &Ten) -> bool {
    let mut seen = vec![false; ten.resources];
    ten.edges.iter().all(|e| e.resources.iter().all(|&r| !std::mem::replace(&mut seen[r as usize], true)))
}

/// The list scheduler's state: the moves, the per-slot tables, the ready queues, the timeline.
struct Scheduler<'a> {
    ten: &'a Ten,
    roots: &'a [u32],
    num_chunks: usize,
    /// Moves below it are the reduce phase's.
    n_rs: usize,
    mv: Vec<Mv>,
    /// Each TEN edge's (src, dst).
    ends: Vec<(u32, u32)>,
    due: Vec<u32>,
    start: Vec<u32>,
    leaving: Vec<u32>,
    q: Queues,
    /// The timestep each resource is busy until.
    busy: Vec<u32>,
    /// The moves arriving at each timestep.
    arrivals: Vec<Vec<u32>>,
    /// Moves by the timestep they start at, in order of urgency within it.
    started: Vec<u64>,
    /// Where each timestep's moves begin in `started`, and the timestep.
    batches: Vec<(usize, u32)>,
    last: u32,
}

impl<'a> Scheduler<'a> {
    /// Indexes the moves by slot, so a slot's completion finds the moves it frees at once.
    fn new(ten: &'a Ten, roots: &'a [u32], num_chunks: usize, n_rs: usize, mv: Vec<Mv>) -> Self {
        let total = mv.len();
        let ends: Vec<(u32, u32)> = ten.edges.iter().map(|e| (e.src, e.dst)).collect();
        let src = |m: &Mv| ends[m.edge as usize].0;
        let dst = |m: &Mv| ends[m.edge as usize].1;
        // Partials still due into each slot, and the moves leaving each slot (CSR).
        let slots = ten.npus * num_chunks;
        let mut due = vec![0u32; slots];
        let mut start = vec![0u32; slots + 1];
        for (i, m) in mv.iter().enumerate() {
            if i < n_rs {
                due[slot(dst(m), m.chunk, num_chunks)] += 1;
            }
            start[slot(src(m), m.chunk, num_chunks) + 1] += 1;
        }
        for s in 0..slots {
            start[s + 1] += start[s];
        }
        let mut fill = start.clone();
        let mut leaving = vec![0u32; total];
        for (i, m) in mv.iter().enumerate() {
            let s = slot(src(m), m.chunk, num_chunks);
            leaving[fill[s] as usize] = i as u32;
            fill[s] += 1;
        }
        drop(fill);
        let q = Queues {
            ready: vec![BinaryHeap::new(); ten.edges.len()],
            active: Vec::new(),
            is_active: vec![false; ten.edges.len()],
        };
        Scheduler {
            ten,
            roots,
            num_chunks,
            n_rs,
            mv,
            ends,
            due,
            start,
            leaving,
            q,
            busy: vec![0u32; ten.resources],
            arrivals: Vec::new(),
            started: Vec::with_capacity(total),
            batches: Vec::new(),
            last: 0,
        }
    }

    /// Offers the moves whose data slot `s` now holds final: its partials, or its broadcasts.
    fn release(&mut self, s: usize, broadcast: bool) {
        // A slot's data is final for the moves leaving it: the reduction once no partial is due
        // (its root's broadcasts, or its own partial), the broadcast once its copy arrived.
        let (v, c) = ((s / self.num_chunks) as u32, (s % self.num_chunks) as u32);
        for &i in &self.leaving[self.start[s] as usize..self.start[s + 1] as usize] {
            let wanted = if (i as usize) < self.n_rs { !broadcast } else { broadcast || self.roots[c as usize] == v };
            if wanted {
                let m = &self.mv[i as usize];
                self.q.offer(m.edge, m.key, i);
            }
        }
    }

    /// Releases the slots no partial is due into, before any move starts.
    fn release_initial(&mut self) {
        for s in 0..self.due.len() {
            if self.due[s] == 0 && self.start[s] < self.start[s + 1] {
                self.release(s, false);
            }
        }
    }

    /// Runs the timesteps until every move arrived; the last arrival, `None` if cancelled or too long.
    fn run(&mut self, sequential: u32, cancelled: &dyn Fn() -> bool) -> Option<u32> {
        // Where no resource is shared between edges, an edge starts whenever it is free, whatever
        // the others do: only the edges offered a move or freed at a timestep are looked at then
        // (`wake`, by timestep), not every edge with moves waiting.
        let mut wake: Option<Vec<Vec<u32>>> = (exclusive(self.ten) && !scan_all()).then(Vec::new);
        let total = self.mv.len();
        let (mut done, mut time) = (0usize, 0u32);
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
            done += self.arrive(time);
            let batch = self.started.len();
            if let Some(wake) = wake.as_mut() {
                self.start_woken(wake, &mut now, time);
            } else {
                self.start_scanned(&mut tops, time);
            }
            if self.started.len() > batch {
                self.started[batch..].sort_unstable();
                self.batches.push((batch, time));
            }
            time += 1;
        }
        Some(self.last)
    }

    /// Lands the moves arriving at `time`, releasing the slots they complete; how many landed.
    fn arrive(&mut self, time: u32) -> usize {
        let Some(list) = self.arrivals.get_mut(time as usize) else {
            return 0;
        };
        let list = std::mem::take(list);
        for &i in &list {
            let m = &self.mv[i as usize];
            let s = slot(self.ends[m.edge as usize].1, m.chunk, self.num_chunks);
            if (i as usize) < self.n_rs {
                self.due[s] -= 1;
                if self.due[s] == 0 {
                    self.release(s, false);
                }
            } else {
                self.release(s, true);
            }
        }
        list.len()
    }

    /// Starts edge `e`'s most urgent ready move at `time` if its resources are free; its end.
    fn begin(&mut self, e: u32, time: u32) -> Option<u32> {
        let ten = self.ten;
        let te = &ten.edges[e as usize];
        if te.resources.iter().any(|&r| self.busy[r as usize] > time) {
            return None;
        }
        let Reverse(packed) = self.q.ready[e as usize].pop()?;
        for &r in &te.resources {
            self.busy[r as usize] = time + te.span;
        }
        let end = time + te.span;
        self.last = self.last.max(end);
        if self.arrivals.len() <= end as usize {
            self.arrivals.resize_with(end as usize + 1, Vec::new);
        }
        self.arrivals[end as usize].push(packed as u32);
        self.started.push(packed);
        Some(end)
    }

    /// Starts moves on only the edges offered a move or freed at `time`, waking each when it frees.
    fn start_woken(&mut self, wake: &mut Vec<Vec<u32>>, now: &mut Vec<u32>, time: u32) {
        now.append(&mut self.q.active);
        if let Some(freed) = wake.get_mut(time as usize) {
            now.append(freed);
        }
        for &e in now.iter() {
            self.q.is_active[e as usize] = false;
        }
        for &e in now.iter() {
            if let Some(end) = self.begin(e, time) {
                let end = end as usize;
                if wake.len() <= end {
                    wake.resize_with(end + 1, Vec::new);
                }
                wake[end].push(e);
            }
        }
        now.clear();
    }

    /// Starts moves on every edge with moves waiting, most urgent first (edges share resources).
    fn start_scanned(&mut self, tops: &mut Vec<(u32, u32)>, time: u32) {
        tops.clear();
        let Queues { ready, active, .. } = &self.q;
        tops.extend(active.iter().filter_map(|&e| ready[e as usize].peek().map(|Reverse(k)| ((k >> 32) as u32, e))));
        tops.sort_unstable();
        for &(_, e) in tops.iter() {
            self.begin(e, time);
        }
        let Queues { ready, active, is_active } = &mut self.q;
        active.retain(|&e| {
            let keep = !ready[e as usize].is_empty();
            if !keep {
                is_active[e as usize] = false;
            }
            keep
        });
    }

    /// The started moves as transfers, each at the timestep it started at, in start order.
    fn transfers(&self, reduce: &Transfers) -> Transfers {
        let mut out = Transfers::with_capacity(self.mv.len());
        for (b, &(from, step)) in self.batches.iter().enumerate() {
            let to = self.batches.get(b + 1).map_or(self.started.len(), |x| x.0);
            for &packed in &self.started[from..to] {
                let i = packed as u32 as usize;
                let mut t = if i < self.n_rs {
                    reduce.owned(i)
                } else {
                    let e = &self.ten.edges[self.mv[i].edge as usize];
                    let mut t = Transfer::copy(0, e.src as usize, e.dst as usize, ChunkList::One(self.mv[i].chunk));
                    t.path = e.path.clone();
                    t
                };
                t.step = step;
                out.push(t);
            }
        }
        out
    }
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
