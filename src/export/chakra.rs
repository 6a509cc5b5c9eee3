//! Chakra execution traces for ASTRA-sim's custom collectives: one `.et` file of SEND, RECV and
//! COMP nodes per NPU, the workload and configuration files that run them, and the archive the
//! service sends, from a schedule the engine has validated.
//!
//! How a schedule becomes traces (docs/FORMAT.md, "Chakra ET export"):
//! - NPU v reads `<prefix>.<v>.et` (no communicator group: positions are NPU ids). Every NPU of
//!   the topology gets a file; one with nothing to do gets a single COMP node of 0 µs, since
//!   ASTRA-sim refuses a file without a node free of dependencies.
//! - Transfer i from a to b is a SEND at a (`comm_dst` b) and a RECV at b (`comm_src` a), both
//!   with `comm_size` the bytes on the wire and `comm_tag` i. A RECV has no dependencies: ASTRA
//!   moves no data, so it may be posted at once. A reduce adds a COMP node at b after its RECV,
//!   `duration_micros` the γ time rounded to whole µs, unless that is 0 (ASTRA-sim would run
//!   it for 1 ns): then the readers of what it writes wait for its RECV and the partial's writers.
//! - A SEND depends on the nodes that last wrote its chunks at a in an earlier step (the RECV
//!   of a copy, the COMP of a reduce): the schedule's own rule that a transfer reads contents
//!   final at the end of their last write. Local moves send nothing: a copy passes its source's
//!   writers on to the slot it writes, a reduce is a COMP node (or passes its inputs' writers on,
//!   when it takes 0 µs).
//! - A path through other NPUs is cut at them, as the simulator cuts it: each hop is a SEND and
//!   a RECV of its own (tag i too), a relay's SEND waiting for its RECV (store and forward), and
//!   a step's hops are generated hop-major (every first hop, then every second hop, …), as the
//!   simulator books them. A hop through switches is one SEND and one RECV that ASTRA-sim routes
//!   by its own network description.
//! - Each SEND also waits for the SEND before it out of the same NPU over the same link (its
//!   hop's first link), in `ctrl_deps` and `data_deps` alike (ASTRA-sim's feeder reads only the
//!   latter): each link out of an NPU carries its sends in the simulator's order, relays
//!   included, whatever order a runtime issues ready nodes in.
//! - Files are length-delimited protobuf messages (a LEB128 length, then the message): one
//!   `GlobalMetadata`, then the nodes. The messages are declared in `proto` from chakra's
//!   `et_def.proto` (package `ChakraProtoMsg`), the fields ccsynth writes and reads.
use crate::collective::CollectiveKind;
use crate::schedule::{Op, Schedule, TransferRef};
use prost::Message;
use std::collections::HashMap;

mod network;
mod proto;
use network::network_yaml;
pub use network::{ROUNDING_NS, to_tar};
pub use proto::{
    AttributeProto, COMM_COLL_NODE, COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, GlobalMetadata, Node, attribute_proto,
};

/// The metadata version ASTRA-sim's own generators write.
pub const VERSION: &str = "0.0.4";
/// ASTRA-sim reduces tags modulo 5·10^8: a transfer index must stay below.
pub const MAX_TAG: usize = 500_000_000;
/// Most transfers exported, and most hops between NPUs (a relayed transfer is one a hop): about
/// 70 bytes of trace each (a SEND and a RECV), so about 300 MB of files, built in memory.
pub const MAX_TRANSFERS: usize = 1 << 22;

/// Most (NPU, slot) cells the whole export replays: it keeps the nodes that last wrote each, about
/// 290 bytes a cell at its peak (ring:16 at 4,096 chunks per NPU, 2^20 cells: 183 MB; bucket's
/// torus:32x32 all-reduce, 2^22: 1.18 GB), so at most about 1.2 GB. One rank's trace replays the
/// transfers that touch it alone, and is not bounded by this.
pub const MAX_CELLS: usize = 1 << 22;

