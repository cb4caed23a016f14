//! The reviewers' dashboard in a real headless Chromium, driven (clicks,
//! typing, viewport sizes) by `tests/dashboard/drive.mjs` with
//! playwright-core against the real app and a real receiver. Chromium and
//! the driver's `npm ci` are required: a missing one fails, never skips.
//!
//! With `BLOCKHOOK_SCREENSHOTS=<dir>` the 360 px and desktop runs save
//! `dashboard-360.png` and `dashboard-desktop.png` there (docs/screenshots).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{
    ADMIN_TOKEN, Answer, Bot, Conv, Receiver, TestApp, spawn_app, spawn_app_with,
};

fn driver_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dashboard")
}

/// Runs one scenario of the driver; returns what it saw.
fn drive(scenario: &str, address: &str, token: &str, extra: Value) -> Value {
    let dir = driver_dir();
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "the dashboard driver is not installed: run `npm ci --prefix tests/dashboard` (scripts/test does)"
    );
    let chromium =
        std::env::var("BLOCKHOOK_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "Chromium is required at {chromium} (apt-get install -y chromium)"
    );
    let mut input = json!({
        "scenario": scenario,
        "url": address,
        "token": token,
        "chromium": chromium,
        "screenshots": std::env::var("BLOCKHOOK_SCREENSHOTS").ok(),
    });
    if let (Some(o), Some(e)) = (input.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    let mut child = Command::new("node")
        .arg(dir.join("drive.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node is required to drive the dashboard");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("driver ran");
    assert!(
        out.status.success(),
        "{scenario}: the driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("driver output is JSON");
    assert_eq!(
        v["pageErrors"],
        json!([]),
        "{scenario}: script errors on the page"
    );
    v
}

async fn run_blocking(scenario: &'static str, app: &TestApp, token: &str, extra: Value) -> Value {
    let (address, token) = (app.address.clone(), token.to_string());
    // The driver blocks; the app and the receiver keep serving meanwhile.
    actix_web::rt::task::spawn_blocking(move || drive(scenario, &address, &token, extra))
        .await
        .expect("driver thread")
}

/// A chatbot with what a reviewer sees on a working day: one dead delivery
/// (its receiver answered 500 on the only try), a visitor's message
/// delivered, and a pending question answering it.
struct Day {
    bot: Bot,
    visitor: Conv,
    dead: String,
    delivered: String,
    signature: String,
}

async fn working_day(app: &TestApp, rx: &mut Receiver) -> Day {
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "Support bot", "webhook_url": rx.url}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    let bot = Bot {
        id: v["id"].as_str().expect("id").into(),
        api_key: v["api_key"].as_str().expect("key").into(),
        signing_secret: v["signing_secret"].as_str().expect("secret").into(),
        json: v,
    };
    let a = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &a, true).await;
    assert_eq!(
        app.click(&a, m["id"].as_str().expect("id"), "b1", "approve")
            .await
            .status(),
        200
    );
    let first = rx.take(1, Duration::from_secs(10)).await.remove(0);
    let dead = first.header("webhook-id").expect("id").to_string();
    let e = app
        .wait_event(&bot, &dead, Duration::from_secs(10), |e| {
            e["status"] == "dead"
        })
        .await;
    assert_eq!(e["status"], "dead", "{e}");

    let visitor = app.create_conv(&bot).await;
    let r = app
        .post(
            &format!("/widget/v1/conversations/{}/messages", visitor.id),
            &visitor.token,
            &json!({"text": "Can someone call me back about pricing?"}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let got = rx.take(1, Duration::from_secs(10)).await.remove(0);
    let delivered = got.header("webhook-id").expect("id").to_string();
    let signature = got
        .header("webhook-signature")
        .expect("signature")
        .to_string();
    app.wait_event(&bot, &delivered, Duration::from_secs(10), |e| {
        e["status"] == "succeeded"
    })
    .await;
    app.buttons(&bot, &visitor, true).await;
    Day {
        bot,
        visitor,
        dead,
        delivered,
        signature,
    }
}

async fn app_and_day() -> (TestApp, Receiver, Day) {
    let app = spawn_app_with(|c| c.retry_max_attempts = 1).await;
    let mut rx = Receiver::start_with(vec![Answer::status(500)]).await;
    let day = working_day(&app, &mut rx).await;
    (app, rx, day)
}

#[actix_web::test]
async fn at_360_px_nothing_overflows_and_the_detail_opens_under_its_row() {
    let (app, _rx, day) = app_and_day().await;
    let v = run_blocking("narrow", &app, &day.bot.api_key, json!({})).await;
    for state in ["loaded", "withDetail", "withInboxOpen"] {
        let w = v[state]["scrollWidth"].as_i64().expect("scrollWidth");
        assert!(w <= 360, "{state}: the page is {w} px wide at 360 px: {v}");
    }
    assert_eq!(v["signOutVisible"], true, "Sign out is off-screen: {v}");
    assert_eq!(v["botName"], "Support bot");
    assert_eq!(v["botUrlVisible"], true, "{v}");
    let gap = v["detailGap"].as_f64().expect("gap");
    assert!(
        (0.0..=4.0).contains(&gap),
        "the detail opens {gap} px below its row: {v}"
    );
    assert_eq!(v["detailInside"], true, "{v}");
    assert_eq!(v["answerVisible"], true, "{v}");
}

#[actix_web::test]
async fn a_reviewer_tests_searches_filters_reads_headers_answers_and_redelivers_all() {
    let (app, mut rx, day) = app_and_day().await;
    let v = run_blocking(
        "desktop",
        &app,
        &day.bot.api_key,
        json!({"event_id": day.delivered}),
    )
    .await;

    assert_eq!(v["botName"], "Support bot");
    assert_eq!(
        v["botUrl"],
        rx.url.as_str(),
        "the endpoint URL in the header"
    );
    assert!(
        v["hint"]
            .as_str()
            .is_some_and(|h| h.starts_with("Choose a delivery")),
        "{v}"
    );
    assert!(
        v["overflow"]["scrollWidth"]
            .as_i64()
            .is_some_and(|w| w <= 1280),
        "{v}"
    );

    // The inbox card: compact, who and what, styles of the buttons.
    assert_eq!(v["cardVisitor"], day.visitor.visitor["display_name"], "{v}");
    assert_eq!(v["cardSaid"], "“Can someone call me back about pricing?”");
    assert_eq!(v["answerHiddenBeforeOpen"], true);
    assert_eq!(v["answerShownAfterOpen"], true);
    assert!(
        v["cardHeight"].as_f64().is_some_and(|h| h < 80.0),
        "a compact card: {v}"
    );
    assert_eq!(
        v["optionClasses"],
        json!([["approve", "btn btn-primary"], ["deny", "btn"]]),
        "button styles kept"
    );

    // The headers actually sent, signature included.
    let shown = v["headersShown"].as_str().expect("headers");
    assert!(
        shown.contains(&format!("webhook-signature: {}", day.signature)),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("webhook-id: {}", day.delivered)),
        "{shown}"
    );
    assert!(shown.contains("x-myaichatbot-attempt: 1"), "{shown}");

    assert_eq!(v["searchRows"], 1);
    assert!(
        v["searchEmpty"]
            .as_str()
            .is_some_and(|t| t.contains("No delivery matches")),
        "{v}"
    );
    assert_eq!(v["typeRows"], 1);
    assert_eq!(v["deadRows"], 1);

    assert!(
        v["testResult"]
            .as_str()
            .is_some_and(|t| t.starts_with("The endpoint accepted the test event: 200")),
        "{v}"
    );
    assert!(
        v["confirmText"]
            .as_str()
            .is_some_and(|t| t.contains("dead (1)")),
        "{v}"
    );
    assert_eq!(v["confirmButton"], "Redeliver 1 dead");
    assert_eq!(v["bulkResult"], "Queued 1 dead delivery for redelivery.");
    let e = app
        .wait_event(&day.bot, &day.dead, Duration::from_secs(10), |e| {
            e["status"] == "succeeded"
        })
        .await;
    assert_eq!(e["status"], "succeeded", "{e}");
    let sent: Vec<String> = rx
        .all()
        .iter()
        .filter_map(|r| r.header("webhook-id").map(str::to_string))
        .collect();
    assert_eq!(
        sent.iter().filter(|id| **id == day.dead).count(),
        2,
        "tried, then redelivered once"
    );
    let tests = rx
        .all()
        .iter()
        .filter(|r| r.json()["type"] == "webhook.test")
        .count();
    assert_eq!(tests, 1, "one test event reached the receiver");
    while rx.next(Duration::from_millis(10)).await.is_some() {}

    assert_eq!(v["chartLines"], 2, "p50 and p90");
    assert!(
        v["chartPoints"].as_str().is_some_and(|p| !p.is_empty()),
        "{v}"
    );
}

#[actix_web::test]
async fn the_admin_signs_in_and_switches_between_chatbots() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let one = app.create_bot(&rx.url).await;
    let other_url = format!("{}?b=2", rx.url);
    let two = app.create_bot(&other_url).await;
    let conv = app.create_conv(&one).await;
    let m = app.buttons(&one, &conv, true).await;
    assert_eq!(
        app.click(&conv, m["id"].as_str().expect("id"), "b1", "approve")
            .await
            .status(),
        200
    );
    let got = rx.take(1, Duration::from_secs(10)).await.remove(0);
    let event = got.header("webhook-id").expect("id").to_string();

    let v = run_blocking(
        "admin",
        &app,
        ADMIN_TOKEN,
        json!({"switch_to": one.id, "switch_url": rx.url, "switch_event": event}),
    )
    .await;
    let ids: Vec<&str> = v["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| o[0].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        ids,
        vec![two.id.as_str(), one.id.as_str()],
        "every chatbot, newest first: {v}"
    );
    assert_eq!(
        v["firstUrl"],
        other_url.as_str(),
        "the newest is shown first"
    );
    assert_eq!(v["switchedUrl"], rx.url.as_str());
    assert_eq!(v["rows"], json!([event]), "the chosen chatbot's deliveries");
    assert_eq!(v["refused"], "This key or token is not valid.");
    assert!(
        v["narrow"]["scrollWidth"]
            .as_i64()
            .is_some_and(|w| w <= 360),
        "{v}"
    );
    assert_eq!(v["narrowSignOut"], true, "{v}");
    assert_eq!(v["narrowSwitch"], true, "{v}");
}

#[actix_web::test]
async fn empty_lists_say_what_to_do() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let v = run_blocking("empty", &app, &bot.api_key, json!({})).await;
    assert!(
        v["deliveries"]
            .as_str()
            .is_some_and(|t| t.contains("Send test event")),
        "{v}"
    );
    assert!(
        v["inbox"]
            .as_str()
            .is_some_and(|t| t.contains("Nothing is waiting")),
        "{v}"
    );
    assert!(
        v["chart"]
            .as_str()
            .is_some_and(|t| t.contains("Send test event")),
        "{v}"
    );
    assert!(
        v["hint"]
            .as_str()
            .is_some_and(|t| t.starts_with("Choose a delivery")),
        "{v}"
    );
    assert!(
        v["overflow"]["scrollWidth"]
            .as_i64()
            .is_some_and(|w| w <= 360),
        "{v}"
    );
    assert_eq!(v["signOutVisible"], true);
}
