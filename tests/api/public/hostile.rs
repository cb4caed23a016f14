//! Hostile input: out-of-range durations, NUL characters, bad webhook URLs.
//! Each answers a 422 with a pointer (or a 404), never a 5xx or a panic.

use serde_json::{Value, json};

use crate::core::{NOWHERE, expect_field_error, json_of, patch, problem};
use crate::helpers::{ADMIN_TOKEN, spawn_app};

store_test! {
async fn out_of_range_retention_is_422_never_a_crash() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let path = format!("/api/v1/chatbots/{}", bot.id);
    for (retention, code) in [
        (json!(1e300), "invalid_duration"),
        (json!(1.8e19), "invalid_duration"),
        (json!("999999999999999999999999h"), "invalid_duration"),
        (json!("99999999999999d"), "invalid_duration"),
        (json!("106751991168d"), "invalid_duration"),
        (json!("3651d"), "too_large"),
        (json!(0.5), "too_small"),
        (json!("999ms"), "too_small"),
        (json!(-1), "invalid_duration"),
    ] {
        expect_field_error(
            patch(&app, &path, ADMIN_TOKEN, &json!({"retention": retention})).await,
            "/retention",
            code,
        )
        .await;
        expect_field_error(
            app.post(
                "/api/v1/chatbots",
                ADMIN_TOKEN,
                &json!({"name": "x", "webhook_url": NOWHERE, "retention": retention}),
            )
            .await,
            "/retention",
            code,
        )
        .await;
    }
    // The bounds themselves are accepted.
    for (retention, shown) in [(json!(1), "1s"), (json!("3650d"), "3650d")] {
        let v = json_of(
            patch(&app, &path, ADMIN_TOKEN, &json!({"retention": retention})).await,
            200,
        )
        .await;
        assert_eq!(v["retention"], shown);
    }
}
}

store_test! {
async fn out_of_range_ask_timeout_is_422_never_a_crash() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let path = format!("/api/v1/conversations/{}/ask", conv.id);
    for (timeout, code) in [
        (json!("99999999999999999999d"), "invalid_duration"),
        (json!(1e300), "invalid_duration"),
        (json!("2d"), "too_large"),
        (json!(4), "too_small"),
    ] {
        expect_field_error(
            app.post(&path, &bot.api_key, &json!({"message": "Deploy?", "timeout": timeout}))
                .await,
            "/timeout",
            code,
        )
        .await;
    }
}
}

/// Asserts a 422 whose errors point at `field` with `invalid_text`.
async fn nul_refused(r: reqwest::Response, field: &str) {
    expect_field_error(r, field, "invalid_text").await;
}

store_test! {
async fn a_nul_character_is_refused_on_both_stores_never_a_500() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    // In a path id: it names nothing.
    for path in [
        "/widget/v1/chatbots/cb_%00/conversations",
        "/api/v1/chatbots/cb_%00",
        "/widget/v1/messages/m_%00/clicks",
    ] {
        let r = app.post(path, ADMIN_TOKEN, &json!({})).await;
        let r = if r.status() == 405 { app.get(path, ADMIN_TOKEN).await } else { r };
        problem(r, 404, "not_found").await;
    }
    problem(app.get("/api/v1/chatbots/cb_%00", ADMIN_TOKEN).await, 404, "not_found").await;
    // In a body string or key: a 422 pointing at it.
    nul_refused(
        app.post(
            &format!("/widget/v1/chatbots/{}/conversations", bot.id),
            "",
            &json!({"display_name": "a\u{0}b"}),
        )
        .await,
        "/display_name",
    )
    .await;
    nul_refused(
        app.post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "bad\u{0}name", "webhook_url": NOWHERE}),
        )
        .await,
        "/name",
    )
    .await;
    let conv = app.create_conv(&bot).await;
    nul_refused(
        app.post(
            &format!("/api/v1/conversations/{}/messages", conv.id),
            &bot.api_key,
            &json!({"text": "hi", "metadata": {"k": ["ok", "\u{0}"]}}),
        )
        .await,
        "/metadata/k/1",
    )
    .await;
    let m = app.buttons(&bot, &conv, false).await;
    let mid = m["id"].as_str().unwrap();
    nul_refused(
        app.post(
            &format!("/widget/v1/messages/{mid}/clicks"),
            &conv.token,
            &json!({"block_id": "b1", "action_id": "approve\u{0}"}),
        )
        .await,
        "/action_id",
    )
    .await;
    nul_refused(
        app.post(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
            &json!({"text": "\u{0}"}),
        )
        .await,
        "/text",
    )
    .await;
    // In a query parameter.
    nul_refused(
        app.get("/api/v1/interactions?conversation_id=conv_%00", &bot.api_key).await,
        "/conversation_id",
    )
    .await;
    // Nothing of it was stored: the conversation has the bot's one message.
    let v = json_of(
        app.get(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token).await,
        200,
    )
    .await;
    assert_eq!(v["data"].as_array().map(Vec::len), Some(1), "{v}");
}
}

