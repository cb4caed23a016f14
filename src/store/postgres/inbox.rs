//! Interactions on PostgreSQL: rows, and the reads and writes of them the
//! transaction scripts take (see `tx`).

use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{Tx, status_col};
use crate::domain::error::Rejection;
use crate::domain::inbox::{self, Interaction, NewInteraction};
use crate::domain::interact::Action;
use crate::domain::model::Message;
use crate::store::{StoreError, StoreResult};

pub const COLS: &str = "id, chatbot_id, conversation_id, message_id, type, status, prompt, payload, spec, response, expires_at, created_at, updated_at, answered_at";

fn json_col(s: String) -> Result<Value, sqlx::Error> {
    serde_json::from_str(&s).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

pub fn row(r: &PgRow) -> Result<Interaction, sqlx::Error> {
    row_at(r, 0)
}

/// An interaction read from [`COLS`] starting at column `at`.
pub fn row_at(r: &PgRow, at: usize) -> Result<Interaction, sqlx::Error> {
    let spec: Value = json_col(r.try_get(at + 8)?)?;
    let response: Option<String> = r.try_get(at + 9)?;
    Ok(Interaction {
        id: r.try_get(at)?,
        chatbot_id: r.try_get(at + 1)?,
        conversation_id: r.try_get(at + 2)?,
        message_id: r.try_get(at + 3)?,
        kind: r.try_get(at + 4)?,
        status: status_col(r, at + 5)?,
        prompt: r.try_get(at + 6)?,
        payload: json_col(r.try_get(at + 7)?)?,
        spec: serde_json::from_value(spec).unwrap_or_default(),
        response: response.map(json_col).transpose()?,
        expires_at: r.try_get(at + 10)?,
        created_at: r.try_get(at + 11)?,
        updated_at: r.try_get(at + 12)?,
        answered_at: r.try_get(at + 13)?,
    })
}

pub async fn insert(tx: &mut Tx<'_>, i: &NewInteraction, now_ms: i64) -> StoreResult<()> {
    if i.spec.ask {
        super::lock_conversation(tx, &i.conversation_id).await?;
        let pending: Option<String> = sqlx::query_scalar(
            "SELECT id FROM interactions WHERE conversation_id = $1 AND is_ask = 1 AND status = 'pending'
             AND (expires_at IS NULL OR expires_at > $2) LIMIT 1",
        )
        .bind(&i.conversation_id)
        .bind(now_ms)
        .fetch_optional(&mut **tx)
        .await?;
        if let Some(interaction_id) = pending {
            return Err(StoreError::Rejected(Rejection::DialogPending {
                interaction_id,
            }));
        }
    }
    sqlx::query(
        "INSERT INTO interactions (id, chatbot_id, conversation_id, message_id, type, status, prompt, payload, spec, is_ask,
                                   expires_at, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $10, $11, $11)",
    )
    .bind(&i.id)
    .bind(&i.chatbot_id)
    .bind(&i.conversation_id)
    .bind(&i.message_id)
    .bind(i.kind)
    .bind(&i.prompt)
    .bind(i.payload.to_string())
    .bind(serde_json::to_string(&i.spec).unwrap_or_default())
    .bind(i.spec.ask as i64)
    .bind(i.expires_at)
    .bind(i.created_at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The interactions `cond` picks by its one parameter `$1` (a constant
/// condition, in the order it gives), locked.
async fn locked(tx: &mut Tx<'_>, cond: &str, key: &str) -> StoreResult<Vec<Interaction>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLS} FROM interactions WHERE {cond} FOR UPDATE"
    ))
    .bind(key)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|r| row(r).map_err(StoreError::from))
        .collect()
}

pub async fn of_message(tx: &mut Tx<'_>, message_id: &str) -> StoreResult<Vec<Interaction>> {
    locked(tx, "message_id = $1", message_id).await
}

/// The pending interactions of a conversation, oldest first, locked.
pub async fn pending_of(tx: &mut Tx<'_>, conversation_id: &str) -> StoreResult<Vec<Interaction>> {
    const PENDING: &str = "conversation_id = $1 AND status = 'pending' ORDER BY created_at, id";
    locked(tx, PENDING, conversation_id).await
}

/// The interactions an action on `msg` may concern, locked: the pending and
/// asked ones, and every one when the action's block is gone from the message.
pub async fn of_action(
    tx: &mut Tx<'_>,
    msg: &Message,
    action: &Action,
) -> StoreResult<Vec<Interaction>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLS} FROM interactions WHERE message_id = $1 AND ($2 OR status = 'pending' OR is_ask = 1) FOR UPDATE"
    ))
    .bind(&msg.id)
    .bind(inbox::block_gone(msg, action))
    .fetch_all(&mut **tx)
    .await?;
    rows.iter()
        .map(|r| row(r).map_err(StoreError::from))
        .collect()
}

/// Reads an interaction without locking it: locks are taken message first,
/// then its interactions (see `apply`), so that a click and an answer on the
/// same message cannot deadlock.
pub async fn by_id(tx: &mut Tx<'_>, id: &str) -> StoreResult<Interaction> {
    let r = sqlx::query(&format!("SELECT {COLS} FROM interactions WHERE id = $1"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or(StoreError::NotFound)?;
    row(&r).map_err(StoreError::from)
}

pub async fn save(tx: &mut Tx<'_>, i: &Interaction) -> StoreResult<()> {
    sqlx::query(
        "UPDATE interactions SET status = $2, response = $3, updated_at = $4, answered_at = $5, spec = $6 WHERE id = $1",
    )
    .bind(&i.id)
    .bind(i.status.as_str())
    .bind(i.response.as_ref().map(Value::to_string))
    .bind(i.updated_at)
    .bind(i.answered_at)
    .bind(serde_json::to_string(&i.spec).unwrap_or_default())
    .execute(&mut **tx)
    .await?;
    Ok(())
}
