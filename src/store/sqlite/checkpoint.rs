//! The background checkpointer: copies committed WAL pages into the
//! database file on its own connection, so that the writer's commits never
//! wait for a checkpoint (the writer still checkpoints by itself if the WAL
//! outgrows its limit).

use std::thread;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};
use rusqlite::Connection;

/// How often committed pages are copied back. A longer period copies a page
/// that many commits touched only once.
const PERIOD: Duration = Duration::from_millis(250);

/// Starts the checkpointer on `conn`; it stops when the returned sender is
/// dropped.
pub fn spawn(conn: Connection) -> std::io::Result<Sender<()>> {
    let (tx, rx) = crossbeam_channel::bounded::<()>(0);
    thread::Builder::new()
        .name("blockhook-sqlite-checkpoint".into())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(PERIOD) {
                // PASSIVE: never waits for readers or the writer.
                let r = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                if let Err(e) = r {
                    tracing::warn!(error = %e, "WAL checkpoint failed; retrying");
                }
            }
        })?;
    Ok(tx)
}
