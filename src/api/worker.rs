//! The workers: each claims jobs from the store, runs them on the blocking pool in a rayon
//! pool of its own (renewing the lease, polling cancellation), and stores the result or the
//! reason it failed.

use super::Shared;
use super::requests::JobRequest;
use crate::engine::{self, ErrorKind, ErrorKind::Internal, ErrorKind::Refused};
use crate::store::JobStatus;
use crate::topology::Topology;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One worker: claims jobs, runs each on the blocking pool (renewing its lease), stores the
/// result, until the server shuts down.
pub async fn worker(st: Shared, index: usize) {
    // The worker's own pool, one thread per core by default: a job alone on the server uses
    // every core, and jobs side by side share the cores through the OS scheduler instead of
    // queueing behind each other's runs in one shared pool (rayon runs a pool's queued work
    // before work injected later, so a quick job would wait for a long one to end).
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(st.config.job_threads.max(1))
        .thread_name(move |i| format!("ccsynth-worker{index}-{i}"))
        .build()
        .map_err(|e| tracing::warn!(worker = index, error = %e, "no pool of its own: jobs use the shared one"))
        .ok()
        .map(Arc::new);
    loop {
        if st.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let job = match st.store.claim_job(st.config.lease_ms, st.config.max_attempts).await {
            Ok(j) => j,
            Err(e) => {
                tracing::error!(worker = index, error = %e, "claiming a job failed");
                None
            }
        };
        let Some(job) = job else {
            // Idle: wait for a new job, or poll for lapsed leases now and then.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(500), st.queued.notified()).await;
            continue;
        };
        // The job's span names the request that queued it: a solve's log lines lead back to it.
        let span = tracing::info_span!(
            "job",
            job_id = %job.id,
            request_id = job.request_id.as_deref().unwrap_or("-"),
            algorithm = %job.algorithm,
            worker = index
        );
        tracing::Instrument::instrument(run_job(&st, job, pool.clone()), span).await;
    }
}

async fn run_job(st: &Shared, job: crate::store::JobRow, pool: Option<Arc<rayon::ThreadPool>>) {
    let Some(lease) = job.lease() else {
        tracing::error!(status = %job.status, "a claimed job is not running");
        return;
    };
    let flag = Arc::new(AtomicBool::new(false));
    st.cancels.lock().unwrap().insert(job.id.clone(), flag.clone());
    let started = std::time::Instant::now();
    let outcome = execute(st, &job, &lease, flag.clone(), pool).await;
    st.cancels.lock().unwrap().remove(&job.id);
    let seconds = started.elapsed().as_secs_f64();
    let (status, result) = match outcome {
        Ok(r) => {
            let t = std::time::Instant::now();
            let ours = |j: &crate::store::JobRow| j.schedule_id.as_deref() == Some(r.schedule_id.as_str());
            let stored = until_reachable(st, &lease.job_id, ours, || {
                st.store.finish_job(&lease, &r.schedule_id, &r.topology_id, &r.body, &r.summary, r.topology_by_ref)
            })
            .await;
            let wall_ms = t.elapsed().as_secs_f64() * 1e3;
            tracing::debug!(target: "ccsynth::timing", wall_ms, "job: the result stored");
            (JobStatus::Succeeded, stored)
        }
        Err(JobEnd::Cancelled) if st.shutting_down.load(Ordering::SeqCst) => {
            (JobStatus::Queued, st.store.requeue_claimed(&lease).await)
        }
        Err(JobEnd::Cancelled) => {
            let cancelled = |j: &crate::store::JobRow| j.status == JobStatus::Cancelled;
            let ended = until_reachable(st, &lease.job_id, cancelled, || {
                st.store.end_claimed(&lease, JobStatus::Cancelled, None)
            });
            (JobStatus::Cancelled, ended.await)
        }
        Err(JobEnd::Failed(failure)) => {
            // Failed by this claim: the same reason recorded.
            let failed = |j: &crate::store::JobRow| {
                j.status == JobStatus::Failed && j.error.as_deref() == Some(failure.message.as_str())
            };
            let ended = until_reachable(st, &lease.job_id, failed, || {
                st.store.end_claimed(&lease, JobStatus::Failed, Some(&failure))
            });
            (JobStatus::Failed, ended.await)
        }
    };
    match result {
        Ok(true) if status != JobStatus::Queued => st.metrics.synthesis(&job.algorithm, status, seconds),
        Ok(true) => {}
        // A client's cancel ends the job before its run does: routine, not a warning (the
        // flag is also raised when the lease is lost, so the store says which).
        Ok(false) if matches!(st.store.job(&job.id).await, Ok(Some(j)) if j.status == JobStatus::Cancelled) => {
            tracing::debug!("the job was cancelled by its client; its run stopped")
        }
        // The lease lapsed and another worker owns the job now: its result stands, this one
        // is dropped.
        Ok(false) => tracing::warn!(outcome = %status, "the job is no longer this worker's; its outcome is dropped"),
        Err(e) => tracing::error!(error = %e, "recording a job's end failed"),
    }
    // Waiters woken here are woken after the job is counted. A waiter that reads the end on its
    // own (a poll, a replica's notification, a plain GET) may still read /metrics just before
    // the count: the count follows the stored end, and scrapes are not ordered with it.
    st.job_ended.notify_waiters();
}

