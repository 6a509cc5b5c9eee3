//! Synthesizers: turn a topology and a collective into a schedule. Combining collectives are
//! synthesized by inversion (TACOS VII-A): the reduction is the reverse of a broadcast-like
//! movement on the transposed topology, then the result is spread forward.

pub mod doubling;
pub mod flood;
pub mod greedy;
pub mod ilp;
pub mod inversion;
mod matcher;
pub mod mcf;
pub mod overlap;
pub mod producers;
pub mod repair;
pub mod routed;
pub mod shares;
pub mod staged;
pub mod translate;
pub mod trees;

pub(crate) use inversion::prune_dead_ends;
use inversion::reverse;
pub use matcher::{
    batched, greedy, greedy_grouped, greedy_plain, greedy_rarest, greedy_spread, greedy_staged, translated,
};

use crate::collective::Collective;
use crate::schedule::{ChunkList, Schedule, Transfer, Transfers};
use crate::ten::{SwitchModel, Ten, TenError};
use crate::topology::Topology;
use serde::Serialize;

/// How much search a planner spends for a shorter schedule. `Standard` (the default) keeps a
/// synthesis quick where a regeneration has to be (the trees restart and polish their
/// timelines only below 1000 NPUs: a torus:32x32 after a failure in about a second);
/// `Thorough` is for a batch job that would rather wait: the trees make more attempts, restart
/// and polish them at any NPU count their move budgets allow, and polish four times as far
/// (torus:32x32 after three failed links at 64 MiB 1.108× → 1.077× the intact schedule, for a
/// synthesis over ten times as long; nothing more at torus:64x64, whose moves exceed the
/// budgets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    #[default]
    Standard,
    Thorough,
}

impl Effort {
    pub fn parse(s: &str) -> Result<Effort, String> {
        match s {
            "standard" => Ok(Effort::Standard),
            "thorough" => Ok(Effort::Thorough),
            _ => Err(format!("effort {s:?}: expected standard or thorough")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Effort::Standard => "standard",
            Effort::Thorough => "thorough",
        }
    }
}

/// What every planner takes, whichever plans the phases (the greedy matcher, the latency-mode
/// planners, the ILP, whose own options are `ilp::IlpOptions`): the seed (the greedy's choices,
/// the ILP's warm start), how switches appear in the TEN, and its timestep.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    pub seed: u64,
    pub switch_model: SwitchModel,
    pub discretization_ns: Option<f64>,
}

