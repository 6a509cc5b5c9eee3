//! `POST /v1/schedules/{id}/regenerate` and a batch's `regenerations`: a stored schedule's
//! request checked on its topology without the failures (nothing stored until accepted),
//! queued with `regenerate_from` so the worker repairs the schedule before the fresh run.

use super::id::Id;
use super::owned::own_schedule;
use super::queue::{answer, check_interactive_first, check_wait, enqueue, refuse_if_stopping};
use super::requests::{Checked, JobRequest, Priority, commit, make_room};
use super::topologies;
use super::{ApiError, Caller, JsonBody, RequestId, Shared};
use crate::engine;
use crate::error::InputError;
use crate::topology::{DegradedLink, Failures};
use axum::Router;
use axum::extract::{Extension, State};
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;

pub fn router() -> Router<Shared> {
    Router::new().route("/v1/schedules/{id}/regenerate", post(regenerate))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
struct RegenerateIn {
    #[serde(default)]
    failed_links: Vec<[usize; 2]>,
    #[serde(default)]
    failed_npus: Vec<usize>,
    /// Links that still work, slower: `{"link": [9, 10], "bandwidth_gb_per_s": 25}`.
    #[serde(default)]
    degraded_links: Vec<DegradedLink>,
    /// Each failed and degraded link `[u, v]` is the direction u -> v only (as the CLI's
    /// `--directed` and a topology's failures take it).
    #[serde(default)]
    directed: bool,
    #[serde(default)]
    algorithm: Option<engine::Algorithm>,
    #[serde(default)]
    wait_ms: Option<u64>,
    /// As for a synthesis: `interactive` is claimed before normal jobs.
    #[serde(default)]
    priority: Priority,
}
crate::strict::objects_only!(RegenerateIn, "a regeneration (an object)");

/// A regeneration in a batch: a stored schedule and the failures to regenerate it after.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub(super) struct RegenerationItem {
    pub(super) schedule_id: String,
    #[serde(default)]
    pub(super) failed_links: Vec<[usize; 2]>,
    #[serde(default)]
    pub(super) failed_npus: Vec<usize>,
    #[serde(default)]
    pub(super) degraded_links: Vec<DegradedLink>,
    #[serde(default)]
    pub(super) directed: bool,
    #[serde(default)]
    pub(super) algorithm: Option<engine::Algorithm>,
    #[serde(default)]
    pub(super) force: bool,
}
crate::strict::objects_only!(RegenerationItem, "a regeneration (an object)");

impl RegenerationItem {
    /// What failed and what runs slower, as the topology reads it.
    pub(super) fn failures(&mut self) -> Failures {
        Failures {
            links: std::mem::take(&mut self.failed_links),
            npus: std::mem::take(&mut self.failed_npus),
            degraded_links: std::mem::take(&mut self.degraded_links),
            directed: self.directed,
        }
    }
}

