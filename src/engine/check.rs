//! The check facade and the gate: `check` (validate, simulate, bound), `finalize` (what every
//! producer's schedule passes before it leaves the engine) and `Gate`, how `auto`'s candidates
//! are checked (simulated only, the winner validated after).

use super::search::Incumbent;
use super::{Error, Limits, request};
use crate::bounds::{LowerBounds, lower_bounds};
use crate::collective::Collective;
use crate::schedule::Schedule;
use crate::sim::Timing;
use crate::validate::{Report, Violation, ViolationKind, validate_with_collective};
use serde::Serialize;

/// What `ccsynth validate` prints: the validator's verdict plus time and bounds.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// No violation was found.
    pub valid: bool,
    /// The violations found (at most `limits::MAX_REPORTED_VIOLATIONS` listed).
    pub violations: Vec<Violation>,
    /// Every violation found, listed or not (at most `limits::MAX_COUNTED_VIOLATIONS`).
    pub violation_count: usize,
    /// There were more than `violation_count`: the check stopped counting there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub violation_count_capped: bool,
    /// Simulated time; present whenever every transfer names existing nodes and links.
    pub collective_time_ns: Option<f64>,
    /// The largest of the lower bounds.
    pub lower_bound_ns: Option<f64>,
    /// Every lower bound, with why one is missing.
    pub lower_bounds: Option<LowerBounds>,
    /// Distinct steps of the schedule.
    pub rounds: usize,
    /// Transfers of the schedule.
    pub transfers: usize,
    /// The simulator's full report, when the schedule could be simulated.
    #[serde(skip)]
    pub timing: Option<Timing>,
}

/// Validates, simulates and bounds a schedule. A declared `collective_time_ns` that differs
/// from the simulated time (relative 1e-9) is a violation: producers must report honest numbers.
pub fn check(s: &Schedule) -> CheckReport {
    check_bounded(s, true)
}

/// `check`, computing the lower bounds only when `bounds` says so: callers that check many
/// schedules of one collective (the portfolio, `compare`) compute them once instead.
pub(super) fn check_bounded(s: &Schedule, bounds: bool) -> CheckReport {
    check_until(s, bounds, &|| false).expect("never stopped")
}

/// `check_bounded`, asking `stop` every so many transfers of the validation and the
/// simulation; `None` once it says so (a schedule of tens of millions of transfers takes
/// seconds to check, and a cancelled job must not wait for it).
pub(super) fn check_until(s: &Schedule, bounds: bool, stop: &(dyn Fn() -> bool + Sync)) -> Option<CheckReport> {
    check_timed_until(s, None, bounds, stop)
}

/// `check_until`, reusing `known` (the simulator's report on this very schedule, from a
/// deferred candidate) instead of simulating it again.
pub(super) fn check_timed_until(
    s: &Schedule,
    known: Option<Timing>,
    bounds: bool,
    stop: &(dyn Fn() -> bool + Sync),
) -> Option<CheckReport> {
    // Validation and simulation read the schedule side by side on the pool. The simulation
    // is used only when validation finds every transfer well formed (`simulatable`); it
    // refuses what it cannot replay by itself, so running it first costs nothing but time.
    let (validated, simulated) = match known {
        Some(t) => (validate_with_collective(s, stop), Ok(t)),
        None => rayon::join(
            || timed("check: validated", || validate_with_collective(s, stop)),
            || timed("check: simulated", || crate::sim::simulate_until(s, stop)),
        ),
    };
    complete(s, validated?, simulated, bounds)
}

