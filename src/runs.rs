//! Per-NPU rows of slot positions held as runs of one value, and each transfer's chunk list as
//! ranges of those positions: what the validator's and the simulator's replays on ranges use
//! instead of a table cell per (npu, slot), so their cost follows transfers and runs, not chunk
//! moves (bucket's all-reduce on torus:128x128 moves 1.07 G chunks in 33 M transfers).

use crate::schedule::Schedule;
use rustc_hash::FxHashMap as HashMap;

/// A row holding more runs than this gives up (`Runs::write` says so): a schedule whose
/// messages scatter single chunks fragments its rows down to one run a slot, and a run map
/// then costs more than a table. The replays fall back to their tables.
pub const MAX_ROW_RUNS: usize = 1 << 13;

/// One row per NPU over positions `0..len`, each row a list of runs `(start, value)` rising
/// by start, the first at 0: a run lasts until the next one starts (or `len`). Neighbouring
/// runs hold different values (as `same` tells them apart when they are written).
pub struct Runs<V> {
    rows: Vec<Vec<(u32, V)>>,
    len: u32,
    /// Per row and each `HINTS`-th of its positions, the run last found there: structured
    /// schedules move through a row a block at a time, so the run they look for next is that
    /// one or its neighbour, and a binary search over a row of hundreds of runs missed the
    /// cache at every probe (bucket on torus:64x64: 60% of its replay).
    hints: Vec<u32>,
    /// Runs held in all rows, and how many they may hold.
    total: usize,
    budget: usize,
}

const HINTS: usize = 8;

/// All rows together holding more runs than one in this many of the table's cells (and more
/// than a million) give up too: the replays on ranges run beside each other, and a schedule
/// whose rows fragment everywhere (a circulant all-gather) held gigabytes of runs beside the
/// other replay's table before they gave up one row at a time.
pub const CELLS_PER_RUN: usize = 16;

/// A row outgrew `MAX_ROW_RUNS`, or the rows their budget.
#[derive(Debug, PartialEq, Eq)]
pub struct TooFragmented;

impl<V: Copy> Runs<V> {
    /// `npus` rows over `len` positions, built by `row(v)` as runs rising from 0 (a run at 0 is
    /// added with `fill` when the first does not start there).
    pub fn new(npus: usize, len: u32, fill: V, mut row: impl FnMut(usize) -> Vec<(u32, V)>) -> Runs<V> {
        let rows: Vec<Vec<(u32, V)>> = (0..npus)
            .map(|v| {
                let mut r = row(v);
                if r.first().is_none_or(|f| f.0 != 0) {
                    r.insert(0, (0, fill));
                }
                debug_assert!(r.windows(2).all(|w| w[0].0 < w[1].0) && r.last().is_none_or(|l| l.0 < len.max(1)));
                r
            })
            .collect();
        let total: usize = rows.iter().map(|r: &Vec<(u32, V)>| r.len()).sum();
        let budget = (npus * len as usize / CELLS_PER_RUN).max(1 << 20).max(total);
        Runs { hints: vec![0; npus * HINTS], rows, len, total, budget }
    }

    pub fn row(&self, v: usize) -> &[(u32, V)] {
        &self.rows[v]
    }

    /// The end of run `k` of a row.
    fn end(row: &[(u32, V)], k: usize, len: u32) -> u32 {
        row.get(k + 1).map_or(len, |r| r.0)
    }

    /// The index of the run holding position `p`.
    fn find(row: &[(u32, V)], p: u32) -> usize {
        row.partition_point(|r| r.0 <= p) - 1
    }

    /// `find` in row `v`, trying the run last found near `p` and its neighbours first.
    fn find_hinted(&mut self, v: usize, p: u32) -> usize {
        let row = &self.rows[v];
        let slot = v * HINTS + (p as u64 * HINTS as u64 / self.len.max(1) as u64) as usize;
        let h = self.hints[slot] as usize;
        let holds = |k: usize| k < row.len() && row[k].0 <= p && row.get(k + 1).is_none_or(|r| r.0 > p);
        let k = if holds(h) {
            h
        } else if holds(h + 1) {
            h + 1
        } else if h > 0 && holds(h - 1) {
            h - 1
        } else {
            Self::find(row, p)
        };
        self.hints[slot] = k as u32;
        k
    }

