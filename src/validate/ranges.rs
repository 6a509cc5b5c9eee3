//! The validator's replay on ranges: every NPU's slots as runs of one contributor set
//! (`runs::Runs`), each transfer's chunks as ranges of them, applied whole. It only says
//! whether a schedule is valid: a schedule it finds anything wrong in (or cannot replay this
//! way) is replayed chunk by chunk (`replay`), which names every violation. So it may be
//! strict, never lenient: `Valid` only when the chunk replay would find nothing.

use super::sets::{IdHash, NONE, SetId, Sets};
use crate::collective::Pairs;
use crate::runs::{ChunkRanges, Runs, TooFragmented};
use crate::schedule::{Op, Schedule};
use crate::spans::Spans;
use std::collections::HashMap;

/// What the replay on ranges found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The data flow is valid and the postcondition holds.
    Valid,
    /// Some rule is broken (the chunk replay says which).
    Broken,
    /// This schedule is not replayed on ranges (scratch slots, destination slots, contributors
    /// that differ from chunk to chunk, rows fragmented down to single slots).
    Declined,
}

/// Replays `s` on ranges from the initial holders `pre` (every transfer passed its own
/// checks). `None` once `poll` says stop.
pub(super) fn verdict(s: &Schedule, pre: &Pairs, poll: &mut crate::schedule::StopPoll) -> Option<Verdict> {
    if !s.scratch.is_empty() {
        return Some(Verdict::Declined);
    }
    let Some(ranges) = ChunkRanges::new(s) else {
        return Some(Verdict::Declined);
    };
    // The contributors every chunk must end with: one set, or the chunk replay.
    let required = match pre.as_every() {
        Some((vs, k)) if k >= s.num_chunks => Some(vs),
        _ if s.combining => return Some(Verdict::Declined),
        _ => None,
    };
    let mut r = RangeReplay::new(s, pre, &ranges);
    let order = s.replay_order();
    for steps in order.steps(&s.transfers) {
        if poll.stopped(steps.start) {
            return None;
        }
        match r.step(steps.map(|k| order.get(k))) {
            Ok(true) => {}
            Ok(false) => return Some(Verdict::Broken),
            Err(TooFragmented) => return Some(Verdict::Declined),
        }
    }
    Some(if r.postcondition_holds(required) { Verdict::Valid } else { Verdict::Broken })
}

/// The replay's state: every NPU's row of contributor sets (`NONE`: not held).
struct RangeReplay<'a> {
    s: &'a Schedule,
    ranges: &'a ChunkRanges,
    rows: Runs<SetId>,
    sets: Sets,
    numbering: Numbering,
    /// Each set's numbering (indexed by id).
    tags: Vec<u32>,
    /// (a, b) -> whether they share a contributor, and a ∪ b; (a, b) -> a ⊆ b: for the step.
    reduce_memo: HashMap<(SetId, SetId), (bool, SetId), IdHash>,
    subset_memo: HashMap<(SetId, SetId), bool, IdHash>,
    /// The step's reads, flat: (lo, hi, value) pieces; `reads_of` per transfer of the step.
    reads: Vec<(u32, u32, SetId)>,
    reads_of: Vec<(u32, u32, usize, usize)>,
    /// The step's transfers, by source.
    here: Vec<(u32, u32)>,
    /// The step's writes: (dst, lo, hi, is a copy).
    writes: Vec<(u32, u32, u32, bool)>,
    old: Vec<(u32, u32, SetId)>,
    pieces: Vec<(u32, u32, SetId)>,
    removed: Vec<SetId>,
    added: Vec<SetId>,
}

