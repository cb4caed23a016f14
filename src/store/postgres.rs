//! PostgreSQL store, for several instances sharing one database. Row locks
//! serialise what the SQLite writer thread serialises there: a message row
//! for first-click-wins, a conversation row for the order of its events.
//! Claims use `FOR UPDATE SKIP LOCKED` with leases.

use std::sync::Arc;

use sqlx::postgres::{PgPool, PgRow};
use sqlx::{ConnectOptions, Postgres, Row, Transaction};

use super::*;
use crate::domain::inbox::Interaction;
use crate::domain::origins::AllowedOrigins;
use crate::store::{ApiEvent, Signals};

mod attachments;
mod batch;
mod chatbots;
pub mod connect;
mod dashboard;
mod endpoints;
mod events;
mod fanout;
mod ids;
mod inbox;
mod interactions;
mod lifecycle;
pub use batch::events_only_sql as click_batch_events_sql;
pub use lifecycle::{DELETES as ERASE_CONVERSATIONS, PAGE as PURGE_PAGE};
mod messages;
pub mod notify;
mod queue;
mod queued;
mod review;
mod rows;
mod tx;

use queue::*;
use rows::*;

const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/postgres/0001_init.sql"),
    include_str!("../../migrations/postgres/0002_allowed_origins.sql"),
    include_str!("../../migrations/postgres/0003_lifecycle.sql"),
    include_str!("../../migrations/postgres/0004_attempt_headers.sql"),
    include_str!("../../migrations/postgres/0005_attachments.sql"),
    include_str!("../../migrations/postgres/0006_fillfactor.sql"),
    include_str!("../../migrations/postgres/0009_event_trace.sql"),
    include_str!("../../migrations/postgres/0010_endpoints.sql"),
    include_str!("../../migrations/postgres/0011_delivery_heads.sql"),
    include_str!("../../migrations/postgres/0012_purge_keyset.sql"),
    include_str!("../../migrations/postgres/0013_record_deliveries.sql"),
    include_str!("../../migrations/postgres/0014_unrouted_events.sql"),
    include_str!("../../migrations/postgres/0015_one_head_per_pair.sql"),
];

pub struct PostgresStore {
    pool: PgPool,
    signals: Arc<dyn Signals>,
    /// Names this instance in its notifications (see [`notify`]).
    instance: notify::Instance,
    _listening: Option<notify::Listening>,
    /// Group commit of clicks and submits (see [`batch`]).
    clicks: batch::Batcher,
    /// Deliveries leased to this instance as their events committed.
    queued: Arc<queued::Queued>,
    /// Visitor tokens read (see [`crate::store::cache`]): emptied by this
    /// instance's changes and by the ones it hears of.
    visitors: Arc<Visitors>,
    /// The claim loop's connection and the recorder's (see [`connect::Held`]).
    claiming: connect::Held,
    recording: connect::Held,
}

pub type Visitors = crate::store::cache::ReadCache<(Conversation, AllowedOrigins)>;

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        connect::note_error(&e);
        if connect::transient(&e) {
            StoreError::Unavailable(e.to_string())
        } else {
            backend(e)
        }
    }
}

type Tx<'a> = Transaction<'a, Postgres>;

/// Commits `tx` with the notifications of what it changed: its stream
/// entries, its inbox changes, and whether a delivery may be due.
async fn commit_noting(
    instance: &notify::Instance,
    mut tx: Tx<'_>,
    stream: &[StreamEvent],
    api: &[ApiEvent],
    due: bool,
) -> StoreResult<()> {
    let mut notes = notify::Notes::new(instance);
    for e in stream {
        notes.stream(e);
    }
    for e in api {
        notes.api(e);
    }
    if due {
        notes.due();
    }
    let t0 = std::time::Instant::now();
    notes.send(&mut tx).await?;
    let r = tx.commit().await.map_err(backend);
    crate::telemetry::metrics::store_commit(t0.elapsed());
    r
}

