//! The validator: replays a schedule under the v1 semantics and lists every rule it breaks
//! as structured violations. A schedule is valid exactly when the list is empty.

use crate::collective::Collective;
use crate::limits;
use crate::schedule::{Op, ReplayOrder, Schedule, TransferRef};
use crate::slots::SlotTable;
use crate::spans::Spans;
use crate::topology::Topology;
use rayon::prelude::*;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

mod groups;
mod sets;
use groups::Group;
use sets::{IdHash, NONE, SetId, Sets};

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

/// Where a violation happened: a transfer, and the step it runs in.
#[derive(Clone, Copy)]
struct At {
    transfer: usize,
    step: u32,
}

struct Sink {
    list: Vec<Violation>,
    count: usize,
}

impl Sink {
    /// Takes over another sink's violations (a group's, in group order).
    fn append(&mut self, other: Sink) {
        let room = limits::MAX_REPORTED_VIOLATIONS.saturating_sub(self.list.len());
        self.list.extend(other.list.into_iter().take(room));
        self.count += other.count;
    }
    fn add(&mut self, kind: ViolationKind, at: Option<At>, npu: Option<u32>, chunk: Option<u32>, message: String) {
        self.count += 1;
        if self.list.len() < limits::MAX_REPORTED_VIOLATIONS {
            self.list.push(Violation {
                kind,
                transfer: at.map(|a| a.transfer),
                step: at.map(|a| a.step),
                npu,
                chunk,
                message,
            });
        }
    }
}

/// Validates a schedule against every rule of the v1 semantics (docs/FORMAT.md).
/// The declared `collective_time_ns` is not checked here; see `engine::check`.
pub fn validate(s: &Schedule) -> Report {
    validate_with_collective(s, &|| false).expect("never stopped").0
}

/// `validate`, also handing back the collective built from the `collective` object (when it
/// builds), so callers that need it too (the bounds) do not build it again. It asks `stop`
/// every so many transfers, and gives `None` once it says so.
pub(crate) fn validate_with_collective(
    s: &Schedule,
    stop: &(dyn Fn() -> bool + Sync),
) -> Option<(Report, Option<Collective>)> {
    validate_grouped(s, Group::count(s), stop)
}

/// `validate` with the replay split into `groups` passes over groups of chunks (at most one
/// per chunk), whatever the schedule's size: the verdict, the count and the set of
/// violations are the same for any number (only their order in the report may differ). For
/// tests of exactly that.
#[doc(hidden)]
pub fn validate_in_groups(s: &Schedule, groups: usize) -> Report {
    validate_grouped(s, groups, &|| false).expect("never stopped").0
}

