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
use crate::domain::error::Rejection;
use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::origins::AllowedOrigins;
use crate::hub::{ApiEvent, Hub};

mod attachments;
mod cache;
mod checkpoint;
mod claims;
mod dashboard;
mod inbox;
mod lifecycle;

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

type Done = Box<dyn FnOnce(Result<(), String>) + Send>;
/// Runs a job in the open transaction (`None`: no transaction could be
/// opened, the job fails unrun); `true` beside its answer when it failed
/// part-way with no savepoint to undo it, so the batch must roll back.
type Run = Box<dyn FnOnce(Option<&Connection>) -> Ran + Send>;

/// What a job left for the writer: its answer, whether it poisoned the
/// batch, and the event it queued for delivery (offered to the hot queue
/// once its batch is durable).
struct Ran {
    done: Done,
    poisoned: bool,
    hot: Option<Claimed>,
}

/// A committed batch on its way to the disk: its answers and the events it
/// queued.
struct Synced {
    done: Vec<Done>,
    hot: Vec<Claimed>,
}

/// A write and whether its commit must reach the disk before it is
/// answered (accepted work) or may be flushed by a later commit (delivery
/// bookkeeping, which a crash can only make repeat, never lose).
struct Job {
    durable: bool,
    run: Run,
}

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
            std::fs::create_dir_all(parent).map_err(backend)?;
        }
        let conn = open(path).map_err(backend)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(backend)?;
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            if (i as i64) >= version {
                conn.execute_batch(sql).map_err(backend)?;
                conn.pragma_update(None, "user_version", (i + 1) as i64)
                    .map_err(backend)?;
            }
        }
        // Checkpoints run beside the writer, off its commit path.
        conn.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT)
            .map_err(backend)?;
        let checkpointer = checkpoint::spawn(open(path).map_err(backend)?).map_err(backend)?;
        let mut claims = claims::Claims::default();
        {
            let mut st = conn
                .prepare("SELECT id FROM chatbots WHERE endpoint_disabled = 1")
                .map_err(backend)?;
            let ids = st
                .query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
                .map_err(backend)?;
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
            .spawn(move || syncer_loop(wal_path, sync_rx, &queue, &announce))
            .map_err(backend)?;
        // The writer commits without syncing; the syncer makes each durable
        // batch reach the disk before it is answered.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(backend)?;
        thread::Builder::new()
            .name("blockhook-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, sync_tx, &reserve))
            .map_err(backend)?;
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

    /// Runs `f` inside the next group-committed transaction; resolves after
    /// the commit.
    async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.write_with(true, true, f, |_| None).await
    }

    /// As [`Self::write`], for a job that decides before it writes: it
    /// returns an error other than `Backend` only before its first change,
    /// so it needs no savepoint of its own (each costs a copy of every page
    /// the job touches); a `Backend` error rolls back its whole batch.
    /// `durable: false` is for bookkeeping whose loss in a power cut only
    /// repeats work: committed without waiting for fsync unless it shares a
    /// batch with durable work.
    async fn write_decided<T, F>(&self, durable: bool, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.write_with(durable, false, f, |_| None).await
    }

    /// A durable write (with a savepoint or decided) that may queue an
    /// event: `hot` takes it from the job's answer, and the syncer offers
    /// the events of a whole batch to the dispatcher at once when the batch
    /// is on disk.
    async fn write_queuing<T, F>(
        &self,
        savepoint: bool,
        f: F,
        hot: fn(&mut T) -> Option<Claimed>,
    ) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.write_with(true, savepoint, f, hot).await
    }

    async fn write_with<T, F>(
        &self,
        durable: bool,
        savepoint: bool,
        f: F,
        hot: fn(&mut T) -> Option<Claimed>,
    ) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<StoreResult<T>>();
        let run: Run = Box::new(move |conn: Option<&Connection>| {
            let mut poisoned = false;
            if savepoint {
                // Any of these jobs may change a chatbot or a conversation;
                // the decided ones (a click, attempt records) say so
                // themselves when they do.
                writer_cache::clear_conversations();
            }
            let result = match conn {
                None => Err(StoreError::Backend(
                    "no write transaction could be opened".into(),
                )),
                Some(conn) if savepoint => match exec(conn, "SAVEPOINT job") {
                    Ok(()) => {
                        let r = f(conn);
                        let end = if r.is_ok() {
                            exec(conn, "RELEASE job")
                        } else {
                            writer_cache::clear();
                            exec(conn, "ROLLBACK TO job").and_then(|()| exec(conn, "RELEASE job"))
                        };
                        match end {
                            Ok(()) => r,
                            Err(e) => {
                                poisoned = true;
                                Err(backend(e))
                            }
                        }
                    }
                    Err(e) => Err(backend(e)),
                },
                Some(conn) => {
                    let r = f(conn);
                    poisoned = matches!(r, Err(StoreError::Backend(_)));
                    r
                }
            };
            let mut result = result;
            let queued = result.as_mut().ok().and_then(hot);
            let done: Done = Box::new(move |commit: Result<(), String>| {
                let out = match commit {
                    Ok(()) => result,
                    Err(e) => Err(StoreError::Backend(e)),
                };
                let _ = tx.send(out);
            });
            Ran {
                done,
                poisoned,
                hot: queued,
            }
        });
        self.writer
            .send(Job { durable, run })
            .map_err(|_| StoreError::Backend("writer stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Backend("writer dropped the job".into()))?
    }

    /// Runs a read on a pooled connection (WAL readers do not block the writer).
    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        let conn = match self.readers.lock().pop() {
            Some(c) => c,
            None => open(&self.path).map_err(backend)?,
        };
        let r = f(&conn).map_err(backend);
        let mut pool = self.readers.lock();
        if pool.len() < 8 {
            pool.push(conn);
        }
        r
    }
}