impl<'a> RangeReplay<'a> {
    fn new(s: &'a Schedule, pre: &Pairs, ranges: &'a ChunkRanges) -> RangeReplay<'a> {
        let npus = s.topology.npus();
        let numbering = Numbering::new(s, ranges);
        let mut sets = Sets::default();
        let mut tags: Vec<u32> = vec![0];
        // Non-combining collectives only track "held": one set stands for it. Combining ones
        // start with one singleton per NPU and numbering, shared by all its chunks.
        let held = (!s.combining).then(|| sets.add(Spans::singleton(0)));
        let mut own = |sets: &mut Sets, v: usize, tag: u32| match held {
            Some(h) => h,
            None => {
                let id = sets.add(Spans::singleton(numbering.perms[tag as usize][v]));
                set_tag(&mut tags, id, tag);
                id
            }
        };
        let len = ranges.positions();
        // A holder's positions as (position range, numbering): one singleton per numbering.
        let pieces = |lo: u32, hi: u32| numbering.split(lo, hi);
        let mut row_of = |sets: &mut Sets, v: usize, at: &[(u32, u32)]| {
            let mut ids: Vec<SetId> = vec![NONE; numbering.perms.len()];
            let mut row = Vec::with_capacity(2 * at.len());
            for &(lo, hi) in at {
                for (a, b, tag) in pieces(lo, hi) {
                    if ids[tag as usize] == NONE {
                        ids[tag as usize] = own(sets, v, tag);
                    }
                    row.push((a, ids[tag as usize]));
                    row.push((b, NONE));
                }
            }
            canonical(row, len)
        };
        let rows = match pre.as_every() {
            Some((vs, k)) => {
                let below = ranges.chunks_below(k as u32);
                let mut is_holder = vec![false; npus];
                for &v in vs {
                    is_holder[v as usize] = true;
                }
                Runs::new(npus, len, NONE, |v| if is_holder[v] { row_of(&mut sets, v, &below) } else { Vec::new() })
            }
            None => {
                let mut by_npu: Vec<Vec<u32>> = vec![Vec::new(); npus];
                for [v, c] in pre.iter() {
                    by_npu[v as usize].push(ranges.position(c));
                }
                Runs::new(npus, len, NONE, |v| {
                    let at = &mut by_npu[v];
                    at.sort_unstable();
                    at.dedup();
                    let at: Vec<(u32, u32)> = at.iter().map(|&p| (p, p + 1)).collect();
                    row_of(&mut sets, v, &at)
                })
            }
        };
        // Every run holds its set once.
        for v in 0..npus {
            for &(_, id) in rows.row(v) {
                if id != NONE {
                    sets.hold(id);
                }
            }
        }
        sets.end_step();
        RangeReplay {
            s,
            ranges,
            rows,
            sets,
            numbering,
            tags,
            reduce_memo: HashMap::default(),
            subset_memo: HashMap::default(),
            reads: Vec::new(),
            reads_of: Vec::new(),
            here: Vec::new(),
            writes: Vec::new(),
            old: Vec::new(),
            pieces: Vec::new(),
            removed: Vec::new(),
            added: Vec::new(),
        }
    }

    /// One step's transfers (by index, in replay order): `Ok(false)` at the first broken rule.
    fn step(&mut self, transfers: impl Iterator<Item = usize>) -> Result<bool, TooFragmented> {
        let s = self.s;
        self.reads.clear();
        self.reads_of.clear();
        self.writes.clear();
        // Reads by source and writes by destination, so the accesses to one NPU's row follow
        // each other while it is in the cache (in array order a step of bucket's touches each
        // row once per part, and each visit missed it). The verdict does not depend on the
        // order: reads all see the slots as they were before the step, a copy meets no other
        // write in its slots, and reduces into one slot commute.
        self.here.clear();
        self.here.extend(transfers.map(|i| (s.transfers.at(i).src, i as u32)));
        self.here.sort_unstable();
        for &(_, i) in &self.here {
            let i = i as usize;
            let t = s.transfers.at(i);
            let Some(rs) = self.ranges.of(s, i) else { return Ok(false) };
            let start = self.reads.len();
            for &(lo, hi) in rs.as_slice() {
                self.rows.read(t.src as usize, lo, hi, &mut self.reads);
                self.writes.push((t.dst, lo, hi, t.op == Op::Copy));
            }
            if self.reads[start..].iter().any(|r| r.2 == NONE) {
                return Ok(false);
            }
            self.reads_of.push((t.dst, i as u32, start, self.reads.len()));
        }
        if !self.one_copy_per_slot() {
            return Ok(false);
        }
        self.reduce_memo.clear();
        self.subset_memo.clear();
        self.sets.end_step();
        let mut reads_of = std::mem::take(&mut self.reads_of);
        reads_of.sort_unstable();
        for &(dst, i, a, b) in &reads_of {
            if !self.apply(dst as usize, s.transfers.at(i as usize).op, a, b)? {
                return Ok(false);
            }
        }
        self.reads_of = reads_of;
        Ok(true)
    }

    /// No slot is written by a copy and any other write in this step.
    fn one_copy_per_slot(&mut self) -> bool {
        self.writes.sort_unstable_by_key(|w| (w.0, w.1));
        let mut reach: Option<(u32, u32, bool)> = None; // (dst, furthest end, a copy among them)
        for &(dst, lo, hi, copy) in &self.writes {
            match reach {
                Some((d, end, had_copy)) if d == dst && lo < end => {
                    if copy || had_copy {
                        return false;
                    }
                    reach = Some((d, end.max(hi), false));
                }
                _ => reach = Some((dst, hi, copy)),
            }
        }
        true
    }

    /// Writes the read pieces `a..b` into `dst` by `op`: `Ok(false)` when that breaks a rule.
    fn apply(&mut self, dst: usize, op: Op, a: usize, b: usize) -> Result<bool, TooFragmented> {
        let combining = self.s.combining;
        // The pieces are consecutive within each of the transfer's ranges: write range by range.
        let mut k = a;
        while k < b {
            let lo = self.reads[k].0;
            let mut e = k + 1;
            while e < b && self.reads[e].0 == self.reads[e - 1].1 {
                e += 1;
            }
            let hi = self.reads[e - 1].1;
            self.old.clear();
            self.rows.read(dst, lo, hi, &mut self.old);
            self.pieces.clear();
            // Walk the source's pieces and the destination's together.
            let (mut x, mut y) = (k, 0);
            let mut at = lo;
            while at < hi {
                let (src, old) = (self.reads[x], self.old[y]);
                let end = src.1.min(old.1);
                let value = match op {
                    Op::Copy => {
                        if combining && old.2 != NONE && !self.is_subset(old.2, src.2) {
                            return Ok(false);
                        }
                        src.2
                    }
                    Op::Reduce => {
                        if old.2 == NONE {
                            return Ok(false);
                        }
                        let (common, union) = self.reduce(old.2, src.2);
                        if common {
                            return Ok(false);
                        }
                        union
                    }
                };
                match self.pieces.last_mut() {
                    Some(p) if p.2 == value => p.1 = end,
                    _ => self.pieces.push((at, end, value)),
                }
                at = end;
                if src.1 == end {
                    x += 1;
                }
                if old.1 == end {
                    y += 1;
                }
            }
            let (sets, tags) = (&self.sets, &self.tags);
            // Sets of two numberings are never one run, whatever their numbers.
            let same = |p: SetId, q: SetId| {
                p == q || (p != NONE && q != NONE && tags[p as usize] == tags[q as usize] && sets.get(p) == sets.get(q))
            };
            self.removed.clear();
            self.added.clear();
            let wrote = self.rows.write(dst, lo, hi, &self.pieces, same, &mut self.removed, &mut self.added);
            for &id in &self.added {
                if id != NONE {
                    self.sets.hold(id);
                }
            }
            for &id in &self.removed {
                if id != NONE {
                    self.sets.release(id);
                }
            }
            wrote?;
            k = e;
        }
        Ok(true)
    }

    fn reduce(&mut self, a: SetId, b: SetId) -> (bool, SetId) {
        if let Some(&r) = self.reduce_memo.get(&(a, b)) {
            return r;
        }
        let (x, y) = (self.sets.get(a), self.sets.get(b));
        let common = x.first_common(y).is_some();
        let u = x.union(y);
        let id = self.sets.add(u);
        let tag = self.tags[a as usize];
        set_tag(&mut self.tags, id, tag);
        let r = (common, id);
        self.reduce_memo.insert((a, b), r);
        r
    }

    fn is_subset(&mut self, a: SetId, b: SetId) -> bool {
        if a == b {
            return true;
        }
        let sets = &self.sets;
        *self.subset_memo.entry((a, b)).or_insert_with(|| sets.get(a).is_subset_of(sets.get(b)))
    }

    /// Every postcondition pair is held, with every contributor (`required`'s NPUs, in each
    /// numbering) when combining.
    fn postcondition_holds(&mut self, required: Option<&[u32]>) -> bool {
        let s = self.s;
        let npus = s.topology.npus();
        let want: Vec<Spans> = match required {
            Some(vs) if s.combining => self
                .numbering
                .perms
                .iter()
                .map(|perm| {
                    let mut ids: Vec<u32> = vs.iter().map(|&v| perm[v as usize]).collect();
                    ids.sort_unstable();
                    Spans::from_sorted_ids(&ids)
                })
                .collect(),
            _ => Vec::new(),
        };
        let (sets, tags) = (&self.sets, &self.tags);
        let good = |id: SetId| id != NONE && (want.is_empty() || *sets.get(id) == want[tags[id as usize] as usize]);
        let post = &s.postcondition;
        match post.as_every() {
            Some((vs, k)) => {
                let below = self.ranges.chunks_below(k as u32);
                let mut pieces = Vec::new();
                vs.iter().all(|&v| {
                    (v as usize) < npus
                        && below.iter().all(|&(lo, hi)| {
                            pieces.clear();
                            self.rows.read(v as usize, lo, hi, &mut pieces);
                            pieces.iter().all(|p| good(p.2))
                        })
                })
            }
            None => post.iter().all(|[v, c]| {
                (v as usize) < npus
                    && (c as usize) < s.num_chunks
                    && good(self.rows.get(v as usize, self.ranges.position(c)))
            }),
        }
    }
}

