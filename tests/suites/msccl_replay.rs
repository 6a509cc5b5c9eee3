//! An independent interpreter of MSCCL algorithm XML: a strict reader of the executor's format,
//! a symbolic replay of the schedule under several thread-block interleavings, and the
//! postcondition of each collective. It is written from the format's specification only and
//! shares no code with ccsynth's exporter, so that a bug in one is not mirrored by the other.

use crate::link_order::{Sent, contributors};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use roxmltree::Node;

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// How the scheduler picks among runnable thread-block heads. Several policies are needed
/// because a missing dependency only shows up under an interleaving that exploits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Cycle through (gpu, tb) in order, running the first runnable head after the last one run.
    RoundRobin,
    /// Always the last runnable head in (gpu, tb) order.
    Reverse,
    /// Prefer heads that write local memory, so writes overtake reads that lack a dependency.
    WritesFirst,
    /// Prefer pure sends (s, rrs).
    SendsFirst,
    /// A uniformly random runnable head, from a seeded generator (reproducible).
    Random(u64),
}

pub const POLICIES: [Policy; 7] = [
    Policy::RoundRobin,
    Policy::Reverse,
    Policy::WritesFirst,
    Policy::SendsFirst,
    Policy::Random(1),
    Policy::Random(2),
    Policy::Random(3),
];

/// One replay configuration.
#[derive(Clone, Copy, Debug)]
pub struct Mode {
    /// Input and output alias as when the caller passes one buffer (see `Layout`).
    pub inplace: bool,
    pub policy: Policy,
    /// Calls a (sender, receiver, channel) connection holds before a send blocks: NCCL_STEPS
    /// (8) slots over the slots one call takes (the chunk steps: 4 for Simple, 1 for LL and
    /// LL128), so 2 for Simple and 8 for LL and LL128.
    pub fifo_capacity: usize,
    /// Chunks one call moves (the executor's `maxAllowedCount`, which depends on the message
    /// size: see `chunks_per_call`). A step of `cnt` chunks is ⌈cnt / m⌉ calls, each of which
    /// is pushed into (or popped from) the connection on its own.
    pub chunks_per_call: usize,
    /// Most steps a thread block may have (64 for the current executor, 256 legacy).
    pub max_steps: usize,
    /// Most thread blocks a gpu may have.
    pub max_tbs: usize,
}

impl Mode {
    /// A replay of `algo` as `executor` runs it: its protocol's FIFO capacity and the
    /// executor's limits.
    fn of(algo: &Algo, executor: Executor, inplace: bool, policy: Policy, chunks_per_call: usize) -> Mode {
        Mode {
            inplace,
            policy,
            fifo_capacity: fifo_capacity(&algo.proto),
            chunks_per_call,
            max_steps: executor.max_steps(),
            max_tbs: executor.max_tbs(),
        }
    }
}

/// Which executor reads the file: the limits it enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Executor {
    /// The MSCCL executor for NCCL: 64 steps per tb, 32 tbs per channel × 32 channels.
    Current,
    /// The original MSCCL (NCCL 2.12 fork): 256 steps per tb, 216 tbs (2 per SM of an A100).
    Legacy,
    /// RCCL's MSCCL: 64 steps per tb and 64 tbs per gpu.
    Rccl,
}

impl Executor {
    pub fn max_steps(self) -> usize {
        match self {
            Executor::Current | Executor::Rccl => 64,
            Executor::Legacy => 256,
        }
    }
    pub fn max_tbs(self) -> usize {
        match self {
            Executor::Current => 1024,
            Executor::Legacy => 216,
            Executor::Rccl => 64,
        }
    }

    /// Parses `xml` under this executor's limits. RCCL's MSCCL parses the fused receive steps
    /// (rcs, rrs, rrc, rrcs) but refuses to launch an algorithm that has any: "MSCCL: this
    /// version of MSCCL build doesn't support full Ops" (ROCm/rccl `src/misc/msccl/msccl_setup.cc`,
    /// `fullOpMask`).
    fn parse(self, xml: &str) -> Result<Algo, String> {
        let algo = parse_algo(xml, self.max_steps(), self.max_tbs())?;
        if self == Executor::Rccl {
            let fused = [Op::RecvCopySend, Op::RecvReduceSend, Op::RecvReduceCopy, Op::RecvReduceCopySend];
            for g in &algo.gpus {
                for tb in &g.tbs {
                    if let Some((i, st)) = tb.steps.iter().enumerate().find(|(_, st)| fused.contains(&st.op)) {
                        return Err(format!(
                            "gpu {} tb {} step {i}: type {} is a fused receive, which RCCL's MSCCL refuses at launch (\"this version of MSCCL build doesn't support full Ops\")",
                            g.id,
                            tb.id,
                            st.op.name()
                        ));
                    }
                }
            }
        }
        Ok(algo)
    }
}

/// The executor's chunks per call for a message of `n_bytes` (its `nBytes`: count × type size ×
/// the collective's size multiplier): the protocol's effective chunk size over the bytes of one
/// chunk, at least 1 and below `MSCCL_MAX_COUNT` (72). NCCL's default buffer sizes: Simple 4 MiB
/// over 8 steps, 4 steps a chunk (2 MiB); LL 512 KiB over 8 steps, halved (32 KiB); LL128
/// 4,915,200 B over 8 steps, 15 of every 16 words (576,000 B).
pub fn chunks_per_call(proto: &str, nchunksperloop: usize, n_bytes: u64) -> usize {
    let effective: u64 = match proto {
        "LL" => 32_768,
        "LL128" => 576_000,
        _ => 2_097_152,
    };
    let per_chunk = n_bytes.div_ceil(nchunksperloop as u64).max(1);
    ((effective / per_chunk) as usize).clamp(1, 71)
}

/// Calls a connection holds for the protocol (see `Mode::fifo_capacity`).
pub fn fifo_capacity(proto: &str) -> usize {
    if proto == "Simple" { 2 } else { 8 }
}

/// A value: the set of (rank, input index) contributions it combines, sorted, no duplicates.
pub type Value = Vec<(usize, usize)>;

/// The outcome of a replay: what the collective's postcondition is checked against.
#[derive(Clone, Debug)]
pub struct Replayed {
    pub coll: String,
    pub ngpus: usize,
    pub nchunksperloop: usize,
    pub inplace: bool,
    /// per rank, the output buffer's cells after the run (None = never written)
    pub output: Vec<Vec<Option<Value>>>,
    /// Every send call executed, in each thread block's order (`link_order`).
    pub sent: Vec<Sent>,
}

/// Parses and validates `xml`, then replays it symbolically under `mode`.
pub fn replay(xml: &str, mode: Mode) -> Result<Replayed, String> {
    let algo = parse_algo(xml, mode.max_steps, mode.max_tbs)?;
    run(&algo, mode)
}

/// Checks the postcondition of the collective named by `coll` (root used by broadcast/reduce).
pub fn check(r: &Replayed, root: Option<usize>) -> Result<(), String> {
    let p = r.ngpus;
    let n = r.nchunksperloop;
    let placement = if r.inplace { "in place" } else { "out of place" };
    let context = format!("{} ({placement})", r.coll);
    if p == 0 || r.output.len() != p {
        return Err(format!("{context}: ngpus = {p} but the replay has output for {} rank(s)", r.output.len()));
    }
    let expect = |rank: usize, index: usize, expected: Value| expect_cell(r, &context, rank, index, &expected);
    match r.coll.as_str() {
        "allreduce" => {
            for rank in 0..p {
                let o_chunks = r.output[rank].len();
                if o_chunks != n {
                    return Err(format!(
                        "{context}: rank {rank} has o_chunks = {o_chunks}, expected nchunksperloop = {n}"
                    ));
                }
                for c in 0..n {
                    expect(rank, c, from_every_rank(p, c))?;
                }
            }
        }
        "allgather" => {
            let k = chunks_per_rank(&context, n, p)?;
            for rank in 0..p {
                for owner in 0..p {
                    for j in 0..k {
                        expect(rank, owner * k + j, vec![(owner, j)])?;
                    }
                }
            }
        }
        "reducescatter" | "reduce_scatter" => {
            let k = chunks_per_rank(&context, n, p)?;
            for rank in 0..p {
                for j in 0..k {
                    expect(rank, j, from_every_rank(p, rank * k + j))?;
                }
            }
        }
        "alltoall" => {
            let k = chunks_per_rank(&context, n, p)?;
            for rank in 0..p {
                for sender in 0..p {
                    for j in 0..k {
                        expect(rank, sender * k + j, vec![(sender, rank * k + j)])?;
                    }
                }
            }
        }
        "broadcast" => {
            let root = required_root(&context, root, p)?;
            for rank in 0..p {
                for c in 0..n {
                    expect(rank, c, vec![(root, c)])?;
                }
            }
        }
        "reduce" => {
            let root = required_root(&context, root, p)?;
            for c in 0..n {
                expect(root, c, from_every_rank(p, c))?;
            }
        }
        other => return Err(format!("unsupported collective {other:?}")),
    }
    Ok(())
}

