//! The records blockhook keeps: chatbots, conversations, messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::blocks::Block;
use crate::domain::ids::{ChatbotId, ConversationId, MessageId};
use crate::domain::origins::AllowedOrigins;
use crate::domain::time::rfc3339;

/// A chatbot as stored (secrets hashed, durations in milliseconds).
#[derive(Debug, Clone)]
pub struct Chatbot {
    pub id: ChatbotId,
    pub name: String,
    pub webhook_url: String,
    pub retention_ms: i64,
    pub signing_secret: String,
    /// The secret replaced by the last rotation and when it stops signing.
    pub previous_secret: Option<(String, i64)>,
    /// Set when the endpoint answered `410 Gone`; deliveries wait.
    pub endpoint_disabled: bool,
    pub member_id: String,
    pub created_at: i64,
    /// Where its widget may be embedded (§9).
    pub allowed_origins: AllowedOrigins,
}

impl Chatbot {
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "name": self.name,
            "webhook_url": self.webhook_url,
            "retention": crate::domain::duration::format(std::time::Duration::from_millis(self.retention_ms as u64)),
            "endpoint_disabled": self.endpoint_disabled,
            "allowed_origins": self.allowed_origins.to_json(),
            "created_at": rfc3339(self.created_at),
        })
    }

    /// The secrets that sign a delivery at `now`: the current one, and the
    /// previous one during its grace period.
    pub fn live_secrets(&self, now_ms: i64) -> Vec<&str> {
        let mut v = vec![self.signing_secret.as_str()];
        if let Some((prev, until)) = &self.previous_secret
            && *until > now_ms
        {
            v.push(prev);
        }
        v
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Person {
    pub kind: String,
    pub id: String,
    pub display_name: String,
}

#[derive(Debug, Clone)]
pub struct Conversation {
    pub id: ConversationId,
    pub chatbot_id: ChatbotId,
    pub visitor: Person,
    pub taken_over_by: Option<Person>,
    pub created_at: i64,
}

/// Who wrote a message: `{"kind": "bot"}` or a person.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Author {
    Person(Person),
    Bot { kind: String },
}

impl Author {
    pub fn bot() -> Self {
        Author::Bot { kind: "bot".into() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Message {
    pub id: MessageId,
    pub conversation_id: ConversationId,
    pub author: Author,
    pub text: Option<String>,
    pub blocks: Vec<Block>,
    /// Files an ask carries (API §7).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::domain::attachment::AttachmentRef>,
    pub metadata: Value,
    #[serde(default)]
    pub typing_on_interaction: bool,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip)]
    pub created_ms: i64,
}

impl Message {
    /// Turns off every block `which` picks that is still on, with `reason`.
    /// Returns whether any block changed.
    pub fn turn_off(&mut self, reason: &str, which: impl Fn(&Block) -> bool) -> bool {
        let mut changed = false;
        for b in &mut self.blocks {
            if !b.state().disabled && which(b) {
                let s = b.state_mut();
                s.disabled = true;
                s.reason = Some(reason.to_string());
                changed = true;
            }
        }
        changed
    }

    /// An answer used every block of the message (an asked question): each
    /// still on turns off, `used`, answered by `by` (`visitor`, `member`).
    pub fn mark_used(&mut self, by: &str) -> bool {
        let mut changed = false;
        for b in &mut self.blocks {
            let s = b.state_mut();
            if !s.disabled {
                s.disabled = true;
                s.reason = Some("used".into());
                s.answered_by = Some(by.to_string());
                changed = true;
            }
        }
        changed
    }

    /// A human took the conversation over: every interactive block turns off
    /// (`takeover`). Returns whether the message changed (then `updated_at`
    /// is now).
    pub fn take_over(&mut self, now_ms: i64) -> bool {
        let changed = self.turn_off("takeover", Block::is_interactive);
        if changed {
            self.updated_at = rfc3339(now_ms);
        }
        changed
    }
}
