//! The retention purge: a conversation past its chatbot's retention is
//! deleted with everything in it, unless an event of it is still pending
//! or retrying; on SQLite the file stops growing under steady traffic.

use std::time::Duration;

use serde_json::json;

use super::{
    click_ok, event_ids, full_conversation, interaction_ids, reusable, rows_left, visitor_status,
    wait_gone, webhook_id,
};
use crate::helpers::{ADMIN_TOKEN, Bot, Receiver, TestApp, spawn_app_with};

const PURGE: Duration = Duration::from_millis(200);

async fn set_retention(app: &TestApp, bot: &Bot, retention: &str) {
    let r = app
        .client
        .patch(app.url(&format!("/api/v1/chatbots/{}", bot.id)))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"retention": retention}))
        .send()
        .await
        .expect("patch");
    assert_eq!(r.status(), 200, "set retention");
}

store_test! {
async fn a_conversation_past_its_retention_is_purged_with_everything_in_it() {
    let app = spawn_app_with(|c| c.purge_interval = PURGE).await;
    let mut rx = Receiver::start().await;
    let short = app.create_bot(&rx.url).await;
    let long = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&short).await;
    let kept = app.create_conv(&long).await;
    full_conversation(&app, &short, &conv, &mut rx).await;
    let kept_mid = reusable(&app, &long, &kept).await;
    click_ok(&app, &kept, &kept_mid).await;
    rx.take(1, Duration::from_secs(10)).await;
    let events = event_ids(&app, &short).await;
    let interactions = interaction_ids(&app, &short, &conv.id).await;
    assert_eq!(events.len(), 3);

    set_retention(&app, &short, "1s").await;
    assert!(
        wait_gone(&app, &conv, Duration::from_secs(15)).await,
        "purged within the interval of passing its retention"
    );
    let left = rows_left(&app, &conv.id, &events, &interactions).await;
    assert!(left.is_empty(), "rows left: {left:?}");
    for id in &events {
        let r = app.get(&format!("/api/v1/events/{id}"), &short.api_key).await;
        assert_eq!(r.status(), 404);
    }
    // The chatbot with the default retention keeps its conversation.
    assert_eq!(visitor_status(&app, &kept).await, 200);
    assert_eq!(event_ids(&app, &long).await.len(), 1);
}
}

store_test! {
async fn a_purge_waits_for_an_undelivered_event_until_it_succeeds() {
    let app = spawn_app_with(|c| {
        c.purge_interval = PURGE;
        c.retry_min_delay = Duration::from_millis(100);
        c.retry_max_delay = Duration::from_millis(200);
        c.retry_max_attempts = 1_000;
    })
    .await;
    let down = format!("http://127.0.0.1:{}/hook", crate::delivery::refusing_port());
    let bot = app.create_bot(&down).await;
    set_retention(&app, &bot, "1s").await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    let event = event_ids(&app, &bot).await[0].clone();
    // Past its retention, many purges later, it is still retrying.
    let e = app
        .wait_event(&bot, &event, Duration::from_secs(10), |e| {
            e["attempts"].as_array().is_some_and(|a| a.len() >= 3)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(visitor_status(&app, &conv).await, 200, "kept while retrying: {e}");
    let e = app.event(&bot, &event).await;
    assert_eq!(e["status"], "failed", "{e}");

    // The receiver comes up: the event succeeds, then the purge takes it.
    let mut rx = Receiver::start().await;
    let r = app
        .client
        .patch(app.url(&format!("/api/v1/chatbots/{}", bot.id)))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"webhook_url": rx.url}))
        .send()
        .await
        .expect("patch");
    assert_eq!(r.status(), 200);
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(webhook_id(&got[0]), event, "the accepted click was delivered");
    assert!(wait_gone(&app, &conv, Duration::from_secs(15)).await, "purged once delivered");
}
}

store_test! {
async fn a_conversation_whose_event_died_is_purged() {
    let app = spawn_app_with(|c| {
        c.purge_interval = PURGE;
        c.retry_min_delay = Duration::from_millis(100);
        c.retry_max_delay = Duration::from_millis(100);
        c.retry_max_attempts = 3;
    })
    .await;
    let down = format!("http://127.0.0.1:{}/hook", crate::delivery::refusing_port());
    let bot = app.create_bot(&down).await;
    set_retention(&app, &bot, "1s").await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    assert!(wait_gone(&app, &conv, Duration::from_secs(15)).await, "purged once dead");
    assert!(event_ids(&app, &bot).await.is_empty());
}
}

/// The SQLite file's size (the database and its WAL).
fn sizes(path: &str) -> (u64, u64) {
    let len = |p: &str| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    (len(path), len(&format!("{path}-wal")))
}

#[actix_web::test]
async fn the_sqlite_file_stops_growing_under_steady_traffic_with_a_short_retention() {
    crate::helpers::use_store(crate::helpers::StoreKind::Sqlite);
    let app = spawn_app_with(|c| c.purge_interval = PURGE).await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    // Long enough for a slow machine to make its five clicks on a
    // conversation before the purge may take it.
    set_retention(&app, &bot, "3s").await;
    let mut after_round = Vec::new();
    for _ in 0..12 {
        // One round: 40 conversations, each with a message, five clicks
        // delivered and their attempts; then the purge takes them all.
        let mut convs = Vec::new();
        for _ in 0..40 {
            let conv = app.create_conv(&bot).await;
            let mid = reusable(&app, &bot, &conv).await;
            for _ in 0..5 {
                click_ok(&app, &conv, &mid).await;
            }
            convs.push(conv);
        }
        rx.take(200, Duration::from_secs(30)).await;
        for conv in &convs {
            assert!(wait_gone(&app, conv, Duration::from_secs(20)).await);
        }
        after_round.push(sizes(&app.db_path));
    }
    let db: Vec<u64> = after_round.iter().map(|s| s.0).collect();
    // Freed pages are reused: the file stays near the size one round's
    // data needs (the first round's), where without reuse it would grow
    // by that much every round (twelve times over). The slack is for when
    // the purge catches a round's conversations.
    let first = db[0].max(db[1]);
    for (i, size) in db.iter().enumerate() {
        assert!(
            *size <= first * 3 / 2,
            "round {i}: the file grew from {first} to {size} bytes ({db:?})"
        );
    }
    for (i, (_, wal)) in after_round.iter().enumerate() {
        assert!(
            *wal <= 64 * 1024 * 1024 + 1024 * 1024,
            "round {i}: WAL of {wal} bytes"
        );
    }
}
