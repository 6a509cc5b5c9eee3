//! How long the greedy's runs leave for what follows them: the ranking, the check and the
//! door's writing of the winner, estimated from the collective's size (`check_reserve`).

use crate::collective::Collective;

/// What a run's schedule costs after the runs, per (NPU, chunk) pair of its postcondition: its
/// ranking's simulation, the gate's validation and the door's writing of it. fc:1448's
/// all-gather (2.1 M pairs): ranked in 0.8 s, gated in 1.6 s, written in 1.2 s by the CLI
/// (2026-12-04); beside 32 loadtest clients gated in 2.6 s, written and compressed by a service
/// worker in 1.8 s.
const CHECK_NS_PER_PAIR: f64 = 1_500.0;
/// The share of the time the runs have at most kept back from them for that check.
const CHECK_SHARE: f64 = 0.25;

/// The time kept back from runs that have `left` until the deadline, for checking and writing
/// the schedule of the largest of `variants` (with `tenants`, of them all), `CHECK_NS_PER_PAIR`
/// a pair, at most `CHECK_SHARE` of `left`: under a second below about 670,000 pairs.
pub(super) fn check_reserve(
    variants: &[&Collective],
    tenants: Option<&[Collective]>,
    left: std::time::Duration,
) -> std::time::Duration {
    let pairs = match tenants {
        Some(t) => t.iter().map(|c| c.postcondition.len()).sum(),
        None => variants.iter().map(|c| c.postcondition.len()).max().unwrap_or(0),
    };
    let wanted = std::time::Duration::from_secs_f64(pairs as f64 * CHECK_NS_PER_PAIR * 1e-9);
    wanted.min(left.mul_f64(CHECK_SHARE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{CollectiveKind, CollectiveSpec};
    use crate::topology::parse_spec;

    /// The runs leave the check `CHECK_NS_PER_PAIR` a pair of the largest chunking's
    /// postcondition (ring:4's all-gather: 16 pairs, 64 in fours), of every tenant's together,
    /// at most `CHECK_SHARE` of the time they have.
    #[test]
    fn the_runs_leave_the_check_its_time() {
        use std::time::Duration;
        let ring = parse_spec("ring:4").unwrap();
        let ag = |k: u32| {
            Collective::build(&CollectiveSpec::new(CollectiveKind::AllGather, 1 << 20).with_chunks_per_npu(k), &ring)
                .unwrap()
        };
        let (ones, fours) = (ag(1), ag(4));
        let pairs = |n: f64| Duration::from_secs_f64(n * CHECK_NS_PER_PAIR * 1e-9);
        let minute = Duration::from_secs(60);
        assert_eq!(check_reserve(&[&ones], None, minute), pairs(16.0));
        assert_eq!(check_reserve(&[&ones, &fours], None, minute), pairs(64.0));
        assert_eq!(check_reserve(&[&ones], Some(&[ones.clone(), fours.clone()]), minute), pairs(80.0));
        assert_eq!(check_reserve(&[&fours], None, Duration::from_nanos(40_000)), Duration::from_nanos(10_000));
    }
}
