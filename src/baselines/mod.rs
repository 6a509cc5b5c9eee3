//! Hand-built collective algorithms as schedules in the interchange format, for comparison
//! with synthesized ones on the same simulator. Each algorithm module cites its source. An
//! algorithm refuses, with a reason, a collective or topology it cannot serve; it never emits
//! an invalid schedule (the engine validates everything it returns).
//!
//! Baselines choose their own chunking where the algorithm needs it (bidirectional rings split
//! every block in two, Swing and bucket in 2D parts for their 2D ports, ring broadcast and
//! reduce use p chunks): `chunks_per_npu` in the request is a minimum.

mod alltoall;
mod bucket;
mod butterfly;
mod circulant;
mod direct;
mod estimate;
mod mst;
mod pxn;
mod ring;

use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
use crate::schedule::{ChunkList, Op, Schedule, Transfer, Transfers};
use crate::topology::{Grid, Topology};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// Baselines whose schedule would have more transfers than this are refused (memory: each
/// transfer is stored, validated and simulated). 2^27: bucket's all-reduce on torus:128x256
/// (32,768 NPUs) has 100 M (17 bytes each, checked on ranges: 6.6 GB for the whole run); under
/// 2^26 it was refused after its build and `auto` built three slower baselines instead
/// (17 GB, a schedule 580 times slower).
pub const MAX_TRANSFERS: usize = 1 << 27;

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum BaselineError {
    #[error("unknown baseline {0:?}; expected one of {1}")]
    Unknown(String, String),
    #[error("{algorithm} does not support {what}")]
    Unsupported { algorithm: &'static str, what: String },
    #[error("{0}")]
    Input(#[from] crate::error::InputError),
    /// The caller's stop flag was raised while it was built (cancelled, or out of time).
    #[error("stopped before it was built")]
    Stopped,
}

/// What `ccsynth baseline --list` prints for each algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct BaselineInfo {
    pub name: &'static str,
    pub collectives: Vec<CollectiveKind>,
    pub topologies: &'static str,
    pub source: &'static str,
}

type BuildFn = fn(&Ctx) -> Result<Transfers, BaselineError>;

struct Algorithm {
    info: fn() -> BaselineInfo,
    /// chunks_per_npu the algorithm needs given the requested one and the context.
    chunking: fn(&Topology, &CollectiveSpec) -> u32,
    build: BuildFn,
}

/// The family of Kolmakov's variants with r fewer distribution steps: `kolmakov-r1`,
/// `kolmakov-r2`, … (`kolmakov` is r = 0).
pub const KOLMAKOV_VARIANTS: &str = "kolmakov-r<R>";

/// Splits `kolmakov-r<R>` into its family entry and R.
fn variant(name: &str) -> Option<(&'static str, u32)> {
    let r = name.strip_prefix("kolmakov-r")?;
    if r.is_empty() || !r.bytes().all(|b| b.is_ascii_digit()) || r.starts_with('0') {
        return None;
    }
    r.parse().ok().map(|r| (KOLMAKOV_VARIANTS, r))
}

/// Whether a variant's parameter fits a group of `ranks` NPUs (`kolmakov-r<R>`: R below its
/// reduction's round count); other names always do. The reason when it does not.
pub fn check_variant(name: &str, ranks: usize) -> Result<(), String> {
    match variant(name) {
        Some((_, r)) => circulant::check_kolmakov_r(r as usize, ranks).map_err(|why| format!("{name}: {why}")),
        None => Ok(()),
    }
}

/// Whether `name` is a baseline: one of `names()` or a `kolmakov-r<R>` variant.
pub fn is_known(name: &str) -> bool {
    names().contains(&name) || variant(name).is_some()
}

/// What `name` supports (variants resolve to their family's entry).
pub fn info(name: &str) -> Option<BaselineInfo> {
    let key = variant(name).map(|(k, _)| k).unwrap_or(name);
    registry().into_iter().find(|(n, _)| *n == key).map(|(_, a)| (a.info)())
}

fn registry() -> Vec<(&'static str, Algorithm)> {
    vec![
        ("ring", ring::UNI),
        ("ring-bidir", ring::BIDIR),
        ("direct", direct::DIRECT),
        ("recursive-doubling", butterfly::RECURSIVE_DOUBLING),
        ("rabenseifner", butterfly::RABENSEIFNER),
        ("bde", butterfly::BDE),
        ("swing-latency", butterfly::SWING_LATENCY),
        ("swing-bandwidth", butterfly::SWING_BANDWIDTH),
        ("bucket", bucket::BUCKET),
        ("bucket-bidir", bucket::BUCKET_BIDIR),
        ("traff", circulant::TRAFF),
        ("kolmakov", circulant::KOLMAKOV),
        ("mst", mst::MST),
        ("pairwise", alltoall::PAIRWISE),
        ("bruck", alltoall::BRUCK),
        ("dimension-ordered", alltoall::DIMENSION_ORDERED),
        ("pxn", pxn::PXN),
        (KOLMAKOV_VARIANTS, circulant::KOLMAKOV_STEPS),
    ]
}

/// Every baseline with what it supports.
pub fn list() -> Vec<BaselineInfo> {
    registry().iter().map(|(_, a)| (a.info)()).collect()
}

/// The two edge-disjoint Hamiltonian cycles the rings use on a c × r torus (node id x + c·y),
/// for tests. Only meaningful when r = c·k and gcd(r, c − 1) = 1.
pub fn hamiltonian_cycles_for_tests(c: usize, r: usize) -> [Vec<usize>; 2] {
    ring::disjoint_hamiltonian_cycles(ring::HamiltonianTorus { c, r, x_first: true })
}

/// Bruck's step count on p ranks, for tests.
pub fn bruck_steps_for_tests(p: usize) -> u32 {
    alltoall::bruck_steps(p)
}

/// The planned time of `pxn`'s fastest shape on `topo` for chunks of `chunk_bytes`, `k` per
/// pair (`None` off a rail fabric), for tests: the simulator must time its schedule so.
pub fn pxn_planned_ns_for_tests(topo: &Topology, k: usize, chunk_bytes: f64) -> Option<f64> {
    pxn::planned_ns_for_tests(topo, k, chunk_bytes)
}

/// Swing's peer function (paper Eq. 2), exposed for tests against the paper's figures.
pub fn swing_peer_for_tests(r: usize, s: u32, p: usize) -> usize {
    butterfly::swing_peer(r, s, p)
}

/// The baselines `compare` runs (every registry entry but the `kolmakov-r<R>` family).
pub fn names() -> Vec<&'static str> {
    registry().iter().map(|(n, _)| *n).filter(|n| *n != KOLMAKOV_VARIANTS).collect()
}

