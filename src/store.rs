//! The service's database: topologies, jobs (the durable queue) and schedules, through one
//! code path for SQLite (the default, an embedded file) and PostgreSQL (`DATABASE_URL=postgres://…`),
//! with sqlx's runtime-generic `Any` driver and migrations embedded per backend.
//!
//! Queue semantics: a job is claimed by exactly one worker with a lease; a worker renews the
//! lease while it runs the job, so after a crash (no renewals) the job is claimed again once
//! its lease lapses. On PostgreSQL the claim uses `FOR UPDATE SKIP LOCKED`, so replicas sharing
//! one database never claim the same job; SQLite serializes writers itself.

use sqlx::AnyPool;
use sqlx::Row;
use sqlx::any::AnyPoolOptions;

mod batches;
mod body;
mod derived;
mod disk;
pub use disk::sqlite_in_memory;
mod faults;
mod outage;
mod queue;
mod topologies;

pub use batches::{BatchItem, Room};
pub use body::{COMPRESS_FROM_BYTES, STORED_MAX_BYTES, ScheduleBody, StoredBody, TOPOLOGY_BY_REF};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[source] sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: expected sqlite:… or postgres://…")]
    Url(String),
    #[error(
        "{0:?}: an SQLite database in memory is opened anew by each of the pool's connections (the tables \
         would be on one of them): name a file, such as sqlite:ccsynth.db"
    )]
    InMemory(String),
    #[error("jobs table: {0}")]
    Status(#[from] UnknownJobStatus),
    /// Rows that contradict each other (a bug, or a hand-edited database).
    #[error("inconsistent rows: {0}")]
    Corrupt(String),
    #[error("compressing a schedule: {0}")]
    Compress(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> StoreError {
        // A failed statement may have left its connection inside a transaction: the pool
        // checks the connections coming back for a while (`faults::suspect`).
        faults::suspect();
        StoreError::Db(e)
    }
}

impl StoreError {
    /// Whether a write was refused for a reason that may pass (a full, read-only or busy
    /// disk: `faults`); such an error is also `is_unavailable`.
    pub fn is_storage_fault(&self) -> bool {
        matches!(self, StoreError::Db(sqlx::Error::Database(d)) if faults::is_storage_fault(d.as_ref()))
    }

    /// Whether the database could not be reached (no connection within the acquire timeout,
    /// a connection cut, the server shutting down or not yet accepting): the request may
    /// succeed later, so the service answers 503, not 500.
    pub fn is_unavailable(&self) -> bool {
        let StoreError::Db(e) = self else { return false };
        match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => true,
            // PostgreSQL's connection exceptions (not 08P01, a protocol violation, which may
            // recur), 53300 (too many connections, as while it recovers) and 57P01–57P03
            // (shutting down, crashed, not yet accepting connections).
            // A full or read-only disk, or a write lock held too long: writes are away.
            sqlx::Error::Database(d) if faults::is_storage_fault(d.as_ref()) => true,
            sqlx::Error::Database(d) => d.code().is_some_and(|c| {
                matches!(
                    c.as_ref(),
                    "08000" | "08001" | "08003" | "08004" | "08006" | "53300" | "57P01" | "57P02" | "57P03"
                )
            }),
            _ => false,
        }
    }
}

/// How long a query waits for a connection: on PostgreSQL short, so that an outage is a prompt
/// 503 (30 s, sqlx's default, held every request that long and then answered 500); on SQLite,
/// where the pool's four connections are busy only under load, sqlx's default.
fn acquire_timeout(backend: Backend) -> std::time::Duration {
    match backend {
        Backend::Postgres => std::time::Duration::from_secs(2),
        Backend::Sqlite => std::time::Duration::from_secs(30),
    }
}

/// A job's state. `as_str()` is what `jobs.status` holds and what the API serves: the SQL
/// binds it, never spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub const ALL: [JobStatus; 5] =
        [JobStatus::Queued, JobStatus::Running, JobStatus::Succeeded, JobStatus::Failed, JobStatus::Cancelled];

    /// The stored (and JSON) spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the job is over (it will not run again).
    pub fn is_ended(&self) -> bool {
        matches!(self, JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled)
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a job failed: the kind of failure and the message its client reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: crate::engine::ErrorKind,
    pub message: String,
}

/// A status value that names no [`JobStatus`].
#[derive(Debug, thiserror::Error)]
#[error("unknown job status {0:?}")]
pub struct UnknownJobStatus(pub String);

impl std::str::FromStr for JobStatus {
    type Err = UnknownJobStatus;

