//! The job queue of the store: queueing a job (one shared active job per request key), the
//! clients' quotas, the fair claim (a lapsed lease first, then by priority, running jobs and
//! last start between clients), leases, progress and the ends of jobs.
use super::body::StoredBody;
use super::{
    Backend, Failure, JOB_COLS, JobEvent, JobRow, JobStatus, Lease, NewJob, Store, StoreError, job_row, now_ms,
    plausible_id,
};
use sqlx::Row;

impl Store {
    /// Queues a job; `false` when it was not created because a shared job with its key is
    /// already queued or running (then join that one: `active_with_key`).
    pub async fn create_job(&self, job: NewJob<'_>) -> Result<bool, StoreError> {
        // Noted: a job refused for a full disk makes `/readyz` probe until writes work again.
        let created = self.insert_job(job).await;
        self.noting_write(created)
    }

    async fn insert_job(&self, job: NewJob<'_>) -> Result<bool, StoreError> {
        if !insert_job_on(&self.pool, &job, now_ms()).await? {
            return Ok(false);
        }
        self.announce(&self.pool, JobEvent::Queued).await?;
        Ok(true)
    }

    /// Queued and running jobs of `priority` or above of one client (`None`: no tokens, every
    /// job is the one client's).
    pub async fn active_at_priority(&self, owner: Option<&str>, priority: i32) -> Result<i64, StoreError> {
        let q = "SELECT COUNT(*) FROM jobs WHERE COALESCE(owner, '') = $1 AND status IN ($2, $3) AND priority >= $4";
        Ok(sqlx::query_scalar(q)
            .bind(owner.unwrap_or(""))
            .bind(JobStatus::Queued.as_str())
            .bind(JobStatus::Running.as_str())
            .bind(priority)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Raises a queued job's priority (a request of a higher priority joined it).
    pub async fn raise_priority(&self, id: &str, priority: i32) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET priority = $1 WHERE id = $2 AND status = $3 AND priority < $1")
            .bind(priority)
            .bind(id)
            .bind(JobStatus::Queued.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Queued and running jobs of one client and their declared solve time in seconds (its
    /// quotas), in one query.
    pub async fn active_of(&self, owner: &str) -> Result<(i64, f64), StoreError> {
        active_of_on(&self.pool, owner).await
    }

    pub async fn job(&self, id: &str) -> Result<Option<JobRow>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let q = format!("SELECT {JOB_COLS} FROM jobs WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(job_row).transpose()
    }

    /// A queued job only (`claim_job` just after an outage).
    async fn claim_queued(&self, now: i64, lease_ms: i64) -> Result<Option<JobRow>, StoreError> {
        let lock = if self.backend == Backend::Postgres { " FOR UPDATE SKIP LOCKED" } else { "" };
        let row = self.claim_by(queued_claim_sql(lock), now, lease_ms).await?;
        row.as_ref().map(job_row).transpose()
    }

    /// Runs one of the claims (`sql` takes $1 now, $2 the lease's end, $3 `running`, $4
    /// `queued`): the claimed row, if any.
    async fn claim_by(&self, sql: String, now: i64, lease_ms: i64) -> Result<Option<sqlx::any::AnyRow>, StoreError> {
        // Every row fetched (there is at most one), not the first: SQLite commits an
        // UPDATE … RETURNING when the statement runs to its end, and a commit that fails there
        // (a full disk) would go unseen by a caller that stopped at the first row, which would
        // then solve a job it never claimed.
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(now + lease_ms)
            .bind(JobStatus::Running.as_str())
            .bind(JobStatus::Queued.as_str())
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().next())
    }

    pub async fn batch_jobs(&self, batch_id: &str) -> Result<Vec<JobRow>, StoreError> {
        if !plausible_id(batch_id) {
            return Ok(Vec::new());
        }
        // The members' order is the batch's items' (migration 0016); a job that answers two
        // items is listed twice, as the batch's `job_ids` name it.
        let q = format!(
            "SELECT {JOB_COLS} FROM batch_members JOIN jobs ON jobs.id = batch_members.job \
             WHERE batch_members.batch = $1 ORDER BY batch_members.item"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(q)).bind(batch_id).fetch_all(&self.pool).await?;
        rows.iter().map(job_row).collect()
    }

    /// Records that item `item` of batch `batch_id` is answered by job `job_id`: a job of
    /// this batch, or one made before it whose result the item reuses.
    #[cfg(test)]
    pub async fn add_batch_member(&self, batch_id: &str, item: usize, job_id: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO batch_members (batch, item, job) VALUES ($1, $2, $3)")
            .bind(batch_id)
            .bind(item as i64)
            .bind(job_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The newest succeeded job with this request key (a cache hit).
    pub async fn succeeded_with_key(&self, key: &str) -> Result<Option<JobRow>, StoreError> {
        succeeded_with_key_on(&self.pool, key).await
    }

    /// The oldest queued or running job with this request key: an identical request in flight,
    /// which a new one joins instead of solving the same thing twice.
    pub async fn active_with_key(&self, key: &str) -> Result<Option<JobRow>, StoreError> {
        let q = format!(
            "SELECT {JOB_COLS} FROM jobs WHERE request_key = $1 AND status IN ($2, $3) ORDER BY created_at, id LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(q))
            .bind(key)
            .bind(JobStatus::Queued.as_str())
            .bind(JobStatus::Running.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    pub async fn queued_count(&self) -> Result<i64, StoreError> {
        queued_count_on(&self.pool).await
    }

    /// Claims the oldest queued job, or a running one whose lease lapsed (its worker died),
    /// for `lease_ms`. Exactly one caller gets a given job. A job is claimed at most
    /// `max_attempts` times: one whose lease lapsed that often is failed instead (its worker
    /// keeps dying on it, e.g. of memory, and would again).
    pub async fn claim_job(&self, lease_ms: i64, max_attempts: i64) -> Result<Option<JobRow>, StoreError> {
        let r = self.claim(lease_ms, max_attempts).await;
        self.noting(r)
    }

    async fn claim(&self, lease_ms: i64, max_attempts: i64) -> Result<Option<JobRow>, StoreError> {
        let now = now_ms();
        // Just after an outage every running job's lease has lapsed with no owner at fault:
        // only queued jobs are claimed until a lease's time has passed (their owners renew).
        if self.in_outage_or_within(lease_ms) {
            return self.claim_queued(now, lease_ms).await;
        }
        let given_up = sqlx::query(
            "UPDATE jobs SET status = $1, error = $2, error_kind = $6, message = $1, finished_at = $3, \
             lease_until = NULL WHERE status = $4 AND lease_until < $3 AND attempts >= $5",
        )
        .bind(JobStatus::Failed.as_str())
        .bind(format!(
            "the job was started {max_attempts} times and its worker stopped each time without finishing \
             (a crash, or a lapsed lease); it is not tried again"
        ))
        .bind(now)
        .bind(JobStatus::Running.as_str())
        .bind(max_attempts)
        // Its worker died each time: a crash (out of memory, a bug) is ours, not the request's.
        .bind(crate::engine::ErrorKind::Internal.as_str())
        .execute(&self.pool)
        .await?;
        if given_up.rows_affected() > 0 {
            self.announce(&self.pool, JobEvent::Ended).await?;
        }
        let lock = if self.backend == Backend::Postgres { " FOR UPDATE SKIP LOCKED" } else { "" };
        // $3 is `running` (the new status and message), $4 `queued`. First a job whose lease
        // lapsed (its worker died): the oldest, as it was claimed once already.
        let lapsed = format!(
            "UPDATE jobs SET status = $3, started_at = $1, lease_until = $2, progress = 0, message = $3, \
             attempts = attempts + 1 \
             WHERE id = (SELECT id FROM jobs WHERE status = $3 AND lease_until < $1 ORDER BY created_at, id LIMIT 1{lock}) \
             AND status = $3 AND status <> $4 AND lease_until < $1 RETURNING {JOB_COLS}"
        );
        // (`status <> $4` only so that both queries take the same four parameters.) Then a
        // queued job (`queued_claim_sql`).
        let mut row = None;
        for q in [lapsed, queued_claim_sql(lock)] {
            row = self.claim_by(q, now, lease_ms).await?;
            if row.is_some() {
                break;
            }
        }
        row.as_ref().map(job_row).transpose()
    }

    /// Extends a lease; `false` when the job is no longer this claim's (it ended, or its lease
    /// lapsed and another worker claimed it).
    pub async fn renew_lease(&self, lease: &Lease, lease_ms: i64) -> Result<bool, StoreError> {
        let r = sqlx::query("UPDATE jobs SET lease_until = $1 WHERE id = $2 AND status = $3 AND started_at = $4")
            .bind(now_ms() + lease_ms)
            .bind(&lease.job_id)
            .bind(JobStatus::Running.as_str())
            .bind(lease.claimed_at)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Records a running job's progress.
    pub async fn set_progress(&self, id: &str, fraction: f64, message: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE jobs SET progress = $1, message = $2 WHERE id = $3 AND status = $4")
            .bind(fraction)
            .bind(message)
            .bind(id)
            .bind(JobStatus::Running.as_str())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Marks the job succeeded and stores its schedule, in one transaction, only if the job is
    /// still running under this claim (compare-and-set): a worker whose lease lapsed, or whose
    /// job was cancelled, writes nothing and gets `false`. So a job has at most one result.
    pub async fn finish_job(
        &self,
        lease: &Lease,
        schedule_id: &str,
        topology_id: &str,
        body: &StoredBody,
        summary: &str,
        topology_by_ref: bool,
    ) -> Result<bool, StoreError> {
        use sqlx::Connection;
        // The store's one transaction runs on a connection taken for it, closed instead of
        // given back if anything in it fails: a COMMIT refused by a full or read-only disk can
        // leave SQLite inside the transaction, holding the write lock (`faults`), and a closed
        // connection rolls it back. The pool's own check covers single statements.
        let mut conn = self.pool.acquire().await?;
        let done = async {
            let mut tx = conn.begin().await?;
            let now = now_ms();
            let claimed = sqlx::query(
                "UPDATE jobs SET status = $4, progress = 1, message = 'done', schedule_id = $1, finished_at = $2, \
                 lease_until = NULL WHERE id = $3 AND status = $5 AND started_at = $6",
            )
            .bind(schedule_id)
            .bind(now)
            .bind(&lease.job_id)
            .bind(JobStatus::Succeeded.as_str())
            .bind(JobStatus::Running.as_str())
            .bind(lease.claimed_at)
            .execute(&mut *tx)
            .await?;
            if claimed.rows_affected() == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            let (json, zstd): (&str, Option<&[u8]>) = match body {
                StoredBody::Json(s) => (s, None),
                StoredBody::Zstd { bytes, .. } => ("", Some(bytes)),
            };
            sqlx::query(
                "INSERT INTO schedules (id, job_id, topology_id, body, summary, created_at, topology_by_ref, body_zstd) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(schedule_id)
            .bind(&lease.job_id)
            .bind(topology_id)
            .bind(json)
            .bind(summary)
            .bind(now)
            .bind(topology_by_ref as i64)
            .bind(zstd)
            .execute(&mut *tx)
            .await?;
            // Delivered at commit, with the schedule in place.
            self.announce(&mut *tx, JobEvent::Ended).await?;
            tx.commit().await?;
            Ok::<bool, StoreError>(true)
        }
        .await;
        if done.is_err() {
            conn.close_on_drop();
        }
        done
    }

    /// Ends a running job as `Failed` or `Cancelled`, only if it is still this claim's.
    pub async fn end_claimed(
        &self,
        lease: &Lease,
        status: JobStatus,
        failure: Option<&Failure>,
    ) -> Result<bool, StoreError> {
        debug_assert!(matches!(status, JobStatus::Failed | JobStatus::Cancelled), "end_claimed({status})");
        let r = sqlx::query(
            "UPDATE jobs SET status = $1, error = $2, error_kind = $7, message = $1, finished_at = $3, \
             lease_until = NULL WHERE id = $4 AND status = $5 AND started_at = $6",
        )
        .bind(status.as_str())
        .bind(failure.map(|f| f.message.clone()))
        .bind(now_ms())
        .bind(&lease.job_id)
        .bind(JobStatus::Running.as_str())
        .bind(lease.claimed_at)
        .bind(failure.map(|f| f.kind.as_str()))
        .execute(&self.pool)
        .await?;
        let ended = r.rows_affected() > 0;
        if ended {
            self.announce(&self.pool, JobEvent::Ended).await?;
        }
        Ok(ended)
    }

    /// Puts a job back in the queue if it is still running under this claim (graceful
    /// shutdown).
    pub async fn requeue_claimed(&self, lease: &Lease) -> Result<bool, StoreError> {
        let r = sqlx::query(
            "UPDATE jobs SET status = $2, lease_until = NULL, message = 'requeued', attempts = attempts - 1 \
             WHERE id = $1 AND status = $3 AND started_at = $4",
        )
        .bind(&lease.job_id)
        .bind(JobStatus::Queued.as_str())
        .bind(JobStatus::Running.as_str())
        .bind(lease.claimed_at)
        .execute(&self.pool)
        .await?;
        let requeued = r.rows_affected() > 0;
        if requeued {
            self.announce(&self.pool, JobEvent::Queued).await?;
        }
        Ok(requeued)
    }

    /// Ends a job as `Failed` or `Cancelled` (unless it already ended).
    pub async fn end_job(&self, id: &str, status: JobStatus, error: Option<&str>) -> Result<bool, StoreError> {
        debug_assert!(matches!(status, JobStatus::Failed | JobStatus::Cancelled), "end_job({status})");
        let r = sqlx::query(
            "UPDATE jobs SET status = $1, error = $2, message = $1, finished_at = $3, lease_until = NULL \
             WHERE id = $4 AND status IN ($5, $6)",
        )
        .bind(status.as_str())
        .bind(error.map(str::to_string))
        .bind(now_ms())
        .bind(id)
        .bind(JobStatus::Queued.as_str())
        .bind(JobStatus::Running.as_str())
        .execute(&self.pool)
        .await?;
        let ended = r.rows_affected() > 0;
        if ended {
            self.announce(&self.pool, JobEvent::Ended).await?;
        }
        Ok(ended)
    }

    /// Puts a running job back in the queue (graceful shutdown).
    pub async fn requeue(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET status = $2, lease_until = NULL, message = 'requeued', attempts = attempts - 1 \
             WHERE id = $1 AND status = $3",
        )
        .bind(id)
        .bind(JobStatus::Queued.as_str())
        .bind(JobStatus::Running.as_str())
        .execute(&self.pool)
        .await?;
        self.announce(&self.pool, JobEvent::Queued).await
    }
}

/// The claim of a queued job (`claim_job`), `lock` its row lock (`FOR UPDATE SKIP LOCKED` on
/// PostgreSQL): the parameters are $1 now, $2 the lease's end, $3 `running`, $4 `queued`.
/// Inserts `job` as queued at `now`, on the pool or in a transaction (`create_batch_jobs`);
/// `false` where a shared job of its key is active already (the unique index).
pub(super) async fn insert_job_on<'e, E: sqlx::Executor<'e, Database = sqlx::Any>>(
    on: E,
    job: &NewJob<'_>,
    now: i64,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO jobs (id, batch_id, request_id, request_key, request, algorithm, status, progress, created_at, topology_id, owner, budget_s, shared, priority) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING",
    )
    .bind(job.id)
    .bind(job.batch_id.map(str::to_string))
    .bind(job.request_id.map(str::to_string))
    .bind(job.key)
    .bind(job.request)
    .bind(job.algorithm)
    .bind(JobStatus::Queued.as_str())
    .bind(now)
    .bind(job.topology_id)
    .bind(job.owner.map(str::to_string))
    .bind(job.budget_s)
    .bind(i32::from(job.shared))
    .bind(job.priority)
    .execute(on)
    .await?;
    Ok(inserted.rows_affected() > 0)
}

/// The newest succeeded job with this request key (a cache hit), on the pool or in a
/// transaction.
pub(super) async fn succeeded_with_key_on<'e, E: sqlx::Executor<'e, Database = sqlx::Any>>(
    on: E,
    key: &str,
) -> Result<Option<JobRow>, StoreError> {
    let q =
        format!("SELECT {JOB_COLS} FROM jobs WHERE request_key = $1 AND status = $2 ORDER BY finished_at DESC LIMIT 1");
    let row =
        sqlx::query(sqlx::AssertSqlSafe(q)).bind(key).bind(JobStatus::Succeeded.as_str()).fetch_optional(on).await?;
    row.as_ref().map(job_row).transpose()
}

/// Jobs queued, on the pool or in a transaction.
pub(super) async fn queued_count_on<'e, E: sqlx::Executor<'e, Database = sqlx::Any>>(on: E) -> Result<i64, StoreError> {
    Ok(sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE status = $1")
        .bind(JobStatus::Queued.as_str())
        .fetch_one(on)
        .await?
        .try_get("n")?)
}

/// A client's queued and running jobs and their declared seconds, on the pool or in a
/// transaction.
pub(super) async fn active_of_on<'e, E: sqlx::Executor<'e, Database = sqlx::Any>>(
    on: E,
    owner: &str,
) -> Result<(i64, f64), StoreError> {
    let q = "SELECT COUNT(*) AS n, COALESCE(SUM(budget_s), 0.0) AS s FROM jobs WHERE owner = $1 AND status IN ($2, $3)";
    let row = sqlx::query(q)
        .bind(owner)
        .bind(JobStatus::Queued.as_str())
        .bind(JobStatus::Running.as_str())
        .fetch_one(on)
        .await?;
    Ok((row.try_get("n")?, row.try_get("s")?))
}

fn queued_claim_sql(lock: &str) -> String {
    // A queued job, fair between clients: the client with the highest-priority job
    // (interactive before normal), then the fewest jobs running, then the one whose last
    // job started longest ago (round robin: a client that just got a worker waits for the
    // others); then that client's highest-priority, oldest job. Without tokens every job
    // has the same owner (none): by priority, then first in, first out. Owners compare as
    // COALESCE(owner, ''), which the migrations index (`IS NOT DISTINCT FROM` would use no
    // index on PostgreSQL); with 10,000 queued jobs this takes 0.03 ms on SQLite and 8 ms
    // on PostgreSQL, as the plain oldest-first claim did (docs/BENCHMARKS.md).
    format!(
        "UPDATE jobs SET status = $3, started_at = $1, lease_until = $2, progress = 0, message = $3, \
         attempts = attempts + 1 \
         WHERE id = (SELECT j.id FROM jobs j WHERE j.status = $4 \
         AND COALESCE(j.owner, '') = (SELECT q.o FROM (SELECT DISTINCT COALESCE(owner, '') AS o FROM jobs WHERE status = $4) q \
         ORDER BY (SELECT MAX(r.priority) FROM jobs r WHERE COALESCE(r.owner, '') = q.o AND r.status = $4) DESC, \
         (SELECT COUNT(*) FROM jobs r WHERE COALESCE(r.owner, '') = q.o AND r.status = $3 AND r.lease_until >= $1), \
         (SELECT COALESCE(MAX(r.started_at), 0) FROM jobs r WHERE COALESCE(r.owner, '') = q.o), q.o LIMIT 1) \
         ORDER BY j.priority DESC, j.created_at, j.id LIMIT 1{lock}) \
         AND status = $4 RETURNING {JOB_COLS}"
    )
}

#[cfg(test)]
mod tests {
    use super::super::{NewJob, Store, new_id};

    fn job<'a>(id: &'a str, batch_id: Option<&'a str>) -> NewJob<'a> {
        NewJob {
            id,
            batch_id,
            request_id: None,
            key: id,
            request: "{}",
            algorithm: "greedy",
            topology_id: "t",
            owner: None,
            budget_s: 1.0,
            shared: false,
            priority: 0,
        }
    }

    /// Migration 0016 fills the members of the batches made before it from `jobs.batch_id`, in
    /// the order they were listed by (creation, then id); a batch made after lists the jobs its
    /// items name, a reused job of an earlier batch included.
    #[test]
    fn a_batch_lists_its_items_jobs_before_and_after_migration_16() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let path = std::env::temp_dir().join(format!("ccsynth-members-{}.db", std::process::id()));
            let url = format!("sqlite:{}", path.display());
            let _ = std::fs::remove_file(&path);
            let store = Store::connect(&url).await.unwrap();
            // The database as it was before 0016.
            for undo in ["DROP TABLE batch_members", "DELETE FROM _sqlx_migrations WHERE version = 16"] {
                sqlx::query(undo).execute(&store.pool).await.unwrap();
            }
            let (old, later) = (new_id(), new_id());
            store.create_batch(&old, None).await.unwrap();
            let ids: Vec<String> = (0..3).map(|_| new_id()).collect();
            // Made in the order 2, 0; job 1 belongs to no batch.
            for (i, created_at) in [(2, 10), (0, 20), (1, 30)] {
                let batch = if i == 1 { None } else { Some(old.as_str()) };
                assert!(store.create_job(job(&ids[i], batch)).await.unwrap());
                sqlx::query("UPDATE jobs SET created_at = $1 WHERE id = $2")
                    .bind(created_at as i64)
                    .bind(&ids[i])
                    .execute(&store.pool)
                    .await
                    .unwrap();
            }
            drop(store);
            let store = Store::connect(&url).await.unwrap();
            let listed = |rows: Vec<crate::store::JobRow>| rows.into_iter().map(|j| j.id).collect::<Vec<_>>();
            assert_eq!(listed(store.batch_jobs(&old).await.unwrap()), [ids[2].clone(), ids[0].clone()]);
            // A later batch whose items reuse jobs 0 (twice) and 1, none of them its own.
            store.create_batch(&later, None).await.unwrap();
            for (item, i) in [0, 1, 0].into_iter().enumerate() {
                store.add_batch_member(&later, item, &ids[i]).await.unwrap();
            }
            assert_eq!(
                listed(store.batch_jobs(&later).await.unwrap()),
                [ids[0].clone(), ids[1].clone(), ids[0].clone()]
            );
            assert_eq!(listed(store.batch_jobs(&old).await.unwrap()), [ids[2].clone(), ids[0].clone()]);
            drop(store);
            for end in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{end}", path.display()));
            }
        });
    }
}
