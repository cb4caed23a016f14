//! PostgreSQL store, for several instances sharing one database. Row locks
//! serialise what the SQLite writer thread serialises there: a message row
//! for first-click-wins, a conversation row for the order of its events.
//! Claims use `FOR UPDATE SKIP LOCKED` with leases.

use std::sync::Arc;

use sqlx::postgres::{PgPool, PgRow};
use sqlx::{Postgres, Row, Transaction};

use super::*;
use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::origins::AllowedOrigins;
use crate::hub::{ApiEvent, Hub};

mod attachments;
mod batch;
mod chatbots;
pub mod connect;
mod dashboard;
mod events;
mod inbox;
mod interactions;
mod lifecycle;
mod messages;
pub mod notify;
mod queue;
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
];

pub struct PostgresStore {
    pool: PgPool,
    hub: Arc<Hub>,
    /// Names this instance in its notifications (see [`notify`]).
    instance: notify::Instance,
    _listening: Option<notify::Listening>,
    /// Group commit of clicks and submits (see [`batch`]).
    clicks: batch::Batcher,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        backend(e)
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
    notes.send(&mut tx).await?;
    tx.commit().await.map_err(backend)
}

impl PostgresStore {
    /// Opens a pool of [`connect::DEFAULT_POOL`] connections.
    pub async fn connect(url: &str, hub: Arc<Hub>) -> StoreResult<Self> {
        Self::open(url, hub, connect::DEFAULT_POOL).await
    }

    /// Opens a pool of `pool_size` connections on `url` (TLS as its
    /// `sslmode` says) and brings the schema up to date.
    pub async fn open(url: &str, hub: Arc<Hub>, pool_size: u32) -> StoreResult<Self> {
        let opts = connect::options(url)?;
        let pool = connect::pool(&opts, pool_size).await?;
        let instance = notify::Instance::new();
        let single = batch::single(pool.clone(), instance.clone());
        let clicks = batch::Batcher::new(pool.clone(), instance.clone(), single);
        let mut store = Self {
            pool,
            hub,
            instance,
            _listening: None,
            clicks,
        };
        store.migrate().await?;
        store._listening = Some(
            notify::listen(
                &opts,
                store.pool.clone(),
                store.hub.clone(),
                store.instance.clone(),
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
        announce.publish(&self.hub);
        if due {
            self.hub.new_events.notify_one();
        }
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

    fn meta_get_or_init(&self, key: &str, init: String) -> BoxFut<'_, StoreResult<String>> {
        PostgresStore::meta_get_or_init(self, key, init)
    }

    fn create_chatbot(&self, b: Chatbot, api_key_hash: String) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::create_chatbot(self, b, api_key_hash)
    }

    fn get_chatbot(&self, id: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        PostgresStore::get_chatbot(self, id)
    }

    fn chatbot_by_key(&self, api_key_hash: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        PostgresStore::chatbot_by_key(self, api_key_hash)
    }

    fn update_chatbot(&self, b: Chatbot) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::update_chatbot(self, b)
    }

