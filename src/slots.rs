//! Per-(npu, chunk) state tables: dense when the product is small enough, sparse otherwise,
//! so all-to-all on thousands of NPUs does not allocate N × N² slots.

use std::collections::HashMap;

/// Dense tables up to this many slots; beyond it, a hash map of the slots touched.
const DENSE_SLOTS: usize = 1 << 25;

pub enum SlotTable<T> {
    Dense { chunks: usize, v: Vec<T> },
    Sparse { chunks: usize, m: HashMap<u64, T>, default: T },
}

impl<T: Clone + Default> SlotTable<T> {
    pub fn new(npus: usize, chunks: usize) -> SlotTable<T> {
        match npus.checked_mul(chunks) {
            Some(n) if n <= DENSE_SLOTS => SlotTable::Dense { chunks, v: vec![T::default(); n] },
            _ => SlotTable::Sparse { chunks, m: HashMap::new(), default: T::default() },
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
