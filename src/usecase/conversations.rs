//! Conversations (§3, §16): a new one with its visitor token, the
//! chatbot's conversations, newest first, searched or not, and a
//! conversation's messages.

use super::Services;
use super::error::AppResult;
use crate::domain::ids::{ChatbotId, ConversationId, hash_secret, new_id, new_secret};
use crate::domain::model::{Conversation, Message, Person};
use crate::store::{ConversationSummary, Page, PageAsk};

/// A new conversation of `chatbot_id` and its visitor token; the visitor
/// is named `display_name` or `Visitor NNNN`.
pub async fn open(
    st: &Services,
    chatbot_id: &ChatbotId,
    display_name: Option<String>,
) -> AppResult<(Conversation, String)> {
    let display_name = match display_name {
        Some(name) => name.trim().to_string(),
        None => {
            use rand::Rng;
            format!("Visitor {:04}", rand::rng().random_range(0..10000))
        }
    };
    let token = new_secret("vt");
    let conv = Conversation {
        id: ConversationId::generate(),
        chatbot_id: chatbot_id.clone(),
        visitor: Person {
            kind: "visitor".into(),
            id: new_id("vs"),
            display_name,
        },
        taken_over_by: None,
        created_at: st.now_ms(),
    };
    st.store
        .create_conversation(conv.clone(), hash_secret(&token))
        .await?;
    Ok((conv, token))
}

/// The chatbot's conversations, newest first; with `search`, those that
/// match it.
pub async fn list(
    st: &Services,
    chatbot_id: &ChatbotId,
    search: Option<String>,
    limit: usize,
    cursor: Option<String>,
    now_ms: i64,
) -> AppResult<Page<ConversationSummary>> {
    Ok(match search {
        Some(query) => {
            st.store
                .search_conversations(chatbot_id, query, limit, cursor, now_ms)
                .await?
        }
        None => {
            let ask = PageAsk {
                chatbot_id: chatbot_id.clone(),
                filter: (),
                limit,
                cursor,
                now_ms,
            };
            st.store.list_conversations(ask).await?
        }
    })
}

/// A page of the conversation's messages, newest first (the widget's and
/// the bot API's lists alike).
pub async fn messages(
    st: &Services,
    conversation_id: &ConversationId,
    limit: usize,
    cursor: Option<i64>,
) -> AppResult<Page<Message>> {
    Ok(st
        .store
        .list_messages(conversation_id, limit, cursor)
        .await?)
}
