//! Signed, at-least-once delivery (§3 events log, §4 delivery) over real
//! HTTP: real receivers on loopback, real SQLite files, real signatures, and
//! the real binary killed and restarted.

mod endpoint;
pub(crate) mod fanout;
mod isolation;
mod metrics;
mod ordering;
mod process;
mod retries;
mod reviewing;
mod signatures;

use std::net::TcpListener;

use blockhook::domain::model::Chatbot;

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Bot, Conv, Received, TestApp, open_store};

/// A loopback port nothing listens on: connections to it are refused.
pub fn refusing_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A message whose `approve` button can be clicked again and again.
pub async fn reusable_buttons(app: &TestApp, bot: &Bot, conv: &Conv) -> String {
    let m = app.buttons(bot, conv, false).await;
    m["id"].as_str().expect("message id").to_string()
}

/// One accepted click (200) on `approve`.
pub async fn click_ok(app: &TestApp, conv: &Conv, message_id: &str) {
    let r = app.click(conv, message_id, "b1", "approve").await;
    assert_eq!(
        r.status(),
        200,
        "click: {}",
        r.text().await.unwrap_or_default()
    );
}

/// A new conversation with one accepted click; returns the conversation.
pub async fn conversation_with_click(app: &TestApp, bot: &Bot) -> Conv {
    let conv = app.create_conv(bot).await;
    let mid = reusable_buttons(app, bot, &conv).await;
    click_ok(app, &conv, &mid).await;
    conv
}

/// The chatbot's event ids in the order they were accepted.
pub async fn event_ids_in_order(app: &TestApp, bot: &Bot) -> Vec<String> {
    let mut ids: Vec<String> = app
        .events(bot)
        .await
        .iter()
        .map(|e| e["event_id"].as_str().expect("event_id").to_string())
        .collect();
    ids.reverse();
    ids
}

pub fn webhook_id(r: &Received) -> String {
    r.header("webhook-id").expect("webhook-id").to_string()
}

pub fn attempt_header(r: &Received) -> String {
    r.header("x-myaichatbot-attempt")
        .expect("attempt header")
        .to_string()
}

pub async fn patch_bot(app: &TestApp, bot: &Bot, body: Value) -> Value {
    let r = app
        .client
        .patch(app.url(&format!("/api/v1/chatbots/{}", bot.id)))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("patch");
    assert_eq!(r.status(), 200, "patch chatbot");
    r.json().await.expect("json")
}

pub async fn get_bot(app: &TestApp, bot: &Bot) -> Value {
    app.get(&format!("/api/v1/chatbots/{}", bot.id), ADMIN_TOKEN)
        .await
        .json()
        .await
        .expect("json")
}

pub async fn redeliver(app: &TestApp, bot: &Bot, event_id: &str) -> reqwest::Response {
    app.post(
        &format!("/api/v1/events/{event_id}/redeliver"),
        &bot.api_key,
        &json!({}),
    )
    .await
}

/// The statuses of every attempt recorded for an event.
pub fn attempt_codes(event: &Value) -> Vec<Value> {
    event["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .map(|a| a["status_code"].clone())
        .collect()
}

/// Changes a chatbot behind the API's back, as an edit of the database
/// would (for states the API cannot reach directly).
pub async fn edit_bot_in_store(app: &TestApp, bot_id: &str, edit: impl FnOnce(&mut Chatbot)) {
    let store = open_store(app).await;
    let mut b = store.get_chatbot(bot_id).await.expect("chatbot");
    edit(&mut b);
    store.update_chatbot(b).await.expect("update");
}
