//! What the store keeps derived from a stored schedule: its comparison with the baselines
//! (JSON) and its built exports (compressed, by format and options), each computed once.
use super::{Store, StoreError, now_ms, plausible_id};
use sqlx::Row;

impl Store {
    /// A schedule's stored comparison (JSON), if computed.
    pub async fn comparison(&self, schedule_id: &str) -> Result<Option<String>, StoreError> {
        if !plausible_id(schedule_id) {
            return Ok(None);
        }
        let row = sqlx::query("SELECT body FROM comparisons WHERE schedule_id = $1")
            .bind(schedule_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some(r.try_get("body")?),
            None => None,
        })
    }

    /// A stored export of schedule `schedule_id` (`variant`: its format and options): the
    /// compressed bytes and the size they decompress to.
    pub async fn export(&self, schedule_id: &str, variant: &str) -> Result<Option<(Vec<u8>, u64)>, StoreError> {
        if !plausible_id(schedule_id) {
            return Ok(None);
        }
        let row = sqlx::query("SELECT body_zstd, bytes FROM exports WHERE schedule_id = $1 AND variant = $2")
            .bind(schedule_id)
            .bind(variant)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some((r.try_get("body_zstd")?, r.try_get::<i64, _>("bytes")?.max(0) as u64)),
            None => None,
        })
    }

    /// Stores an export, compressed (`bytes`: its size whole); the first one stored stays.
    pub async fn put_export(
        &self,
        schedule_id: &str,
        variant: &str,
        zstd: &[u8],
        bytes: u64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO exports (schedule_id, variant, body_zstd, bytes, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (schedule_id, variant) DO NOTHING",
        )
        .bind(schedule_id)
        .bind(variant)
        .bind(zstd)
        .bind(bytes as i64)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Stores a schedule's comparison; the first one stored stays.
    pub async fn put_comparison(&self, schedule_id: &str, body: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO comparisons (schedule_id, body, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (schedule_id) DO NOTHING",
        )
        .bind(schedule_id)
        .bind(body)
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
