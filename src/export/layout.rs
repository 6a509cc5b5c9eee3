//! Where a collective's chunks live in a runtime's buffers (MSCCL's and MSCCL++'s alike): input,
//! output and scratch cells per rank, the chunk numbering that makes chunks moved together
//! consecutive, the aliasing of input and output in place, and (`Placement`) which cell holds
//! each slot's value as a program is generated.
use crate::collective::{Collective, CollectiveKind};
use crate::schedule::Schedule;
use std::collections::HashMap;

/// Which cells a collective's chunks start and end in, per rank.
pub(in crate::export) struct Layout {
    pub(in crate::export) kind: CollectiveKind,
    pub(in crate::export) coll: &'static str,
    pub(in crate::export) p: usize,
    pub(in crate::export) k: usize,
    /// NPU id → rank.
    pub(in crate::export) rank_of: HashMap<u32, u32>,
    pub(in crate::export) i_chunks: usize,
    pub(in crate::export) o_chunks: usize,
    /// Chunk → the chunk whose cells it takes (see `number_chunks`).
    pub(in crate::export) perm: Vec<u32>,
}

impl Layout {
    /// The layout of `c`'s chunks, for a runtime that names the collective `coll`. Only
    /// all-reduce, all-gather, reduce-scatter and all-to-all have cells (the writers refuse the
    /// others before they get here).
    pub(in crate::export) fn new(c: &Collective, coll: &'static str) -> Layout {
        let kind = c.spec.kind;
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
        Layout { kind, coll, p, k, rank_of, i_chunks, o_chunks, perm }
    }

