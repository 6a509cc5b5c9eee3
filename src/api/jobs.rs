//! Syntheses as durable jobs: `/v1/syntheses` (normalize, cache by request key, queue, wait up
//! to `wait_ms`), `/v1/jobs`, `/v1/batches`, `/v1/schedules` (body, summary, comparison);
//! regenerations are `api::regenerations`, the workers that run jobs `api::worker`.

use super::regenerations::{RegenerationItem, check_regeneration};
use super::topologies;
use super::{ApiError, Caller, JsonBody, RequestId, Shared, json};
use crate::collective::CollectiveSpec;
use crate::engine;
use crate::error::InputError;
use crate::store::JobStatus;
use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::sync::atomic::Ordering;

pub fn router() -> Router<Shared> {
    Router::new()
        .route("/v1/syntheses", post(create))
        .route("/v1/jobs/{id}", get(job).delete(cancel))
        .route("/v1/batches", post(create_batch))
        .route("/v1/batches/{id}", get(batch))
        .route("/v1/schedules/{id}", get(schedule))
        .route("/v1/schedules/{id}/summary", get(summary))
        .route("/v1/schedules/{id}/comparison", get(comparison))
        .route("/v1/schedules/{id}/export", get(super::export::export))
}

/// `POST /v1/syntheses` as clients send it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SynthesisRequest {
    #[serde(default)]
    pub topology_id: Option<String>,
    #[serde(default)]
    pub topology: Option<serde_json::Value>,
    #[serde(default)]
    pub spec: Option<String>,
    pub collective: CollectiveSpec,
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    #[serde(default)]
    pub options: SynthesisOptions,
    #[serde(default)]
    pub wait_ms: Option<u64>,
    #[serde(default)]
    pub force: bool,
    /// `interactive`: claimed before every normal job (a scheduler that needs the answer now);
    /// a client may have a few active at once, each with a short time limit.
    #[serde(default)]
    pub priority: Priority,
}

/// A job's class: interactive jobs are claimed before normal ones.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    #[default]
    Normal,
    Interactive,
}

impl Priority {
    fn level(self) -> i32 {
        match self {
            Priority::Normal => 0,
            Priority::Interactive => 1,
        }
    }
}

fn default_algorithm() -> String {
    engine::registry::PORTFOLIO.into()
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SynthesisOptions {
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub seeds: Option<usize>,
    #[serde(default)]
    pub chunks_per_npu: Option<u32>,
    #[serde(default)]
    pub time_limit_s: Option<f64>,
    #[serde(default)]
    pub switch_model: Option<String>,
    #[serde(default)]
    pub discretization: Option<f64>,
    #[serde(default)]
    pub ignore_congestion: Option<bool>,
    #[serde(default)]
    pub window: Option<u32>,
    /// Threads for this job's greedy runs, `auto`'s candidates and HiGHS (a pool of its own),
    /// instead of the worker's `--job-threads`.
    #[serde(default)]
    pub threads: Option<usize>,
}

/// What a job runs: the request with its topology stored and every default filled in. Its
/// JSON (fields in this order) is hashed into the request key for the result cache.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct JobRequest {
    pub topology_id: String,
    pub topology_digest: String,
    pub collective: CollectiveSpec,
    pub algorithm: String,
    pub seed: u64,
    pub seeds: usize,
    pub time_limit_s: f64,
    pub switch_model: String,
    pub discretization: Option<f64>,
    pub ignore_congestion: bool,
    pub window: Option<u32>,
    /// A regeneration: the schedule it repairs before the fresh run (`engine::regenerate`).
    /// Absent from other requests' JSON, so their cache keys stay as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regenerate_from: Option<String>,
    /// `options.threads`: how many threads run it, not what it gives (the greedy's winner
    /// does not depend on them), so not part of the cache key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
}

impl JobRequest {
    fn key(&self) -> String {
        let keyed = JobRequest { threads: None, ..self.clone() };
        let text = serde_json::to_string(&keyed).unwrap_or_default();
        format!("{:x}", sha2::Sha256::digest(text.as_bytes()))
    }
}

