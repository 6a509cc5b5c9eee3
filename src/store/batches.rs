//! Batches in the store: a batch and the jobs its items make, queued in one transaction (a
//! batch is accepted whole or not at all), and the room check made inside it.
//!
//! Why one transaction: queued one job at a time, a batch's first jobs were claimed and run
//! while its last were still being written, so a batch refused part way (a concurrent batch
//! filled the queue: 429) or cut off by its client left jobs that ran under a batch nobody was
//! told of; and each job's own commit made a batch of 2,000 items take 20 s to accept.
use super::queue::{active_of_on, insert_job_on, queued_count_on, succeeded_with_key_on};
use super::{Backend, JobEvent, NewJob, Store, StoreError, new_id, now_ms};

/// One item of a batch, normalized: its job's request and key, or (unless forced) the
/// succeeded job of its key, or the job of an identical item before it.
pub struct BatchItem {
    /// The request's key in the store (with tokens, the client's).
    pub key: String,
    pub request: String,
    pub algorithm: String,
    pub topology_id: String,
    /// Its declared solve time (the time limit), counted against the client's quota.
    pub budget_s: f64,
    /// Solved again, even where a result or an identical item is there to reuse.
    pub force: bool,
}

/// What the queue holds with the batch's jobs in it, before they are committed: jobs queued
/// in all, the client's queued and running jobs and their declared seconds (with tokens), and
/// the jobs the batch adds (items answered by a result or an identical item add none).
pub struct Room {
    pub queued: i64,
    pub owner_active: Option<(i64, f64)>,
    pub new_jobs: i64,
}

/// A key for `pg_advisory_xact_lock`: batches are queued one at a time on PostgreSQL, so the
/// room each one checks counts the others (SQLite's write lock does that by itself).
const BATCH_LOCK: i64 = 0x6363_7379_6e74_6862;

impl Store {
    /// Stores batch `batch_id` and queues a job per item (none for an item answered by a
    /// result or by an identical item before it), in one transaction, after `room` accepts
    /// what the queue then holds: the job id of each item, in order, or `room`'s refusal with
    /// nothing stored. The jobs are claimed in the items' order.
    pub async fn create_batch_jobs<E>(
        &self,
        (batch_id, owner, request_id): (&str, Option<&str>, &str),
        items: &[BatchItem],
        room: impl FnOnce(Room) -> Result<(), E>,
    ) -> Result<Result<Vec<String>, E>, StoreError> {
        use sqlx::Connection;
        // As `finish_job`: a connection of its own, closed if anything in the transaction
        // fails (a refused COMMIT can leave SQLite holding the write lock).
        let mut conn = self.pool.acquire().await?;
        let done = async {
            let mut tx = conn.begin().await?;
            if self.backend == Backend::Postgres {
                sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(BATCH_LOCK).execute(&mut *tx).await?;
            }
            let now = now_ms();
            sqlx::query("INSERT INTO batches (id, created_at, owner) VALUES ($1, $2, $3)")
                .bind(batch_id)
                .bind(now)
                .bind(owner.map(str::to_string))
                .execute(&mut *tx)
                .await?;
            // Ids in ascending order, one per item: the claim takes the oldest job first, and
            // these share a creation time, so the id orders them as the items are.
            let mut fresh: Vec<String> = items.iter().map(|_| new_id()).collect();
            fresh.sort_unstable();
            let mut seen: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
            let (mut ids, mut new_jobs) = (Vec::with_capacity(items.len()), 0i64);
            for (item, (it, fresh)) in items.iter().zip(fresh).enumerate() {
                let reused = match it.force {
                    true => None,
                    false => match seen.get(it.key.as_str()) {
                        Some(id) => Some(id.clone()),
                        None => succeeded_with_key_on(&mut *tx, &it.key).await?.map(|j| j.id),
                    },
                };
                let id = match reused {
                    Some(id) => id,
                    None => {
                        // Not shared: identical requests outside the batch do not join it.
                        let job = NewJob {
                            id: &fresh,
                            batch_id: Some(batch_id),
                            request_id: Some(request_id),
                            key: &it.key,
                            request: &it.request,
                            algorithm: &it.algorithm,
                            topology_id: &it.topology_id,
                            owner,
                            budget_s: it.budget_s,
                            shared: false,
                            priority: 0,
                        };
                        insert_job_on(&mut *tx, &job, now).await?;
                        new_jobs += 1;
                        fresh
                    }
                };
                if !it.force {
                    seen.entry(it.key.as_str()).or_insert_with(|| id.clone());
                }
                sqlx::query("INSERT INTO batch_members (batch, item, job) VALUES ($1, $2, $3)")
                    .bind(batch_id)
                    .bind(item as i64)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                ids.push(id);
            }
            let queued = queued_count_on(&mut *tx).await?;
            let owner_active = match owner {
                Some(o) => Some(active_of_on(&mut *tx, o).await?),
                None => None,
            };
            if let Err(e) = room(Room { queued, owner_active, new_jobs }) {
                tx.rollback().await?;
                return Ok(Err(e));
            }
            if new_jobs > 0 {
                // Delivered at commit, with the jobs in place.
                self.announce(&mut *tx, JobEvent::Queued).await?;
            }
            tx.commit().await?;
            Ok::<_, StoreError>(Ok(ids))
        }
        .await;
        if done.is_err() {
            conn.close_on_drop();
        }
        // Noted: a batch refused for a full disk makes `/readyz` probe until writes work again.
        self.noting_write(done)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Store, new_id};
    use super::{BatchItem, Room};

