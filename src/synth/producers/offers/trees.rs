//! The trees' runs (`tree_runs`): at which chunkings and chunks a message the per-chunk trees
//! (`synth::trees`) run, from the NPU count, the latency and the fill.

use super::{GROUPED_ONLY_ALL_REDUCE_NPUS, GROUPED_ONLY_NPUS, links_among};
use crate::collective::Collective;
use crate::topology::Topology;

/// A chunk of `chunk_bytes`: its transfer time on the fastest link over the smallest link
/// latency; infinite where either is missing or the latency is 0 (nothing is latency-bound).
/// Below 1 a chunk is mostly latency.
pub fn beta_over_alpha(topology: &Topology, chunk_bytes: f64) -> f64 {
    let links = topology.links();
    let bw_max = links.iter().map(|l| l.bandwidth_gb_per_s).fold(0.0, f64::max);
    let alpha_min = links.iter().map(|l| l.latency_ns).fold(f64::INFINITY, f64::min);
    if bw_max > 0.0 && alpha_min.is_finite() && alpha_min > 0.0 {
        chunk_bytes / bw_max / alpha_min
    } else {
        f64::INFINITY
    }
}

/// The (variant, units a message) the per-chunk trees run at: every chunking below a thousand
/// NPUs, and the first in messages of `tree_groups`, where `synth::trees` applies.
pub(super) fn tree_runs(topology: &Topology, variants: &[&Collective], grouping: &[u32]) -> Vec<(usize, u32)> {
    let chunk_over_alpha = beta_over_alpha(topology, variants[0].chunk_size_bytes);
    let grouped = tree_groups(topology.npus(), grouping, chunk_over_alpha).into_iter().map(|g| (0usize, g));
    let plain = (0..variants.len()).filter(|_| topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS).map(|v| (v, 1));
    // Below a thousand NPUs, where a chunk of the first chunking is a few latencies, the
    // second chunking in threes too (`SECOND_THREES_BELOW`).
    let second = (topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS
        && variants.len() > 1
        && !grouping.is_empty()
        && chunk_over_alpha < SECOND_THREES_BELOW)
        .then_some((1usize, 3u32));
    let mut runs: Vec<(usize, u32)> = plain
        .chain(grouped)
        .chain(second)
        .filter(|&(variant, g)| crate::synth::trees::applies(topology, variants[variant], g as usize))
        .collect();
    // Below a thousand NPUs, also the unit counts the latency and the fill would pick
    // (`trees_units_for`) and the busiest link's whole load (`trees_units_by_load`), where no
    // run above has them.
    if topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS && !runs.is_empty() {
        let picks = [trees_units_for(topology, variants), trees_units_by_load(topology, variants)];
        for pick in picks.into_iter().flatten() {
            if !runs.contains(&pick) && crate::synth::trees::applies(topology, variants[pick.0], pick.1 as usize) {
                runs.push(pick);
            }
        }
    }
    runs
}

