//! The validator's replay of a group of chunks: each step's reads and writes, the contents of
//! every slot, and the rules of the data flow (reads of held data, double counting, one write
//! per slot and step).

use super::groups::Group;
use super::sets::{IdHash, NONE, SetId, Sets};
use super::{At, Sink, ViolationKind, slot_name};
use crate::collective::Pairs;
use crate::schedule::{Op, ReplayOrder, Schedule};
use crate::slots::SlotTable;
use crate::spans::Spans;
use std::collections::HashMap;

/// A run of consecutive chunks of one transfer that read the same value at the source.
#[derive(Clone, Copy)]
struct Run {
    value: SetId,
    count: u32,
}

/// The replay of the data flow of one group of chunks: its slots, and what one step passes
/// from its reads to its writes (kept from step to step, so a step allocates nothing new for
/// them).
struct Replay<'a> {
    s: &'a Schedule,
    group: &'a Group,
    /// Per transfer, whether it passed `check_transfer`; only those are replayed.
    ok: &'a [bool],
    state: State,
    /// Per (npu, local slot): `2 * ordinal` when the current step writes it once,
    /// `2 * ordinal + 1` when more than once; older stamps mean it does not.
    stamps: SlotTable<u32>,
    /// The current step's number, from 1.
    ordinal: u32,
    /// The current step's reads, as runs of one value (flat, `starts` per transfer).
    runs: Vec<Run>,
    starts: Vec<usize>,
}

/// Replays the transfers that passed `check_transfer` (`ok`) from the initial holders `pre`,
/// for the chunks of `group`; gives the state of its slots at the end. `spans` gives the lowest
/// and highest group each chunk list's chunks fall in.
#[allow(clippy::too_many_arguments)]
pub(super) fn replay(
    s: &Schedule,
    order: &ReplayOrder,
    group: &Group,
    spans: &[(u32, u32)],
    ok: &[bool],
    pre: &Pairs,
    out: &mut Sink,
    poll: &mut crate::schedule::StopPoll,
) -> Option<State> {
    let npus = s.topology.npus();
    let mut r = Replay {
        s,
        group,
        ok,
        state: State::new(
            s.combining,
            npus,
            (group.slots, group.filled()),
            s.num_chunks,
            group.pairs_here(pre).map(|(v, _, l)| (v, l)),
        ),
        stamps: SlotTable::for_filled(npus, group.slots, group.filled()),
        ordinal: 0,
        runs: Vec::new(),
        starts: Vec::new(),
    };
    // Whether transfer i moves a chunk of the group (a quick look for one-chunk transfers and
    // for lists, by their span; a list whose span meets the group's may still miss it, and
    // `entries` then finds nothing).
    let touches = |i: usize| match s.transfers.single_chunk(i) {
        Some(c) => group.has(c),
        None => match s.transfers.list_index(i) {
            Some(l) => {
                let (lo, hi) = spans[l as usize];
                (lo..=hi).contains(&group.index)
            }
            None => s.transfers.at(i).chunks.iter().any(|&c| group.slot(c).is_some()),
        },
    };
    let mut here = Vec::new();
    for steps in order.steps(&s.transfers) {
        if poll.stopped(steps.start) {
            return None;
        }
        if out.full() {
            break;
        }
        here.clear();
        here.extend(steps.map(|k| order.get(k)).filter(|&i| touches(i)).map(|i| i as u32));
        if !here.is_empty() {
            r.step(&here, out);
        }
    }
    Some(r.state)
}