/// A lower bound on the simulated time of baseline `name` for `spec` on `topo`, from its
/// structure alone (nothing is built: `estimate`), ns; `None` where none is worked out or the
/// baseline does not serve the case.
pub fn lower_bound_ns(name: &str, topo: &Topology, spec: &CollectiveSpec) -> Option<f64> {
    let reg = registry();
    let (_, alg) = reg.iter().find(|(n, _)| *n == name)?;
    if !(alg.info)().collectives.contains(&spec.kind) {
        return None;
    }
    let k = (alg.chunking)(topo, spec).max(spec.chunks());
    estimate::lower_bound_ns(name, topo, spec, k)
}

/// Builds the named baseline for `spec` on `topo` (not yet validated or timed: the engine's
/// `finalize` does that).
pub fn build(name: &str, topo: &Topology, spec: &CollectiveSpec) -> Result<Schedule, BaselineError> {
    build_within(name, topo, spec, &|| false)
}

/// `build`, polling `stop` as it goes (about every thousand transfers and before each route
/// search): once it says stop, the rest is skipped cheaply and the build is
/// `BaselineError::Stopped`.
pub fn build_within(
    name: &str,
    topo: &Topology,
    spec: &CollectiveSpec,
    stop: &dyn Fn() -> bool,
) -> Result<Schedule, BaselineError> {
    let reg = registry();
    let (key, r) = match variant(name) {
        Some((k, r)) => (k, Some(r)),
        None => (name, None),
    };
    let (_, alg) = reg.iter().find(|(n, _)| *n == key).ok_or_else(|| {
        BaselineError::Unknown(name.to_string(), format!("{}, {KOLMAKOV_VARIANTS}", names().join(", ")))
    })?;
    let info = (alg.info)();
    if !info.collectives.contains(&spec.kind) {
        return Err(BaselineError::Unsupported {
            algorithm: info.name,
            what: format!("{} collectives", spec.kind.name()),
        });
    }
    let mut spec = spec.clone();
    spec.chunks_per_npu = Some((alg.chunking)(topo, &spec).max(spec.chunks()));
    let c = Collective::build(&spec, topo).map_err(|e| e.within("collective"))?;
    let mut ctx = Ctx::new(topo, &c, stop);
    ctx.variant = r;
    let transfers = (alg.build)(&ctx)?;
    if ctx.stopped.get() {
        return Err(BaselineError::Stopped);
    }
    if let Some((u, v)) = *ctx.unroutable.borrow() {
        return Err(BaselineError::Unsupported {
            algorithm: info.name,
            what: format!("this topology: it needs NPU {u} to reach NPU {v}, and no path leads there"),
        });
    }
    if transfers.len() > MAX_TRANSFERS {
        return Err(BaselineError::Unsupported {
            algorithm: info.name,
            what: format!("this size: {} transfers exceed the limit of {MAX_TRANSFERS}", transfers.len()),
        });
    }
    let mut s = Schedule::new(topo.clone(), &c, name);
    s.scratch = ctx.scratch.take();
    s.transfers = in_waves(&transfers);
    Ok(s)
}

