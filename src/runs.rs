//! Per-NPU rows of slot positions held as runs of one value, and each transfer's chunk list as
//! ranges of those positions: what the validator's and the simulator's replays on ranges use
//! instead of a table cell per (npu, slot), so their cost follows transfers and runs, not chunk
//! moves (bucket's all-reduce on torus:128x128 moves 1.07 G chunks in 33 M transfers).

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

    /// `find` from run `h` outwards: steps doubling away from it until they pass `p`, then a
    /// binary search between the last two. Runs inserted or merged before `h` since it was
    /// found move the run sought a few places, and the probes near `h` stay in the cache.
    fn gallop(row: &[(u32, V)], p: u32, h: usize) -> usize {
        let h = h.min(row.len() - 1);
        if row[h].0 <= p {
            // Rightwards: the last run starting at or before p.
            let (mut lo, mut step) = (h, 1usize);
            while lo + step < row.len() && row[lo + step].0 <= p {
                lo += step;
                step *= 2;
            }
            let hi = (lo + step).min(row.len());
            lo + row[lo..hi].partition_point(|r| r.0 <= p) - 1
        } else {
            let (mut hi, mut step) = (h, 1usize);
            while hi >= step && row[hi - step].0 > p {
                hi -= step;
                step *= 2;
            }
            let lo = hi.saturating_sub(step);
            lo + row[lo..hi].partition_point(|r| r.0 <= p) - 1
        }
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
            Self::gallop(row, p, h)
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

mod layout;
pub use layout::{ChunkRanges, RANGES_FROM_CHUNKS_PER_TRANSFER, Ranges, RowLayout, chunk_moves, worth_ranges};

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
        /// From any hint, the gallop finds the run `find` finds.
        #[test]
        fn gallop_finds_what_find_finds(mut starts in proptest::collection::vec(1u32..200, 0..40), p in 0u32..200, h in 0usize..50) {
            starts.push(0);
            starts.sort_unstable();
            starts.dedup();
            let row: Vec<(u32, u8)> = starts.iter().map(|&s| (s, 0)).collect();
            proptest::prop_assert_eq!(Runs::gallop(&row, p, h), Runs::find(&row, p));
        }

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
}