fn writer_loop(
    conn: Connection,
    rx: crossbeam_channel::Receiver<Job>,
    sync: Sender<Synced>,
    claims: &Mutex<claims::Claims>,
) {
    writer_cache::enable();
    let mut done: Vec<Done> = Vec::with_capacity(MAX_BATCH);
    let mut hot: Vec<Claimed> = Vec::new();
    // Changes committed by another connection (an operator's SQL, a test)
    // show as a new `data_version`: the caches are emptied then.
    let mut seen_version: Option<i64> = None;
    loop {
        let first = match rx.recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        if let Err(e) = exec(&conn, "BEGIN IMMEDIATE") {
            ((first.run)(None).done)(Err(e.to_string()));
            continue;
        }
        let version = conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
            .ok();
        if version.is_none() || version != seen_version {
            writer_cache::clear();
            seen_version = version;
        }
        let mut durable = first.durable;
        let mut next = Some(first);
        let mut poisoned = false;
        while let Some(job) = next.take() {
            durable |= job.durable;
            let ran = (job.run)(Some(&conn));
            done.push(ran.done);
            hot.extend(ran.hot);
            poisoned = ran.poisoned;
            if done.len() >= MAX_BATCH || poisoned {
                break;
            }
            // The batch commits as soon as nothing more is waiting, even
            // while the syncer is busy: the syncer's next fdatasync covers
            // every commit made during its last one, and a batch held open
            // until the disk is idle measured slower (its commit's WAL
            // writes then sit between two syncs, with the CPU waiting).
            next = rx.try_recv().ok();
        }
        // Held back from scans of the table before they can see them: the
        // syncer offers them once they are on disk.
        if !poisoned && !hot.is_empty() {
            claims
                .lock()
                .reserve(hot.iter().map(|c| c.event_id.as_str()));
        }
        let commit = if poisoned {
            Err("a write failed part-way; its batch was rolled back".to_string())
        } else {
            exec(&conn, "COMMIT").map_err(|e| e.to_string())
        };
        if commit.is_err() {
            writer_cache::clear();
            let _ = conn.execute_batch("ROLLBACK");
            // Its events were rolled back with it.
            if !poisoned && !hot.is_empty() {
                claims
                    .lock()
                    .unreserve(hot.iter().map(|c| c.event_id.as_str()));
            }
            hot.clear();
        }
        if commit.is_ok() && (durable || !hot.is_empty()) {
            // Answered once the WAL reached the disk; the next batch runs
            // meanwhile.
            let batch = Synced {
                done: std::mem::replace(&mut done, Vec::with_capacity(MAX_BATCH)),
                hot: std::mem::take(&mut hot),
            };
            if let Err(crossbeam_channel::SendError(batch)) = sync.send(batch) {
                claims
                    .lock()
                    .unreserve(batch.hot.iter().map(|c| c.event_id.as_str()));
                for d in batch.done {
                    d(Err("the WAL syncer stopped".into()));
                }
            }
        } else {
            for d in done.drain(..) {
                d(commit.clone());
            }
        }
    }
}

/// The WAL syncer: makes committed batches durable with one `fdatasync` of
/// the WAL file for everything committed since the last, hands their
/// events to the dispatcher (one wake-up for all), then answers them.
/// Commits run with `synchronous=NORMAL` (no sync of their own), so the
/// writer starts the next batch while this one reaches the disk — the same
/// guarantee as `synchronous=FULL` for every answered write, without the
/// writer waiting for the disk.
fn syncer_loop(
    wal_path: std::path::PathBuf,
    rx: crossbeam_channel::Receiver<Synced>,
    claims: &Mutex<claims::Claims>,
    hub: &Hub,
) {
    let mut wal: Option<std::fs::File> = None;
    while let Ok(first) = rx.recv() {
        let mut batches = vec![first];
        while let Ok(more) = rx.try_recv() {
            batches.push(more);
        }
        let synced = match &wal {
            Some(f) => f.sync_data(),
            None => std::fs::OpenOptions::new()
                .write(true)
                .open(&wal_path)
                .and_then(|f| {
                    f.sync_data()?;
                    wal = Some(f);
                    Ok(())
                }),
        }
        .map_err(|e| format!("syncing the WAL failed: {e}"));
        match &synced {
            // A click that was not answered is not delivered from memory;
            // should its event have reached the disk after all, a scan of
            // the table finds it.
            Err(e) => {
                tracing::error!(error = %e, "writes were committed but may not be on disk");
                claims.lock().unreserve(
                    batches
                        .iter()
                        .flat_map(|b| b.hot.iter().map(|c| c.event_id.as_str())),
                );
            }
            Ok(()) => {
                let mut hot = batches.iter_mut().flat_map(|b| b.hot.drain(..)).peekable();
                if hot.peek().is_some() {
                    claims.lock().offer(hot);
                    hub.new_events.notify_one();
                }
            }
        }
        for d in batches.into_iter().flat_map(|b| b.done) {
            d(synced.clone());
        }
    }
}

// ---- row mapping -----------------------------------------------------------

const CHATBOT_COLS: &str = "id, name, webhook_url, retention_ms, signing_secret, previous_secret, previous_until, endpoint_disabled, member_id, created_at, allowed_origins";
/// [`CHATBOT_COLS`] of a join's `b` (chatbots), read by [`chatbot_row`] first.
const CHATBOT_COLS_OF_B: &str = "b.id, b.name, b.webhook_url, b.retention_ms, b.signing_secret, b.previous_secret, b.previous_until, b.endpoint_disabled, b.member_id, b.created_at, b.allowed_origins";
const CHATBOT_COL_COUNT: usize = 11;

fn chatbot_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Chatbot> {
    let prev: Option<String> = r.get(5)?;
    let until: Option<i64> = r.get(6)?;
    Ok(Chatbot {
        id: r.get(0)?,
        name: r.get(1)?,
        webhook_url: r.get(2)?,
        retention_ms: r.get(3)?,
        signing_secret: r.get(4)?,
        previous_secret: prev.zip(until),
        endpoint_disabled: r.get::<_, i64>(7)? != 0,
        member_id: r.get(8)?,
        created_at: r.get(9)?,
        allowed_origins: AllowedOrigins::from_stored(&r.get::<_, String>(10)?),
    })
}

const CONV_COLS: &str = "id, chatbot_id, visitor_id, visitor_name, taken_over_by, created_at";
const CONV_COL_COUNT: usize = 6;
/// A visitor token's conversation and its chatbot's `allowed_origins`.
const CONV_BY_TOKEN: &str = "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at, b.allowed_origins
     FROM conversations c JOIN chatbots b ON b.id = c.chatbot_id WHERE c.token_hash = ?1";

fn conversation_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Conversation> {
    let taken: Option<String> = r.get(4)?;
    Ok(Conversation {
        id: r.get(0)?,
        chatbot_id: r.get(1)?,
        visitor: Person {
            kind: "visitor".into(),
            id: r.get(2)?,
            display_name: r.get(3)?,
        },
        taken_over_by: taken.and_then(|t| serde_json::from_str(&t).ok()),
        created_at: r.get(5)?,
    })
}

fn parse_message(doc: &str, created_ms: i64) -> rusqlite::Result<Message> {
    let mut m: Message = serde_json::from_str(doc).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })?;
    m.created_ms = created_ms;
    Ok(m)
}

fn to_doc(m: &Message) -> StoreResult<String> {
    serde_json::to_string(m).map_err(backend)
}

/// What the writer thread keeps of what clicks read, so that a click needs
/// no query for it: messages as parsed (every change of a message is
/// written there and the cache follows it), conversations with their
/// chatbot, and messages with no pending interaction left. Only the writer
/// thread has these; a rolled-back job or batch, or a change by another
/// connection, empties them all.
pub(super) mod writer_cache {
    use std::cell::RefCell;
    use std::num::NonZeroUsize;
    use std::sync::Arc;

