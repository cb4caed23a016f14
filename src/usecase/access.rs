//! Who a credential names (the HTTP extractors ask here): the chatbot of
//! an API key, the conversation of a visitor token, and whether the store
//! answers at all (`/readyz`, `/metrics`).

use super::Services;
use super::error::AppResult;
use crate::domain::model::{Chatbot, Conversation};
use crate::domain::origins::AllowedOrigins;
use crate::store::QueueStats;

/// The chatbot whose API key hashes to `hash`.
pub async fn chatbot_by_key(st: &Services, hash: &str) -> AppResult<Chatbot> {
    Ok(st.store.chatbot_by_key(hash).await?)
}

/// The conversation whose visitor token hashes to `hash`, with the origins
/// its chatbot allows.
pub async fn conversation_by_token(
    st: &Services,
    hash: &str,
) -> AppResult<(Conversation, AllowedOrigins)> {
    Ok(st.store.conversation_by_token(hash).await?)
}

/// Queue depth and the age of the oldest waiting delivery; an error when
/// the store does not answer.
pub async fn queue_stats(st: &Services) -> AppResult<QueueStats> {
    Ok(st.store.queue_stats().await?)
}

/// Whether other instances write the same store.
pub fn shared(st: &Services) -> bool {
    st.store.shared()
}
