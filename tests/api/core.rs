//! The core of the contract (§0–§4): chatbots, conversations, messages,
//! clicks and forms, closing rules, errors, ids and operations — over real
//! HTTP against a real SQLite file.

mod admin;
mod bodies;
mod bot_messages;
mod clicks;
mod closing;
mod concurrency;
mod conversations;
mod errors;
mod forms;
mod openapi;
mod ops;

use reqwest::Response;
use serde_json::{Value, json};

use crate::helpers::{Bot, Conv, TestApp};

/// A webhook URL nothing listens on (loopback is allowed in tests).
pub const NOWHERE: &str = "http://127.0.0.1:9/hook";

const CROCKFORD: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// `prefix_` and 26 Crockford base32 characters.
pub fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('_'))
        .is_some_and(|r| r.len() == 26 && r.chars().all(|c| CROCKFORD.contains(c)))
}

/// RFC 3339 UTC with milliseconds: `2026-07-17T03:12:44.120Z`.
pub fn is_timestamp(s: &str) -> bool {
    s.len() == 24
        && s.ends_with('Z')
        && s.as_bytes()[19] == b'.'
        && chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

/// Asserts an `application/problem+json` answer with `status` and `code`
/// and returns its body.
pub async fn problem(r: Response, status: u16, code: &str) -> Value {
    let got = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let text = r.text().await.expect("body");
    assert_eq!(got, status, "status of {text}");
    assert_eq!(ct, "application/problem+json", "content type of {text}");
    let v: Value = serde_json::from_str(&text).expect("problem json");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["status"], status, "{v}");
    assert!(
        v["type"]
            .as_str()
            .is_some_and(|t| t.ends_with(&format!("/problems/{code}"))),
        "{v}"
    );
    assert!(v["title"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
    assert!(v["detail"].is_string(), "{v}");
    v
}

/// The `(field, code)` pairs of a 422 problem.
pub fn field_errors(problem: &Value) -> Vec<(String, String)> {
    problem["errors"]
        .as_array()
        .expect("errors array")
        .iter()
        .map(|e| {
            assert!(e["message"].is_string(), "{e}");
            (
                e["field"].as_str().expect("field").to_string(),
                e["code"].as_str().expect("code").to_string(),
            )
        })
        .collect()
}

/// Asserts a 422 `validation_failed` whose errors include `(field, code)`.
pub async fn expect_field_error(r: Response, field: &str, code: &str) -> Vec<(String, String)> {
    let v = problem(r, 422, "validation_failed").await;
    let errs = field_errors(&v);
    assert!(
        errs.contains(&(field.to_string(), code.to_string())),
        "expected {field} {code} in {errs:?}"
    );
    errs
}

/// Sends `body` as is with `content_type`.
pub async fn post_raw(
    app: &TestApp,
    path: &str,
    bearer: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> Response {
    app.client
        .post(app.url(path))
        .bearer_auth(bearer)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("request")
}

pub async fn patch(app: &TestApp, path: &str, bearer: &str, body: &Value) -> Response {
    app.client
        .patch(app.url(path))
        .bearer_auth(bearer)
        .json(body)
        .send()
        .await
        .expect("request")
}

pub async fn json_of(r: Response, status: u16) -> Value {
    let got = r.status().as_u16();
    let text = r.text().await.expect("body");
    assert_eq!(got, status, "{text}");
    serde_json::from_str(&text).expect("json")
}

/// The messages of the visitor's conversation as the widget sees them.
pub async fn widget_messages(app: &TestApp, conv: &Conv) -> Vec<Value> {
    let r = app
        .get(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
        )
        .await;
    json_of(r, 200).await["data"]
        .as_array()
        .cloned()
        .expect("data")
}

/// One message of the conversation, as the widget sees it now.
pub async fn widget_message(app: &TestApp, conv: &Conv, id: &str) -> Value {
    widget_messages(app, conv)
        .await
        .into_iter()
        .find(|m| m["id"] == id)
        .expect("message listed")
}

/// A message with one form `f1` of every field type.
pub async fn form_message(app: &TestApp, bot: &Bot, conv: &Conv, disable_on_submit: bool) -> Value {
    app.bot_message(
        bot,
        conv,
        json!({"text": "Tell us", "metadata": {"flow": "callback"}, "blocks": [
            {"type": "form", "block_id": "fb", "form_id": "f1", "submit_label": "Send",
             "disable_on_submit": disable_on_submit, "fields": [
                {"name": "full_name", "type": "text", "label": "Name", "required": true, "min": 2, "max": 10},
                {"name": "email", "type": "email", "label": "Email", "required": true},
                {"name": "team_size", "type": "number", "label": "Team size", "min": 1, "max": 10000},
                {"name": "topic", "type": "select", "label": "Topic",
                 "options": [{"value": "sales", "label": "Sales"}, {"value": "other", "label": "Other"}]},
                {"name": "details", "type": "textarea", "label": "Details", "max": 2000},
                {"name": "newsletter", "type": "checkbox", "label": "Newsletter"},
                {"name": "consent", "type": "checkbox", "label": "I agree", "required": true}]}]}),
    )
    .await
}

/// Events of the chatbot's deliveries log of `event_type`.
pub async fn events_of(app: &TestApp, bot: &Bot, event_type: &str) -> Vec<Value> {
    app.events(bot)
        .await
        .into_iter()
        .filter(|e| e["type"] == event_type)
        .collect()
}
