//! The validator: replays a schedule under the v1 semantics and lists every rule it breaks
//! as structured violations. A schedule is valid exactly when the list is empty.

use crate::collective::{Collective, Pairs};
use crate::limits;
use crate::schedule::Schedule;
use crate::spans::Spans;
use rayon::prelude::*;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::HashMap;

mod flow;
mod groups;
mod ranges;
mod replay;
mod sets;
mod transfer;
use groups::Group;
use replay::{State, replay};
use sets::NONE;
use transfer::check_transfers;

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
    /// How many violations there are in all (at most `limits::MAX_COUNTED_VIOLATIONS`).
    pub violation_count: usize,
    /// There were more than `violation_count`: the check stopped counting there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub violation_count_capped: bool,
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

#[derive(Default)]
struct Sink {
    list: Vec<Violation>,
    count: usize,
    /// More than `limits::MAX_COUNTED_VIOLATIONS` were found: the check stopped counting.
    capped: bool,
}

impl Sink {
    /// Takes over another sink's violations (a group's, in group order).
    fn append(&mut self, other: Sink) {
        let room = limits::MAX_REPORTED_VIOLATIONS.saturating_sub(self.list.len());
        self.list.extend(other.list.into_iter().take(room));
        let sum = self.count + other.count;
        self.count = sum.min(limits::MAX_COUNTED_VIOLATIONS);
        self.capped |= other.capped || sum > limits::MAX_COUNTED_VIOLATIONS;
    }