/// Why a schedule cannot become Chakra traces.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChakraError {
    #[error(
        "the schedule has {transfers} transfers; the Chakra export writes at most {MAX_TRANSFERS} (about 300 MB of traces)"
    )]
    TooManyTransfers { transfers: usize },
    #[error(
        "the schedule's messages make {hops} hops between NPUs (a SEND and a RECV each); the Chakra export writes at most {MAX_TRANSFERS} (about 300 MB of traces)"
    )]
    TooManyHops { hops: usize },
    #[error(
        "{npus} NPUs × {slots} chunk slots is more than the {MAX_CELLS} (NPU, slot) cells the whole export replays (about 1.2 GB); one rank's trace at a time is not bounded by them"
    )]
    TooManyCells { npus: usize, slots: usize },
    #[error("prefix {prefix:?}: use letters, digits, '-', '_' and '.', at most 64 characters, not starting with '.'")]
    Prefix { prefix: String },
    /// One rank's trace: a message's tag is its transfer's index, below ASTRA-sim's modulus.
    #[error("the schedule has {transfers} transfers; a message's tag is its transfer's index, below {MAX_TAG}")]
    TooManyTags { transfers: usize },
    /// One rank's trace of a rank the schedule does not have.
    #[error("{rank}: expected a rank in {} (the topology's NPUs)", crate::error::ids(*npus))]
    Rank { rank: u32, npus: usize },
    #[error("the collective's {bytes} bytes are more than a trace's comm_size holds ({})", i64::MAX)]
    TooLarge { bytes: u64 },
}

/// Sizes within `comm_size` (i64; they were written saturated): the collective's, every message's.
fn sizes_fit(s: &Schedule) -> Result<(), ChakraError> {
    let most = (s.chunk_size_bytes * (s.num_chunks + s.scratch.len()) as f64).max(s.collective.size_bytes as f64);
    (most < i64::MAX as f64).then_some(()).ok_or(ChakraError::TooLarge { bytes: s.collective.size_bytes })
}

/// What `to_chakra` makes: the files (name relative to the output directory, bytes), the
/// lines for ASTRA-sim's configuration, and whether ASTRA-sim's congestion-aware backend has a
/// network like the schedule's.
#[derive(Clone, Debug)]
pub struct ChakraExport {
    pub files: Vec<(String, Vec<u8>)>,
    /// The system configuration's custom-collective key and its value, e.g.
    /// `"all-reduce-implementation-custom": ["/dir/prefix"]`.
    pub system_key: String,
    /// Ok: the network file's name; Err: why the topology has no congestion-aware equivalent.
    pub network: Result<String, String>,
    /// How to run it, from the output directory.
    pub command: String,
}

/// Writes `s` as Chakra traces. `prefix` names the files; `dir`, when given, is the absolute
/// directory the files will be in (the system configuration names the traces by path; without
/// it, by the bare prefix, which ASTRA-sim resolves against its working directory).
/// Crate-private: `s` must be valid (the engine's door checks it first).
pub(crate) fn to_chakra(s: &Schedule, prefix: &str, dir: Option<&str>) -> Result<ChakraExport, ChakraError> {
    check_prefix(prefix)?;
    sizes_fit(s)?;
    // The hops first: the door's cheap test (`fits`) has checked the counts, not the paths.
    let hops: usize = s.transfers.iter().map(|t| npu_visits(s, t).len().saturating_sub(1)).sum();
    if hops > MAX_TRANSFERS {
        return Err(ChakraError::TooManyHops { hops });
    }
    fits(s, s.transfers.len())?;
    let npus = s.topology.npus();
    let files = Traces::build(s, None);
    let mut out = Vec::with_capacity(2 * npus + 3);
    push_traces(&mut out, prefix, files);
    let key = push_workloads(&mut out, s, prefix);
    let system_key = push_configs(&mut out, prefix, dir, key);
    let network = push_network(&mut out, s, prefix);
    let command = format!(
        "AstraSim_Analytical_Congestion_Aware --workload-configuration={prefix}.workload --system-configuration={prefix}.system.json --remote-memory-configuration={prefix}.memory.json --network-configuration={}",
        network.as_deref().unwrap_or("NETWORK.yml")
    );
    Ok(ChakraExport { files: out, system_key, network, command })
}