/// Records `id`'s numbering.
fn set_tag(tags: &mut Vec<u32>, id: SetId, tag: u32) {
    if tags.len() <= id as usize {
        tags.resize(id as usize + 1, 0);
    }
    tags[id as usize] = tag;
}

/// The NPU numbering each block of row positions holds its contributor sets in. A contributor
/// set is a list of ranges of NPU numbers, and a structured schedule reduces along one axis of
/// a grid first: on a torus of NPUs numbered X fastest, the parts of bucket that reduce along Y
/// first make sets of every 128th NPU (128 ranges each, millions of them alive: 7.8 GB on
/// torus:128x128). Numbered with the axis each block's reductions run along first as the
/// fastest, each such set is one range. Union, intersection and inclusion do not depend on
/// the numbering, only the NPU ids put in and the contributors required do.
struct Numbering {
    /// The blocks' starts, rising, and each block's numbering.
    starts: Vec<u32>,
    tag: Vec<u32>,
    /// Per numbering, each NPU's number.
    perms: Vec<Vec<u32>>,
}

impl Numbering {
    fn new(s: &Schedule, ranges: &ChunkRanges) -> Numbering {
        let npus = s.topology.npus();
        let blocks = ranges.layout().blocks();
        let identity = || Numbering { starts: vec![0], tag: vec![0], perms: vec![(0..npus as u32).collect()] };
        let grid = match s.topology.grid_or_whole() {
            Some(g) if s.combining && g.dims.len() > 1 && !blocks.is_empty() => g,
            _ => return identity(),
        };
        let dims = grid.dims.len();
        // Each block's axes in the order its first reductions run along them.
        let mut axes: Vec<Vec<usize>> = vec![Vec::new(); blocks.len()];
        let mut open = blocks.len();
        for i in 0..s.transfers.len() {
            if open == 0 {
                break;
            }
            let t = s.transfers.at(i);
            if t.op != Op::Reduce {
                continue;
            }
            let Some(first) = ranges.of(s, i).and_then(|r| r.as_slice().first().copied()) else { continue };
            let b = blocks.partition_point(|&(start, _)| start <= first.0).saturating_sub(1);
            let found = &mut axes[b];
            if found.len() == dims {
                continue;
            }
            let (u, v) = (t.src as usize, t.dst as usize);
            if let Some(d) = (0..dims).find(|&d| grid.coord(u, d) != grid.coord(v, d))
                && !found.contains(&d)
            {
                found.push(d);
                if found.len() == dims {
                    open -= 1;
                }
            }
        }
        let mut orders: Vec<Vec<usize>> = Vec::new();
        let mut tag = Vec::with_capacity(blocks.len());
        for mut order in axes {
            for d in 0..dims {
                if !order.contains(&d) {
                    order.push(d);
                }
            }
            let k = match orders.iter().position(|o| *o == order) {
                Some(k) => k,
                None => {
                    orders.push(order);
                    orders.len() - 1
                }
            };
            tag.push(k as u32);
        }
        let perms = orders
            .iter()
            .map(|order| {
                (0..npus)
                    .map(|v| {
                        let (mut number, mut scale) = (0usize, 1usize);
                        for &d in order {
                            number += grid.coord(v, d) * scale;
                            scale *= grid.dims[d];
                        }
                        number as u32
                    })
                    .collect()
            })
            .collect();
        Numbering { starts: blocks.iter().map(|b| b.0).collect(), tag, perms }
    }

