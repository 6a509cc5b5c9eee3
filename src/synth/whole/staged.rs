//! An all-reduce in pipelined stages: the chunks split into stages, each stage reduced and
//! forwarded by its own pair of matcher plans (with its own unequal shares), and every stage's
//! phases in one timeline (`overlap::overlap_keyed`), stage s's forward phase beside stage
//! s + 1's reduce phase.
//!
//! Why: with unequal shares each phase on its own is held up by the NPUs that move least (a
//! mesh's corners, an NPU that lost a link): in the reduce phase their sends, in the forward
//! phase their receives. One all-reduce's two phases overlap only at the seam (`overlap`);
//! in stages, while one stage's forward phase keeps the weak NPUs' incoming links busy, the
//! next stage's reduce phase uses their outgoing ones. mesh:4x4 with links of two speeds at
//! 256 MiB: 1.28× its two-pass bound in one stage, 1.22× in four (docs/BENCHMARKS.md).

use crate::collective::{Collective, CollectiveKind};
use crate::schedule::{ChunkList, Schedule, Transfers};
use crate::synth::inversion::{prune_dead_ends, reverse};
use crate::synth::matcher as matching;
use crate::synth::phase::Move;
use crate::synth::{PlanOptions, PlanStats, SynthError, overlap, shares};
use crate::ten::Ten;
use crate::topology::Topology;

/// Stages the engine tries beside the one-stage matcher.
pub const STAGES: [u32; 2] = [2, 4];

/// Whether `staged` serves `c` in `stages` stages (2 to `MAX_STAGES`): an all-reduce of every
/// live NPU (NPUs outside the group would relay, which the overlap does not schedule), of at
/// least a chunk per stage, within the overlap's tables, where at least one member in
/// `WEAK_SHARE` moves data slower than the fastest (at equal rates each phase alone is
/// balanced: nothing is left for the stages to overlap).
pub fn applies(topo: &Topology, c: &Collective, stages: u32) -> bool {
    if c.spec.kind != CollectiveKind::AllReduce
        || !(2..=MAX_STAGES).contains(&stages)
        || c.num_chunks < stages as usize
        || c.group.len() != topo.live_npus().len()
        || topo.npus().checked_mul(c.num_chunks).is_none_or(|s| s > overlap::MAX_SLOTS)
    {
        return false;
    }
    let w: Vec<f64> = c.group.iter().map(|&v| shares::capacity(topo, v)).collect();
    let fastest = w.iter().copied().fold(0.0, f64::max);
    let weak = w.iter().filter(|&&x| x < fastest * (1.0 - 1e-9)).count();
    weak > 0 && weak * WEAK_SHARE >= w.len()
}

/// One member in this many (or more) must be weak for the stages to run. A mesh's edges are
/// (mesh:4x4 12 of 16, mesh:16x16 60 of 256: 1.66 → 1.57× the two-pass bound); a torus's
/// few NPUs next to failed links are not (torus:16x16 after three failed links, 6 of 256: the
/// stages gained nothing there and cost 70% more synthesis time).
const WEAK_SHARE: usize = 8;

/// The most stages `staged` plans (the engine tries `STAGES`).
pub const MAX_STAGES: u32 = 16;