    /// Appends to `out` the pieces `(lo, hi, value)` of row `v` over `lo..hi` (`lo < hi`), in order.
    pub fn read(&mut self, v: usize, lo: u32, hi: u32, out: &mut Vec<(u32, u32, V)>) {
        let mut k = self.find_hinted(v, lo);
        let row = &self.rows[v];
        let mut at = lo;
        while at < hi {
            let end = Self::end(row, k, self.len).min(hi);
            out.push((at, end, row[k].1));
            at = end;
            k += 1;
        }
    }

    /// The value at position `p` of row `v`.
    pub fn get(&self, v: usize, p: u32) -> V {
        let row = &self.rows[v];
        row[Self::find(row, p)].1
    }

    /// Replaces `lo..hi` of row `v` with `pieces` (which cover exactly `lo..hi`, in order),
    /// merging neighbours that `same` says are equal. The values of the runs taken out are
    /// pushed onto `removed` and those of the runs put in onto `added` (for reference counts;
    /// a run cut in two counts as taken out once and put in twice).
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        v: usize,
        lo: u32,
        hi: u32,
        pieces: &[(u32, u32, V)],
        same: impl Fn(V, V) -> bool,
        removed: &mut Vec<V>,
        added: &mut Vec<V>,
    ) -> Result<(), TooFragmented> {
        debug_assert!(lo < hi && pieces.first().map(|p| p.0) == Some(lo) && pieces.last().map(|p| p.1) == Some(hi));
        let len = self.len;
        let i = self.find_hinted(v, lo);
        let row = &mut self.rows[v];
        let j = if Self::end(row, i, len) >= hi { i } else { Self::find(row, hi - 1) };
        let j_end = Self::end(row, j, len);
        // The runs i..=j are rebuilt, with their neighbours when a piece merges into them.
        let mut new: Vec<(u32, V)> = Vec::with_capacity(pieces.len() + 4);
        let first = if i > 0 { i - 1 } else { i };
        let last = if j + 1 < row.len() { j + 1 } else { j };
        let push = |new: &mut Vec<(u32, V)>, start: u32, value: V| match new.last() {
            Some(&(_, prev)) if same(prev, value) => {}
            _ => new.push((start, value)),
        };
        if first < i {
            push(&mut new, row[first].0, row[first].1);
        }
        if row[i].0 < lo {
            push(&mut new, row[i].0, row[i].1);
        }
        for &(a, _, value) in pieces {
            push(&mut new, a, value);
        }
        if hi < j_end {
            push(&mut new, hi, row[j].1);
        }
        if last > j {
            push(&mut new, row[last].0, row[last].1);
        }
        removed.extend(row[first..=last].iter().map(|r| r.1));
        added.extend(new.iter().map(|r| r.1));
        self.total = self.total + new.len() - (last + 1 - first);
        row.splice(first..=last, new);
        if row.len() > MAX_ROW_RUNS || self.total > self.budget { Err(TooFragmented) } else { Ok(()) }
    }
}

/// Where each chunk sits in a row, so that the evenly spaced lists a schedule's messages carry
/// are ranges of consecutive positions: chunks by residue modulo the greatest common spacing of
/// the lists (bucket's four parts on a 2D torus: every fourth chunk), and within a residue by
/// that residue's own most carried spacing (the parts that run along X first send every 32nd
/// of their chunks, those along Y first consecutive ones: no one order serves both).
pub struct RowLayout {
    /// Each chunk's position, then each scratch slot's.
    pos: Vec<u32>,
    len: u32,
    /// Each residue's positions: `(start, end)`, rising.
    blocks: Vec<(u32, u32)>,
}

