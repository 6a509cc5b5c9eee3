//! The validator: replays a schedule under the v1 semantics and lists every rule it breaks
//! as structured violations. A schedule is valid exactly when the list is empty.

use crate::collective::{Collective, Holders};
use crate::limits;
use crate::schedule::{Op, Schedule};
use crate::slots::SlotTable;
use crate::spans::Spans;
use serde::Serialize;

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
        if t.src == t.dst {
            bad(SelfTransfer, Some(t.src), None, format!("src and dst are both {}", t.src));
            good = false;
        }
        if t.chunks.is_empty() {
            bad(EmptyTransfer, None, None, "carries no chunks".into());
            good = false;
        }
        let mut seen: crate::schedule::ChunkList = t.chunks.clone(); // inline for ≤ 2 chunks: no allocation
        seen.sort_unstable();
        for w in seen.windows(2) {
            if w[0] == w[1] {
                bad(DuplicateChunk, None, Some(w[0]), format!("chunk {} appears twice", w[0]));
                good = false;
            }
        }
        for &c in &t.chunks {
            if (c as usize) >= chunks {
                bad(ChunkOutOfRange, None, Some(c), format!("chunk {c} out of range: expected 0..{chunks}"));
                good = false;
            }
        }
        if t.op == Op::Reduce && !s.combining {
            bad(ReduceInNonCombining, Some(t.dst), None, "op \"reduce\" in a non-combining collective".into());
            good = false;
        }
        if good {
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

    // 3. Replay the data flow step by step.
    let holders = Holders::new(&pre, chunks);
    let order = s.replay_order();
    let mut state = if s.combining {
        let mut t: SlotTable<Option<Spans>> = SlotTable::new(npus, chunks);
        for &[v, c] in &pre {
            t.set(v as usize, c as usize, Some(Spans::singleton(v)));
        }
        State::Combining(t)
    } else {
        let mut t: SlotTable<bool> = SlotTable::new(npus, chunks);
        for &[v, c] in &pre {
            t.set(v as usize, c as usize, true);
        }
        State::Plain(t)
    };
    let mut k = 0;
    while k < order.len() {
        let step = s.transfers[order[k] as usize].step;
        let mut end = k;
        while end < order.len() && s.transfers[order[end] as usize].step == step {
            end += 1;
        }
        // Reads see the state after every earlier step.
        let mut writes: Vec<Write> = Vec::new();
        for &i in &order[k..end] {
            let i = i as usize;
            if !ok[i] {
                continue;
            }
            let t = &s.transfers[i];
            for &c in &t.chunks {
                let value = state.read(t.src as usize, c as usize);
                if value.is_none() {
                    out.add(
                        SourceMissingChunk,
                        Some((i, step)),
                        Some(t.src),
                        Some(c),
                        format!("transfer {i}: NPU {} does not hold chunk {c} at step {step}", t.src),
                    );
                    continue;
                }
                writes.push(Write { dst: t.dst, chunk: c, op: t.op, transfer: i, value });
            }
        }
        // Writes land at the end of the step, grouped per destination slot.
        writes.sort_by_key(|w| (w.dst, w.chunk, w.transfer));
        let mut interner = Interner::default();
        let mut a = 0;
        while a < writes.len() {
            let mut b = a;
            while b < writes.len() && writes[b].dst == writes[a].dst && writes[b].chunk == writes[a].chunk {
                b += 1;
            }
            state.apply(&writes[a..b], step, &mut out, &mut interner);
            a = b;
        }
        k = end;
    }

    // 4. The postcondition. Each chunk's full contributor set is built once.
    let mut required: Vec<Option<Spans>> = vec![None; if s.combining { chunks } else { 0 }];
    for &[v, c] in &s.postcondition {
        if (v as usize) >= npus || (c as usize) >= chunks {
            continue;
        }
        match &state {
            State::Plain(t) => {
                if !*t.get(v as usize, c as usize) {
                    out.add(
                        PostconditionUnmet,
                        None,
                        Some(v),
                        Some(c),
                        format!("NPU {v} does not hold chunk {c} at the end"),
                    );
                }
            }
            State::Combining(t) => {
                let want = required[c as usize].get_or_insert_with(|| Spans::from_sorted_ids(holders.of(c as usize)));
                match t.get(v as usize, c as usize) {
                    None => out.add(
                        PostconditionUnmet,
                        None,
                        Some(v),
                        Some(c),
                        format!("NPU {v} does not hold chunk {c} at the end"),
                    ),
                    Some(have) if have != want => {
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
                    Some(_) => {}
                }
            }
        }
    }
    (finish(out, simulatable), built.ok())
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

/// Shares equal contributor sets made in one step (one message reduces many chunks the same
/// way): without it, strided sets (a torus column is 64 ranges) copied into every slot of a
/// 4096-NPU all-reduce would take tens of GB.
#[derive(Default)]
struct Interner(std::collections::HashSet<Spans>);

impl Interner {
    fn intern(&mut self, s: Spans) -> Spans {
        if s.ranges().len() <= 2 {
            return s; // small sets are cheaper to keep than to hash
        }
        if let Some(x) = self.0.get(&s) {
            return x.clone();
        }
        self.0.insert(s.clone());
        s
    }
}

struct Write {
    dst: u32,
    chunk: u32,
    op: Op,
    transfer: usize,
    /// The source's contents: `Some` for held (contributors when combining).
    value: Option<Spans>,
}

enum State {
    Plain(SlotTable<bool>),
    Combining(SlotTable<Option<Spans>>),
}

static HELD: std::sync::OnceLock<Spans> = std::sync::OnceLock::new();

impl State {
    fn read(&self, npu: usize, chunk: usize) -> Option<Spans> {
        match self {
            State::Plain(t) => t.get(npu, chunk).then(|| HELD.get_or_init(|| Spans::singleton(0)).clone()),
            State::Combining(t) => t.get(npu, chunk).clone(),
        }
    }

    /// Applies all writes into one (npu, chunk) slot from one step.
    fn apply(&mut self, ws: &[Write], step: u32, out: &mut Sink, interner: &mut Interner) {
        use ViolationKind::*;
        let (dst, chunk) = (ws[0].dst, ws[0].chunk);
        let copies = ws.iter().filter(|w| w.op == Op::Copy).count();
        if copies > 1 || (copies == 1 && ws.len() > 1) {
            let ids: Vec<usize> = ws.iter().map(|w| w.transfer).collect();
            out.add(
                WriteConflict,
                Some((ws[1].transfer, step)),
                Some(dst),
                Some(chunk),
                format!("transfers {ids:?} all write chunk {chunk} into NPU {dst} in step {step}; at most one copy, or only reduces, may"),
            );
            // The outcome is undefined; keep every contribution so later checks do not cascade.
            if let State::Plain(t) = self {
                t.set(dst as usize, chunk as usize, true);
            }
            if let State::Combining(t) = self {
                let mut acc = t.get(dst as usize, chunk as usize).clone();
                for w in ws {
                    let v = w.value.clone().expect("written values were read");
                    acc = Some(match acc {
                        Some(a) => a.union(&v),
                        None => v,
                    });
                }
                t.set(dst as usize, chunk as usize, acc.map(|a| interner.intern(a)));
            }
            return;
        }
        match self {
            State::Plain(t) => t.set(dst as usize, chunk as usize, true),
            State::Combining(t) => {
                let old = t.get(dst as usize, chunk as usize).clone();
                let mut acc = old.clone();
                for w in ws {
                    let src = w.value.clone().expect("reads that found nothing are not written");
                    let at = Some((w.transfer, step));
                    match w.op {
                        Op::Copy => {
                            if let Some(o) = &old
                                && !o.is_subset_of(&src)
                            {
                                let lost = o.missing_from(&src, 8);
                                out.add(
                                        CopyDropsContribution,
                                        at,
                                        Some(dst),
                                        Some(chunk),
                                        format!(
                                            "transfer {}: copying chunk {chunk} into NPU {dst} drops contributions {lost:?} it already had",
                                            w.transfer
                                        ),
                                    );
                            }
                            acc = Some(src);
                        }
                        Op::Reduce => match &acc {
                            None => {
                                out.add(
                                    ReduceWithoutPartial,
                                    at,
                                    Some(dst),
                                    Some(chunk),
                                    format!(
                                        "transfer {}: NPU {dst} holds no partial of chunk {chunk} to reduce into",
                                        w.transfer
                                    ),
                                );
                                acc = Some(src);
                            }
                            Some(a) => {
                                if let Some(v) = a.first_common(&src) {
                                    out.add(
                                        DoubleCount,
                                        at,
                                        Some(dst),
                                        Some(chunk),
                                        format!(
                                            "transfer {}: the contribution of NPU {v} to chunk {chunk} would be counted twice at NPU {dst}",
                                            w.transfer
                                        ),
                                    );
                                }
                                acc = Some(a.union(&src));
                            }
                        },
                    }
                }
                t.set(dst as usize, chunk as usize, acc.map(|a| interner.intern(a)));
            }
        }
    }
}