    fn from_str(s: &str) -> Result<JobStatus, UnknownJobStatus> {
        JobStatus::ALL.into_iter().find(|v| v.as_str() == s).ok_or_else(|| UnknownJobStatus(s.to_string()))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A job to queue: its id, batch, the id of the HTTP request that queued it, the normalized
/// request (its cache key and JSON), its algorithm and the topology it runs on.
#[derive(Clone, Copy, Debug)]
pub struct NewJob<'a> {
    pub id: &'a str,
    pub batch_id: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub key: &'a str,
    pub request: &'a str,
    pub algorithm: &'a str,
    pub topology_id: &'a str,
    /// The client queuing it (None without tokens).
    pub owner: Option<&'a str>,
    /// Its declared solve time (the time limit), counted against the client's quota.
    pub budget_s: f64,
    /// Identical requests may join it while it is queued or running (not forced, not in a
    /// batch): at most one such job per key is active, which the store enforces.
    pub shared: bool,
    /// Claimed before every job of a lower priority (0 normal, 1 interactive).
    pub priority: i32,
}

/// What deleting a topology did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deletion {
    Deleted,
    NotFound,
    /// Not deleted: this many queued or running jobs run on it.
    InUse(i64),
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    pub backend: Backend,
    /// Where the pool connects: PostgreSQL's listener needs a connection of its own.
    url: String,
    /// Whether this process finds the database unreachable (`StoreError::is_unavailable`, from
    /// a claim, a lease's renewal or a job's end) and when it last reached it again: every
    /// running job's lease lapses in an outage, since no owner could renew it, so during one and
    /// for a lease's time after it `claim_job` takes no lapsed job and gives none up, while the
    /// owners renew theirs and record their results.
    outage: std::sync::Arc<std::sync::Mutex<outage::Outage>>,
}

/// A change in the job table that other replicas' waiters and idle workers want to hear of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobEvent {
    /// A job was queued (or put back in the queue).
    Queued,
    /// A job ended: succeeded, failed or cancelled.
    Ended,
    /// The listener reconnected: events may have been missed.
    Missed,
}

/// The PostgreSQL channel job events go out on.
const JOB_CHANNEL: &str = "ccsynth_jobs";

#[derive(Clone, Debug)]
pub struct TopologyRow {
    pub id: String,
    pub digest: String,
    pub body: String,
    pub npus: i64,
    pub switches: i64,
    pub links: i64,
    pub connected: bool,
    pub parent_id: Option<String>,
    pub failures: Option<String>,
    pub created_at: i64,
}

#[derive(Clone, Debug)]
pub struct JobRow {
    pub id: String,
    pub batch_id: Option<String>,
    /// The HTTP request that created the job (for tracing across the queue).
    pub request_id: Option<String>,
    pub request_key: String,
    pub request: String,
    pub algorithm: String,
    pub status: JobStatus,
    pub progress: f64,
    pub message: Option<String>,
    pub error: Option<String>,
    /// A failed job's kind of failure (`None` for the others, and for failures stored by
    /// versions before it was recorded).
    pub error_kind: Option<crate::engine::ErrorKind>,
    pub schedule_id: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// The client that queued it (None without tokens).
    pub owner: Option<String>,
}

/// A worker's claim on a job: the job and the time it was claimed (`started_at`, which every
/// new claim of the same job changes, since a lease must lapse before it can be re-claimed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub job_id: String,
    pub claimed_at: i64,
}