impl RowLayout {
    pub fn new(s: &Schedule) -> RowLayout {
        let chunks = s.num_chunks as u32;
        // Entries carried per (stride, first chunk's residue modulo the stride) of even lists.
        let uses = s.transfers.list_uses();
        let mut by_stride: HashMap<(u32, u32), u64> = HashMap::default();
        let mut total = 0u64;
        for (list, n) in s.transfers.lists().zip(uses) {
            if n == 0 || list.len() < 2 {
                continue;
            }
            let d = list[1].wrapping_sub(list[0]);
            if d > 0 && d < chunks && list.windows(2).all(|w| w[1] == w[0].wrapping_add(d)) {
                *by_stride.entry((d, list[0])).or_default() += n * list.len() as u64;
                total += n * list.len() as u64;
            }
        }
        // The outer spacing: the gcd of the strides that carry a hundredth of the entries.
        let gcd = |mut a: u32, mut b: u32| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        let mut per_stride: HashMap<u32, u64> = HashMap::default();
        for (&(d, _), &w) in &by_stride {
            *per_stride.entry(d).or_default() += w;
        }
        let outer = per_stride.iter().filter(|&(_, &w)| w * 100 >= total).fold(0, |g, (&d, _)| gcd(g, d)).max(1);
        // Within each residue, its most carried spacing (in steps of `outer`).
        let mut inner_w: HashMap<(u32, u32), u64> = HashMap::default();
        for (&(d, first), &w) in &by_stride {
            if d % outer == 0 {
                *inner_w.entry((first % outer, d / outer)).or_default() += w;
            }
        }
        let mut inner = vec![(1u32, 0u64); outer as usize];
        for (&(r, sp), &w) in &inner_w {
            let best = &mut inner[r as usize];
            if (w, std::cmp::Reverse(sp)) > (best.1, std::cmp::Reverse(best.0)) {
                *best = (sp, w);
            }
        }
        let per = chunks.div_ceil(outer);
        // Each residue's order: its own spacing, or an order of the grid's axes where that
        // makes fewer ranges of the lists it carries.
        let mut orders: Vec<Order> = inner.iter().map(|&(sp, _)| Order::spaced(sp, per)).collect();
        let grid = grid_orders(s, per);
        if !grid.is_empty() {
            pick_orders(s, outer, &grid, &mut orders);
        }
        let mut base = Vec::with_capacity(outer as usize + 1);
        let mut blocks = Vec::with_capacity(outer as usize);
        let mut at = 0u32;
        for o in &orders {
            base.push(at);
            blocks.push((at, at + o.len()));
            at += o.len();
        }
        let mut pos: Vec<u32> = (0..chunks)
            .map(|c| {
                let r = (c % outer) as usize;
                base[r] + orders[r].place(c / outer)
            })
            .collect();
        pos.extend((0..s.scratch.len() as u32).map(|k| at + k));
        RowLayout { pos, len: at + s.scratch.len() as u32, blocks }
    }

    /// The position of slot `c` (a chunk or a scratch slot; `None` beyond them).
    pub fn of(&self, c: u32) -> Option<u32> {
        self.pos.get(c as usize).copied()
    }

    /// Each residue's positions, `(start, end)`, rising (the scratch slots after them).
    pub fn blocks(&self) -> &[(u32, u32)] {
        &self.blocks
    }

    /// Positions a row needs (some may belong to no chunk).
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The positions of chunks `0..k` as rising ranges.
    pub fn below(&self, k: u32) -> Vec<(u32, u32)> {
        let mut at: Vec<u32> = self.pos[..(k as usize).min(self.pos.len())].to_vec();
        at.sort_unstable();
        coalesce(&at)
    }
}

/// The order of one residue's chunks in its block: the chunk's index within the residue
/// read as digits of `radices` (fastest first), each digit weighted by `weights`. A spacing
/// `sp` is the radices `(sp, ⌈per/sp⌉)` with the second digit fastest; a grid's axes in
/// any order is its sides as radices.
#[derive(Clone, Debug, PartialEq)]
struct Order {
    radices: Vec<u32>,
    weights: Vec<u32>,
}

impl Order {
    /// Every `sp`-th chunk side by side (`sp` = 1: in chunk order).
    fn spaced(sp: u32, per: u32) -> Order {
        let rows = per.div_ceil(sp);
        Order { radices: vec![sp, rows], weights: vec![rows, 1] }
    }

    /// Radices (fastest first in the chunk's index) laid out with axis `by[0]` fastest.
    fn axes(radices: &[u32], by: &[usize]) -> Order {
        let mut weights = vec![0u32; radices.len()];
        let mut w = 1u32;
        for &a in by {
            weights[a] = w;
            w *= radices[a];
        }
        Order { radices: radices.to_vec(), weights }
    }

    /// Positions the block takes.
    fn len(&self) -> u32 {
        self.radices.iter().product()
    }

    fn place(&self, mut q: u32) -> u32 {
        let mut p = 0;
        for (&r, &w) in self.radices.iter().zip(&self.weights) {
            p += (q % r) * w;
            q /= r;
        }
        p
    }
}

