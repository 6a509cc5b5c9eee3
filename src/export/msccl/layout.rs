//! Where a collective's chunks live in the MSCCL executor's buffers: input, output and scratch
//! cells per rank, the chunk numbering that makes chunks moved together consecutive, and the
//! aliasing of input and output in place.
use super::{MscclError, MscclTarget};
use crate::collective::{Collective, CollectiveKind};
use crate::schedule::Schedule;
use std::collections::HashMap;

/// Which cells a collective's chunks start and end in, per rank.
pub(super) struct Layout {
    pub(super) kind: CollectiveKind,
    pub(super) coll: &'static str,
    pub(super) p: usize,
    pub(super) k: usize,
    /// NPU id → rank.
    pub(super) rank_of: HashMap<u32, u32>,
    pub(super) i_chunks: usize,
    pub(super) o_chunks: usize,
    /// Chunk → the chunk whose cells it takes (see `number_chunks`).
    pub(super) perm: Vec<u32>,
}

impl Layout {
    pub(super) fn new(c: &Collective, target: MscclTarget) -> Result<Layout, MscclError> {
        let kind = c.spec.kind;
        let legacy = target == MscclTarget::Legacy;
        let coll = match kind {
            CollectiveKind::AllReduce => "allreduce",
            CollectiveKind::AllGather => "allgather",
            CollectiveKind::ReduceScatter if legacy => "reduce_scatter",
            CollectiveKind::ReduceScatter => "reducescatter",
            CollectiveKind::AllToAll => "alltoall",
            // The executor has both, but selects a file without regard to the root
            // (`mscclInternalSchedulerSelectAlgo`: collective, ranks, size, in place), so any root but the
            // file's would run the wrong program.
            CollectiveKind::Broadcast | CollectiveKind::Reduce if !legacy => {
                let root = c.spec.root.unwrap_or(0) as u32;
                return Err(MscclError::RootNotBound { kind: kind.name(), root });
            }
            _ => {
                return Err(MscclError::UnsupportedCollective {
                    kind: kind.name(),
                    target: target.name(),
                    extra: if legacy { "" } else { ", broadcast and reduce" },
                });
            }
        };
        let p = c.group.len();
        let k = c.spec.chunks() as usize;
        let rank_of = c.group.iter().enumerate().map(|(r, &v)| (v as u32, r as u32)).collect::<HashMap<_, _>>();
        let (i_chunks, o_chunks) = match kind {
            CollectiveKind::AllReduce => (p * k, p * k),
            CollectiveKind::AllGather => (k, p * k),
            CollectiveKind::ReduceScatter => (p * k, k),
            _ => (p * k, p * k),
        };
        let perm = (0..c.num_chunks as u32).collect();
        Ok(Layout { kind, coll, p, k, rank_of, i_chunks, o_chunks, perm })
    }

    /// Numbers the chunks so that chunks that travel together get consecutive cells, and a
    /// message carrying them becomes one step instead of many. The cells of a chunk are free
    /// within a block of chunks the collective treats alike (every chunk of all-reduce; one
    /// rank's k chunks of all-gather and reduce-scatter; one
    /// sender-receiver pair's k chunks of all-to-all): within it, chunks are ordered by the
    /// list of transfers that carry them, so chunks moved together from the start sort next to
    /// each other (a recursive halving's nested halves become ranges).
    pub(super) fn number_chunks(&mut self, s: &Schedule) {
        let n = self.perm.len();
        let mut carried_by: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (pos, ti) in s.replay_order().iter().enumerate() {
            for &c in s.transfers.at(ti).chunks {
                if (c as usize) < n && carried_by[c as usize].last() != Some(&(pos as u32)) {
                    carried_by[c as usize].push(pos as u32);
                }
            }
        }
        let block = match self.kind {
            CollectiveKind::AllReduce => n,
            _ => self.k,
        }
        .max(1);
        for start in (0..n).step_by(block) {
            let end = (start + block).min(n);
            let mut order: Vec<u32> = (start as u32..end as u32).collect();
            order.sort_by(|&a, &b| carried_by[a as usize].cmp(&carried_by[b as usize]).then(a.cmp(&b)));
            for (i, c) in order.into_iter().enumerate() {
                self.perm[c as usize] = (start + i) as u32;
            }
        }
    }

    /// The input cell chunk `c` starts in at rank `r`, if it starts there.
    pub(super) fn input(&self, r: usize, c: usize) -> Option<u32> {
        let c = self.perm[c] as usize;
        let (k, p) = (self.k, self.p);
        let off = match self.kind {
            CollectiveKind::AllReduce | CollectiveKind::ReduceScatter => Some(c),
            CollectiveKind::AllGather => (c / k == r).then_some(c % k),
            CollectiveKind::AllToAll => {
                let (from, to, x) = (c / k / p, c / k % p, c % k);
                (from == r).then_some(to * k + x)
            }
            _ => None,
        };
        off.map(|o| o as u32)
    }

    /// The output cell chunk `c` must end in at rank `r`, if it must end there.
    pub(super) fn output(&self, r: usize, c: usize) -> Option<u32> {
        let c = self.perm[c] as usize;
        let (k, p) = (self.k, self.p);
        let off = match self.kind {
            CollectiveKind::AllReduce | CollectiveKind::AllGather => Some(c),
            CollectiveKind::ReduceScatter => (c / k == r).then_some(c % k),
            CollectiveKind::AllToAll => {
                let (from, to, x) = (c / k / p, c / k % p, c % k);
                (to == r).then_some(from * k + x)
            }
            _ => None,
        };
        off.map(|o| o as u32)
    }

    /// The one storage location of a cell at rank `r` when input and output are one buffer
    /// (in place): aliased input cells are named by their output cell.
    pub(super) fn canonical(&self, r: usize, cell: Cell) -> Cell {
        if cell.buf != Buf::I {
            return cell;
        }
        let j = cell.off as usize;
        let k = self.k;
        let alias = match self.kind {
            CollectiveKind::AllGather => Some(r * k + j),
            CollectiveKind::ReduceScatter => (j / k == r).then_some(j % k),
            _ => Some(j),
        };
        match alias {
            Some(o) => Cell { buf: Buf::O, off: o as u32 },
            None => cell,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Buf {
    I,
    O,
    S,
}

impl Buf {
    pub(super) fn letter(self) -> &'static str {
        match self {
            Buf::I => "i",
            Buf::O => "o",
            Buf::S => "s",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Cell {
    pub(super) buf: Buf,
    pub(super) off: u32,
}

impl Cell {
    pub(super) fn s(off: u32) -> Cell {
        Cell { buf: Buf::S, off }
    }
    pub(super) fn plus(self, i: u32) -> Cell {
        Cell { buf: self.buf, off: self.off + i }
    }
}
