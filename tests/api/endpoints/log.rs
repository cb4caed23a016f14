//! The deliveries log with several endpoints (§13): one delivery per
//! matching endpoint, the event's status aggregated over them, filters and
//! redelivery by endpoint, and a test to one endpoint only.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{call, create, default_id, json_with};
use crate::helpers::{
    Answer, Bot, Receiver, TestApp, retry_delays, spawn_app_with, verify_signature,
};

fn fast() -> impl FnOnce(&mut blockhook::config::Config) {
    retry_delays(Duration::from_millis(100), Duration::from_millis(300))
}

/// A message with buttons `approve` and `reject` that stay clickable.
async fn two_buttons(app: &TestApp, bot: &Bot, conv: &crate::helpers::Conv) -> String {
    let m = app
        .bot_message(
            bot,
            conv,
            json!({"text": "Choose", "blocks": [{"type": "actions", "block_id": "b1", "disable_on_click": false, "elements": [
                {"type": "button", "action_id": "approve", "label": "Approve", "value": "yes"},
                {"type": "button", "action_id": "reject", "label": "Reject", "value": "no"}
            ]}]}),
        )
        .await;
    m["id"].as_str().expect("message id").to_string()
}

async fn click(app: &TestApp, conv: &crate::helpers::Conv, mid: &str, action: &str) {
    let r = app.click(conv, mid, "b1", action).await;
    assert_eq!(r.status(), 200);
}

/// Polls `GET /api/v1/events/{id}` until `done` holds (10 s at most).
async fn event_until(app: &TestApp, bot: &Bot, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let e = app.event(bot, id).await;
        if done(&e) || std::time::Instant::now() > deadline {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn delivery<'a>(e: &'a Value, endpoint_id: &str) -> Option<&'a Value> {
    e["deliveries"]
        .as_array()?
        .iter()
        .find(|d| d["endpoint_id"] == endpoint_id)
}

async fn ids(app: &TestApp, bot: &Bot, query: &str) -> Vec<String> {
    let v = json_with(
        call(
            app,
            bot,
            Method::GET,
            &format!("/api/v1/events?{query}"),
            None,
        )
        .await,
        200,
    )
    .await;
    v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|e| e["event_id"].as_str().expect("id").to_string())
        .collect()
}

store_test! {
async fn an_event_lists_a_delivery_per_matching_endpoint_and_the_worst_status() {
    let app = spawn_app_with(fast()).await;
    let mut main = Receiver::start().await;
    let mut ok = Receiver::start().await;
    let down = Receiver::start_with(vec![]).await;
    down.set_default(Answer::status(500));
    let mut forms = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let approvals = create(&app, &bot, json!({"url": ok.url, "filter": {"action_id": ["approve"]}})).await;
    let failing = create(&app, &bot, json!({"url": down.url, "event_types": ["interaction.button_clicked"]})).await;
    let only_forms = create(&app, &bot, json!({"url": forms.url, "event_types": ["interaction.form_submitted"]})).await;
    let (ap, fa, fo) = (
        approvals["id"].as_str().expect("id"),
        failing["id"].as_str().expect("id"),
        only_forms["id"].as_str().expect("id"),
    );
    let conv = app.create_conv(&bot).await;
    let mid = two_buttons(&app, &bot, &conv).await;
    click(&app, &conv, &mid, "approve").await;
    let first = main.next(Duration::from_secs(10)).await.expect("the default endpoint's delivery");
    let event_id = first.header("webhook-id").expect("webhook-id").to_string();
    let copy = ok.next(Duration::from_secs(10)).await.expect("the approvals endpoint's delivery");
    assert_eq!(copy.header("webhook-id"), Some(event_id.as_str()));
    assert_eq!(copy.body, first.body, "the same bytes");
    assert!(verify_signature(approvals["signing_secret"].as_str().expect("secret"), &copy));

    let e = event_until(&app, &bot, &event_id, |e| {
        delivery(e, fa).is_some_and(|d| d["attempts"].as_u64() >= Some(2))
    })
    .await;
    let endpoints: Vec<&str> = e["deliveries"].as_array().expect("deliveries").iter().map(|d| d["endpoint_id"].as_str().expect("id")).collect();
    assert_eq!(endpoints, [default_id(&bot).as_str(), ap, fa], "the default first, none to the forms endpoint: {e}");
    assert_eq!(delivery(&e, &default_id(&bot)).expect("default")["status"], "succeeded");
    assert_eq!(delivery(&e, ap).expect("approvals")["status"], "succeeded");
    assert_eq!(delivery(&e, fa).expect("failing")["status"], "failed");
    assert_eq!(e["status"], "failed", "the worst of its deliveries: {e}");
    let attempts = e["attempts"].as_array().expect("attempts");
    assert!(attempts.iter().any(|a| a["endpoint_id"] == default_id(&bot) && a["status_code"] == 200));
    assert!(attempts.iter().any(|a| a["endpoint_id"] == fa && a["status_code"] == 500));
    assert!(attempts.iter().all(|a| a["endpoint_id"] != fo));
    assert_eq!(
        e["attempt_count"].as_u64(),
        Some(attempts.len() as u64),
        "the count is over every delivery"
    );

    // The log: by aggregated status, and by one endpoint's delivery.
    assert!(ids(&app, &bot, "status=failed").await.contains(&event_id));
    assert!(!ids(&app, &bot, "status=succeeded").await.contains(&event_id));
    let default = default_id(&bot);
    assert!(ids(&app, &bot, &format!("endpoint_id={default}&status=succeeded")).await.contains(&event_id));
    assert!(ids(&app, &bot, &format!("endpoint_id={fa}&status=failed")).await.contains(&event_id));
    assert!(ids(&app, &bot, &format!("endpoint_id={ap}")).await.contains(&event_id));
    assert!(ids(&app, &bot, &format!("endpoint_id={fo}")).await.is_empty());
    let r = call(&app, &bot, Method::GET, "/api/v1/events?status=skipped", None).await;
    assert_eq!(r.status(), 422, "skipped is no status of an event");

    // Deleted, the failing endpoint's unsent delivery is gone from the event.
    let r = call(&app, &bot, Method::DELETE, &format!("/api/v1/endpoints/{fa}"), None).await;
    assert_eq!(r.status(), 204);
    let e = app.event(&bot, &event_id).await;
    assert!(delivery(&e, fa).is_none(), "{e}");
    assert_eq!(e["status"], "succeeded", "{e}");
    assert!(forms.next(Duration::from_millis(10)).await.is_none(), "no form was submitted");
}
}

