//! MSCCL++ execution plans: turns a valid schedule into the JSON plan that MSCCL++'s executor
//! loads with `ExecutionPlan(path, rank)`, one file for every GPU, within the executor's limits.
//!
//! How a schedule becomes a plan (docs/FORMAT.md, "MSCCL++ execution plans"):
//! - Rank r is the r-th live NPU of the collective's group; chunks live in input, output and
//!   scratch cells exactly as in the MSCCL export (`export::layout`), and a cell is one plan
//!   chunk (`input_chunks`, `output_chunks` and `scratch_chunks` count them).
//! - Every message hop lands in fresh scratch at its receiver, never used again in the
//!   launch: the sender writes it with no regard to what the receiver is doing. Memory
//!   channel (a direct link): `put` into the peer's scratch, `nop`, `signal`. Port channel (a
//!   path through switches): `pwsf` (put, signal, and wait until it landed), always from
//!   scratch, where a `copy` stages a piece of the input or output (the proxy would read those
//!   from the start of the caller's allocation, not from the caller's pointer). The receiver
//!   `wait`s, then copies or reduces (`copy`, `re`) the scratch into the slot's cell, or a
//!   relay sends it on. Every receive is waited for by its GPU before its kernel ends.
//! - Per GPU, one *lane* per peer it sends to, one per peer it receives from, one for local
//!   moves; a lane is one thread block (or several in a chain, below). A connection (sender,
//!   receiver) has its own channel pair, used by exactly one sending and one receiving lane,
//!   so its waits match its signals in order. Lanes of one GPU that touch the same cell
//!   (read-after-write, write-after-read, write-after-write; input and output cells that alias
//!   in place count as one, so the plan is right both ways) are ordered by device semaphores
//!   (`sem_release` after the earlier item, `sem_acquire` before the later one), one per
//!   dependency, used once per launch.
//! - Opening handshake: a receiving lane's first op signals its sender, a sending lane's first
//!   op waits for it. A GPU's next launch starts only when all of its thread blocks are done,
//!   so no write of launch n+1 reaches a GPU still in launch n. Every channel and semaphore
//!   sees as many signals as waits per launch.
//! - `nop` (`__syncthreads`) wherever the kernel needs one: after a data op and before a
//!   signal or release (which only thread 0 issues), after a wait or acquire and before a data
//!   op (only thread 0 waited), and between two data ops of a block that touch a common cell.
//! - Deadlock freedom: items are generated in one global order (the schedule's steps; within
//!   a step, every send before the receives, or, where the step relays through NPUs, hop by
//!   hop, each hop's send then its receive, the landings last) and every wait, in a channel or on a
//!   semaphore, waits for something generated before it; memory-channel writes and the proxy
//!   of a port channel never block on the receiver. So the generation order is itself an
//!   execution, as long as every thread block of a GPU is resident at once (they spin on each
//!   other): at most `MAX_TBS` per GPU.
//! - A lane longer than `MAX_OPS` ops (the executor's limit, with `nop`s and semaphore ops
//!   counted) continues in a new thread block that acquires a semaphore the previous one
//!   releases as its last op.
use crate::collective::{Collective, CollectiveKind};
use crate::export::layout::Layout;
use crate::schedule::Schedule;
use serde::Serialize;
use sha2::Digest;
use std::collections::HashMap;

mod builder;
mod fits;
mod ops;

use builder::{Builder, Kind};
pub use fits::{fewest_thread_blocks, fits, fits_outline};
use ops::{OpJson, emit, segments};

/// Operations per thread block (`MAX_OPERATION`, checked by the executor).
pub const MAX_OPS: usize = 64;
/// Thread blocks per GPU: every block must be resident at once, since blocks spin on one
/// another's semaphores. The kernel is launched with 1024 threads and `__launch_bounds__(1024,
/// 1)`, so one block per SM; 108 is the smallest SM count of the GPUs MSCCL++ targets (A100;
/// H100 has 132). Inferred from the kernel, not observed on a GPU.
pub const MAX_TBS: usize = 108;
/// Buffers one op reads or writes (`MAX_*_BUFFERS_PER_OP` is 10 each way).
pub const MAX_BUFFS: usize = 10;
/// Semaphore ids one op names.
pub const MAX_SEMAPHORE_IDS: usize = 16;
/// The plan's `buffer_alignment`, in bytes: a chunk is a multiple of it.
pub const ALIGNMENT: u64 = 16;
/// Most transfers exported (the plan is built in memory; at 108 × 64 ops per GPU the
/// executor refuses far fewer).
pub const MAX_TRANSFERS: usize = 1 << 22;

