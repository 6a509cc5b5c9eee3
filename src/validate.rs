//! The validator: replays a schedule under the v1 semantics and lists every rule it breaks
//! as structured violations. A schedule is valid exactly when the list is empty.

use crate::collective::Collective;
use crate::limits;
use crate::schedule::{Op, Schedule};
use crate::slots::SlotTable;
use crate::spans::Spans;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// The `collective` object cannot be built on the topology (bad root, group, ...).
    InvalidCollective,
    /// `num_chunks`, `chunk_size_bytes`, `combining` or a condition disagrees with `collective`.
    CollectiveMismatch,
    /// A pre- or postcondition pair names a non-NPU or an out-of-range chunk.
    InvalidCondition,
    /// `src`, `dst` or a path node is not a node of the topology.
    UnknownNode,
    /// `src` or `dst` is a switch.
    NotAnNpu,
    /// `src == dst`.
    SelfTransfer,
    /// A transfer with no chunks.
    EmptyTransfer,
    ChunkOutOfRange,
    /// The same chunk twice in one transfer.
    DuplicateChunk,
    /// No `path`, and `src -> dst` is not a link.
    MissingLink,
    /// `path` does not run from `src` to `dst` over existing links without revisiting a node.
    InvalidPath,
    /// `op: "reduce"` in a non-combining collective.
    ReduceInNonCombining,
    /// The source does not hold the chunk when the step starts.
    SourceMissingChunk,
    /// A reduce into an NPU that holds no partial of the chunk.
    ReduceWithoutPartial,
    /// A reduce whose two contributor sets overlap: a contribution counted twice.
    DoubleCount,
    /// A copy that would drop contributions the destination already had.
    CopyDropsContribution,
    /// More than one copy, or a copy and a reduce, into one (npu, chunk) in one step.
    WriteConflict,
    /// A postcondition pair does not hold at the end.
    PostconditionUnmet,
    /// The chunk is held at the end but without every contribution.
    IncompleteReduction,
    /// The declared `collective_time_ns` differs from the simulated time.
    TimeMismatch,
    /// A `scratch` entry names a chunk out of range, or there are too many.
    InvalidScratch,
    /// `dst_chunks` is not as long as `chunks`, or entry i is a slot of another chunk.
    SlotMismatch,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub npu: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<u32>,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub valid: bool,
    /// The first violations found (at most `limits::MAX_REPORTED_VIOLATIONS`).
    pub violations: Vec<Violation>,
    /// How many violations there are in all.
    pub violation_count: usize,
    /// Every transfer names existing NPUs, chunks and links, so the schedule can be
    /// simulated even if its data flow is wrong.
    #[serde(skip)]
    pub simulatable: bool,
}

impl Report {
    pub fn kinds(&self) -> Vec<ViolationKind> {
        self.violations.iter().map(|v| v.kind).collect()
    }
}

struct Sink {
    list: Vec<Violation>,
    count: usize,
}

impl Sink {
    fn add(
        &mut self,
        kind: ViolationKind,
        t: Option<(usize, u32)>,
        npu: Option<u32>,
        chunk: Option<u32>,
        message: String,
    ) {
        self.count += 1;
        if self.list.len() < limits::MAX_REPORTED_VIOLATIONS {
            self.list.push(Violation { kind, transfer: t.map(|x| x.0), step: t.map(|x| x.1), npu, chunk, message });
        }
    }
}

/// Validates a schedule against every rule of the v1 semantics (docs/FORMAT.md).
/// The declared `collective_time_ns` is not checked here; see `engine::check`.
pub fn validate(s: &Schedule) -> Report {
    validate_with_collective(s).0
}