/// A checked request whose topology (named inline, or degraded for a regeneration) is not
/// stored yet: it is kept only once the request is accepted (`make_room`, then `commit`).
/// `req.topology_id` is the id it will have.
pub(super) struct Checked {
    pub(super) req: JobRequest,
    pub(super) topology: Option<crate::store::TopologyRow>,
}

/// Checks a request against the topology and the limits, and normalizes it.
async fn normalize(st: &Shared, caller: &Caller, mut r: SynthesisRequest, path: &str) -> Result<Checked, ApiError> {
    let at = |p: &str| if path.is_empty() { p.to_string() } else { format!("{path}.{p}") };
    r.precheck(st, path)?;
    let (row, topo, pending) = if let Some(id) = &r.topology_id {
        let (row, t) = topologies::load(st, caller, id).await.map_err(|e| match e {
            ApiError::NotFound(..) => InputError::new(at("topology_id"), format!("no topology with id {id:?}")).into(),
            e => e,
        })?;
        (row, t, false)
    } else {
        let (source, spec, limits, max_npus) =
            (r.topology.take(), r.spec.clone(), st.config.limits(), st.config.max_npus);
        let (within, at_topology) = (path.to_string(), at("topology"));
        let (t, mut row) = topologies::off_async(move || {
            let t = match (source, spec) {
                (Some(v), _) => topologies::topology_from_value(v, &at_topology, &limits)?,
                // Its errors name `spec` already.
                (_, Some(spec)) => engine::topology_from_spec(&spec, &limits)
                    .map_err(|e| if within.is_empty() { e } else { e.within(&within) })?,
                _ => unreachable!("one source was checked above"),
            };
            let row = topologies::prepare(max_npus, &t, None).map_err(|e| match e {
                ApiError::Unprocessable(e) if !within.is_empty() => ApiError::Unprocessable(e.within(&within)),
                e => e,
            })?;
            Ok((t, row))
        })
        .await?;
        row.id = topologies::stored_id(st, &row).await?;
        (row, t, true)
    };
    // Checked by the engine, as every door's requests are, off the async threads: building the
    // collective is linear in its (already bounded) size.
    let spec = r.engine_spec();
    let limits = st.config.limits();
    let request = tokio::task::spawn_blocking(move || engine::Request::new(topo, spec, &limits))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| if path.is_empty() { e } else { e.within(path) })?;
    let req = JobRequest {
        topology_id: row.id.clone(),
        topology_digest: row.digest.clone(),
        collective: request.collective().clone(),
        algorithm: request.algorithm.name().to_string(),
        seed: request.seed,
        seeds: request.seeds,
        time_limit_s: request.ilp.time_limit_s,
        switch_model: r.options.switch_model.unwrap_or_else(|| "native".into()),
        discretization: request.discretization_ns,
        ignore_congestion: request.ilp.ignore_congestion,
        window: request.ilp.window,
        regenerate_from: None,
        threads: request.threads,
    };
    Ok(Checked { req, topology: pending.then_some(row) })
}

/// Room for checked requests before anything of theirs is stored: the queue and the client's
/// job quotas (for a batch always; for one request only when it stores a topology, as one
/// that does not may still be served a cached or shared result at its quota) and its topology
/// quota. A refused request leaves nothing behind.
pub(super) async fn make_room(st: &Shared, caller: &Caller, items: &[&Checked], batch: bool) -> Result<(), ApiError> {
    let (mut new_digests, mut unstored) = (std::collections::HashSet::new(), false);
    for row in items.iter().filter_map(|c| c.topology.as_ref()) {
        if !new_digests.contains(&row.digest) && topologies::writes(st, caller, row).await? {
            new_digests.insert(row.digest.clone());
            // A topology stored already (the caller's grant aside) may have a cached result.
            unstored |= row.id == topologies::stored_id(st, row).await?;
        }
    }
    if batch || unstored {
        let seconds = items.iter().map(|c| c.req.time_limit_s).sum();
        check_room(st, caller, items.len(), seconds).await?;
    }
    topologies::check_quota(st, caller, new_digests.len()).await
}