    /// `lo..hi` cut where the numbering changes: `(lo, hi, numbering)` pieces.
    fn split(&self, lo: u32, hi: u32) -> Vec<(u32, u32, u32)> {
        let mut out = Vec::new();
        let mut b = self.starts.partition_point(|&x| x <= lo).saturating_sub(1);
        let mut at = lo;
        while at < hi {
            let end = self.starts.get(b + 1).map_or(hi, |&x| x.min(hi));
            match out.last_mut() {
                Some((_, e, t)) if *t == self.tag[b] => *e = end,
                _ => out.push((at, end, self.tag[b])),
            }
            at = end;
            b += 1;
        }
        out
    }
}

/// A row's runs rising from 0, below `len`, with a later run at the same start replacing an
/// earlier one and neighbours of one value merged.
fn canonical(row: Vec<(u32, SetId)>, len: u32) -> Vec<(u32, SetId)> {
    let mut out: Vec<(u32, SetId)> = Vec::with_capacity(row.len());
    for (start, id) in row.into_iter().filter(|r| r.0 < len) {
        match out.last_mut() {
            Some(last) if last.0 == start => last.1 = id,
            _ => out.push((start, id)),
        }
        let n = out.len();
        if n >= 2 && out[n - 2].1 == out[n - 1].1 {
            out.pop();
        }
    }
    out
}
