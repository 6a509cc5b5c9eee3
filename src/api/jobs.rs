//! Syntheses as durable jobs: `/v1/syntheses` (normalize, cache by request key, queue, wait up
//! to `wait_ms`), `/v1/jobs`, `/v1/batches`, `/v1/schedules` (body, summary, comparison);
//! the request vocabulary is `api::requests`, queueing and waiting `api::queue`,
//! regenerations `api::regenerations`, exports `api::export`, the workers that run jobs
//! `api::worker`.

use super::body::parse_body;
use super::id::Id;
use super::owned::{own_schedule, visible};
use super::queue::{
    JobOut, MAX_WAIT_MS, answer, check_interactive_first, check_wait, enqueue, job_key, job_out, refuse_if_stopping,
    wait_for_end,
};
use super::regenerations::{RegenerationItem, check_regeneration};
use super::requests::{Checked, JobRequest, Priority, SynthesisRequest, check_room, commit, make_room, normalize};
use super::streamed::streamed_json;
use super::{ApiError, Caller, JsonBody, RawBody, RequestId, Shared, json, parse_json};
use crate::engine;
use crate::error::{Errors, InputError};
use crate::store::JobStatus;
use axum::Router;
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
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
}

async fn create(
    State(st): State<Shared>,
    Extension(rid): Extension<RequestId>,
    Extension(caller): Extension<Caller>,
    JsonBody(r): JsonBody<SynthesisRequest>,
) -> Result<Response, ApiError> {
    refuse_if_stopping(&st)?;
    let (wait, force, priority) = (check_wait(r.wait_ms)?, r.force, r.priority);
    let ignored = r.algorithm.unread(&r.options.named());
    let checked = normalize(&st, &caller, r, "").await?;
    make_room(&st, &caller, &[&checked], false).await?;
    check_interactive_first(&st, &caller, &checked.req, (force, priority)).await?;
    let req = commit(&st, &caller, checked).await?;
    let (id, cached) = enqueue(&st, &req, (force, priority), &rid, &caller).await?;
    answer(&st, &id, (wait, cached), &ignored).await
}

/// A job the caller may see (another client's is a 404, as a missing one is).
async fn own_job(st: &Shared, caller: &Caller, id: &str) -> Result<crate::store::JobRow, ApiError> {
    match st.store.job(id).await? {
        Some(j) if visible(caller, j.owner.as_deref()) => Ok(j),
        _ => Err(ApiError::NotFound("job", id.to_string())),
    }
}

/// `GET /v1/jobs/{id}`'s query: `wait_ms` long-polls (the job as it is once it has ended or the
/// wait has passed; shutting down before it ends, a 503 naming it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobQuery {
    #[serde(default)]
    wait_ms: Option<u64>,
}

async fn job(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
    axum::extract::RawQuery(q): axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    let q: JobQuery = super::query::parse(q.as_deref())?;
    let j = own_job(&st, &caller, &id).await?;
    let j = match q.wait_ms {
        Some(w) if w > MAX_WAIT_MS => {
            let why = format!("{w} ms: at most {MAX_WAIT_MS} are accepted");
            return Err(ApiError::BadQueryKey(crate::error::FieldError { path: "wait_ms".into(), message: why }));
        }
        Some(w) if w > 0 && !j.status.is_ended() => match wait_for_end(&st, &id, w).await? {
            // As POST /v1/syntheses answers it: a 503 naming the job to ask for again (on
            // another replica, or after the restart), not a 200 that reads as "still queued".
            (j, true) => return Err(ApiError::ShuttingDownWithJob(j.id)),
            (j, false) => j,
        },
        _ => j,
    };
    Ok(json(StatusCode::OK, &job_out(&j)))
}

