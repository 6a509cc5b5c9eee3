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

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: expected sqlite:… or postgres://…")]
    Url(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    pub backend: Backend,
}

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
    pub status: String,
    pub progress: f64,
    pub message: Option<String>,
    pub error: Option<String>,
    pub schedule_id: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

const TOPOLOGY_COLS: &str = "id, digest, body, npus, switches, links, connected, parent_id, failures, created_at";
const JOB_COLS: &str = "id, batch_id, request_id, request_key, request, algorithm, status, progress, message, error, schedule_id, created_at, started_at, finished_at";

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

fn job_row(r: &sqlx::any::AnyRow) -> Result<JobRow, sqlx::Error> {
    Ok(JobRow {
        id: r.try_get("id")?,
        batch_id: r.try_get("batch_id")?,
        request_id: r.try_get("request_id")?,
        request_key: r.try_get("request_key")?,
        request: r.try_get("request")?,
        algorithm: r.try_get("algorithm")?,
        status: r.try_get("status")?,
        progress: r.try_get("progress")?,
        message: r.try_get("message")?,
        error: r.try_get("error")?,
        schedule_id: r.try_get("schedule_id")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

impl Store {
    /// Connects (creating an SQLite file if needed) and runs the embedded migrations.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
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
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 4 } else { 16 })
            .connect(&url)
            .await?;
        if backend == Backend::Sqlite {
            // Readers do not block the writer, and writers wait for each other instead of failing.
            sqlx::query("PRAGMA journal_mode = WAL").execute(&pool).await?;
            sqlx::query("PRAGMA busy_timeout = 10000").execute(&pool).await?;
        }
        match backend {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite").run(&pool).await?,
            Backend::Postgres => sqlx::migrate!("./migrations/postgres").run(&pool).await?,
        }
        Ok(Store { pool, backend })
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Inserts a topology unless one with the same digest exists; returns it and whether it
    /// was created.
    pub async fn put_topology(&self, t: &TopologyRow) -> Result<(TopologyRow, bool), StoreError> {
        if let Some(existing) = self.topology_by_digest(&t.digest).await? {
            return Ok((existing, false));
        }
        let inserted = sqlx::query(
            "INSERT INTO topologies (id, digest, body, npus, switches, links, connected, parent_id, failures, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&t.id)
        .bind(&t.digest)
        .bind(&t.body)
        .bind(t.npus)
        .bind(t.switches)
        .bind(t.links)
        .bind(t.connected as i64)
        .bind(t.parent_id.clone())
        .bind(t.failures.clone())
        .bind(t.created_at)
        .execute(&self.pool)
        .await;
        match inserted {
            Ok(_) => Ok((t.clone(), true)),
            // Another request stored the same topology in between: return that one.
            Err(e) => match self.topology_by_digest(&t.digest).await? {
                Some(existing) => Ok((existing, false)),
                None => Err(e.into()),
            },
        }
    }

    pub async fn topology_by_digest(&self, digest: &str) -> Result<Option<TopologyRow>, StoreError> {
        let q = format!("SELECT {TOPOLOGY_COLS} FROM topologies WHERE digest = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(digest).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(topology_row).transpose()?)
    }

    pub async fn topology(&self, id: &str) -> Result<Option<TopologyRow>, StoreError> {
        let q = format!("SELECT {TOPOLOGY_COLS} FROM topologies WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(topology_row).transpose()?)
    }

    /// Topologies by creation, `limit` after `offset`, and the total count.
    pub async fn topologies(&self, offset: i64, limit: i64) -> Result<(Vec<TopologyRow>, i64), StoreError> {
        let q = format!("SELECT {TOPOLOGY_COLS} FROM topologies ORDER BY created_at, id LIMIT $1 OFFSET $2");
        let rows = sqlx::query(sqlx::AssertSqlSafe(q)).bind(limit).bind(offset).fetch_all(&self.pool).await?;
        let total: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM topologies").fetch_one(&self.pool).await?.try_get("n")?;
        Ok((rows.iter().map(topology_row).collect::<Result<_, _>>()?, total))
    }

    pub async fn delete_topology(&self, id: &str) -> Result<bool, StoreError> {
        let r = sqlx::query("DELETE FROM topologies WHERE id = $1").bind(id).execute(&self.pool).await?;
        Ok(r.rows_affected() > 0)
    }

    pub async fn create_batch(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO batches (id, created_at) VALUES ($1, $2)")
            .bind(id)
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn batch_exists(&self, id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("SELECT id FROM batches WHERE id = $1").bind(id).fetch_optional(&self.pool).await?.is_some())
    }

    pub async fn create_job(
        &self,
        id: &str,
        batch_id: Option<&str>,
        request_id: Option<&str>,
        key: &str,
        request: &str,
        algorithm: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO jobs (id, batch_id, request_id, request_key, request, algorithm, status, progress, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'queued', 0, $7)",
        )
        .bind(id)
        .bind(batch_id.map(str::to_string))
        .bind(request_id.map(str::to_string))
        .bind(key)
        .bind(request)
        .bind(algorithm)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn job(&self, id: &str) -> Result<Option<JobRow>, StoreError> {
        let q = format!("SELECT {JOB_COLS} FROM jobs WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(job_row).transpose()?)
    }

    pub async fn batch_jobs(&self, batch_id: &str) -> Result<Vec<JobRow>, StoreError> {
        let q = format!("SELECT {JOB_COLS} FROM jobs WHERE batch_id = $1 ORDER BY created_at, id");
        let rows = sqlx::query(sqlx::AssertSqlSafe(q)).bind(batch_id).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(job_row).collect::<Result<_, _>>()?)
    }

    /// The newest succeeded job with this request key (a cache hit).
    pub async fn succeeded_with_key(&self, key: &str) -> Result<Option<JobRow>, StoreError> {
        let q = format!(
            "SELECT {JOB_COLS} FROM jobs WHERE request_key = $1 AND status = 'succeeded' ORDER BY finished_at DESC LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(key).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(job_row).transpose()?)
    }

    pub async fn queued_count(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE status = 'queued'")
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?)
    }

    /// Claims the oldest queued job, or a running one whose lease lapsed (its worker died),
    /// for `lease_ms`. Exactly one caller gets a given job.
    pub async fn claim_job(&self, lease_ms: i64) -> Result<Option<JobRow>, StoreError> {
        let now = now_ms();
        let lock = if self.backend == Backend::Postgres { " FOR UPDATE SKIP LOCKED" } else { "" };
        let q = format!(
            "UPDATE jobs SET status = 'running', started_at = $1, lease_until = $2, progress = 0, message = 'running' \
             WHERE id = (SELECT id FROM jobs WHERE status = 'queued' OR (status = 'running' AND lease_until < $1) \
             ORDER BY created_at, id LIMIT 1{lock}) \
             AND (status = 'queued' OR (status = 'running' AND lease_until < $1)) RETURNING {JOB_COLS}"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(now).bind(now + lease_ms).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(job_row).transpose()?)
    }

    pub async fn renew_lease(&self, id: &str, lease_ms: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET lease_until = $1 WHERE id = $2 AND status = 'running'")
            .bind(now_ms() + lease_ms)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records a running job's progress.
    pub async fn set_progress(&self, id: &str, fraction: f64, message: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET progress = $1, message = $2 WHERE id = $3 AND status = 'running'")
            .bind(fraction)
            .bind(message)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Stores the schedule and marks the job succeeded, in one transaction.
    pub async fn finish_job(
        &self,
        job_id: &str,
        schedule_id: &str,
        topology_id: &str,
        body: &str,
        summary: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO schedules (id, job_id, topology_id, body, summary, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(schedule_id)
        .bind(job_id)
        .bind(topology_id)
        .bind(body)
        .bind(summary)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE jobs SET status = 'succeeded', progress = 1, message = 'done', schedule_id = $1, finished_at = $2, \
             lease_until = NULL WHERE id = $3",
        )
        .bind(schedule_id)
        .bind(now)
        .bind(job_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ends a job as `failed` or `cancelled` (unless it already ended).
    pub async fn end_job(&self, id: &str, status: &str, error: Option<&str>) -> Result<bool, StoreError> {
        let r = sqlx::query(
            "UPDATE jobs SET status = $1, error = $2, message = $1, finished_at = $3, lease_until = NULL \
             WHERE id = $4 AND status IN ('queued', 'running')",
        )
        .bind(status)
        .bind(error.map(str::to_string))
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Puts a running job back in the queue (graceful shutdown).
    pub async fn requeue(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET status = 'queued', lease_until = NULL, message = 'requeued' WHERE id = $1 AND status = 'running'",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn schedule_body(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        let row = sqlx::query("SELECT body, topology_id FROM schedules WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some((r.try_get("body")?, r.try_get("topology_id")?)),
            None => None,
        })
    }

    pub async fn schedule_summary(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row =
            sqlx::query("SELECT summary FROM schedules WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        Ok(match row {
            Some(r) => Some(r.try_get("summary")?),
            None => None,
        })
    }

    /// The request of the job that produced a schedule.
    pub async fn schedule_request(&self, id: &str) -> Result<Option<String>, StoreError> {
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
