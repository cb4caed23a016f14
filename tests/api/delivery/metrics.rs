//! `GET /metrics`: events by type, deliveries by outcome, attempt latency,
//! queue depth and the age of the oldest waiting delivery.

use std::time::Duration;

use super::{conversation_with_click, refusing_port};
use crate::helpers::{Receiver, spawn_app};

/// The value of the sample named exactly `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

store_test! {
async fn metrics_expose_the_delivery_pipeline() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;
    rx.take(1, Duration::from_secs(5)).await;
    // One more that cannot be delivered: it waits in the queue.
    let down = app
        .create_bot(&format!("http://127.0.0.1:{}/hook", refusing_port()))
        .await;
    conversation_with_click(&app, &down).await;
    let id = super::super::event_ids_in_order(&app, &down).await.remove(0);
    app.wait_event(&down, &id, Duration::from_secs(5), |e| {
        e["status"] == "failed"
    })
    .await;
    // The delivered event's outcome is recorded too.
    let id_ok = super::super::event_ids_in_order(&app, &bot).await.remove(0);
    app.wait_event(&bot, &id_ok, Duration::from_secs(3), |e| {
        e["status"] == "succeeded"
    })
    .await;

    let r = app.get("/metrics", "").await;
    assert_eq!(r.status(), 200);
    let ct = r.headers()["content-type"]
        .to_str()
        .unwrap_or_default()
        .to_string();
    assert!(ct.starts_with("text/plain"), "{ct}");
    let text = r.text().await.expect("text");

    let clicked = sample(
        &text,
        "blockhook_events_total{type=\"interaction.button_clicked\"}",
    );
    assert!(clicked.is_some_and(|n| n >= 2.0), "{text}");
    let ok = sample(&text, "blockhook_deliveries_total{outcome=\"succeeded\"}");
    assert!(ok.is_some_and(|n| n >= 1.0), "{text}");
    let failed = sample(&text, "blockhook_deliveries_total{outcome=\"failed\"}");
    assert!(failed.is_some_and(|n| n >= 1.0), "{text}");
    assert!(
        text.contains("blockhook_attempt_duration_seconds_bucket{le=\"0.005\"}"),
        "{text}"
    );
    let count = sample(&text, "blockhook_attempt_duration_seconds_count");
    assert!(count.is_some_and(|n| n >= 2.0), "{text}");
    // Gauges read from this app's own store at scrape time.
    assert_eq!(sample(&text, "blockhook_queue_depth"), Some(1.0), "{text}");
    let age = sample(&text, "blockhook_oldest_pending_age_seconds");
    assert!(age.is_some_and(|a| a > 0.0 && a < 60.0), "{text}");
}
}