async fn cancel(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
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
    RawBody(bytes): RawBody,
) -> Result<Response, ApiError> {
    refuse_if_stopping(&st)?;
    // The items are counted before any is built: 16 MiB of small items took 450 MB to parse
    // before the count refused them.
    let b: BatchIn = parse_body(&st, bytes, |bytes| {
        // Only too many: what else is wrong with the body the strict parse names.
        if let Some(count) = batch_items(bytes).filter(|&n| n > MAX_BATCH_ITEMS) {
            refuse_batch_size(count)?;
        }
        parse_json(bytes)
    })
    .await?;
    let count = b.requests.len() + b.regenerations.len();
    refuse_batch_size(count)?;
    // Each request's options its algorithm does not read, in the requests' order.
    let ignored: Vec<Vec<engine::registry::OptionName>> =
        b.requests.iter().map(|r| r.algorithm.unread(&r.options.named())).collect();
    // A batch larger than the queue, or (with tokens) than a client may have active, can never
    // be queued: a 422 naming the limit, not a 429 whose "wait" no retry ever satisfies.
    let (queue, own) = (st.config.max_queue, st.config.max_active_per_client);
    let (most, what) = match caller.0 {
        Some(_) if own < queue => (own, "a client's active jobs"),
        _ => (queue, "this server's queue"),
    };
    if count as i64 > most {
        let why = format!("{count} requests and regenerations: at most {most} fit in {what}; split the batch");
        return Err(InputError::new("requests", why).into());
    }
    // Room in the queue and in the client's quota first: they need only the count, and a batch
    // that cannot be queued should not cost the CPU of checking its items (issue 28: 10,000
    // heavy items were hours of checking before the refusal). Checked again before queueing.
    check_room(&st, &caller, (count, 0.0), "requests").await?;
    // The checks that build nothing first, on every item: an invalid last item of a heavy
    // batch is refused before the others are built (issue 28). Every invalid item is named,
    // not the first only: a client fixing a batch should not learn of its errors one a POST.
    let mut errors = Errors::default();
    for (i, r) in b.requests.iter().enumerate() {
        if r.priority == Priority::Interactive {
            let why = "interactive: a batch's jobs are normal; send a synthesis that needs an answer now on its own";
            errors.push(format!("requests[{i}].priority"), why);
        }
        // A batch answers at once, whatever an item says (it was read and ignored).
        if let Some(ms) = r.wait_ms {
            let why = format!("{ms}: a batch waits for none of its jobs; poll GET /v1/batches/{{id}}");
            errors.push(format!("requests[{i}].wait_ms"), why);
        }
        gather(&mut errors, r.precheck(&st, &format!("requests[{i}]")))?;
    }
    for (i, g) in b.regenerations.iter().enumerate() {
        let found = own_schedule(&st, &caller, &g.schedule_id).await.map(|_| ());
        gather(&mut errors, no_schedule(found, &format!("regenerations[{i}]"), &g.schedule_id))?;
    }
    std::mem::take(&mut errors).into_result(())?;
    // Every request is checked before any is queued: a batch is accepted whole or not at all.
    let mut normalized = Vec::with_capacity(count);
    for (i, r) in b.requests.into_iter().enumerate() {
        let force = r.force;
        if let Some(c) = gather(&mut errors, normalize(&st, &caller, r, &format!("requests[{i}]")).await)? {
            normalized.push((c, force));
        }
    }
    for (i, mut g) in b.regenerations.into_iter().enumerate() {
        let path = format!("regenerations[{i}]");
        let failures = g.failures();
        let found = check_regeneration(&st, &caller, &g.schedule_id, failures, g.algorithm, &path).await;
        if let Some(found) = gather(&mut errors, no_schedule(found, &path, &g.schedule_id))? {
            normalized.push((found, g.force));
        }
    }
    errors.into_result(())?;
    let items: Vec<&Checked> = normalized.iter().map(|(c, _)| c).collect();
    make_room(&st, &caller, &items, true).await?;
    let mut accepted = Vec::with_capacity(count);
    for (c, force) in normalized {
        accepted.push((commit(&st, &caller, c).await?, force));
    }
    let batch_id = crate::store::new_id();
    let job_ids = queue_batch(&st, &caller, &batch_id, &rid, &accepted).await?;
    let mut body =
        serde_json::json!({ "batch_id": batch_id, "job_ids": job_ids, "url": format!("/v1/batches/{batch_id}") });
    if ignored.iter().any(|i| !i.is_empty()) {
        body["ignored_options"] = serde_json::json!(ignored);
    }
    let mut resp = json(StatusCode::CREATED, &body);
    if let Ok(v) = format!("/v1/batches/{batch_id}").parse() {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

/// The most items (requests and regenerations together) a batch takes.
const MAX_BATCH_ITEMS: usize = 10_000;

fn refuse_batch_size(count: usize) -> Result<(), ApiError> {
    if count == 0 || count > MAX_BATCH_ITEMS {
        let why = format!("{count} requests and regenerations: expected 1 to {MAX_BATCH_ITEMS} together");
        return Err(InputError::new("requests", why).into());
    }
    Ok(())
}

/// How many requests and regenerations a batch body holds, counted without building any
/// (`None` where it is not a batch that parses: the strict parse then says why).
fn batch_items(bytes: &[u8]) -> Option<usize> {
    // `IgnoredAny` is zero-sized: a list of them counts its items and holds no memory.
    #[derive(Deserialize)]
    struct Counted {
        #[serde(default)]
        requests: Option<Vec<serde::de::IgnoredAny>>,
        #[serde(default)]
        regenerations: Option<Vec<serde::de::IgnoredAny>>,
    }
    let c: Counted = serde_json::from_slice(bytes).ok()?;
    Some(c.requests.map_or(0, |v| v.len()) + c.regenerations.map_or(0, |v| v.len()))
}

/// Keeps an item's field errors in `errors` (so that every invalid item is named) and passes
/// any other error on.
fn gather<T>(errors: &mut Errors, r: Result<T, ApiError>) -> Result<Option<T>, ApiError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(ApiError::Unprocessable(e)) => {
            errors.push_all(e);
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// A regeneration's unknown schedule, named at its item's `schedule_id`.
fn no_schedule<T>(r: Result<T, ApiError>, path: &str, id: &str) -> Result<T, ApiError> {
    r.map_err(|e| match e {
        ApiError::NotFound(..) => InputError::new(format!("{path}.schedule_id"), format!("no schedule {id:?}")).into(),
        e => e,
    })
}

/// Queues a batch's accepted requests, whole or not at all (`Store::create_batch_jobs`): the
/// job id of each item. The room in the queue and the client's quotas, checked before the
/// items were built, is checked again with the jobs in (a concurrent batch may have taken it):
/// a 429 then stores nothing. No job is claimed before all are in.
async fn queue_batch(
    st: &Shared,
    caller: &Caller,
    batch_id: &str,
    rid: &RequestId,
    accepted: &[(JobRequest, bool)],
) -> Result<Vec<String>, ApiError> {
    let mut items = Vec::with_capacity(accepted.len());
    for (req, force) in accepted {
        items.push(crate::store::BatchItem {
            key: job_key(caller, req),
            request: serde_json::to_string(req).map_err(|e| ApiError::Internal(e.to_string()))?,
            algorithm: req.algorithm.name().to_string(),
            topology_id: req.topology_id.clone(),
            budget_s: req.options.time_limit_s,
            force: *force,
        });
    }
    let config = &st.config;
    let room = |r: crate::store::Room| {
        if r.queued > config.max_queue {
            return Err(ApiError::QueueFull(r.queued - r.new_jobs));
        }
        if let Some((active, seconds)) = r.owner_active {
            if active > config.max_active_per_client {
                return Err(ApiError::ClientQuota(active - r.new_jobs, config.max_active_per_client));
            }
            if seconds > config.max_active_seconds_per_client {
                return Err(ApiError::ClientSeconds(seconds, config.max_active_seconds_per_client));
            }
        }
        Ok(())
    };
    let ids = st.store.create_batch_jobs((batch_id, caller.0.as_deref(), &rid.0), &items, room).await??;
    st.queued.notify_waiters();
    Ok(ids)
}

async fn batch(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
) -> Result<Response, ApiError> {
    match st.store.batch_owner(&id).await? {
        Some(owner) if visible(&caller, owner.as_deref()) => {}
        _ => return Err(ApiError::NotFound("batch", id)),
    }
    let jobs = st.store.batch_jobs(&id).await?;
    // An ended job (cancelled or failed part way too) has no more to do: it counts as done, so
    // a batch with nothing left to run reads 1 (a cancelled job's partial progress kept it
    // below, and a client polling for 1 never stopped).
    let done = |j: &crate::store::JobRow| if j.status.is_ended() { 1.0 } else { j.progress };
    let fraction = if jobs.is_empty() { 1.0 } else { jobs.iter().map(done).sum::<f64>() / jobs.len() as f64 };
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
    Id(id): Id,
) -> Result<Response, ApiError> {
    own_schedule(&st, &caller, &id).await?;
    let (body, _) = st.store.schedule_body(&id).await?.ok_or(ApiError::NotFound("schedule", id))?;
    let (len, body) = match body {
        crate::store::ScheduleBody::Json(s) => (s.len() as u64, axum::body::Body::from(s)),
        packed => streamed_json(packed, crate::schedule::Form::Compact).await?,
    };
    Ok(([(header::CONTENT_TYPE, "application/json"), (header::CONTENT_LENGTH, &len.to_string())], body).into_response())
}

async fn summary(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
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
    Id(id): Id,
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