/// Whether the whole export of a schedule like `s` (its header: topology and chunks) of
/// `transfers` transfers is within the limits its counts decide, checked before anything is
/// built: its transfers (which also keep every tag below ASTRA-sim's modulus, `MAX_TAG`) and its
/// (NPU, slot) cells (ring:64 at 8,192 chunks per NPU, 2^25 cells, took 2.9 GB and brought the
/// service down).
pub(crate) fn fits(s: &Schedule, transfers: usize) -> Result<(), ChakraError> {
    if transfers > MAX_TRANSFERS {
        return Err(ChakraError::TooManyTransfers { transfers });
    }
    let (npus, slots) = (s.topology.npus(), s.slots());
    if npus.saturating_mul(slots) > MAX_CELLS {
        return Err(ChakraError::TooManyCells { npus, slots });
    }
    Ok(())
}

/// Rank `rank`'s trace file of `to_chakra`'s export (its name and bytes), the same byte for
/// byte, for runtimes that load one rank at a time: replayed from the transfers that touch the
/// rank alone (from it, to it, or relayed through it), since a node's id and dependencies, a
/// link's order and a message's tag (its transfer's index) depend on those only. Not bounded
/// by `MAX_TRANSFERS`, which bounds the whole export's files together (torus:128x128's
/// all-reduce is past it; a rank's trace there is a few thousand nodes: it relays nothing).
pub(crate) fn rank_trace(s: &Schedule, prefix: &str, rank: u32) -> Result<(String, Vec<u8>), ChakraError> {
    check_prefix(prefix)?;
    rank_fits(s.topology.npus(), s.transfers.len(), rank).and_then(|()| sizes_fit(s))?;
    let mut files = Traces::build(s, Some(rank));
    Ok((format!("{prefix}.{rank}.et"), trace_bytes(std::mem::take(&mut files[rank as usize]))))
}

/// Whether `rank_trace` can write rank `rank` of a schedule of `transfers` transfers on `npus`
/// NPUs: a rank the topology has, and tags (transfer indices) below `MAX_TAG`.
pub(crate) fn rank_fits(npus: usize, transfers: usize, rank: u32) -> Result<(), ChakraError> {
    if rank as usize >= npus {
        return Err(ChakraError::Rank { rank, npus });
    }
    if transfers > MAX_TAG {
        return Err(ChakraError::TooManyTags { transfers });
    }
    Ok(())
}

/// The nodes that last wrote each (NPU, slot): what a reader of the slot waits for.
type Writers = HashMap<(u32, u32), Vec<u64>>;

/// The traces being built, with the state the replay threads from one transfer to the next.
struct Traces {
    /// Each NPU's nodes, in id order.
    files: Vec<Vec<Node>>,
    /// The collective's γ in ns per byte (0 without one).
    gamma: f64,
    chunk_size_bytes: f64,
    /// The fewest bytes a message carries (`min_message_bytes`).
    min_bytes: i64,
    /// The writers as of the end of the previous step.
    writers: Writers,
    // The last SEND out of each NPU over each of its links (the first link of its hop): the
    // next one on that link waits for it, so the link carries them in ccsynth's order.
    last_on_link: HashMap<(u32, u32), u64>,
}

impl Traces {
    /// Replays `s` step by step into one list of nodes per NPU (empty for an idle one); with
    /// `only`, the transfers whose path visits that NPU alone (its list is then the whole
    /// replay's, the others' partial).
    fn build(s: &Schedule, only: Option<u32>) -> Vec<Vec<Node>> {
        let mut traces = Traces {
            files: vec![Vec::new(); s.topology.npus()],
            gamma: s.collective.gamma_ns_per_byte.unwrap_or(0.0),
            chunk_size_bytes: s.chunk_size_bytes,
            min_bytes: min_message_bytes(s),
            writers: HashMap::new(),
            last_on_link: HashMap::new(),
        };
        let order = s.replay_order();
        for steps in order.steps(&s.transfers) {
            // Writes take effect at the end of their step: reads in this step see the writers before.
            let mut updates = Writers::new();
            // Every transfer's first hop, then the relayed ones' later hops, hop-major.
            let mut relayed: Vec<Relay> = Vec::new();
            for k in steps {
                let ti = order.get(k);
                let t = s.transfers.at(ti);
                let touches = |v: u32| t.src == v || t.dst == v || t.path_nodes().is_some_and(|p| p.contains(&v));
                if only.is_none_or(touches) {
                    let step = s.transfers.step(ti);
                    relayed.extend(traces.transfer(&mut updates, t, ti, step, npu_visits(s, t)));
                }
            }
            while !relayed.is_empty() {
                relayed = relayed.into_iter().filter_map(|r| traces.forward(&mut updates, s, r)).collect();
            }
            traces.commit(updates);
        }
        traces.files
    }

