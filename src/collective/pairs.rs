//! A condition's (npu, chunk) pairs (`Pairs`): a list, or every chunk at every NPU of a set,
//! held as that set and the chunk count (16,384 NPUs in 4 parts would list 2^30 pairs, 8 GiB).

use serde::Serialize;
use std::borrow::Cow;
use std::sync::Arc;

/// The (npu, chunk) pairs of a pre- or postcondition, shared (a collective and the schedules
/// built for it hold the same ones). Either a list, in the order it was given (a collective's
/// are sorted and without duplicates; a schedule read from a file keeps its own), or every
/// chunk `0..chunks` at each NPU of a sorted set, in sorted order: what an all-reduce's
/// conditions are, and one side of an all-gather's, reduce-scatter's, broadcast's and
/// reduce's. Both iterate the same pairs; equality is by the pairs, in order.
#[derive(Clone, Default)]
pub struct Pairs(Arc<Repr>);

enum Repr {
    /// The list, and whether it is sorted without duplicates (found once, when it is made: a
    /// membership test is then a binary search, not a pass over the list first).
    Listed(Vec<[u32; 2]>, bool),
    /// `npus` strictly rising.
    Every { npus: Vec<u32>, chunks: u32 },
}

impl Default for Repr {
    fn default() -> Repr {
        Repr::Listed(Vec::new(), true)
    }
}

impl Pairs {
    /// Every chunk `0..chunks` at each of `npus` (sorted and deduplicated here).
    pub fn every(mut npus: Vec<u32>, chunks: u32) -> Pairs {
        npus.sort_unstable();
        npus.dedup();
        Pairs(Arc::new(Repr::Every { npus, chunks }))
    }

    pub fn len(&self) -> usize {
        match &*self.0 {
            Repr::Listed(l, _) => l.len(),
            Repr::Every { npus, chunks } => npus.len() * *chunks as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pairs in order.
    pub fn iter(&self) -> Iter<'_> {
        match &*self.0 {
            Repr::Listed(l, _) => Iter::Listed(l.iter()),
            Repr::Every { npus, chunks } => {
                let (npus, chunks) = if *chunks == 0 { (&npus[..0], 0) } else { (&npus[..], *chunks) };
                Iter::Every { npus, chunks, front: (0, 0), back: (npus.len(), 0) }
            }
        }
    }

    /// The NPU of each pair, each NPU of an every-pair set once (for questions about the NPUs
    /// alone: which are named, whether they are connected).
    pub fn npus(&self) -> impl Iterator<Item = u32> + '_ {
        let (every, listed) = match &*self.0 {
            Repr::Every { npus, chunks } => (Some(&npus[..(*chunks > 0) as usize * npus.len()]), None),
            Repr::Listed(l, _) => (None, Some(l)),
        };
        every.into_iter().flatten().copied().chain(listed.into_iter().flatten().map(|p| p[0]))
    }

    /// Pair `i` in order.
    pub fn get(&self, i: usize) -> Option<[u32; 2]> {
        match &*self.0 {
            Repr::Listed(l, _) => l.get(i).copied(),
            Repr::Every { npus, chunks } if *chunks > 0 => {
                let k = *chunks as usize;
                npus.get(i / k).map(|&v| [v, (i % k) as u32])
            }
            Repr::Every { .. } => None,
        }
    }

    /// Whether `p` is one of the pairs (a binary search where they are sorted; a list given in
    /// another order is searched through).
    pub fn contains(&self, p: &[u32; 2]) -> bool {
        match &*self.0 {
            Repr::Listed(l, true) => l.binary_search(p).is_ok(),
            Repr::Listed(l, false) => l.contains(p),
            Repr::Every { npus, chunks } => p[1] < *chunks && npus.binary_search(&p[0]).is_ok(),
        }
    }

    /// The list, when the pairs are held as one.
    pub fn as_listed(&self) -> Option<&[[u32; 2]]> {
        match &*self.0 {
            Repr::Listed(l, _) => Some(l),
            Repr::Every { .. } => None,
        }
    }

