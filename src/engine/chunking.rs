//! Granularity: which chunks-per-NPU values the greedy tries when a request leaves
//! `chunks_per_npu` open (`Chunking::Auto`), chosen from the links' α and β, the size, the
//! collective and the caller's limits. The engine runs them all and keeps the fastest by
//! simulated time, so this list only prunes work: a k whose chunks would be mostly latency,
//! or whose synthesis would be too large to be worth it, is not tried.

use super::request::{Limits, check_chunks, check_synthesis_pairs};
use crate::collective::{CollectiveKind, CollectiveSpec, chunk_count};
use crate::synth::producers::offers::beta_over_alpha;
use crate::topology::Topology;

/// Chunks per NPU tried for collectives with one block per NPU (all-gather, reduce-scatter,
/// all-reduce, scatter, gather, all-to-all).
const PER_NPU: [u32; 4] = [1, 2, 4, 8];
/// Chunks tried for the rooted collectives with one buffer (broadcast, reduce): a pipeline
/// along the tree wants more pieces (torus:4x4's broadcast at 256 MiB: 1.265× its bound in 64
/// chunks, 1.113× in 256 down packed trees).
const ONE_BUFFER: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
/// Greedy work above which a larger k is not tried: chunks × NPUs (the greedy's matching is
/// about linear in both).
pub const WORK_CAP: usize = 1 << 19;

/// The k values to try, smallest first; always at least `[1]`. A k > 1 is kept when a chunk's
/// transfer time on the fastest link is at least half the smallest link latency (below that
/// the extra steps cost more α than the finer pipeline saves), when its chunks × NPUs is
/// within `WORK_CAP`, and when it passes the request's chunk limits.
pub fn candidates(topology: &Topology, spec: &CollectiveSpec, limits: &Limits) -> Vec<u32> {
    let p = spec.group.as_ref().map_or_else(|| topology.live_npus().len(), Vec::len).max(1);
    let ks: &[u32] = match spec.kind {
        CollectiveKind::Broadcast | CollectiveKind::Reduce => &ONE_BUFFER,
        CollectiveKind::Custom => &[1],
        _ => &PER_NPU,
    };
    let mut out = vec![1];
    for &k in &ks[1..] {
        let Some(n) = chunk_count(spec.kind, p, k as usize) else { break };
        let per_chunk = match spec.kind {
            CollectiveKind::AllToAll => spec.size_bytes as f64 / (p * k as usize) as f64,
            _ => spec.size_bytes as f64 / n as f64,
        };
        let worth = beta_over_alpha(topology, per_chunk) >= 0.5;
        let mut at_k = spec.clone();
        at_k.chunks_per_npu = Some(k);
        let fits = n.saturating_mul(topology.npus()) <= WORK_CAP
            && check_chunks(&at_k, topology, limits).is_ok()
            && check_synthesis_pairs(&at_k, topology, "greedy").is_ok();
        if !(worth && fits) {
            break;
        }
        out.push(k);
    }
    out
}

/// Chunks an all-reduce or all-gather at one chunk per NPU also moves together per message
/// (`synth::greedy_grouped`), smallest first, where a chunk's latency is a noticeable share of
/// its time (its transfer time on the fastest link between one and `GROUP_BELOW` times the
/// smallest latency, so α is over 3% of each step; below one the latency-mode planners serve),
/// on 4096 NPUs or fewer (the matcher's scale): for an all-reduce 2 and 4 where at least
/// `MIN_GROUPED_CHUNKS` groups remain, the last short when the chunks do not divide (on
/// `GROUPED_ONLY_NPUS` or more, the largest of those),
/// for an all-gather up to 8 chunks a message (below).
/// Empty for other collectives.
pub fn grouping(topology: &Topology, c: &crate::collective::Collective) -> Vec<u32> {
    let kind = c.spec.kind;
    if !matches!(kind, CollectiveKind::AllReduce | CollectiveKind::AllGather)
        || c.spec.chunks() != 1
        || topology.npus() > 4096
    {
        return Vec::new();
    }
    // Below one latency a chunk is all latency: the latency-mode planners batch those.
    let ratio = beta_over_alpha(topology, c.chunk_size_bytes);
    if !(1.0..GROUP_BELOW).contains(&ratio) {
        return Vec::new();
    }
    if kind == CollectiveKind::AllGather {
        // Measured (docs/BENCHMARKS.md, issue 26): after a failed link the best is 2 on
        // torus:16x16, 3 on 8x8x8 (4 next), 6 on 32x32 (5 and 8 slower) and 8 on 64x64 (more
        // chunks a message pay α less often but leave the links part-empty while the first
        // chunks spread). On thousands of NPUs one run costs seconds: the largest alone.
        return if topology.npus() >= super::GROUPED_ONLY_NPUS { vec![8] } else { vec![2, 3, 4, 6] };
    }
    let groups: Vec<u32> =
        [2u32, 4].into_iter().filter(|&g| c.num_chunks.div_ceil(g as usize) >= MIN_GROUPED_CHUNKS).collect();
    // Measured (docs/BENCHMARKS.md, issue 26): on torus:64x64 at 1 GiB four chunks a message
    // win after one failed link (6.27 against 6.55 ms) and after three (6.79 against 7.05 ms),
    // each run 16-23 s: on thousands of NPUs the largest alone.
    match groups.last() {
        Some(&g) if topology.npus() >= super::GROUPED_ONLY_NPUS => vec![g],
        _ => groups,
    }
}

/// `grouping` groups chunks whose transfer time is under this many smallest link latencies.
pub const GROUP_BELOW: f64 = 32.0;
/// Chunks an all-reduce keeps at least when they are grouped.
pub const MIN_GROUPED_CHUNKS: usize = 16;
