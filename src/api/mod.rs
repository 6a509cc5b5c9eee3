//! The HTTP service (`ccsynth serve`): axum routers per resource over the `store`, a pool of
//! workers that run syntheses on the blocking pool, and the service's limits and metrics.
//! Everything the engine computes reaches clients through here unchanged (schedule format v1).

mod body;
mod conn;
pub mod error;
mod export;
mod jobs;
mod topologies;
mod worker;

pub use jobs::SynthesisRequest;

use crate::store::{JobStatus, Store};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
pub use body::{JsonBody, RawBody, json, parse_json};
pub use error::ApiError;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
    /// Largest schedule JSON stored; a larger result fails its job with the reason.
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
    /// Memory (MiB) that schedule exports computed at once may use, by their estimates.
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

/// Who is calling: the client's name, or `None` when the service runs without tokens.
#[derive(Clone, Debug)]
pub struct Caller(pub Option<String>);

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
            max_result_bytes: 512 << 20,
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

/// The service's Prometheus metrics (prometheus-client), kept in memory per process.
pub struct Metrics {
    registry: prometheus_client::registry::Registry,
    requests: Family<RequestLabels, Counter>,
    syntheses: Family<SynthesisLabels, Counter>,
    solve_seconds: Histogram,
    queue_depth: Gauge,
    /// Exports computed (concurrent identical GETs share one), and those that waited for the
    /// export memory budget.
    pub exports_built: Counter,
    pub export_budget_waits: Counter,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SynthesisLabels {
    algorithm: String,
    outcome: String,
}

const SOLVE_BUCKETS_S: [f64; 9] = [0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 600.0];

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = prometheus_client::registry::Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let syntheses = Family::<SynthesisLabels, Counter>::default();
        let solve_seconds = Histogram::new(SOLVE_BUCKETS_S);
        let queue_depth = Gauge::default();
        registry.register("ccsynth_http_requests", "HTTP requests by method, route and status", requests.clone());
        registry.register("ccsynth_syntheses", "Syntheses by algorithm and outcome", syntheses.clone());
        registry.register("ccsynth_solve_seconds", "Time to run one synthesis job", solve_seconds.clone());
        registry.register("ccsynth_queue_depth", "Jobs waiting for a worker", queue_depth.clone());
        let exports_built = Counter::default();
        let export_budget_waits = Counter::default();
        registry.register(
            "ccsynth_exports_built",
            "Schedule exports computed (identical concurrent requests share one)",
            exports_built.clone(),
        );
        registry.register(
            "ccsynth_export_budget_waits",
            "Schedule exports that waited for the export memory budget",
            export_budget_waits.clone(),
        );
        Metrics { registry, requests, syntheses, solve_seconds, queue_depth, exports_built, export_budget_waits }
    }
}

impl Metrics {
    /// Counts a solve by its outcome (the job's final status) and times it.
    pub fn synthesis(&self, algorithm: &str, outcome: JobStatus, seconds: f64) {
        let labels = SynthesisLabels { algorithm: algorithm.to_string(), outcome: outcome.to_string() };
        self.syntheses.get_or_create(&labels).inc();
        self.solve_seconds.observe(seconds);
    }

    /// Counts an answered request.
    fn request(&self, method: String, route: String, status: u16) {
        self.requests.get_or_create(&RequestLabels { method, route, status }).inc();
    }

    /// The text exposition, with the queue's depth as of now.
    fn encode(&self, queue_depth: i64) -> String {
        self.queue_depth.set(queue_depth);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }
}