/// The chunks a message the trees (`Mode::Trees`) move on the first chunking where the groups
/// run (`grouping`; where it is empty, chunks being large, one a message from a thousand NPUs):
/// those and three below a thousand NPUs (the runs at one chunk a message on every chunking go
/// beside them), two and three up to
/// `GROUPED_ONLY_NPUS` (torus:32x32 at 256 MiB after one or three failed links or less NPU 9:
/// 1.482–1.500 ms in pairs, 1.489–1.499 in threes, 1.560–1.572 in fours), or three and four
/// there where a chunk takes under `FOURS_BELOW` latencies (below), the grouping alone beyond
/// (torus:64x64 less NPU 9 at 1 GiB: 5.714 ms in fours, 5.764 in threes, each run 9–12 s).
/// `chunk_over_alpha`: a chunk's time on the fastest link over the smallest latency.
fn tree_groups(npus: usize, grouping: &[u32], chunk_over_alpha: f64) -> Vec<u32> {
    if grouping.is_empty() {
        // Chunks too large to group: one a message, on the first chunking only where the
        // runs on every chunking do not go (from a thousand NPUs).
        return if npus >= GROUPED_ONLY_ALL_REDUCE_NPUS { vec![1] } else { Vec::new() };
    }
    if npus >= GROUPED_ONLY_NPUS {
        return grouping.to_vec();
    }
    let mut groups: Vec<u32> = if npus < GROUPED_ONLY_ALL_REDUCE_NPUS {
        grouping.to_vec()
    } else if chunk_over_alpha < FOURS_BELOW {
        grouping.iter().copied().filter(|&g| g != 2).collect()
    } else {
        grouping.iter().copied().filter(|&g| g < 4).collect()
    };
    groups.push(3);
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// The timesteps a trees timeline takes over its busiest link's load, about, in `trees_units_for`
/// (below a thousand NPUs with the parents chosen as the moves are placed: 0–3 at 64 MiB where
/// a link carries several times a tree's height, 7–10 where it carries about one).
const TREES_FILL_TIMESTEPS: f64 = 3.0;

/// The (chunking, chunks a message) among `variants` and one to four chunks a message whose
/// unit count is nearest (by ratio) to where the trees' latency and their fill balance: a
/// timeline of F + f timesteps (F messages on the busiest link, f the fill) of messages of
/// W / F (W the busiest link's bytes' time) costs (F + f)·α + W·(1 + f / F), least at
/// F = √(f·W / α), about U = √(f · B · L / (2 (n − 1))) units (B the buffer's time over α, L
/// the directed links, n the NPUs). On torus:8x8 less three links at 64 MiB that is 89 units,
/// and the nearest, 86 (four chunks per NPU in threes), takes 368.0 µs against 373.3 µs for
/// the 128 units the other runs had (1.069× against 1.084× intact).
fn trees_units_for(topology: &Topology, variants: &[&Collective]) -> Option<(usize, u32)> {
    let c = variants.first()?;
    let n = c.group.len().max(2) as f64;
    let links = topology.links().len() as f64;
    let buffer = c.chunk_size_bytes * c.num_chunks as f64;
    let b = beta_over_alpha(topology, buffer);
    let target = (TREES_FILL_TIMESTEPS * b * links / (2.0 * (n - 1.0))).sqrt();
    if !target.is_finite() || target < 1.0 {
        return None;
    }
    let off = |units: usize| (units as f64 / target).ln().abs();
    variants
        .iter()
        .enumerate()
        .flat_map(|(v, c)| (1..=4u32).map(move |g| (v, g, c.num_chunks.div_ceil(g as usize))))
        .min_by(|a, b| off(a.2).total_cmp(&off(b.2)).then((a.0, a.1).cmp(&(b.0, b.1))))
        .map(|(v, g, _)| (v, g))
}

/// Chunks a message up to which `trees_units_by_load` looks.
const LOAD_MAX_GROUP: u32 = 8;

/// The (chunking, chunks a message) among `variants` and one to `LOAD_MAX_GROUP` chunks a
/// message whose timeline is predicted shortest from the busiest link's load in whole messages:
/// U units put at least ⌈a·U⌉ messages on some link (a = 2 (n − 1) over the links' capacity in
/// messages a timestep; a tree moves its unit twice over each of its n − 1 edges), and a fill
/// of about h² / (2 ⌈a·U⌉) timesteps (h the fabric's diameter in hops: trees about that deep,
/// their start and end spread over the load) comes on top, each timestep a message's time on
/// the fastest link. `trees_units_for`'s square root takes the load as a real number; in whole
/// messages a unit count a little below a multiple of 1/a saves the last, partly empty
/// timestep. On torus:4x4x8 less link 0-1 at 128 MiB (a ≈ 0.332) it picks 96 units, whose 32
/// timesteps of 1.33 MiB take 463.4 µs against 472.4 µs for the 43 of 1 MiB the other runs
/// had (1.041 against 1.061× the bound); on torus:16x16 less NPU 100 and link 3-4, 170 units
/// in threes (722.0 against 738.8 µs). Its fill is a guess (meshes fill more), so it runs
/// beside the other pick, not instead.
fn trees_units_by_load(topology: &Topology, variants: &[&Collective]) -> Option<(usize, u32)> {
    let c = variants.first()?;
    let (capacity, depth) = load_shape(topology, c)?;
    let n = c.group.len() as f64;
    let per_unit = 2.0 * (n - 1.0) / capacity;
    let within = links_among(topology, &c.group);
    let message_ns = |bytes: f64| within.iter().map(|l| l.time_ns(bytes)).fold(f64::INFINITY, f64::min);
    let predicted = |units: usize, bytes: f64| {
        let load = (per_unit * units as f64 - 1e-9).ceil().max(1.0);
        (load + depth * depth / (2.0 * load)) * message_ns(bytes)
    };
    variants
        .iter()
        .enumerate()
        .flat_map(|(v, c)| (1..=LOAD_MAX_GROUP).map(move |g| (v, g, c)))
        .map(|(v, g, c)| (v, g, predicted(c.num_chunks.div_ceil(g as usize), c.chunk_size_bytes * g as f64)))
        .filter(|p| p.2.is_finite())
        .min_by(|a, b| a.2.total_cmp(&b.2).then((a.0, a.1).cmp(&(b.0, b.1))))
        .map(|(v, g, _)| (v, g))
}

/// The links among `c`'s NPUs in messages a timestep (a link at half the fastest's bandwidth
/// carries half a message: the trees hold it two timesteps) and their diameter in hops; `None`
/// where they do not connect them.
fn load_shape(topology: &Topology, c: &Collective) -> Option<(f64, f64)> {
    let mut local = vec![usize::MAX; topology.nodes()];
    for (i, &u) in c.group.iter().enumerate() {
        local[u] = i;
    }
    let n = c.group.len();
    let within = links_among(topology, &c.group);
    let fastest = within.iter().map(|l| l.bandwidth_gb_per_s).fold(0.0, f64::max);
    if n < 2 || fastest <= 0.0 || fastest.is_nan() {
        return None;
    }
    // A link's timesteps a message, rounded as the trees round them (`trees::COST_SLACK`).
    let slack = crate::synth::trees::COST_SLACK;
    let capacity: f64 = within.iter().map(|l| 1.0 / (fastest / l.bandwidth_gb_per_s - slack).ceil().max(1.0)).sum();
    let mut adj = vec![Vec::new(); n];
    for l in &within {
        adj[local[l.src]].push(local[l.dst]);
    }
    // Hops within the group (`Topology::hop_distances` walks every node, switches included).
    let mut depth = 0;
    let mut dist = vec![usize::MAX; n];
    let mut queue = std::collections::VecDeque::new();
    for s in 0..n {
        dist.fill(usize::MAX);
        dist[s] = 0;
        queue.push_back(s);
        while let Some(u) = queue.pop_front() {
            for &v in &adj[u] {
                if dist[v] == usize::MAX {
                    dist[v] = dist[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        depth = depth.max(*dist.iter().max()?);
    }
    (depth != usize::MAX && capacity > 0.0).then_some((capacity, depth as f64))
}

/// From a thousand NPUs the trees move four chunks a message instead of two where a chunk's
/// time is under this many latencies: there the latency of a message outweighs the longer
/// start and end of fewer, larger trees (torus:32x32's figures: docs/BENCHMARKS.md, "Where the
/// trees' timelines stop, measured").
const FOURS_BELOW: f64 = 4.0;

/// Below a thousand NPUs the trees also move three chunks a message on the second chunking
/// (two chunks per NPU where the first has one: 2p/3 trees, between the first chunking's p/2
/// in pairs and p alone) where a chunk of the first chunking takes under this many latencies:
/// it won on torus:16x16 less NPU 9 at 64 MiB and lost on torus:8x8x8 at 256 MiB, a chunk
/// 10.5 latencies (docs/BENCHMARKS.md, "Where the trees' timelines stop, measured").
const SECOND_THREES_BELOW: f64 = 8.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// The trees' messages: the grouping and three below a thousand NPUs, pairs and threes up to
    /// `GROUPED_ONLY_NPUS` (fours lost every case on torus:32x32 at 256 MiB), threes and fours
    /// there where a chunk is under `FOURS_BELOW` latencies, the grouping alone beyond; where
    /// chunks are too large to group, one a message from a thousand NPUs (below, the trees run
    /// at one a message on every chunking anyway).
    #[test]
    fn tree_groups_follow_the_npu_count() {
        for ratio in [1.3, 5.2] {
            assert_eq!(tree_groups(256, &[2, 4], ratio), vec![2, 3, 4]);
            assert_eq!(tree_groups(512, &[2], ratio), vec![2, 3]);
            assert_eq!(tree_groups(4096, &[4], ratio), vec![4]);
            assert!(tree_groups(64, &[], ratio).is_empty());
            assert_eq!(tree_groups(1024, &[], ratio), vec![1]);
            assert_eq!(tree_groups(4096, &[], ratio), vec![1]);
        }
        // From a thousand NPUs: pairs where a chunk is several latencies, fours where it is few.
        assert_eq!(tree_groups(1024, &[2, 4], 5.2), vec![2, 3]);
        assert_eq!(tree_groups(2047, &[2, 4], 4.0), vec![2, 3]);
        assert_eq!(tree_groups(1024, &[2, 4], 1.3), vec![3, 4]);
        assert_eq!(tree_groups(2047, &[2, 4], 3.9), vec![3, 4]);
    }

    /// The unit count the latency and the fill pick (`trees_units_for`): on torus:8x8 less three
    /// links at 64 MiB, √(3 · 1342 · 250 / 126) ≈ 89 units, and the nearest the chunkings give
    /// is four chunks per NPU in threes (86); at 256 MiB about 179, eight per NPU in threes
    /// (171); on a ring of 64, whose 128 links carry a unit's 126 moves at about one each (the
    /// torus two), √(3 · 1342 · 128 / 126) ≈ 64, one chunk per NPU.
    #[test]
    fn the_trees_unit_count_balances_latency_and_fill() {
        use crate::collective::{CollectiveKind, CollectiveSpec};
        use crate::topology::{Failures, parse_spec};
        let three = Failures { links: vec![[0, 1], [9, 10], [20, 21]], ..Failures::default() };
        let t = parse_spec("torus:8x8").unwrap().with_failures(&three).unwrap();
        let at = |size: u64| -> Vec<Collective> {
            [1u32, 2, 4, 8]
                .iter()
                .map(|&k| {
                    Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, size).with_chunks_per_npu(k), &t)
                        .unwrap()
                })
                .collect()
        };
        let v64 = at(64 << 20);
        assert_eq!(trees_units_for(&t, &v64.iter().collect::<Vec<_>>()), Some((2, 3)));
        let v256 = at(256 << 20);
        assert_eq!(trees_units_for(&t, &v256.iter().collect::<Vec<_>>()), Some((3, 3)));
        let ring = parse_spec("ring:64").unwrap();
        let v: Vec<Collective> = [1u32, 2, 4, 8]
            .iter()
            .map(|&k| {
                Collective::build(
                    &CollectiveSpec::new(CollectiveKind::AllReduce, 64 << 20).with_chunks_per_npu(k),
                    &ring,
                )
                .unwrap()
            })
            .collect();
        assert_eq!(trees_units_for(&ring, &v.iter().collect::<Vec<_>>()), Some((0, 1)));
    }

    /// The unit count by the busiest link's whole load (`trees_units_by_load`): on torus:4x4x8
    /// less link 0-1 (128 NPUs' 254 moves a unit over 766 links, a ≈ 0.3316; diameter 8) at
    /// 128 MiB, six chunks per NPU in eights: 96 units, ⌈31.83⌉ = 32 messages on the busiest
    /// link, predicted (32 + 1) · 14.48 µs; the 128 units of the other picks fill 43 of 42.4.
    #[test]
    fn the_trees_unit_count_by_load_fills_the_last_timestep() {
        use crate::collective::{CollectiveKind, CollectiveSpec};
        use crate::topology::{Failures, parse_spec};
        let at = |t: &Topology, size: u64, ks: &[u32]| -> Vec<Collective> {
            ks.iter()
                .map(|&k| {
                    Collective::build(&CollectiveSpec::new(CollectiveKind::AllReduce, size).with_chunks_per_npu(k), t)
                        .unwrap()
                })
                .collect()
        };
        let less = Failures { links: vec![[0, 1]], ..Failures::default() };
        let t = parse_spec("torus:4x4x8").unwrap().with_failures(&less).unwrap();
        assert_eq!(load_shape(&t, &at(&t, 1 << 20, &[1])[0]), Some((766.0, 8.0)));
        let v = at(&t, 128 << 20, &[1, 2, 4, 8, 6]);
        assert_eq!(trees_units_by_load(&t, &v.iter().collect::<Vec<_>>()), Some((4, 8)));
        // Without the chunking that gives 96, the nearest whole load: 1024 chunks in sevens,
        // 147 units on ⌈48.7⌉ = 49.
        assert_eq!(trees_units_by_load(&t, &v[..4].iter().collect::<Vec<_>>()), Some((3, 7)));
        // A link at half speed carries half a message a timestep: on mesh:2x2 with the first
        // axis at 50 GB/s, four directed links of each speed.
        let slow = parse_spec("mesh:2x2@bw=50,100").unwrap();
        assert_eq!(load_shape(&slow, &at(&slow, 1 << 20, &[1])[0]), Some((6.0, 2.0)));
    }
}