/// Convenience for test bodies: replays under every policy in POLICIES, in place and out of place
/// (skipping a mode the XML's `inplace`/`outofplace` attribute says it doesn't support, but Err if
/// both are 0), with the protocol's FIFO capacity, at the chunks per call of the smallest and the
/// largest size the file declares (and, under round robin, at 2 and 3 chunks per call where the
/// range has them), and checks each; Err names the mode that failed.
pub fn replay_all(xml: &str, root: Option<usize>, executor: Executor) -> Result<(), String> {
    // Parse once: validation does not depend on the mode (the limits are the same for all).
    let algo = executor.parse(xml)?;
    if !algo.inplace && !algo.outofplace {
        return Err("the algo declares inplace=\"0\" and outofplace=\"0\": no mode to run".into());
    }
    let (fewest, most) = algo.calls_range();
    for inplace in [false, true] {
        let supported = if inplace { algo.inplace } else { algo.outofplace };
        if !supported {
            continue;
        }
        let ends = if fewest == most { vec![fewest] } else { vec![fewest, most] };
        let mut modes: Vec<(Policy, usize)> =
            ends.iter().flat_map(|&m| POLICIES.iter().map(move |&policy| (policy, m))).collect();
        let between = [2, 3].into_iter().filter(|m| fewest < *m && *m < most);
        modes.extend(between.map(|m| (Policy::RoundRobin, m)));
        for (policy, chunks_per_call) in modes {
            let mode = Mode::of(&algo, executor, inplace, policy, chunks_per_call);
            run(&algo, mode)
                .and_then(|replayed| check(&replayed, root))
                .map_err(|e| format!("{}: {e}", describe_mode(mode)))?;
        }
    }
    Ok(())
}

/// The modes the conformance suite runs on every file: in place under `WritesFirst` at the
/// largest declared size (the fewest chunks per call), out of place under a random order at
/// the smallest. Err names the mode that failed.
/// Returns the sends of the last run (a block's sends do not depend on the order blocks run in).
pub fn replay_ends(xml: &str, root: Option<usize>, executor: Executor) -> Result<Vec<Sent>, String> {
    let algo = executor.parse(xml)?;
    let (fewest, most) = algo.calls_range();
    let mut sent = Vec::new();
    for (inplace, policy, chunks_per_call) in [(true, Policy::WritesFirst, fewest), (false, Policy::Random(7), most)] {
        let mode = Mode::of(&algo, executor, inplace, policy, chunks_per_call);
        let r = run(&algo, mode).map_err(|e| format!("{}: {e}", describe_mode(mode)))?;
        check(&r, root).map_err(|e| format!("{}: {e}", describe_mode(mode)))?;
        sent = r.sent;
    }
    Ok(sent)
}

// ---------------------------------------------------------------------------------------------
// The parsed algorithm
// ---------------------------------------------------------------------------------------------

/// The XML after validation. Only what the replay needs is kept; the rest is checked and dropped.
struct Algo {
    coll: String,
    proto: String,
    /// The sizes (the executor's nBytes) the file declares, inclusive; None: no upper limit
    /// (the executor reads maxBytes = 0 so).
    min_bytes: u64,
    max_bytes: Option<u64>,
    ngpus: usize,
    nchannels: usize,
    nchunksperloop: usize,
    inplace: bool,
    outofplace: bool,
    /// Indexed by gpu id.
    gpus: Vec<Gpu>,
}

struct Gpu {
    id: usize,
    sizes: BufferSizes,
    /// Indexed by tb id.
    tbs: Vec<Tb>,
}

#[derive(Clone, Copy, Debug)]
struct BufferSizes {
    input: usize,
    output: usize,
    scratch: usize,
}

impl BufferSizes {
    fn of(self, buffer: Buffer) -> usize {
        match buffer {
            Buffer::Input => self.input,
            Buffer::Output => self.output,
            Buffer::Scratch => self.scratch,
        }
    }
}

struct Tb {
    id: usize,
    send: Option<usize>,
    recv: Option<usize>,
    chan: usize,
    steps: Vec<Step>,
}

struct Step {
    op: Op,
    /// Present exactly when `op.reads_src()`.
    src: Option<Slice>,
    /// Present exactly when `op.uses_dst()`.
    dst: Option<Slice>,
    /// 0 for nop (its cnt is ignored).
    cnt: usize,
    dep: Option<Dep>,
    hasdep: bool,
}

/// "Wait until tb `tb` of the same gpu has executed its step `step`."
#[derive(Clone, Copy, Debug)]
struct Dep {
    tb: usize,
    step: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slice {
    buffer: Buffer,
    offset: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Buffer {
    Input,
    Output,
    Scratch,
}

impl Buffer {
    fn parse(text: &str) -> Option<Buffer> {
        match text {
            "i" => Some(Buffer::Input),
            "o" => Some(Buffer::Output),
            "s" => Some(Buffer::Scratch),
            _ => None,
        }
    }

    fn letter(self) -> &'static str {
        match self {
            Buffer::Input => "i",
            Buffer::Output => "o",
            Buffer::Scratch => "s",
        }
    }

    fn chunks_attribute(self) -> &'static str {
        match self {
            Buffer::Input => "i_chunks",
            Buffer::Output => "o_chunks",
            Buffer::Scratch => "s_chunks",
        }
    }
}

/// The step types of the executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Send,
    Recv,
    RecvCopySend,
    RecvReduceSend,
    RecvReduceCopy,
    RecvReduceCopySend,
    Copy,
    Reduce,
    Nop,
}

