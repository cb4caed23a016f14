//! PostgreSQL store, for several instances sharing one database. Row locks
//! serialise what the SQLite writer thread serialises there: a message row
//! for first-click-wins, a conversation row for the order of its events.
//! Claims use `FOR UPDATE SKIP LOCKED` with leases.

use std::sync::Arc;

use sqlx::postgres::{PgPool, PgRow};
use sqlx::{Postgres, Row, Transaction};

use super::*;
use crate::domain::error::Rejection;
use crate::domain::inbox::{Interaction, NewInteraction};
use crate::domain::origins::AllowedOrigins;
use crate::hub::{ApiEvent, Hub};

mod attachments;
mod batch;
pub mod connect;
mod dashboard;
mod inbox;
mod lifecycle;
pub mod notify;

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
    instance: Arc<str>,
    _listening: Option<notify::Listening>,
    /// Group commit of clicks and submits (see [`batch`]).
    clicks: batch::Batcher,
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

type Tx<'a> = Transaction<'a, Postgres>;

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
        let instance: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
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
        mut tx: Tx<'_>,
        stream: &[StreamEvent],
        api: &[ApiEvent],
        due: bool,
    ) -> StoreResult<()> {
        let mut notes = notify::Notes::default();
        for e in stream {
            notes.stream(&self.instance, e);
        }
        for e in api {
            notes.api(&self.instance, e);
        }
        if due {
            notes.due(&self.instance);
        }
        notes.send(&mut tx).await?;
        tx.commit().await.map_err(backend)
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(backend)?;
        // One migrator at a time across instances.
        sqlx::query("SELECT pg_advisory_xact_lock(7261536)")
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        sqlx::query("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        let version: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM schema_version")
            .fetch_one(&mut *tx)
            .await
            .map_err(backend)?;
        let version = version.unwrap_or(0);
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            if (i as i64) >= version {
                sqlx::raw_sql(sql)
                    .execute(&mut *tx)
                    .await
                    .map_err(backend)?;
                sqlx::query("INSERT INTO schema_version (version) VALUES ($1)")
                    .bind(i as i64 + 1)
                    .execute(&mut *tx)
                    .await
                    .map_err(backend)?;
            }
        }
        tx.commit().await.map_err(backend)?;
        Ok(())
    }
}

const CHATBOT_COLS: &str = "id, name, webhook_url, retention_ms, signing_secret, previous_secret, previous_until, endpoint_disabled, member_id, created_at, allowed_origins";

fn chatbot_row(r: &PgRow) -> Result<Chatbot, sqlx::Error> {
    let prev: Option<String> = r.try_get(5)?;
    let until: Option<i64> = r.try_get(6)?;
    Ok(Chatbot {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        webhook_url: r.try_get(2)?,
        retention_ms: r.try_get(3)?,
        signing_secret: r.try_get(4)?,
        previous_secret: prev.zip(until),
        endpoint_disabled: r.try_get::<i64, _>(7)? != 0,
        member_id: r.try_get(8)?,
        created_at: r.try_get(9)?,
        allowed_origins: AllowedOrigins::from_stored(r.try_get::<&str, _>(10)?),
    })
}

const CONV_COLS: &str = "id, chatbot_id, visitor_id, visitor_name, taken_over_by, created_at";

fn conversation_row(r: &PgRow) -> Result<Conversation, sqlx::Error> {
    let taken: Option<String> = r.try_get(4)?;
    Ok(Conversation {
        id: r.try_get(0)?,
        chatbot_id: r.try_get(1)?,
        visitor: Person {
            kind: "visitor".into(),
            id: r.try_get(2)?,
            display_name: r.try_get(3)?,
        },
        taken_over_by: taken.and_then(|t| serde_json::from_str(&t).ok()),
        created_at: r.try_get(5)?,
    })
}

fn parse_message(doc: &str, created_ms: i64) -> StoreResult<Message> {
    let mut m: Message = serde_json::from_str(doc).map_err(backend)?;
    m.created_ms = created_ms;
    Ok(m)
}

fn message_json(m: &Message) -> String {
    serde_json::to_string(m).unwrap_or_default()
}