/// How long a write refused as a storage fault (a full or read-only disk) is tried again before
/// the job gives up on it (its lease then lapses, and the job runs again or fails on its attempts).
const STORAGE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(600);

/// Calls `call` again every second while the database cannot be reached and the server is not
/// stopping (the first failure logged with `waits`): its last answer, and whether any call
/// failed on the way.
async fn patiently<T, F, Fut>(st: &Shared, waits: &str, mut call: F) -> (Result<T, crate::store::StoreError>, bool)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, crate::store::StoreError>>,
{
    let mut failed = false;
    let began = std::time::Instant::now();
    loop {
        match call().await {
            // A refused write (a full disk) is waited out for `STORAGE_PATIENCE` only: one
            // that never fits (a result larger than the free space) must not hold a worker.
            Err(e) if e.is_storage_fault() && began.elapsed() > STORAGE_PATIENCE => return (Err(e), true),
            Err(e) if e.is_unavailable() && !*st.stopping.borrow() => {
                st.store.note(&e);
                if !failed {
                    tracing::warn!(error = %e, "the database is unreachable or refuses writes: {waits}");
                    failed = true;
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            r => return (r, failed),
        }
    }
}

/// Runs `record` (a job's end) again every second while the database cannot be reached, until
/// it is (the end is stored, or the job turns out to be another claim's) or the server shuts
/// down: a result finished during an outage is kept, not solved again (issue 64: an outage
/// cost the long jobs it outlasted their results and an attempt each).
///
/// A call that failed may have committed all the same (its answer lost with the connection):
/// a retry that then finds the job no longer running counts as recorded when the job is in the
/// state `recorded` describes.
async fn until_reachable<F, Fut>(
    st: &Shared,
    job_id: &str,
    recorded: impl Fn(&crate::store::JobRow) -> bool,
    record: F,
) -> Result<bool, crate::store::StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, crate::store::StoreError>>,
{
    match patiently(st, "the job's end is recorded once it is back", record).await {
        (Ok(false), true) => Ok(st.store.job(job_id).await?.is_some_and(|j| recorded(&j))),
        (r, _) => r,
    }
}

/// A read a job needs before it solves (its topology, the schedule it regenerates), tried again
/// every second while the database cannot be reached: a job claimed just before an outage
/// waits for the database instead of failing on an internal error (its lease lapses meanwhile,
/// and the renewal once the database is back says whether it is still this worker's). On
/// shutdown, a cancel (the job is queued again).
async fn reading<T, F, Fut>(st: &Shared, read: F) -> Result<T, JobEnd>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, crate::store::StoreError>>,
{
    match patiently(st, "the job waits for it", read).await.0 {
        Ok(v) => Ok(v),
        Err(e) if e.is_unavailable() => Err(JobEnd::Cancelled),
        Err(e) => Err(JobEnd::failed(Internal, e.to_string())),
    }
}

/// How a run ended short of a schedule: `Cancelled` becomes `JobStatus::Cancelled` (or a
/// re-queue on shutdown), `Failed` becomes `JobStatus::Failed` with the reason (a status alone
/// cannot carry it).
enum JobEnd {
    Cancelled,
    Failed(crate::store::Failure),
}

impl JobEnd {
    /// A failure of `kind`; an internal one is logged in full and its client told only that
    /// it happened (internal details are not sent).
    fn failed(kind: ErrorKind, message: impl Into<String>) -> JobEnd {
        let message = message.into();
        let message = match kind {
            ErrorKind::Internal => {
                tracing::error!(error = %message, "a job failed on an internal error");
                "internal error: the server's log has the details".to_string()
            }
            _ => message,
        };
        JobEnd::Failed(crate::store::Failure { kind, message })
    }

    /// An engine error by its kind (a cancel stays a cancel).
    fn engine(e: engine::Error) -> JobEnd {
        match e.kind() {
            ErrorKind::Cancelled => JobEnd::Cancelled,
            kind => JobEnd::failed(kind, e.to_string()),
        }
    }
}

/// A finished job's result, as it is stored.
struct Finished {
    schedule_id: String,
    topology_id: String,
    /// The schedule JSON, compressed when large; its topology is `store::TOPOLOGY_BY_REF`
    /// when `topology_by_ref`.
    body: crate::store::StoredBody,
    summary: String,
    topology_by_ref: bool,
}

/// Runs one job.
async fn execute(
    st: &Shared,
    job: &crate::store::JobRow,
    lease: &crate::store::Lease,
    flag: Arc<AtomicBool>,
    pool: Option<Arc<rayon::ThreadPool>>,
) -> Result<Finished, JobEnd> {
    let req: JobRequest = serde_json::from_str(&job.request)
        .map_err(|e| JobEnd::failed(Internal, format!("unreadable job request: {e}")))?;
    let deleted = || JobEnd::failed(ErrorKind::Input, format!("topology {} was deleted", req.topology_id));
    // The topology as a request of this process built it, if it is this job's (by the digest
    // the request recorded) and still stored: its body need not be read or parsed. Taken, not
    // copied, so the memory goes with the job that uses it.
    let built = {
        let mut slot = st.built.lock().unwrap_or_else(|e| e.into_inner());
        let ours = slot.as_ref().is_some_and(|(digest, _)| *digest == req.topology_digest);
        if ours { slot.take().map(|(_, topo)| topo) } else { None }
    };
    let stored = match &built {
        Some(_) => reading(st, || st.store.topology_digest(&req.topology_id)).await?.is_some(),
        None => false,
    };
    let topology = match built {
        Some(topo) if stored => {
            st.metrics.topologies_reused.inc();
            TopologyIn::Built(topo)
        }
        _ => TopologyIn::Body(reading(st, || st.store.topology(&req.topology_id)).await?.ok_or_else(deleted)?.body),
    };
    let schedule_id = crate::store::new_id();
    let sid = schedule_id.clone();
    let topology_id = req.topology_id.clone();
    let span = tracing::Span::current();
    // The solver reports progress here; a ticker writes it to the job twice a second, and
    // keeps the lease while the solve runs, so no other worker takes the job.
    let progress: Arc<std::sync::Mutex<Option<(f64, String)>>> = Arc::default();
    let renew = {
        let st = st.clone();
        let id = job.id.clone();
        let lease = lease.clone();
        let progress = progress.clone();
        tokio::spawn(async move {
            let tick = std::time::Duration::from_millis(500);
            let renew_every = std::time::Duration::from_millis((st.config.lease_ms / 3).max(100) as u64);
            let mut renewed = tokio::time::Instant::now();
            // The last renewal failed on an unreachable database: try again at the next tick.
            let mut again = false;
            loop {
                tokio::time::sleep(tick).await;
                let latest = progress.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some((fraction, message)) = latest {
                    let _ = st.store.set_progress(&id, fraction, &message).await;
                }
                if renewed.elapsed() < renew_every && !again {
                    continue;
                }
                renewed = tokio::time::Instant::now();
                // A DELETE from another replica ended the job, or the lease lapsed and another
                // worker owns it now: stop solving (nothing this worker finds would be stored).
                match st.store.renew_lease(&lease, st.config.lease_ms).await {
                    Ok(false) => {
                        again = false;
                        if let Some(f) = st.cancels.lock().unwrap().get(&id) {
                            f.store(true, Ordering::SeqCst);
                        }
                    }
                    Ok(true) => {
                        again = false;
                        st.store.note_reached();
                    }
                    // The database is away: solving goes on, and the renewal is tried again
                    // at the next tick, so the lease is back as soon as the database is.
                    Err(e) => {
                        st.store.note(&e);
                        again = true;
                    }
                }
            }
        })
    };
    let limits = st.config.limits();
    // A regeneration repairs its schedule first; if that was deleted meanwhile, the fresh run
    // alone answers.
    let t = std::time::Instant::now();
    let previous = match &req.regenerate_from {
        Some(id) => reading(st, || st.store.schedule_body(id)).await?.map(|(body, _)| body),
        None => None,
    };
    if previous.is_some() {
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        tracing::debug!(target: "ccsynth::timing", wall_ms, "job: the stored schedule read");
    }
    // The job's time limit counts from here, once what it reads from the database is in hand:
    // building its topology (fc:1448: 1.7 s beside a loadtest) and parsing a schedule to
    // regenerate are part of what its client waits for; a database outage while reading is not.
    let claimed = std::time::Instant::now();
    let solved = tokio::task::spawn_blocking(move || {
        let _enter = span.enter();
        let report = |fraction: f64, message: &str| {
            *progress.lock().unwrap_or_else(|e| e.into_inner()) = Some((fraction, message.to_string()));
        };
        let solve = || solve(&req, topology, previous, &sid, &flag, &limits, &report, claimed);
        match &pool {
            Some(pool) => pool.install(solve),
            None => solve(),
        }
    })
    .await;
    renew.abort();
    let (body, summary, topology_by_ref) =
        solved.map_err(|e| JobEnd::failed(Internal, format!("the solver stopped: {e}")))??;
    if body.json_len() > st.config.max_result_bytes {
        // Refused for good: storing it would fail (or fill the disk) every time it is retried.
        return Err(JobEnd::failed(
            Refused,
            format!(
                "the schedule is {} bytes of explicit JSON; this server stores at most {} (--max-result-bytes)",
                body.json_len(),
                st.config.max_result_bytes
            ),
        ));
    }
    if body.stored_len() > crate::store::STORED_MAX_BYTES {
        return Err(JobEnd::failed(
            Refused,
            format!(
                "the schedule's stored form is {} bytes; the database holds at most {} in one value",
                body.stored_len(),
                crate::store::STORED_MAX_BYTES
            ),
        ));
    }
    Ok(Finished { schedule_id, topology_id, body, summary, topology_by_ref })
}

/// A job's topology: its stored body, or as a request of this process built it.
enum TopologyIn {
    Body(String),
    Built(Arc<Topology>),
}

/// The synthesis itself (blocking): the engine, then the schedule JSON (its topology left out,
/// the stored topology stands for it: the third value says so; compressed when large) and its
/// summary JSON.
#[allow(clippy::too_many_arguments)]
fn solve(
    req: &JobRequest,
    topology: TopologyIn,
    previous: Option<crate::store::ScheduleBody>,
    schedule_id: &str,
    flag: &AtomicBool,
    limits: &engine::Limits,
    progress: engine::Progress,
    claimed: std::time::Instant,
) -> Result<(crate::store::StoredBody, String, bool), JobEnd> {
    let topo = match topology {
        TopologyIn::Body(body) => {
            Topology::from_json(&body).map_err(|e| JobEnd::failed(Internal, format!("stored topology: {e}")))?
        }
        TopologyIn::Built(topo) => Arc::unwrap_or_clone(topo),
    };
    let request =
        engine::Request::new(topo, req.spec(), limits).map_err(|e| JobEnd::failed(ErrorKind::Input, e.to_string()))?;
    let cancelled = || flag.load(Ordering::Relaxed);
    let ctl = engine::Control { cancelled: &cancelled, progress, since: Some(claimed) };
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = std::time::Instant::now();
    let previous = previous
        .map(|body| body.into_schedule())
        .transpose()
        .map_err(|e| JobEnd::failed(Internal, format!("the schedule to regenerate: {e}")))?;
    if previous.is_some() {
        tracing::debug!(target: "ccsynth::timing", wall_ms = ms(t), "job: the stored schedule parsed");
    }
    let t = std::time::Instant::now();
    let ran = match previous {
        Some(previous) => engine::regenerate(previous, &request, ctl),
        None => engine::run(&request, ctl),
    };
    tracing::debug!(target: "ccsynth::timing", wall_ms = ms(t), "job: the engine ran");
    let t = std::time::Instant::now();
    let out = ran.map_err(JobEnd::engine)?;
    let (mut schedule, report, stats) = (out.schedule, out.report, out.stats);
    let (body, by_ref) = stored_body(&mut schedule).map_err(|e| JobEnd::failed(Internal, e))?;
    // The fastest baseline `auto` built beside the schedule (null where none was: another
    // algorithm, or every baseline priced above the winner); `speedup` is its time over this one's.
    let best_baseline = stats.portfolio().and_then(|p| p.best_baseline()).map(|(name, t)| {
        let time = schedule.collective_time_ns.filter(|&x| x > 0.0);
        serde_json::json!({"algorithm": name, "collective_time_ns": t, "speedup": time.map(|x| t / x)})
    });
    let summary = serde_json::json!({
        "schedule_id": schedule_id,
        "algorithm": schedule.algorithm,
        "seed": schedule.seed,
        "collective": schedule.collective,
        "collective_time_ns": schedule.collective_time_ns,
        "lower_bound_ns": report.lower_bound_ns,
        "lower_bounds": report.lower_bounds,
        "best_baseline": best_baseline,
        "stats": stats,
        "validation": { "valid": report.valid, "violation_count": report.violation_count },
        "rounds": report.rounds,
        "transfers": report.transfers,
        "url": format!("/v1/schedules/{schedule_id}"),
    });
    tracing::debug!(target: "ccsynth::timing", wall_ms = ms(t), "job: the result written and compressed");
    Ok((body, summary.to_string(), by_ref))
}

/// A schedule as the store keeps it: its JSON when small, else packed (`schedule::packed`)
/// and compressed; with its topology left out when the stored topology stands for it (the
/// second value says so). Reading back the packed form of a large schedule takes a fraction
/// of its JSON's parse (0.5 M transfers: 0.8 s of JSON), which a regeneration pays first.
fn stored_body(schedule: &mut crate::schedule::Schedule) -> Result<(crate::store::StoredBody, bool), String> {
    use crate::store::{StoredBody, TOPOLOGY_BY_REF};
    let err = |e: serde_json::Error| e.to_string();
    // The topology is the stored one the request named: stored once, not once per schedule.
    let embedded = format!("\"topology\":{}", serde_json::to_string(&schedule.topology).map_err(err)?);
    let by_ref = |text: &mut String| -> bool {
        match text.find(&embedded) {
            // Searched before the topology only: a JSON body can be gigabytes of transfers.
            Some(at) if !text[..at].contains(TOPOLOGY_BY_REF) => {
                text.replace_range(at..at + embedded.len(), TOPOLOGY_BY_REF);
                true
            }
            _ => false,
        }
    };
    let mut header_by_ref = false;
    let packed = crate::schedule::packed::pack(schedule, |h| header_by_ref = by_ref(h)).map_err(err)?;
    let json_len = usize::try_from(packed.json_len).unwrap_or(usize::MAX);
    if json_len < crate::store::COMPRESS_FROM_BYTES {
        let mut body = serde_json::to_string(&*schedule).map_err(err)?;
        let by_ref = by_ref(&mut body);
        return Ok((StoredBody::Json(body), by_ref));
    }
    Ok((StoredBody::packed(&packed.bytes, json_len).map_err(|e| e.to_string())?, header_by_ref))
}
