//! The endpoint pages (§13 endpoints in §17's portal and in the dashboard)
//! in a real headless Chromium, on both stores: an endpoint added through
//! the portal framed on another origin (a 422 shown at its field first),
//! paused and enabled, tested (its delivery seen), its secret rotated and
//! shown once, deleted after a confirmation; chatbot B's endpoints never in
//! A's portal; a read-only link that offers no action; the dashboard's
//! endpoints and an event's deliveries per endpoint; 360 and 1280 px, dark
//! mode, axe-core finds nothing.

use std::time::Duration;

use serde_json::{Value, json};

use super::driver::{no_violations, run as drive};
use super::portal::admin_page;
use super::site::{Site, bot_for};
use crate::helpers::{Bot, Receiver, TestApp, spawn_app};
use crate::portal::link;

async fn add_endpoint(app: &TestApp, bot: &Bot, body: Value) -> String {
    let r = app.post("/api/v1/endpoints", &bot.api_key, &body).await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    v["id"].as_str().expect("id").to_string()
}

async fn endpoint_ids(app: &TestApp, bot: &Bot) -> Vec<String> {
    let r = app.get("/api/v1/endpoints", &bot.api_key).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    v["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_string))
        .collect()
}

fn fits(what: &str, v: &Value) {
    assert!(
        v["scrollWidth"].as_i64() <= v["clientWidth"].as_i64(),
        "{what}: wider than the page: {v}"
    );
}

fn secret(v: &Value) -> &str {
    v.as_str()
        .filter(|s| s.starts_with("whsec_"))
        .unwrap_or_else(|| panic!("a whsec_ secret: {v}"))
}

store_test! {
async fn an_endpoint_is_added_paused_tested_rotated_and_deleted_in_the_framed_portal() {
    let app = spawn_app().await;
    let admin = Site::start().await;
    let mut receiver = Receiver::start().await;
    let a = bot_for(&app, "http://127.0.0.1:9/hook", json!([admin.origin])).await;
    let b = bot_for(&app, "http://127.0.0.1:9/other", json!(["*"])).await;
    add_endpoint(&app, &b, json!({"url": "http://127.0.0.1:9/b-only-endpoint"})).await;
    let (_, l) = link(&app, &a, json!({})).await;
    let page = admin.put("/webhooks", admin_page(l["url"].as_str().expect("url")));

    let out = drive(
        "portal_endpoints",
        json!({"allowed_page": page, "receiver_url": receiver.url}),
    )
    .await;
    assert_eq!(out["pageErrors"], json!([]));
    // The default endpoint, marked, first; it cannot be deleted.
    let before = &out["before"];
    assert_eq!(before.as_array().map(Vec::len), Some(1), "{before}");
    assert_eq!(before[0]["default"], true);
    assert_eq!(before[0]["url"], "http://127.0.0.1:9/hook");
    assert_eq!(before[0]["actions"], json!(["test", "edit", "pause", "rotate"]));
    let text = out["text"].as_str().expect("text");
    assert!(!text.contains("b-only-endpoint"), "B's endpoint in A's portal: {text}");

    // The 422s, each at the field its pointer names.
    let url_error = &out["urlError"];
    assert_eq!(url_error["box"], "/url", "{url_error}");
    assert_eq!(url_error["invalid"], "true");
    assert_eq!(url_error["describedBy"], true);
    let header_error = &out["headerError"];
    assert_eq!(header_error["box"], "pair", "{header_error}");
    assert_eq!(header_error["boxValue"], "Content-Type");
    assert_eq!(header_error["code"], "forbidden_header");
    assert_eq!(header_error["describedBy"], true);
    no_violations("the form with its errors", &out["axeForm"]);

    // Added: listed after the default, its secret shown.
    let id = out["id"].as_str().expect("id").to_string();
    let created = &out["created"];
    assert_eq!(created.as_array().map(Vec::len), Some(2), "{created}");
    assert_eq!(created[0]["default"], true);
    assert_eq!(created[1]["id"], id.as_str());
    assert_eq!(created[1]["url"], receiver.url.as_str());
    assert_eq!(created[1]["actions"], json!(["test", "edit", "pause", "rotate", "delete"]));
    let first_secret = secret(&out["createdSecret"]).to_string();
    assert_eq!(out["paused"]["state"], "paused");
    assert_eq!(out["paused"]["actions"], json!(["test", "edit", "enable", "rotate", "delete"]));
    assert_eq!(out["enabled"]["state"], "enabled");

    // The test reached the receiver, with the endpoint's header, and the page saw it.
    assert_eq!(out["test"]["outcome"], "delivered", "{}", out["test"]);
    let got = receiver.next(Duration::from_secs(5)).await.expect("the test event");
    assert_eq!(got.json()["type"], "webhook.test");
    assert_eq!(got.header("x-shop"), Some("plants"));
    assert!(out["health"].as_str().is_some_and(|h| h.contains("1 succeeded")), "{}", out["health"]);
    assert_eq!(out["filtered"].as_array().map(Vec::len), Some(1), "{}", out["filtered"]);
    let delivery = out["delivery"].as_str().expect("delivery");
    assert!(delivery.contains(&receiver.url) && delivery.contains("HTTP 200"), "{delivery}");
    assert!(out["redelivered"].as_str().is_some_and(|t| t.contains("Queued again")), "{}", out["redelivered"]);

    // Rotated: a new secret, shown once.
    let rotated = secret(&out["rotatedSecret"]);
    assert_ne!(rotated, first_secret);
    no_violations("the confirmation dialog", &out["axeDialog"]);

    assert_eq!(out["editUrl"], receiver.url.as_str(), "the edit form is filled");
    assert_eq!(out["edited"], "Order system");

    // Deleted after a confirmation (cancelled first, from the keyboard).
    assert_eq!(out["dialogFocus"], "no", "the dialog starts on Cancel");
    assert_eq!(out["dialogClosed"], 0, "Escape closes it");
    assert!(out["afterCancel"].as_array().is_some_and(|l| l.iter().any(|x| x == id.as_str())));
    assert_eq!(out["after"].as_array().map(Vec::len), Some(1), "{}", out["after"]);
    assert!(!out["textAfter"].as_str().expect("text").contains("whsec_"), "a secret shown again");
    assert_eq!(endpoint_ids(&app, &a).await.len(), 1, "deleted on the server");
    no_violations("1280", &out["axe"]);
    fits("1280", &out["overflow"]);

    // 360 px, dark.
    assert_eq!(out["narrowError"]["box"], "pair");
    assert_eq!(out["narrowError"]["code"], "forbidden_header");
    fits("360 dark", &out["narrowOverflow"]);
    no_violations("360 dark", &out["narrowAxe"]);
    assert_eq!(out["narrowBackground"], "rgb(24, 27, 33)", "dark mode");
    receiver.stop().await;
    admin.stop().await;
}
}

store_test! {
async fn a_read_only_portal_shows_the_endpoints_and_deliveries_and_offers_no_action() {
    let app = spawn_app().await;
    let bot = app.create_bot("http://127.0.0.1:9/hook").await;
    let other = add_endpoint(&app, &bot, json!({"url": "http://127.0.0.1:9/second", "description": "CRM"})).await;
    let r = app
        .post(&format!("/api/v1/endpoints/{other}/test"), &bot.api_key, &json!({}))
        .await;
    assert_eq!(r.status(), 202);
    let (_, l) = link(&app, &bot, json!({"read_only": true})).await;
    let out = drive("portal_endpoints_read_only", json!({"portal_url": l["url"]})).await;
    let eps = out["endpoints"].as_array().expect("endpoints");
    assert_eq!(eps.len(), 2, "{eps:?}");
    assert_eq!(eps[0]["default"], true);
    assert_eq!(eps[1]["id"], other.as_str());
    assert!(eps.iter().all(|e| e["actions"] == json!([])), "{eps:?}");
    assert_eq!(out["deliveries"], json!([other]), "the test's one delivery");
    assert_eq!(out["buttons"], json!([]), "no button changes anything");
    assert_eq!(out["forms"], 0);
    no_violations("read-only", &out["axe"]);
}
}

store_test! {
async fn the_dashboard_adds_and_tests_an_endpoint_and_shows_deliveries_per_endpoint() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let bot = app.create_bot(&receiver.url).await;
    let out = drive(
        "dashboard_endpoints",
        json!({"url": app.address, "token": bot.api_key, "receiver_url": receiver.url}),
    )
    .await;
    for size in ["1280", "360"] {
        let r = &out[size];
        assert_eq!(r["pageErrors"], json!([]), "{size}");
        assert_eq!(r["before"][0]["default"], true, "{size}");
        assert_eq!(r["urlError"]["box"], "/url", "{size}: {}", r["urlError"]);
        secret(&r["secret"]);
        assert_eq!(r["test"], "delivered", "{size}");
        let delivery = r["delivery"].as_str().expect("delivery");
        assert!(delivery.contains("200") && delivery.contains("Redeliver to this endpoint"), "{size}: {delivery}");
        assert!(r["redelivered"].as_str().is_some_and(|t| t.contains("Queued again")), "{size}: {}", r["redelivered"]);
        fits(size, &r["overflow"]);
        no_violations(size, &r["axe"]);
    }
    assert_eq!(endpoint_ids(&app, &bot).await.len(), 3, "two added");
    receiver.stop().await;
}
}