    /// The NPUs and the chunk count, when the pairs are every chunk at every NPU of a set.
    pub fn as_every(&self) -> Option<(&[u32], usize)> {
        match &*self.0 {
            Repr::Listed(..) => None,
            Repr::Every { npus, chunks } => Some((npus, *chunks as usize)),
        }
    }

    /// The pairs as a slice: borrowed from a list, written out otherwise (for the synthesizers
    /// that index them, within their own pair limit).
    pub fn as_slice(&self) -> Cow<'_, [[u32; 2]]> {
        match &*self.0 {
            Repr::Listed(l, _) => Cow::Borrowed(l),
            Repr::Every { .. } => Cow::Owned(self.iter().collect()),
        }
    }

    pub fn to_vec(&self) -> Vec<[u32; 2]> {
        self.as_slice().into_owned()
    }

    /// Sorted ascending without duplicates (every-pair sets always are).
    pub fn is_canonical(&self) -> bool {
        match &*self.0 {
            Repr::Listed(_, sorted) => *sorted,
            Repr::Every { .. } => true,
        }
    }

    /// Changes the pairs as a list (written out first when held as every pair of a set; a
    /// shared list is copied): for tests and tools that edit a condition.
    pub fn edit<R>(&mut self, f: impl FnOnce(&mut Vec<[u32; 2]>) -> R) -> R {
        let mut list = self.to_vec();
        let r = f(&mut list);
        *self = Pairs::from(list);
        r
    }

    /// Whether both are the same shared pairs (not merely equal ones).
    pub fn ptr_eq(a: &Pairs, b: &Pairs) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// A condition given as a list (read from a file): `implied` itself, shared, when that is
    /// an every-pair set of exactly these pairs in this order (the collective's own condition,
    /// so a file's 2^26-pair list is not kept); the list otherwise.
    pub fn given(list: Vec<[u32; 2]>, implied: Option<&Pairs>) -> Pairs {
        match implied {
            Some(p)
                if !list.is_empty()
                    && p.as_every().is_some()
                    && p.len() == list.len()
                    && p.iter().eq(list.iter().copied()) =>
            {
                p.clone()
            }
            _ => Pairs::from(list),
        }
    }
}

impl From<Vec<[u32; 2]>> for Pairs {
    fn from(l: Vec<[u32; 2]>) -> Pairs {
        let sorted = l.windows(2).all(|w| w[0] < w[1]);
        Pairs(Arc::new(Repr::Listed(l, sorted)))
    }
}

impl PartialEq for Pairs {
    fn eq(&self, other: &Pairs) -> bool {
        if Pairs::ptr_eq(self, other) {
            return true;
        }
        match (&*self.0, &*other.0) {
            (Repr::Every { npus: a, chunks: x }, Repr::Every { npus: b, chunks: y }) if *x > 0 && *y > 0 => {
                a == b && x == y
            }
            (Repr::Listed(a, _), Repr::Listed(b, _)) => a == b,
            _ => self.len() == other.len() && self.iter().eq(other.iter()),
        }
    }
}

impl std::fmt::Debug for Pairs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.0 {
            Repr::Listed(l, _) => l.fmt(f),
            Repr::Every { npus, chunks } => write!(f, "every chunk 0..{chunks} at NPUs {npus:?}"),
        }
    }
}

impl Serialize for Pairs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The pairs of a `Pairs`, in order.
#[derive(Clone)]
pub enum Iter<'a> {
    Listed(std::slice::Iter<'a, [u32; 2]>),
    /// Positions (NPU index, chunk) of the next pair from the front and one past the last
    /// from the back.
    Every {
        npus: &'a [u32],
        chunks: u32,
        front: (usize, u32),
        back: (usize, u32),
    },
}