/// How to write the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MscclppOptions {
    /// The plan's `name`, part of the executor's cache key (default:
    /// `ccsynth-<algorithm>-<collective>-<ranks>gpus-<digest of the program>`).
    pub name: Option<String>,
    /// Mark the plan for in-place calls (`inplace`): the NCCL shim then selects it for
    /// in-place calls only. The plan is correct both ways; only the selection differs.
    pub in_place: bool,
    /// The message sizes (bytes of input, of output for all-gather) the plan declares,
    /// inclusive; the upper end never exceeds what 32-bit offsets reach.
    pub min_bytes: Option<u64>,
    pub max_bytes: Option<u64>,
    /// Write one rank's view (`ExecutionPlan(path, rank)` loads it as it loads the whole plan):
    /// every GPU's buffers, channels and remote buffers, which the executor reads to pair its
    /// connections, but the thread blocks and semaphores of this rank only. Same `name` as the
    /// whole plan.
    pub rank: Option<u32>,
}

/// Why a schedule cannot become an MSCCL++ plan. Each names the limit it hits.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MscclppError {
    #[error("MSCCL++ plans run allreduce, allgather, reducescatter and alltoall; {kind} has no plan collective{why}")]
    UnsupportedCollective { kind: &'static str, why: &'static str },
    #[error(
        "transfer {transfer} uses NPU {npu}, which is not a rank of the collective's group: a plan runs on the communicator's ranks only"
    )]
    OutsideGroup { transfer: usize, npu: u32 },
    #[error(
        "GPU {gpu} needs {tbs} thread blocks ({ops} operations); at most {MAX_TBS} can be resident at once, with at most {MAX_OPS} operations each"
    )]
    TooManyThreadBlocks { gpu: u32, tbs: usize, ops: usize },
    #[error(
        "the schedule has {transfers} transfers, at least {} operations; {ranks} GPUs hold at most {max_ops} ({MAX_TBS} thread blocks of {MAX_OPS})",
        3 * transfers
    )]
    TooLarge { transfers: usize, ranks: usize, max_ops: usize },
    #[error(
        "the schedule has {transfers} transfers; the plan writer takes at most {max} (it builds the whole plan in memory)"
    )]
    TooManyTransfers { transfers: usize, max: usize },
    #[error(
        "NPU {npu} needs at least {tbs} thread blocks (at least {ops} operations: a handshake per peer, three per message it sends or lands); at most {MAX_TBS} can be resident at once, with at most {MAX_OPS} operations each"
    )]
    TooManyThreadBlocksAtLeast { npu: u32, tbs: usize, ops: usize },
    #[error(
        "GPU {gpu} needs at least {tbs} thread blocks by step {step} of the schedule (each of its operations so far one of at most {MAX_OPS} a block); at most {MAX_TBS} can be resident at once"
    )]
    TooManyThreadBlocksBy { gpu: u32, tbs: usize, step: u32 },
    #[error("{ranks} ranks × {slots} chunk slots is more than the {max} (rank, slot) cells the plan writer tracks")]
    TooManyCells { ranks: usize, slots: usize, max: usize },
    #[error("the collective does not build: {0}")]
    InvalidCollective(String),
    #[error("min_bytes {min} is above max_bytes {max} (the largest size this plan's 32-bit offsets reach is {limit})")]
    SizeRange { min: u64, max: u64, limit: u64 },
    #[error("rank {rank} is not a rank of the plan: its ranks are {}", crate::error::ids(*ranks))]
    Rank { rank: u32, ranks: usize },
}

/// A connection's channel type: memory over a direct link, port through switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ChanType {
    Memory,
    Port,
}

impl ChanType {
    fn name(self) -> &'static str {
        match self {
            ChanType::Memory => "memory",
            ChanType::Port => "port",
        }
    }
}

