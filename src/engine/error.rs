//! Why a run gave no schedule (`Error`), one enum every door maps the same way.

use super::EngineError;

/// Why a run gave no schedule. Every door maps these the same way: `Input` is the caller's
/// mistake (exit 2, HTTP 422), naming the request's field; `Unsupported` is an algorithm that
/// cannot serve this case; `Internal` is a bug.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is wrong; the error names its field.
    #[error("{0}")]
    Input(#[from] crate::error::InputError),
    /// The algorithm cannot serve this case (a baseline's topology, a TEN too fine, …).
    #[error("{0}")]
    Unsupported(String),
    /// The cancel poll said stop.
    #[error("cancelled")]
    Cancelled,
    /// The time limit ran out before the algorithm had any schedule.
    #[error("the time limit of {limit_s} s ran out before any schedule was found; raise options.time_limit_s")]
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
            e => Error::Unsupported(e.to_string()),
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
            e => Error::Unsupported(e.to_string()),
        }
    }
}