impl Replay<'_> {
    /// One step: `group` holds its transfers, in array order.
    fn step(&mut self, group: &[u32], out: &mut Sink) {
        let step = self.s.transfers.step(group[0] as usize);
        self.ordinal += 1;
        self.gather_reads(group, step, out);
        self.state.new_step();
        self.apply_writes(group, step, out);
    }

    /// Pass 1: every read, as runs of one value (flat, `starts` per transfer), and how often
    /// each slot is written.
    fn gather_reads(&mut self, group: &[u32], step: u32, out: &mut Sink) {
        let s = self.s;
        let (once, many) = (2 * self.ordinal, 2 * self.ordinal + 1);
        self.runs.clear();
        self.starts.clear();
        for &i in group {
            let i = i as usize;
            self.starts.push(self.runs.len());
            if !self.ok[i] {
                continue;
            }
            let t = s.transfers.at(i);
            let first = self.runs.len();
            for e in self.group.entries(&t) {
                // Counted as far as the check counts: the replay stops at this step.
                if out.full() {
                    break;
                }
                let value = self.state.read(t.src as usize, e.local_read as usize);
                if value == NONE {
                    out.add(
                        ViolationKind::SourceMissingChunk,
                        Some(At { transfer: i, step }),
                        Some(t.src),
                        Some(e.read),
                        format_args!(
                            "transfer {i}: NPU {} does not hold {} at step {step}",
                            t.src,
                            slot_name(e.read, s.num_chunks)
                        ),
                    );
                } else {
                    let (v, d) = (t.dst as usize, e.local_written as usize);
                    let st = *self.stamps.get(v, d);
                    self.stamps.set(v, d, if st == once || st == many { many } else { once });
                }
                let len = self.runs.len();
                match self.runs.last_mut() {
                    Some(run) if len > first && run.value == value => run.count += 1,
                    _ => self.runs.push(Run { value, count: 1 }),
                }
            }
        }
        self.starts.push(self.runs.len());
    }

    /// Pass 2: apply the single writes; gather the rest, then apply them slot by slot.
    fn apply_writes(&mut self, group: &[u32], step: u32, out: &mut Sink) {
        let s = self.s;
        let once = 2 * self.ordinal;
        let mut shared: Vec<Write> = Vec::new();
        for (j, &i) in group.iter().enumerate() {
            let i = i as usize;
            let t = s.transfers.at(i);
            // Memoizing set operations pays when a message carries several chunks.
            self.state.memo_on = t.chunks.len() > 1;
            let mut entries = self.group.entries(&t);
            for &Run { value, count } in &self.runs[self.starts[j]..self.starts[j + 1]] {
                for e in entries.by_ref().take(count as usize) {
                    if value == NONE {
                        continue;
                    }
                    let w = Write { dst: t.dst, chunk: e.written, slot: e.local_written, op: t.op, transfer: i, value };
                    if *self.stamps.get(t.dst as usize, e.local_written as usize) == once {
                        self.state.apply(std::slice::from_ref(&w), step, out);
                    } else {
                        shared.push(w);
                    }
                }
            }
        }
        self.state.memo_on = true;
        shared.sort_by_key(|w| (w.dst, w.slot, w.transfer));
        for ws in shared.chunk_by(|a, b| a.dst == b.dst && a.slot == b.slot) {
            self.state.apply(ws, step, out);
        }
    }
}

struct Write {
    dst: u32,
    /// The slot written (global: for messages).
    chunk: u32,
    /// The same slot in the group's numbering.
    slot: u32,
    op: Op,
    transfer: usize,
    /// The source's contents (its contributors when combining).
    value: SetId,
}

/// Two contributor sets reduced: the first contributor they share (counted twice), and their
/// union.
#[derive(Clone, Copy)]
struct Reduced {
    common: Option<u32>,
    union: SetId,
}

pub(super) struct State {
    combining: bool,
    /// Slots below this are chunks, the rest scratch (for messages).
    chunks: usize,
    slots: SlotTable<SetId>,
    pub(super) sets: Sets,
    /// (a, b) -> a and b reduced (first common contributor, a ∪ b), for the current step.
    reduce_memo: HashMap<(SetId, SetId), Reduced, IdHash>,
    /// (a, b) -> a ⊆ b, for the current step.
    subset_memo: HashMap<(SetId, SetId), bool, IdHash>,
    /// Whether `reduce` and `is_subset` consult and fill the memos.
    memo_on: bool,
    /// The last pair reduced and the last pair tested, for the current step: consecutive
    /// chunks of a message mostly meet the same two sets, and a hash probe per chunk showed
    /// in profiles (134 M chunk moves in bucket's all-reduce on torus:64x64).
    last_reduce: Option<((SetId, SetId), Reduced)>,
    last_subset: Option<((SetId, SetId), bool)>,
}

