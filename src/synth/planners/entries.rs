//! The entry points of the synthesizers that plan on the TEN through `movement_core`, one per
//! planner and manner: the greedy matcher (unequal shares, rarest-first, overlapped phases), the
//! matcher as it was before those (`greedy_plain`), rarest-first where it does not pick so
//! (`greedy_rarest`), messages of several chunks
//! (`greedy_grouped`), spread shares (`greedy_spread`), the
//! latency mode (`batched`) and translation on tori (`translated`).

use crate::collective::Collective;
use crate::schedule::{Schedule, Transfer};
use crate::synth::matcher as matching;
use crate::synth::phase;
use crate::synth::phase::{GreedyError, Problem};
use crate::synth::{Joint, Planner, matcher};
use crate::synth::{
    Manner, PlanOptions, PlanStats, SynthError, flood, movement_core, reduction_roots, roots_for, shares, translate,
};
use crate::topology::Topology;

/// Synthesizes `c` on `topo` with the greedy matcher.
pub fn greedy(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    let (roots, weighted) = roots_for(topo, c);
    with_roots(topo, c, &roots, weighted.as_deref(), opts, cancelled)
}

/// The matcher with the rarest-first pick on a collective that does not combine (all-gather,
/// broadcast), which `greedy` plans with the random pick: the engine runs it beside `greedy` on
/// up to a few hundred NPUs and keeps the faster (rail:4x8's all-gather at 256 MiB 1.057 →
/// 1.045× its bound, dragonfly:4:5's 1.111 → 1.030×: the reduce-scatter's, which picks this
/// way). An error on a combining collective, whose matcher picks rarest-first already.
pub fn greedy_rarest(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    if c.combining {
        return Err(GreedyError::Unsupported("a second pick: a collective that does not combine").into());
    }
    let (roots, _) = roots_for(topo, c);
    matched(topo, c, c, &roots, Manner { rarest_first: true, ..Manner::picking(c) }, opts, cancelled)
}

/// The matcher's schedule of `c` with `roots`; with unequal shares (`per_rank`, reported in
/// `stats.shares`) the phases may overlap (`overlap`).
fn with_roots(
    topo: &Topology,
    c: &Collective,
    roots: &[u32],
    per_rank: Option<&[u32]>,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    let unsynced: &dyn Fn() -> bool = cancelled;
    let manner = Manner { overlap: per_rank.map(|_| unsynced), ..Manner::picking(c) };
    let (s, mut stats) = matched(topo, c, c, roots, manner, opts, cancelled)?;
    stats.shares = per_rank.map(shares::ShareStats::of);
    Ok((s, stats))
}

/// The greedy's all-reduce with `shares::spread` shares (the weak NPUs' phase a little longer,
/// the chunks that frees over the full-rate NPUs): where `shares::concentrated` holds, beside
/// `greedy`; an error where it does not.
pub fn greedy_spread(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    if !shares::concentrated(topo, c) {
        return Err(GreedyError::Unsupported("spread shares: an all-reduce with concentrated roots").into());
    }
    let w: Vec<f64> = c.group.iter().map(|&v| shares::capacity(topo, v)).collect();
    let per_rank = shares::spread(&w, c.num_chunks, shares::SPREAD_SLACK);
    with_roots(topo, c, &shares::roots(c, &per_rank), Some(&per_rank), opts, cancelled)
}

/// The matcher's schedule of `out` (seed recorded), planned as `plan` (the same collective, or
/// the same chunks at a coarser size) with `roots` and `manner`.
fn matched(
    topo: &Topology,
    plan: &Collective,
    out: &Collective,
    roots: &[u32],
    manner: Manner,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    let combining = vec![plan.combining; plan.num_chunks];
    let mut planner = |p: &Problem, seed, _phase, _left| matching::plan(p, seed, cancelled);
    let side_by_side = |p: &Problem, seed| matching::plan(p, seed, cancelled);
    let manner = Manner { side_by_side: Some(&side_by_side), ..manner };
    let (transfers, stats) = movement_core(topo, plan, &combining, roots, manner, opts, &mut planner)?;
    let mut s = Schedule::new(topo.clone(), out, "greedy");
    s.seed = Some(opts.seed);
    s.transfers = transfers;
    Ok((s, stats))
}

/// The matcher as it was before unequal shares: equal shares (`reduction_roots`), a random
/// pick among the requested chunks, the phases in sequence. The engine runs it beside
/// `greedy` on combining collectives of up to a few hundred NPUs and keeps the faster, so no
/// case the old matcher served well gets slower.
pub fn greedy_plain(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    let roots = if c.combining { reduction_roots(c) } else { Vec::new() };
    matched(topo, c, c, &roots, Manner::PLAIN, opts, cancelled)
}

