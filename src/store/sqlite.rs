//! SQLite store: one writer thread that drains a channel into one
//! transaction per batch (group commit), a syncer thread that makes each
//! batch durable (`fdatasync` of the WAL) before its writes are answered
//! while the writer runs the next, and a small pool of read connections
//! (WAL). The single writer also serialises first-click-wins.

use std::sync::Arc;
use std::thread;

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use super::*;
use crate::domain::inbox::Interaction;
use crate::domain::origins::AllowedOrigins;
use crate::store::Signals;

mod attachments;
mod chatbots;
mod checkpoint;
mod claims;
mod dashboard;
mod delivery_heads;
mod endpoints;
mod events;
mod fanout;
mod ids;
mod inbox;
mod interactions;
mod lifecycle;
mod messages;
mod queue;
mod review;
mod rows;
mod tx;
mod writer;
pub(super) mod writer_cache;

use queue::*;
use rows::*;
use tx::Sql;
use writer::*;

const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_init.sql"),
    include_str!("../../migrations/sqlite/0002_attempts_without_rowid.sql"),
    include_str!("../../migrations/sqlite/0003_allowed_origins.sql"),
    include_str!("../../migrations/sqlite/0004_lifecycle.sql"),
    include_str!("../../migrations/sqlite/0005_attempt_headers.sql"),
    include_str!("../../migrations/sqlite/0006_attachments.sql"),
    include_str!("../../migrations/sqlite/0009_event_trace.sql"),
    include_str!("../../migrations/sqlite/0010_endpoints.sql"),
    include_str!("../../migrations/sqlite/0011_delivery_heads.sql"),
    include_str!("../../migrations/sqlite/0012_purge_keyset.sql"),
    include_str!("../../migrations/sqlite/0013_delivery_attempts_by_delivery.sql"),
    include_str!("../../migrations/sqlite/0014_one_head_per_pair.sql"),
];
const MAX_BATCH: usize = 512;
/// Statements kept prepared per connection (the writer runs about 30).
const STATEMENT_CACHE: usize = 128;
/// WAL pages past which the writer checkpoints by itself, should the
/// background checkpointer fall behind (16384 pages = 64 MiB).
const WRITER_AUTOCHECKPOINT: i64 = 16_384;
/// How long a connection waits for a lock another holds.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Bytes the WAL file is truncated to when it restarts (64 MiB).
const WAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

pub struct SqliteStore {
    path: String,
    /// Dropped with the store, which ends the checkpointer thread.
    _checkpointer: crossbeam_channel::Sender<()>,
    writer: crossbeam_channel::Sender<Job>,
    readers: Mutex<Vec<Connection>>,
    /// Leased deliveries and the hot queue (see `claims`).
    claims: Arc<Mutex<claims::Claims>>,
    /// Conversations by visitor-token hash, read by every widget request.
    visitors: super::cache::ReadCache<(Conversation, AllowedOrigins)>,
    signals: Arc<dyn Signals>,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        if out_of_service(&e) {
            StoreError::Unavailable(e.to_string())
        } else {
            backend(e)
        }
    }
}

/// A failure of the file, not of the request: a full disk, a file or file
/// system gone read-only, an I/O error, a file that cannot be opened, a
/// lock held elsewhere past the busy timeout. The same request may succeed
/// once the operator has made room.
pub(crate) fn out_of_service(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode as C;
    matches!(
        e.sqlite_error_code(),
        Some(
            C::DiskFull
                | C::ReadOnly
                | C::SystemIoFailure
                | C::CannotOpen
                | C::DatabaseBusy
                | C::DatabaseLocked
                | C::OutOfMemory
        )
    )
}

fn open(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // The WAL file is cut back to this size whenever it restarts after a
    // checkpoint, so a burst (a purge, a backlog) does not leave it large.
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
    // A job's SAVEPOINT journals the pages it touches: in memory, not in a
    // temporary file written through the kernel for every job.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // A full store's indexes outgrow the default 2 MB page cache (see
    // `lifecycle::PAGE_CACHE_KIB`).
    conn.pragma_update(None, "cache_size", -lifecycle::PAGE_CACHE_KIB)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Plans do not depend on bound values: a cached statement is not
    // prepared again each time a parameter (a timestamp, say) changes.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(conn)
}