/// Writes `s` as an MSCCL++ plan (JSON), with the plan's `max_message_size`: `opts.max_bytes`
/// cut to what the plan's 32-bit offsets reach, or that reach where none was asked.
/// Crate-private: `s` must be valid (it reads where every chunk is), and
/// `engine::export_mscclpp`, the door, validates it first.
pub(crate) fn to_plan(s: &Schedule, opts: &MscclppOptions) -> Result<(String, u64), MscclppError> {
    fits(s)?;
    let collective = Collective::build_unchecked(&s.collective, &s.topology)
        .map_err(|e| MscclppError::InvalidCollective(e.to_string()))?;
    let kind = collective.spec.kind;
    let coll = match kind {
        CollectiveKind::AllReduce => "allreduce",
        CollectiveKind::AllGather => "allgather",
        CollectiveKind::ReduceScatter => "reducescatter",
        CollectiveKind::AllToAll => "alltoall",
        CollectiveKind::Broadcast | CollectiveKind::Reduce => {
            let why = ": the NCCL shim selects a plan by collective, ranks, size and in place, never by root";
            return Err(MscclppError::UnsupportedCollective { kind: kind.name(), why });
        }
        _ => return Err(MscclppError::UnsupportedCollective { kind: kind.name(), why: "" }),
    };
    let mut layout = Layout::new(&collective, coll);
    if let Some(rank) = opts.rank.filter(|&r| r as usize >= layout.p) {
        return Err(MscclppError::Rank { rank, ranks: layout.p });
    }
    layout.number_chunks(s);
    let mut b = Builder::new(s, &layout);
    b.run()?;
    let mut gpus = write_gpus(&mut b)?;
    for (r, g) in gpus.iter_mut().enumerate() {
        (g.input_chunks, g.output_chunks) = (layout.i_chunks, layout.o_chunks);
        g.scratch_chunks = b.place.scratch_next[r];
    }
    // Offsets are 32-bit byte counts: the chunk may be at most 2^32 / (largest buffer in
    // chunks), a multiple of the alignment.
    let cells = gpus.iter().map(|g| g.scratch_chunks as u64).chain([layout.i_chunks as u64, layout.o_chunks as u64]);
    let most = cells.max().unwrap_or(1).max(1);
    let chunk_limit = (u32::MAX as u64 / most) / ALIGNMENT * ALIGNMENT;
    let per_message = if kind == CollectiveKind::AllGather { layout.o_chunks } else { layout.i_chunks } as u64;
    let limit = chunk_limit * per_message;
    let max = opts.max_bytes.unwrap_or(limit).min(limit);
    let min = opts.min_bytes.unwrap_or(0);
    if min > max {
        return Err(MscclppError::SizeRange { min, max, limit });
    }
    // The executor keeps one context (channels, scratch, semaphores) per (buffers, name) and, on
    // a second plan of the same name over the same buffers, reuses the first one's: distinct
    // plans need distinct names. The default names the program by a digest of it.
    let name = opts.name.clone().unwrap_or_else(|| {
        // Hashed as it is written, without holding a second copy of the plan's text.
        let mut hasher = sha2::Sha256::new();
        serde_json::to_writer(&mut hasher, &(&gpus, opts.in_place, min, max)).expect("a plan serializes");
        let digest = format!("{:x}", hasher.finalize());
        // Printable and within MAX_NAME_BYTES whatever the schedule's `algorithm` holds.
        let algorithm = super::printable(s.algorithm.as_deref().unwrap_or("schedule"), 128);
        format!("ccsynth-{algorithm}-{coll}-{}gpus-{}", layout.p, &digest[..12])
    });
    // One rank's view: the other GPUs keep what the executor reads of every GPU.
    if let Some(rank) = opts.rank {
        for g in gpus.iter_mut().filter(|g| g.id != rank) {
            g.threadblocks = Vec::new();
            g.semaphores = Vec::new();
        }
    }
    let plan = Plan {
        name,
        collective: coll,
        protocol: "Simple",
        inplace: opts.in_place,
        num_threads_per_block: 1024,
        reuse_resources: false,
        use_double_scratch_buffer: false,
        buffer_alignment: ALIGNMENT,
        min_message_size: min,
        max_message_size: max,
        gpus,
    };
    Ok((serde_json::to_string(&plan).expect("a plan serializes"), max))
}

#[derive(Serialize)]
struct Plan {
    name: String,
    collective: &'static str,
    protocol: &'static str,
    inplace: bool,
    num_threads_per_block: u32,
    reuse_resources: bool,
    use_double_scratch_buffer: bool,
    buffer_alignment: u64,
    min_message_size: u64,
    max_message_size: u64,
    gpus: Vec<Gpu>,
}

#[derive(Serialize)]
struct Gpu {
    id: u32,
    input_chunks: usize,
    output_chunks: usize,
    scratch_chunks: u32,
    channels: Vec<ChannelDecl>,
    remote_buffers: Vec<RemoteBuffer>,
    semaphores: Vec<Semaphore>,
    threadblocks: Vec<Tb>,
}

#[derive(Serialize)]
struct ChannelDecl {
    channel_type: &'static str,
    connected_to: Vec<u32>,
}

#[derive(Serialize)]
struct RemoteBuffer {
    rank: u32,
    #[serde(rename = "type")]
    ty: &'static str,
    access_channel_types: Vec<&'static str>,
}

#[derive(Serialize)]
struct Semaphore {
    init_value: i32,
}

#[derive(Serialize)]
struct Tb {
    id: usize,
    ops: Vec<OpJson>,
    channels: Vec<TbChannels>,
    remote_buffer_refs: Vec<TbRemoteRefs>,
}

#[derive(Serialize)]
struct TbChannels {
    channel_type: &'static str,
    channel_ids: Vec<u32>,
}

#[derive(Serialize)]
struct TbRemoteRefs {
    access_channel_type: &'static str,
    remote_buffer_ids: Vec<u32>,
}

