//! What a reviewer does from the dashboard, over HTTP on both stores:
//! conversations searched by id, visitor and message text
//! (`GET /api/v1/conversations?q=`), and a manual send that goes out now
//! whatever the endpoint's admission says (`POST /api/v1/events/{id}/send-now`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{Answer, Bot, Conv, Receiver, TestApp, spawn_app, spawn_app_with};

async fn say(app: &TestApp, conv: &Conv, text: &str) {
    let r = app
        .post(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
            &json!({ "text": text }),
        )
        .await;
    assert_eq!(r.status(), 201, "{:?}", r.text().await);
}

async fn named(app: &TestApp, bot: &Bot, name: &str) -> Conv {
    let r = app
        .post(
            "/api/v1/conversations",
            &bot.api_key,
            &json!({ "display_name": name }),
        )
        .await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    Conv {
        id: v["conversation_id"].as_str().expect("id").into(),
        token: v["visitor_token"].as_str().expect("token").into(),
        visitor: v["visitor"].clone(),
    }
}

/// The ids of the conversations `q` finds, and the page.
async fn search(app: &TestApp, bot: &Bot, query: &str) -> (Vec<String>, Value) {
    let url = reqwest::Url::parse_with_params(&app.url("/api/v1/conversations"), &[("q", query)])
        .expect("url");
    let r = app
        .client
        .get(url)
        .bearer_auth(&bot.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 200, "{query}");
    let v: Value = r.json().await.expect("json");
    let ids = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|c| c["id"].as_str().unwrap_or_default().to_string())
        .collect();
    (ids, v)
}

store_test! {
async fn conversations_are_found_by_id_visitor_and_text_newest_first() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let other = app.create_bot(&rx.url).await;
    let ada = named(&app, &bot, "Ada Lovelace").await;
    say(&app, &ada, "What does the 50%_off plan cost?").await;
    let bob = named(&app, &bot, "Bob").await;
    say(&app, &bob, "Can someone call me about PRICING?").await;
    let zed = named(&app, &bot, "Zed").await;
    say(&app, &zed, "hello").await;
    let stranger = named(&app, &other, "Ada Stranger").await;
    say(&app, &stranger, "pricing please").await;

    assert_eq!(search(&app, &bot, "ada").await.0, vec![ada.id.clone()], "a part of the name, any case");
    assert_eq!(search(&app, &bot, "pricing").await.0, vec![bob.id.clone()], "message text, any case");
    assert_eq!(search(&app, &bot, "cost").await.0, vec![ada.id.clone()]);
    assert_eq!(search(&app, &bot, &zed.id).await.0, vec![zed.id.clone()], "the conversation id");
    let visitor = zed.visitor["id"].as_str().expect("visitor id");
    assert_eq!(search(&app, &bot, visitor).await.0, vec![zed.id.clone()], "the visitor id");
    // Wildcards are the text itself.
    assert_eq!(search(&app, &bot, "%").await.0, vec![ada.id.clone()]);
    assert_eq!(search(&app, &bot, "%_o").await.0, vec![ada.id.clone()]);
    assert!(search(&app, &bot, "_z").await.0.is_empty());
    assert!(search(&app, &bot, &stranger.id).await.0.is_empty(), "another chatbot's");
    assert!(search(&app, &bot, "nothing like it").await.0.is_empty());

    // Newest first, in pages.
    let (ids, _) = search(&app, &bot, "o").await;
    assert_eq!(ids, vec![zed.id.clone(), bob.id.clone(), ada.id.clone()]);
    let url = reqwest::Url::parse_with_params(
        &app.url("/api/v1/conversations"),
        &[("q", "o"), ("limit", "2")],
    )
    .expect("url");
    let v: Value = app.client.get(url).bearer_auth(&bot.api_key).send().await.expect("request").json().await.expect("json");
    assert_eq!(v["data"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["page"]["has_more"], true, "{v}");
    let cursor = v["page"]["next_cursor"].as_str().expect("cursor");
    let url = reqwest::Url::parse_with_params(
        &app.url("/api/v1/conversations"),
        &[("q", "o"), ("limit", "2"), ("cursor", cursor)],
    )
    .expect("url");
    let v: Value = app.client.get(url).bearer_auth(&bot.api_key).send().await.expect("request").json().await.expect("json");
    assert_eq!(v["data"][0]["id"], ada.id.as_str(), "{v}");
    assert_eq!(v["page"]["has_more"], false, "{v}");

    // A blank or overlong search is refused with its pointer.
    for q in ["   ", &"x".repeat(201)] {
        let url = reqwest::Url::parse_with_params(&app.url("/api/v1/conversations"), &[("q", q)])
            .expect("url");
        let r = app.client.get(url).bearer_auth(&bot.api_key).send().await.expect("request");
        assert_eq!(r.status(), 422);
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        let p: Value = r.json().await.expect("json");
        assert_eq!(p["code"], "validation_failed", "{p}");
        assert_eq!(p["errors"][0]["field"], "/q", "{p}");
    }
}
}

