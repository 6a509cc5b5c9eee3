//! An independent interpreter of MSCCL++ JSON execution plans: a strict reader of the format the
//! executor loads, a symbolic replay of several launches of every gpu under several thread-block
//! interleavings with a vector-clock race detector, and the postcondition of each collective. It
//! is written from the format's description and the kernel's semantics only and shares no code
//! with ccsynth's exporter, so that a bug in one is not mirrored by the other.

use crate::link_order::{Sent, contributors};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use serde_json::{Map, Value as Json, json};

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// How the scheduler picks the next thread block among the runnable ones.
#[derive(Clone, Copy, Debug)]
pub enum Policy {
    /// Cycle through (gpu, tb) in order, starting after the one run last.
    RoundRobin,
    /// Always the last runnable (gpu, tb): the highest gpus run ahead as far as they can.
    Reverse,
    /// A uniformly random runnable thread block from a seeded SplitMix64 (reproducible).
    Random(u64),
}

pub const POLICIES: [Policy; 5] =
    [Policy::RoundRobin, Policy::Reverse, Policy::Random(1), Policy::Random(2), Policy::Random(3)];

/// Thread blocks a gpu may have: all must be resident at once, because blocks spin on each other.
pub const MAX_TBS: usize = 108;

/// One replay configuration.
#[derive(Clone, Copy, Debug)]
pub struct Mode {
    /// Alias input and output as the runtime's in-place tests do (see `layout`).
    pub in_place: bool,
    pub policy: Policy,
    /// Launches of every gpu (at least 1). A gpu starts its next launch when its own thread
    /// blocks finished the previous one; other gpus may still be in an earlier launch.
    pub launches: usize,
    /// Most thread blocks a gpu may have.
    pub max_tbs: usize,
}

/// Parses strictly, runs `mode.launches` launches of every GPU under the policy, and checks
/// races, the per-launch balance of signals and semaphores, deadlock freedom and the
/// collective's postcondition after every launch.
pub fn replay(json: &str, mode: Mode) -> Result<(), String> {
    run(&parse(json, mode.max_tbs)?, mode).map(drop)
}

/// `replay`, returning every put of the first launch in each thread block's order (`link_order`).
pub fn replay_logged(json: &str, mode: Mode) -> Result<Vec<Sent>, String> {
    run(&parse(json, mode.max_tbs)?, mode)
}

/// Every policy in POLICIES × in place and out of place, 2 launches each, max_tbs = MAX_TBS.
/// Err names the mode that failed.
pub fn replay_all(json: &str) -> Result<(), String> {
    let plan = parse(json, MAX_TBS)?;
    for in_place in [false, true] {
        for policy in POLICIES {
            let mode = Mode { in_place, policy, launches: 2, max_tbs: MAX_TBS };
            let placement = if in_place { "in place" } else { "out of place" };
            run(&plan, mode).map_err(|e| format!("{placement}, policy {policy:?}, 2 launches: {e}"))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The plan, read strictly
// ---------------------------------------------------------------------------------------------

const MAX_OPS: usize = 64;
const MAX_TB_CHANNELS: usize = 16;
const MAX_TB_REMOTE_BUFFERS: usize = 16;
const MAX_OP_CHANNELS: usize = 8;
const MAX_OP_BUFFERS: usize = 10;
const MAX_OP_SEMAPHORES: usize = 16;
const MAX_THREADS: usize = 1024;

/// Buffers and channel types are indices into these.
const BUFS: [&str; 3] = ["i", "o", "s"];
const CHANS: [&str; 2] = ["memory", "port"];
const IN: usize = 0;
const OUT: usize = 1;
const MEM: usize = 0;
const PORT: usize = 1;
const COLLS: [&str; 4] = ["allreduce", "allgather", "reducescatter", "alltoall"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coll {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
}

/// `size` chunks from `index` of buffer `buf` of `gpu`.
#[derive(Clone, Copy, Debug)]
struct Range {
    gpu: usize,
    buf: usize,
    index: usize,
    size: usize,
}

/// One chunk: (gpu, buffer, index).
type Loc = (usize, usize, usize);
/// A channel of the gpu running the op: (type, global id).
type End = (usize, usize);

impl Range {
    fn at(self, p: usize) -> Loc {
        (self.gpu, self.buf, self.index + p)
    }
}

/// An op after validation. In the Vec-carrying variants, entry i is handled by thread i.
enum Kind {
    Nop,
    Signal(Vec<End>),
    Wait(Vec<End>),
    /// The channels actually flushed: the kernel flushes channel_ids[i] for i < dst_buff.len().
    Flush(Vec<End>),
    Copy(Range, Range),
    Reduce(Vec<Range>, Range),
    /// (local source, remote destination) pairs, copied by all threads.
    MemPut(Vec<(Range, Range)>),
    /// put / pws / pwsf on port channels: (channel, source, destination) per thread; signal; flush.
    PortPut(Vec<(End, Range, Range)>, bool, bool),
    SemRelease(Vec<usize>),
    SemAcquire(Vec<usize>),
}

struct Op {
    name: &'static str,
    kind: Kind,
}

struct Gpu {
    sizes: [usize; 3],
    /// Per channel type, the peer of each global channel id.
    peers: [Vec<usize>; 2],
    /// Per channel type, the global id of the paired channel at the peer.
    paired: [Vec<usize>; 2],
    /// The remote buffers this gpu may access: (rank, buffer, access channel types).
    remote: Vec<(usize, usize, Vec<usize>)>,
    sems: Vec<i64>,
    tbs: Vec<Vec<Op>>,
}

struct Plan {
    coll: Coll,
    gpus: Vec<Gpu>,
}

const TOP_FIELDS: &str = "name collective protocol inplace num_threads_per_block reuse_resources \
    use_double_scratch_buffer buffer_alignment min_message_size max_message_size gpus";
const GPU_FIELDS: &str = "id input_chunks output_chunks scratch_chunks channels remote_buffers threadblocks semaphores";
const OP_FIELDS: &str = "name channel_type channel_ids src_buff dst_buff semaphore_ids barrier_id num_threadblocks";

/// A JSON object with its path, for messages.
struct Obj<'a> {
    map: &'a Map<String, Json>,
    at: String,
}

impl<'a> Obj<'a> {
    /// `v` as an object whose keys are all in `keys` (space-separated).
    fn new(v: &'a Json, at: String, keys: &str) -> Result<Obj<'a>, String> {
        let map = v.as_object().ok_or_else(|| format!("{at}: expected an object, got {v}"))?;
        match map.keys().find(|k| !keys.split(' ').any(|key| key == k.as_str())) {
            Some(k) => Err(format!("{at}: unknown field `{k}` (expected some of: {keys})")),
            None => Ok(Obj { map, at }),
        }
    }

    fn err<T>(&self, what: impl fmt::Display) -> Result<T, String> {
        Err(format!("{}: {what}", self.at))
    }

    fn get(&self, key: &str) -> Result<&'a Json, String> {
        self.map.get(key).ok_or_else(|| format!("{}: missing field `{key}`", self.at))
    }

    fn typed<T>(&self, key: &str, what: &str, f: impl Fn(&'a Json) -> Option<T>) -> Result<T, String> {
        let v = self.get(key)?;
        f(v).ok_or_else(|| format!("{}: {key} should be {what}, got {v}", self.at))
    }

    fn uint(&self, key: &str) -> Result<usize, String> {
        self.typed(key, "a non-negative integer", as_uint)
    }

    fn text(&self, key: &str) -> Result<&'a str, String> {
        self.typed(key, "a string", Json::as_str)
    }

    fn list(&self, key: &str) -> Result<&'a [Json], String> {
        self.typed(key, "an array", |v| v.as_array().map(Vec::as_slice))
    }

    /// An optional list: empty when absent.
    fn opt_list(&self, key: &str) -> Result<&'a [Json], String> {
        if self.map.contains_key(key) { self.list(key) } else { Ok(&[]) }
    }

    fn uints(&self, key: &str) -> Result<Vec<usize>, String> {
        let bad = |v: &Json| format!("{}: {key} should hold non-negative integers, got {v}", self.at);
        self.opt_list(key)?.iter().map(|v| as_uint(v).ok_or_else(|| bad(v))).collect()
    }

    /// The index of the string `key` in `names`.
    fn pick(&self, key: &str, names: &[&str]) -> Result<usize, String> {
        pick(self.get(key)?, names, &format!("{}: {key}", self.at))
    }

    /// The elements of the list `key` (optional or required) as objects with fields `keys`.
    fn objs(&self, key: &str, keys: &str, optional: bool) -> Result<Vec<Obj<'a>>, String> {
        let values = if optional { self.opt_list(key)? } else { self.list(key)? };
        values.iter().enumerate().map(|(i, v)| Obj::new(v, format!("{}: {key}[{i}]", self.at), keys)).collect()
    }
}

fn as_uint(v: &Json) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

fn pick(v: &Json, names: &[&str], at: &str) -> Result<usize, String> {
    let found = v.as_str().and_then(|t| names.iter().position(|n| *n == t));
    found.ok_or_else(|| format!("{at}: {v} is not one of {}", names.join(", ")))
}