store_test! {
async fn a_redelivery_to_one_endpoint_sends_only_there() {
    let app = spawn_app_with(fast()).await;
    let mut main = Receiver::start().await;
    let mut other = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = create(&app, &bot, json!({"url": other.url})).await;
    let ep_id = ep["id"].as_str().expect("id");
    let conv = app.create_conv(&bot).await;
    let mid = two_buttons(&app, &bot, &conv).await;
    click(&app, &conv, &mid, "reject").await;
    let first = main.next(Duration::from_secs(10)).await.expect("default");
    let event_id = first.header("webhook-id").expect("id").to_string();
    other.next(Duration::from_secs(10)).await.expect("other");
    event_until(&app, &bot, &event_id, |e| e["status"] == "succeeded").await;

    let path = format!("/api/v1/events/{event_id}/redeliver");
    let r = call(&app, &bot, Method::POST, &path, Some(&json!({"endpoint_id": ep_id}))).await;
    assert_eq!(r.status(), 202);
    let again = other.next(Duration::from_secs(10)).await.expect("sent again to that endpoint");
    assert_eq!(again.header("webhook-id"), Some(event_id.as_str()));
    assert!(main.next(Duration::from_millis(800)).await.is_none(), "not to the default");
    let e = event_until(&app, &bot, &event_id, |e| delivery(e, ep_id).is_some_and(|d| d["attempts"] == 2 && d["status"] == "succeeded")).await;
    assert_eq!(delivery(&e, &default_id(&bot)).expect("default")["attempts"], 1, "{e}");

    // Without an endpoint: every endpoint's delivery again.
    let r = call(&app, &bot, Method::POST, &path, None).await;
    assert_eq!(r.status(), 202);
    assert!(main.next(Duration::from_secs(10)).await.is_some());
    assert!(other.next(Duration::from_secs(10)).await.is_some());

    // An endpoint the event did not go to, and a bad body.
    let r = call(&app, &bot, Method::POST, &path, Some(&json!({"endpoint_id": "ep_NOPE"}))).await;
    assert_eq!(r.status(), 404);
    let p = json_with(call(&app, &bot, Method::POST, &path, Some(&json!({"endpoint_id": 7}))).await, 422).await;
    assert_eq!(p["errors"][0]["field"], "/endpoint_id", "{p}");
    let p = json_with(
        call(&app, &bot, Method::POST, "/api/v1/events/redeliver", Some(&json!({"status": "dead", "endpoint_id": ""}))).await,
        422,
    )
    .await;
    assert_eq!(p["errors"][0]["field"], "/endpoint_id", "{p}");
}
}