/// The check's report from the validator's verdict and the simulator's result.
fn complete(
    s: &Schedule,
    validated: (Report, Option<Collective>),
    simulated: Result<Timing, crate::sim::SimError>,
    bounds: bool,
) -> Option<CheckReport> {
    let (mut report, collective) = validated;
    let timing = if report.simulatable {
        match simulated {
            Err(crate::sim::SimError::Stopped) => return None,
            t => t.ok(),
        }
    } else {
        None
    };
    if let (Some(t), Some(declared)) = (&timing, s.collective_time_ns) {
        let tol = 1e-9 * t.collective_time_ns.abs().max(1.0);
        // Written so that a NaN declaration also counts as a mismatch.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        let differs = !((declared - t.collective_time_ns).abs() <= tol);
        if differs {
            report.violation_count += 1;
            report.valid = false;
            report.violations.push(Violation {
                kind: ViolationKind::TimeMismatch,
                transfer: None,
                step: None,
                npu: None,
                chunk: None,
                message: format!(
                    "collective_time_ns is declared as {declared} but the simulator gives {}",
                    t.collective_time_ns
                ),
            });
        }
    }
    let bounds = collective.filter(|_| bounds).map(|c| lower_bounds(&s.topology, &c));
    Some(CheckReport {
        valid: report.valid,
        violations: report.violations,
        violation_count: report.violation_count,
        violation_count_capped: report.violation_count_capped,
        collective_time_ns: timing.as_ref().map(|t| t.collective_time_ns),
        lower_bound_ns: bounds.as_ref().and_then(|b| b.lower_bound_ns),
        lower_bounds: bounds,
        rounds: s.rounds(),
        transfers: s.transfers.len(),
        timing,
    })
}

/// `check`, after refusing a schedule larger than `limits` allow (its topology's NPUs, its
/// collective's chunks, and the (npu, slot) cells its declared chunks and scratch make for the
/// validator and the simulator), estimated before either allocates for it.
pub fn check_within(s: &Schedule, limits: &Limits) -> Result<CheckReport, crate::error::InputError> {
    Ok(check_within_until(s, limits, &|| false)?.expect("never stopped"))
}

/// `check_within`, asking `stop` as the check runs: `Ok(None)` once it says so (the service
/// stops a check whose client has left).
pub fn check_within_until(
    s: &Schedule,
    limits: &Limits,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<Option<CheckReport>, crate::error::InputError> {
    admit(s, limits)?;
    Ok(check_until(s, true, stop))
}

/// The limits `check_within_until` checks `s` against before it allocates anything; `Ok` with
/// `check_peak_bytes(s)` when it is within them.
pub fn check_cost_within(s: &Schedule, limits: &Limits) -> Result<u64, crate::error::InputError> {
    admit(s, limits)?;
    Ok(check_peak_bytes(s))
}

fn admit(s: &Schedule, limits: &Limits) -> Result<(), crate::error::InputError> {
    request::check_npus(&s.topology, limits)?;
    request::check_chunk_count(&s.collective, &s.topology, limits)
        .map_err(|e| request::npus_named(e.within("collective"), &s.collective, "collective.group"))?;
    let cells = s.topology.npus().checked_mul(s.slots());
    // Past the limit only a schedule the replays take on ranges is checked: they hold runs,
    // not a cell per (npu, slot) (the simulator refuses a table past it; the validator's
    // chunk replay, for one that breaks a rule, keeps its groups small).
    let on_ranges = || crate::runs::worth_ranges(s) && crate::runs::ChunkRanges::new(s).is_some();
    if cells.is_none_or(|n| n > crate::limits::MAX_CHECKED_CELLS) && !on_ranges() {
        return Err(crate::error::InputError::new(
            "num_chunks",
            format!(
                "{} chunks and {} scratch slots on {} NPUs make more than {} (npu, slot) cells to check, and its messages' chunks are not runs the check replays whole",
                s.num_chunks,
                s.scratch.len(),
                s.topology.npus(),
                crate::limits::MAX_CHECKED_CELLS
            ),
        ));
    }
    Ok(())
}

/// About the most memory `check_within_until(s, ..)` holds beyond the schedule itself, in
/// bytes, worked out before it allocates: the validator's replay tables side by side with the
/// simulator's (an upper bound: schedules settled on ranges hold far less). For callers that
/// admit checks by their cost, as the service does.
fn check_peak_bytes(s: &Schedule) -> u64 {
    crate::validate::replay_peak_bytes(s) + crate::sim::table_bytes(s)
}

/// A failure of the engine itself (never the caller's fault).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A producer emitted a schedule the validator rejects: a bug in that producer.
    #[error("internal: the {algorithm} schedule failed validation: {first}")]
    InvalidSchedule {
        /// The producer.
        algorithm: String,
        /// The first violation's message.
        first: String,
        /// The whole verdict.
        report: Box<CheckReport>,
    },
}

