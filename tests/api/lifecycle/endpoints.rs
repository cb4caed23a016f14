//! §11 with §13: erasing a conversation and the retention purge also
//! delete its deliveries to other endpoints and their attempts.

use std::time::{Duration, Instant};

use super::{click_ok, erase, event_ids, reusable, rows_left, wait_gone};
use crate::delivery::fanout::{add_endpoint, count};
use crate::helpers::{ADMIN_TOKEN, Bot, Conv, Receiver, TestApp, spawn_app_with};

/// Two clicks in `conv`, routed to a delivering endpoint and a paused one:
/// their event ids once both deliveries of each exist and the delivering
/// endpoint's attempts are recorded.
async fn clicks_with_deliveries(
    app: &TestApp,
    bot: &Bot,
    conv: &Conv,
    extra: &Receiver,
) -> Vec<String> {
    let on = add_endpoint(app, bot, &extra.url, None, None, true).await;
    add_endpoint(app, bot, &extra.url, None, None, false).await;
    let mid = reusable(app, bot, conv).await;
    click_ok(app, conv, &mid).await;
    click_ok(app, conv, &mid).await;
    let events = event_ids(app, bot).await;
    assert_eq!(events.len(), 2);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let deliveries = count(app, "SELECT count(*) FROM deliveries").await;
        let attempts = count(
            app,
            &format!(
                "SELECT count(*) FROM delivery_attempts WHERE endpoint_id = '{}'",
                on.id
            ),
        )
        .await;
        if deliveries == 4 && attempts == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "routed and delivered: {deliveries} deliveries, {attempts} attempts"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    events
}

store_test! {
async fn erasing_a_conversation_deletes_its_deliveries_and_their_attempts() {
    let app = spawn_app_with(|_| {}).await;
    let mut main = Receiver::start().await;
    let extra = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let conv = app.create_conv(&bot).await;
    let events = clicks_with_deliveries(&app, &bot, &conv, &extra).await;
    main.take(2, Duration::from_secs(10)).await;

    let r = erase(&app, &bot, &conv.id).await;
    assert_eq!(r.status(), 204);
    let left = rows_left(&app, &conv.id, &events, &[]).await;
    assert!(left.is_empty(), "rows left: {left:?}");
    assert_eq!(count(&app, "SELECT count(*) FROM deliveries").await, 0);
    assert_eq!(count(&app, "SELECT count(*) FROM delivery_attempts").await, 0);
}
}

store_test! {
async fn the_retention_purge_deletes_a_conversations_deliveries_and_their_attempts() {
    let app = spawn_app_with(|c| c.purge_interval = Duration::from_millis(200)).await;
    let mut main = Receiver::start().await;
    let extra = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let conv = app.create_conv(&bot).await;
    let events = clicks_with_deliveries(&app, &bot, &conv, &extra).await;
    main.take(2, Duration::from_secs(10)).await;

    let r = app
        .client
        .patch(app.url(&format!("/api/v1/chatbots/{}", bot.id)))
        .bearer_auth(ADMIN_TOKEN)
        .json(&serde_json::json!({"retention": "1s"}))
        .send()
        .await
        .expect("patch");
    assert_eq!(r.status(), 200);
    assert!(wait_gone(&app, &conv, Duration::from_secs(15)).await, "purged");
    let left = rows_left(&app, &conv.id, &events, &[]).await;
    assert!(left.is_empty(), "rows left: {left:?}");
    assert_eq!(count(&app, "SELECT count(*) FROM deliveries").await, 0);
    assert_eq!(count(&app, "SELECT count(*) FROM delivery_attempts").await, 0);
}
}