/// The orders of a grid's axes a residue of `per` chunks may take: when `per` is the grid's NPU
/// count, or a multiple `m` of it (the `m` sub-chunks of an NPU's block together, before or
/// after the NPUs), every order of those axes (grids of up to three dimensions; bucket's 3-D
/// all-gather sends planes along the slowest of its part's axes and lines along the fastest:
/// in id order a plane of fixed Y is 32 ranges, 2.5 M messages of them on torus:16x32x32).
fn grid_orders(s: &Schedule, per: u32) -> Vec<Order> {
    let Some(g) = s.topology.infer_grid() else { return Vec::new() };
    let npus = s.topology.npus() as u32;
    if g.dims.len() < 2 || g.dims.len() > 3 || npus == 0 || !per.is_multiple_of(npus) {
        return Vec::new();
    }
    let m = per / npus;
    let dims: Vec<u32> = g.dims.iter().map(|&d| d as u32).collect();
    let mut shapes = Vec::new();
    if m == 1 {
        shapes.push(dims);
    } else {
        shapes.push([&[m], &dims[..]].concat());
        shapes.push([&dims[..], &[m]].concat());
    }
    let mut out = Vec::new();
    for radices in shapes {
        for by in permutations(radices.len()) {
            out.push(Order::axes(&radices, &by));
        }
    }
    out
}

/// Every order of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// Chunk entries of the lists a residue's order is judged on (the lists sampled evenly when
/// they hold more).
const ORDER_SAMPLE_ENTRIES: usize = 1 << 22;

/// Replaces a residue's order by one of `grid`'s where that makes strictly fewer ranges of the
/// lists carried in it (counted per carrying transfer); only speed depends on the choice.
fn pick_orders(s: &Schedule, outer: u32, grid: &[Order], orders: &mut [Order]) {
    let uses = s.transfers.list_uses();
    let entries = s.transfers.list_entries().max(1);
    let every = entries.div_ceil(ORDER_SAMPLE_ENTRIES).max(1);
    let per_block = orders.iter().chain(grid).map(Order::len).max().unwrap_or(0) as usize;
    // ranges[r][k]: weighted ranges of residue r under candidate k (0 its own order).
    let mut ranges = vec![vec![0u64; grid.len() + 1]; orders.len()];
    let mut marks = vec![0u64; per_block.div_ceil(64) + 1];
    let mut by_residue: Vec<(u32, u32)> = Vec::new();
    let mut placed: Vec<u32> = Vec::new();
    for (l, (list, n)) in s.transfers.lists().zip(uses).enumerate() {
        if n == 0 || list.len() < 2 || l % every != 0 {
            continue;
        }
        by_residue.clear();
        by_residue.extend(list.iter().filter(|&&c| c < s.num_chunks as u32).map(|&c| (c % outer, c / outer)));
        by_residue.sort_unstable();
        for part in by_residue.chunk_by(|a, b| a.0 == b.0) {
            let r = part[0].0 as usize;
            for (k, order) in std::iter::once(&orders[r]).chain(grid).enumerate() {
                placed.clear();
                placed.extend(part.iter().map(|&(_, q)| order.place(q)));
                for &p in &placed {
                    marks[p as usize / 64] |= 1 << (p % 64);
                }
                let starts =
                    placed.iter().filter(|&&p| p == 0 || marks[(p - 1) as usize / 64] & (1 << ((p - 1) % 64)) == 0);
                ranges[r][k] += n * starts.count() as u64;
                for &p in &placed {
                    marks[p as usize / 64] = 0;
                }
            }
        }
    }
    for (r, counts) in ranges.iter().enumerate() {
        if let Some((k, &best)) = counts.iter().enumerate().skip(1).min_by_key(|&(k, &c)| (c, k))
            && best < counts[0]
        {
            orders[r] = grid[k - 1].clone();
        }
    }
}

/// Rising, distinct positions as ranges of consecutive ones.
fn coalesce(at: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &p in at {
        match out.last_mut() {
            Some((_, hi)) if *hi == p => *hi = p + 1,
            _ => out.push((p, p + 1)),
        }
    }
    out
}

/// Each transfer's chunk list as ranges of row positions (`RowLayout`), worked out once per
/// distinct list; a one-chunk transfer's on the fly.
pub struct ChunkRanges {
    layout: RowLayout,
    chunks: u32,
    /// Per distinct list (`Transfers::list_index`): its ranges in `flat`.
    lists: Vec<(u32, u32)>,
    flat: Vec<(u32, u32)>,
}