async fn test_event(app: &TestApp, bot: &Bot) -> String {
    let r = app
        .post("/api/v1/events/test", &bot.api_key, &json!({}))
        .await;
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.expect("json");
    v["event_id"].as_str().expect("id").to_string()
}

async fn send_now(app: &TestApp, bot: &Bot, id: &str) -> (Value, Duration) {
    let started = Instant::now();
    let r = app
        .client
        .post(app.url(&format!("/api/v1/events/{id}/send-now")))
        .bearer_auth(&bot.api_key)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 200);
    (r.json().await.expect("json"), started.elapsed())
}

store_test! {
async fn a_manual_send_goes_out_now_though_the_endpoint_has_no_room() {
    // One delivery at a time, and the receiver holds the first for 3 s:
    // the queue cannot send anything else to it meanwhile.
    let app = spawn_app_with(|c| {
        c.endpoint_concurrency = 1;
        c.delivery_timeout = Duration::from_secs(5);
    })
    .await;
    let mut rx = Receiver::start_with(vec![Answer::status(200).delay(Duration::from_secs(3))]).await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    say(&app, &conv, "first").await;
    let held = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let held = held.header("webhook-id").expect("id").to_string();

    let id = test_event(&app, &bot).await;
    let (v, took) = send_now(&app, &bot, &id).await;
    assert_eq!(v["sent"], "now", "{v}");
    assert_eq!(v["attempt"]["status_code"], 200, "{v}");
    assert_eq!(v["attempt"]["number"], 1, "{v}");
    assert!(v["attempt"]["duration_ms"].as_i64().is_some(), "{v}");
    assert_eq!(v["status"], "succeeded", "{v}");
    assert!(took < Duration::from_millis(2000), "sent at once, not after the held one: {took:?}");
    let got = rx.take(1, Duration::from_secs(1)).await.remove(0);
    assert_eq!(got.header("webhook-id"), Some(id.as_str()), "the same event id");
    assert_eq!(got.header("x-myaichatbot-attempt"), Some("1"));
    assert_eq!(app.event(&bot, &held).await["status"], "pending", "the held one is still on the wire");

    // Recorded as any attempt, once.
    let e = app.event(&bot, &id).await;
    assert_eq!(e["attempts"].as_array().map(Vec::len), Some(1), "{e}");
    assert_eq!(e["attempts"][0]["status_code"], 200, "{e}");
    let e = app.wait_event(&bot, &held, Duration::from_secs(5), |e| e["status"] == "succeeded").await;
    assert_eq!(e["status"], "succeeded", "{e}");
    assert!(rx.next(Duration::from_millis(300)).await.is_none(), "nothing sent twice");
}
}

store_test! {
async fn a_manual_test_to_a_down_endpoint_answers_its_error_at_once() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let id = test_event(&app, &bot).await;
    let (v, took) = send_now(&app, &bot, &id).await;
    assert!(matches!(v["sent"].as_str(), Some("now" | "queue")), "{v}");
    assert_eq!(v["attempt"]["status_code"], Value::Null, "{v}");
    assert!(
        v["attempt"]["error"].as_str().is_some_and(|e| e.starts_with("E_CONNECTION")),
        "{v}"
    );
    assert_eq!(v["status"], "failed", "its retries go on: {v}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let e = app.event(&bot, &id).await;
    assert!(!e["attempts"].as_array().expect("attempts").is_empty(), "{e}");
}
}

store_test! {
async fn a_dead_delivery_sent_now_is_redelivered_under_its_id() {
    let app = spawn_app_with(|c| c.retry_max_attempts = 1).await;
    let mut rx = Receiver::start_with(vec![Answer::status(500)]).await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    say(&app, &conv, "hello").await;
    let first = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let id = first.header("webhook-id").expect("id").to_string();
    let e = app.wait_event(&bot, &id, Duration::from_secs(5), |e| e["status"] == "dead").await;
    assert_eq!(e["status"], "dead", "{e}");

    let (v, _) = send_now(&app, &bot, &id).await;
    assert_eq!(v["attempt"]["number"], 2, "{v}");
    assert_eq!(v["attempt"]["status_code"], 200, "{v}");
    assert_eq!(v["status"], "succeeded", "{v}");
    let again = rx.take(1, Duration::from_secs(2)).await.remove(0);
    assert_eq!(again.header("webhook-id"), Some(id.as_str()));
    assert_eq!(again.header("x-myaichatbot-attempt"), Some("2"));

    // Unknown or another chatbot's event: 404.
    let other = app.create_bot(&rx.url).await;
    let r = app.post(&format!("/api/v1/events/{id}/send-now"), &other.api_key, &json!({})).await;
    assert_eq!(r.status(), 404);
}
}