/// Orders the transfers of each step in waves of link-disjoint messages. The simulator books
/// a step's first hops in array order (its later hops after them, hop-major), so an unlucky
/// order queues messages behind each other's first hops (a convoy); waves let disjoint
/// messages run together, as the algorithms' own cost models assume. Steps, and so the data
/// flow, are unchanged.
pub fn in_waves(transfers: &Transfers) -> Transfers {
    // Index-based throughout: a 64×64 ring has 67 M transfers, so the sorts move indices.
    let n = transfers.len();
    let steps = transfers.steps();
    // Counting sort by step (stable: array order within a step).
    let top = steps.iter().copied().max().map_or(0, |s| s as usize + 1);
    let mut start = vec![0usize; top + 1];
    for &s in steps {
        start[s as usize + 1] += 1;
    }
    for s in 0..top {
        start[s + 1] += start[s];
    }
    let mut by_step = vec![0u32; n];
    {
        let mut next = start.clone();
        for (k, &s) in steps.iter().enumerate() {
            by_step[next[s as usize]] = k as u32;
            next[s as usize] += 1;
        }
    }
    // Per hop (a dense id, stable across steps), a growable bitset of the waves using it in
    // this step; `touched` clears them for the next (no map or allocation per step).
    let mut hop_id: HashMap<(u32, u32), u32> = HashMap::default();
    let mut used: Vec<Vec<u64>> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    let mut hops: Vec<u32> = Vec::new();
    let mut wave: Vec<(u32, u32)> = Vec::new();
    for s in 0..top {
        let group = &mut by_step[start[s]..start[s + 1]];
        // First fit: each message joins the first wave none of its links is used in.
        let mut waves = 0u32;
        wave.clear();
        for &k in group.iter() {
            let t = transfers.at(k as usize);
            hops.clear();
            let mut id = |h: (u32, u32)| {
                let next = hop_id.len() as u32;
                *hop_id.entry(h).or_insert(next)
            };
            match t.path {
                Some(p) => hops.extend(p.windows(2).map(|w| id((w[0], w[1])))),
                None => hops.push(id((t.src, t.dst))),
            }
            if used.len() < hop_id.len() {
                used.resize(hop_id.len(), Vec::new());
            }
            let mut w = 0u32;
            loop {
                let word = (w / 64) as usize;
                let taken = hops.iter().fold(0u64, |m, &h| m | used[h as usize].get(word).copied().unwrap_or(0));
                let free = (!taken) & (u64::MAX << (w % 64));
                if free != 0 {
                    w = word as u32 * 64 + free.trailing_zeros();
                    break;
                }
                w = (word as u32 + 1) * 64;
            }
            for &h in &hops {
                let v = &mut used[h as usize];
                if v.is_empty() {
                    touched.push(h);
                }
                let word = (w / 64) as usize;
                if v.len() <= word {
                    v.resize(word + 1, 0);
                }
                v[word] |= 1 << (w % 64);
            }
            waves = waves.max(w);
            wave.push((w, k));
        }
        for &h in &touched {
            used[h as usize].clear();
        }
        touched.clear();
        if waves > 0 {
            wave.sort_unstable();
            for (slot, &(_, k)) in group.iter_mut().zip(&wave) {
                *slot = k;
            }
        }
    }
    if by_step.iter().enumerate().all(|(i, &k)| i as u32 == k) {
        return transfers.clone();
    }
    transfers.permuted(&by_step)
}

