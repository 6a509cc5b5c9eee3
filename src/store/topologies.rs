//! Topologies in the store: stored once by digest, the clients that may see each (granted,
//! revoked, counted against a client's quota), and deletion, which keeps a topology that
//! schedules still name.
use super::{Deletion, JobStatus, Store, StoreError, TOPOLOGY_COLS, TopologyRow, now_ms, plausible_id, topology_row};
use sqlx::Row;

/// `TOPOLOGY_COLS` with an empty body in place of the stored one (a large topology's is
/// hundreds of MB: read only where it is used).
fn cols_without_body() -> String {
    TOPOLOGY_COLS.replace("body", "'' AS body")
}

impl Store {
    /// Inserts a topology unless one with the same digest exists; returns it and whether it
    /// was created.
    pub async fn put_topology(&self, t: &TopologyRow) -> Result<(TopologyRow, bool), StoreError> {
        // Noted, as a job's creation is (`create_job`).
        let put = self.insert_topology(t).await;
        self.noting_write(put)
    }

    async fn insert_topology(&self, t: &TopologyRow) -> Result<(TopologyRow, bool), StoreError> {
        if let Some(existing) = self.topology_by_digest_as(t).await? {
            // Stored again after a soft delete: visible again.
            sqlx::query("UPDATE topologies SET deleted_at = NULL WHERE id = $1 AND deleted_at IS NOT NULL")
                .bind(&existing.id)
                .execute(&self.pool)
                .await?;
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
            Err(e) => match self.topology_by_digest_as(t).await? {
                Some(existing) => Ok((existing, false)),
                None => Err(e.into()),
            },
        }
    }

