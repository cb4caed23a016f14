//! `blockhook ask` against a real server: a refusal is one readable line,
//! `--json` prints the problem as it came, an unknown conversation exits 67.

use std::process::Stdio;

use serde_json::Value;
use tokio::process::Command;

use crate::helpers::{Receiver, spawn_app};

async fn ask(base: &str, key: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .arg("ask")
        .args(args)
        .args(["--url", base, "--api-key", key, "--timeout", "5s"])
        .env_remove("BLOCKHOOK_API_KEY")
        .env_remove("BLOCKHOOK_URL")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run blockhook ask")
}

#[actix_web::test]
async fn an_unknown_conversation_exits_67_with_one_readable_line() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let out = ask(&app.address, &bot.api_key, &["conv_nothere", "Deploy?"]).await;
    assert_eq!(out.status.code(), Some(67), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.trim();
    assert_eq!(line.lines().count(), 1, "{err}");
    assert!(line.starts_with("error: "), "{err}");
    assert!(line.ends_with("(not_found)"), "{err}");
    assert!(!line.contains('{'), "no raw JSON: {err}");

    let out = ask(
        &app.address,
        &bot.api_key,
        &["conv_nothere", "Deploy?", "--json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(67), "{out:?}");
    let p: Value = serde_json::from_slice(&out.stderr).expect("the problem as JSON");
    assert_eq!(p["code"], "not_found");
    assert_eq!(p["status"], 404);
}

#[actix_web::test]
async fn serve_help_shows_examples_and_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args(["serve", "--help"])
        .output()
        .await
        .expect("help");
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for s in [
        "Examples:",
        "--database postgres://",
        "  78 ",
        "  73 ",
        "  69 ",
    ] {
        assert!(help.contains(s), "{s} missing from:\n{help}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args(["ask", "--help"])
        .output()
        .await
        .expect("help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Examples:") && help.contains("  67 "),
        "{help}"
    );
}
