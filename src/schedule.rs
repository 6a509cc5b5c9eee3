//! The schedule interchange format `ccsynth.schedule.v1`: the one format every producer
//! emits and every consumer reads. See docs/FORMAT.md for the semantics.

use crate::collective::{Collective, CollectiveSpec};
use crate::error::InputError;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub mod looks;
pub mod packed;
mod transfers;
pub mod wire;
pub use transfers::{TransferRef, Transfers};
pub use wire::{Form, Written};

/// The chunks of one transfer as producers build it (a schedule keeps its transfers as columns,
/// `Transfers`, which take the list over without copying it). One chunk is stored inline and
/// the whole list takes 16 bytes (a thin pointer to a shared `Vec`, not a 16-byte slice pointer
/// beside the tag). Longer lists are shared: a latency-optimal all-reduce on 4096 NPUs sends the
/// same 4096-chunk list in every one of its 200 000 messages.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum ChunkList {
    One(u32),
    Many(Arc<Vec<u32>>),
}

impl ChunkList {
    pub fn push(&mut self, c: u32) {
        let mut v = self.to_vec();
        v.push(c);
        *self = v.into();
    }
    pub fn clear(&mut self) {
        *self = ChunkList::Many(Arc::new(Vec::new()));
    }
}

impl std::ops::Deref for ChunkList {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        match self {
            ChunkList::One(c) => std::slice::from_ref(c),
            ChunkList::Many(b) => b,
        }
    }
}

impl std::ops::DerefMut for ChunkList {
    fn deref_mut(&mut self) -> &mut [u32] {
        match self {
            ChunkList::One(c) => std::slice::from_mut(c),
            ChunkList::Many(b) => Arc::make_mut(b).as_mut_slice(),
        }
    }
}

impl From<Vec<u32>> for ChunkList {
    fn from(v: Vec<u32>) -> Self {
        if v.len() == 1 { ChunkList::One(v[0]) } else { ChunkList::Many(Arc::new(v)) }
    }
}

impl<const N: usize> From<[u32; N]> for ChunkList {
    fn from(v: [u32; N]) -> Self {
        v.to_vec().into()
    }
}

impl FromIterator<u32> for ChunkList {
    fn from_iter<I: IntoIterator<Item = u32>>(it: I) -> Self {
        it.into_iter().collect::<Vec<u32>>().into()
    }
}

impl<'a> IntoIterator for &'a ChunkList {
    type Item = &'a u32;
    type IntoIter = std::slice::Iter<'a, u32>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::fmt::Debug for ChunkList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Written in the compact form (`wire`): runs of evenly spaced chunks as ranges where shorter;
/// read in either form.
impl Serialize for ChunkList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        wire::write_list(self, Form::Compact, s)
    }
}

impl<'de> Deserialize<'de> for ChunkList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::read_list(d).map(Into::into)
    }
}

/// A transfer's node path (`src`, intermediate nodes, `dst`), shared by the transfers that take
/// the same route: a thin pointer, 8 bytes in each transfer instead of a 16-byte slice pointer.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Route(Arc<Vec<u32>>);

impl std::ops::Deref for Route {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.0
    }
}

impl From<Vec<u32>> for Route {
    fn from(v: Vec<u32>) -> Self {
        Route(Arc::new(v))
    }
}

impl From<&[u32]> for Route {
    fn from(v: &[u32]) -> Self {
        Route(Arc::new(v.to_vec()))
    }
}

impl<const N: usize> From<[u32; N]> for Route {
    fn from(v: [u32; N]) -> Self {
        Route(Arc::new(v.to_vec()))
    }
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Route {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Route {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<u32>::deserialize(d).map(Into::into)
    }
}

pub const FORMAT_V1: &str = "ccsynth.schedule.v1";

/// How a long pass over a schedule's transfers (validation, simulation) asks its caller
/// whether to stop: every `EVERY` transfers, so a cancel stops a check of tens of millions of
/// transfers within milliseconds, at the cost of a comparison per transfer.
pub(crate) struct StopPoll<'a> {
    stop: &'a dyn Fn() -> bool,
    next: usize,
}

impl<'a> StopPoll<'a> {
    const EVERY: usize = 1 << 16;

    pub(crate) fn new(stop: &'a dyn Fn() -> bool) -> Self {
        StopPoll { stop, next: 0 }
    }

