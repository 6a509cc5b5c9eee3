//! What the CLI reports when a command fails: the message, worded for a terminal (flags, not
//! the API's JSON paths), and the exit code of its kind (README, "Exit codes"), so a script
//! can tell a mistake in its flags from a refusal, a time limit and a bug.

use super::input::flags;
use crate::engine;

/// A command's exit code when it fails (0 is success; 1 is `validate`'s and `simulate`'s
/// verdict on a schedule, not a failure of the command).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// A mistake in the flags or the input files (a value over a limit included).
    BadInput = 2,
    /// The request is fine, but the algorithm, export format or picture cannot serve it.
    Refused = 3,
    /// The time limit ran out (or the run was stopped) before any schedule was found.
    TimeLimit = 4,
    /// A bug in ccsynth (sysexits' EX_SOFTWARE).
    Internal = 70,
}

/// A failed command: what to print and how to exit.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub exit: Exit,
    /// The message (printed after `ccsynth: `).
    pub message: String,
}

impl CliError {
    /// The same failure, its message prefixed with what it concerns (a file, a flag).
    pub fn context(self, what: &str) -> CliError {
        CliError { message: format!("{what}: {}", self.message), ..self }
    }
}

/// Every message the CLI builds itself is about its input.
impl From<String> for CliError {
    fn from(message: String) -> Self {
        CliError { exit: Exit::BadInput, message }
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> Self {
        CliError::from(message.to_string())
    }
}

/// An engine error by its kind, worded for a terminal (input errors and the time limit by
/// flag; a bug says it is one).
impl From<engine::Error> for CliError {
    fn from(e: engine::Error) -> Self {
        let exit = match e.kind() {
            engine::ErrorKind::Input => Exit::BadInput,
            engine::ErrorKind::Refused => Exit::Refused,
            engine::ErrorKind::TimeLimit | engine::ErrorKind::Cancelled => Exit::TimeLimit,
            engine::ErrorKind::Internal => Exit::Internal,
        };
        let message = match e {
            engine::Error::Input(e) => flags(e),
            engine::Error::TimeLimit { limit_s } => {
                let limit_s = crate::units::short(limit_s);
                format!("the time limit of {limit_s} s ran out before any schedule was found; raise --time-limit")
            }
            e @ engine::Error::Internal(_) => format!("internal error (a bug in ccsynth; please report it): {e}"),
            e => e.to_string(),
        };
        CliError { exit, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::InputError;

    /// Every kind of engine error exits with its own code, and the messages name flags.
    #[test]
    fn engine_errors_exit_by_kind() {
        let input = CliError::from(engine::Error::Input(InputError::new("options.time_limit_s", "0: too short")));
        assert_eq!(input.exit, Exit::BadInput);
        assert!(input.message.starts_with("--time-limit: "), "{}", input.message);
        let refused = CliError::from(engine::Error::Unsupported { by: engine::Refuser::MscclXml, reason: "x".into() });
        assert_eq!((refused.exit, refused.message.as_str()), (Exit::Refused, "MSCCL XML: x"));
        let priced = CliError::from(engine::Error::PricedOut { price_ns: 2.0, incumbent_ns: 1.0 });
        assert_eq!(priced.exit, Exit::Refused);
        let late = CliError::from(engine::Error::TimeLimit { limit_s: 0.5 });
        assert_eq!(late.exit, Exit::TimeLimit);
        assert!(late.message.contains("raise --time-limit"), "{}", late.message);
        assert_eq!(CliError::from(engine::Error::Cancelled).exit, Exit::TimeLimit);
        // A schedule that moves nothing, as a producer's bug would leave it.
        let topo = crate::topology::parse_topology("ring:4").unwrap();
        let spec = crate::collective::CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 4096);
        let c = crate::collective::Collective::build(&spec, &topo).unwrap();
        let report = engine::check(&crate::schedule::Schedule::new(topo, &c, "ring"));
        assert!(!report.valid);
        let bug = CliError::from(engine::Error::Internal(engine::EngineError::InvalidSchedule {
            algorithm: "ring".into(),
            first: "lost chunk".into(),
            report: Box::new(report),
        }));
        assert_eq!(bug.exit, Exit::Internal);
        assert!(bug.message.starts_with("internal error (a bug in ccsynth"), "{}", bug.message);
        let own = CliError::from("--size is required").context("synth");
        assert_eq!((own.exit, own.message.as_str()), (Exit::BadInput, "synth: --size is required"));
        assert_eq!([Exit::BadInput, Exit::Refused, Exit::TimeLimit, Exit::Internal].map(|e| e as i32), [2, 3, 4, 70]);
    }
}
