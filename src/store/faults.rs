//! Storage faults: a full or read-only disk, a write's I/O error, a write lock held too long:
//! refusals that may pass. They are the database being away for writes, answered like an
//! outage (503 with Retry-After, a job's end recorded once writes work again, for
//! `api::worker`'s patience at most), and they must never leave a connection behind inside
//! a transaction: SQLite keeps the write lock for as long as one connection holds an open
//! transaction, and every later statement on that connection "succeeds" into it and is lost.

use sqlx::Executor;
use sqlx::error::DatabaseError;
use std::sync::atomic::{AtomicI64, Ordering};

/// SQLite's primary result codes of a write the file cannot take now but may later: BUSY (the
/// write lock held past `busy_timeout`), READONLY (a read-only disk), FULL. Not LOCKED (with no
/// shared cache, a bug), nor the permanent kinds below.
const SQLITE_STORAGE_PRIMARY: [i64; 3] = [5, 8, 13];

/// SQLite's extended codes of the same: CANTOPEN itself (a journal that cannot be created on a
/// full or read-only disk; not its kinds that name a path), and the I/O errors of a write
/// (IOERR_WRITE, _FSYNC, _DIR_FSYNC, _TRUNCATE, _SHMSIZE), not of a read or a corrupt filesystem.
const SQLITE_STORAGE_EXTENDED: [i64; 6] = [14, 778, 1034, 1290, 1546, 4874];

/// READONLY_DBMOVED: the database file was replaced under the server, which waiting will not mend.
const SQLITE_READONLY_DBMOVED: i64 = 1032;

/// PostgreSQL's: disk_full, io_error (not read_only_sql_transaction: a URL naming a standby
/// does not mend by waiting).
const POSTGRES_STORAGE_CODES: [&str; 2] = ["53100", "58030"];

/// Whether `d` is a storage fault (see the module's doc): a write refused for a reason that
/// may pass (a full, read-only or busy disk), so waiting for it is worth it.
pub(super) fn is_storage_fault(d: &dyn DatabaseError) -> bool {
    let Some(code) = d.code() else { return false };
    if d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        let Ok(c) = code.parse::<i64>() else { return false };
        return c != SQLITE_READONLY_DBMOVED
            && (SQLITE_STORAGE_PRIMARY.contains(&(c & 0xff)) || SQLITE_STORAGE_EXTENDED.contains(&c));
    }
    POSTGRES_STORAGE_CODES.contains(&code.as_ref())
}

/// Until when (ms since the epoch) connections coming back are checked: a minute past the
/// last database error this process saw. Only a failed statement can leave a connection
/// inside a transaction, and checking every one costs a sixth of the service's throughput.
static SUSPECT_UNTIL_MS: AtomicI64 = AtomicI64::new(0);

/// How long after a database error connections coming back are checked.
const SUSPECT_FOR_MS: i64 = 60_000;

/// Notes a database error (every `sqlx::Error` the store turns into a `StoreError`).
pub(super) fn suspect() {
    SUSPECT_UNTIL_MS.fetch_max(super::now_ms() + SUSPECT_FOR_MS, Ordering::Relaxed);
}

/// The pool's check of an SQLite connection coming back: `true` keeps it. A failed COMMIT or
/// ROLLBACK (a full or read-only disk) can leave SQLite inside the transaction while sqlx
/// believes it ended, or the other way round; such a connection is closed instead, which rolls
/// the transaction back and frees the write lock. SQLite refuses BEGIN inside a transaction,
/// so BEGIN then ROLLBACK tells, after the rollback sqlx may have queued on drop has run.
/// Checked only within `SUSPECT_FOR_MS` of a database error.
pub(super) async fn sqlite_connection_is_clean(conn: &mut sqlx::AnyConnection) -> bool {
    use sqlx::Connection;
    if super::now_ms() > SUSPECT_UNTIL_MS.load(Ordering::Relaxed) {
        return true;
    }
    let clean = match conn.execute("BEGIN").await {
        Ok(_) => conn.execute("ROLLBACK").await.is_ok() && !conn.is_in_transaction(),
        Err(_) => false,
    };
    if !clean {
        tracing::warn!(
            "a database connection came back inside a transaction (a write failed): closed, which rolls it back"
        );
    }
    clean
}

