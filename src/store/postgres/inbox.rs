//! Interactions on PostgreSQL: rows, and the one transaction step shared by
//! a visitor's click and a reviewer's answer.

use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{
    Tx, append_stream, backend, insert_event, load_message_for_update, message_json, save_message,
    status_col,
};
use crate::domain::error::Rejection;
use crate::domain::inbox::{self, Interaction, NewInteraction};
use crate::domain::interact::{Action, Context};
use crate::domain::model::{Message, Person};
use crate::domain::status::InteractionStatus;
use crate::hub::ApiEvent;
use crate::store::{Interacted, NewEvent, StoreError, StoreResult, StreamEvent};

pub const COLS: &str = "id, chatbot_id, conversation_id, message_id, type, status, prompt, payload, spec, response, expires_at, created_at, updated_at, answered_at";

fn json_col(s: String) -> Result<Value, sqlx::Error> {
    serde_json::from_str(&s).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

pub fn row(r: &PgRow) -> Result<Interaction, sqlx::Error> {
    let spec: Value = json_col(r.try_get(8)?)?;
    let response: Option<String> = r.try_get(9)?;
    Ok(Interaction {
        id: r.try_get(0)?,
        chatbot_id: r.try_get(1)?,
        conversation_id: r.try_get(2)?,
        message_id: r.try_get(3)?,
        kind: r.try_get(4)?,
        status: status_col(r, 5)?,
        prompt: r.try_get(6)?,
        payload: json_col(r.try_get(7)?)?,
        spec: serde_json::from_value(spec).unwrap_or_default(),
        response: response.map(json_col).transpose()?,
        expires_at: r.try_get(10)?,
        created_at: r.try_get(11)?,
        updated_at: r.try_get(12)?,
        answered_at: r.try_get(13)?,
    })
}

pub async fn insert(tx: &mut Tx<'_>, i: &NewInteraction, now_ms: i64) -> StoreResult<()> {
    if i.spec.ask {
        super::lock_conversation(tx, &i.conversation_id).await?;
        let pending: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM interactions WHERE conversation_id = $1 AND is_ask = 1 AND status = 'pending'
             AND (expires_at IS NULL OR expires_at > $2) LIMIT 1",
        )
        .bind(&i.conversation_id)
        .bind(now_ms)
        .fetch_optional(&mut **tx)
        .await?;
        if pending.is_some() {
            return Err(StoreError::Rejected(Rejection::DialogPending));
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

pub async fn of_message(tx: &mut Tx<'_>, message_id: &str) -> StoreResult<Vec<Interaction>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLS} FROM interactions WHERE message_id = $1 FOR UPDATE"
    ))
    .bind(message_id)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| row(r).map_err(backend)).collect()
}