/// `validate`, also handing back the collective built from the `collective` object (when it
/// builds), so callers that need it too (the bounds) do not build it again.
pub(crate) fn validate_with_collective(s: &Schedule) -> (Report, Option<Collective>) {
    let mut out = Sink { list: Vec::new(), count: 0 };
    let topo = &s.topology;
    use ViolationKind::*;

    // 1. The declared collective fields against the collective object.
    let built = Collective::build_unchecked(&s.collective, topo);
    match &built {
        Err(e) => out.add(InvalidCollective, None, None, None, format!("collective: {e}")),
        Ok(c) => {
            let mut mism = |what: &str, declared: String, want: String| {
                out.add(
                    CollectiveMismatch,
                    None,
                    None,
                    None,
                    format!("{what} is {declared} but the collective implies {want}"),
                )
            };
            if c.num_chunks != s.num_chunks {
                mism("num_chunks", s.num_chunks.to_string(), c.num_chunks.to_string());
            }
            let tol = 1e-9 * c.chunk_size_bytes.abs().max(1.0);
            #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN counts as a mismatch
            let differs = !((c.chunk_size_bytes - s.chunk_size_bytes).abs() <= tol);
            if differs {
                mism("chunk_size_bytes", s.chunk_size_bytes.to_string(), c.chunk_size_bytes.to_string());
            }
            if c.combining != s.combining {
                mism("combining", s.combining.to_string(), c.combining.to_string());
            }
            for (name, declared, want) in [
                ("precondition", &s.precondition, &c.precondition),
                ("postcondition", &s.postcondition, &c.postcondition),
            ] {
                let mut d = declared.clone();
                d.sort_unstable();
                d.dedup();
                if &d != want {
                    let extra = d.iter().find(|p| want.binary_search(p).is_err());
                    let missing = want.iter().find(|p| d.binary_search(p).is_err());
                    let detail = match (missing, extra) {
                        (Some(m), _) => format!("lacks {m:?}"),
                        (None, Some(x)) => format!("has extra {x:?}"),
                        _ => "differs".to_string(),
                    };
                    mism(name, format!("a list that {detail}"), format!("{} pairs", want.len()));
                }
            }
        }
    }

    let chunks = s.num_chunks;
    if chunks > limits::MAX_CHUNKS {
        out.add(
            InvalidCondition,
            None,
            None,
            None,
            format!("num_chunks {chunks} exceeds the limit of {}", limits::MAX_CHUNKS),
        );
        return (finish(out, false), built.ok());
    }
    let npus = topo.npus();
    let mut pre: Vec<[u32; 2]> = Vec::with_capacity(s.precondition.len());
    for (name, list) in [("precondition", &s.precondition), ("postcondition", &s.postcondition)] {
        for (i, &[v, c]) in list.iter().enumerate() {
            if (v as usize) >= npus || (c as usize) >= chunks {
                out.add(
                    InvalidCondition,
                    None,
                    Some(v),
                    Some(c),
                    format!("{name}[{i}] = [{v}, {c}]: expected an NPU in 0..{npus} and a chunk in 0..{chunks}"),
                );
            } else if name == "precondition" {
                pre.push([v, c]);
            }
        }
    }
    pre.sort_unstable();
    pre.dedup();
    if s.scratch.len() > limits::MAX_CHUNKS {
        out.add(
            InvalidScratch,
            None,
            None,
            None,
            format!("scratch has {} slots, over the limit of {}", s.scratch.len(), limits::MAX_CHUNKS),
        );
        return (finish(out, false), built.ok());
    }
    // Slots of an unknown chunk make every later rule meaningless: stop here.
    let before = out.count;
    for (i, &c) in s.scratch.iter().enumerate() {
        if c as usize >= chunks {
            out.add(
                InvalidScratch,
                None,
                None,
                Some(c),
                format!("scratch[{i}] = {c}: expected a chunk in 0..{chunks}"),
            );
        }
    }
    if out.count > before {
        return (finish(out, false), built.ok());
    }
    // Chunks, then scratch slots: every (npu, slot) holds one value.
    let slots = s.slots();
    let name = |c: u32| slot_name(c, chunks);

    // 2. Each transfer on its own: nodes, chunks, links, path.
    let mut ok = vec![true; s.transfers.len()];
    for (i, t) in s.transfers.iter().enumerate() {
        let at = Some((i, t.step));
        let mut bad = |kind, npu, chunk, msg: String| {
            out.add(kind, at, npu, chunk, format!("transfer {i}: {msg}"));
        };
        let mut good = true;
        for (role, v) in [("src", t.src), ("dst", t.dst)] {
            if (v as usize) >= topo.nodes() {
                bad(
                    UnknownNode,
                    Some(v),
                    None,
                    format!("{role} {v} is not a node (topology has {} nodes)", topo.nodes()),
                );
                good = false;
            } else if !topo.is_npu(v as usize) {
                bad(NotAnNpu, Some(v), None, format!("{role} {v} is a switch; transfers run between NPUs"));
                good = false;
            }
        }
        let local = t.src == t.dst;
        if local {
            let v = t.src;
            let why = if t.dst_chunks.is_none() {
                Some(format!("src and dst are both {v}; a local move between slots names its dst_chunks"))
            } else if t.path.is_some() {
                Some(format!("a local move (src == dst == {v}) takes no path"))
            } else {
                t.chunks
                    .iter()
                    .zip(t.written())
                    .find(|(a, b)| a == b)
                    .map(|(&c, _)| format!("a local move at NPU {v} writes {} onto itself", name(c)))
            };
            if let Some(why) = why {
                bad(SelfTransfer, Some(v), None, why);
                good = false;
            }
        }
        if t.chunks.is_empty() {
            bad(EmptyTransfer, None, None, "carries no chunks".into());
            good = false;
        }
        // A chunk may feed several slots (with dst_chunks); a slot takes one write per message.
        let written = t.written();
        let mut seen: Vec<u32> = if written.len() > 1 { written.to_vec() } else { Vec::new() };
        seen.sort_unstable();
        for w in seen.windows(2) {
            if w[0] == w[1] {
                let what = if t.dst_chunks.is_some() { "dst_chunks" } else { "chunks" };
                bad(DuplicateChunk, None, Some(w[0]), format!("{} appears twice in {what}", name(w[0])));
                good = false;
            }
        }
        for &c in t.chunks.iter().chain(t.dst_chunks.iter().flat_map(|d| d.iter())) {
            if (c as usize) >= slots {
                let scratch = if s.scratch.is_empty() { "" } else { " (chunks, then scratch slots)" };
                bad(ChunkOutOfRange, None, Some(c), format!("chunk {c} out of range: expected 0..{slots}{scratch}"));
                good = false;
            }
        }
        if let Some(d) = &t.dst_chunks {
            if d.len() != t.chunks.len() {
                bad(
                    SlotMismatch,
                    None,
                    None,
                    format!(
                        "dst_chunks has {} entries, chunks {}: expected one slot per chunk",
                        d.len(),
                        t.chunks.len()
                    ),
                );
                good = false;
            } else if let Some((&a, &b)) = t.chunks.iter().zip(d.iter()).find(|&(&a, &b)| {
                let (x, y) = (s.chunk_of(a), s.chunk_of(b));
                x.is_some() && y.is_some() && x != y
            }) {
                bad(
                    SlotMismatch,
                    None,
                    Some(b),
                    format!(
                        "{} is written into {}, a slot of chunk {}: expected a slot of chunk {}",
                        name(a),
                        name(b),
                        s.chunk_of(b).unwrap_or(b),
                        s.chunk_of(a).unwrap_or(a)
                    ),
                );
                good = false;
            }
        }
        if t.op == Op::Reduce && !s.combining {
            bad(ReduceInNonCombining, Some(t.dst), None, "op \"reduce\" in a non-combining collective".into());
            good = false;
        }
        if good && !local {
            match &t.path {
                None => {
                    if topo.link_index(t.src as usize, t.dst as usize).is_none() {
                        bad(MissingLink, None, None, format!("no link {}->{} and no path given", t.src, t.dst));
                        good = false;
                    }
                }
                Some(p) => {
                    if let Err(msg) = check_path(topo, t.src, t.dst, p) {
                        let kind = if msg.contains("not a node") { UnknownNode } else { InvalidPath };
                        bad(kind, None, None, msg);
                        good = false;
                    }
                }
            }
        }
        ok[i] = good;
    }
    let simulatable = ok.iter().all(|&g| g);

    // 3. Replay the data flow step by step. A step reads the state after every earlier step
    // and its writes land at its end. Most slots get one write per step; they are applied as
    // they come, and only slots written more than once are gathered and sorted.
    let order = s.replay_order();
    let mut state = State::new(s.combining, npus, slots, chunks, &pre);
    let mut stamps: SlotTable<u32> = SlotTable::new(npus, slots);
    let mut ordinal: u32 = 0;
    let mut runs: Vec<(SetId, u32)> = Vec::new();
    let mut starts: Vec<usize> = Vec::new();
    let mut k = 0;
    while k < order.len() {
        let step = s.transfers[order[k] as usize].step;
        let mut end = k;
        while end < order.len() && s.transfers[order[end] as usize].step == step {
            end += 1;
        }
        ordinal += 1;
        let (once, many) = (2 * ordinal, 2 * ordinal + 1);
        // Pass 1: every read, as runs of one value (flat, `starts` per transfer), and how
        // often each slot is written.
        runs.clear();
        starts.clear();
        for &i in &order[k..end] {
            let i = i as usize;
            starts.push(runs.len());
            if ok[i] {
                let t = &s.transfers[i];
                let first = runs.len();
                for (&c, &d) in t.chunks.iter().zip(t.written()) {
                    let value = state.read(t.src as usize, c as usize);
                    if value == NONE {
                        out.add(
                            SourceMissingChunk,
                            Some((i, step)),
                            Some(t.src),
                            Some(c),
                            format!("transfer {i}: NPU {} does not hold {} at step {step}", t.src, name(c)),
                        );
                    } else {
                        let st = *stamps.get(t.dst as usize, d as usize);
                        stamps.set(t.dst as usize, d as usize, if st == once || st == many { many } else { once });
                    }
                    let len = runs.len();
                    match runs.last_mut() {
                        Some((v, n)) if len > first && *v == value => *n += 1,
                        _ => runs.push((value, 1)),
                    }
                }
            }
        }
        starts.push(runs.len());
        // Pass 2: apply the single writes; gather the rest.
        state.new_step();
        let mut shared: Vec<Write> = Vec::new();
        for (j, &i) in order[k..end].iter().enumerate() {
            let i = i as usize;
            let t = &s.transfers[i];
            // Memoizing set operations pays when a message carries several chunks.
            state.memo_on = t.chunks.len() > 1;
            let mut chunk_iter = t.written().iter();
            for &(value, n) in &runs[starts[j]..starts[j + 1]] {
                for &c in chunk_iter.by_ref().take(n as usize) {
                    if value == NONE {
                        continue;
                    }
                    let w = Write { dst: t.dst, chunk: c, op: t.op, transfer: i, value };
                    if *stamps.get(t.dst as usize, c as usize) == once {
                        state.apply(std::slice::from_ref(&w), step, &mut out);
                    } else {
                        shared.push(w);
                    }
                }
            }
        }
        state.memo_on = true;
        shared.sort_by_key(|w| (w.dst, w.chunk, w.transfer));
        let mut a = 0;
        while a < shared.len() {
            let mut b = a;
            while b < shared.len() && shared[b].dst == shared[a].dst && shared[b].chunk == shared[a].chunk {
                b += 1;
            }
            state.apply(&shared[a..b], step, &mut out);
            a = b;
        }
        k = end;
    }

    // 4. The postcondition. A combining chunk must hold every initial holder's contribution.
    let required: Vec<Spans> = if s.combining { required_sets(&pre, chunks) } else { Vec::new() };
    for &[v, c] in &s.postcondition {
        if (v as usize) >= npus || (c as usize) >= chunks {
            continue;
        }
        let have = state.read(v as usize, c as usize);
        if have == NONE {
            out.add(PostconditionUnmet, None, Some(v), Some(c), format!("NPU {v} does not hold chunk {c} at the end"));
        } else if s.combining && state.sets.get(have) != &required[c as usize] {
            let (have, want) = (state.sets.get(have), &required[c as usize]);
            let missing = want.missing_from(have, 8);
            out.add(
                IncompleteReduction,
                None,
                Some(v),
                Some(c),
                format!(
                    "NPU {v} holds chunk {c} reduced over {} of {} contributors; missing e.g. {missing:?}",
                    have.count(),
                    want.count()
                ),
            );
        }
    }
    (finish(out, simulatable), built.ok())
}