/// Stores an accepted request's topology (if it brought one) and returns the job request that
/// names it.
pub(super) async fn commit(st: &Shared, caller: &Caller, c: Checked) -> Result<JobRequest, ApiError> {
    let Checked { mut req, topology } = c;
    if let Some(row) = topology {
        let (row, _) = topologies::store_row(st, caller, &row).await?;
        req.topology_id = row.id;
        req.topology_digest = row.digest;
    }
    Ok(req)
}

impl SynthesisRequest {
    /// The checks that build nothing: one topology source, and the engine's topology-free
    /// checks of the algorithm and options (errors named under `path`).
    fn precheck(&self, st: &Shared, path: &str) -> Result<(), ApiError> {
        let given = [self.topology_id.is_some(), self.topology.is_some(), self.spec.is_some()];
        if given.iter().filter(|&&b| b).count() != 1 {
            let at = if path.is_empty() { "topology_id".to_string() } else { format!("{path}.topology_id") };
            return Err(InputError::new(at, "give exactly one of topology_id, topology or spec").into());
        }
        self.engine_spec()
            .precheck(&st.config.limits())
            .map_err(|e| if path.is_empty() { e } else { e.within(path) })?;
        Ok(())
    }

    /// The request in the engine's wire form (the topology travels beside it).
    fn engine_spec(&self) -> engine::RequestSpec {
        let o = &self.options;
        engine::RequestSpec {
            target: engine::Target::One(self.collective.clone()),
            algorithm: self.algorithm.clone(),
            options: engine::Options {
                seed: o.seed,
                seeds: o.seeds,
                chunks_per_npu: o.chunks_per_npu,
                time_limit_s: o.time_limit_s,
                switch_model: o.switch_model.clone(),
                discretization: o.discretization,
                ignore_congestion: o.ignore_congestion,
                window: o.window,
                threads: o.threads,
                ..engine::Options::default()
            },
        }
    }
}

impl JobRequest {
    /// The stored request in the engine's wire form, for the worker.
    pub(super) fn spec(&self) -> engine::RequestSpec {
        engine::RequestSpec {
            target: engine::Target::One(self.collective.clone()),
            algorithm: self.algorithm.clone(),
            options: engine::Options {
                seed: Some(self.seed),
                seeds: Some(self.seeds),
                time_limit_s: Some(self.time_limit_s),
                switch_model: Some(self.switch_model.clone()),
                discretization: self.discretization,
                ignore_congestion: Some(self.ignore_congestion),
                window: self.window,
                threads: self.threads,
                ..engine::Options::default()
            },
        }
    }
}

#[derive(Serialize)]
struct JobOut {
    id: String,
    status: JobStatus,
    algorithm: String,
    progress: Progress,
    created_at_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_id: Option<String>,
    url: String,
}