/// Runs one statement of the connection's statement cache (no parsing per call).
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, in a folder that
    /// exists, and runs migrations.
    pub fn open(path: &str, signals: Arc<dyn Signals>) -> StoreResult<Self> {
        let conn = open(path)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            if (i as i64) >= version {
                conn.execute_batch(sql)?;
                conn.pragma_update(None, "user_version", (i + 1) as i64)?;
            }
        }
        // Checkpoints run beside the writer, off its commit path.
        conn.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT)?;
        let checkpointer = checkpoint::spawn(open(path)?, path)?;
        let mut claims = claims::Claims::default();
        {
            let mut st = conn.prepare("SELECT id FROM chatbots WHERE endpoint_disabled = 1")?;
            let ids = st
                .query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())?;
            for id in ids {
                claims.chatbot_changed(&id, true);
            }
        }
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let (sync_tx, sync_rx) = crossbeam_channel::unbounded::<Synced>();
        let wal_path = std::path::PathBuf::from(format!("{path}-wal"));
        let claims = Arc::new(Mutex::new(claims));
        let (queue, announce, reserve) = (claims.clone(), signals.clone(), claims.clone());
        thread::Builder::new()
            .name("blockhook-sqlite-sync".into())
            .spawn(move || syncer_loop(wal_path, sync_rx, &queue, announce.as_ref()))?;
        // The writer commits without syncing; the syncer makes each durable
        // batch reach the disk before it is answered.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        thread::Builder::new()
            .name("blockhook-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, sync_tx, &reserve))?;
        Ok(Self {
            path: path.to_string(),
            _checkpointer: checkpointer,
            writer: tx,
            readers: Mutex::new(Vec::new()),
            claims,
            visitors: super::cache::ReadCache::new(super::cache::VISITOR_ROWS),
            signals,
        })
    }
}

impl Store for SqliteStore {
    /// A durable write through the writer (reads keep working on a full
    /// disk; a write is what fails there).
    fn probe(&self) -> StoreFut<'_, ()> {
        Box::pin(self.write(|c| {
            c.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES ('probe', ?1)")?
                .execute([crate::domain::time::now_ms().to_string()])?;
            Ok(())
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_of_the_first_schema_keeps_its_attempts_when_migrated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("old.db").display().to_string();
        {
            let c = Connection::open(&path).expect("open");
            c.execute_batch(MIGRATIONS[0]).expect("first schema");
            c.pragma_update(None, "user_version", 1).expect("version");
            c.execute(
                "INSERT INTO attempts (event_id, number, at, status_code, duration_ms, error, response_excerpt)
                 VALUES ('evt_1', 1, 1000, 500, 12, 'E_HTTP', 'oops'), ('evt_1', 2, 2000, 200, 3, NULL, 'ok')",
                [],
            )
            .expect("attempts");
        }
        let store = SqliteStore::open(&path, Arc::new(crate::hub::Hub::new())).expect("migrated");
        drop(store);
        let c = Connection::open(&path).expect("reopen");
        let rows: Vec<(i64, Option<i64>, Option<String>)> = c
            .prepare("SELECT number, status_code, response_excerpt FROM attempts WHERE event_id = 'evt_1' ORDER BY number")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .expect("attempts read");
        assert_eq!(
            rows,
            vec![
                (1, Some(500), Some("oops".into())),
                (2, Some(200), Some("ok".into()))
            ]
        );
        let sql: String = c
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'attempts'",
                [],
                |r| r.get(0),
            )
            .expect("schema");
        assert!(sql.contains("WITHOUT ROWID"), "{sql}");
        let version: i64 = c
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, MIGRATIONS.len() as i64);
    }
}
