//! A 2xx answer whose JSON body is a reply is applied exactly as a POST to
//! the event's response_url would be (one use of it).

use serde_json::Value;

use crate::domain::error::Rejection;
use crate::usecase::Services;
use crate::usecase::error::AppError;

/// The keys that make a JSON answer a reply.
const REPLY_KEYS: [&str; 5] = [
    "text",
    "blocks",
    "metadata",
    "replace_original",
    "delete_original",
];

/// Whether an answer's body is a reply (a JSON object with a reply key).
pub fn as_reply(body: &[u8]) -> Option<Value> {
    let first = body.iter().position(|b| !b.is_ascii_whitespace())?;
    if body[first] != b'{' {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    let is_reply = v
        .as_object()
        .is_some_and(|o| o.keys().any(|k| REPLY_KEYS.contains(&k.as_str())));
    is_reply.then_some(v)
}

/// Applies the reply in `body`, if it is one. Returns a note for the attempt
/// log when the reply was refused (the delivery still succeeded).
pub async fn apply(st: &Services, payload: &[u8], body: &[u8]) -> Option<String> {
    let reply = as_reply(body)?;
    let event: Value = serde_json::from_slice(payload).ok()?;
    let url = event.get("response_url")?.as_str()?;
    let token = url.rsplit('/').next()?;
    match crate::usecase::reply::apply_reply(st, token, &reply, None).await {
        Ok(_) => None,
        Err(e) => Some(format!(
            "E_REPLY: the reply body was not applied: {} ({})",
            e.code(),
            detail(&e)
        )),
    }
}

fn detail(e: &AppError) -> String {
    match e {
        AppError::Rejected(Rejection::Invalid(errs)) => errs
            .iter()
            .map(|f| format!("{} {}", f.field, f.code))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_replies_only() {
        assert!(as_reply(br#" {"text": "Thanks!"}"#).is_some());
        assert!(as_reply(br#"{"replace_original": false, "text": "x"}"#).is_some());
        assert!(as_reply(br#"{"ok": true}"#).is_none());
        assert!(as_reply(b"OK").is_none());
        assert!(as_reply(b"").is_none());
        assert!(as_reply(br#"["text"]"#).is_none());
        assert!(as_reply(br#"{"text": "#).is_none());
    }
}
