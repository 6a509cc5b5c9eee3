//! Messages merged: a route's later message folded into an earlier one on the same route, where
//! nothing at either end touches its chunks in between, while the merged message takes no
//! longer on the wire than one latency of the route.
//!
//! Why: the multi-tenant matcher moves one chunk a message, so a tenant of small chunks pays α
//! once a chunk (one all-gather tenant of 4 KiB at 64 chunks an NPU on ring:2: 64 messages of
//! 64 B, 32.0 µs, against 0.52 µs for the same collective synthesized alone). Merged, it pays
//! α once. So does any greedy winner over a link of very high latency (ring:8 with NPU 0's
//! only link in at 1 ms: 3.29 → 1.42 ms). The cap keeps bandwidth-bound messages apart (a merge delays the earlier message's
//! chunks by the later ones' wire time); the engine keeps the result only where the simulator
//! finds it faster and the validator finds it valid.

use crate::schedule::{ChunkList, Op, Schedule, Transfer, Transfers};
use std::collections::HashMap;

/// A message's route and whether it reduces: messages merge within one.
type Route = (u32, u32, Option<Vec<u32>>, bool);

/// Transfers up to which the pass runs (it keeps a list of touches per (node, chunk)).
pub const MAX_TRANSFERS: usize = 200_000;

/// `s` with messages merged (the module's doc), or `None` where none merges or the pass does
/// not apply (scratch slots or slot moves, a route not in the topology, too many transfers).
pub fn merge(s: &Schedule) -> Option<Schedule> {
    if !s.scratch.is_empty() || s.transfers.has_dst_slots() || s.transfers.len() > MAX_TRANSFERS {
        return None;
    }
    let n = s.transfers.len();
    // Messages by route and op, in step order; only routes of two or more messages where two
    // chunks fit within a latency can merge (on most fabrics, at most sizes, none: the pass
    // then ends here, before its tables).
    let mut routes: HashMap<Route, Vec<u32>> = HashMap::new();
    for (i, t) in s.transfers.iter().enumerate() {
        let key = (t.src, t.dst, t.path_nodes().map(<[u32]>::to_vec), t.op == Op::Reduce);
        routes.entry(key).or_default().push(i as u32);
    }
    let chunk_bytes = s.chunk_size_bytes;
    let mut keys: Vec<(Route, usize)> = routes
        .iter()
        .filter(|(_, list)| list.len() > 1)
        .filter_map(|(key, _)| {
            room_in_chunks(s, key, chunk_bytes).filter(|&room| room > 1).map(|room| (key.clone(), room))
        })
        .collect();
    if keys.is_empty() {
        return None;
    }
    keys.sort();
    let mut step: Vec<u32> = s.transfers.iter().map(|t| t.step).collect();
    let mut chunks: Vec<Vec<u32>> = s.transfers.iter().map(|t| t.chunks.to_vec()).collect();
    let mut alive = vec![true; n];
    // Every transfer touching (node, chunk) at either end, by index.
    let mut touches: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
    for (i, t) in s.transfers.iter().enumerate() {
        for &c in t.chunks {
            touches.entry((t.src, c)).or_default().push(i as u32);
            touches.entry((t.dst, c)).or_default().push(i as u32);
        }
    }
    let mut merged_any = false;
    for (key, room) in keys {
        let mut list = routes.remove(&key).unwrap_or_default();
        list.sort_by_key(|&i| (step[i as usize], i));
        let mut head = list[0] as usize;
        for &b in &list[1..] {
            let b = b as usize;
            let fits = chunks[head].len() + chunks[b].len() <= room;
            if fits && movable(s, (head, b), &step, &chunks, &touches) {
                let moved = std::mem::take(&mut chunks[b]);
                chunks[head].extend(moved);
                step[b] = step[head];
                alive[b] = false;
                merged_any = true;
            } else {
                head = b;
            }
        }
    }
    if !merged_any {
        return None;
    }
    let mut transfers = Transfers::with_capacity(n);
    for (i, t) in s.transfers.iter().enumerate().filter(|(i, _)| alive[*i]) {
        transfers.push(Transfer {
            op: t.op,
            path: t.path.cloned(),
            ..Transfer::copy(step[i], t.src as usize, t.dst as usize, ChunkList::from(std::mem::take(&mut chunks[i])))
        });
    }
    let mut r = s.clone();
    r.transfers = transfers;
    r.collective_time_ns = None;
    Some(r)
}

/// Chunks a merged message on the route may carry: as many as cross its slowest link within
/// the route's latency (at least one); `None` where a hop is not a link.
fn room_in_chunks(s: &Schedule, (src, dst, path, _): &Route, chunk_bytes: f64) -> Option<usize> {
    let nodes = path.clone().unwrap_or_else(|| vec![*src, *dst]);
    let (mut latency_ns, mut bandwidth) = (0.0, f64::INFINITY);
    for hop in nodes.windows(2) {
        let l = s.topology.link(hop[0] as usize, hop[1] as usize)?;
        latency_ns += l.latency_ns;
        bandwidth = f64::min(bandwidth, l.bandwidth_gb_per_s);
    }
    // GB/s is bytes a ns.
    let wire_ns = chunk_bytes / bandwidth;
    Some(if wire_ns > 0.0 { ((latency_ns / wire_ns).floor() as usize).max(1) } else { usize::MAX })
}