/// What an algorithm sees: the topology, the collective, ranks (the group in order), the torus
/// shape when the group is a whole mesh or torus, and a router.
pub(crate) struct Ctx<'a> {
    pub topo: &'a Topology,
    pub c: &'a Collective,
    pub ranks: Vec<usize>,
    /// Set when the group is every NPU of a recognized mesh or torus, in id order.
    pub grid: Option<Grid>,
    /// Per source NPU asked so far, its shortest-path tree as each node's predecessor
    /// (`NO_PRED`: unreached): 4 bytes a node, n² at worst (4.3 GB at 32,768 NPUs; 8.6 GB as
    /// `usize`).
    router: std::cell::RefCell<HashMap<usize, Vec<u32>>>,
    /// The first pair of NPUs an algorithm needed but the topology cannot connect.
    unroutable: std::cell::RefCell<Option<(usize, usize)>>,
    /// R of a `kolmakov-r<R>` variant.
    pub variant: Option<u32>,
    /// The schedule's scratch slots, when the algorithm needs them (the chunk of each).
    pub scratch: std::cell::RefCell<Vec<u32>>,
    /// The caller's stop flag, polled every `POLL_EVERY` calls of `halted`.
    stop: &'a dyn Fn() -> bool,
    polls: std::cell::Cell<u32>,
    stopped: std::cell::Cell<bool>,
}

/// Calls of `Ctx::halted` per poll of the caller's flag.
const POLL_EVERY: u32 = 1024;

impl<'a> Ctx<'a> {
    /// Whether the build should stop: the caller's flag, read every `POLL_EVERY` calls (and
    /// remembered). Once halted, transfers are dropped and routes not searched, so whatever
    /// loops remain run at the cost of a branch.
    pub fn halted(&self) -> bool {
        if self.stopped.get() {
            return true;
        }
        let n = self.polls.get().wrapping_add(1);
        self.polls.set(n);
        if n % POLL_EVERY == 1 && (self.stop)() {
            self.stopped.set(true);
        }
        self.stopped.get()
    }

