//! `/v1/topologies`: store topologies (idempotent by the digest of their canonical JSON), list,
//! fetch, delete, and derive degraded ones from failures. With tokens, a client sees the
//! topologies it stored (or derived, or named inline in a synthesis) and no other: another
//! client's is a 404, as a missing one is.

use super::id::Id;
use super::{ApiError, Caller, JsonBody, Shared, json};
use crate::store::TopologyRow;
use crate::topology::{Failures, Topology};
use axum::Router;
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

pub fn router() -> Router<Shared> {
    Router::new()
        .route("/v1/topologies", post(create).get(list))
        .route("/v1/topologies/{id}", get(fetch).delete(remove))
        .route("/v1/topologies/{id}/failures", post(fail))
}

/// A topology JSON document, or `{"spec": "torus:8x8@bw=50"}` (refused beyond `max_npus` before
/// it is built).
pub fn topology_from_value(
    v: serde_json::Value,
    path: &str,
    limits: &crate::engine::Limits,
) -> Result<Topology, ApiError> {
    // Field paths relative to the request (the document's own, under `path`).
    let within =
        |e: crate::error::InputError| ApiError::Unprocessable(if path.is_empty() { e } else { e.within(path) });
    crate::engine::TopologySource::Document(v).build(limits).map_err(within)
}

/// What clients see of a stored topology.
#[derive(Serialize)]
pub struct TopologyOut {
    pub id: String,
    pub digest: String,
    pub npus: i64,
    pub switches: i64,
    pub links: i64,
    pub connected: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<serde_json::Value>,
    pub created_at_ms: i64,
}

impl From<&TopologyRow> for TopologyOut {
    fn from(r: &TopologyRow) -> Self {
        TopologyOut {
            id: r.id.clone(),
            digest: r.digest.clone(),
            npus: r.npus,
            switches: r.switches,
            links: r.links,
            connected: r.connected,
            parent_id: r.parent_id.clone(),
            failures: r.failures.as_deref().and_then(|f| serde_json::from_str(f).ok()),
            created_at_ms: r.created_at,
        }
    }
}

/// Stores `t` (or finds it by digest) for the caller, within its topology quota, and returns
/// its row and whether it is new.
pub async fn store_topology(st: &Shared, caller: &Caller, row: TopologyRow) -> Result<(TopologyRow, bool), ApiError> {
    if writes(st, caller, &row).await? {
        check_quota(st, caller, 1).await?;
    }
    store_row(st, caller, &row).await
}

/// Runs `work` on the blocking pool: parsing, building and hashing a topology are linear in a
/// body of up to `--max-body-bytes` or a spec's links, and the async threads must keep
/// answering meanwhile (four 16 MB bodies at once held `/healthz` for seconds).
pub async fn off_async<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| ApiError::Internal(e.to_string()))?
}

/// The row `t` would be stored as (a fresh id, its canonical JSON and digest), storing
/// nothing: a request is checked whole before its topology is kept. Run it off the async
/// threads.
/// `at`: the field a topology over `max_npus` is refused at (`npus` of a document, or `spec`).
pub fn prepare(
    max_npus: usize,
    t: &Topology,
    parent: Option<(&str, &Failures)>,
    at: &str,
) -> Result<TopologyRow, ApiError> {
    if t.npus() > max_npus {
        return Err(crate::error::InputError::new(
            at,
            format!("{} NPUs: this server accepts at most {max_npus}", t.npus()),
        )
        .into());
    }
    let body = serde_json::to_string(t).map_err(|e| ApiError::Internal(e.to_string()))?;
    let digest = crate::topology::json_digest(&body);
    Ok(TopologyRow {
        id: crate::store::new_id(),
        digest,
        body,
        npus: t.npus() as i64,
        switches: t.switches() as i64,
        links: t.links().len() as i64,
        connected: t.connectivity().connected,
        parent_id: parent.map(|(p, _)| p.to_string()),
        failures: parent.map(|(_, f)| serde_json::to_string(f).unwrap_or_default()),
        created_at: crate::store::now_ms(),
    })
}

/// The id a prepared row will have once stored: the stored topology's of the same digest, or
/// its own.
pub async fn stored_id(st: &Shared, row: &TopologyRow) -> Result<String, ApiError> {
    Ok(st.store.topology_id_by_digest(&row.digest).await?.map_or_else(|| row.id.clone(), |(id, _)| id))
}

/// Whether storing `row` for the caller would add to what it holds: a topology not stored yet,
/// or (with tokens) one the caller does not see yet.
pub async fn writes(st: &Shared, caller: &Caller, row: &TopologyRow) -> Result<bool, ApiError> {
    Ok(match st.store.topology_id_by_digest(&row.digest).await? {
        None => true,
        // Soft-deleted: storing it again brings it back, into the caller's count.
        Some((_, true)) => true,
        Some((id, false)) => !st.store.topology_visible(&id, caller.0.as_deref()).await?,
    })
}