async fn load_message_for_update(tx: &mut Tx<'_>, id: &str) -> StoreResult<Message> {
    let row = sqlx::query(
        "SELECT doc, created_at FROM messages WHERE id = $1 AND deleted = 0 FOR UPDATE",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await
    .map_err(backend)?
    .ok_or(StoreError::NotFound)?;
    parse_message(
        &row.try_get::<String, _>(0).map_err(backend)?,
        row.try_get(1).map_err(backend)?,
    )
}

async fn save_message(tx: &mut Tx<'_>, m: &Message) -> StoreResult<()> {
    sqlx::query("UPDATE messages SET doc = $2 WHERE id = $1")
        .bind(&m.id)
        .bind(message_json(m))
        .execute(&mut **tx)
        .await
        .map_err(backend)?;
    Ok(())
}

async fn insert_message(tx: &mut Tx<'_>, m: &Message) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO messages (id, conversation_id, doc, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(&m.id)
    .bind(&m.conversation_id)
    .bind(message_json(m))
    .bind(m.created_ms)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(())
}

async fn append_stream(
    tx: &mut Tx<'_>,
    conversation_id: &str,
    kind: &str,
    data: String,
) -> StoreResult<StreamEvent> {
    // One writer per conversation at a time, so its entries commit in the
    // order of their sequence numbers: a stream reading past the last one it
    // sent never skips one committed later with a smaller number.
    lock_conversation(tx, conversation_id).await?;
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO stream_events (conversation_id, kind, data) VALUES ($1, $2, $3) RETURNING seq",
    )
    .bind(conversation_id)
    .bind(kind)
    .bind(&data)
    .fetch_one(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(StreamEvent {
        seq,
        conversation_id: conversation_id.to_string(),
        kind: kind.to_string(),
        data,
    })
}

/// Serialises the event queue of one conversation across instances; false
/// when the conversation is gone (erased or purged).
async fn lock_conversation(tx: &mut Tx<'_>, conversation_id: &str) -> StoreResult<bool> {
    let row = sqlx::query("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE")
        .bind(conversation_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(backend)?;
    Ok(row.is_some())
}

async fn insert_event(tx: &mut Tx<'_>, e: &NewEvent) -> StoreResult<()> {
    if !lock_conversation(tx, &e.conversation_id).await? {
        return Err(StoreError::NotFound);
    }
    sqlx::query(
        "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head)
         VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $6,
                 CASE WHEN EXISTS (SELECT 1 FROM events WHERE conversation_id = $3 AND status IN ('pending', 'failed')) THEN 0 ELSE 1 END)",
    )
    .bind(&e.id)
    .bind(&e.chatbot_id)
    .bind(&e.conversation_id)
    .bind(e.event_type)
    .bind(&e.payload)
    .bind(e.created_at)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(())
}

async fn promote_next(tx: &mut Tx<'_>, conversation_id: &str) -> StoreResult<()> {
    sqlx::query(
        "UPDATE events SET is_head = 1 WHERE seq = (
            SELECT min(seq) FROM events WHERE conversation_id = $1 AND status IN ('pending', 'failed'))
         AND is_head = 0",
    )
    .bind(conversation_id)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(())
}

/// An attempt's effect on its event: status, next attempt time, and whether
/// the event stays its conversation's head.
fn attempt_outcome(rec: &AttemptRecord) -> (&'static str, i64, bool) {
    match rec.next {
        AttemptNext::Succeeded => ("succeeded", 0, false),
        AttemptNext::Dead => ("dead", 0, false),
        AttemptNext::RetryAt(t) => ("failed", t, true),
        AttemptNext::EndpointGone => ("failed", rec.at_ms, true),
    }
}

/// Records one attempt; true when its conversation's next event may have
/// become the head.
async fn record_one(tx: &mut Tx<'_>, rec: &AttemptRecord) -> StoreResult<bool> {
    // Not for an event erased with its conversation while on the wire.
    sqlx::query(
        "INSERT INTO attempts (event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM events WHERE id = $1)
         ON CONFLICT (event_id, number) DO UPDATE SET at = EXCLUDED.at, status_code = EXCLUDED.status_code,
           duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error, response_excerpt = EXCLUDED.response_excerpt,
           request_headers = EXCLUDED.request_headers",
    )
    .bind(&rec.event_id)
    .bind(rec.number as i64)
    .bind(rec.at_ms)
    .bind(rec.status_code.map(i64::from))
    .bind(rec.duration_ms)
    .bind(&rec.error)
    .bind(&rec.response_excerpt)
    .bind(&rec.request_headers)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    let (status, next, is_head) = attempt_outcome(rec);
    if !is_head {
        lock_conversation(tx, &rec.conversation_id).await?;
    }
    sqlx::query(
        "UPDATE events SET status = $2, attempts = GREATEST(attempts, $3), next_attempt_at = $4,
         is_head = $5, leased_until = 0 WHERE id = $1",
    )
    .bind(&rec.event_id)
    .bind(status)
    .bind(rec.number as i64)
    .bind(next)
    .bind(is_head as i64)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    if rec.next == AttemptNext::EndpointGone {
        sqlx::query("UPDATE chatbots SET endpoint_disabled = 1 WHERE id = (SELECT chatbot_id FROM events WHERE id = $1)")
            .bind(&rec.event_id)
            .execute(&mut **tx)
            .await
            .map_err(backend)?;
    }
    if !is_head {
        promote_next(tx, &rec.conversation_id).await?;
    }
    Ok(!is_head)
}

/// Whether a batch of records can be written set-wise: each event once
/// (one statement cannot update a row twice) and no endpoint to disable.
fn settable(records: &[AttemptRecord]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(records.len());
    records.len() > 1
        && records
            .iter()
            .all(|r| r.next != AttemptNext::EndpointGone && seen.insert(r.event_id.as_str()))
}

