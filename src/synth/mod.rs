//! Synthesizers: turn a topology and a collective into a schedule, by job: what every phase
//! planner shares (`phase`: combining collectives by inversion, TACOS VII-A, the reduction the
//! reverse of a broadcast-like movement on the transposed topology, then the result spread
//! forward), one phase's planners (`planners`: the matcher, the ILP, the latency mode,
//! translation), producers of a whole collective (`whole`), the greedy's table of them
//! (`producers`) and the reroute after failures (`repair`). Paths outside stay
//! `synth::{ilp, trees, …}` by the re-exports below.

pub mod merge;
pub mod phase;
pub mod pipeline;
mod planners;
pub mod producers;
pub mod repair;
mod whole;

pub(crate) use phase::inversion::prune_dead_ends;
pub use phase::{GreedyError, inversion, overlap, shares};
use phase::{Manner, Planner, movement_core, reduction_roots, roots_for};
pub use phase::{auto_discretizations, fine_discretizations};
use planners::entries::multi_core;
pub use planners::entries::{
    batched, greedy, greedy_grouped, greedy_multi, greedy_plain, greedy_rarest, greedy_spread, translated,
};
use planners::matcher;
pub use planners::{flood, ilp, translate};
pub use whole::staged::greedy_staged;
pub use whole::{doubling, packing, routed, staged, trees};

use crate::collective::Collective;
use crate::schedule::Schedule;
use crate::ten::{SwitchModel, TenError};
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
    Greedy(#[from] phase::GreedyError),
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
) -> impl FnMut(&phase::Problem, u64, &'static str, u32) -> Result<phase::Plan, SynthError> + 'a {
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

#[cfg(test)]
mod tests;