fn validate_grouped(
    s: &Schedule,
    groups: usize,
    stop: &(dyn Fn() -> bool + Sync),
) -> Option<(Report, Option<Collective>)> {
    let mut poll = crate::schedule::StopPoll::new(stop);
    let mut out = Sink { list: Vec::new(), count: 0 };

    // 1. The declared collective fields against the collective object. Conditions equal to
    // the declared ones are kept once, the schedule's (a 4096-NPU all-reduce's are 268 MB).
    let mut built =
        Collective::build_unchecked_reusing(&s.collective, &s.topology, &[&s.precondition, &s.postcondition]);
    match &mut built {
        Err(e) => out.add(ViolationKind::InvalidCollective, None, None, None, format!("collective: {e}")),
        Ok(c) => {
            for (declared, built) in [(&s.precondition, &mut c.precondition), (&s.postcondition, &mut c.postcondition)]
            {
                if !std::sync::Arc::ptr_eq(declared, built) && declared[..] == built[..] {
                    *built = declared.clone();
                }
            }
            check_declared(s, c, &mut out);
        }
    }

    let Some(pre) = check_conditions(s, &mut out) else {
        return Some((finish(out, false), built.ok()));
    };

    // 2. Each transfer on its own: nodes, chunks, links, path.
    let ok = check_transfers(s, &mut out, &mut poll)?;
    let simulatable = ok.iter().all(|&g| g);

    // 3. Replay the data flow step by step, and 4. check the postcondition. Chunks never
    // mix (a transfer moves each chunk between slots of that chunk), so the replay runs in
    // independent passes over groups of chunks (`Group`), in parallel, each holding only its
    // own slots' contents: a 4096-NPU all-reduce holds 16.7 M distinct contributor sets at
    // once, but a group only its share.
    let (groups, group_of) = Group::split(s, groups);
    // One replay order for every group (no index list at all for a schedule in step order).
    let order = s.replay_order();
    // The lowest and highest group each list's chunks fall in, so a group skips the lists of
    // other groups' chunks without reading them (bucket on torus:64x64 sends 4 M messages of 64
    // chunks; each of its 8 groups read every one to find the eighth it replays).
    let spans: Vec<(u32, u32)> = s
        .transfers
        .lists()
        .map(|l| {
            let groups = l.iter().filter_map(|&c| group_of.get(s.chunk_of(c)? as usize).copied());
            groups.fold((u32::MAX, 0), |(lo, hi), g| (lo.min(g), hi.max(g)))
        })
        .collect();
    let sinks: Vec<Option<Sink>> = groups
        .par_iter()
        .map(|g| {
            let mut sink = Sink { list: Vec::new(), count: 0 };
            let mut poll = crate::schedule::StopPoll::new(stop);
            let state = replay(s, &order, g, &spans, &ok, &pre, &mut sink, &mut poll)?;
            check_postcondition(s, g, &pre, &state, &mut sink);
            Some(sink)
        })
        .collect();
    for sink in sinks {
        out.append(sink?);
    }
    Some((finish(out, simulatable), built.ok()))
}