    use crate::domain::model::Message;

    const CAPACITY: NonZeroUsize = NonZeroUsize::new(4096).unwrap();

    /// A message as parsed, and as JSON once some answer needed it.
    type Entry = (Message, Option<Arc<str>>);

    thread_local! {
        static CACHE: RefCell<Option<lru::LruCache<String, Entry>>> = const { RefCell::new(None) };
    }

    /// Gives the calling thread (the writer) its caches.
    pub fn enable() {
        CACHE.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
        CONVERSATIONS.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
        SETTLED.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
        ACTIVE.with(|c| *c.borrow_mut() = Some(lru::LruCache::new(CAPACITY)));
    }

    pub fn message(id: &str) -> Option<Message> {
        CACHE.with(|c| Some(c.borrow_mut().as_mut()?.get(id)?.0.clone()))
    }

    /// `json`, when known, is `m` serialized (what a click answers with).
    pub fn put_message(m: &Message, json: Option<Arc<str>>) {
        CACHE.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.put(m.id.clone(), (m.clone(), json));
            }
        });
    }

    /// Message `m` as JSON: as cached with it, or serialized once and kept.
    /// `m` must be the cached message unchanged.
    pub fn message_json(m: &Message) -> Option<Arc<str>> {
        CACHE.with(|c| {
            let mut c = c.borrow_mut();
            let (_, json) = c.as_mut()?.get_mut(&m.id)?;
            if json.is_none() {
                *json = serde_json::to_string(m).ok().map(Arc::from);
            }
            debug_assert_eq!(
                json.as_deref(),
                serde_json::to_string(m).ok().as_deref(),
                "the cached JSON is the message's"
            );
            json.clone()
        })
    }

    pub fn forget_message(id: &str) {
        CACHE.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.pop(id);
            }
        });
    }

    /// After a rollback, or a change by another connection: what the
    /// caches hold may not be what the file holds.
    pub fn clear() {
        CACHE.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.clear();
            }
        });
        clear_conversations();
        SETTLED.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.clear();
            }
        });
    }

    thread_local! {
        static SETTLED: RefCell<Option<lru::LruCache<String, ()>>> = const { RefCell::new(None) };
    }

    /// Whether message `id` is known to have no pending or asked
    /// interaction (most clicks after the first on a button that stays on).
    pub fn settled(id: &str) -> bool {
        SETTLED.with(|c| c.borrow_mut().as_mut().is_some_and(|s| s.get(id).is_some()))
    }

    pub fn settle(id: &str) {
        SETTLED.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.put(id.to_string(), ());
            }
        });
    }

    /// An interaction of message `id` was inserted or changed.
    pub fn unsettle(id: &str) {
        SETTLED.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.pop(id);
            }
        });
    }

    /// A conversation as a click needs it: its chatbot (whole, handed to
    /// the dispatcher with the click's event), when it started, who took it
    /// over.
    #[derive(Clone)]
    pub struct Conversation {
        pub bot: std::sync::Arc<crate::domain::model::Chatbot>,
        pub created_at: i64,
        pub taken_over_by: Option<String>,
    }

    thread_local! {
        static CONVERSATIONS: RefCell<Option<lru::LruCache<String, Conversation>>> = const { RefCell::new(None) };
    }

    pub fn conversation(id: &str) -> Option<Conversation> {
        CONVERSATIONS.with(|c| c.borrow_mut().as_mut()?.get(id).cloned())
    }

    pub fn put_conversation(id: &str, v: &Conversation) {
        CONVERSATIONS.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.put(id.to_string(), v.clone());
            }
        });
    }

    /// Before any write that may change a chatbot or a conversation,
    /// including the state of its events.
    pub fn clear_conversations() {
        CONVERSATIONS.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.clear();
            }
        });
        ACTIVE.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.clear();
            }
        });
    }

    thread_local! {
        static ACTIVE: RefCell<Option<lru::LruCache<String, u32>>> = const { RefCell::new(None) };
    }

    /// How many events of conversation `id` are undelivered (pending or
    /// failed), when the writer knows it exactly: learned when a query
    /// found none, then followed through every event it inserts and every
    /// attempt that ends one. Any other change of an event's state goes
    /// through a job that empties this first.
    pub fn active(id: &str) -> Option<u32> {
        ACTIVE.with(|c| c.borrow_mut().as_mut()?.get(id).copied())
    }

    pub fn set_active(id: &str, n: u32) {
        ACTIVE.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.put(id.to_string(), n);
            }
        });
    }

    pub fn forget_active(id: &str) {
        ACTIVE.with(|c| {
            if let Some(cache) = c.borrow_mut().as_mut() {
                cache.pop(id);
            }
        });
    }
}

fn load_message(conn: &Connection, id: &str) -> StoreResult<Message> {
    if let Some(m) = writer_cache::message(id) {
        return Ok(m);
    }
    let m = load_message_uncached(conn, id)?;
    writer_cache::put_message(&m, None);
    Ok(m)
}

fn load_message_uncached(conn: &Connection, id: &str) -> StoreResult<Message> {
    conn.prepare_cached("SELECT doc, created_at FROM messages WHERE id = ?1 AND deleted = 0")
        .and_then(|mut s| {
            s.query_row([id], |r| parse_message(&r.get::<_, String>(0)?, r.get(1)?))
                .optional()
        })
        .map_err(backend)?
        .ok_or(StoreError::NotFound)
}