    /// Whether the check should stop: it has counted as many violations as it counts.
    fn full(&self) -> bool {
        self.capped
    }
    /// Counts a violation; keeps it (its message written) while the list has room. Callers
    /// pass `format_args!`: a transfer naming 2^26 chunks out of range, or a collective of a
    /// million chunks none of whose sources hold them, counts hundreds of millions of
    /// violations, and writing each message took 14 s where counting takes a fraction.
    fn add(
        &mut self,
        kind: ViolationKind,
        at: Option<At>,
        npu: Option<u32>,
        chunk: Option<u32>,
        message: impl std::fmt::Display,
    ) {
        if self.count >= limits::MAX_COUNTED_VIOLATIONS {
            self.capped = true;
            return;
        }
        self.count += 1;
        if self.list.len() < limits::MAX_REPORTED_VIOLATIONS {
            let message = message.to_string();
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
    validate_grouped(s, Group::count(s), flow::STAMP_FROM_TRANSFERS, stop)
}

/// `validate`, stamping a valid replay's data flow from `stamp_from` transfers instead of
/// `flow::STAMP_FROM_TRANSFERS` (and trusting a stamp from there): for tests of the stamp on
/// small schedules.
#[doc(hidden)]
pub fn validate_stamping_from(s: &Schedule, stamp_from: usize) -> Report {
    validate_grouped(s, Group::count(s), stamp_from, &|| false).expect("never stopped").0
}

/// The replay on ranges alone, after the checks of the declared fields and of each transfer:
/// `Some(true)` when it finds the schedule valid, `Some(false)` when it finds something wrong
/// (the chunk replay then names it), `None` when it does not replay this schedule. For tests
/// that it agrees with the chunk replay, and for benchmarks.
#[doc(hidden)]
pub fn valid_on_ranges(s: &Schedule) -> Option<bool> {
    let mut poll = crate::schedule::StopPoll::new(&|| false);
    let mut out = Sink::default();
    if let Ok(c) = Collective::build_unchecked(&s.collective, &s.topology) {
        check_declared(s, &c, &mut out);
    }
    let pre = check_conditions(s, &mut out)?;
    check_transfers(s, &mut out, &mut poll)?;
    if out.count > 0 {
        return Some(false);
    }
    match ranges::verdict(s, &pre, &mut poll)? {
        ranges::Verdict::Valid => Some(true),
        ranges::Verdict::Broken => Some(false),
        ranges::Verdict::Declined => None,
    }
}

/// Whether `s` carries the stamp of a valid replay of its very data flow (its next check then
/// replays nothing: only its declared fields and its transfers on its topology are checked).
pub fn flow_vouched(s: &Schedule) -> bool {
    flow::vouched(s)
}

/// `validate` with the replay split into `groups` passes over groups of chunks (at most one
/// per chunk), whatever the schedule's size: the verdict, the count and the set of
/// violations are the same for any number (only their order in the report may differ). For
/// tests of exactly that.
#[doc(hidden)]
pub fn validate_in_groups(s: &Schedule, groups: usize) -> Report {
    validate_grouped(s, groups, flow::STAMP_FROM_TRANSFERS, &|| false).expect("never stopped").0
}

fn validate_grouped(
    s: &Schedule,
    groups: usize,
    stamp_from: usize,
    stop: &(dyn Fn() -> bool + Sync),
) -> Option<(Report, Option<Collective>)> {
    let mut poll = crate::schedule::StopPoll::new(stop);
    let mut out = Sink::default();

    // 1. The declared collective fields against the collective object.
    let built = Collective::build_unchecked(&s.collective, &s.topology);
    match &built {
        Err(e) => out.add(ViolationKind::InvalidCollective, None, None, None, format_args!("collective: {e}")),
        Ok(c) => check_declared(s, c, &mut out),
    }

    let Some(pre) = check_conditions(s, &mut out) else {
        return Some((finish(out, false), built.ok()));
    };

    // 2. Each transfer on its own: nodes, chunks, links, path.
    let ok = check_transfers(s, &mut out, &mut poll)?;
    let simulatable = ok.iter().all(|&g| g);
    if out.full() {
        return Some((finish(out, simulatable), built.ok()));
    }

    // A data flow replayed before and found valid (the transfers carry the stamp of this very
    // flow: a repair changed routes only) is not replayed again; the declared fields and every
    // transfer on this topology were checked above, as for any schedule.
    // (A schedule with violations already is neither vouched for nor stamped: no digest.)
    let flow = (out.count == 0 && s.transfers.len() >= stamp_from).then(|| flow::digest(s));
    if flow.is_some() && s.transfers.flow_stamp() == flow.as_ref() {
        return Some((finish(out, simulatable), built.ok()));
    }

    // 3. and 4. on ranges first, where messages carry long chunk lists: a valid schedule is
    // done with in a pass whose cost follows its transfers; anything else (or a schedule whose
    // rows fragment) is replayed chunk by chunk below, which names each violation.
    if out.count == 0 && crate::runs::worth_ranges(s) && ranges::verdict(s, &pre, &mut poll)? == ranges::Verdict::Valid
    {
        let report = finish(out, simulatable);
        if let Some(d) = flow {
            s.transfers.stamp_flow(d);
        }
        return Some((report, built.ok()));
    }

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
    // The groups run in waves, in order, and the check stops after the wave that takes the
    // count past what it counts: each group counts on its own, so a schedule missing all of a
    // postcondition of 2^34 pairs (a 155 kB file: 1,024 NPUs, 16,384 chunks each, one
    // transfer) was replayed group after group for six minutes though the count was capped in
    // the first. Which groups run depends on their counts alone: the report is the same run
    // to run.
    let each = groups.iter().map(|g| g.table_bytes(s)).max().unwrap_or(0);
    for groups in groups.chunks(wave(each)) {
        let sinks: Vec<Option<Sink>> = groups
            .par_iter()
            .map(|g| {
                let mut sink = Sink::default();
                let mut poll = crate::schedule::StopPoll::new(stop);
                let state = replay(s, &order, g, &spans, &ok, &pre, &mut sink, &mut poll)?;
                check_postcondition(s, g, &pre, &state, &mut sink);
                Some(sink)
            })
            .collect();
        for sink in sinks {
            out.append(sink?);
        }
        if out.full() {
            break;
        }
    }
    let report = finish(out, simulatable);
    if let Some(d) = flow.filter(|_| report.valid) {
        s.transfers.stamp_flow(d);
    }
    Some((report, built.ok()))
}

/// Groups replayed in one wave, when each holds tables of `each` bytes: four per thread of the
/// pool, or only as many as fit `limits::REPLAY_BYTES` side by side (at least one), so the
/// replay's peak does not grow with the machine's cores (1,024 NPUs of 1,024 chunks each in
/// 8 groups of 1 GB: 2 GB on two threads, 8 GB on eight).
fn wave(each: u64) -> usize {
    let threads = rayon::current_num_threads().max(1);
    match (limits::REPLAY_BYTES / each.max(1)) as usize {
        fit if fit < threads => fit.max(1),
        _ => 4 * threads,
    }
}

/// About the most memory the chunk replay of `s` holds at once, in bytes (the tables of the
/// groups of a wave), before anything is allocated: for callers that admit a check by its
/// cost. The replay on ranges, which settles most valid schedules with long lists first,
/// holds far less.
pub fn replay_peak_bytes(s: &Schedule) -> u64 {
    let each = Group::largest_table_bytes(s);
    let side_by_side = wave(each).min(rayon::current_num_threads().max(1)).min(Group::count(s).max(1));
    side_by_side as u64 * each
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
            format_args!("{what} is {declared} but the collective implies {want}"),
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
        // Equal conditions (every producer's) are compared as they are held: an every-pair
        // set by its NPUs; only a list in another order is copied to be sorted.
        if declared == want {
            continue;
        }
        let d: Cow<[[u32; 2]]> = if declared.is_canonical() {
            declared.as_slice()
        } else {
            let mut d = declared.to_vec();
            d.sort_unstable();
            d.dedup();
            Cow::Owned(d)
        };
        if !want.iter().eq(d.iter().copied()) {
            let extra = d.iter().find(|p| !want.contains(p));
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

/// The chunk count, the condition pairs and the scratch slots. Gives the initial holders (the
/// precondition pairs in range, sorted and deduplicated), or `None` when nothing later can be
/// checked.
fn check_conditions(s: &Schedule, out: &mut Sink) -> Option<Pairs> {
    use ViolationKind::*;
    let chunks = s.num_chunks;
    if chunks > limits::MAX_CHUNKS {
        out.add(
            InvalidCondition,
            None,
            None,
            None,
            format_args!("num_chunks {chunks} exceeds the limit of {}", limits::MAX_CHUNKS),
        );
        return None;
    }
    let npus = s.topology.npus();
    let in_range = |&[v, c]: &[u32; 2]| (v as usize) < npus && (c as usize) < chunks;
    // Every chunk at every NPU of a set is in range when its last NPU and chunk are.
    let all_in_range = |l: &Pairs| match l.as_every() {
        Some((vs, k)) => vs.last().is_none_or(|&v| (v as usize) < npus) && k <= chunks,
        None => false,
    };
    let mut pre_out_of_range = false;
    for (name, list) in [("precondition", &s.precondition), ("postcondition", &s.postcondition)] {
        if all_in_range(list) {
            continue;
        }
        // Every chunk at every NPU of a set (a condition the collective implies, most often,
        // left out of the file): one violation, not one a pair (a `collective` naming more
        // chunks than `num_chunks` listed 32 beside the 2 `collective_mismatch` they follow from).
        if let Some((vs, k)) = list.as_every() {
            out.add(
                InvalidCondition,
                None,
                None,
                None,
                format_args!(
                    "{name}: every chunk of {} at each of {}: expected NPUs in {} and chunks in {}",
                    crate::error::ids(k),
                    crate::units::counted(vs.len(), "NPU"),
                    crate::error::ids(npus),
                    crate::error::ids(chunks)
                ),
            );
            pre_out_of_range |= name == "precondition";
            continue;
        }
        // The first pair out of range, with how many more: a condition is one violation.
        let mut outside = list.iter().enumerate().filter(|(_, p)| !in_range(p));
        if let Some((i, [v, c])) = outside.next() {
            let more = outside.count();
            let more = if more > 0 {
                format!("; {} out of range too", crate::units::counted(more, "more pair"))
            } else {
                String::new()
            };
            out.add(
                InvalidCondition,
                None,
                Some(v),
                Some(c),
                format_args!(
                    "{name}[{i}] = [{v}, {c}]: expected an NPU in {} and a chunk in {}{more}",
                    crate::error::ids(npus),
                    crate::error::ids(chunks)
                ),
            );
            pre_out_of_range |= name == "precondition";
        }
    }
    // Every producer's precondition is in range and canonical: it is used as it is.
    let pre = if !pre_out_of_range && s.precondition.is_canonical() {
        s.precondition.clone()
    } else {
        let mut pre: Vec<[u32; 2]> = s.precondition.iter().filter(in_range).collect();
        pre.sort_unstable();
        pre.dedup();
        Pairs::from(pre)
    };
    if s.scratch.len() > limits::MAX_CHUNKS {
        out.add(
            InvalidScratch,
            None,
            None,
            None,
            format_args!("scratch has {} slots, over the limit of {}", s.scratch.len(), limits::MAX_CHUNKS),
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
                format_args!("scratch[{i}] = {c}: expected a chunk in {}", crate::error::ids(chunks)),
            );
        }
    }
    if out.count > before {
        return None;
    }
    Some(pre)
}

/// Checks the postcondition of `group`'s chunks against its final `state`; `pre` gives the
/// contributors a combining chunk must hold.
fn check_postcondition(s: &Schedule, group: &Group, pre: &Pairs, state: &State, out: &mut Sink) {
    use ViolationKind::*;
    let npus = s.topology.npus();
    let required: Vec<Spans> = match pre.as_every() {
        // Every chunk's contributors are the same NPUs: one set, shared.
        Some((vs, k)) if s.combining && k >= s.num_chunks => vec![Spans::from_sorted_ids(vs); group.positions],
        _ if s.combining => {
            let here: Vec<[u32; 2]> = group.pairs_here(pre).map(|(v, _, slot)| [v, slot]).collect();
            required_sets(&here, group.positions)
        }
        _ => Vec::new(),
    };
    for (v, c, slot) in group.pairs_here(&s.postcondition) {
        if out.full() {
            break;
        }
        if (v as usize) >= npus {
            continue;
        }
        let have = state.read(v as usize, slot as usize);
        let want = || &required[slot as usize];
        if have == NONE {
            out.add(
                PostconditionUnmet,
                None,
                Some(v),
                Some(c),
                format_args!("NPU {v} does not hold chunk {c} at the end"),
            );
        } else if s.combining && state.sets.get(have) != want() {
            let (have, want) = (state.sets.get(have), want());
            let missing = want.missing_from(have, 8);
            out.add(
                IncompleteReduction,
                None,
                Some(v),
                Some(c),
                format_args!(
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
    Report {
        valid: out.count == 0,
        violation_count: out.count,
        violation_count_capped: out.capped,
        violations: out.list,
        simulatable,
    }
}
