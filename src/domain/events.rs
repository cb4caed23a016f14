//! Event payloads, built once as the exact bytes every delivery attempt sends.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::domain::model::Person;

pub const API_VERSION: &str = "2026-07-01";
pub const BLOCK_KIT_VERSION: &str = "1";

pub const BUTTON_CLICKED: &str = "interaction.button_clicked";
pub const FORM_SUBMITTED: &str = "interaction.form_submitted";
pub const MESSAGE_RECEIVED: &str = "message.received";
pub const WEBHOOK_TEST: &str = "webhook.test";

/// What every event shares.
pub struct Base<'a> {
    pub event_id: &'a str,
    pub chatbot_id: &'a str,
    pub conversation_id: &'a str,
    pub message_id: &'a str,
    pub user: &'a Person,
    pub response_url: &'a str,
}

/// The keys every event starts with.
#[derive(Serialize)]
struct Head<'a> {
    api_version: &'a str,
    block_kit_version: &'a str,
    event: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    event_id: &'a str,
    chatbot_id: &'a str,
}

impl<'a> Head<'a> {
    fn new(kind: &'a str, event_id: &'a str, chatbot_id: &'a str) -> Self {
        Self {
            api_version: API_VERSION,
            block_kit_version: BLOCK_KIT_VERSION,
            event: kind,
            kind,
            event_id,
            chatbot_id,
        }
    }
}

/// An event about a message: what every one shares, around its own keys
/// (`head` and `body` flattened in place: the keys stand in this order).
#[derive(Serialize)]
struct Envelope<'a, B> {
    #[serde(flatten)]
    head: Head<'a>,
    conversation_id: &'a str,
    message_id: &'a str,
    #[serde(flatten)]
    body: B,
    response_url: &'a str,
    delivery_attempt: u32,
}

/// `kind`'s event about `b` with `body`'s keys, as bytes.
fn envelope<B: Serialize>(b: &Base<'_>, kind: &str, body: B) -> Vec<u8> {
    let e = Envelope {
        head: Head::new(kind, b.event_id, b.chatbot_id),
        conversation_id: b.conversation_id,
        message_id: b.message_id,
        body,
        response_url: b.response_url,
        delivery_attempt: 1,
    };
    serde_json::to_vec(&e).unwrap_or_default()
}

#[derive(Serialize)]
struct ButtonClicked<'a> {
    block_id: &'a str,
    action_id: &'a str,
    value: &'a str,
    label: &'a str,
    message_metadata: &'a Value,
    user: &'a Person,
    clicked_at: &'a str,
}

#[derive(Serialize)]
struct FormSubmitted<'a> {
    block_id: &'a str,
    action_id: &'a str,
    form_id: &'a str,
    values: &'a Map<String, Value>,
    message_metadata: &'a Value,
    user: &'a Person,
    submitted_at: &'a str,
}

#[derive(Serialize)]
struct MessageReceived<'a> {
    user: &'a Person,
    text: &'a str,
    received_at: &'a str,
}

fn empty_object() -> &'static Value {
    static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Value::Object(Map::new()))
}

fn metadata(m: &Value) -> &Value {
    if m.is_object() { m } else { empty_object() }
}

#[allow(clippy::too_many_arguments)]
pub fn button_clicked(
    b: &Base<'_>,
    block_id: &str,
    action_id: &str,
    value: &str,
    label: &str,
    message_metadata: &Value,
    clicked_at: &str,
) -> Vec<u8> {
    let body = ButtonClicked {
        block_id,
        action_id,
        value,
        label,
        message_metadata: metadata(message_metadata),
        user: b.user,
        clicked_at,
    };
    envelope(b, BUTTON_CLICKED, body)
}

pub fn form_submitted(
    b: &Base<'_>,
    block_id: &str,
    form_id: &str,
    values: &Map<String, Value>,
    message_metadata: &Value,
    submitted_at: &str,
) -> Vec<u8> {
    let body = FormSubmitted {
        block_id,
        action_id: form_id,
        form_id,
        values,
        message_metadata: metadata(message_metadata),
        user: b.user,
        submitted_at,
    };
    envelope(b, FORM_SUBMITTED, body)
}

pub fn message_received(b: &Base<'_>, text: &str, received_at: &str) -> Vec<u8> {
    let body = MessageReceived {
        user: b.user,
        text,
        received_at,
    };
    envelope(b, MESSAGE_RECEIVED, body)
}

#[derive(Serialize)]
struct WebhookTest<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    sent_at: &'a str,
    delivery_attempt: u32,
}

/// A `webhook.test` event: about no conversation, to check an endpoint.
pub fn webhook_test(event_id: &str, chatbot_id: &str, sent_at: &str) -> Vec<u8> {
    let e = WebhookTest {
        head: Head::new(WEBHOOK_TEST, event_id, chatbot_id),
        sent_at,
        delivery_attempt: 1,
    };
    serde_json::to_vec(&e).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top-level keys of an event's bytes, in the order they stand.
    fn keys(bytes: &[u8]) -> Vec<String> {
        let text = std::str::from_utf8(bytes).unwrap();
        let v: Value = serde_json::from_str(text).unwrap();
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort_by_key(|k| text.find(&format!("\"{k}\":")).unwrap());
        keys
    }

    fn base(user: &Person) -> Base<'_> {
        Base {
            event_id: "evt_1",
            chatbot_id: "bot_1",
            conversation_id: "conv_1",
            message_id: "msg_1",
            user,
            response_url: "https://hooks.test/r/tok",
        }
    }

    /// The keys of `own` (space-separated) between those every event
    /// about a message has.
    fn expect(own: &str) -> Vec<String> {
        let head = "api_version block_kit_version event type event_id chatbot_id conversation_id message_id";
        format!("{head} {own} response_url delivery_attempt")
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn each_event_is_flat_with_its_own_keys_between_the_shared_ones() {
        let user = Person {
            kind: "visitor".into(),
            id: "v_1".into(),
            display_name: "Ada".into(),
        };
        let b = base(&user);
        let meta = serde_json::json!({"k": 1});
        let clicked = button_clicked(&b, "b1", "yes", "y", "Yes", &meta, "2026-12-06T00:00:00Z");
        assert_eq!(
            keys(&clicked),
            expect("block_id action_id value label message_metadata user clicked_at")
        );
        let v: Value = serde_json::from_slice(&clicked).unwrap();
        assert_eq!(v["type"], BUTTON_CLICKED);
        assert_eq!(v["event"], BUTTON_CLICKED);
        assert_eq!(v["user"]["display_name"], "Ada");
        assert_eq!(v["delivery_attempt"], 1);

        let values = Map::new();
        let submitted = form_submitted(&b, "f1", "form", &values, &Value::Null, "t");
        assert_eq!(
            keys(&submitted),
            expect("block_id action_id form_id values message_metadata user submitted_at")
        );
        let v: Value = serde_json::from_slice(&submitted).unwrap();
        assert_eq!(
            v["message_metadata"],
            serde_json::json!({}),
            "metadata is an object"
        );
        assert_eq!(v["action_id"], "form");

        let received = message_received(&b, "hello", "t");
        assert_eq!(keys(&received), expect("user text received_at"));

        let test = webhook_test("evt_2", "bot_1", "t");
        let head = &expect("")[..6];
        assert_eq!(keys(&test)[..6], *head);
        assert_eq!(keys(&test)[6..], ["sent_at", "delivery_attempt"]);
    }
}
