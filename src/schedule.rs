//! The schedule interchange format `ccsynth.schedule.v1`: the one format every producer
//! emits and every consumer reads. See docs/FORMAT.md for the semantics.

use crate::collective::{Collective, CollectiveSpec};
use crate::error::InputError;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The chunks of one transfer. Synthesized schedules hold tens of millions of single-chunk
/// transfers, so one chunk is stored inline and the whole list takes 16 bytes. Longer lists
/// are shared: a latency-optimal all-reduce on 4096 NPUs sends the same 4096-chunk list in
/// every one of its 200 000 messages.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum ChunkList {
    One(u32),
    Many(Arc<[u32]>),
}

impl ChunkList {
    pub fn push(&mut self, c: u32) {
        let mut v = self.to_vec();
        v.push(c);
        *self = v.into();
    }
    pub fn clear(&mut self) {
        *self = ChunkList::Many(Arc::new([]));
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
            ChunkList::Many(b) => Arc::make_mut(b),
        }
    }
}

impl From<Vec<u32>> for ChunkList {
    fn from(v: Vec<u32>) -> Self {
        if v.len() == 1 { ChunkList::One(v[0]) } else { ChunkList::Many(v.into()) }
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

impl Serialize for ChunkList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChunkList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<u32>::deserialize(d).map(Into::into)
    }
}

pub const FORMAT_V1: &str = "ccsynth.schedule.v1";

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
#[serde(deny_unknown_fields)]
pub struct Transfer {
    pub step: u32,
    pub src: u32,
    pub dst: u32,
    pub chunks: ChunkList,
    #[serde(default)]
    pub op: Op,
    /// Node list from `src` to `dst` along existing links; intermediate nodes only forward.
    /// Shared (`Arc`) because many transfers take the same route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<Arc<[u32]>>,
}

impl Transfer {
    pub fn copy(step: u32, src: usize, dst: usize, chunks: impl Into<ChunkList>) -> Transfer {
        Transfer { step, src: src as u32, dst: dst as u32, chunks: chunks.into(), op: Op::Copy, path: None }
    }
    pub fn reduce(step: u32, src: usize, dst: usize, chunks: impl Into<ChunkList>) -> Transfer {
        Transfer { op: Op::Reduce, ..Transfer::copy(step, src, dst, chunks) }
    }
    pub fn via(mut self, path: impl Into<Arc<[u32]>>) -> Transfer {
        self.path = Some(path.into());
        self
    }
}

/// A self-contained schedule. On reading, `algorithm`, `seed` and `collective_time_ns` are
/// optional and unknown top-level fields (a producer's statistics) are ignored; unknown
/// fields inside `topology`, `collective` and transfers are errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub topology: Topology,
    pub collective: CollectiveSpec,
    pub num_chunks: usize,
    pub chunk_size_bytes: f64,
    pub combining: bool,
    pub precondition: Vec<[u32; 2]>,
    pub postcondition: Vec<[u32; 2]>,
    pub transfers: Vec<Transfer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective_time_ns: Option<f64>,
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
            transfers: Vec::new(),
            collective_time_ns: None,
        }
    }

    /// Parses a schedule, naming the JSON path of the first problem.
    pub fn from_json(text: &str) -> Result<Schedule, InputError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        Schedule::check_format(serde_path_to_error::deserialize(de).map_err(InputError::from_json)?)
    }

    /// Parses a schedule from a reader (large files are not held as text).
    pub fn from_reader(r: impl std::io::Read) -> Result<Schedule, InputError> {
        let de = &mut serde_json::Deserializer::from_reader(std::io::BufReader::new(r));
        Schedule::check_format(serde_path_to_error::deserialize(de).map_err(InputError::from_json)?)
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

    /// Number of distinct steps that carry transfers.
    pub fn rounds(&self) -> usize {
        let mut steps: Vec<u32> = self.transfers.iter().map(|t| t.step).collect();
        steps.sort_unstable();
        steps.dedup();
        steps.len()
    }

    /// Transfer indices ordered by (step, position in the array): the replay order. (u32: a
    /// schedule has fewer than 2³² transfers, and the order of 33 M transfers then takes half
    /// the memory.)
    pub fn replay_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.transfers.len() as u32).collect();
        order.sort_by_key(|&i| (self.transfers[i as usize].step, i));
        order
    }
}