/// What every planner reports beside its schedule (the ILP adds `ilp::IlpStats`).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PlanStats {
    /// TEN timesteps of each phase (reduce phase first for combining collectives).
    pub ten_timesteps: u32,
    pub phase_timesteps: Vec<u32>,
    pub discretization_ns: f64,
    pub replacements: usize,
    /// An all-reduce's unequal shares (`shares`), when the matcher used them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<shares::ShareStats>,
    /// The two phases run in one timeline (`overlap`): `ten_timesteps` is then the overlapped
    /// schedule's, shorter than the phases' sum. The matcher's all-reduce tries it with
    /// unequal shares.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub overlapped: bool,
    /// Chunks moved together per message (`greedy_grouped`: every message of an all-reduce,
    /// at most for an all-gather), when more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks_per_message: Option<u32>,
    /// An all-reduce planned in this many pipelined stages (`staged`), when more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<u32>,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum SynthError {
    #[error(transparent)]
    Ten(#[from] TenError),
    #[error("greedy: {0}")]
    Greedy(#[from] greedy::GreedyError),
    #[error("{0}")]
    Input(#[from] crate::error::InputError),
    #[error("ilp: {0}")]
    Ilp(#[from] ilp::IlpError),
    /// The caller's cancel poll (or deadline) said stop: the one way every planner, the ILP
    /// included, reports it.
    #[error("cancelled")]
    Cancelled,
}

impl SynthError {
    pub fn is_cancelled(&self) -> bool {
        matches!(self, SynthError::Cancelled)
    }
}

/// Plans one phase's chunk movement on a TEN: (problem, seed, phase name, phases left including
/// this one) -> plan. The greedy and the ILP are the two planners; everything around them
/// (inversion, pruning, reversal, tenants) is shared.
type Planner<'a> = dyn FnMut(&greedy::Problem, u64, &'static str, u32) -> Result<greedy::Plan, SynthError> + 'a;

/// Plans one phase (problem, seed -> plan) on any thread: given, the two phases of a
/// combining collective are planned at once (the greedy; the ILP shares one time budget
/// between its phases in order).
type SideBySide<'a> = dyn Fn(&greedy::Problem, u64) -> Result<greedy::Plan, SynthError> + Sync + 'a;

/// What the ILP adds to a synthesis: its statistics and, if asked, each phase's LP text.
#[derive(Clone, Debug)]
pub struct IlpOutput {
    pub stats: ilp::IlpStats,
    pub lp: Vec<ilp::PhaseLp>,
}

/// A planner running the ILP per phase, collecting each phase's statistics.
fn ilp_planner<'a>(
    opts: &'a ilp::IlpOptions,
    cancelled: &'a dyn Fn() -> bool,
    phases: &'a mut Vec<ilp::PhaseStats>,
    lp: &'a mut Vec<ilp::PhaseLp>,
) -> impl FnMut(&greedy::Problem, u64, &'static str, u32) -> Result<greedy::Plan, SynthError> + 'a {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(opts.time_limit_s.clamp(0.0, 1e7));
    let work_limit_s = opts.work_limit_s.unwrap_or(opts.time_limit_s).clamp(0.0, 1e7);
    move |p, seed, phase, phases_left| {
        // Phases share what is left of the work budget evenly (a phase that finishes early
        // leaves its rest to the next), and of the wall clock's, which also pays for what the
        // work does not count (the warm start, model builds, presolve): where it stops a
        // phase first, the phase says so (`cut_by_time_limit`).
        let now = std::time::Instant::now();
        let share = deadline.saturating_duration_since(now) / phases_left.max(1);
        let spent: f64 = phases.iter().map(|p| p.work_s).sum();
        let work = (work_limit_s - spent).max(0.0) / phases_left.max(1) as f64;
        let out = ilp::plan(p, seed, opts, work, now + share, phase, cancelled)?;
        phases.push(out.stats);
        if let Some(text) = out.lp {
            lp.push(ilp::PhaseLp { phase, text });
        }
        Ok(out.plan)
    }
}

/// Synthesizes `c` on `topo` with the ILP (greedy warm start, same inversion for combining
/// collectives).
pub fn ilp(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    ilp_opts: &ilp::IlpOptions,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Schedule, PlanStats, IlpOutput), SynthError> {
    let (mut phases, mut lp) = (Vec::new(), Vec::new());
    let combining = vec![c.combining; c.num_chunks];
    let (roots, weighted) = roots_for(topo, c);
    let (transfers, mut stats) = {
        let mut planner = ilp_planner(ilp_opts, cancelled, &mut phases, &mut lp);
        movement_core(topo, c, &combining, &roots, Manner::picking(c), opts, &mut planner)?
    };
    stats.shares = weighted.as_deref().map(shares::ShareStats::of);
    let mut s = Schedule::new(topo.clone(), c, "ilp");
    s.seed = Some(opts.seed);
    s.transfers = transfers;
    Ok((s, stats, IlpOutput { stats: ilp::IlpStats::from_phases(phases, ilp_opts), lp }))
}

/// Several collectives synthesized jointly (multi-tenant).
#[derive(Clone, Debug)]
pub struct Joint {
    /// One schedule moving every tenant's chunks.
    pub schedule: Schedule,
    /// Each tenant's chunk ids in it, in tenant order.
    pub ranges: Vec<std::ops::Range<usize>>,
    pub stats: PlanStats,
}

/// Several collectives in one ILP per phase (see `greedy_multi`).
pub fn ilp_multi(
    topo: &Topology,
    tenants: &[Collective],
    opts: &PlanOptions,
    ilp_opts: &ilp::IlpOptions,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Joint, IlpOutput), SynthError> {
    let (mut phases, mut lp) = (Vec::new(), Vec::new());
    let mut joint = {
        let mut planner = ilp_planner(ilp_opts, cancelled, &mut phases, &mut lp);
        multi_core(topo, tenants, opts, &mut planner)?
    };
    joint.schedule.algorithm = Some("ilp".into());
    Ok((joint, IlpOutput { stats: ilp::IlpStats::from_phases(phases, ilp_opts), lp }))
}

/// How `movement_core` plans: the matcher's pick (`greedy::Problem::rarest_first`), whether
/// the two phases of an all-reduce may run in one timeline (`overlap`, polling the given
/// cancel flag), and whether they are planned at once (`side_by_side`).
#[derive(Clone, Copy)]
struct Manner<'a> {
    rarest_first: bool,
    overlap: Option<&'a dyn Fn() -> bool>,
    /// Chunks an edge may start per timestep (`greedy::Problem::capacity`).
    capacity: u32,
    /// Plans either phase on any thread: given, the two phases are planned side by side.
    side_by_side: Option<&'a SideBySide<'a>>,
}

impl Manner<'_> {
    /// The random pick, the phases in sequence.
    const PLAIN: Manner<'static> = Manner { rarest_first: false, overlap: None, capacity: 1, side_by_side: None };

    /// Rarest-first for combining collectives (their phases spread from roots that, with
    /// unequal shares, hold most chunks; measured never slower on the all-reduce and reduce
    /// cases tried, up to 25% faster); the others keep the random pick.
    fn picking(c: &Collective) -> Manner<'static> {
        Manner { rarest_first: c.combining, overlap: None, capacity: 1, side_by_side: None }
    }
}

