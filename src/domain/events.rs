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

#[derive(Serialize)]
struct ButtonClicked<'a> {
    api_version: &'a str,
    block_kit_version: &'a str,
    event: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    event_id: &'a str,
    chatbot_id: &'a str,
    conversation_id: &'a str,
    message_id: &'a str,
    block_id: &'a str,
    action_id: &'a str,
    value: &'a str,
    label: &'a str,
    message_metadata: &'a Value,
    user: &'a Person,
    clicked_at: &'a str,
    response_url: &'a str,
    delivery_attempt: u32,
}

#[derive(Serialize)]
struct FormSubmitted<'a> {
    api_version: &'a str,
    block_kit_version: &'a str,
    event: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    event_id: &'a str,
    chatbot_id: &'a str,
    conversation_id: &'a str,
    message_id: &'a str,
    block_id: &'a str,
    action_id: &'a str,
    form_id: &'a str,
    values: &'a Map<String, Value>,
    message_metadata: &'a Value,
    user: &'a Person,
    submitted_at: &'a str,
    response_url: &'a str,
    delivery_attempt: u32,
}

#[derive(Serialize)]
struct MessageReceived<'a> {
    api_version: &'a str,
    block_kit_version: &'a str,
    event: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    event_id: &'a str,
    chatbot_id: &'a str,
    conversation_id: &'a str,
    message_id: &'a str,
    user: &'a Person,
    text: &'a str,
    received_at: &'a str,
    response_url: &'a str,
    delivery_attempt: u32,
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
    let e = ButtonClicked {
        api_version: API_VERSION,
        block_kit_version: BLOCK_KIT_VERSION,
        event: BUTTON_CLICKED,
        kind: BUTTON_CLICKED,
        event_id: b.event_id,
        chatbot_id: b.chatbot_id,
        conversation_id: b.conversation_id,
        message_id: b.message_id,
        block_id,
        action_id,
        value,
        label,
        message_metadata: metadata(message_metadata),
        user: b.user,
        clicked_at,
        response_url: b.response_url,
        delivery_attempt: 1,
    };
    serde_json::to_vec(&e).unwrap_or_default()
}

pub fn form_submitted(
    b: &Base<'_>,
    block_id: &str,
    form_id: &str,
    values: &Map<String, Value>,
    message_metadata: &Value,
    submitted_at: &str,
) -> Vec<u8> {
    let e = FormSubmitted {
        api_version: API_VERSION,
        block_kit_version: BLOCK_KIT_VERSION,
        event: FORM_SUBMITTED,
        kind: FORM_SUBMITTED,
        event_id: b.event_id,
        chatbot_id: b.chatbot_id,
        conversation_id: b.conversation_id,
        message_id: b.message_id,
        block_id,
        action_id: form_id,
        form_id,
        values,
        message_metadata: metadata(message_metadata),
        user: b.user,
        submitted_at,
        response_url: b.response_url,
        delivery_attempt: 1,
    };
    serde_json::to_vec(&e).unwrap_or_default()
}

pub fn message_received(b: &Base<'_>, text: &str, received_at: &str) -> Vec<u8> {
    let e = MessageReceived {
        api_version: API_VERSION,
        block_kit_version: BLOCK_KIT_VERSION,
        event: MESSAGE_RECEIVED,
        kind: MESSAGE_RECEIVED,
        event_id: b.event_id,
        chatbot_id: b.chatbot_id,
        conversation_id: b.conversation_id,
        message_id: b.message_id,
        user: b.user,
        text,
        received_at,
        response_url: b.response_url,
        delivery_attempt: 1,
    };
    serde_json::to_vec(&e).unwrap_or_default()
}

#[derive(Serialize)]
struct WebhookTest<'a> {
    api_version: &'a str,
    block_kit_version: &'a str,
    event: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    event_id: &'a str,
    chatbot_id: &'a str,
    sent_at: &'a str,
    delivery_attempt: u32,
}

/// A `webhook.test` event: about no conversation, to check an endpoint.
pub fn webhook_test(event_id: &str, chatbot_id: &str, sent_at: &str) -> Vec<u8> {
    let e = WebhookTest {
        api_version: API_VERSION,
        block_kit_version: BLOCK_KIT_VERSION,
        event: WEBHOOK_TEST,
        kind: WEBHOOK_TEST,
        event_id,
        chatbot_id,
        sent_at,
        delivery_attempt: 1,
    };
    serde_json::to_vec(&e).unwrap_or_default()
}
