//! `ccsynth serve`'s flags: the service's address, database, workers and every limit it
//! enforces (queue, sizes, time, clients, tokens).

/// `ccsynth serve`'s flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on (env CCSYNTH_ADDR).
    #[arg(long, env = "CCSYNTH_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// sqlite:PATH or postgres://… (env DATABASE_URL; default an SQLite file
    /// ccsynth.db in the working directory).
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite:ccsynth.db")]
    pub database_url: String,
    /// Concurrent solves (default: the number of cores).
    #[arg(long, value_parser = whole::<usize, 1>)]
    pub workers: Option<usize>,
    /// Threads of each worker's own pool for its job's parallel runs (default: the number of
    /// cores; a request's options.threads overrides it).
    #[arg(long, value_parser = whole::<usize, 1>)]
    pub job_threads: Option<usize>,
    /// Jobs waiting beyond which new ones are refused with 429.
    #[arg(long, allow_negative_numbers = true, default_value_t = 10_000, value_parser = whole::<i64, 1>)]
    pub max_queue: i64,
    /// Request body limit (`16MiB`, `1MB`, bytes; 413 beyond).
    #[arg(long, allow_negative_numbers = true, default_value = "16MiB", value_parser = bytes_at_least_one)]
    pub max_body_bytes: usize,
    /// NPUs per topology.
    #[arg(long, allow_negative_numbers = true, default_value_t = 4096, value_parser = whole::<usize, 1>)]
    pub max_npus: usize,
    /// Links of a generated topology (fc, hyperx and dragonfly grow faster than their NPUs),
    /// estimated from the spec before it is built.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1 << 21, value_parser = whole::<usize, 1>)]
    pub max_links: usize,
    /// Chunks per collective.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1 << 20, value_parser = whole::<usize, 1>)]
    pub max_chunks: usize,
    /// Cap on a request's time limit, seconds.
    #[arg(long, allow_negative_numbers = true, default_value_t = 600.0)]
    pub max_solve_s: f64,
    /// A running job is run again by another worker when its lease lapses (ms).
    #[arg(long, allow_negative_numbers = true, default_value_t = 15_000, value_parser = whole::<i64, 1>)]
    pub lease_ms: i64,
    /// On SIGTERM, time running jobs get before they go back to the queue (ms).
    #[arg(long, allow_negative_numbers = true, default_value_t = 10_000)]
    pub grace_ms: u64,
    /// On SIGTERM, time the server keeps answering 503 to new work and to /readyz before
    /// it closes the listener (ms).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1_000)]
    pub drain_ms: u64,
    /// Claims of one job before it is failed (its worker keeps stopping without finishing).
    #[arg(long, allow_negative_numbers = true, default_value_t = 3, value_parser = whole::<i64, 1>)]
    pub max_attempts: i64,
    /// Largest schedule stored, counted as its explicit JSON (`8GiB`, `500MB`, bytes; default 8 GiB; the compact form GET serves is shorter); a larger result fails its job with the reason. Large schedules are stored packed and compressed, and served as a stream: this bounds what one GET sends, not memory
    #[arg(long, allow_negative_numbers = true, default_value = "8GiB", value_parser = bytes_at_least_one)]
    pub max_result_bytes: usize,
    /// Memory (MiB) that schedule exports and `/v1/validate` checks computed at once may use,
    /// by their estimates (a heavier one waits for room; one larger than the budget runs alone).
    #[arg(long, allow_negative_numbers = true, default_value_t = 2_048, value_parser = whole::<u32, 1>)]
    pub export_memory_mb: u32,
    /// Interactive jobs (`"priority": "interactive"`, claimed before normal ones) one client
    /// may have queued or running (without --tokens-file: the whole service).
    #[arg(long, allow_negative_numbers = true, default_value_t = 2, value_parser = whole::<i64, 0>)]
    pub max_interactive_per_client: i64,
    /// The longest time limit (seconds) an interactive job may ask for.
    #[arg(long, allow_negative_numbers = true, default_value_t = 60.0)]
    pub max_interactive_s: f64,
    /// A connection that has not sent a whole request head this long after it opened, or
    /// after its last response, is closed (ms).
    #[arg(long, allow_negative_numbers = true, default_value_t = 10_000, value_parser = whole::<u64, 1>)]
    pub header_timeout_ms: u64,
    /// A request body that has not arrived whole this long after its head is answered 408 and
    /// its connection closed (ms).
    #[arg(long, allow_negative_numbers = true, default_value_t = 30_000, value_parser = whole::<u64, 1>)]
    pub body_timeout_ms: u64,
    /// Open connections at most; one more is closed on accept. Keep it below the process's
    /// file-descriptor limit (`ulimit -n`).
    #[arg(long, allow_negative_numbers = true, default_value_t = 4_096, value_parser = whole::<usize, 1>)]
    pub max_connections: usize,
    /// Clients and their bearer tokens, one `NAME TOKEN` per line (tokens of 16 characters or
    /// more); with it every /v1/ route needs `Authorization: Bearer TOKEN`, and jobs, batches
    /// and schedules are each client's own (env CCSYNTH_TOKENS_FILE).
    #[arg(long, env = "CCSYNTH_TOKENS_FILE")]
    pub tokens_file: Option<std::path::PathBuf>,
    /// Serve without tokens on an address other than loopback (anyone who can reach it may
    /// queue, cancel and delete) (env CCSYNTH_ALLOW_OPEN: 1, true, yes or on; 0, false, no or
    /// off).
    #[arg(long, env = "CCSYNTH_ALLOW_OPEN", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_open: bool,
    /// A Host name the server answers to (repeatable; env CCSYNTH_ALLOWED_HOSTS, comma-separated).
    /// Default on a loopback address: localhost, 127.0.0.1 and ::1 (a page that rebinds its
    /// own name to 127.0.0.1 is refused); elsewhere any.
    #[arg(long = "allowed-host", env = "CCSYNTH_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,
    /// Queued and running jobs one client may have (429 beyond); with --tokens-file.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1_000, value_parser = whole::<i64, 1>)]
    pub max_active_per_client: i64,
    /// Seconds of declared solving (the sum of the time limits) one client's queued and
    /// running jobs may add up to (429 beyond); with --tokens-file.
    #[arg(long, allow_negative_numbers = true, default_value_t = 86_400.0)]
    pub max_client_seconds: f64,
    /// Requests per second one client may make on average, in bursts of as many (429 with
    /// Retry-After beyond; 0: no limit); with --tokens-file.
    #[arg(long, allow_negative_numbers = true, default_value_t = 100.0)]
    pub max_requests_per_s: f64,
    /// With --tokens-file, /metrics needs a token too.
    #[arg(long)]
    pub private_metrics: bool,
    /// Requests with a missing or unknown token one address may make per second on average,
    /// in bursts of ten times as many (429 with Retry-After beyond; 0: no limit); with
    /// --tokens-file.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0)]
    pub max_auth_failures_per_s: f64,
    /// Topologies one client may hold (without --tokens-file: the whole service); storing one
    /// more is a 429 until it deletes some.
    #[arg(long, allow_negative_numbers = true, default_value_t = 10_000, value_parser = whole::<i64, 1>)]
    pub max_client_topologies: i64,
    /// /readyz answers 503 while the SQLite database's filesystem has less than this free
    /// (`64MiB`, `1GiB`, bytes; 0: never), before writes fail. PostgreSQL's disk is its server's
    #[arg(long, allow_negative_numbers = true, default_value = "64MiB", value_parser = crate::units::parse_size)]
    pub min_free_disk: u64,
}

/// A whole number of at least `MIN` that `T` holds, refused in words (clap's ranges wrote the
/// type's bounds: "0 is not in 1..18446744073709551615").
fn whole<T: TryFrom<u64>, const MIN: u64>(text: &str) -> Result<T, String> {
    let expected = || format!("expected a whole number ≥ {MIN}");
    let too_large = || format!("{}: too large", expected());
    let n: u64 = match text.trim().parse() {
        Ok(n) => n,
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => return Err(too_large()),
        Err(_) => return Err(expected()),
    };
    if n < MIN {
        return Err(expected());
    }
    T::try_from(n).map_err(|_| too_large())
}

/// A byte count of at least one (`16MiB`, `1MB`, bytes) that fits this machine's `usize`.
fn bytes_at_least_one(text: &str) -> Result<usize, String> {
    match crate::units::parse_size(text)? {
        0 => Err("expected at least 1 byte".into()),
        n => usize::try_from(n).map_err(|_| format!("too large: at most {} bytes", usize::MAX)),
    }
}
