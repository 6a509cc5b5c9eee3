//! Min-heap entries keyed by an f64 distance, for the shortest-path searches in `bounds`,
//! `ten` and `baselines` (std's `BinaryHeap` is a max-heap and f64 is not `Ord`).

use std::cmp::Ordering;

/// `(distance, node)`, ordered so that `BinaryHeap` pops the smallest distance first (ties:
/// the smaller node id).
#[derive(PartialEq, Clone, Copy, Debug)]
pub struct MinItem(pub f64, pub usize);

impl Eq for MinItem {}

impl PartialOrd for MinItem {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for MinItem {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}