impl PostgresStore {
    /// Opens a pool of [`connect::DEFAULT_POOL`] connections.
    pub async fn connect(url: &str, signals: Arc<dyn Signals>) -> StoreResult<Self> {
        Self::open(url, signals, connect::DEFAULT_POOL).await
    }

    /// Opens a pool of `pool_size` connections on `url` (TLS as its
    /// `sslmode` says) and brings the schema up to date.
    pub async fn open(url: &str, signals: Arc<dyn Signals>, pool_size: u32) -> StoreResult<Self> {
        let opts = connect::options(url)?;
        connect::probe(&opts).await?;
        // One of the pool's connections is the click batches' own, in a
        // pool of its own: its statements carry their values as text
        // (batch.rs), so sqlx logs none of them (a response URL's token
        // must not reach a log line).
        let pool = connect::pool(&opts, pool_size.saturating_sub(1).max(1)).await?;
        let quiet = opts.clone().disable_statement_logging();
        let batch_conn = connect::Held::kept(connect::pool(&quiet, 1).await?);
        let instance = notify::Instance::new();
        let single = batch::single(pool.clone(), instance.clone());
        let queued = Arc::new(queued::Queued::new(signals.clone()));
        let clicks = batch::Batcher::new(
            pool.clone(),
            batch_conn,
            instance.clone(),
            single,
            queued.clone(),
        );
        let mut store = Self {
            pool: pool.clone(),
            signals,
            instance,
            _listening: None,
            clicks,
            queued,
            visitors: Arc::new(Visitors::new(crate::store::cache::VISITOR_ROWS)),
            claiming: connect::Held::new(pool.clone(), pool_size),
            recording: connect::Held::new(pool.clone(), pool_size),
        };
        store.migrate().await?;
        store._listening = Some(
            notify::listen(
                &opts,
                store.pool.clone(),
                store.signals.clone(),
                store.instance.clone(),
                store.visitors.clone(),
            )
            .await?,
        );
        Ok(store)
    }

    /// Commits `tx` with the notifications of what it changed: its stream
    /// entries, its inbox changes, and whether a delivery may be due.
    async fn commit(
        &self,
        tx: Tx<'_>,
        stream: &[StreamEvent],
        api: &[ApiEvent],
        due: bool,
    ) -> StoreResult<()> {
        commit_noting(&self.instance, tx, stream, api, due).await
    }

    /// Commits a script's transaction, then announces what it wrote on
    /// this instance (the others hear it through the notifications).
    async fn commit_announcing(
        &self,
        tx: Tx<'_>,
        announce: script::Announce,
        due: bool,
    ) -> StoreResult<()> {
        self.commit(tx, &announce.stream, &announce.api, due)
            .await?;
        announce.publish(self.signals.as_ref());
        if due {
            self.signals.events_due();
        }
        Ok(())
    }

    /// Says in `tx` that visitor tokens may read otherwise once it commits
    /// (a takeover, a chatbot's change, a purge): every instance empties its
    /// cache of them. Sent whether or not another instance is known to
    /// listen: such changes are rare, and one just started must hear them.
    async fn tokens_changed(&self, tx: &mut Tx<'_>) -> StoreResult<()> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(notify::CHANNEL)
            .bind(notify::tokens(&self.instance))
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        // One migrator at a time across instances.
        sqlx::query("SELECT pg_advisory_xact_lock(7261536)")
            .execute(&mut *tx)
            .await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
            .execute(&mut *tx)
            .await?;
        let version: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM schema_version")
            .fetch_one(&mut *tx)
            .await?;
        let version = version.unwrap_or(0);
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            if (i as i64) >= version {
                sqlx::raw_sql(sql).execute(&mut *tx).await?;
                sqlx::query("INSERT INTO schema_version (version) VALUES ($1)")
                    .bind(i as i64 + 1)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }
}
impl Store for PostgresStore {
    fn shared(&self) -> bool {
        true
    }
    /// A round trip on a connection of the pool.
    fn probe(&self) -> StoreFut<'_, ()> {
        Box::pin(async move {
            sqlx::query("SELECT 1").execute(&self.pool).await?;
            Ok(())
        })
    }
}
