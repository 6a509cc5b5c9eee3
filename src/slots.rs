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

/// `n` defaults, written out rather than allocated zeroed. A zeroed allocation maps the
/// shared zero page at a page's first read and copies it at its first write, and that fault
/// stops every thread of the process to flush its TLB; the validator and the simulator read
/// their tables before writing them, side by side on two threads. The check of a 512-NPU
/// all-to-all (2^26-slot tables, touched sparsely) spent two thirds of its 4.3 s in those
/// faults and takes 1.5 s written out, in the same memory (353 against 343 MB).
fn written<T: Clone + Default>(n: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    v.resize(n, T::default());
    v
}

impl<T: Clone + Default> SlotTable<T> {
    pub fn new(npus: usize, chunks: usize) -> SlotTable<T> {
        Self::for_filled(npus, chunks, 0)
    }

    /// `new` for a table of which about `filled` cells will be written: dense also beyond
    /// `DENSE_SLOTS` when that is a quarter of its cells or more (4 bytes a cell against some
    /// 16 a hashed entry, and every access a hash). An all-reduce writes every cell (bucket's on
    /// 8,192 NPUs in 4 parts: 2^28); an all-to-all one per chunk and hop.
    pub fn for_filled(npus: usize, chunks: usize, filled: usize) -> SlotTable<T> {
        match dense_cells(npus, chunks, filled) {
            Some(n) => SlotTable::Dense { chunks, v: written(n) },
            None => SlotTable::Sparse { chunks, m: HashMap::default(), default: T::default() },
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

/// Where each chunk sits in a row of a per-NPU table: the chunks `≡ r (mod spacing)` side by
/// side, residue after residue. A schedule whose messages carry evenly spaced chunk lists (bucket
/// on a 2D torus sends every fourth chunk) then reads and writes each message's slots in a
/// few cache lines instead of one line per chunk or two. Spacing 1 is the identity.
#[derive(Clone, Copy, Debug)]
pub struct SlotOrder {
    spacing: u32,
    /// Positions per residue: ⌈chunks / spacing⌉.
    per: u32,
    chunks: u32,
}

impl SlotOrder {
    /// The order of `chunks` chunks for lists spaced by `spacing` (at least 1).
    pub fn new(chunks: usize, spacing: u32) -> SlotOrder {
        let spacing = spacing.clamp(1, (chunks as u32).max(1));
        SlotOrder { spacing, per: (chunks as u32).div_ceil(spacing), chunks: chunks as u32 }
    }

    /// The position of chunk `c` (below `chunks`) in a row.
    #[inline]
    pub fn of(&self, c: u32) -> u32 {
        debug_assert!(c < self.chunks);
        (c % self.spacing) * self.per + c / self.spacing
    }

    /// Positions a row needs for the chunks (at least `chunks`: the last residues may leave
    /// a gap).
    pub fn len(&self) -> usize {
        self.spacing as usize * self.per as usize
    }

    pub fn is_empty(&self) -> bool {
        self.chunks == 0
    }
}

/// The cells of a dense table, when `SlotTable::for_filled` makes one.
fn dense_cells(npus: usize, chunks: usize, filled: usize) -> Option<usize> {
    npus.checked_mul(chunks).filter(|&n| n <= DENSE_SLOTS || n / 4 <= filled)
}

/// About the bytes `SlotTable::for_filled(npus, chunks, filled)` comes to once filled, for
/// cells of `cell` bytes: every cell when dense, `filled` hashed entries (key, value and the
/// map's spare room) otherwise. For estimates made before the table is allocated.
pub fn table_bytes(npus: usize, chunks: usize, filled: usize, cell: usize) -> u64 {
    match dense_cells(npus, chunks, filled) {
        Some(n) => n as u64 * cell as u64,
        None => filled as u64 * 2 * (8 + cell as u64),
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

#[cfg(test)]
mod tests {
    use super::SlotOrder;

    #[test]
    fn a_slot_order_is_one_to_one_and_puts_spaced_lists_side_by_side() {
        for (chunks, spacing) in [(16, 4), (18, 4), (7, 3), (5, 1), (3, 8), (1, 1), (64, 64)] {
            let o = SlotOrder::new(chunks, spacing);
            let mut seen = vec![false; o.len()];
            for c in 0..chunks as u32 {
                let p = o.of(c) as usize;
                assert!(p < o.len() && !seen[p], "{chunks} chunks, spacing {spacing}: {c} -> {p}");
                seen[p] = true;
            }
            assert!(o.len() >= chunks && o.len() < chunks + spacing as usize, "{chunks}, {spacing}: {}", o.len());
        }
        // Every fourth chunk of 16 from 2: consecutive positions.
        let o = SlotOrder::new(16, 4);
        let at: Vec<u32> = [2, 6, 10, 14].iter().map(|&c| o.of(c)).collect();
        assert_eq!(at, [8, 9, 10, 11]);
    }
}
