//! The all-reduce's volume bound over a partition of the NPUs (`two_pass_ns`): each chunk must
//! cross between the parts at least 2(G − 1) times, so the links into the parts together carry
//! at least 2(G − 1) buffers.
//!
//! Why: with the parts as G super-nodes that share what they hold for free, an all-reduce is
//! one-way gossip among them (a transfer of a chunk tells its destination everything its
//! source knows of that chunk, at most), and one-way gossip among G parties takes at least
//! 2G − 2 calls. Switches hold and combine nothing, so a message through them is one call; each
//! call enters its destination part over a link into it. The parts are every NPU alone (the
//! total receive volume of Patarasuk and Yuan, 2(p − 1)/p of the buffer per NPU on a uniform
//! fabric) and the groups the fabric's faster links join: on a dragonfly whose groups are
//! linked twice as fast inside as between, the groups' links out carry 2(G − 1)/G buffers a
//! group, 1.47× the NPUs' own bound (dragonfly:4:5@bw=400,200).

use crate::collective::Collective;
use crate::topology::Topology;

/// The bound over the best of the partitions tried (see the module doc); `None` for a subgroup
/// (NPUs outside it could combine for it) or where no part has a link in.
pub(super) fn all_reduce_ns(topo: &Topology, c: &Collective) -> Option<f64> {
    let p = c.group.len();
    if p < 2 || p != topo.live_npus().len() {
        return None;
    }
    let bytes = c.spec.size_bytes as f64;
    partitions(topo)
        .into_iter()
        .filter_map(|(part, parts)| {
            let into = ingress_from_outside(topo, &part);
            (into > 0.0).then(|| 2.0 * (parts - 1) as f64 * bytes / into)
        })
        .reduce(f64::max)
}

/// Link speeds at most whose joined groups are tried (the fastest, then evenly spread).
const MAX_SPEEDS: usize = 8;

/// Every live NPU's part (`u32::MAX` for a failed one) and the parts, per partition into two
/// or more: each NPU alone, then, for each bandwidth its NPU-to-NPU links have, the parts its
/// links that fast or faster join (both ways).
fn partitions(topo: &Topology) -> Vec<(Vec<u32>, usize)> {
    let live = |v: usize| topo.is_npu(v) && !topo.is_failed(v);
    let alone: Vec<u32> = (0..topo.npus())
        .scan(0u32, |k, v| {
            Some(if live(v) {
                *k += 1;
                *k - 1
            } else {
                u32::MAX
            })
        })
        .collect();
    let mut speeds: Vec<f64> =
        topo.links().iter().filter(|l| live(l.src) && live(l.dst)).map(|l| l.bandwidth_gb_per_s).collect();
    speeds.sort_by(f64::total_cmp);
    speeds.dedup();
    // Each speed costs a pass over the links: where links have many (measured) speeds, a few
    // spread over them (`MAX_SPEEDS`; any partition gives a bound, fewer only a looser one).
    if speeds.len() > MAX_SPEEDS {
        let every = speeds.len().div_ceil(MAX_SPEEDS);
        speeds = speeds.iter().rev().step_by(every).copied().collect();
    }
    let live_npus = alone.iter().filter(|&&k| k != u32::MAX).count();
    let mut out = vec![(alone, live_npus)].into_iter().filter(|&(_, k)| k >= 2).collect::<Vec<_>>();
    for &b in &speeds {
        let (part, parts) = joined(topo, &live, b);
        if parts >= 2 && !out.iter().any(|(p, _)| *p == part) {
            out.push((part, parts));
        }
    }
    out
}

/// The parts that NPU-to-NPU links of at least `b` GB/s, both ways, join (components, numbered
/// by their lowest NPU), and how many.
fn joined(topo: &Topology, live: &dyn Fn(usize) -> bool, b: f64) -> (Vec<u32>, usize) {
    let n = topo.npus();
    let mut part = vec![u32::MAX; n];
    let mut next = 0u32;
    let mut stack = Vec::new();
    for s in (0..n).filter(|&v| live(v)) {
        if part[s] != u32::MAX {
            continue;
        }
        part[s] = next;
        stack.push(s);
        while let Some(u) = stack.pop() {
            for l in &topo.links()[topo.out_links(u)] {
                let back = topo.link(l.dst, u).is_some_and(|r| r.bandwidth_gb_per_s >= b);
                if live(l.dst) && part[l.dst] == u32::MAX && l.bandwidth_gb_per_s >= b && back {
                    part[l.dst] = next;
                    stack.push(l.dst);
                }
            }
        }
        next += 1;
    }
    (part, next as usize)
}

/// GB/s over the links into each part's NPUs from outside it (another part, or a switch).
fn ingress_from_outside(topo: &Topology, part: &[u32]) -> f64 {
    topo.links()
        .iter()
        .filter(|l| l.dst < part.len() && part[l.dst] != u32::MAX)
        .filter(|l| l.src >= part.len() || part[l.src] != part[l.dst])
        .map(|l| l.bandwidth_gb_per_s)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LinkInput, TopologyInput};

    /// A ring of 24 NPUs whose links each run at a speed of their own: at most `MAX_SPEEDS`
    /// joined partitions beside the NPUs alone, the fastest speed's among them.
    #[test]
    fn many_speeds_are_sampled() {
        let n = 24;
        let links = (0..n)
            .flat_map(|v| [(v, (v + 1) % n), ((v + 1) % n, v)].map(|(src, dst)| (src, dst, 10.0 + v as f64)))
            .map(|(src, dst, bw)| LinkInput {
                src,
                dst,
                latency_ns: Some(100.0),
                bandwidth_gb_per_s: Some(bw),
                bidirectional: false,
            })
            .collect();
        let t = Topology::from_input(TopologyInput { npus: n, links, ..Default::default() }).unwrap();
        let parts = partitions(&t);
        assert!(parts.len() <= 1 + MAX_SPEEDS && parts.len() > 2, "{}", parts.len());
        // At the fastest speed (33 GB/s) only NPUs 23 and 0 are joined: 23 parts.
        assert!(parts.iter().any(|(p, k)| *k == 23 && p.iter().max() == Some(&22)));
    }
}
