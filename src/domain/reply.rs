//! Whether one use of a `response_url` may be applied (§5): a retry under
//! an `Idempotency-Key` seen before gets the first result (or a conflict,
//! for another body), whatever uses are left; otherwise a use is applied
//! while the URL has uses left. Pure: the store loads the count and the
//! kept record, asks here, and applies what is decided. What a use does to
//! the message is decided here too ([`Reply`]).

use serde_json::Value;

use crate::domain::blocks::Block;
use crate::domain::error::Rejection;
use crate::domain::model::Message;
use crate::domain::time::rfc3339;

/// The key under which a response_url's first result keeps the hash of its
/// request body (in the same stored text, so no column is needed).
const REQUEST_HASH: &str = "request_hash";

/// What one use of a `response_url` does to the conversation.
// One reply per response_url use, moved once: the size of `Post` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Reply {
    /// Replace the original in place; `None` keeps what it had.
    Replace {
        text: Option<String>,
        blocks: Vec<Block>,
        metadata: Option<Value>,
        typing_on_interaction: Option<bool>,
    },
    Post(Message),
    Delete,
}

impl Reply {
    /// The stream entry the reply becomes.
    pub fn kind(&self) -> &'static str {
        match self {
            Reply::Replace { .. } => "message.updated",
            Reply::Post(_) => "message.created",
            Reply::Delete => "message.deleted",
        }
    }

    /// The message as a replace leaves the original (loaded by the store):
    /// its text and blocks replaced, its metadata and typing flag where the
    /// reply gives them, updated now. Any other reply leaves it as it is.
    pub fn edit(self, original: &mut Message, now_ms: i64) {
        if let Reply::Replace {
            text,
            blocks,
            metadata,
            typing_on_interaction,
        } = self
        {
            original.text = text;
            original.blocks = blocks;
            if let Some(md) = metadata {
                original.metadata = md;
            }
            if let Some(t) = typing_on_interaction {
                original.typing_on_interaction = t;
            }
            original.updated_at = rfc3339(now_ms);
        }
    }
}

/// What to do with one use.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// Apply it, count it, and keep its result under its key, if any.
    Apply,
    /// The key was used before with this body: answer its first result.
    Repeat(Value),
    /// Every use is spent.
    UsedUp,
}

/// Decides one use from the uses already counted, the URL's limit and the
/// record kept under the request's key (`None` without a key or when the
/// key is new). Another body under a kept key is a conflict.
pub fn gate(
    uses: i64,
    max_uses: u32,
    kept: Option<Value>,
    body_hash: &str,
) -> Result<Gate, Rejection> {
    if let Some(mut first) = kept {
        let hash = first.as_object_mut().and_then(|m| m.remove(REQUEST_HASH));
        if hash.is_some_and(|h| h != body_hash) {
            return Err(Rejection::IdempotencyConflict);
        }
        return Ok(Gate::Repeat(first));
    }
    if uses >= i64::from(max_uses) {
        return Ok(Gate::UsedUp);
    }
    Ok(Gate::Apply)
}

