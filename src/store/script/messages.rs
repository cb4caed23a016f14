//! A message stored with its event and interactions; a member's takeover.

use super::{Announce, Tx, inbox};
use crate::domain::inbox as domain;
use crate::domain::model::Person;
use crate::store::{Claimed, Posting, StoreError, StoreResult};

/// Stores a message (and, for a visitor's message, its event) with its
/// interactions and its `message.created` stream entry. Returns what to
/// announce and the event when it heads its conversation.
pub async fn insert<T: Tx>(tx: &mut T, p: Posting) -> StoreResult<(Announce, Option<Claimed>)> {
    let msg = &p.message;
    // Not into a conversation erased or purged since the caller found it.
    if !tx.conversation_exists(&msg.conversation_id).await? {
        return Err(StoreError::NotFound);
    }
    let doc = tx.insert_message(msg).await?;
    let hot = match p.event {
        Some(e) => tx.insert_event(e).await?,
        None => None,
    };
    let mut announce = Announce::default();
    inbox::create(tx, &p.interactions, msg.created_ms, &mut announce).await?;
    let entry = tx
        .append_stream(&msg.conversation_id, "message.created", doc)
        .await?;
    announce.stream.push(entry);
    Ok((announce, hot))
}

/// A member takes over: pending interactions are cancelled and every block
/// turns off with reason `takeover` (`domain::inbox::take_over` decides).
pub async fn take_over<T: Tx>(
    tx: &mut T,
    conversation_id: &str,
    member: &Person,
    now_ms: i64,
) -> StoreResult<Announce> {
    // Lock order everywhere: messages, then interactions, then the
    // conversation.
    let mut messages = tx.live_messages(conversation_id).await?;
    let mut pending = tx.pending_interactions(conversation_id).await?;
    let member = serde_json::to_string(member)?;
    if !tx.take_over(conversation_id, &member).await? {
        return Err(StoreError::NotFound);
    }
    let changed = domain::take_over(&mut messages, &mut pending, now_ms);
    let mut announce = Announce::default();
    for i in &pending {
        tx.save_interaction(i).await?;
        announce.api(&i.chatbot_id, i, "interaction.cancelled", now_ms);
    }
    for (m, _) in messages.iter().zip(changed).filter(|(_, c)| *c) {
        let doc = tx.save_message(m).await?;
        let entry = tx
            .append_stream(conversation_id, "message.updated", doc)
            .await?;
        announce.stream.push(entry);
    }
    Ok(announce)
}
