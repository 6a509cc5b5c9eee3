//! A checked request queued as a job, and the answer that waits for it: `enqueue` (the result
//! cache, a shared job already in flight, the interactive limits, room in the queue),
//! `answer` and `wait_for_end` (`wait_ms`), the job as clients see it (`job_out`), and
//! `refuse_if_stopping` (no new work while shutting down).

use super::requests::{JobRequest, Priority, check_room};
use super::{ApiError, Caller, RequestId, Shared, json};
use crate::error::InputError;
use crate::store::JobStatus;
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde::Serialize;
use std::sync::atomic::Ordering;

#[derive(Serialize)]
pub(super) struct JobOut {
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

pub(super) fn job_out(j: &crate::store::JobRow) -> JobOut {
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
    request_id: &RequestId,
    caller: &Caller,
) -> Result<(String, bool), ApiError> {
    let key = job_key(caller, req);
    if !force && let Some(hit) = st.store.succeeded_with_key(&key).await? {
        return Ok((hit.id, true));
    }
    // The same request already queued or running: wait for that job rather than solve it
    // twice. (A batch's jobs are queued by `jobs::queue_batch`, each reporting on its own.)
    if priority == Priority::Interactive {
        check_interactive(st, caller, req).await?;
    }
    if !force && let Some(twin) = st.store.active_with_key(&key).await? {
        st.store.raise_priority(&twin.id, priority.level()).await?;
        return Ok((twin.id, false));
    }
    check_room(st, caller, (1, req.options.time_limit_s), super::requests::seconds_path(req)).await?;
    let body = serde_json::to_string(req).map_err(|e| ApiError::Internal(e.to_string()))?;
    let shared = !force;
    // Identical requests racing each other: the store keeps one shared active job per key, so
    // a request that loses the race joins the winner's job (or, if it ended meanwhile, its
    // result).
    for _ in 0..3 {
        let id = crate::store::new_id();
        let created = st
            .store
            .create_job(crate::store::NewJob {
                id: &id,
                batch_id: None,
                request_id: Some(&request_id.0),
                key: &key,
                request: &body,
                algorithm: req.algorithm.name(),
                topology_id: &req.topology_id,
                owner: caller.0.as_deref(),
                budget_s: req.options.time_limit_s,
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

/// A request's key in the store: with tokens the cache and in-flight sharing are per client,
/// so the client is in it.
pub(super) fn job_key(caller: &Caller, req: &JobRequest) -> String {
    match &caller.0 {
        Some(owner) => format!("{owner}\u{1f}{}", req.key()),
        None => req.key(),
    }
}

/// `check_interactive` before a request is committed (its topology stored), so that a request
/// refused for them stores nothing, as every other refusal does (a 422 or 429 there left the
/// inline topology stored and counted). A cached result is no job: not held to them.
pub(super) async fn check_interactive_first(
    st: &Shared,
    caller: &Caller,
    req: &JobRequest,
    (force, priority): (bool, Priority),
) -> Result<(), ApiError> {
    if priority != Priority::Interactive
        || (!force && st.store.succeeded_with_key(&job_key(caller, req)).await?.is_some())
    {
        return Ok(());
    }
    check_interactive(st, caller, req).await
}

/// An interactive job's limits: a short time limit (it jumps the queue) and a few active per
/// client (without tokens, per service).
async fn check_interactive(st: &Shared, caller: &Caller, req: &JobRequest) -> Result<(), ApiError> {
    let most_s = st.config.max_interactive_s;
    if req.options.time_limit_s > most_s {
        return Err(InputError::new(
            "options.time_limit_s",
            format!(
                "{} s: an interactive job may run at most {most_s} s (priority: interactive)",
                req.options.time_limit_s
            ),
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
/// `ignored` names the request's options its algorithm does not read (`ignored_options`, left
/// out when none: `window` on the greedy was ignored without a word).
pub(super) async fn answer(
    st: &Shared,
    id: &str,
    (wait_ms, cached): (u64, bool),
    ignored: &[crate::engine::registry::OptionName],
) -> Result<Response, ApiError> {
    let (j, cut_short) = wait_for_end(st, id, wait_ms).await?;
    let ended = j.status.is_ended();
    if cut_short {
        return Err(ApiError::ShuttingDownWithJob(j.id));
    }
    let mut body = serde_json::to_value(job_out(&j)).map_err(|e| ApiError::Internal(e.to_string()))?;
    body["cached"] = serde_json::Value::Bool(cached);
    if !ignored.is_empty() {
        body["ignored_options"] = serde_json::to_value(ignored).map_err(|e| ApiError::Internal(e.to_string()))?;
    }
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

/// A body's `wait_ms` within `MAX_WAIT_MS`, refused at that field beyond (it was capped without
/// a word, where `GET /v1/jobs/{id}?wait_ms=` refused it).
pub(super) fn check_wait(wait_ms: Option<u64>) -> Result<u64, ApiError> {
    match wait_ms {
        Some(w) if w > MAX_WAIT_MS => {
            Err(InputError::new("wait_ms", format!("{w} ms: at most {MAX_WAIT_MS} are accepted")).into())
        }
        w => Ok(w.unwrap_or(1000)),
    }
}

/// The job `id` once it has ended or `wait_ms` has passed (see `answer` for how the wait
/// hears of an end); `true` beside it when the wait was cut short because this process is
/// shutting down and the job has not ended.
pub(super) async fn wait_for_end(
    st: &Shared,
    id: &str,
    wait_ms: u64,
) -> Result<(crate::store::JobRow, bool), ApiError> {
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