impl Op {
    fn parse(text: &str) -> Option<Op> {
        Some(match text {
            "s" => Op::Send,
            "r" => Op::Recv,
            "rcs" => Op::RecvCopySend,
            "rrs" => Op::RecvReduceSend,
            "rrc" => Op::RecvReduceCopy,
            "rrcs" => Op::RecvReduceCopySend,
            "cpy" => Op::Copy,
            "re" => Op::Reduce,
            "nop" => Op::Nop,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Op::Send => "s",
            Op::Recv => "r",
            Op::RecvCopySend => "rcs",
            Op::RecvReduceSend => "rrs",
            Op::RecvReduceCopy => "rrc",
            Op::RecvReduceCopySend => "rrcs",
            Op::Copy => "cpy",
            Op::Reduce => "re",
            Op::Nop => "nop",
        }
    }

    fn sends(self) -> bool {
        matches!(self, Op::Send | Op::RecvCopySend | Op::RecvReduceSend | Op::RecvReduceCopySend)
    }

    fn receives(self) -> bool {
        matches!(self, Op::Recv | Op::RecvCopySend | Op::RecvReduceSend | Op::RecvReduceCopy | Op::RecvReduceCopySend)
    }

    /// Reads srcbuf[srcoff..+cnt].
    fn reads_src(self) -> bool {
        matches!(
            self,
            Op::Send | Op::RecvReduceSend | Op::RecvReduceCopy | Op::RecvReduceCopySend | Op::Copy | Op::Reduce
        )
    }

    /// Writes dstbuf[dstoff..+cnt] (`re` also reads it first).
    fn writes_dst(self) -> bool {
        matches!(
            self,
            Op::Recv | Op::RecvCopySend | Op::RecvReduceCopy | Op::RecvReduceCopySend | Op::Copy | Op::Reduce
        )
    }

    /// Sends without touching local memory: what `SendsFirst` prefers.
    fn is_pure_send(self) -> bool {
        matches!(self, Op::Send | Op::RecvReduceSend)
    }
}

impl Algo {
    /// Chunks per call at the largest and at the smallest size the file declares.
    fn calls_range(&self) -> (usize, usize) {
        let n = self.nchunksperloop;
        let at_largest = chunks_per_call(&self.proto, n, self.max_bytes.unwrap_or(i64::MAX as u64));
        let at_smallest = chunks_per_call(&self.proto, n, self.min_bytes.max(1));
        (at_largest, at_smallest)
    }
}

// ---------------------------------------------------------------------------------------------
// Reading and validating the XML
// ---------------------------------------------------------------------------------------------

/// The executor's per-step chunk count limit.
const MAX_CNT: i128 = 71;
/// The executor's limits on channels and on thread blocks per (gpu, channel).
const MAX_CHANNELS: usize = 32;
const MAX_TBS_PER_CHANNEL: usize = 32;

fn parse_algo(xml: &str, max_steps: usize, max_tbs: usize) -> Result<Algo, String> {
    check_prologue(xml)?;
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not well-formed XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "algo" {
        return Err(format!("root element is <{}>, expected <algo>", root.tag_name().name()));
    }
    let mut algo = parse_header(root)?;
    let mut gpus = Vec::new();
    for node in element_children(root, "gpu", "algo")? {
        gpus.push(parse_gpu(node, &algo, max_steps, max_tbs)?);
    }
    algo.gpus = place_by_id(gpus, |gpu: &Gpu| gpu.id, algo.ngpus, "gpu", "algo")?;
    Ok(algo)
}

/// The executor's reader is hand-written and expects the document to open with `<algo`; it
/// cannot skip an XML declaration, so one is an error even though it is well-formed XML.
fn check_prologue(xml: &str) -> Result<(), String> {
    let body = xml.trim_start();
    if body.starts_with("<?xml") {
        return Err("the text starts with an `<?xml ...?>` declaration, which the executor's reader cannot \
             parse; it must start with `<algo`"
            .into());
    }
    if !body.starts_with("<algo") {
        let head: String = body.chars().take(20).collect();
        return Err(format!("the text must start with `<algo`, but starts with {head:?}"));
    }
    Ok(())
}

fn parse_header(root: Node<'_, '_>) -> Result<Algo, String> {
    let at = "algo";
    attr(root, "name", at)?;
    let proto = attr(root, "proto", at)?;
    if !matches!(proto, "Simple" | "LL" | "LL128") {
        return Err(format!("{at}: proto = {proto:?}, expected Simple, LL or LL128"));
    }
    let nchannels = uint_attr(root, "nchannels", at)?;
    if !(1..=MAX_CHANNELS).contains(&nchannels) {
        return Err(format!("{at}: nchannels = {nchannels}, expected 1..={MAX_CHANNELS}"));
    }
    let nchunksperloop = uint_attr(root, "nchunksperloop", at)?;
    if nchunksperloop == 0 {
        return Err(format!("{at}: nchunksperloop must be at least 1"));
    }
    let ngpus = uint_attr(root, "ngpus", at)?;
    if ngpus == 0 {
        return Err(format!("{at}: ngpus must be at least 1"));
    }
    let coll = attr(root, "coll", at)?.to_string();
    let inplace = flag_attr(root, "inplace", at)?;
    let outofplace = flag_attr(root, "outofplace", at)?;
    // The executor selects the file for minBytes <= nBytes and (maxBytes == 0 or nBytes <=
    // maxBytes), both int64.
    let min_bytes = int_attr(root, "minBytes", at)?;
    let max_bytes = int_attr(root, "maxBytes", at)?;
    if min_bytes < 0 || max_bytes < 0 || min_bytes > i64::MAX as i128 || max_bytes > i64::MAX as i128 {
        return Err(format!("{at}: minBytes = {min_bytes}, maxBytes = {max_bytes}: both must be int64 and >= 0"));
    }
    let max_bytes = (max_bytes > 0).then_some(max_bytes as u64);
    if max_bytes.is_some_and(|max| (min_bytes as u64) > max) {
        return Err(format!("{at}: minBytes = {min_bytes} is above maxBytes = {max_bytes:?}: no size selects it"));
    }
    Ok(Algo {
        coll,
        proto: proto.to_string(),
        min_bytes: min_bytes as u64,
        max_bytes,
        ngpus,
        nchannels,
        nchunksperloop,
        inplace,
        outofplace,
        gpus: Vec::new(),
    })
}

fn parse_gpu(node: Node<'_, '_>, algo: &Algo, max_steps: usize, max_tbs: usize) -> Result<Gpu, String> {
    let id = uint_attr(node, "id", "a <gpu> element")?;
    let at = format!("gpu {id}");
    if id >= algo.ngpus {
        return Err(format!("{at}: id out of range, ngpus = {}", algo.ngpus));
    }
    let sizes = BufferSizes {
        input: uint_attr(node, "i_chunks", &at)?,
        output: uint_attr(node, "o_chunks", &at)?,
        scratch: uint_attr(node, "s_chunks", &at)?,
    };
    let mut tbs = Vec::new();
    for tb_node in element_children(node, "tb", &at)? {
        tbs.push(parse_tb(tb_node, id, sizes, algo, max_steps)?);
    }
    let count = tbs.len();
    if count > max_tbs {
        return Err(format!("{at}: has {count} thread blocks, more than max_tbs = {max_tbs}"));
    }
    let tbs = place_by_id(tbs, |tb: &Tb| tb.id, count, "tb", &at)?;
    let gpu = Gpu { id, sizes, tbs };
    check_connections(&gpu)?;
    check_dependencies(&gpu)?;
    Ok(gpu)
}

fn parse_tb(node: Node<'_, '_>, gpu: usize, sizes: BufferSizes, algo: &Algo, max_steps: usize) -> Result<Tb, String> {
    let id = uint_attr(node, "id", &format!("gpu {gpu}: a <tb> element"))?;
    let at = format!("gpu {gpu} tb {id}");
    let send = peer_attr(node, "send", gpu, algo.ngpus, &at)?;
    let recv = peer_attr(node, "recv", gpu, algo.ngpus, &at)?;
    let chan = uint_attr(node, "chan", &at)?;
    if chan >= algo.nchannels {
        return Err(format!("{at}: chan = {chan}, but nchannels = {}", algo.nchannels));
    }
    let step_nodes = element_children(node, "step", &at)?;
    if step_nodes.len() > max_steps {
        return Err(format!("{at}: has {} steps, more than max_steps = {max_steps}", step_nodes.len()));
    }
    let context = TbContext { at: &at, send, recv, sizes };
    let mut steps = Vec::with_capacity(step_nodes.len());
    for (index, step_node) in step_nodes.into_iter().enumerate() {
        steps.push(parse_step(step_node, index, &context)?);
    }
    check_step_sequence(&steps, &at)?;
    Ok(Tb { id, send, recv, chan, steps })
}

/// What a step's validation needs to know about its thread block.
struct TbContext<'a> {
    at: &'a str,
    send: Option<usize>,
    recv: Option<usize>,
    sizes: BufferSizes,
}

fn parse_step(node: Node<'_, '_>, index: usize, tb: &TbContext<'_>) -> Result<Step, String> {
    let at = format!("{} step {index}", tb.at);
    let s = int_attr(node, "s", &at)?;
    if s != index as i128 {
        return Err(format!(
            "{at}: s = {s}, but steps must be numbered 0, 1, 2, ... in document order \
             (expected s = {index})"
        ));
    }
    let type_text = attr(node, "type", &at)?;
    let op = Op::parse(type_text)
        .ok_or_else(|| format!("{at}: type = {type_text:?} is not one of s, r, rcs, rrs, rrc, rrcs, cpy, re, nop"))?;
    let at = format!("{at} ({})", op.name());
    // The executor reads every attribute, used or not, so all must be present.
    for name in ["srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"] {
        attr(node, name, &at)?;
    }
    let hasdep = flag_attr(node, "hasdep", &at)?;
    let cnt = parse_cnt(node, op, &at)?;
    let src = if op.reads_src() { Some(parse_slice(node, "srcbuf", "srcoff", cnt, tb.sizes, &at)?) } else { None };
    let dst = if op.writes_dst() { Some(parse_slice(node, "dstbuf", "dstoff", cnt, tb.sizes, &at)?) } else { None };
    if op.sends() && tb.send.is_none() {
        return Err(format!("{at}: sends, but its tb has send = -1"));
    }
    if op.receives() && tb.recv.is_none() {
        return Err(format!("{at}: receives, but its tb has recv = -1"));
    }
    let dep = parse_dep(node, &at)?;
    if op == Op::Nop && dep.is_none() {
        return Err(format!("{at}: a nop must have depid >= 0 (nops only carry a dependency)"));
    }
    Ok(Step { op, src, dst, cnt, dep, hasdep })
}

/// cnt matters only for steps that move data; a nop's is ignored.
fn parse_cnt(node: Node<'_, '_>, op: Op, at: &str) -> Result<usize, String> {
    if op == Op::Nop {
        return Ok(0);
    }
    let cnt = int_attr(node, "cnt", at)?;
    if !(1..=MAX_CNT).contains(&cnt) {
        return Err(format!("{at}: cnt = {cnt}, expected 1..={MAX_CNT}"));
    }
    Ok(cnt as usize)
}

/// A buffer range the step actually uses: the buffer must be i/o/s and the range in bounds.
fn parse_slice(
    node: Node<'_, '_>,
    buf_name: &str,
    off_name: &str,
    cnt: usize,
    sizes: BufferSizes,
    at: &str,
) -> Result<Slice, String> {
    let buf_text = attr(node, buf_name, at)?;
    let buffer =
        Buffer::parse(buf_text).ok_or_else(|| format!("{at}: {buf_name} = {buf_text:?} is not one of i, o, s"))?;
    let offset = int_attr(node, off_name, at)?;
    // The executor keeps offsets in 16 signed bits (`int16_t srcOffset, dstOffset`).
    if offset > i16::MAX as i128 {
        return Err(format!("{at}: {off_name} = {offset} does not fit the executor's 16-bit signed offset"));
    }
    let size = sizes.of(buffer);
    if offset < 0 || offset + cnt as i128 > size as i128 {
        return Err(format!(
            "{at}: range {}[{offset}..{}) ({buf_name}/{off_name}, cnt {cnt}) is out of bounds: \
             the gpu has {} = {size}",
            buffer.letter(),
            offset + cnt as i128,
            buffer.chunks_attribute()
        ));
    }
    Ok(Slice { buffer, offset: offset as usize })
}

