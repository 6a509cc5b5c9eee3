//! The `ccsynth` binary: logging set-up and exit codes around `ccsynth::cli`.

use std::io::IsTerminal;

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CCSYNTH_LOG").unwrap_or_else(|_| "warn,highs=error".into()),
        )
        .init();
    std::process::exit(ccsynth::cli::main());
}
