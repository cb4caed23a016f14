//! A `response_url` use as the store applies it (the reply itself is the
//! domain's, `domain::reply::Reply`), and how a retried use
//! with the same `Idempotency-Key` is answered.

use serde_json::Value;

/// One use of a `response_url`, applied atomically with its use count.
#[derive(Debug, Clone)]
pub struct ReplyRequest {
    pub event_id: crate::domain::ids::EventId,
    pub message_id: crate::domain::ids::MessageId,
    pub conversation_id: crate::domain::ids::ConversationId,
    pub idempotency_key: Option<String>,
    /// A hash of the request body, kept with the key: the same key with
    /// another body is a conflict (§5).
    pub body_hash: String,
    pub max_uses: u32,
    pub now_ms: i64,
    /// For the interactions of blocks a reply adds.
    pub interactive_window_ms: i64,
    pub reply: Reply,
}

pub use crate::domain::reply::Reply;

pub enum ReplyOutcome {
    Applied(Value),
    /// The idempotency key was used before: the first result.
    Repeated(Value),
    UsedUp,
}