/// Until when (ms since the epoch) connections are checked as they are handed out
/// (`sqlite_connection_writes`): `READ_ONLY_FOR_MS` past the last one opened read-only
/// (`sqlite_mark_read_only`), which the pool may hold until then.
static READ_ONLY_UNTIL_MS: AtomicI64 = AtomicI64::new(0);

/// How long a connection opened read-only may stay in the pool: sqlx's `max_lifetime`, 30 min.
const READ_ONLY_FOR_MS: i64 = 30 * 60_000;

/// The pool's look at an SQLite connection just opened. SQLite opens a database read-only,
/// silently, when the disk refuses writing at that moment (a read-only disk), and such a
/// connection refuses every write for as long as it lives, the disk mended or not: the
/// service would answer 503 to the writes that drew it long after the disk came back. A
/// write tried inside a transaction that is rolled back tells, writing nothing (a read-only
/// connection refuses before it locks; the lock is not waited for): such a connection is
/// marked `query_only`, what it is, and the pool does not hand it out again. An error is
/// returned only when the try left the connection unusable (inside its transaction, or not
/// waiting for locks): sqlx then connects again, until the acquire timeout.
pub(super) async fn sqlite_mark_read_only(conn: &mut sqlx::AnyConnection) -> Result<(), sqlx::Error> {
    match opened_read_only(conn).await? {
        Some(true) => {
            tracing::warn!("a database connection opened read-only (its disk refused writing): not handed out again");
            READ_ONLY_UNTIL_MS.fetch_max(super::now_ms() + READ_ONLY_FOR_MS, Ordering::Relaxed);
            if let Err(e) = conn.execute("PRAGMA query_only = 1").await {
                tracing::warn!(error = %e, "a read-only database connection could not be marked");
            }
        }
        Some(false) => {}
        None => tracing::warn!("a new database connection could not be checked for writing"),
    }
    Ok(())
}

/// Whether `conn` refuses a write as opened read-only (see `sqlite_mark_read_only`); `None`
/// where the try could not be made (the connection as it was); an error where it was made
/// but its transaction or the connection's busy timeout could not be put back.
async fn opened_read_only(conn: &mut sqlx::AnyConnection) -> Result<Option<bool>, sqlx::Error> {
    use sqlx::Row;
    let read = async |conn: &mut sqlx::AnyConnection, q: &'static str| -> Option<i64> {
        sqlx::query(q).fetch_one(&mut *conn).await.ok()?.try_get(0).ok()
    };
    let (Some(v), Some(wait)) = (read(conn, "PRAGMA user_version").await, read(conn, "PRAGMA busy_timeout").await)
    else {
        return Ok(None);
    };
    if conn.execute("PRAGMA busy_timeout = 0").await.is_err() {
        return Ok(None);
    }
    let tried = match conn.execute("BEGIN").await {
        Ok(_) => {
            let tried = conn.execute(sqlx::AssertSqlSafe(format!("PRAGMA user_version = {v}"))).await;
            let rolled_back = conn.execute("ROLLBACK").await;
            rolled_back.map(|_| Some(tried))
        }
        Err(_) => Ok(None),
    };
    conn.execute(sqlx::AssertSqlSafe(format!("PRAGMA busy_timeout = {wait}"))).await?;
    Ok(tried?.map(|t| matches!(&t, Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some(SQLITE_READONLY))))
}

/// The pool's check of an SQLite connection it is about to hand out again: `false` closes one
/// that was opened read-only (`sqlite_mark_read_only`). Checked only while one may be held.
pub(super) async fn sqlite_connection_writes(conn: &mut sqlx::AnyConnection) -> bool {
    if super::now_ms() > READ_ONLY_UNTIL_MS.load(Ordering::Relaxed) {
        return true;
    }
    matches!(sqlx::query_scalar::<_, i64>("PRAGMA query_only").fetch_one(&mut *conn).await, Ok(0))
}

/// SQLite's plain READONLY: a write on a connection opened read-only.
const SQLITE_READONLY: &str = "8";