/// Records a batch in four statements whatever its size (one per record
/// and step measured as most of PostgreSQL's CPU per delivery): the
/// conversations whose event ends are locked in one order, the attempts
/// inserted, the events updated, and each such conversation's next event
/// promoted to head. Same effect as [`record_one`] for each record.
async fn record_set(tx: &mut Tx<'_>, records: &[AttemptRecord]) -> StoreResult<bool> {
    let n = records.len();
    let mut headers = Vec::with_capacity(n);
    let (mut ids, mut numbers, mut ats, mut codes, mut durations, mut errors, mut excerpts) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut statuses, mut nexts, mut heads) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut ended: Vec<&str> = Vec::new();
    for rec in records {
        ids.push(rec.event_id.as_str());
        numbers.push(rec.number as i64);
        ats.push(rec.at_ms);
        codes.push(rec.status_code.map(i64::from));
        durations.push(rec.duration_ms);
        errors.push(rec.error.as_deref());
        excerpts.push(rec.response_excerpt.as_deref());
        headers.push(rec.request_headers.as_deref());
        let (status, next, is_head) = attempt_outcome(rec);
        statuses.push(status);
        nexts.push(next);
        heads.push(is_head as i64);
        if !is_head {
            ended.push(rec.conversation_id.as_str());
        }
    }
    ended.sort_unstable();
    ended.dedup();
    if !ended.is_empty() {
        sqlx::query("SELECT 1 FROM conversations WHERE id = ANY($1) ORDER BY id FOR UPDATE")
            .bind(&ended)
            .execute(&mut **tx)
            .await
            .map_err(backend)?;
    }
    sqlx::query(
        "INSERT INTO attempts (event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
         SELECT u.* FROM UNNEST($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[])
           AS u(event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
         WHERE EXISTS (SELECT 1 FROM events e WHERE e.id = u.event_id)
         ON CONFLICT (event_id, number) DO UPDATE SET at = EXCLUDED.at, status_code = EXCLUDED.status_code,
           duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error, response_excerpt = EXCLUDED.response_excerpt,
           request_headers = EXCLUDED.request_headers",
    )
    .bind(&ids)
    .bind(&numbers)
    .bind(&ats)
    .bind(&codes)
    .bind(&durations)
    .bind(&errors)
    .bind(&excerpts)
    .bind(&headers)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    sqlx::query(
        "UPDATE events e SET status = u.status, attempts = GREATEST(e.attempts, u.number),
           next_attempt_at = u.next, is_head = u.is_head, leased_until = 0
         FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(id, status, number, next, is_head)
         WHERE e.id = u.id",
    )
    .bind(&ids)
    .bind(&statuses)
    .bind(&numbers)
    .bind(&nexts)
    .bind(&heads)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    if ended.is_empty() {
        return Ok(false);
    }
    sqlx::query(
        "UPDATE events SET is_head = 1 WHERE seq IN (
            SELECT min(seq) FROM events WHERE conversation_id = ANY($1) AND status IN ('pending', 'failed')
            GROUP BY conversation_id)
         AND is_head = 0",
    )
    .bind(&ended)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(true)
}

fn summary_row(r: &PgRow) -> Result<EventSummary, sqlx::Error> {
    let status: String = r.try_get(4)?;
    let next: i64 = r.try_get(6)?;
    let active = status == "pending" || status == "failed";
    Ok(EventSummary {
        event_id: r.try_get(0)?,
        event_type: r.try_get(1)?,
        created_at: r.try_get(2)?,
        payload: bytes::Bytes::from(r.try_get::<Vec<u8>, _>(3)?),
        status,
        attempts: r.try_get::<i64, _>(5)? as u32,
        next_attempt_at: active.then_some(next),
    })
}

fn page_of<T>(mut rows: Vec<(T, i64)>, limit: usize) -> Page<T> {
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|(_, s)| s.to_string())
    } else {
        None
    };
    Page {
        data: rows.into_iter().map(|(x, _)| x).collect(),
        next_cursor,
    }
}

impl Store for PostgresStore {
    fn shared(&self) -> bool {
        true
    }

