//! The `ccsynth` binary: logging set-up and exit codes around `ccsynth::cli`.

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CCSYNTH_LOG").unwrap_or_else(|_| "warn,highs=error".into()),
        )
        .init();
    std::process::exit(ccsynth::cli::main());
}
