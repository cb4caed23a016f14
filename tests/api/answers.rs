//! §16 conveniences of the inbox and attachments: a choice asked with
//! `custom` answered with text by a member; attachment urls per route;
//! content types by extension.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::helpers::*;

async fn respond(app: &TestApp, bot: &Bot, id: &str, key: &str, body: Value) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/api/v1/interactions/{id}/responses")))
        .bearer_auth(&bot.api_key)
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .expect("request")
}

/// The conversation's pending interaction, once there is one.
async fn pending(app: &TestApp, bot: &Bot, conv: &Conv) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let v: Value = app
            .get(
                &format!(
                    "/api/v1/interactions?status=pending&conversation_id={}",
                    conv.id
                ),
                &bot.api_key,
            )
            .await
            .json()
            .await
            .expect("json");
        if let Some(i) = v["data"].as_array().and_then(|a| a.first()) {
            return i.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pending interaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn ask_later(app: &TestApp, bot: &Bot, conv: &Conv, mut body: Value) {
    body["wait"] = json!(false);
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/ask", conv.id),
            &bot.api_key,
            &body,
        )
        .await;
    assert_eq!(r.status(), 202, "{:?}", r.text().await);
}

store_test! {
async fn a_choice_asked_with_custom_takes_a_member_s_own_answer() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    ask_later(&app, &bot, &conv, json!({"message": "Colour?", "options": ["red", "green"], "custom": true})).await;
    let i = pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "choice", "{i}");
    let id = i["id"].as_str().expect("id");

    // Bad shapes first: nothing is answered by them.
    for (body, field) in [
        (json!({"type": "choice", "custom": 7}), "/custom"),
        (json!({"type": "choice", "custom": "  "}), "/custom"),
        (json!({"type": "choice", "custom": "x", "option_ids": ["red"]}), "/custom"),
        (json!({"type": "choice", "custom": "x", "extra": 1}), "/extra"),
    ] {
        let r = respond(&app, &bot, id, &format!("k-{field}-{body}"), body.clone()).await;
        assert_eq!(r.status(), 422, "{body}");
        let p: Value = r.json().await.expect("json");
        assert_eq!(p["errors"][0]["field"], field, "{body}: {p}");
    }
    let r = respond(&app, &bot, id, "k1", json!({"type": "choice", "custom": "teal"})).await;
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let a: Value = app
        .get(&format!("/api/v1/interactions/{id}/answer"), &bot.api_key)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(a["answer"], "custom", "{a}");
    assert_eq!(a["text"], "teal", "{a}");
    // The webhook says what was answered.
    let got = rx.take(1, Duration::from_secs(10)).await;
    let e: Value = serde_json::from_slice(&got[0].body).expect("event");
    assert_eq!(e["type"], "interaction.form_submitted", "{e}");
    assert!(e.to_string().contains("teal"), "{e}");

    // Without `custom` in the ask, a custom answer is refused.
    let conv = app.create_conv(&bot).await;
    ask_later(&app, &bot, &conv, json!({"message": "Colour?", "options": ["red", "green"]})).await;
    let i = pending(&app, &bot, &conv).await;
    let r = respond(&app, &bot, i["id"].as_str().expect("id"), "k2", json!({"type": "choice", "custom": "teal"})).await;
    assert_eq!(r.status(), 422);
    let p: Value = r.json().await.expect("json");
    assert_eq!(p["errors"][0]["field"], "/custom", "{p}");
    assert_eq!(p["errors"][0]["code"], "not_allowed", "{p}");
}
}

store_test! {
async fn attachments_carry_the_url_of_the_route_they_are_read_through() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let data = base64::engine::general_purpose::STANDARD.encode(b"--- a\n+++ b\n");
    ask_later(&app, &bot, &conv, json!({"message": "Merge?", "attachment":
        {"filename": "fix.diff", "content_type": "application/octet-stream", "data": data}})).await;
    let widget: Value = app
        .get(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token)
        .await
        .json()
        .await
        .expect("json");
    let a = &widget["data"][0]["attachments"][0];
    let id = a["id"].as_str().expect("id");
    assert_eq!(a["url"], format!("{}/widget/v1/attachments/{id}", app.address), "{a}");
    assert_eq!(a["content_type"], "text/x-diff", "by its extension: {a}");
    let api: Value = app
        .get(&format!("/api/v1/conversations/{}/messages", conv.id), &bot.api_key)
        .await
        .json()
        .await
        .expect("json");
    let api_url = format!("{}/api/v1/attachments/{id}", app.address);
    assert_eq!(api["data"][0]["attachments"][0]["url"], api_url.as_str(), "{api}");
    let i = pending(&app, &bot, &conv).await;
    assert_eq!(i["payload"]["attachments"][0]["url"], api_url.as_str(), "{i}");
    // Each url works with its route's credential.
    let r = app.get(api_url.trim_start_matches(&app.address), &bot.api_key).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap_or_default().starts_with("text/x-diff"));
    let r = app
        .get(a["url"].as_str().expect("url").trim_start_matches(&app.address), &conv.token)
        .await;
    assert_eq!(r.status(), 200);
}
}