/// The interactions an action on `msg` may concern, locked: the pending and
/// asked ones, and every one when the action's block is gone from the message.
async fn of_action(
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
    rows.iter().map(|r| row(r).map_err(backend)).collect()
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
    row(&r).map_err(backend)
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

pub struct Effects {
    pub out: Interacted,
    pub stream: Vec<StreamEvent>,
    pub api: Vec<ApiEvent>,
    pub answered: Option<Interaction>,
}

/// Applies an action to a locked message inside the current transaction.
#[allow(clippy::too_many_arguments)]
pub async fn apply(
    tx: &mut Tx<'_>,
    mut msg: Message,
    action: &Action,
    user: &Person,
    event_id: &str,
    response_url: &str,
    now_ms: i64,
    interactive_window_ms: i64,
    answer: Option<&serde_json::Value>,
) -> StoreResult<Effects> {
    let row = sqlx::query(
        "SELECT v.chatbot_id, b.retention_ms, v.created_at, v.taken_over_by
         FROM conversations v JOIN chatbots b ON b.id = v.chatbot_id WHERE v.id = $1",
    )
    .bind(&msg.conversation_id)
    .fetch_one(&mut **tx)
    .await?;
    let chatbot_id: String = row.try_get(0)?;
    let taken: Option<String> = row.try_get(3)?;
    let mut interactions = of_action(tx, &msg, action).await?;
    let ctx = Context {
        now_ms,
        interactive_window_ms,
        retention_ms: row.try_get(1)?,
        conversation_created_ms: row.try_get(2)?,
        taken_over: taken.is_some(),
        chatbot_id: &chatbot_id,
        user,
        event_id,
        response_url,
        allow_comment: false,
        require_one_checked: false,
        answer,
    };
    let d = inbox::decide(&mut interactions, &mut msg, action, ctx)?;
    let mut api = Vec::new();
    if let Some(i) = &d.answered {
        save(tx, i).await?;
        api.push(ApiEvent {
            chatbot_id: chatbot_id.clone(),
            interaction_id: i.id.clone(),
            kind: "interaction.answered",
            data: i.to_json(now_ms),
        });
    }
    insert_event(
        tx,
        &NewEvent {
            id: event_id.to_string(),
            chatbot_id,
            conversation_id: msg.conversation_id.clone(),
            event_type: d.accepted.event_type,
            payload: d.accepted.payload,
            created_at: now_ms,
        },
    )
    .await?;
    let mut stream = Vec::new();
    if d.changed {
        save_message(tx, &msg).await?;
        stream.push(
            append_stream(
                tx,
                &msg.conversation_id,
                "message.updated",
                message_json(&msg),
            )
            .await?,
        );
    }
    let typing = msg.typing_on_interaction;
    Ok(Effects {
        out: Interacted {
            message: msg,
            typing,
            json: None,
        },
        stream,
        api,
        answered: d.answered,
    })
}

pub async fn close(
    tx: &mut Tx<'_>,
    id: &str,
    status: InteractionStatus,
    reason: &str,
    now_ms: i64,
) -> StoreResult<(Interaction, Vec<StreamEvent>, Vec<ApiEvent>)> {
    let found = by_id(tx, id).await?;
    let mut msg = load_message_for_update(tx, &found.message_id).await?;
    let mut i = of_message(tx, &msg.id)
        .await?
        .into_iter()
        .find(|x| x.id == id)
        .ok_or(StoreError::NotFound)?;
    if i.status != InteractionStatus::Pending {
        return Ok((i, Vec::new(), Vec::new()));
    }
    inbox::close(&mut i, &mut msg, status, reason, now_ms);
    save(tx, &i).await?;
    save_message(tx, &msg).await?;
    let entry = append_stream(
        tx,
        &msg.conversation_id,
        "message.updated",
        message_json(&msg),
    )
    .await?;
    let kind = if status == InteractionStatus::Expired {
        "interaction.expired"
    } else {
        "interaction.cancelled"
    };
    let api = vec![ApiEvent {
        chatbot_id: i.chatbot_id.clone(),
        interaction_id: i.id.clone(),
        kind,
        data: i.to_json(now_ms),
    }];
    Ok((i, vec![entry], api))
}

/// Keeps the inbox in step with a reply (see the SQLite store).
pub async fn after_reply(
    tx: &mut Tx<'_>,
    msg: &Message,
    deleted: bool,
    window_ms: i64,
    now_ms: i64,
) -> StoreResult<Vec<ApiEvent>> {
    let chatbot_id: String =
        sqlx::query_scalar("SELECT chatbot_id FROM conversations WHERE id = $1")
            .bind(&msg.conversation_id)
            .fetch_one(&mut **tx)
            .await?;
    let existing = of_message(tx, &msg.id).await?;
    let (changed, fresh) =
        inbox::after_reply(existing, msg, deleted, &chatbot_id, window_ms, now_ms);
    let mut api = Vec::new();
    for i in changed {
        save(tx, &i).await?;
        if i.status == InteractionStatus::Cancelled {
            api.push(ApiEvent {
                chatbot_id: chatbot_id.clone(),
                interaction_id: i.id.clone(),
                kind: "interaction.cancelled",
                data: i.to_json(now_ms),
            });
        }
    }
    for n in fresh {
        insert(tx, &n, now_ms).await?;
        let stored = by_id(tx, &n.id).await?;
        api.push(ApiEvent {
            chatbot_id: chatbot_id.clone(),
            interaction_id: n.id.clone(),
            kind: "interaction.created",
            data: stored.to_json(now_ms),
        });
    }
    Ok(api)
}
