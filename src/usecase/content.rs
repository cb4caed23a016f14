//! Building messages from request bodies: schema check, typed blocks,
//! semantic rules, in that order; nothing is stored on failure.

use serde_json::Value;

use crate::domain::blocks::{self, Block};
use crate::domain::ids::new_id;
use crate::domain::model::{Author, Message};
use crate::domain::time::rfc3339;
use crate::error::{ApiError, FieldError};

/// The parts of a message a body may set.
pub struct Content {
    pub text: Option<String>,
    pub blocks: Option<Vec<Block>>,
    pub metadata: Option<Value>,
    pub typing_on_interaction: Option<bool>,
}

/// Checks `body` against `schema` and the block rules.
pub fn parse_content(body: &Value, schema: &jsonschema::Validator) -> Result<Content, ApiError> {
    let errors = crate::schemas::check(schema, body);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let text = body.get("text").and_then(Value::as_str).map(str::to_string);
    let metadata = body.get("metadata").cloned();
    let typing = body.get("typing_on_interaction").and_then(Value::as_bool);
    let blocks = match body.get("blocks") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let mut b: Vec<Block> = serde_json::from_value(v.clone()).map_err(|e| {
                ApiError::Validation(vec![FieldError::new("/blocks", "invalid", e.to_string())])
            })?;
            let errs = blocks::normalize_and_check(&mut b, "/blocks");
            if !errs.is_empty() {
                return Err(ApiError::Validation(errs));
            }
            Some(b)
        }
    };
    Ok(Content {
        text,
        blocks,
        metadata,
        typing_on_interaction: typing,
    })
}

/// A new message by `author` with `content`, created now.
pub fn new_message(
    conversation_id: &str,
    author: Author,
    content: Content,
    now_ms: i64,
) -> Message {
    let at = rfc3339(now_ms);
    Message {
        id: new_id("m"),
        conversation_id: conversation_id.to_string(),
        author,
        text: content.text,
        blocks: content.blocks.unwrap_or_default(),
        attachments: Vec::new(),
        metadata: content
            .metadata
            .unwrap_or_else(|| Value::Object(Default::default())),
        typing_on_interaction: content.typing_on_interaction.unwrap_or(false),
        created_at: at.clone(),
        updated_at: at,
        created_ms: now_ms,
    }
}
