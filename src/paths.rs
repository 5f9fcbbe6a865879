//! The paths a database's writers share: the names of its two lock files,
//! and whether it lives in memory (and needs no queue).
//!
//! Below every other module of the queue: the error messages name a
//! database through [`is_in_memory`], the lock files open [`lock_path`] and
//! [`queue_path`].

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Suffix of the file whose exclusive `flock()` is the writer's turn.
pub const LOCK_SUFFIX: &str = ".writer-lock";
/// Suffix of the file whose shared `flock()`s are the waiting writers.
pub const QUEUE_SUFFIX: &str = ".writer-queue";

/// The lock file's path for a database: `<db>.writer-lock`.
pub fn lock_path(database: &Path) -> PathBuf {
    with_suffix(database, LOCK_SUFFIX)
}

/// The queue file's path for a database: `<db>.writer-queue`.
pub fn queue_path(database: &Path) -> PathBuf {
    with_suffix(database, QUEUE_SUFFIX)
}

fn with_suffix(database: &Path, suffix: &str) -> PathBuf {
    let mut name: OsString = database.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// True for databases that live in memory and need no queue: an empty path,
/// `:memory:` and SQLite's `file::memory:` / `mode=memory` URIs.
pub fn is_in_memory(database: &Path) -> bool {
    let text = database.as_os_str().as_bytes();
    text.is_empty()
        || text == b":memory:"
        || text.starts_with(b"file::memory:")
        || (text.starts_with(b"file:") && windows_contains(text, b"mode=memory"))
}

fn windows_contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A path from bytes, for the C and script bindings.
pub fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes() {
        let db = Path::new("var/storage/sqlite3/exponential.db");
        assert_eq!(
            lock_path(db),
            Path::new("var/storage/sqlite3/exponential.db.writer-lock")
        );
        assert_eq!(
            queue_path(db),
            Path::new("var/storage/sqlite3/exponential.db.writer-queue")
        );
    }

    #[test]
    fn memory_databases() {
        assert!(is_in_memory(Path::new("")));
        assert!(is_in_memory(Path::new(":memory:")));
        assert!(is_in_memory(Path::new("file::memory:?cache=shared")));
        assert!(is_in_memory(Path::new("file:x?mode=memory")));
        assert!(!is_in_memory(Path::new("/tmp/x.db")));
    }
}
