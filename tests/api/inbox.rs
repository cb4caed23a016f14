//! The interactions inbox, ask-and-wait, and the `blockhook ask` CLI.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;

mod asking;

const WAIT: Duration = Duration::from_secs(10);

async fn respond(
    app: &TestApp,
    bot: &Bot,
    id: &str,
    key: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut r = app
        .client
        .post(app.url(&format!("/api/v1/interactions/{id}/responses")))
        .bearer_auth(&bot.api_key)
        .json(&body);
    if let Some(k) = key {
        r = r.header("Idempotency-Key", k);
    }
    r.send().await.unwrap()
}

async fn pending(app: &TestApp, bot: &Bot, conv: &Conv) -> Vec<Value> {
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
        .unwrap();
    v["data"].as_array().cloned().unwrap()
}

/// Waits until the conversation has a pending interaction.
async fn wait_pending(app: &TestApp, bot: &Bot, conv: &Conv) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(i) = pending(app, bot, conv).await.into_iter().next() {
            return i;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pending interaction"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn code(v: &Value) -> &str {
    v["code"].as_str().unwrap_or_default()
}

store_test! {
async fn every_interactive_block_is_an_interaction_a_member_can_answer() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let list = pending(&app, &bot, &conv).await;
    assert_eq!(list.len(), 1);
    let i = &list[0];
    assert_eq!(i["type"], "choice");
    assert_eq!(i["status"], "pending");
    assert_eq!(i["message_id"], msg["id"]);
    assert_eq!(i["block_id"], "b1");
    assert_eq!(
        i["payload"]["options"],
        json!([{"id": "approve", "label": "Approve"}, {"id": "deny", "label": "Deny"}])
    );
    assert!(i["id"].as_str().unwrap().starts_with("int_"));
    let id = i["id"].as_str().unwrap();

    let body = json!({"type": "choice", "option_ids": ["deny"]});
    let r = respond(&app, &bot, id, Some("k1"), body.clone()).await;
    assert_eq!(r.status(), 200);
    let answered: Value = r.json().await.unwrap();
    assert_eq!(answered["status"], "answered");
    assert_eq!(answered["response"]["option_ids"], json!(["deny"]));
    assert!(answered["response"]["submitted_at"].is_string());
    assert!(answered["answered_at"].is_string());

    // The widget shows the block as used; the webhook gets the event from a member.
    let ev = rx.take(1, WAIT).await.remove(0).json();
    assert_eq!(ev["type"], "interaction.button_clicked");
    assert_eq!(ev["action_id"], "deny");
    assert_eq!(ev["user"]["kind"], "member");
    assert!(ev["user"]["id"].as_str().unwrap().starts_with("mem_"));
    let msgs: Value = app
        .get(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        msgs["data"][0]["blocks"][0]["state"],
        json!({"disabled": true, "reason": "used", "chosen_action_id": "deny", "answered_by": "member"})
    );

    // Same key, same body: the first answer again. Different body: conflict.
    let again = respond(&app, &bot, id, Some("k1"), body).await;
    assert_eq!(again.status(), 200);
    assert_eq!(
        again.json::<Value>().await.unwrap()["answered_at"],
        answered["answered_at"]
    );
    let r = respond(
        &app,
        &bot,
        id,
        Some("k1"),
        json!({"type": "choice", "option_ids": ["approve"]}),
    )
    .await;
    assert_eq!(r.status(), 409);
    assert_eq!(code(&r.json().await.unwrap()), "idempotency_key_conflict");
    let r = respond(
        &app,
        &bot,
        id,
        Some("k2"),
        json!({"type": "choice", "option_ids": ["approve"]}),
    )
    .await;
    assert_eq!(r.status(), 409);
    assert_eq!(code(&r.json().await.unwrap()), "interaction_not_pending");
    assert_eq!(app.events(&bot).await.len(), 1, "one answer, one event");
}
}

