//! The background checkpointer: copies committed WAL pages into the
//! database file on its own connection, so that the writer's commits never
//! wait for a checkpoint (the writer still checkpoints by itself if the WAL
//! outgrows its limit), and keeps the WAL file within a bound.
//!
//! A passive checkpoint never waits, but the WAL only starts over (and
//! `journal_size_limit` only cuts it back) once a checkpoint got every
//! frame in while no reader held an older snapshot; with readers always
//! about, the file grows on. Past [`bound`] the checkpointer therefore runs
//! a `TRUNCATE` checkpoint, which waits a moment ([`TRUNCATE_WAIT`]) for
//! the readers and the writer and leaves the WAL empty; if it cannot have
//! them in that moment it tries again at the next period.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};
use rusqlite::Connection;

/// How often committed pages are copied back. A longer period copies a page
/// that many commits touched only once.
const PERIOD: Duration = Duration::from_millis(250);

/// The WAL's bound on a roomy disk: the size it is cut back to when it
/// starts over (`journal_size_limit`, `super::WAL_SIZE_LIMIT`).
const WAL_BOUND: u64 = 64 * 1024 * 1024;

/// The WAL may take at most this share of the room left on its file
/// system (a quarter), and never less than [`WAL_FLOOR`] is allowed.
const FREE_SHARE: u64 = 4;
const WAL_FLOOR: u64 = 1024 * 1024;

/// How long a `TRUNCATE` checkpoint waits for readers and the writer: the
/// writer's commits wait as long at most.
const TRUNCATE_WAIT: Duration = Duration::from_millis(50);

/// Starts the checkpointer on `conn` for the database at `path`; it stops
/// when the returned sender is dropped.
pub fn spawn(conn: Connection, path: &str) -> std::io::Result<Sender<()>> {
    let (tx, rx) = crossbeam_channel::bounded::<()>(0);
    let wal = PathBuf::from(format!("{path}-wal"));
    thread::Builder::new()
        .name("blockhook-sqlite-checkpoint".into())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(PERIOD) {
                // PASSIVE: never waits for readers or the writer.
                let r = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                if let Err(e) = r {
                    tracing::warn!(error = %e, "WAL checkpoint failed; retrying");
                }
                let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                if size > bound(&wal) {
                    truncate(&conn, size);
                }
            }
        })?;
    Ok(tx)
}

/// The size past which the WAL at `wal` is emptied: [`WAL_BOUND`], or a
/// quarter of the room left on its file system when that is less.
pub fn bound(wal: &Path) -> u64 {
    let room = wal.parent().and_then(free_bytes).unwrap_or(u64::MAX);
    WAL_BOUND.min(room / FREE_SHARE).max(WAL_FLOOR)
}

fn truncate(conn: &Connection, size: u64) {
    let _ = conn.busy_timeout(TRUNCATE_WAIT);
    let r = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    });
    match r {
        Ok(0) => tracing::debug!(bytes = size, "WAL past its bound; emptied"),
        Ok(_) => tracing::debug!(bytes = size, "WAL past its bound; busy, trying again"),
        Err(e) => tracing::warn!(error = %e, "WAL checkpoint (TRUNCATE) failed; retrying"),
    }
    let _ = conn.busy_timeout(super::BUSY_TIMEOUT);
}

/// The bytes an unprivileged writer may still use on the file system of
/// `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `st` is written by the
    // call before it is read.
    let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded, so `st` is initialised.
    let st = unsafe { st.assume_init() };
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_limit_on_a_roomy_disk_and_a_floor_on_a_full_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = bound(&dir.path().join("x.db-wal"));
        assert!((WAL_FLOOR..=WAL_BOUND).contains(&b), "{b}");
        assert_eq!(bound(Path::new("/nonexistent/x.db-wal")), WAL_BOUND);
    }
}
