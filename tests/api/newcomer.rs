//! What a new user meets first, on the real binary: flags on the default
//! command, boolean variables, the start line, log lines, `ask`'s exit
//! codes and help, and the answers a newcomer reads back.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::helpers::*;

/// The binary serving the test's store, started as a newcomer would:
/// `blockhook <flags>` (no `serve`).
struct Served {
    child: Child,
    base: String,
    admin: String,
    start_line: String,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Served {
    /// Stops the server and returns everything it logged.
    async fn stop(mut self) -> String {
        let _ = self.child.start_kill();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err).await;
        }
        let _ = self.child.wait().await;
        err
    }
}

async fn database(dir: &tempfile::TempDir) -> String {
    match current_store() {
        StoreKind::Sqlite => format!("sqlite://{}", dir.path().join("b.db").display()),
        StoreKind::Postgres => fresh_postgres_database().await,
    }
}

async fn serve(args: &[&str], env: &[(&str, &str)]) -> Served {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = database(&dir).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_blockhook"));
    cmd.args(["--addr", "127.0.0.1:0", "--database", &db])
        .args(args)
        .env_remove("BLOCKHOOK_ALLOW_PRIVATE_WEBHOOKS")
        .env_remove("BLOCKHOOK_LOG_FORMAT")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start blockhook");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let read = async {
        let start = lines.next_line().await.ok().flatten().unwrap_or_default();
        let admin = lines.next_line().await.ok().flatten().unwrap_or_default();
        (start, admin)
    };
    let (start_line, admin_line) = tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the server starts");
    // Keep draining stdout so the child never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let port = start_line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .expect("a port in the start line")
        .to_string();
    // A JSON line (stdout is no terminal) or a text one.
    let admin = match serde_json::from_str::<Value>(&admin_line) {
        Ok(v) => v["admin_token"].as_str().unwrap_or_default().to_string(),
        Err(_) => admin_line
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    Served {
        child,
        base: format!("http://127.0.0.1:{port}"),
        admin,
        start_line,
        _dir: dir,
    }
}

/// Registers a chatbot whose webhook is on loopback: the status says
/// whether private webhooks are allowed.
async fn register_local(s: &Served) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/api/v1/chatbots", s.base))
        .bearer_auth(&s.admin)
        .json(&json!({"name": "local", "webhook_url": "http://127.0.0.1:9/hook"}))
        .send()
        .await
        .expect("request")
}

store_test! {
async fn flags_go_with_the_default_command_and_the_start_line_is_readable() {
    let s = serve(&["--allow-private-webhooks"], &[]).await;
    assert_eq!(register_local(&s).await.status(), 201);
    let line = s.start_line.clone();
    match current_store() {
        StoreKind::Sqlite => assert!(line.contains("database SQLite /"), "{line}"),
        StoreKind::Postgres => {
            assert!(line.contains("database PostgreSQL postgres://"), "{line}");
            assert!(line.contains(":***@"), "the password is masked: {line}");
        }
    }
    assert!(!line.contains("Sqlite(") && !line.contains("Postgres("), "{line}");
    s.stop().await;
}
}

store_test! {
async fn the_private_webhooks_variable_takes_the_usual_boolean_spellings() {
    for (value, allowed) in [("1", true), ("yes", true), ("On", true), ("TRUE", true), ("0", false), ("off", false), ("No", false)] {
        let s = serve(&[], &[("BLOCKHOOK_ALLOW_PRIVATE_WEBHOOKS", value)]).await;
        let r = register_local(&s).await;
        let status = r.status().as_u16();
        if allowed {
            assert_eq!(status, 201, "{value}");
        } else {
            assert_eq!(status, 422, "{value}");
            let p: Value = r.json().await.unwrap();
            assert_eq!(p["errors"][0]["code"], "private_address");
            let msg = p["errors"][0]["message"].as_str().unwrap_or_default();
            assert!(msg.contains("--allow-private-webhooks"), "{msg}");
        }
        s.stop().await;
    }
}
}