    fn new(topo: &'a Topology, c: &'a Collective, stop: &'a dyn Fn() -> bool) -> Ctx<'a> {
        let ranks = c.group.clone();
        // Every NPU of the grid, in id order: a group of some NPUs (even the first ones) is
        // not a grid the grid algorithms can walk.
        let grid = topo.infer_grid().filter(|g| {
            ranks.len() == g.dims.iter().product::<usize>() && ranks.iter().enumerate().all(|(i, &v)| i == v)
        });
        Ctx {
            topo,
            c,
            ranks,
            grid,
            router: Default::default(),
            unroutable: Default::default(),
            variant: None,
            scratch: Default::default(),
            stop,
            polls: Default::default(),
            stopped: Default::default(),
        }
    }
    pub fn p(&self) -> usize {
        self.ranks.len()
    }
    pub fn k(&self) -> usize {
        self.c.spec.chunks() as usize
    }
    /// The chunks of rank r's block: the collective's chunks in p equal blocks (r·k .. r·k+k for
    /// the per-rank kinds; broadcast and reduce use p·k chunks, so the same rule applies).
    pub fn block(&self, r: usize) -> std::ops::Range<u32> {
        let b = (self.c.num_chunks / self.p()) as u32;
        r as u32 * b..(r as u32 + 1) * b
    }
    pub fn root_rank(&self) -> usize {
        let root = self.c.spec.root.unwrap_or(self.ranks[0]);
        self.ranks.iter().position(|&v| v == root).unwrap_or(0)
    }

    /// The shortest path (by latency) from NPU u to NPU v, as a transfer path: `None` when it
    /// is the single link u→v.
    pub fn route(&self, u: usize, v: usize) -> Option<crate::schedule::Route> {
        if self.topo.link_index(u, v).is_some() {
            return None;
        }
        let mut cache = self.router.borrow_mut();
        if !cache.contains_key(&u) && self.halted() {
            return None; // the build is refused anyway (`Stopped`)
        }
        let pred = cache.entry(u).or_insert_with(|| shortest_tree(self.topo, u));
        let mut path = vec![v as u32];
        let mut x = v;
        while x != u {
            let q = pred[x];
            if q == NO_PRED {
                // The algorithm wants a pair the topology cannot connect (the collective itself
                // is served, e.g. a broadcast on a directed star): recorded, and the build refused.
                self.unroutable.borrow_mut().get_or_insert((u, v));
                return None;
            }
            x = q as usize;
            path.push(q);
        }
        path.reverse();
        Some(path.into())
    }

    /// A path along one grid dimension (`delta` signed), or the shortest path off-grid.
    pub fn route_along(&self, u: usize, dim: usize, delta: i64) -> (usize, Option<crate::schedule::Route>) {
        let g = self.grid.as_ref().expect("grid routes need a grid");
        if delta.abs() == 1 {
            // The neighbour, without the path's allocations (bucket's 33 M messages on
            // torus:128x128 each built two vectors here).
            let stride: usize = g.dims[..dim].iter().product();
            let d = g.dims[dim] as i64;
            let c = ((u / stride) % g.dims[dim]) as i64;
            let v = u - c as usize * stride + (c + delta).rem_euclid(d) as usize * stride;
            if self.topo.link_index(u, v).is_some() {
                return (v, None);
            }
        }
        let path = g.path_along(u, dim, delta);
        let v = *path.last().expect("non-empty") as usize;
        let ok = path.windows(2).all(|w| self.topo.link_index(w[0] as usize, w[1] as usize).is_some());
        if !ok {
            return (v, self.route(u, v));
        }
        (v, if path.len() == 2 { None } else { Some(path.into()) })
    }
}

/// Predecessors on shortest-latency paths from `src` (ties: fewer hops, then lower ids).
fn shortest_tree(topo: &Topology, src: usize) -> Vec<u32> {
    use std::cmp::Reverse;
    let n = topo.nodes();
    let mut dist = vec![(f64::INFINITY, usize::MAX); n];
    let mut pred = vec![NO_PRED; n];
    use ordered_float::OrderedFloat;
    let mut heap = std::collections::BinaryHeap::new();
    dist[src] = (0.0, 0);
    heap.push(Reverse((OrderedFloat(0.0), 0usize, src)));
    while let Some(Reverse((OrderedFloat(d), h, u))) = heap.pop() {
        if (d, h) > dist[u] {
            continue;
        }
        // Only NPU endpoints and switches forward; failed NPUs have no links anyway.
        for l in &topo.links()[topo.out_links(u)] {
            let nd = (d + l.latency_ns, h + 1);
            if nd < dist[l.dst] {
                dist[l.dst] = nd;
                pred[l.dst] = u as u32;
                heap.push(Reverse((OrderedFloat(nd.0), nd.1, l.dst)));
            }
        }
    }
    pred
}

/// No predecessor in a shortest-path tree (node ids are below `limits::MAX_NODES`, 2^20).
const NO_PRED: u32 = u32::MAX;

/// Accumulates transfers between ranks.
pub(crate) struct Out<'c, 'a> {
    pub ctx: &'c Ctx<'a>,
    pub transfers: Transfers,
}

impl<'c, 'a> Out<'c, 'a> {
    pub fn new(ctx: &'c Ctx<'a>) -> Self {
        Out { ctx, transfers: Transfers::new() }
    }
    /// One message from rank a to rank b along the shortest path.
    pub fn send(&mut self, step: u32, a: usize, b: usize, chunks: impl Into<ChunkList>, op: Op) {
        let (u, v) = (self.ctx.ranks[a], self.ctx.ranks[b]);
        let path = self.ctx.route(u, v);
        self.push(step, u, v, chunks, op, path);
    }
    pub fn push(
        &mut self,
        step: u32,
        u: usize,
        v: usize,
        chunks: impl Into<ChunkList>,
        op: Op,
        path: Option<crate::schedule::Route>,
    ) {
        self.push_into(step, u, v, chunks.into(), None, op, path);
    }
    /// `push`, writing entry i of `chunks` into slot `dst[i]` when `dst` is given.
    #[allow(clippy::too_many_arguments)]
    fn push_into(
        &mut self,
        step: u32,
        u: usize,
        v: usize,
        chunks: ChunkList,
        dst: Option<Vec<u32>>,
        op: Op,
        path: Option<crate::schedule::Route>,
    ) {
        if chunks.is_empty() || self.ctx.halted() {
            return;
        }
        let mut t = Transfer { op, ..Transfer::copy(step, u, v, chunks) };
        t.path = path;
        t.dst_chunks = dst.map(|d| Box::new(d.into()));
        self.transfers.push(t);
    }
    /// One message from rank a to rank b whose entry i lands in slot `dst[i]`.
    pub fn send_into(&mut self, step: u32, a: usize, b: usize, chunks: Vec<u32>, dst: Vec<u32>, op: Op) {
        if chunks.is_empty() || chunks == dst {
            return self.send(step, a, b, chunks, op);
        }
        let (u, v) = (self.ctx.ranks[a], self.ctx.ranks[b]);
        let path = self.ctx.route(u, v);
        self.push_into(step, u, v, chunks.into(), Some(dst), op, path);
    }
    /// A move between slots of rank a: no link, no wire time.
    pub fn local(&mut self, step: u32, a: usize, chunks: Vec<u32>, dst: Vec<u32>, op: Op) {
        if chunks.is_empty() || self.ctx.halted() {
            return;
        }
        let u = self.ctx.ranks[a];
        let t = Transfer { op, ..Transfer::copy(step, u, u, chunks) }.into_slots(dst);
        self.transfers.push(t);
    }
}

#[cfg(test)]
mod tests {
    use super::in_waves;
    use crate::schedule::Transfer;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// First fit written plainly: per step, in array order, each message takes the first wave
    /// whose messages share none of its links; the output lists steps, then waves, in order.
    fn oracle(ts: &[Transfer]) -> Vec<Transfer> {
        let hops = |t: &Transfer| -> Vec<(u32, u32)> {
            match &t.path {
                Some(p) => p.windows(2).map(|w| (w[0], w[1])).collect(),
                None => vec![(t.src, t.dst)],
            }
        };
        let steps: BTreeSet<u32> = ts.iter().map(|t| t.step).collect();
        let mut out = Vec::new();
        for s in steps {
            // (links used, transfers) of each wave, first fit.
            type Wave = (BTreeSet<(u32, u32)>, Vec<Transfer>);
            let mut waves: Vec<Wave> = Vec::new();
            for t in ts.iter().filter(|t| t.step == s) {
                let h = hops(t);
                match waves.iter_mut().find(|(used, _)| h.iter().all(|x| !used.contains(x))) {
                    Some((used, list)) => {
                        used.extend(h);
                        list.push(t.clone());
                    }
                    None => waves.push((h.into_iter().collect(), vec![t.clone()])),
                }
            }
            out.extend(waves.into_iter().flat_map(|(_, l)| l));
        }
        out
    }

    proptest! {
        #[test]
        fn in_waves_is_first_fit(raw in proptest::collection::vec((0u32..4, 0u32..6, 0u32..6, 0u32..6, any::<bool>()), 0..150)) {
            let ts: Vec<Transfer> = raw
                .into_iter()
                .enumerate()
                .map(|(i, (step, a, b, c, routed))| {
                    let mut t = Transfer::copy(step, a as usize, b as usize, vec![i as u32]);
                    if routed {
                        t.path = Some(vec![a, c + 10, b].into());
                    }
                    t
                })
                .collect();
            prop_assert_eq!(in_waves(&ts.clone().into()).to_vec(), oracle(&ts));
        }
    }
}
