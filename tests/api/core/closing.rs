//! §2 Blocks turn off (410 `interaction_closed`): after the interactive
//! window, after a takeover, past the chatbot's retention.

use std::time::Duration;

use serde_json::{Value, json};

use super::{NOWHERE, json_of, patch, problem, widget_message};
use crate::helpers::{ADMIN_TOKEN, Bot, Conv, TestApp, spawn_app, spawn_app_with};

/// Asserts a 410 naming `reason`, and that the message shows the block off
/// with that reason and nothing was queued.
async fn assert_closed(
    app: &TestApp,
    bot: &Bot,
    conv: &Conv,
    r: reqwest::Response,
    mid: &str,
    reason: &str,
) {
    let v = problem(r, 410, "interaction_closed").await;
    assert_eq!(v["detail"], reason, "{v}");
    let m = widget_message(app, conv, mid).await;
    for b in m["blocks"].as_array().unwrap() {
        assert_eq!(b["state"]["disabled"], true, "{b}");
        assert_eq!(b["state"]["reason"], reason, "{b}");
        assert!(b["state"]["chosen_action_id"].is_null(), "{b}");
    }
    let interactions: Vec<Value> = app
        .events(bot)
        .await
        .into_iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("interaction."))
        .collect();
    assert!(
        interactions.is_empty(),
        "no interaction event: {interactions:?}"
    );
}

async fn form_ok(app: &TestApp, conv: &Conv, mid: &str) -> reqwest::Response {
    app.submit(
        conv,
        mid,
        "f1",
        json!({"full_name": "Ana", "email": "ana@example.com", "consent": true}),
    )
    .await
}

store_test! {
async fn blocks_close_after_the_interactive_window() {
    let app = spawn_app_with(|c| c.interactive_window = Duration::from_secs(2)).await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    let f = super::super::form_message(&app, &bot, &conv, true).await;
    let fid = f["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(2200)).await;

    let r = app.click(&conv, mid, "b1", "approve").await;
    assert_closed(&app, &bot, &conv, r, mid, "expired").await;
    let r = form_ok(&app, &conv, fid).await;
    assert_closed(&app, &bot, &conv, r, fid, "expired").await;

    // A fresh message is open again: the window counts from each message.
    let fresh = app.buttons(&bot, &conv, true).await;
    json_of(
        app.click(&conv, fresh["id"].as_str().unwrap(), "b1", "approve")
            .await,
        200,
    )
    .await;
}
}

store_test! {
async fn blocks_close_after_a_takeover() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    let f = super::super::form_message(&app, &bot, &conv, true).await;
    let fid = f["id"].as_str().unwrap();

    let r = app
        .post(
            &format!("/api/v1/conversations/{}/takeover", conv.id),
            &bot.api_key,
            &json!({"member": {"id": "mem_01KXQ0ZT2REVR88Y42WDNGTN4V", "display_name": "Dana"}}),
        )
        .await;
    json_of(r, 200).await;

    let r = app.click(&conv, mid, "b1", "approve").await;
    assert_closed(&app, &bot, &conv, r, mid, "takeover").await;
    let r = form_ok(&app, &conv, fid).await;
    assert_closed(&app, &bot, &conv, r, fid, "takeover").await;

    let bot_view = json_of(
        app.get(
            &format!("/api/v1/conversations/{}/messages", conv.id),
            &bot.api_key,
        )
        .await,
        200,
    )
    .await;
    for m in bot_view["data"].as_array().unwrap() {
        assert_eq!(m["blocks"][0]["state"]["reason"], "takeover", "{m}");
    }
}
}

store_test! {
async fn blocks_close_past_the_chatbots_retention() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();
    let r = patch(
        &app,
        &format!("/api/v1/chatbots/{}", bot.id),
        ADMIN_TOKEN,
        &json!({"retention": "1s"}),
    )
    .await;
    assert_eq!(json_of(r, 200).await["retention"], "1s");
    tokio::time::sleep(Duration::from_millis(1300)).await;

    let r = app.click(&conv, mid, "b1", "approve").await;
    assert_closed(&app, &bot, &conv, r, mid, "storage_window").await;
}
}
