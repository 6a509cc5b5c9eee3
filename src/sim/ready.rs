//! The replay's two stores of when each (NPU, slot)'s contents are final: a table of slots,
//! and runs of slots per NPU for schedules whose messages carry ranges of chunks.

use crate::schedule::Schedule;
use crate::slots::SlotTable;

/// When each slot's contents are final, as a replay keeps them.
pub(super) trait Ready {
    /// When transfer `i`'s source slots are all final.
    fn ready(&mut self, s: &Schedule, i: usize) -> f64;
    /// Transfer `i`'s written slots are final at `end` (unless a later end already stands
    /// there). `false` when this store gives up (a fragmented row).
    fn land(&mut self, s: &Schedule, i: usize, end: f64) -> bool;
}

/// A table cell per (npu, slot).
pub(super) struct SlotReady {
    /// Chunks laid out so that the evenly spaced lists most messages carry sit side by side.
    pos: Vec<u32>,
    /// A slot's contents are final when the transfer that wrote them last ends: the table holds
    /// that transfer (index + 1; 0 for a slot never written, final at time 0) and `ends` its
    /// end, 4 bytes a slot instead of 8 (bucket on torus:64x64 in 4 parts: 2^26 slots).
    table: SlotTable<u32>,
    ends: Vec<f64>,
}

impl SlotReady {
    pub(super) fn new(s: &Schedule) -> SlotReady {
        let layout = crate::slots::SlotOrder::new(s.num_chunks, s.transfers.dominant_spacing());
        let pos: Vec<u32> = (0..s.num_chunks as u32)
            .map(|c| layout.of(c))
            .chain((0..s.scratch.len() as u32).map(|i| layout.len() as u32 + i))
            .collect();
        let table = SlotTable::for_filled(s.topology.npus(), layout.len() + s.scratch.len(), filled(s));
        SlotReady { pos, table, ends: vec![0.0f64; s.transfers.len() + 1] }
    }
}

/// About how many cells of the table a replay of `s` writes: every postcondition pair (and
/// every precondition pair is read) once a schedule is valid, but never more than its chunk
/// moves (a 50 kB file declaring 2^30 cells and no transfer had a dense table of 4 GiB).
pub(super) fn filled(s: &Schedule) -> usize {
    s.precondition.len().max(s.postcondition.len()).min(crate::runs::chunk_moves(s))
}

impl Ready for SlotReady {
    fn ready(&mut self, s: &Schedule, i: usize) -> f64 {
        let t = s.transfers.at(i);
        let mut start = 0.0f64;
        for &c in t.chunks {
            start = start.max(self.ends[*self.table.get(t.src as usize, self.pos[c as usize] as usize) as usize]);
        }
        start
    }

    fn land(&mut self, s: &Schedule, i: usize, end: f64) -> bool {
        self.ends[i + 1] = end;
        let t = s.transfers.at(i);
        for &c in t.written() {
            let p = self.pos[c as usize] as usize;
            let old = *self.table.get(t.dst as usize, p);
            if end > self.ends[old as usize] {
                self.table.set(t.dst as usize, p, i as u32 + 1);
            }
        }
        true
    }
}

/// Each NPU's row of slots as runs of one end time (`runs::Runs`), each transfer's chunks as
/// ranges of it.
pub(super) struct RangeReady {
    rows: crate::runs::Runs<f64>,
    ranges: crate::runs::ChunkRanges,
    pieces: Vec<(u32, u32, f64)>,
    scratch: (Vec<f64>, Vec<f64>),
}

impl RangeReady {
    pub(super) fn new(s: &Schedule, ranges: crate::runs::ChunkRanges) -> RangeReady {
        RangeReady {
            rows: crate::runs::Runs::new(s.topology.npus(), ranges.positions(), 0.0, |_| Vec::new()),
            ranges,
            pieces: Vec::new(),
            scratch: (Vec::new(), Vec::new()),
        }
    }
}

impl Ready for RangeReady {
    fn ready(&mut self, s: &Schedule, i: usize) -> f64 {
        let src = s.transfers.at(i).src as usize;
        self.pieces.clear();
        if let Some(rs) = self.ranges.of(s, i) {
            for &(lo, hi) in rs.as_slice() {
                self.rows.read(src, lo, hi, &mut self.pieces);
            }
        }
        self.pieces.iter().fold(0.0, |a, p| a.max(p.2))
    }

    fn land(&mut self, s: &Schedule, i: usize, end: f64) -> bool {
        let dst = s.transfers.at(i).dst as usize;
        let Some(rs) = self.ranges.of(s, i) else { return true };
        for &(lo, hi) in rs.as_slice() {
            self.pieces.clear();
            self.rows.read(dst, lo, hi, &mut self.pieces);
            for p in &mut self.pieces {
                p.2 = p.2.max(end);
            }
            let (removed, added) = &mut self.scratch;
            removed.clear();
            added.clear();
            if self.rows.write(dst, lo, hi, &self.pieces, |a, b| a == b, removed, added).is_err() {
                return false;
            }
        }
        true
    }
}