fn parse(text: &str, max_tbs: usize) -> Result<Plan, String> {
    let root: Json = serde_json::from_str(text).map_err(|e| format!("the plan is not valid JSON: {e}"))?;
    let top = Obj::new(&root, "the plan".into(), TOP_FIELDS)?;
    top.text("name")?;
    let coll =
        [Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll][top.pick("collective", &COLLS)?];
    if top.pick("protocol", &["Simple", "LL"])? == 1 {
        return top.err("protocol LL (packets) is not modelled by this interpreter; only Simple is");
    }
    top.typed("inplace", "true or false", Json::as_bool)?;
    let opt_uint = |key: &str| top.map.get(key).map(|_| top.uint(key)).transpose();
    let threads = opt_uint("num_threads_per_block")?.unwrap_or(MAX_THREADS);
    if !(1..=MAX_THREADS).contains(&threads) {
        return top.err(format!("num_threads_per_block = {threads}, expected 1..={MAX_THREADS}"));
    }
    for key in ["reuse_resources", "use_double_scratch_buffer"] {
        if top.map.contains_key(key) && top.typed(key, "true or false", Json::as_bool)? {
            return top.err(format!("{key} = true is not modelled by this interpreter"));
        }
    }
    if opt_uint("buffer_alignment")? == Some(0) {
        return top.err("buffer_alignment must be at least 1");
    }
    if let (Some(min), Some(max)) = (opt_uint("min_message_size")?, opt_uint("max_message_size")?)
        && min > max
    {
        return top.err(format!("min_message_size = {min} is above max_message_size = {max}"));
    }
    let values = top.list("gpus")?;
    let p = values.len();
    if p == 0 {
        return top.err("gpus is empty");
    }
    let objs = values.iter().enumerate().map(|(r, v)| Obj::new(v, format!("gpu {r}"), GPU_FIELDS));
    let objs = objs.collect::<Result<Vec<Obj<'_>>, String>>()?;
    let mut gpus = Vec::with_capacity(p);
    for (r, o) in objs.iter().enumerate() {
        gpus.push(parse_gpu(o, r, p)?);
    }
    pair_channels(&mut gpus)?;
    check_dims(coll, &gpus)?;
    for (r, o) in objs.iter().enumerate() {
        let tbs = o.list("threadblocks")?;
        if tbs.len() > max_tbs {
            return o.err(format!("{} thread blocks, more than max_tbs = {max_tbs} (all must be resident)", tbs.len()));
        }
        let mut parsed = Vec::with_capacity(tbs.len());
        for (j, v) in tbs.iter().enumerate() {
            let tb = Obj::new(v, format!("gpu {r} tb {j}"), "id ops channels remote_buffer_refs")?;
            parsed.push(parse_tb(&tb, j, &gpus, r, threads)?);
        }
        gpus[r].tbs = parsed;
    }
    Ok(Plan { coll, gpus })
}

fn parse_gpu(o: &Obj<'_>, r: usize, p: usize) -> Result<Gpu, String> {
    if o.uint("id")? != r {
        return o.err(format!("id = {}, but gpus[{r}] must have id {r}", o.uint("id")?));
    }
    let sizes = [o.uint("input_chunks")?, o.uint("output_chunks")?, o.uint("scratch_chunks")?];
    let mut peers: [Vec<usize>; 2] = Default::default();
    for c in o.objs("channels", "channel_type connected_to", false)? {
        let t = c.pick("channel_type", &CHANS)?;
        for peer in c.uints("connected_to")? {
            if peer == r || peer >= p {
                return c.err(format!("connected_to {peer}, expected another gpu in 0..{p}"));
            }
            peers[t].push(peer);
        }
    }
    let mut remote = Vec::new();
    for b in o.objs("remote_buffers", "rank type access_channel_types", false)? {
        let rank = b.uint("rank")?;
        if rank == r || rank >= p {
            return b.err(format!("rank {rank}, expected another gpu in 0..{p}"));
        }
        let types = b.list("access_channel_types")?.iter().map(|v| pick(v, &CHANS, &b.at));
        let access = types.collect::<Result<Vec<usize>, String>>()?;
        if let Some(&t) = access.iter().find(|&&t| !peers[t].contains(&rank)) {
            return b.err(format!(
                "accessed over {0} channels, but gpu {r} declares no {0} channel to gpu {rank}",
                CHANS[t]
            ));
        }
        remote.push((rank, b.pick("type", &BUFS)?, access));
    }
    let sems = o.objs("semaphores", "init_value", true)?;
    let sems = sems.iter().map(|s| s.typed("init_value", "an integer", Json::as_i64)).collect::<Result<_, _>>()?;
    Ok(Gpu { sizes, peers, paired: Default::default(), remote, sems, tbs: Vec::new() })
}

/// The k-th channel of type T from a to b pairs with the k-th channel of type T from b to a (in
/// global-id order), so the counts must match.
fn pair_channels(gpus: &mut [Gpu]) -> Result<(), String> {
    let mut all = Vec::with_capacity(gpus.len());
    for (a, ga) in gpus.iter().enumerate() {
        let mut paired: [Vec<usize>; 2] = Default::default();
        for (t, out) in paired.iter_mut().enumerate() {
            for (c, &b) in ga.peers[t].iter().enumerate() {
                let k = ga.peers[t][..c].iter().filter(|&&x| x == b).count();
                let mut back = gpus[b].peers[t].iter().enumerate().filter(|&(_, &x)| x == a).map(|(id, _)| id);
                let Some(id) = back.nth(k) else {
                    // The first k were found for a's earlier channels to b, so b has exactly k.
                    let (ab, ba) = (ga.peers[t].iter().filter(|&&x| x == b).count(), k);
                    return Err(format!(
                        "mismatched {} channels: gpu {a} declares {ab} to gpu {b} but gpu {b} declares {ba} to gpu {a}",
                        CHANS[t]
                    ));
                };
                out.push(id);
            }
        }
        all.push(paired);
    }
    for (gpu, paired) in gpus.iter_mut().zip(all) {
        gpu.paired = paired;
    }
    Ok(())
}

/// The buffer shapes each collective's postcondition (and in-place aliasing) needs: the same
/// [input_chunks, output_chunks] on every gpu, none zero.
fn check_dims(coll: Coll, gpus: &[Gpu]) -> Result<(), String> {
    let (p, [i, o, _]) = (gpus.len(), gpus[0].sizes);
    let want = match coll {
        Coll::AllReduce => [i, i],
        Coll::AllGather => [i, p * i],
        Coll::ReduceScatter => [p * o, o],
        Coll::AllToAll => [i / p * p, i / p * p],
    };
    match gpus.iter().position(|gpu| gpu.sizes[..2] != want || want.contains(&0)) {
        Some(r) => Err(format!(
            "{}: gpu {r} has [input_chunks, output_chunks] = {:?}, expected {want:?}",
            COLLS[coll as usize],
            &gpus[r].sizes[..2]
        )),
        None => Ok(()),
    }
}

/// What an op's validation needs to know about its thread block and gpu.
struct TbCtx<'a> {
    gpus: &'a [Gpu],
    r: usize,
    threads: usize,
    /// Per channel type, the tb's channel list (global ids), concatenated in file order.
    chans: [Vec<usize>; 2],
    /// Per access type, the tb's remote buffer list (indices into the gpu's remote_buffers).
    refs: [Vec<usize>; 2],
}

fn parse_tb(o: &Obj<'_>, j: usize, gpus: &[Gpu], r: usize, threads: usize) -> Result<Vec<Op>, String> {
    if o.uint("id")? != j {
        return o.err(format!("id = {}, but threadblocks[{j}] must have id {j}", o.uint("id")?));
    }
    let gpu = &gpus[r];
    let mut chans: [Vec<usize>; 2] = Default::default();
    for c in o.objs("channels", "channel_type channel_ids", false)? {
        let t = c.pick("channel_type", &CHANS)?;
        for id in c.uints("channel_ids")? {
            if id >= gpu.peers[t].len() {
                return c.err(format!(
                    "channel {id}, but gpu {r} declares {} {} channel(s)",
                    gpu.peers[t].len(),
                    CHANS[t]
                ));
            }
            chans[t].push(id);
        }
    }
    let mut refs: [Vec<usize>; 2] = Default::default();
    for b in o.objs("remote_buffer_refs", "access_channel_type remote_buffer_ids", true)? {
        let t = b.pick("access_channel_type", &CHANS)?;
        for id in b.uints("remote_buffer_ids")? {
            if !gpu.remote.get(id).is_some_and(|rb| rb.2.contains(&t)) {
                return b.err(format!(
                    "remote buffer {id} is not declared by gpu {r} or does not list {} in its access_channel_types",
                    CHANS[t]
                ));
            }
            refs[t].push(id);
        }
    }
    if let Some(t) = (0..2).find(|&t| chans[t].len() > MAX_TB_CHANNELS || refs[t].len() > MAX_TB_REMOTE_BUFFERS) {
        return o.err(format!("more than {MAX_TB_CHANNELS} {} channels or remote buffer ids", CHANS[t]));
    }
    let ops = o.list("ops")?;
    if ops.len() > MAX_OPS {
        return o.err(format!("{} ops, more than the limit of {MAX_OPS} per thread block", ops.len()));
    }
    let tb = TbCtx { gpus, r, threads, chans, refs };
    ops.iter().enumerate().map(|(k, v)| parse_op(&Obj::new(v, format!("{} op {k}", o.at), OP_FIELDS)?, &tb)).collect()
}

