//! The log of a real `blockhook serve` whose output is no terminal: JSON by
//! default, every line one object (the startup line included), one line
//! per request and per delivery attempt, and no credential anywhere.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{ADMIN_TOKEN, Receiver, TestApp};

/// The child, killed if the test ends early.
pub(super) struct Server(pub(super) Child);

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts `blockhook serve` on a fresh SQLite file with stdout and stderr
/// piped; returns it, its stdout's first line and a handle on it.
fn start(dir: &tempfile::TempDir) -> (Server, String, TestApp) {
    start_with(dir, &[], &[])
}

/// [`start`] with more flags and variables (no OTLP endpoint unless given).
pub(super) fn start_with(
    dir: &tempfile::TempDir,
    flags: &[&str],
    vars: &[(&str, &str)],
) -> (Server, String, TestApp) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let db = dir.path().join("blockhook.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--database",
            &format!("sqlite://{}", db.display()),
            "--admin-token",
            ADMIN_TOKEN,
            "--allow-private-webhooks",
        ])
        .args(flags)
        .env_remove("BLOCKHOOK_LOG_FORMAT")
        .env_remove("RUST_LOG")
        .env_remove("BLOCKHOOK_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start blockhook");
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout"))
        .read_line(&mut first)
        .expect("startup line");
    let line: Value = serde_json::from_str(&first).expect("the startup line is JSON");
    let url = line["url"].as_str().expect("url").to_string();
    let port: u16 = url.rsplit(':').next().expect("port").parse().expect("port");
    let app = TestApp {
        address: url,
        port,
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client"),
        dir: tempfile::tempdir().expect("tempdir"),
        db_path: db.display().to_string(),
        database: blockhook::config::Database::Sqlite(db.display().to_string()),
    };
    (Server(child), first, app)
}

/// Stops the server with SIGTERM; its exit status, the rest of its stdout
/// and its stderr.
pub(super) async fn stop(mut server: Server) -> (std::process::ExitStatus, String, String) {
    let pid = server.0.id() as i32;
    unsafe { libc::kill(pid, libc::SIGTERM) };
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let status = server.0.wait().expect("wait");
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut o) = server.0.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = server.0.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status, out, err)
    })
    .await
    .expect("join")
}

#[actix_web::test]
async fn json_logs_have_a_line_per_request_and_attempt_and_no_credential() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, first, app) = start(&dir);
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, false).await;
    let mid = m["id"].as_str().expect("id");
    let r = app
        .client
        .post(app.url(&format!("/widget/v1/messages/{mid}/clicks")))
        .bearer_auth(&conv.token)
        .header("x-request-id", "req-from-the-caller-1")
        .json(&json!({"block_id": "b1", "action_id": "approve"}))
        .send()
        .await
        .expect("click");
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["x-request-id"].to_str().ok(),
        Some("req-from-the-caller-1")
    );
    let got = rx.take(1, Duration::from_secs(10)).await;
    let event: Value = serde_json::from_slice(&got[0].body).expect("event");
    let response_url = event["response_url"]
        .as_str()
        .expect("response_url")
        .to_string();
    // The response_url's token is in its path: used once, it must not be logged.
    let r = app
        .post(
            response_url.trim_start_matches(&app.address),
            "",
            &json!({"text": "thanks"}),
        )
        .await;
    assert!(r.status().is_success(), "{}", r.status());
    let event_id = event["event_id"].as_str().expect("event_id").to_string();
    app.wait_event(&bot, &event_id, Duration::from_secs(10), |e| {
        e["status"] == "succeeded"
    })
    .await;
    // A clean stop flushes the log.
    let (status, out, err) = stop(server).await;
    assert_eq!(status.code(), Some(0), "a clean shutdown exits 0; {err}");
    let all = format!("{first}{out}{err}");

    let lines: Vec<Value> = all
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let click = lines
        .iter()
        .find(|l| l["request_id"] == "req-from-the-caller-1")
        .unwrap_or_else(|| panic!("no line of the click:\n{all}"));
    assert_eq!(click["method"], "POST", "{click}");
    assert_eq!(
        click["route"], "/widget/v1/messages/{mid}/clicks",
        "{click}"
    );
    assert_eq!(click["status"], 200, "{click}");
    assert!(click["duration_ms"].is_u64(), "whole milliseconds: {click}");
    let attempt = lines
        .iter()
        .find(|l| l["event_id"] == event_id.as_str() && l["attempt"] == 1)
        .unwrap_or_else(|| panic!("no line of the attempt:\n{all}"));
    assert_eq!(
        attempt["endpoint_id"],
        bot.id.replacen("cb_", "ep_", 1),
        "the default endpoint's id: {attempt}"
    );
    assert_eq!(attempt["status"], 200, "{attempt}");
    assert!(attempt["duration_ms"].is_u64(), "{attempt}");

    let token = response_url.rsplit('/').next().expect("token");
    for (what, secret) in [
        ("api key", bot.api_key.as_str()),
        ("signing secret", bot.signing_secret.as_str()),
        ("admin token", ADMIN_TOKEN),
        ("visitor token", conv.token.as_str()),
        ("response_url token", token),
    ] {
        assert!(!all.contains(secret), "the {what} is in the log:\n{all}");
    }
}
