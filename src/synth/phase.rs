//! The phase machinery every planner of chunk movement shares: the problem a phase poses on a
//! TEN (`Problem`) and the plan that answers it (`Plan`, `Move`), the combining collective's
//! two phases (`movement_core`: reduction by inversion, then the forward movement, planned side
//! by side), unequal shares (`shares`), overlapped phases (`overlap`), the TEN timesteps to try
//! (`auto_discretizations`) and where each chunk is reduced (`roots_for`).

pub mod inversion;
pub mod overlap;
pub mod shares;

use super::{PlanOptions, PlanStats, SynthError};
use crate::collective::Collective;
use crate::schedule::{ChunkList, Transfer, Transfers};
use crate::ten::{SwitchModel, Ten, TenError};
use crate::topology::Topology;
use inversion::{prune_dead_ends, reverse};

/// Chunk movement to plan on a TEN: `pre` pairs are held at t = 0, `post` pairs must be held
/// at the end; both sorted by (npu, chunk) without duplicates. `live_npus` is the number of NPUs that can take part (not failed).
pub struct Problem<'a> {
    pub ten: &'a Ten,
    pub num_chunks: usize,
    pub pre: &'a [[u32; 2]],
    pub post: &'a [[u32; 2]],
    pub live_npus: usize,
    /// Each edge takes the requested chunk with the fewest copies among a few it looks at,
    /// instead of one at random: with unequal shares (`synth::shares`, a few roots holding
    /// most chunks) random picks leave NPUs idle late in a phase that rarest-first keeps busy.
    /// The synthesizers set it for combining collectives; the others keep the random pick.
    pub rarest_first: bool,
    /// Chunks an edge may start in one timestep (1: the TACOS matcher). Above one the TEN's
    /// timestep is that many chunks' message (`synth::greedy_grouped` on an all-gather), and
    /// the moves of one edge and timestep become one message.
    pub capacity: u32,
}

/// One chunk on one TEN edge, starting at timestep `step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub step: u32,
    pub edge: u32,
    pub chunk: u32,
}

#[derive(Clone, Debug)]
pub struct Plan {
    /// Moves in the order they were made (by step).
    pub moves: Vec<Move>,
    /// Timesteps until the last arrival.
    pub timesteps: u32,
    /// Moves re-targeted or dropped because a faster edge delivered their chunk.
    pub replacements: usize,
}

/// Why the greedy (or a latency-mode planner) found no plan. A cancel is not one of these:
/// it is `SynthError::Cancelled`, the one way every planner stops on its caller's poll.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum GreedyError {
    #[error("no progress possible: {0} requested (npu, chunk) pairs cannot be reached")]
    Stuck(usize),
    #[error("relay tables would need {0} entries, over the limit of {1}")]
    TooManyRelayTables(usize, usize),
    #[error("the plan exceeds {0} timesteps; use a coarser discretization")]
    Horizon(u32),
    /// A planner that serves only some problems was given another (a caller's bug: the
    /// engine checks first).
    #[error("{0}")]
    Unsupported(&'static str),
    /// A pipelined all-reduce (`staged`) whose stages did not overlap (or that the overlap
    /// could not schedule): the one-stage plan serves.
    #[error("the stages in one timeline are no shorter than one after another")]
    StagesNotShorter,
}

/// Plans one phase's chunk movement on a TEN: (problem, seed, phase name, phases left including
/// this one) -> plan. The greedy and the ILP are the two planners; everything around them
/// (inversion, pruning, reversal, tenants) is shared.
pub(super) type Planner<'a> = dyn FnMut(&Problem, u64, &'static str, u32) -> Result<Plan, SynthError> + 'a;

/// Plans one phase (problem, seed -> plan) on any thread: given, the two phases of a
/// combining collective are planned at once (the greedy; the ILP shares one time budget
/// between its phases in order).
pub(super) type SideBySide<'a> = dyn Fn(&Problem, u64) -> Result<Plan, SynthError> + Sync + 'a;

/// How `movement_core` plans: the matcher's pick (`Problem::rarest_first`), whether
/// the two phases of an all-reduce may run in one timeline (`overlap`, polling the given
/// cancel flag), and whether they are planned at once (`side_by_side`).
#[derive(Clone, Copy)]
pub(super) struct Manner<'a> {
    pub(super) rarest_first: bool,
    pub(super) overlap: Option<&'a dyn Fn() -> bool>,
    /// Chunks an edge may start per timestep (`Problem::capacity`).
    pub(super) capacity: u32,
    /// Plans either phase on any thread: given, the two phases are planned side by side.
    pub(super) side_by_side: Option<&'a SideBySide<'a>>,
}

impl Manner<'_> {
    /// The random pick, the phases in sequence.
    pub(super) const PLAIN: Manner<'static> =
        Manner { rarest_first: false, overlap: None, capacity: 1, side_by_side: None };

    /// Rarest-first for combining collectives (their phases spread from roots that, with
    /// unequal shares, hold most chunks; measured never slower on the all-reduce and reduce
    /// cases tried, up to 25% faster); the others keep the random pick.
    pub(super) fn picking(c: &Collective) -> Manner<'static> {
        Manner { rarest_first: c.combining, overlap: None, capacity: 1, side_by_side: None }
    }
}

/// Chunk movement with a per-chunk combining flag; `roots[c]` is where combining chunk c is
/// reduced to (indexed by chunk; ignored for non-combining chunks).
///
/// Phase 1 reduces every combining chunk to its root by reversing a spread from the root to
/// the contributors, planned on the transposed topology. Phase 2 moves everything forward:
/// non-combining chunks from their holders, reduced chunks from their roots.
pub(super) fn movement_core(
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
    let problem =
        |ten, pre, post| Problem { ten, num_chunks: c.num_chunks, pre, post, live_npus: live, rarest_first, capacity };
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
    reduce_problem: Option<&Problem>,
    forward_problem: Option<&Problem>,
    planner: &mut Planner,
    seed: u64,
    conds: &PhaseConditions,
) -> Result<(Option<Plan>, Option<Plan>), SynthError> {
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
fn record_phase(ten: &Ten, num_chunks: usize, plan: Plan, post: &[[u32; 2]], stats: &mut PlanStats) -> Vec<Move> {
    stats.discretization_ns = ten.discretization_ns;
    let moves = prune_dead_ends(ten, num_chunks, plan.moves, post);
    stats.phase_timesteps.push(plan.timesteps);
    stats.replacements += plan.replacements;
    moves
}

/// Appends the forward phase's moves as copies after the reduce phase's last step.
pub(super) fn append_forward(ten: &Ten, moves: Vec<Move>, next_step: u32, transfers: &mut Transfers) {
    transfers.reserve(moves.len());
    for m in moves {
        let e = &ten.edges[m.edge as usize];
        let mut t = Transfer::copy(next_step + m.step, e.src as usize, e.dst as usize, ChunkList::One(m.chunk));
        t.path = e.path.clone();
        transfers.push(t);
    }
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
pub(super) fn roots_for(topo: &Topology, c: &Collective) -> (Vec<u32>, Option<Vec<u32>>) {
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
pub(super) fn reduction_roots(c: &Collective) -> Vec<u32> {
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
