//! Interactions on SQLite: rows, and the reads and writes of them the
//! transaction scripts take (see `tx`).

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::{CHATBOT_COL_COUNT, CHATBOT_COLS_OF_B, chatbot_row, status_col, writer_cache};
use crate::domain::error::Rejection;
use crate::domain::inbox::{self, Interaction, NewInteraction};
use crate::domain::interact::Action;
use crate::domain::model::Message;
use crate::store::{StoreError, StoreResult};

pub const COLS: &str = "id, chatbot_id, conversation_id, message_id, type, status, prompt, payload, spec, response, expires_at, created_at, updated_at, answered_at";

fn json_col(s: String) -> rusqlite::Result<Value> {
    serde_json::from_str(&s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

pub fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Interaction> {
    let spec: Value = json_col(r.get(8)?)?;
    let response: Option<String> = r.get(9)?;
    Ok(Interaction {
        id: r.get(0)?,
        chatbot_id: r.get(1)?,
        conversation_id: r.get(2)?,
        message_id: r.get(3)?,
        kind: r.get(4)?,
        status: status_col(r, 5)?,
        prompt: r.get(6)?,
        payload: json_col(r.get(7)?)?,
        spec: serde_json::from_value(spec).unwrap_or_default(),
        response: response.map(json_col).transpose()?,
        expires_at: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
        answered_at: r.get(13)?,
    })
}

pub fn insert(c: &Connection, i: &NewInteraction, now_ms: i64) -> StoreResult<()> {
    if i.spec.ask {
        let pending: Option<String> = c
            .query_row(
                "SELECT id FROM interactions INDEXED BY interactions_pending_ask WHERE conversation_id = ?1 AND is_ask = 1 AND status = 'pending'
                 AND (expires_at IS NULL OR expires_at > ?2) LIMIT 1",
                params![i.conversation_id, now_ms],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(interaction_id) = pending {
            return Err(StoreError::Rejected(Rejection::DialogPending {
                interaction_id,
            }));
        }
    }
    writer_cache::unsettle(&i.message_id);
    c.prepare_cached(
        "INSERT INTO interactions (id, chatbot_id, conversation_id, message_id, type, status, prompt, payload, spec, is_ask,
                                   expires_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
    )
    .and_then(|mut s| {
        s.execute(params![
            i.id,
            i.chatbot_id,
            i.conversation_id,
            i.message_id,
            i.kind,
            i.prompt,
            i.payload.to_string(),
            serde_json::to_string(&i.spec).unwrap_or_default(),
            i.spec.ask as i64,
            i.expires_at,
            i.created_at
        ])
    })?;
    Ok(())
}

/// The interactions `cond` picks by its one parameter `?1` (a constant
/// condition, in the order it gives).
fn picked(c: &Connection, cond: &str, key: &str) -> StoreResult<Vec<Interaction>> {
    let mut s = c.prepare_cached(&format!("SELECT {COLS} FROM interactions WHERE {cond}"))?;
    s.query_map([key], row)
        .and_then(|rows| rows.collect())
        .map_err(StoreError::from)
}

pub fn of_message(c: &Connection, message_id: &str) -> StoreResult<Vec<Interaction>> {
    picked(c, "message_id = ?1", message_id)
}

/// The pending interactions of a conversation, oldest first.
pub fn pending_of(c: &Connection, conversation_id: &str) -> StoreResult<Vec<Interaction>> {
    picked(
        c,
        "conversation_id = ?1 AND status = 'pending' ORDER BY created_at, id",
        conversation_id,
    )
}

/// The interactions an action on `msg` may concern: the pending and asked
/// ones, and every one when the action's block is gone from the message.
/// A message found with none is remembered as settled until one of its
/// interactions is inserted or saved (or the writer's caches are emptied).
pub fn of_action(c: &Connection, msg: &Message, action: &Action) -> StoreResult<Vec<Interaction>> {
    let gone = inbox::block_gone(msg, action);
    if !gone && writer_cache::settled(&msg.id) {
        return Ok(Vec::new());
    }
    let mut s = c
        .prepare_cached(&format!(
            "SELECT {COLS} FROM interactions WHERE message_id = ?1 AND (?2 OR status = 'pending' OR is_ask = 1)"
        ))?;
    let found: Vec<Interaction> = s
        .query_map(params![msg.id, gone], row)
        .and_then(|rows| rows.collect())?;
    if !gone && found.is_empty() {
        writer_cache::settle(&msg.id);
    }
    Ok(found)
}

pub fn by_id(c: &Connection, id: &str) -> StoreResult<Interaction> {
    c.prepare_cached(&format!("SELECT {COLS} FROM interactions WHERE id = ?1"))
        .and_then(|mut s| s.query_row([id], row).optional())?
        .ok_or(StoreError::NotFound)
}

pub fn save(c: &Connection, i: &Interaction) -> StoreResult<()> {
    writer_cache::unsettle(&i.message_id);
    c.prepare_cached(
        "UPDATE interactions SET status = ?2, response = ?3, updated_at = ?4, answered_at = ?5, spec = ?6 WHERE id = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![
            i.id,
            i.status.as_str(),
            i.response.as_ref().map(Value::to_string),
            i.updated_at,
            i.answered_at,
            serde_json::to_string(&i.spec).unwrap_or_default()
        ])
    })?;
    Ok(())
}

/// A conversation's chatbot and state, from the writer's cache or the
/// table (the writer empties the cache before any write that may change
/// either, and when another connection wrote).
pub fn conversation(c: &Connection, id: &str) -> StoreResult<writer_cache::Conversation> {
    if let Some(v) = writer_cache::conversation(id) {
        return Ok(v);
    }
    let v = c
        .prepare_cached(&format!(
            "SELECT {}, v.created_at, v.taken_over_by
             FROM conversations v JOIN chatbots b ON b.id = v.chatbot_id WHERE v.id = ?1",
            CHATBOT_COLS_OF_B
        ))
        .and_then(|mut s| {
            s.query_row([id], |r| {
                Ok(writer_cache::Conversation {
                    bot: std::sync::Arc::new(chatbot_row(r)?),
                    created_at: r.get(CHATBOT_COL_COUNT)?,
                    taken_over_by: r.get(CHATBOT_COL_COUNT + 1)?,
                })
            })
        })?;
    writer_cache::put_conversation(id, &v);
    Ok(v)
}