/// Saves the message; returns the JSON written (the message as the widget
/// sees it, reused for its stream entry).
fn save_message(conn: &Connection, m: &Message) -> StoreResult<String> {
    let doc = to_doc(m)?;
    conn.prepare_cached("UPDATE messages SET doc = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![m.id, doc]))
        .map_err(backend)?;
    writer_cache::put_message(m, Some(Arc::from(doc.as_str())));
    Ok(doc)
}

/// Inserts the message; returns the JSON written, as [`save_message`].
fn insert_message(conn: &Connection, m: &Message) -> StoreResult<String> {
    let doc = to_doc(m)?;
    conn.prepare_cached(
        "INSERT INTO messages (id, conversation_id, doc, created_at) VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![m.id, m.conversation_id, doc, m.created_ms]))
    .map_err(backend)?;
    writer_cache::put_message(m, Some(Arc::from(doc.as_str())));
    Ok(doc)
}

fn append_stream(
    conn: &Connection,
    conversation_id: &str,
    kind: &str,
    data: String,
) -> StoreResult<StreamEvent> {
    let seq = conn
        .prepare_cached("INSERT INTO stream_events (conversation_id, kind, data) VALUES (?1, ?2, ?3) RETURNING seq")
        .and_then(|mut s| s.query_row(params![conversation_id, kind, data], |r| r.get(0)))
        .map_err(backend)?;
    Ok(StreamEvent {
        seq,
        conversation_id: conversation_id.to_string(),
        kind: kind.to_string(),
        data,
    })
}

/// Inserts an event; returns it as a delivery to hand out at once when it
/// is the head of its conversation (nothing earlier still to deliver).
fn insert_event(conn: &Connection, e: NewEvent) -> StoreResult<Option<Claimed>> {
    // Two plain statements: a RETURNING clause measured dearer than both.
    let known = writer_cache::active(&e.conversation_id);
    let behind: bool = match known {
        Some(n) => n > 0,
        None => conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?1 AND status IN ('pending', 'failed'))",
            )
            .and_then(|mut s| s.query_row([&e.conversation_id], |r| r.get(0)))
            .map_err(backend)?,
    };
    conn.prepare_cached(
        "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?6, ?7)",
    )
    .and_then(|mut s| {
        s.execute(params![
            e.id,
            e.chatbot_id,
            e.conversation_id,
            e.event_type,
            e.payload,
            e.created_at,
            !behind
        ])
    })
    .map_err(backend)?;
    match known {
        Some(n) => writer_cache::set_active(&e.conversation_id, n + 1),
        None if !behind => writer_cache::set_active(&e.conversation_id, 1),
        None => {}
    }
    let seq = conn.last_insert_rowid();
    Ok((!behind).then(|| Claimed {
        seq,
        event_id: e.id,
        chatbot_id: e.chatbot_id,
        conversation_id: e.conversation_id,
        payload: bytes::Bytes::from(e.payload),
        attempts: 0,
        attempt_base: 0,
        bot: None,
    }))
}

/// After an event leaves the active states, the next one of its
/// conversation becomes the head (returned with when it is due, if it was
/// not the head already), and whether the conversation has any
/// undelivered event left.
fn promote_next(
    conn: &Connection,
    conversation_id: &str,
) -> StoreResult<(Option<(Claimed, i64)>, bool)> {
    let next = conn
        .prepare_cached(
            "SELECT seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base, next_attempt_at, is_head
             FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?1 AND status IN ('pending', 'failed') ORDER BY seq LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row([conversation_id], |r| {
                Ok((
                    Claimed {
                        seq: r.get(0)?,
                        event_id: r.get(1)?,
                        chatbot_id: r.get(2)?,
                        conversation_id: r.get(3)?,
                        payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(4)?),
                        attempts: r.get(5)?,
                        attempt_base: r.get(6)?,
                        bot: None,
                    },
                    r.get::<_, i64>(7)?,
                    r.get::<_, bool>(8)?,
                ))
            })
            .optional()
        })
        .map_err(backend)?;
    let Some((c, at, false)) = next else {
        return Ok((None, next.is_some()));
    };
    conn.prepare_cached("UPDATE events SET is_head = 1 WHERE seq = ?1")
        .and_then(|mut s| s.execute([c.seq]))
        .map_err(backend)?;
    Ok((Some((c, at)), true))
}

fn message_json(m: &Message) -> String {
    serde_json::to_string(m).unwrap_or_default()
}

fn summary_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EventSummary> {
    let status: String = r.get(4)?;
    let next: i64 = r.get(6)?;
    let active = status == "pending" || status == "failed";
    Ok(EventSummary {
        event_id: r.get(0)?,
        event_type: r.get(1)?,
        created_at: r.get(2)?,
        payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(3)?),
        status,
        attempts: r.get(5)?,
        next_attempt_at: active.then_some(next),
    })
}