store_test! {
async fn webhook_urls_with_tricks_are_422_with_a_pointer() {
    let app = spawn_app().await;
    let bot = app.create_bot(NOWHERE).await;
    let path = format!("/api/v1/chatbots/{}", bot.id);
    for url in [
        "http://127.0.0.1:9/a\r\nX-Injected: 1",
        "http://127.0.0.1:9/a\nb",
        "http://127.0.0.1:0/x",
        "http:///x",
        "http://user:pass@127.0.0.1:9/x",
        "http://token@127.0.0.1:9/x",
    ] {
        expect_field_error(
            app.post(
                "/api/v1/chatbots",
                ADMIN_TOKEN,
                &json!({"name": "x", "webhook_url": url}),
            )
            .await,
            "/webhook_url",
            "invalid_url",
        )
        .await;
        expect_field_error(
            patch(&app, &path, ADMIN_TOKEN, &json!({"webhook_url": url})).await,
            "/webhook_url",
            "invalid_url",
        )
        .await;
    }
    let v: Value = json_of(app.get(&path, ADMIN_TOKEN).await, 200).await;
    assert_eq!(v["webhook_url"], NOWHERE, "unchanged");
}
}

store_test! {
async fn ipv6_transition_forms_of_private_addresses_are_refused() {
    // Private addresses refused, as in production.
    let app = crate::helpers::spawn_app_with(|c| c.allow_private_webhooks = false).await;
    for host in [
        "[::127.0.0.1]",
        "[::a9fe:a9fe]",
        "[::ffff:a9fe:a9fe]",
        "[::ffff:0:7f00:1]",
        "[::ffff:0:a9fe:a9fe]",
        "[64:ff9b::a9fe:a9fe]",
        "[64:ff9b:1::a00:1]",
        "[2002:7f00:1::]",
        "[2002:a9fe:a9fe::]",
        "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
    ] {
        expect_field_error(
            app.post(
                "/api/v1/chatbots",
                ADMIN_TOKEN,
                &json!({"name": "x", "webhook_url": format!("http://{host}/hook")}),
            )
            .await,
            "/webhook_url",
            "private_address",
        )
        .await;
    }
}
}

/// The start line of `blockhook serve` on PostgreSQL names the database
/// without its password (§10: no credential on the console).
#[actix_web::test]
async fn the_start_line_masks_the_database_password() {
    use tokio::io::AsyncBufReadExt;
    let url = crate::helpers::fresh_postgres_database().await;
    let password = url::Url::parse(&url)
        .ok()
        .and_then(|u| u.password().map(str::to_string))
        .expect("the test database URL has a password");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args(["serve", "--addr", "127.0.0.1:0", "--database", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start blockhook");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
        .await
        .expect("a start line")
        .expect("read")
        .expect("a line");
    let _ = child.start_kill();
    let _ = child.wait().await;
    assert!(line.contains("listening"), "{line}");
    assert!(line.contains(":***@"), "{line}");
    assert!(!line.contains(&format!(":{password}@")), "{line}");
}
