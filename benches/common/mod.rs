//! Shared inputs of the micro-benchmarks: a message as the API example
//! builds it (one group of buttons, one form of six fields) and a visitor.

#![allow(dead_code)]

use blockhook::domain::model::{Message, Person};
use serde_json::{Map, Value, json};

pub fn message() -> Message {
    let mut m: Message = serde_json::from_value(json!({
        "id": "m_01JZYA7M3T5V6W7X8Y9Z0ABCDE",
        "conversation_id": "conv_01JZYA7M3T5V6W7X8Y9Z0ABCDE",
        "author": {"kind": "bot"},
        "text": "Want a callback?",
        "metadata": {"flow": "callback_request"},
        "created_at": "2026-07-17T03:12:44.120Z",
        "updated_at": "2026-07-17T03:12:44.120Z",
        "blocks": [
            {"type": "actions", "block_id": "b1", "disable_on_click": false, "elements": [
                {"type": "button", "action_id": "approve", "label": "Approve", "value": "req_991", "style": "primary"},
                {"type": "button", "action_id": "docs", "label": "Docs", "url": "https://example.com/docs"}]},
            {"type": "form", "block_id": "f1", "form_id": "callback", "submit_label": "Send", "disable_on_submit": false,
             "fields": [
                {"name": "full_name", "type": "text", "label": "Name", "required": true, "max": 80.0},
                {"name": "email", "type": "email", "label": "Email", "required": true},
                {"name": "team_size", "type": "number", "label": "Team size", "min": 1.0, "max": 10000.0},
                {"name": "topic", "type": "select", "label": "Topic",
                 "options": [{"value": "sales", "label": "Sales"}, {"value": "other", "label": "Other"}]},
                {"name": "details", "type": "textarea", "label": "Details", "max": 2000.0},
                {"name": "consent", "type": "checkbox", "label": "I agree", "required": true}]}]
    }))
    .expect("message fixture");
    m.created_ms = 1_784_257_964_120;
    m
}

pub fn visitor() -> Person {
    Person {
        kind: "visitor".into(),
        id: "vs_01JZYA7M3T5V6W7X8Y9Z0ABCDE".into(),
        display_name: "Visitor 4821".into(),
    }
}

/// Values as a widget sends them: numbers as strings, the checkbox as "on".
pub fn form_input() -> Map<String, Value> {
    let v = json!({"full_name": "Ada Lovelace", "email": "ada@example.com", "team_size": "12",
                   "topic": "sales", "details": "Call me after five, please.", "consent": "on"});
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub const RESPONSE_URL: &str = "http://127.0.0.1:8080/api/v1/responses/eyJ2IjoxLCJlIjoiZXZ0XzAxSlpZQTdNM1Q1VjZXN1g4WTlaMEFCQ0RFIn0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbi1oZXJl";
