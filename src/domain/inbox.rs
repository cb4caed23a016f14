//! Interactions: every interactive block of a bot message (and every
//! question asked with `ask`) as an item a reviewer can answer. Pure
//! conversions between answers, actions and the recorded response.

use crate::domain::ids::{ChatbotId, ConversationId, InteractionId, MessageId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::domain::blocks::Block;
use crate::domain::error::Rejection;
use crate::domain::interact::{self, Accepted, Action, Context};
use crate::domain::model::Message;
use crate::domain::status::InteractionStatus;

mod answer;
pub use answer::{Admit, action_from_answer, admit};

pub const CHOICE: &str = "choice";
pub const TEXT: &str = "text";
pub const APPROVAL: &str = "approval";
pub const CONFIRMATION: &str = "confirmation";

/// How an interaction maps onto the blocks of its message (not shown to
/// clients).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    /// The actions block of a choice/approval/confirmation, or the form of a text.
    pub block_id: String,
    /// The form answering it (text, or a multiple choice shown as checkboxes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form_id: Option<String>,
    /// The free-text form of an ask with `custom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_form_id: Option<String>,
    #[serde(default)]
    pub multiple: bool,
    #[serde(default)]
    pub allow_comment: bool,
    /// Raised by `ask`: one per conversation at a time, answered as a whole.
    #[serde(default)]
    pub ask: bool,
    /// Set when a reply removed the block: clicks on it answer 410 with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_reason: Option<String>,
}

/// An interaction to store with its message.
#[derive(Debug, Clone)]
pub struct NewInteraction {
    pub id: InteractionId,
    pub chatbot_id: ChatbotId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub kind: &'static str,
    pub prompt: String,
    pub payload: Value,
    pub spec: Spec,
    pub expires_at: Option<i64>,
    pub created_at: i64,
}

/// A stored interaction.
#[derive(Debug, Clone)]
pub struct Interaction {
    pub id: InteractionId,
    pub chatbot_id: ChatbotId,
    pub conversation_id: ConversationId,
    pub message_id: MessageId,
    pub kind: String,
    pub status: InteractionStatus,
    pub prompt: String,
    pub payload: Value,
    pub spec: Spec,
    pub response: Option<Value>,
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub answered_at: Option<i64>,
}

impl Interaction {
    /// The status as of `now`: a pending interaction past its deadline is expired.
    pub fn status_at(&self, now_ms: i64) -> InteractionStatus {
        if self.status == InteractionStatus::Pending && self.expires_at.is_some_and(|t| now_ms > t)
        {
            InteractionStatus::Expired
        } else {
            self.status
        }
    }

    pub fn to_json(&self, now_ms: i64) -> Value {
        use crate::domain::time::rfc3339;
        json!({
            "id": self.id,
            "conversation_id": self.conversation_id,
            "message_id": self.message_id,
            "block_id": self.spec.block_id,
            "type": self.kind,
            "status": self.status_at(now_ms),
            "prompt": self.prompt,
            "payload": self.payload,
            "response": self.response,
            "expires_at": self.expires_at.map(rfc3339),
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
            "answered_at": self.answered_at.map(rfc3339),
        })
    }
}

/// The interactions of a new bot message: one per interactive block.
pub fn from_message(
    msg: &Message,
    chatbot_id: &ChatbotId,
    expires_at: Option<i64>,
) -> Vec<NewInteraction> {
    let mut out = Vec::new();
    for block in &msg.blocks {
        let (kind, payload, spec, prompt) = match block {
            Block::Actions {
                block_id, elements, ..
            } => {
                let options: Vec<Value> = elements
                    .iter()
                    .filter(|b| !b.is_link())
                    .map(|b| json!({"id": b.action_id, "label": b.label}))
                    .collect();
                if options.is_empty() {
                    continue;
                }
                let spec = Spec {
                    block_id: block_id.clone(),
                    ..Spec::default()
                };
                (
                    CHOICE,
                    json!({"options": options}),
                    spec,
                    msg.text.clone().unwrap_or_default(),
                )
            }
            Block::Form {
                block_id,
                form_id,
                fields,
                title,
                ..
            } => {
                let spec = Spec {
                    block_id: block_id.clone(),
                    form_id: Some(form_id.clone()),
                    ..Spec::default()
                };
                let prompt = title
                    .clone()
                    .or_else(|| msg.text.clone())
                    .unwrap_or_default();
                (TEXT, json!({"fields": fields}), spec, prompt)
            }
        };
        out.push(NewInteraction {
            id: crate::domain::ids::InteractionId::generate(),
            chatbot_id: chatbot_id.clone(),
            conversation_id: msg.conversation_id.clone(),
            message_id: msg.id.clone(),
            kind,
            prompt,
            payload,
            spec,
            expires_at,
            created_at: msg.created_ms,
        });
    }
    out
}

