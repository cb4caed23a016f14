//! What a chatbot's backend does with its key (§4): post a message into a
//! conversation, take it over, erase it. What follows a
//! commit (typing ended, the erasure announced) is done here.

use super::Services;
use super::content::{Content, new_message};
use super::error::{AppError, AppResult};
use crate::domain::ids::{ChatbotId, ConversationId};
use crate::domain::model::{Author, Conversation, Message, Person};
use crate::store::Posting;

/// The conversation, if it belongs to the chatbot (`NotFound` otherwise).
pub async fn conversation(
    st: &Services,
    chatbot_id: &ChatbotId,
    cid: &ConversationId,
) -> AppResult<Conversation> {
    let conv = st.store.get_conversation(cid).await?;
    if conv.chatbot_id != *chatbot_id {
        return Err(AppError::not_found());
    }
    Ok(conv)
}

/// A bot message, stored with an interaction per interactive block; the
/// typing it answers ends.
pub async fn post_message(
    st: &Services,
    chatbot_id: &ChatbotId,
    conv: &Conversation,
    content: Content,
) -> AppResult<Message> {
    let msg = new_message(&conv.id, Author::bot(), content, st.now_ms());
    let expires = msg.created_ms + st.settings.interactive_window.as_millis() as i64;
    let interactions = crate::domain::inbox::from_message(&msg, chatbot_id, Some(expires));
    st.store
        .insert_message(Posting {
            message: msg.clone(),
            event: None,
            interactions,
        })
        .await?;
    super::typing::stop_typing_if_shown(st, &conv.id).await;
    Ok(msg)
}

/// A person takes the conversation over: every block of it turns off.
pub async fn takeover(st: &Services, cid: &ConversationId, person: Person) -> AppResult<()> {
    Ok(st.store.takeover(cid, person, st.now_ms()).await?)
}

/// Erases the conversation now with everything in it. It is marked before
/// the deletion commits, so that a delivery of it a claim already took is
/// dropped instead of sent; once committed its open streams here end
/// (other instances hear it from the store).
pub async fn erase(st: &Services, chatbot_id: &ChatbotId, cid: &ConversationId) -> AppResult<()> {
    st.hub.erased.mark(cid);
    if let Err(e) = st.store.erase_conversation(chatbot_id, cid).await {
        st.hub.erased.unmark(cid);
        return Err(e.into());
    }
    st.hub.typing.lock().remove(cid.as_str());
    st.hub.erased.announce(cid);
    Ok(())
}