/// The ops this interpreter models, with the fields each may carry besides `name`.
const OPS: [(&str, &str); 11] = [
    ("nop", ""),
    ("signal", "channel_type channel_ids"),
    ("wait", "channel_type channel_ids"),
    ("flush", "channel_type channel_ids src_buff dst_buff"),
    ("put", "channel_type channel_ids src_buff dst_buff"),
    ("pws", "channel_type channel_ids src_buff dst_buff"),
    ("pwsf", "channel_type channel_ids src_buff dst_buff"),
    ("copy", "channel_type src_buff dst_buff"),
    ("re", "channel_type src_buff dst_buff"),
    ("sem_release", "semaphore_ids"),
    ("sem_acquire", "semaphore_ids"),
];

fn parse_op(o: &Obj<'_>, tb: &TbCtx<'_>) -> Result<Op, String> {
    let gpu = &tb.gpus[tb.r];
    let text = o.text("name")?;
    let Some(&(name, allowed)) = OPS.iter().find(|(name, _)| *name == text) else {
        return o.err(format!("unsupported op {text}"));
    };
    if let Some(key) = o.map.keys().find(|k| k.as_str() != "name" && !allowed.split(' ').any(|f| f == k.as_str())) {
        return o.err(format!("op {name} does not take `{key}`"));
    }
    let chan = match o.map.get("channel_type") {
        Some(v) if v.as_str() != Some("none") => Some(o.pick("channel_type", &CHANS)?),
        _ => None,
    };
    let (ids, sem_ids) = (o.uints("channel_ids")?, o.uints("semaphore_ids")?);
    let (src_values, dst_values) = (o.opt_list("src_buff")?, o.opt_list("dst_buff")?);
    if ids.len() > MAX_OP_CHANNELS
        || sem_ids.len() > MAX_OP_SEMAPHORES
        || src_values.len().max(dst_values.len()) > MAX_OP_BUFFERS
    {
        return o.err(format!(
            "more than {MAX_OP_CHANNELS} channel_ids, {MAX_OP_SEMAPHORES} semaphore_ids or {MAX_OP_BUFFERS} \
             src_buff or dst_buff entries"
        ));
    }
    if ids.len().max(sem_ids.len()) > tb.threads {
        return o.err(format!("needs more threads than num_threads_per_block = {}", tb.threads));
    }
    // Buffer entries: local ones, or remote ones accessed over channel type `remote`.
    let entries = |values: &[Json], key: &str, remote: Option<usize>| -> Result<Vec<Range>, String> {
        let at = |i: usize| format!("{}: {key}[{i}]", o.at);
        values.iter().enumerate().map(|(i, v)| buffer(v, at(i), tb, remote)).collect()
    };
    let ends = |t: usize, idxs: &[usize]| -> Result<Vec<End>, String> {
        let listed = &tb.chans[t];
        let missing = |i: usize| format!("{}: channel index {i}, but the tb lists {} {}", o.at, listed.len(), CHANS[t]);
        idxs.iter().map(|&i| listed.get(i).map(|&id| (t, id)).ok_or_else(|| missing(i))).collect()
    };
    let kind = match (name, chan) {
        ("nop", None) => Kind::Nop,
        ("signal" | "wait", Some(t)) if !ids.is_empty() => {
            let ends = ends(t, &ids)?;
            if name == "signal" { Kind::Signal(ends) } else { Kind::Wait(ends) }
        }
        ("flush", Some(PORT)) => {
            entries(src_values, "src_buff", None)?;
            let n = entries(dst_values, "dst_buff", Some(PORT))?.len();
            if n > ids.len() {
                return o.err("more dst_buff entries than channel_ids");
            }
            Kind::Flush(ends(PORT, &ids[..n])?)
        }
        ("put" | "pws" | "pwsf", Some(t)) => {
            let (srcs, dsts) = (entries(src_values, "src_buff", None)?, entries(dst_values, "dst_buff", Some(t))?);
            if srcs.is_empty() || srcs.len() != dsts.len() || srcs.iter().zip(&dsts).any(|(s, d)| s.size != d.size) {
                return o.err("needs as many src_buff as dst_buff entries (at least one), of equal sizes");
            }
            if t == MEM {
                if name != "put" {
                    return o.err(format!("{name} is a port channel op"));
                }
                if srcs.iter().any(|s| s.buf != srcs[0].buf) {
                    return o.err(
                        "the kernel reads every source of a memory put from src_buff[0]'s buffer, but the types differ",
                    );
                }
                Kind::MemPut(srcs.into_iter().zip(dsts).collect())
            } else {
                let chans = ends(PORT, &ids)?;
                if chans.len() != dsts.len() {
                    return o.err("a port put needs exactly one channel_id per dst_buff entry");
                }
                if let Some(i) = (0..dsts.len()).find(|&i| dsts[i].gpu != gpu.peers[PORT][chans[i].1]) {
                    return o.err(format!("dst_buff[{i}] is not a buffer of the peer of its port channel"));
                }
                // The proxy reads a source through the registered memory: for the input and the
                // output the caller's whole allocation (`Executor::execute` registers the
                // allocation bases), at the plan's offset alone (`execution_kernel.hpp`: srcOffset
                // without the caller's offset in it), so wrong bytes wherever the caller's buffer
                // does not start its allocation. Only scratch starts its own.
                if let Some(i) = (0..srcs.len()).find(|&i| BUFS[srcs[i].buf] != "s") {
                    return o.err(format!(
                        "src_buff[{i}] is in the {} buffer: a port proxy reads it from the start of the caller's allocation, not from the caller's pointer",
                        BUFS[srcs[i].buf]
                    ));
                }
                let sends = chans.into_iter().zip(srcs).zip(dsts).map(|((e, s), d)| (e, s, d)).collect();
                Kind::PortPut(sends, name != "put", name == "pwsf")
            }
        }
        ("copy" | "re", None) => {
            let (srcs, dsts) = (entries(src_values, "src_buff", None)?, entries(dst_values, "dst_buff", None)?);
            let shape = dsts.len() == 1 && !srcs.is_empty() && (name == "re" || srcs.len() == 1);
            if !shape || srcs.iter().any(|s| s.size != dsts[0].size) {
                return o.err("needs one dst_buff entry and one (copy) or more (re) src_buff entries of its size");
            }
            if name == "copy" { Kind::Copy(srcs[0], dsts[0]) } else { Kind::Reduce(srcs, dsts[0]) }
        }
        ("sem_release" | "sem_acquire", None) if !sem_ids.is_empty() => {
            if let Some(s) = sem_ids.iter().find(|&&s| s >= gpu.sems.len()) {
                return o.err(format!("semaphore {s}, but gpu {} declares {}", tb.r, gpu.sems.len()));
            }
            if name == "sem_release" { Kind::SemRelease(sem_ids) } else { Kind::SemAcquire(sem_ids) }
        }
        _ => {
            let chan = chan.map_or("none", |t| CHANS[t]);
            return o
                .err(format!("malformed {name}: channel_type {chan}, channel_ids {ids:?}, semaphore_ids {sem_ids:?}"));
        }
    };
    Ok(Op { name, kind })
}

/// A local entry {type, index, size}, or (when `remote` names the op's channel type) a remote
/// entry {buffer_id, index, size} whose buffer_id indexes the tb's remote buffer ids of that type.
fn buffer(v: &Json, at: String, tb: &TbCtx<'_>, remote: Option<usize>) -> Result<Range, String> {
    let (o, gpu, buf) = match remote {
        None => {
            let o = Obj::new(v, at, "type index size")?;
            let buf = o.pick("type", &BUFS)?;
            (o, tb.r, buf)
        }
        Some(t) => {
            let o = Obj::new(v, at, "buffer_id index size")?;
            let id = o.uint("buffer_id")?;
            let Some(&k) = tb.refs[t].get(id) else {
                let n = tb.refs[t].len();
                return o.err(format!(
                    "buffer_id {id}, but the tb references {n} remote buffer(s) for {} access",
                    CHANS[t]
                ));
            };
            let rb = &tb.gpus[tb.r].remote[k];
            (o, rb.0, rb.1)
        }
    };
    let (index, size, have) = (o.uint("index")?, o.uint("size")?, tb.gpus[gpu].sizes[buf]);
    if size == 0 || index.checked_add(size).is_none_or(|end| end > have) {
        return o.err(format!("{}[{index}..+{size}] is empty or out of bounds: gpu {gpu} has {have} there", BUFS[buf]));
    }
    Ok(Range { gpu, buf, index, size })
}

// ---------------------------------------------------------------------------------------------
// The replay: state
// ---------------------------------------------------------------------------------------------

/// A vector clock over every thread block, every gpu's host (launch boundaries) and every port
/// channel's proxy.
type Clock = Vec<u32>;
/// A chunk's value: the sorted set of (launch, rank, input chunk) contributions it combines.
type Contribs = Vec<(usize, usize, usize)>;
/// A memory cell: (gpu, storage index after in-place aliasing).
type Key = (usize, usize);