/// `num_chunks`, `chunk_size_bytes`, `combining` and the conditions as declared, against the
/// collective they name.
fn check_declared(s: &Schedule, c: &Collective, out: &mut Sink) {
    let mut mism = |what: &str, declared: String, want: String| {
        out.add(
            ViolationKind::CollectiveMismatch,
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
    for (name, declared, want) in
        [("precondition", &s.precondition, &c.precondition), ("postcondition", &s.postcondition, &c.postcondition)]
    {
        // A list in canonical order (every producer's) is compared as it is; only another
        // is copied to be sorted.
        if Arc::ptr_eq(declared, want) {
            continue;
        }
        let d: Cow<[[u32; 2]]> = if is_canonical(declared) {
            Cow::Borrowed(&declared[..])
        } else {
            let mut d = declared.to_vec();
            d.sort_unstable();
            d.dedup();
            Cow::Owned(d)
        };
        if d[..] != want[..] {
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

/// Sorted ascending without duplicates.
fn is_canonical(pairs: &[[u32; 2]]) -> bool {
    pairs.windows(2).all(|w| w[0] < w[1])
}

/// The chunk count, the condition pairs and the scratch slots. Gives the initial holders (the
/// precondition pairs in range, sorted and deduplicated), or `None` when nothing later can be
/// checked.
fn check_conditions<'s>(s: &'s Schedule, out: &mut Sink) -> Option<Cow<'s, [[u32; 2]]>> {
    use ViolationKind::*;
    let chunks = s.num_chunks;
    if chunks > limits::MAX_CHUNKS {
        out.add(
            InvalidCondition,
            None,
            None,
            None,
            format!("num_chunks {chunks} exceeds the limit of {}", limits::MAX_CHUNKS),
        );
        return None;
    }
    let npus = s.topology.npus();
    let in_range = |&[v, c]: &[u32; 2]| (v as usize) < npus && (c as usize) < chunks;
    let mut pre_out_of_range = false;
    for (name, list) in [("precondition", &s.precondition), ("postcondition", &s.postcondition)] {
        for (i, p @ &[v, c]) in list.iter().enumerate() {
            if !in_range(p) {
                out.add(
                    InvalidCondition,
                    None,
                    Some(v),
                    Some(c),
                    format!("{name}[{i}] = [{v}, {c}]: expected an NPU in 0..{npus} and a chunk in 0..{chunks}"),
                );
                pre_out_of_range |= name == "precondition";
            }
        }
    }
    // Every producer's precondition is in range and canonical: it is used as it is.
    let pre: Cow<[[u32; 2]]> = if !pre_out_of_range && is_canonical(&s.precondition) {
        Cow::Borrowed(&s.precondition[..])
    } else {
        let mut pre: Vec<[u32; 2]> = s.precondition.iter().copied().filter(in_range).collect();
        pre.sort_unstable();
        pre.dedup();
        Cow::Owned(pre)
    };
    if s.scratch.len() > limits::MAX_CHUNKS {
        out.add(
            InvalidScratch,
            None,
            None,
            None,
            format!("scratch has {} slots, over the limit of {}", s.scratch.len(), limits::MAX_CHUNKS),
        );
        return None;
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
        return None;
    }
    Some(pre)
}

/// Checks every transfer on its own. Gives, per transfer, whether it names existing NPUs,
/// chunks and links, so that its data flow can be replayed.
fn check_transfers(s: &Schedule, out: &mut Sink, poll: &mut crate::schedule::StopPoll) -> Option<Vec<bool>> {
    let mut ok = Vec::with_capacity(s.transfers.len());
    for (i, t) in s.transfers.iter().enumerate() {
        if poll.stopped(i) {
            return None;
        }
        ok.push(check_transfer(s, i, t, out));
    }
    Some(ok)
}

/// Checks transfer `i`; true when it broke no rule.
fn check_transfer(s: &Schedule, i: usize, t: TransferRef, out: &mut Sink) -> bool {
    let mut ck = TransferCheck { s, t, i, out, good: true };
    ck.endpoints();
    let local = t.src == t.dst;
    if local {
        ck.local_move();
    }
    ck.chunk_list();
    ck.dst_slots();
    if t.op == Op::Reduce && !s.combining {
        ck.bad(ViolationKind::ReduceInNonCombining, Some(t.dst), None, "op \"reduce\" in a non-combining collective");
    }
    if ck.good && !local {
        ck.route();
    }
    ck.good
}

/// The rules of one transfer on its own; `good` turns false at the first one it breaks.
struct TransferCheck<'a> {
    s: &'a Schedule,
    t: TransferRef<'a>,
    /// The transfer's index.
    i: usize,
    out: &'a mut Sink,
    good: bool,
}

impl TransferCheck<'_> {
    /// Records a violation of this transfer; the message is prefixed with its index.
    fn bad(&mut self, kind: ViolationKind, npu: Option<u32>, chunk: Option<u32>, msg: impl fmt::Display) {
        let i = self.i;
        let at = At { transfer: i, step: self.t.step };
        self.out.add(kind, Some(at), npu, chunk, format!("transfer {i}: {msg}"));
        self.good = false;
    }

    /// `src` and `dst` are NPUs of the topology.
    fn endpoints(&mut self) {
        let (s, t) = (self.s, self.t);
        let topo = &s.topology;
        for (role, v) in [("src", t.src), ("dst", t.dst)] {
            if (v as usize) >= topo.nodes() {
                self.bad(
                    ViolationKind::UnknownNode,
                    Some(v),
                    None,
                    format!("{role} {v} is not a node (topology has {} nodes)", topo.nodes()),
                );
            } else if !topo.is_npu(v as usize) {
                self.bad(
                    ViolationKind::NotAnNpu,
                    Some(v),
                    None,
                    format!("{role} {v} is a switch; transfers run between NPUs"),
                );
            }
        }
    }

    /// A local move (`src == dst`) names its slots, takes no path and moves every chunk.
    fn local_move(&mut self) {
        let (s, t) = (self.s, self.t);
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
                .map(|(&c, _)| format!("a local move at NPU {v} writes {} onto itself", slot_name(c, s.num_chunks)))
        };
        if let Some(why) = why {
            self.bad(ViolationKind::SelfTransfer, Some(v), None, why);
        }
    }

    /// The chunks: at least one, no slot written twice, every slot in range.
    fn chunk_list(&mut self) {
        use ViolationKind::*;
        let (s, t) = (self.s, self.t);
        if t.chunks.is_empty() {
            self.bad(EmptyTransfer, None, None, "carries no chunks");
        }
        // A chunk may feed several slots (with dst_chunks); a slot takes one write per message.
        let written = t.written();
        let mut seen: Vec<u32> = if written.len() > 1 { written.to_vec() } else { Vec::new() };
        seen.sort_unstable();
        for w in seen.windows(2) {
            if w[0] == w[1] {
                let what = if t.dst_chunks.is_some() { "dst_chunks" } else { "chunks" };
                self.bad(
                    DuplicateChunk,
                    None,
                    Some(w[0]),
                    format!("{} appears twice in {what}", slot_name(w[0], s.num_chunks)),
                );
            }
        }
        let slots = s.slots();
        for &c in t.chunks.iter().chain(t.dst_chunks.iter().flat_map(|d| d.iter())) {
            if (c as usize) >= slots {
                let scratch = if s.scratch.is_empty() { "" } else { " (chunks, then scratch slots)" };
                self.bad(
                    ChunkOutOfRange,
                    None,
                    Some(c),
                    format!("chunk {c} out of range: expected {}{scratch}", crate::error::ids(slots)),
                );
            }
        }
    }

    /// `dst_chunks`, if given: one slot per chunk, each a slot of the chunk written into it.
    fn dst_slots(&mut self) {
        let (s, t) = (self.s, self.t);
        let Some(d) = &t.dst_chunks else {
            return;
        };
        if d.len() != t.chunks.len() {
            self.bad(
                ViolationKind::SlotMismatch,
                None,
                None,
                format!("dst_chunks has {} entries, chunks {}: expected one slot per chunk", d.len(), t.chunks.len()),
            );
        } else if let Some((&a, &b)) = t.chunks.iter().zip(d.iter()).find(|&(&a, &b)| {
            let (x, y) = (s.chunk_of(a), s.chunk_of(b));
            x.is_some() && y.is_some() && x != y
        }) {
            let name = |c: u32| slot_name(c, s.num_chunks);
            self.bad(
                ViolationKind::SlotMismatch,
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
        }
    }

    /// Between two NPUs: a link, or a path over links.
    fn route(&mut self) {
        let (s, t) = (self.s, self.t);
        let topo = &s.topology;
        match &t.path {
            None => {
                if topo.link_index(t.src as usize, t.dst as usize).is_none() {
                    self.bad(
                        ViolationKind::MissingLink,
                        None,
                        None,
                        format!("no link {}->{} and no path given", t.src, t.dst),
                    );
                }
            }
            Some(p) => {
                if let Err(e) = check_path(topo, t.src, t.dst, p) {
                    self.bad(e.kind(), None, None, e);
                }
            }
        }
    }
}

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
fn replay(
    s: &Schedule,
    order: &ReplayOrder,
    group: &Group,
    spans: &[(u32, u32)],
    ok: &[bool],
    pre: &[[u32; 2]],
    out: &mut Sink,
    poll: &mut crate::schedule::StopPoll,
) -> Option<State> {
    let npus = s.topology.npus();
    let pre: Vec<[u32; 2]> = pre.iter().filter_map(|&[v, c]| Some([v, group.slot(c)?])).collect();
    let mut r = Replay {
        s,
        group,
        ok,
        state: State::new(s.combining, npus, group.slots, s.num_chunks, &pre),
        stamps: SlotTable::new(npus, group.slots),
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
                let value = self.state.read(t.src as usize, e.local_read as usize);
                if value == NONE {
                    out.add(
                        ViolationKind::SourceMissingChunk,
                        Some(At { transfer: i, step }),
                        Some(t.src),
                        Some(e.read),
                        format!(
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

/// Checks the postcondition of `group`'s chunks against its final `state`; `pre` gives the
/// contributors a combining chunk must hold.
fn check_postcondition(s: &Schedule, group: &Group, pre: &[[u32; 2]], state: &State, out: &mut Sink) {
    use ViolationKind::*;
    let (npus, chunks) = (s.topology.npus(), s.num_chunks);
    let required: Vec<Spans> = if s.combining {
        let here: Vec<[u32; 2]> =
            pre.iter().filter_map(|&[v, c]| Some([v, group.slot(c).filter(|_| group.has(c))?])).collect();
        required_sets(&here, group.positions)
    } else {
        Vec::new()
    };
    for &[v, c] in s.postcondition.iter() {
        if (v as usize) >= npus || (c as usize) >= chunks || !group.has(c) {
            continue;
        }
        let Some(slot) = group.slot(c) else { continue };
        let have = state.read(v as usize, slot as usize);
        let want = || &required[slot as usize];
        if have == NONE {
            out.add(PostconditionUnmet, None, Some(v), Some(c), format!("NPU {v} does not hold chunk {c} at the end"));
        } else if s.combining && state.sets.get(have) != want() {
            let (have, want) = (state.sets.get(have), want());
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

/// Why a transfer's `path` is rejected. `Display` gives the violation's message (after the
/// transfer's name), `kind` its kind.
#[derive(Debug)]
enum PathError<'a> {
    /// Shorter than one link, or not from `src` to `dst`.
    Ends { path: &'a [u32], src: u32, dst: u32 },
    /// A node the topology does not have (it has `nodes`).
    UnknownNode { node: u32, nodes: usize },
    /// A node visited twice.
    Revisit { path: &'a [u32] },
    /// A hop `from -> to` that is not a link.
    NotALink { path: &'a [u32], from: u32, to: u32 },
}

impl PathError<'_> {
    fn kind(&self) -> ViolationKind {
        match self {
            PathError::UnknownNode { .. } => ViolationKind::UnknownNode,
            PathError::Ends { .. } | PathError::Revisit { .. } | PathError::NotALink { .. } => {
                ViolationKind::InvalidPath
            }
        }
    }
}

impl fmt::Display for PathError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Ends { path, src, dst } => {
                write!(f, "path {path:?} must start at src {src} and end at dst {dst}")
            }
            PathError::UnknownNode { node, nodes } => {
                write!(f, "path node {node} is not a node (topology has {nodes} nodes)")
            }
            PathError::Revisit { path } => write!(f, "path {path:?} visits a node twice"),
            PathError::NotALink { path, from, to } => {
                write!(f, "path {path:?} uses {from}->{to}, which is not a link")
            }
        }
    }
}

fn check_path<'p>(topo: &Topology, src: u32, dst: u32, path: &'p [u32]) -> Result<(), PathError<'p>> {
    if path.len() < 2 || path[0] != src || path[path.len() - 1] != dst {
        return Err(PathError::Ends { path, src, dst });
    }
    if let Some(&node) = path.iter().find(|&&v| v as usize >= topo.nodes()) {
        return Err(PathError::UnknownNode { node, nodes: topo.nodes() });
    }
    let mut sorted = path.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(PathError::Revisit { path });
    }
    for w in path.windows(2) {
        if topo.link_index(w[0] as usize, w[1] as usize).is_none() {
            return Err(PathError::NotALink { path, from: w[0], to: w[1] });
        }
    }
    Ok(())
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

struct State {
    combining: bool,
    /// Slots below this are chunks, the rest scratch (for messages).
    chunks: usize,
    slots: SlotTable<SetId>,
    sets: Sets,
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
    fn new(combining: bool, npus: usize, slots: usize, chunks: usize, pre: &[[u32; 2]]) -> State {
        let mut st = State {
            combining,
            chunks,
            slots: SlotTable::new(npus, slots),
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

    fn read(&self, npu: usize, chunk: usize) -> SetId {
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
            format!(
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
                    let Reduced { common, union } = self.reduce(acc, src);
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