/// A write that needs the disk (SQLite): the header's user version set to what it is, which
/// still appends a page to the write-ahead log, so a full or read-only disk fails it.
pub(super) async fn sqlite_write_probe(pool: &sqlx::AnyPool) -> Result<(), sqlx::Error> {
    use sqlx::Row;
    let v: i64 = sqlx::query("PRAGMA user_version").fetch_one(pool).await?.try_get(0)?;
    sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA user_version = {v}"))).execute(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::StoreError;
    use sqlx::any::AnyPoolOptions;

    /// A write refused by a read-only database file or a full one is a storage fault (the
    /// database away for writes: 503, retried), and a mistake in a statement is not. The
    /// read-only file is opened `mode=ro` (a read-only disk gives SQLite's same READONLY); the
    /// full one is capped by `max_page_count` (a full disk gives its same FULL).
    #[test]
    fn read_only_and_full_databases_are_storage_faults_and_a_bad_statement_is_not() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            sqlx::any::install_default_drivers();
            let path = std::env::temp_dir().join(format!("ccsynth-faults-{}.db", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let url = |mode: &str| format!("sqlite:{}?mode={mode}", path.display());
            let one = || AnyPoolOptions::new().max_connections(1);
            let rw = one().connect(&url("rwc")).await.unwrap();
            sqlx::query("CREATE TABLE t (x BLOB)").execute(&rw).await.unwrap();
            let fault = |e: sqlx::Error| StoreError::from(e).is_unavailable();
            let e = sqlx::query("INSERT INTO nowhere VALUES (1)").execute(&rw).await.unwrap_err();
            assert!(!fault(e), "a statement's own mistake");
            let pages: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(&rw).await.unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA max_page_count = {pages}"))).execute(&rw).await.unwrap();
            let e = sqlx::query("INSERT INTO t VALUES (zeroblob(1048576))").execute(&rw).await.unwrap_err();
            assert!(fault(e), "a full database");
            rw.close().await;
            let ro = one().connect(&url("ro")).await.unwrap();
            let e = sqlx::query("INSERT INTO t VALUES (1)").execute(&ro).await.unwrap_err();
            assert!(fault(e), "a read-only database");
            ro.close().await;
            let _ = std::fs::remove_file(&path);
        });
    }

    /// A connection the pool opens while the disk refuses writing is opened read-only by
    /// SQLite, and would refuse every write after the disk came back: it is marked and not
    /// handed out again (`sqlite_mark_read_only`). The disk: `chattr +i` on the database file
    /// (root, on a filesystem that has the flag; elsewhere this says so and checks nothing).
    /// Every connection is held at once while it lasts, so the pool must open new ones; after,
    /// the pool hands its connections out in turn, and every write lands (without the mark the
    /// first write fails: "attempt to write a readonly database").
    #[test]
    fn a_connection_opened_while_the_disk_refuses_writing_is_not_kept() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let dir = std::env::temp_dir().join(format!("ccsynth-ro-open-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("s.db");
            let store = super::super::Store::connect(&format!("sqlite:{}", path.display())).await.unwrap();
            super::sqlite_write_probe(&store.pool).await.unwrap();
            let chattr = |flag: &str| {
                std::process::Command::new("chattr").arg(flag).arg(&path).status().is_ok_and(|s| s.success())
            };
            if !chattr("+i") {
                eprintln!("faults: chattr +i is not available here: not checked");
                let _ = std::fs::remove_dir_all(&dir);
                return;
            }
            // The file made mutable again even if an assertion below fails.
            struct Mutable<'a>(&'a std::path::Path);
            impl Drop for Mutable<'_> {
                fn drop(&mut self) {
                    let _ = std::process::Command::new("chattr").arg("-i").arg(self.0).status();
                }
            }
            let guard = Mutable(&path);
            let held: Vec<_> = futures_util::future::join_all((0..4).map(|_| store.pool.acquire())).await;
            let mut opened_read_only = 0;
            for c in held {
                let mut c = c.unwrap();
                let q: i64 = sqlx::query_scalar("PRAGMA query_only").fetch_one(&mut *c).await.unwrap();
                opened_read_only += q as usize;
            }
            drop(guard);
            for i in 0..8 {
                super::sqlite_write_probe(&store.pool).await.unwrap_or_else(|e| panic!("write {i}: {e}"));
            }
            assert!(opened_read_only > 0, "the pool opened no connection while the disk refused writing");
            store.pool.close().await;
            let _ = std::fs::remove_dir_all(&dir);
        });
    }
}
