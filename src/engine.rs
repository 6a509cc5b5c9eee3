//! The engine facade: the one gate schedules pass through (validate, simulate, bound) before
//! anyone sees them.

use crate::bounds::{LowerBounds, lower_bounds};
use crate::collective::Collective;
use crate::schedule::Schedule;
use crate::sim::{Timing, simulate};
use crate::validate::{Report, Violation, ViolationKind, validate};
use serde::Serialize;

/// What `ccsynth validate` prints: the validator's verdict plus time and bounds.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub valid: bool,
    pub violations: Vec<Violation>,
    pub violation_count: usize,
    /// Simulated time; present whenever every transfer names existing nodes and links.
    pub collective_time_ns: Option<f64>,
    pub lower_bound_ns: Option<f64>,
    pub lower_bounds: Option<LowerBounds>,
    pub rounds: usize,
    pub transfers: usize,
    #[serde(skip)]
    pub timing: Option<Timing>,
}

/// Validates, simulates and bounds a schedule. A declared `collective_time_ns` that differs
/// from the simulated time (relative 1e-9) is a violation: producers must report honest numbers.
pub fn check(s: &Schedule) -> CheckReport {
    let mut report: Report = validate(s);
    let timing = if report.simulatable {
        simulate(s).ok()
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
    let bounds = Collective::build_unchecked(&s.collective, &s.topology)
        .ok()
        .map(|c| lower_bounds(&s.topology, &c));
    CheckReport {
        valid: report.valid,
        violations: report.violations,
        violation_count: report.violation_count,
        collective_time_ns: timing.as_ref().map(|t| t.collective_time_ns),
        lower_bound_ns: bounds.as_ref().and_then(|b| b.lower_bound_ns),
        lower_bounds: bounds,
        rounds: s.rounds(),
        transfers: s.transfers.len(),
        timing,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A producer emitted a schedule the validator rejects: a bug in that producer.
    #[error("internal: the {algorithm} schedule failed validation: {first}")]
    InvalidSchedule {
        algorithm: String,
        first: String,
        report: Box<CheckReport>,
    },
}

/// The gate for producers: returns the schedule with `collective_time_ns` filled in, or an
/// error if it does not validate. Nothing leaves the engine without passing here.
pub fn finalize(mut s: Schedule) -> Result<(Schedule, CheckReport), EngineError> {
    s.collective_time_ns = None;
    let r = check(&s);
    if !r.valid {
        return Err(EngineError::InvalidSchedule {
            algorithm: s.algorithm.clone().unwrap_or_default(),
            first: r
                .violations
                .first()
                .map(|v| v.message.clone())
                .unwrap_or_default(),
            report: Box::new(r),
        });
    }
    s.collective_time_ns = r.collective_time_ns;
    Ok((s, r))
}