/// Room for `more` topologies in the caller's quota (the service's, without tokens).
pub async fn check_quota(st: &Shared, caller: &Caller, more: usize) -> Result<(), ApiError> {
    if more == 0 {
        return Ok(());
    }
    let held = st.store.topologies_held(caller.0.as_deref()).await?;
    let most = st.config.max_topologies_per_client;
    if held + more as i64 > most {
        return Err(ApiError::TopologyQuota(held, most));
    }
    Ok(())
}

/// Stores a prepared row (or finds the one of its digest) and lets the caller see it.
/// With tokens, `true` beside it means new to the caller, whoever stored it first: a 200 for a
/// topology another client had stored told the caller so (an existence oracle across clients).
pub async fn store_row(st: &Shared, caller: &Caller, row: &TopologyRow) -> Result<(TopologyRow, bool), ApiError> {
    let (row, new) = st.store.put_topology(row).await?;
    if let Some(me) = &caller.0 {
        // Whether this store gave it to the caller (one insert, so two stores at once are one 201).
        let granted = st.store.grant_topology(&row.id, me).await?;
        return Ok((row, granted));
    }
    Ok((row, new))
}

/// A stored topology the caller may see; another client's is a 404, as a missing one is.
pub async fn own_topology(st: &Shared, caller: &Caller, id: &str) -> Result<TopologyRow, ApiError> {
    match st.store.topology(id).await? {
        Some(row) if st.store.topology_visible(id, caller.0.as_deref()).await? => Ok(row),
        _ => Err(ApiError::NotFound("topology", id.to_string())),
    }
}

/// What `caller` sees of `rows`: each one's lineage (the topology it was derived from and the
/// failures that made it) only where that parent is still stored and the caller sees it too
/// (a deleted parent was still named). A graph is stored once for every client that stores
/// it, with the first deriver's lineage: another client saw that client's topology id and its
/// failure scenario. One query for a page of rows.
async fn seen_by(st: &Shared, caller: &Caller, rows: &[TopologyRow]) -> Result<Vec<TopologyOut>, ApiError> {
    let parents: Vec<&str> = rows.iter().filter_map(|r| r.parent_id.as_deref()).collect();
    let seen = st.store.topologies_seen(&parents, caller.0.as_deref()).await?;
    Ok(rows
        .iter()
        .map(|row| {
            let mut out = TopologyOut::from(row);
            if out.parent_id.as_ref().is_some_and(|p| !seen.contains(p)) {
                (out.parent_id, out.failures) = (None, None);
            }
            out
        })
        .collect())
}

/// `seen_by` of one row.
async fn seen_one(st: &Shared, caller: &Caller, row: &TopologyRow) -> Result<TopologyOut, ApiError> {
    let mut outs = seen_by(st, caller, std::slice::from_ref(row)).await?;
    outs.pop().ok_or_else(|| ApiError::Internal("a row went missing".into()))
}

