//! MSCCL XML export: turns a valid schedule into the algorithm file that the MSCCL executor
//! (NCCL) and RCCL's built-in MSCCL load, respecting the executor's limits and its bounded
//! per-connection buffers.
//!
//! How a schedule becomes a program:
//! - Rank r is the r-th live NPU of the collective's group. Each chunk slot of the schedule
//!   lives in one buffer cell at a time: a precondition chunk starts in its input cell, a
//!   postcondition chunk ends in its output cell, anything else (the other ranks' partials of
//!   a reduce-scatter, scratch slots, chunks in flight through an intermediate GPU) lives in
//!   the scratch buffer `s`.
//! - Every message is a send step in a thread block that only sends to one peer on one channel
//!   and a receive step (`r`, or `rrc` for a reduce) in a block that only receives from that
//!   peer on that channel, so a connection's sends and receives pair up first-in first-out.
//!   A path through switches is one message; a path through other NPUs is received into
//!   their scratch and sent on. Local moves of the schedule are `cpy` and `re` steps.
//! - Steps are generated step by step of the schedule: a step's reads (its sends) before its
//!   writes (its receives), so no value is overwritten before it is read. Dependencies are
//!   read-after-write, write-after-read and write-after-write per buffer cell, with input
//!   and output cells that alias in place treated as one cell: the program is then correct
//!   both in place and out of place.
//! - Deadlock freedom with bounded buffers, at every message size. The executor cuts a step
//!   of `cnt` chunks into ⌈cnt/m⌉ calls, m falling to 1 for large messages, and a connection
//!   holds `FIFO_CAPACITY` calls. Every thread block runs its steps in the order they were
//!   generated and every dependency points to an earlier generated step. A send *fits* when
//!   its channel's calls in flight (at m = 1, in generation order) plus its own stay within
//!   the capacity and no earlier send on the channel is deferred; otherwise it is *deferred*:
//!   it completes only together with its receive. Within one hop of a schedule step, a
//!   receive never waits for a deferred send whose receive comes later, nor for a local step
//!   that does (such a receive lands in scratch, and a local step moves it once the send is
//!   done). Then this order is an execution: steps in generation order, a deferred send run
//!   together with its receive, a local step that waits for a deferred send at the end of its
//!   hop. At m > 1 every step is fewer calls, so every send that fits at m = 1 fits then too.
use crate::collective::{Collective, CollectiveKind};
use crate::schedule::{Op, Schedule};
use quick_xml::Writer;
use quick_xml::events::BytesStart;
use std::collections::HashMap;

/// Calls a connection holds in flight: NCCL's 8 slots, 4 per call in the Simple protocol (its
/// chunk steps); LL and LL128 take 1 slot per call, so 2 is safe for all three.
pub const FIFO_CAPACITY: u32 = 2;
/// Thread ids a dependency can name: the executor stores `depid` in 8 signed bits.
pub const MAX_DEPID: usize = 127;
/// Chunks one step may move: the executor's `count` is below `MSCCL_MAX_COUNT` (72).
pub const MAX_COUNT: u32 = 71;
/// Channels (`MAXCHANNELS`).
pub const MAX_CHANNELS: u32 = 32;
/// Thread blocks per channel on one GPU (`MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL`).
pub const MAX_TBS_PER_CHANNEL: u32 = 32;
/// XML nodes the executor's reader keeps for one rank: the algo, every gpu, that rank's
/// thread blocks and steps (`MSCCL_MAX_NODES`).
pub const MAX_NODES_PER_RANK: usize = 4096;

/// Which executor reads the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MscclTarget {
    /// The MSCCL executor for NCCL: at most 64 steps per thread block.
    #[default]
    Current,
    /// The original MSCCL (NCCL 2.12 fork): 256 steps per thread block, 216 thread blocks,
    /// `reduce_scatter`.
    Legacy,
    /// RCCL's MSCCL: 64 steps per thread block and 64 thread blocks per GPU.
    Rccl,
}

impl MscclTarget {
    /// Steps per thread block (`MSCCL_MAX_NUM_STEPS`).
    pub fn max_steps(self) -> usize {
        match self {
            MscclTarget::Current | MscclTarget::Rccl => 64,
            MscclTarget::Legacy => 256,
        }
    }
    /// Thread blocks per GPU (`MSCCL_MAX_NUM_THREAD_BLOCKS`; RCCL's is 64).
    pub fn max_tbs(self) -> usize {
        match self {
            MscclTarget::Current => (MAX_CHANNELS * MAX_TBS_PER_CHANNEL) as usize,
            MscclTarget::Legacy => 216,
            MscclTarget::Rccl => 64,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MscclTarget::Current => "current",
            MscclTarget::Legacy => "legacy",
            MscclTarget::Rccl => "rccl",
        }
    }
}

/// NCCL's wire protocol for the algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MscclProtocol {
    #[default]
    Simple,
    #[serde(rename = "LL")]
    Ll,
    #[serde(rename = "LL128")]
    Ll128,
}

impl MscclProtocol {
    pub fn name(self) -> &'static str {
        match self {
            MscclProtocol::Simple => "Simple",
            MscclProtocol::Ll => "LL",
            MscclProtocol::Ll128 => "LL128",
        }
    }
}

/// How to write the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MscclOptions {
    pub target: MscclTarget,
    pub protocol: MscclProtocol,
    /// The algorithm's `name` (default: `ccsynth-<algorithm>`).
    pub name: Option<String>,
    /// The message sizes the executor picks this algorithm for, `minBytes ≤ size ≤ maxBytes`
    /// (default: every size). The file is correct at every size, so the range only steers
    /// the executor's choice among files.
    pub min_bytes: Option<u64>,
    pub max_bytes: Option<u64>,
}

/// Why a schedule cannot become MSCCL XML. Each names the limit it hits.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MscclError {
    #[error(
        "MSCCL has no collective for {kind} in the {target} executor: it runs allreduce, allgather, reducescatter, alltoall{extra}"
    )]
    UnsupportedCollective { kind: &'static str, target: &'static str, extra: &'static str },
    #[error(
        "transfer {transfer} uses NPU {npu}, which is not a rank of the collective's group: MSCCL runs on the communicator's ranks only"
    )]
    OutsideGroup { transfer: usize, npu: u32 },
    #[error(
        "GPU {src} to GPU {dst}: no channel has room for message {messages} (at most {MAX_CHANNELS} channels, {MAX_TBS_PER_CHANNEL} thread blocks per channel, {max_tbs} thread blocks per GPU and {max_steps} steps per thread block in the {target} executor)"
    )]
    NoChannel { src: u32, dst: u32, messages: u32, max_steps: usize, max_tbs: usize, target: &'static str },
    #[error(
        "thread block {tb} of GPU {gpu} needs {steps} steps; the {target} executor allows at most {max} per thread block"
    )]
    TooManySteps { gpu: u32, tb: u32, steps: usize, max: usize, target: &'static str },
    #[error(
        "GPU {gpu} needs {nodes} XML nodes (its thread blocks and steps); the executor's reader keeps at most {max} per rank"
    )]
    TooManyNodes { gpu: u32, nodes: usize, max: usize },
    #[error(
        "the schedule has {transfers} transfers, at least {} steps; the executor's reader keeps at most {max_steps} for {ranks} ranks",
        2 * transfers
    )]
    TooLarge { transfers: usize, ranks: usize, max_steps: usize },
    #[error("{ranks} ranks × {slots} chunk slots is more than the {max} (rank, slot) cells the MSCCL writer tracks")]
    TooManyCells { ranks: usize, slots: usize, max: usize },
    #[error("the collective does not build: {0}")]
    InvalidCollective(String),
    #[error("min_bytes {min} is above max_bytes {max}")]
    SizeRange { min: u64, max: u64 },
    #[error("max_bytes 0: the executor reads maxBytes = 0 as no upper limit; leave max_bytes out for that")]
    ZeroMaxBytes,
    #[error(
        "MSCCL cannot run a {kind} for its root: the executor picks an algorithm by collective, rank count, size and in place only, and the file has no root, so a file written for root {root} would run for every root"
    )]
    RootNotBound { kind: &'static str, root: u32 },
    #[error("GPU {gpu} has {tbs} thread blocks; the {target} executor allows at most {max} per GPU")]
    TooManyThreadBlocks { gpu: u32, tbs: usize, max: usize, target: &'static str },
    #[error(
        "GPU {gpu} has {waited} thread blocks that other blocks wait for; the executor stores a dependency's block id in 8 signed bits, so at most {} can be waited for",
        MAX_DEPID + 1
    )]
    DependencyIds { gpu: u32, waited: usize },
}

