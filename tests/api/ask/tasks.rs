//! `ask` as an MCP task (§12, SEP-2663), driven by rmcp's own client over
//! stdio against `blockhook mcp` and a running server: created, polled,
//! answered in the widget by a real click, completed; cancelled (the block
//! turns off, reason `withdrawn`); expired; read from another `blockhook
//! mcp`; and the held call for clients that do not opt in or speak
//! 2025-11-25.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService, serve_client_with_lifecycle};
use serde_json::{Value, json};

use super::nowait::last_message;
use crate::helpers::*;

type Client = RunningService<RoleClient, ClientConfig>;

/// `blockhook mcp` as a child process, and rmcp's client on its stdio.
async fn connect(
    app: &TestApp,
    key: &str,
    tasks: bool,
    version: ProtocolVersion,
) -> (Client, tokio::process::Child) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .arg("mcp")
        .env("BLOCKHOOK_URL", &app.address)
        .env("BLOCKHOOK_API_KEY", key)
        .env_remove("BLOCKHOOK_CONVERSATION")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("blockhook mcp starts");
    let out = child.stdout.take().unwrap();
    let inp = child.stdin.take().unwrap();
    let caps = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    let config = ClientConfig::new(caps, Implementation::new("blockhook-tests", "1"))
        .with_protocol_version(version.clone());
    // 2026-07-28 has no initialize handshake: `server/discover`, then
    // every request carries its own version and capabilities.
    let client = if version.has_initialize() {
        config.serve((out, inp)).await.expect("MCP session")
    } else {
        let mode = ClientLifecycleMode::Discover {
            preferred_versions: vec![version],
        };
        serve_client_with_lifecycle(config, (out, inp), mode)
            .await
            .expect("MCP session")
    };
    (client, child)
}

fn ask(args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("ask").with_arguments(args.as_object().cloned().unwrap_or_default())
}

/// The block of the question's message, as the widget shows it.
async fn ask_block(app: &TestApp, conv: &Conv) -> (String, Value) {
    let m = last_message(app, conv).await;
    (
        m["id"].as_str().unwrap().to_string(),
        m["blocks"][0].clone(),
    )
}

fn completed(p: &TaskPayload) -> Value {
    match p {
        TaskPayload::Completed { result } => {
            let r = Value::Object(result.clone());
            assert_eq!(r["isError"], false, "{r}");
            let text = r["content"][0]["text"].as_str().expect("text content");
            assert_eq!(
                serde_json::from_str::<Value>(text).unwrap(),
                r["structuredContent"]
            );
            r["structuredContent"].clone()
        }
        other => panic!("not completed: {other:?}"),
    }
}

store_test! {
async fn mcp_ask_as_a_task_is_created_polled_answered_in_the_widget_and_completed() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let (client, _child) = connect(&app, &bot.api_key, true, ProtocolVersion::V_2026_07_28).await;
    let info = client.peer_info().expect("server info");
    assert!(info.capabilities.supports_tasks(), "the extension is listed");

    let r = client
        .call_tool_once(ask(json!({"conversation_id": conv.id, "message": "Ship 2.4 today?"})))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = r else { panic!("a task at once: {r:?}") };
    let id = created.task.task_id.clone();
    assert!(id.starts_with("int_"), "the task id is the interaction id: {id}");
    assert_eq!(created.task.status, TaskStatus::Working);
    assert!(created.task.poll_interval_ms.is_some_and(|ms| ms > 0));
    let v = serde_json::to_value(&created).unwrap();
    assert_eq!(v["resultType"], "task");
    let i: Value = app
        .get(&format!("/api/v1/interactions/{id}"), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(i["status"], "pending");
    assert_eq!(i["conversation_id"], conv.id.as_str());

    let got = client.peer().get_task(GetTaskParams::new(id.clone())).await.unwrap();
    assert_eq!(got.task.status(), TaskStatus::Working);
    let msg = got.task.task.status_message.clone().unwrap_or_default();
    assert!(msg.contains(&conv.id), "the status names the conversation: {msg}");

    // The person answers in the widget.
    let (mid, block) = ask_block(&app, &conv).await;
    assert_eq!(block["state"]["disabled"], false);
    assert_eq!(app.click(&conv, &mid, "ask", "accept").await.status(), 200);

    let got = client.peer().get_task(GetTaskParams::new(id.clone())).await.unwrap();
    assert_eq!(got.task.status(), TaskStatus::Completed);
    assert_eq!(completed(&got.task.payload), json!({"answer": "accepted"}));

    // The task outlives this `blockhook mcp`: another one reads it.
    client.cancel().await.unwrap();
    let (other, _child2) = connect(&app, &bot.api_key, true, ProtocolVersion::V_2026_07_28).await;
    let got = other.peer().get_task(GetTaskParams::new(id.clone())).await.unwrap();
    assert_eq!(completed(&got.task.payload), json!({"answer": "accepted"}));
    // An unknown task is an error, never a made-up state.
    let e = other.peer().get_task(GetTaskParams::new("int_01KXQ0ZT2REVR88Y42WDNGTN4V")).await;
    assert!(e.is_err(), "{e:?}");
    other.cancel().await.unwrap();
}
}

