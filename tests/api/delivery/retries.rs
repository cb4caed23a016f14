//! Retries: identical bodies and a counting attempt header, the attempt
//! log, `dead` after the last attempt, redelivery, and `Retry-After`.

use std::time::Duration;

use serde_json::{Value, json};

use super::{attempt_codes, attempt_header, conversation_with_click, redeliver, webhook_id};
use crate::helpers::{Answer, Receiver, retry_delays, spawn_app, spawn_app_with};

fn is_rfc3339_ms(s: &Value) -> bool {
    s.as_str().is_some_and(|s| {
        s.len() == 24 && s.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(s).is_ok()
    })
}

store_test! {
async fn failing_receiver_gets_identical_bodies_until_it_succeeds() {
    // A one-second gap between attempts leaves time to see `failed`.
    let app = spawn_app_with(retry_delays(Duration::from_secs(1), Duration::from_secs(1))).await;
    let mut rx = Receiver::start_with(vec![
        Answer::json(500, json!({"error": "boom"})),
        Answer::status(500),
        Answer::json(200, json!({"ok": true})),
    ])
    .await;
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;

    let first = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let id = webhook_id(&first);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(3), |e| {
            e["status"] == "failed"
        })
        .await;
    assert_eq!(e["status"], "failed", "{e}");

    let mut got = vec![first];
    got.extend(rx.take(2, Duration::from_secs(10)).await);
    for r in &got {
        assert_eq!(r.body, got[0].body, "byte-identical bodies");
        assert_eq!(webhook_id(r), id);
        assert_eq!(r.json()["event_id"], id.as_str());
        assert_eq!(r.json()["delivery_attempt"], 1);
    }
    let attempts: Vec<String> = got.iter().map(attempt_header).collect();
    assert_eq!(attempts, ["1", "2", "3"]);

    let e = app
        .wait_event(&bot, &id, Duration::from_secs(3), |e| {
            e["status"] == "succeeded"
        })
        .await;
    assert_eq!(e["status"], "succeeded", "{e}");
    assert_eq!(e["event_id"], id.as_str());
    assert_eq!(e["type"], "interaction.button_clicked");
    assert!(is_rfc3339_ms(&e["created_at"]));
    assert_eq!(e["payload"], got[0].json());
    let log = e["attempts"].as_array().expect("attempts");
    let numbers: Vec<_> = log.iter().map(|a| a["number"].as_u64()).collect();
    assert_eq!(numbers, [Some(1), Some(2), Some(3)]);
    assert_eq!(attempt_codes(&e), [json!(500), json!(500), json!(200)]);
    for a in log {
        assert!(is_rfc3339_ms(&a["at"]), "{a}");
        assert!(a["duration_ms"].as_u64().is_some(), "{a}");
    }
    assert!(log[0]["at"].as_str() < log[1]["at"].as_str());
    assert!(
        log[0]["error"].as_str().is_some_and(|s| s.contains("500")),
        "{}",
        log[0]
    );
    assert!(log[1]["error"].is_string());
    assert!(log[2]["error"].is_null(), "{}", log[2]);
    assert_eq!(log[0]["response_excerpt"], r#"{"error":"boom"}"#);
    assert!(log[1]["response_excerpt"].is_null());
    assert_eq!(log[2]["response_excerpt"], r#"{"ok":true}"#);
}
}

store_test! {
async fn last_attempt_makes_it_dead_and_redeliver_sends_it_again() {
    let app = spawn_app_with(|c| c.retry_max_attempts = 2).await;
    let mut rx = Receiver::start().await;
    rx.set_default(Answer::status(500));
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;

    let got = rx.take(2, Duration::from_secs(5)).await;
    let id = webhook_id(&got[0]);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(3), |e| e["status"] == "dead")
        .await;
    assert_eq!(e["status"], "dead", "{e}");
    assert_eq!(attempt_codes(&e).len(), 2);
    let dead: Value = app
        .get("/api/v1/events?status=dead", &bot.api_key)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(dead["data"][0]["event_id"], id.as_str());
    assert!(
        rx.next(Duration::from_millis(700)).await.is_none(),
        "a dead delivery is not retried"
    );

    rx.set_default(Answer::status(204));
    let r = redeliver(&app, &bot, &id).await;
    assert_eq!(r.status(), 202);
    let again = rx.take(1, Duration::from_secs(5)).await.remove(0);
    assert_eq!(webhook_id(&again), id);
    assert_eq!(again.body, got[0].body, "the same body bytes");
    assert_eq!(attempt_header(&again), "3");
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(3), |e| {
            e["status"] == "succeeded"
        })
        .await;
    assert_eq!(attempt_codes(&e), [json!(500), json!(500), json!(204)]);

    // Unknown ids, and another chatbot's events, are not found.
    assert_eq!(
        redeliver(&app, &bot, "evt_0000000000000000000000000")
            .await
            .status(),
        404
    );
    let other = app.create_bot(&rx.url).await;
    assert_eq!(redeliver(&app, &other, &id).await.status(), 404);
    let r = app
        .get(&format!("/api/v1/events/{id}"), &other.api_key)
        .await;
    assert_eq!(r.status(), 404);
}
}

