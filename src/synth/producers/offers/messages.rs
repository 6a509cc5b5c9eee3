//! An all-gather at its busiest NPU's load in whole messages (`whole_load_chunks`,
//! `whole_load_groups`): the chunking that deals that NPU's shards evenly over its links, and
//! messages of several chunks so that it pays its links' latency a few times only.
//!
//! Why: after a failure the NPUs that lost a link bind the all-gather (torus:4x4x8 less link
//! 0-1: NPU 0 takes 127 shards over five links, 25.4 each). At one chunk per NPU some link
//! carries 26 (2.4% over the bound); at finer chunkings every chunk a message pays α (0.5 µs
//! against a 1 MiB shard's 10.5 µs). At ten chunks per NPU each link carries exactly 254, and in
//! ten messages, nine of 28 chunks and one of two: 271.3 µs, the bound plus ten α (1.019×
//! against 1.042×).

use super::{SHARD_MESSAGES_MAX_NPUS, links_among};
use crate::collective::{Collective, CollectiveKind};
use crate::topology::{Link, Topology};

/// Chunks per NPU at least: the whole-load chunking is the smallest multiple of the one that
/// divides the busiest NPU's shards at or above it (finer than the matcher's usual 1 to 8,
/// so that a message's share of the last one is small).
const MIN_CHUNKS: usize = 8;

/// How many messages each of the busiest NPU's links carries, about, over √(W / α) (W the time
/// of its load on one link): fewer pay less α, larger ones fill the start and the end worse
/// (torus:4x4x8 less link 0-1, W / α ≈ 533: ten messages best; torus:16x16 less NPU 100 and
/// link 3-4, W / α ≈ 891: about sixteen).
const MESSAGES_OVER_ROOT: f64 = 0.45;

/// The chunks per NPU at which each link into the all-gather's busiest NPU (the live NPU with
/// the least bandwidth in) carries a whole number of chunks at its share of the bandwidth,
/// where one chunk per NPU does not: the smallest such k0 (up to `MAX_WHOLE`; d / gcd(n − 1,
/// d) on d links alike, n the NPUs), times the least multiple that reaches `MIN_CHUNKS`.
/// `None` on fabrics with switches (a message through one pays its latency twice and shares the
/// switch's links), where every NPU has as many links in (an intact torus: its translation is
/// optimal), above `SHARD_MESSAGES_MAX_NPUS` (where its messages do not run), for other
/// collectives, and where the shards divide already.
pub fn whole_load_chunks(topo: &Topology, c: &Collective) -> Option<u32> {
    if c.group.len() > SHARD_MESSAGES_MAX_NPUS {
        return None;
    }
    let links = busiest(topo, c)?;
    let k = (1..=MAX_WHOLE).find(|&k| loads(&links, c.group.len() - 1, k).is_some())?;
    (k > 1).then(|| (k * MIN_CHUNKS.div_ceil(k)) as u32)
}

/// The chunks a message at `c`'s chunking for about 0.8, 1 and 1.25 times
/// `MESSAGES_OVER_ROOT` · √(W / α) messages on the fastest link into the busiest NPU (W the
/// time of its load there, α its latency), split evenly, and the middle count m also in the
/// largest messages that still make m, the last one least (on torus:4x4x8 less link 0-1 at
/// 128 MiB, ten messages of 254 chunks: 26 a message take 271.8 µs, 28 take 271.3: nine
/// full messages and two chunks, the busiest NPU's last arrival a short one); empty where the
/// links do not carry whole loads or have no latency.
pub fn whole_load_groups(topo: &Topology, c: &Collective) -> Vec<u32> {
    let Some(links) = busiest(topo, c) else { return Vec::new() };
    let Some(loads) = loads(&links, c.group.len() - 1, c.spec.chunks() as usize) else { return Vec::new() };
    let Some((load, link)) =
        loads.into_iter().zip(&links).max_by(|a, b| a.1.bandwidth_gb_per_s.total_cmp(&b.1.bandwidth_gb_per_s))
    else {
        return Vec::new();
    };
    if link.latency_ns <= 0.0 {
        return Vec::new();
    }
    let w = load as f64 * c.chunk_size_bytes / link.bandwidth_gb_per_s;
    let best = MESSAGES_OVER_ROOT * (w / link.latency_ns).sqrt();
    let mut groups: Vec<u32> = Vec::new();
    for (i, m) in [0.8, 1.0, 1.25].iter().map(|f| (best * f).round().max(1.0) as usize).enumerate() {
        // The even split; at the middle count also the largest messages that still make m.
        let even = load.div_ceil(m);
        let last_least = if i == 1 && m > 1 { (load - 1) / (m - 1) } else { even };
        for g in [even, last_least] {
            if g > 1 && !groups.contains(&(g as u32)) {
                groups.push(g as u32);
            }
        }
    }
    groups
}

