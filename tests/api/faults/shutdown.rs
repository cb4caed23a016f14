//! Shutdown (§15): SIGTERM ends a held ask with `pending` and its id, the
//! question outlives the restart and `blockhook ask` and the MCP `ask`
//! tool re-attach to get its answer; SIGTERM during a click load loses no accepted click; SIGINT
//! (Ctrl-C) shuts down the same way, ending open streams too.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{child_app, start};
use crate::delivery::{reusable_buttons, webhook_id};
use crate::helpers::Receiver;

/// The pending ask interaction of a conversation, once there is one.
async fn pending_in(app: &crate::helpers::TestApp, key: &str, cid: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v: Value = app
            .get(
                &format!("/api/v1/interactions?status=pending&conversation_id={cid}"),
                key,
            )
            .await
            .json()
            .await
            .expect("json");
        if let Some(id) = v["data"][0]["id"].as_str() {
            return id.to_string();
        }
        assert!(Instant::now() < deadline, "no pending question in {cid}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A question asked over plain HTTP and held until it is answered or the
/// server ends it; the body it ended with.
fn hold_ask(
    app: &crate::helpers::TestApp,
    cid: &str,
    key: &str,
) -> tokio::task::JoinHandle<String> {
    let client = app.client.clone();
    let url = app.url(&format!("/api/v1/conversations/{cid}/ask"));
    let key = key.to_string();
    tokio::spawn(async move {
        let r = client
            .post(url)
            .bearer_auth(key)
            .json(&json!({"message": "Ship it?", "timeout": "10m"}))
            .send()
            .await
            .expect("ask");
        assert_eq!(r.status(), 200);
        r.text().await.expect("the answer ends cleanly")
    })
}

store_test! {
async fn sigterm_ends_a_held_ask_with_pending_and_the_cli_reattaches() {
    let app = child_app().await;
    let mut server = start(&app, None, &[]).await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let held_conv = app.create_conv(&bot).await;
    let cli_conv = app.create_conv(&bot).await;

    // A held ask over plain HTTP …
    let held = hold_ask(&app, &held_conv.id, &bot.api_key);
    // … and `blockhook ask`.
    let cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args(["ask", &cli_conv.id, "Which region?", "-o", "eu:Europe", "-o", "us:America", "--timeout", "10m"])
        .env("BLOCKHOOK_URL", &app.address)
        .env("BLOCKHOOK_API_KEY", &bot.api_key)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("blockhook ask");
    // … and the MCP `ask` tool, driven by the official MCP Python SDK.
    let mcp_conv = app.create_conv(&bot).await;
    let mcp = crate::ask::mcp::client(
        &app.address,
        &bot.api_key,
        None,
        "initialize",
        "ask",
        json!({"conversation_id": mcp_conv.id, "message": "Roll back?", "timeout": "10m"}),
    );
    let held_id = pending_in(&app, &bot.api_key, &held_conv.id).await;
    let cli_id = pending_in(&app, &bot.api_key, &cli_conv.id).await;
    let mcp_id = pending_in(&app, &bot.api_key, &mcp_conv.id).await;

    server.signal(libc::SIGTERM);
    let text = tokio::time::timeout(Duration::from_secs(15), held)
        .await
        .expect("the held ask ends at shutdown")
        .expect("task");
    let answer: Value = serde_json::from_str(text.trim()).expect("json answer");
    assert_eq!(answer, json!({"answer": "pending", "interaction_id": held_id}));
    let status = server.exit_within(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "clean exit: {}", server.stderr_text());
    let log = server.stderr_text();
    assert!(!log.contains("panicked"), "{log}");

    // Restarted: both questions are still pending and answerable.
    let _server = start(&app, None, &[]).await;
    for id in [&held_id, &cli_id, &mcp_id] {
        let i: Value = app.get(&format!("/api/v1/interactions/{id}"), &bot.api_key).await.json().await.expect("json");
        assert_eq!(i["status"], "pending", "{i}");
    }
    let answer_it = |id: String, body: Value| {
        let app = &app;
        let key = bot.api_key.clone();
        async move {
            let r = app
                .client
                .post(app.url(&format!("/api/v1/interactions/{id}/responses")))
                .bearer_auth(key)
                .header("Idempotency-Key", "k")
                .json(&body)
                .send()
                .await
                .expect("respond");
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
        }
    };
    answer_it(held_id.clone(), json!({"type": "confirmation", "confirmed": true})).await;
    answer_it(cli_id.clone(), json!({"type": "choice", "option_ids": ["us"]})).await;
    answer_it(mcp_id.clone(), json!({"type": "confirmation", "confirmed": false})).await;
    let r: Value = app
        .get(&format!("/api/v1/interactions/{held_id}/answer?wait=5"), &bot.api_key)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(r, json!({"answer": "accepted"}));

    // The CLI re-attached on its own and prints the answer.
    let out = tokio::time::timeout(Duration::from_secs(30), cli.wait_with_output())
        .await
        .expect("blockhook ask ends")
        .expect("output");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "us\n");

    // The MCP tool call was never ended by the shutdown: it kept polling
    // through the restart and returns the answer, not a tool error.
    let r = crate::ask::mcp::report(mcp).await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(
        crate::ask::mcp::structured(&r),
        &json!({"answer": "declined"})
    );
}
}

store_test! {
async fn sigterm_during_a_click_load_exits_cleanly_and_loses_no_accepted_click() {
    let mut app = child_app().await;
    let mut server = start(&app, None, &[]).await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let mut targets = Vec::new();
    for _ in 0..8 {
        let conv = app.create_conv(&bot).await;
        let mid = reusable_buttons(&app, &bot, &conv).await;
        targets.push((conv, mid));
    }
    let accepted = Arc::new(AtomicUsize::new(0));
    let mut loads = Vec::new();
    for (conv, mid) in targets {
        let client = reqwest::Client::builder().no_proxy().build().expect("client");
        let url = app.url(&format!("/widget/v1/messages/{mid}/clicks"));
        let accepted = accepted.clone();
        loads.push(tokio::spawn(async move {
            let mut other = Vec::new();
            loop {
                let r = client
                    .post(&url)
                    .bearer_auth(&conv.token)
                    .json(&json!({"block_id": "b1", "action_id": "approve"}))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status().is_success() => {
                        accepted.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(r) => other.push(r.status().as_u16()),
                    // Refused: the server has stopped listening.
                    Err(_) => return other,
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while accepted.load(Ordering::SeqCst) < 200 {
        assert!(Instant::now() < deadline, "the load did not get going");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.signal(libc::SIGTERM);
    let status = server.exit_within(Duration::from_secs(40)).await;
    assert_eq!(status.code(), Some(0), "clean exit: {}", server.stderr_text());
    let log = server.stderr_text();
    assert!(!log.contains("panicked"), "{log}");
    for l in loads {
        let other = l.await.expect("load");
        assert!(other.iter().all(|s| *s < 500), "answers during the stop: {other:?}");
    }
    let accepted = accepted.load(Ordering::SeqCst);

    // Restarted on the same store: every accepted click is delivered.
    app.port = crate::delivery::refusing_port();
    app.address = format!("http://127.0.0.1:{}", app.port);
    let _server = start(&app, None, &[]).await;
    let mut delivered = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while delivered.len() < accepted {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = rx
            .next(left)
            .await
            .unwrap_or_else(|| panic!("{} of {accepted} delivered", delivered.len()));
        delivered.insert(webhook_id(&r));
    }
    // Exactly the accepted clicks became events: none lost, none extra.
    let mut stored = HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/api/v1/events?limit=100&cursor={c}"),
            None => "/api/v1/events?limit=100".to_string(),
        };
        let v: Value = app.get(&path, &bot.api_key).await.json().await.expect("json");
        for e in v["data"].as_array().cloned().unwrap_or_default() {
            stored.insert(e["event_id"].as_str().expect("id").to_string());
        }
        match v["page"]["next_cursor"].as_str() {
            Some(c) if v["page"]["has_more"] == true => cursor = Some(c.to_string()),
            _ => break,
        }
    }
    assert_eq!(stored.len(), accepted, "events stored vs clicks answered 2xx");
    assert!(delivered.is_subset(&stored));
}
}

/// Reads a streamed body until the server ends it; what arrived.
async fn read_to_end(resp: reqwest::Response) -> String {
    use futures_util::StreamExt;
    let mut body = resp.bytes_stream();
    let mut out = String::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(c) => out.push_str(&String::from_utf8_lossy(&c)),
            Err(_) => break,
        }
    }
    out
}

store_test! {
async fn sigint_ends_held_asks_and_open_streams_and_exits_cleanly() {
    let app = child_app().await;
    let mut server = start(&app, None, &[]).await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;

    // A visitor's stream and an API stream, both open …
    let widget = app
        .client
        .get(app.url(&format!("/widget/v1/conversations/{}/stream", conv.id)))
        .bearer_auth(&conv.token)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .expect("widget stream");
    assert_eq!(widget.status(), 200);
    let api = app
        .client
        .get(app.url("/api/v1/stream"))
        .bearer_auth(&bot.api_key)
        .header("Accept", "text/event-stream")
        .send()
        .await
        .expect("api stream");
    assert_eq!(api.status(), 200);
    let widget = tokio::spawn(read_to_end(widget));
    let api = tokio::spawn(read_to_end(api));
    // … and a held ask.
    let held = hold_ask(&app, &conv.id, &bot.api_key);
    let held_id = pending_in(&app, &bot.api_key, &conv.id).await;

    // Ctrl-C: the same graceful shutdown as SIGTERM.
    server.signal(libc::SIGINT);
    let text = tokio::time::timeout(Duration::from_secs(15), held)
        .await
        .expect("the held ask ends at shutdown")
        .expect("task");
    let answer: Value = serde_json::from_str(text.trim()).expect("json answer");
    assert_eq!(answer, json!({"answer": "pending", "interaction_id": held_id}));
    for (what, stream) in [("widget", widget), ("api", api)] {
        tokio::time::timeout(Duration::from_secs(15), stream)
            .await
            .unwrap_or_else(|_| panic!("the {what} stream ends at shutdown"))
            .expect("task");
    }
    let status = server.exit_within(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "clean exit: {}", server.stderr_text());
    let log = server.stderr_text();
    assert!(!log.contains("panicked"), "{log}");
}
}