/// Whether `block_id` belongs to this interaction.
pub fn covers(spec: &Spec, msg: &Message, block_id: &str) -> bool {
    if spec.ask {
        return msg.blocks.iter().any(|b| b.block_id() == block_id);
    }
    spec.block_id == block_id
}

/// The recorded response of an accepted action (without `submitted_at`).
pub fn response_of(
    kind: &str,
    spec: &Spec,
    action: &Action,
    values: Option<&Map<String, Value>>,
) -> Value {
    match action {
        Action::Click {
            action_id, comment, ..
        } => match kind {
            CONFIRMATION => json!({"type": CONFIRMATION, "confirmed": action_id == "accept"}),
            APPROVAL => {
                let mut v = json!({"type": APPROVAL, "approved": action_id == "accept"});
                if let Some(c) = comment {
                    v["comment"] = json!(c);
                }
                v
            }
            _ => json!({"type": CHOICE, "option_ids": [action_id]}),
        },
        Action::Submit { form_id, .. } => {
            let values = values.cloned().unwrap_or_default();
            if spec.custom_form_id.as_deref() == Some(form_id.as_str()) {
                let text = values.get("custom").cloned().unwrap_or(json!(""));
                json!({"type": TEXT, "text": text})
            } else if spec.multiple {
                let ids: Vec<&String> = values
                    .iter()
                    .filter(|(_, v)| v.as_bool() == Some(true))
                    .map(|(k, _)| k)
                    .collect();
                json!({"type": CHOICE, "option_ids": ids})
            } else {
                json!({"type": TEXT, "values": values})
            }
        }
    }
}

/// What `ask` answers, from a recorded response.
pub fn ask_answer(response: &Value) -> Value {
    match response.get("type").and_then(Value::as_str) {
        // A member's own answer to a choice asked with `custom`.
        Some(CHOICE) if response.get("custom").is_some_and(Value::is_string) => {
            json!({"answer": "custom", "text": response["custom"]})
        }
        Some(CHOICE) => {
            json!({"answer": "chose", "options": response.get("option_ids").cloned().unwrap_or(json!([]))})
        }
        Some(TEXT) => {
            let text = response
                .get("text")
                .cloned()
                .or_else(|| {
                    response
                        .get("values")
                        .and_then(|v| v.get("custom"))
                        .cloned()
                })
                .unwrap_or(json!(""));
            json!({"answer": "custom", "text": text})
        }
        Some(CONFIRMATION) => {
            if response.get("confirmed").and_then(Value::as_bool) == Some(true) {
                json!({"answer": "accepted"})
            } else {
                json!({"answer": "declined"})
            }
        }
        Some(APPROVAL) => {
            if response.get("approved").and_then(Value::as_bool) == Some(true) {
                json!({"answer": "accepted"})
            } else {
                let mut v = json!({"answer": "declined"});
                if let Some(c) = response.get("comment").filter(|c| c.is_string()) {
                    v["comment"] = c.clone();
                }
                v
            }
        }
        _ => json!({"answer": "withdrawn"}),
    }
}

/// The block an action targets.
pub fn action_block_id(msg: &Message, action: &Action) -> Option<String> {
    match action {
        Action::Click { block_id, .. } => Some(block_id.clone()),
        Action::Submit { form_id, .. } => msg.blocks.iter().find_map(|b| match b {
            Block::Form {
                form_id: id,
                block_id,
                ..
            } if id == form_id => Some(block_id.clone()),
            _ => None,
        }),
    }
}