/// Whether message `b` may move to `head`'s step and join it: none of its chunks is in `head`
/// already, no other transfer writes one at `b`'s source from `head`'s step until `b`'s
/// (it would send another value), and no other transfer touches one at `b`'s destination from
/// `head`'s step through `b`'s (it would read or write around the earlier arrival).
fn movable(
    s: &Schedule,
    (head, b): (usize, usize),
    step: &[u32],
    chunks: &[Vec<u32>],
    touches: &HashMap<(u32, u32), Vec<u32>>,
) -> bool {
    let t = s.transfers.at(b);
    let (from, to) = (step[head], step[b]);
    chunks[b].iter().all(|&c| {
        if chunks[head].contains(&c) {
            return false;
        }
        let others = |v: u32| touches.get(&(v, c)).into_iter().flatten().map(|&i| i as usize).filter(|&i| i != b);
        let written_at_src = others(t.src).any(|i| {
            let o = s.transfers.at(i);
            o.dst == t.src && (from..to).contains(&step[i]) && !chunks[i].is_empty()
        });
        let touched_at_dst =
            others(t.dst).any(|i| (from..=to).contains(&step[i]) && !chunks[i].is_empty() && i != head);
        !written_at_src && !touched_at_dst
    })
}

#[cfg(test)]
mod tests {
    use crate::collective::{Collective, CollectiveKind, CollectiveSpec};
    use crate::schedule::{Schedule, Transfer, Transfers};

    /// A ring:2 all-gather of 64 chunks an NPU sent one chunk a message: merged into one message
    /// each way where a chunk's wire time is a sliver of α, valid and 64 times fewer α.
    #[test]
    fn small_chunks_on_one_route_become_one_message() {
        let topo = crate::topology::parse_spec("ring:2").unwrap();
        let spec = CollectiveSpec::new(CollectiveKind::AllGather, 4096).with_chunks_per_npu(64);
        let c = Collective::build(&spec, &topo).unwrap();
        let mut transfers = Transfers::new();
        for k in 0..64u32 {
            transfers.push(Transfer::copy(k, 0, 1, vec![k]));
            transfers.push(Transfer::copy(k, 1, 0, vec![64 + k]));
        }
        let mut s = Schedule::new(topo, &c, "test");
        s.transfers = transfers;
        assert!(crate::validate::validate(&s).valid);
        let before = crate::sim::simulate(&s).unwrap().collective_time_ns;
        let m = super::merge(&s).unwrap();
        assert_eq!(m.transfers.len(), 2);
        assert!(crate::validate::validate(&m).valid);
        let after = crate::sim::simulate(&m).unwrap().collective_time_ns;
        assert!(after * 10.0 < before, "{after} {before}");
        // At 1 MiB a chunk (10 µs on the wire against 0.5 µs of α) nothing merges.
        let big = CollectiveSpec::new(CollectiveKind::AllGather, 128 << 20).with_chunks_per_npu(64);
        let c = Collective::build(&big, &s.topology).unwrap();
        let mut b = Schedule::new(s.topology.clone(), &c, "test");
        b.transfers = s.transfers.clone();
        assert!(super::merge(&b).is_none());
    }

    /// A later message whose chunk reaches its source only in between stays apart: moved to
    /// the earlier message's step, it would send what the source does not hold yet.
    #[test]
    fn a_chunk_written_at_the_source_in_between_is_not_moved() {
        let topo = crate::topology::parse_spec("ring:3").unwrap();
        let spec = CollectiveSpec::new(CollectiveKind::AllGather, 3 * 64);
        let c = Collective::build(&spec, &topo).unwrap();
        let mut transfers = Transfers::new();
        // 1 -> 0 carries chunk 1 at step 0 and chunk 2 at step 1; chunk 2 reaches 1 at step 0.
        transfers.push(Transfer::copy(0, 0, 1, vec![0]));
        transfers.push(Transfer::copy(0, 2, 1, vec![2]));
        transfers.push(Transfer::copy(0, 1, 0, vec![1]));
        transfers.push(Transfer::copy(1, 1, 0, vec![2]));
        transfers.push(Transfer::copy(1, 1, 2, vec![0]));
        transfers.push(Transfer::copy(1, 0, 2, vec![1]));
        let mut s = Schedule::new(topo, &c, "test");
        s.transfers = transfers;
        assert!(crate::validate::validate(&s).valid, "{:?}", crate::validate::validate(&s).violations);
        // 1 -> 0 of chunk 2 may not join 1 -> 0 of chunk 1; nothing else shares a route.
        assert!(super::merge(&s).is_none());
    }
}
