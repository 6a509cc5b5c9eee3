//! Syntheses as durable jobs: `/v1/syntheses` (normalize, cache by request key, queue, wait up
//! to `wait_ms`), `/v1/jobs`, `/v1/batches`, `/v1/schedules` (body, summary, comparison);
//! the request vocabulary is `api::requests`, regenerations `api::regenerations`, the workers
//! that run jobs `api::worker`.

use super::regenerations::{RegenerationItem, check_regeneration};
use super::requests::normalize;
pub(super) use super::requests::{Checked, JobRequest, Priority, SynthesisRequest, commit, make_room};
use super::{ApiError, Caller, JsonBody, RequestId, Shared, json};
use crate::engine;
use crate::error::InputError;
use crate::store::JobStatus;
use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
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
    /// A failed job's kind of failure (`input`, `refused`, `time_limit`, `internal`).
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<crate::engine::ErrorKind>,
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
        error_kind: j.error_kind,
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
                algorithm: req.algorithm.name(),
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
    let (j, cut_short) = wait_for_end(st, id, wait_ms).await?;
    let ended = j.status.is_ended();
    if cut_short {
        return Err(ApiError::ShuttingDownWithJob(j.id));
    }
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
    Ok(resp)
}

/// The longest wait a request may ask for (`wait_ms`), milliseconds.
pub const MAX_WAIT_MS: u64 = 600_000;

/// The job `id` once it has ended or `wait_ms` has passed (see `answer` for how the wait
/// hears of an end); `true` beside it when the wait was cut short because this process is
/// shutting down and the job has not ended.
async fn wait_for_end(st: &Shared, id: &str, wait_ms: u64) -> Result<(crate::store::JobRow, bool), ApiError> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(wait_ms.min(MAX_WAIT_MS));
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
            return Ok((j, true));
        }
        if ended || tokio::time::Instant::now() >= deadline {
            return Ok((j, false));
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

/// `GET /v1/jobs/{id}`'s query: `wait_ms` long-polls (the job as it is once it has ended or the
/// wait has passed; shutting down, as it is then).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobQuery {
    #[serde(default)]
    wait_ms: Option<u64>,
}

async fn job(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    q: Result<axum::extract::Query<JobQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let axum::extract::Query(q) = q.map_err(|e| ApiError::BadQuery(e.body_text()))?;
    let j = own_job(&st, &caller, &id).await?;
    let j = match q.wait_ms {
        Some(w) if w > MAX_WAIT_MS => {
            return Err(ApiError::BadQuery(format!("wait_ms: {w} ms: at most {MAX_WAIT_MS} are accepted")));
        }
        Some(w) if w > 0 && !j.status.is_ended() => wait_for_end(&st, &id, w).await?.0,
        _ => j,
    };
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
pub(super) async fn check_room(st: &Shared, caller: &Caller, count: usize, seconds: f64) -> Result<(), ApiError> {
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
#[serde(deny_unknown_fields, remote = "Self")]
struct BatchIn {
    #[serde(default)]
    requests: Vec<SynthesisRequest>,
    /// Regenerations of stored schedules (one per failure scenario, say), queued beside the
    /// requests.
    #[serde(default)]
    regenerations: Vec<RegenerationItem>,
}
crate::strict::objects_only!(BatchIn, "a batch (an object)");

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
    }
    // Every request is checked before any is queued: a batch is accepted whole or not at all.
    let mut normalized = Vec::with_capacity(count);
    for (i, r) in b.requests.into_iter().enumerate() {
        let force = r.force;
        normalized.push((normalize(&st, &caller, r, &format!("requests[{i}]")).await?, force));
    }
    let mut regenerations = Vec::with_capacity(b.regenerations.len());
    for (i, mut g) in b.regenerations.into_iter().enumerate() {
        let path = format!("regenerations[{i}]");
        let failures = g.failures();
        let found = check_regeneration(&st, &caller, &g.schedule_id, failures, g.algorithm, &path).await.map_err(
            |e| match e {
                ApiError::NotFound(..) => {
                    InputError::new(format!("{path}.schedule_id"), format!("no schedule {:?}", g.schedule_id)).into()
                }
                e => e,
            },
        )?;
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
    let (len, body) = match body {
        crate::store::ScheduleBody::Json(s) => (s.len() as u64, axum::body::Body::from(s)),
        packed => streamed_json(packed, crate::schedule::Form::Compact).await?,
    };
    Ok(([(header::CONTENT_TYPE, "application/json"), (header::CONTENT_LENGTH, &len.to_string())], body).into_response())
}

/// `GET /v1/schedules/{id}/export?format=explicit`: the schedule's JSON in the explicit form
/// (every chunk id listed, both conditions written), streamed as `schedule` streams its own.
pub(super) async fn explicit(st: &Shared, id: &str) -> Result<Response, ApiError> {
    let (body, _) = st.store.schedule_body(id).await?.ok_or_else(|| ApiError::NotFound("schedule", id.to_string()))?;
    let (len, body) = streamed_json(body, crate::schedule::Form::Explicit).await?;
    Ok(([(header::CONTENT_TYPE, "application/json"), (header::CONTENT_LENGTH, &len.to_string())], body).into_response())
}

/// A stored schedule's JSON in `form`, written on a blocking thread as the client reads it: a
/// 4096-NPU all-reduce's explicit JSON is 2.6 GB, never held whole. Read back first (a damaged
/// body is a 500 before anything is sent), its length counted (clients see a Content-Length,
/// not a chunked body); a client that goes away stops the writing.
async fn streamed_json(
    stored: crate::store::ScheduleBody,
    form: crate::schedule::Form,
) -> Result<(u64, axum::body::Body), ApiError> {
    let (schedule, len) = tokio::task::spawn_blocking(move || {
        let mut s = stored.into_schedule()?;
        let len = crate::schedule::packed::schedule_json_len_in(&mut s, form).map_err(|e| e.to_string())?;
        Ok::<_, String>((s, len))
    })
    .await
    .map_err(|e| ApiError::Internal(e.to_string()))?
    .map_err(ApiError::Internal)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(4);
    tokio::task::spawn_blocking(move || {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, Sender(tx.clone()));
        let written = serde_json::to_writer(&mut out, &schedule.written(form)).map_err(std::io::Error::from);
        if let Err(e) = written.and_then(|()| std::io::Write::flush(&mut out)) {
            // Gone (nothing to tell), or a failure mid-stream: the client sees a cut body.
            tracing::debug!("a schedule's JSON stream ended early: {e}");
            let _ = tx.blocking_send(Err(e));
        }
    });
    let chunks = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    Ok((len, axum::body::Body::from_stream(chunks)))
}

/// The writing end of a streamed body: each buffer full is one chunk, sent when the client
/// has taken the ones before (at most a few MiB ahead).
struct Sender(tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>);

impl std::io::Write for Sender {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Ok(buf.to_vec()))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
            let s = body.into_schedule().map_err(ApiError::Internal)?;
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