/// The interaction an action answers, among its message's interactions.
pub fn pick<'a>(
    list: &'a mut [Interaction],
    msg: &Message,
    action: &Action,
) -> Option<&'a mut Interaction> {
    let block = action_block_id(msg, action)?;
    list.iter_mut().find(|i| covers(&i.spec, msg, &block))
}

/// Records an accepted answer on a pending interaction; an asked question
/// is answered as a whole, so every block of its message turns off. Returns
/// whether a block changed. A member's answer is recorded exactly as sent
/// (`answer`), a visitor's action as the answer it amounts to; both with
/// `submitted_at`.
pub fn settle(
    inter: &mut Interaction,
    msg: &mut Message,
    action: &Action,
    values: Option<&Map<String, Value>>,
    answer: Option<&Value>,
    now_ms: i64,
    by: &str,
) -> bool {
    let mut response = match answer {
        Some(body @ Value::Object(_)) => body.clone(),
        _ => response_of(&inter.kind, &inter.spec, action, values),
    };
    response["submitted_at"] = json!(crate::domain::time::rfc3339(now_ms));
    inter.status = InteractionStatus::Answered;
    inter.response = Some(response);
    inter.answered_at = Some(now_ms);
    inter.updated_at = now_ms;
    inter.spec.ask && msg.mark_used(by)
}

/// What an accepted visitor action does, decided before anything is written.
#[derive(Debug)]
pub struct Decided {
    pub accepted: Accepted,
    /// The interaction it answered, if that was pending.
    pub answered: Option<Interaction>,
    /// Whether a block of the message changed: only then is the message
    /// saved and shown again (`message.updated`).
    pub changed: bool,
}

/// Whether the block an action names is gone from its message: only then do
/// closed interactions matter (a reply removed the block, `replaced_block`),
/// so a store loads just the pending and asked ones otherwise.
pub fn block_gone(msg: &Message, action: &Action) -> bool {
    !action_block_id(msg, action).is_some_and(|b| msg.blocks.iter().any(|x| x.block_id() == b))
}

/// The one decision of a click or a submit, shared by every store: checks
/// the interactions of the message (`interactions`, as loaded under the
/// store's lock), applies the action to `msg`, settles a pending
/// interaction. `ctx.allow_comment` and `ctx.require_one_checked` are set
/// here from the interaction the action answers.
pub fn decide(
    interactions: &mut [Interaction],
    msg: &mut Message,
    action: &Action,
    mut ctx: Context<'_>,
) -> Result<Decided, Rejection> {
    if let Some(e) = replaced_block(interactions, msg, action) {
        return Err(e);
    }
    let inter = pick(interactions, msg, action);
    if let Some(i) = &inter {
        ctx.allow_comment = i.spec.allow_comment;
        ctx.require_one_checked = i.spec.multiple
            && matches!(action, Action::Submit { form_id, .. } if Some(form_id) == i.spec.form_id.as_ref());
    }
    let accepted = interact::apply(msg, &ctx, action)?;
    let mut changed = accepted.changed;
    let mut answered = None;
    if let Some(i) = inter
        && i.status == InteractionStatus::Pending
    {
        changed |= settle(
            i,
            msg,
            action,
            accepted.values.as_ref(),
            ctx.answer,
            ctx.now_ms,
            &ctx.user.kind,
        );
        answered = Some(i.clone());
    }
    if changed {
        msg.updated_at = crate::domain::time::rfc3339(ctx.now_ms);
    }
    Ok(Decided {
        accepted,
        answered,
        changed,
    })
}

/// Ends a pending interaction: its blocks turn off with `reason`. One no
/// longer pending (an answer won) is left as it is: returns whether it
/// closed.
pub fn close(
    inter: &mut Interaction,
    msg: &mut Message,
    status: InteractionStatus,
    reason: &str,
    now_ms: i64,
) -> bool {
    if inter.status != InteractionStatus::Pending {
        return false;
    }
    inter.status = status;
    inter.updated_at = now_ms;
    let spec = &inter.spec;
    msg.turn_off(reason, |b| spec.ask || b.block_id() == spec.block_id);
    msg.updated_at = crate::domain::time::rfc3339(now_ms);
    true
}