store_test! {
async fn answers_are_checked_in_the_documented_order() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let other = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    app.bot_message(
        &bot,
        &conv,
        json!({"blocks": [{"type": "form", "form_id": "f", "fields": [
            {"name": "email", "type": "email", "label": "Email", "required": true}]}]}),
    )
    .await;
    let id = pending(&app, &bot, &conv).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Unknown, or another chatbot's: 404 even without a key.
    let r = respond(
        &app,
        &bot,
        "int_01JAZ6Y5M3Q8F7N2R4T6V9W0XC",
        None,
        json!({}),
    )
    .await;
    assert_eq!(r.status(), 404);
    let r = respond(&app, &other, &id, None, json!({})).await;
    assert_eq!(r.status(), 404);
    let r = respond(
        &app,
        &bot,
        &id,
        None,
        json!({"type": "text", "text": "a@b.co"}),
    )
    .await;
    assert_eq!(r.status(), 400);
    assert_eq!(code(&r.json().await.unwrap()), "idempotency_key_required");
    let r = respond(
        &app,
        &bot,
        &id,
        Some("a"),
        json!({"type": "approval", "approved": true}),
    )
    .await;
    assert_eq!(r.status(), 422);
    assert_eq!(code(&r.json().await.unwrap()), "interaction_type_mismatch");
    let r = respond(
        &app,
        &bot,
        &id,
        Some("b"),
        json!({"type": "text", "text": "a@b.co", "extra": 1}),
    )
    .await;
    assert_eq!(r.status(), 422);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["errors"][0]["field"], "/extra");
    assert_eq!(p["errors"][0]["code"], "unknown_field");
    let r = respond(
        &app,
        &bot,
        &id,
        Some("c"),
        json!({"type": "text", "values": {"email": "nope"}}),
    )
    .await;
    assert_eq!(r.status(), 422);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["errors"][0]["field"], "/values/email");
    assert_eq!(p["errors"][0]["code"], "invalid_email");
    assert!(
        app.events(&bot).await.is_empty(),
        "nothing sent after refusals"
    );
    let r = respond(
        &app,
        &bot,
        &id,
        Some("d"),
        json!({"type": "text", "text": "a@b.co"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    // The body exactly as sent, plus submitted_at (§6).
    let mut response = v["response"].clone();
    assert!(response["submitted_at"].is_string(), "{response}");
    response.as_object_mut().unwrap().remove("submitted_at");
    assert_eq!(response, json!({"type": "text", "text": "a@b.co"}));
}
}

store_test! {
async fn takeover_cancels_pending_interactions() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    app.buttons(&bot, &conv, true).await;
    let id = pending(&app, &bot, &conv).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/takeover", conv.id),
            &bot.api_key,
            &json!({"member": {"id": "mem_1", "display_name": "Ann"}}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let i: Value = app
        .get(&format!("/api/v1/interactions/{id}"), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(i["status"], "cancelled");
    let r = respond(
        &app,
        &bot,
        &id,
        Some("k"),
        json!({"type": "choice", "option_ids": ["approve"]}),
    )
    .await;
    assert_eq!(r.status(), 409);
}
}

async fn run_cli(args: &[&str], app: &TestApp, key: &str) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .arg("ask")
        .args(args)
        .env("BLOCKHOOK_URL", &app.address)
        .env("BLOCKHOOK_API_KEY", key)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

store_test! {
async fn the_cli_prints_the_answer_and_exits_by_outcome() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;

    let conv = app.create_conv(&bot).await;
    let child = run_cli(
        &[
            &conv.id,
            "Where to deploy?",
            "-o",
            "prod:Prod",
            "-o",
            "staging:Staging",
            "--multi",
        ],
        &app,
        &bot.api_key,
    )
    .await;
    let i = wait_pending(&app, &bot, &conv).await;
    let r = respond(
        &app,
        &bot,
        i["id"].as_str().unwrap(),
        Some("k"),
        json!({"type": "choice", "option_ids": ["prod", "staging"]}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "prod\nstaging\n");

    let conv = app.create_conv(&bot).await;
    let child = run_cli(
        &[
            &conv.id,
            "Delete branch?",
            "--accept",
            "Delete",
            "--decline",
            "Keep",
            "--comment",
        ],
        &app,
        &bot.api_key,
    )
    .await;
    let i = wait_pending(&app, &bot, &conv).await;
    let r = respond(
        &app,
        &bot,
        i["id"].as_str().unwrap(),
        Some("k"),
        json!({"type": "approval", "approved": false, "comment": "keep it"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "keep it\n");

    let out = run_cli(&[&conv.id, "Hello?"], &app, "sk_wrong")
        .await
        .wait_with_output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(77));

    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args([
            "ask",
            &conv.id,
            "Hello?",
            "--url",
            "http://127.0.0.1:9",
            "--api-key",
            &bot.api_key,
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(child.status.code(), Some(69));
}
}

store_test! {
async fn a_reply_that_replaces_blocks_closes_the_old_and_opens_the_new() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, false).await;
    let mid = msg["id"].as_str().unwrap();
    let old = pending(&app, &bot, &conv).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(app.click(&conv, mid, "b1", "approve").await.status(), 200);
    // A second click finds nothing left pending on the message (the service
    // may then remember it as settled until the reply below adds a block).
    assert_eq!(app.click(&conv, mid, "b1", "approve").await.status(), 200);
    let url = rx.take(1, WAIT).await[0].json()["response_url"]
        .as_str()
        .unwrap()
        .to_string();

    let r = app
        .client
        .post(&url)
        .json(&json!({"text": "Pick a slot", "blocks": [{"type": "actions", "block_id": "slots", "elements": [
            {"type": "button", "action_id": "am", "label": "Morning"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // The removed group answers 410 `replaced`; its interaction is closed.
    let r = app.click(&conv, mid, "b1", "deny").await;
    assert_eq!(r.status(), 410);
    assert_eq!(r.json::<Value>().await.unwrap()["detail"], "replaced");
    let i: Value = app
        .get(&format!("/api/v1/interactions/{old}"), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    assert_ne!(i["status"], "pending");

    // The new group is an interaction of its own, and works.
    let now = pending(&app, &bot, &conv).await;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0]["block_id"], "slots");
    assert_eq!(app.click(&conv, mid, "slots", "am").await.status(), 200);
    assert!(
        pending(&app, &bot, &conv).await.is_empty(),
        "the click answered the new group's interaction"
    );

    // Deleting the message cancels what is still pending.
    let r = app
        .client
        .post(&url)
        .json(&json!({"delete_original": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(pending(&app, &bot, &conv).await.is_empty());
}
}