    /// Whether to stop, `done` transfers into the pass (asks the caller only when another
    /// `EVERY` have passed since it last asked).
    pub(crate) fn stopped(&mut self, done: usize) -> bool {
        if done < self.next {
            return false;
        }
        self.next = done + Self::EVERY;
        (self.stop)()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The destination's contents for each chunk become the source's.
    #[default]
    Copy,
    /// The destination (already holding a partial) becomes the combination of both.
    Reduce,
}

/// One message: `chunks` from `src` to `dst` in logical round `step`, along `path` if given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct Transfer {
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub chunks: ChunkList,
    #[serde(default)]
    pub op: Op,
    /// Node list from `src` to `dst` along existing links; intermediate nodes only forward.
    /// Shared because many transfers take the same route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Route>,
    /// The slots written at `dst`, one per entry of `chunks` (default: `chunks` itself). Entry
    /// i may name a scratch slot of the same chunk as `chunks[i]`; with it, a chunk may appear
    /// more than once in `chunks` (one received chunk written into several slots), and
    /// `src == dst` is a local move between slots. Boxed: rare, and producers may hold many
    /// transfers before handing them to a schedule (8 bytes each instead of 24).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_chunks: Option<Box<ChunkList>>,
}
// Read from an object (as derived) or a row (`wire`); written as derived.
impl<'de> crate::strict::Derived<'de> for Transfer {
    const WHAT: &'static str = "a transfer (an object)";
    fn derived<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Transfer::deserialize(d)
    }
}
impl serde::Serialize for Transfer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Transfer::serialize(self, s)
    }
}

impl Transfer {
    pub fn copy(step: u32, src: usize, dst: usize, chunks: impl Into<ChunkList>) -> Transfer {
        Transfer {
            step,
            src: src as u32,
            dst: dst as u32,
            chunks: chunks.into(),
            op: Op::Copy,
            path: None,
            dst_chunks: None,
        }
    }
    pub fn reduce(step: u32, src: usize, dst: usize, chunks: impl Into<ChunkList>) -> Transfer {
        Transfer { op: Op::Reduce, ..Transfer::copy(step, src, dst, chunks) }
    }
    pub fn via(mut self, path: impl Into<Route>) -> Transfer {
        self.path = Some(path.into());
        self
    }
    /// Writes entry i of `chunks` into slot `dst_chunks[i]` at the destination.
    pub fn into_slots(mut self, dst_chunks: impl Into<ChunkList>) -> Transfer {
        self.dst_chunks = Some(Box::new(dst_chunks.into()));
        self
    }
    /// The transfer's fields, borrowed: what `Transfers` hands out.
    pub fn as_ref(&self) -> TransferRef<'_> {
        TransferRef {
            step: self.step,
            src: self.src,
            dst: self.dst,
            chunks: &self.chunks,
            op: self.op,
            path: self.path.as_ref(),
            dst_chunks: self.dst_chunks.as_deref().map(|d| &d[..]),
        }
    }
    /// The slots written at the destination.
    pub fn written(&self) -> &[u32] {
        self.as_ref().written()
    }
    /// A move between two slots of one NPU: no link, no wire time.
    pub fn is_local(&self) -> bool {
        self.as_ref().is_local()
    }
    /// How many chunks cross the wire: each distinct chunk once, however many slots it feeds.
    pub fn wire_chunks(&self) -> usize {
        self.as_ref().wire_chunks()
    }
}

/// A self-contained schedule. On reading, `algorithm`, `seed` and `collective_time_ns` are
/// optional, the conditions default to those the collective implies, and unknown top-level
/// fields (a producer's statistics) are ignored; unknown fields inside `topology`,
/// `collective` and transfers are errors. Written in the compact form (`wire`; `written` for
/// the explicit one).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub format: String,
    pub algorithm: Option<String>,
    pub seed: Option<u64>,
    pub topology: Topology,
    pub collective: CollectiveSpec,
    pub num_chunks: usize,
    pub chunk_size_bytes: f64,
    pub combining: bool,
    pub precondition: crate::collective::Pairs,
    pub postcondition: crate::collective::Pairs,
    /// Scratch slots: slot `num_chunks + i` is a private buffer for chunk `scratch[i]` at every
    /// NPU. Empty at the start, never part of the postcondition.
    pub scratch: Vec<u32>,
    pub transfers: Transfers,
    pub collective_time_ns: Option<f64>,
}

impl<'de> crate::strict::Derived<'de> for Schedule {
    const WHAT: &'static str = "a schedule (an object)";
    fn derived<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::Read::deserialize(d).map(wire::Read::into_schedule)
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::strict::from_object(d)
    }
}

impl Serialize for Schedule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.written(Form::Compact).serialize(s)
    }
}