/// Every chunk's initial holders as a contributor set. `pre` is sorted by NPU, so each chunk's
/// ranges grow at their end; equal sets (all of them, in an all-reduce) share storage.
fn required_sets(pre: &[[u32; 2]], chunks: usize) -> Vec<Spans> {
    let mut ranges: Vec<Vec<(u32, u32)>> = vec![Vec::new(); chunks];
    for &[v, c] in pre {
        let r = &mut ranges[c as usize];
        match r.last_mut() {
            Some(last) if last.1 == v => last.1 = v + 1,
            _ => r.push((v, v + 1)),
        }
    }
    let mut shared: HashMap<Vec<(u32, u32)>, Spans> = HashMap::new();
    ranges
        .into_iter()
        .map(|r| shared.entry(r).or_insert_with_key(|r| Spans::from_canonical_ranges(r.clone())).clone())
        .collect()
}

/// How messages name a slot: `chunk 3`, or `scratch slot 17`.
fn slot_name(c: u32, chunks: usize) -> String {
    if (c as usize) < chunks { format!("chunk {c}") } else { format!("scratch slot {c}") }
}

fn finish(out: Sink, simulatable: bool) -> Report {
    Report { valid: out.count == 0, violation_count: out.count, violations: out.list, simulatable }
}

fn check_path(topo: &crate::topology::Topology, src: u32, dst: u32, p: &[u32]) -> Result<(), String> {
    if p.len() < 2 || p[0] != src || p[p.len() - 1] != dst {
        return Err(format!("path {p:?} must start at src {src} and end at dst {dst}"));
    }
    if let Some(&v) = p.iter().find(|&&v| v as usize >= topo.nodes()) {
        return Err(format!("path node {v} is not a node (topology has {} nodes)", topo.nodes()));
    }
    let mut sorted = p.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("path {p:?} visits a node twice"));
    }
    for w in p.windows(2) {
        if topo.link_index(w[0] as usize, w[1] as usize).is_none() {
            return Err(format!("path {p:?} uses {}->{}, which is not a link", w[0], w[1]));
        }
    }
    Ok(())
}