fn parse_dep(node: Node<'_, '_>, at: &str) -> Result<Option<Dep>, String> {
    let depid = int_attr(node, "depid", at)?;
    if depid == -1 {
        return Ok(None);
    }
    if depid < -1 {
        return Err(format!("{at}: depid = {depid}, expected -1 or a tb id"));
    }
    // The executor keeps it in an int8 (`dependentBid`): a larger id wraps to another tb.
    if depid > 127 {
        return Err(format!("{at}: depid = {depid}; the executor stores it in 8 signed bits, so at most 127"));
    }
    let deps = int_attr(node, "deps", at)?;
    if deps < 0 {
        return Err(format!("{at}: depid = {depid} but deps = {deps}; deps must name a step"));
    }
    Ok(Some(Dep { tb: depid as usize, step: deps as usize }))
}

/// Rules about neighbouring steps of one thread block.
fn check_step_sequence(steps: &[Step], at: &str) -> Result<(), String> {
    for index in 1..steps.len() {
        let previous = &steps[index - 1];
        let step = &steps[index];
        // The executor waits for a run of nops' dependencies together with the step after
        // them, and needs that step to carry a dependency of its own to do so.
        if previous.op == Op::Nop && step.op != Op::Nop && step.dep.is_none() {
            return Err(format!("{at} step {index} ({}): follows a nop, so it must have depid >= 0", step.op.name()));
        }
        // The executor fuses such a pair into one reduction, after which its step counter no
        // longer matches `s` (and dependencies on these steps would misfire).
        let fusable = previous.op == Op::Reduce
            && step.op == Op::Reduce
            && previous.dst == step.dst
            && previous.src.map(|slice| slice.buffer) == step.src.map(|slice| slice.buffer)
            && step.dep.is_none();
        if fusable {
            return Err(format!(
                "{at} step {index} (re): the executor would fuse it with step {} (consecutive re \
                 steps with the same dstbuf, dstoff and srcbuf, the second without depid)",
                index - 1
            ));
        }
    }
    Ok(())
}

/// Per gpu: channel occupancy and one sender/receiver tb per (peer, channel).
fn check_connections(gpu: &Gpu) -> Result<(), String> {
    let mut per_channel: BTreeMap<usize, usize> = BTreeMap::new();
    let mut senders: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let mut receivers: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for tb in &gpu.tbs {
        let at = format!("gpu {} tb {}", gpu.id, tb.id);
        let count = per_channel.entry(tb.chan).or_insert(0);
        *count += 1;
        if *count > MAX_TBS_PER_CHANNEL {
            return Err(format!("{at}: more than {MAX_TBS_PER_CHANNEL} tbs on channel {} of this gpu", tb.chan));
        }
        if let Some(peer) = tb.send
            && let Some(other) = senders.insert((peer, tb.chan), tb.id)
        {
            return Err(format!(
                "{at}: sends to gpu {peer} on channel {}, as does tb {other}; \
                     a (send peer, chan) pair may have only one tb",
                tb.chan
            ));
        }
        if let Some(peer) = tb.recv
            && let Some(other) = receivers.insert((peer, tb.chan), tb.id)
        {
            return Err(format!(
                "{at}: receives from gpu {peer} on channel {}, as does tb {other}; \
                     a (recv peer, chan) pair may have only one tb",
                tb.chan
            ));
        }
    }
    Ok(())
}

/// Every dependency names an existing step of the same gpu that signals progress (hasdep=1).
fn check_dependencies(gpu: &Gpu) -> Result<(), String> {
    for tb in &gpu.tbs {
        for (index, step) in tb.steps.iter().enumerate() {
            let Some(dep) = step.dep else { continue };
            let at = format!("gpu {} tb {} step {index} ({})", gpu.id, tb.id, step.op.name());
            let Some(target_tb) = gpu.tbs.get(dep.tb) else {
                return Err(format!("{at}: depid = {} names no tb of this gpu (it has {})", dep.tb, gpu.tbs.len()));
            };
            let Some(target) = target_tb.steps.get(dep.step) else {
                return Err(format!(
                    "{at}: deps = {} is past the end of tb {} ({} steps)",
                    dep.step,
                    dep.tb,
                    target_tb.steps.len()
                ));
            };
            if !target.hasdep {
                return Err(format!(
                    "{at}: depends on tb {} step {}, which has hasdep=0; the executor only signals \
                     progress on hasdep=1 steps, so this would wait forever",
                    dep.tb, dep.step
                ));
            }
        }
    }
    Ok(())
}

/// Puts elements into slots by id, requiring the ids to be exactly 0..count, each once.
fn place_by_id<T>(items: Vec<T>, id_of: fn(&T) -> usize, count: usize, what: &str, at: &str) -> Result<Vec<T>, String> {
    if items.len() != count {
        return Err(format!("{at}: has {} <{what}> elements, expected {count} (ids 0..{count})", items.len()));
    }
    let mut slots: Vec<Option<T>> = (0..count).map(|_| None).collect();
    for item in items {
        let id = id_of(&item);
        if id >= count {
            return Err(format!("{at}: {what} id {id} is out of range; ids must be exactly 0..{count} (contiguous)"));
        }
        if slots[id].is_some() {
            return Err(format!("{at}: {what} id {id} appears twice"));
        }
        slots[id] = Some(item);
    }
    // count items with distinct ids below count fill every slot.
    Ok(slots.into_iter().map(|slot| slot.expect("every slot is filled")).collect())
}

/// The element children of `node`, all of which must be `<expected>`. Stray elements or text
/// would be silently skipped or misread by the executor's reader, so they are errors here.
fn element_children<'a, 'input>(
    node: Node<'a, 'input>,
    expected: &str,
    at: &str,
) -> Result<Vec<Node<'a, 'input>>, String> {
    let mut children = Vec::new();
    for child in node.children() {
        if child.is_element() {
            let name = child.tag_name().name();
            if name != expected {
                return Err(format!("{at}: unexpected element <{name}>, expected <{expected}>"));
            }
            children.push(child);
        } else if child.is_text() {
            let text = child.text().unwrap_or("");
            if !text.trim().is_empty() {
                return Err(format!("{at}: unexpected text {:?}", text.trim()));
            }
        }
    }
    Ok(children)
}

fn attr<'a>(node: Node<'a, '_>, name: &str, at: &str) -> Result<&'a str, String> {
    node.attribute(name).ok_or_else(|| format!("{at}: missing attribute `{name}`"))
}

/// Any integer attribute; i128 so that large byte counts and -1 both fit.
fn int_attr(node: Node<'_, '_>, name: &str, at: &str) -> Result<i128, String> {
    let text = attr(node, name, at)?;
    text.parse::<i128>().map_err(|_| format!("{at}: attribute `{name}` = {text:?} is not an integer"))
}

fn uint_attr(node: Node<'_, '_>, name: &str, at: &str) -> Result<usize, String> {
    let value = int_attr(node, name, at)?;
    usize::try_from(value).map_err(|_| format!("{at}: attribute `{name}` = {value} must be a non-negative integer"))
}

fn flag_attr(node: Node<'_, '_>, name: &str, at: &str) -> Result<bool, String> {
    match int_attr(node, name, at)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!("{at}: attribute `{name}` = {other}, expected 0 or 1")),
    }
}

/// A tb's send or recv peer: -1 for none, else another gpu.
fn peer_attr(node: Node<'_, '_>, name: &str, own: usize, ngpus: usize, at: &str) -> Result<Option<usize>, String> {
    let value = int_attr(node, name, at)?;
    if value == -1 {
        return Ok(None);
    }
    if value < 0 || value >= ngpus as i128 {
        return Err(format!("{at}: {name} = {value}, expected -1 or a gpu id in 0..{ngpus}"));
    }
    let peer = value as usize;
    if peer == own {
        return Err(format!("{at}: {name} = {peer} is the tb's own gpu"));
    }
    Ok(Some(peer))
}

// ---------------------------------------------------------------------------------------------
// Memory layout: where each buffer's cells live, so in-place aliases share storage
// ---------------------------------------------------------------------------------------------

/// Per gpu, the canonical cell index of i[0], o[0] and s[0]. Out of place the three buffers are
/// disjoint; in place input and output are windows of one shared region, placed as the
/// executor's caller lays out a single buffer for the collective.
struct Layout {
    input_base: usize,
    output_base: usize,
    scratch_base: usize,
    len: usize,
}

impl Layout {
    fn new(algo: &Algo, rank: usize, sizes: BufferSizes, inplace: bool) -> Result<Layout, String> {
        if !inplace {
            return Ok(Layout {
                input_base: 0,
                output_base: sizes.input,
                scratch_base: sizes.input + sizes.output,
                len: sizes.input + sizes.output + sizes.scratch,
            });
        }
        let (p, n) = (algo.ngpus, algo.nchunksperloop);
        let per_rank = || {
            if n.is_multiple_of(p) {
                Ok(n / p)
            } else {
                Err(format!(
                    "in place {}: nchunksperloop = {n} is not a multiple of ngpus = {p}, so the \
                     aliasing of input and output is undefined",
                    algo.coll
                ))
            }
        };
        // Offsets of i[0] and o[0] inside the shared region.
        let (input_base, output_base) = match algo.coll.as_str() {
            "allreduce" | "alltoall" | "broadcast" | "reduce" => (0, 0),
            // The rank's input is its own block of the gathered output.
            "allgather" => (rank * per_rank()?, 0),
            // The rank's output is its own block of the input being scattered.
            "reducescatter" | "reduce_scatter" => (0, rank * per_rank()?),
            other => {
                return Err(format!("in place: no input/output aliasing is defined for {other:?}"));
            }
        };
        let shared = (input_base + sizes.input).max(output_base + sizes.output);
        Ok(Layout { input_base, output_base, scratch_base: shared, len: shared + sizes.scratch })
    }

