//! The default endpoint's own settings apply to its deliveries (§13): its
//! `headers` go with each, `replies: false` leaves a 2xx reply unapplied,
//! its `rate_limit` holds the rest back (never dropping one), and a
//! delivery held for it longer than `--max-hold` ends `dead`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use super::{call, default_id, json_with};
use crate::delivery::{click_ok, reusable_buttons, webhook_id};
use crate::helpers::{Answer, Bot, Conv, Receiver, TestApp, spawn_app, spawn_app_with};

async fn patch_default(app: &TestApp, bot: &Bot, body: Value) {
    let path = format!("/api/v1/endpoints/{}", default_id(bot));
    json_with(call(app, bot, Method::PATCH, &path, Some(&body)).await, 200).await;
}

/// The texts of a conversation's messages.
async fn texts(app: &TestApp, bot: &Bot, conv: &Conv) -> Vec<String> {
    let v: Value = app
        .get(
            &format!("/api/v1/conversations/{}/messages", conv.id),
            &bot.api_key,
        )
        .await
        .json()
        .await
        .expect("json");
    v["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["text"].as_str().map(str::to_string))
        .collect()
}

store_test! {
async fn the_default_endpoints_headers_go_with_each_delivery_and_replies_false_is_kept() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    rx.set_default(Answer::json(200, json!({"text": "from the reply", "replace_original": false})));
    let bot = app.create_bot(&rx.url).await;
    patch_default(&app, &bot, json!({"headers": {"x-team": "crm"}, "replies": false})).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(got[0].header("x-team"), Some("crm"), "its headers are sent");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !texts(&app, &bot, &conv).await.iter().any(|t| t == "from the reply"),
        "a reply from an endpoint with replies false is not applied"
    );

    // With replies true (after the settings are read again) it is.
    patch_default(&app, &bot, json!({"replies": true})).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    click_ok(&app, &conv, &mid).await;
    rx.take(1, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !texts(&app, &bot, &conv).await.iter().any(|t| t == "from the reply") {
        assert!(Instant::now() < deadline, "the reply is applied with replies true");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
}

store_test! {
async fn the_default_endpoints_rate_limit_is_respected_and_nothing_is_dropped() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    patch_default(&app, &bot, json!({"rate_limit": "2/s"})).await;
    let mut convs = Vec::new();
    for _ in 0..6 {
        let conv = app.create_conv(&bot).await;
        let mid = reusable_buttons(&app, &bot, &conv).await;
        convs.push((conv, mid));
    }
    for (conv, mid) in &convs {
        click_ok(&app, conv, mid).await;
    }
    let got = rx.take(6, Duration::from_secs(15)).await;
    for w in got.windows(3) {
        let span = w[2].at.duration_since(w[0].at);
        assert!(span >= Duration::from_millis(950), "3 within {span:?}");
    }
    let ids: HashSet<String> = got.iter().map(webhook_id).collect();
    assert_eq!(ids.len(), 6, "each once");
}
}

store_test! {
async fn events_held_for_a_paused_default_endpoint_past_max_hold_end_dead() {
    let app = spawn_app_with(|c| c.max_hold = Duration::from_secs(1)).await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    patch_default(&app, &bot, json!({"enabled": false})).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    click_ok(&app, &conv, &mid).await;
    let held: Vec<String> = app
        .events(&bot)
        .await
        .iter()
        .map(|e| e["event_id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(held.len(), 2);
    let deadline = Instant::now() + Duration::from_secs(10);
    for id in &held {
        loop {
            let e = app.event(&bot, id).await;
            if e["status"] == "dead" {
                break;
            }
            assert_eq!(e["status"], "pending", "{e}");
            assert!(Instant::now() < deadline, "held past max-hold: dead");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Enabled again: the dead ones are not sent, a new click is (its
    // conversation is not stuck behind them), and a dead one redelivers.
    patch_default(&app, &bot, json!({"enabled": true})).await;
    click_ok(&app, &conv, &mid).await;
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert!(!held.contains(&webhook_id(&got[0])), "a dead event is not sent");
    assert!(rx.next(Duration::from_millis(500)).await.is_none());
    let r = app
        .client
        .post(app.url(&format!("/api/v1/events/{}/redeliver", held[0])))
        .bearer_auth(&bot.api_key)
        .send()
        .await
        .expect("redeliver");
    assert!(r.status().is_success(), "{}", r.status());
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(webhook_id(&got[0]), held[0], "redeliverable");
}
}