impl Iter<'_> {
    fn remaining(&self) -> usize {
        match self {
            Iter::Listed(i) => i.len(),
            Iter::Every { chunks, front, back, .. } => {
                let k = *chunks as usize;
                (back.0 * k + back.1 as usize).saturating_sub(front.0 * k + front.1 as usize)
            }
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = [u32; 2];

    #[inline]
    fn next(&mut self) -> Option<[u32; 2]> {
        match self {
            Iter::Listed(i) => i.next().copied(),
            Iter::Every { npus, chunks, front, back } => {
                if (front.0, front.1) >= (back.0, back.1) || front.0 >= npus.len() {
                    return None;
                }
                let p = [npus[front.0], front.1];
                front.1 += 1;
                if front.1 == *chunks {
                    *front = (front.0 + 1, 0);
                }
                Some(p)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining();
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<[u32; 2]> {
        match self {
            Iter::Listed(i) => i.next_back().copied(),
            Iter::Every { npus, chunks, front, back } => {
                if (front.0, front.1) >= (back.0, back.1) {
                    return None;
                }
                *back = if back.1 == 0 { (back.0 - 1, *chunks - 1) } else { (back.0, back.1 - 1) };
                Some([npus[back.0], back.1])
            }
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every chunk at every NPU of a set answers as the list of those pairs does: length,
        /// order both ways, indexing, membership, equality, and the list read as the set it is.
        #[test]
        fn every_pair_sets_answer_as_their_list(
            npus in proptest::collection::btree_set(0u32..40, 0..6),
            chunks in 0u32..5,
            probe in (0u32..45, 0u32..7),
            take in 0usize..40,
        ) {
            let npus: Vec<u32> = npus.into_iter().collect();
            let list: Vec<[u32; 2]> = npus.iter().flat_map(|&v| (0..chunks).map(move |c| [v, c])).collect();
            let every = Pairs::every(npus.iter().rev().copied().collect(), chunks);
            let listed = Pairs::from(list.clone());
            prop_assert_eq!(every.len(), list.len());
            prop_assert_eq!(every.iter().len(), list.len());
            prop_assert_eq!(every.iter().collect::<Vec<_>>(), list.clone());
            prop_assert_eq!(every.iter().rev().collect::<Vec<_>>(), list.iter().rev().copied().collect::<Vec<_>>());
            let mut it = every.iter();
            let front: Vec<_> = it.by_ref().take(take).collect();
            let back: Vec<_> = it.rev().collect();
            prop_assert_eq!(front.len() + back.len(), list.len());
            for i in 0..list.len() + 2 {
                prop_assert_eq!(every.get(i), list.get(i).copied());
            }
            let p = [probe.0, probe.1];
            prop_assert_eq!(every.contains(&p), list.contains(&p));
            prop_assert_eq!(listed.contains(&p), list.contains(&p));
            // Both ways round: an every-pair set against a list, and the list against it.
            prop_assert!(every.eq(&listed) && listed.eq(&every));
            prop_assert_eq!(&every.to_vec(), &list);
            let read = Pairs::given(list.clone(), Some(&every));
            prop_assert_eq!(read.as_every().is_some(), !list.is_empty());
            prop_assert!(read == listed);
            if let Some(&first) = list.first() {
                let mut fewer = list.clone();
                fewer.pop();
                let fewer = Pairs::from(fewer);
                prop_assert!(!fewer.eq(&every) && !every.eq(&fewer));
                prop_assert!(Pairs::given(fewer.to_vec(), Some(&every)).as_every().is_none());
                let mut moved = list.clone();
                moved[0] = [first[0], first[1] + chunks];
                prop_assert!(Pairs::given(moved, Some(&every)).as_every().is_none());
            }
        }
    }

    #[test]
    fn pairs_serialize_as_a_list_of_pairs() {
        let every = Pairs::every(vec![3, 1], 2);
        assert_eq!(serde_json::to_string(&every).unwrap(), "[[1,0],[1,1],[3,0],[3,1]]");
        assert_eq!(format!("{every:?}"), "every chunk 0..2 at NPUs [1, 3]");
    }
}