async fn created(st: &Shared, caller: &Caller, row: &TopologyRow, new: bool) -> Result<Response, ApiError> {
    let status = if new { StatusCode::CREATED } else { StatusCode::OK };
    let mut resp = json(status, &seen_one(st, caller, row).await?);
    if let Ok(v) = format!("/v1/topologies/{}", row.id).parse() {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    Ok(resp)
}

async fn create(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    JsonBody(v): JsonBody<serde_json::Value>,
) -> Result<Response, ApiError> {
    let (limits, max_npus) = (st.config.limits(), st.config.max_npus);
    // Over the NPU limit: named where the body said it.
    let at = if v.get("spec").is_some() { "spec" } else { "npus" };
    let row = off_async(move || prepare(max_npus, &topology_from_value(v, "", &limits)?, None, at)).await?;
    let (row, new) = store_topology(&st, &caller, row).await?;
    created(&st, &caller, &row, new).await
}

#[derive(Deserialize)]
struct Page {
    offset: Option<i64>,
    limit: Option<i64>,
}

async fn list(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    axum::extract::RawQuery(page): axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    let p: Page = super::query::parse(page.as_deref())?;
    let offset = p.offset.unwrap_or(0).max(0);
    let limit = p.limit.unwrap_or(50).clamp(1, 500);
    let (rows, total) = st.store.topologies(offset, limit, caller.0.as_deref()).await?;
    let items = seen_by(&st, &caller, &rows).await?;
    Ok(json(StatusCode::OK, &serde_json::json!({ "items": items, "offset": offset, "limit": limit, "total": total })))
}

async fn fetch(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
) -> Result<Response, ApiError> {
    let row = own_topology(&st, &caller, &id).await?;
    let topology: serde_json::Value = serde_json::from_str(&row.body).map_err(|e| ApiError::Internal(e.to_string()))?;
    let seen = seen_one(&st, &caller, &row).await?;
    let mut out = serde_json::to_value(seen).map_err(|e| ApiError::Internal(e.to_string()))?;
    out["topology"] = topology;
    Ok(json(StatusCode::OK, &out))
}

/// Deletes a topology for the caller. With tokens, one that other clients also see is only
/// taken away from the caller (it stays theirs); the last client's delete removes it, unless
/// queued or running jobs need it (409; with tokens, only the caller's own jobs are a 409:
/// another client's jobs keep it for their clients, who hold it again).
async fn remove(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
) -> Result<Response, ApiError> {
    own_topology(&st, &caller, &id).await?;
    if let Some(me) = &caller.0
        && st.store.revoke_topology(&id, me).await? > 0
    {
        return Ok(StatusCode::NO_CONTENT.into_response()); // other clients still see it
    }
    let mut outcome = st.store.delete_topology(&id).await?;
    if let Some(me) = &caller.0
        && let crate::store::Deletion::InUse(_) = outcome
    {
        // Needed by jobs: by the caller's, it stays the caller's (409 counting those); by
        // other clients' alone, it goes to those clients and is gone for the caller (the 409
        // counted them and said to cancel jobs that are a 404 to the caller). Were those jobs
        // to have ended meanwhile, it is deleted after all, not left a row no client holds.
        outcome = match st.store.topology_users_of(&id, me).await? {
            0 if st.store.grant_topology_to_users(&id).await? > 0 => crate::store::Deletion::Deleted,
            0 => match st.store.delete_topology(&id).await? {
                crate::store::Deletion::InUse(_) => {
                    st.store.grant_topology_to_users(&id).await?;
                    crate::store::Deletion::Deleted
                }
                done => done,
            },
            mine => {
                st.store.grant_topology(&id, me).await?;
                crate::store::Deletion::InUse(mine)
            }
        };
    }
    match outcome {
        crate::store::Deletion::Deleted => Ok(StatusCode::NO_CONTENT.into_response()),
        crate::store::Deletion::NotFound => Err(ApiError::NotFound("topology", id)),
        crate::store::Deletion::InUse(jobs) => Err(ApiError::InUse("topology", id, jobs)),
    }
}

/// Loads a stored topology the caller may see as the model type.
pub async fn load(st: &Shared, caller: &Caller, id: &str) -> Result<(TopologyRow, Topology), ApiError> {
    let row = own_topology(st, caller, id).await?;
    let (body, id) = (row.body.clone(), id.to_string());
    let t = off_async(move || {
        Topology::from_json(&body).map_err(|e| ApiError::Internal(format!("stored topology {id}: {e}")))
    })
    .await?;
    Ok((row, t))
}

/// The topology a caller's stored schedule ran on, hidden or not (deleting a topology that
/// stored schedules use hides it and keeps it for them, docs/HTTP.md): what a regeneration of
/// the schedule degrades.
pub async fn load_kept(st: &Shared, id: &str) -> Result<Topology, ApiError> {
    let row = st.store.topology_kept(id).await?.ok_or_else(|| ApiError::NotFound("topology", id.to_string()))?;
    let (body, id) = (row.body, id.to_string());
    off_async(move || Topology::from_json(&body).map_err(|e| ApiError::Internal(format!("stored topology {id}: {e}"))))
        .await
}

/// The degraded topology: stored with its parent and the failures.
pub async fn degrade(
    st: &Shared,
    caller: &Caller,
    parent_id: &str,
    f: &Failures,
) -> Result<(TopologyRow, bool), ApiError> {
    let (_, intact) = load(st, caller, parent_id).await?;
    let degraded = intact.with_failures(f)?;
    let (max_npus, parent, f) = (st.config.max_npus, parent_id.to_string(), f.clone());
    let row = off_async(move || prepare(max_npus, &degraded, Some((&parent, &f)), "topology.npus")).await?;
    store_topology(st, caller, row).await
}

async fn fail(
    State(st): State<Shared>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
    JsonBody(f): JsonBody<Failures>,
) -> Result<Response, ApiError> {
    // Nothing failed: the answer was the parent itself, a 200 as if derived before (an
    // unknown id is a 404 first).
    own_topology(&st, &caller, &id).await?;
    if f.links.is_empty() && f.npus.is_empty() && f.degraded_links.is_empty() {
        let why = "no failed link, failed NPU or degraded link given: nothing to derive the topology by";
        return Err(crate::error::InputError::new("links", why).into());
    }
    let (row, new) = degrade(&st, &caller, &id, &f).await?;
    created(&st, &caller, &row, new).await
}