    /// Adds the nodes of transfer `ti` (in step `step`), or of its first hop when it relays
    /// through NPUs (`visits`: the NPUs its path visits, ends included, each with the node its
    /// path goes on to), and records what it writes in `updates`; returns the relay still to
    /// forward it.
    fn transfer(
        &mut self,
        updates: &mut Writers,
        t: TransferRef<'_>,
        ti: usize,
        step: u32,
        visits: Vec<Visit>,
    ) -> Option<Relay> {
        if t.is_local() {
            match t.op {
                Op::Copy => self.local_copy(updates, t),
                Op::Reduce => self.local_reduce(updates, t, ti, step),
            }
            return None;
        }
        let bytes = ((self.chunk_size_bytes * t.wire_chunks() as f64).round() as i64).max(self.min_bytes);
        let deps: Vec<u64> = t.chunks.iter().flat_map(|&c| self.before(t.src, c)).collect();
        let hop = Hop { ti, step, bytes, from: visits[0].npu, to: visits[1].npu, next: visits[0].next };
        let recv = self.push_hop(hop, deps);
        if visits.len() > 2 {
            return Some(Relay { hop, visits, at: 1, recv });
        }
        self.land(updates, t, ti, step, recv);
        None
    }

    /// The next hop of a relayed transfer: a SEND at the relay after its RECV there; returns the
    /// relay still to forward it, or lands it.
    fn forward(&mut self, updates: &mut Writers, s: &Schedule, r: Relay) -> Option<Relay> {
        let (here, there) = (r.visits[r.at], r.visits[r.at + 1]);
        let hop = Hop { from: here.npu, to: there.npu, next: here.next, ..r.hop };
        let recv = self.push_hop(hop, vec![r.recv]);
        if r.at + 2 < r.visits.len() {
            return Some(Relay { hop, at: r.at + 1, recv, ..r });
        }
        self.land(updates, s.transfers.at(hop.ti), hop.ti, hop.step, recv);
        None
    }

    /// A copy between slots of one NPU sends nothing: each slot it writes takes on its source's writers.
    fn local_copy(&self, updates: &mut Writers, t: TransferRef<'_>) {
        let a = t.src;
        for (i, &c) in t.chunks.iter().enumerate() {
            updates.entry((a, t.written()[i])).or_default().extend(self.before(a, c));
        }
    }

    /// A reduce between slots of one NPU: a COMP node after its inputs' and partials' writers,
    /// or, when it takes 0 µs, those writers passed on.
    fn local_reduce(&mut self, updates: &mut Writers, t: TransferRef<'_>, ti: usize, step: u32) {
        let a = t.src;
        let us = self.comp_us(t.written().len());
        if us == 0 {
            // A reduce that takes no time is no node (a COMP of 0 µs runs 1 ns
            // in ASTRA-sim): each slot it writes passes on its own input's and
            // partial's writers.
            for (i, &c) in t.chunks.iter().enumerate() {
                let w = t.written()[i];
                let done = updates.entry((a, w)).or_default();
                done.extend(self.before(a, c));
                done.extend(self.before(a, w));
            }
            return;
        }
        let mut deps = Vec::new();
        for (i, &c) in t.chunks.iter().enumerate() {
            deps.extend(self.before(a, c));
            deps.extend(self.before(a, t.written()[i]));
        }
        let comp = self.push_comp(a, format!("REDUCE_s{step}_t{ti}"), deps, us);
        for &w in t.written() {
            updates.entry((a, w)).or_default().push(comp);
        }
    }

