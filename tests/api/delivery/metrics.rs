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
    // Per endpoint (`ep_…`, a default endpoint's id is its chatbot's with
    // `ep_` for `cb_`): this test's bots have endpoints of their own, so the
    // counts are this test's whatever else runs in the process.
    let ok = sample(
        &text,
        &format!("blockhook_deliveries_total{{endpoint_id=\"{}\",outcome=\"succeeded\"}}", bot.id.replacen("cb_", "ep_", 1)),
    );
    assert_eq!(ok, Some(1.0), "{text}");
    let failed = sample(
        &text,
        &format!("blockhook_deliveries_total{{endpoint_id=\"{}\",outcome=\"failed\"}}", down.id.replacen("cb_", "ep_", 1)),
    );
    assert!(failed.is_some_and(|n| n >= 1.0), "{text}");
    assert!(
        text.contains("blockhook_delivery_attempt_duration_seconds_bucket{le=\"0.005\"}"),
        "{text}"
    );
    let count = sample(&text, "blockhook_delivery_attempt_duration_seconds_count");
    assert!(count.is_some_and(|n| n >= 2.0), "{text}");
    let commits = sample(&text, "blockhook_store_commit_duration_seconds_count");
    assert!(commits.is_some_and(|n| n >= 2.0), "{text}");
    // Gauges read from this app's own store at scrape time.
    assert_eq!(sample(&text, "blockhook_queue_depth"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "blockhook_deliveries_waiting"), Some(1.0), "{text}");
    let age = sample(&text, "blockhook_oldest_pending_age_seconds");
    assert!(age.is_some_and(|a| a > 0.0 && a < 60.0), "{text}");
}
}

/// Every family is prefixed, described and typed; requests are counted by
/// route pattern (never the raw path); every event type is counted.
#[actix_web::test]
async fn every_family_is_described_and_requests_count_by_route_pattern() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let before = app.get("/metrics", "").await.text().await.expect("text");
    let tests_before = sample(
        &before,
        "blockhook_events_accepted_total{type=\"webhook.test\"}",
    )
    .unwrap_or(0.0);
    let r = app
        .post("/api/v1/events/test", &bot.api_key, &serde_json::json!({}))
        .await;
    assert_eq!(r.status(), 202);
    rx.take(1, Duration::from_secs(5)).await;
    // A path with an id in it: counted under its pattern.
    let r = app.get("/api/v1/events/evt_nothere", &bot.api_key).await;
    assert_eq!(r.status(), 404);
    let text = app.get("/metrics", "").await.text().await.expect("text");

    let mut families = std::collections::BTreeSet::new();
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = l.split(['{', ' ']).next().unwrap_or_default();
        assert!(name.starts_with("blockhook_"), "{l}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .filter(|f| text.contains(&format!("# TYPE {f} histogram")))
            .unwrap_or(name);
        families.insert(family.to_string());
    }
    for f in &families {
        assert!(
            text.contains(&format!("# HELP {f} ")),
            "no HELP for {f}:\n{text}"
        );
        assert!(
            text.contains(&format!("# TYPE {f} ")),
            "no TYPE for {f}:\n{text}"
        );
    }
    for f in [
        "blockhook_http_requests_total",
        "blockhook_http_request_duration_seconds",
        "blockhook_events_accepted_total",
        "blockhook_deliveries_total",
        "blockhook_delivery_attempt_duration_seconds",
        "blockhook_deliveries_waiting",
        "blockhook_store_commit_duration_seconds",
    ] {
        assert!(families.contains(f), "{f} missing:\n{text}");
    }
    assert!(text.contains("# TYPE blockhook_http_request_duration_seconds histogram"));
    assert!(text.contains("# TYPE blockhook_deliveries_waiting gauge"));
    let tests_after = sample(
        &text,
        "blockhook_events_accepted_total{type=\"webhook.test\"}",
    );
    assert!(tests_after.is_some_and(|n| n > tests_before), "{text}");
    for t in [
        "interaction.button_clicked",
        "interaction.form_submitted",
        "message.received",
    ] {
        assert!(
            text.contains(&format!("blockhook_events_accepted_total{{type=\"{t}\"}}")),
            "{t}: {text}"
        );
    }
    let by_pattern = sample(
        &text,
        "blockhook_http_requests_total{route=\"/api/v1/events/{event_id}\",method=\"GET\",status=\"404\"}",
    );
    assert!(by_pattern.is_some_and(|n| n >= 1.0), "{text}");
    assert!(
        !text.contains("evt_nothere"),
        "a raw path is a label:\n{text}"
    );
    assert!(
        text.contains("blockhook_http_request_duration_seconds_bucket{route=\"/api/v1/events/test\",le=\"0.005\"}"),
        "{text}"
    );
}