/// Chunk movement with a per-chunk combining flag; `roots[c]` is where combining chunk c is
/// reduced to (indexed by chunk; ignored for non-combining chunks).
///
/// Phase 1 reduces every combining chunk to its root by reversing a spread from the root to
/// the contributors, planned on the transposed topology. Phase 2 moves everything forward:
/// non-combining chunks from their holders, reduced chunks from their roots.
fn movement_core(
    topo: &Topology,
    c: &Collective,
    combining: &[bool],
    roots: &[u32],
    manner: Manner,
    opts: &PlanOptions,
    planner: &mut Planner,
) -> Result<(Transfers, PlanStats), SynthError> {
    let live = topo.live_npus().len();
    let Manner { rarest_first, overlap: overlapped, capacity, side_by_side } = manner;
    let mut stats = PlanStats::default();
    let mut transfers = Transfers::new();
    let mut next_step = 0u32;
    let conds = PhaseConditions::new(c, combining, roots);
    let (reduce_ten, forward_ten) = phase_tens(topo, c, opts, &conds)?;
    let problem = |ten, pre, post| greedy::Problem {
        ten,
        num_chunks: c.num_chunks,
        pre,
        post,
        live_npus: live,
        rarest_first,
        capacity,
    };
    // The greedy indexes its pairs (within the greedy's pair limit).
    let post = c.postcondition.as_slice();
    let reduce_problem = reduce_ten.as_ref().map(|ten| problem(ten, &conds.reduce_pre, &conds.reduce_post));
    let forward_problem = forward_ten.as_ref().map(|ten| problem(ten, &conds.forward_pre, &post));
    let (reduce_plan, forward_plan) =
        plan_phases(side_by_side, reduce_problem.as_ref(), forward_problem.as_ref(), planner, opts.seed, &conds)?;
    if let (Some(ten), Some(plan)) = (&reduce_ten, reduce_plan) {
        let horizon = plan.timesteps;
        let moves = record_phase(ten, c.num_chunks, plan, &conds.reduce_post, &mut stats);
        transfers = reverse(ten, c.num_chunks, &moves, horizon, &conds.reduce_post);
        next_step = transfers.steps().iter().map(|t| t + 1).max().unwrap_or(0);
    }
    if let (Some(ten), Some(plan)) = (&forward_ten, forward_plan) {
        let moves = record_phase(ten, c.num_chunks, plan, &post, &mut stats);
        let sequential: u32 = stats.phase_timesteps.iter().sum();
        if let Some(cancelled) = overlapped.filter(|_| conds.reduce_needed)
            && let Some((both, steps)) =
                overlap::overlap(ten, &transfers, &moves, roots, c.num_chunks, sequential, cancelled)
        {
            stats.ten_timesteps = steps;
            stats.overlapped = true;
            return Ok((both, stats));
        }
        append_forward(ten, moves, next_step, &mut transfers);
    }
    stats.ten_timesteps = stats.phase_timesteps.iter().sum();
    Ok((transfers, stats))
}

