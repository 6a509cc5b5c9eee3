//! Storage faults: a full or read-only disk, an I/O error, a write lock held too long. They are
//! the database being away for writes, answered like an outage (503 with Retry-After, a job's
//! end recorded once writes work again), and they must never leave a connection behind inside
//! a transaction: SQLite keeps the write lock for as long as one connection holds an open
//! transaction, and every later statement on that connection "succeeds" into it and is lost.

use sqlx::Executor;
use sqlx::error::DatabaseError;

/// SQLite's primary result codes that say the file cannot take the write now: BUSY and LOCKED
/// (the write lock stayed taken past `busy_timeout`), READONLY, IOERR, FULL, CANTOPEN.
const SQLITE_STORAGE_CODES: [i64; 6] = [5, 6, 8, 10, 13, 14];

/// PostgreSQL's: disk_full, io_error, read_only_sql_transaction (a standby, or a primary set
/// read-only while its disk is full).
const POSTGRES_STORAGE_CODES: [&str; 3] = ["53100", "58030", "25006"];

/// Whether `d` is a storage fault (see the module's doc).
pub(super) fn is_storage_fault(d: &dyn DatabaseError) -> bool {
    let Some(code) = d.code() else { return false };
    if d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        // The extended code: its low byte is the primary code.
        return code.parse::<i64>().is_ok_and(|c| SQLITE_STORAGE_CODES.contains(&(c & 0xff)));
    }
    POSTGRES_STORAGE_CODES.contains(&code.as_ref())
}

/// The pool's check of an SQLite connection coming back: `true` keeps it. A failed COMMIT or
/// ROLLBACK (a full or read-only disk) can leave SQLite inside the transaction while sqlx
/// believes it ended, or the other way round; such a connection is closed instead, which rolls
/// the transaction back and frees the write lock. SQLite refuses BEGIN inside a transaction,
/// so BEGIN then ROLLBACK tells, after the rollback sqlx may have queued on drop has run.
pub(super) async fn sqlite_connection_is_clean(conn: &mut sqlx::AnyConnection) -> bool {
    use sqlx::Connection;
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

/// A write that needs the disk (SQLite): the header's user version set to what it is, which
/// still appends a page to the write-ahead log, so a full or read-only disk fails it.
pub(super) async fn sqlite_write_probe(pool: &sqlx::AnyPool) -> Result<(), sqlx::Error> {
    use sqlx::Row;
    let v: i64 = sqlx::query("PRAGMA user_version").fetch_one(pool).await?.try_get(0)?;
    sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA user_version = {v}"))).execute(pool).await?;
    Ok(())
}
