//! Contributor sets for combining collectives: sorted, disjoint, non-adjacent half-open id
//! ranges behind an `Arc`, so copies share storage and structured reductions stay small.

use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Spans(Arc<[(u32, u32)]>);

impl Spans {
    pub fn singleton(v: u32) -> Spans {
        Spans(Arc::from([(v, v + 1)]))
    }

    /// From ids sorted ascending (duplicates allowed).
    pub fn from_sorted_ids(ids: &[u32]) -> Spans {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for &v in ids {
            match out.last_mut() {
                Some(last) if v <= last.1 => last.1 = last.1.max(v + 1),
                _ => out.push((v, v + 1)),
            }
        }
        Spans(out.into())
    }

    /// From ranges already in canonical form: sorted, non-empty, disjoint and non-adjacent.
    pub fn from_canonical_ranges(r: Vec<(u32, u32)>) -> Spans {
        debug_assert!(r.iter().all(|&(a, b)| a < b) && r.windows(2).all(|w| w[0].1 < w[1].0));
        Spans(r.into())
    }

    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.0
    }

    /// Number of ids in the set.
    pub fn count(&self) -> u64 {
        self.0.iter().map(|&(a, b)| (b - a) as u64).sum()
    }

    pub fn contains(&self, v: u32) -> bool {
        match self.0.binary_search_by(|&(a, _)| a.cmp(&v)) {
            Ok(_) => true,
            Err(0) => false,
            Err(i) => v < self.0[i - 1].1,
        }
    }

    /// The smallest id in both sets, if any.
    pub fn first_common(&self, other: &Spans) -> Option<u32> {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let lo = a[i].0.max(b[j].0);
            let hi = a[i].1.min(b[j].1);
            if lo < hi {
                return Some(lo);
            }
            if a[i].1 <= b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        None
    }

    pub fn is_subset_of(&self, other: &Spans) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        let b = &other.0;
        let mut j = 0;
        for &(lo, hi) in self.0.iter() {
            while j < b.len() && b[j].1 <= lo {
                j += 1;
            }
            if j == b.len() || b[j].0 > lo || b[j].1 < hi {
                return false;
            }
        }
        true
    }

    pub fn union(&self, other: &Spans) -> Spans {
        let mut all: Vec<(u32, u32)> = Vec::with_capacity(self.0.len() + other.0.len());
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let next = if j == b.len() || (i < a.len() && a[i].0 <= b[j].0) {
                i += 1;
                a[i - 1]
            } else {
                j += 1;
                b[j - 1]
            };
            match all.last_mut() {
                Some(last) if next.0 <= last.1 => last.1 = last.1.max(next.1),
                _ => all.push(next),
            }
        }
        Spans(all.into())
    }

    /// Ids of `self` not in `other`, at most `limit` of them (for messages).
    pub fn missing_from(&self, other: &Spans, limit: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for &(lo, hi) in self.0.iter() {
            for v in lo..hi {
                if !other.contains(v) {
                    out.push(v);
                    if out.len() == limit {
                        return out;
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Spans;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn set(s: &Spans) -> BTreeSet<u32> {
        s.ranges().iter().flat_map(|&(a, b)| a..b).collect()
    }

    proptest! {
        #[test]
        fn matches_btreeset(a in proptest::collection::btree_set(0u32..64, 0..40),
                            b in proptest::collection::btree_set(0u32..64, 0..40)) {
            let va: Vec<u32> = a.iter().copied().collect();
            let vb: Vec<u32> = b.iter().copied().collect();
            let (sa, sb) = (Spans::from_sorted_ids(&va), Spans::from_sorted_ids(&vb));
            prop_assert_eq!(set(&sa), a.clone());
            prop_assert_eq!(sa.count() as usize, a.len());
            let u: BTreeSet<u32> = a.union(&b).copied().collect();
            prop_assert_eq!(set(&sa.union(&sb)), u.clone());
            // Canonical form: equal sets are equal values.
            let vu: Vec<u32> = u.iter().copied().collect();
            prop_assert_eq!(sa.union(&sb), Spans::from_sorted_ids(&vu));
            prop_assert_eq!(sa.first_common(&sb), a.intersection(&b).next().copied());
            prop_assert_eq!(sa.is_subset_of(&sb), a.is_subset(&b));
            for v in 0..64 { prop_assert_eq!(sa.contains(v), a.contains(&v)); }
            let miss: Vec<u32> = a.difference(&b).copied().collect();
            prop_assert_eq!(sa.missing_from(&sb, 1000), miss);
        }
    }
}