    /// A hop: a SEND at `from` after `deps` and the previous SEND over its first link, and a
    /// RECV at `to`, whose id it returns.
    fn push_hop(&mut self, hop: Hop, deps: Vec<u64>) -> u64 {
        self.push_send(hop, deps);
        self.push_recv(hop)
    }

    /// A transfer's last hop has arrived (`recv`): for a reduce that takes time, a COMP after
    /// the RECV; the slots written wait for the last of them.
    fn land(&mut self, updates: &mut Writers, t: TransferRef<'_>, ti: usize, step: u32, recv: u64) {
        let b = t.dst;
        let comp = self.reduce_after_recv(t, ti, step, recv);
        for &w in t.written() {
            let done = updates.entry((b, w)).or_default();
            match comp {
                Some(comp) => done.push(comp),
                // A reduce that takes no time is no node: readers of the slot wait for its
                // RECV and for what last wrote the partial it combines into.
                None if t.op == Op::Reduce => {
                    done.push(recv);
                    done.extend(self.before(b, w));
                }
                None => done.push(recv),
            }
        }
    }

    /// Appends the SEND of a hop at its NPU, after `deps` (its chunks' writers, or the RECV
    /// of the hop before at a relay) and the previous SEND over the same first link.
    fn push_send(&mut self, h: Hop, mut deps: Vec<u64>) {
        let (a, b, next) = (h.from, h.to, h.next);
        // The link's previous SEND: ccsynth's simulator starts a transfer on a link when the
        // one before it there ends (its whole α + n/β), so waiting for it adds no wait the
        // schedule does not have; without it a runtime issues sends that become ready
        // together in its own order (ASTRA-sim walks them as an unordered set). In
        // `data_deps` too: ASTRA-sim's feeder resolves those alone (chakra 21585d8,
        // src/feeder/et_feeder.cpp).
        let previous = self.last_on_link.get(&(a, next)).copied();
        deps.extend(previous);
        let id = push(&mut self.files[a as usize], format!("SEND_s{}_t{}", h.step, h.ti), COMM_SEND_NODE, deps);
        self.last_on_link.insert((a, next), id);
        let send = self.files[a as usize].last_mut().expect("pushed");
        send.ctrl_deps.extend(previous);
        send.attr = vec![int32("comm_dst", b as i32), int64("comm_size", h.bytes), int32("comm_tag", h.ti as i32)];
    }

    /// Appends the RECV of a hop at its far end and returns its id; it has no dependencies,
    /// since ASTRA-sim moves no data and so it may be posted at once.
    fn push_recv(&mut self, h: Hop) -> u64 {
        let (a, b) = (h.from, h.to);
        let name = format!("RECV_s{}_t{}", h.step, h.ti);
        let recv = push(&mut self.files[b as usize], name, COMM_RECV_NODE, Vec::new());
        let node = self.files[b as usize].last_mut().expect("pushed");
        node.attr = vec![int32("comm_src", a as i32), int64("comm_size", h.bytes), int32("comm_tag", h.ti as i32)];
        recv
    }

    /// For a reduce that takes time, appends its COMP at the destination after `recv` and the
    /// partials' writers and returns its id; `None` for a copy or a reduce of 0 µs.
    fn reduce_after_recv(&mut self, t: TransferRef<'_>, ti: usize, step: u32, recv: u64) -> Option<u64> {
        let b = t.dst;
        let us = self.comp_us(t.written().len());
        if t.op != Op::Reduce || us == 0 {
            return None;
        }
        let mut deps = vec![recv];
        for &w in t.written() {
            deps.extend(self.before(b, w));
        }
        Some(self.push_comp(b, format!("REDUCE_s{step}_t{ti}"), deps, us))
    }

    /// Appends a COMP node of `us` µs at NPU `v` and returns its id.
    fn push_comp(&mut self, v: u32, name: String, deps: Vec<u64>, us: u64) -> u64 {
        let comp = push(&mut self.files[v as usize], name, COMP_NODE, deps);
        self.files[v as usize].last_mut().expect("pushed").duration_micros = us;
        comp
    }

