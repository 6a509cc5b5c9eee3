//! Where each chunk sits in an NPU's row of positions (`RowLayout`), and each transfer's chunk
//! list as ranges of those positions (`ChunkRanges`): what makes a message's chunks a few
//! ranges for the replays on `Runs`.

use crate::schedule::Schedule;
use rustc_hash::FxHashMap as HashMap;

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
        for (list, &n) in s.transfers.lists().zip(&uses) {
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
            pick_orders(s, &uses, outer, &grid, &mut orders);
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
    let Some(g) = s.topology.grid_or_whole() else { return Vec::new() };
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
fn pick_orders(s: &Schedule, uses: &[u64], outer: u32, grid: &[Order], orders: &mut [Order]) {
    let entries = s.transfers.list_entries().max(1);
    let every = entries.div_ceil(ORDER_SAMPLE_ENTRIES).max(1);
    let per_block = orders.iter().chain(grid).map(Order::len).max().unwrap_or(0) as usize;
    // ranges[r][k]: weighted ranges of residue r under candidate k (0 its own order).
    let mut ranges = vec![vec![0u64; grid.len() + 1]; orders.len()];
    let mut marks = vec![0u64; per_block.div_ceil(64) + 1];
    let mut by_residue: Vec<(u32, u32)> = Vec::new();
    let mut placed: Vec<u32> = Vec::new();
    for (l, (list, &n)) in s.transfers.lists().zip(uses).enumerate() {
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
    chunk_moves(s) >= RANGES_FROM_CHUNKS_PER_TRANSFER * n
}

/// The chunk moves of `s`'s transfers: the (npu, slot) cells its replay writes, at most.
pub fn chunk_moves(s: &Schedule) -> usize {
    (0..s.transfers.len())
        .map(|i| match s.transfers.list_index(i) {
            Some(l) => s.transfers.list_len(l),
            None => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

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
