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
use std::collections::{BinaryHeap, HashMap};

/// (npu, chunk) slots up to which the scheduler's per-slot tables are kept (beyond, the phases
/// stay in sequence: at thousands of NPUs the tables would cost more than the overlap wins).
const MAX_SLOTS: usize = 1 << 22;

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
    let n = ten.npus;
    if n.checked_mul(num_chunks).is_none_or(|s| s > MAX_SLOTS) {
        return None;
    }
    let slot = |v: u32, c: u32| v as usize * num_chunks + c as usize;
    // The forward TEN's edge of each reduce transfer (same ends and route).
    let mut by_ends: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
    for (i, e) in ten.edges.iter().enumerate() {
        by_ends.entry((e.src, e.dst)).or_default().push(i as u32);
    }
    let n_rs = reduce.len();
    let total = n_rs + forward.len();
    let mut edge = Vec::with_capacity(total);
    let mut chunk = Vec::with_capacity(total);
    for t in reduce.iter() {
        // Every NPU of an all-reduce contributes: a copy here is a relay's first partial, which
        // must come before the reductions into it.
        if t.op != Op::Reduce || t.chunks.len() != 1 || t.dst_chunks.is_some() {
            return None;
        }
        let e = by_ends
            .get(&(t.src, t.dst))?
            .iter()
            .copied()
            .find(|&e| ten.edges[e as usize].path.as_deref() == t.path.map(|p| &p[..]))?;
        edge.push(e);
        chunk.push(t.chunks[0]);
    }
    for m in forward {
        edge.push(m.edge);
        chunk.push(m.chunk);
    }
    let src = |i: usize| ten.edges[edge[i] as usize].src;
    let dst = |i: usize| ten.edges[edge[i] as usize].dst;
    // Urgency: the plans' own order, the reduce phase first.
    let after = reduce.steps().iter().copied().max().map_or(0, |s| s as u64 + 1);
    let key = |i: usize| if i < n_rs { reduce.step(i) as u64 } else { after + forward[i - n_rs].step as u64 };
    // Partials still due into each slot, and the moves leaving each slot (CSR).
    let slots = n * num_chunks;
    let mut due = vec![0u32; slots];
    let mut start = vec![0u32; slots + 1];
    for i in 0..total {
        if i < n_rs {
            due[slot(dst(i), chunk[i])] += 1;
        }
        start[slot(src(i), chunk[i]) + 1] += 1;
    }
    for s in 0..slots {
        start[s + 1] += start[s];
    }
    let mut fill = start.clone();
    let mut leaving = vec![0u32; total];
    for (i, &c) in chunk.iter().enumerate() {
        let s = slot(src(i), c);
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
            let i = i as usize;
            let wanted = if i < n_rs { !broadcast } else { broadcast || roots[c as usize] == v };
            if wanted {
                q.offer(edge[i], key(i), i as u32);
            }
        }
    };
    for s in 0..slots {
        if due[s] == 0 && start[s] < start[s + 1] {
            release(s, false, &mut q);
        }
    }
    let mut busy = vec![0u32; ten.resources];
    let mut arrivals: Vec<Vec<u32>> = Vec::new();
    let mut began = vec![u32::MAX; total];
    let (mut done, mut time, mut last) = (0usize, 0u32, 0u32);
    let mut tops: Vec<(u64, u32)> = Vec::new();
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
                let i = i as usize;
                done += 1;
                let s = slot(dst(i), chunk[i]);
                if i < n_rs {
                    due[s] -= 1;
                    if due[s] == 0 {
                        release(s, false, &mut q);
                    }
                } else {
                    release(s, true, &mut q);
                }
            }
        }
        tops.clear();
        tops.extend(q.active.iter().filter_map(|&e| q.ready[e as usize].peek().map(|Reverse((k, _))| (*k, e))));
        tops.sort_unstable();
        for &(_, e) in &tops {
            let te = &ten.edges[e as usize];
            if te.resources.iter().any(|&r| busy[r as usize] > time) {
                continue;
            }
            let Some(Reverse((_, i))) = q.ready[e as usize].pop() else { continue };
            for &r in &te.resources {
                busy[r as usize] = time + te.span;
            }
            let end = time + te.span;
            last = last.max(end);
            if arrivals.len() <= end as usize {
                arrivals.resize_with(end as usize + 1, Vec::new);
            }
            arrivals[end as usize].push(i);
            began[i as usize] = time;
        }
        let Queues { ready, active, is_active } = &mut q;
        active.retain(|&e| {
            let keep = !ready[e as usize].is_empty();
            if !keep {
                is_active[e as usize] = false;
            }
            keep
        });
        time += 1;
    }
    if last >= sequential {
        return None;
    }
    let mut order: Vec<u32> = (0..total as u32).collect();
    order.sort_unstable_by_key(|&i| (began[i as usize], key(i as usize), i));
    let mut out = Transfers::with_capacity(total);
    for i in order {
        let i = i as usize;
        let mut t = if i < n_rs {
            reduce.owned(i)
        } else {
            let e = &ten.edges[edge[i] as usize];
            let mut t = Transfer::copy(0, e.src as usize, e.dst as usize, ChunkList::One(chunk[i]));
            t.path = e.path.clone();
            t
        };
        t.step = began[i];
        out.push(t);
    }
    Some((out, last))
}

/// Per TEN edge, the moves ready to start on it (most urgent first), and the edges with any.
struct Queues {
    ready: Vec<BinaryHeap<Reverse<(u64, u32)>>>,
    active: Vec<u32>,
    is_active: Vec<bool>,
}

impl Queues {
    fn offer(&mut self, e: u32, key: u64, i: u32) {
        self.ready[e as usize].push(Reverse((key, i)));
        if !self.is_active[e as usize] {
            self.is_active[e as usize] = true;
            self.active.push(e);
        }
    }
}