/// The gate for producers: returns the schedule with `collective_time_ns` filled in, or an
/// error if it does not validate. Nothing leaves the engine without passing here.
pub fn finalize(s: Schedule) -> Result<(Schedule, CheckReport), EngineError> {
    finalize_bounded(s, true)
}

/// `finalize`, with the lower bounds left out of the report unless `bounds` (see
/// `check_bounded`); the schedule is validated and timed all the same.
pub(super) fn finalize_bounded(s: Schedule, bounds: bool) -> Result<(Schedule, CheckReport), EngineError> {
    match finalize_until(s, bounds, &|| false) {
        Ok(done) => Ok(done),
        Err(Error::Internal(e)) => Err(e),
        Err(e) => unreachable!("a check that is never stopped stopped: {e}"),
    }
}

/// `finalize_bounded` for a run its caller may cancel: the check asks `cancelled` as it goes
/// (`Error::Cancelled`); an invalid schedule is `Error::Internal`.
pub(super) fn finalize_until(
    s: Schedule,
    bounds: bool,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, CheckReport), Error> {
    finalize_timed_until(s, None, bounds, cancelled)
}

/// The full check of a deferred candidate (`Gate::Deferred`): validated, with the simulator's
/// report it already has (the schedule is the one simulated: nothing was changed since).
pub(super) fn finalize_deferred(
    s: Schedule,
    report: CheckReport,
    bounds: bool,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, CheckReport), Error> {
    finalize_timed_until(s, report.timing, bounds, cancelled)
}

pub(super) fn finalize_timed_until(
    mut s: Schedule,
    known: Option<Timing>,
    bounds: bool,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, CheckReport), Error> {
    ready_for_check(&mut s)?;
    let r = check_timed_until(&s, known, bounds, cancelled).ok_or(Error::Cancelled)?;
    accept(s, r)
}

/// The schedule with its simulated time, when the report says it is valid; else the
/// producer's bug (`Error::Internal`).
fn accept(mut s: Schedule, r: CheckReport) -> Result<(Schedule, CheckReport), Error> {
    if !r.valid {
        return Err(Error::Internal(EngineError::InvalidSchedule {
            algorithm: s.algorithm.clone().unwrap_or_default(),
            first: r.violations.first().map(|v| v.message.clone()).unwrap_or_default(),
            report: Box::new(r),
        }));
    }
    if r.collective_time_ns.is_none() {
        // Valid, yet not simulated: only a schedule past the simulator's table limit that it
        // could not replay on ranges (`sim::SimError::TooLarge`).
        return Err(Error::refused(
            super::Refuser::Simulator,
            format!(
                "the {} schedule: {} (npu, slot) cells, more than the {} a table of the simulator holds, and its messages' chunks do not stay runs it replays whole",
                s.algorithm.as_deref().unwrap_or("produced"),
                s.topology.npus().saturating_mul(s.slots()),
                crate::limits::MAX_CHECKED_CELLS
            ),
        ));
    }
    s.collective_time_ns = r.collective_time_ns;
    Ok((s, r))
}

/// Refuses a schedule its own readers would refuse (`Transfers`' reader holds at most `max`
/// chunk ids in distinct chunk lists, `limits::MAX_LIST_ENTRIES`): written, it could not be read
/// back, validated or exported. Counted before anything else is done with it (lists are held
/// once by content, so only a producer of that many different lists reaches it; the 3-D
/// bucket's all-gather on torus:16x32x32 at 1 GiB did while each message's list counted again).
fn readable(s: &Schedule, max: usize) -> Result<(), Error> {
    let held = s.transfers.list_entries();
    if held <= max {
        return Ok(());
    }
    Err(Error::refused(
        super::Refuser::ScheduleFormat,
        format!(
            "{} gives {} transfers whose distinct chunk lists hold {held} chunk ids, more than the {max} a reader of the format holds: it could be written but not read back",
            s.algorithm.as_deref().unwrap_or("the producer"),
            s.transfers.len()
        ),
    ))
}