#[derive(Serialize)]
struct Progress {
    fraction: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

fn job_out(j: &crate::store::JobRow) -> JobOut {
    JobOut {
        id: j.id.clone(),
        status: j.status,
        algorithm: j.algorithm.clone(),
        progress: Progress { fraction: j.progress, message: j.message.clone() },
        created_at_ms: j.created_at,
        started_at_ms: j.started_at,
        finished_at_ms: j.finished_at,
        schedule_id: j.schedule_id.clone(),
        schedule_url: j.schedule_id.as_ref().map(|s| format!("/v1/schedules/{s}")),
        error: j.error.clone(),
        batch_id: j.batch_id.clone(),
        url: format!("/v1/jobs/{}", j.id),
    }
}

/// Queues a normalized request (or finds its cached result); returns the job id and whether
/// it was a cache hit.
pub(super) async fn enqueue(
    st: &Shared,
    req: &JobRequest,
    (force, priority): (bool, Priority),
    batch: Option<&str>,
    request_id: &RequestId,
    caller: &Caller,
) -> Result<(String, bool), ApiError> {
    // With tokens the cache and in-flight sharing are per client: the client is in the key.
    let key = match &caller.0 {
        Some(owner) => format!("{owner}\u{1f}{}", req.key()),
        None => req.key(),
    };
    if !force && let Some(hit) = st.store.succeeded_with_key(&key).await? {
        return Ok((hit.id, true));
    }
    // The same request already queued or running (outside a batch, whose jobs each report
    // on their own): wait for that job rather than solve it twice.
    if priority == Priority::Interactive {
        check_interactive(st, caller, req).await?;
    }
    if !force
        && batch.is_none()
        && let Some(twin) = st.store.active_with_key(&key).await?
    {
        st.store.raise_priority(&twin.id, priority.level()).await?;
        return Ok((twin.id, false));
    }
    check_room(st, caller, 1, req.time_limit_s).await?;
    let body = serde_json::to_string(req).map_err(|e| ApiError::Internal(e.to_string()))?;
    let shared = !force && batch.is_none();
    // Identical requests racing each other: the store keeps one shared active job per key, so
    // a request that loses the race joins the winner's job (or, if it ended meanwhile, its
    // result).
    for _ in 0..3 {
        let id = crate::store::new_id();
        let created = st
            .store
            .create_job(crate::store::NewJob {
                id: &id,
                batch_id: batch,
                request_id: Some(&request_id.0),
                key: &key,
                request: &body,
                algorithm: &req.algorithm,
                topology_id: &req.topology_id,
                owner: caller.0.as_deref(),
                budget_s: req.time_limit_s,
                shared,
                priority: priority.level(),
            })
            .await?;
        if created {
            st.queued.notify_one();
            return Ok((id, false));
        }
        if let Some(twin) = st.store.active_with_key(&key).await? {
            st.store.raise_priority(&twin.id, priority.level()).await?;
            return Ok((twin.id, false));
        }
        if let Some(hit) = st.store.succeeded_with_key(&key).await? {
            return Ok((hit.id, true));
        }
    }
    Err(ApiError::Internal(format!("request key {key:?}: no job could be created or joined")))
}

/// An interactive job's limits: a short time limit (it jumps the queue) and a few active per
/// client (without tokens, per service).
async fn check_interactive(st: &Shared, caller: &Caller, req: &JobRequest) -> Result<(), ApiError> {
    let most_s = st.config.max_interactive_s;
    if req.time_limit_s > most_s {
        return Err(InputError::new(
            "options.time_limit_s",
            format!("{} s: an interactive job may run at most {most_s} s (priority: interactive)", req.time_limit_s),
        )
        .into());
    }
    let active = st.store.active_at_priority(caller.0.as_deref(), Priority::Interactive.level()).await?;
    if active >= st.config.max_interactive_per_client {
        return Err(ApiError::InteractiveQuota(active, st.config.max_interactive_per_client));
    }
    Ok(())
}

/// Waits up to `wait_ms` for a job to end, then answers 201 (ended) or 202 (still going).
/// Answers with the job once it has ended or `wait_ms` has passed. A job this process runs
/// wakes its waiters as it ends. On PostgreSQL, every replica announces its jobs' ends
/// (`NOTIFY`, heard by `Store::watch_jobs`), so the waiters read the database again only on
/// an end or, as a safety net, every 2 s. On SQLite, where only this process ends jobs but a
/// second process could share the file, it polls every 10 ms at first, backing off to every
/// 250 ms, so many waiters do not keep the database busy.
pub(super) async fn answer(st: &Shared, id: &str, wait_ms: u64, cached: bool) -> Result<Response, ApiError> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(wait_ms.min(600_000));
    let ms = std::time::Duration::from_millis;
    let (mut poll, most) = if st.store.hears_other_replicas() { (ms(2000), ms(2000)) } else { (ms(10), ms(250)) };
    loop {
        // Registered before the read, so an end between the read and the wait is not missed.
        let ended_here = st.job_ended.notified();
        let j = st.store.job(id).await?.ok_or_else(|| ApiError::Internal(format!("job {id} vanished")))?;
        let ended = j.status.is_ended();
        // Shutting down, this process runs no queued job (a running one goes back to the queue
        // at the end of the grace): the waiter hears so now, with the job to ask for later (on
        // another replica, or after the restart), instead of a closed connection.
        // After the grace a running job is stopped and re-queued too (or runs on another
        // replica): no waiter is left looping on it.
        let stopping = *st.stopping.borrow();
        if !ended && (stopping || (j.status == JobStatus::Queued && st.shutting_down.load(Ordering::SeqCst))) {
            return Err(ApiError::ShuttingDownWithJob(j.id));
        }
        if ended || tokio::time::Instant::now() >= deadline {
            let mut body = serde_json::to_value(job_out(&j)).map_err(|e| ApiError::Internal(e.to_string()))?;
            body["cached"] = serde_json::Value::Bool(cached);
            if let Some(sid) = &j.schedule_id
                && let Some(summary) = st.store.schedule_summary(sid).await?
            {
                body["summary"] = serde_json::from_str(&summary).unwrap_or_default();
            }
            let status = if ended { StatusCode::CREATED } else { StatusCode::ACCEPTED };
            let mut resp = json(status, &body);
            let location = match (&j.schedule_id, ended) {
                (Some(s), true) => format!("/v1/schedules/{s}"),
                _ => format!("/v1/jobs/{}", j.id),
            };
            if let Ok(v) = location.parse() {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            return Ok(resp);
        }
        let nap = poll.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        let mut stopping = st.stopping.subscribe();
        tokio::select! {
            _ = ended_here => {}
            _ = stopping.wait_for(|s| *s) => {}
            _ = tokio::time::sleep(nap) => poll = (poll * 2).min(most),
        }
    }
}

pub(super) fn refuse_if_stopping(st: &Shared) -> Result<(), ApiError> {
    if st.shutting_down.load(Ordering::SeqCst) { Err(ApiError::ShuttingDown) } else { Ok(()) }
}

async fn create(
    State(st): State<Shared>,
    Extension(rid): Extension<RequestId>,
    Extension(caller): Extension<Caller>,
    JsonBody(r): JsonBody<SynthesisRequest>,
) -> Result<Response, ApiError> {
    refuse_if_stopping(&st)?;
    let (wait, force, priority) = (r.wait_ms.unwrap_or(1000), r.force, r.priority);
    let checked = normalize(&st, &caller, r, "").await?;
    make_room(&st, &caller, &[&checked], false).await?;
    let req = commit(&st, &caller, checked).await?;
    let (id, cached) = enqueue(&st, &req, (force, priority), None, &rid, &caller).await?;
    answer(&st, &id, wait, cached).await
}

/// Whether `caller` may see what `owner` made: everything without tokens, its own with them.
fn visible(caller: &Caller, owner: Option<&str>) -> bool {
    caller.0.as_deref().is_none_or(|me| owner == Some(me))
}

/// A job the caller may see (another client's is a 404, as a missing one is).
async fn own_job(st: &Shared, caller: &Caller, id: &str) -> Result<crate::store::JobRow, ApiError> {
    match st.store.job(id).await? {
        Some(j) if visible(caller, j.owner.as_deref()) => Ok(j),
        _ => Err(ApiError::NotFound("job", id.to_string())),
    }
}

/// Refuses a schedule the caller may not see (another client's) or that does not exist.
pub(super) async fn own_schedule(st: &Shared, caller: &Caller, id: &str) -> Result<(), ApiError> {
    match st.store.schedule_owner(id).await? {
        Some(owner) if visible(caller, owner.as_deref()) => Ok(()),
        _ => Err(ApiError::NotFound("schedule", id.to_string())),
    }
}

async fn job(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let j = own_job(&st, &caller, &id).await?;
    Ok(json(StatusCode::OK, &job_out(&j)))
}

async fn cancel(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let j = own_job(&st, &caller, &id).await?;
    if let Some(flag) = st.cancels.lock().unwrap().get(&id) {
        flag.store(true, Ordering::SeqCst);
    }
    st.store.end_job(&id, JobStatus::Cancelled, None).await?;
    st.job_ended.notify_waiters();
    let j = st.store.job(&id).await?.unwrap_or(j);
    Ok(json(StatusCode::OK, &job_out(&j)))
}

/// Room for `count` more jobs declaring `seconds` of solving together: in the queue (429
/// `QueueFull`) and in the caller's quotas of active jobs and their seconds (429
/// `ClientQuota`, `ClientSeconds`).
async fn check_room(st: &Shared, caller: &Caller, count: usize, seconds: f64) -> Result<(), ApiError> {
    let depth = st.store.queued_count().await?;
    if depth + count as i64 > st.config.max_queue {
        return Err(ApiError::QueueFull(depth));
    }
    if let Some(owner) = &caller.0 {
        let (active, active_s) = st.store.active_of(owner).await?;
        if active + count as i64 > st.config.max_active_per_client {
            return Err(ApiError::ClientQuota(active, st.config.max_active_per_client));
        }
        let total = active_s + seconds;
        if total > st.config.max_active_seconds_per_client {
            return Err(ApiError::ClientSeconds(total, st.config.max_active_seconds_per_client));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchIn {
    #[serde(default)]
    requests: Vec<SynthesisRequest>,
    /// Regenerations of stored schedules (one per failure scenario, say), queued beside the
    /// requests.
    #[serde(default)]
    regenerations: Vec<RegenerationItem>,
}

async fn create_batch(
    State(st): State<Shared>,
    Extension(rid): Extension<RequestId>,
    Extension(caller): Extension<Caller>,
    JsonBody(b): JsonBody<BatchIn>,
) -> Result<Response, ApiError> {
    refuse_if_stopping(&st)?;
    let count = b.requests.len() + b.regenerations.len();
    if count == 0 || count > 10_000 {
        return Err(InputError::new(
            "requests",
            format!("{count} requests and regenerations: expected 1 to 10000 together"),
        )
        .into());
    }
    // Room in the queue and in the client's quota first: they need only the count, and a batch
    // that cannot be queued should not cost the CPU of checking its items (issue 28: 10,000
    // heavy items were hours of checking before the refusal). Checked again before queueing.
    check_room(&st, &caller, count, 0.0).await?;
    // The checks that build nothing first, on every item: an invalid last item of a heavy
    // batch is refused before the others are built (issue 28).
    for (i, r) in b.requests.iter().enumerate() {
        if r.priority == Priority::Interactive {
            let why = "interactive: a batch's jobs are normal; send a synthesis that needs an answer now on its own";
            return Err(InputError::new(format!("requests[{i}].priority"), why).into());
        }
        r.precheck(&st, &format!("requests[{i}]"))?;
    }
    for (i, g) in b.regenerations.iter().enumerate() {
        match own_schedule(&st, &caller, &g.schedule_id).await {
            Err(ApiError::NotFound(..)) => {
                let why = format!("no schedule {:?}", g.schedule_id);
                return Err(InputError::new(format!("regenerations[{i}].schedule_id"), why).into());
            }
            other => other?,
        }
        if let Some(a) = &g.algorithm
            && engine::registry::Algorithm::parse(a).is_none()
        {
            let why = format!("{a:?}: expected one of {}", engine::registry::names().join(", "));
            return Err(InputError::new(format!("regenerations[{i}].algorithm"), why).into());
        }
    }
    // Every request is checked before any is queued: a batch is accepted whole or not at all.
    let mut normalized = Vec::with_capacity(count);
    for (i, r) in b.requests.into_iter().enumerate() {
        let force = r.force;
        normalized.push((normalize(&st, &caller, r, &format!("requests[{i}]")).await?, force));
    }
    let mut regenerations = Vec::with_capacity(b.regenerations.len());
    for (i, g) in b.regenerations.into_iter().enumerate() {
        let path = format!("regenerations[{i}]");
        let found = check_regeneration(&st, &caller, &g.schedule_id, g.failed_links, g.failed_npus, g.algorithm, &path)
            .await
            .map_err(|e| match e {
                ApiError::NotFound(..) => {
                    InputError::new(format!("{path}.schedule_id"), format!("no schedule {:?}", g.schedule_id)).into()
                }
                e => e,
            })?;
        regenerations.push((found, g.force));
    }
    normalized.extend(regenerations);
    let items: Vec<&Checked> = normalized.iter().map(|(c, _)| c).collect();
    make_room(&st, &caller, &items, true).await?;
    let mut accepted = Vec::with_capacity(count);
    for (c, force) in normalized {
        accepted.push((commit(&st, &caller, c).await?, force));
    }
    let batch_id = crate::store::new_id();
    st.store.create_batch(&batch_id, caller.0.as_deref()).await?;
    let mut job_ids = Vec::new();
    for (req, force) in &accepted {
        // A cached result is reported by the job that produced it.
        let (id, _) = enqueue(&st, req, (*force, Priority::Normal), Some(&batch_id), &rid, &caller).await?;
        job_ids.push(id);
    }
    let mut resp = json(
        StatusCode::CREATED,
        &serde_json::json!({ "batch_id": batch_id, "job_ids": job_ids, "url": format!("/v1/batches/{batch_id}") }),
    );
    if let Ok(v) = format!("/v1/batches/{batch_id}").parse() {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

async fn batch(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    match st.store.batch_owner(&id).await? {
        Some(owner) if visible(&caller, owner.as_deref()) => {}
        _ => return Err(ApiError::NotFound("batch", id)),
    }
    let jobs = st.store.batch_jobs(&id).await?;
    let fraction = if jobs.is_empty() { 1.0 } else { jobs.iter().map(|j| j.progress).sum::<f64>() / jobs.len() as f64 };
    let outs: Vec<JobOut> = jobs.iter().map(job_out).collect();
    let mut body = serde_json::json!({
        "batch_id": id,
        "total": jobs.len(),
        "progress": { "fraction": fraction },
        "jobs": outs,
    });
    // The count of jobs in each status, under the status's name.
    for s in JobStatus::ALL {
        body[s.as_str()] = serde_json::Value::from(jobs.iter().filter(|j| j.status == s).count());
    }
    Ok(json(StatusCode::OK, &body))
}

async fn schedule(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    own_schedule(&st, &caller, &id).await?;
    let (body, _) = st.store.schedule_body(&id).await?.ok_or(ApiError::NotFound("schedule", id))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn summary(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    own_schedule(&st, &caller, &id).await?;
    let s = st.store.schedule_summary(&id).await?.ok_or(ApiError::NotFound("schedule", id))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], s).into_response())
}

/// The schedule beside every applicable baseline: computed on the first request, stored, and
/// read from the store after that. Concurrent first requests in one process compute it once.
async fn comparison(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    own_schedule(&st, &caller, &id).await?;
    let stored = |body: String| ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(body) = st.store.comparison(&id).await? {
        return Ok(stored(body));
    }
    let lock = st.comparing.lock().unwrap().entry(id.clone()).or_default().clone();
    let _held = lock.lock().await;
    let result = async {
        if let Some(body) = st.store.comparison(&id).await? {
            return Ok(body);
        }
        let (body, _) = st.store.schedule_body(&id).await?.ok_or_else(|| ApiError::NotFound("schedule", id.clone()))?;
        // Every baseline stops at the end of a shutdown's grace (503), as running jobs do.
        let stopping = st.stopping.subscribe();
        let work = tokio::task::spawn_blocking(move || -> Result<String, ApiError> {
            let s = crate::schedule::Schedule::from_json(&body).map_err(|e| ApiError::Internal(e.to_string()))?;
            let name = s.algorithm.clone().unwrap_or_else(|| "schedule".into());
            let stop = || *stopping.borrow();
            let names = engine::registry::baseline_names();
            let cmp = engine::compare_until(&s.topology, &s.collective, Some((&name, &s)), &names, &stop).map_err(
                |e| match e {
                    engine::Error::Cancelled => ApiError::ShuttingDown,
                    e => ApiError::Internal(e.to_string()),
                },
            )?;
            serde_json::to_string(&cmp).map_err(|e| ApiError::Internal(e.to_string()))
        });
        let text = super::until_stopped(&st, work).await?.map_err(|e| ApiError::Internal(e.to_string()))??;
        st.store.put_comparison(&id, &text).await?;
        Ok::<String, ApiError>(text)
    }
    .await;
    drop(_held);
    st.comparing.lock().unwrap().remove(&id);
    result.map(stored)
}
