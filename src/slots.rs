//! Per-(npu, chunk) state tables: dense when the product is small enough, sparse otherwise,
//! so all-to-all on thousands of NPUs does not allocate N × N² slots.

use rustc_hash::FxHashMap as HashMap;

/// Dense tables up to this many slots (a 4096-NPU all-reduce split in 2D parts has 2^26);
/// beyond it, a hash map of the slots touched (all-to-all at scale).
const DENSE_SLOTS: usize = 1 << 26;

pub enum SlotTable<T> {
    Dense { chunks: usize, v: Vec<T> },
    Sparse { chunks: usize, m: HashMap<u64, T>, default: T },
}

impl<T: Clone + Default> SlotTable<T> {
    pub fn new(npus: usize, chunks: usize) -> SlotTable<T> {
        match npus.checked_mul(chunks) {
            Some(n) if n <= DENSE_SLOTS => SlotTable::Dense { chunks, v: vec![T::default(); n] },
            _ => SlotTable::Sparse { chunks, m: HashMap::default(), default: T::default() },
        }
    }

    pub fn get(&self, npu: usize, chunk: usize) -> &T {
        match self {
            SlotTable::Dense { chunks, v } => &v[npu * chunks + chunk],
            SlotTable::Sparse { m, default, .. } => m.get(&key(npu, chunk)).unwrap_or(default),
        }
    }

    pub fn set(&mut self, npu: usize, chunk: usize, value: T) {
        match self {
            SlotTable::Dense { chunks, v } => v[npu * *chunks + chunk] = value,
            SlotTable::Sparse { m, .. } => {
                m.insert(key(npu, chunk), value);
            }
        }
    }

    pub fn chunks(&self) -> usize {
        match self {
            SlotTable::Dense { chunks, .. } | SlotTable::Sparse { chunks, .. } => *chunks,
        }
    }
}

fn key(npu: usize, chunk: usize) -> u64 {
    ((npu as u64) << 32) | chunk as u64
}

/// A set of (npu, chunk) pairs: a bitset when `npus × chunks` is small enough, else a hash set.
/// Membership tests on sorted pair lists with binary search miss the cache at scale.
pub enum PairSet {
    Dense { chunks: usize, bits: Vec<u64> },
    Sparse(rustc_hash::FxHashSet<u64>),
}

/// Dense pair sets up to this many bits (128 MiB).
const DENSE_BITS: usize = 1 << 30;

impl PairSet {
    pub fn new(npus: usize, chunks: usize, pairs: &[[u32; 2]]) -> PairSet {
        let mut s = match npus.checked_mul(chunks) {
            Some(n) if n <= DENSE_BITS => PairSet::Dense { chunks, bits: vec![0; n.div_ceil(64)] },
            _ => PairSet::Sparse(Default::default()),
        };
        for &[v, c] in pairs {
            s.insert(v as usize, c as usize);
        }
        s
    }
    pub fn insert(&mut self, npu: usize, chunk: usize) {
        match self {
            PairSet::Dense { chunks, bits } => {
                let i = npu * *chunks + chunk;
                bits[i / 64] |= 1 << (i % 64);
            }
            PairSet::Sparse(h) => {
                h.insert(key(npu, chunk));
            }
        }
    }
    pub fn contains(&self, npu: usize, chunk: usize) -> bool {
        match self {
            PairSet::Dense { chunks, bits } => {
                let i = npu * chunks + chunk;
                bits[i / 64] >> (i % 64) & 1 == 1
            }
            PairSet::Sparse(h) => h.contains(&key(npu, chunk)),
        }
    }
}