/// A contributor set stored in `Sets`; `NONE` means the slot is not held.
type SetId = u32;
const NONE: SetId = 0;

/// The contributor sets the slots hold, numbered from 1 and counted by the slots that hold
/// them: a slot is 4 bytes (a 4096-NPU all-reduce split in 4 parts has 2^26 slots), one set
/// serves every chunk a message carries, and sets no slot holds any more are freed at the end
/// of the step (a ring all-reduce on 4096 NPUs makes 67 million of them, a few alive at once).
/// Ids are not canonical: equal sets may have different ids.
#[derive(Default)]
struct Sets {
    list: Vec<Option<Spans>>,
    refs: Vec<u32>,
    /// Ids whose count dropped to zero (or that were made) in this step: freed at its end
    /// unless held again, so ids in the step's reads and memos stay valid while it runs.
    doomed: Vec<SetId>,
    free: Vec<SetId>,
}

impl Sets {
    fn add(&mut self, s: Spans) -> SetId {
        let id = match self.free.pop() {
            Some(id) => {
                self.list[id as usize - 1] = Some(s);
                id
            }
            None => {
                self.list.push(Some(s));
                self.refs.push(0);
                self.list.len() as SetId
            }
        };
        self.doomed.push(id);
        id
    }

    fn get(&self, id: SetId) -> &Spans {
        self.list[id as usize - 1].as_ref().expect("live set id")
    }

