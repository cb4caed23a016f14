//! Building messages from request bodies: schema check, typed blocks,
//! semantic rules, in that order; nothing is stored on failure.

use serde::Deserialize;
use serde_json::Value;

use super::error::AppError;
use crate::domain::blocks::{self, Block};
use crate::domain::error::FieldError;
use crate::domain::ids::{ConversationId, MessageId};
use crate::domain::model::{Author, Message};
use crate::domain::time::rfc3339;

/// The parts of a message a body may set.
pub struct Content {
    pub text: Option<String>,
    pub blocks: Option<Vec<Block>>,
    pub metadata: Option<Value>,
    pub typing_on_interaction: Option<bool>,
}

/// Where a reply goes (a new message's body has neither key).
#[derive(Debug, Default, Clone, Copy)]
pub struct Placement {
    pub replace_original: Option<bool>,
    pub delete_original: bool,
}

/// A message's or a reply's body, read once its schema check passed.
#[derive(Deserialize)]
struct Body {
    text: Option<String>,
    blocks: Option<Vec<Block>>,
    metadata: Option<Value>,
    typing_on_interaction: Option<bool>,
    replace_original: Option<bool>,
    delete_original: Option<bool>,
}

/// Checks `body` against `schema` (every problem with its pointer), reads
/// it into its typed form, then checks the block rules.
pub fn parse_content(
    body: &Value,
    schema: &jsonschema::Validator,
) -> Result<(Content, Placement), AppError> {
    let errors = crate::schemas::check(schema, body);
    if !errors.is_empty() {
        return Err(AppError::invalid(errors));
    }
    // The schema describes every key, so what it let through reads; a
    // block it could not describe fully is refused with the pointer of the
    // blocks.
    let body: Body = Body::deserialize(body).map_err(|e| {
        AppError::invalid(vec![FieldError::new("/blocks", "invalid", e.to_string())])
    })?;
    let mut blocks = body.blocks;
    if let Some(b) = &mut blocks {
        let errs = blocks::normalize_and_check(b, "/blocks");
        if !errs.is_empty() {
            return Err(AppError::invalid(errs));
        }
    }
    Ok((
        Content {
            text: body.text,
            blocks,
            metadata: body.metadata,
            typing_on_interaction: body.typing_on_interaction,
        },
        Placement {
            replace_original: body.replace_original,
            delete_original: body.delete_original == Some(true),
        },
    ))
}

/// A new message by `author` with `content`, created now.
pub fn new_message(
    conversation_id: &ConversationId,
    author: Author,
    content: Content,
    now_ms: i64,
) -> Message {
    let at = rfc3339(now_ms);
    Message {
        id: MessageId::generate(),
        conversation_id: conversation_id.clone(),
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