    /// The nodes that last wrote slot `c` of NPU `v` before the current step.
    fn before(&self, v: u32, c: u32) -> Vec<u64> {
        self.writers.get(&(v, c)).cloned().unwrap_or_default()
    }

    /// A reduce's γ time over `slots` chunks, rounded to whole µs (ASTRA-sim's COMP unit).
    fn comp_us(&self, slots: usize) -> u64 {
        ((self.gamma * self.chunk_size_bytes * slots as f64) / 1000.0).round() as u64
    }

    /// Makes a step's writes the current writers, each list sorted and without repeats.
    fn commit(&mut self, updates: Writers) {
        for (key, mut ids) in updates {
            ids.sort_unstable();
            ids.dedup();
            self.writers.insert(key, ids);
        }
    }
}

/// One hop of a transfer (the whole transfer when it relays through no NPU): from NPU `from` to
/// NPU `to`, its first link towards `next`.
#[derive(Clone, Copy)]
struct Hop {
    ti: usize,
    step: u32,
    bytes: i64,
    from: u32,
    to: u32,
    next: u32,
}

/// A relayed transfer between its hops: its last `hop` has reached `visits[at]` (by the RECV
/// `recv` there).
struct Relay {
    hop: Hop,
    visits: Vec<Visit>,
    at: usize,
    recv: u64,
}

/// An NPU a transfer's path visits, and the node the path goes on to from it (its link out).
#[derive(Clone, Copy)]
struct Visit {
    npu: u32,
    next: u32,
}

/// The NPUs a network transfer's path visits, ends included (switches are cut through); a
/// local move's one NPU.
fn npu_visits(s: &Schedule, t: TransferRef<'_>) -> Vec<Visit> {
    if t.is_local() {
        return vec![Visit { npu: t.src, next: t.src }];
    }
    match t.path_nodes() {
        Some(p) => (0..p.len())
            .filter(|&i| s.topology.is_npu(p[i] as usize))
            .map(|i| Visit { npu: p[i], next: p.get(i + 1).copied().unwrap_or(t.dst) })
            .collect(),
        None => vec![Visit { npu: t.src, next: t.dst }, Visit { npu: t.dst, next: t.dst }],
    }
}

/// The fewest bytes a message may carry so that ASTRA-sim holds its link at least 1 ns.
fn min_message_bytes(s: &Schedule) -> i64 {
    // ASTRA-sim holds a link floor(bytes / bandwidth) ns for a message, and a hold of 0 ns
    // schedules an event at the current time, which aborts it (its EventQueue asserts): a
    // message carries more than the fastest link moves in 1 ns (GB/s of 10^9 B are B/ns; one
    // byte more than the whole part, against the rounding of the exported 2^30-B bandwidth).
    let fastest = s.topology.links().iter().map(|l| l.bandwidth_gb_per_s).fold(1.0, f64::max);
    (fastest.floor() + 1.0).min(i64::MAX as f64) as i64
}

/// Appends each NPU's trace file; an idle NPU gets a single COMP node of 0 µs, since
/// ASTRA-sim refuses a file without a node free of dependencies.
fn push_traces(out: &mut Vec<(String, Vec<u8>)>, prefix: &str, files: Vec<Vec<Node>>) {
    for (v, nodes) in files.into_iter().enumerate() {
        out.push((format!("{prefix}.{v}.et"), trace_bytes(nodes)));
    }
}

/// One NPU's trace file from its nodes (an idle NPU's: one COMP node of 0 µs).
fn trace_bytes(mut nodes: Vec<Node>) -> Vec<u8> {
    if nodes.is_empty() {
        push(&mut nodes, "IDLE".into(), COMP_NODE, Vec::new());
    }
    encode(&nodes)
}