impl State {
    /// The state before the first step: `slots` local slots of which about `filled` cells are
    /// written, `pre` the initial holders as (npu, local slot).
    fn new(
        combining: bool,
        npus: usize,
        (slots, filled): (usize, usize),
        chunks: usize,
        pre: impl Iterator<Item = (u32, u32)>,
    ) -> State {
        let mut st = State {
            combining,
            chunks,
            slots: SlotTable::for_filled(npus, slots, filled),
            sets: Sets::default(),
            reduce_memo: HashMap::default(),
            subset_memo: HashMap::default(),
            memo_on: true,
            last_reduce: None,
            last_subset: None,
        };
        // Non-combining collectives only track "held": one set stands for it. Combining ones
        // start with one singleton per NPU, shared by all its chunks.
        let held = (!combining).then(|| st.sets.add(Spans::singleton(0)));
        let mut own: Vec<SetId> = vec![NONE; if combining { npus } else { 0 }];
        for (v, c) in pre {
            let id = match held {
                Some(h) => h,
                None if own[v as usize] == NONE => {
                    own[v as usize] = st.sets.add(Spans::singleton(v));
                    own[v as usize]
                }
                None => own[v as usize],
            };
            st.store(v as usize, c as usize, id);
        }
        st.sets.end_step();
        st
    }

    /// Called before a step's writes: memos and freed ids from the last step go.
    fn new_step(&mut self) {
        self.reduce_memo.clear();
        self.subset_memo.clear();
        self.last_reduce = None;
        self.last_subset = None;
        self.sets.end_step();
    }

    fn store(&mut self, npu: usize, chunk: usize, id: SetId) {
        let old = *self.slots.get(npu, chunk);
        if old != id {
            self.sets.hold(id);
            if old != NONE {
                self.sets.release(old);
            }
            self.slots.set(npu, chunk, id);
        }
    }

    pub(super) fn read(&self, npu: usize, chunk: usize) -> SetId {
        *self.slots.get(npu, chunk)
    }

    fn reduce(&mut self, a: SetId, b: SetId) -> Reduced {
        if let Some((pair, r)) = self.last_reduce
            && pair == (a, b)
        {
            return r;
        }
        let r = match self.memo_on.then(|| self.reduce_memo.get(&(a, b)).copied()).flatten() {
            Some(r) => r,
            None => {
                let (x, y) = (self.sets.get(a), self.sets.get(b));
                let common = x.first_common(y);
                let u = x.union(y);
                let r = Reduced { common, union: self.sets.add(u) };
                if self.memo_on {
                    self.reduce_memo.insert((a, b), r);
                }
                r
            }
        };
        self.last_reduce = Some(((a, b), r));
        r
    }

    fn is_subset(&mut self, a: SetId, b: SetId) -> bool {
        if a == b {
            return true;
        }
        if let Some((pair, r)) = self.last_subset
            && pair == (a, b)
        {
            return r;
        }
        // Into a set of one range (every contributor, or a row's), a subset is told by its
        // ends, without a probe of the memo (the copies of bucket's all-gather phases meet as
        // many pairs as there are chunks: 29% of the check of its all-reduce on torus:64x64).
        if let &[(lo, hi)] = self.sets.get(b).ranges() {
            let a = self.sets.get(a).ranges();
            return a.first().is_none_or(|f| f.0 >= lo) && a.last().is_none_or(|l| l.1 <= hi);
        }
        let r = if self.memo_on {
            let sets = &self.sets;
            *self.subset_memo.entry((a, b)).or_insert_with(|| sets.get(a).is_subset_of(sets.get(b)))
        } else {
            self.sets.get(a).is_subset_of(self.sets.get(b))
        };
        self.last_subset = Some(((a, b), r));
        r
    }

