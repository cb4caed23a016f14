//! Row mapping, and the message rows the writer loads and saves.

use super::*;
use crate::domain::status::EventStatus;

// ---- row mapping -----------------------------------------------------------

pub(super) const CHATBOT_COLS: &str = "id, name, webhook_url, retention_ms, signing_secret, previous_secret, previous_until, endpoint_disabled, member_id, created_at, allowed_origins";
/// [`CHATBOT_COLS`] of a join's `b` (chatbots), read by [`chatbot_row`] first.
pub(super) const CHATBOT_COLS_OF_B: &str = "b.id, b.name, b.webhook_url, b.retention_ms, b.signing_secret, b.previous_secret, b.previous_until, b.endpoint_disabled, b.member_id, b.created_at, b.allowed_origins";
pub(super) const CHATBOT_COL_COUNT: usize = 11;

/// A queued event as claimed, from columns `seq, id, chatbot_id,
/// conversation_id, payload, attempts, attempt_base` first and its
/// `traceparent` at `trace`.
pub(super) fn claim_at(r: &rusqlite::Row<'_>, trace: usize) -> rusqlite::Result<Claimed> {
    Ok(Claimed {
        seq: r.get(0)?,
        event_id: r.get(1)?,
        chatbot_id: r.get(2)?,
        conversation_id: r.get(3)?,
        payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(4)?),
        attempts: r.get(5)?,
        attempt_base: r.get(6)?,
        trace: r.get(trace)?,
        bot: None,
    })
}

/// What one attempt came to, `at` to `request_headers`, as parameters in
/// the order both attempts tables keep them.
pub(super) fn attempt_outcome(rec: &AttemptRecord) -> [&dyn rusqlite::ToSql; 6] {
    [
        &rec.at_ms,
        &rec.status_code,
        &rec.duration_ms,
        &rec.error,
        &rec.response_excerpt,
        &rec.request_headers,
    ]
}

pub(super) fn chatbot_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Chatbot> {
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

pub(super) const CONV_COLS: &str =
    "id, chatbot_id, visitor_id, visitor_name, taken_over_by, created_at";
pub(super) const CONV_COL_COUNT: usize = 6;
/// A visitor token's conversation and its chatbot's `allowed_origins`.
pub(super) const CONV_BY_TOKEN: &str = "SELECT c.id, c.chatbot_id, c.visitor_id, c.visitor_name, c.taken_over_by, c.created_at, b.allowed_origins
     FROM conversations c JOIN chatbots b ON b.id = c.chatbot_id WHERE c.token_hash = ?1";

pub(super) fn conversation_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Conversation> {
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

pub(super) fn parse_message(doc: &str, created_ms: i64) -> rusqlite::Result<Message> {
    let mut m: Message = serde_json::from_str(doc).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })?;
    m.created_ms = created_ms;
    Ok(m)
}

pub(super) fn to_doc(m: &Message) -> StoreResult<String> {
    serde_json::to_string(m).map_err(StoreError::from)
}

pub(super) fn load_message(conn: &Connection, id: &str) -> StoreResult<Message> {
    if let Some(m) = writer_cache::message(id) {
        return Ok(m);
    }
    let m = load_message_uncached(conn, id)?;
    writer_cache::put_message(&m, None);
    Ok(m)
}

pub(super) fn load_message_uncached(conn: &Connection, id: &str) -> StoreResult<Message> {
    conn.prepare_cached("SELECT doc, created_at FROM messages WHERE id = ?1 AND deleted = 0")
        .and_then(|mut s| {
            s.query_row([id], |r| parse_message(&r.get::<_, String>(0)?, r.get(1)?))
                .optional()
        })?
        .ok_or(StoreError::NotFound)
}

/// Saves the message; returns the JSON written (the message as the widget
/// sees it, reused for its stream entry).
pub(super) fn save_message(conn: &Connection, m: &Message) -> StoreResult<String> {
    let doc = to_doc(m)?;
    conn.prepare_cached("UPDATE messages SET doc = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![m.id, doc]))?;
    writer_cache::put_message(m, Some(Arc::from(doc.as_str())));
    Ok(doc)
}

/// Inserts the message; returns the JSON written, as [`save_message`].
pub(super) fn insert_message(conn: &Connection, m: &Message) -> StoreResult<String> {
    let doc = to_doc(m)?;
    conn.prepare_cached(
        "INSERT INTO messages (id, conversation_id, doc, created_at) VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![m.id, m.conversation_id, doc, m.created_ms]))?;
    writer_cache::put_message(m, Some(Arc::from(doc.as_str())));
    Ok(doc)
}

pub(super) fn append_stream(
    conn: &Connection,
    conversation_id: &str,
    kind: &str,
    data: String,
) -> StoreResult<StreamEvent> {
    let seq = conn
        .prepare_cached("INSERT INTO stream_events (conversation_id, kind, data) VALUES (?1, ?2, ?3) RETURNING seq")
        .and_then(|mut s| s.query_row(params![conversation_id, kind, data], |r| r.get(0)))?;
    Ok(StreamEvent {
        seq,
        conversation_id: crate::domain::ids::ConversationId::stored(conversation_id),
        kind: kind.to_string(),
        data,
    })
}

/// A status column, parsed: a text that names no status is a conversion
/// failure of that column.
pub(super) fn status_col<T>(r: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<T>
where
    T: std::str::FromStr<Err = crate::domain::status::UnknownStatus>,
{
    let s: String = r.get(idx)?;
    s.parse().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
    })
}

pub(super) fn summary_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EventSummary> {
    let status: EventStatus = status_col(r, 4)?;
    let next: i64 = r.get(6)?;
    let active = status.is_active();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::status::InteractionStatus;

    fn read<T>(text: &str) -> StoreResult<T>
    where
        T: std::str::FromStr<Err = crate::domain::status::UnknownStatus>,
    {
        let c = Connection::open_in_memory()?;
        Ok(c.query_row("SELECT ?1", [text], |r| status_col(r, 0))?)
    }

    #[test]
    fn a_status_column_parses_and_an_unknown_text_is_a_storage_error() {
        assert_eq!(read::<EventStatus>("dead").ok(), Some(EventStatus::Dead));
        assert_eq!(
            read::<InteractionStatus>("cancelled").ok(),
            Some(InteractionStatus::Cancelled)
        );
        assert!(matches!(
            read::<EventStatus>("answered"),
            Err(StoreError::Backend(_))
        ));
        assert!(matches!(
            read::<InteractionStatus>("bogus"),
            Err(StoreError::Backend(_))
        ));
    }
}
