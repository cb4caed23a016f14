//! response_url replies (every mode, limits, expiry, tampering, webhook reply
//! bodies) over real HTTP; the live widget stream in `stream`.

pub mod sse;
mod stream;

use std::time::{Duration, Instant};

use blockhook::config::Database;
use serde_json::{Value, json};

use crate::helpers::{
    Answer, Bot, Conv, Receiver, TestApp, fresh_postgres_database, spawn_app, spawn_app_with,
};
use sse::{Sse, SseEvent};

const WAIT: Duration = Duration::from_secs(5);

/// A chatbot, a conversation, a message with buttons and the receiver.
struct Setup {
    app: TestApp,
    receiver: Receiver,
    bot: Bot,
    conv: Conv,
    message_id: String,
}

async fn setup_on(app: TestApp, receiver: Receiver) -> Setup {
    let bot = app.create_bot(&receiver.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    Setup {
        message_id: msg["id"].as_str().expect("id").into(),
        app,
        receiver,
        bot,
        conv,
    }
}

async fn setup() -> Setup {
    setup_on(spawn_app().await, Receiver::start().await).await
}

impl Setup {
    /// Clicks `approve` and returns the response_url of the event delivered.
    async fn click_for_url(&mut self) -> String {
        let r = self
            .app
            .click(&self.conv, &self.message_id, "b1", "approve")
            .await;
        assert_eq!(r.status(), 200, "click");
        let got = self.receiver.take(1, WAIT).await;
        let url = got[0].json()["response_url"]
            .as_str()
            .expect("response_url")
            .to_string();
        assert!(
            url.starts_with(&format!("{}/api/v1/responses/", self.app.address)),
            "{url}"
        );
        url
    }

    async fn messages(&self) -> Vec<Value> {
        let v: Value = self
            .app
            .get(
                &format!("/widget/v1/conversations/{}/messages", self.conv.id),
                &self.conv.token,
            )
            .await
            .json()
            .await
            .expect("json");
        v["data"].as_array().cloned().expect("data")
    }

    async fn message(&self, id: &str) -> Option<Value> {
        self.messages()
            .await
            .into_iter()
            .find(|m| m["id"] == json!(id))
    }
}

async fn reply(app: &TestApp, url: &str, body: Value) -> (u16, Value) {
    reply_with_key(app, url, None, body).await
}

async fn reply_with_key(app: &TestApp, url: &str, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = app.client.post(url).json(&body);
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await.expect("reply");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["field"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn kinds(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

fn new_blocks() -> Value {
    json!([{"type": "actions", "block_id": "b2", "elements": [
        {"type": "button", "action_id": "undo", "label": "Undo", "value": "u1"}]}])
}

store_test! {
async fn replace_in_place_keeps_the_id_and_streams_message_updated() {
    let mut s = setup().await;
    let mut stream = Sse::connect(&s.app, &s.conv, None).await;
    let url = s.click_for_url().await;
    let sent = Instant::now();
    let (status, body) = reply(
        &s.app,
        &url,
        json!({"text": "Approved", "blocks": new_blocks(), "metadata": {"stage": "done"}}),
    )
    .await;
    let answered = sent.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"]["id"], json!(s.message_id));
    assert_eq!(body["message"]["text"], "Approved");

    let seen = stream
        .until(Duration::from_secs(2), |e| {
            e.event == "message.updated" && e.data["text"] == "Approved"
        })
        .await;
    let updated = seen.last().expect("event");
    eprintln!(
        "message.updated arrived {:?} after the reply was sent (answered in {answered:?})",
        updated.at - sent
    );
    assert!(updated.at - sent < Duration::from_secs(2));
    assert_eq!(updated.data["id"], json!(s.message_id));
    assert_eq!(updated.data["blocks"][0]["block_id"], "b2");
    let ids: Vec<i64> = seen.iter().map(|e| e.id.expect("event id")).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascend: {ids:?}");

    let m = s.message(&s.message_id).await.expect("still listed");
    assert_eq!(m["text"], "Approved");
    assert_eq!(m["metadata"], json!({"stage": "done"}));
    let blocks = m["blocks"].as_array().expect("blocks");
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0]["block_id"], "b2");
    assert_eq!(blocks[0]["state"]["disabled"], false);
    assert_eq!(s.messages().await.len(), 1, "no new message");
}
}

store_test! {
async fn replace_original_false_posts_a_new_bot_message() {
    let mut s = setup().await;
    let mut stream = Sse::connect(&s.app, &s.conv, None).await;
    let url = s.click_for_url().await;
    let (status, body) = reply(
        &s.app,
        &url,
        json!({"replace_original": false, "text": "Noted, a person will call you"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let new_id = body["message"]["id"].as_str().expect("id").to_string();
    assert_ne!(new_id, s.message_id);
    assert_eq!(body["message"]["author"]["kind"], "bot");

    let seen = stream.until(WAIT, |e| e.event == "message.created").await;
    assert_eq!(seen.last().expect("event").data["id"], json!(new_id));

    let all = s.messages().await;
    assert_eq!(all.len(), 2);
    let original = s.message(&s.message_id).await.expect("original kept");
    assert_eq!(original["text"], "Approve?");
    assert_eq!(
        original["blocks"][0]["state"]["chosen_action_id"],
        "approve"
    );
}
}

store_test! {
async fn delete_original_removes_the_message() {
    let mut s = setup().await;
    let mut stream = Sse::connect(&s.app, &s.conv, None).await;
    let url = s.click_for_url().await;
    let (status, body) = reply(&s.app, &url, json!({"delete_original": true})).await;
    assert_eq!(status, 200, "{body}");

    let seen = stream.until(WAIT, |e| e.event == "message.deleted").await;
    assert_eq!(
        seen.last().expect("event").data,
        json!({"message_id": s.message_id})
    );
    assert!(
        s.message(&s.message_id).await.is_none(),
        "gone from the list"
    );

    // Nothing left to replace.
    let (status, body) = reply(&s.app, &url, json!({"text": "too late"})).await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["code"], "response_url_expired");
}
}

store_test! {
async fn reply_blocks_are_checked_exactly_as_for_new_messages() {
    let mut s = setup().await;
    let url = s.click_for_url().await;
    let bad = json!([
        {"type": "actions", "elements": [
            {"type": "button", "action_id": "a", "label": "A"},
            {"type": "button", "action_id": "a", "label": "B"},
            {"type": "button", "action_id": "c", "label": "C", "value": "v", "url": "https://example.com"}]},
        {"type": "form", "fields": [
            {"name": "n", "type": "number", "label": "N", "min": 5, "max": 1}]}]);

    let (status, problem) = reply(&s.app, &url, json!({"text": "x", "blocks": bad})).await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["code"], "validation_failed");
    let got = fields(&problem);
    for f in [
        "/blocks/0/elements/1/action_id",
        "/blocks/0/elements/2/url",
        "/blocks/1/fields/0/max",
    ] {
        assert!(got.contains(&f.to_string()), "{f} in {got:?}");
    }

    let r = s
        .app
        .post(
            &format!("/api/v1/conversations/{}/messages", s.conv.id),
            &s.bot.api_key,
            &json!({"text": "x", "blocks": bad}),
        )
        .await;
    assert_eq!(r.status(), 422);
    let as_message: Value = r.json().await.expect("json");
    assert_eq!(
        as_message["errors"], problem["errors"],
        "same errors both ways"
    );

    let (status, problem) = reply(&s.app, &url, json!({"text": "x", "colour": "red"})).await;
    assert_eq!(status, 422);
    assert_eq!(fields(&problem), vec!["/colour".to_string()]);

    let (status, _) = reply(&s.app, &url, json!({"text": 5})).await;
    assert_eq!(status, 422);

    let m = s.message(&s.message_id).await.expect("message");
    assert_eq!(m["text"], "Approve?", "nothing changed");
}
}

store_test! {
async fn a_reused_idempotency_key_with_another_body_is_409() {
    let mut s = setup().await;
    let url = s.click_for_url().await;
    let (status, first) = reply_with_key(&s.app, &url, Some("k1"), json!({"text": "first"})).await;
    assert_eq!(status, 200, "{first}");
    let (status, body) =
        reply_with_key(&s.app, &url, Some("k1"), json!({"text": "second"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "idempotency_key_conflict");
    // The same body in another key order is the same body.
    let (status, again) = reply_with_key(
        &s.app,
        &url,
        Some("k1"),
        serde_json::from_str(r#"{"text": "first"}"#).unwrap(),
    )
    .await;
    assert_eq!((status, &again), (200, &first));
    let m = s.message(&s.message_id).await.expect("message");
    assert_eq!(m["text"], "first", "the conflicting body changed nothing");
    // The conflict used none of the 5: four more uses work.
    for n in 2..=5 {
        let (status, body) =
            reply_with_key(&s.app, &url, Some(&format!("k{n}")), json!({"text": n.to_string()})).await;
        assert_eq!(status, 200, "use {n}: {body}");
    }
}
}

store_test! {
async fn five_uses_then_410_and_idempotent_retries_do_not_count() {
    let mut s = setup().await;
    let url = s.click_for_url().await;

    let (status, first) = reply_with_key(&s.app, &url, Some("k1"), json!({"text": "use 1"})).await;
    assert_eq!(status, 200, "{first}");
    let (status, again) = reply_with_key(&s.app, &url, Some("k1"), json!({"text": "use 1"})).await;
    assert_eq!(status, 200);
    assert_eq!(again, first, "a retry returns the first result");

    for n in 2..=5 {
        let (status, body) = reply_with_key(
            &s.app,
            &url,
            Some(&format!("k{n}")),
            json!({"text": format!("use {n}")}),
        )
        .await;
        assert_eq!(status, 200, "use {n}: {body}");
    }
    let (status, body) = reply(&s.app, &url, json!({"text": "use 6"})).await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["code"], "response_url_expired");
    assert_eq!(body["status"], 410);

    // A retry of an applied use still returns its result, even now.
    let (status, again) = reply_with_key(&s.app, &url, Some("k1"), json!({"text": "use 1"})).await;
    assert_eq!(status, 200);
    assert_eq!(again, first);

    let m = s.message(&s.message_id).await.expect("message");
    assert_eq!(m["text"], "use 5");
}
}

store_test! {
async fn an_expired_response_url_is_410() {
    let app = spawn_app_with(|c| c.response_url_ttl = Duration::from_millis(300)).await;
    let mut s = setup_on(app, Receiver::start().await).await;
    let url = s.click_for_url().await;
    // Let the token's lifetime pass.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (status, body) = reply(&s.app, &url, json!({"text": "late"})).await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["code"], "response_url_expired");
    let m = s.message(&s.message_id).await.expect("message");
    assert_eq!(m["text"], "Approve?");
}
}

store_test! {
async fn altered_and_unknown_tokens_are_404() {
    let mut s = setup().await;
    let url = s.click_for_url().await;
    let (base, token) = url.rsplit_once('/').expect("token");
    let chars: Vec<char> = token.chars().collect();
    for i in [0, chars.len() / 4, chars.len() / 2, chars.len() * 3 / 4] {
        let mut altered = chars.clone();
        altered[i] = if altered[i] == 'A' { 'B' } else { 'A' };
        let altered: String = altered.into_iter().collect();
        let (status, body) =
            reply(&s.app, &format!("{base}/{altered}"), json!({"text": "x"})).await;
        assert_eq!(status, 404, "altered at {i}: {body}");
        assert_eq!(body["code"], "not_found");
    }
    for unknown in ["nope", "a.b", "x"] {
        let (status, _) = reply(&s.app, &format!("{base}/{unknown}"), json!({"text": "x"})).await;
        assert_eq!(status, 404, "{unknown}");
    }
    // A token signed by another server's key.
    let mut other = setup().await;
    let foreign = other.click_for_url().await;
    let foreign_token = foreign.rsplit_once('/').expect("token").1;
    let (status, _) = reply(
        &s.app,
        &format!("{base}/{foreign_token}"),
        json!({"text": "x"}),
    )
    .await;
    assert_eq!(status, 404);

    let m = s.message(&s.message_id).await.expect("message");
    assert_eq!(m["text"], "Approve?");
    // The genuine token still works.
    let (status, _) = reply(&s.app, &url, json!({"text": "ok"})).await;
    assert_eq!(status, 200);
}
}

store_test! {
async fn replies_to_message_received_post_new_messages() {
    let mut s = setup().await;
    let r = s
        .app
        .post(
            &format!("/widget/v1/conversations/{}/messages", s.conv.id),
            &s.conv.token,
            &json!({"text": "Do you ship to Norway?"}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let visitor_msg: Value = r.json().await.expect("json");
    let got = s.receiver.take(1, WAIT).await;
    let event = got[0].json();
    assert_eq!(event["type"], "message.received");
    let url = event["response_url"].as_str().expect("url").to_string();

    for (body, field) in [
        (
            json!({"text": "x", "replace_original": true}),
            "/replace_original",
        ),
        (json!({"delete_original": true}), "/delete_original"),
    ] {
        let (status, problem) = reply(&s.app, &url, body).await;
        assert_eq!(status, 422, "{problem}");
        assert_eq!(fields(&problem), vec![field.to_string()]);
    }

    let (status, body) = reply(&s.app, &url, json!({"text": "Yes, we do."})).await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["message"]["id"], visitor_msg["id"]);
    assert_eq!(body["message"]["author"]["kind"], "bot");
    let (status, _) = reply(
        &s.app,
        &url,
        json!({"text": "And to Iceland.", "replace_original": false}),
    )
    .await;
    assert_eq!(status, 200);

    let all = s.messages().await;
    assert_eq!(all.len(), 4, "buttons, visitor message and two replies");
    let kept = s
        .message(visitor_msg["id"].as_str().expect("id"))
        .await
        .expect("visitor message kept");
    assert_eq!(kept["text"], "Do you ship to Norway?");
}
}

store_test! {
async fn a_webhook_reply_body_is_applied_like_a_response_url_post() {
    let receiver = Receiver::start_with(vec![Answer::json(
        200,
        json!({"text": "Thanks, approved", "metadata": {"stage": "done"}}),
    )])
    .await;
    let mut s = setup_on(spawn_app().await, receiver).await;
    let mut stream = Sse::connect(&s.app, &s.conv, None).await;
    let url = s.click_for_url().await;
    let event_id = s.receiver.all()[0].json()["event_id"]
        .as_str()
        .expect("event_id")
        .to_string();

    let seen = stream
        .until(WAIT, |e| {
            e.event == "message.updated" && e.data["text"] == "Thanks, approved"
        })
        .await;
    assert_eq!(seen.last().expect("event").data["id"], json!(s.message_id));
    let m = s.message(&s.message_id).await.expect("message");
    assert_eq!(m["metadata"], json!({"stage": "done"}));

    let e = s
        .app
        .wait_event(&s.bot, &event_id, WAIT, |e| e["status"] == "succeeded")
        .await;
    assert_eq!(e["status"], "succeeded");
    assert_eq!(e["attempts"][0]["error"], Value::Null);

    // The webhook's reply was one of the five uses.
    for n in 2..=5 {
        let (status, _) = reply(&s.app, &url, json!({"text": format!("use {n}")})).await;
        assert_eq!(status, 200, "use {n}");
    }
    let (status, _) = reply(&s.app, &url, json!({"text": "use 6"})).await;
    assert_eq!(status, 410);
}
}

store_test! {
async fn a_bad_webhook_reply_body_is_recorded_and_the_delivery_still_succeeds() {
    let receiver = Receiver::start_with(vec![Answer::json(
        200,
        json!({"text": "x", "blocks": [{"type": "actions", "elements": [
            {"type": "button", "action_id": "a", "label": "A"},
            {"type": "button", "action_id": "a", "label": "B"}]}]}),
    )])
    .await;
    let mut s = setup_on(spawn_app().await, receiver).await;
    s.click_for_url().await;
    let event_id = s.receiver.all()[0].json()["event_id"]
        .as_str()
        .expect("event_id")
        .to_string();
    let e = s
        .app
        .wait_event(&s.bot, &event_id, WAIT, |e| {
            e["attempts"].as_array().is_some_and(|a| !a.is_empty())
        })
        .await;
    assert_eq!(e["status"], "succeeded");
    let attempts = e["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["status_code"], 200);
    let err = attempts[0]["error"].as_str().expect("error recorded");
    assert!(err.contains("validation_failed"), "{err}");
    assert!(err.contains("/blocks/0/elements/1/action_id"), "{err}");
    assert_eq!(s.receiver.all().len(), 1, "not retried");
    let m = s.message(&s.message_id).await.expect("message");
    assert_eq!(m["text"], "Approve?", "not applied");
}
}

store_test! {
async fn an_oversized_idempotency_key_is_refused_without_using_the_url() {
    let mut s = setup().await;
    let url = s.click_for_url().await;
    let long = "k".repeat(256);
    let (status, body) = reply_with_key(&s.app, &url, Some(&long), json!({"text": "x"})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_idempotency_key");
    for n in 1..=5 {
        let (status, _) = reply(&s.app, &url, json!({"text": format!("use {n}")})).await;
        assert_eq!(status, 200, "use {n}");
    }
}
}