    fn cell(&self, buffer: Buffer, index: usize) -> usize {
        let base = match buffer {
            Buffer::Input => self.input_base,
            Buffer::Output => self.output_base,
            Buffer::Scratch => self.scratch_base,
        };
        base + index
    }
}

// ---------------------------------------------------------------------------------------------
// The replay
// ---------------------------------------------------------------------------------------------

/// One connection: its messages are delivered in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Link {
    from: usize,
    to: usize,
    chan: usize,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gpu {} -> gpu {} chan {}", self.from, self.to, self.chan)
    }
}

#[derive(Clone, Copy, Debug)]
struct TbRef {
    gpu: usize,
    tb: usize,
}

/// Why a head step cannot run yet.
enum Blocked {
    Dependency(Dep),
    FifoFull(Link),
    FifoEmpty(Link),
}

struct Machine<'a> {
    algo: &'a Algo,
    mode: Mode,
    layouts: Vec<Layout>,
    /// Per gpu, the canonical cells (see `Layout`).
    memory: Vec<Vec<Option<Value>>>,
    fifos: BTreeMap<Link, VecDeque<Vec<Value>>>,
    /// Per gpu and tb, the index of the next step to execute (= number executed).
    next_step: Vec<Vec<usize>>,
    /// Per gpu and tb, the calls of that step already executed.
    next_call: Vec<Vec<usize>>,
    sent: Vec<Sent>,
}

fn run(algo: &Algo, mode: Mode) -> Result<Replayed, String> {
    if mode.inplace && !algo.inplace {
        return Err("the algo declares inplace=\"0\"; it cannot be replayed in place".into());
    }
    if !mode.inplace && !algo.outofplace {
        return Err("the algo declares outofplace=\"0\"; it cannot be replayed out of place".into());
    }
    let mut machine = Machine::new(algo, mode)?;
    machine.run_to_completion()?;
    Ok(machine.into_replayed())
}

impl<'a> Machine<'a> {
    fn new(algo: &'a Algo, mode: Mode) -> Result<Machine<'a>, String> {
        let mut layouts = Vec::with_capacity(algo.gpus.len());
        let mut memory = Vec::with_capacity(algo.gpus.len());
        for (rank, gpu) in algo.gpus.iter().enumerate() {
            let layout = Layout::new(algo, rank, gpu.sizes, mode.inplace)?;
            let mut cells: Vec<Option<Value>> = vec![None; layout.len];
            // Written into the canonical cells, so an output cell aliasing i[j] starts with it.
            for j in 0..gpu.sizes.input {
                cells[layout.cell(Buffer::Input, j)] = Some(vec![(rank, j)]);
            }
            layouts.push(layout);
            memory.push(cells);
        }
        let next_step: Vec<Vec<usize>> = algo.gpus.iter().map(|gpu| vec![0; gpu.tbs.len()]).collect();
        let next_call = next_step.clone();
        Ok(Machine { algo, mode, layouts, memory, fifos: BTreeMap::new(), next_step, next_call, sent: Vec::new() })
    }

    fn tb(&self, at: TbRef) -> &'a Tb {
        &self.algo.gpus[at.gpu].tbs[at.tb]
    }

    /// The next step of `at`, or None when the tb is finished.
    fn head(&self, at: TbRef) -> Option<&'a Step> {
        self.tb(at).steps.get(self.next_step[at.gpu][at.tb])
    }

    fn send_link(&self, at: TbRef) -> Link {
        let tb = self.tb(at);
        let to = tb.send.expect("validated: sending steps have a send peer");
        Link { from: at.gpu, to, chan: tb.chan }
    }

    fn recv_link(&self, at: TbRef) -> Link {
        let tb = self.tb(at);
        let from = tb.recv.expect("validated: receiving steps have a recv peer");
        Link { from, to: at.gpu, chan: tb.chan }
    }

    fn fifo_len(&self, link: Link) -> usize {
        self.fifos.get(&link).map_or(0, VecDeque::len)
    }

    /// None when the head of the unfinished tb `at` can run now.
    fn blocker(&self, at: TbRef, step: &Step) -> Option<Blocked> {
        if let Some(dep) = step.dep
            && self.next_step[at.gpu][dep.tb] <= dep.step
        {
            return Some(Blocked::Dependency(dep));
        }
        if step.op.receives() {
            let link = self.recv_link(at);
            if self.fifo_len(link) == 0 {
                return Some(Blocked::FifoEmpty(link));
            }
        }
        if step.op.sends() {
            let link = self.send_link(at);
            if self.fifo_len(link) >= self.mode.fifo_capacity {
                return Some(Blocked::FifoFull(link));
            }
        }
        None
    }

    fn run_to_completion(&mut self) -> Result<(), String> {
        let order: Vec<TbRef> = self
            .algo
            .gpus
            .iter()
            .enumerate()
            .flat_map(|(gpu, g)| (0..g.tbs.len()).map(move |tb| TbRef { gpu, tb }))
            .collect();
        // Index of a gpu's first tb in `order`, and each connection's two ends, so that after a
        // step only the tbs it can have unblocked are looked at again: the tbs of its own gpu
        // (dependencies stay within a gpu) and the other end of a FIFO it pushed or popped.
        let mut base = Vec::with_capacity(self.algo.gpus.len());
        let mut at = 0;
        for g in &self.algo.gpus {
            base.push(at);
            at += g.tbs.len();
        }
        let mut receiver: BTreeMap<Link, usize> = BTreeMap::new();
        let mut sender: BTreeMap<Link, usize> = BTreeMap::new();
        for (i, &tb) in order.iter().enumerate() {
            let t = self.tb(tb);
            if t.recv.is_some() {
                receiver.insert(self.recv_link(tb), i);
            }
            if t.send.is_some() {
                sender.insert(self.send_link(tb), i);
            }
        }
        let ready = |m: &Self, i: usize| m.head(order[i]).is_some_and(|step| m.blocker(order[i], step).is_none());
        let mut runnable: BTreeSet<usize> = (0..order.len()).filter(|&i| ready(self, i)).collect();
        let mut picker = Picker::new(self.mode.policy);
        loop {
            if runnable.is_empty() {
                let unfinished: Vec<usize> = (0..order.len()).filter(|&i| self.head(order[i]).is_some()).collect();
                if unfinished.is_empty() {
                    break;
                }
                return Err(self.deadlock_report(&order, &unfinished));
            }
            let chosen = picker.choose(&runnable, |i| self.head(order[i]).expect("runnable").op);
            let tb = order[chosen];
            let op = self.head(tb).expect("runnable").op;
            let mut touched: Vec<usize> = (base[tb.gpu]..base[tb.gpu] + self.algo.gpus[tb.gpu].tbs.len()).collect();
            if op.sends() {
                touched.extend(receiver.get(&self.send_link(tb)).copied());
            }
            if op.receives() {
                touched.extend(sender.get(&self.recv_link(tb)).copied());
            }
            self.execute(tb)?;
            for i in touched {
                if ready(self, i) {
                    runnable.insert(i);
                } else {
                    runnable.remove(&i);
                }
            }
        }
        self.check_fifos_drained()
    }

    fn deadlock_report(&self, order: &[TbRef], unfinished: &[usize]) -> String {
        const SHOWN: usize = 6;
        let mut heads = Vec::new();
        for &i in unfinished.iter().take(SHOWN) {
            let at = order[i];
            let step = self.head(at).expect("unfinished");
            let why = match self.blocker(at, step) {
                Some(Blocked::Dependency(dep)) => format!(
                    "waiting for dependency tb {} step {} (that tb has executed {} steps)",
                    dep.tb, dep.step, self.next_step[at.gpu][dep.tb]
                ),
                Some(Blocked::FifoFull(link)) => format!(
                    "FIFO full: {link} holds {} call(s), capacity {}",
                    self.fifo_len(link),
                    self.mode.fifo_capacity
                ),
                Some(Blocked::FifoEmpty(link)) => format!("FIFO empty: nothing to receive on {link}"),
                None => "runnable".to_string(),
            };
            heads.push(format!(
                "gpu {} tb {} step {} ({}, call {} of {}): {why}",
                at.gpu,
                at.tb,
                self.next_step[at.gpu][at.tb],
                step.op.name(),
                self.next_call[at.gpu][at.tb],
                self.calls(step)
            ));
        }
        let more = if unfinished.len() > SHOWN { "; ..." } else { "" };
        format!(
            "deadlock: {} thread block(s) unfinished and none can run; {}{more}",
            unfinished.len(),
            heads.join("; ")
        )
    }

    /// The calls a step is cut into: ⌈cnt / m⌉ (a nop is one call that moves nothing).
    fn calls(&self, step: &Step) -> usize {
        step.cnt.div_ceil(self.mode.chunks_per_call).max(1)
    }

    /// Runs the next call of the head step of `at`: the chunks [c·m, min(cnt, (c+1)·m)) of it.
    fn execute(&mut self, at: TbRef) -> Result<(), String> {
        let index = self.next_step[at.gpu][at.tb];
        let call = self.next_call[at.gpu][at.tb];
        let step = self.head(at).expect("only unfinished tbs are executed");
        let calls = self.calls(step);
        let here = format!("gpu {} tb {} step {index} ({}) call {call} of {calls}", at.gpu, at.tb, step.op.name());
        let m = self.mode.chunks_per_call;
        let first = call * m;
        let cnt = step.cnt.saturating_sub(first).min(m);
        let part = |slice: Slice| Slice { buffer: slice.buffer, offset: slice.offset + first };
        let src = || part(step.src.expect("validated: this op has a source"));
        let dst = || part(step.dst.expect("validated: this op has a destination"));
        // Every source is read (and every message popped) before anything is written, so an
        // overlapping cpy reads first.
        let result: Option<Vec<Value>> = match step.op {
            Op::Nop => None,
            Op::Send | Op::Copy => Some(self.read(at.gpu, src(), cnt, &here)?),
            Op::Recv | Op::RecvCopySend => Some(self.pop(at, cnt, &here)?),
            Op::RecvReduceCopy | Op::RecvReduceSend | Op::RecvReduceCopySend => {
                let received = self.pop(at, cnt, &here)?;
                let local = self.read(at.gpu, src(), cnt, &here)?;
                Some(combine(&local, &received, &here)?)
            }
            Op::Reduce => {
                let source = self.read(at.gpu, src(), cnt, &here)?;
                let old = self.read(at.gpu, dst(), cnt, &here)?;
                Some(combine(&old, &source, &here)?)
            }
        };
        if let Some(values) = result {
            if step.op.writes_dst() {
                self.write(at.gpu, dst(), values.clone());
            }
            if step.op.sends() {
                let link = self.send_link(at);
                let cells = values.iter().map(|v| contributors(v.iter().map(|&(r, _)| r))).collect();
                self.sent.push(Sent { from: at.gpu, to: link.to, block: at.tb, cells });
                self.fifos.entry(link).or_default().push_back(values);
            }
        }
        if call + 1 == calls {
            self.next_step[at.gpu][at.tb] += 1;
            self.next_call[at.gpu][at.tb] = 0;
        } else {
            self.next_call[at.gpu][at.tb] += 1;
        }
        Ok(())
    }

    fn read(&self, gpu: usize, slice: Slice, cnt: usize, here: &str) -> Result<Vec<Value>, String> {
        let layout = &self.layouts[gpu];
        (0..cnt)
            .map(|i| {
                let index = slice.offset + i;
                self.memory[gpu][layout.cell(slice.buffer, index)]
                    .clone()
                    .ok_or_else(|| format!("{here}: reads an empty cell {}[{index}]", slice.buffer.letter()))
            })
            .collect()
    }

    fn write(&mut self, gpu: usize, slice: Slice, values: Vec<Value>) {
        let layout = &self.layouts[gpu];
        for (i, value) in values.into_iter().enumerate() {
            self.memory[gpu][layout.cell(slice.buffer, slice.offset + i)] = Some(value);
        }
    }

    fn pop(&mut self, at: TbRef, cnt: usize, here: &str) -> Result<Vec<Value>, String> {
        let link = self.recv_link(at);
        let message = self
            .fifos
            .get_mut(&link)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| format!("{here}: internal error: ran with an empty FIFO {link}"))?;
        if message.len() != cnt {
            return Err(format!(
                "{here}: mismatched counts: received a call of {} chunk(s) on {link}, but this \
                 call of the step moves {cnt}",
                message.len()
            ));
        }
        Ok(message)
    }

    fn check_fifos_drained(&self) -> Result<(), String> {
        let leftovers: Vec<String> = self
            .fifos
            .iter()
            .filter(|(_, queue)| !queue.is_empty())
            .map(|(link, queue)| format!("{link} holds {} message(s)", queue.len()))
            .collect();
        if leftovers.is_empty() {
            Ok(())
        } else {
            Err(format!("unreceived messages at the end: {}", leftovers.join("; ")))
        }
    }

    fn into_replayed(self) -> Replayed {
        let output = self
            .algo
            .gpus
            .iter()
            .enumerate()
            .map(|(rank, gpu)| {
                let layout = &self.layouts[rank];
                (0..gpu.sizes.output).map(|j| self.memory[rank][layout.cell(Buffer::Output, j)].clone()).collect()
            })
            .collect();
        Replayed {
            coll: self.algo.coll.clone(),
            ngpus: self.algo.ngpus,
            nchunksperloop: self.algo.nchunksperloop,
            inplace: self.mode.inplace,
            output,
            sent: self.sent,
        }
    }
}