    fn meta_get_or_init(&self, key: &str, init: String) -> BoxFut<'_, StoreResult<String>> {
        let key = key.to_string();
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            )
            .bind(&key)
            .bind(&init)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            sqlx::query_scalar("SELECT value FROM meta WHERE key = $1")
                .bind(&key)
                .fetch_one(&self.pool)
                .await
                .map_err(backend)
        })
    }

    fn create_chatbot(&self, b: Chatbot, api_key_hash: String) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO chatbots (id, name, webhook_url, retention_ms, api_key_hash, signing_secret, member_id, created_at, allowed_origins)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(&b.id)
            .bind(&b.name)
            .bind(&b.webhook_url)
            .bind(b.retention_ms)
            .bind(&api_key_hash)
            .bind(&b.signing_secret)
            .bind(&b.member_id)
            .bind(b.created_at)
            .bind(b.allowed_origins.to_stored())
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            Ok(())
        })
    }

    fn get_chatbot(&self, id: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        let id = id.to_string();
        Box::pin(async move {
            let q = format!("SELECT {CHATBOT_COLS} FROM chatbots WHERE id = $1");
            let row = sqlx::query(&q)
                .bind(&id)
                .fetch_optional(&self.pool)
                .await
                .map_err(backend)?;
            row.map(|r| chatbot_row(&r).map_err(backend))
                .transpose()?
                .ok_or(StoreError::NotFound)
        })
    }

    fn chatbot_by_key(&self, api_key_hash: &str) -> BoxFut<'_, StoreResult<Chatbot>> {
        let h = api_key_hash.to_string();
        Box::pin(async move {
            let q = format!("SELECT {CHATBOT_COLS} FROM chatbots WHERE api_key_hash = $1");
            let row = sqlx::query(&q)
                .bind(&h)
                .fetch_optional(&self.pool)
                .await
                .map_err(backend)?;
            row.map(|r| chatbot_row(&r).map_err(backend))
                .transpose()?
                .ok_or(StoreError::NotFound)
        })
    }

    fn update_chatbot(&self, b: Chatbot) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            let (prev, until) = match &b.previous_secret {
                Some((s, u)) => (Some(s.clone()), Some(*u)),
                None => (None, None),
            };
            let n = sqlx::query(
                "UPDATE chatbots SET name = $2, webhook_url = $3, retention_ms = $4, signing_secret = $5,
                 previous_secret = $6, previous_until = $7, endpoint_disabled = $8, allowed_origins = $9 WHERE id = $1",
            )
            .bind(&b.id)
            .bind(&b.name)
            .bind(&b.webhook_url)
            .bind(b.retention_ms)
            .bind(&b.signing_secret)
            .bind(prev)
            .bind(until)
            .bind(b.endpoint_disabled as i64)
            .bind(b.allowed_origins.to_stored())
            .execute(&self.pool)
            .await
            .map_err(backend)?
            .rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            if !b.endpoint_disabled {
                self.hub.new_events.notify_one();
                let mut notes = notify::Notes::default();
                notes.due(&self.instance);
                let mut tx = self.pool.begin().await.map_err(backend)?;
                notes.send(&mut tx).await?;
                tx.commit().await.map_err(backend)?;
            }
            Ok(())
        })
    }

    fn create_conversation(
        &self,
        conv: Conversation,
        token_hash: String,
    ) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO conversations (id, chatbot_id, visitor_id, visitor_name, token_hash, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&conv.id)
            .bind(&conv.chatbot_id)
            .bind(&conv.visitor.id)
            .bind(&conv.visitor.display_name)
            .bind(&token_hash)
            .bind(conv.created_at)
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            Ok(())
        })
    }

    fn get_conversation(&self, id: &str) -> BoxFut<'_, StoreResult<Conversation>> {
        let id = id.to_string();
        Box::pin(async move {
            let q = format!("SELECT {CONV_COLS} FROM conversations WHERE id = $1");
            let row = sqlx::query(&q)
                .bind(&id)
                .fetch_optional(&self.pool)
                .await
                .map_err(backend)?;
            row.map(|r| conversation_row(&r).map_err(backend))
                .transpose()?
                .ok_or(StoreError::NotFound)
        })
    }

    fn conversation_by_token(
        &self,
        token_hash: &str,
    ) -> BoxFut<'_, StoreResult<(Conversation, AllowedOrigins)>> {
        let h = token_hash.to_string();
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at, b.allowed_origins
                 FROM conversations c JOIN chatbots b ON b.id = c.chatbot_id WHERE c.token_hash = $1",
            )
            .bind(&h)
            .fetch_optional(&self.pool)
            .await
            .map_err(backend)?;
            let Some(r) = row else {
                return Err(StoreError::NotFound);
            };
            let conv = conversation_row(&r).map_err(backend)?;
            let origins = AllowedOrigins::from_stored(r.try_get::<&str, _>(6).map_err(backend)?);
            Ok((conv, origins))
        })
    }

    fn takeover(
        &self,
        conversation_id: &str,
        member: Person,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        let cid = conversation_id.to_string();
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            // Lock order everywhere: messages, then the conversation.
            sqlx::query("SELECT 1 FROM messages WHERE conversation_id = $1 AND deleted = 0 ORDER BY seq FOR UPDATE")
                .bind(&cid)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            let member = serde_json::to_string(&member).map_err(backend)?;
            let n = sqlx::query("UPDATE conversations SET taken_over_by = $2 WHERE id = $1")
                .bind(&cid)
                .bind(&member)
                .execute(&mut *tx)
                .await
                .map_err(backend)?
                .rows_affected();
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            let pending: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM interactions WHERE conversation_id = $1 AND status = 'pending'",
            )
            .bind(&cid)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend)?;
            let mut out = Vec::new();
            let mut api = Vec::new();
            for id in pending {
                let (_, st, a) =
                    inbox::close(&mut tx, &id, "cancelled", "takeover", now_ms).await?;
                out.extend(st);
                api.extend(a);
            }
            let rows = sqlx::query("SELECT doc, created_at FROM messages WHERE conversation_id = $1 AND deleted = 0 FOR UPDATE")
                .bind(&cid)
                .fetch_all(&mut *tx)
                .await
                .map_err(backend)?;
            for r in rows {
                let mut m = parse_message(
                    &r.try_get::<String, _>(0).map_err(backend)?,
                    r.try_get(1).map_err(backend)?,
                )?;
                if m.take_over(now_ms) {
                    save_message(&mut tx, &m).await?;
                    out.push(
                        append_stream(&mut tx, &cid, "message.updated", message_json(&m)).await?,
                    );
                }
            }
            self.commit(tx, &out, &api, false).await?;
            self.hub.publish(out);
            self.hub.publish_api(api);
            Ok(())
        })
    }

    fn insert_message(
        &self,
        msg: Message,
        event: Option<NewEvent>,
        interactions: Vec<NewInteraction>,
    ) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            insert_message(&mut tx, &msg).await?;
            if let Some(e) = &event {
                insert_event(&mut tx, e).await?;
            }
            let mut api = Vec::new();
            for i in &interactions {
                inbox::insert(&mut tx, i, msg.created_ms).await?;
                let stored = inbox::by_id(&mut tx, &i.id).await?;
                api.push(ApiEvent {
                    chatbot_id: i.chatbot_id.clone(),
                    interaction_id: i.id.clone(),
                    kind: "interaction.created",
                    data: stored.to_json(msg.created_ms),
                });
            }
            let entry = append_stream(
                &mut tx,
                &msg.conversation_id,
                "message.created",
                message_json(&msg),
            )
            .await?;
            self.commit(tx, std::slice::from_ref(&entry), &api, event.is_some())
                .await?;
            self.hub.publish(vec![entry]);
            self.hub.publish_api(api);
            if event.is_some() {
                self.hub.new_events.notify_one();
            }
            Ok(())
        })
    }

    fn insert_attachment(
        &self,
        a: crate::domain::attachment::Attachment,
    ) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(attachments::insert(&self.pool, a))
    }

    fn get_attachment(
        &self,
        id: &str,
    ) -> BoxFut<'_, StoreResult<crate::domain::attachment::Attachment>> {
        let id = id.to_string();
        Box::pin(async move { attachments::get(&self.pool, &id).await })
    }

    fn delete_attachment(&self, id: &str) -> BoxFut<'_, StoreResult<()>> {
        let id = id.to_string();
        Box::pin(async move { attachments::delete(&self.pool, &id).await })
    }

    fn get_message(&self, id: &str) -> BoxFut<'_, StoreResult<Message>> {
        let id = id.to_string();
        Box::pin(async move {
            let row =
                sqlx::query("SELECT doc, created_at FROM messages WHERE id = $1 AND deleted = 0")
                    .bind(&id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(backend)?
                    .ok_or(StoreError::NotFound)?;
            parse_message(
                &row.try_get::<String, _>(0).map_err(backend)?,
                row.try_get(1).map_err(backend)?,
            )
        })
    }

    fn list_messages(
        &self,
        conversation_id: &str,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<Message>>> {
        let cid = conversation_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT doc, created_at, seq FROM messages WHERE conversation_id = $1 AND deleted = 0 AND seq < $2
                 ORDER BY seq DESC LIMIT $3",
            )
            .bind(&cid)
            .bind(cursor.unwrap_or(i64::MAX))
            .bind(limit as i64 + 1)
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let m = parse_message(
                    &r.try_get::<String, _>(0).map_err(backend)?,
                    r.try_get(1).map_err(backend)?,
                )?;
                out.push((m, r.try_get::<i64, _>(2).map_err(backend)?));
            }
            Ok(page_of(out, limit))
        })
    }

    fn interact(&self, req: InteractRequest) -> BoxFut<'_, StoreResult<Interacted>> {
        Box::pin(async move {
            let done = self.clicks.interact(req).await?;
            self.hub.publish(done.stream);
            self.hub.publish_api(done.api);
            self.hub.new_events.notify_one();
            Ok(done.out)
        })
    }

    fn get_interaction(&self, chatbot_id: &str, id: &str) -> BoxFut<'_, StoreResult<Interaction>> {
        let (bid, id) = (chatbot_id.to_string(), id.to_string());
        Box::pin(async move {
            let r = sqlx::query(&format!(
                "SELECT {} FROM interactions WHERE id = $1 AND chatbot_id = $2",
                inbox::COLS
            ))
            .bind(&id)
            .bind(&bid)
            .fetch_optional(&self.pool)
            .await
            .map_err(backend)?
            .ok_or(StoreError::NotFound)?;
            inbox::row(&r).map_err(backend)
        })
    }

    fn list_interactions(
        &self,
        chatbot_id: &str,
        filter: InteractionFilter,
        limit: usize,
        cursor: Option<i64>,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<Page<Interaction>>> {
        let bid = chatbot_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(&format!(
                "SELECT {}, seq FROM interactions
                 WHERE chatbot_id = $1 AND seq < $2 AND ($3::text IS NULL OR conversation_id = $3)
                   AND ($4::text IS NULL
                        OR ($4 = 'pending' AND status = 'pending' AND (expires_at IS NULL OR expires_at > $5))
                        OR ($4 = 'expired' AND (status = 'expired' OR (status = 'pending' AND expires_at <= $5)))
                        OR ($4 NOT IN ('pending', 'expired') AND status = $4))
                 ORDER BY seq DESC LIMIT $6",
                inbox::COLS
            ))
            .bind(&bid)
            .bind(cursor.unwrap_or(i64::MAX))
            .bind(&filter.conversation_id)
            .bind(&filter.status)
            .bind(now_ms)
            .bind(limit as i64 + 1)
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            let out = rows
                .iter()
                .map(|r| Ok((inbox::row(r)?, r.try_get::<i64, _>(14)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(backend)?;
            Ok(page_of(out, limit))
        })
    }

    fn answer_interaction(&self, req: AnswerRequest) -> BoxFut<'_, StoreResult<AnswerOutcome>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            let i = inbox::by_id(&mut tx, &req.interaction_id).await?;
            if i.chatbot_id != req.chatbot_id {
                return Err(StoreError::NotFound);
            }
            let prior = sqlx::query("SELECT body_hash, result FROM interaction_idempotency WHERE interaction_id = $1 AND key = $2")
                .bind(&req.interaction_id)
                .bind(&req.idempotency_key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
            if let Some(r) = prior {
                let hash: String = r.try_get(0).map_err(backend)?;
                if hash != req.body_hash {
                    return Err(StoreError::Rejected(Rejection::IdempotencyConflict));
                }
                let result: String = r.try_get(1).map_err(backend)?;
                return Ok(AnswerOutcome::Repeated(
                    serde_json::from_str(&result).map_err(backend)?,
                ));
            }
            if i.status_at(req.now_ms) != "pending" {
                return Err(StoreError::Rejected(Rejection::NotPending));
            }
            let msg = load_message_for_update(&mut tx, &i.message_id).await?;
            let action =
                crate::domain::inbox::action_from_answer(&i.kind, &i.spec, &msg, &req.body)?;
            let fx = inbox::apply(
                &mut tx,
                msg,
                &action,
                &req.user,
                &req.event_id,
                &req.response_url,
                req.now_ms,
                req.interactive_window_ms,
                Some(&req.body),
            )
            .await?;
            let Some(answered) = fx.answered else {
                return Err(StoreError::Rejected(Rejection::NotPending));
            };
            sqlx::query("INSERT INTO interaction_idempotency (interaction_id, key, body_hash, result) VALUES ($1, $2, $3, $4)")
                .bind(&req.interaction_id)
                .bind(&req.idempotency_key)
                .bind(&req.body_hash)
                .bind(answered.to_json(req.now_ms).to_string())
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            self.commit(tx, &fx.stream, &fx.api, true).await?;
            self.hub.publish(fx.stream);
            self.hub.publish_api(fx.api);
            self.hub.new_events.notify_one();
            Ok(AnswerOutcome::Answered(Box::new(answered)))
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
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            let (i, stream, api) = inbox::close(&mut tx, &id, status, reason, now_ms).await?;
            self.commit(tx, &stream, &api, false).await?;
            self.hub.publish(stream);
            self.hub.publish_api(api);
            Ok(i)
        })
    }

    fn reply(&self, req: ReplyRequest) -> BoxFut<'_, StoreResult<ReplyOutcome>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            // Serialise uses of one response_url.
            sqlx::query("INSERT INTO response_uses (event_id, uses) VALUES ($1, 0) ON CONFLICT (event_id) DO NOTHING")
                .bind(&req.event_id)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            let uses: i64 =
                sqlx::query_scalar("SELECT uses FROM response_uses WHERE event_id = $1 FOR UPDATE")
                    .bind(&req.event_id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(backend)?;
            if let Some(key) = &req.idempotency_key {
                let prior: Option<String> = sqlx::query_scalar(
                    "SELECT result FROM response_idempotency WHERE event_id = $1 AND key = $2",
                )
                .bind(&req.event_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
                if let Some(p) = prior {
                    return super::repeated_reply(&p, &req.body_hash);
                }
            }
            if uses >= req.max_uses as i64 {
                return Ok(ReplyOutcome::UsedUp);
            }
            let now = crate::domain::time::rfc3339(req.now_ms);
            let mut entries = Vec::new();
            let api;
            let result_msg = match req.reply {
                Reply::Replace {
                    text,
                    blocks,
                    metadata,
                    typing_on_interaction,
                } => {
                    let mut m = load_message_for_update(&mut tx, &req.message_id).await?;
                    m.text = text;
                    m.blocks = blocks;
                    if let Some(md) = metadata {
                        m.metadata = md;
                    }
                    if let Some(t) = typing_on_interaction {
                        m.typing_on_interaction = t;
                    }
                    m.updated_at = now;
                    save_message(&mut tx, &m).await?;
                    api = inbox::after_reply(
                        &mut tx,
                        &m,
                        false,
                        req.interactive_window_ms,
                        req.now_ms,
                    )
                    .await?;
                    entries.push(
                        append_stream(
                            &mut tx,
                            &m.conversation_id,
                            "message.updated",
                            message_json(&m),
                        )
                        .await?,
                    );
                    m
                }
                Reply::Post(m) => {
                    insert_message(&mut tx, &m).await?;
                    api = inbox::after_reply(
                        &mut tx,
                        &m,
                        false,
                        req.interactive_window_ms,
                        req.now_ms,
                    )
                    .await?;
                    entries.push(
                        append_stream(
                            &mut tx,
                            &m.conversation_id,
                            "message.created",
                            message_json(&m),
                        )
                        .await?,
                    );
                    m
                }
                Reply::Delete => {
                    let m = load_message_for_update(&mut tx, &req.message_id).await?;
                    sqlx::query("UPDATE messages SET deleted = 1 WHERE id = $1")
                        .bind(&m.id)
                        .execute(&mut *tx)
                        .await
                        .map_err(backend)?;
                    api = inbox::after_reply(
                        &mut tx,
                        &m,
                        true,
                        req.interactive_window_ms,
                        req.now_ms,
                    )
                    .await?;
                    let data = serde_json::json!({"message_id": m.id}).to_string();
                    entries.push(
                        append_stream(&mut tx, &m.conversation_id, "message.deleted", data).await?,
                    );
                    m
                }
            };
            sqlx::query("UPDATE response_uses SET uses = uses + 1 WHERE event_id = $1")
                .bind(&req.event_id)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            let result = serde_json::json!({ "message": result_msg });
            if let Some(key) = &req.idempotency_key {
                sqlx::query(
                    "INSERT INTO response_idempotency (event_id, key, result) VALUES ($1, $2, $3)",
                )
                .bind(&req.event_id)
                .bind(key)
                .bind(super::reply_record(&result, &req.body_hash))
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            }
            self.commit(tx, &entries, &api, false).await?;
            self.hub.publish(entries);
            self.hub.publish_api(api);
            Ok(ReplyOutcome::Applied(result))
        })
    }

    fn stream_since(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: usize,
    ) -> BoxFut<'_, StoreResult<Vec<StreamEvent>>> {
        let cid = conversation_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT seq, conversation_id, kind, data FROM stream_events WHERE conversation_id = $1 AND seq > $2
                 ORDER BY seq LIMIT $3",
            )
            .bind(&cid)
            .bind(after_seq)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            rows.iter()
                .map(|r| {
                    Ok(StreamEvent {
                        seq: r.try_get(0).map_err(backend)?,
                        conversation_id: r.try_get(1).map_err(backend)?,
                        kind: r.try_get(2).map_err(backend)?,
                        data: r.try_get(3).map_err(backend)?,
                    })
                })
                .collect()
        })
    }

    fn append_stream(
        &self,
        conversation_id: &str,
        kind: &str,
        data: String,
    ) -> BoxFut<'_, StoreResult<StreamEvent>> {
        let (cid, kind) = (conversation_id.to_string(), kind.to_string());
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            let e = append_stream(&mut tx, &cid, &kind, data).await?;
            self.commit(tx, std::slice::from_ref(&e), &[], false)
                .await?;
            self.hub.publish(vec![e.clone()]);
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
        Box::pin(async move {
            let rows = sqlx::query(
                "UPDATE events SET leased_until = $2 WHERE seq IN (
                    SELECT e.seq FROM events e
                    WHERE e.is_head = 1 AND e.status IN ('pending', 'failed')
                      AND e.next_attempt_at <= $1 AND e.leased_until <= $1
                      AND NOT (e.chatbot_id = ANY($3))
                      AND e.chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                    ORDER BY e.next_attempt_at, e.seq LIMIT $4
                    FOR UPDATE SKIP LOCKED)
                 RETURNING seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base",
            )
            .bind(now_ms)
            .bind(lease_until)
            .bind(&skip)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            let mut out = rows
                .iter()
                .map(|r| {
                    Ok(Claimed {
                        seq: r.try_get(0)?,
                        event_id: r.try_get(1)?,
                        chatbot_id: r.try_get(2)?,
                        conversation_id: r.try_get(3)?,
                        payload: bytes::Bytes::from(r.try_get::<Vec<u8>, _>(4)?),
                        attempts: r.try_get::<i64, _>(5)? as u32,
                        attempt_base: r.try_get::<i64, _>(6)? as u32,
                        bot: None,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(backend)?;
            out.sort_by_key(|c| c.seq);
            Ok(out)
        })
    }

    fn record_attempts(&self, records: Vec<AttemptRecord>) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            let promoted = if settable(&records) {
                record_set(&mut tx, &records).await?
            } else {
                let mut promoted = false;
                for rec in &records {
                    promoted |= record_one(&mut tx, rec).await?;
                }
                promoted
            };
            self.commit(tx, &[], &[], promoted).await?;
            if promoted {
                self.hub.new_events.notify_one();
            }
            Ok(())
        })
    }

    fn release_leases(&self, event_ids: Option<Vec<String>>) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            match event_ids {
                // Several instances may share this database: only expired
                // leases are everyone's to release.
                None => sqlx::query("UPDATE events SET leased_until = 0 WHERE leased_until > 0 AND leased_until < $1")
                    .bind(crate::domain::time::now_ms())
                    .execute(&self.pool)
                    .await,
                Some(ids) => sqlx::query("UPDATE events SET leased_until = 0 WHERE id = ANY($1)")
                    .bind(&ids)
                    .execute(&self.pool)
                    .await,
            }
            .map_err(backend)?;
            Ok(())
        })
    }

    fn next_due_at(&self) -> BoxFut<'_, StoreResult<Option<i64>>> {
        Box::pin(async move {
            sqlx::query_scalar(
                "SELECT min(GREATEST(next_attempt_at, leased_until)) FROM events WHERE is_head = 1 AND status IN ('pending', 'failed')
                 AND chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)",
            )
            .fetch_one(&self.pool)
            .await
            .map_err(backend)
        })
    }

    fn list_events(
        &self,
        chatbot_id: &str,
        filter: EventFilter,
        limit: usize,
        cursor: Option<i64>,
    ) -> BoxFut<'_, StoreResult<Page<EventSummary>>> {
        let bid = chatbot_id.to_string();
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, type, created_at, payload, status, attempts, next_attempt_at, seq FROM events
                 WHERE chatbot_id = $1 AND ($2::text IS NULL OR status = $2) AND ($5::text IS NULL OR type = $5)
                   AND ($6::text IS NULL OR id = $6) AND seq < $3 ORDER BY seq DESC LIMIT $4",
            )
            .bind(&bid)
            .bind(&filter.status)
            .bind(cursor.unwrap_or(i64::MAX))
            .bind(limit as i64 + 1)
            .bind(&filter.event_type)
            .bind(&filter.event_id)
            .fetch_all(&self.pool)
            .await
            .map_err(backend)?;
            let out = rows
                .iter()
                .map(|r| Ok((summary_row(r)?, r.try_get::<i64, _>(7)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(backend)?;
            Ok(page_of(out, limit))
        })
    }

    fn get_event(
        &self,
        chatbot_id: &str,
        event_id: &str,
    ) -> BoxFut<'_, StoreResult<(EventSummary, Vec<AttemptRow>)>> {
        let (bid, eid) = (chatbot_id.to_string(), event_id.to_string());
        Box::pin(async move {
            // One snapshot: the event's status and its attempts are written
            // by one commit and read together.
            let mut tx = self.pool.begin().await.map_err(backend)?;
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            let row = sqlx::query(
                "SELECT id, type, created_at, payload, status, attempts, next_attempt_at FROM events
                 WHERE id = $1 AND chatbot_id = $2",
            )
            .bind(&eid)
            .bind(&bid)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?
            .ok_or(StoreError::NotFound)?;
            let ev = summary_row(&row).map_err(backend)?;
            let rows = sqlx::query(
                "SELECT number, at, status_code, duration_ms, error, response_excerpt, request_headers FROM attempts
                 WHERE event_id = $1 ORDER BY number",
            )
            .bind(&eid)
            .fetch_all(&mut *tx)
            .await
            .map_err(backend)?;
            tx.commit().await.map_err(backend)?;
            let attempts = rows
                .iter()
                .map(|r| {
                    Ok(AttemptRow {
                        number: r.try_get::<i64, _>(0)? as u32,
                        at: r.try_get(1)?,
                        status_code: r.try_get::<Option<i64>, _>(2)?.map(|c| c as u16),
                        duration_ms: r.try_get(3)?,
                        error: r.try_get(4)?,
                        response_excerpt: r.try_get(5)?,
                        request_headers: r.try_get(6)?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()
                .map_err(backend)?;
            Ok((ev, attempts))
        })
    }

    fn redeliver(
        &self,
        chatbot_id: &str,
        event_id: &str,
        now_ms: i64,
    ) -> BoxFut<'_, StoreResult<()>> {
        let (bid, eid) = (chatbot_id.to_string(), event_id.to_string());
        Box::pin(async move {
            let mut tx = self.pool.begin().await.map_err(backend)?;
            let row = sqlx::query(
                "SELECT status, conversation_id FROM events WHERE id = $1 AND chatbot_id = $2",
            )
            .bind(&eid)
            .bind(&bid)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?
            .ok_or(StoreError::NotFound)?;
            let status: String = row.try_get(0).map_err(backend)?;
            let conv: String = row.try_get(1).map_err(backend)?;
            lock_conversation(&mut tx, &conv).await?;
            if status == "pending" || status == "failed" {
                sqlx::query("UPDATE events SET next_attempt_at = $2 WHERE id = $1")
                    .bind(&eid)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(backend)?;
            } else {
                sqlx::query(
                    "UPDATE events SET status = 'pending', next_attempt_at = $2, leased_until = 0, attempt_base = attempts,
                     is_head = CASE WHEN EXISTS (SELECT 1 FROM events WHERE conversation_id = $3 AND status IN ('pending', 'failed')) THEN 0 ELSE 1 END
                     WHERE id = $1",
                )
                .bind(&eid)
                .bind(now_ms)
                .bind(&conv)
                .execute(&mut *tx)
                .await
                .map_err(backend)?;
            }
            self.commit(tx, &[], &[], true).await?;
            self.hub.new_events.notify_one();
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
        Box::pin(dashboard::redeliver_all(
            self,
            chatbot_id.to_string(),
            status,
            since,
            now_ms,
        ))
    }

    fn enqueue_event(&self, event: NewEvent) -> BoxFut<'_, StoreResult<()>> {
        Box::pin(async move {
            // An event of its own lane (`webhook.test`): no conversation row
            // to lock, and it heads its lane at once.
            let mut tx = self.pool.begin().await.map_err(backend)?;
            sqlx::query(
                "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head)
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $6, 1)",
            )
            .bind(&event.id)
            .bind(&event.chatbot_id)
            .bind(&event.conversation_id)
            .bind(event.event_type)
            .bind(&event.payload)
            .bind(event.created_at)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
            let mut notes = notify::Notes::default();
            notes.due(&self.instance);
            notes.send(&mut tx).await?;
            tx.commit().await.map_err(backend)?;
            self.hub.new_events.notify_one();
            Ok(())
        })
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
        Box::pin(async move {
            let row = sqlx::query("SELECT count(*), min(created_at) FROM events WHERE status IN ('pending', 'failed')")
                .fetch_one(&self.pool)
                .await
                .map_err(backend)?;
            Ok(QueueStats {
                pending: row.try_get(0).map_err(backend)?,
                oldest_pending_created_at: row.try_get(1).map_err(backend)?,
            })
        })
    }
}
