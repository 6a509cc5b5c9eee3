//! Why a run gave no schedule (`Error`), one enum every door maps the same way, and its
//! kind (`ErrorKind`): what a door tells apart (the CLI's exit code, the API's status).

use super::EngineError;
use serde::Serialize;

/// Why a run gave no schedule. Every door maps these by `Error::kind`: `Input` is the caller's
/// mistake (exit 2, HTTP 422), naming the request's field; `Unsupported` and `PricedOut` are a
/// refusal (exit 3); `TimeLimit` and `Cancelled` a run stopped before any schedule (exit 4);
/// `Internal` is a bug (exit 70).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is wrong; the error names its field.
    #[error("{0}")]
    Input(#[from] crate::error::InputError),
    /// `by` cannot serve this case (a baseline's topology, a TEN too fine, an executor's
    /// limit, …); `reason` says why in its own words.
    #[error("{}{reason}", by.prefix())]
    Unsupported {
        /// Who refused.
        by: Refuser,
        /// Why, in the refuser's words.
        reason: String,
    },
    /// The cancel poll said stop.
    #[error("cancelled")]
    Cancelled,
    /// The time limit ran out before the algorithm had any schedule.
    #[error(
        "the time limit of {} s ran out before any schedule was found; raise options.time_limit_s",
        crate::units::short(*limit_s)
    )]
    TimeLimit {
        /// The limit, seconds.
        limit_s: f64,
    },
    /// Every run of the synthesizer was priced above a schedule the caller already has
    /// (`auto`'s fastest so far): none was built.
    #[error(
        "skipped before it was built: its busiest link alone is busy {:.3} us, longer than a schedule already found ({:.3} us)",
        price_ns / 1e3,
        incumbent_ns / 1e3
    )]
    PricedOut {
        /// The lowest price of its runs, ns.
        price_ns: f64,
        /// The schedule already found, ns.
        incumbent_ns: f64,
    },
    /// A bug: a producer's schedule failed validation.
    #[error(transparent)]
    Internal(#[from] EngineError),
}

/// A synthesizer's failure as the doors see it. `SynthError::Cancelled` is the caller's
/// poll: the greedy's runs tell a deadline from a cancel before they get here.
impl From<crate::synth::SynthError> for Error {
    fn from(e: crate::synth::SynthError) -> Self {
        match e {
            crate::synth::SynthError::Input(e) => Error::Input(e),
            crate::synth::SynthError::Cancelled => Error::Cancelled,
            e => Error::Unsupported { by: Refuser::Synthesizer, reason: e.to_string() },
        }
    }
}

/// A baseline's failure as the doors see it. `Stopped` comes only from `build_within`, whose
/// caller (`build_baseline`) tells a deadline from a cancel first.
impl From<crate::baselines::BaselineError> for Error {
    fn from(e: crate::baselines::BaselineError) -> Self {
        match e {
            crate::baselines::BaselineError::Input(e) => Error::Input(e),
            crate::baselines::BaselineError::Stopped => Error::Cancelled,
            e => Error::Unsupported { by: Refuser::Baseline, reason: e.to_string() },
        }
    }
}

/// Who refused a case it cannot serve (`Error::Unsupported`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refuser {
    /// A synthesizer (the greedy's planners, the ILP): the collective or its TEN is beyond it.
    Synthesizer,
    /// A baseline: the topology or the collective is not of its shape.
    Baseline,
    /// The MSCCL XML writer: the schedule is beyond what MSCCL (or RCCL) runs.
    MscclXml,
    /// The MSCCL++ plan writer: the schedule is beyond what the MSCCL++ executor runs.
    MscclppPlan,
    /// The Chakra ET writer: the schedule is beyond what it writes for ASTRA-sim.
    ChakraEt,
    /// A picture or trace that would hold more slices than a door allows.
    Picture,
    /// The simulator: the schedule cannot be replayed.
    Simulator,
    /// Schedule v1's readers: the schedule could be written but not read back.
    ScheduleFormat,
}

impl Refuser {
    /// What the message starts with: the export formats name themselves.
    fn prefix(self) -> &'static str {
        match self {
            Refuser::MscclXml => "MSCCL XML: ",
            Refuser::MscclppPlan => "MSCCL++ plan: ",
            Refuser::ChakraEt => "Chakra ET: ",
            Refuser::ScheduleFormat => "schedule v1: ",
            Refuser::Synthesizer | Refuser::Baseline | Refuser::Picture | Refuser::Simulator => "",
        }
    }
}

/// What a door tells apart in an `Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The caller's mistake: fix the request.
    Input,
    /// The request is fine, but what it asks for cannot be served (an algorithm, an export
    /// format or a picture refused it, or a candidate was priced out).
    Refused,
    /// The time limit ran out before any schedule was found: raise it.
    TimeLimit,
    /// The caller (or a shutdown) stopped the run.
    Cancelled,
    /// A bug in ccsynth.
    Internal,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 5] =
        [ErrorKind::Input, ErrorKind::Refused, ErrorKind::TimeLimit, ErrorKind::Cancelled, ErrorKind::Internal];

    /// The stored (and JSON) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Input => "input",
            ErrorKind::Refused => "refused",
            ErrorKind::TimeLimit => "time_limit",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Internal => "internal",
        }
    }

    /// The kind a stored spelling names, if any.
    pub fn parse(s: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Input(_) => ErrorKind::Input,
            Error::Unsupported { .. } | Error::PricedOut { .. } => ErrorKind::Refused,
            Error::TimeLimit { .. } => ErrorKind::TimeLimit,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::Internal(_) => ErrorKind::Internal,
        }
    }

    /// A refusal by `by`.
    pub(crate) fn refused(by: Refuser, reason: impl std::fmt::Display) -> Error {
        Error::Unsupported { by, reason: reason.to_string() }
    }
}