/// What a takeover changes in a conversation, given its live messages and
/// its pending interactions: every pending interaction is cancelled
/// (`takeover`), its blocks turning off, and every other interactive block
/// turns off too. Leaves the rows as the takeover leaves them and returns,
/// per message, whether it changed. An interaction whose message is not
/// among `messages` (deleted) is cancelled on its own.
pub fn take_over(messages: &mut [Message], pending: &mut [Interaction], now_ms: i64) -> Vec<bool> {
    let mut changed = vec![false; messages.len()];
    for i in pending
        .iter_mut()
        .filter(|i| i.status == InteractionStatus::Pending)
    {
        match messages.iter().position(|m| m.id == i.message_id) {
            Some(k) => {
                changed[k] |= close(
                    i,
                    &mut messages[k],
                    InteractionStatus::Cancelled,
                    "takeover",
                    now_ms,
                );
            }
            None => {
                i.status = InteractionStatus::Cancelled;
                i.updated_at = now_ms;
            }
        }
    }
    for (m, c) in messages.iter_mut().zip(changed.iter_mut()) {
        *c |= m.take_over(now_ms);
    }
    changed
}

/// Whether a reviewer may still answer: pending and before its deadline.
pub fn not_pending() -> Rejection {
    Rejection::NotPending
}

/// Whether an interaction is about the block an action names (which may no
/// longer be in the message).
pub fn names(spec: &Spec, action: &Action) -> bool {
    match action {
        Action::Click { block_id, .. } => &spec.block_id == block_id,
        Action::Submit { form_id, .. } => {
            spec.form_id.as_ref() == Some(form_id) || spec.custom_form_id.as_ref() == Some(form_id)
        }
    }
}

/// A click on a block a reply removed: 410 `interaction_closed`, `replaced`.
pub fn replaced_block(list: &[Interaction], msg: &Message, action: &Action) -> Option<Rejection> {
    if !block_gone(msg, action) {
        return None;
    }
    list.iter()
        .find(|i| names(&i.spec, action) && i.spec.closed_reason.is_some())
        .map(|i| {
            Rejection::Closed(
                i.spec
                    .closed_reason
                    .clone()
                    .unwrap_or_else(|| "replaced".into()),
            )
        })
}

/// The inbox changes a reply brings: for a deleted message its pending
/// interactions are cancelled; otherwise see [`after_replace`].
pub fn after_reply(
    existing: Vec<Interaction>,
    msg: &Message,
    deleted: bool,
    chatbot_id: &ChatbotId,
    window_ms: i64,
    now_ms: i64,
) -> (Vec<Interaction>, Vec<NewInteraction>) {
    if !deleted {
        return after_replace(
            &existing,
            msg,
            chatbot_id,
            Some(msg.created_ms + window_ms),
            now_ms,
        );
    }
    let changed = existing
        .into_iter()
        .filter(|i| i.status == InteractionStatus::Pending)
        .map(|mut i| {
            i.status = InteractionStatus::Cancelled;
            i.spec.closed_reason = Some("deleted".into());
            i.updated_at = now_ms;
            i
        })
        .collect();
    (changed, Vec::new())
}

/// After a reply replaced a message's blocks: interactions of removed
/// blocks close (`replaced`), new interactive blocks get interactions.
/// Returns the interactions to update and the ones to create.
pub fn after_replace(
    existing: &[Interaction],
    msg: &Message,
    chatbot_id: &ChatbotId,
    expires_at: Option<i64>,
    now_ms: i64,
) -> (Vec<Interaction>, Vec<NewInteraction>) {
    let present = |block_id: &str| msg.blocks.iter().any(|b| b.block_id() == block_id);
    let mut changed = Vec::new();
    for i in existing {
        if i.spec.closed_reason.is_none() && !present(&i.spec.block_id) {
            let mut i = i.clone();
            i.spec.closed_reason = Some("replaced".into());
            if i.status == InteractionStatus::Pending {
                i.status = InteractionStatus::Cancelled;
            }
            i.updated_at = now_ms;
            changed.push(i);
        }
    }
    let fresh = from_message(msg, chatbot_id, expires_at)
        .into_iter()
        .filter(|n| {
            !existing
                .iter()
                .any(|i| i.spec.block_id == n.spec.block_id && i.spec.closed_reason.is_none())
        })
        .collect();
    (changed, fresh)
}

#[cfg(test)]
mod answer_tests;
#[cfg(test)]
pub(crate) mod tests;