/// Writes `s` as MSCCL XML. Crate-private: `s` must be valid (it reads where every chunk is),
/// and `engine::export_msccl`, the door, validates it first.
pub(crate) fn to_xml(s: &Schedule, opts: &MscclOptions) -> Result<String, MscclError> {
    fits(s)?;
    let collective = Collective::build_unchecked(&s.collective, &s.topology)
        .map_err(|e| MscclError::InvalidCollective(e.to_string()))?;
    let mut layout = Layout::new(&collective, opts.target)?;
    layout.number_chunks(s);
    if opts.max_bytes == Some(0) {
        return Err(MscclError::ZeroMaxBytes);
    }
    if let (Some(min), Some(max)) = (opts.min_bytes, opts.max_bytes)
        && min > max
    {
        return Err(MscclError::SizeRange { min, max });
    }
    let mut b = Builder::new(s, &layout, opts.target);
    b.run()?;
    b.check_limits()?;
    Ok(b.write(s, opts))
}

/// A cheap first test, before the schedule is even validated: every message is at least a
/// send and a receive step, and the executor's reader keeps at most `MAX_NODES_PER_RANK`
/// nodes per rank.
pub fn fits(s: &Schedule) -> Result<(), MscclError> {
    let ranks = s.topology.npus().max(1);
    let max = ranks * MAX_NODES_PER_RANK;
    if s.transfers.len().saturating_mul(2) > max {
        return Err(MscclError::TooLarge { transfers: s.transfers.len(), ranks, max_steps: max });
    }
    // The writer tracks where every slot of every rank lives: bound that table (12 bytes a
    // cell) before building it.
    let cells = ranks.saturating_mul(s.slots());
    if cells > MAX_TRACKED_CELLS {
        return Err(MscclError::TooManyCells { ranks, slots: s.slots(), max: MAX_TRACKED_CELLS });
    }
    Ok(())
}

/// Most (rank, slot) pairs the writer tracks: 2^24, about 200 MB.
pub const MAX_TRACKED_CELLS: usize = 1 << 24;

/// Which cells a collective's chunks start and end in, per rank.
struct Layout {
    kind: CollectiveKind,
    coll: &'static str,
    p: usize,
    k: usize,
    /// NPU id → rank.
    rank_of: HashMap<u32, u32>,
    i_chunks: usize,
    o_chunks: usize,
    /// Chunk → the chunk whose cells it takes (see `number_chunks`).
    perm: Vec<u32>,
}

impl Layout {
    fn new(c: &Collective, target: MscclTarget) -> Result<Layout, MscclError> {
        let kind = c.spec.kind;
        let legacy = target == MscclTarget::Legacy;
        let coll = match kind {
            CollectiveKind::AllReduce => "allreduce",
            CollectiveKind::AllGather => "allgather",
            CollectiveKind::ReduceScatter if legacy => "reduce_scatter",
            CollectiveKind::ReduceScatter => "reducescatter",
            CollectiveKind::AllToAll => "alltoall",
            // The executor has both, but selects a file without regard to the root
            // (`mscclInternalSchedulerSelectAlgo`: collective, ranks, size, in place), so any root but the
            // file's would run the wrong program.
            CollectiveKind::Broadcast | CollectiveKind::Reduce if !legacy => {
                let root = c.spec.root.unwrap_or(0) as u32;
                return Err(MscclError::RootNotBound { kind: kind.name(), root });
            }
            _ => {
                return Err(MscclError::UnsupportedCollective {
                    kind: kind.name(),
                    target: target.name(),
                    extra: if legacy { "" } else { ", broadcast and reduce" },
                });
            }
        };
        let p = c.group.len();
        let k = c.spec.chunks() as usize;
        let rank_of = c.group.iter().enumerate().map(|(r, &v)| (v as u32, r as u32)).collect::<HashMap<_, _>>();
        let (i_chunks, o_chunks) = match kind {
            CollectiveKind::AllReduce => (p * k, p * k),
            CollectiveKind::AllGather => (k, p * k),
            CollectiveKind::ReduceScatter => (p * k, k),
            _ => (p * k, p * k),
        };
        let perm = (0..c.num_chunks as u32).collect();
        Ok(Layout { kind, coll, p, k, rank_of, i_chunks, o_chunks, perm })
    }

    /// Numbers the chunks so that chunks that travel together get consecutive cells, and a
    /// message carrying them becomes one step instead of many. The cells of a chunk are free
    /// within a block of chunks the collective treats alike (every chunk of all-reduce; one
    /// rank's k chunks of all-gather and reduce-scatter; one
    /// sender-receiver pair's k chunks of all-to-all): within it, chunks are ordered by the
    /// list of transfers that carry them, so chunks moved together from the start sort next to
    /// each other (a recursive halving's nested halves become ranges).
    fn number_chunks(&mut self, s: &Schedule) {
        let n = self.perm.len();
        let mut carried_by: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (pos, ti) in s.replay_order().iter().enumerate() {
            for &c in s.transfers.at(ti).chunks {
                if (c as usize) < n && carried_by[c as usize].last() != Some(&(pos as u32)) {
                    carried_by[c as usize].push(pos as u32);
                }
            }
        }
        let block = match self.kind {
            CollectiveKind::AllReduce => n,
            _ => self.k,
        }
        .max(1);
        for start in (0..n).step_by(block) {
            let end = (start + block).min(n);
            let mut order: Vec<u32> = (start as u32..end as u32).collect();
            order.sort_by(|&a, &b| carried_by[a as usize].cmp(&carried_by[b as usize]).then(a.cmp(&b)));
            for (i, c) in order.into_iter().enumerate() {
                self.perm[c as usize] = (start + i) as u32;
            }
        }
    }