/// The text kept under a use's `Idempotency-Key`: its result and the hash
/// of the body that got it.
pub fn record(result: &Value, body_hash: &str) -> String {
    let mut v = result.clone();
    if let Value::Object(m) = &mut v {
        m.insert(REQUEST_HASH.into(), Value::String(body_hash.into()));
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn kept(result: &Value, hash: &str) -> Option<Value> {
        Some(serde_json::from_str(&record(result, hash)).unwrap())
    }

    #[test]
    fn a_replace_edits_the_original_and_keeps_what_it_does_not_name() {
        let original = crate::domain::inbox::tests::message(true);
        let mut m = original.clone();
        let r = Reply::Replace {
            text: Some("Done".into()),
            blocks: Vec::new(),
            metadata: None,
            typing_on_interaction: Some(true),
        };
        assert_eq!(r.kind(), "message.updated");
        r.edit(&mut m, crate::domain::inbox::tests::T0 + 5);
        assert_eq!(m.text.as_deref(), Some("Done"));
        assert!(m.blocks.is_empty());
        assert_eq!(m.metadata, original.metadata, "no metadata given: kept");
        assert!(m.typing_on_interaction);
        assert_eq!(m.updated_at, rfc3339(crate::domain::inbox::tests::T0 + 5));
        assert_eq!(
            (m.id, m.created_at),
            (original.id.clone(), original.created_at.clone())
        );
        // The text is replaced even by none; metadata when given.
        let mut m = original.clone();
        Reply::Replace {
            text: None,
            blocks: original.blocks.clone(),
            metadata: Some(json!({"k": 1})),
            typing_on_interaction: None,
        }
        .edit(&mut m, 0);
        assert_eq!((m.text, m.metadata), (None, json!({"k": 1})));
        assert_eq!(m.typing_on_interaction, original.typing_on_interaction);
        // A post or a delete leaves the original as it is.
        for r in [Reply::Delete, Reply::Post(original.clone())] {
            let mut m = original.clone();
            r.edit(&mut m, 9);
            assert_eq!(m, original);
        }
        assert_eq!(Reply::Delete.kind(), "message.deleted");
        assert_eq!(Reply::Post(original).kind(), "message.created");
    }

    #[test]
    fn a_use_is_applied_while_uses_are_left() {
        assert_eq!(gate(0, 5, None, "h"), Ok(Gate::Apply));
        assert_eq!(gate(4, 5, None, "h"), Ok(Gate::Apply));
        assert_eq!(gate(5, 5, None, "h"), Ok(Gate::UsedUp));
        assert_eq!(gate(0, 0, None, "h"), Ok(Gate::UsedUp));
    }

    #[test]
    fn a_retry_gets_the_first_result_even_when_the_uses_are_spent() {
        let first = json!({"message": {"id": "msg_1", "text": "Done"}});
        assert_eq!(
            gate(5, 5, kept(&first, "h1"), "h1"),
            Ok(Gate::Repeat(first))
        );
    }

    #[test]
    fn another_body_under_a_kept_key_is_a_conflict() {
        let first = json!({"message": {"id": "msg_1"}});
        assert_eq!(
            gate(1, 5, kept(&first, "h1"), "h2"),
            Err(Rejection::IdempotencyConflict)
        );
    }

    #[test]
    fn the_kept_record_is_the_result_and_the_hash_and_nothing_else() {
        let first = json!({"message": {"id": "msg_1"}});
        let text = record(&first, "abc");
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"message": {"id": "msg_1"}, "request_hash": "abc"})
        );
    }

    /// One use: its key (one of three, or none) and its body (one of three).
    fn uses() -> impl Strategy<Value = Vec<(Option<u8>, u8)>> {
        prop::collection::vec((prop::option::of(0u8..3), 0u8..3), 0..20)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Any sequence of uses against a URL of `max` uses, kept the way a
        /// store keeps them: no more than `max` are applied; every retry of
        /// a key with its first body gets that first result; another body
        /// under it is a conflict; a refused or repeated use counts nothing.
        #[test]
        fn uses_are_counted_once_and_keys_answer_their_first_result(seq in uses(), max in 0u32..6) {
            let mut count = 0i64;
            let mut records: HashMap<u8, String> = HashMap::new();
            let mut first_body: HashMap<u8, u8> = HashMap::new();
            for (n, (key, body)) in seq.into_iter().enumerate() {
                let hash = format!("h{body}");
                let prior = key
                    .and_then(|k| records.get(&k))
                    .map(|t| serde_json::from_str(t).unwrap());
                match gate(count, max, prior, &hash) {
                    Ok(Gate::Apply) => {
                        prop_assert!(count < i64::from(max));
                        prop_assert!(key.is_none_or(|k| !records.contains_key(&k)));
                        count += 1;
                        if let Some(k) = key {
                            records.insert(k, record(&json!({"use": n, "body": body}), &hash));
                            first_body.insert(k, body);
                        }
                    }
                    Ok(Gate::Repeat(v)) => {
                        let k = key.unwrap();
                        prop_assert_eq!(first_body[&k], body);
                        prop_assert_eq!(v["body"].clone(), json!(body));
                        prop_assert!(v.get(REQUEST_HASH).is_none(), "the hash is not shown");
                    }
                    Ok(Gate::UsedUp) => {
                        prop_assert_eq!(count, i64::from(max));
                        prop_assert!(key.is_none_or(|k| !records.contains_key(&k)));
                    }
                    Err(e) => {
                        prop_assert_eq!(e, Rejection::IdempotencyConflict);
                        prop_assert_ne!(first_body[&key.unwrap()], body);
                    }
                }
            }
            prop_assert!(count <= i64::from(max));
        }
    }
}
