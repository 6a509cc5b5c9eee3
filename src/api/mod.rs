//! The HTTP service (`ccsynth serve`): axum routers per resource over the `store`, a pool of
//! workers that run syntheses on the blocking pool, and the service's limits and metrics.
//! Everything the engine computes reaches clients through here unchanged (schedule format v1).
//! Here: the shared state, the metrics, the router and the small routes; by job, `config`
//! (settings, clients), `guard` (request ids, hosts, tokens, rates), `server` (start, accept
//! loop, shutdown), `body` (request bodies), one module per resource, and `worker`; beneath
//! the resources, `owned` (what a caller may see), `streamed` (a schedule's JSON streamed),
//! `requests` and `queue` (a checked request queued as a job, and the wait for it).

mod body;
mod config;
mod conn;
pub mod error;
mod export;
mod guard;
mod id;
mod jobs;
mod owned;
mod query;
mod queue;
mod regenerations;
mod requests;
mod server;
mod streamed;
mod topologies;
mod worker;

pub use config::{Client, Config, MAX_URI_BYTES, MIN_TOKEN_LEN, parse_clients};
pub use guard::{Caller, Peer, RequestId};
pub use requests::SynthesisRequest;
pub use server::{ServeError, serve, serve_on, until_stopped};

use crate::store::{JobStatus, Store};
use axum::Router;
use axum::extract::State;
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
    /// Jobs that took their topology as a request of this process built it (`AppState::built`).
    pub topologies_reused: Counter,
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
            "Schedule exports and validations that waited for the export memory budget",
            export_budget_waits.clone(),
        );
        let topologies_reused = Counter::default();
        registry.register(
            "ccsynth_topologies_reused",
            "Jobs that took their topology as this process built it for the request, not parsed from the store",
            topologies_reused.clone(),
        );
        Metrics {
            registry,
            requests,
            syntheses,
            solve_seconds,
            queue_depth,
            exports_built,
            export_budget_waits,
            topologies_reused,
        }
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
    /// Large request bodies parsed at once (one per core): each is parsed on the blocking pool,
    /// and their parsed forms are many times their size.
    pub large_bodies: tokio::sync::Semaphore,
    /// Exports being computed, by schedule, format and options: concurrent identical requests
    /// wait for one computation.
    pub exports: Mutex<HashMap<String, Arc<export::Pending>>>,
    /// The export memory budget, in MiB: each export and each `/v1/validate` check holds its
    /// estimated peak while it is computed, so concurrent heavy ones wait instead of allocating
    /// in parallel.
    pub export_budget: std::sync::Arc<tokio::sync::Semaphore>,
    /// `POST /v1/validate`s read or checked at once (one per core, at least two).
    pub validations: std::sync::Arc<tokio::sync::Semaphore>,
    /// The last large topology a request of this process built (`BUILT_FROM_LINKS` links or
    /// more), by digest: a worker of this process that runs a job on it takes it from here
    /// instead of parsing its stored body (fc:1448's 140 MB: 2.1 s beside 32 loadtest clients,
    /// a fifth of a 10 s time limit). One, taken by the job that uses it, so it holds at most
    /// one topology's memory.
    pub built: Mutex<Option<(String, Arc<crate::topology::Topology>)>>,
}

/// Links from which a topology a request built is kept for the worker (`AppState::built`):
/// below, its body parses in milliseconds.
pub const BUILT_FROM_LINKS: usize = 1 << 16;

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

/// The query keys each `/v1/` route reads: (method, path, keys); one not listed reads none. A key
/// outside its route's list is refused (400 `bad-query`) before the handler runs, so a typo
/// (`?wait=5000`, `?fromat=`) is not silently ignored. `openapi.yaml` documents exactly these
/// (a test checks both ways).
pub const QUERY_KEYS: &[(&str, &str, &[&str])] = &[
    ("GET", "/v1/topologies", &["offset", "limit"]),
    ("GET", "/v1/jobs/{id}", &["wait_ms"]),
    (
        "GET",
        "/v1/schedules/{id}/export",
        &["format", "msccl_target", "protocol", "name", "min_bytes", "max_bytes", "in_place", "rank", "prefix"],
    ),
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
        .merge(export::router())
        .merge(regenerations::router())
        .fallback(|uri: axum::http::Uri| async move { ApiError::NoRoute(uri.path().chars().take(200).collect()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::middleware::from_fn(guard::known_query))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::guard))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::observe))
        .with_state(state)
}

async fn readyz(State(st): State<Shared>) -> Response {
    match st.store.ready().await {
        Ok(()) if st.shutting_down.load(Ordering::SeqCst) => ApiError::ShuttingDown.into_response(),
        Ok(()) => match st.store.free_disk_bytes().filter(|&free| free < st.config.min_free_disk_bytes) {
            Some(free) => {
                let said = format!(
                    "disk nearly full: {free} bytes free where the database is, below --min-free-disk {}\n",
                    st.config.min_free_disk_bytes
                );
                tracing::warn!("{}", said.trim_end());
                (StatusCode::SERVICE_UNAVAILABLE, said).into_response()
            }
            None => (StatusCode::OK, "ready\n").into_response(),
        },
        Err(e) => {
            tracing::error!(error = %e, "database unreachable or not writable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable or not writable\n").into_response()
        }
    }
}