/// Chunks per NPU up to which `whole_load_chunks` looks for whole loads.
const MAX_WHOLE: usize = 64;

/// Each link's chunks when the `need` shards at `k` chunks each go over `links` in proportion to
/// their bandwidth, where every one is whole.
fn loads(links: &[&Link], need: usize, k: usize) -> Option<Vec<usize>> {
    let total: f64 = links.iter().map(|l| l.bandwidth_gb_per_s).sum();
    links
        .iter()
        .map(|l| {
            let x = (k * need) as f64 * l.bandwidth_gb_per_s / total;
            ((x - x.round()).abs() < 1e-6 * x.max(1.0)).then_some(x.round() as usize)
        })
        .collect()
}

/// The links into the busiest NPU: the live NPU of `c`'s group with the least bandwidth in from
/// the group; `None` for anything but an all-gather over direct links, or where every NPU has
/// as many links in.
fn busiest<'a>(topo: &'a Topology, c: &Collective) -> Option<Vec<&'a Link>> {
    if topo.switches() > 0 || c.spec.kind != CollectiveKind::AllGather || c.combining || c.group.len() < 3 {
        return None;
    }
    let mut into: Vec<Vec<&Link>> = vec![Vec::new(); topo.nodes()];
    for l in links_among(topo, &c.group) {
        into[l.dst].push(l);
    }
    let bandwidth = |u: usize| into[u].iter().map(|l| l.bandwidth_gb_per_s).sum::<f64>();
    let v = *c.group.iter().min_by(|&&a, &&b| bandwidth(a).total_cmp(&bandwidth(b)).then(a.cmp(&b)))?;
    let alike = c.group.iter().all(|&u| into[u].len() == into[v].len());
    (!alike && bandwidth(v) > 0.0).then(|| std::mem::take(&mut into[v]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::CollectiveSpec;
    use crate::topology::{Failures, parse_spec};

    fn all_gather(t: &Topology, k: u32) -> Collective {
        Collective::build(&CollectiveSpec::new(CollectiveKind::AllGather, 128 << 20).with_chunks_per_npu(k), t).unwrap()
    }

    /// torus:4x4x8 less link 0-1: NPU 0's 127 shards over five links want five chunks per NPU,
    /// ten from eight; 254 chunks a link, each 1.05 µs, W / α ≈ 533: about 8, 10 and 13
    /// messages, of 32, 26 and 20 chunks, and ten also of 28 (nine of 28 and one of 2). Not on
    /// the intact torus (every NPU alike), through switches or for an all-reduce.
    #[test]
    fn the_busiest_npus_load_in_whole_messages() {
        let less = Failures { links: vec![[0, 1]], ..Failures::default() };
        let t = parse_spec("torus:4x4x8").unwrap().with_failures(&less).unwrap();
        assert_eq!(whole_load_chunks(&t, &all_gather(&t, 1)), Some(10));
        assert_eq!(whole_load_groups(&t, &all_gather(&t, 10)), vec![32, 26, 28, 20]);
        assert_eq!(whole_load_groups(&t, &all_gather(&t, 8)), Vec::<u32>::new(), "203.2 chunks a link");
        let npu = Failures { npus: vec![100], links: vec![[3, 4]], ..Failures::default() };
        let t = parse_spec("torus:16x16").unwrap().with_failures(&npu).unwrap();
        assert_eq!(whole_load_chunks(&t, &all_gather(&t, 1)), Some(9), "254 shards over three links");
        let intact = parse_spec("torus:4x4x8").unwrap();
        assert_eq!(whole_load_chunks(&intact, &all_gather(&intact, 1)), None, "127 over six, every NPU alike");
        // Links of 50 and 100 GB/s into a corner of mesh:3x3: eight shards a third and two
        // thirds each, whole at three chunks per NPU (8 and 16), nine from eight; 48 chunks of
        // 1.58 MiB on the fast link, W / α ≈ 1136 (0.7 µs): 12, 15 and 19 messages, of 4, 4
        // and 3 chunks.
        let mixed = parse_spec("mesh:3x3@bw=50,100;lat=300,700").unwrap();
        assert_eq!(whole_load_chunks(&mixed, &all_gather(&mixed, 1)), Some(9));
        assert_eq!(whole_load_groups(&mixed, &all_gather(&mixed, 9)), vec![4, 3]);
        let rail = parse_spec("rail:4x8").unwrap();
        assert_eq!(whole_load_chunks(&rail, &all_gather(&rail, 1)), None);
        let ar = Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, 1 << 20), &t).unwrap();
        assert_eq!(whole_load_chunks(&t, &ar), None);
    }
}