/// Elementwise ⊕ of two equally long runs of cells.
fn combine(left: &[Value], right: &[Value], here: &str) -> Result<Vec<Value>, String> {
    left.iter()
        .zip(right)
        .enumerate()
        .map(|(i, (a, b))| {
            union(a, b).map_err(|shared| {
                format!(
                    "{here}: double count in chunk {i} of the step: {} ⊕ {} both contain {shared:?}",
                    show(a),
                    show(b)
                )
            })
        })
        .collect()
}

/// The sorted union of two sorted sets; Err with an element they share.
fn union(a: &Value, b: &Value) -> Result<Value, (usize, usize)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => return Err(a[i]),
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    Ok(out)
}

/// Picks one runnable head per the policy. `runnable` holds indices into (gpu, tb) order,
/// ascending.
struct Picker {
    policy: Policy,
    last: Option<usize>,
    rng: SplitMix64,
}

impl Picker {
    fn new(policy: Policy) -> Picker {
        let seed = match policy {
            Policy::Random(seed) => seed,
            _ => 0,
        };
        Picker { policy, last: None, rng: SplitMix64(seed) }
    }

    fn choose(&mut self, runnable: &BTreeSet<usize>, op_of: impl Fn(usize) -> Op) -> usize {
        let first = *runnable.first().expect("something is runnable");
        let chosen = match self.policy {
            Policy::RoundRobin => match self.last {
                Some(last) => runnable.range(last + 1..).next().copied().unwrap_or(first),
                None => first,
            },
            Policy::Reverse => *runnable.last().expect("something is runnable"),
            Policy::WritesFirst => runnable.iter().copied().find(|&i| op_of(i).writes_dst()).unwrap_or(first),
            Policy::SendsFirst => runnable.iter().copied().find(|&i| op_of(i).is_pure_send()).unwrap_or(first),
            Policy::Random(_) => {
                let n = (self.rng.next() % runnable.len() as u64) as usize;
                *runnable.iter().nth(n).expect("in range")
            }
        };
        self.last = Some(chosen);
        chosen
    }
}

/// A tiny, well-known generator (splitmix64): reproducible and good enough to shuffle
/// interleavings.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

// ---------------------------------------------------------------------------------------------
// Postcondition helpers
// ---------------------------------------------------------------------------------------------

fn expect_cell(r: &Replayed, context: &str, rank: usize, index: usize, expected: &Value) -> Result<(), String> {
    let cells = &r.output[rank];
    let Some(actual) = cells.get(index) else {
        return Err(format!(
            "{context}: rank {rank} o[{index}] does not exist (o_chunks = {}), expected {}",
            cells.len(),
            show(expected)
        ));
    };
    if actual.as_ref() != Some(expected) {
        return Err(format!(
            "{context}: rank {rank} o[{index}]: expected {}, got {}",
            show(expected),
            show_cell(actual.as_ref())
        ));
    }
    Ok(())
}

/// {(r, index) : r in 0..p}, sorted.
fn from_every_rank(p: usize, index: usize) -> Value {
    (0..p).map(|rank| (rank, index)).collect()
}

fn chunks_per_rank(context: &str, n: usize, p: usize) -> Result<usize, String> {
    if !n.is_multiple_of(p) {
        return Err(format!("{context}: nchunksperloop = {n} is not a multiple of ngpus = {p}"));
    }
    Ok(n / p)
}

fn required_root(context: &str, root: Option<usize>, p: usize) -> Result<usize, String> {
    match root {
        None => Err(format!("{context}: a root is required")),
        Some(root) if root >= p => Err(format!("{context}: root {root} is not below ngpus = {p}")),
        Some(root) => Ok(root),
    }
}

/// A value for messages, truncated: long sets make unreadable errors.
fn show(value: &Value) -> String {
    const LIMIT: usize = 6;
    let shown: Vec<String> = value.iter().take(LIMIT).map(|(rank, index)| format!("({rank},{index})")).collect();
    let more = if value.len() > LIMIT { format!(", ... {} more", value.len() - LIMIT) } else { String::new() };
    format!("{{{}{more}}}", shown.join(", "))
}