async fn algorithms() -> Response {
    json(StatusCode::OK, &crate::engine::registry::listing())
}

async fn validate(State(st): State<Shared>, RawBody(body): RawBody) -> Result<Response, ApiError> {
    let limits = st.config.limits();
    // The check stops once nobody waits for it: when the client leaves, hyper drops this
    // future, and `left` with it (a check of seconds kept both cores busy for minutes after
    // its client gave up), or when the server stops.
    struct Left(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Left {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let left = Left(Default::default());
    let (gone, stopping) = (left.0.clone(), st.stopping.subscribe());
    // Validations run one per core at once (at least two), each holding its schedule until its
    // check ends: a few bytes of ranges may expand to lists of up to `MAX_LIST_ENTRIES` ids
    // (1 GiB from a 1 kB body). Their own permits, so large bodies of other routes do not wait
    // behind a long check. Every permit moves into the blocking work it covers and is given
    // back when that work ends: a client that leaves drops this future, and the permits went
    // with it while its read still ran.
    let slot = until_stopped(&st, st.validations.clone().acquire_owned())
        .await?
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let budget = st.config.export_memory_mb.max(1);
    let mib_of = |bytes: u64| bytes.div_ceil(1 << 20).clamp(1, budget as u64) as u32;
    // What the lists will hold once read, from the document before it is decoded: held from
    // the budget while they are read.
    let (body, declared, slot) = tokio::task::spawn_blocking(move || -> Result<_, ApiError> {
        let text = std::str::from_utf8(&body).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        let doc = crate::strict::strict_value(text.as_bytes()).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        let ids = crate::schedule::wire::declared_list_ids(&doc);
        drop(doc);
        Ok((body, ids, slot))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    let reading = mib_of(declared.saturating_mul(4));
    if st.export_budget.available_permits() < reading as usize {
        st.metrics.export_budget_waits.inc();
    }
    let room = until_stopped(&st, st.export_budget.clone().acquire_many_owned(reading))
        .await?
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let limits_ = limits.clone();
    let (schedule, peak, room, slot) = tokio::task::spawn_blocking(move || -> Result<_, ApiError> {
        let limits = limits_;
        // Valid UTF-8 and strict JSON: the first read said so.
        let text = std::str::from_utf8(&body).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        // Another command's output is named for what it is, as the CLI names it.
        let schedule = crate::schedule::Schedule::from_json(text).map_err(|e| {
            match crate::schedule::looks::not_a_schedule(text) {
                Some(what) => crate::error::InputError::new(".", what),
                None => e,
            }
        })?;
        // The lists the schedule holds count as the check's own tables do.
        let t = &schedule.transfers;
        let held = 4 * (t.list_entries() + t.slot_entries()) as u64 + t.heap_bytes() as u64;
        let peak = crate::engine::check_cost_within(&schedule, &limits)? + held;
        Ok((schedule, peak, room, slot))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    // The check holds its estimated peak of the memory budget exports hold theirs from, so
    // concurrent heavy checks (dense tables of 2^30 cells: 4 GB and more) wait for room instead
    // of allocating side by side. The room the read took goes on where it covers the estimate
    // (another read in the gap held a second 1 GiB of lists beside this one); where it does
    // not, it is given back before the whole estimate is taken, so that no two checks each
    // hold a part while waiting for the rest.
    let mib = mib_of(peak);
    let room = if mib <= reading {
        room
    } else {
        drop(room);
        if st.export_budget.available_permits() < mib as usize {
            st.metrics.export_budget_waits.inc();
        }
        until_stopped(&st, st.export_budget.clone().acquire_many_owned(mib))
            .await?
            .map_err(|e| ApiError::Internal(e.to_string()))?
    };
    let report = tokio::task::spawn_blocking(move || {
        let _held = (room, slot);
        let stop = || gone.load(std::sync::atomic::Ordering::Relaxed) || *stopping.borrow();
        crate::engine::check_within_until(&schedule, &limits, &stop)
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))??;
    drop(left);
    // Stopped: the client has left (nobody reads this) or the server is stopping.
    let report = report.ok_or(ApiError::ShuttingDown)?;
    Ok(json(StatusCode::OK, &report))
}

async fn metrics(State(st): State<Shared>) -> Response {
    // An unreachable database makes the queue's depth unknown (-1) at once, not after the
    // pool's acquire timeout: the other metrics are this process's own.
    let depth = match tokio::time::timeout(std::time::Duration::from_secs(2), st.store.queued_count()).await {
        Ok(Ok(n)) => n,
        _ => -1,
    };
    let text = st.metrics.encode(depth);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}