/// One transfer's ranges: `as_slice` lends them.
pub enum Ranges<'a> {
    One((u32, u32)),
    Many(&'a [(u32, u32)]),
}

impl Ranges<'_> {
    pub fn as_slice(&self) -> &[(u32, u32)] {
        match self {
            Ranges::One(r) => std::slice::from_ref(r),
            Ranges::Many(l) => l,
        }
    }
}

impl ChunkRanges {
    /// The ranges of `s`'s transfers, or `None` when a transfer names destination slots (it
    /// reads one slot and writes another: no one range serves both) or a slot out of range.
    pub fn new(s: &Schedule) -> Option<ChunkRanges> {
        if s.transfers.has_dst_slots() {
            return None;
        }
        let layout = RowLayout::new(s);
        let mut lists = Vec::with_capacity(s.transfers.lists().len());
        let mut flat = Vec::new();
        let mut at: Vec<u32> = Vec::new();
        for l in s.transfers.lists() {
            at.clear();
            for &c in l {
                at.push(layout.of(c)?);
            }
            at.sort_unstable();
            at.dedup();
            let start = flat.len();
            flat.extend(coalesce(&at));
            lists.push((start as u32, (flat.len() - start) as u32));
        }
        Some(ChunkRanges { layout, chunks: s.num_chunks as u32, lists, flat })
    }

    /// The positions a row needs: every chunk's and every scratch slot's.
    pub fn positions(&self) -> u32 {
        self.layout.len()
    }

    /// Transfer `i`'s ranges (`None` for a one-chunk transfer out of range).
    pub fn of(&self, s: &Schedule, i: usize) -> Option<Ranges<'_>> {
        if let Some(l) = s.transfers.list_index(i) {
            let (start, n) = self.lists[l as usize];
            return Some(Ranges::Many(&self.flat[start as usize..(start + n) as usize]));
        }
        let p = self.layout.of(s.transfers.at(i).chunks[0])?;
        Some(Ranges::One((p, p + 1)))
    }

    pub fn layout(&self) -> &RowLayout {
        &self.layout
    }

    /// The row position of chunk `c` (below the chunk count).
    pub fn position(&self, c: u32) -> u32 {
        debug_assert!(c < self.chunks);
        self.layout.of(c).unwrap_or(0)
    }

    /// The positions of chunks `0..k`, as rising ranges.
    pub fn chunks_below(&self, k: u32) -> Vec<(u32, u32)> {
        self.layout.below(k.min(self.chunks))
    }
}

/// The mean chunk moves per transfer from which the replays run on ranges: below it messages
/// carry single chunks, rows fragment and a table is faster.
pub const RANGES_FROM_CHUNKS_PER_TRANSFER: usize = 4;