/// Each phase's pre- and postconditions, kept together since both the TENs and the problems need them.
struct PhaseConditions {
    reduce_needed: bool,
    needs_forward: bool,
    forward_pre: Vec<[u32; 2]>,
    reduce_pre: Vec<[u32; 2]>,
    reduce_post: Vec<[u32; 2]>,
}

impl PhaseConditions {
    /// Splits the collective's conditions between the phases: combining chunks reach their roots first.
    fn new(c: &Collective, combining: &[bool], roots: &[u32]) -> PhaseConditions {
        let mut forward_pre: Vec<[u32; 2]> = c.precondition.iter().filter(|p| !combining[p[1] as usize]).collect();
        // Phase 1 is needed when some combining chunk has a contribution away from its root.
        let reduce_needed = c.precondition.iter().any(|p| combining[p[1] as usize] && p[0] != roots[p[1] as usize]);
        if combining.iter().any(|&x| x) {
            forward_pre.extend((0..c.num_chunks).filter(|&ch| combining[ch]).map(|ch| [roots[ch], ch as u32]));
            forward_pre.sort_unstable();
            forward_pre.dedup();
        }
        let needs_forward = c.postcondition.iter().any(|p| forward_pre.binary_search(&p).is_err());
        let reduce_pre: Vec<[u32; 2]> = match reduce_needed {
            true => {
                let mut pre: Vec<[u32; 2]> =
                    (0..c.num_chunks).filter(|&ch| combining[ch]).map(|ch| [roots[ch], ch as u32]).collect();
                pre.sort_unstable();
                pre
            }
            false => Vec::new(),
        };
        let reduce_post: Vec<[u32; 2]> = match reduce_needed {
            true => c.precondition.iter().filter(|p| combining[p[1] as usize]).collect(),
            false => Vec::new(),
        };
        PhaseConditions { reduce_needed, needs_forward, forward_pre, reduce_pre, reduce_post }
    }
}

/// The TENs of the phases that run, the reduce phase's built (and failing) first.
fn phase_tens(
    topo: &Topology,
    c: &Collective,
    opts: &PlanOptions,
    conds: &PhaseConditions,
) -> Result<(Option<Ten>, Option<Ten>), SynthError> {
    // Each phase's problem: the reduce phase on the transposed topology (reversed afterwards),
    // the forward phase on the topology. Neither depends on the other's plan.
    let transposed = conds.reduce_needed.then(|| topo.transposed());
    let reduce_ten = match &transposed {
        Some(t) => Some(Ten::build(t, c.chunk_size_bytes, opts.switch_model, opts.discretization_ns)?),
        None => None,
    };
    let forward_ten = match conds.needs_forward {
        true => Some(Ten::build(topo, c.chunk_size_bytes, opts.switch_model, opts.discretization_ns)?),
        false => None,
    };
    Ok((reduce_ten, forward_ten))
}