/// Appends each NPU's workload file and returns the system configuration key that runs it.
fn push_workloads(out: &mut Vec<(String, Vec<u8>)>, s: &Schedule, prefix: &str) -> &'static str {
    // The workload: one collective node per NPU. The custom path ignores its size and replays
    // the traces; a kind without a key of its own runs under all-reduce's.
    let (comm_type, key) = match s.collective.kind {
        CollectiveKind::AllGather => (2, "all-gather-implementation-custom"),
        CollectiveKind::ReduceScatter => (7, "reduce-scatter-implementation-custom"),
        CollectiveKind::AllToAll => (6, "all-to-all-implementation-custom"),
        _ => (0, "all-reduce-implementation-custom"),
    };
    let size = s.collective.size_bytes.min(i64::MAX as u64) as i64;
    let workload = Node {
        id: 0,
        name: "collective".into(),
        r#type: COMM_COLL_NODE,
        attr: vec![int64("comm_type", comm_type), int64("comm_size", size), bool_attr("is_cpu_op", false)],
        ..Default::default()
    };
    for v in 0..s.topology.npus() {
        out.push((format!("{prefix}.workload.{v}.et"), encode(std::slice::from_ref(&workload))));
    }
    key
}

/// Appends the system and memory configurations and returns the system's custom-collective
/// line, `key` naming the traces by `dir`/`prefix` (or the bare prefix).
fn push_configs(out: &mut Vec<(String, Vec<u8>)>, prefix: &str, dir: Option<&str>, key: &str) -> String {
    let path = match dir {
        Some(d) => format!("{}/{prefix}", d.trim_end_matches('/')),
        None => prefix.to_string(),
    };
    let system_key = format!("\"{key}\": [{}]", json_string(&path));
    let system =
        format!("{{\n  \"scheduling-policy\": \"FIFO\",\n  \"preferred-dataset-splits\": 1,\n  {system_key}\n}}\n");
    out.push((format!("{prefix}.system.json"), system.into_bytes()));
    out.push((format!("{prefix}.memory.json"), b"{\"memory-type\": \"NO_MEMORY_EXPANSION\"}\n".to_vec()));
    system_key
}

/// Appends the network file when ASTRA-sim's congestion-aware backend has the topology and
/// returns its name, or why it has none.
fn push_network(out: &mut Vec<(String, Vec<u8>)>, s: &Schedule, prefix: &str) -> Result<String, String> {
    network_yaml(s).map(|yaml| {
        let name = format!("{prefix}.network.yml");
        out.push((name.clone(), yaml.into_bytes()));
        name
    })
}

/// A prefix that is a plain file name (it names files in a directory and in an archive).
fn check_prefix(prefix: &str) -> Result<(), ChakraError> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 64
        && !prefix.starts_with('.')
        && prefix.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok { Ok(()) } else { Err(ChakraError::Prefix { prefix: prefix.chars().take(80).collect() }) }
}

/// Appends a node with the next id of its file and returns the id.
fn push(nodes: &mut Vec<Node>, name: String, r#type: i32, mut data_deps: Vec<u64>) -> u64 {
    data_deps.sort_unstable();
    data_deps.dedup();
    let id = nodes.len() as u64;
    nodes.push(Node { id, name, r#type, data_deps, ..Default::default() });
    id
}

fn int32(name: &str, v: i32) -> AttributeProto {
    AttributeProto { name: name.into(), value: Some(attribute_proto::Value::Int32Val(v)), ..Default::default() }
}

fn int64(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: name.into(), value: Some(attribute_proto::Value::Int64Val(v)), ..Default::default() }
}

fn bool_attr(name: &str, v: bool) -> AttributeProto {
    AttributeProto { name: name.into(), value: Some(attribute_proto::Value::BoolVal(v)), ..Default::default() }
}

/// One file: the metadata, then the nodes, each length-delimited.
fn encode(nodes: &[Node]) -> Vec<u8> {
    let mut buf = Vec::new();
    let meta = GlobalMetadata { version: VERSION.into(), attr: Vec::new() };
    meta.encode_length_delimited(&mut buf).expect("a Vec grows");
    for n in nodes {
        n.encode_length_delimited(&mut buf).expect("a Vec grows");
    }
    buf
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

#[cfg(test)]
mod tests;