/// The greedy's all-reduce with `group` consecutive chunks moved as one: planned on the same
/// all-reduce of `c.num_chunks / group` chunks of `group` times the size (its shares and its
/// overlap as for any), then each move carries its `group` chunks as one message. Fewer, larger
/// messages (the last group short when the chunks do not divide): at scale, where a chunk per NPU is mostly latency (a 512-NPU torus at 256 MiB
/// moves half-MiB chunks, 10% of whose time is a link's α), the steps halve or quarter, and an
/// NPU may be the root of no chunk at all (all-reduce has no owners but the roots it picks).
pub fn greedy_grouped(
    topo: &Topology,
    c: &Collective,
    group: usize,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    if group <= 1 {
        return greedy(topo, c, opts, cancelled);
    }
    if c.spec.kind == crate::collective::CollectiveKind::AllGather {
        return all_gather_in_messages(topo, c, group, opts, cancelled);
    }
    if c.spec.kind != crate::collective::CollectiveKind::AllReduce {
        return Err(GreedyError::Unsupported("grouped chunks: an all-reduce or an all-gather").into());
    }
    // The last group may be short (4095 chunks after an NPU failure at 4096 NPUs, in groups of
    // four: 1023 of four and one of three); it is planned at the full group's size.
    let chunks = c.num_chunks.div_ceil(group);
    let mut members: Vec<u32> = c.group.iter().map(|&v| v as u32).collect();
    members.sort_unstable();
    let all = crate::collective::Pairs::every(members, chunks as u32);
    let coarse = Collective {
        spec: c.spec.clone(),
        group: c.group.clone(),
        num_chunks: chunks,
        chunk_size_bytes: c.chunk_size_bytes * group as f64,
        combining: true,
        precondition: all.clone(),
        postcondition: all,
    };
    let (planned, mut stats) = greedy(topo, &coarse, opts, cancelled)?;
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = planned.seed;
    s.transfers.reserve(planned.transfers.len());
    let (g, total) = (group as u32, c.num_chunks as u32);
    for t in planned.transfers.iter() {
        let chunks: Vec<u32> = t.chunks.iter().flat_map(|&x| x * g..(x * g + g).min(total)).collect();
        let mut moved = Transfer { op: t.op, ..Transfer::copy(t.step, t.src as usize, t.dst as usize, chunks) };
        moved.path = t.path.cloned();
        s.transfers.push(moved);
    }
    stats.chunks_per_message = Some(g);
    Ok((s, stats))
}

/// The greedy's all-gather with up to `group` chunks per message: every chunk has its own
/// source, so they cannot be planned as larger chunks (as the all-reduce's are); instead the
/// TEN's timestep is a message of `group` chunks on the fastest link and each edge starts up to
/// `group` chunks a timestep (`phase::Problem::capacity`), merged into one message. Where a
/// chunk's latency is a noticeable share of its time (a 1024-NPU torus at 256 MiB moves
/// quarter-MiB chunks, a fifth of whose time is α), the NPU that receives the most pays α
/// once per message, not once per chunk.
fn all_gather_in_messages(
    topo: &Topology,
    c: &Collective,
    group: usize,
    opts: &PlanOptions,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, PlanStats), SynthError> {
    let coarse = Collective { chunk_size_bytes: c.chunk_size_bytes * group as f64, ..c.clone() };
    // A shard a message at a finer chunking (`offers::shards_a_message`) picks the rarest
    // chunk first, as the reduce-scatter's matcher does: rail:4x8 at 256 MiB 1.021 → 1.012× its
    // bound. Groups at one chunk per NPU pick as the matcher does.
    let rarest_first = c.spec.chunks() > 1;
    let manner = Manner { capacity: group as u32, rarest_first, ..Manner::picking(c) };
    let opts = PlanOptions { discretization_ns: None, ..opts.clone() };
    let (mut s, mut stats) = matched(topo, &coarse, c, &[], manner, &opts, cancelled)?;
    s.transfers = flood::batch(&s.transfers);
    stats.chunks_per_message = Some(group as u32);
    Ok((s, stats))
}

/// Synthesizes `c` on `topo` in the latency mode: the batched planner (`flood`) in every phase
/// on a TEN whose timestep is the slowest edge's (one round per edge), then one message per
/// step and pair of NPUs. Combining collectives are reduced along shortest-path trees, as
/// the matcher's phases are, by inversion.
pub fn batched(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Schedule, PlanStats), SynthError> {
    let round = flood::round_ten(topo, c.chunk_size_bytes, opts.switch_model)?;
    let opts = PlanOptions { discretization_ns: Some(round.discretization_ns), ..opts.clone() };
    let combining = vec![c.combining; c.num_chunks];
    let roots = if c.combining { reduction_roots(c) } else { Vec::new() };
    let mut planner = |p: &Problem, seed, _phase, _left| flood::plan(p, seed, cancelled);
    let (transfers, stats) = movement_core(topo, c, &combining, &roots, Manner::PLAIN, &opts, &mut planner)?;
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = Some(opts.seed);
    s.transfers = flood::batch(&transfers);
    Ok((s, stats))
}