fn show_cell(cell: Option<&Value>) -> String {
    match cell {
        Some(value) => show(value),
        None => "empty (never written)".to_string(),
    }
}

fn describe_mode(mode: Mode) -> String {
    let placement = if mode.inplace { "in place" } else { "out of place" };
    format!(
        "{placement}, policy {:?}, fifo capacity {} calls, {} chunk(s) per call, max_steps {}",
        mode.policy, mode.fifo_capacity, mode.chunks_per_call, mode.max_steps
    )
}

// ---------------------------------------------------------------------------------------------
// Tests of the interpreter itself
// ---------------------------------------------------------------------------------------------

fn mode(inplace: bool, policy: Policy, fifo_capacity: usize) -> Mode {
    Mode { inplace, policy, fifo_capacity, chunks_per_call: 71, max_steps: 64, max_tbs: 1024 }
}

fn out_of_place() -> Mode {
    mode(false, Policy::RoundRobin, 2)
}

#[track_caller]
fn assert_err_contains<T: fmt::Debug>(result: Result<T, String>, needle: &str) {
    match result {
        Ok(value) => panic!("expected an error containing {needle:?}, got Ok({value:?})"),
        Err(e) => assert!(e.contains(needle), "error {e:?} does not contain {needle:?}"),
    }
}

/// Each gpu sends its whole input to the peer (tb 0) and, in tb 1, receives the peer's input
/// into scratch, copies its own input to the output (needed out of place) and reduces the
/// scratch into it. In place the output *is* the input that tb 0 sends, so the reduction must
/// wait for the send: the `depid="0" deps="0"` on the re steps.
const PAIRWISE_ALLREDUCE: &str = r#"<algo name="pairwise" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1" outofplace="1" minBytes="0" maxBytes="1048576">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="2">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="-1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="re" srcbuf="s" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="0" deps="0" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="2">
    <tb id="0" send="0" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="-1" recv="0" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="re" srcbuf="s" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="0" deps="0" hasdep="0"/>
    </tb>
  </gpu>
</algo>
"#;

/// Reduce-scatter then all-gather in one tb per gpu: gpu g reduces chunk g with rrcs and
/// sends it back; the other chunk is received finished.
const RRCS_ALLREDUCE: &str = r#"<algo name="rrcs" proto="LL" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrcs" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrcs" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#;

/// Each gpu sends its input chunk, receives the peer's into the peer's slot, and copies its own
/// input into its own slot (a no-op in place, where i[0] at rank r is o[r]).
const ALLGATHER_2: &str = r#"<algo name="ag" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="1" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#;

/// A one-gpu shell with roomy buffers (80 chunks each, so bounds never interfere) around the
/// given `<tb>` elements, for the structural tests.
fn single_gpu(tbs: &str) -> String {
    format!(
        r#"<algo name="t" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="1" coll="allreduce" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="80" o_chunks="80" s_chunks="80">
{tbs}
  </gpu>
</algo>"#
    )
}

/// A tb of `nsteps` copies i[0] -> o[0].
fn copy_chain(nsteps: usize) -> String {
    let steps: String = (0..nsteps)
        .map(|s| {
            format!(
                r#"      <step s="{s}" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>"#
            ) + "\n"
        })
        .collect();
    single_gpu(&format!("    <tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\">\n{steps}    </tb>"))
}

#[test]
fn pairwise_allreduce_is_correct_in_every_mode() {
    replay_all(PAIRWISE_ALLREDUCE, None, Executor::Current).unwrap();
    // And the values are really the sums, not just accepted by a lax check.
    let replayed = replay(PAIRWISE_ALLREDUCE, mode(true, Policy::WritesFirst, 2)).unwrap();
    assert_eq!(replayed.output[1][0], Some(vec![(0, 0), (1, 0)]));
    assert_eq!(replayed.output[0][1], Some(vec![(0, 1), (1, 1)]));
}

#[test]
fn rrcs_allreduce_is_correct_in_every_mode() {
    replay_all(RRCS_ALLREDUCE, None, Executor::Current).unwrap();
}

