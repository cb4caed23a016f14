//! The records blockhook keeps: chatbots, conversations, messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::blocks::Block;
use crate::domain::time::rfc3339;

/// A chatbot as stored (secrets hashed, durations in milliseconds).
#[derive(Debug, Clone)]
pub struct Chatbot {
    pub id: String,
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
}

impl Chatbot {
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "id": self.id,
            "name": self.name,
            "webhook_url": self.webhook_url,
            "retention": crate::domain::duration::format(std::time::Duration::from_millis(self.retention_ms as u64)),
            "endpoint_disabled": self.endpoint_disabled,
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
    pub id: String,
    pub chatbot_id: String,
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
    pub id: String,
    pub conversation_id: String,
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
