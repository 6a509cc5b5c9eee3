//! The database as this process last found it: an outage (unreachable, or refusing writes for
//! a full or read-only disk) noted by the calls that failed and ended by one that succeeded,
//! and `/readyz`'s verdict from it. The claims read it (`in_outage_or_within`): every running
//! job's lease lapses in an outage with no owner at fault.

use super::{Backend, Store, StoreError, faults};

/// How long `/readyz`'s ping (and write probe) waits for the database.
const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The database's reachability and writability as this process last found them (`Store::outage`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Outage {
    /// Its last call failed as unreachable, and none has succeeded since.
    down: bool,
    /// When a call first succeeded after the last outage.
    ended: Option<std::time::Instant>,
    /// A write was refused as a storage fault, and none has landed since (a claim that
    /// changes nothing succeeds on a full disk, so only a write that landed ends it).
    writes_failed: bool,
}

impl Store {
    /// `r`, noted (`note`, `note_reached`).
    pub(super) fn noting<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        match &r {
            Ok(_) => self.note_reached(),
            Err(e) => self.note(e),
        }
        r
    }

    /// A request's write (a job, a topology) `r`, noted for readiness only: one that landed
    /// ends a storage fault, one refused as such notes it; neither starts or ends an outage
    /// (a pool busy under load is not one, and must not pause the claims of lapsed jobs).
    pub(super) fn noting_write<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        let mut o = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        match &r {
            Ok(_) => o.writes_failed = false,
            Err(e) if e.is_storage_fault() => o.writes_failed = true,
            Err(_) => {}
        }
        drop(o);
        r
    }

    /// Notes an outage when `e` is an unreachable database's error or a storage fault (see
    /// `outage`): the workers call it on a failed renewal or a failed record of a job's end.
    pub fn note(&self, e: &StoreError) {
        let mut o = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        o.down |= e.is_unavailable();
        o.writes_failed |= e.is_storage_fault();
    }

    /// Notes that the database answered: an outage noted before ends now.
    pub fn note_reached(&self) {
        let mut o = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        if o.down {
            *o = Outage { down: false, ended: Some(std::time::Instant::now()), ..*o };
        }
    }

    /// Whether the database is unreachable for this process, or was within the last `ms`
    /// milliseconds.
    pub(crate) fn in_outage_or_within(&self, ms: i64) -> bool {
        let o = *self.outage.lock().unwrap_or_else(|e| e.into_inner());
        o.down || o.ended.is_some_and(|t| t.elapsed() < std::time::Duration::from_millis(ms.max(0) as u64))
    }

    /// `SELECT 1` within `PING_TIMEOUT` (an unreachable database is a prompt error, not a
    /// wait for the pool's acquire timeout).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match tokio::time::timeout(PING_TIMEOUT, sqlx::query("SELECT 1").execute(&self.pool)).await {
            Ok(done) => done.map(|_| ()).map_err(StoreError::from),
            Err(_) => Err(StoreError::Db(sqlx::Error::PoolTimedOut)),
        }
    }

    /// Whether the database takes work (`/readyz`): it answers, and, while a write refused as
    /// a storage fault (or an outage) has not been followed by one that landed, a probe write
    /// succeeds (SQLite), which ends both.
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.ping().await?;
        let o = *self.outage.lock().unwrap_or_else(|e| e.into_inner());
        if (o.down || o.writes_failed) && self.backend == Backend::Sqlite {
            let probe = tokio::time::timeout(PING_TIMEOUT, faults::sqlite_write_probe(&self.pool)).await;
            let probe = probe.unwrap_or(Err(sqlx::Error::PoolTimedOut)).map_err(StoreError::from);
            return self.noting_write(self.noting(probe));
        }
        Ok(())
    }
}