/// The GPUs' sections: channels declared in pairs, each lane's ops with their `nop`s and
/// semaphore ops, and the lanes cut into thread blocks of at most `MAX_OPS` operations.
fn write_gpus(b: &mut Builder<'_>) -> Result<Vec<Gpu>, MscclppError> {
    let p = b.place.scratch_next.len();
    // Channels: at each GPU, per peer in order, the connection (low → high rank) first, then
    // (high → low), each of its type; both ends list them alike, so the k-th channel of a
    // type from a to b pairs with the k-th from b to a.
    let mut decl: Vec<[Vec<u32>; 2]> = vec![[Vec::new(), Vec::new()]; p];
    let mut gid: HashMap<(u32, u32, u32), u32> = HashMap::new();
    let mut conns: Vec<(u32, u32)> = b.pairs.keys().copied().collect();
    conns.sort_by_key(|&(a, c)| (a.min(c), a.max(c), a > c));
    for (a, c) in conns {
        let ty = b.pairs[&(a, c)] as usize;
        for (g, peer) in [(a, c), (c, a)] {
            let list = &mut decl[g as usize][ty];
            gid.insert((g, a, c), list.len() as u32);
            list.push(peer);
        }
    }
    let mut remote: Vec<Vec<(u32, ChanType)>> = vec![Vec::new(); p];
    let mut gpus: Vec<Gpu> = (0..p)
        .map(|r| Gpu {
            id: r as u32,
            input_chunks: 0,
            output_chunks: 0,
            scratch_chunks: 0,
            channels: [ChanType::Memory, ChanType::Port]
                .into_iter()
                .filter(|&t| !decl[r][t as usize].is_empty())
                .map(|t| ChannelDecl { channel_type: t.name(), connected_to: decl[r][t as usize].clone() })
                .collect(),
            remote_buffers: Vec::new(),
            semaphores: Vec::new(),
            threadblocks: Vec::new(),
        })
        .collect();
    let mut order: Vec<usize> = (0..b.lanes.len()).collect();
    order.sort_by_key(|&l| (b.lanes[l].rank, b.lanes[l].kind));
    let mut ops_per_gpu = vec![0usize; p];
    for l in order {
        let (r, kind) = (b.lanes[l].rank, b.lanes[l].kind);
        let (conn, ty) = match kind {
            Kind::Send(to) => (Some((r, to)), b.pairs[&(r, to)]),
            Kind::Recv(from) => (Some((from, r)), b.pairs[&(from, r)]),
            Kind::Local => (None, ChanType::Memory),
        };
        let channels = match conn {
            Some((a, c)) => vec![TbChannels { channel_type: ty.name(), channel_ids: vec![gid[&(r, a, c)]] }],
            None => Vec::new(),
        };
        let refs = match kind {
            Kind::Send(to) => {
                let list = &mut remote[r as usize];
                let id = match list.iter().position(|&(x, t)| x == to && t == ty) {
                    Some(i) => i,
                    None => {
                        list.push((to, ty));
                        list.len() - 1
                    }
                };
                vec![TbRemoteRefs { access_channel_type: ty.name(), remote_buffer_ids: vec![id as u32] }]
            }
            _ => Vec::new(),
        };
        let ops = emit(b, l, ty);
        ops_per_gpu[r as usize] += ops.len();
        for seg in segments(ops, &mut b.sems[r as usize]) {
            let tbs = &mut gpus[r as usize].threadblocks;
            tbs.push(Tb {
                id: tbs.len(),
                ops: seg,
                channels: clone_channels(&channels),
                remote_buffer_refs: clone_refs(&refs),
            });
        }
    }
    for (r, g) in gpus.iter_mut().enumerate() {
        if g.threadblocks.len() > MAX_TBS {
            return Err(MscclppError::TooManyThreadBlocks {
                gpu: r as u32,
                tbs: g.threadblocks.len(),
                ops: ops_per_gpu[r],
            });
        }
        g.remote_buffers = remote[r]
            .iter()
            .map(|&(rank, t)| RemoteBuffer { rank, ty: "s", access_channel_types: vec![t.name()] })
            .collect();
        g.semaphores = (0..b.sems[r]).map(|_| Semaphore { init_value: 0 }).collect();
    }
    Ok(gpus)
}

fn clone_channels(c: &[TbChannels]) -> Vec<TbChannels> {
    c.iter().map(|t| TbChannels { channel_type: t.channel_type, channel_ids: t.channel_ids.clone() }).collect()
}

fn clone_refs(c: &[TbRemoteRefs]) -> Vec<TbRemoteRefs> {
    c.iter()
        .map(|t| TbRemoteRefs {
            access_channel_type: t.access_channel_type,
            remote_buffer_ids: t.remote_buffer_ids.clone(),
        })
        .collect()
}
