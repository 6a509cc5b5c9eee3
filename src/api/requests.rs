//! The synthesis request as the API takes it (`SynthesisRequest`, its options and priority) and
//! as a job stores and runs it (`JobRequest`, its cache key), and the steps from one to the
//! other: `normalize` (checked by the engine), `make_room` (queue and quotas: `check_room`),
//! `commit`.

use super::topologies;
use super::{ApiError, Caller, Shared};
use crate::collective::CollectiveSpec;
use crate::engine;
use crate::error::InputError;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::sync::Arc;

/// `POST /v1/syntheses` as clients send it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct SynthesisRequest {
    #[serde(default)]
    pub topology_id: Option<String>,
    #[serde(default)]
    pub topology: Option<serde_json::Value>,
    #[serde(default)]
    pub spec: Option<String>,
    pub collective: CollectiveSpec,
    #[serde(default = "default_algorithm")]
    pub algorithm: engine::Algorithm,
    /// The engine's options, as every door takes them (`engine::Options`).
    #[serde(default)]
    pub options: engine::Options,
    #[serde(default)]
    pub wait_ms: Option<u64>,
    #[serde(default)]
    pub force: bool,
    /// `interactive`: claimed before every normal job (a scheduler that needs the answer now);
    /// a client may have a few active at once, each with a short time limit.
    #[serde(default)]
    pub priority: Priority,
}
crate::strict::objects_only!(SynthesisRequest, "a synthesis request (an object)", serialize);

/// A job's class: interactive jobs are claimed before normal ones.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    #[default]
    Normal,
    Interactive,
}

impl Priority {
    pub(super) fn level(self) -> i32 {
        match self {
            Priority::Normal => 0,
            Priority::Interactive => 1,
        }
    }
}

fn default_algorithm() -> engine::Algorithm {
    engine::Algorithm::Auto
}

/// What a job runs: the request with its topology stored and every default filled in. Its
/// JSON (fields in this order) is hashed into the request key for the result cache.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(remote = "Self")]
pub struct JobRequest {
    pub topology_id: String,
    pub topology_digest: String,
    pub collective: CollectiveSpec,
    pub algorithm: engine::Algorithm,
    /// The checked options, every default filled in (the engine's one model of them).
    #[serde(flatten)]
    pub options: engine::CheckedOptions,
    /// A regeneration: the schedule it repairs before the fresh run (`engine::regenerate`).
    /// Absent from other requests' JSON, so their cache keys stay as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regenerate_from: Option<String>,
}
crate::strict::objects_only!(JobRequest, "a job request (an object)", serialize);

impl JobRequest {
    pub(super) fn key(&self) -> String {
        let mut keyed = self.clone();
        // How many threads run it, not what it gives: not part of the key; nor is an option
        // its algorithm does not read.
        keyed.options = keyed.algorithm.read_options(&keyed.options);
        keyed.options.threads = None;
        let text = serde_json::to_string(&keyed).unwrap_or_default();
        // The simulator's model too: a result timed under another is not served from the cache.
        let text = format!("{text}\u{1f}sim {}", crate::sim::MODEL);
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
pub(super) async fn normalize(
    st: &Shared,
    caller: &Caller,
    mut r: SynthesisRequest,
    path: &str,
) -> Result<Checked, ApiError> {
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
        let over = if source.is_some() { "topology.npus" } else { "spec" };
        let (t, mut row, built) = topologies::off_async(move || {
            let t = match (source, spec) {
                (Some(v), _) => topologies::topology_from_value(v, &at_topology, &limits)?,
                // Its errors name `spec` already.
                (_, Some(spec)) => engine::topology_from_spec(&spec, &limits)
                    .map_err(|e| if within.is_empty() { e } else { e.within(&within) })?,
                _ => unreachable!("one source was checked above"),
            };
            let row = topologies::prepare(max_npus, &t, None, over).map_err(|e| match e {
                ApiError::Unprocessable(e) if !within.is_empty() => ApiError::Unprocessable(e.within(&within)),
                e => e,
            })?;
            let built = (t.links().len() >= super::BUILT_FROM_LINKS).then(|| Arc::new(t.clone()));
            Ok((t, row, built))
        })
        .await?;
        if let Some(built) = built {
            *st.built.lock().unwrap_or_else(|e| e.into_inner()) = Some((row.digest.clone(), built));
        }
        row.id = topologies::stored_id(st, &row).await?;
        (row, t, true)
    };
    // Checked by the engine, as every door's requests are, off the async threads: building the
    // collective is linear in its (already bounded) size.
    let mut spec = r.engine_spec();
    // An interactive job may run at most `max_interactive_s`: where the request leaves its
    // budget open, that caps the default (600 s at `options.effort` thorough) rather than
    // refusing a limit the caller never gave.
    if r.priority == Priority::Interactive && spec.options.time_limit_s.is_none() {
        let default_s = r.algorithm.default_time_limit_s(spec.options.effort);
        spec.options.time_limit_s = Some(default_s.min(st.config.max_interactive_s));
    }
    let limits = st.config.limits();
    let request = tokio::task::spawn_blocking(move || engine::Request::new(topo, spec, &limits))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| if path.is_empty() { e } else { e.within(path) })?;
    let req = JobRequest {
        topology_id: row.id.clone(),
        topology_digest: row.digest.clone(),
        collective: request.collective().clone(),
        algorithm: request.algorithm.clone(),
        options: request.checked_options(),
        regenerate_from: None,
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
        let seconds = items.iter().map(|c| c.req.options.time_limit_s).sum();
        let path = if batch { "requests" } else { seconds_path(&items[0].req) };
        check_room(st, caller, (items.len(), seconds), path).await?;
    }
    topologies::check_quota(st, caller, new_digests.len()).await
}