/// A producer's schedule as every gate times it: refused when its reader would refuse it
/// (`readable`), else with no declared time, and the chunking it was built with recorded
/// (format v1 reads a missing one as 1).
pub(super) fn ready_for_check(s: &mut Schedule) -> Result<(), Error> {
    readable(s, crate::limits::MAX_LIST_ENTRIES)?;
    s.collective_time_ns = None;
    s.collective.chunks_per_npu = Some(s.collective.chunks());
    Ok(())
}

/// How a candidate's schedule is checked before it is handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gate {
    /// Validated and simulated (`finalize_until`), with the lower bounds when `bounds`.
    Full { bounds: bool },
    /// Only simulated: `auto` validates the one schedule it returns (its losers never leave
    /// the engine), so at 4096 NPUs the greedy's losing candidate costs no validation.
    Deferred,
}

/// A deferred candidate's schedule and report: its simulated time, and `valid` false until
/// the full check runs.
fn deferred(mut s: Schedule, timing: Timing) -> (Schedule, CheckReport) {
    s.collective_time_ns = Some(timing.collective_time_ns);
    let report = CheckReport {
        valid: false,
        violations: Vec::new(),
        violation_count: 0,
        violation_count_capped: false,
        collective_time_ns: s.collective_time_ns,
        lower_bound_ns: None,
        lower_bounds: None,
        rounds: timing.rounds,
        transfers: s.transfers.len(),
        timing: Some(timing),
    };
    (s, report)
}

/// `Gate::Deferred` for a candidate that may win, when nothing has simulated it yet: the
/// simulator runs first and the validator beside it (on the pool's other threads, or after
/// it on this one); the validator stops as soon as the simulated time does not beat the
/// `incumbent` (the candidate then loses, and is deferred as any). A winner so leaves
/// validated: `auto` does not validate it again after the simulation (the greedy on
/// torus:64x64 after failures: 8 M transfers, each check about 8 s), and of several runs side
/// by side each new best is validated while the others still run.
///
/// `stop` ends the check: before the simulation ends, with `Error::Cancelled`; after, with the
/// candidate deferred (the caller tells a cancel from its deadline).
pub(super) fn gate_speculative_until(
    mut s: Schedule,
    incumbent: &Incumbent,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, CheckReport), Error> {
    use std::sync::atomic::{AtomicBool, Ordering};
    ready_for_check(&mut s)?;
    let lost = AtomicBool::new(false);
    let stop_validation = || stop() || lost.load(Ordering::Relaxed);
    let (simulated, validated) = rayon::join(
        || {
            let r = crate::sim::simulate_until(&s, stop);
            if let Ok(t) = &r
                && !incumbent.offer(t.collective_time_ns)
            {
                lost.store(true, Ordering::Relaxed);
            }
            r
        },
        || validate_with_collective(&s, &stop_validation),
    );
    match (validated, simulated) {
        (_, Err(crate::sim::SimError::Stopped)) => Err(Error::Cancelled),
        // It loses: deferred as any loser, whether or not the validator had finished.
        (_, Ok(timing)) if lost.into_inner() => Ok(deferred(s, timing)),
        // Validated in full (the simulator may have refused it: the validator says why).
        (Some(v), simulated) => {
            let r = complete(&s, v, simulated, false).ok_or(Error::Cancelled)?;
            accept(s, r).inspect_err(|e| tracing::error!("a deferred candidate validated beside its simulation: {e}"))
        }
        // Stopped after its simulation: deferred.
        (None, Ok(timing)) => Ok(deferred(s, timing)),
        (None, Err(_)) => Err(Error::Cancelled),
    }
}

