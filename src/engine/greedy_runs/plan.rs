//! Which runs the greedy makes for one request (`plan_runs`): planners (`Mode`) at which
//! chunkings, seeds and TEN timesteps, and the NPU counts that bound each planner.

use super::super::error::Error;
use super::super::{SynthJob, chunking};
use super::mode::{Mode, Run};
use crate::collective::Collective;

/// The greedy's runs for one request: what each run plans, and what they share.
pub(super) struct RunPlan {
    /// Every run: the matcher per (chunking, seed, TEN timestep), translation per chunking on
    /// a torus, the latency-mode planners where their rounds can pay.
    pub(super) runs: Vec<Run>,
    /// TEN timesteps to try per variant (`Mode::Matching(f)` is the `f`th).
    pub(super) factors: Vec<Vec<Option<f64>>>,
    /// Each variant's translation pattern, where translation serves.
    pub(super) patterns: Vec<Option<TranslationPattern>>,
}

/// Lays out the greedy's runs over `variants` (the same collective at each chunks-per-NPU
/// value to try; the matcher runs on the first `matcher_variants`).
pub(super) fn plan_runs(
    req: &SynthJob<'_>,
    variants: &[&Collective],
    matcher_variants: usize,
    tenants: Option<&[Collective]>,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<RunPlan, Error> {
    let c = variants[0];
    let nothing_needed = |c: &Collective| c.needed_iter(&c.holders()).next().is_none();
    let trivial = match tenants {
        None => nothing_needed(c),
        Some(t) => t.iter().all(nothing_needed),
    };
    let mut factors = timesteps(req, variants, trivial)?;
    let mut runs: Vec<Run> = (0..matcher_variants.clamp(1, variants.len()))
        .flat_map(|variant| {
            let fs = factors[variant].len();
            (0..req.seeds.max(1) as u64).flat_map(move |i| {
                (0..fs).map(move |f| Run { variant, seed: req.seed.wrapping_add(i), mode: Mode::Matching(f) })
            })
        })
        .collect();
    if tenants.is_none() && !trivial {
        beside_the_matcher(req, variants, matcher_variants, &mut factors, &mut runs)?;
    }
    // Translation on tori: one pattern per chunking, searched here (it is cheap). Where it
    // reaches the bound of any schedule moving one chunk per link per step, the matcher at
    // that chunking cannot be faster and does not run.
    let patterns = translation_patterns(req, variants, tenants.is_none() && !trivial, cancelled);
    let cheapest_pattern = translation_runs(req, variants, &patterns, &mut runs);
    // An all-reduce or all-gather whose chunks are mostly latency also moves them in groups
    // (at k = 1), but not where translation serves (an intact uniform torus keeps its runs as
    // they were). On thousands of NPUs the matcher at one chunk per message is both the slowest
    // run and, its messages a fifth latency, not the fastest schedule (torus:64x64 at 1 GiB
    // after three link failures: all-reduce 7.6 ms, in groups of four 6.8 ms; all-gather after
    // one: 4.26 ms, eight chunks a message 3.70 ms): the groups run instead.
    let grouping: &[u32] = if patterns.first().is_some_and(Option::is_some) { &[] } else { &req.grouping };
    // An all-reduce over links alike both ways: per-chunk trees (`synth::trees`) at every
    // chunking below a thousand NPUs, and in messages of `tree_groups` on the first. Not where
    // translation is optimal (an intact uniform torus keeps its runs as they were). Pushed
    // after the groups, below.
    let tree_runs: Vec<(usize, u32)> = if tenants.is_none() && !trivial && !patterns.iter().flatten().any(|p| p.2) {
        tree_runs(req, variants, grouping)
    } else {
        Vec::new()
    };
    if tenants.is_none() && !trivial && !grouping.is_empty() {
        let only = match variants[0].spec.kind {
            crate::collective::CollectiveKind::AllReduce => GROUPED_ONLY_ALL_REDUCE_NPUS,
            _ => GROUPED_ONLY_NPUS,
        };
        if req.topology.npus() >= only {
            runs.retain(|r| !(r.variant == 0 && matches!(r.mode, Mode::Matching(_))));
        }
        // From a thousand NPUs the trees replace the matcher's groups where they serve (below,
        // `tree_groups`): on torus:32x32 at 256 MiB 1.487–1.505 against 1.571–1.729 ms after
        // one or three failed links or less NPU 9, on torus:64x64 at 1 GiB 5.68 against 6.79
        // ms after three failed links and 5.71 against 6.55 less NPU 9 (each run 9–11 s there).
        let trees_instead = req.topology.npus() >= GROUPED_ONLY_ALL_REDUCE_NPUS && !tree_runs.is_empty();
        for &g in grouping.iter().filter(|_| !trees_instead) {
            for i in 0..req.seeds.max(1) as u64 {
                runs.push(Run { variant: 0, seed: req.seed.wrapping_add(i), mode: Mode::Grouped(g) });
            }
        }
    }
    for &(variant, g) in &tree_runs {
        for i in 0..req.seeds.max(1) as u64 {
            runs.push(Run { variant, seed: req.seed.wrapping_add(i), mode: Mode::Trees(g) });
        }
    }
    // Chunks that each go their own way (all-to-all, scatter, gather): the routed planner at
    // every chunking.
    let routed_only =
        tenants.is_none() && !trivial && crate::synth::routed::applies(c) && req.topology.npus() >= ROUTED_ONLY_NPUS;
    if tenants.is_none() && !trivial && crate::synth::routed::applies(c) {
        if routed_only {
            runs.clear();
        }
        for variant in 0..variants.len() {
            runs.push(Run { variant, seed: req.seed, mode: Mode::Routed });
        }
    }
    // The latency-mode planners (batched messages, doubling, the contribution flood) run
    // beside the matcher for one collective, where their rounds can pay.
    if tenants.is_none() && !trivial && !routed_only && latency_mode_pays(req.topology, c) {
        runs.extend(latency_runs(req, variants));
    }
    // Where every run is a translation pattern (the matcher cannot beat an optimal one) and
    // each is priced above the caller's schedule, the greedy cannot win: none is built (a
    // translation all-reduce on torus:64x64 is 4 M transfers). Runs of other planners are not
    // priced, so a greedy that has them runs whole, its statistics what it gives alone.
    if let (Some(price_ns), Some(incumbent_ns)) = (cheapest_pattern, req.incumbent_ns)
        && price_ns > incumbent_ns
        && runs.iter().all(|r| r.mode == Mode::Translation)
    {
        return Err(Error::PricedOut { price_ns, incumbent_ns });
    }
    Ok(RunPlan { runs, factors, patterns })
}

/// The TEN timesteps to try per variant: the given one, or the default and, when link times
/// are not multiples of the fastest, finer ones (a coarse grid misjudges the slower links);
/// none where nothing moves (`trivial`).
fn timesteps(req: &SynthJob<'_>, variants: &[&Collective], trivial: bool) -> Result<Vec<Vec<Option<f64>>>, Error> {
    variants
        .iter()
        .map(|v| match req.discretization_ns {
            _ if trivial => Ok(vec![None]), // nothing moves: no TEN is built
            Some(f) => Ok(vec![Some(f)]),
            None => crate::synth::auto_discretizations(req.topology, v.chunk_size_bytes, req.switch_model)
                .map(|fs| fs.into_iter().map(Some).collect())
                .map_err(|e| Error::from(crate::synth::SynthError::from(e))),
        })
        .collect()
}

/// The planners that run beside the matcher's runs in `runs` (same chunkings, seeds and
/// timesteps) for one collective that moves something: the plain matcher, pipelined stages,
/// spread shares, the rarest-first pick, and the matcher at finer timesteps (added to
/// `factors`), each where it can pay.
fn beside_the_matcher(
    req: &SynthJob<'_>,
    variants: &[&Collective],
    matcher_variants: usize,
    factors: &mut [Vec<Option<f64>>],
    runs: &mut Vec<Run>,
) -> Result<(), Error> {
    let c = variants[0];
    // Combining collectives: the matcher as it was before unequal shares and rarest-first picks
    // runs beside it (same seeds and timesteps), the faster kept, on up to `PLAIN_MAX_NPUS`.
    if c.combining && req.topology.npus() <= PLAIN_MAX_NPUS {
        runs.extend(beside_matcher(runs, Mode::Plain));
    }
    // An all-reduce on NPUs of unequal rates: also in pipelined stages (`synth::staged`), at the
    // matcher's chunkings, seeds and timesteps, on up to `STAGED_MAX_NPUS`.
    if req.topology.npus() <= STAGED_MAX_NPUS {
        let staged: Vec<Run> = runs
            .iter()
            .filter_map(|r| match r.mode {
                Mode::Matching(f) => Some((r, f)),
                _ => None,
            })
            .flat_map(|(r, f)| {
                crate::synth::staged::STAGES
                    .into_iter()
                    .filter(|&n| crate::synth::staged::applies(req.topology, variants[r.variant], n))
                    .map(move |n| Run { mode: Mode::Staged(n, f), ..*r })
            })
            .collect();
        runs.extend(staged);
    }
    // An all-reduce whose balanced shares sit on a few NPUs: also with the shares spread
    // (`synth::shares::spread`), at the matcher's chunkings, seeds and timesteps, below the
    // size where the matcher at one chunk a message gives way to the groups.
    if req.topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS {
        let spread: Vec<Run> = runs
            .iter()
            .filter_map(|r| match r.mode {
                Mode::Matching(f) if crate::synth::shares::concentrated(req.topology, variants[r.variant]) => {
                    Some(Run { mode: Mode::Spread(f), ..*r })
                }
                _ => None,
            })
            .collect();
        runs.extend(spread);
    }
    // Edges of mixed times on a small fabric: the matcher also at finer timesteps
    // (`synth::fine_discretizations`), on up to `FINE_GRID_MAX_NPUS`. Only the matcher: the
    // runs derived from it above keep the usual timesteps. Not where the routed planner serves
    // (all-to-all, scatter, gather: in the size sweep the finer runs never won there).
    if req.discretization_ns.is_none() && req.topology.npus() <= FINE_GRID_MAX_NPUS && !crate::synth::routed::applies(c)
    {
        for variant in 0..matcher_variants.clamp(1, variants.len()) {
            let fine =
                crate::synth::fine_discretizations(req.topology, variants[variant].chunk_size_bytes, req.switch_model)
                    .map_err(|e| Error::from(crate::synth::SynthError::from(e)))?;
            for d in fine {
                if factors[variant].iter().flatten().any(|&f| (f - d).abs() <= 1e-9 * d) {
                    continue;
                }
                factors[variant].push(Some(d));
                let f = factors[variant].len() - 1;
                for i in 0..req.seeds.max(1) as u64 {
                    runs.push(Run { variant, seed: req.seed.wrapping_add(i), mode: Mode::Matching(f) });
                }
            }
        }
    }
    // Collectives that do not combine (all-gather, broadcast), whose matcher picks at random:
    // the rarest-first pick runs beside it (same seeds and timesteps, the finer ones too), the
    // faster kept, on up to `RAREST_MAX_NPUS`. Not where the routed planner serves (all-to-all,
    // scatter, gather).
    if !c.combining && req.topology.npus() <= RAREST_MAX_NPUS && !crate::synth::routed::applies(c) {
        runs.extend(beside_matcher(runs, Mode::Rarest));
    }
    Ok(())
}

/// The (variant, units a message) the per-chunk trees run at: every chunking below a thousand
/// NPUs, and the first in messages of `tree_groups`, where `synth::trees` applies.
fn tree_runs(req: &SynthJob<'_>, variants: &[&Collective], grouping: &[u32]) -> Vec<(usize, u32)> {
    let chunk_over_alpha = chunking::beta_over_alpha(req.topology, variants[0].chunk_size_bytes);
    let grouped = tree_groups(req.topology.npus(), grouping, chunk_over_alpha).into_iter().map(|g| (0usize, g));
    let plain = (0..variants.len()).filter(|_| req.topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS).map(|v| (v, 1));
    // Below a thousand NPUs, where a chunk of the first chunking is a few latencies, the
    // second chunking in threes too (`SECOND_THREES_BELOW`).
    let second = (req.topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS
        && variants.len() > 1
        && !grouping.is_empty()
        && chunk_over_alpha < SECOND_THREES_BELOW)
        .then_some((1usize, 3u32));
    let mut runs: Vec<(usize, u32)> = plain
        .chain(grouped)
        .chain(second)
        .filter(|&(variant, g)| crate::synth::trees::applies(req.topology, variants[variant], g as usize))
        .collect();
    // Below a thousand NPUs, also the unit count the latency and the fill would pick
    // (`trees_units_for`), if no run above has it.
    if req.topology.npus() < GROUPED_ONLY_ALL_REDUCE_NPUS && !runs.is_empty() {
        let best = trees_units_for(req.topology, variants);
        if let Some(pick) = best.filter(|p| !runs.contains(p))
            && crate::synth::trees::applies(req.topology, variants[pick.0], pick.1 as usize)
        {
            runs.push(pick);
        }
    }
    runs
}

/// The latency-mode planners' runs (the contribution flood, batched messages, doubling) for
/// one collective where their rounds can pay.
fn latency_runs(req: &SynthJob<'_>, variants: &[&Collective]) -> Vec<Run> {
    let c = variants[0];
    let mut out = Vec::new();
    // Deterministic on direct links and cheap: the first seed. The contribution flood's
    // bytes do not depend on the chunking: the request's alone.
    // Not in a search for a mirror: the flood reduces in scratch slots, which do not mirror.
    if !req.mirroring
        && crate::synth::flood::contributions_apply(c, req.topology.npus())
        && crate::synth::flood::contributions_pay(req.topology, c)
    {
        out.push(Run { variant: 0, seed: req.seed, mode: Mode::Contributions });
    }
    // The batched planner balances finer chunks better over an NPU's incoming links, and
    // the doubling patterns put every owner's block in every port's group: both run at
    // every chunking tried.
    for (variant, v) in variants.iter().enumerate() {
        out.push(Run { variant, seed: req.seed, mode: Mode::Batched });
        if crate::synth::doubling::applies(v) {
            for shape in crate::synth::doubling::Shape::for_collective(v) {
                out.push(Run { variant, seed: req.seed, mode: Mode::Doubling(shape) });
            }
        }
    }
    out
}

/// A translation run per chunking whose pattern serves, the matcher's family dropped where the
/// pattern is optimal (it cannot be beaten at that chunking); returns the cheapest pattern's
/// price, when the caller has a schedule to price it against: the busiest link's load of its
/// schedule, a lower bound on its time (`translate::link_load_ns`).
fn translation_runs(
    req: &SynthJob<'_>,
    variants: &[&Collective],
    patterns: &[Option<TranslationPattern>],
    runs: &mut Vec<Run>,
) -> Option<f64> {
    let mut cheapest: Option<f64> = None;
    for (variant, pattern) in patterns.iter().enumerate() {
        let Some((torus, pattern, optimal)) = pattern else { continue };
        if *optimal {
            runs.retain(|r| {
                r.variant != variant
                    || !matches!(
                        r.mode,
                        Mode::Matching(_) | Mode::Plain(_) | Mode::Rarest(_) | Mode::Staged(..) | Mode::Spread(_)
                    )
            });
        }
        if req.incumbent_ns.is_some() {
            let link = &req.topology.links()[0];
            let price = crate::synth::translate::link_load_ns(torus, pattern, variants[variant], link);
            cheapest = Some(cheapest.map_or(price, |p: f64| p.min(price)));
        }
        runs.push(Run { variant, seed: pattern.seed, mode: Mode::Translation });
    }
    cheapest
}

/// Each variant's translation pattern (`synth::translate`), where it serves: the torus, the
/// pattern, and whether it is optimal among schedules of one chunk per link per step (every
/// NPU receives k(N−1) chunks per phase over its links; with a reduce cost γ the two phases'
/// transfers differ in length, so a two-phase bound is not claimed then).
pub(super) type TranslationPattern = (crate::synth::translate::Torus, crate::synth::translate::Pattern, bool);

/// One run in `mode` beside each matcher run of `runs` (same variant, seed and timestep).
fn beside_matcher(runs: &[Run], mode: fn(usize) -> Mode) -> Vec<Run> {
    runs.iter()
        .filter_map(|r| match r.mode {
            Mode::Matching(f) => Some(Run { mode: mode(f), ..*r }),
            _ => None,
        })
        .collect()
}

fn translation_patterns(
    req: &SynthJob<'_>,
    variants: &[&Collective],
    eligible: bool,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Vec<Option<TranslationPattern>> {
    use crate::synth::translate;
    let torus = if eligible { translate::Torus::of(req.topology) } else { None };
    variants
        .iter()
        .map(|v| {
            let torus = torus.as_ref().filter(|t| translate::applies(t, v))?;
            let k = v.spec.chunks() as usize;
            let pattern = translate::search(torus, k, req.seed, cancelled).ok()?;
            let phases: u32 = if v.spec.kind == crate::collective::CollectiveKind::AllReduce { 2 } else { 1 };
            let per_npu = (phases as usize * k * (torus.npus() - 1)).div_ceil(torus.directions()) as u32;
            let no_gamma = v.spec.gamma_ns_per_byte.is_none_or(|g| g == 0.0) || phases == 1;
            let optimal = no_gamma && phases * pattern.steps <= per_npu.max(phases * torus.diameter());
            Some((torus.clone(), pattern, optimal))
        })
        .collect()
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
fn trees_units_for(topology: &crate::topology::Topology, variants: &[&Collective]) -> Option<(usize, u32)> {
    let c = variants.first()?;
    let n = c.group.len().max(2) as f64;
    let links = topology.links().len() as f64;
    let buffer = c.chunk_size_bytes * c.num_chunks as f64;
    let b = chunking::beta_over_alpha(topology, buffer);
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

/// NPUs up to which the matcher as it was before unequal shares (`Mode::Plain`) runs beside
/// the matcher on combining collectives: it won only on heterogeneous fabrics of 12–42 NPUs,
/// never above 64, where its run is the slowest of the greedy's (docs/BENCHMARKS.md, "Where
/// the plain matcher wins").
pub const PLAIN_MAX_NPUS: usize = 64;

/// NPUs up to which the matcher with the rarest-first pick (`Mode::Rarest`) runs beside the
/// matcher's random pick on collectives that do not combine.
pub const RAREST_MAX_NPUS: usize = 256;

/// NPUs up to which the matcher also runs at finer timesteps where edge times are mixed
/// (`synth::fine_discretizations`): each run is cheap there (0.1–0.2 s at 64 NPUs).
pub const FINE_GRID_MAX_NPUS: usize = 64;

/// NPUs up to which an all-reduce on NPUs of unequal rates also runs in pipelined stages
/// (`Mode::Staged`).
pub const STAGED_MAX_NPUS: usize = 256;

/// NPUs from which an all-reduce or all-gather that moves chunks in groups
/// (`chunking::grouping`) does not also run the matcher at one chunk per message.
pub const GROUPED_ONLY_NPUS: usize = 2048;

/// `GROUPED_ONLY_NPUS` for an all-reduce: from here the matcher at one chunk per message is
/// the longest run and slower than the grouped runs (docs/BENCHMARKS.md, "The matcher's groups:
/// chunks a message").
pub const GROUPED_ONLY_ALL_REDUCE_NPUS: usize = 1024;

/// NPUs from which an all-to-all, scatter or gather runs the routed planner alone: the
/// matcher's time grows with every chunk's candidate edges (7.3 s of a 512-NPU all-to-all) and
/// its schedules are slower there (torus:8x8x8 at 64 MiB: 1066.5 µs against the routed
/// planner's 765 µs); the batched planner relays every chunk everywhere (torus:8x8x8 at
/// 16 MiB: 80 s and 8 GB beside the routed planner).
pub const ROUTED_ONLY_NPUS: usize = 256;

/// NPUs up to which the greedy always tries its latency mode; beyond, only where one chunk is
/// mostly latency (its transfer time on the fastest link below the smallest link latency),
/// as the batched planner relays every chunk everywhere and the ranking then simulates every
/// candidate: on thousands of NPUs at large sizes it costs more than it can win.
pub const LATENCY_MODE_MAX_NPUS: usize = 256;

/// Whether the greedy tries its latency mode on `c` (see `LATENCY_MODE_MAX_NPUS`).
fn latency_mode_pays(topo: &crate::topology::Topology, c: &Collective) -> bool {
    if topo.npus() <= LATENCY_MODE_MAX_NPUS {
        return true;
    }
    chunking::beta_over_alpha(topo, c.chunk_size_bytes) < 1.0
}

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
}
