//! A synthesis and its mirror: the greedy's all-gather or reduce-scatter (broadcast or reduce)
//! also searched as the other collective and mirrored (`synth::inversion::mirrored`), the
//! faster kept.

use super::check::{self, Gate};
use super::{Algorithm, Collective, Control, Error, Output, Request, RunStats, Stop, Target, run_synthesizer_once};

/// NPUs up to which the greedy's all-gather or reduce-scatter (broadcast or reduce) also runs
/// as the other one, mirrored (`synth::inversion::mirrored`): the search runs twice.
pub const MIRROR_MAX_NPUS: usize = 256;

/// The greedy or the ILP on the request, until `stop`, its schedule checked as `gate`
/// says (`run_synthesizer_once`); the greedy's all-gather or reduce-scatter (broadcast or
/// reduce) then also runs as the other collective on the transposed topology (on paired links,
/// the same one), mirrored back onto this one, the faster kept (`stats.mirrored_from` says
/// so): the two searches differ (the reduce-scatter's matcher picks rarest-first, the
/// all-gather has planners of its own), so on torus:16x16 less NPU 100 and
/// link 3-4 at 128 MiB the reduce-scatter 1.099 → 1.052× its bound, the all-gather's time (and
/// so with link 9-10 slowed one way only, where the links are no longer paired).
pub(super) fn run_synthesizer(
    req: &Request,
    algorithm: &Algorithm,
    ctl: Control,
    stop: Stop,
    gate: Gate,
    incumbent_ns: Option<f64>,
) -> Result<Output, Error> {
    let out = run_synthesizer_once(req, algorithm, ctl, stop, gate, incumbent_ns, false)?;
    let Some(dual) = mirror_request(req, algorithm) else { return Ok(out) };
    // Both the search and the mirror's check leave out the lower bounds: only a mirror that
    // wins needs them, and gets them below.
    let unbounded = match gate {
        Gate::Full { .. } => Gate::Full { bounds: false },
        Gate::Deferred => Gate::Deferred,
    };
    let mirror = run_synthesizer_once(&dual, algorithm, ctl, stop, unbounded, None, true).and_then(|d| {
        let target =
            Collective::build(&d.schedule.collective.clone().with_kind(req.built[0].spec.kind), &req.topology)?;
        let s = crate::synth::inversion::mirrored(&d.schedule, &target)
            .map_err(|e| Error::from(crate::error::InputError::new("mirror", e.to_string())))?;
        // The transposed topology's transpose is this one (links sorted and unique both ways).
        debug_assert!(s.topology == req.topology, "the mirror lands on the request's topology");
        let (schedule, report) = check::gate_until(s, unbounded, ctl.cancelled)?;
        Ok(Output { schedule, report, ..d })
    });
    let time = |o: &Output| o.schedule.collective_time_ns.unwrap_or(f64::INFINITY);
    match mirror {
        Ok(mut m) if time(&m) < time(&out) && (m.report.valid || !matches!(gate, Gate::Full { .. })) => {
            if let RunStats::Synthesis(st) = &mut m.stats
                && let Some(g) = &mut st.greedy
            {
                g.mirrored_from = Some(dual.built[0].spec.kind);
            }
            if gate == (Gate::Full { bounds: true }) {
                (m.schedule, m.report) = check::finalize_until(m.schedule, true, ctl.cancelled)?;
            }
            Ok(m)
        }
        Ok(_) => Ok(out),
        Err(Error::Cancelled) => Err(Error::Cancelled),
        Err(e) => {
            tracing::debug!("the mirrored run gave no schedule: {e}");
            Ok(out)
        }
    }
}

/// The request as the other of all-gather and reduce-scatter (of broadcast and reduce) on the
/// transposed topology, where the greedy's schedule of that one mirrors into this one's at its
/// own time: one collective of every live NPU, up to `MIRROR_MAX_NPUS`.
fn mirror_request(req: &Request, algorithm: &Algorithm) -> Option<Request> {
    let Target::One(spec) = &req.target else { return None };
    let other = crate::synth::inversion::mirror_kind(spec.kind)?;
    if *algorithm != Algorithm::Greedy
        || req.topology.npus() > MIRROR_MAX_NPUS
        || req.built[0].group != req.topology.live_npus()
    {
        return None;
    }
    let topology = req.topology.transposed();
    let spec = spec.clone().with_kind(other);
    let built = vec![Collective::build(&spec, &topology).ok()?];
    Some(Request { topology, target: Target::One(spec), built, rerouted_in_hand: None, ..req.clone() })
}