impl Store for SqliteStore {
    fn meta_get_or_init(&self, key: &str, init: String) -> BoxFut<'_, StoreResult<String>> {
        let key = key.to_string();
        Box::pin(self.write(move |c| {
            c.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES (?1, ?2)",
                params![key, init],
            )
            .map_err(backend)?;
            c.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
                .map_err(backend)
        }))
    }

    fn create_chatbot(&self, b: Chatbot, api_key_hash: String) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(self.write(move |c| {
            c.execute(
                "INSERT INTO chatbots (id, name, webhook_url, retention_ms, api_key_hash, signing_secret, member_id, created_at, allowed_origins)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![b.id, b.name, b.webhook_url, b.retention_ms, api_key_hash, b.signing_secret, b.member_id, b.created_at, b.allowed_origins.to_stored()],
            )
            .map_err(backend)?;
            Ok(())
        }))
    }

    fn get_chatbot(&self, id: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHATBOT_COLS} FROM chatbots WHERE id = ?1"
            ))?
            .query_row([id], chatbot_row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn chatbot_by_key(&self, api_key_hash: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHATBOT_COLS} FROM chatbots WHERE api_key_hash = ?1"
            ))?
            .query_row([api_key_hash], chatbot_row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn update_chatbot(&self, b: Chatbot) -> BoxFut<'_, StoreResult<()>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let enabled = !b.endpoint_disabled;
            let bot_id = b.id.clone();
            self.write(move |c| {
                let (prev, until) = match b.previous_secret {
                    Some((s, u)) => (Some(s), Some(u)),
                    None => (None, None),
                };
                let n = c
                    .execute(
                        "UPDATE chatbots SET name = ?2, webhook_url = ?3, retention_ms = ?4, signing_secret = ?5,
                         previous_secret = ?6, previous_until = ?7, endpoint_disabled = ?8, allowed_origins = ?9 WHERE id = ?1",
                        params![b.id, b.name, b.webhook_url, b.retention_ms, b.signing_secret, prev, until, b.endpoint_disabled as i64, b.allowed_origins.to_stored()],
                    )
                    .map_err(backend)?;
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                Ok(())
            })
            .await?;
            // Cached visitor tokens carry the chatbot's allowed origins.
            self.visitors.invalidate();
            self.claims.lock().chatbot_changed(&bot_id, !enabled);
            if enabled {
                hub.new_events.notify_one();
            }
            Ok(())
        })
    }

    fn create_conversation(
        &self,
        conv: Conversation,
        token_hash: String,
    ) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(self.write(move |c| {
            c.execute(
                "INSERT INTO conversations (id, chatbot_id, visitor_id, visitor_name, token_hash, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![conv.id, conv.chatbot_id, conv.visitor.id, conv.visitor.display_name, token_hash, conv.created_at],
            )
            .map_err(backend)?;
            Ok(())
        }))
    }

    fn get_conversation(&self, id: &str) -> BoxFut<'_, StoreResult<Conversation>> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {CONV_COLS} FROM conversations WHERE id = ?1"
            ))?
            .query_row([id], conversation_row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn conversation_by_token(
        &self,
        token_hash: &str,
    ) -> BoxFut<'_, StoreResult<(Conversation, AllowedOrigins)>> {
        let r = match self.visitors.get(token_hash) {
            Ok(v) => Ok(v),
            Err(generation) => self
                .read(|c| {
                    c.prepare_cached(CONV_BY_TOKEN)?
                        .query_row([token_hash], |r| {
                            let origins: String = r.get(CONV_COL_COUNT)?;
                            Ok((conversation_row(r)?, AllowedOrigins::from_stored(&origins)))
                        })
                        .optional()
                })
                .and_then(|v| v.ok_or(StoreError::NotFound))
                .inspect(|v| self.visitors.put(generation, token_hash, v)),
        };
        Box::pin(async move { r })
    }

    fn takeover(
        &self,
        conversation_id: &str,
        member: Person,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        let cid = conversation_id.to_string();
        let hub = self.hub.clone();
        Box::pin(async move {
            let events = self
                .write(move |c| {
                    let member = serde_json::to_string(&member).map_err(backend)?;
                    let n = c
                        .execute("UPDATE conversations SET taken_over_by = ?2 WHERE id = ?1", params![cid, member])
                        .map_err(backend)?;
                    if n == 0 {
                        return Err(StoreError::NotFound);
                    }
                    let pending: Vec<String> = c
                        .prepare("SELECT id FROM interactions WHERE conversation_id = ?1 AND status = 'pending'")
                        .and_then(|mut s| s.query_map([&cid], |r| r.get(0)).and_then(|rows| rows.collect()))
                        .map_err(backend)?;
                    let mut api = Vec::new();
                    let mut out = Vec::new();
                    for id in pending {
                        let (_, st, a) = inbox::close(c, &id, "cancelled", "takeover", now_ms)?;
                        out.extend(st);
                        api.extend(a);
                    }
                    let msgs: Vec<Message> = c
                        .prepare("SELECT doc, created_at FROM messages WHERE conversation_id = ?1 AND deleted = 0")
                        .and_then(|mut s| {
                            s.query_map([&cid], |r| parse_message(&r.get::<_, String>(0)?, r.get(1)?))
                                .and_then(|rows| rows.collect())
                        })
                        .map_err(backend)?;
                    for mut m in msgs {
                        if m.take_over(now_ms) {
                            save_message(c, &m)?;
                            out.push(append_stream(c, &cid, "message.updated", message_json(&m))?);
                        }
                    }
                    Ok((out, api))
                })
                .await?;
            self.visitors.invalidate();
            hub.publish(events.0);
            hub.publish_api(events.1);
            Ok(())
        })
    }

    fn insert_message(
        &self,
        msg: Message,
        event: Option<NewEvent>,
        interactions: Vec<NewInteraction>,
    ) -> BoxFut<'_, StoreResult<()>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let (entry, api, _) = self
                .write_queuing(
                    true,
                    move |c| {
                        // Not into a conversation erased or purged since
                        // the caller found it.
                        let exists = c
                            .prepare_cached(
                                "SELECT EXISTS (SELECT 1 FROM conversations WHERE id = ?1)",
                            )
                            .and_then(|mut s| {
                                s.query_row([&msg.conversation_id], |r| r.get::<_, bool>(0))
                            })
                            .map_err(backend)?;
                        if !exists {
                            return Err(StoreError::NotFound);
                        }
                        let doc = insert_message(c, &msg)?;
                        let hot = match event {
                            Some(e) => insert_event(c, e)?,
                            None => None,
                        };
                        let mut api = Vec::new();
                        for i in &interactions {
                            inbox::insert(c, i, msg.created_ms)?;
                            let stored = inbox::by_id(c, &i.id)?;
                            api.push(ApiEvent {
                                chatbot_id: i.chatbot_id.clone(),
                                interaction_id: i.id.clone(),
                                kind: "interaction.created",
                                data: stored.to_json(msg.created_ms),
                            });
                        }
                        let entry = append_stream(c, &msg.conversation_id, "message.created", doc)?;
                        Ok((entry, api, hot))
                    },
                    |t| t.2.take(),
                )
                .await?;
            hub.publish(vec![entry]);
            hub.publish_api(api);
            Ok(())
        })
    }

    fn insert_attachment(
        &self,
        a: crate::domain::attachment::Attachment,
    ) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(self.write(move |c| attachments::insert(c, &a).map_err(backend)))
    }

    fn get_attachment(
        &self,
        id: &str,
    ) -> BoxFut<'_, StoreResult<crate::domain::attachment::Attachment>> {
        let r = self.read(|c| attachments::get(c, id));
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn delete_attachment(&self, id: &str) -> BoxFut<'_, StoreResult<()>> {
        let id = id.to_string();
        Box::pin(self.write(move |c| attachments::delete(c, &id).map_err(backend)))
    }

    fn get_message(&self, id: &str) -> BoxFut<'_, StoreResult<Message>> {
        let r = self.read(|c| {
            c.prepare_cached("SELECT doc, created_at FROM messages WHERE id = ?1 AND deleted = 0")?
                .query_row([id], |r| parse_message(&r.get::<_, String>(0)?, r.get(1)?))
                .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<Message>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT doc, created_at, seq FROM messages WHERE conversation_id = ?1 AND deleted = 0 AND seq < ?2
                 ORDER BY seq DESC LIMIT ?3",
            )?;
            let rows = s.query_map(params![conversation_id, cursor.unwrap_or(i64::MAX), limit as i64 + 1], |r| {
                Ok((parse_message(&r.get::<_, String>(0)?, r.get(1)?)?, r.get::<_, i64>(2)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move {
            let mut rows = r?;
            let next_cursor = if rows.len() > limit {
                rows.truncate(limit);
                rows.last().map(|(_, seq)| seq.to_string())
            } else {
                None
            };
            Ok(Page {
                data: rows.into_iter().map(|(m, _)| m).collect(),
                next_cursor,
            })
        })
    }

    fn interact(&self, req: InteractRequest) -> BoxFut<'_, StoreResult<Interacted>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let fx = self
                .write_queuing(
                    false,
                    move |c| {
                        let msg = load_message(c, &req.message_id)?;
                        if msg.conversation_id != req.conversation_id {
                            return Err(StoreError::NotFound);
                        }
                        inbox::apply(
                            c,
                            msg,
                            &req.action,
                            &req.user,
                            &req.event_id,
                            &req.response_url,
                            req.now_ms,
                            req.interactive_window_ms,
                            None,
                        )
                    },
                    |fx| fx.hot.take(),
                )
                .await?;
            hub.publish(fx.stream);
            hub.publish_api(fx.api);
            Ok(fx.out)
        })
    }

    fn get_interaction(&self, chatbot_id: &str, id: &str) -> BoxFut<'_, StoreResult<Interaction>> {
        let r = self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {} FROM interactions WHERE id = ?1 AND chatbot_id = ?2",
                inbox::COLS
            ))?
            .query_row([id, chatbot_id], inbox::row)
            .optional()
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn list_interactions(
        &self,
        chatbot_id: &str,
        filter: InteractionFilter,
        limit: usize,
        cursor: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<Interaction>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(&format!(
                "SELECT {}, seq FROM interactions
                 WHERE chatbot_id = ?1 AND seq < ?2 AND (?3 IS NULL OR conversation_id = ?3)
                   AND (?4 IS NULL
                        OR (?4 = 'pending' AND status = 'pending' AND (expires_at IS NULL OR expires_at > ?5))
                        OR (?4 = 'expired' AND (status = 'expired' OR (status = 'pending' AND expires_at <= ?5)))
                        OR (?4 NOT IN ('pending', 'expired') AND status = ?4))
                 ORDER BY seq DESC LIMIT ?6",
                inbox::COLS
            ))?;
            let rows = s.query_map(
                params![chatbot_id, cursor.unwrap_or(i64::MAX), filter.conversation_id, filter.status, now_ms, limit as i64 + 1],
                |r| Ok((inbox::row(r)?, r.get::<_, i64>(14)?)),
            )?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move {
            let mut rows = r?;
            let next_cursor = if rows.len() > limit {
                rows.truncate(limit);
                rows.last().map(|(_, s)| s.to_string())
            } else {
                None
            };
            Ok(Page {
                data: rows.into_iter().map(|(i, _)| i).collect(),
                next_cursor,
            })
        })
    }

    fn answer_interaction(&self, req: AnswerRequest) -> BoxFut<'_, StoreResult<AnswerOutcome>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let (outcome, stream, api, _) = self
                .write_queuing(true, move |c| {
                    let i = inbox::by_id(c, &req.interaction_id)?;
                    if i.chatbot_id != req.chatbot_id {
                        return Err(StoreError::NotFound);
                    }
                    let prior: Option<(String, String)> = c
                        .query_row(
                            "SELECT body_hash, result FROM interaction_idempotency WHERE interaction_id = ?1 AND key = ?2",
                            params![req.interaction_id, req.idempotency_key],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()
                        .map_err(backend)?;
                    if let Some((hash, result)) = prior {
                        if hash != req.body_hash {
                            return Err(StoreError::Rejected(Rejection::IdempotencyConflict));
                        }
                        let v = serde_json::from_str(&result).map_err(backend)?;
                        return Ok((AnswerOutcome::Repeated(v), Vec::new(), Vec::new(), None));
                    }
                    if i.status_at(req.now_ms) != "pending" {
                        return Err(StoreError::Rejected(Rejection::NotPending));
                    }
                    let msg = load_message(c, &i.message_id)?;
                    let action = crate::domain::inbox::action_from_answer(&i.kind, &i.spec, &msg, &req.body)?;
                    let fx = inbox::apply(
                        c,
                        msg,
                        &action,
                        &req.user,
                        &req.event_id,
                        &req.response_url,
                        req.now_ms,
                        req.interactive_window_ms,
                        Some(&req.body),
                    )?;
                    let answered = match fx.answered {
                        Some(a) => a,
                        None => return Err(StoreError::Rejected(Rejection::NotPending)),
                    };
                    c.execute(
                        "INSERT INTO interaction_idempotency (interaction_id, key, body_hash, result) VALUES (?1, ?2, ?3, ?4)",
                        params![req.interaction_id, req.idempotency_key, req.body_hash, answered.to_json(req.now_ms).to_string()],
                    )
                    .map_err(backend)?;
                    Ok((AnswerOutcome::Answered(Box::new(answered)), fx.stream, fx.api, fx.hot))
                }, |t| t.3.take())
                .await?;
            hub.publish(stream);
            hub.publish_api(api);
            Ok(outcome)
        })
    }

    fn close_interaction(
        &self,
        id: &str,
        status: &'static str,
        reason: &'static str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Interaction>> {
        let id = id.to_string();
        let hub = self.hub.clone();
        Box::pin(async move {
            let (i, stream, api) = self
                .write(move |c| inbox::close(c, &id, status, reason, now_ms))
                .await?;
            hub.publish(stream);
            hub.publish_api(api);
            Ok(i)
        })
    }

    fn reply(&self, req: ReplyRequest) -> BoxFut<'_, StoreResult<ReplyOutcome>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let (outcome, entries, api) = self
                .write(move |c| {
                    if let Some(key) = &req.idempotency_key {
                        let prior: Option<String> = c
                            .query_row(
                                "SELECT result FROM response_idempotency WHERE event_id = ?1 AND key = ?2",
                                params![req.event_id, key],
                                |r| r.get(0),
                            )
                            .optional()
                            .map_err(backend)?;
                        if let Some(p) = prior {
                            let out = super::repeated_reply(&p, &req.body_hash)?;
                            return Ok((out, Vec::new(), Vec::new()));
                        }
                    }
                    let uses: i64 = c
                        .query_row("SELECT uses FROM response_uses WHERE event_id = ?1", [&req.event_id], |r| r.get(0))
                        .optional()
                        .map_err(backend)?
                        .unwrap_or(0);
                    if uses >= req.max_uses as i64 {
                        return Ok((ReplyOutcome::UsedUp, Vec::new(), Vec::new()));
                    }
                    let now = crate::domain::time::rfc3339(req.now_ms);
                    let mut entries = Vec::new();
                    let window = req.interactive_window_ms;
                    let api;
                    let result_msg = match req.reply {
                        Reply::Replace { text, blocks, metadata, typing_on_interaction } => {
                            let mut m = load_message(c, &req.message_id)?;
                            m.text = text;
                            m.blocks = blocks;
                            if let Some(md) = metadata {
                                m.metadata = md;
                            }
                            if let Some(t) = typing_on_interaction {
                                m.typing_on_interaction = t;
                            }
                            m.updated_at = now;
                            save_message(c, &m)?;
                            api = inbox::after_reply(c, &m, false, window, req.now_ms)?;
                            entries.push(append_stream(c, &m.conversation_id, "message.updated", message_json(&m))?);
                            m
                        }
                        Reply::Post(m) => {
                            insert_message(c, &m)?;
                            api = inbox::after_reply(c, &m, false, window, req.now_ms)?;
                            entries.push(append_stream(c, &m.conversation_id, "message.created", message_json(&m))?);
                            m
                        }
                        Reply::Delete => {
                            let m = load_message(c, &req.message_id)?;
                            c.execute("UPDATE messages SET deleted = 1 WHERE id = ?1", [&m.id]).map_err(backend)?;
                            writer_cache::forget_message(&m.id);
                            api = inbox::after_reply(c, &m, true, window, req.now_ms)?;
                            entries.push(append_stream(
                                c,
                                &m.conversation_id,
                                "message.deleted",
                                serde_json::json!({"message_id": m.id}).to_string(),
                            )?);
                            m
                        }
                    };
                    c.execute(
                        "INSERT INTO response_uses (event_id, uses) VALUES (?1, 1)
                         ON CONFLICT(event_id) DO UPDATE SET uses = uses + 1",
                        [&req.event_id],
                    )
                    .map_err(backend)?;
                    let result = serde_json::json!({ "message": result_msg });
                    if let Some(key) = &req.idempotency_key {
                        c.execute(
                            "INSERT INTO response_idempotency (event_id, key, result) VALUES (?1, ?2, ?3)",
                            params![req.event_id, key, super::reply_record(&result, &req.body_hash)],
                        )
                        .map_err(backend)?;
                    }
                    Ok((ReplyOutcome::Applied(result), entries, api))
                })
                .await?;
            hub.publish(entries);
            hub.publish_api(api);
            Ok(outcome)
        })
    }

    fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> BoxFut<'_, StoreResult<Vec<StreamEvent>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT seq, conversation_id, kind, data FROM stream_events WHERE conversation_id = ?1 AND seq > ?2
                 ORDER BY seq LIMIT ?3",
            )?;
            let rows = s.query_map(params![conversation_id, after_seq, limit as i64], |r| {
                Ok(StreamEvent {
                    seq: r.get(0)?,
                    conversation_id: r.get(1)?,
                    kind: r.get(2)?,
                    data: r.get(3)?,
                })
            })?;
            rows.collect()
        });
        Box::pin(async move { r })
    }

    fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> BoxFut<'_, StoreResult<StreamEvent>> {
        let (cid, kind) = (conversation_id.to_string(), kind.to_string());
        let hub = self.hub.clone();
        Box::pin(async move {
            let e = self
                .write(move |c| append_stream(c, &cid, &kind, data))
                .await?;
            hub.publish(vec![e.clone()]);
            Ok(e)
        })
    }

    fn claim_due(
        &self,
        now_ms: i64,
        lease_until: i64,
        limit: usize,
        skip: Vec<String>,
    ) -> BoxFut<'_, StoreResult<Vec<Claimed>>> {
        // One process owns a SQLite file, so leases live in memory: a claim
        // takes the hot queue first and reads the table only when it may
        // hold more (see `claims`), with no write transaction of its own.
        let mut cl = self.claims.lock();
        cl.expire(now_ms);
        let mut out = cl.take_hot(limit, &skip, lease_until);
        let r = if out.len() < limit && cl.cold_due(now_ms, &skip) {
            let want = limit - out.len();
            let scan = self.read(|c| {
                let skip = serde_json::to_string(&skip).unwrap_or_default();
                let mut s = c.prepare_cached(
                    "SELECT seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base FROM events e
                     WHERE e.is_head = 1 AND e.status IN ('pending', 'failed') AND e.next_attempt_at <= ?1
                       AND e.chatbot_id NOT IN (SELECT value FROM json_each(?2))
                       AND e.chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                     ORDER BY e.next_attempt_at, e.seq LIMIT ?3",
                )?;
                let mut found = Vec::with_capacity(want);
                let mut rows = s.query(params![now_ms, skip, (want + cl.leases.len()) as i64])?;
                while let Some(r) = rows.next()? {
                    if found.len() == want {
                        break;
                    }
                    let id: String = r.get(1)?;
                    if cl.leases.contains_key(&id) {
                        continue;
                    }
                    found.push(Claimed {
                        seq: r.get(0)?,
                        event_id: id,
                        chatbot_id: r.get(2)?,
                        conversation_id: r.get(3)?,
                        payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(4)?),
                        attempts: r.get(5)?,
                        attempt_base: r.get(6)?,
                        bot: None,
                    });
                }
                Ok(found)
            });
            scan.map(|found| {
                cl.scanned(now_ms, found.len() < want, &skip);
                for c in found {
                    cl.leases.insert(c.event_id.clone(), lease_until);
                    out.push(c);
                }
                out
            })
        } else {
            Ok(out)
        };
        drop(cl);
        Box::pin(async move {
            let mut rows = r?;
            rows.sort_by_key(|r| r.seq);
            Ok(rows)
        })
    }

    fn record_attempts(&self, records: Vec<AttemptRecord>) -> BoxFut<'_, StoreResult<()>> {
        let hub = self.hub.clone();
        Box::pin(async move {
            let ids: Vec<String> = records.iter().map(|r| r.event_id.clone()).collect();
            let (promoted, retries, gone) = self
                .write_decided(false, move |c| {
                    let mut promoted = Vec::new();
                    let mut retries = Vec::new();
                    let mut gone = Vec::new();
                    for rec in &records {
                        let (status, next, is_head): (&str, i64, bool) = match rec.next {
                            AttemptNext::Succeeded => ("succeeded", 0, false),
                            AttemptNext::Dead => ("dead", 0, false),
                            AttemptNext::RetryAt(t) => ("failed", t, true),
                            AttemptNext::EndpointGone => ("failed", rec.at_ms, true),
                        };
                        let args = params![rec.seq, status, rec.number, next, is_head as i64];
                        // Whether the event was undelivered before: what
                        // keeps the writer's count of its conversation right.
                        let was_active = c
                            .prepare_cached(
                                "UPDATE events SET status = ?2, attempts = max(attempts, ?3), next_attempt_at = ?4,
                                 is_head = ?5, leased_until = 0 WHERE seq = ?1 AND status IN ('pending', 'failed')",
                            )
                            .and_then(|mut s| s.execute(args))
                            .map_err(backend)?
                            == 1;
                        if !was_active {
                            // A late record of an event already ended, or
                            // of one erased with its conversation while on
                            // the wire (no row: nothing to record or retry).
                            writer_cache::forget_active(&rec.conversation_id);
                            let exists = c
                                .prepare_cached(
                                    "UPDATE events SET status = ?2, attempts = max(attempts, ?3), next_attempt_at = ?4,
                                     is_head = ?5, leased_until = 0 WHERE seq = ?1",
                                )
                                .and_then(|mut s| s.execute(args))
                                .map_err(backend)?
                                == 1;
                            if !exists {
                                continue;
                            }
                        }
                        c.prepare_cached(
                            "INSERT OR REPLACE INTO attempts (event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        )
                        .and_then(|mut s| {
                            s.execute(params![
                                rec.event_id,
                                rec.number,
                                rec.at_ms,
                                rec.status_code,
                                rec.duration_ms,
                                rec.error,
                                rec.response_excerpt,
                                rec.request_headers
                            ])
                        })
                        .map_err(backend)?;
                        if let AttemptNext::RetryAt(t) = rec.next {
                            retries.push(t);
                        }
                        if rec.next == AttemptNext::EndpointGone {
                            writer_cache::clear_conversations();
                            let bot: String = c
                                .prepare_cached(
                                    "UPDATE chatbots SET endpoint_disabled = 1 WHERE id = (SELECT chatbot_id FROM events WHERE id = ?1)
                                     RETURNING id",
                                )
                                .and_then(|mut s| s.query_row([&rec.event_id], |r| r.get(0)))
                                .map_err(backend)?;
                            gone.push(bot);
                        }
                        if is_head {
                            continue;
                        }
                        // The event left the undelivered states: the next
                        // of its conversation, if any, becomes the head.
                        let left = match writer_cache::active(&rec.conversation_id) {
                            Some(n) if was_active && n > 0 => {
                                let left = n.saturating_sub(1);
                                writer_cache::set_active(&rec.conversation_id, left);
                                Some(left)
                            }
                            _ => None,
                        };
                        if left == Some(0) {
                            continue;
                        }
                        let (next, any_left) = promote_next(c, &rec.conversation_id)?;
                        if let Some(mut p) = next {
                            // Its chatbot as the writer knows it, if it
                            // does: the dispatcher need not read it.
                            p.0.bot = writer_cache::conversation(&rec.conversation_id).map(|c| c.bot);
                            promoted.push(p);
                        }
                        if !any_left {
                            writer_cache::set_active(&rec.conversation_id, 0);
                        }
                    }
                    Ok((promoted, retries, gone))
                })
                .await?;
            let wake = !promoted.is_empty() || !gone.is_empty();

            {
                let mut cl = self.claims.lock();
                for id in &ids {
                    cl.leases.remove(id);
                }
                for t in retries {
                    cl.retry_at(t);
                }
                for bot in &gone {
                    cl.chatbot_changed(bot, true);
                }
                let now = crate::domain::time::now_ms();
                let mut due = Vec::with_capacity(promoted.len());
                for (c, at) in promoted {
                    if at <= now {
                        due.push(c);
                    } else {
                        cl.cold_at(at);
                    }
                }
                cl.offer(due);
            }
            if wake {
                hub.new_events.notify_one();
            }
            Ok(())
        })
    }

    fn release_leases(&self, event_ids: Option<Vec<String>>) -> BoxFut<'_, StoreResult<()>> {
        let mut cl = self.claims.lock();
        match event_ids {
            None => cl.release_claimed(),
            Some(ids) => {
                for id in ids {
                    cl.leases.remove(&id);
                }
            }
        }
        cl.cold_at(0);
        Box::pin(async { Ok(()) })
    }

    fn give_back(&self, claims: Vec<Claimed>) -> BoxFut<'_, StoreResult<()>> {
        self.claims.lock().give_back(claims);
        Box::pin(async { Ok(()) })
    }

    fn next_due_at(&self) -> BoxFut<'_, StoreResult<Option<i64>>> {
        // Known in memory: the next retry, or the next safety scan.
        let now = crate::domain::time::now_ms();
        let at = self.claims.lock().next_due_at(now);
        Box::pin(async move { Ok(at) })
    }

    fn list_events(
        &self,
        chatbot_id: &str,
        filter: EventFilter,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<EventSummary>>> {
        let r = self.read(|c| {
            let mut s = c.prepare_cached(
                "SELECT id, type, created_at, payload, status, attempts, next_attempt_at, seq FROM events
                 WHERE chatbot_id = ?1 AND (?2 IS NULL OR status = ?2) AND (?5 IS NULL OR type = ?5)
                   AND (?6 IS NULL OR id = ?6) AND seq < ?3 ORDER BY seq DESC LIMIT ?4",
            )?;
            let args = params![
                chatbot_id,
                filter.status,
                cursor.unwrap_or(i64::MAX),
                limit as i64 + 1,
                filter.event_type,
                filter.event_id
            ];
            let rows = s.query_map(args, |r| {
                Ok((summary_row(r)?, r.get::<_, i64>(7)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move {
            let mut rows = r?;
            let next_cursor = if rows.len() > limit {
                rows.truncate(limit);
                rows.last().map(|(_, s)| s.to_string())
            } else {
                None
            };
            Ok(Page {
                data: rows.into_iter().map(|(e, _)| e).collect(),
                next_cursor,
            })
        })
    }

    fn get_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
    ) -> BoxFut<'_, StoreResult<(EventSummary, Vec<AttemptRow>)>> {
        let r = self.read(|c| {
            // One snapshot: the event's status and its attempts are
            // written by one commit and read together.
            let snapshot = c.unchecked_transaction()?;
            let ev = c
                .prepare_cached(
                    "SELECT id, type, created_at, payload, status, attempts, next_attempt_at FROM events
                     WHERE id = ?1 AND chatbot_id = ?2",
                )?
                .query_row([event_id, chatbot_id], summary_row)
                .optional()?;
            let Some(ev) = ev else { return Ok(None) };
            let mut s = c.prepare_cached(
                "SELECT number, at, status_code, duration_ms, error, response_excerpt, request_headers FROM attempts
                 WHERE event_id = ?1 ORDER BY number",
            )?;
            let attempts = s
                .query_map([event_id], |r| {
                    Ok(AttemptRow {
                        number: r.get(0)?,
                        at: r.get(1)?,
                        status_code: r.get(2)?,
                        duration_ms: r.get(3)?,
                        error: r.get(4)?,
                        response_excerpt: r.get(5)?,
                        request_headers: r.get(6)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(s);
            snapshot.commit()?;
            Ok(Some((ev, attempts)))
        });
        Box::pin(async move { r?.ok_or(StoreError::NotFound) })
    }

    fn redeliver(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        let (bid, eid) = (chatbot_id.to_string(), event_id.to_string());
        let hub = self.hub.clone();
        Box::pin(async move {
            self.write(move |c| {
                let row: Option<(String, String)> = c
                    .query_row(
                        "SELECT status, conversation_id FROM events WHERE id = ?1 AND chatbot_id = ?2",
                        [&eid, &bid],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()
                    .map_err(backend)?;
                let Some((status, conv)) = row else {
                    return Err(StoreError::NotFound);
                };
                if status == "pending" || status == "failed" {
                    // Already queued: make it due now.
                    c.execute("UPDATE events SET next_attempt_at = ?2 WHERE id = ?1", params![eid, now_ms])
                        .map_err(backend)?;
                    return Ok(());
                }
                c.execute(
                    "UPDATE events SET status = 'pending', next_attempt_at = ?2, leased_until = 0, attempt_base = attempts,
                     is_head = NOT EXISTS (SELECT 1 FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?3 AND status IN ('pending', 'failed'))
                     WHERE id = ?1",
                    params![eid, now_ms, conv],
                )
                .map_err(backend)?;
                Ok(())
            })
            .await?;
            self.claims.lock().cold_at(0);
            hub.new_events.notify_one();
            Ok(())
        })
    }

    fn redeliver_all(
        &self,
        chatbot_id: &str,
        status: &'static str,
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
        let r = self.read(|c| {
            c.prepare_cached(
                "SELECT count(*), min(created_at) FROM events WHERE status IN ('pending', 'failed')",
            )?
            .query_row([], |r| {
                Ok(QueueStats {
                    pending: r.get(0)?,
                    oldest_pending_created_at: r.get(1)?,
                })
            })
        });
        Box::pin(async move { r })
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
