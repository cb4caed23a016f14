//! Interactions on SQLite: rows, and the one transaction step shared by a
//! visitor's click and a reviewer's answer.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::{
    CHATBOT_COL_COUNT, CHATBOT_COLS_OF_B, append_stream, backend, chatbot_row, insert_event,
    load_message, message_json, save_message, status_col, writer_cache,
};
use crate::domain::error::Rejection;
use crate::domain::inbox::{self, Interaction, NewInteraction};
use crate::domain::interact::{Action, Context};
use crate::domain::model::{Message, Person};
use crate::domain::status::InteractionStatus;
use crate::hub::ApiEvent;
use crate::store::{Claimed, Interacted, NewEvent, StoreError, StoreResult, StreamEvent};

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
        let pending: Option<i64> = c
            .query_row(
                "SELECT 1 FROM interactions INDEXED BY interactions_pending_ask WHERE conversation_id = ?1 AND is_ask = 1 AND status = 'pending'
                 AND (expires_at IS NULL OR expires_at > ?2) LIMIT 1",
                params![i.conversation_id, now_ms],
                |r| r.get(0),
            )
            .optional()?;
        if pending.is_some() {
            return Err(StoreError::Rejected(Rejection::DialogPending));
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

pub fn of_message(c: &Connection, message_id: &str) -> StoreResult<Vec<Interaction>> {
    let mut s = c.prepare_cached(&format!(
        "SELECT {COLS} FROM interactions WHERE message_id = ?1"
    ))?;
    s.query_map([message_id], row)
        .and_then(|rows| rows.collect())
        .map_err(backend)
}

/// The interactions an action on `msg` may concern: the pending and asked
/// ones, and every one when the action's block is gone from the message.
/// A message found with none is remembered as settled until one of its
/// interactions is inserted or saved (or the writer's caches are emptied).
fn of_action(c: &Connection, msg: &Message, action: &Action) -> StoreResult<Vec<Interaction>> {
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

/// Everything one accepted action wrote, to announce after the commit.
pub struct Effects {
    pub out: Interacted,
    pub stream: Vec<StreamEvent>,
    pub api: Vec<ApiEvent>,
    pub answered: Option<Interaction>,
    /// The event, to hand out at once when it heads its conversation.
    pub hot: Option<Claimed>,
}

/// A conversation's chatbot and state, from the writer's cache or the
/// table (the writer empties the cache before any write that may change
/// either, and when another connection wrote).
fn conversation(c: &Connection, id: &str) -> StoreResult<writer_cache::Conversation> {
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

/// Applies an action to a loaded message inside the current transaction:
/// block state, interaction, event, stream entry — or nothing.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    c: &Connection,
    mut msg: Message,
    action: &Action,
    user: &Person,
    event_id: &str,
    response_url: &str,
    now_ms: i64,
    interactive_window_ms: i64,
    answer: Option<&serde_json::Value>,
) -> StoreResult<Effects> {
    // The chatbot whole: its event goes to the dispatcher with it.
    let conv = conversation(c, &msg.conversation_id)?;
    let (bot, conv_created, taken) = (conv.bot, conv.created_at, conv.taken_over_by);
    let (chatbot_id, retention_ms) = (bot.id.clone(), bot.retention_ms);
    let mut interactions = of_action(c, &msg, action)?;
    let ctx = Context {
        now_ms,
        interactive_window_ms,
        retention_ms,
        conversation_created_ms: conv_created,
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
        save(c, i)?;
        api.push(ApiEvent {
            chatbot_id: chatbot_id.clone(),
            interaction_id: i.id.clone(),
            kind: "interaction.answered",
            data: i.to_json(now_ms),
        });
    }
    let mut hot = insert_event(
        c,
        NewEvent {
            id: event_id.to_string(),
            chatbot_id,
            conversation_id: msg.conversation_id.clone(),
            event_type: d.accepted.event_type,
            payload: d.accepted.payload,
            created_at: now_ms,
        },
    )?;
    let mut stream = Vec::new();
    if d.changed {
        let doc = save_message(c, &msg)?;
        stream.push(append_stream(
            c,
            &msg.conversation_id,
            "message.updated",
            doc,
        )?);
    }
    if let Some(h) = hot.as_mut() {
        h.bot = Some(bot);
    }
    let typing = msg.typing_on_interaction;
    let json = writer_cache::message_json(&msg);
    Ok(Effects {
        out: Interacted {
            message: msg,
            typing,
            json,
        },
        stream,
        api,
        answered: d.answered,
        hot,
    })
}

/// Ends a pending interaction with `status`, turning its blocks off.
pub fn close(
    c: &Connection,
    id: &str,
    status: InteractionStatus,
    reason: &str,
    now_ms: i64,
) -> StoreResult<(Interaction, Vec<StreamEvent>, Vec<ApiEvent>)> {
    let mut i = by_id(c, id)?;
    if i.status != InteractionStatus::Pending {
        return Ok((i, Vec::new(), Vec::new()));
    }
    let mut msg = load_message(c, &i.message_id)?;
    inbox::close(&mut i, &mut msg, status, reason, now_ms);
    save(c, &i)?;
    save_message(c, &msg)?;
    let entry = append_stream(
        c,
        &msg.conversation_id,
        "message.updated",
        message_json(&msg),
    )?;
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

/// Keeps the inbox in step with a reply: a replaced message's removed
/// blocks close, its new blocks (or a new message's) become interactions, a
/// deleted message's pending interactions are cancelled.
pub fn after_reply(
    c: &Connection,
    msg: &Message,
    deleted: bool,
    window_ms: i64,
    now_ms: i64,
) -> StoreResult<Vec<ApiEvent>> {
    let chatbot_id: String = c
        .prepare_cached("SELECT chatbot_id FROM conversations WHERE id = ?1")
        .and_then(|mut s| s.query_row([&msg.conversation_id], |r| r.get(0)))?;
    let existing = of_message(c, &msg.id)?;
    let mut api = Vec::new();
    let (changed, fresh) =
        inbox::after_reply(existing, msg, deleted, &chatbot_id, window_ms, now_ms);
    for i in changed {
        save(c, &i)?;
        if i.status == InteractionStatus::Cancelled && i.updated_at == now_ms {
            api.push(ApiEvent {
                chatbot_id: chatbot_id.clone(),
                interaction_id: i.id.clone(),
                kind: "interaction.cancelled",
                data: i.to_json(now_ms),
            });
        }
    }
    for n in fresh {
        insert(c, &n, now_ms)?;
        let stored = by_id(c, &n.id)?;
        api.push(ApiEvent {
            chatbot_id: chatbot_id.clone(),
            interaction_id: n.id.clone(),
            kind: "interaction.created",
            data: stored.to_json(now_ms),
        });
    }
    Ok(api)
}
