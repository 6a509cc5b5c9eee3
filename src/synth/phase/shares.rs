//! Unequal shares for all-reduce: which NPU each chunk is fully reduced at (its root), chosen
//! from what each NPU can move, so an NPU that lost a link (or sits on slower ones) is not the
//! bottleneck of either phase.
//!
//! The synthesizers build all-reduce as a reduce phase (every chunk reduced to its root, by
//! reversing a spread on the transposed topology) and a forward phase (every root spreads its
//! chunks to everyone). In the forward phase NPU v receives every chunk it does not own, C − c_v
//! of the C chunks, over its incoming links; in the reduce phase it sends a partial of each of
//! them over its outgoing links. Both phases therefore take at least
//! max_v (C − c_v) / w_v chunk times, w_v the NPU's bandwidth (the smaller of its ingress and
//! egress). Equal shares make an NPU with three links of four the bottleneck of both phases
//! (4/3 of the intact time) while the aggregate bound barely moves; the shares that minimise
//! the maximum give the weak NPUs more chunks (they then receive fewer) and the others fewer,
//! down to none. With equal bandwidths they are the equal shares, exactly.

use crate::collective::{Collective, CollectiveKind};
use crate::topology::Topology;
use serde::Serialize;

/// What `stats.shares` reports when the shares are unequal.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ShareStats {
    /// Chunks of the collective.
    pub chunks: usize,
    /// Fewest and most chunks one NPU of the group is the root of.
    pub per_npu_min: u32,
    pub per_npu_max: u32,
    /// NPUs of the group that are the root of at least one chunk.
    pub npus_owning: usize,
}

impl ShareStats {
    pub fn of(per_rank: &[u32]) -> ShareStats {
        ShareStats {
            chunks: per_rank.iter().map(|&c| c as usize).sum(),
            per_npu_min: per_rank.iter().copied().min().unwrap_or(0),
            per_npu_max: per_rank.iter().copied().max().unwrap_or(0),
            npus_owning: per_rank.iter().filter(|&&c| c > 0).count(),
        }
    }
}

/// The bandwidth an NPU moves a phase's chunks with: the smaller of its ingress (the forward
/// phase) and its egress (the reduce phase), GB/s.
pub fn capacity(topo: &Topology, v: usize) -> f64 {
    let egress: f64 = topo.out_links(v).map(|i| topo.links()[i].bandwidth_gb_per_s).sum();
    topo.ingress_gb_per_s(v).min(egress)
}

/// Chunks each rank of an all-reduce's group is the root of, weighted by `capacity`; `None`
/// when the collective is not an all-reduce or every member has the same capacity (then the
/// usual shares, `k` chunks per rank in rank order, are the optimum).
pub fn all_reduce_shares(topo: &Topology, c: &Collective) -> Option<Vec<u32>> {
    if c.spec.kind != CollectiveKind::AllReduce || c.group.len() < 2 {
        return None;
    }
    let w: Vec<f64> = c.group.iter().map(|&v| capacity(topo, v)).collect();
    let first = w[0];
    if w.iter().all(|&x| (x - first).abs() <= 1e-9 * first.abs().max(1.0)) {
        return None;
    }
    Some(balanced(&w, c.num_chunks))
}