store_test! {
async fn retry_after_is_honoured_on_429_and_503() {
    let app = spawn_app_with(retry_delays(
        Duration::from_millis(50),
        Duration::from_secs(10),
    ))
    .await;
    let mut rx = Receiver::start_with(vec![
        Answer::status(429).header("Retry-After", "2"),
        Answer::status(503).header("Retry-After", "1"),
    ])
    .await;
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;
    let got = rx.take(3, Duration::from_secs(10)).await;
    let gap1 = got[1].at - got[0].at;
    let gap2 = got[2].at - got[1].at;
    // Without Retry-After the backoff would wait 50–100 ms, then 150–300 ms.
    assert!(gap1 >= Duration::from_millis(1900), "429 waited {gap1:?}");
    assert!(gap2 >= Duration::from_millis(900), "503 waited {gap2:?}");
    assert_eq!(attempt_header(&got[2]), "3");
}
}

store_test! {
async fn retry_after_is_capped_at_the_max_delay() {
    let app = spawn_app_with(retry_delays(
        Duration::from_millis(50),
        Duration::from_millis(300),
    ))
    .await;
    let mut rx =
        Receiver::start_with(vec![Answer::status(503).header("Retry-After", "3600")]).await;
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;
    let got = rx.take(2, Duration::from_secs(5)).await;
    let gap = got[1].at - got[0].at;
    assert!(gap >= Duration::from_millis(250), "waited {gap:?}");
    assert_eq!(attempt_header(&got[1]), "2");
}
}

store_test! {
async fn events_log_filters_by_status_and_pages() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    for _ in 0..3 {
        conversation_with_click(&app, &bot).await;
    }
    let got = rx.take(3, Duration::from_secs(5)).await;
    for r in &got {
        app.wait_event(&bot, &webhook_id(r), Duration::from_secs(3), |e| {
            e["status"] == "succeeded"
        })
        .await;
    }
    let page: Value = app
        .get("/api/v1/events?status=succeeded&limit=2", &bot.api_key)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(page["data"].as_array().map(Vec::len), Some(2));
    assert_eq!(page["page"]["has_more"], true);
    let cursor = page["page"]["next_cursor"].as_str().expect("cursor");
    let rest: Value = app
        .get(
            &format!("/api/v1/events?status=succeeded&limit=2&cursor={cursor}"),
            &bot.api_key,
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(rest["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(rest["page"]["has_more"], false);
    let pending: Value = app
        .get("/api/v1/events?status=pending", &bot.api_key)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(pending["data"], json!([]));
    let bad = app.get("/api/v1/events?status=lost", &bot.api_key).await;
    assert_eq!(bad.status(), 422);
    let no_key = app.get("/api/v1/events", "sk_wrong").await;
    assert_eq!(no_key.status(), 401);
}
}

store_test! {
async fn a_redelivered_event_gets_a_fresh_retry_budget() {
    let app = spawn_app_with(|c| c.retry_max_attempts = 2).await;
    let mut rx = Receiver::start().await;
    rx.set_default(Answer::status(500));
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;
    let id = webhook_id(&rx.take(2, Duration::from_secs(5)).await[0]);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(3), |e| e["status"] == "dead")
        .await;
    assert_eq!(e["status"], "dead", "{e}");

    assert_eq!(redeliver(&app, &bot, &id).await.status(), 202);
    // Two new attempts (numbered on from 3), then dead again.
    let again = rx.take(2, Duration::from_secs(5)).await;
    let numbers: Vec<_> = again.iter().map(attempt_header).collect();
    assert_eq!(numbers, ["3", "4"]);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(3), |e| e["status"] == "dead")
        .await;
    assert_eq!(e["status"], "dead", "{e}");
    assert_eq!(e["attempts"].as_array().map(Vec::len), Some(4));
}
}