/// Whether `s` is worth replaying on ranges: its messages carry long chunk lists and its
/// per-NPU tables would be large (small ones are replayed on tables in no time).
pub fn worth_ranges(s: &Schedule) -> bool {
    let n = s.transfers.len();
    let cells = s.topology.npus().saturating_mul(s.slots());
    if n == 0 || cells < 1 << 20 || s.transfers.has_dst_slots() {
        return false;
    }
    let moves: usize = (0..n)
        .map(|i| match s.transfers.list_index(i) {
            Some(l) => s.transfers.list_len(l),
            None => 1,
        })
        .sum();
    moves >= RANGES_FROM_CHUNKS_PER_TRANSFER * n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(r: &mut Runs<u32>, v: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let len = r.len;
        r.read(v, 0, len, &mut out);
        out.iter().flat_map(|&(a, b, x)| (a..b).map(move |_| x)).collect()
    }

    #[test]
    fn writes_split_and_merge_runs() {
        let mut r = Runs::new(1, 10, 0u32, |_| vec![(0, 1), (5, 2)]);
        let (mut rm, mut add) = (Vec::new(), Vec::new());
        r.write(0, 3, 7, &[(3, 4, 9), (4, 7, 1)], |a, b| a == b, &mut rm, &mut add).unwrap();
        assert_eq!(flat(&mut r, 0), [1, 1, 1, 9, 1, 1, 1, 2, 2, 2]);
        assert_eq!(r.row(0), &[(0, 1), (3, 9), (4, 1), (7, 2)]);
        r.write(0, 3, 4, &[(3, 4, 1)], |a, b| a == b, &mut rm, &mut add).unwrap();
        assert_eq!(r.row(0), &[(0, 1), (7, 2)]);
        r.write(0, 0, 10, &[(0, 10, 5)], |a, b| a == b, &mut rm, &mut add).unwrap();
        assert_eq!(r.row(0), &[(0, 5)]);
        assert_eq!(r.get(0, 9), 5);
        // The runs held are the first two, plus those put in, less those taken out.
        assert_eq!(2 + add.len() - rm.len(), r.row(0).len());
    }

    proptest::proptest! {
        #[test]
        fn runs_match_a_plain_row(writes in proptest::collection::vec((0u32..20, 1u32..6, 0u32..3, 0u32..3), 0..40)) {
            let len = 24;
            let mut r = Runs::new(2, len, 0u32, |_| Vec::new());
            let mut plain = vec![0u32; len as usize];
            let mut held: i64 = 2;
            for (lo, n, a, b) in writes {
                let hi = (lo + n).min(len);
                let mid = (lo + hi).div_ceil(2).max(lo + 1).min(hi);
                let mut pieces = vec![(lo, mid, a)];
                if mid < hi { pieces.push((mid, hi, b)); }
                for &(x, y, val) in &pieces { for p in x..y { plain[p as usize] = val; } }
                let (mut rm, mut add) = (Vec::new(), Vec::new());
                r.write(1, lo, hi, &pieces, |a, b| a == b, &mut rm, &mut add).unwrap();
                held += add.len() as i64 - rm.len() as i64;
                proptest::prop_assert_eq!(flat(&mut r, 1), plain.clone());
                proptest::prop_assert!(r.row(1).windows(2).all(|w| w[0].1 != w[1].1 && w[0].0 < w[1].0));
                proptest::prop_assert_eq!(held, 1 + r.row(1).len() as i64);
            }
        }
    }

    #[test]
    fn a_spacing_is_the_order_it_always_was() {
        for (sp, per) in [(1u32, 10u32), (4, 16), (3, 10), (128, 16384)] {
            let o = Order::spaced(sp, per);
            assert_eq!(o.len(), sp * per.div_ceil(sp));
            for q in 0..per {
                assert_eq!(o.place(q), (q % sp) * per.div_ceil(sp) + q / sp, "sp {sp}, q {q}");
            }
        }
        // Axes (4, 3, 2) with the last fastest, then the first, then the middle.
        let o = Order::axes(&[4, 3, 2], &[2, 0, 1]);
        assert_eq!(o.len(), 24);
        assert_eq!((o.place(0), o.place(1), o.place(4), o.place(12)), (0, 2, 8, 1));
        let mut all: Vec<u32> = (0..24).map(|q| o.place(q)).collect();
        all.sort_unstable();
        assert_eq!(all, (0..24).collect::<Vec<u32>>());
        assert_eq!(permutations(3).len(), 6);
    }

    /// Bucket's all-gather on a 3-D torus sends lines and planes of its parts' blocks along
    /// every axis: in chunk order a plane of fixed Y is a range per Z; in each part's own order
    /// of the axes every message is one range, and each part's positions are its block's.
    #[test]
    fn a_grid_order_makes_each_message_of_a_3d_bucket_one_range() {
        let t = crate::topology::parse_topology("torus:4x8x8").unwrap();
        let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 1 << 20);
        let s = crate::baselines::build("bucket", &t, &spec).unwrap();
        let ranges = ChunkRanges::new(&s).unwrap();
        assert_eq!(ranges.layout().blocks().len(), 6);
        for i in 0..s.transfers.len() {
            assert_eq!(ranges.of(&s, i).unwrap().as_slice().len(), 1, "transfer {i}: {:?}", s.transfers.at(i));
        }
        let mut at: Vec<u32> = (0..s.num_chunks as u32).map(|c| ranges.position(c)).collect();
        at.sort_unstable();
        assert_eq!(at, (0..s.num_chunks as u32).collect::<Vec<u32>>());
        // A spacing alone (no grid: the same lists on a ring of as many NPUs) cannot do that.
        let mut flat = s.clone();
        flat.topology = crate::topology::parse_topology("ring:256").unwrap();
        let ranges = ChunkRanges::new(&flat).unwrap();
        let most = (0..flat.transfers.len()).map(|i| ranges.of(&flat, i).unwrap().as_slice().len()).max();
        assert_eq!(most, Some(8));
    }
}