fn join(into: &mut [u32], from: &[u32]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

/// Who made an access: `tb` None is the host; `proxy` is the port channel whose proxy it was.
#[derive(Clone, Copy, Debug)]
struct Who {
    gpu: usize,
    tb: Option<usize>,
    op: usize,
    name: &'static str,
    launch: usize,
    proxy: Option<usize>,
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Who { gpu, op, name, launch, .. } = *self;
        match (self.tb, self.proxy) {
            (None, _) => write!(f, "the host (fresh input of gpu {gpu} for launch {launch})"),
            (Some(tb), None) => write!(f, "gpu {gpu} tb {tb} op {op} ({name}) in launch {launch}"),
            (Some(tb), Some(c)) => {
                write!(f, "the proxy of gpu {gpu} port channel {c} (for tb {tb} op {op} ({name}) in launch {launch})")
            }
        }
    }
}

/// An access: the clock slot and tick of whoever made it.
#[derive(Clone, Copy, Debug)]
struct Stamp {
    slot: usize,
    tick: u32,
    who: Who,
}

/// An earlier access that a thread with `clock` has not heard of.
fn unordered(clock: &[u32], earlier: &Stamp) -> bool {
    clock[earlier.slot] < earlier.tick
}

#[derive(Default)]
struct Cell {
    value: Contribs,
    write: Option<Stamp>,
    /// Reads since the last write, at most one per slot (the latest).
    reads: Vec<Stamp>,
}

#[derive(Default)]
struct TbState {
    slot: usize,
    pc: usize,
    /// The tick of this block's accesses (its own entry in every clock below). Bumped whenever
    /// the block's clock is published, so that later accesses are not covered by what was sent.
    epoch: u32,
    /// What every thread of the block knows: data ops run with it.
    all: Clock,
    /// Thread i's clock where it knows more than `all` (after a wait or acquire by thread i).
    lanes: BTreeMap<usize, Clock>,
    /// The first all-thread data op since the last nop.
    dirty: Option<usize>,
    /// Cells touched by all-thread data ops since the last nop: (written, op).
    since_nop: BTreeMap<Key, (bool, usize)>,
}

impl TbState {
    fn lane(&self, i: usize) -> &[u32] {
        self.lanes.get(&i).unwrap_or(&self.all)
    }

    fn lane_mut(&mut self, i: usize) -> &mut Clock {
        let all = &self.all;
        self.lanes.entry(i).or_insert_with(|| all.clone())
    }

    fn bump(&mut self) {
        self.epoch += 1;
        let (slot, epoch) = (self.slot, self.epoch);
        for clock in std::iter::once(&mut self.all).chain(self.lanes.values_mut()) {
            clock[slot] = epoch;
        }
    }

    /// A nop: __syncthreads, after which every thread knows what any thread knew.
    fn sync_block(&mut self) {
        for lane in self.lanes.values() {
            join(&mut self.all, lane);
        }
        self.lanes.clear();
        self.dirty = None;
        self.since_nop.clear();
    }
}

/// The receiving end of a channel: signals not yet waited for, and counts per launch (signals
/// by the sender's launch, waits by the waiter's).
struct EndState {
    queue: VecDeque<Clock>,
    received: Vec<u64>,
    waited: Vec<u64>,
}

struct GpuState {
    /// The current launch, from 1.
    launch: usize,
    done: bool,
    /// Storage index of i[0], o[0], s[0].
    bases: [usize; 3],
    host_slot: usize,
    host_tick: u32,
    /// What the stream knows at the last launch boundary.
    boundary: Clock,
    tbs: Vec<TbState>,
    ends: [Vec<EndState>; 2],
    proxy_base: usize,
    proxies: Vec<Clock>,
    sems: Vec<i64>,
    /// Per semaphore, the join of every release (each acquire reads from an RMW chain of them).
    sem_clocks: Vec<Clock>,
    cells: Vec<Cell>,
}

/// Storage offsets of i, o and s, and the length. In place, as the runtime's tests alias:
/// allreduce and alltoall input = output; allgather input = output[rank·k..]; reducescatter
/// output = input[rank·k..].
fn layout(coll: Coll, g: usize, [i, o, s]: [usize; 3], in_place: bool) -> ([usize; 3], usize) {
    if !in_place {
        return ([0, i, i + o], i + o + s);
    }
    let (ib, ob) = match coll {
        Coll::AllReduce | Coll::AllToAll => (0, 0),
        Coll::AllGather => (g * i, 0),
        Coll::ReduceScatter => (0, g * o),
    };
    let shared = (ib + i).max(ob + o);
    ([ib, ob, shared], shared + s)
}

/// One element of an all-thread data op: the cells it reads and writes, and which thread
/// handles it (entry, element).
struct Elem {
    srcs: Vec<Loc>,
    dst: Loc,
    pos: (usize, usize),
}

fn elements(kind: &Kind) -> Vec<Elem> {
    let one = |src: Range, dst: Range, entry: usize| {
        (0..dst.size).map(move |p| Elem { srcs: vec![src.at(p)], dst: dst.at(p), pos: (entry, p) })
    };
    match kind {
        Kind::Copy(src, dst) => one(*src, *dst, 0).collect(),
        Kind::Reduce(srcs, dst) => (0..dst.size)
            .map(|p| Elem { srcs: srcs.iter().map(|s| s.at(p)).collect(), dst: dst.at(p), pos: (0, p) })
            .collect(),
        Kind::MemPut(pairs) => pairs.iter().enumerate().flat_map(|(i, &(src, dst))| one(src, dst, i)).collect(),
        _ => Vec::new(),
    }
}

/// How one data op touches one cell: the thread position that writes it, and all positions.
#[derive(Default)]
struct Touch {
    write: Option<(usize, usize)>,
    at: BTreeSet<(usize, usize)>,
}

struct Machine<'a> {
    plan: &'a Plan,
    mode: Mode,
    gpus: Vec<GpuState>,
    /// Per launch, the gpus that finished it.
    finished: Vec<usize>,
    /// Gpus signalled since the scheduler last looked.
    signalled: Vec<usize>,
    /// The first launch's puts, in each thread block's order.
    sent: Vec<Sent>,
}

/// The runnable thread blocks: ordered (for round robin and reverse) and in a list (for a
/// uniform random pick).
#[derive(Default)]
struct RunSet {
    ordered: BTreeSet<usize>,
    list: Vec<usize>,
    pos: Vec<Option<usize>>,
}