    /// Applies all writes into one (npu, chunk) slot from one step.
    fn apply(&mut self, ws: &[Write], step: u32, out: &mut Sink) {
        if !self.combining {
            self.store(ws[0].dst as usize, ws[0].slot as usize, ws[0].value);
        }
        let copies = ws.iter().filter(|w| w.op == Op::Copy).count();
        if copies > 1 || (copies == 1 && ws.len() > 1) {
            self.conflict(ws, step, out);
        } else if self.combining {
            self.combine(ws, step, out);
        }
    }

    /// Writes that may not meet in one slot: more than one copy, or a copy and a reduce.
    fn conflict(&mut self, ws: &[Write], step: u32, out: &mut Sink) {
        let (dst, chunk) = (ws[0].dst, ws[0].chunk);
        let ids: Vec<usize> = ws.iter().map(|w| w.transfer).collect();
        out.add(
            ViolationKind::WriteConflict,
            Some(At { transfer: ws[1].transfer, step }),
            Some(dst),
            Some(chunk),
            format_args!(
                "transfers {ids:?} all write {} into NPU {dst} in step {step}; at most one copy, or only reduces, may",
                slot_name(chunk, self.chunks)
            ),
        );
        // The outcome is undefined; keep every contribution so later checks do not cascade.
        if self.combining {
            let slot = (dst as usize, ws[0].slot as usize);
            let mut acc = self.read(slot.0, slot.1);
            for w in ws {
                acc = if acc == NONE { w.value } else { self.reduce(acc, w.value).union };
            }
            self.store(slot.0, slot.1, acc);
        }
    }

    /// The writes of a combining collective into one slot, in transfer order: one copy, or
    /// reduces.
    #[inline]
    fn combine(&mut self, ws: &[Write], step: u32, out: &mut Sink) {
        use ViolationKind::*;
        let (dst, chunk) = (ws[0].dst, ws[0].chunk);
        let slot = (dst as usize, ws[0].slot as usize);
        // Named only when a rule is broken: this runs once per write.
        let n = self.chunks;
        let what = || slot_name(chunk, n);
        let old = self.read(slot.0, slot.1);
        let mut acc = old;
        for w in ws {
            let src = w.value;
            let at = Some(At { transfer: w.transfer, step });
            match w.op {
                Op::Copy => {
                    if old != NONE && !self.is_subset(old, src) {
                        let lost = self.sets.get(old).missing_from(self.sets.get(src), 8);
                        out.add(
                            CopyDropsContribution,
                            at,
                            Some(dst),
                            Some(chunk),
                            format_args!(
                                "transfer {}: copying {} into NPU {dst} drops contributions {lost:?} it already had",
                                w.transfer,
                                what()
                            ),
                        );
                    }
                    acc = src;
                }
                Op::Reduce if acc == NONE => {
                    out.add(
                        ReduceWithoutPartial,
                        at,
                        Some(dst),
                        Some(chunk),
                        format_args!(
                            "transfer {}: NPU {dst} holds no partial of {} to reduce into",
                            w.transfer,
                            what()
                        ),
                    );
                    acc = src;
                }
                Op::Reduce => {
                    let Reduced { common, union } = self.reduce(acc, src);
                    if let Some(v) = common {
                        out.add(
                            DoubleCount,
                            at,
                            Some(dst),
                            Some(chunk),
                            format_args!(
                                "transfer {}: the contribution of NPU {v} to {} would be counted twice at NPU {dst}",
                                w.transfer,
                                what()
                            ),
                        );
                    }
                    acc = union;
                }
            }
        }
        self.store(slot.0, slot.1, acc);
    }
}