    fn hold(&mut self, id: SetId) {
        self.refs[id as usize - 1] += 1;
    }

    fn release(&mut self, id: SetId) {
        let r = &mut self.refs[id as usize - 1];
        *r -= 1;
        if *r == 0 {
            self.doomed.push(id);
        }
    }

    fn end_step(&mut self) {
        for id in std::mem::take(&mut self.doomed) {
            let i = id as usize - 1;
            if self.refs[i] == 0 && self.list[i].is_some() {
                self.list[i] = None;
                self.free.push(id);
            }
        }
    }
}

/// Hashes a pair of ids: set operations are memoized per step, because one message reduces
/// many chunks with the same two sets (a whole-vector message of a 4096-NPU all-reduce: 4096
/// chunks, one union), and SipHash on hundreds of millions of lookups showed up in profiles.
#[derive(Default, Clone, Copy)]
struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

struct Write {
    dst: u32,
    chunk: u32,
    op: Op,
    transfer: usize,
    /// The source's contents (its contributors when combining).
    value: SetId,
}

struct State {
    combining: bool,
    /// Slots below this are chunks, the rest scratch (for messages).
    chunks: usize,
    slots: SlotTable<SetId>,
    sets: Sets,
    /// (a, b) -> (first common contributor, a ∪ b), for the current step.
    reduce_memo: HashMap<(SetId, SetId), (Option<u32>, SetId), IdHash>,
    /// (a, b) -> a ⊆ b, for the current step.
    subset_memo: HashMap<(SetId, SetId), bool, IdHash>,
    /// Whether `reduce` and `is_subset` consult and fill the memos.
    memo_on: bool,
}