/// Synthesizes `c` on a torus by translating one broadcast `pattern` (from
/// `translate::search` or `translate::rounds::search`) to every source, in every phase:
/// reduce-scatter is the pattern reversed on the transposed torus, all-reduce that and then the
/// pattern forward. A pattern in rounds sends each link's chunks of a round as one message.
pub fn translated(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    torus: &translate::Torus,
    pattern: &translate::Pattern,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Schedule, PlanStats), SynthError> {
    let combining = vec![c.combining; c.num_chunks];
    let roots = if c.combining { reduction_roots(c) } else { Vec::new() };
    let mut planner = |p: &Problem, _seed, _phase, _left| translate::plan(p, torus, pattern, cancelled);
    let (transfers, stats) = movement_core(topo, c, &combining, &roots, Manner::PLAIN, opts, &mut planner)?;
    let mut s = Schedule::new(topo.clone(), c, "greedy");
    s.seed = Some(opts.seed);
    s.transfers = match pattern.rounds {
        true => translate::rounds::batch(torus, &transfers).unwrap_or_else(|| flood::batch(&transfers)),
        false => transfers,
    };
    Ok((s, stats))
}

/// Several collectives at once on one topology (TACOS VIII-G), planned jointly: every
/// tenant's reductions share one reduce phase, and every forward movement one forward phase,
/// so tenants share links without congestion within a phase. Chunk ids are the tenants'
/// chunks one after another. Tenants must have equal chunk sizes (one TEN); a non-combining
/// tenant whose chunks have several holders cannot share a schedule with combining tenants
/// (the format has one combining flag, under which several holders would be summed).
pub fn greedy_multi(
    topo: &Topology,
    tenants: &[Collective],
    opts: &PlanOptions,
    cancelled: &dyn Fn() -> bool,
) -> Result<Joint, SynthError> {
    let mut planner = |p: &phase::Problem, seed, _phase, _left| matcher::plan(p, seed, cancelled);
    multi_core(topo, tenants, opts, &mut planner)
}

pub(in crate::synth) fn multi_core(
    topo: &Topology,
    tenants: &[Collective],
    opts: &PlanOptions,
    planner: &mut Planner,
) -> Result<Joint, SynthError> {
    use crate::error::InputError;
    let first = tenants.first().ok_or_else(|| InputError::new("tenants", "expected at least one collective"))?;
    if tenants.len() > 64 {
        return Err(InputError::new("tenants", "at most 64 collectives at once").into());
    }
    let size = first.chunk_size_bytes;
    let any_combining = tenants.iter().any(|t| t.combining);
    let mut ranges = Vec::new();
    let (mut pre, mut post, mut combining, mut roots) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, t) in tenants.iter().enumerate() {
        if (t.chunk_size_bytes - size).abs() > 1e-9 * size {
            return Err(SynthError::Input(InputError::new(
                format!("tenants[{i}]"),
                format!(
                    "chunk size {} B differs from the first tenant's {size} B; expected equal chunk sizes (adjust size_bytes or chunks_per_npu)",
                    t.chunk_size_bytes
                ),
            )));
        }
        if any_combining && !t.combining {
            let h = t.holders();
            if (0..t.num_chunks).any(|c| h.of(c).len() > 1) {
                return Err(InputError::new(
                    format!("tenants[{i}]"),
                    "a non-combining tenant with several holders of one chunk cannot be mixed with combining tenants",
                )
                .into());
            }
        }
        let base = ranges.last().map(|r: &std::ops::Range<usize>| r.end).unwrap_or(0);
        ranges.push(base..base + t.num_chunks);
        let shift = |p: [u32; 2]| [p[0], p[1] + base as u32];
        pre.extend(t.precondition.iter().map(shift));
        post.extend(t.postcondition.iter().map(shift));
        combining.extend(std::iter::repeat_n(t.combining, t.num_chunks));
        if t.combining {
            roots.extend(reduction_roots(t));
        } else {
            roots.extend(std::iter::repeat_n(0, t.num_chunks));
        }
    }
    let num_chunks = ranges.last().map(|r| r.end).unwrap_or(0);
    let total = size * num_chunks as f64;
    if total.fract().abs() > 1e-6 {
        return Err(InputError::new("tenants", "the tenants' chunks do not add up to a whole number of bytes").into());
    }
    let mut spec =
        crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::Custom, total.round() as u64);
    spec.num_chunks = Some(num_chunks);
    spec.precondition = Some(pre);
    spec.postcondition = Some(post);
    spec.combining = Some(any_combining);
    let merged = Collective::build(&spec, topo).map_err(|e| e.within("tenants"))?;
    let (transfers, stats) = movement_core(topo, &merged, &combining, &roots, Manner::PLAIN, opts, planner)?;
    let mut s = Schedule::new(topo.clone(), &merged, "greedy");
    s.seed = Some(opts.seed);
    s.transfers = transfers;
    Ok(Joint { schedule: s, ranges, stats })
}
