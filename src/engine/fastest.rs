//! "The fastest candidate wins", once: the reducer every search of the engine keeps its
//! winner with (the greedy's runs, the ILP's grids, `auto`'s candidates) and its first error
//! with. A `Least` keeps the item of the smallest key; a key is the simulated time first, then
//! the candidate's place in the search, so ties break one way and merging is associative and
//! commutative: the winner does not depend on the order the pool finishes the runs in.

use ordered_float::OrderedFloat;

/// The item of the smallest key among those offered.
#[derive(Debug)]
pub(super) struct Least<K, T>(Option<(K, T)>);

impl<K, T> Default for Least<K, T> {
    fn default() -> Self {
        Least(None)
    }
}

impl<K: Ord, T> Least<K, T> {
    /// One item.
    pub(super) fn of(key: K, item: T) -> Self {
        Least(Some((key, item)))
    }

    /// Keeps `item` if its key is smaller than the kept one's (the kept one wins a tie).
    pub(super) fn offer(&mut self, key: K, item: T) {
        if self.0.as_ref().is_none_or(|(k, _)| key < *k) {
            self.0 = Some((key, item));
        }
    }

    /// The lesser of two (`self`'s on a tie: with keys that differ for different items, as the
    /// engine's do, the order never matters).
    pub(super) fn merge(mut self, other: Self) -> Self {
        if let Some((k, t)) = other.0 {
            self.offer(k, t);
        }
        self
    }

    /// The kept key, if any.
    pub(super) fn key(&self) -> Option<&K> {
        self.0.as_ref().map(|(k, _)| k)
    }

    /// The kept item, if any.
    pub(super) fn into_inner(self) -> Option<T> {
        self.0.map(|(_, t)| t)
    }

    /// The kept key and item, if any.
    #[cfg(test)]
    fn into_parts(self) -> Option<(K, T)> {
        self.0
    }
}

/// The items of the two smallest keys among those offered: a search's winner and its
/// runner-up. Merging is associative and commutative as `Least`'s.
#[derive(Debug)]
pub(super) struct LeastTwo<K, T> {
    first: Least<K, T>,
    second: Least<K, T>,
}

impl<K, T> Default for LeastTwo<K, T> {
    fn default() -> Self {
        LeastTwo { first: Least::default(), second: Least::default() }
    }
}

impl<K: Ord, T> LeastTwo<K, T> {
    /// One item.
    pub(super) fn of(key: K, item: T) -> Self {
        LeastTwo { first: Least::of(key, item), second: Least::default() }
    }

    /// The two least of both: the lesser first, and the lesser of its runner-up and the
    /// other's first (the other's runner-up cannot be among them).
    pub(super) fn merge(self, other: Self) -> Self {
        let self_first = match (self.first.key(), other.first.key()) {
            (Some(a), Some(b)) => a <= b,
            (a, _) => a.is_some(),
        };
        let (won, lost) = if self_first { (self, other) } else { (other, self) };
        LeastTwo { first: won.first, second: won.second.merge(lost.first) }
    }

    /// The least key, if any.
    pub(super) fn key(&self) -> Option<&K> {
        self.first.key()
    }

    /// The least alone (the runner-up dropped).
    pub(super) fn without_second(self) -> Self {
        LeastTwo { first: self.first, second: Least::default() }
    }

    /// The least item and the runner-up, if any.
    pub(super) fn into_inner(self) -> (Option<T>, Option<T>) {
        (self.first.into_inner(), self.second.into_inner())
    }
}

/// A simulated time as a key: ordered totally (a NaN, which no simulation gives, sorts last).
pub(super) type Time = OrderedFloat<f64>;

/// The fastest item, ties to the smallest `K` (where it stands in the search).
#[cfg(test)]
pub(super) type Fastest<K, T> = Least<(Time, K), T>;

/// The fastest two items, ties to the smallest `K`.
pub(super) type FastestTwo<K, T> = LeastTwo<(Time, K), T>;

/// `time_ns` as a key.
pub(super) fn time(time_ns: f64) -> Time {
    OrderedFloat(time_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Merged in any grouping and order, runs keep the same winner: the fastest, ties to
        /// the earliest in the search (what makes a seed's schedule the same on 1 or 16 threads).
        #[test]
        fn the_winner_does_not_depend_on_the_order(
            times in proptest::collection::vec(0u8..6, 1..24),
            order in any::<u64>(),
            split in any::<u64>(),
        ) {
            let runs: Vec<(f64, usize)> = times.iter().enumerate().map(|(i, &t)| (t as f64 * 10.0, i)).collect();
            let expected = runs.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))).unwrap();
            let mut shuffled = runs.clone();
            shuffle(&mut shuffled, order);
            // Folded one by one, and merged from two halves split anywhere.
            let mut one = Fastest::default();
            for &(t, i) in &shuffled {
                one.offer((time(t), i), i);
            }
            let at = (split as usize) % (shuffled.len() + 1);
            let half = |r: &[(f64, usize)]| r.iter().fold(Fastest::default(), |acc, &(t, i)| acc.merge(Fastest::of((time(t), i), i)));
            let (a, b) = (half(&shuffled[..at]), half(&shuffled[at..]));
            let merged = b.merge(a);
            prop_assert_eq!(one.into_inner(), Some(expected.1));
            prop_assert_eq!(merged.into_parts().map(|((t, _), i)| (t.0, i)), Some(expected));
        }

        /// The two fastest of runs in any order, folded and merged in any grouping: the same two
        /// as sorting every run (time, then place).
        #[test]
        fn the_runner_up_does_not_depend_on_the_order(
            times in proptest::collection::vec(0u8..6, 0..24),
            order in any::<u64>(),
            splits in proptest::collection::vec(any::<u16>(), 0..6),
        ) {
            let mut sorted: Vec<(u8, usize)> = times.iter().enumerate().map(|(i, &t)| (t, i)).collect();
            sorted.sort();
            let one = |&(t, i): &(u8, usize)| FastestTwo::of((time(t as f64), i), i);
            // A shuffled order (a fixed permutation drawn from `order`), cut into pieces at the
            // splits, each folded from the right, the pieces merged from the left.
            let mut runs: Vec<(u8, usize)> = times.iter().enumerate().map(|(i, &t)| (t, i)).collect();
            shuffle(&mut runs, order);
            let mut cuts: Vec<usize> = splits.iter().map(|&s| s as usize % (times.len() + 1)).collect();
            cuts.push(0);
            cuts.push(times.len());
            cuts.sort_unstable();
            let merged = cuts.windows(2).fold(FastestTwo::default(), |acc, w| {
                let piece = runs[w[0]..w[1]].iter().rev().fold(FastestTwo::default(), |p, r| one(r).merge(p));
                acc.merge(piece)
            });
            let (first, second) = merged.into_inner();
            prop_assert_eq!(first, sorted.first().map(|r| r.1));
            prop_assert_eq!(second, sorted.get(1).map(|r| r.1));
        }
    }

    /// A shuffled order: a fixed permutation drawn from `order` (xorshift, Fisher–Yates).
    fn shuffle<T>(v: &mut [T], order: u64) {
        let mut x = order | 1;
        for i in (1..v.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }

    /// The first error: the smallest index, whatever finished first.
    #[test]
    fn the_first_error_is_the_earliest_candidates() {
        let e = Least::of(3usize, "late").merge(Least::of(1, "early")).merge(Least::default());
        assert_eq!(e.key(), Some(&1));
        assert_eq!(e.into_inner(), Some("early"));
    }
}