pub struct AppState {
    pub store: Store,
    pub config: Config,
    pub metrics: Metrics,
    /// Cancel flags of the jobs running in this process.
    pub cancels: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Wakes idle workers when a job is queued.
    pub queued: tokio::sync::Notify,
    /// Wakes the requests waiting for a job (`wait_ms`) when a job of this process ends or is
    /// cancelled, so they need not poll the database often.
    pub job_ended: tokio::sync::Notify,
    /// Set on SIGTERM: new work is refused with 503.
    pub shutting_down: AtomicBool,
    /// One lock per schedule whose comparison is being computed in this process: concurrent
    /// requests for it wait for the first and read what it stored.
    pub comparing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Each client's request allowance (token bucket: what is left, when it was last topped up).
    pub allowance: Mutex<HashMap<String, (f64, std::time::Instant)>>,
    /// Each peer address's allowance of failed authentications (token bucket).
    pub auth_failures: Mutex<HashMap<std::net::IpAddr, (f64, std::time::Instant)>>,
    /// Set at the end of the shutdown's grace: comparisons and exports still computing give up
    /// (503), as the running jobs do.
    pub stopping: tokio::sync::watch::Sender<bool>,
    /// Large request bodies parsed at once (one per core): each is parsed on the blocking
    /// pool, and their parsed forms are many times their size.
    pub large_bodies: tokio::sync::Semaphore,
    /// Exports being computed, by schedule, format and options: concurrent identical requests
    /// wait for one computation.
    pub exports: Mutex<HashMap<String, Arc<export::Pending>>>,
    /// The export memory budget, in MiB: each export holds its estimated peak while it is
    /// computed, so concurrent heavy exports wait instead of allocating in parallel.
    pub export_budget: tokio::sync::Semaphore,
}

pub type Shared = Arc<AppState>;

/// Every route: (method, path). `openapi.yaml` documents exactly these (a test checks both ways).
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.yaml"),
    ("GET", "/v1/algorithms"),
    ("POST", "/v1/validate"),
    ("POST", "/v1/topologies"),
    ("GET", "/v1/topologies"),
    ("GET", "/v1/topologies/{id}"),
    ("DELETE", "/v1/topologies/{id}"),
    ("POST", "/v1/topologies/{id}/failures"),
    ("POST", "/v1/syntheses"),
    ("GET", "/v1/jobs/{id}"),
    ("DELETE", "/v1/jobs/{id}"),
    ("POST", "/v1/batches"),
    ("GET", "/v1/batches/{id}"),
    ("GET", "/v1/schedules/{id}"),
    ("GET", "/v1/schedules/{id}/summary"),
    ("GET", "/v1/schedules/{id}/comparison"),
    ("GET", "/v1/schedules/{id}/export"),
    ("POST", "/v1/schedules/{id}/regenerate"),
];

pub const OPENAPI_YAML: &str = include_str!("../../openapi.yaml");

pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.yaml", get(|| async { ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI_YAML) }))
        .route("/v1/algorithms", get(algorithms))
        .route("/v1/validate", post(validate))
        .merge(topologies::router())
        .merge(jobs::router())
        .fallback(|| async { ApiError::NotFound("route", String::new()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .layer(axum::middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

/// The id of the HTTP request being served (also the `x-request-id` response header); jobs
/// record it, so a solve's log lines can be traced to the request that queued it.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// Request ids, tracing spans, and the per-route request counter.
async fn observe(State(st): State<Shared>, req: Request, next: axum::middleware::Next) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    // The metrics' label takes the standard methods only: any other string (an unauthenticated
    // client may send thousands) is `other`, so /metrics cannot grow without bound.
    let method_label = match req.method().as_str() {
        m @ ("GET" | "POST" | "PUT" | "DELETE" | "PATCH" | "HEAD" | "OPTIONS") => m.to_string(),
        _ => "other".to_string(),
    };
    let id = crate::store::new_id();
    let span = tracing::info_span!("request", request_id = %id, %method, %route);
    let mut req = req;
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut resp = tracing::Instrument::instrument(next.run(req), span).await;
    if let Ok(v) = id.parse() {
        resp.headers_mut().insert("x-request-id", v);
    }
    st.metrics.request(method_label, route, resp.status().as_u16());
    resp
}

/// `work` unless the shutdown's grace ends first: then `ApiError::ShuttingDown` (503), and
/// whatever `work` left on the blocking pool is abandoned to the process's exit. Comparisons
/// and exports (which no job's grace covers) run under it, so SIGTERM ends within drain + grace.
pub async fn until_stopped<T>(st: &AppState, work: impl std::future::Future<Output = T>) -> Result<T, ApiError> {
    let mut stopping = st.stopping.subscribe();
    tokio::select! {
        done = work => Ok(done),
        _ = stopping.wait_for(|s| *s) => Err(ApiError::ShuttingDown),
    }
}

/// The peer's address, set per connection by the accept loop.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub std::net::SocketAddr);

/// The `Host` allow-list (every route) and, with tokens, the bearer token (the `/v1/` routes;
/// health, metrics and the OpenAPI document stay open): a `Caller` for the handlers.
async fn guard(State(st): State<Shared>, mut req: Request, next: axum::middleware::Next) -> Response {
    if req.uri().path_and_query().map_or(0, |p| p.as_str().len()) > MAX_URI_BYTES {
        return ApiError::UriTooLong(MAX_URI_BYTES).into_response();
    }
    // RFC 9112 §3.2: a request with more than one Host is a 400, whatever the allow-list.
    let hosts = req.headers().get_all(header::HOST).iter().count();
    if hosts > 1 {
        return ApiError::HostHeaders(hosts).into_response();
    }
    if let Some(allowed) = &st.config.allowed_hosts {
        // An absolute-form target (`GET http://evil.example/v1/...`) names the host itself, and
        // a server uses it rather than the Host header (RFC 9112 §3.2.2): both are checked.
        let header = req.headers().get(header::HOST).map(|h| h.to_str().unwrap_or("\u{fffd}"));
        let named = req.uri().authority().map(|a| a.as_str()).into_iter().chain(header.or(Some("")));
        for host in named {
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(host_name(host))) {
                return ApiError::BadHost(host.chars().take(100).collect()).into_response();
            }
        }
    }
    let path = req.uri().path();
    let guarded = path.starts_with("/v1/") || (st.config.private_metrics && path == "/metrics");
    let caller = if st.config.clients.is_empty() || !guarded {
        Caller(None)
    } else {
        // The scheme is case-insensitive (RFC 9110 §11.1): `bearer`, `BEARER`.
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.trim_start().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim());
        let Some(client) = given.and_then(|t| st.config.clients.iter().find(|c| same_secret(&c.token, t))) else {
            // Failed attempts are counted per address: a client guessing tokens gets 429s.
            if let Some(Peer(peer)) = req.extensions().get::<Peer>().copied() {
                let rate = st.config.max_auth_failures_per_s;
                let keys = (network_of(peer.ip()), std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED));
                if let Err(wait_s) = take_token(&st.auth_failures, keys, rate, 10.0 * rate) {
                    return ApiError::RateLimited(wait_s).into_response();
                }
            }
            return ApiError::Unauthorized.into_response();
        };
        if let Err(wait_s) = spend(&st, &client.name) {
            return ApiError::RateLimited(wait_s).into_response();
        }
        Caller(Some(client.name.clone()))
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// Takes one request from `client`'s allowance (`max_requests_per_s` a second, in bursts of as
/// many); when it is spent, the seconds until one more is allowed.
fn spend(st: &AppState, client: &str) -> Result<(), f64> {
    let rate = st.config.max_requests_per_s;
    take_token(&st.allowance, (client.to_string(), String::new()), rate, rate)
}

/// The address failed authentications are counted by: an IPv4 address, or an IPv6 address's
/// /64 (one host may hold all of its 2^64 addresses).
fn network_of(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            std::net::IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1)))
        }
        other => other,
    }
}

/// Buckets kept before the full ones (idle keys) are dropped: a map of addresses stays small.
const MAX_BUCKETS: usize = 4096;