/// Integer shares `c_v ≥ 0` summing to `chunks` that minimise max_v (chunks − c_v) / w_v:
/// the least T with Σ_v max(0, chunks − ⌊T·w_v⌋) ≤ chunks, then what is left one chunk each
/// to the members still slowest (ties to the lower rank).
pub fn balanced(w: &[f64], chunks: usize) -> Vec<u32> {
    let n = chunks as f64;
    let at = |t: f64| -> Vec<u32> { w.iter().map(|&x| (n - (t * x).floor()).max(0.0) as u32).collect() };
    let sum = |v: &[u32]| v.iter().map(|&c| c as usize).sum::<usize>();
    let slowest = w.iter().copied().fold(f64::INFINITY, f64::min).max(f64::MIN_POSITIVE);
    // At hi every member could receive everything itself (nobody needs a share); at lo nobody
    // receives anything (each would need them all).
    let (mut lo, mut hi) = (0.0f64, n / slowest + 1.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if sum(&at(mid)) <= chunks {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut shares = at(hi);
    let mut left = chunks - sum(&shares).min(chunks);
    // What is left goes to the slowest members first; among members equally slow, spread evenly
    // over the ranks (on a torus in id order, every other NPU rather than the lower half): an
    // NPU whose neighbours own nothing waits for the first chunks to come from afar.
    let load = |i: usize, s: &[u32]| (n - s[i] as f64) / w[i];
    let mut order: Vec<usize> = (0..w.len()).collect();
    order.sort_by(|&a, &b| load(b, &shares).total_cmp(&load(a, &shares)).then(a.cmp(&b)));
    let mut i = 0;
    while left > 0 && i < order.len() {
        let mut j = i;
        while j < order.len() && load(order[j], &shares) == load(order[i], &shares) {
            j += 1;
        }
        let tied = j - i;
        let take = left.min(tied);
        for x in 0..take {
            shares[order[i + (2 * x + 1) * tied / (2 * take)]] += 1;
        }
        left -= take;
        i = j;
    }
    // (Only when every member already got one more: cannot happen at the least T, where one
    // more chunk anywhere was not needed.)
    for &i in order.iter().cycle().take(left) {
        shares[i] += 1;
    }
    shares
}

/// How much longer than `balanced`'s least phase `spread` lets the weak members' phase be.
pub const SPREAD_SLACK: f64 = 0.03;

/// Members that must own chunks under `balanced` fewer than one in this many: the roots are
/// concentrated, and `spread` runs beside them.
pub const CONCENTRATED: usize = 8;

/// Whether `balanced` puts every chunk of `c` on fewer than one member in `CONCENTRATED`
/// (a failed NPU's four neighbours, the six NPUs beside three failed links): then a phase's
/// first steps leave most NPUs idle (nothing has reached them yet), and `spread` may serve
/// better.
pub fn concentrated(topo: &Topology, c: &Collective) -> bool {
    all_reduce_shares(topo, c).is_some_and(|s| s.iter().filter(|&&x| x > 0).count() * CONCENTRATED < c.group.len())
}

/// Shares that let the weakest members' phase be `slack` longer than `balanced`'s least, the
/// chunks that frees spread evenly over the fastest members (in rank order): more roots, so
/// every part of the fabric has chunks to pass on from the first step. On tori after a failed
/// NPU or three failed links (`balanced`: four or six roots) the matcher's schedules came out
/// faster at `SPREAD_SLACK`: torus:8x8x8 less NPU 9 at 256 MiB 1052.8 → 1024.1 µs,
/// torus:16x16 less NPU 9 1596.5 → 1576.8 µs; after one failed link, where the roots are
/// many already, slower (torus:8x8 1374.2 → 1417.1 µs at 2%).
pub fn spread(w: &[f64], chunks: usize, slack: f64) -> Vec<u32> {
    let n = chunks as f64;
    let balanced = balanced(w, chunks);
    // The least phase: the slowest member's time under `balanced`.
    let least = (0..w.len()).map(|i| (n - balanced[i] as f64) / w[i]).fold(0.0, f64::max);
    let t = least * (1.0 + slack);
    let mut shares: Vec<u32> = w.iter().map(|&x| (n - (t * x).floor()).max(0.0) as u32).collect();
    let fastest = w.iter().copied().fold(0.0, f64::max);
    let strong: Vec<usize> = (0..w.len()).filter(|&i| w[i] >= fastest * (1.0 - 1e-9)).collect();
    let mut left = chunks.saturating_sub(shares.iter().map(|&c| c as usize).sum());
    if strong.is_empty() || shares.iter().map(|&c| c as usize).sum::<usize>() > chunks {
        return balanced;
    }
    while left > 0 {
        let take = left.min(strong.len());
        for x in 0..take {
            shares[strong[(2 * x + 1) * strong.len() / (2 * take)]] += 1;
        }
        left -= take;
    }
    shares
}

/// The root of every chunk for the given shares: rank r's chunks follow rank r − 1's.
pub fn roots(c: &Collective, per_rank: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(c.num_chunks);
    for (r, &k) in per_rank.iter().enumerate() {
        out.extend(std::iter::repeat_n(c.group[r] as u32, k as usize));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_capacities_give_equal_shares() {
        for (p, k) in [(4usize, 1usize), (7, 3), (64, 2)] {
            assert_eq!(balanced(&vec![4.0; p], p * k), vec![k as u32; p]);
        }
    }

    #[test]
    fn spread_shares_add_up_and_stay_within_their_slack() {
        // A failed NPU's four neighbours of 63 (three links of four), 252 chunks: `balanced`
        // gives them 63 each and the rest nothing (a phase of C/4 = 63 chunk times).
        let mut w = vec![4.0; 63];
        for v in [1, 8, 10, 17] {
            w[v] = 3.0;
        }
        let b = balanced(&w, 252);
        assert_eq!(b.iter().filter(|&&c| c > 0).count(), 4);
        let s = spread(&w, 252, 0.03);
        assert_eq!(s.iter().sum::<u32>(), 252);
        let worst = |s: &[u32]| (0..63).map(|i| (252.0 - s[i] as f64) / w[i]).fold(0.0, f64::max);
        assert!(worst(&s) <= worst(&b) * 1.03 + 1e-9, "{} against {}", worst(&s), worst(&b));
        // The weak members own ⌈C − 3·63·1.03⌉ = 58 each; the 20 chunks that frees go one each
        // to 20 of the 59 full-rate members.
        assert!([1, 8, 10, 17].iter().all(|&v| s[v] == 58), "{s:?}");
        assert_eq!(s.iter().filter(|&&c| c > 0).count(), 24);
        assert!(s.iter().all(|&c| c <= 58));
        // Equal rates: the equal shares.
        assert_eq!(spread(&[2.0; 8], 16, 0.03), vec![2; 8]);
    }

    proptest::proptest! {
        /// On members of three rates, any chunk count and slack: the spread shares add up, no
        /// member gets more than `balanced` would give it unless it runs at the full rate, and
        /// the slowest member's phase is within the slack of `balanced`'s.
        #[test]
        fn spread_shares_hold_for_any_rates(
            tiers in proptest::collection::vec(0usize..3, 2..40),
            chunks in 1usize..300,
            slack in 0.0f64..0.2,
        ) {
            let w: Vec<f64> = tiers.iter().map(|&t| [2.0, 3.0, 4.0][t]).collect();
            let b = balanced(&w, chunks);
            let s = spread(&w, chunks, slack);
            proptest::prop_assert_eq!(s.iter().map(|&c| c as usize).sum::<usize>(), chunks);
            let fastest = w.iter().copied().fold(0.0, f64::max);
            for i in 0..w.len() {
                proptest::prop_assert!(w[i] >= fastest || s[i] <= b[i], "member {} got {} > {}", i, s[i], b[i]);
            }
            let worst = |s: &[u32]| (0..w.len()).map(|i| (chunks as f64 - s[i] as f64) / w[i]).fold(0.0, f64::max);
            proptest::prop_assert!(worst(&s) <= worst(&b) * (1.0 + slack) + 1e-9);
        }
    }

    #[test]
    fn the_slowest_member_waits_least_and_the_shares_add_up() {
        // Two NPUs of 64 with three links of four (a failed link): per phase, T = (p−1)·C/Σw
        // = 63·128/254 = 31.7 chunk times; they own C − 3T ≈ 32.8, the rest C − 4T ≈ 1.
        let mut w = vec![4.0; 64];
        w[5] = 3.0;
        w[6] = 3.0;
        let s = balanced(&w, 128);
        assert_eq!(s.iter().sum::<u32>(), 128);
        assert_eq!((s[5], s[6]), (33, 33));
        assert!(s.iter().enumerate().all(|(i, &c)| i == 5 || i == 6 || c == 1), "{s:?}");
        let worst = |s: &[u32]| (0..64).map(|i| (128.0 - s[i] as f64) / w[i]).fold(0.0, f64::max);
        // No other split does better: moving one chunk anywhere raises the maximum.
        for from in 0..64 {
            for to in 0..64 {
                if from == to || s[from] == 0 {
                    continue;
                }
                let mut t = s.clone();
                t[from] -= 1;
                t[to] += 1;
                assert!(worst(&t) >= worst(&s) - 1e-12, "moving a chunk {from} -> {to} helps");
            }
        }
    }
}
