//! The interactions inbox, ask-and-wait, and the `blockhook ask` CLI.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;

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

/// Starts an ask in the background; returns its answer when it comes.
fn ask(
    app: &TestApp,
    bot: &Bot,
    conv: &Conv,
    body: Value,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let (client, url, key) = (
        app.client.clone(),
        app.url(&format!("/api/v1/conversations/{}/ask", conv.id)),
        bot.api_key.clone(),
    );
    tokio::spawn(async move {
        let r = client
            .post(url)
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(text.trim()).unwrap())
    })
}

async fn ask_message(app: &TestApp, conv: &Conv) -> Value {
    let v: Value = app
        .get(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
        )
        .await
        .json()
        .await
        .unwrap();
    v["data"][0].clone()
}

store_test! {
async fn ask_confirmation_is_answered_by_a_click() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let waiting = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Deploy to prod?", "accept": "Deploy", "decline": "Keep"}),
    );
    let i = wait_pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "confirmation");
    assert_eq!(i["prompt"], "Deploy to prod?");
    let m = ask_message(&app, &conv).await;
    assert_eq!(m["blocks"][0]["elements"][0]["label"], "Deploy");
    // A second ask while this one waits: 409.
    let r = app
        .post(
            &format!("/api/v1/conversations/{}/ask", conv.id),
            &bot.api_key,
            &json!({"message": "Again?"}),
        )
        .await;
    assert_eq!(r.status(), 409);
    assert_eq!(code(&r.json().await.unwrap()), "dialog_pending");

    assert_eq!(
        app.click(&conv, m["id"].as_str().unwrap(), "ask", "accept")
            .await
            .status(),
        200
    );
    let (status, answer) = waiting.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer, json!({"answer": "accepted"}));
    assert_eq!(
        rx.take(1, WAIT).await[0].json()["action_id"],
        "accept",
        "answers flow to the webhook too"
    );
}
}

store_test! {
async fn ask_shapes_choice_multiple_custom_and_comment() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;

    // One option, clicked.
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Where?", "options": ["prod", {"id": "staging", "label": "Staging", "detail": "safe"}]}),
    );
    let i = wait_pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "choice");
    assert_eq!(
        i["payload"]["options"][1],
        json!({"id": "staging", "label": "Staging", "detail": "safe"})
    );
    let m = ask_message(&app, &conv).await;
    app.click(&conv, m["id"].as_str().unwrap(), "ask", "staging")
        .await;
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "chose", "options": ["staging"]})
    );

    // Several options, as a form of checkboxes; at least one ticked.
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Which?", "options": ["a", "b", "c"], "multiple": true}),
    );
    wait_pending(&app, &bot, &conv).await;
    let m = ask_message(&app, &conv).await;
    let mid = m["id"].as_str().unwrap();
    let r = app.submit(&conv, mid, "ask", json!({})).await;
    assert_eq!(r.status(), 422);
    let r = app
        .submit(&conv, mid, "ask", json!({"a": "on", "c": true}))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "chose", "options": ["a", "c"]})
    );

    // Free text.
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Name it", "options": ["x"], "custom": true}),
    );
    wait_pending(&app, &bot, &conv).await;
    let m = ask_message(&app, &conv).await;
    assert_eq!(
        app.submit(
            &conv,
            m["id"].as_str().unwrap(),
            "custom",
            json!({"custom": "blue"})
        )
        .await
        .status(),
        200
    );
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "custom", "text": "blue"})
    );

    // Decline with a comment (approval).
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Ship?", "comment": true}),
    );
    let i = wait_pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "approval");
    let m = ask_message(&app, &conv).await;
    let r = app
        .post(
            &format!("/widget/v1/messages/{}/clicks", m["id"].as_str().unwrap()),
            &conv.token,
            &json!({"block_id": "ask", "action_id": "decline", "comment": "not today"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        w.await.unwrap().1,
        json!({"answer": "declined", "comment": "not today"})
    );
}
}

store_test! {
async fn ask_bad_requests_are_422_with_pointers() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let path = format!("/api/v1/conversations/{}/ask", conv.id);
    for (body, field) in [
        (json!({"message": "x".repeat(601)}), "/message"),
        (json!({"message": "q", "title": "t".repeat(61)}), "/title"),
        (
            json!({"message": "q", "options": ["a"], "multiple": true}),
            "/multiple",
        ),
        (
            json!({"message": "q", "options": ["a"], "accept": "Yes"}),
            "/accept",
        ),
        (json!({"message": "q", "timeout": "1s"}), "/timeout"),
        (json!({"message": "q", "timeout": "2d"}), "/timeout"),
        (
            json!({"message": "q", "options": ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]}),
            "/options",
        ),
    ] {
        let r = app.post(&path, &bot.api_key, &body).await;
        assert_eq!(r.status(), 422, "{body}");
        let p: Value = r.json().await.unwrap();
        assert!(
            p["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"] == field),
            "{body} → {p}"
        );
    }
}
}

store_test! {
async fn an_unanswered_ask_expires_and_its_buttons_close() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Quick?", "timeout": 5}),
    );
    wait_pending(&app, &bot, &conv).await;
    assert_eq!(w.await.unwrap().1, json!({"answer": "expired"}));
    let m = ask_message(&app, &conv).await;
    assert_eq!(m["blocks"][0]["state"]["reason"], "expired");
    let r = app
        .click(&conv, m["id"].as_str().unwrap(), "ask", "accept")
        .await;
    assert_eq!(r.status(), 410);
    assert_eq!(r.json::<Value>().await.unwrap()["detail"], "expired");
    let v: Value = app
        .get(
            &format!(
                "/api/v1/interactions?status=expired&conversation_id={}",
                conv.id
            ),
            &bot.api_key,
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
}
}

store_test! {
async fn a_client_that_leaves_withdraws_its_question() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let w = ask(&app, &bot, &conv, json!({"message": "Still there?"}));
    wait_pending(&app, &bot, &conv).await;
    w.abort();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let m = ask_message(&app, &conv).await;
        if m["blocks"][0]["state"]["reason"] == "withdrawn" {
            let r = app
                .click(&conv, m["id"].as_str().unwrap(), "ask", "accept")
                .await;
            assert_eq!(r.status(), 410);
            assert_eq!(r.json::<Value>().await.unwrap()["detail"], "withdrawn");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "question not withdrawn: {m}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A new question may be asked now.
    let w = ask(
        &app,
        &bot,
        &conv,
        json!({"message": "Again?", "timeout": 5}),
    );
    wait_pending(&app, &bot, &conv).await;
    w.abort();
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