/// Takes one token from `key`'s bucket (refilled at `rate` a second up to `burst`, at least
/// 1); when it is empty, the seconds until one more is allowed. A rate ≤ 0 allows everything.
/// Beyond `MAX_BUCKETS` keys, new ones share the `overflow` key's bucket.
fn take_token<K: std::hash::Hash + Eq>(
    buckets: &Mutex<HashMap<K, (f64, std::time::Instant)>>,
    (key, overflow): (K, K),
    rate: f64,
    burst: f64,
) -> Result<(), f64> {
    if rate <= 0.0 || !rate.is_finite() {
        return Ok(());
    }
    let burst = burst.max(1.0);
    let now = std::time::Instant::now();
    let mut all = buckets.lock().unwrap_or_else(|e| e.into_inner());
    let mut key = key;
    if all.len() >= MAX_BUCKETS && !all.contains_key(&key) {
        // A bucket that has refilled is the same as none.
        all.retain(|_, (left, at)| *left + now.duration_since(*at).as_secs_f64() * rate < burst);
        if all.len() >= MAX_BUCKETS {
            // Still full (many keys at once): newcomers share one bucket, so the map and each
            // sweep stay bounded.
            key = overflow;
        }
    }
    let (left, at) = all.entry(key).or_insert((burst, now));
    *left = (*left + now.duration_since(*at).as_secs_f64() * rate).min(burst);
    *at = now;
    if *left >= 1.0 {
        *left -= 1.0;
        Ok(())
    } else {
        Err((1.0 - *left) / rate)
    }
}

/// The host part of a `Host` header: without its port, brackets kept off an IPv6 literal.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(h, port)| if port.chars().all(|c| c.is_ascii_digit()) { h } else { host })
}

/// Compares two secrets in time independent of where they differ (their lengths may leak).
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn readyz(State(st): State<Shared>) -> Response {
    match st.store.ping().await {
        Ok(()) if !st.shutting_down.load(Ordering::SeqCst) => (StatusCode::OK, "ready\n").into_response(),
        Ok(()) => ApiError::ShuttingDown.into_response(),
        Err(e) => {
            tracing::error!(error = %e, "database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable\n").into_response()
        }
    }
}

async fn algorithms() -> Response {
    json(StatusCode::OK, &crate::engine::registry::listing())
}

