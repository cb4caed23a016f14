//! SQLite store: one writer thread that drains a channel into one
//! transaction per batch (group commit), a syncer thread that makes each
//! batch durable (`fdatasync` of the WAL) before its writes are answered
//! while the writer runs the next, and a small pool of read connections
//! (WAL). The single writer also serialises first-click-wins.

use std::path::Path;
use std::sync::Arc;
use std::thread;

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use super::*;
use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::origins::AllowedOrigins;
use crate::hub::Hub;

mod attachments;
mod cache;
mod chatbots;
mod checkpoint;
mod claims;
mod dashboard;
mod events;
mod inbox;
mod interactions;
mod lifecycle;
mod messages;
mod queue;
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
];
const MAX_BATCH: usize = 512;
/// Visitor tokens kept by the read cache.
const CACHED_ROWS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(16_384).unwrap();
/// Statements kept prepared per connection (the writer runs about 30).
const STATEMENT_CACHE: usize = 128;
/// WAL pages past which the writer checkpoints by itself, should the
/// background checkpointer fall behind (16384 pages = 64 MiB).
const WRITER_AUTOCHECKPOINT: i64 = 16_384;
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
    visitors: cache::ReadCache<(Conversation, AllowedOrigins)>,
    hub: Arc<Hub>,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        backend(e)
    }
}

fn open(path: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
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
    /// Opens (creating if needed) the database at `path` and runs migrations.
    pub fn open(path: &str, hub: Arc<Hub>) -> StoreResult<Self> {
        if let Some(parent) = Path::new(path).parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
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
        let checkpointer = checkpoint::spawn(open(path)?)?;
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
        let (queue, announce, reserve) = (claims.clone(), hub.clone(), claims.clone());
        thread::Builder::new()
            .name("blockhook-sqlite-sync".into())
            .spawn(move || syncer_loop(wal_path, sync_rx, &queue, &announce))?;
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
            visitors: cache::ReadCache::new(CACHED_ROWS),
            hub,
        })
    }
}