/// `finalize_until` under `gate`. A deferred schedule gets its simulated time and a report
/// whose `valid` is false until the full check runs; one the simulator cannot replay is checked
/// in full at once (the validator then says why).
pub(super) fn gate_until(
    s: Schedule,
    gate: Gate,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, CheckReport), Error> {
    gate_timed_until(s, None, gate, cancelled)
}

/// `gate_until`, reusing `known` (the simulator's report on this very schedule, from a
/// ranking of candidates) instead of simulating it again.
pub(super) fn gate_timed_until(
    mut s: Schedule,
    known: Option<Timing>,
    gate: Gate,
    cancelled: &(dyn Fn() -> bool + Sync),
) -> Result<(Schedule, CheckReport), Error> {
    match gate {
        Gate::Full { bounds } => finalize_timed_until(s, known, bounds, cancelled),
        Gate::Deferred => {
            ready_for_check(&mut s)?;
            let simulated = match known {
                Some(t) => Ok(t),
                None => crate::sim::simulate_until(&s, cancelled),
            };
            match simulated {
                Ok(timing) => Ok(deferred(s, timing)),
                Err(crate::sim::SimError::Stopped) => Err(Error::Cancelled),
                // One the simulator cannot replay: checked in full (the validator says why).
                Err(_) => finalize_until(s, false, cancelled),
            }
        }
    }
}

