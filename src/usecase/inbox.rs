//! The interactions inbox (§6) as a chatbot's key works it: list (with
//! each question's context), read, and answer as a member.

use std::collections::HashMap;

use serde_json::Value;

use super::Services;
use super::error::{AppError, AppResult};
use crate::domain::ids::{ChatbotId, InteractionId, hash_secret};
use crate::domain::inbox::Interaction;
use crate::domain::model::{Chatbot, Person};
use crate::store::{AnswerOutcome, AnswerRequest, InteractionFilter, Page, PageAsk};

/// A page of the chatbot's interactions, newest first.
pub async fn list(
    st: &Services,
    chatbot_id: &ChatbotId,
    filter: InteractionFilter,
    limit: usize,
    cursor: Option<i64>,
    now_ms: i64,
) -> AppResult<Page<Interaction>> {
    let ask = PageAsk {
        chatbot_id: chatbot_id.clone(),
        filter,
        limit,
        cursor,
        now_ms,
    };
    Ok(st.store.list_interactions(ask).await?)
}

/// The context of each interaction (see [`context`]), in order; each
/// conversation is read once.
pub async fn contexts(st: &Services, list: &[Interaction]) -> AppResult<Vec<Value>> {
    let mut known = HashMap::new();
    let mut out = Vec::with_capacity(list.len());
    for i in list {
        out.push(context(st, i, &mut known).await?);
    }
    Ok(out)
}

/// One interaction of the chatbot (`NotFound` for another chatbot's).
pub async fn get(
    st: &Services,
    chatbot_id: &ChatbotId,
    id: &InteractionId,
) -> AppResult<Interaction> {
    Ok(st.store.get_interaction(chatbot_id, id).await?)
}

/// Answers an interaction as the chatbot's member: unknown or another
/// chatbot's is `NotFound` before anything else, then the key is required;
/// an accepted answer queues its event (counted once committed).
pub async fn answer(
    st: &Services,
    bot: &Chatbot,
    id: &InteractionId,
    idempotency_key: Option<String>,
    body: Value,
    trace: Option<String>,
    now_ms: i64,
) -> AppResult<AnswerOutcome> {
    let inter = st.store.get_interaction(&bot.id, id).await?;
    let key = idempotency_key.ok_or(AppError::IdempotencyKeyRequired)?;
    let user = Person {
        kind: "member".into(),
        id: bot.member_id.clone(),
        display_name: format!("{} (API)", bot.name),
    };
    let by = super::reply::acting(
        st,
        user,
        &inter.message_id,
        &inter.conversation_id,
        now_ms,
        trace,
    );
    let out = st
        .store
        .answer_interaction(AnswerRequest {
            interaction_id: inter.id.clone(),
            chatbot_id: bot.id.clone(),
            idempotency_key: key,
            body_hash: hash_secret(&crate::domain::text::canonical(&body)),
            body,
            by,
        })
        .await?;
    if let AnswerOutcome::Answered(i) = &out {
        crate::telemetry::metrics::event_accepted(crate::telemetry::metrics::answer_event_type(
            &i.kind,
        ));
    }
    Ok(out)
}

/// How many of a conversation's newest messages are searched for the
/// visitor's message a question answers.
const CONTEXT_MESSAGES: usize = 50;

/// `{"visitor", "in_reply_to": {"message_id", "text", "created_at"} | null,
/// "option_styles": {action_id: style}}`: who the interaction is with, the
/// visitor's last message before it, and its buttons' styles.
async fn context(
    st: &Services,
    i: &Interaction,
    known: &mut HashMap<
        crate::domain::ids::ConversationId,
        (Value, Vec<crate::domain::model::Message>),
    >,
) -> AppResult<Value> {
    if !known.contains_key(&i.conversation_id) {
        let conv = st.store.get_conversation(&i.conversation_id).await?;
        let msgs = st
            .store
            .list_messages(&i.conversation_id, CONTEXT_MESSAGES, None)
            .await?
            .data;
        let visitor = serde_json::to_value(&conv.visitor).unwrap_or(Value::Null);
        known.insert(i.conversation_id.clone(), (visitor, msgs));
    }
    let Some((visitor, msgs)) = known.get(&i.conversation_id) else {
        return Ok(Value::Null);
    };
    // Newest first: the first visitor message older than the question's.
    let asked = msgs.iter().position(|m| m.id == i.message_id);
    let before = asked.map_or(&msgs[..0], |n| &msgs[n + 1..]);
    let reply_to = before.iter().find(
        |m| matches!(&m.author, crate::domain::model::Author::Person(p) if p.kind == "visitor"),
    );
    // The button styles of the question, so a reviewer sees them as the
    // visitor does (`payload.options` carries id and label only).
    let question = match asked {
        Some(n) => msgs.get(n).cloned(),
        None => st.store.get_message(&i.message_id).await.ok(),
    };
    let mut styles = serde_json::Map::new();
    for b in question.iter().flat_map(|m| &m.blocks) {
        if let crate::domain::blocks::Block::Actions { elements, .. } = b {
            for e in elements.iter().filter(|e| !e.is_link()) {
                if let Some(style) = &e.style {
                    styles.insert(e.action_id.clone(), Value::String(style.clone()));
                }
            }
        }
    }
    Ok(serde_json::json!({
        "option_styles": styles,
        "visitor": visitor,
        "in_reply_to": reply_to.map(|m| serde_json::json!({
            "message_id": m.id,
            "text": m.text,
            "created_at": m.created_at,
        })),
    }))
}
