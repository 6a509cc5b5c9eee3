//! The service's settings (`Config`, which `ccsynth serve` fills from flags and the
//! environment) and its clients (`Client`, read from the tokens file by `parse_clients`).

/// Service settings; `ccsynth serve` fills them from flags and the environment.
#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: String,
    /// Concurrent solves (workers).
    pub workers: usize,
    /// Threads of each worker's own pool, which runs its job's parallel parts (the greedy's
    /// runs, `auto`'s candidates) unless the request sets `options.threads`.
    pub job_threads: usize,
    /// Queued jobs beyond which new ones are refused with 429.
    pub max_queue: i64,
    pub max_body_bytes: usize,
    pub max_npus: usize,
    /// Links of a generated topology (fc, hyperx, dragonfly), estimated from the spec.
    pub max_links: usize,
    pub max_chunks: usize,
    /// Cap on a synthesis's time limit (seconds), and the default ILP limit.
    pub max_solve_s: f64,
    /// A running job's lease; a job whose worker stops renewing it is run again after this.
    pub lease_ms: i64,
    /// On SIGTERM, how long running jobs may take before they are re-queued.
    pub grace_ms: u64,
    /// On SIGTERM, how long the server keeps answering (503 to new work and to `/readyz`, so
    /// balancers stop sending) before it closes the listener.
    pub drain_ms: u64,
    /// Claims of one job before it is failed (its worker keeps stopping without finishing).
    pub max_attempts: i64,
    /// Largest schedule stored, counted as its explicit JSON (every chunk id listed); a larger
    /// result fails its job with the reason. Large schedules are stored packed and served as a
    /// stream: this bounds what one GET sends (the explicit export, the longest form).
    pub max_result_bytes: usize,
    /// A connection that has not sent a complete request head this long after it opened, or
    /// after its last response, is closed (slow or idle clients hold no connection for long).
    pub header_timeout_ms: u64,
    /// A request body must arrive whole within this (408 beyond): a client sending a byte now
    /// and then cannot hold a connection.
    pub body_timeout_ms: u64,
    /// Open connections at most; one more is closed at once (before anything is read).
    pub max_connections: usize,
    /// `Host` names (without port, lower case) the server answers to; `None`: any. A page on
    /// another site that rebinds its DNS name to 127.0.0.1 sends its own name: refused.
    pub allowed_hosts: Option<Vec<String>>,
    /// Clients and their bearer tokens. Empty: no authentication (every caller may do
    /// anything; `ccsynth serve` allows that on a loopback address only).
    pub clients: Vec<Client>,
    /// Queued and running jobs one client may have (429 beyond); only with `clients`.
    pub max_active_per_client: i64,
    /// Memory (MiB) that schedule exports computed and schedules validated at once may use, by
    /// their estimates.
    pub export_memory_mb: u32,
    /// Interactive jobs one client (the service, without tokens) may have queued or running.
    pub max_interactive_per_client: i64,
    /// The longest time limit (seconds) of an interactive job.
    pub max_interactive_s: f64,
    /// The declared solve time (the sum of time limits, seconds) of one client's queued and
    /// running jobs (429 beyond); only with `clients`.
    pub max_active_seconds_per_client: f64,
    /// Requests per second one client may make on average, in bursts of as many (429 with
    /// `Retry-After` beyond); only with `clients`. 0: no limit.
    pub max_requests_per_s: f64,
    /// With `clients`, `/metrics` needs a token too.
    pub private_metrics: bool,
    /// Requests with a missing or unknown token one address may make per second on average,
    /// in bursts of ten times as many (429 with `Retry-After` beyond): guessing tokens is slow.
    /// 0: no limit.
    pub max_auth_failures_per_s: f64,
    /// Topologies one client may hold (without `clients`: the service); storing one more is a
    /// 429 until it deletes some.
    pub max_topologies_per_client: i64,
    /// `/readyz` says 503 while the SQLite database's filesystem has less than this free
    /// (bytes; 0: never); a small write may still fit there where a job's result does not.
    pub min_free_disk_bytes: u64,
}

/// A client of the service: its name (recorded as the owner of its jobs) and its token.
#[derive(Clone, PartialEq, Eq)]
pub struct Client {
    pub name: String,
    pub token: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("name", &self.name).field("token", &"…").finish()
    }
}

/// Shortest token accepted (characters).
pub const MIN_TOKEN_LEN: usize = 16;

/// Longest request target (path and query) served; a longer one is a 414 problem.
pub const MAX_URI_BYTES: usize = 8192;

/// Reads a tokens file: one `NAME TOKEN` (or `NAME:TOKEN`) per line, `#` comments and blank
/// lines ignored. Names are unique; tokens are at least `MIN_TOKEN_LEN` characters and unique.
pub fn parse_clients(text: &str) -> Result<Vec<Client>, String> {
    let mut clients: Vec<Client> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("line {}", i + 1);
        let (name, token) = line
            .split_once(|c: char| c == ':' || c.is_whitespace())
            .ok_or_else(|| format!("{}: expected NAME TOKEN", at()))?;
        let (name, token) = (name.trim(), token.trim());
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(format!("{}: name {name:?}: expected letters, digits, '-', '_' or '.'", at()));
        }
        if token.chars().count() < MIN_TOKEN_LEN || token.chars().any(char::is_whitespace) {
            return Err(format!(
                "{}: the token of {name:?} is shorter than {MIN_TOKEN_LEN} characters or has spaces",
                at()
            ));
        }
        if clients.iter().any(|c| c.name == name || c.token == token) {
            return Err(format!("{}: {name:?} or its token appears twice", at()));
        }
        clients.push(Client { name: name.into(), token: token.into() });
    }
    if clients.is_empty() {
        return Err("no NAME TOKEN line".into());
    }
    Ok(clients)
}

impl Config {
    pub fn new(database_url: impl Into<String>) -> Config {
        Config {
            database_url: database_url.into(),
            workers: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            job_threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            max_queue: 10_000,
            max_body_bytes: 16 << 20,
            max_npus: 4096,
            max_links: 1 << 21,
            max_chunks: 1 << 20,
            max_solve_s: 600.0,
            lease_ms: 15_000,
            grace_ms: 10_000,
            drain_ms: 1_000,
            max_attempts: 3,
            max_result_bytes: 8 << 30,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            max_connections: 4_096,
            allowed_hosts: None,
            clients: Vec::new(),
            max_active_per_client: 1_000,
            export_memory_mb: 2_048,
            max_interactive_per_client: 2,
            max_interactive_s: 60.0,
            max_active_seconds_per_client: 86_400.0,
            max_requests_per_s: 100.0,
            max_auth_failures_per_s: 1.0,
            max_topologies_per_client: 10_000,
            private_metrics: false,
            min_free_disk_bytes: 64 << 20,
        }
    }
}

impl Config {
    /// What the engine may accept from this server's clients.
    pub fn limits(&self) -> crate::engine::Limits {
        crate::engine::Limits {
            max_npus: self.max_npus,
            max_links: self.max_links,
            max_chunks: self.max_chunks,
            max_solve_s: self.max_solve_s,
            ..crate::engine::Limits::default()
        }
    }
}