    /// The stored topology of `t`'s digest, if any, with `t`'s body (the same digest, the same
    /// body): its body is not read back (fc:1448's is 140 MB, 0.2 s a read).
    async fn topology_by_digest_as(&self, t: &TopologyRow) -> Result<Option<TopologyRow>, StoreError> {
        let q = format!("SELECT {} FROM topologies WHERE digest = $1", cols_without_body());
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(&t.digest).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(topology_row).transpose()?.map(|r| TopologyRow { body: t.body.clone(), ..r }))
    }

    /// The id of the topology stored with `digest`, if any, and whether it is deleted (soft):
    /// its body is not read.
    pub async fn topology_id_by_digest(&self, digest: &str) -> Result<Option<(String, bool)>, StoreError> {
        let row = sqlx::query("SELECT id, deleted_at FROM topologies WHERE digest = $1")
            .bind(digest)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let deleted: Option<i64> = row.try_get("deleted_at")?;
        Ok(Some((row.try_get("id")?, deleted.is_some())))
    }

    /// The digest of the topology stored as `id`, unless it is deleted: its body is not read.
    pub async fn topology_digest(&self, id: &str) -> Result<Option<String>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let row = sqlx::query("SELECT digest FROM topologies WHERE id = $1 AND deleted_at IS NULL")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| r.try_get("digest")).transpose().map_err(Into::into)
    }

    pub async fn topology(&self, id: &str) -> Result<Option<TopologyRow>, StoreError> {
        self.topology_where(id, " AND deleted_at IS NULL").await
    }

    /// `topology`, hidden or not: a topology deleted while stored schedules use it is kept for
    /// them (their regeneration reads it).
    pub async fn topology_kept(&self, id: &str) -> Result<Option<TopologyRow>, StoreError> {
        self.topology_where(id, "").await
    }

    async fn topology_where(&self, id: &str, and: &'static str) -> Result<Option<TopologyRow>, StoreError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        let q = format!("SELECT {TOPOLOGY_COLS} FROM topologies WHERE id = $1{and}");
        let row = sqlx::query(sqlx::AssertSqlSafe(q)).bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(topology_row).transpose()?)
    }

    /// Topologies by creation, `limit` after `offset`, and the total count: those `client` may
    /// see (every one when `None`, a service without tokens).
    pub async fn topologies(
        &self,
        offset: i64,
        limit: i64,
        client: Option<&str>,
    ) -> Result<(Vec<TopologyRow>, i64), StoreError> {
        // Without bodies: a page of 500 large topologies would load gigabytes to show counts.
        let cols = cols_without_body();
        // The client's name is the last parameter of each query.
        let mine = |n: u8| match client {
            Some(_) => format!(" AND id IN (SELECT topology_id FROM topology_clients WHERE client = ${n})"),
            None => String::new(),
        };
        let q = format!(
            "SELECT {cols} FROM topologies WHERE deleted_at IS NULL{} ORDER BY created_at, id LIMIT $1 OFFSET $2",
            mine(3)
        );
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(q)).bind(limit).bind(offset);
        if client.is_some() {
            rows = rows.bind(client);
        }
        let rows = rows.fetch_all(&self.pool).await?;
        let count = format!("SELECT COUNT(*) AS n FROM topologies WHERE deleted_at IS NULL{}", mine(1));
        let mut count = sqlx::query(sqlx::AssertSqlSafe(count));
        if client.is_some() {
            count = count.bind(client);
        }
        let total: i64 = count.fetch_one(&self.pool).await?.try_get("n")?;
        Ok((rows.iter().map(topology_row).collect::<Result<_, _>>()?, total))
    }

    /// Of `ids`, those stored, not deleted, and seen by `client` (by anyone, without one), in
    /// one query: a page of topologies' parents, which a deleted parent must not be.
    pub async fn topologies_seen(
        &self,
        ids: &[&str],
        client: Option<&str>,
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        let ids: Vec<&str> = ids.iter().copied().filter(|id| plausible_id(id)).collect();
        if ids.is_empty() {
            return Ok(Default::default());
        }
        let marks: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        let mine = match client {
            Some(_) => {
                format!(" AND id IN (SELECT topology_id FROM topology_clients WHERE client = ${})", ids.len() + 1)
            }
            None => String::new(),
        };
        let q = format!("SELECT id FROM topologies WHERE deleted_at IS NULL AND id IN ({}){mine}", marks.join(", "));
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(q));
        for id in &ids {
            query = query.bind(*id);
        }
        if client.is_some() {
            query = query.bind(client);
        }
        Ok(query.fetch_all(&self.pool).await?.into_iter().collect())
    }

    /// Lets `client` see topology `id` (again: granting twice is one grant); whether it was new.
    pub async fn grant_topology(&self, id: &str, client: &str) -> Result<bool, StoreError> {
        let done =
            sqlx::query("INSERT INTO topology_clients (topology_id, client) VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind(id)
                .bind(client)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The topologies `client` holds (not deleted); `None`, a service without tokens: all of
    /// them.
    pub async fn topologies_held(&self, client: Option<&str>) -> Result<i64, StoreError> {
        let n = match client {
            Some(client) => {
                sqlx::query_scalar(
                    "SELECT COUNT(*) FROM topology_clients c JOIN topologies t ON t.id = c.topology_id \
                     WHERE c.client = $1 AND t.deleted_at IS NULL",
                )
                .bind(client)
                .fetch_one(&self.pool)
                .await?
            }
            None => {
                sqlx::query_scalar("SELECT COUNT(*) FROM topologies WHERE deleted_at IS NULL")
                    .fetch_one(&self.pool)
                    .await?
            }
        };
        Ok(n)
    }

    /// Whether `client` may see topology `id` (`None`: a service without tokens sees all).
    pub async fn topology_visible(&self, id: &str, client: Option<&str>) -> Result<bool, StoreError> {
        let Some(client) = client else { return Ok(true) };
        if !plausible_id(id) {
            return Ok(false);
        }
        let row = sqlx::query("SELECT 1 AS one FROM topology_clients WHERE topology_id = $1 AND client = $2")
            .bind(id)
            .bind(client)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// Takes topology `id` away from `client`; returns how many other clients still see it.
    pub async fn revoke_topology(&self, id: &str, client: &str) -> Result<i64, StoreError> {
        sqlx::query("DELETE FROM topology_clients WHERE topology_id = $1 AND client = $2")
            .bind(id)
            .bind(client)
            .execute(&self.pool)
            .await?;
        self.topology_holders(id).await
    }

    /// How many clients hold topology `id`.
    async fn topology_holders(&self, id: &str) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM topology_clients WHERE topology_id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await?)
    }

    /// The queued or running jobs of `owner` that use topology `id`.
    pub async fn topology_users_of(&self, id: &str, owner: &str) -> Result<i64, StoreError> {
        let q = "SELECT COUNT(*) FROM jobs WHERE topology_id = $1 AND owner = $2 AND status IN ($3, $4)";
        Ok(sqlx::query_scalar(q)
            .bind(id)
            .bind(owner)
            .bind(JobStatus::Queued.as_str())
            .bind(JobStatus::Running.as_str())
            .fetch_one(&self.pool)
            .await?)
    }

    /// Gives topology `id` to the clients whose queued or running jobs use it (a topology the
    /// last holder deleted while they did: it stays theirs, not a row no client holds); how
    /// many clients hold it then.
    pub async fn grant_topology_to_users(&self, id: &str) -> Result<i64, StoreError> {
        sqlx::query(
            "INSERT INTO topology_clients (topology_id, client) SELECT DISTINCT topology_id, owner FROM jobs \
             WHERE topology_id = $1 AND owner IS NOT NULL AND status IN ($2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(JobStatus::Queued.as_str())
        .bind(JobStatus::Running.as_str())
        .execute(&self.pool)
        .await?;
        self.topology_holders(id).await
    }

    /// Deletes a topology unless a queued or running job needs it (each statement checks, so a
    /// job cannot slip in between). One that stored schedules refer to is soft-deleted: hidden
    /// from every route, kept for those schedules' bodies.
    pub async fn delete_topology(&self, id: &str) -> Result<Deletion, StoreError> {
        if !plausible_id(id) {
            return Ok(Deletion::NotFound);
        }
        const IDLE: &str = "NOT EXISTS (SELECT 1 FROM jobs WHERE topology_id = $1 AND status IN ($2, $3))";
        const REFERRED: &str = "EXISTS (SELECT 1 FROM schedules WHERE topology_id = $1 AND topology_by_ref = 1)";
        let hidden = format!(
            "UPDATE topologies SET deleted_at = $4 WHERE id = $1 AND deleted_at IS NULL AND {IDLE} AND {REFERRED}"
        );
        let removed =
            format!("DELETE FROM topologies WHERE id = $1 AND deleted_at IS NULL AND {IDLE} AND NOT {REFERRED}");
        for (q, stamped) in [(hidden, true), (removed, false)] {
            let mut q = sqlx::query(sqlx::AssertSqlSafe(q))
                .bind(id)
                .bind(JobStatus::Queued.as_str())
                .bind(JobStatus::Running.as_str());
            if stamped {
                q = q.bind(now_ms());
            }
            if q.execute(&self.pool).await?.rows_affected() > 0 {
                return Ok(Deletion::Deleted);
            }
        }
        let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE topology_id = $1 AND status IN ($2, $3)")
            .bind(id)
            .bind(JobStatus::Queued.as_str())
            .bind(JobStatus::Running.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(if users > 0 { Deletion::InUse(users) } else { Deletion::NotFound })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Deletion, Store, TopologyRow};

    /// The lookups by digest that read no body: the id and whether it is deleted; a topology
    /// stored again is the stored row (its own id and creation time) with its body.
    #[test]
    fn a_topology_is_found_by_digest_without_its_body() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let path = std::env::temp_dir().join(format!("ccsynth-digest-{}.db", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let store = Store::connect(&format!("sqlite:{}", path.display())).await.unwrap();
            let row = |id: &str, created_at: i64| TopologyRow {
                id: id.into(),
                digest: "d1".into(),
                body: "{\"npus\":2}".into(),
                npus: 2,
                switches: 0,
                links: 2,
                connected: true,
                parent_id: None,
                failures: None,
                created_at,
            };
            let first = row(&crate::store::new_id(), 10);
            assert_eq!(store.topology_id_by_digest("d1").await.unwrap(), None);
            assert!(store.put_topology(&first).await.unwrap().1);
            assert_eq!(store.topology_id_by_digest("d1").await.unwrap(), Some((first.id.clone(), false)));
            let (again, created) = store.put_topology(&row(&crate::store::new_id(), 20)).await.unwrap();
            assert!(!created);
            assert_eq!(
                (again.id.as_str(), again.created_at, again.body.as_str()),
                (first.id.as_str(), 10, "{\"npus\":2}")
            );
            // Kept (soft-deleted) while a schedule names it: marked so here, as such a delete does.
            sqlx::query("UPDATE topologies SET deleted_at = 5 WHERE id = $1")
                .bind(&first.id)
                .execute(&store.pool)
                .await
                .unwrap();
            assert_eq!(store.topology_id_by_digest("d1").await.unwrap(), Some((first.id.clone(), true)));
            let (back, created) = store.put_topology(&row(&crate::store::new_id(), 30)).await.unwrap();
            assert_eq!((back.id.as_str(), created), (first.id.as_str(), false));
            assert_eq!(store.topology_id_by_digest("d1").await.unwrap(), Some((first.id.clone(), false)));
            // Named by nothing: deleted outright.
            assert!(matches!(store.delete_topology(&first.id).await.unwrap(), Deletion::Deleted));
            assert_eq!(store.topology_id_by_digest("d1").await.unwrap(), None);
            drop(store);
            for end in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{end}", path.display()));
            }
        });
    }
}