impl Store for SqliteStore {
    fn meta_get_or_init(&self, key: &str, init: String) -> BoxFut<'_, StoreResult<String>> {
        SqliteStore::meta_get_or_init(self, key, init)
    }

    fn create_chatbot(&self, b: Chatbot, api_key_hash: String) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::create_chatbot(self, b, api_key_hash)
    }

    fn get_chatbot(&self, id: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        SqliteStore::get_chatbot(self, id)
    }

    fn chatbot_by_key(&self, api_key_hash: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        SqliteStore::chatbot_by_key(self, api_key_hash)
    }

    fn update_chatbot(&self, b: Chatbot) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::update_chatbot(self, b)
    }

    fn create_conversation(
        &self,
        conv: Conversation,
        token_hash: String,
    ) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::create_conversation(self, conv, token_hash)
    }

    fn get_conversation(&self, id: &str) -> BoxFut<'_, StoreResult<Conversation>> {
        SqliteStore::get_conversation(self, id)
    }

    fn conversation_by_token(
        &self,
        token_hash: &str,
    ) -> BoxFut<'_, StoreResult<(Conversation, AllowedOrigins)>> {
        SqliteStore::conversation_by_token(self, token_hash)
    }

    fn takeover(
        &self,
        conversation_id: &str,
        member: Person,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::takeover(self, conversation_id, member, now_ms)
    }

    fn insert_message(
        &self,
        msg: Message,
        event: Option<NewEvent>,
        interactions: Vec<NewInteraction>,
    ) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::insert_message(self, msg, event, interactions)
    }

    fn insert_attachment(
        &self,
        a: crate::domain::attachment::Attachment,
    ) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::insert_attachment(self, a)
    }

    fn get_attachment(
        &self,
        id: &str,
    ) -> BoxFut<'_, StoreResult<crate::domain::attachment::Attachment>> {
        SqliteStore::get_attachment(self, id)
    }

    fn delete_attachment(&self, id: &str) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::delete_attachment(self, id)
    }

    fn get_message(&self, id: &str) -> BoxFut<'_, StoreResult<Message>> {
        SqliteStore::get_message(self, id)
    }

    fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<Message>>> {
        SqliteStore::list_messages(self, conversation_id, limit, cursor)
    }

    fn interact(&self, req: InteractRequest) -> BoxFut<'_, StoreResult<Interacted>> {
        SqliteStore::interact(self, req)
    }

    fn get_interaction(&self, chatbot_id: &str, id: &str) -> BoxFut<'_, StoreResult<Interaction>> {
        SqliteStore::get_interaction(self, chatbot_id, id)
    }

    fn list_interactions(
        &self,
        chatbot_id: &str,
        filter: InteractionFilter,
        limit: usize,
        cursor: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<Interaction>>> {
        SqliteStore::list_interactions(self, chatbot_id, filter, limit, cursor, now_ms)
    }

    fn answer_interaction(&self, req: AnswerRequest) -> BoxFut<'_, StoreResult<AnswerOutcome>> {
        SqliteStore::answer_interaction(self, req)
    }

    fn close_interaction(
        &self,
        id: &str,
        status: InteractionStatus,
        reason: &'static str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Interaction>> {
        SqliteStore::close_interaction(self, id, status, reason, now_ms)
    }

    fn reply(&self, req: ReplyRequest) -> BoxFut<'_, StoreResult<ReplyOutcome>> {
        SqliteStore::reply(self, req)
    }

    fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> BoxFut<'_, StoreResult<Vec<StreamEvent>>> {
        SqliteStore::stream_since(self, conversation_id, after_seq, limit)
    }

    fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> BoxFut<'_, StoreResult<StreamEvent>> {
        SqliteStore::append_stream(self, conversation_id, kind, data)
    }

    fn claim_due(
        &self,
        now_ms: i64,
        lease_until: i64,
        limit: usize,
        skip: Vec<String>,
    ) -> BoxFut<'_, StoreResult<Vec<Claimed>>> {
        SqliteStore::claim_due(self, now_ms, lease_until, limit, skip)
    }

    fn record_attempts(&self, records: Vec<AttemptRecord>) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::record_attempts(self, records)
    }

    fn release_leases(&self, event_ids: Option<Vec<String>>) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::release_leases(self, event_ids)
    }

    fn give_back(&self, claims: Vec<Claimed>) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::give_back(self, claims)
    }

    fn next_due_at(&self) -> BoxFut<'_, StoreResult<Option<i64>>> {
        SqliteStore::next_due_at(self)
    }

    fn list_events(
        &self,
        chatbot_id: &str,
        filter: EventFilter,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<EventSummary>>> {
        SqliteStore::list_events(self, chatbot_id, filter, limit, cursor)
    }

    fn get_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
    ) -> BoxFut<'_, StoreResult<(EventSummary, Vec<AttemptRow>)>> {
        SqliteStore::get_event(self, chatbot_id, event_id)
    }

    fn redeliver(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        SqliteStore::redeliver(self, chatbot_id, event_id, now_ms)
    }

    fn redeliver_all(
        &self,
        chatbot_id: &str,
        status: EventStatus,
        since: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<u64>> {
        Box::pin(self.redeliver_all_impl(chatbot_id.to_string(), status, since, now_ms))
    }

    fn enqueue_event(&self, event: NewEvent) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(self.enqueue_event_impl(event))
    }

    fn list_chatbots(
        &self,
        limit: usize,
        cursor: Option<String>,
    ) -> BoxFut<'_, StoreResult<Page<Chatbot>>> {
        let r = self.list_chatbots_impl(limit, cursor);
        Box::pin(async move { r })
    }

    fn erase_conversation(
        &self,
        chatbot_id: &str,
        conversation_id: &str,
    ) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(self.erase(chatbot_id.to_string(), conversation_id.to_string()))
    }

    fn purge_expired(&self, now_ms: i64) -> BoxFut<'_, StoreResult<u64>> {
        Box::pin(self.purge_pass(now_ms))
    }

    fn queue_stats(&self) -> BoxFut<'_, StoreResult<QueueStats>> {
        SqliteStore::queue_stats(self)
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
        let store = SqliteStore::open(&path, Arc::new(Hub::new())).expect("migrated");
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
