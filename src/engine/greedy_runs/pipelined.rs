//! The greedy's winner pipelined (`synth::pipeline`) where the simulator finds that faster, and
//! what the pass did (`stats.pipelined`); the winner's messages merged (`synth::merge`)
//! likewise, after the pipelining (a multi-tenant winner: merged only).

use super::Won;
use crate::engine::error::Error;
use serde::Serialize;

/// What the pipelining of the greedy's winner did, where its schedule was kept.
#[derive(Clone, Debug, Serialize)]
pub struct Pipelining {
    /// The pieces each of the run's chunks was cut into: the schedule's chunks per NPU are
    /// that many times the run's.
    pub pieces: u32,
    /// The run's chunks per NPU, one of `chunks_per_npu_tried` (the schedule's are `pieces`
    /// times this: 16 from a run at 4, which the list of those tried does not hold).
    pub chunks_per_npu: u32,
    /// The run's messages sent piece by piece; the others carry every piece of their chunks.
    pub split: usize,
    /// The run's simulated time before the pass.
    pub before_ns: f64,
    /// The pass's wall time, its simulations included.
    pub wall_ms: f64,
}

/// `won` pipelined where that is faster, with what the pass did; `won` itself where the pass
/// does not apply, finds nothing faster or is stopped by `polled` (a cancel cancels).
pub(super) fn pipeline_winner(
    won: Won,
    cancelled: &(dyn Fn() -> bool + Sync),
    polled: &(dyn Fn() -> bool + Sync),
) -> Result<(Won, Option<Pipelining>), Error> {
    let t0 = std::time::Instant::now();
    let stopped = |won: Won| if cancelled() { Err(Error::Cancelled) } else { Ok((won, None)) };
    let before = match won.time_ns_until(polled) {
        Ok(t) => t,
        Err(crate::sim::SimError::Stopped) => return stopped(won),
        Err(_) => return Ok((won, None)),
    };
    match crate::synth::pipeline::pipeline(&won.schedule, before, polled) {
        Ok(Some(p)) => {
            let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
            tracing::debug!(target: "ccsynth::timing", before, after = p.time_ns, pieces = p.pieces, split = p.split, wall_ms, "greedy: the winner pipelined");
            let chunks_per_npu = won.schedule.collective.chunks();
            let said = Pipelining { pieces: p.pieces, chunks_per_npu, split: p.split, before_ns: before, wall_ms };
            // Left for the gate to simulate again: beside its validation where that is deferred.
            let won = Won { schedule: p.schedule, timing: None, report: None, time_ns: Some(p.time_ns), ..won };
            Ok((won, Some(said)))
        }
        Ok(None) => {
            tracing::debug!(target: "ccsynth::timing", wall_ms = t0.elapsed().as_secs_f64() * 1e3, "greedy: pipelining found nothing faster");
            Ok((won, None))
        }
        Err(crate::sim::SimError::Stopped) => stopped(won),
        Err(e) => {
            // The winner simulated before: a failure now is a bug, not an input.
            tracing::error!(error = %e, "greedy: the pipelining failed");
            Ok((won, None))
        }
    }
}

/// `won` with its messages merged (`synth::merge`: the matcher sends a chunk a message, which
/// pays a multi-tenant run's α, or a long latency, once a chunk) where the result is valid and
/// simulates faster; `won` itself otherwise.
pub(super) fn merge_winner(
    won: Won,
    cancelled: &(dyn Fn() -> bool + Sync),
    polled: &(dyn Fn() -> bool + Sync),
) -> Result<Won, Error> {
    // Merged first: on most winners nothing merges (the pass ends before its tables), and the
    // winner is then not simulated here for a time nothing compares.
    let Some(merged) = crate::synth::merge::merge(&won.schedule) else { return Ok(won) };
    let before = match won.time_ns_until(polled) {
        Ok(t) => t,
        Err(crate::sim::SimError::Stopped) if cancelled() => return Err(Error::Cancelled),
        Err(_) => return Ok(won),
    };
    let timing = match crate::sim::simulate_until(&merged, polled) {
        Ok(timing) => timing,
        Err(crate::sim::SimError::Stopped) if cancelled() => return Err(Error::Cancelled),
        Err(_) => return Ok(won),
    };
    // Checked here, not only at the gate: a merge the validator refuses leaves the run's own
    // schedule, which it passed. Its replay goes on to the gate, which need not run it again.
    let after = timing.collective_time_ns;
    if after >= before * (1.0 - 1e-9) || !crate::validate::validate(&merged).valid {
        return Ok(won);
    }
    tracing::debug!(target: "ccsynth::timing", before, after, "greedy: the winner's messages merged");
    Ok(Won { schedule: merged, timing: Some(timing), report: None, time_ns: Some(after), ..won })
}
