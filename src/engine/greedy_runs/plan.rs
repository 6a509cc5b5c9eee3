//! Which runs the greedy makes for one request (`plan_runs`): every row of
//! `synth::producers` offers its runs (`synth::producers::offers`), and a greedy whose runs are
//! all priced above the caller's schedule is not run.

use super::super::SynthJob;
use super::super::error::Error;
use crate::collective::Collective;
use crate::synth::producers::offers::{self, Ask, Offer};
pub use crate::synth::producers::offers::{GROUPED_ONLY_NPUS, LATENCY_MODE_MAX_NPUS, PLAIN_MAX_NPUS};
use crate::synth::producers::{Mode, Run, TranslationPattern};

/// The greedy's runs for one request: what each run plans, and what they share.
pub(super) struct RunPlan {
    /// Every run, as the producers offer them.
    pub(super) runs: Vec<Run>,
    /// TEN timesteps to try per variant (`Mode::Matching(f)` is the `f`th).
    pub(super) factors: Vec<Vec<Option<f64>>>,
    /// Each variant's translation pattern, where translation serves.
    pub(super) patterns: Vec<Option<TranslationPattern>>,
    /// Each variant's translation pattern in rounds, where it serves.
    pub(super) rounds: Vec<Option<TranslationPattern>>,
}

impl RunPlan {
    /// The pattern a translation run (`Mode::Translation` or `Mode::Rounds`) translates.
    pub(super) fn pattern(&self, r: &Run) -> Option<&TranslationPattern> {
        match r.mode {
            Mode::Rounds => self.rounds[r.variant].as_ref(),
            _ => self.patterns[r.variant].as_ref(),
        }
    }
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
    let nothing_needed = |c: &Collective| c.needed_iter(&c.holders()).next().is_none();
    let trivial = match tenants {
        None => nothing_needed(variants[0]),
        Some(t) => t.iter().all(nothing_needed),
    };
    let ask = Ask {
        topology: req.topology,
        variants,
        matcher_variants,
        seed: req.seed,
        seeds: req.seeds,
        discretization_ns: req.discretization_ns,
        switch_model: req.switch_model,
        grouping: &req.grouping,
        mirroring: req.mirroring,
        tenants: tenants.is_some(),
        trivial,
        effort: req.effort,
    };
    let offer = Offer::new(ask, cancelled)?;
    let runs = offers::runs(&offer);
    // Where every run is a translation pattern (the matcher cannot beat an optimal one) and
    // each is priced above the caller's schedule, the greedy cannot win: none is built (a
    // translation all-reduce on torus:64x64 is 4 M transfers). Runs of other planners are not
    // priced, so a greedy that has them runs whole, its statistics what it gives alone.
    let Offer { factors, patterns, rounds, .. } = offer;
    // Where an optimal translation pattern replaced the matcher and is itself over its size
    // (torus:64x128), nothing is left to run.
    if runs.is_empty() {
        let translation = patterns.iter().flatten().any(|p| p.2);
        let reason = match translation {
            true => format!(
                "its translation pattern is optimal here (the matcher cannot beat it) and would move more than {} chunks, the most it builds; the baselines serve (\"auto\" tries them)",
                offers::MAX_TRANSLATION_MOVES
            ),
            false => "no planner of the greedy offers a run for this request".to_string(),
        };
        return Err(Error::Unsupported { by: super::super::error::Refuser::Synthesizer, reason });
    }
    let plan = RunPlan { runs, factors, patterns, rounds };
    if let Some(incumbent_ns) = req.incumbent_ns
        && plan.runs.iter().all(|r| matches!(r.mode, Mode::Translation | Mode::Rounds))
        && let Some(price_ns) = cheapest_pattern(req, variants, &plan)
        && price_ns > incumbent_ns
    {
        return Err(Error::PricedOut { price_ns, incumbent_ns });
    }
    Ok(plan)
}

/// The cheapest price of the translation runs (in steps or rounds) the greedy would make: the
/// busiest link's load of each one's schedule, a lower bound on its time
/// (`translate::link_load_ns`).
fn cheapest_pattern(req: &SynthJob<'_>, variants: &[&Collective], plan: &RunPlan) -> Option<f64> {
    let link = req.topology.links().first()?;
    plan.runs
        .iter()
        .filter_map(|r| {
            let (torus, pattern, _) = plan.pattern(r)?;
            Some(crate::synth::translate::link_load_ns(torus, pattern, variants[r.variant], link))
        })
        .reduce(f64::min)
}