    /// Numbers the chunks so that chunks that travel together get consecutive cells, and a
    /// message carrying them becomes one step instead of many. The cells of a chunk are free
    /// within a block of chunks the collective treats alike (every chunk of all-reduce; one
    /// rank's k chunks of all-gather and reduce-scatter; one
    /// sender-receiver pair's k chunks of all-to-all): within it, chunks are ordered by the
    /// list of transfers that carry them, so chunks moved together from the start sort next to
    /// each other (a recursive halving's nested halves become ranges).
    pub(in crate::export) fn number_chunks(&mut self, s: &Schedule) {
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
    pub(in crate::export) fn input(&self, r: usize, c: usize) -> Option<u32> {
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
    pub(in crate::export) fn output(&self, r: usize, c: usize) -> Option<u32> {
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
    pub(in crate::export) fn canonical(&self, r: usize, cell: Cell) -> Cell {
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
pub(in crate::export) enum Buf {
    I,
    O,
    S,
}

impl Buf {
    pub(in crate::export) fn letter(self) -> &'static str {
        match self {
            Buf::I => "i",
            Buf::O => "o",
            Buf::S => "s",
        }
    }
    pub(in crate::export) fn name(self) -> &'static str {
        match self {
            Buf::I => "input",
            Buf::O => "output",
            Buf::S => "scratch",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(in crate::export) struct Cell {
    pub(in crate::export) buf: Buf,
    pub(in crate::export) off: u32,
}

impl Cell {
    pub(in crate::export) fn s(off: u32) -> Cell {
        Cell { buf: Buf::S, off }
    }
    pub(in crate::export) fn plus(self, i: u32) -> Cell {
        Cell { buf: self.buf, off: self.off + i }
    }
}

/// Which cell holds each slot's value at each rank while a program is generated, and where a
/// write goes: a result straight into its output cell when that cell is free, anything else
/// into scratch (never into the input, which the caller may still need out of place).
pub(in crate::export) struct Placement<'a> {
    layout: &'a Layout,
    num_chunks: usize,
    /// Per rank, per slot: the cell holding its current value.
    loc: Vec<Vec<Option<Cell>>>,
    /// Per rank, per storage cell (canonical): the slot whose current value lives there.
    occupant: Vec<HashMap<Cell, u32>>,
    /// Per rank, scratch cells handed out so far.
    pub(in crate::export) scratch_next: Vec<u32>,
    scratch_home: HashMap<(u32, u32), u32>,
    /// Per (rank, slot): the last step of the schedule that reads it there.
    last_read: HashMap<(u32, u32), u32>,
    /// Per rank, the slots it must hold at the end, sorted.
    post: Vec<Vec<u32>>,
}

impl<'a> Placement<'a> {
    /// Every precondition chunk in its input cell.
    pub(in crate::export) fn new(s: &Schedule, layout: &'a Layout) -> Placement<'a> {
        let p = layout.p;
        let mut loc = vec![vec![None; s.slots()]; p];
        let mut occupant: Vec<HashMap<Cell, u32>> = vec![HashMap::new(); p];
        for [v, c] in s.precondition.iter() {
            let r = layout.rank_of[&v] as usize;
            if let Some(off) = layout.input(r, c as usize) {
                let cell = Cell { buf: Buf::I, off };
                loc[r][c as usize] = Some(cell);
                occupant[r].insert(layout.canonical(r, cell), c);
            }
        }
        let mut post = vec![Vec::new(); p];
        for [v, c] in s.postcondition.iter() {
            post[layout.rank_of[&v] as usize].push(c);
        }
        post.iter_mut().for_each(|v| v.sort_unstable());
        // A local move reads after its step's landings (the writers generate it last), so it
        // counts as read one step later: no landing of its step takes the cell it reads.
        let mut last_read = HashMap::new();
        for t in &s.transfers {
            let Some(&r) = layout.rank_of.get(&t.src) else { continue };
            let read = if t.src == t.dst { t.step + 1 } else { t.step };
            for &c in t.chunks.iter() {
                let e = last_read.entry((r, c)).or_insert(read);
                *e = (*e).max(read);
            }
        }
        Placement {
            layout,
            num_chunks: s.num_chunks,
            loc,
            occupant,
            scratch_next: vec![0; p],
            scratch_home: HashMap::new(),
            last_read,
            post,
        }
    }

    /// The cell holding `slot`'s value at rank `r`.
    pub(in crate::export) fn at(&self, r: u32, slot: u32) -> Option<Cell> {
        self.loc[r as usize][slot as usize]
    }

    /// The cell a write of `slot` at rank `r` goes to: its output cell, unless that cell (in
    /// place, where input and output are one buffer) still holds another slot's value that
    /// is read after this step or needed at the end; otherwise the slot's scratch cell.
    pub(in crate::export) fn target(&mut self, r: u32, slot: u32, step: u32) -> Cell {
        let layout = self.layout;
        let home = (slot as usize) < self.num_chunks && self.post[r as usize].binary_search(&slot).is_ok();
        if home && let Some(off) = layout.output(r as usize, slot as usize) {
            let cell = Cell { buf: Buf::O, off };
            let canon = layout.canonical(r as usize, cell);
            let free = match self.occupant[r as usize].get(&canon) {
                None => true,
                Some(&o) if o == slot => true,
                Some(&o) => {
                    let later = self.last_read.get(&(r, o)).is_some_and(|&st| st > step);
                    let needed = self.post[r as usize].binary_search(&o).is_ok();
                    !later && !needed
                }
            };
            if free {
                return cell;
            }
        }
        let next = &mut self.scratch_next[r as usize];
        let off = *self.scratch_home.entry((r, slot)).or_insert_with(|| {
            *next += 1;
            *next - 1
        });
        Cell::s(off)
    }

    /// Records that `slot`'s value at rank `r` now lives in `cell`.
    pub(in crate::export) fn moved(&mut self, r: u32, slot: u32, cell: Cell) {
        let (ri, layout) = (r as usize, self.layout);
        if let Some(old) = self.loc[ri][slot as usize] {
            let old = layout.canonical(ri, old);
            if self.occupant[ri].get(&old) == Some(&slot) {
                self.occupant[ri].remove(&old);
            }
        }
        self.occupant[ri].insert(layout.canonical(ri, cell), slot);
        self.loc[ri][slot as usize] = Some(cell);
    }

    /// `n` fresh scratch cells at rank `r`.
    pub(in crate::export) fn alloc_scratch(&mut self, r: u32, n: u32) -> Cell {
        let next = &mut self.scratch_next[r as usize];
        *next += n;
        Cell::s(*next - n)
    }

    /// The copies that put every result of rank `r` not yet in its output cell there, as
    /// runs (from, to, count) of at most `max_count` consecutive cells.
    pub(in crate::export) fn final_runs(&self, r: usize, max_count: u32) -> Vec<(Cell, Cell, u32)> {
        let mut pairs: Vec<(Cell, Cell)> = Vec::new();
        for &c in &self.post[r] {
            let Some(off) = self.layout.output(r, c as usize) else { continue };
            let out = Cell { buf: Buf::O, off };
            let cur = self.loc[r][c as usize].expect("a valid schedule meets its postcondition");
            if cur != out {
                pairs.push((cur, out));
            }
        }
        pairs.sort();
        let mut runs = Vec::new();
        let mut i = 0;
        while i < pairs.len() {
            let mut n = 1;
            while i + (n as usize) < pairs.len()
                && n < max_count
                && pairs[i + n as usize].0 == pairs[i].0.plus(n)
                && pairs[i + n as usize].1 == pairs[i].1.plus(n)
            {
                n += 1;
            }
            runs.push((pairs[i].0, pairs[i].1, n));
            i += n as usize;
        }
        runs
    }
}