impl JobRow {
    /// The claim this row records, if it is running.
    pub fn lease(&self) -> Option<Lease> {
        match (self.status, self.started_at) {
            (JobStatus::Running, Some(claimed_at)) => Some(Lease { job_id: self.id.clone(), claimed_at }),
            _ => None,
        }
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Whether `id` could be one of ours (`new_id`'s 32 hex digits). Anything else, a `%00` or a
/// megabyte of text, names no row and is answered "not found" without asking the database
/// (PostgreSQL refuses a NUL byte in text with an error, not an empty result).
pub fn plausible_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

const TOPOLOGY_COLS: &str = "id, digest, body, npus, switches, links, connected, parent_id, failures, created_at";
const JOB_COLS: &str = "id, batch_id, request_id, request_key, request, algorithm, status, progress, message, error, error_kind, schedule_id, created_at, started_at, finished_at, owner";

fn topology_row(r: &sqlx::any::AnyRow) -> Result<TopologyRow, sqlx::Error> {
    Ok(TopologyRow {
        id: r.try_get("id")?,
        digest: r.try_get("digest")?,
        body: r.try_get("body")?,
        npus: r.try_get("npus")?,
        switches: r.try_get("switches")?,
        links: r.try_get("links")?,
        connected: r.try_get::<i64, _>("connected")? != 0,
        parent_id: r.try_get("parent_id")?,
        failures: r.try_get("failures")?,
        created_at: r.try_get("created_at")?,
    })
}

fn job_row(r: &sqlx::any::AnyRow) -> Result<JobRow, StoreError> {
    Ok(JobRow {
        id: r.try_get("id")?,
        batch_id: r.try_get("batch_id")?,
        request_id: r.try_get("request_id")?,
        request_key: r.try_get("request_key")?,
        request: r.try_get("request")?,
        algorithm: r.try_get("algorithm")?,
        status: r.try_get::<String, _>("status")?.parse()?,
        progress: r.try_get("progress")?,
        message: r.try_get("message")?,
        error: r.try_get("error")?,
        error_kind: r.try_get::<Option<String>, _>("error_kind")?.and_then(|k| crate::engine::ErrorKind::parse(&k)),
        schedule_id: r.try_get("schedule_id")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        owner: r.try_get("owner")?,
    })
}

impl Store {
    /// Connects (creating an SQLite file if needed) and runs the embedded migrations.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        if disk::sqlite_in_memory(url) {
            return Err(StoreError::InMemory(url.to_string()));
        }
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            return Err(StoreError::Url(url.to_string()));
        };
        let url = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                format!("{url}{}mode=rwc", if url.contains('?') { '&' } else { '?' })
            }
            _ => url.to_string(),
        };
        let mut options = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 4 } else { 16 })
            .acquire_timeout(acquire_timeout(backend));
        if backend == Backend::Sqlite {
            // No connection goes back to the pool inside a transaction (a failed write's).
            options = options
                .after_release(|conn, _| Box::pin(async move { Ok(faults::sqlite_connection_is_clean(conn).await) }));
            // Nor is one handed out that SQLite opened read-only while its disk refused
            // writing (a database opened `mode=ro` on purpose is read-only throughout).
            if !url.split(['?', '&']).any(|kv| kv == "mode=ro") {
                options =
                    options.after_connect(|conn, _| Box::pin(faults::sqlite_mark_read_only(conn))).before_acquire(
                        |conn, _| Box::pin(async move { Ok(faults::sqlite_connection_writes(conn).await) }),
                    );
            }
        }
        let pool = options.connect(&url).await?;
        if backend == Backend::Sqlite {
            // Readers do not block the writer, and writers wait for each other instead of failing.
            sqlx::query("PRAGMA journal_mode = WAL").execute(&pool).await?;
            sqlx::query("PRAGMA busy_timeout = 10000").execute(&pool).await?;
        }
        match backend {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite").run(&pool).await?,
            Backend::Postgres => sqlx::migrate!("./migrations/postgres").run(&pool).await?,
        }
        Ok(Store { pool, backend, url, outage: Default::default() })
    }

    /// Tells every replica's `watch_jobs` of `event` (PostgreSQL `NOTIFY`; on SQLite nothing:
    /// one process serves the file, and it signals its own waiters in memory).
    async fn announce<'e, E: sqlx::Executor<'e, Database = sqlx::Any>>(
        &self,
        on: E,
        event: JobEvent,
    ) -> Result<(), StoreError> {
        if self.backend != Backend::Postgres {
            return Ok(());
        }
        let payload = match event {
            JobEvent::Queued => "queued",
            JobEvent::Ended | JobEvent::Missed => "ended",
        };
        // NOTIFY takes no bind parameters; both parts are constants.
        sqlx::query(sqlx::AssertSqlSafe(format!("NOTIFY {JOB_CHANNEL}, '{payload}'"))).execute(on).await?;
        Ok(())
    }

    /// Whether `watch_jobs` hears other replicas' job events (PostgreSQL).
    pub fn hears_other_replicas(&self) -> bool {
        self.backend == Backend::Postgres
    }

    /// Calls `on` for every job event any replica announces, until the process ends
    /// (PostgreSQL `LISTEN`, reconnecting after a lost connection, with `JobEvent::Missed`
    /// once it is back). Returns at once on SQLite.
    pub async fn watch_jobs(&self, on: impl Fn(JobEvent) + Send) {
        if self.backend != Backend::Postgres {
            return;
        }
        loop {
            let listener = async {
                let mut l = sqlx::postgres::PgListener::connect(&self.url).await?;
                l.listen(JOB_CHANNEL).await?;
                Ok::<_, sqlx::Error>(l)
            };
            match listener.await {
                Ok(mut l) => {
                    on(JobEvent::Missed);
                    loop {
                        match l.try_recv().await {
                            Ok(Some(n)) => on(if n.payload() == "queued" { JobEvent::Queued } else { JobEvent::Ended }),
                            // The connection dropped and is back: anything in between is lost.
                            Ok(None) => on(JobEvent::Missed),
                            Err(e) => {
                                tracing::warn!(error = %e, "job events: listener failed; reconnecting");
                                break;
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "job events: cannot listen; retrying in 1 s"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }

    /// A batch with no jobs (tests; a batch is made with its jobs by `create_batch_jobs`).
    #[cfg(test)]
    pub async fn create_batch(&self, id: &str, owner: Option<&str>) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO batches (id, created_at, owner) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(now_ms())
            .bind(owner.map(str::to_string))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The batch's owner: `None` when there is no such batch, `Some(None)` when it has none.
    pub async fn batch_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let row = sqlx::query("SELECT owner FROM batches WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        Ok(match row {
            Some(r) => Some(r.try_get("owner")?),
            None => None,
        })
    }

    /// The owner of the job that made a schedule: `None` when there is no such schedule.
    pub async fn schedule_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let row =
            sqlx::query("SELECT j.owner AS owner FROM schedules s LEFT JOIN jobs j ON j.id = s.job_id WHERE s.id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            Some(r) => Some(r.try_get("owner")?),
            None => None,
        })
    }

    /// Compresses the bodies of up to `batch` schedules stored before bodies were compressed
    /// (migration 0009) and large enough to be; how many it compressed (0: none are left).
    /// One body in memory at a time; safe beside other replicas doing the same.
    pub async fn compress_old_schedules(&self, batch: i64) -> Result<usize, StoreError> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM schedules WHERE body_zstd IS NULL AND LENGTH(body) >= $1 LIMIT $2")
                .bind(COMPRESS_FROM_BYTES as i64)
                .bind(batch)
                .fetch_all(&self.pool)
                .await?;
        let mut done = 0;
        for id in ids {
            let body: Option<String> =
                sqlx::query_scalar("SELECT body FROM schedules WHERE id = $1 AND body_zstd IS NULL")
                    .bind(&id)
                    .fetch_optional(&self.pool)
                    .await?;
            let Some(body) = body else { continue }; // another replica got to it first
            let packed = tokio::task::spawn_blocking(move || StoredBody::pack(body))
                .await
                .map_err(|e| StoreError::Compress(e.to_string()))??;
            let StoredBody::Zstd { bytes, .. } = packed else { continue };
            sqlx::query("UPDATE schedules SET body = '', body_zstd = $1 WHERE id = $2 AND body_zstd IS NULL")
                .bind(bytes)
                .bind(&id)
                .execute(&self.pool)
                .await?;
            done += 1;
        }
        Ok(done)
    }

    pub async fn schedule_summary(&self, id: &str) -> Result<Option<String>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let row =
            sqlx::query("SELECT summary FROM schedules WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        Ok(match row {
            Some(r) => Some(r.try_get("summary")?),
            None => None,
        })
    }

    /// The request of the job that produced a schedule.
    pub async fn schedule_request(&self, id: &str) -> Result<Option<String>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let row =
            sqlx::query("SELECT j.request AS request FROM schedules s JOIN jobs j ON j.id = s.job_id WHERE s.id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(match row {
            Some(r) => Some(r.try_get("request")?),
            None => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::JobStatus;

    /// These spellings are in every database's `jobs.status` and in the API's JSON: they must
    /// not change.
    #[test]
    fn job_status_spellings() {
        let names = ["queued", "running", "succeeded", "failed", "cancelled"];
        assert_eq!(JobStatus::ALL.len(), names.len());
        for (status, name) in JobStatus::ALL.into_iter().zip(names) {
            assert_eq!(status.as_str(), name);
            assert_eq!(status.to_string(), name);
            assert_eq!(name.parse::<JobStatus>().unwrap(), status);
            assert_eq!(serde_json::to_string(&status).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<JobStatus>(&format!("\"{name}\"")).unwrap(), status);
        }
        for unknown in ["", "Cancelled", "canceled", "done"] {
            assert!(unknown.parse::<JobStatus>().is_err(), "{unknown:?}");
        }
        let ended: Vec<JobStatus> = JobStatus::ALL.into_iter().filter(JobStatus::is_ended).collect();
        assert_eq!(ended, [JobStatus::Succeeded, JobStatus::Failed, JobStatus::Cancelled]);
    }
}