    fn create_conversation(
        &self,
        conv: Conversation,
        token_hash: String,
    ) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::create_conversation(self, conv, token_hash)
    }

    fn get_conversation(&self, id: &str) -> BoxFut<'_, StoreResult<Conversation>> {
        PostgresStore::get_conversation(self, id)
    }

    fn conversation_by_token(
        &self,
        token_hash: &str,
    ) -> BoxFut<'_, StoreResult<(Conversation, AllowedOrigins)>> {
        PostgresStore::conversation_by_token(self, token_hash)
    }

    fn takeover(
        &self,
        conversation_id: &str,
        member: Person,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::takeover(self, conversation_id, member, now_ms)
    }

    fn insert_message(
        &self,
        msg: Message,
        event: Option<NewEvent>,
        interactions: Vec<NewInteraction>,
    ) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::insert_message(self, msg, event, interactions)
    }

    fn insert_attachment(
        &self,
        a: crate::domain::attachment::Attachment,
    ) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::insert_attachment(self, a)
    }

    fn get_attachment(
        &self,
        id: &str,
    ) -> BoxFut<'_, StoreResult<crate::domain::attachment::Attachment>> {
        PostgresStore::get_attachment(self, id)
    }

    fn delete_attachment(&self, id: &str) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::delete_attachment(self, id)
    }

    fn get_message(&self, id: &str) -> BoxFut<'_, StoreResult<Message>> {
        PostgresStore::get_message(self, id)
    }

    fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<Message>>> {
        PostgresStore::list_messages(self, conversation_id, limit, cursor)
    }

    fn interact(&self, req: InteractRequest) -> BoxFut<'_, StoreResult<Interacted>> {
        PostgresStore::interact(self, req)
    }

    fn get_interaction(&self, chatbot_id: &str, id: &str) -> BoxFut<'_, StoreResult<Interaction>> {
        PostgresStore::get_interaction(self, chatbot_id, id)
    }

    fn list_interactions(
        &self,
        chatbot_id: &str,
        filter: InteractionFilter,
        limit: usize,
        cursor: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<Interaction>>> {
        PostgresStore::list_interactions(self, chatbot_id, filter, limit, cursor, now_ms)
    }

    fn answer_interaction(&self, req: AnswerRequest) -> BoxFut<'_, StoreResult<AnswerOutcome>> {
        PostgresStore::answer_interaction(self, req)
    }

    fn close_interaction(
        &self,
        id: &str,
        status: InteractionStatus,
        reason: &'static str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Interaction>> {
        PostgresStore::close_interaction(self, id, status, reason, now_ms)
    }

    fn reply(&self, req: ReplyRequest) -> BoxFut<'_, StoreResult<ReplyOutcome>> {
        PostgresStore::reply(self, req)
    }

    fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> BoxFut<'_, StoreResult<Vec<StreamEvent>>> {
        PostgresStore::stream_since(self, conversation_id, after_seq, limit)
    }

    fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> BoxFut<'_, StoreResult<StreamEvent>> {
        PostgresStore::append_stream(self, conversation_id, kind, data)
    }

    fn claim_due(
        &self,
        now_ms: i64,
        lease_until: i64,
        limit: usize,
        skip: Vec<String>,
    ) -> BoxFut<'_, StoreResult<Vec<Claimed>>> {
        PostgresStore::claim_due(self, now_ms, lease_until, limit, skip)
    }

    fn record_attempts(&self, records: Vec<AttemptRecord>) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::record_attempts(self, records)
    }

    fn release_leases(&self, event_ids: Option<Vec<String>>) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::release_leases(self, event_ids)
    }

    fn next_due_at(&self) -> BoxFut<'_, StoreResult<Option<i64>>> {
        PostgresStore::next_due_at(self)
    }

    fn list_events(
        &self,
        chatbot_id: &str,
        filter: EventFilter,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<EventSummary>>> {
        PostgresStore::list_events(self, chatbot_id, filter, limit, cursor)
    }

    fn get_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
    ) -> BoxFut<'_, StoreResult<(EventSummary, Vec<AttemptRow>)>> {
        PostgresStore::get_event(self, chatbot_id, event_id)
    }

    fn redeliver(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::redeliver(self, chatbot_id, event_id, now_ms)
    }

    fn redeliver_all(
        &self,
        chatbot_id: &str,
        status: EventStatus,
        since: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<u64>> {
        Box::pin(dashboard::redeliver_all(
            self,
            chatbot_id.to_string(),
            status,
            since,
            now_ms,
        ))
    }

    fn enqueue_event(&self, event: NewEvent) -> BoxFut<'_, StoreResult<()>> {
        PostgresStore::enqueue_event(self, event)
    }

    fn list_chatbots(
        &self,
        limit: usize,
        cursor: Option<String>,
    ) -> BoxFut<'_, StoreResult<Page<Chatbot>>> {
        Box::pin(dashboard::list_chatbots(self, limit, cursor))
    }

    fn erase_conversation(
        &self,
        chatbot_id: &str,
        conversation_id: &str,
    ) -> BoxFut<'_, StoreResult<()>> {
        let (bot, cid) = (chatbot_id.to_string(), conversation_id.to_string());
        Box::pin(async move { self.erase(&bot, &cid).await })
    }

    fn purge_expired(&self, now_ms: i64) -> BoxFut<'_, StoreResult<u64>> {
        Box::pin(self.purge_pass(now_ms))
    }

    fn queue_stats(&self) -> BoxFut<'_, StoreResult<QueueStats>> {
        PostgresStore::queue_stats(self)
    }
}