/// The all-reduce `c` in `stages` stages of consecutive chunk ids (stage s holds chunks
/// ⌊s·C/S⌋ to ⌊(s+1)·C/S⌋), planned by the matcher with rarest-first picks and each stage's own
/// balanced shares; `None` when the stages in one timeline are no shorter than one after
/// another (or the overlap cannot schedule them).
pub fn staged(
    topo: &Topology,
    c: &Collective,
    stages: u32,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<Option<(Schedule, PlanStats)>, SynthError> {
    if !applies(topo, c, stages) {
        return Err(crate::synth::GreedyError::Unsupported("stages: an all-reduce on NPUs of unequal rates").into());
    }
    let (n_chunks, stages) = (c.num_chunks, stages as usize);
    let live = topo.live_npus().len();
    let mut members: Vec<u32> = c.group.iter().map(|&v| v as u32).collect();
    members.sort_unstable();
    let w: Vec<f64> = c.group.iter().map(|&v| shares::capacity(topo, v)).collect();
    let reduce_ten = Ten::build(&topo.transposed(), c.chunk_size_bytes, opts.switch_model, opts.discretization_ns)?;
    let forward_ten = Ten::build(topo, c.chunk_size_bytes, opts.switch_model, opts.discretization_ns)?;
    let mut roots = vec![0u32; n_chunks];
    let mut per_rank = vec![0u32; c.group.len()];
    let mut reduce_all = Transfers::new();
    let mut forward_all: Vec<Move> = Vec::new();
    let mut stats = PlanStats::default();
    // Urgency: stage s's reduce phase from `base`, its forward phase after it, and stage s + 1
    // from where stage s's forward phase begins (beside it).
    let mut base = 0u32;
    for s in 0..stages {
        let (lo, hi) = (s * n_chunks / stages, (s + 1) * n_chunks / stages);
        let cs = (hi - lo) as u32;
        let mut next = lo;
        for (r, &k) in shares::balanced(&w, cs as usize).iter().enumerate() {
            per_rank[r] += k;
            roots[next..next + k as usize].fill(c.group[r] as u32);
            next += k as usize;
        }
        // Each stage on chunk ids 0..cs of its own (the matcher's tables that small).
        let mut pre: Vec<[u32; 2]> = (lo..hi).map(|x| [roots[x], (x - lo) as u32]).collect();
        pre.sort_unstable();
        let all: Vec<[u32; 2]> = members.iter().flat_map(|&v| (0..cs).map(move |x| [v, x])).collect();
        let problem = |ten| crate::synth::phase::Problem {
            ten,
            num_chunks: cs as usize,
            pre: &pre,
            post: &all,
            live_npus: live,
            rarest_first: true,
            capacity: 1,
        };
        let (rp, fp) = (problem(&reduce_ten), problem(&forward_ten));
        let seed = opts.seed.wrapping_add((s as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (r, f) = rayon::join(
            || matching::plan(&rp, seed, cancelled),
            || matching::plan(&fp, seed.wrapping_add(0x9E37_79B9), cancelled),
        );
        let (r, f) = (r?, f?);
        let moves = prune_dead_ends(&reduce_ten, cs as usize, r.moves, &all);
        let reduced = reverse(&reduce_ten, cs as usize, &moves, r.timesteps, &all);
        for i in 0..reduced.len() {
            let mut t = reduced.owned(i);
            t.step += base;
            t.chunks = match t.chunks {
                ChunkList::One(x) => ChunkList::One(x + lo as u32),
                // (`reverse` moves one chunk per transfer.)
                ChunkList::Many(_) => return Ok(None),
            };
            reduce_all.push(t);
        }
        // (Each phase is at most `limits::MAX_GREEDY_TIMESTEPS` long, and there are few stages.)
        let forward_base = base + r.timesteps;
        let moves = prune_dead_ends(&forward_ten, cs as usize, f.moves, &all);
        for m in moves {
            forward_all.push(Move { step: forward_base + m.step, chunk: m.chunk + lo as u32, ..m });
        }
        stats.phase_timesteps.extend([r.timesteps, f.timesteps]);
        stats.replacements += r.replacements + f.replacements;
        base = forward_base;
    }
    let sequential: u32 = stats.phase_timesteps.iter().sum();
    let Some((transfers, steps)) =
        overlap::overlap_keyed(&forward_ten, &reduce_all, &forward_all, &roots, n_chunks, 0, sequential, cancelled)
    else {
        if cancelled() {
            return Err(SynthError::Cancelled);
        }
        return Ok(None);
    };
    stats.discretization_ns = forward_ten.discretization_ns;
    stats.ten_timesteps = steps;
    stats.overlapped = true;
    stats.stages = Some(stages as u32);
    stats.shares = Some(shares::ShareStats::of(&per_rank));
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = Some(opts.seed);
    s.transfers = transfers;
    Ok(Some((s, stats)))
}

/// The greedy's all-reduce in `stages` pipelined stages (`staged`): an error where it does not
/// apply or its timeline is no shorter than its stages in sequence.
pub fn greedy_staged(
    topo: &Topology,
    c: &Collective,
    stages: u32,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    staged(topo, c, stages, opts, cancelled)?.ok_or_else(|| crate::synth::GreedyError::StagesNotShorter.into())
}
