//! Row mapping, and the message rows a transaction locks, saves and inserts.

use super::*;
use crate::domain::status::EventStatus;

pub(super) const CHATBOT_COLS: &str = "id, name, webhook_url, retention_ms, signing_secret, previous_secret, previous_until, endpoint_disabled, member_id, created_at, allowed_origins";

pub(super) fn chatbot_row(r: &PgRow) -> Result<Chatbot, sqlx::Error> {
    chatbot_row_at(r, 0)
}

/// A chatbot whose [`CHATBOT_COLS`] start at column `b`.
pub(super) fn chatbot_row_at(r: &PgRow, b: usize) -> Result<Chatbot, sqlx::Error> {
    let prev: Option<String> = r.try_get(b + 5)?;
    let until: Option<i64> = r.try_get(b + 6)?;
    Ok(Chatbot {
        id: r.try_get(b)?,
        name: r.try_get(b + 1)?,
        webhook_url: r.try_get(b + 2)?,
        retention_ms: r.try_get(b + 3)?,
        signing_secret: r.try_get(b + 4)?,
        previous_secret: prev.zip(until),
        endpoint_disabled: r.try_get::<i64, _>(b + 7)? != 0,
        member_id: r.try_get(b + 8)?,
        created_at: r.try_get(b + 9)?,
        allowed_origins: AllowedOrigins::from_stored(r.try_get::<&str, _>(b + 10)?),
    })
}

pub(super) const CONV_COLS: &str =
    "id, chatbot_id, visitor_id, visitor_name, taken_over_by, created_at";

pub(super) fn conversation_row(r: &PgRow) -> Result<Conversation, sqlx::Error> {
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

pub(super) fn parse_message(doc: &str, created_ms: i64) -> StoreResult<Message> {
    let mut m: Message = serde_json::from_str(doc)?;
    m.created_ms = created_ms;
    Ok(m)
}

pub(super) fn message_json(m: &Message) -> String {
    serde_json::to_string(m).unwrap_or_default()
}

pub(super) async fn load_message_for_update(tx: &mut Tx<'_>, id: &str) -> StoreResult<Message> {
    let row = sqlx::query(
        "SELECT doc, created_at FROM messages WHERE id = $1 AND deleted = 0 FOR UPDATE",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(StoreError::NotFound)?;
    parse_message(&row.try_get::<String, _>(0)?, row.try_get(1)?)
}

pub(super) async fn save_message(tx: &mut Tx<'_>, m: &Message) -> StoreResult<()> {
    sqlx::query("UPDATE messages SET doc = $2 WHERE id = $1")
        .bind(&m.id)
        .bind(message_json(m))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub(super) async fn insert_message(tx: &mut Tx<'_>, m: &Message) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO messages (id, conversation_id, doc, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(&m.id)
    .bind(&m.conversation_id)
    .bind(message_json(m))
    .bind(m.created_ms)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) async fn append_stream(
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
    .await?;
    Ok(StreamEvent {
        seq,
        conversation_id: crate::domain::ids::ConversationId::stored(conversation_id),
        kind: kind.to_string(),
        data,
    })
}

/// A status column, parsed: a text that names no status fails to decode.
pub(super) fn status_col<T>(r: &PgRow, idx: usize) -> Result<T, sqlx::Error>
where
    T: std::str::FromStr<Err = crate::domain::status::UnknownStatus>,
{
    let s: String = r.try_get(idx)?;
    s.parse().map_err(|e| sqlx::Error::ColumnDecode {
        index: idx.to_string(),
        source: Box::new(e),
    })
}

pub(super) fn summary_row(r: &PgRow) -> Result<EventSummary, sqlx::Error> {
    let status: EventStatus = status_col(r, 4)?;
    let next: i64 = r.try_get(6)?;
    let active = status.is_active();
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

pub(super) use crate::store::page_by_seq as page_of;
