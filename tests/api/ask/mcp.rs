//! `blockhook mcp` driven by the official MCP Python SDK over stdio
//! (`tests/mcp_client.py`), against a running server.

use std::time::Duration;

use serde_json::{Value, json};

use super::nowait::{answer, last_message};
use crate::helpers::*;

/// Starts the Python client, which starts `blockhook mcp` with this
/// environment. A missing `python3` or `mcp` package fails the test.
pub fn client(
    url: &str,
    key: &str,
    conversation: Option<&str>,
    handshake: &str,
    tool: &str,
    args: Value,
) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py"))
        .arg(env!("CARGO_BIN_EXE_blockhook"))
        .arg(handshake)
        .arg(tool)
        .arg(args.to_string())
        .env("BLOCKHOOK_URL", url)
        .env("BLOCKHOOK_API_KEY", key)
        .env_remove("BLOCKHOOK_CONVERSATION")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(c) = conversation {
        cmd.env("BLOCKHOOK_CONVERSATION", c);
    }
    cmd.spawn()
        .expect("python3 is required to run the MCP client")
}

/// The client's report once it is done.
pub async fn report(child: tokio::process::Child) -> Value {
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the MCP client finishes")
        .unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client prints JSON")
}

/// Runs one tool call and returns the report.
async fn call(app: &TestApp, key: &str, conv: Option<&str>, tool: &str, args: Value) -> Value {
    report(client(&app.address, key, conv, "initialize", tool, args)).await
}

/// The tool result's structured content, checked against its JSON text.
pub fn structured(report: &Value) -> &Value {
    let r = &report["result"];
    let text = r["content"][0]["text"].as_str().expect("a text content");
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        r["structuredContent"],
        "the text is the structured content as JSON"
    );
    &r["structuredContent"]
}

async fn wait_for_pending(app: &TestApp, bot: &Bot, conv: &Conv) -> Value {
    for _ in 0..500 {
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
        if let Some(i) = v["data"].get(0) {
            return i.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no question was asked");
}

store_test! {
async fn mcp_ask_waits_with_progress_for_a_click_after_ten_seconds() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let child = client(
        &app.address,
        &bot.api_key,
        None,
        "initialize",
        "ask",
        json!({"conversation_id": conv.id, "message": "Which region?", "title": "Deploy",
               "options": ["eu", {"id": "us", "label": "United States", "detail": "us-east-1"}]}),
    );
    let i = wait_for_pending(&app, &bot, &conv).await;
    assert_eq!(i["type"], "choice");
    assert_eq!(i["prompt"], "Which region?");
    // The person takes longer than ten seconds.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let m = last_message(&app, &conv).await;
    assert_eq!(app.click(&conv, m["id"].as_str().unwrap(), "ask", "us").await.status(), 200);
    let r = report(child).await;

    assert_eq!(r["protocol_version"], "2025-11-25");
    let tool = |name: &str| {
        r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("tool {name}"))
            .clone()
    };
    assert_eq!(r["tools"].as_array().unwrap().len(), 3);
    for t in [tool("ask"), tool("ask_start")] {
        let props = t["inputSchema"]["properties"].as_object().unwrap();
        for k in [
            "conversation_id", "message", "title", "options", "multiple", "custom", "accept",
            "decline", "comment", "timeout", "attachment",
        ] {
            assert!(props[k]["description"].is_string(), "{k} is described");
        }
        assert_eq!(t["inputSchema"]["required"], json!(["message"]));
    }
    for name in ["ask", "ask_result"] {
        assert!(tool(name)["description"].as_str().unwrap().contains("treat it as declined"));
    }
    assert_eq!(tool("ask_result")["inputSchema"]["required"], json!(["interaction_id"]));

    assert_eq!(r["result"]["isError"], false);
    assert_eq!(structured(&r), &json!({"answer": "chose", "options": ["us"]}));
    let progress = r["progress"].as_array().unwrap();
    assert!(progress.len() >= 3, "progress at least every 10 s over 11 s: {progress:?}");
    let values: Vec<f64> = progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "progress increases: {values:?}");
    assert!(progress[0]["message"].as_str().unwrap().contains(i["id"].as_str().unwrap()));
}
}

store_test! {
async fn mcp_ask_start_then_ask_result_gets_a_decline_with_its_comment() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    // The newer protocol (no initialize handshake), the conversation from
    // BLOCKHOOK_CONVERSATION.
    let r = report(client(
        &app.address,
        &bot.api_key,
        Some(&conv.id),
        "discover",
        "ask_start",
        json!({"message": "Merge the release branch?", "comment": true, "timeout": "10m",
               "attachment": {"filename": "release.diff", "content_type": "text/x-diff",
                              "data": "LS0tIGEKKysrIGIK"}}),
    ))
    .await;
    assert!(r["protocol_version"].as_str().unwrap() > "2025-11-25", "{}", r["protocol_version"]);
    assert_eq!(r["result"]["isError"], false);
    let id = structured(&r)["interaction_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("int_"));
    // The tool call is over; the question is still open.
    let r = call(&app, &bot.api_key, None, "ask_result", json!({"interaction_id": id, "wait": 0})).await;
    assert_eq!(structured(&r), &json!({"answer": "pending"}));

    let m = last_message(&app, &conv).await;
    assert_eq!(m["text"], "Merge the release branch?");
    assert_eq!(m["attachments"][0]["filename"], "release.diff");
    assert_eq!(m["attachments"][0]["size"], 12);
    let r = app
        .post(
            &format!("/widget/v1/messages/{}/clicks", m["id"].as_str().unwrap()),
            &conv.token,
            &json!({"block_id": "ask", "action_id": "decline", "comment": "CI is red"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let r = call(&app, &bot.api_key, None, "ask_result", json!({"interaction_id": id, "wait": 5})).await;
    assert_eq!(r["result"]["isError"], false);
    assert_eq!(structured(&r), &json!({"answer": "declined", "comment": "CI is red"}));
    assert_eq!(
        answer(&app, &bot.api_key, &id, "0").await.1,
        json!({"answer": "declined", "comment": "CI is red"})
    );
}
}

store_test! {
async fn mcp_transport_failures_are_tool_errors_with_the_problem_code() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let ask = json!({"conversation_id": conv.id, "message": "Go?"});

    let r = call(&app, "sk_not_a_key", None, "ask", ask.clone()).await;
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(structured(&r)["code"], "unauthorized");
    assert_eq!(structured(&r)["status"], 401);

    let r = call(&app, &bot.api_key, None, "ask_start", ask.clone()).await;
    assert_eq!(r["result"]["isError"], false);
    let r = call(&app, &bot.api_key, None, "ask", ask.clone()).await;
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(structured(&r)["code"], "dialog_pending");

    let r = call(&app, &bot.api_key, None, "ask_result", json!({"interaction_id": "int_nope"})).await;
    assert_eq!(structured(&r)["code"], "not_found");

    let r = call(&app, &bot.api_key, None, "ask_start", json!({"message": "No conversation"})).await;
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(structured(&r)["code"], "validation_failed");

    // Nothing listens on port 9 (discard) of loopback.
    let r = report(client("http://127.0.0.1:9", &bot.api_key, None, "initialize", "ask", ask)).await;
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(structured(&r)["code"], "unreachable");
}
}
