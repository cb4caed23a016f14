//! A question asked and waited for (§7, §12, §15), apart from how the
//! answer travels: posting it (a refused one leaves no attachment behind),
//! what the asker gets for it as it stands, closing it at its deadline,
//! withdrawing it, and cancelling one nobody waits on any more.

use crate::domain::ids::{ChatbotId, InteractionId};
use crate::store::{Closing, Posting};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Services;
use super::error::AppResult;
use crate::domain::attachment::Attachment;
use crate::domain::error::Rejection;
use crate::domain::inbox::{self, Interaction, NewInteraction};
use crate::domain::model::Message;
use crate::domain::status::InteractionStatus;

/// What the asking client gets for an interaction as it now stands (null
/// while it is pending).
pub fn outcome(i: &Value) -> Value {
    let status = i
        .get("status")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<InteractionStatus>().ok());
    match status {
        Some(InteractionStatus::Answered) => {
            inbox::ask_answer(i.get("response").unwrap_or(&Value::Null))
        }
        Some(InteractionStatus::Expired) => json!({"answer": "expired"}),
        Some(InteractionStatus::Pending) => Value::Null,
        Some(InteractionStatus::Cancelled) | None => json!({"answer": "withdrawn"}),
    }
}

/// Posts the question's message with its interaction; when that is
/// refused, the question's attachment (stored first) is removed again.
pub async fn post(
    st: &Services,
    msg: Message,
    interaction: NewInteraction,
    attachment: Option<&str>,
) -> AppResult<()> {
    let posting = Posting {
        message: msg,
        event: None,
        interactions: vec![interaction],
    };
    let r = st.store.insert_message(posting).await;
    if let (Err(_), Some(id)) = (&r, attachment) {
        let _ = st.store.delete_attachment(id).await;
    }
    Ok(r?)
}

/// One interaction of the chatbot.
pub async fn interaction(
    st: &Services,
    chatbot_id: &ChatbotId,
    id: &InteractionId,
) -> AppResult<Interaction> {
    Ok(st.store.get_interaction(chatbot_id, id).await?)
}

/// The answer object of an interaction, closing it first if its deadline
/// has passed; null while it is pending.
pub async fn settle(st: &Services, i: &Interaction) -> AppResult<Value> {
    let now = st.now_ms();
    if i.status == InteractionStatus::Pending && i.status_at(now) == InteractionStatus::Expired {
        let closed = st
            .store
            .close_interaction(Closing::expired(&i.id, now))
            .await?;
        return Ok(outcome(&closed.to_json(now)));
    }
    Ok(outcome(&i.to_json(now)))
}

/// The answer if the interaction is no longer pending, read from the store
/// (`None` while pending or when it cannot be read now).
pub async fn answered(st: &Services, chatbot_id: &str, id: &str) -> Option<Value> {
    let i = st.store.get_interaction(chatbot_id, id).await.ok()?;
    let now = st.now_ms();
    (i.status_at(now) != InteractionStatus::Pending).then(|| outcome(&i.to_json(now)))
}

/// Closes the question as expired now (a held ask's deadline passed) and
/// returns what the asker gets.
pub async fn expire(st: &Services, id: &InteractionId) -> Value {
    match st
        .store
        .close_interaction(Closing::expired(id, st.now_ms()))
        .await
    {
        Ok(i) => outcome(&i.to_json(st.now_ms())),
        Err(_) => json!({"answer": "expired"}),
    }
}

/// Closes the question as expired at its deadline, if it is still pending
/// then (on this instance; after a restart the first reader closes it).
pub fn expire_at(
    st: Arc<Services>,
    interaction_id: crate::domain::ids::InteractionId,
    expires_at: Option<i64>,
) {
    let Some(at) = expires_at else { return };
    tokio::spawn(async move {
        let left = at.saturating_sub(st.now_ms()).max(0) as u64;
        tokio::time::sleep(Duration::from_millis(left + 1)).await;
        let _ = st
            .store
            .close_interaction(Closing::expired(&interaction_id, st.now_ms()))
            .await;
    });
}

/// Withdraws the question: the asker went away before an answer.
pub async fn withdraw(st: &Services, id: &InteractionId) {
    let _ = st
        .store
        .close_interaction(Closing::withdrawn(id, st.now_ms()))
        .await;
}

/// Cancels a pending question of the chatbot (its blocks turn off, reason
/// `withdrawn`); one past its deadline expires instead, and one answered
/// meanwhile stands: both are `NotPending`.
pub async fn cancel(
    st: &Services,
    chatbot_id: &ChatbotId,
    id: &InteractionId,
) -> AppResult<Interaction> {
    let i = st.store.get_interaction(chatbot_id, id).await?;
    let now = st.now_ms();
    match i.status_at(now) {
        InteractionStatus::Pending => {}
        InteractionStatus::Expired if i.status == InteractionStatus::Pending => {
            // Past its deadline: it expires, as any reader would make it.
            st.store
                .close_interaction(Closing::expired(&i.id, now))
                .await?;
            return Err(Rejection::NotPending.into());
        }
        _ => return Err(Rejection::NotPending.into()),
    }
    let closed = st
        .store
        .close_interaction(Closing::withdrawn(&i.id, now))
        .await?;
    // An answer that won the race stands.
    if closed.status != InteractionStatus::Cancelled {
        return Err(Rejection::NotPending.into());
    }
    Ok(closed)
}

/// Stores a question's file (before its message: a refused question
/// removes it again, see [`post`]).
pub async fn save_attachment(st: &Services, a: Attachment) -> AppResult<()> {
    Ok(st.store.insert_attachment(a).await?)
}

/// A stored file, whoever asks: the caller checks it is theirs.
pub async fn attachment(st: &Services, id: &str) -> AppResult<Attachment> {
    Ok(st.store.get_attachment(id).await?)
}