/// Runs `f`, logging its wall time under `ccsynth::timing` (the check's two halves run side
/// by side: which one sets its time is what a profile of a large schedule asks first).
fn timed<T>(what: &'static str, f: impl FnOnce() -> T) -> T {
    let began = std::time::Instant::now();
    let out = f();
    tracing::debug!(target: "ccsynth::timing", wall_ms = began.elapsed().as_secs_f64() * 1e3, "{what}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check of a schedule asks its caller whether to stop all along (validation's two
    /// passes and the simulation, every 65,536 transfers), and a stop at any of those asks ends
    /// it: a cancelled job does not wait for the check of tens of millions of transfers.
    #[test]
    fn the_check_of_a_schedule_stops_at_every_poll() {
        let topo = crate::topology::parse_topology("ring:512").unwrap();
        let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 512 << 10);
        let s = crate::baselines::build("ring", &topo, &spec).unwrap();
        let n = s.transfers.len();
        assert!(n > 3 * (1 << 16), "{n} transfers");
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let polls = AtomicUsize::new(0);
        let counting = || {
            polls.fetch_add(1, SeqCst);
            false
        };
        let whole = check_until(&s, false, &counting).expect("never told to stop");
        assert!(whole.valid);
        // Each of the three passes asks once per 65,536 transfers, from its first.
        let per_pass = n.div_ceil(1 << 16);
        assert_eq!(polls.load(SeqCst), 3 * per_pass, "{n} transfers");
        for k in 1..=polls.load(SeqCst) {
            let asked = AtomicUsize::new(0);
            let stop_at_k = || asked.fetch_add(1, SeqCst) + 1 >= k;
            assert!(check_until(&s, false, &stop_at_k).is_none(), "a stop at poll {k} was not heeded");
            // Validation and simulation run side by side: once told, each asks at most once
            // more (the other's next poll), and then stops.
            let asked = asked.load(SeqCst);
            assert!((k..=k + 1).contains(&asked), "it went on asking after poll {k}: {asked} polls");
        }
    }

    /// A schedule is refused (by the format, before its check) exactly when its distinct chunk
    /// lists hold more chunk ids than its reader holds, counted as the reader counts them: the
    /// same count after a round trip through the compact form, uneven lists included.
    #[test]
    fn a_schedule_its_reader_would_refuse_never_leaves() {
        let topo = crate::topology::parse_topology("torus:4x4x4").unwrap();
        let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 64 << 20);
        let s = crate::baselines::build("bucket", &topo, &spec).unwrap();
        let held = s.transfers.list_entries();
        let uneven = s
            .transfers
            .lists()
            .filter(|l| l.windows(3).any(|w| w[2].wrapping_sub(w[1]) != w[1].wrapping_sub(w[0])))
            .count();
        assert!(held > 0 && uneven > 0, "{held} ids, {uneven} uneven lists");
        let text = serde_json::to_string(&s.written(crate::schedule::Form::Compact)).unwrap();
        assert_eq!(Schedule::from_json(&text).unwrap().transfers.list_entries(), held);
        readable(&s, held).unwrap();
        let e = readable(&s, held - 1).unwrap_err();
        assert_eq!(e.kind(), super::super::ErrorKind::Refused);
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("schedule v1: bucket gives {} transfers whose distinct chunk lists hold {held} chunk ids, more than the {}", s.transfers.len(), held - 1)),
            "{text}"
        );
        assert!(finalize(s).is_ok());
    }

    fn ring_all_gather() -> Schedule {
        let topo = crate::topology::parse_topology("ring:16").unwrap();
        let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 16 << 20);
        crate::baselines::build("ring", &topo, &spec).unwrap()
    }

    /// A candidate validated beside its simulation (`gate_speculative_until`): with no
    /// incumbent, or one it beats, it leaves validated and timed as the full check times it;
    /// at or above the incumbent it is deferred as any loser (simulated, `valid` false) however
    /// far the validator got; a broken one that would win is the producer's bug.
    #[test]
    fn a_speculative_gate_validates_winners_and_defers_losers() {
        let s = ring_all_gather();
        let full = check_bounded(&s, false);
        assert!(full.valid);
        let t = full.collective_time_ns.unwrap();
        for incumbent in [None, Some(t * 1.5)] {
            let (out, r) = gate_speculative_until(s.clone(), &Incumbent::new(incumbent), &|| false).unwrap();
            assert!(r.valid, "{incumbent:?}");
            assert_eq!(r.collective_time_ns, Some(t));
            assert_eq!(out.collective_time_ns, Some(t));
        }
        for incumbent in [t, t / 2.0] {
            let (out, r) = gate_speculative_until(s.clone(), &Incumbent::new(Some(incumbent)), &|| false).unwrap();
            assert!(!r.valid && r.violations.is_empty(), "{incumbent}");
            assert_eq!(out.collective_time_ns, Some(t));
        }
        // The last transfer dropped: an NPU misses a chunk.
        let mut broken = s.clone();
        broken.transfers = broken.transfers.permuted(&(0..s.transfers.len() as u32 - 1).collect::<Vec<_>>());
        let e = gate_speculative_until(broken.clone(), &Incumbent::new(None), &|| false).unwrap_err();
        assert!(matches!(e, Error::Internal(EngineError::InvalidSchedule { .. })), "{e}");
        // Losing, it is not validated (nothing it sends leaves the engine unchecked: `auto`
        // validates the winner it returns).
        let (_, r) = gate_speculative_until(broken, &Incumbent::new(Some(1.0)), &|| false).unwrap();
        assert!(!r.valid && r.violations.is_empty());
        // Cancelled: no verdict.
        assert!(matches!(gate_speculative_until(s.clone(), &Incumbent::new(None), &|| true), Err(Error::Cancelled)));
        // Several runs side by side share the incumbent: the first is validated and becomes
        // it, one no faster after it is only simulated, and one faster is validated again.
        let shared = Incumbent::new(None);
        let (_, first) = gate_speculative_until(s.clone(), &shared, &|| false).unwrap();
        let (_, same) = gate_speculative_until(s.clone(), &shared, &|| false).unwrap();
        assert!(first.valid && !same.valid && same.collective_time_ns == Some(t));
        assert!(shared.offer(t / 2.0) && !shared.offer(t / 2.0) && !shared.offer(t));
        // Stopped once simulated (the validator asks after the simulator's first poll): the
        // candidate is deferred with its time, not dropped.
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let after_the_simulation = || asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1;
        let rayon1 = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (out, r) =
            rayon1.install(|| gate_speculative_until(s, &Incumbent::new(None), &after_the_simulation)).unwrap();
        assert!(!r.valid && r.violations.is_empty() && out.collective_time_ns == Some(t));
    }
}