store_test! {
async fn mcp_tasks_cancel_withdraws_the_question_and_an_expired_one_completes() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let (client, _child) = connect(&app, &bot.api_key, true, ProtocolVersion::V_2026_07_28).await;

    let r = client
        .call_tool_once(ask(json!({"conversation_id": conv.id, "message": "Drop the table?"})))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = r else { panic!("a task: {r:?}") };
    let id = created.task.task_id.clone();
    client.peer().cancel_task(CancelTaskParams::new(id.clone())).await.expect("cancelled");
    let got = client.peer().get_task(GetTaskParams::new(id.clone())).await.unwrap();
    assert_eq!(got.task.status(), TaskStatus::Cancelled);
    let (mid, block) = ask_block(&app, &conv).await;
    assert_eq!(block["state"]["disabled"], true);
    assert_eq!(block["state"]["reason"], "withdrawn");
    let r = app.click(&conv, &mid, "ask", "accept").await;
    assert_eq!(r.status(), 410);
    // A task that ended cannot be cancelled again.
    assert!(client.peer().cancel_task(CancelTaskParams::new(id)).await.is_err());

    // Nobody answers: it completes with {"answer": "expired"}.
    let r = client
        .call_tool_once(ask(json!({"conversation_id": conv.id, "message": "Still there?", "timeout": 5})))
        .await
        .unwrap();
    let CallToolResponse::Task(created) = r else { panic!("a task: {r:?}") };
    let id = created.task.task_id.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let done = loop {
        let got = client.peer().get_task(GetTaskParams::new(id.clone())).await.unwrap();
        if got.task.status() != TaskStatus::Working {
            break got;
        }
        assert!(tokio::time::Instant::now() < deadline, "no expiry in 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(completed(&done.task.payload), json!({"answer": "expired"}));
    client.cancel().await.unwrap();
}
}

/// A held `ask` answered by a click once its question is on screen.
async fn held_call(app: &TestApp, bot: &Bot, tasks: bool, version: ProtocolVersion) -> Value {
    let conv = app.create_conv(bot).await;
    let (client, _child) = connect(app, &bot.api_key, tasks, version).await;
    let call = {
        let peer = client.peer().clone();
        let args = json!({"conversation_id": conv.id, "message": "Proceed?"});
        tokio::spawn(async move { peer.call_tool_once(ask(args)).await })
    };
    let mut mid = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        let m = last_message(app, &conv).await;
        if m["blocks"][0]["block_id"] == "ask" {
            mid = m["id"].as_str().map(str::to_string);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mid = mid.expect("the question is asked");
    assert_eq!(app.click(&conv, &mid, "ask", "decline").await.status(), 200);
    let r = call.await.unwrap().unwrap();
    client.cancel().await.unwrap();
    match r {
        CallToolResponse::Complete(r) => r.structured_content.unwrap_or_default(),
        other => panic!("the held call, not {other:?}"),
    }
}

store_test! {
async fn mcp_clients_that_do_not_opt_in_or_speak_2025_11_25_keep_the_held_call() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let declined = json!({"answer": "declined"});
    assert_eq!(held_call(&app, &bot, false, ProtocolVersion::V_2026_07_28).await, declined);
    assert_eq!(held_call(&app, &bot, true, ProtocolVersion::V_2025_11_25).await, declined);
}
}
