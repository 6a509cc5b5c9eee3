//! Room on the disk under an SQLite database: `/readyz` says not ready while it is nearly full,
//! before writes fail (a probe's small write may still fit where a job's result does not).

use super::Store;
use std::path::{Path, PathBuf};

impl Store {
    /// Bytes this process may still write on the filesystem of the SQLite database's file;
    /// `None` for PostgreSQL (its disk is its server's), an in-memory database, or where the
    /// filesystem cannot say.
    pub fn free_disk_bytes(&self) -> Option<u64> {
        free_bytes(&sqlite_dir(&self.url)?)
    }
}

/// Whether `url` names an SQLite database in memory (`sqlite::memory:`, `sqlite:`,
/// `mode=memory`): each of the pool's connections would open a database of its own, so the
/// migrations reached one and every request on the others failed (`no such table`).
pub fn sqlite_in_memory(url: &str) -> bool {
    url.starts_with("sqlite:") && sqlite_dir(url).is_none()
}

/// The directory of the file an `sqlite:` URL names (`sqlite:PATH` or `sqlite://PATH`, with
/// or without `?options`); `None` for a database in memory or another scheme.
fn sqlite_dir(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, options) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() || path == ":memory:" || options.split('&').any(|o| o == "mode=memory") {
        return None;
    }
    match Path::new(path).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => Some(dir.to_path_buf()),
        _ => Some(PathBuf::from(".")),
    }
}

/// Bytes free to an unprivileged writer on the filesystem holding `dir` (`statvfs`).
fn free_bytes(dir: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sqlite_url_names_its_directory() {
        assert_eq!(sqlite_dir("sqlite:/var/lib/ccsynth/db.sqlite?mode=rwc"), Some(PathBuf::from("/var/lib/ccsynth")));
        assert_eq!(sqlite_dir("sqlite:///tmp/x.db"), Some(PathBuf::from("/tmp")));
        assert_eq!(sqlite_dir("sqlite:ccsynth.db"), Some(PathBuf::from(".")));
        assert_eq!(sqlite_dir("sqlite::memory:"), None);
        assert_eq!(sqlite_dir("sqlite:shared.db?mode=memory&cache=shared"), None);
        assert_eq!(sqlite_dir("postgres://u@h/db"), None);
        for memory in ["sqlite::memory:", "sqlite:", "sqlite://", "sqlite:x.db?mode=memory"] {
            assert!(sqlite_in_memory(memory), "{memory}");
        }
        assert!(!sqlite_in_memory("sqlite:x.db") && !sqlite_in_memory("postgres://u@h/db"));
    }

    #[test]
    fn the_temporary_directory_has_room_said() {
        assert!(free_bytes(&std::env::temp_dir()).is_some());
        assert_eq!(free_bytes(Path::new("/no/such/directory/here")), None);
    }
}
