//! The export's size limits, on schedules built for them (the limits are checked before the
//! schedule is read, so these need not be valid).

use super::*;
use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
use crate::schedule::{Route, Transfer};

/// Hops, not transfers, bound the traces: 1,025 transfers each relayed all the way round
/// ring:4096 (4,095 hops, a SEND and a RECV each) are 4,197,375 hops, just past
/// `MAX_TRANSFERS` (one fewer transfer would be within it).
#[test]
fn relayed_hops_count_against_the_limit() {
    let topo = crate::topology::parse_spec("ring:4096").unwrap();
    let c = Collective::build(&CollectiveSpec::new(CollectiveKind::AllGather, 1 << 20), &topo).unwrap();
    let round: Route = (0..4096u32).collect::<Vec<u32>>().into();
    let relayed = |n: usize| {
        let mut s = Schedule::new(topo.clone(), &c, "test");
        s.transfers = (0..n)
            .map(|_| Transfer { path: Some(round.clone()), ..Transfer::copy(0, 0, 4095, vec![0]) })
            .collect::<Vec<_>>()
            .into();
        s
    };
    let e = to_chakra(&relayed(1025), "x", None).unwrap_err();
    assert_eq!(e, ChakraError::TooManyHops { hops: 1025 * 4095 });
    assert!(e.to_string().contains("4197375 hops between NPUs"), "{e}");
    const { assert!(1024 * 4095 <= MAX_TRANSFERS && 1025 * 4095 > MAX_TRANSFERS) };
}