impl State {
    fn new(combining: bool, npus: usize, slots: usize, chunks: usize, pre: &[[u32; 2]]) -> State {
        let mut st = State {
            combining,
            chunks,
            slots: SlotTable::new(npus, slots),
            sets: Sets::default(),
            reduce_memo: HashMap::default(),
            subset_memo: HashMap::default(),
            memo_on: true,
        };
        // Non-combining collectives only track "held": one set stands for it. Combining ones
        // start with one singleton per NPU, shared by all its chunks.
        let held = (!combining).then(|| st.sets.add(Spans::singleton(0)));
        let mut own: Vec<SetId> = vec![NONE; if combining { npus } else { 0 }];
        for &[v, c] in pre {
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

    fn read(&self, npu: usize, chunk: usize) -> SetId {
        *self.slots.get(npu, chunk)
    }

    fn reduce(&mut self, a: SetId, b: SetId) -> (Option<u32>, SetId) {
        if self.memo_on
            && let Some(&r) = self.reduce_memo.get(&(a, b))
        {
            return r;
        }
        let (x, y) = (self.sets.get(a), self.sets.get(b));
        let common = x.first_common(y);
        let u = x.union(y);
        let r = (common, self.sets.add(u));
        if self.memo_on {
            self.reduce_memo.insert((a, b), r);
        }
        r
    }

    fn is_subset(&mut self, a: SetId, b: SetId) -> bool {
        if a == b {
            return true;
        }
        if !self.memo_on {
            return self.sets.get(a).is_subset_of(self.sets.get(b));
        }
        let sets = &self.sets;
        *self.subset_memo.entry((a, b)).or_insert_with(|| sets.get(a).is_subset_of(sets.get(b)))
    }

    /// Applies all writes into one (npu, chunk) slot from one step.
    fn apply(&mut self, ws: &[Write], step: u32, out: &mut Sink) {
        use ViolationKind::*;
        let (dst, chunk) = (ws[0].dst, ws[0].chunk);
        let slot = (dst as usize, chunk as usize);
        // Named only when a rule is broken: this runs once per write.
        let n = self.chunks;
        let what = || slot_name(chunk, n);
        if !self.combining {
            self.store(slot.0, slot.1, ws[0].value);
        }
        let copies = ws.iter().filter(|w| w.op == Op::Copy).count();
        if copies > 1 || (copies == 1 && ws.len() > 1) {
            let ids: Vec<usize> = ws.iter().map(|w| w.transfer).collect();
            out.add(
                WriteConflict,
                Some((ws[1].transfer, step)),
                Some(dst),
                Some(chunk),
                format!("transfers {ids:?} all write {} into NPU {dst} in step {step}; at most one copy, or only reduces, may", what()),
            );
            // The outcome is undefined; keep every contribution so later checks do not cascade.
            if self.combining {
                let mut acc = self.read(slot.0, slot.1);
                for w in ws {
                    acc = if acc == NONE { w.value } else { self.reduce(acc, w.value).1 };
                }
                self.store(slot.0, slot.1, acc);
            }
            return;
        }
        if !self.combining {
            return;
        }
        let old = self.read(slot.0, slot.1);
        let mut acc = old;
        for w in ws {
            let src = w.value;
            let at = Some((w.transfer, step));
            match w.op {
                Op::Copy => {
                    if old != NONE && !self.is_subset(old, src) {
                        let lost = self.sets.get(old).missing_from(self.sets.get(src), 8);
                        out.add(
                            CopyDropsContribution,
                            at,
                            Some(dst),
                            Some(chunk),
                            format!(
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
                        format!("transfer {}: NPU {dst} holds no partial of {} to reduce into", w.transfer, what()),
                    );
                    acc = src;
                }
                Op::Reduce => {
                    let (common, union) = self.reduce(acc, src);
                    if let Some(v) = common {
                        out.add(
                            DoubleCount,
                            at,
                            Some(dst),
                            Some(chunk),
                            format!(
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