#[test]
fn removing_the_write_after_read_dependency_breaks_in_place() {
    let broken = PAIRWISE_ALLREDUCE.replace(r#"depid="0" deps="0""#, r#"depid="-1" deps="-1""#);
    assert_ne!(broken, PAIRWISE_ALLREDUCE, "the dependency to remove was not found");
    // Out of place the output does not alias what tb 0 sends, so nothing can go wrong.
    let out = replay(&broken, mode(false, Policy::WritesFirst, 2)).unwrap();
    check(&out, None).unwrap();
    // In place, WritesFirst lets gpu 1 reduce into its input before tb 0 sends it, and gpu 0
    // then adds its own contribution a second time.
    let in_place = replay(&broken, mode(true, Policy::WritesFirst, 2));
    assert!(in_place.and_then(|replayed| check(&replayed, None)).is_err(), "the race was not exposed");
    assert!(replay_all(&broken, None, Executor::Current).is_err());
}

#[test]
fn sending_before_receiving_deadlocks_when_the_fifo_is_too_small() {
    let one_gpu = |id: usize, peer: usize| {
        let mut steps = String::new();
        for j in 0..3 {
            steps += &format!(
                r#"      <step s="{j}" type="s" srcbuf="i" srcoff="{j}" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>"#
            );
            steps += "\n";
        }
        for j in 0..3 {
            let s = j + 3;
            steps += &format!(
                r#"      <step s="{s}" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="{j}" cnt="1" depid="-1" deps="-1" hasdep="0"/>"#
            );
            steps += "\n";
        }
        format!(
            "  <gpu id=\"{id}\" i_chunks=\"3\" o_chunks=\"3\" s_chunks=\"0\">\n    <tb id=\"0\" send=\"{peer}\" recv=\"{peer}\" chan=\"0\">\n{steps}    </tb>\n  </gpu>\n"
        )
    };
    let xml = format!(
        "<algo name=\"swap\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"3\" ngpus=\"2\" coll=\"allreduce\" inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\">\n{}{}</algo>",
        one_gpu(0, 1),
        one_gpu(1, 0)
    );
    for policy in POLICIES {
        assert_err_contains(replay(&xml, mode(false, policy, 2)), "deadlock");
        let replayed = replay(&xml, mode(false, policy, 3)).unwrap();
        assert_eq!(replayed.output[0][2], Some(vec![(1, 2)]));
    }
}

#[test]
fn reducing_a_contribution_twice_is_a_double_count() {
    let xml = |rrc_src: &str| {
        format!(
            r#"<algo name="dc" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="2" coll="allreduce" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="1" s_chunks="1">
    <tb id="0" send="-1" recv="0" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrc" srcbuf="{rrc_src}" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#
        )
    };
    // s[0] already holds gpu 0's i[0], which arrives again.
    assert_err_contains(replay(&xml("s"), out_of_place()), "double count");
    // Reducing with gpu 1's own input instead is fine.
    let replayed = replay(&xml("i"), out_of_place()).unwrap();
    assert_eq!(replayed.output[1][0], Some(vec![(0, 0), (1, 0)]));
}

#[test]
fn an_xml_declaration_is_rejected() {
    replay(PAIRWISE_ALLREDUCE, out_of_place()).unwrap();
    replay(&format!("\n  {PAIRWISE_ALLREDUCE}"), out_of_place()).unwrap();
    let declared = format!("<?xml version=\"1.0\"?>\n{PAIRWISE_ALLREDUCE}");
    assert_err_contains(replay(&declared, out_of_place()), "<?xml");
}

#[test]
fn steps_must_be_numbered_consecutively() {
    let tb = |second: usize| {
        format!(
            r#"    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="{second}" type="cpy" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>"#
        )
    };
    replay(&single_gpu(&tb(1)), out_of_place()).unwrap();
    assert_err_contains(replay(&single_gpu(&tb(2)), out_of_place()), "numbered");
}

#[test]
fn cnt_is_limited_to_71() {
    let tb = |cnt: usize| {
        format!(
            r#"    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="{cnt}" depid="-1" deps="-1" hasdep="0"/>
    </tb>"#
        )
    };
    replay(&single_gpu(&tb(71)), out_of_place()).unwrap();
    assert_err_contains(replay(&single_gpu(&tb(72)), out_of_place()), "cnt = 72");
    assert_err_contains(replay(&single_gpu(&tb(0)), out_of_place()), "cnt = 0");
}

#[test]
fn ranges_must_be_in_bounds() {
    let tb = |dstoff: i64| {
        format!(
            r#"    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="{dstoff}" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>"#
        )
    };
    replay(&single_gpu(&tb(78)), out_of_place()).unwrap();
    assert_err_contains(replay(&single_gpu(&tb(79)), out_of_place()), "out of bounds");
    assert_err_contains(replay(&single_gpu(&tb(-1)), out_of_place()), "out of bounds");
}

#[test]
fn step_count_is_limited_by_max_steps() {
    let legacy = Mode { max_steps: 256, ..out_of_place() };
    replay(&copy_chain(64), out_of_place()).unwrap();
    assert_err_contains(replay(&copy_chain(65), out_of_place()), "max_steps");
    replay(&copy_chain(65), legacy).unwrap();
}

#[test]
fn a_dependency_must_target_a_hasdep_step() {
    let tbs = |hasdep: u8| {
        format!(
            r#"    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="{hasdep}"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="s" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="0" deps="0" hasdep="0"/>
    </tb>"#
        )
    };
    let replayed = replay(&single_gpu(&tbs(1)), mode(false, Policy::Reverse, 2)).unwrap();
    assert_eq!(replayed.output[0][0], Some(vec![(0, 0)]));
    assert_err_contains(replay(&single_gpu(&tbs(0)), out_of_place()), "hasdep=0");
}

#[test]
fn nops_need_dependencies_and_so_does_the_step_after_them() {
    let tbs = |nop_dep: &str, next_dep: &str| {
        format!(
            r#"    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="nop" srcbuf="-1" srcoff="-1" dstbuf="-1" dstoff="-1" cnt="0" {nop_dep} hasdep="0"/>
      <step s="1" type="cpy" srcbuf="s" srcoff="0" dstbuf="o" dstoff="0" cnt="1" {next_dep} hasdep="0"/>
    </tb>"#
        )
    };
    let on_tb0 = r#"depid="0" deps="0""#;
    let none = r#"depid="-1" deps="-1""#;
    replay(&single_gpu(&tbs(on_tb0, on_tb0)), mode(false, Policy::Reverse, 2)).unwrap();
    assert_err_contains(replay(&single_gpu(&tbs(none, on_tb0)), out_of_place()), "nop");
    assert_err_contains(replay(&single_gpu(&tbs(on_tb0, none)), out_of_place()), "follows a nop");
}

#[test]
fn consecutive_reductions_the_executor_would_fuse_are_rejected() {
    let tbs = |second_dep: &str| {
        format!(
            r#"    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="cpy" srcbuf="i" srcoff="1" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="re" srcbuf="s" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="3" type="re" srcbuf="s" srcoff="1" dstbuf="o" dstoff="0" cnt="1" {second_dep} hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="2" dstbuf="s" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"/>
    </tb>"#
        )
    };
    let replayed = replay(&single_gpu(&tbs(r#"depid="1" deps="0""#)), out_of_place()).unwrap();
    assert_eq!(replayed.output[0][0], Some(vec![(0, 0), (0, 1), (0, 2)]));
    assert_err_contains(replay(&single_gpu(&tbs(r#"depid="-1" deps="-1""#)), out_of_place()), "fuse");
}

#[test]
fn ids_peers_and_connections_are_validated() {
    // Sanity: the base document is accepted, so each rejection below is due to its edit.
    replay(PAIRWISE_ALLREDUCE, out_of_place()).unwrap();
    let edits = [
        (r#"<gpu id="1""#, r#"<gpu id="2""#, "id out of range"),
        (r#"<tb id="1" send="-1" recv="1""#, r#"<tb id="0" send="-1" recv="1""#, "appears twice"),
        (r#"<tb id="1" send="-1" recv="1""#, r#"<tb id="2" send="-1" recv="1""#, "contiguous"),
        (r#"<tb id="0" send="1""#, r#"<tb id="0" send="0""#, "own gpu"),
        (r#"<tb id="0" send="1""#, r#"<tb id="0" send="2""#, "gpu id in 0..2"),
        (r#"recv="1" chan="0""#, r#"recv="1" chan="1""#, "nchannels"),
        (r#"proto="Simple""#, r#"proto="LL64""#, "proto"),
        (r#"maxBytes="1048576""#, r#"maxBytes="-1""#, "minBytes"),
        (r#" coll="allreduce""#, "", "coll"),
    ];
    for (from, to, needle) in edits {
        let edited = PAIRWISE_ALLREDUCE.replacen(from, to, 1);
        assert_ne!(edited, PAIRWISE_ALLREDUCE, "{from} not found");
        assert_err_contains(replay(&edited, out_of_place()), needle);
    }
    // Two tbs of gpu 0 receiving from gpu 1 on channel 0.
    let twice = PAIRWISE_ALLREDUCE.replacen(r#"<tb id="0" send="1" recv="-1""#, r#"<tb id="0" send="1" recv="1""#, 1);
    assert_err_contains(replay(&twice, out_of_place()), "as does tb");
}

#[test]
fn runtime_errors_are_reported() {
    // Reading a scratch cell nothing wrote.
    let empty = single_gpu(
        r#"    <tb id="0" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="s" srcoff="3" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>"#,
    );
    assert_err_contains(replay(&empty, out_of_place()), "empty cell s[3]");

    // A message nobody receives, and a receive of the wrong size.
    let pair = |recv_steps: &str| {
        format!(
            r#"<algo name="p" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="-1" recv="0" chan="0">
{recv_steps}
    </tb>
  </gpu>
</algo>"#
        )
    };
    let receive = |cnt: usize| {
        format!(
            r#"      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="{cnt}" depid="-1" deps="-1" hasdep="0"/>"#
        )
    };
    replay(&pair(&receive(2)), out_of_place()).unwrap();
    assert_err_contains(replay(&pair(&receive(1)), out_of_place()), "mismatched counts");
    assert_err_contains(replay(&pair(""), out_of_place()), "unreceived");
}

#[test]
fn allgather_aliases_input_into_its_rank_block_in_place() {
    replay_all(ALLGATHER_2, None, Executor::Current).unwrap();
    let replayed = replay(ALLGATHER_2, mode(true, Policy::RoundRobin, 2)).unwrap();
    assert_eq!(replayed.output[1], vec![Some(vec![(0, 0)]), Some(vec![(1, 0)])]);

    // Without the local copies only the in-place aliasing puts each rank's own chunk in place.
    let no_copy: String =
        ALLGATHER_2.lines().filter(|line| !line.contains(r#"type="cpy""#)).collect::<Vec<&str>>().join("\n");
    assert_ne!(no_copy.lines().count(), ALLGATHER_2.lines().count());
    let in_place_only = no_copy.replace(r#"outofplace="1""#, r#"outofplace="0""#);
    replay_all(&in_place_only, None, Executor::Current).unwrap();
    let both = replay_all(&no_copy, None, Executor::Current).unwrap_err();
    assert!(both.contains("out of place"), "{both}");
}

#[test]
fn reducescatter_aliases_output_into_its_rank_block_in_place() {
    // gpu g sends the peer's block and reduces its own block into o[0] (= i[g] in place).
    let xml = r#"<algo name="rs" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="reducescatter" inplace="1" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="1" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrc" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="1" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrc" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#;
    replay_all(xml, None, Executor::Current).unwrap();
    // Reducing gpu 1's block from the wrong input chunk is caught.
    let wrong = xml.replacen(r#"type="rrc" srcbuf="i" srcoff="1""#, r#"type="rrc" srcbuf="i" srcoff="0""#, 1);
    assert_ne!(wrong, xml);
    assert!(replay_all(&wrong, None, Executor::Current).is_err());
}

#[test]
fn broadcast_through_a_relay_with_rcs() {
    let xml = r#"<algo name="bc" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="3" coll="broadcast" inplace="1" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="2" recv="0" chan="0">
      <step s="0" type="rcs" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="2" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="-1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#;
    replay_all(xml, Some(0), Executor::Current).unwrap();
    // The postcondition depends on the root: rank 1 does not hold root 1's data everywhere.
    assert!(replay_all(xml, Some(1), Executor::Current).is_err());
    assert!(replay_all(xml, None, Executor::Current).is_err());
}

#[test]
fn check_reports_wrong_cells_and_unknown_collectives() {
    let gathered = |first: Value| Replayed {
        coll: "allgather".into(),
        ngpus: 2,
        nchunksperloop: 2,
        inplace: false,
        output: vec![vec![Some(first), Some(vec![(1, 0)])], vec![Some(vec![(0, 0)]), Some(vec![(1, 0)])]],
        sent: Vec::new(),
    };
    check(&gathered(vec![(0, 0)]), None).unwrap();
    assert_err_contains(check(&gathered(vec![(1, 0)]), None), "rank 0 o[0]");
    let mut unknown = gathered(vec![(0, 0)]);
    unknown.coll = "scan".into();
    assert_err_contains(check(&unknown, None), "unsupported collective");
}

#[test]
fn a_replay_needs_a_supported_placement() {
    let neither = PAIRWISE_ALLREDUCE.replace(r#"inplace="1" outofplace="1""#, r#"inplace="0" outofplace="0""#);
    assert_ne!(neither, PAIRWISE_ALLREDUCE);
    assert_err_contains(replay_all(&neither, None, Executor::Current), "no mode");
    let out_only = PAIRWISE_ALLREDUCE.replace(r#"inplace="1""#, r#"inplace="0""#);
    assert_err_contains(replay(&out_only, mode(true, Policy::RoundRobin, 2)), "in place");
}
