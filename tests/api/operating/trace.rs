//! W3C trace context: the `traceparent` of the request that caused an
//! event continues on every webhook POST of it, retries included (kept
//! with the event in the store).

use std::time::Duration;

use serde_json::json;

use crate::delivery::reusable_buttons;
use crate::helpers::{Answer, Receiver, spawn_app_with};

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// `traceparent` as received: version, trace id, span id, flags.
fn parts(h: &str) -> Vec<String> {
    let p: Vec<String> = h.split('-').map(str::to_string).collect();
    assert_eq!(p.len(), 4, "{h}");
    assert_eq!(p[0], "00", "{h}");
    assert_eq!(p[1].len(), 32, "{h}");
    assert_eq!(p[2].len(), 16, "{h}");
    assert!(
        h.bytes()
            .all(|b| b == b'-' || b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{h}"
    );
    p
}

store_test! {
async fn a_click_s_trace_continues_into_every_attempt_of_its_webhook() {
    let app = spawn_app_with(crate::helpers::retry_delays(
        Duration::from_millis(50),
        Duration::from_millis(100),
    ))
    .await;
    // The first attempt fails: the retry is claimed again from the store.
    let mut rx = Receiver::start_with(vec![Answer::status(500)]).await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    let r = app
        .client
        .post(app.url(&format!("/widget/v1/messages/{mid}/clicks")))
        .bearer_auth(&conv.token)
        .header("traceparent", CALLER)
        .json(&json!({"block_id": "b1", "action_id": "approve"}))
        .send()
        .await
        .expect("click");
    assert_eq!(r.status(), 200);
    let got = rx.take(2, Duration::from_secs(10)).await;
    let mut spans = Vec::new();
    for g in &got {
        let h = g.header("traceparent").expect("a traceparent on the webhook");
        let p = parts(h);
        assert_eq!(p[1], TRACE_ID, "the caller's trace: {h}");
        assert_ne!(p[2], "00f067aa0ba902b7", "a span of its own: {h}");
        assert_eq!(p[3], "01", "{h}");
        spans.push(p[2].clone());
    }
    assert_ne!(spans[0], spans[1], "each attempt is a span of its own");

    // Without a traceparent a click starts a trace of its own; the next
    // click, another.
    let mut traces = Vec::new();
    for _ in 0..2 {
        app.click(&conv, &mid, "b1", "approve").await;
        let g = rx.take(1, Duration::from_secs(10)).await;
        let h = g[0].header("traceparent").expect("traceparent").to_string();
        traces.push(parts(&h)[1].clone());
    }
    assert_ne!(traces[0], TRACE_ID);
    assert_ne!(traces[0], traces[1]);
    assert_ne!(traces[0], "0".repeat(32));
}
}

store_test! {
async fn a_test_event_and_a_message_carry_their_request_s_trace() {
    let app = crate::helpers::spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let r = app
        .client
        .post(app.url("/api/v1/events/test"))
        .bearer_auth(&bot.api_key)
        .header("traceparent", CALLER)
        .json(&json!({}))
        .send()
        .await
        .expect("test event");
    assert_eq!(r.status(), 202);
    let g = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(parts(g[0].header("traceparent").expect("traceparent"))[1], TRACE_ID);

    let conv = app.create_conv(&bot).await;
    let r = app
        .client
        .post(app.url(&format!("/widget/v1/conversations/{}/messages", conv.id)))
        .bearer_auth(&conv.token)
        .header("traceparent", CALLER)
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .expect("message");
    assert_eq!(r.status(), 201);
    let g = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(parts(g[0].header("traceparent").expect("traceparent"))[1], TRACE_ID);
}
}