store_test! {
async fn the_bulk_redelivery_takes_one_endpoint_or_all() {
    let app = spawn_app_with(fast()).await;
    let mut main = Receiver::start().await;
    let down = Receiver::start_with(vec![]).await;
    down.set_default(Answer::status(503));
    let bot = app.create_bot(&main.url).await;
    let ep = create(&app, &bot, json!({"url": down.url})).await;
    let ep_id = ep["id"].as_str().expect("id");
    let conv = app.create_conv(&bot).await;
    let mid = two_buttons(&app, &bot, &conv).await;
    click(&app, &conv, &mid, "approve").await;
    let event_id = main.next(Duration::from_secs(10)).await.expect("default").header("webhook-id").expect("id").to_string();
    event_until(&app, &bot, &event_id, |e| delivery(e, ep_id).is_some_and(|d| d["status"] == "failed")).await;
    let count = |v: Value| v["count"].as_u64();
    let to_default = json_with(
        call(&app, &bot, Method::POST, "/api/v1/events/redeliver", Some(&json!({"status": "failed", "endpoint_id": default_id(&bot)}))).await,
        202,
    )
    .await;
    assert_eq!(count(to_default), Some(0), "the default's delivery succeeded");
    let to_it = json_with(
        call(&app, &bot, Method::POST, "/api/v1/events/redeliver", Some(&json!({"status": "failed", "endpoint_id": ep_id}))).await,
        202,
    )
    .await;
    assert_eq!(count(to_it), Some(1));
    let all = json_with(call(&app, &bot, Method::POST, "/api/v1/events/redeliver", Some(&json!({"status": "failed"}))).await, 202).await;
    assert_eq!(count(all), Some(1));
}
}

store_test! {
async fn a_test_goes_to_its_endpoint_only_whatever_its_filter() {
    let app = spawn_app_with(fast()).await;
    let mut main = Receiver::start().await;
    let mut other = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = create(&app, &bot, json!({"url": other.url, "event_types": ["message.received"], "filter": {"user.kind": ["visitor"]}})).await;
    let ep_id = ep["id"].as_str().expect("id");
    let secret = ep["signing_secret"].as_str().expect("secret");

    let v = json_with(call(&app, &bot, Method::POST, &format!("/api/v1/endpoints/{ep_id}/test"), None).await, 202).await;
    let test_id = v["event_id"].as_str().expect("event_id").to_string();
    let got = other.next(Duration::from_secs(10)).await.expect("the test");
    assert_eq!(got.header("webhook-id"), Some(test_id.as_str()));
    assert_eq!(got.json()["type"], "webhook.test");
    assert!(verify_signature(secret, &got), "signed with that endpoint's secret");
    assert!(main.next(Duration::from_millis(800)).await.is_none(), "not to the default endpoint");
    let e = event_until(&app, &bot, &test_id, |e| e["status"] == "succeeded").await;
    let endpoints: Vec<&Value> = e["deliveries"].as_array().expect("deliveries").iter().map(|d| &d["endpoint_id"]).collect();
    assert_eq!(endpoints, [ep_id], "{e}");

    // The default endpoint's test, by its id: there only.
    let v = json_with(call(&app, &bot, Method::POST, &format!("/api/v1/endpoints/{}/test", default_id(&bot)), Some(&json!({}))).await, 202).await;
    let got = main.next(Duration::from_secs(10)).await.expect("the default's test");
    assert_eq!(got.header("webhook-id"), v["event_id"].as_str());
    assert!(other.next(Duration::from_millis(800)).await.is_none(), "a test is never routed elsewhere");

    // Another chatbot's endpoint, an unknown one, a body with keys.
    let stranger = app.create_bot(&main.url).await;
    let r = call(&app, &stranger, Method::POST, &format!("/api/v1/endpoints/{ep_id}/test"), None).await;
    assert_eq!(r.status(), 404);
    let r = call(&app, &bot, Method::POST, "/api/v1/endpoints/ep_NOPE/test", None).await;
    assert_eq!(r.status(), 404);
    let r = call(&app, &bot, Method::POST, &format!("/api/v1/endpoints/{ep_id}/test"), Some(&json!({"x": 1}))).await;
    assert_eq!(r.status(), 422);
}
}