impl RunSet {
    fn set(&mut self, u: usize, on: bool) {
        match (on, self.pos[u]) {
            (true, None) => {
                self.pos[u] = Some(self.list.len());
                self.list.push(u);
                self.ordered.insert(u);
            }
            (false, Some(i)) => {
                self.list.swap_remove(i);
                if let Some(&moved) = self.list.get(i) {
                    self.pos[moved] = Some(i);
                }
                self.pos[u] = None;
                self.ordered.remove(&u);
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The replay: scheduling, launches and ops
// ---------------------------------------------------------------------------------------------

fn run(plan: &Plan, mode: Mode) -> Result<Vec<Sent>, String> {
    if mode.launches == 0 {
        return Err("mode.launches must be at least 1".into());
    }
    let mut m = Machine::new(plan, mode);
    let units: Vec<(usize, usize)> =
        plan.gpus.iter().enumerate().flat_map(|(g, gpu)| (0..gpu.tbs.len()).map(move |j| (g, j))).collect();
    // The first unit of every gpu: a step changes what can run only on its own gpu and on the
    // gpus it signalled, so only their thread blocks are asked again.
    let mut first = vec![0; plan.gpus.len() + 1];
    for (g, gpu) in plan.gpus.iter().enumerate() {
        first[g + 1] = first[g] + gpu.tbs.len();
    }
    let mut runnable = RunSet { pos: vec![None; units.len()], ..Default::default() };
    let refresh = |m: &Machine<'_>, runnable: &mut RunSet, g: usize| {
        for (u, &(h, j)) in units.iter().enumerate().take(first[g + 1]).skip(first[g]) {
            runnable.set(u, m.ready(h, j));
        }
    };
    for g in 0..plan.gpus.len() {
        m.start_launch(g)?;
        m.settle(g)?;
        refresh(&m, &mut runnable, g);
    }
    let mut picker = Picker { policy: mode.policy, last: None, state: 0 };
    if let Policy::Random(seed) = mode.policy {
        picker.state = seed;
    }
    while !runnable.list.is_empty() {
        let (g, j) = units[picker.pick(&runnable)];
        m.step(g, j)?;
        m.settle(g)?;
        refresh(&m, &mut runnable, g);
        for h in std::mem::take(&mut m.signalled) {
            refresh(&m, &mut runnable, h);
        }
    }
    if m.gpus.iter().any(|gs| !gs.done) {
        return Err(m.deadlock());
    }
    for g in 0..plan.gpus.len() {
        m.check_output(g, mode.launches, "after the last launch")?;
    }
    Ok(m.sent)
}

impl<'a> Machine<'a> {
    fn new(plan: &'a Plan, mode: Mode) -> Machine<'a> {
        let p = plan.gpus.len();
        let ntbs: usize = plan.gpus.iter().map(|gpu| gpu.tbs.len()).sum();
        let nports: usize = plan.gpus.iter().map(|gpu| gpu.peers[PORT].len()).sum();
        let dim = ntbs + p + nports;
        let (mut next_tb, mut next_proxy) = (0, ntbs + p);
        let mut gpus = Vec::with_capacity(p);
        for (g, gpu) in plan.gpus.iter().enumerate() {
            let (bases, len) = layout(plan.coll, g, gpu.sizes, mode.in_place);
            let tbs = (next_tb..next_tb + gpu.tbs.len()).map(|slot| TbState { slot, ..Default::default() }).collect();
            next_tb += gpu.tbs.len();
            // Proxy ticks start at 1: a tick of 0 would look known to every clock.
            let proxies = (next_proxy..next_proxy + gpu.peers[PORT].len())
                .map(|slot| {
                    let mut clock = vec![0; dim];
                    clock[slot] = 1;
                    clock
                })
                .collect();
            let ends = [MEM, PORT].map(|t| {
                let end = || EndState {
                    queue: VecDeque::new(),
                    received: vec![0; mode.launches + 1],
                    waited: vec![0; mode.launches + 1],
                };
                gpu.peers[t].iter().map(|_| end()).collect::<Vec<EndState>>()
            });
            gpus.push(GpuState {
                launch: 1,
                done: false,
                bases,
                host_slot: ntbs + g,
                host_tick: 0,
                boundary: vec![0; dim],
                tbs,
                ends,
                proxy_base: next_proxy,
                proxies,
                sems: gpu.sems.clone(),
                sem_clocks: vec![vec![0; dim]; gpu.sems.len()],
                cells: (0..len).map(|_| Cell::default()).collect(),
            });
            next_proxy += gpu.peers[PORT].len();
        }
        Machine { plan, mode, gpus, finished: vec![0; mode.launches + 1], signalled: Vec::new(), sent: Vec::new() }
    }

    fn key(&self, (g, buf, index): Loc) -> Key {
        (g, self.gpus[g].bases[buf] + index)
    }

    /// The buffer views of a storage cell, e.g. "gpu 1 i[0] = o[1]" in place.
    fn label(&self, (g, idx): Key) -> String {
        let (bases, sizes) = (self.gpus[g].bases, self.plan.gpus[g].sizes);
        let views = (0..3).filter(|&b| (bases[b]..bases[b] + sizes[b]).contains(&idx));
        let views: Vec<String> = views.map(|b| format!("{}[{}]", BUFS[b], idx - bases[b])).collect();
        format!("gpu {g} {}", views.join(" = "))
    }

    /// Can (g, j) run its next op now?
    fn ready(&self, g: usize, j: usize) -> bool {
        let gs = &self.gpus[g];
        let Some(op) = self.plan.gpus[g].tbs[j].get(gs.tbs[j].pc) else { return false };
        // (Asked for every thread block before every op: the common single-channel case
        // without allocating.)
        match &op.kind {
            Kind::Wait(ends) if ends.len() == 1 => !gs.ends[ends[0].0][ends[0].1].queue.is_empty(),
            Kind::Wait(ends) => {
                counts(ends.iter().copied()).into_iter().all(|((t, c), n)| gs.ends[t][c].queue.len() >= n)
            }
            Kind::SemAcquire(ids) if ids.len() == 1 => gs.sems[ids[0]] >= 1,
            Kind::SemAcquire(ids) => {
                counts(ids.iter().map(|&s| (0, s))).into_iter().all(|((_, s), n)| gs.sems[s] >= n as i64)
            }
            _ => true,
        }
    }

    fn deadlock(&self) -> String {
        let mut heads = Vec::new();
        for (g, (gs, gpu)) in self.gpus.iter().zip(&self.plan.gpus).enumerate() {
            for (j, tb) in gs.tbs.iter().enumerate() {
                let Some(op) = gpu.tbs[j].get(tb.pc) else { continue };
                let why: Vec<String> = match &op.kind {
                    Kind::Wait(ends) => ends
                        .iter()
                        .map(|&(t, c)| {
                            let (st, peer) = (&gs.ends[t][c], gpu.peers[t][c]);
                            let (got, waited) = (st.received.iter().sum::<u64>(), st.waited.iter().sum::<u64>());
                            format!(
                                "a signal on {} channel {c} from gpu {peer} ({got} sent, {waited} waited)",
                                CHANS[t]
                            )
                        })
                        .collect(),
                    Kind::SemAcquire(ids) => {
                        ids.iter().map(|&s| format!("semaphore {s} (value {})", gs.sems[s])).collect()
                    }
                    _ => vec!["nothing".to_string()],
                };
                let (pc, name, launch) = (tb.pc, op.name, gs.launch);
                heads.push(format!(
                    "gpu {g} tb {j} op {pc} ({name}) in launch {launch} waits for {}",
                    why.join(" and ")
                ));
            }
        }
        format!("deadlock: nothing can run; {}", heads.join("; "))
    }

    /// Ends every launch of `g` whose thread blocks are all done, starting the next one.
    fn settle(&mut self, g: usize) -> Result<(), String> {
        loop {
            let (gs, gpu) = (&self.gpus[g], &self.plan.gpus[g]);
            if gs.done || gs.tbs.iter().zip(&gpu.tbs).any(|(tb, ops)| tb.pc < ops.len()) {
                return Ok(());
            }
            self.finish_launch(g)?;
            if self.gpus[g].launch == self.mode.launches {
                self.gpus[g].done = true;
            } else {
                self.gpus[g].launch += 1;
                self.start_launch(g)?;
            }
        }
    }

    /// Stream order: a launch starts after the previous one ended; the host writes fresh input.
    fn start_launch(&mut self, g: usize) -> Result<(), String> {
        let gs = &mut self.gpus[g];
        let launch = gs.launch;
        gs.host_tick += 1;
        let mut clock = gs.boundary.clone();
        clock[gs.host_slot] = gs.host_tick;
        let who = Who { gpu: g, tb: None, op: 0, name: "input", launch, proxy: None };
        let stamp = Stamp { slot: gs.host_slot, tick: gs.host_tick, who };
        for tb in &mut gs.tbs {
            let (slot, epoch) = (tb.slot, clock[tb.slot] + 1);
            *tb = TbState { slot, epoch, all: clock.clone(), ..Default::default() };
            tb.all[slot] = epoch;
        }
        let base = gs.bases[IN];
        for c in 0..self.plan.gpus[g].sizes[IN] {
            self.access((g, base + c), true, &clock, stamp)?;
            self.gpus[g].cells[base + c].value = vec![(launch, g, c)];
        }
        Ok(())
    }

    fn finish_launch(&mut self, g: usize) -> Result<(), String> {
        let (gs, gpu) = (&self.gpus[g], &self.plan.gpus[g]);
        let launch = gs.launch;
        // The kernel's end: every thread's clock (but not the proxies'), and the launch's start.
        let mut end = gs.boundary.clone();
        end[gs.host_slot] = gs.host_tick;
        for tb in &gs.tbs {
            for clock in std::iter::once(&tb.all).chain(tb.lanes.values()) {
                join(&mut end, clock);
            }
        }
        if let Some(s) = (0..gs.sems.len()).find(|&s| gs.sems[s] != gpu.sems[s]) {
            let (value, init) = (gs.sems[s], gpu.sems[s]);
            return Err(format!(
                "unbalanced semaphore at the end of launch {launch}: gpu {g} semaphore {s} is {value}, not {init}"
            ));
        }
        let late =
            gs.cells.iter().enumerate().find_map(|(idx, c)| c.write.filter(|w| unordered(&end, w)).map(|w| (idx, w)));
        if let Some((idx, w)) = late {
            return Err(format!(
                "gpu {g} ended launch {launch}, but the write into {} by {} is not ordered before that end (no wait \
                 of gpu {g} covers it)",
                self.label((g, idx)),
                w.who
            ));
        }
        self.check_output(g, launch, &format!("at the end of launch {launch}"))?;
        self.gpus[g].boundary = end;
        self.finished[launch] += 1;
        if self.finished[launch] < self.gpus.len() {
            return Ok(());
        }
        // Every gpu has ended this launch: every channel end waited for all it was sent in it.
        for (h, hs) in self.gpus.iter().enumerate() {
            for (t, ends) in hs.ends.iter().enumerate() {
                let bad = ends.iter().position(|st| st.received[launch] != st.waited[launch]);
                if let Some(c) = bad {
                    let (st, peer) = (&ends[c], self.plan.gpus[h].peers[t][c]);
                    return Err(format!(
                        "unbalanced signals in launch {launch}: gpu {h} {} channel {c} (from gpu {peer}) received {} \
                         signal(s) but was waited on {} time(s)",
                        CHANS[t], st.received[launch], st.waited[launch]
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_output(&self, g: usize, launch: usize, when: &str) -> Result<(), String> {
        let (p, [i, o, _]) = (self.plan.gpus.len(), self.plan.gpus[g].sizes);
        for j in 0..o {
            let expected: Contribs = match self.plan.coll {
                Coll::AllReduce => (0..p).map(|q| (launch, q, j)).collect(),
                Coll::AllGather => vec![(launch, j / i, j % i)],
                Coll::ReduceScatter => (0..p).map(|q| (launch, q, g * o + j)).collect(),
                Coll::AllToAll => vec![(launch, j / (o / p), g * (o / p) + j % (o / p))],
            };
            let got = &self.gpus[g].cells[self.gpus[g].bases[OUT] + j].value;
            if *got != expected {
                return Err(format!(
                    "postcondition of {} fails {when}: gpu {g} o[{j}] should be {} but is {}",
                    COLLS[self.plan.coll as usize],
                    show(&expected),
                    show(got)
                ));
            }
        }
        Ok(())
    }

    fn step(&mut self, g: usize, j: usize) -> Result<(), String> {
        let plan = self.plan;
        let pc = self.gpus[g].tbs[j].pc;
        let op = &plan.gpus[g].tbs[j][pc];
        let who = Who { gpu: g, tb: Some(j), op: pc, name: op.name, launch: self.gpus[g].launch, proxy: None };
        match &op.kind {
            Kind::Nop => self.gpus[g].tbs[j].sync_block(),
            Kind::Signal(ends) => {
                self.check_clean(g, j, who)?;
                for (lane, &end) in ends.iter().enumerate() {
                    self.signal(g, j, lane, end);
                }
            }
            Kind::Wait(ends) => {
                // The n-th wait on a channel end returns after the n-th signal and acquires it.
                let gs = &mut self.gpus[g];
                for (lane, &(t, c)) in ends.iter().enumerate() {
                    let st = &mut gs.ends[t][c];
                    let clock = st.queue.pop_front().expect("ready: a signal is pending");
                    st.waited[gs.launch] += 1;
                    join(gs.tbs[j].lane_mut(lane), &clock);
                }
            }
            Kind::Flush(ends) => {
                for (lane, &(_, c)) in ends.iter().enumerate() {
                    self.flush(g, j, lane, c);
                }
            }
            Kind::Copy(..) | Kind::Reduce(..) | Kind::MemPut(_) => self.data(g, j, who, &elements(&op.kind))?,
            Kind::PortPut(sends, signal, flush) => {
                if *signal {
                    self.check_clean(g, j, who)?;
                }
                for (lane, &send) in sends.iter().enumerate() {
                    self.port_put(g, j, who, lane, send)?;
                    let (end, ..) = send;
                    if *signal {
                        self.signal(g, j, lane, end);
                    }
                    if *flush {
                        self.flush(g, j, lane, end.1);
                    }
                }
            }
            Kind::SemRelease(ids) => {
                self.check_clean(g, j, who)?;
                let gs = &mut self.gpus[g];
                for (lane, &s) in ids.iter().enumerate() {
                    join(&mut gs.sem_clocks[s], gs.tbs[j].lane(lane));
                    gs.tbs[j].bump();
                    gs.sems[s] += 1;
                }
            }
            Kind::SemAcquire(ids) => {
                let gs = &mut self.gpus[g];
                for (lane, &s) in ids.iter().enumerate() {
                    gs.sems[s] -= 1;
                    join(gs.tbs[j].lane_mut(lane), &gs.sem_clocks[s]);
                }
            }
        }
        self.gpus[g].tbs[j].pc += 1;
        Ok(())
    }

    /// A signal or release is sent by one thread: after an all-thread data op it needs a nop.
    fn check_clean(&self, g: usize, j: usize, at: Who) -> Result<(), String> {
        match self.gpus[g].tbs[j].dirty {
            Some(op) => Err(format!(
                "{at}: signal after a data op without a nop: op {op} of this thread block moved data with all its \
                 threads since the last nop, but a signal or release is sent by one thread and covers only its share"
            )),
            None => Ok(()),
        }
    }

    /// Thread `lane` signals channel (t, c): the paired end at the peer receives its clock.
    fn signal(&mut self, g: usize, j: usize, lane: usize, (t, c): End) {
        let gs = &mut self.gpus[g];
        let clock = if t == MEM {
            gs.tbs[j].lane(lane).to_vec()
        } else {
            // The proxy sends the signal after everything pushed before it on this channel.
            join(&mut gs.proxies[c], gs.tbs[j].lane(lane));
            let clock = gs.proxies[c].clone();
            gs.proxies[c][gs.proxy_base + c] += 1;
            clock
        };
        gs.tbs[j].bump();
        let launch = gs.launch;
        let (peer, paired) = (self.plan.gpus[g].peers[t][c], self.plan.gpus[g].paired[t][c]);
        let end = &mut self.gpus[peer].ends[t][paired];
        end.queue.push_back(clock);
        end.received[launch] += 1;
        self.signalled.push(peer);
    }

    /// Thread `lane` waits until the proxy of port channel `c` completed what it was given.
    fn flush(&mut self, g: usize, j: usize, lane: usize, c: usize) {
        let gs = &mut self.gpus[g];
        join(gs.tbs[j].lane_mut(lane), &gs.proxies[c]);
        gs.proxies[c][gs.proxy_base + c] += 1;
    }

    /// An all-thread data op (copy, re, memory put): its elements are split across the threads.
    fn data(&mut self, g: usize, j: usize, who: Who, elems: &[Elem]) -> Result<(), String> {
        let mut touched: BTreeMap<Key, Touch> = BTreeMap::new();
        for e in elems {
            for &src in &e.srcs {
                touched.entry(self.key(src)).or_default().at.insert(e.pos);
            }
            let t = touched.entry(self.key(e.dst)).or_default();
            t.write = Some(e.pos);
            t.at.insert(e.pos);
        }
        // A cell written by one thread must not be touched by another within the op.
        let shifted = touched.iter().find(|(_, t)| t.write.is_some_and(|w| t.at.iter().any(|&q| q != w)));
        if let Some((&key, _)) = shifted {
            let cell = self.label(key);
            return Err(format!("{who}: {cell} is written by one thread and used by another (overlapping ranges)"));
        }
        let tb = &self.gpus[g].tbs[j];
        let conflict = touched.iter().find_map(|(key, t)| {
            let &(wrote, op) = tb.since_nop.get(key)?;
            (wrote || t.write.is_some()).then_some((*key, op))
        });
        if let Some((key, op)) = conflict {
            return Err(format!(
                "{who}: op {op} of the same thread block also accessed {} with no nop between them and one of them \
                 writes (different threads handle the two ops)",
                self.label(key)
            ));
        }
        let tb = &mut self.gpus[g].tbs[j];
        for (&key, t) in &touched {
            let entry = tb.since_nop.entry(key).or_insert((false, who.op));
            if t.write.is_some() {
                *entry = (true, who.op);
            }
        }
        tb.dirty = tb.dirty.or(Some(who.op));
        let (clock, stamp) = (tb.all.clone(), Stamp { slot: tb.slot, tick: tb.epoch, who });
        for (&key, t) in &touched {
            self.access(key, t.write.is_some(), &clock, stamp)?;
        }
        // Every source is read before anything is written.
        let mut results = Vec::with_capacity(elems.len());
        for e in elems {
            let mut value = Contribs::new();
            for &src in &e.srcs {
                let (h, idx) = self.key(src);
                value = union(&value, &self.gpus[h].cells[idx].value)
                    .map_err(|c| format!("{who}: double count: element {} gets contribution {c:?} twice", e.pos.1))?;
            }
            results.push((self.key(e.dst), value));
        }
        if who.launch == 1 {
            self.log_puts(g, j, results.iter().map(|((h, _), value)| (*h, value)));
        }
        for ((h, idx), value) in results {
            self.gpus[h].cells[idx].value = value;
        }
        Ok(())
    }

    /// Thread `lane` pushes a put to its port channel's proxy, which reads the source and writes
    /// the peer's memory (modelled as landing now, with the proxy's clock).
    fn port_put(&mut self, g: usize, j: usize, who: Who, lane: usize, send: (End, Range, Range)) -> Result<(), String> {
        let ((_, c), src, dst) = send;
        for p in 0..src.size {
            let key = self.key(src.at(p));
            if let Some(&(true, op)) = self.gpus[g].tbs[j].since_nop.get(&key) {
                let cell = self.label(key);
                return Err(format!(
                    "{who}: the port put reads {cell}, which op {op} wrote with all threads, no nop between"
                ));
            }
        }
        let gs = &mut self.gpus[g];
        join(&mut gs.proxies[c], gs.tbs[j].lane(lane));
        gs.tbs[j].bump();
        let (slot, clock) = (gs.proxy_base + c, gs.proxies[c].clone());
        let stamp = Stamp { slot, tick: clock[slot], who: Who { proxy: Some(c), ..who } };
        let mut values = Vec::with_capacity(src.size);
        for p in 0..src.size {
            let (h, idx) = self.key(src.at(p));
            self.access((h, idx), false, &clock, stamp)?;
            values.push(self.gpus[h].cells[idx].value.clone());
        }
        if who.launch == 1 {
            self.log_puts(g, j, values.iter().map(|value| (dst.gpu, value)));
        }
        for (p, value) in values.into_iter().enumerate() {
            let (h, idx) = self.key(dst.at(p));
            self.access((h, idx), true, &clock, stamp)?;
            self.gpus[h].cells[idx].value = value;
        }
        Ok(())
    }

    /// Logs what an op of (g, j) wrote into other gpus' memory, one send per peer, keyed by the
    /// connection alone: a lane of a plan may run in several thread blocks in turn (chained by
    /// semaphores), and its order is the connection's.
    fn log_puts<'v>(&mut self, g: usize, _j: usize, written: impl Iterator<Item = (usize, &'v Contribs)>) {
        let mut per_peer: Vec<Sent> = Vec::new();
        for (h, value) in written.filter(|&(h, _)| h != g) {
            let ranks = contributors(value.iter().map(|&(_, r, _)| r));
            match per_peer.iter_mut().find(|x| x.to == h) {
                Some(x) => x.cells.push(ranks),
                None => per_peer.push(Sent { from: g, to: h, block: 0, cells: vec![ranks] }),
            }
        }
        self.sent.extend(per_peer);
    }

    /// The race check: a write must be ordered after the cell's last write and every read since;
    /// a read after the last write.
    fn access(&mut self, key: Key, write: bool, clock: &[u32], stamp: Stamp) -> Result<(), String> {
        let cell = &self.gpus[key.0].cells[key.1];
        let what = if write { "write" } else { "read" };
        if let Some(w) = cell.write.filter(|w| unordered(clock, w)) {
            let cell = self.label(key);
            return Err(format!(
                "race on {cell}: the {what} by {} is not ordered after the write by {}",
                stamp.who, w.who
            ));
        }
        if write && let Some(r) = cell.reads.iter().find(|r| unordered(clock, r)) {
            let cell = self.label(key);
            return Err(format!(
                "race on {cell}: the write by {} is not ordered after the read by {}",
                stamp.who, r.who
            ));
        }
        let cell = &mut self.gpus[key.0].cells[key.1];
        if write {
            cell.write = Some(stamp);
            cell.reads.clear();
        } else if let Some(r) = cell.reads.iter_mut().find(|r| r.slot == stamp.slot) {
            *r = stamp;
        } else {
            cell.reads.push(stamp);
        }
        Ok(())
    }
}

/// How many times each key occurs.
fn counts(keys: impl Iterator<Item = (usize, usize)>) -> BTreeMap<(usize, usize), usize> {
    let mut map = BTreeMap::new();
    for key in keys {
        *map.entry(key).or_insert(0) += 1;
    }
    map
}

/// The sorted union of two sorted sets; Err with an element they share.
fn union(a: &[(usize, usize, usize)], b: &[(usize, usize, usize)]) -> Result<Contribs, (usize, usize, usize)> {
    let mut out: Contribs = a.iter().chain(b).copied().collect();
    out.sort_unstable();
    match out.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(w[0]),
        None => Ok(out),
    }
}

/// A value for messages: {L1:gpu0:c2, ...}, cut short.
fn show(value: &[(usize, usize, usize)]) -> String {
    let parts: Vec<String> = value.iter().take(6).map(|(l, r, c)| format!("L{l}:gpu{r}:c{c}")).collect();
    let more = if value.len() > 6 { format!(", ... {} more", value.len() - 6) } else { String::new() };
    format!("{{{}{more}}}", parts.join(", "))
}

struct Picker {
    policy: Policy,
    last: Option<usize>,
    /// SplitMix64 state.
    state: u64,
}

impl Picker {
    /// One of `runnable` (indices into (gpu, tb) order, not empty).
    fn pick(&mut self, runnable: &RunSet) -> usize {
        let lowest = *runnable.ordered.first().expect("something is runnable");
        let chosen = match self.policy {
            Policy::RoundRobin => {
                self.last.and_then(|l| runnable.ordered.range(l + 1..).next().copied()).unwrap_or(lowest)
            }
            Policy::Reverse => *runnable.ordered.last().expect("something is runnable"),
            Policy::Random(_) => {
                self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = self.state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                runnable.list[((z ^ (z >> 31)) % runnable.list.len() as u64) as usize]
            }
        };
        self.last = Some(chosen);
        chosen
    }
}

// ---------------------------------------------------------------------------------------------
// Tests of the interpreter itself
// ---------------------------------------------------------------------------------------------

fn mode(in_place: bool, policy: Policy, launches: usize) -> Mode {
    Mode { in_place, policy, launches, max_tbs: MAX_TBS }
}

#[track_caller]
fn assert_err(result: Result<(), String>, needle: &str) {
    match result {
        Ok(()) => panic!("expected an error containing {needle:?}, got Ok"),
        Err(e) => assert!(e.contains(needle), "error {e:?} does not contain {needle:?}"),
    }
}

fn buf(kind: &str, index: usize, size: usize) -> Json {
    json!({"type": kind, "index": index, "size": size})
}

fn remote_buf(id: usize, index: usize, size: usize) -> Json {
    json!({"buffer_id": id, "index": index, "size": size})
}

fn nop() -> Json {
    json!({"name": "nop"})
}

fn sync(name: &str, chan: &str, id: usize) -> Json {
    json!({"name": name, "channel_type": chan, "channel_ids": [id]})
}

fn signal(id: usize) -> Json {
    sync("signal", "memory", id)
}

fn wait(id: usize) -> Json {
    sync("wait", "memory", id)
}

/// GPU r of the 4-gpu ring all-gather: channel 0 goes to next, 1 to prev; copy, nop, an opening
/// handshake (ops 2, 3), nop, then for s = 0, 1, 2: put o[c] to next's o[c], nop, signal next,
/// wait for prev, nop (omitted after the last wait). Ops 5, 10 and 15 are the puts.
fn ring_gpu(r: usize) -> Json {
    let (next, prev) = ((r + 1) % 4, (r + 3) % 4);
    let copy = json!({"name": "copy", "src_buff": [buf("i", 0, 1)], "dst_buff": [buf("o", r, 1)]});
    let mut ops = vec![copy, nop(), signal(1), wait(0), nop()];
    for s in 0..3 {
        let c = (r + 4 - s) % 4;
        let put = json!({"name": "put", "channel_type": "memory", "src_buff": [buf("o", c, 1)], "dst_buff": [remote_buf(0, c, 1)]});
        ops.extend([put, nop(), signal(0), wait(1)]);
        if s < 2 {
            ops.push(nop());
        }
    }
    json!({"id": r, "input_chunks": 1, "output_chunks": 4, "scratch_chunks": 0,
        "channels": [{"channel_type": "memory", "connected_to": [next, prev]}],
        "remote_buffers": [{"rank": next, "type": "o", "access_channel_types": ["memory"]}],
        "semaphores": [],
        "threadblocks": [{"id": 0,
            "channels": [{"channel_type": "memory", "channel_ids": [0, 1]}],
            "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}],
            "ops": ops}]})
}

fn ring_allgather() -> Json {
    let gpus: Vec<Json> = (0..4).map(ring_gpu).collect();
    json!({"name": "ring-ag", "collective": "allgather", "protocol": "Simple", "inplace": false, "gpus": gpus})
}

fn ops_of(plan: &mut Json, g: usize) -> &mut Vec<Json> {
    plan["gpus"][g]["threadblocks"][0]["ops"].as_array_mut().expect("the thread block has ops")
}

fn reduce_into_output() -> Json {
    json!({"name": "re", "src_buff": [buf("i", 0, 2), buf("s", 0, 2)], "dst_buff": [buf("o", 0, 2)]})
}

/// 2-gpu allreduce over `chan` channels: handshake (the peer's scratch is free), put the input into
/// the peer's scratch (a memory put then needs a nop and a signal; a port pws/pwsf signals
/// itself), wait for the peer's data, nop, reduce input + scratch into the output.
fn pair_allreduce(chan: &str, put: &str) -> String {
    let gpu = |r: usize| {
        let q = 1 - r;
        let mut put =
            json!({"name": put, "channel_type": chan, "src_buff": [buf("i", 0, 2)], "dst_buff": [remote_buf(0, 0, 2)]});
        let mut ops = vec![sync("signal", chan, 0), sync("wait", chan, 0), nop()];
        if chan == "memory" {
            ops.extend([put, nop(), signal(0)]);
        } else {
            // A port proxy reads scratch only: the input goes there first; and the staging
            // area is written again after the put (as the next piece's staging would).
            put["channel_ids"] = json!([0]);
            put["src_buff"] = json!([buf("s", 2, 2)]);
            let stage = json!({"name": "copy", "src_buff": [buf("i", 0, 2)], "dst_buff": [buf("s", 2, 2)]});
            ops.extend([stage.clone(), nop(), put, nop(), stage]);
        }
        ops.extend([sync("wait", chan, 0), nop(), reduce_into_output()]);
        json!({"id": r, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 4,
            "channels": [{"channel_type": chan, "connected_to": [q]}],
            "remote_buffers": [{"rank": q, "type": "s", "access_channel_types": [chan]}],
            "threadblocks": [{"id": 0,
                "channels": [{"channel_type": chan, "channel_ids": [0]}],
                "remote_buffer_refs": [{"access_channel_type": chan, "remote_buffer_ids": [0]}],
                "ops": ops}]})
    };
    json!({"name": "pair-ar", "collective": "allreduce", "protocol": "Simple", "inplace": true, "gpus": [gpu(0), gpu(1)]})
        .to_string()
}

/// Out of place only: tb 0 puts the input into the peer's scratch once the peer says it is free
/// (channel 1) and signals (channel 0); tb 1 says "free", waits for the data and reduces into the
/// output. Nothing orders tb 1's reduce after tb 0's put, so in place (output = input) they race.
fn split_allreduce() -> String {
    let gpu = |r: usize| {
        let q = 1 - r;
        let put = json!({"name": "put", "channel_type": "memory", "src_buff": [buf("i", 0, 2)], "dst_buff": [remote_buf(0, 0, 2)]});
        let chans = json!([{"channel_type": "memory", "channel_ids": [0, 1]}]);
        json!({"id": r, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 2,
            "channels": [{"channel_type": "memory", "connected_to": [q, q]}],
            "remote_buffers": [{"rank": q, "type": "s", "access_channel_types": ["memory"]}],
            "threadblocks": [
                {"id": 0, "channels": chans, "ops": [wait(1), nop(), put, nop(), signal(0)],
                 "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}]},
                {"id": 1, "channels": chans, "ops": [signal(1), wait(0), nop(), reduce_into_output()]}]})
    };
    json!({"name": "split-ar", "collective": "allreduce", "protocol": "Simple", "inplace": false, "gpus": [gpu(0), gpu(1)]})
        .to_string()
}

/// One gpu, two thread blocks: tb 0 copies i[0] to s[0] and then runs `handover`; tb 1 runs
/// `takeover` and then copies s[0] to o[0].
fn relay(handover: &[Json], takeover: &[Json]) -> String {
    let mut tb0 = vec![json!({"name": "copy", "src_buff": [buf("i", 0, 1)], "dst_buff": [buf("s", 0, 1)]})];
    tb0.extend_from_slice(handover);
    let mut tb1 = takeover.to_vec();
    tb1.push(json!({"name": "copy", "src_buff": [buf("s", 0, 1)], "dst_buff": [buf("o", 0, 1)]}));
    json!({"name": "relay", "collective": "allreduce", "protocol": "Simple", "inplace": false,
        "gpus": [{"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 1,
            "channels": [], "remote_buffers": [], "semaphores": [{"init_value": 0}],
            "threadblocks": [{"id": 0, "channels": [], "ops": tb0}, {"id": 1, "channels": [], "ops": tb1}]}]})
    .to_string()
}

#[test]
fn the_ring_allgather_passes_in_every_mode() {
    replay_all(&ring_allgather().to_string()).unwrap();
    for policy in POLICIES {
        replay(&ring_allgather().to_string(), mode(true, policy, 4)).unwrap();
    }
}

#[test]
fn a_signal_right_after_a_put_needs_a_nop() {
    let mut plan = ring_allgather();
    assert_eq!(ops_of(&mut plan, 0).remove(6)["name"], "nop");
    assert_err(replay_all(&plan.to_string()), "signal after a data op without a nop");
}

#[test]
fn a_put_right_after_a_wait_needs_a_nop() {
    let mut plan = ring_allgather();
    assert_eq!(ops_of(&mut plan, 0).remove(9)["name"], "nop");
    assert_err(replay_all(&plan.to_string()), "race on gpu 0 o[3]");
}

#[test]
fn without_the_opening_handshake_the_next_launch_races() {
    let mut plan = ring_allgather();
    for g in 0..4 {
        let removed: Vec<Json> = ops_of(&mut plan, g).drain(2..4).collect();
        assert_eq!((removed[0]["name"].as_str(), removed[1]["name"].as_str()), (Some("signal"), Some("wait")));
    }
    let text = plan.to_string();
    // One launch alone is fine: the race is a gpu's launch-2 put into a peer still in launch 1.
    replay(&text, mode(false, Policy::Reverse, 1)).unwrap();
    for policy in POLICIES {
        let err = replay(&text, mode(false, policy, 2)).unwrap_err();
        assert!(err.contains("race") && err.contains("launch 2") && err.contains("launch 1"), "{policy:?}: {err}");
    }
    assert_err(replay_all(&text), "race");
}

#[test]
fn an_extra_signal_is_unbalanced() {
    let mut plan = ring_allgather();
    ops_of(&mut plan, 0).push(signal(0));
    let text = plan.to_string();
    assert_err(
        replay(&text, mode(false, Policy::RoundRobin, 1)),
        "unbalanced signals in launch 1: gpu 1 memory channel 1",
    );
    assert!(replay_all(&text).is_err());
}

#[test]
fn a_wait_without_a_signal_deadlocks() {
    let mut plan = ring_allgather();
    ops_of(&mut plan, 0).push(wait(1));
    assert_err(replay_all(&plan.to_string()), "deadlock");
}

#[test]
fn a_thread_block_has_at_most_64_ops() {
    let mut plan = ring_allgather();
    let ops = ops_of(&mut plan, 0);
    let n = ops.len();
    ops.extend((n..64).map(|_| nop()));
    replay_all(&plan.to_string()).unwrap();
    ops_of(&mut plan, 0).push(nop());
    assert_err(replay_all(&plan.to_string()), "65 ops, more than the limit of 64");
}

#[test]
fn forwarding_the_wrong_chunk_breaks_the_postcondition() {
    let mut plan = ring_allgather();
    // gpu 0's last put forwards o[3] (received and waited for earlier) instead of o[2].
    let put = &mut ops_of(&mut plan, 0)[15];
    assert_eq!((put["name"].as_str(), put["src_buff"][0]["index"].as_u64()), (Some("put"), Some(2)));
    put["src_buff"][0]["index"] = json!(3);
    assert_err(replay_all(&plan.to_string()), "postcondition of allgather fails at the end of launch 1: gpu 1 o[2]");
}

#[test]
fn channel_counts_must_match_in_both_directions() {
    let mut plan = ring_allgather();
    plan["gpus"][0]["channels"][0]["connected_to"] = json!([1, 3, 1]);
    assert_err(replay_all(&plan.to_string()), "gpu 0 declares 2 to gpu 1 but gpu 1 declares 1 to gpu 0");
}

#[test]
fn a_pairwise_allreduce_passes_in_both_modes() {
    replay_all(&pair_allreduce("memory", "put")).unwrap();
}

#[test]
fn an_out_of_place_only_plan_races_in_place() {
    let text = split_allreduce();
    for policy in POLICIES {
        replay(&text, mode(false, policy, 3)).unwrap();
        assert_err(replay(&text, mode(true, policy, 2)), "race on gpu");
    }
    assert_err(replay_all(&text), "in place");
}

#[test]
fn port_channels_need_a_flush_before_the_source_is_reused() {
    replay_all(&pair_allreduce("port", "pwsf")).unwrap();
    // Without the flush the proxy may still read its source (scratch the input was staged in)
    // when the next staging overwrites it.
    let text = pair_allreduce("port", "pws");
    for in_place in [false, true] {
        assert_err(replay(&text, mode(in_place, Policy::RoundRobin, 2)), "read by the proxy of gpu");
    }
}

#[test]
fn semaphores_order_thread_blocks() {
    let release = json!({"name": "sem_release", "semaphore_ids": [0]});
    let acquire = json!({"name": "sem_acquire", "semaphore_ids": [0]});
    replay_all(&relay(&[nop(), release.clone()], &[acquire.clone(), nop()])).unwrap();
    // After the acquire only thread 0 has synchronised.
    assert_err(replay_all(&relay(&[nop(), release.clone()], std::slice::from_ref(&acquire))), "race");
    assert_err(replay_all(&relay(std::slice::from_ref(&release), &[acquire.clone(), nop()])), "without a nop");
    assert_err(replay_all(&relay(&[nop(), release.clone(), release], &[acquire, nop()])), "unbalanced semaphore");
}

#[test]
fn the_reader_is_strict() {
    let base = ring_allgather();
    let edit = |f: &dyn Fn(&mut Json)| {
        let mut plan = base.clone();
        f(&mut plan);
        replay_all(&plan.to_string())
    };
    assert_err(edit(&|p| p["protocol"] = json!("LL")), "not modelled");
    assert_err(edit(&|p| p["reuse_resources"] = json!(true)), "not modelled");
    assert_err(edit(&|p| p["collective"] = json!("broadcast")), "collective");
    assert_err(edit(&|p| p["gpus"][1]["id"] = json!(2)), "id = 2");
    assert_err(edit(&|p| p["gpus"][1]["color"] = json!("red")), "unknown field `color`");
    assert_err(edit(&|p| ops_of(p, 0)[0]["name"] = json!("get")), "unsupported op get");
    assert_err(edit(&|p| ops_of(p, 0)[1]["name"] = json!("barrier")), "unsupported op barrier");
    assert_err(edit(&|p| ops_of(p, 0)[5]["dst_buff"][0]["index"] = json!(4)), "out of bounds");
    assert_err(edit(&|p| ops_of(p, 0)[5]["dst_buff"][0]["buffer_id"] = json!(1)), "buffer_id 1");
    assert_err(edit(&|p| ops_of(p, 0)[5]["channel_type"] = json!("port")), "buffer_id 0, but the tb references 0");
    let refs =
        |p: &mut Json| p["gpus"][0]["threadblocks"][0]["remote_buffer_refs"][0]["access_channel_type"] = json!("port");
    assert_err(edit(&refs), "does not list port");
    let access = |p: &mut Json| p["gpus"][0]["remote_buffers"][0]["access_channel_types"] = json!(["port"]);
    assert_err(edit(&access), "declares no port channel to gpu 1");
    assert_err(
        edit(&|p| p["gpus"][2]["output_chunks"] = json!(3)),
        "gpu 2 has [input_chunks, output_chunks] = [1, 3], expected [1, 4]",
    );
    let no_tbs = Mode { max_tbs: 0, ..mode(false, Policy::RoundRobin, 1) };
    assert_err(replay(&base.to_string(), no_tbs), "more than max_tbs = 0");
}
