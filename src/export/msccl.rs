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
//!   and a receive step (`r`, or `rrc` for a reduce; for RCCL, which launches no fused receive,
//!   `r` into scratch and a local `re`) in a block that only receives from that peer on that
//!   channel, so a connection's sends and receives pair up first-in first-out.
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
use crate::export::layout::Layout;
use crate::schedule::Schedule;

mod builder;

use builder::Builder;

/// Calls a connection holds in flight: NCCL's 8 slots, 4 per call in the Simple protocol (its
/// chunk steps); LL and LL128 take 1 slot per call, so 2 is safe for all three.
pub const FIFO_CAPACITY: u32 = 2;
/// Thread ids a dependency can name: the executor stores `depid` in 8 signed bits.
pub const MAX_DEPID: usize = 127;
/// The highest chunk offset a step can name: the executor stores `srcoff` and `dstoff` in 16
/// signed bits (`mscclTransmission`'s `int16_t srcOffset, dstOffset`, in the MSCCL executor and
/// in RCCL), so a larger one would address another chunk.
pub const MAX_OFFSET: u32 = i16::MAX as u32;
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
    /// RCCL's MSCCL: 64 steps per thread block, 64 thread blocks per GPU, no fused receives.
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
    /// Whether the executor runs `rrc` (receive, reduce, copy in one step). RCCL's MSCCL parses
    /// it but refuses to launch an algorithm with any fused receive ("this version of MSCCL
    /// build doesn't support full Ops", `msccl_setup.cc`): for it a reduce is received into
    /// scratch and combined by a local `re` step.
    pub fn fused_receive(self) -> bool {
        !matches!(self, MscclTarget::Rccl)
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
    // The lower-case spellings are the CLI's --msccl-proto aliases, taken over HTTP too.
    #[default]
    #[serde(alias = "simple")]
    Simple,
    #[serde(rename = "LL", alias = "ll")]
    Ll,
    #[serde(rename = "LL128", alias = "ll128")]
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
        "MSCCL has no collective for {kind} in the {target} executor: this export writes allreduce, allgather, reducescatter and alltoall"
    )]
    UnsupportedCollective { kind: &'static str, target: &'static str },
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
    #[error("min_bytes {min} is above max_bytes {max}{}", if *.max == MAX_BYTES { " (the largest size the file states, 2^63 − 1)" } else { "" })]
    SizeRange { min: u64, max: u64 },
    #[error("max_bytes 0: the executor reads maxBytes = 0 as no upper limit; leave max_bytes out for that")]
    ZeroMaxBytes,
    #[error(
        "MSCCL cannot run a {kind} for its root: the executor picks an algorithm by collective, rank count, size and in place only, and the file has no root, so a file written for root {root} would run for every root"
    )]
    RootNotBound { kind: &'static str, root: u32 },
    #[error(
        "GPU {gpu} would address chunk {offset} of its {buffer} buffer; the executor stores a step's offsets in 16 signed bits, so at most {MAX_OFFSET} (fewer chunks per NPU would fit)"
    )]
    OffsetOutOfRange { gpu: u32, offset: u32, buffer: &'static str },
    #[error("GPU {gpu} has {tbs} thread blocks; the {target} executor allows at most {max} per GPU")]
    TooManyThreadBlocks { gpu: u32, tbs: usize, max: usize, target: &'static str },
    #[error(
        "GPU {gpu} has {waited} thread blocks that other blocks wait for; the executor stores a dependency's block id in 8 signed bits, so at most {} can be waited for",
        MAX_DEPID + 1
    )]
    DependencyIds { gpu: u32, waited: usize },
}

/// The largest `maxBytes` written, and the default (docs/FORMAT.md): a larger `max_bytes` is
/// stated as this.
pub(crate) const MAX_BYTES: u64 = i64::MAX as u64;

/// Writes `s` as MSCCL XML. Crate-private: `s` must be valid (it reads where every chunk is),
/// and `engine::export_msccl`, the door, validates it first.
pub(crate) fn to_xml(s: &Schedule, opts: &MscclOptions) -> Result<String, MscclError> {
    fits(s)?;
    let collective = Collective::build_unchecked(&s.collective, &s.topology)
        .map_err(|e| MscclError::InvalidCollective(e.to_string()))?;
    let mut layout = Layout::new(&collective, collective_name(&collective, opts.target)?);
    layout.number_chunks(s);
    if opts.max_bytes == Some(0) {
        return Err(MscclError::ZeroMaxBytes);
    }
    // Compared as written: a minimum past the cap on the maximum made a file no size selects.
    let max = opts.max_bytes.unwrap_or(MAX_BYTES).min(MAX_BYTES);
    if let Some(min) = opts.min_bytes.filter(|&min| min > max) {
        return Err(MscclError::SizeRange { min, max });
    }
    let mut b = Builder::new(s, &layout, opts.target);
    b.run()?;
    b.check_limits()?;
    Ok(b.write(s, opts))
}

/// The executor's name for the collective (`coll`), or why it has none.
fn collective_name(c: &Collective, target: MscclTarget) -> Result<&'static str, MscclError> {
    let kind = c.spec.kind;
    let legacy = target == MscclTarget::Legacy;
    Ok(match kind {
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
            // The current executor's broadcast and reduce are refused above, so they are not
            // listed as written (the message said the executor ran them).
            return Err(MscclError::UnsupportedCollective { kind: kind.name(), target: target.name() });
        }
    })
}

/// A cheap first test, before the schedule is even validated: every message is at least a
/// send and a receive step, and the executor's reader keeps at most `MAX_NODES_PER_RANK`
/// nodes per rank.
pub fn fits(s: &Schedule) -> Result<(), MscclError> {
    fits_outline(s, s.transfers.len())
}

/// `fits` for a schedule of `transfers` transfers whose list `s` may leave out (an outline).
pub fn fits_outline(s: &Schedule, transfers: usize) -> Result<(), MscclError> {
    let ranks = s.topology.npus().max(1);
    let max = ranks * MAX_NODES_PER_RANK;
    if transfers.saturating_mul(2) > max {
        return Err(MscclError::TooLarge { transfers, ranks, max_steps: max });
    }
    // The writer tracks where every slot of every rank lives: bound that table before
    // building it.
    let cells = ranks.saturating_mul(s.slots());
    if cells > MAX_TRACKED_CELLS {
        return Err(MscclError::TooManyCells { ranks, slots: s.slots(), max: MAX_TRACKED_CELLS });
    }
    Ok(())
}

/// Most (rank, slot) pairs the writers track (MSCCL's and MSCCL++'s): 2^22. Their peak grows
/// with them, measured on bucket's torus:32x32 all-reduce (2^22 cells): MSCCL XML 1.2 GB, the
/// MSCCL++ plan 3.5 GB (at 2^24, the bound until 2026-12-07, about four times those).
pub const MAX_TRACKED_CELLS: usize = 1 << 22;