/// Room for `count` more jobs declaring `seconds` of solving together: in the queue (429
/// `QueueFull`) and in the caller's quotas of active jobs and their seconds (429
/// `ClientQuota`, `ClientSeconds`; a 422 at `path` where they alone are over the seconds, which
/// no job's end makes room for).
pub(super) async fn check_room(
    st: &Shared,
    caller: &Caller,
    (count, seconds): (usize, f64),
    path: &str,
) -> Result<(), ApiError> {
    let most_s = st.config.max_active_seconds_per_client;
    if caller.0.is_some() && seconds > most_s {
        let why = format!(
            "{} s of solving declared (the time limits; a regeneration's is its stored request's), over the {} s a client may have queued or running; lower the time limit, or send it as interactive (capped at {} s)",
            crate::units::short(seconds),
            crate::units::short(most_s),
            crate::units::short(st.config.max_interactive_s)
        );
        return Err(InputError::new(path, why).into());
    }
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

/// Where one request alone over the client's seconds is refused: a synthesis at its time
/// limit; a regeneration, whose limit is its stored request's and which takes no `options`, at
/// `priority` (interactive caps the limit).
pub(super) fn seconds_path(req: &JobRequest) -> &'static str {
    if req.regenerate_from.is_some() { "priority" } else { "options.time_limit_s" }
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
    pub(super) fn precheck(&self, st: &Shared, path: &str) -> Result<(), ApiError> {
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
    pub(super) fn engine_spec(&self) -> engine::RequestSpec {
        engine::RequestSpec {
            target: engine::Target::One(self.collective.clone()),
            algorithm: self.algorithm.clone(),
            options: self.options.clone(),
        }
    }
}

impl JobRequest {
    /// The stored request in the engine's wire form, for the worker.
    pub(super) fn spec(&self) -> engine::RequestSpec {
        engine::RequestSpec {
            target: engine::Target::One(self.collective.clone()),
            algorithm: self.algorithm.clone(),
            options: self.options.options(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored request as the service wrote it before the options were one struct (fields in
    /// the order the result cache hashes), with `collective` spelled in.
    fn legacy(collective: &str, tail: &str) -> String {
        format!(
            r#"{{"topology_id":"t1","topology_digest":"d1","collective":{collective},"algorithm":"greedy","seed":3,"seeds":2,"time_limit_s":30.0,"switch_model":"unwind:2","discretization":null,"ignore_congestion":false,"window":null{tail}}}"#
        )
    }

    fn collective() -> String {
        let spec = CollectiveSpec::new(crate::collective::CollectiveKind::AllReduce, 1 << 20);
        serde_json::to_string(&spec).unwrap()
    }

    /// The stored JSON, and so every cache key, is what it was: read and written again, a
    /// request without a regeneration is the same text, with and without the later options.
    #[test]
    fn a_stored_request_is_written_as_before() {
        let c = collective();
        for tail in ["", r#","solve_time_limit_s":5.0"#, r#","solve_time_limit_s":5.0,"threads":4,"effort":"thorough""#]
        {
            let text = legacy(&c, tail);
            let req: JobRequest = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&req).unwrap(), text);
        }
        // The threads are not part of the key.
        let with = legacy(&c, r#","threads":4"#);
        let without = legacy(&c, "");
        let key = |t: &str| serde_json::from_str::<JobRequest>(t).unwrap().key();
        assert_eq!(key(&with), key(&without));
        assert_ne!(key(&legacy(&c, r#","effort":"thorough""#)), key(&without));
    }

    /// A regeneration stored before (its `regenerate_from` amid the options) reads back whole.
    #[test]
    fn a_stored_regeneration_reads_back() {
        let c = collective();
        let text = legacy(&c, r#","regenerate_from":"s1","solve_time_limit_s":5.0"#);
        let req: JobRequest = serde_json::from_str(&text).unwrap();
        assert_eq!(req.regenerate_from.as_deref(), Some("s1"));
        assert_eq!(req.options.solve_time_limit_s, Some(5.0));
        assert_eq!(req.options.switch_model, engine::SwitchModel::Unwind { degree: 2 });
    }

    /// The stored options run the same again: a request checked, stored, and checked again
    /// from what was stored has the same options.
    #[test]
    fn stored_options_check_to_themselves() {
        let topo = crate::topology::parse_spec("torus:4x4").unwrap();
        let options = engine::Options {
            seed: Some(7),
            seeds: Some(3),
            threads: Some(2),
            time_limit_s: Some(12.0),
            solve_time_limit_s: Some(4.0),
            window: Some(2),
            effort: Some(engine::Effort::Thorough),
            ..engine::Options::default()
        };
        let spec = engine::RequestSpec {
            target: engine::Target::One(CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 1 << 20)),
            algorithm: engine::Algorithm::Greedy,
            options,
        };
        let limits = engine::Limits::default();
        let first = engine::Request::new(topo.clone(), spec, &limits).unwrap().checked_options();
        let again = engine::RequestSpec {
            target: engine::Target::One(CollectiveSpec::new(crate::collective::CollectiveKind::AllGather, 1 << 20)),
            algorithm: engine::Algorithm::Greedy,
            options: first.options(),
        };
        assert_eq!(engine::Request::new(topo, again, &limits).unwrap().checked_options(), first);
    }
}