    /// The input cell chunk `c` starts in at rank `r`, if it starts there.
    fn input(&self, r: usize, c: usize) -> Option<u32> {
        let c = self.perm[c] as usize;
        let (k, p) = (self.k, self.p);
        let off = match self.kind {
            CollectiveKind::AllReduce | CollectiveKind::ReduceScatter => Some(c),
            CollectiveKind::AllGather => (c / k == r).then_some(c % k),
            CollectiveKind::AllToAll => {
                let (from, to, x) = (c / k / p, c / k % p, c % k);
                (from == r).then_some(to * k + x)
            }
            _ => None,
        };
        off.map(|o| o as u32)
    }

    /// The output cell chunk `c` must end in at rank `r`, if it must end there.
    fn output(&self, r: usize, c: usize) -> Option<u32> {
        let c = self.perm[c] as usize;
        let (k, p) = (self.k, self.p);
        let off = match self.kind {
            CollectiveKind::AllReduce | CollectiveKind::AllGather => Some(c),
            CollectiveKind::ReduceScatter => (c / k == r).then_some(c % k),
            CollectiveKind::AllToAll => {
                let (from, to, x) = (c / k / p, c / k % p, c % k);
                (to == r).then_some(from * k + x)
            }
            _ => None,
        };
        off.map(|o| o as u32)
    }