    fn item(key: &str, force: bool) -> BatchItem {
        BatchItem {
            key: key.into(),
            request: "{}".into(),
            algorithm: "greedy".into(),
            topology_id: "t".into(),
            budget_s: 2.0,
            force,
        }
    }

    /// A batch is queued whole or not at all: refused by the room check inside its
    /// transaction it stores no batch, job or member; accepted, its items name their jobs in
    /// order (an identical unforced item the job before it, a forced one a job of its own),
    /// the jobs are claimed in the items' order, and the room counted them in.
    #[test]
    fn a_batch_is_queued_whole_or_not_at_all() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let path = std::env::temp_dir().join(format!("ccsynth-batches-{}.db", std::process::id()));
            let url = format!("sqlite:{}", path.display());
            let _ = std::fs::remove_file(&path);
            let store = Store::connect(&url).await.unwrap();
            let items = [item("a", false), item("b", false), item("a", false), item("a", true), item("c", false)];
            let refused = new_id();
            let r = store.create_batch_jobs((&refused, Some("alice"), "r1"), &items, |_| Err("full")).await.unwrap();
            assert_eq!(r, Err("full"));
            assert_eq!(store.batch_owner(&refused).await.unwrap(), None, "no batch row");
            assert_eq!(store.queued_count().await.unwrap(), 0, "no job");
            assert!(store.batch_jobs(&refused).await.unwrap().is_empty(), "no member");
            // Accepted: the room it saw counts the batch's four new jobs (the third item names
            // the first's job), their eight seconds, and nothing else.
            let batch = new_id();
            let mut seen = None;
            let ids = store
                .create_batch_jobs((&batch, Some("alice"), "r2"), &items, |r: Room| {
                    seen = Some((r.queued, r.owner_active, r.new_jobs));
                    Ok::<(), ()>(())
                })
                .await
                .unwrap()
                .unwrap();
            assert_eq!(seen, Some((4, Some((4, 8.0)), 4)));
            assert_eq!(ids[2], ids[0], "an identical item names the job before it");
            assert!(ids[3] != ids[0] && ids[3] != ids[2], "a forced item has a job of its own");
            let listed: Vec<String> = store.batch_jobs(&batch).await.unwrap().into_iter().map(|j| j.id).collect();
            assert_eq!(listed, ids);
            assert_eq!(store.batch_owner(&batch).await.unwrap(), Some(Some("alice".to_string())));
            let mut claimed = Vec::new();
            while let Some(j) = store.claim_job(60_000, 3).await.unwrap() {
                claimed.push(j.id);
            }
            assert_eq!(
                claimed,
                [ids[0].clone(), ids[1].clone(), ids[3].clone(), ids[4].clone()],
                "in the items' order"
            );
            drop(store);
            for end in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{end}", path.display()));
            }
        });
    }
}