async fn validate(State(st): State<Shared>, RawBody(body): RawBody) -> Result<Response, ApiError> {
    let limits = st.config.limits();
    // Parsing and checking are linear in the body (bounded by `max_body_bytes`) and the
    // schedule's declared sizes (bounded by `limits` before the validator allocates).
    let report = tokio::task::spawn_blocking(move || -> Result<crate::engine::CheckReport, ApiError> {
        let text = std::str::from_utf8(&body).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        body::strict_value(text.as_bytes()).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        let schedule = crate::schedule::Schedule::from_json(text)?;
        Ok(crate::engine::check_within(&schedule, &limits)?)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    Ok(json(StatusCode::OK, &report))
}

async fn metrics(State(st): State<Shared>) -> Response {
    let depth = st.store.queued_count().await.unwrap_or(-1);
    let text = st.metrics.encode(depth);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

/// Runs the service until SIGTERM or Ctrl-C: binds `addr`, starts the workers, serves, then
/// drains (running jobs get `grace_ms` from the signal, then are stopped and go back to the
/// queue).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
}

pub async fn serve(config: Config, addr: std::net::SocketAddr) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_on(config, listener, shutdown_signal()).await
}

pub async fn serve_on(
    config: Config,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let store = Store::connect(&config.database_url).await?;
    let state = Arc::new(AppState {
        store,
        config: config.clone(),
        metrics: Metrics::default(),
        cancels: Mutex::new(HashMap::new()),
        queued: tokio::sync::Notify::new(),
        job_ended: tokio::sync::Notify::new(),
        shutting_down: AtomicBool::new(false),
        comparing: Mutex::new(HashMap::new()),
        allowance: Mutex::new(HashMap::new()),
        auth_failures: Mutex::new(HashMap::new()),
        stopping: tokio::sync::watch::Sender::new(false),
        large_bodies: tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())),
        exports: Mutex::new(HashMap::new()),
        export_budget: tokio::sync::Semaphore::new(config.export_memory_mb.max(1) as usize),
    });
    let workers: Vec<_> = (0..config.workers.max(1)).map(|i| tokio::spawn(worker::worker(state.clone(), i))).collect();
    compress_old_schedules(state.store.clone());
    let watcher = watch_other_replicas(state.clone());
    tracing::info!(addr = %listener.local_addr()?, workers = workers.len(), backend = ?state.store.backend, "serving");
    if config.clients.is_empty() {
        eprintln!(
            "ccsynth: no --tokens-file: every client that reaches this address may queue, read, cancel and delete"
        );
    }
    // Machine-readable for scripts and tests that start the server on port 0.
    eprintln!("ccsynth: listening on {}", listener.local_addr()?);
    let st = state.clone();
    // The running jobs' grace counts from the signal, beside the drain and the connections'
    // own grace, so the process is gone within drain + grace, not drain + twice the grace.
    let signalled: Arc<std::sync::OnceLock<tokio::time::Instant>> = Arc::default();
    let at = signalled.clone();
    let grace = std::time::Duration::from_millis(config.grace_ms);
    accept_loop(listener, router(state.clone()), &config, async move {
        shutdown.await;
        let _ = at.set(tokio::time::Instant::now());
        st.shutting_down.store(true, Ordering::SeqCst);
        st.queued.notify_waiters();
        // At the end of the grace, the solves still running are stopped; their workers put
        // them back in the queue (a cancel while shutting down is a re-queue).
        let running = st.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            running.stopping.send_replace(true);
            for flag in running.cancels.lock().unwrap().values() {
                flag.store(true, Ordering::SeqCst);
            }
        });
        // Long-polls on jobs this process will not run now answer 503 with the job's id.
        st.job_ended.notify_waiters();
        tokio::time::sleep(std::time::Duration::from_millis(st.config.drain_ms)).await;
    })
    .await;
    state.shutting_down.store(true, Ordering::SeqCst);
    state.queued.notify_waiters();
    state.job_ended.notify_waiters();
    // A stopped solve needs a moment to see its flag and re-queue its job.
    let since = signalled.get().copied().unwrap_or_else(tokio::time::Instant::now);
    let slack = std::time::Duration::from_secs(2);
    let _ = tokio::time::timeout_at(since + grace + slack, futures_join(workers)).await;
    // Whatever still runs (a worker that did not hand its job back in time) goes back to
    // the queue for the next start (or another replica).
    let running: Vec<(String, Arc<AtomicBool>)> =
        state.cancels.lock().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (id, flag) in running {
        flag.store(true, Ordering::SeqCst);
        let _ = state.store.requeue(&id).await;
    }
    watcher.abort();
    Ok(())
}

/// Compresses, in the background, the schedules stored before bodies were compressed: a few at
/// a time, once per start.
fn compress_old_schedules(store: crate::store::Store) {
    tokio::spawn(async move {
        let mut total = 0;
        loop {
            match store.compress_old_schedules(16).await {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) => {
                    tracing::warn!(error = %e, "compressing stored schedules failed; they stay as they are");
                    break;
                }
            }
        }
        if total > 0 {
            tracing::info!(schedules = total, "compressed schedules stored before compression");
        }
    });
}

/// Hears other replicas' job events (PostgreSQL): their ends wake this process's `wait_ms`
/// waiters, their queued jobs its idle workers.
fn watch_other_replicas(state: Shared) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let st = state.clone();
        state
            .store
            .watch_jobs(move |e| {
                use crate::store::JobEvent;
                if e != JobEvent::Queued {
                    st.job_ended.notify_waiters();
                }
                if e != JobEvent::Ended {
                    st.queued.notify_waiters();
                }
            })
            .await
    })
}