impl Schedule {
    /// An empty schedule for `collective` on `topology`, ready for transfers.
    pub fn new(topology: Topology, collective: &Collective, algorithm: &str) -> Schedule {
        Schedule {
            format: FORMAT_V1.to_string(),
            algorithm: Some(algorithm.to_string()),
            seed: None,
            topology,
            collective: collective.spec.clone(),
            num_chunks: collective.num_chunks,
            chunk_size_bytes: collective.chunk_size_bytes,
            combining: collective.combining,
            precondition: collective.precondition.clone(),
            postcondition: collective.postcondition.clone(),
            scratch: Vec::new(),
            transfers: Transfers::new(),
            collective_time_ns: None,
        }
    }

    /// Parses a schedule, naming the JSON path of the first problem.
    pub fn from_json(text: &str) -> Result<Schedule, InputError> {
        // Tracking each value's path makes a parse about twice as slow (a 157 MB schedule of
        // 0.5 M transfers: 1.65 s against 0.78 s), so it runs only to name the field of an
        // error: the same deserializer fails at the same place.
        if let Ok(s) = serde_json::from_str::<Schedule>(text) {
            return Schedule::check_format(s);
        }
        let de = &mut serde_json::Deserializer::from_str(text);
        let s = serde_path_to_error::deserialize(&mut *de).map_err(|e| InputError::from_json_text(e, text))?;
        InputError::json_end(de)?;
        Schedule::check_format(s)
    }

    /// Parses a schedule from a reader: read whole, then parsed as `from_json` parses text
    /// (several times faster than parsing from the reader byte by byte).
    pub fn from_reader(mut r: impl std::io::Read) -> Result<Schedule, InputError> {
        let mut text = String::new();
        r.read_to_string(&mut text).map_err(|e| InputError::new("", format!("reading the schedule: {e}")))?;
        Schedule::from_json(&text)
    }

    fn check_format(s: Schedule) -> Result<Schedule, InputError> {
        if s.format != FORMAT_V1 {
            return Err(InputError::new(
                "format",
                format!("unsupported format {:?}: expected {FORMAT_V1:?}", s.format),
            ));
        }
        Ok(s)
    }

    /// The schedule as `form` writes it (`Serialize` writes the compact form).
    pub fn written(&self, form: Form) -> Written<'_> {
        Written { schedule: self, form }
    }

    /// Slots per NPU: the chunks, then the scratch slots.
    pub fn slots(&self) -> usize {
        self.num_chunks + self.scratch.len()
    }

    /// The chunk a slot belongs to (itself for a chunk; `None` when out of range).
    pub fn chunk_of(&self, slot: u32) -> Option<u32> {
        let s = slot as usize;
        if s < self.num_chunks { Some(slot) } else { self.scratch.get(s - self.num_chunks).copied() }
    }

    /// Number of distinct steps that carry transfers.
    pub fn rounds(&self) -> usize {
        let steps = self.transfers.steps();
        if steps.is_sorted() {
            return steps.chunk_by(|a, b| a == b).count();
        }
        let mut steps = steps.to_vec();
        steps.sort_unstable();
        steps.dedup();
        steps.len()
    }

    /// The replay order: transfers by (step, position in the array).
    pub fn replay_order(&self) -> ReplayOrder {
        ReplayOrder::of(&self.transfers)
    }
}

/// Transfer indices ordered by (step, position in the array): the replay order. A schedule
/// whose array is already in step order (every synthesized one) needs no index list; any
/// other gets one of u32 (a schedule has fewer than 2³² transfers, and the order of 33 M
/// transfers then takes 134 MB instead of 268).
pub struct ReplayOrder {
    sorted: Option<Vec<u32>>,
    len: usize,
}

impl ReplayOrder {
    pub fn of(transfers: &Transfers) -> ReplayOrder {
        let steps = transfers.steps();
        if steps.is_sorted() {
            return ReplayOrder { sorted: None, len: steps.len() };
        }
        let mut order: Vec<u32> = (0..steps.len() as u32).collect();
        order.sort_by_key(|&i| (steps[i as usize], i));
        ReplayOrder { sorted: Some(order), len: steps.len() }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The transfer replayed `k`-th.
    #[inline]
    pub fn get(&self, k: usize) -> usize {
        match &self.sorted {
            Some(o) => o[k] as usize,
            None => k,
        }
    }

    /// The transfers in replay order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len).map(|k| self.get(k))
    }

    /// The replay's steps: for each, the range of replay positions (`get`) it covers, in order.
    pub fn steps<'a>(&'a self, transfers: &'a Transfers) -> impl Iterator<Item = std::ops::Range<usize>> + 'a {
        let mut k = 0;
        std::iter::from_fn(move || {
            if k == self.len {
                return None;
            }
            let step = transfers.step(self.get(k));
            let start = k;
            while k < self.len && transfers.step(self.get(k)) == step {
                k += 1;
            }
            Some(start..k)
        })
    }
}
