//! Standard Webhooks signatures, checked by the reference library from
//! PyPI (run with `python3`) and by the harness's own verifier.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::json;

use super::{attempt_header, conversation_with_click, edit_bot_in_store, webhook_id};
use crate::helpers::{ADMIN_TOKEN, Received, Receiver, spawn_app, verify_signature};

/// Runs `tests/standardwebhooks_verify.py`; true when the library verifies
/// the request with `secret`. A missing `python3` or library fails the test.
pub(super) fn reference_verifies(secret: &str, r: &Received) -> bool {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/standardwebhooks_verify.py"
    );
    let headers: serde_json::Map<String, serde_json::Value> = r
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let input = json!({
        "secret": secret,
        "headers": headers,
        "body_b64": base64::engine::general_purpose::STANDARD.encode(&r.body),
    });
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is required to run the reference verifier");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("verifier ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("the reference verifier could not run ({other:?}): {stderr}"),
    }
}

fn tampered(r: &Received) -> Received {
    let mut t = r.clone();
    let mut body = r.body.to_vec();
    let i = body
        .iter()
        .position(|b| *b == b'1')
        .expect("a digit in the body");
    body[i] = b'2';
    t.body = body.into();
    t
}

store_test! {
async fn deliveries_verify_with_the_reference_library() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = conversation_with_click(&app, &bot).await;
    let r = rx.take(1, Duration::from_secs(5)).await.remove(0);

    let body = r.json();
    assert_eq!(body["conversation_id"], conv.id.as_str());
    assert_eq!(webhook_id(&r), body["event_id"].as_str().expect("event_id"));
    assert_eq!(body["delivery_attempt"], 1);
    assert_eq!(attempt_header(&r), "1");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let ts: i64 = r
        .header("webhook-timestamp")
        .expect("timestamp")
        .parse()
        .expect("unix seconds");
    let now = chrono::Utc::now().timestamp();
    assert!((now - ts).abs() <= 5, "timestamp {ts} is now ({now})");
    let sig = r.header("webhook-signature").expect("signature");
    assert!(sig.starts_with("v1,") && !sig.contains(' '), "{sig}");

    assert!(reference_verifies(&bot.signing_secret, &r));
    assert!(verify_signature(&bot.signing_secret, &r));
    // The checks can fail: a changed byte or another secret is refused.
    assert!(!reference_verifies(&bot.signing_secret, &tampered(&r)));
    assert!(!verify_signature(&bot.signing_secret, &tampered(&r)));
    let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert!(!reference_verifies(other, &r));
}
}

store_test! {
async fn after_rotation_both_secrets_verify_for_a_day() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let old = bot.signing_secret.clone();
    let r = app
        .post(
            &format!("/api/v1/chatbots/{}/rotate-secret", bot.id),
            ADMIN_TOKEN,
            &json!({}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.expect("json");
    let new = v["signing_secret"]
        .as_str()
        .expect("new secret")
        .to_string();
    assert_ne!(new, old);

    conversation_with_click(&app, &bot).await;
    let r = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let sig = r.header("webhook-signature").expect("signature");
    assert_eq!(sig.split(' ').count(), 2, "two signatures: {sig}");
    assert!(reference_verifies(&new, &r), "the new secret verifies");
    assert!(reference_verifies(&old, &r), "the old secret verifies");
    assert!(verify_signature(&new, &r));
    assert!(verify_signature(&old, &r));
    let stranger = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert!(!reference_verifies(stranger, &r));

    // Once the day is over, only the new secret signs.
    edit_bot_in_store(&app, &bot.id, |b| {
        if let Some((_, until)) = b.previous_secret.as_mut() {
            *until = chrono::Utc::now().timestamp_millis() - 1;
        }
    })
    .await;
    conversation_with_click(&app, &bot).await;
    let r = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let sig = r.header("webhook-signature").expect("signature");
    assert!(!sig.contains(' '), "one signature: {sig}");
    assert!(reference_verifies(&new, &r));
    assert!(!reference_verifies(&old, &r));
}
}