/// Accepts and serves HTTP/1 connections until `shutdown` completes, then lets every open
/// connection finish its request in flight (keep-alive off) for up to `grace_ms`.
///
/// Written out instead of `axum::serve`, which sets no hyper timer, so hyper's header-read
/// timeout never fires: a client could hold a connection forever by sending nothing, or a
/// request head a byte at a time. Here each connection must send its first byte within
/// `header_timeout_ms` (hyper's own timeout does not cover a connection that never sends,
/// axum#3478) and each request head within `header_timeout_ms` of the connection opening or
/// its previous response (hyper's header-read timeout, which since hyper 1.6 also covers idle
/// keep-alive connections); at most `max_connections` are open at once, and one over is
/// closed on accept.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    config: &Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let timeout = std::time::Duration::from_millis(config.header_timeout_ms.max(1));
    let cap = config.max_connections.clamp(1, 1 << 20);
    let slots = Arc::new(tokio::sync::Semaphore::new(cap));
    let (closing, _) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (socket, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: pause instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(max_connections = config.max_connections, "connection refused: at the limit");
            continue; // dropped: closed
        };
        let _ = socket.set_nodelay(true);
        // Every request knows its peer's address (failed authentications are counted by it).
        let with_peer =
            tower::ServiceExt::map_request(app.clone(), move |mut r: hyper::Request<hyper::body::Incoming>| {
                r.extensions_mut().insert(Peer(peer));
                r
            });
        let service = hyper_util::service::TowerToHyperService::new(with_peer);
        let mut closing = closing.subscribe();
        tokio::spawn(async move {
            let _slot = slot;
            if tokio::time::timeout(timeout, socket.readable()).await.is_err() {
                return; // nothing sent: closed
            }
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(timeout);
            let conn = builder.serve_connection(TokioIo::new(conn::Watched::new(socket)), service);
            let mut conn = std::pin::pin!(conn);
            loop {
                tokio::select! {
                    _ = conn.as_mut() => break,
                    changed = closing.changed() => {
                        conn.as_mut().graceful_shutdown();
                        if changed.is_err() {
                            // The server is gone; finish the request in flight.
                            let _ = conn.as_mut().await;
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    // Every connection holds a slot: all slots back means all closed.
    let all = cap as u32;
    let grace = std::time::Duration::from_millis(config.grace_ms);
    let _ = tokio::time::timeout(grace, slots.acquire_many(all)).await;
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    for h in handles {
        let _ = h.await;
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_BUCKETS, network_of, take_token};
    use std::collections::HashMap;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::sync::Mutex;

    #[test]
    fn failures_are_counted_per_ipv4_address_and_per_ipv6_slash_64() {
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));
        assert_eq!(network_of(v4), v4);
        let a: IpAddr = "2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        assert_eq!(network_of(a), network_of(b));
        assert_eq!(network_of(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        assert_ne!(network_of(a), network_of("2001:db8:1:3::1".parse().unwrap()));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(network_of(mapped), mapped, "an IPv4 client over IPv6 keeps its address");
    }

    #[test]
    fn a_bucket_empties_then_refuses_and_the_map_stays_bounded() {
        let buckets = Mutex::new(HashMap::new());
        let overflow = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        let one = IpAddr::V4(Ipv4Addr::LOCALHOST);
        // A burst of 3 at 0.001 a second: three pass, the fourth waits about 1000 s.
        for _ in 0..3 {
            assert!(take_token(&buckets, (one, overflow), 0.001, 3.0).is_ok());
        }
        let wait = take_token(&buckets, (one, overflow), 0.001, 3.0).unwrap_err();
        assert!((900.0..=1000.0).contains(&wait), "{wait}");
        // Many addresses, each spending its bucket: beyond the cap they share one.
        for i in 0..(MAX_BUCKETS as u32 + 100) {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            let _ = take_token(&buckets, (ip, overflow), 0.001, 1.0);
        }
        assert!(buckets.lock().unwrap().len() <= MAX_BUCKETS + 1);
        assert!(take_token(&buckets, (IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), overflow), 0.001, 1.0).is_err());
        // No rate: no limit.
        assert!(take_token(&buckets, (one, overflow), 0.0, 1.0).is_ok());
    }
}