/// Checks a regeneration of the caller's schedule `id` (its stored request on the topology
/// without the failures; errors named under `path`), storing nothing: the fresh run's request
/// with `regenerate_from` set, so the worker repairs the schedule first.
pub(super) async fn check_regeneration(
    st: &Shared,
    caller: &Caller,
    id: &str,
    failures: Failures,
    algorithm: Option<engine::Algorithm>,
    path: &str,
) -> Result<Checked, ApiError> {
    let at = |p: &str| if path.is_empty() { p.to_string() } else { format!("{path}.{p}") };
    own_schedule(st, caller, id).await?;
    let request = st.store.schedule_request(id).await?.ok_or_else(|| ApiError::NotFound("schedule", id.to_string()))?;
    let mut req: JobRequest = serde_json::from_str(&request).map_err(|e| ApiError::Internal(e.to_string()))?;
    // The schedule is the caller's, and so is the topology it ran on, whoever else sees it.
    // The same collective on the survivors: failed NPUs leave its group and cannot be its root.
    if let Some(g) = &mut req.collective.group {
        engine::surviving_group(g, &failures.npus, &at("failed_npus"))?;
    }
    // Hidden or not: a schedule keeps the topology it ran on (its regeneration was a 404 once
    // the topology was deleted, though the schedule and its exports were served).
    let intact = topologies::load_kept(st, &req.topology_id).await?;
    // Named by the request's own fields: `failed_links[0]`, not the `Failures` document's
    // `links[0]`; a split of the group by what failed (links when any were given).
    let split_by = if failures.links.is_empty() { "failed_npus" } else { "failed_links" };
    let topology = engine::degraded(&intact, std::slice::from_ref(&req.collective), &failures).map_err(|e| {
        ApiError::Unprocessable(
            e.renamed("links", &at("failed_links"))
                .renamed("npus", &at("failed_npus"))
                .renamed("degraded_links", &at("degraded_links"))
                .renamed("", &at(split_by)),
        )
    })?;
    engine::survivors_serve(&req.collective, &failures.npus).map_err(|why| InputError::new(at("failed_npus"), why))?;
    if let Some(a) = algorithm {
        // Seeds and a time limit the engine chose for the old algorithm follow the new one (the
        // ILP runs one seed; `ccsynth regenerate` chooses them afresh too).
        let caps = [st.config.limits().max_solve_s, st.config.max_interactive_s];
        engine::options_for_algorithm(&mut req.options, (&req.algorithm, &a), (&intact, &topology), caps);
        req.algorithm = a;
    }
    // The worker repairs this schedule first and keeps it when it beats the fresh run.
    req.regenerate_from = Some(id.to_string());
    // The same checks as a new request's, on the degraded topology, before anything is stored:
    // a regeneration refused with 422 leaves nothing behind.
    // The degraded topology is derived from the schedule's and stored only once accepted.
    let (spec, limits, max_npus) = (req.spec(), st.config.limits(), st.config.max_npus);
    let (parent, within) = (req.topology_id.clone(), path.to_string());
    let mut row = topologies::off_async(move || {
        let checked = engine::Request::new(topology, spec, &limits)
            .map_err(|e| if within.is_empty() { e } else { e.within(&within) })?;
        topologies::prepare(max_npus, &checked.topology, Some((&parent, &failures)), "topology.npus")
    })
    .await?;
    row.id = topologies::stored_id(st, &row).await?;
    req.topology_id = row.id.clone();
    req.topology_digest = row.digest.clone();
    Ok(Checked { req, topology: Some(row) })
}

async fn regenerate(
    State(st): State<Shared>,
    Extension(rid): Extension<RequestId>,
    Extension(caller): Extension<Caller>,
    Id(id): Id,
    JsonBody(r): JsonBody<RegenerateIn>,
) -> Result<Response, ApiError> {
    refuse_if_stopping(&st)?;
    let (priority, wait) = (r.priority, check_wait(r.wait_ms)?);
    let failures =
        Failures { links: r.failed_links, npus: r.failed_npus, degraded_links: r.degraded_links, directed: r.directed };
    let mut checked = check_regeneration(&st, &caller, &id, failures, r.algorithm, "").await?;
    // An interactive regeneration runs within the interactive limit: the stored request's time
    // limit (600 s for a thorough one) is capped, as a synthesis's default is; it was refused
    // at `options.time_limit_s`, a field this route does not take.
    if priority == Priority::Interactive {
        let limit = &mut checked.req.options.time_limit_s;
        *limit = limit.min(st.config.max_interactive_s);
    }
    make_room(&st, &caller, &[&checked], false).await?;
    check_interactive_first(&st, &caller, &checked.req, (false, priority)).await?;
    let req = commit(&st, &caller, checked).await?;
    let (job_id, cached) = enqueue(&st, &req, (false, priority), &rid, &caller).await?;
    answer(&st, &job_id, (wait, cached), &[]).await
}