/// Plans both phases, side by side when a thread-safe planner is given, else in order.
fn plan_phases(
    side_by_side: Option<&SideBySide>,
    reduce_problem: Option<&greedy::Problem>,
    forward_problem: Option<&greedy::Problem>,
    planner: &mut Planner,
    seed: u64,
    conds: &PhaseConditions,
) -> Result<(Option<greedy::Plan>, Option<greedy::Plan>), SynthError> {
    let seeds = (seed, seed.wrapping_add(0x9E37_79B9));
    match (side_by_side, reduce_problem, forward_problem) {
        // Both phases at once on the pool (the matcher is single-threaded: a 4096-NPU
        // all-reduce planned its two phases in about 12 s one after the other).
        (Some(plan), Some(r), Some(f)) => {
            let (r, f) = rayon::join(|| plan(r, seeds.0), || plan(f, seeds.1));
            Ok((Some(r?), Some(f?)))
        }
        _ => {
            let left = 1 + conds.needs_forward as u32;
            let r = reduce_problem.map(|p| planner(p, seeds.0, "reduce", left)).transpose()?;
            let f = forward_problem.map(|p| planner(p, seeds.1, "forward", 1)).transpose()?;
            Ok((r, f))
        }
    }
}

/// Records a phase's plan in the stats and returns its moves without dead ends.
fn record_phase(
    ten: &Ten,
    num_chunks: usize,
    plan: greedy::Plan,
    post: &[[u32; 2]],
    stats: &mut PlanStats,
) -> Vec<greedy::Move> {
    stats.discretization_ns = ten.discretization_ns;
    let moves = prune_dead_ends(ten, num_chunks, plan.moves, post);
    stats.phase_timesteps.push(plan.timesteps);
    stats.replacements += plan.replacements;
    moves
}

/// Appends the forward phase's moves as copies after the reduce phase's last step.
fn append_forward(ten: &Ten, moves: Vec<greedy::Move>, next_step: u32, transfers: &mut Transfers) {
    transfers.reserve(moves.len());
    for m in moves {
        let e = &ten.edges[m.edge as usize];
        let mut t = Transfer::copy(next_step + m.step, e.src as usize, e.dst as usize, ChunkList::One(m.chunk));
        t.path = e.path.clone();
        transfers.push(t);
    }
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
    let mut planner = |p: &greedy::Problem, seed, _phase, _left| greedy::plan(p, seed, cancelled);
    multi_core(topo, tenants, opts, &mut planner)
}

fn multi_core(
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

/// Discretization factors worth trying: the fastest edge's time f, and when some edge's time
/// is not (nearly) a whole multiple of f, also f/2, f/3, f/4 and the coarsest f/k (k ≤ 32) whose
/// rounding overstates no edge by more than 0.5%: a coarse grid misjudges the slower links, and
/// so the balance between fast and slow paths.
pub fn auto_discretizations(topo: &Topology, chunk_size_bytes: f64, model: SwitchModel) -> Result<Vec<f64>, TenError> {
    let (f, error) = grid_error(topo, chunk_size_bytes, model)?;
    if error(1.0) <= 1e-6 {
        return Ok(vec![f]);
    }
    let mut ks = vec![1.0, 2.0, 3.0, 4.0];
    if let Some(k) = accurate_division(&error) {
        ks.push(k);
    }
    Ok(ks.into_iter().map(|k| f / k).collect())
}

/// The coarsest f/k, 5 ≤ k ≤ 32, whose rounding overstates no edge by more than 0.5%.
fn accurate_division(error: &impl Fn(f64) -> f64) -> Option<f64> {
    (5..=32).map(|k| k as f64).find(|&k| error(k) <= 0.005)
}

/// The fastest edge's time f and the rounding error of a grid of f/k (`auto_discretizations`):
/// the most any edge's time is overstated, as a fraction of it.
fn grid_error(
    topo: &Topology,
    chunk_size_bytes: f64,
    model: SwitchModel,
) -> Result<(f64, impl Fn(f64) -> f64), TenError> {
    let ten = Ten::build(topo, chunk_size_bytes, model, None)?;
    let f = ten.discretization_ns;
    let mut times: Vec<f64> = ten.edges.iter().map(|e| e.time_ns / f).collect();
    times.sort_by(f64::total_cmp);
    times.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * *b);
    let error = move |k: f64| times.iter().map(|&r| ((r * k - 1e-9).ceil() - r * k) / (r * k)).fold(0.0, f64::max);
    Ok((f, error))
}

