//! The digest of a schedule's data flow: everything the validator's replay and its check of the
//! postcondition read, and nothing they do not (routes, times, the topology's links), so a
//! schedule that differs from one found valid only in its routes (a repair's detours) needs
//! its transfers checked on the new topology, not a second replay.

use crate::collective::Pairs;
use crate::schedule::Schedule;
use sha2::{Digest, Sha256};

/// Transfers from which a valid replay stamps its schedule (`Transfers::stamp_flow`): below,
/// a replay is short and the digest (about a second for 16 M transfers) not worth its time.
pub(crate) const STAMP_FROM_TRANSFERS: usize = 1 << 20;

/// SHA-256 over the data flow: the collective as declared, the chunk count, size and
/// combining flag, the NPU count, the conditions, the scratch slots, and every transfer's step,
/// ends, chunks, op and destination slots in array order (see `Transfers::hash_flow`).
pub(crate) fn digest(s: &Schedule) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut feed = |xs: &[u32]| {
        for part in xs.chunks(1 << 14) {
            buf.clear();
            buf.extend(part.iter().flat_map(|x| x.to_le_bytes()));
            h.update(&buf);
        }
    };
    let collective = serde_json::to_vec(&s.collective).unwrap_or_default();
    feed(&[collective.len() as u32]);
    feed(&collective.iter().map(|&b| b as u32).collect::<Vec<u32>>());
    let size = s.chunk_size_bytes.to_bits();
    feed(&[s.num_chunks as u32, (s.num_chunks >> 32) as u32, size as u32, (size >> 32) as u32]);
    feed(&[s.combining as u32, s.topology.npus() as u32, s.scratch.len() as u32]);
    feed(&s.scratch);
    for pairs in [&s.precondition, &s.postcondition] {
        hash_pairs(pairs, &mut feed);
    }
    s.transfers.hash_flow(&mut feed);
    h.finalize().into()
}

/// A condition by its form: an every-pair set by its NPUs and chunk count, a list pair by pair.
fn hash_pairs(p: &Pairs, feed: &mut impl FnMut(&[u32])) {
    match p.as_every() {
        Some((npus, k)) => {
            feed(&[0, npus.len() as u32, k as u32]);
            feed(npus);
        }
        None => {
            let listed = p.as_slice();
            feed(&[1, listed.len() as u32]);
            feed(listed.as_flattened());
        }
    }
}

/// Whether `s` carries the stamp of a valid replay of its very data flow.
pub(crate) fn vouched(s: &Schedule) -> bool {
    s.transfers.flow_stamp().is_some_and(|stamp| *stamp == digest(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{CollectiveKind, CollectiveSpec};
    use crate::schedule::Route;

    fn ring_all_reduce() -> Schedule {
        let topo = crate::topology::parse_topology("ring:4").unwrap();
        let spec = CollectiveSpec::new(CollectiveKind::AllReduce, 4096);
        crate::baselines::build("ring", &topo, &spec).unwrap()
    }

    /// Every part of the data flow is in the digest: each edit below, one field at a time,
    /// changes it; a route does not.
    #[test]
    fn the_digest_covers_the_data_flow_and_not_the_routes() {
        let s = ring_all_reduce();
        let d = digest(&s);
        type Edit = Box<dyn Fn(&mut Schedule)>;
        let edits: Vec<(&str, Edit)> = vec![
            ("collective", Box::new(|s| s.collective.size_bytes += 1)),
            ("num_chunks", Box::new(|s| s.num_chunks += 1)),
            ("chunk_size_bytes", Box::new(|s| s.chunk_size_bytes *= 2.0)),
            ("combining", Box::new(|s| s.combining = !s.combining)),
            ("scratch", Box::new(|s| s.scratch.push(0))),
            ("precondition", Box::new(|s| s.precondition = s.precondition.iter().take(3).collect::<Vec<_>>().into())),
            (
                "postcondition",
                Box::new(|s| s.postcondition = s.postcondition.iter().skip(1).collect::<Vec<_>>().into()),
            ),
            ("topology", Box::new(|s| s.topology = crate::topology::parse_topology("ring:5").unwrap())),
            ("step", Box::new(|s| s.transfers.set_step(0, 7))),
            ("op", Box::new(|s| s.transfers.set_op(0, crate::schedule::Op::Copy))),
            ("ends", Box::new(|s| s.transfers.edit(|v| v[0].dst = v[0].src))),
            ("chunks", Box::new(|s| s.transfers.edit(|v| v[0].chunks = vec![1].into()))),
            ("order", Box::new(|s| s.transfers.edit(|v| v.swap(0, 1)))),
            ("dst_chunks", Box::new(|s| s.transfers.edit(|v| v[0] = v[0].clone().into_slots(vec![2])))),
        ];
        for (what, edit) in edits {
            let mut t = s.clone();
            edit(&mut t);
            assert_ne!(digest(&t), d, "{what} is not in the digest");
        }
        let mut t = s.clone();
        let x = t.transfers.at(0);
        t.transfers.set_path(0, Some(Route::from(vec![x.src, 9, x.dst])));
        assert_eq!(digest(&t), d, "a route is not data flow");
    }

    /// A stamp vouches only for the flow it was made from: transfers stamped with another
    /// flow's digest are replayed, and their violations found; an edit drops the stamp.
    #[test]
    fn a_stamp_of_another_flow_is_not_trusted() {
        let valid = ring_all_reduce();
        assert!(super::super::validate_stamping_from(&valid, 0).valid);
        let mut broken = valid.clone();
        broken.transfers.edit(|v| {
            v.remove(0);
        });
        assert!(broken.transfers.flow_stamp().is_none(), "an edit drops the stamp");
        broken.transfers.stamp_flow(digest(&valid));
        let r = super::super::validate_stamping_from(&broken, 0);
        assert!(!r.valid && r.violation_count > 0, "{r:?}");
        let mut stepped = valid.clone();
        stepped.transfers.set_step(0, 99);
        assert!(stepped.transfers.flow_stamp().is_none());
        // Below the threshold nothing is stamped.
        let fresh = ring_all_reduce();
        assert!(super::super::validate_stamping_from(&fresh, usize::MAX).valid);
        assert!(fresh.transfers.flow_stamp().is_none());
    }
}