store_test! {
async fn logs_one_line_per_request_and_attempt_without_tokens() {
    let mut rx = Receiver::start().await;
    let s = serve(&["--allow-private-webhooks", "--log-format", "json"], &[]).await;
    let client = reqwest::Client::new();
    let bot: Value = client
        .post(format!("{}/api/v1/chatbots", s.base))
        .bearer_auth(&s.admin)
        .json(&json!({"name": "logs", "webhook_url": rx.url}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = bot["api_key"].as_str().unwrap().to_string();
    let conv: Value = client
        .post(format!("{}/widget/v1/chatbots/{}/conversations", s.base, bot["id"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let vt = conv["visitor_token"].as_str().unwrap().to_string();
    let cid = conv["conversation_id"].as_str().unwrap();
    let msg: Value = client
        .post(format!("{}/api/v1/conversations/{cid}/messages", s.base))
        .bearer_auth(&key)
        .json(&json!({"blocks": [{"type": "actions", "block_id": "b1", "elements": [{"type": "button", "action_id": "yes", "label": "Yes"}]}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let r = client
        .post(format!("{}/widget/v1/messages/{}/clicks?secret=q", s.base, msg["id"].as_str().unwrap()))
        .bearer_auth(&vt)
        .json(&json!({"block_id": "b1", "action_id": "yes"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let event = rx.take(1, Duration::from_secs(10)).await;
    let url = event[0].json()["response_url"].as_str().unwrap().to_string();
    let token = url.rsplit('/').next().unwrap().to_string();
    let r = client.post(&url).json(&json!({"text": "Thanks"})).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // The attempt's line is written once its outcome is known.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let admin = s.admin.clone();
    let logs = s.stop().await;

    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let requests: Vec<&Value> = lines.iter().filter(|l| l["message"] == "request").collect();
    assert!(requests.len() >= 5, "one line per request: {logs}");
    for r in &requests {
        assert!(r["method"].is_string() && r["path"].is_string(), "{r}");
        assert!(r["status"].is_u64() && r["duration_ms"].is_number(), "{r}");
    }
    assert!(
        requests.iter().any(|r| r["path"] == "/api/v1/responses/…" && r["status"] == 200),
        "the response_url's path is logged without its token: {logs}"
    );
    let attempts: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "delivery attempt")
        .collect();
    assert_eq!(attempts.len(), 1, "{logs}");
    assert_eq!(attempts[0]["status"], 200);
    assert_eq!(attempts[0]["attempt"], 1);
    let signing = bot["signing_secret"].as_str().unwrap();
    for secret in [token.as_str(), key.as_str(), vt.as_str(), admin.as_str(), signing, "secret=q"] {
        assert!(!logs.contains(secret), "{secret} in the log");
    }
}
}

store_test! {
async fn text_logs_have_no_colour_codes_when_redirected() {
    let s = serve(&["--log-format", "text"], &[]).await;
    let r = reqwest::get(format!("{}/healthz", s.base)).await.unwrap();
    assert_eq!(r.status(), 200);
    let logs = s.stop().await;
    assert!(logs.contains("request"), "{logs}");
    assert!(logs.contains("/healthz"), "{logs}");
    assert!(!logs.contains('\u{1b}'), "ANSI codes in a redirected log: {logs:?}");
}
}

fn ask_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_blockhook"));
    cmd.arg("ask")
        .args(args)
        .env_remove("BLOCKHOOK_API_KEY")
        // Nothing listens there: a code other than 69 means no request was made.
        .env("BLOCKHOOK_URL", "http://127.0.0.1:9")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn ask_without_a_key_exits_77_and_a_bad_timeout_64_before_any_request() {
    let out = ask_cmd(&["conv_x", "Deploy?"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(77), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("BLOCKHOOK_API_KEY"));
    for t in ["1s", "4999ms", "2d", "soon"] {
        let out = ask_cmd(&["conv_x", "Deploy?", "--api-key", "sk_x", "--timeout", t])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{t}: {out:?}");
    }
    // A flag that does not exist is a usage error too (not 2, "expired").
    let out = ask_cmd(&["conv_x", "Deploy?", "--api-key", "sk_x", "--bogus"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    // In range, the request is made (and the server is unreachable).
    let out = ask_cmd(&["conv_x", "Deploy?", "--api-key", "sk_x", "--timeout", "5s"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
}

#[tokio::test]
async fn ask_help_lists_the_exit_codes() {
    let out = ask_cmd(&["--help"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for code in [
        "Exit codes",
        "  0 ",
        "  1 ",
        "  2 ",
        "  64 ",
        "  65 ",
        "  69 ",
        "  77 ",
    ] {
        assert!(help.contains(code), "{code} missing from:\n{help}");
    }
}

#[tokio::test]
async fn ask_shows_a_waiting_line_only_on_a_terminal() {
    // Piped stderr: no waiting line.
    let out = ask_cmd(&["conv_x", "Deploy?", "--api-key", "sk_x"])
        .output()
        .await
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("waiting"));
    // On a terminal (util-linux `script` gives the command a pseudo-terminal).
    let out = Command::new("script")
        .args([
            "-qec",
            &format!(
                "{} ask conv_x Deploy? --api-key sk_x --url http://127.0.0.1:9",
                env!("CARGO_BIN_EXE_blockhook")
            ),
            "/dev/null",
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("util-linux script");
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.contains("waiting for an answer in conv_x"), "{seen}");
}

store_test! {
async fn a_form_bound_written_as_an_integer_comes_back_as_one() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let m = app
        .bot_message(&bot, &conv, json!({"blocks": [{"type": "form", "form_id": "f", "fields": [
            {"name": "n", "type": "number", "label": "N", "min": 1, "max": 50},
            {"name": "x", "type": "number", "label": "X", "max": 2.5}]}]}))
        .await;
    let field = &m["blocks"][0]["fields"][0];
    assert!(field["max"].is_u64() && field["max"] == 50, "{field}");
    assert!(field["min"].is_u64() && field["min"] == 1, "{field}");
    assert_eq!(m["blocks"][0]["fields"][1]["max"], 2.5);
    // And so after a trip through the store.
    let list: Value = app
        .get(&format!("/api/v1/conversations/{}/messages", conv.id), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    let raw = list["data"][0]["blocks"][0]["fields"][0]["max"].to_string();
    assert_eq!(raw, "50");
}
}

store_test! {
async fn a_member_answer_is_recorded_exactly_as_sent() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    app.bot_message(&bot, &conv, json!({"blocks": [{"type": "form", "form_id": "f", "fields": [
        {"name": "name", "type": "text", "label": "Name"},
        {"name": "email", "type": "email", "label": "Email", "required": true},
        {"name": "size", "type": "number", "label": "Size"},
        {"name": "ok", "type": "checkbox", "label": "OK"}]}]}))
        .await;
    let list: Value = app
        .get("/api/v1/interactions?status=pending", &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    let id = list["data"][0]["id"].as_str().unwrap().to_string();
    let body = json!({"type": "text", "values": {"email": "a@b.co"}});
    let r = app
        .client
        .post(app.url(&format!("/api/v1/interactions/{id}/responses")))
        .bearer_auth(&bot.api_key)
        .header("Idempotency-Key", "k1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let mut response = v["response"].clone();
    assert!(response["submitted_at"].is_string(), "{response}");
    response.as_object_mut().unwrap().remove("submitted_at");
    assert_eq!(response, body, "no field filled in with a default");
    // The same when read back.
    let again: Value = app
        .get(&format!("/api/v1/interactions/{id}"), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["response"], v["response"]);
}
}