/// Finer timesteps, f/8, f/16 and f/32, for the matcher on small fabrics
/// (`engine::greedy_runs`) where edge times are mixed and no grid `auto_discretizations`
/// tries times every edge within 0.5% (empty otherwise: there the accurate grid is tried). On
/// hier:ring2,fc4,switch4 a two-hop switch path carries a 2 MiB chunk in 21.97 µs and an FC
/// link in 21.47: at f/4 the path spans 5 timesteps to the link's 4, so the matcher loads the
/// switch ports a quarter less than it should; at f/16 and f/32 the paths are overstated by
/// 3.8% and 0.8%, and the all-reduce at 256 MiB takes 1081.1 µs instead of 1104.6 (the
/// two-pass bound 1040.2). The ladder past f/4 is not monotone (f/8 1116.5, f/32 1085.6), so
/// several are tried and the fastest kept.
pub fn fine_discretizations(topo: &Topology, chunk_size_bytes: f64, model: SwitchModel) -> Result<Vec<f64>, TenError> {
    let (f, error) = grid_error(topo, chunk_size_bytes, model)?;
    if error(1.0) <= 1e-6 || accurate_division(&error).is_some() {
        return Ok(Vec::new());
    }
    Ok([8.0, 16.0, 32.0].into_iter().map(|k| f / k).collect())
}

/// Where each chunk of a combining collective is reduced (empty for others), and an
/// all-reduce's unequal shares when its NPUs move data at different rates (`shares`): the
/// matcher and the ILP (whose warm start is the matcher) plan the same phases.
fn roots_for(topo: &Topology, c: &Collective) -> (Vec<u32>, Option<Vec<u32>>) {
    match shares::all_reduce_shares(topo, c) {
        Some(per_rank) => (shares::roots(c, &per_rank), Some(per_rank)),
        // Fewer chunks than NPUs (an all-reduce planned in groups, `greedy_grouped`): one
        // chunk to every n-th NPU, spread over the group rather than the first ranks.
        None if c.spec.kind == crate::collective::CollectiveKind::AllReduce && c.num_chunks < c.group.len() => {
            let per_rank = shares::balanced(&vec![1.0; c.group.len()], c.num_chunks);
            (shares::roots(c, &per_rank), None)
        }
        None if c.combining => (reduction_roots(c), None),
        None => (Vec::new(), None),
    }
}

/// The NPU each chunk is reduced to: its owner rank when the collective has one chunk block per
/// rank (reduce-scatter, all-reduce), else a postcondition holder, spread over the holders.
fn reduction_roots(c: &Collective) -> Vec<u32> {
    let mut dests: Vec<Vec<u32>> = vec![Vec::new(); c.num_chunks];
    for [v, ch] in c.postcondition.iter() {
        dests[ch as usize].push(v);
    }
    // A chunk nobody needs (a custom collective may leave one out of its postcondition) stays
    // with its first holder.
    let mut first_holder: Vec<Option<u32>> = vec![None; c.num_chunks];
    for [v, ch] in c.precondition.iter() {
        first_holder[ch as usize].get_or_insert(v);
    }
    let p = c.group.len();
    let k = c.spec.chunks() as usize;
    (0..c.num_chunks)
        .map(|ch| {
            let d = &dests[ch];
            if c.num_chunks == p * k {
                let owner = c.group[ch / k] as u32;
                if d.contains(&owner) {
                    return owner;
                }
            }
            if d.is_empty() {
                return first_holder[ch].unwrap_or(c.group[0] as u32);
            }
            d[ch % d.len()]
        })
        .collect()
}

#[cfg(test)]
mod tests;
