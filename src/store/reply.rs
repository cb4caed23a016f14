//! A `response_url` use as the store applies it, and how a retried use
//! with the same `Idempotency-Key` is answered.

use serde_json::Value;

use super::{StoreError, StoreResult};
use crate::domain::error::Rejection;
use crate::domain::model::Message;

/// One use of a `response_url`, applied atomically with its use count.
#[derive(Debug, Clone)]
pub struct ReplyRequest {
    pub event_id: String,
    pub message_id: String,
    pub conversation_id: String,
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

// One reply per response_url use, moved once: the size of `Post` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Reply {
    /// Replace the original in place; `None` keeps what it had.
    Replace {
        text: Option<String>,
        blocks: Vec<crate::domain::blocks::Block>,
        metadata: Option<Value>,
        typing_on_interaction: Option<bool>,
    },
    Post(Message),
    Delete,
}

pub enum ReplyOutcome {
    Applied(Value),
    /// The idempotency key was used before: the first result.
    Repeated(Value),
    UsedUp,
}

/// The key under which a response_url's first result keeps the hash of its
/// request body (in the same stored text, so no column is needed).
const REQUEST_HASH: &str = "request_hash";

/// The text stored for a response_url's `Idempotency-Key`: the first result
/// and the hash of the body that got it.
pub fn reply_record(result: &Value, body_hash: &str) -> String {
    let mut v = result.clone();
    if let Value::Object(m) = &mut v {
        m.insert(REQUEST_HASH.into(), Value::String(body_hash.into()));
    }
    v.to_string()
}

/// A retried response_url POST with a key seen before: the first result
/// for the same body, 409 `idempotency_key_conflict` for another.
pub fn repeated_reply(stored: &str, body_hash: &str) -> StoreResult<ReplyOutcome> {
    let mut v: Value =
        serde_json::from_str(stored).map_err(|e| StoreError::Backend(e.to_string()))?;
    let hash = v.as_object_mut().and_then(|m| m.remove(REQUEST_HASH));
    if hash.is_some_and(|h| h != body_hash) {
        return Err(StoreError::Rejected(Rejection::IdempotencyConflict));
    }
    Ok(ReplyOutcome::Repeated(v))
}