    /// The one storage location of a cell at rank `r` when input and output are one buffer
    /// (in place): aliased input cells are named by their output cell.
    fn canonical(&self, r: usize, cell: Cell) -> Cell {
        if cell.buf != Buf::I {
            return cell;
        }
        let j = cell.off as usize;
        let k = self.k;
        let alias = match self.kind {
            CollectiveKind::AllGather => Some(r * k + j),
            CollectiveKind::ReduceScatter => (j / k == r).then_some(j % k),
            _ => Some(j),
        };
        match alias {
            Some(o) => Cell { buf: Buf::O, off: o as u32 },
            None => cell,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Buf {
    I,
    O,
    S,
}

impl Buf {
    fn letter(self) -> &'static str {
        match self {
            Buf::I => "i",
            Buf::O => "o",
            Buf::S => "s",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Cell {
    buf: Buf,
    off: u32,
}

impl Cell {
    fn s(off: u32) -> Cell {
        Cell { buf: Buf::S, off }
    }
    fn plus(self, i: u32) -> Cell {
        Cell { buf: self.buf, off: self.off + i }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepType {
    Send,
    Recv,
    RecvReduceCopy,
    Copy,
    Reduce,
}

impl StepType {
    fn code(self) -> &'static str {
        match self {
            StepType::Send => "s",
            StepType::Recv => "r",
            StepType::RecvReduceCopy => "rrc",
            StepType::Copy => "cpy",
            StepType::Reduce => "re",
        }
    }
}

/// A step of a thread block, as generated (dependencies are resolved to step indices when
/// the file is written, after the no-op steps that carry extra dependencies are counted).
struct OpStep {
    ty: StepType,
    src: Option<Cell>,
    dst: Option<Cell>,
    cnt: u32,
    /// At most one per other thread block: the latest step waited for.
    deps: Vec<OpId>,
    /// Another step waits for this one (the executor then signals its completion).
    has_dep: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct OpId {
    tb: u32,
    idx: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    Send(u32),
    Recv(u32),
    Local,
}

struct Tb {
    rank: u32,
    role: Role,
    chan: u32,
    ops: Vec<OpStep>,
    /// Steps including the no-ops that carry extra dependencies.
    steps: usize,
}

/// A send in flight on a channel, from its generation to its receive's.
struct Flight {
    send: OpId,
    /// Calls at one chunk per call (the executor's largest messages).
    calls: u32,
    /// It does not fit the channel's buffer, so it completes only with its receive.
    deferred: bool,
}

/// Hazard state of one storage cell.
#[derive(Default)]
struct CellState {
    last_write: Option<OpId>,
    readers: Vec<OpId>,
    /// The slot whose current value lives here.
    occupant: Option<u32>,
}

/// One contiguous piece of a transfer: `cnt` chunks read from `src` at the sender.
struct Run {
    src: Cell,
    cnt: u32,
    /// Where the last hop lands: a run of target cells and, for a reduce, the receiver's
    /// current partials.
    land: Land,
}

enum Land {
    /// Received straight into the slots' target cells (`r`, or `rrc` with `partial`).
    Direct { dst: Cell, partial: Option<Cell>, slots: Vec<u32> },
    /// Received into scratch, then copied or reduced into several slots with local steps
    /// (a transfer that writes one chunk into several slots).
    Fanout { entries: Vec<Vec<u32>> },
}

struct Builder<'a> {
    s: &'a Schedule,
    layout: &'a Layout,
    target: MscclTarget,
    tbs: Vec<Tb>,
    tb_of: HashMap<(u32, Role, u32), u32>,
    tbs_on_channel: HashMap<(u32, u32), u32>,
    tbs_per_rank: Vec<u32>,
    /// Per rank, the connection blocks it needs that are not open yet.
    unopened: Vec<u32>,
    opened: std::collections::HashSet<(u32, Role)>,
    local_tb: Vec<Option<u32>>,
    /// Per connection and channel, the sends generated but not yet received, oldest first.
    outstanding: HashMap<(u32, u32, u32), std::collections::VecDeque<Flight>>,
    /// Steps of the current hop that cannot complete at their place in generation order: the
    /// deferred sends whose receives are not generated yet, and the local steps that wait for
    /// one (or follow one in their block). No receive may wait for any of them.
    blocked: std::collections::HashSet<OpId>,
    /// Messages generated per connection (for error messages).
    messages: HashMap<(u32, u32), u32>,
    /// Per rank, per slot: the cell holding its current value.
    loc: Vec<Vec<Option<Cell>>>,
    cells: Vec<HashMap<Cell, CellState>>,
    scratch_next: Vec<u32>,
    scratch_home: HashMap<(u32, u32), u32>,
    /// Per (rank, slot): the last step of the schedule that reads it there.
    last_read: HashMap<(u32, u32), u32>,
    /// Per rank, the slots it must hold at the end.
    post: Vec<Vec<u32>>,
}

impl<'a> Builder<'a> {
    fn new(s: &'a Schedule, layout: &'a Layout, target: MscclTarget) -> Builder<'a> {
        let p = layout.p;
        let slots = s.slots();
        let mut loc = vec![vec![None; slots]; p];
        let mut cells: Vec<HashMap<Cell, CellState>> = (0..p).map(|_| HashMap::new()).collect();
        for &[v, c] in s.precondition.iter() {
            let r = layout.rank_of[&v] as usize;
            if let Some(off) = layout.input(r, c as usize) {
                let cell = Cell { buf: Buf::I, off };
                loc[r][c as usize] = Some(cell);
                cells[r].entry(layout.canonical(r, cell)).or_default().occupant = Some(c);
            }
        }
        let mut post = vec![Vec::new(); p];
        for &[v, c] in s.postcondition.iter() {
            post[layout.rank_of[&v] as usize].push(c);
        }
        let mut last_read = HashMap::new();
        for t in &s.transfers {
            for &c in t.chunks.iter() {
                let e = last_read.entry((t.src, c)).or_insert(t.step);
                *e = (*e).max(t.step);
            }
        }
        // Keyed by NPU id above; rekey by rank.
        let last_read =
            last_read.into_iter().filter_map(|((v, c), st)| layout.rank_of.get(&v).map(|&r| ((r, c), st))).collect();
        Builder {
            s,
            layout,
            target,
            tbs: Vec::new(),
            tb_of: HashMap::new(),
            tbs_on_channel: HashMap::new(),
            tbs_per_rank: vec![0; p],
            unopened: vec![0; p],
            opened: Default::default(),
            local_tb: vec![None; p],
            outstanding: HashMap::new(),
            blocked: std::collections::HashSet::new(),
            messages: HashMap::new(),
            loc,
            cells,
            scratch_next: vec![0; p],
            scratch_home: HashMap::new(),
            last_read,
            post,
        }
    }

    fn rank(&self, transfer: usize, v: u32) -> Result<u32, MscclError> {
        self.layout.rank_of.get(&v).copied().ok_or(MscclError::OutsideGroup { transfer, npu: v })
    }

    /// The ranks transfer `ti` visits, in order (switches are transparent to MSCCL: a GPU sends
    /// to a GPU); one rank for a local move.
    fn hop_ranks(&self, ti: usize) -> Result<Vec<u32>, MscclError> {
        let s = self.s;
        let t = s.transfers.at(ti);
        let mut h = Vec::new();
        if t.is_local() {
            h.push(self.rank(ti, t.src)?);
        } else if let Some(path) = &t.path {
            for &v in path.iter() {
                if s.topology.is_npu(v as usize) {
                    h.push(self.rank(ti, v)?);
                }
            }
        } else {
            h.push(self.rank(ti, t.src)?);
            h.push(self.rank(ti, t.dst)?);
        }
        Ok(h)
    }

    /// Per rank, the connection blocks (send to or receive from a peer) the schedule needs at
    /// least one of, so that opening more channels for one never leaves another without a
    /// block.
    fn count_connections(&mut self) -> Result<(), MscclError> {
        let mut roles: Vec<std::collections::HashSet<Role>> = vec![Default::default(); self.layout.p];
        for ti in 0..self.s.transfers.len() {
            for w in self.hop_ranks(ti)?.windows(2) {
                roles[w[0] as usize].insert(Role::Send(w[1]));
                roles[w[1] as usize].insert(Role::Recv(w[0]));
            }
        }
        self.unopened = roles.iter().map(|r| r.len() as u32).collect();
        Ok(())
    }

    /// Generates every step: the schedule's steps in order, then the copies that put each
    /// result in its output cell.
    fn run(&mut self) -> Result<(), MscclError> {
        self.count_connections()?;
        let order = self.s.replay_order();
        for steps in order.steps(&self.s.transfers) {
            let step = self.s.transfers.step(order.get(steps.start));
            let batch: Vec<usize> = steps.map(|k| order.get(k)).collect();
            self.schedule_step(step, &batch)?;
        }
        self.final_copies();
        Ok(())
    }

    /// One step of the schedule: snapshots for local moves whose source is overwritten in
    /// this step, then hop by hop every message's sends before its receives, then the local
    /// moves.
    fn schedule_step(&mut self, step: u32, batch: &[usize]) -> Result<(), MscclError> {
        let s = self.s;
        let hops: Vec<Vec<u32>> = batch.iter().map(|&ti| self.hop_ranks(ti)).collect::<Result<_, _>>()?;
        // Local moves read the slots as they were before this step: snapshot a source that
        // this step also writes.
        let mut written = std::collections::HashSet::new();
        for (bi, &ti) in batch.iter().enumerate() {
            let r = *hops[bi].last().expect("a transfer has a destination");
            for &w in s.transfers.at(ti).written() {
                written.insert((r, w));
            }
        }
        let mut local_src: HashMap<usize, Vec<Cell>> = HashMap::new();
        for (bi, &ti) in batch.iter().enumerate() {
            let t = s.transfers.at(ti);
            if !t.is_local() {
                continue;
            }
            let r = hops[bi][0];
            let mut srcs = Vec::with_capacity(t.chunks.len());
            for &c in t.chunks.iter() {
                let cell = self.loc[r as usize][c as usize].expect("a valid schedule reads held slots");
                if written.contains(&(r, c)) {
                    let tmp = self.alloc_scratch(r, 1);
                    self.local_op(r, StepType::Copy, Some(cell), tmp, 1);
                    srcs.push(tmp);
                } else {
                    srcs.push(cell);
                }
            }
            local_src.insert(bi, srcs);
        }
        // Plan each network transfer's runs in landing order (last hop, then position), so a
        // chain of reduces into one slot reads each partial where the previous one left it.
        let mut net: Vec<usize> = (0..batch.len()).filter(|&bi| !s.transfers.at(batch[bi]).is_local()).collect();
        net.sort_by_key(|&bi| (hops[bi].len(), bi));
        let mut runs: Vec<(usize, Vec<Run>)> = Vec::with_capacity(net.len());
        let mut pending: HashMap<(u32, u32), Cell> = HashMap::new();
        for &bi in &net {
            let planned = self.plan_runs(step, batch[bi], &hops[bi], &mut pending);
            runs.push((bi, planned));
        }
        runs.sort_by_key(|(bi, _)| *bi);
        let max_hops = hops.iter().map(Vec::len).max().unwrap_or(0);
        // The cells each run is read from at the current hop.
        let mut at: Vec<Vec<Cell>> = runs.iter().map(|(_, rs)| rs.iter().map(|r| r.src).collect()).collect();
        for h in 0..max_hops.saturating_sub(1) {
            let mut chans: Vec<Vec<u32>> = vec![Vec::new(); runs.len()];
            for (ri, (bi, rs)) in runs.iter().enumerate() {
                if hops[*bi].len() <= h + 1 {
                    continue;
                }
                let (a, b) = (hops[*bi][h], hops[*bi][h + 1]);
                for (k, run) in rs.iter().enumerate() {
                    // Steps the send needs, dependencies' no-ops included. (Its receive needs
                    // one step at least: see the receive below.)
                    let need_send = self.dep_tbs(a, Some(at[ri][k]), None, run.cnt);
                    let (ch, deferred) = self.channel_for(a, b, run.cnt, need_send + 1)?;
                    let tb = self.tb(a, Role::Send(b), ch);
                    let send = self.push_op(tb, StepType::Send, Some(at[ri][k]), None, run.cnt);
                    if deferred {
                        self.blocked.insert(send);
                    }
                    let flight = Flight { send, calls: run.cnt, deferred };
                    self.outstanding.entry((a, b, ch)).or_default().push_back(flight);
                    chans[ri].push(ch);
                }
            }
            for (ri, (bi, rs)) in runs.iter().enumerate() {
                let hs = &hops[*bi];
                if hs.len() <= h + 1 {
                    continue;
                }
                let (a, b) = (hs[h], hs[h + 1]);
                let last = h + 2 == hs.len();
                for (k, run) in rs.iter().enumerate() {
                    let ch = chans[ri][k];
                    let flight = self.outstanding.get_mut(&(a, b, ch)).and_then(|q| q.pop_front());
                    // Received in order: from here on the send is complete.
                    self.blocked.remove(&flight.expect("sent before received").send);
                    let tb = self.tb(b, Role::Recv(a), ch);
                    if !last {
                        let fwd = self.alloc_scratch(b, run.cnt);
                        self.push_op(tb, StepType::Recv, None, Some(fwd), run.cnt);
                        at[ri][k] = fwd;
                        continue;
                    }
                    match &run.land {
                        Land::Direct { dst, partial, slots } => {
                            // The block keeps a step for each receive still queued on it.
                            let later = self.outstanding.get(&(a, b, ch)).map_or(0, |q| q.len());
                            let deps = self.dep_tbs(b, *partial, Some(*dst), run.cnt);
                            let full = self.tbs[tb as usize].steps + deps + later > self.target.max_steps();
                            if full || self.waits_for_blocked(b, *partial, Some(*dst), run.cnt) {
                                // Straight in, it would wait for a send that completes only
                                // with a later receive (or need more no-ops than its block
                                // has room for): land in scratch, and move it into place with
                                // local steps that wait instead.
                                let tmp = self.alloc_scratch(b, run.cnt);
                                self.push_op(tb, StepType::Recv, None, Some(tmp), run.cnt);
                                match partial {
                                    Some(p) => {
                                        if p != dst {
                                            self.local_op(b, StepType::Copy, Some(*p), *dst, run.cnt);
                                        }
                                        self.local_op(b, StepType::Reduce, Some(tmp), *dst, run.cnt);
                                    }
                                    None => self.local_op(b, StepType::Copy, Some(tmp), *dst, run.cnt),
                                }
                            } else {
                                let ty = if partial.is_some() { StepType::RecvReduceCopy } else { StepType::Recv };
                                self.push_op(tb, ty, *partial, Some(*dst), run.cnt);
                            }
                            for (i, &slot) in slots.iter().enumerate() {
                                self.moved(b, slot, dst.plus(i as u32));
                            }
                        }
                        Land::Fanout { entries } => {
                            let tmp = self.alloc_scratch(b, run.cnt);
                            self.push_op(tb, StepType::Recv, None, Some(tmp), run.cnt);
                            let op = s.transfers.at(batch[*bi]).op;
                            for (i, slots) in entries.iter().enumerate() {
                                for &slot in slots {
                                    self.apply_local(b, step, slot, tmp.plus(i as u32), op);
                                }
                            }
                        }
                    }
                }
            }
            // Every send of this hop is received: what waited for one runs by the hop's end.
            debug_assert!(self.outstanding.values().all(|q| q.is_empty()));
            self.blocked.clear();
        }
        for (bi, &ti) in batch.iter().enumerate() {
            let Some(srcs) = local_src.remove(&bi) else { continue };
            let t = s.transfers.at(ti);
            let r = hops[bi][0];
            for (i, &slot) in t.written().iter().enumerate() {
                self.apply_local(r, step, slot, srcs[i], t.op);
            }
        }
        Ok(())
    }

    /// Splits a network transfer into runs of consecutive cells (at the sender, at the
    /// receiver's targets and partials), at most `MAX_COUNT` chunks each, and decides the
    /// target cell of every slot it writes.
    fn plan_runs(&mut self, step: u32, ti: usize, hops: &[u32], pending: &mut HashMap<(u32, u32), Cell>) -> Vec<Run> {
        let t = self.s.transfers.at(ti);
        let (a, b) = (hops[0], *hops.last().expect("two hops"));
        let reduce = t.op == Op::Reduce;
        let fanout = t.dst_chunks.is_some() && t.wire_chunks() < t.chunks.len();
        if fanout {
            // One entry per distinct chunk on the wire, with every slot it feeds.
            let mut by_src: Vec<(u32, Vec<u32>)> = Vec::new();
            for (i, &c) in t.chunks.iter().enumerate() {
                let w = t.written()[i];
                match by_src.iter_mut().find(|(x, _)| *x == c) {
                    Some((_, v)) => v.push(w),
                    None => by_src.push((c, vec![w])),
                }
            }
            let mut entries: Vec<(Cell, Vec<u32>)> = by_src
                .into_iter()
                .map(|(c, w)| (self.loc[a as usize][c as usize].expect("a valid schedule sends held slots"), w))
                .collect();
            entries.sort_by_key(|e| e.0);
            let mut runs: Vec<Run> = Vec::new();
            for (src, slots) in entries {
                if let Some(Run { src: s0, cnt, land: Land::Fanout { entries } }) = runs.last_mut()
                    && s0.buf == src.buf
                    && s0.off + *cnt == src.off
                    && *cnt < MAX_COUNT
                {
                    *cnt += 1;
                    entries.push(slots);
                    continue;
                }
                runs.push(Run { src, cnt: 1, land: Land::Fanout { entries: vec![slots] } });
            }
            return runs;
        }
        struct Entry {
            src: Cell,
            dst: Cell,
            partial: Option<Cell>,
            slot: u32,
        }
        let mut entries: Vec<Entry> = Vec::with_capacity(t.chunks.len());
        for (i, &c) in t.chunks.iter().enumerate() {
            let slot = t.written()[i];
            let src = self.loc[a as usize][c as usize].expect("a valid schedule sends held slots");
            let partial = if reduce {
                Some(
                    pending
                        .get(&(b, slot))
                        .copied()
                        .or(self.loc[b as usize][slot as usize])
                        .expect("a valid schedule reduces into held partials"),
                )
            } else {
                None
            };
            let dst = self.target(b, slot, step);
            pending.insert((b, slot), dst);
            entries.push(Entry { src, dst, partial, slot });
        }
        entries.sort_by_key(|e| e.src);
        let mut runs: Vec<Run> = Vec::new();
        for e in entries {
            if let Some(Run { src, cnt, land: Land::Direct { dst, partial, slots } }) = runs.last_mut() {
                let n = *cnt;
                let next = |c: Cell, x: Cell| c.buf == x.buf && c.off + n == x.off;
                let partial_ok = match (partial, e.partial) {
                    (Some(p0), Some(p)) => next(*p0, p),
                    (None, None) => true,
                    _ => false,
                };
                if n < MAX_COUNT && next(*src, e.src) && next(*dst, e.dst) && partial_ok {
                    *cnt += 1;
                    slots.push(e.slot);
                    continue;
                }
            }
            runs.push(Run {
                src: e.src,
                cnt: 1,
                land: Land::Direct { dst: e.dst, partial: e.partial, slots: vec![e.slot] },
            });
        }
        runs
    }

    /// The cell a write of `slot` at rank `r` goes to: its output cell, unless that cell (in
    /// place, where input and output are one buffer) still holds another slot's value that
    /// is read after this step or needed at the end; otherwise the slot's scratch cell.
    fn target(&mut self, r: u32, slot: u32, step: u32) -> Cell {
        let home = (slot as usize) < self.s.num_chunks && self.post[r as usize].binary_search(&slot).is_ok();
        if home && let Some(off) = self.layout.output(r as usize, slot as usize) {
            let cell = Cell { buf: Buf::O, off };
            let canon = self.layout.canonical(r as usize, cell);
            let free = match self.cells[r as usize].get(&canon).and_then(|c| c.occupant) {
                None => true,
                Some(o) if o == slot => true,
                Some(o) => {
                    let later = self.last_read.get(&(r, o)).is_some_and(|&st| st > step);
                    let needed = self.post[r as usize].binary_search(&o).is_ok();
                    !later && !needed
                }
            };
            if free {
                return cell;
            }
        }
        let next = &mut self.scratch_next[r as usize];
        let off = *self.scratch_home.entry((r, slot)).or_insert_with(|| {
            *next += 1;
            *next - 1
        });
        Cell::s(off)
    }

    /// Records that `slot`'s value at rank `r` now lives in `cell`.
    fn moved(&mut self, r: u32, slot: u32, cell: Cell) {
        let ri = r as usize;
        if let Some(old) = self.loc[ri][slot as usize] {
            let old = self.layout.canonical(ri, old);
            if let Some(st) = self.cells[ri].get_mut(&old)
                && st.occupant == Some(slot)
            {
                st.occupant = None;
            }
        }
        let canon = self.layout.canonical(ri, cell);
        self.cells[ri].entry(canon).or_default().occupant = Some(slot);
        self.loc[ri][slot as usize] = Some(cell);
    }

    /// A local copy or reduce of the value in `src` into `slot` at rank `r`.
    fn apply_local(&mut self, r: u32, step: u32, slot: u32, src: Cell, op: Op) {
        let dst = self.target(r, slot, step);
        match op {
            Op::Copy => self.local_op(r, StepType::Copy, Some(src), dst, 1),
            Op::Reduce => {
                let cur = self.loc[r as usize][slot as usize].expect("a valid schedule reduces into held partials");
                if cur != dst {
                    self.local_op(r, StepType::Copy, Some(cur), dst, 1);
                }
                self.local_op(r, StepType::Reduce, Some(src), dst, 1);
            }
        }
        self.moved(r, slot, dst);
    }

    /// Copies every result not yet in its output cell there, in runs.
    fn final_copies(&mut self) {
        for r in 0..self.layout.p {
            let mut pairs: Vec<(Cell, Cell)> = Vec::new();
            for &c in &self.post[r].clone() {
                let Some(off) = self.layout.output(r, c as usize) else { continue };
                let out = Cell { buf: Buf::O, off };
                let cur = self.loc[r][c as usize].expect("a valid schedule meets its postcondition");
                if cur != out {
                    pairs.push((cur, out));
                }
            }
            pairs.sort();
            let mut i = 0;
            while i < pairs.len() {
                let mut n = 1;
                while i + (n as usize) < pairs.len()
                    && n < MAX_COUNT
                    && pairs[i + n as usize].0 == pairs[i].0.plus(n)
                    && pairs[i + n as usize].1 == pairs[i].1.plus(n)
                {
                    n += 1;
                }
                self.local_op(r as u32, StepType::Copy, Some(pairs[i].0), pairs[i].1, n);
                i += n as usize;
            }
        }
    }

    fn alloc_scratch(&mut self, r: u32, n: u32) -> Cell {
        let next = &mut self.scratch_next[r as usize];
        *next += n;
        Cell::s(*next - n)
    }

    /// The channel of connection a→b for a send of `cnt` chunks, and whether it is deferred:
    /// the lowest channel with room (steps for it at both ends, or room for a new thread block
    /// on the channel and on the GPU) where the send fits (no deferred send before it, and the
    /// calls in flight plus its own at one chunk per call within `FIFO_CAPACITY`); else the
    /// lowest with room, deferred.
    fn channel_for(&mut self, a: u32, b: u32, cnt: u32, need_a: usize) -> Result<(u32, bool), MscclError> {
        let msgs = self.messages.entry((a, b)).or_default();
        *msgs += 1;
        let msgs = *msgs;
        let mut fallback = None;
        for ch in 0..MAX_CHANNELS {
            if !(self.room(a, Role::Send(b), ch, need_a) && self.room(b, Role::Recv(a), ch, 1)) {
                continue;
            }
            let queue = self.outstanding.get(&(a, b, ch));
            let deferred_before = queue.is_some_and(|q| q.iter().any(|f| f.deferred));
            let in_flight: u32 = queue.map_or(0, |q| q.iter().map(|f| f.calls).sum());
            let fits = !deferred_before && in_flight + cnt <= FIFO_CAPACITY;
            if fits {
                fallback = Some((ch, false));
                break;
            }
            fallback.get_or_insert((ch, true));
        }
        let Some((ch, deferred)) = fallback else {
            // The blocks a GPU opens for connections: the target's, and at most as many as a
            // dependency can name.
            let max_tbs = self.target.max_tbs().min(MAX_DEPID + 1);
            let (max_steps, target) = (self.target.max_steps(), self.target.name());
            return Err(MscclError::NoChannel { src: a, dst: b, messages: msgs, max_steps, max_tbs, target });
        };
        // Both ends' blocks now, so later choices count them.
        self.tb(a, Role::Send(b), ch);
        self.tb(b, Role::Recv(a), ch);
        Ok((ch, deferred))
    }

    /// Whether a step of `need` steps (no-ops included) fits the block of (rank, role, channel),
    /// or a new block can be opened for it: room on the channel, and on the GPU with one block
    /// kept for local steps. A GPU opens at most 128 blocks for connections (fewer when the
    /// target allows fewer), so that any block can be waited for (`MAX_DEPID`); beyond that,
    /// sends share the blocks there are, deferred.
    fn room(&self, r: u32, role: Role, ch: u32, need: usize) -> bool {
        match self.tb_of.get(&(r, role, ch)) {
            Some(&tb) => {
                // A receiving block keeps a step for each receive queued on it (each can land
                // in scratch in one step when its block is nearly full).
                let queued = match role {
                    Role::Recv(a) => self.outstanding.get(&(a, r, ch)).map_or(0, |q| q.len()),
                    _ => 0,
                };
                self.tbs[tb as usize].steps + queued + need <= self.target.max_steps()
            }
            None => {
                // Another channel for a connection that has one must leave a block for each
                // connection not yet open.
                let first = !self.opened.contains(&(r, role));
                let reserve = if first { 0 } else { self.unopened[r as usize] as usize };
                let budget = self.target.max_tbs().min(MAX_DEPID + 1) - 1;
                self.tbs_on_channel.get(&(r, ch)).copied().unwrap_or(0) < MAX_TBS_PER_CHANNEL
                    && self.tbs_per_rank[r as usize] as usize + reserve < budget
            }
        }
    }

    /// Whether a step at rank `r` reading `src` and writing `dst` would wait for a step that
    /// cannot complete at its place in generation order (see `blocked`).
    fn waits_for_blocked(&self, r: u32, src: Option<Cell>, dst: Option<Cell>, cnt: u32) -> bool {
        if self.blocked.is_empty() {
            return false;
        }
        let r = r as usize;
        (0..cnt).any(|i| {
            let read = src.and_then(|s| self.cells[r].get(&self.layout.canonical(r, s.plus(i))));
            let written = dst.and_then(|d| self.cells[r].get(&self.layout.canonical(r, d.plus(i))));
            read.is_some_and(|st| st.last_write.is_some_and(|w| self.blocked.contains(&w)))
                || written.is_some_and(|st| {
                    st.last_write.is_some_and(|w| self.blocked.contains(&w))
                        || st.readers.iter().any(|x| self.blocked.contains(x))
                })
        })
    }

    fn tb(&mut self, r: u32, role: Role, chan: u32) -> u32 {
        if let Some(&tb) = self.tb_of.get(&(r, role, chan)) {
            return tb;
        }
        let id = self.tbs.len() as u32;
        if self.opened.insert((r, role)) {
            self.unopened[r as usize] = self.unopened[r as usize].saturating_sub(1);
        }
        self.tbs.push(Tb { rank: r, role, chan, ops: Vec::new(), steps: 0 });
        self.tb_of.insert((r, role, chan), id);
        *self.tbs_on_channel.entry((r, chan)).or_default() += 1;
        self.tbs_per_rank[r as usize] += 1;
        id
    }

    /// A local step at rank `r`, in its local thread block (a new one when it is full).
    fn local_op(&mut self, r: u32, ty: StepType, src: Option<Cell>, dst: Cell, cnt: u32) {
        let max = self.target.max_steps();
        let need = self.dep_tbs(r, src, Some(dst), cnt).max(1);
        let tb = match self.local_tb[r as usize] {
            Some(tb) if self.tbs[tb as usize].steps + need <= max => tb,
            _ => {
                // Local blocks use no connection: the first channel with room.
                let chan = (0..MAX_CHANNELS)
                    .find(|&ch| self.tbs_on_channel.get(&(r, ch)).copied().unwrap_or(0) < MAX_TBS_PER_CHANNEL)
                    .unwrap_or(0);
                let id = self.tbs.len() as u32;
                self.tbs.push(Tb { rank: r, role: Role::Local, chan, ops: Vec::new(), steps: 0 });
                *self.tbs_on_channel.entry((r, chan)).or_default() += 1;
                self.tbs_per_rank[r as usize] += 1;
                self.local_tb[r as usize] = Some(id);
                id
            }
        };
        self.push_op(tb, ty, src, Some(dst), cnt);
    }

    /// How many thread blocks a step at rank `r` reading `src` and writing `dst` would wait for
    /// (its own block counted too: an upper bound on its no-ops plus one).
    fn dep_tbs(&self, r: u32, src: Option<Cell>, dst: Option<Cell>, cnt: u32) -> usize {
        let r = r as usize;
        let mut tbs: Vec<u32> = Vec::new();
        let mut add = |d: OpId| {
            if !tbs.contains(&d.tb) {
                tbs.push(d.tb);
            }
        };
        for i in 0..cnt {
            if let Some(st) = src.and_then(|s| self.cells[r].get(&self.layout.canonical(r, s.plus(i)))) {
                st.last_write.into_iter().for_each(&mut add);
            }
            if let Some(st) = dst.and_then(|d| self.cells[r].get(&self.layout.canonical(r, d.plus(i)))) {
                st.last_write.into_iter().for_each(&mut add);
                st.readers.iter().copied().for_each(&mut add);
            }
        }
        tbs.len()
    }

    /// Appends a step to thread block `tb` with the dependencies its cell accesses need, and
    /// updates the cells' hazard state. `Send` reads `src`; `Recv` writes `dst`; `rrc`, `cpy`
    /// read `src` and write `dst`; `re` reads `src` and `dst` and writes `dst`.
    fn push_op(&mut self, tb: u32, ty: StepType, src: Option<Cell>, dst: Option<Cell>, cnt: u32) -> OpId {
        let r = self.tbs[tb as usize].rank as usize;
        let me = OpId { tb, idx: self.tbs[tb as usize].ops.len() as u32 };
        let mut deps: Vec<OpId> = Vec::new();
        let add = |deps: &mut Vec<OpId>, d: OpId| {
            if d.tb == tb {
                return;
            }
            match deps.iter_mut().find(|x| x.tb == d.tb) {
                Some(x) => x.idx = x.idx.max(d.idx),
                None => deps.push(d),
            }
        };
        for i in 0..cnt {
            if let Some(s) = src {
                let c = self.layout.canonical(r, s.plus(i));
                let st = self.cells[r].entry(c).or_default();
                if let Some(w) = st.last_write {
                    add(&mut deps, w);
                }
            }
            if let Some(d) = dst {
                let c = self.layout.canonical(r, d.plus(i));
                let st = self.cells[r].entry(c).or_default();
                if let Some(w) = st.last_write {
                    add(&mut deps, w);
                }
                for &x in &st.readers {
                    add(&mut deps, x);
                }
            }
        }
        // Update the hazard state: reads, then writes.
        for i in 0..cnt {
            if let Some(s) = src {
                let c = self.layout.canonical(r, s.plus(i));
                self.cells[r].entry(c).or_default().readers.push(me);
            }
            let Some(d) = dst else { continue };
            let c = self.layout.canonical(r, d.plus(i));
            let st = self.cells[r].entry(c).or_default();
            // (A `re` also reads its destination; the write below supersedes that read.)
            st.last_write = Some(me);
            st.readers.clear();
        }
        // The executor fuses a `re` into the previous one when both reduce into the same cell
        // from the same buffer and the second waits for nothing, and its step counter then
        // disagrees with the file's: make such a step wait for its predecessor.
        let t = &self.tbs[tb as usize];
        if ty == StepType::Reduce
            && deps.is_empty()
            && let Some(prev) = t.ops.last()
            && prev.ty == StepType::Reduce
            && prev.dst == dst
            && prev.src.map(|c| c.buf) == src.map(|c| c.buf)
        {
            deps.push(OpId { tb, idx: me.idx - 1 });
        }
        for d in &deps {
            self.tbs[d.tb as usize].ops[d.idx as usize].has_dep = true;
        }
        // A local step that waits for a blocked step, or follows one in its block, is blocked
        // too. (Receives are kept from waiting for blocked steps; sends are the caller's.)
        if !self.blocked.is_empty() && matches!(ty, StepType::Copy | StepType::Reduce) {
            let after_blocked = me.idx > 0 && self.blocked.contains(&OpId { tb, idx: me.idx - 1 });
            if after_blocked || deps.iter().any(|d| self.blocked.contains(d)) {
                self.blocked.insert(me);
            }
        }
        debug_assert!(
            !matches!(ty, StepType::Recv | StepType::RecvReduceCopy) || !deps.iter().any(|d| self.blocked.contains(d)),
            "a receive waits for a step that completes only after a later receive"
        );
        let t = &mut self.tbs[tb as usize];
        t.steps += deps.len().max(1);
        t.ops.push(OpStep { ty, src, dst, cnt, deps, has_dep: false });
        me
    }

    /// Thread block ids per GPU: the blocks another block waits for first (the executor keeps
    /// a dependency's block id in 8 signed bits), each group in creation order. Returns each
    /// GPU's blocks in id order and each block's id.
    fn tb_ids(&self) -> (Vec<Vec<u32>>, Vec<u32>) {
        let mut per_rank: Vec<Vec<u32>> = vec![Vec::new(); self.layout.p];
        for waited in [true, false] {
            for (i, t) in self.tbs.iter().enumerate() {
                if t.ops.iter().any(|o| o.has_dep) == waited {
                    per_rank[t.rank as usize].push(i as u32);
                }
            }
        }
        let mut local_id = vec![0u32; self.tbs.len()];
        for tbs in &per_rank {
            for (id, &tb) in tbs.iter().enumerate() {
                local_id[tb as usize] = id as u32;
            }
        }
        (per_rank, local_id)
    }

    fn check_limits(&self) -> Result<(), MscclError> {
        let max = self.target.max_steps();
        let (per_rank, local_id) = self.tb_ids();
        for (r, tbs) in per_rank.iter().enumerate() {
            let gpu = r as u32;
            let target = self.target.name();
            if tbs.len() > self.target.max_tbs() {
                return Err(MscclError::TooManyThreadBlocks {
                    gpu,
                    tbs: tbs.len(),
                    max: self.target.max_tbs(),
                    target,
                });
            }
            let waited = tbs.iter().filter(|&&tb| self.tbs[tb as usize].ops.iter().any(|o| o.has_dep)).count();
            if waited > MAX_DEPID + 1 {
                return Err(MscclError::DependencyIds { gpu, waited });
            }
            let mut steps = 0;
            for &tb in tbs {
                let t = &self.tbs[tb as usize];
                if t.steps > max {
                    let tb = local_id[tb as usize];
                    return Err(MscclError::TooManySteps { gpu, tb, steps: t.steps, max, target });
                }
                steps += t.steps;
            }
            let nodes = 1 + self.layout.p + tbs.len() + steps;
            if nodes > MAX_NODES_PER_RANK {
                return Err(MscclError::TooManyNodes { gpu, nodes, max: MAX_NODES_PER_RANK });
            }
        }
        Ok(())
    }

    fn write(&self, s: &Schedule, opts: &MscclOptions) -> String {
        let p = self.layout.p;
        // Thread block ids per GPU, and each step's index counting the no-ops placed before it.
        let (per_rank, local_id) = self.tb_ids();
        let step_index: Vec<Vec<u32>> = self
            .tbs
            .iter()
            .map(|t| {
                let mut at = 0u32;
                t.ops
                    .iter()
                    .map(|o| {
                        at += o.deps.len().max(1) as u32;
                        at - 1
                    })
                    .collect()
            })
            .collect();
        let nchannels = self.tbs.iter().map(|t| t.chan + 1).max().unwrap_or(1);
        let name =
            opts.name.clone().unwrap_or_else(|| format!("ccsynth-{}", s.algorithm.as_deref().unwrap_or("schedule")));
        let n = self.layout.i_chunks.max(self.layout.o_chunks);
        let min = opts.min_bytes.unwrap_or(0);
        let max = opts.max_bytes.unwrap_or(i64::MAX as u64).min(i64::MAX as u64);

        let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
        let mut algo = BytesStart::new("algo");
        for (k, v) in [
            ("name", name),
            ("proto", opts.protocol.name().to_string()),
            ("nchannels", nchannels.to_string()),
            ("nchunksperloop", n.to_string()),
            ("ngpus", p.to_string()),
            ("coll", self.layout.coll.to_string()),
            ("inplace", "1".into()),
            ("outofplace", "1".into()),
            ("minBytes", min.to_string()),
            ("maxBytes", max.to_string()),
        ] {
            algo.push_attribute((k, v.as_str()));
        }
        let io = |r: std::io::Result<()>| r.expect("writing to memory");
        io(w.write_event(quick_xml::events::Event::Start(algo)));
        for (r, tbs) in per_rank.iter().enumerate() {
            let mut gpu = BytesStart::new("gpu");
            gpu.push_attribute(("id", r.to_string().as_str()));
            gpu.push_attribute(("i_chunks", self.layout.i_chunks.to_string().as_str()));
            gpu.push_attribute(("o_chunks", self.layout.o_chunks.to_string().as_str()));
            gpu.push_attribute(("s_chunks", self.scratch_next[r].to_string().as_str()));
            io(w.write_event(quick_xml::events::Event::Start(gpu)));
            for &tbi in tbs {
                let t = &self.tbs[tbi as usize];
                let (send, recv) = match t.role {
                    Role::Send(b) => (b as i64, -1),
                    Role::Recv(a) => (-1, a as i64),
                    Role::Local => (-1, -1),
                };
                let mut tb = BytesStart::new("tb");
                tb.push_attribute(("id", local_id[tbi as usize].to_string().as_str()));
                tb.push_attribute(("send", send.to_string().as_str()));
                tb.push_attribute(("recv", recv.to_string().as_str()));
                tb.push_attribute(("chan", t.chan.to_string().as_str()));
                io(w.write_event(quick_xml::events::Event::Start(tb)));
                let mut s_idx = 0u32;
                for o in &t.ops {
                    let dep = |d: &OpId| (local_id[d.tb as usize], step_index[d.tb as usize][d.idx as usize]);
                    // Extra dependencies ride on no-op steps before the step; the step
                    // itself carries the last one (the executor requires it).
                    for d in o.deps.iter().take(o.deps.len().saturating_sub(1)) {
                        let (id, st) = dep(d);
                        io(write_step(&mut w, s_idx, "nop", None, None, 0, Some((id, st)), false));
                        s_idx += 1;
                    }
                    let last = o.deps.last().map(dep);
                    io(write_step(&mut w, s_idx, o.ty.code(), o.src, o.dst, o.cnt, last, o.has_dep));
                    s_idx += 1;
                }
                io(w.write_event(quick_xml::events::Event::End(quick_xml::events::BytesEnd::new("tb"))));
            }
            io(w.write_event(quick_xml::events::Event::End(quick_xml::events::BytesEnd::new("gpu"))));
        }
        io(w.write_event(quick_xml::events::Event::End(quick_xml::events::BytesEnd::new("algo"))));
        let mut out = String::from_utf8(w.into_inner()).expect("quick-xml writes UTF-8");
        out.push('\n');
        out
    }
}

/// One `<step>` element, every attribute present (the executor requires them all).
#[allow(clippy::too_many_arguments)]
fn write_step(
    w: &mut Writer<Vec<u8>>,
    s: u32,
    ty: &str,
    src: Option<Cell>,
    dst: Option<Cell>,
    cnt: u32,
    dep: Option<(u32, u32)>,
    has_dep: bool,
) -> std::io::Result<()> {
    let (srcbuf, srcoff) = src.map(|c| (c.buf.letter(), c.off as i64)).unwrap_or(("i", -1));
    let (dstbuf, dstoff) = dst.map(|c| (c.buf.letter(), c.off as i64)).unwrap_or(("o", -1));
    let (depid, deps) = dep.map(|(a, b)| (a as i64, b as i64)).unwrap_or((-1, -1));
    let mut e = BytesStart::new("step");
    for (k, v) in [
        ("s", s.to_string()),
        ("type", ty.to_string()),
        ("srcbuf", srcbuf.to_string()),
        ("srcoff", srcoff.to_string()),
        ("dstbuf", dstbuf.to_string()),
        ("dstoff", dstoff.to_string()),
        ("cnt", cnt.to_string()),
        ("depid", depid.to_string()),
        ("deps", deps.to_string()),
        ("hasdep", if has_dep { "1" } else { "0" }.to_string()),
    ] {
        e.push_attribute((k, v.as_str()));
    }
    w.write_event(quick_xml::events::Event::Empty(e))
}
