//! The pure heart of ingest: apply a click or a form submit to a stored
//! message, deciding acceptance and building the event. No I/O: every store
//! calls this inside its own transaction.

use serde_json::{Map, Value};

use crate::domain::blocks::Block;
use crate::domain::error::Rejection;
use crate::domain::events::{self, Base};
use crate::domain::model::{Message, Person};
use crate::domain::time::rfc3339;
use crate::domain::values;

#[derive(Debug, Clone)]
pub enum Action {
    Click {
        block_id: String,
        action_id: String,
        comment: Option<String>,
    },
    Submit {
        form_id: String,
        values: Map<String, Value>,
    },
}

/// Everything about the surroundings the decision needs.
pub struct Context<'a> {
    pub now_ms: i64,
    pub interactive_window_ms: i64,
    pub retention_ms: i64,
    pub conversation_created_ms: i64,
    pub taken_over: bool,
    pub chatbot_id: &'a str,
    pub user: &'a Person,
    pub event_id: &'a str,
    pub response_url: &'a str,
    /// The decline button may carry a comment (an `ask` with `comment`).
    pub allow_comment: bool,
    /// A multiple-choice question: at least one box must be ticked.
    pub require_one_checked: bool,
    /// A member's answer body, recorded as sent (`response`, §6); `None`
    /// for a visitor's click or submit.
    pub answer: Option<&'a Value>,
}

/// An accepted interaction: the event to enqueue.
#[derive(Debug)]
pub struct Accepted {
    pub event_type: &'static str,
    pub payload: Vec<u8>,
    /// The typed values of a form submit.
    pub values: Option<Map<String, Value>>,
    /// Whether the block turned off (its state changed).
    pub changed: bool,
}

/// Why the blocks of a message are off right now, if they are, apart from
/// their own saved state.
pub fn closure_reason(ctx: &Context<'_>, msg: &Message) -> Option<&'static str> {
    if ctx.taken_over {
        Some("takeover")
    } else if ctx.now_ms > ctx.conversation_created_ms.saturating_add(ctx.retention_ms) {
        Some("storage_window")
    } else if ctx.now_ms > msg.created_ms.saturating_add(ctx.interactive_window_ms) {
        Some("expired")
    } else {
        None
    }
}

/// Shows the message as it stands: blocks that are on in storage but closed
/// by time or takeover are shown off with that reason.
pub fn present(msg: &mut Message, reason: Option<&str>) {
    if let Some(reason) = reason {
        msg.turn_off(reason, |_| true);
    }
}

fn closed(reason: &str) -> Rejection {
    Rejection::Closed(reason.to_string())
}

fn block_disabled() -> Rejection {
    Rejection::BlockDisabled
}

/// Checks the state of a block before it accepts an answer.
fn check_open(ctx: &Context<'_>, msg: &Message, block: &Block) -> Result<(), Rejection> {
    let state = block.state();
    if state.disabled {
        return match state.reason.as_deref() {
            Some("used") | None => Err(block_disabled()),
            Some(other) => Err(closed(other)),
        };
    }
    if let Some(reason) = closure_reason(ctx, msg) {
        return Err(closed(reason));
    }
    Ok(())
}

/// Applies `action` to `msg`. On success the message's block state is
/// updated (when the block turns off on use) and the event is returned. A
/// block that stays on leaves the message untouched (`updated_at` too).
pub fn apply(msg: &mut Message, ctx: &Context<'_>, action: &Action) -> Result<Accepted, Rejection> {
    let at = rfc3339(ctx.now_ms);
    let base = Base {
        event_id: ctx.event_id,
        chatbot_id: ctx.chatbot_id,
        conversation_id: &msg.conversation_id,
        message_id: &msg.id,
        user: ctx.user,
        response_url: ctx.response_url,
    };
    let idx = match action {
        Action::Click { block_id, .. } => msg
            .blocks
            .iter()
            .position(|b| matches!(b, Block::Actions { block_id: id, .. } if id == block_id)),
        Action::Submit { form_id, .. } => msg
            .blocks
            .iter()
            .position(|b| matches!(b, Block::Form { form_id: id, .. } if id == form_id)),
    }
    .ok_or_else(Rejection::not_found)?;

    let (payload, event_type, chosen, disable, typed) = match (&msg.blocks[idx], action) {
        (
            Block::Actions {
                block_id,
                elements,
                disable_on_click,
                ..
            },
            Action::Click {
                action_id, comment, ..
            },
        ) => {
            let button = elements
                .iter()
                .find(|b| &b.action_id == action_id)
                .ok_or_else(Rejection::not_found)?;
            if button.is_link() {
                return Err(Rejection::LinkButton);
            }
            if comment.is_some() && !(ctx.allow_comment && action_id == "decline") {
                return Err(Rejection::field(
                    "/comment",
                    "not_allowed",
                    "a comment is only accepted on the decline button of a question that allows one",
                ));
            }
            check_open(ctx, msg, &msg.blocks[idx])?;
            let payload = events::button_clicked(
                &base,
                block_id,
                action_id,
                button.value.as_deref().unwrap_or(""),
                &button.label,
                &msg.metadata,
                &at,
            );
            (
                payload,
                events::BUTTON_CLICKED,
                action_id.clone(),
                *disable_on_click,
                None,
            )
        }
        (
            Block::Form {
                block_id,
                form_id,
                fields,
                disable_on_submit,
                ..
            },
            Action::Submit { values: input, .. },
        ) => {
            check_open(ctx, msg, &msg.blocks[idx])?;
            let typed = values::check(fields, input, "/values").map_err(Rejection::Invalid)?;
            if ctx.require_one_checked && !typed.values().any(|v| v.as_bool() == Some(true)) {
                return Err(Rejection::field(
                    "/values",
                    "required",
                    "choose at least one option",
                ));
            }
            let payload =
                events::form_submitted(&base, block_id, form_id, &typed, &msg.metadata, &at);
            (
                payload,
                events::FORM_SUBMITTED,
                form_id.clone(),
                *disable_on_submit,
                Some(typed),
            )
        }
        _ => return Err(Rejection::not_found()),
    };
    if disable {
        let state = msg.blocks[idx].state_mut();
        state.disabled = true;
        state.reason = Some("used".into());
        state.chosen_action_id = Some(chosen);
        state.answered_by = Some(ctx.user.kind.clone());
        state.values = typed.clone();
        msg.updated_at = at;
    }
    Ok(Accepted {
        event_type,
        payload,
        values: typed,
        changed: disable,
    })
}
