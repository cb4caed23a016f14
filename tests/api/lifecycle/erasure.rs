//! `DELETE /api/v1/conversations/{cid}`: everything of the conversation
//! gone at once, its token refused, its pending deliveries never sent.

use std::time::Duration;

use serde_json::{Value, json};

use super::{
    click_ok, erase, event_ids, full_conversation, interaction_ids, reusable, rows_left,
    visitor_status, webhook_id,
};
use crate::helpers::{Answer, Receiver, spawn_app, spawn_app_with};

store_test! {
async fn erasing_a_conversation_deletes_everything_in_it() {
    let app = spawn_app().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let other = app.create_conv(&bot).await;
    let url = full_conversation(&app, &bot, &conv, &mut rx).await;
    let other_mid = reusable(&app, &bot, &other).await;
    click_ok(&app, &other, &other_mid).await;
    rx.take(1, Duration::from_secs(10)).await;
    let mut events = Vec::new();
    for id in event_ids(&app, &bot).await {
        let e = app.event(&bot, &id).await;
        if e["payload"]["conversation_id"] == conv.id.as_str() {
            events.push(id);
        }
    }
    assert_eq!(events.len(), 3, "two clicks and a visitor message");
    let interactions = interaction_ids(&app, &bot, &conv.id).await;
    assert_eq!(interactions.len(), 2);
    let messages: Value = app
        .get(&format!("/api/v1/conversations/{}/messages", conv.id), &bot.api_key)
        .await
        .json()
        .await
        .expect("json");
    let mid = messages["data"][0]["id"].as_str().expect("a message").to_string();

    let r = erase(&app, &bot, &conv.id).await;
    assert_eq!(r.status(), 204);
    assert!(r.bytes().await.expect("body").is_empty());

    assert_eq!(visitor_status(&app, &conv).await, 401, "the visitor token is refused");
    let r = app.click(&conv, &mid, "b1", "approve").await;
    assert_eq!(r.status(), 401);
    let r = app
        .get(&format!("/api/v1/conversations/{}/messages", conv.id), &bot.api_key)
        .await;
    assert_eq!(r.status(), 404, "its messages");
    for id in &events {
        let r = app.get(&format!("/api/v1/events/{id}"), &bot.api_key).await;
        assert_eq!(r.status(), 404, "its event {id}");
    }
    for id in &interactions {
        let r = app.get(&format!("/api/v1/interactions/{id}"), &bot.api_key).await;
        assert_eq!(r.status(), 404, "its interaction {id}");
    }
    let r = app
        .client
        .post(&url)
        .json(&json!({"text": "late"}))
        .send()
        .await
        .expect("reply");
    assert_eq!(r.status(), 404, "its response_url");
    // A new message or a deletion through it: not found either, never a 5xx.
    for (body, key) in [
        (json!({"text": "late", "replace_original": false}), None),
        (json!({"text": "late", "replace_original": false}), Some("k1")),
        (json!({"delete_original": true}), None),
    ] {
        let mut req = app.client.post(&url).json(&body);
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        let r = req.send().await.expect("reply");
        assert_eq!(r.status(), 404, "{body} through its response_url");
        let p: Value = r.json().await.expect("problem");
        assert_eq!(p["code"], "not_found");
    }
    assert_eq!(erase(&app, &bot, &conv.id).await.status(), 404, "a second DELETE");
    let left = rows_left(&app, &conv.id, &events, &interactions).await;
    assert!(left.is_empty(), "rows left: {left:?}");

    // The other conversation is untouched.
    assert_eq!(visitor_status(&app, &other).await, 200);
    click_ok(&app, &other, &other_mid).await;
    rx.take(1, Duration::from_secs(10)).await;
}
}

store_test! {
async fn another_chatbots_conversation_is_not_found_and_kept() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let mine = app.create_bot(&rx.url).await;
    let theirs = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&mine).await;
    let r = erase(&app, &theirs, &conv.id).await;
    assert_eq!(r.status(), 404);
    let p: Value = r.json().await.expect("problem");
    assert_eq!(p["code"], "not_found");
    assert_eq!(visitor_status(&app, &conv).await, 200, "kept");
    let r = app
        .client
        .delete(app.url(&format!("/api/v1/conversations/{}", conv.id)))
        .send()
        .await
        .expect("delete");
    assert_eq!(r.status(), 401, "no key");
    assert_eq!(erase(&app, &mine, "conv_00000000000000000000000000").await.status(), 404);
}
}

store_test! {
async fn a_pending_delivery_of_an_erased_conversation_is_never_sent() {
    // One delivery at a time to the endpoint: while the first is held by
    // a slow receiver, the next conversation's event is claimed or queued,
    // due now; a third is failing, waiting for its retry.
    let app = spawn_app_with(|c| {
        c.endpoint_concurrency = 1;
        c.retry_min_delay = Duration::from_millis(200);
        c.retry_max_delay = Duration::from_millis(200);
    })
    .await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let (slow, due, failing) = (
        app.create_conv(&bot).await,
        app.create_conv(&bot).await,
        app.create_conv(&bot).await,
    );
    let failing_mid = reusable(&app, &bot, &failing).await;
    rx.push(Answer::status(500));
    click_ok(&app, &failing, &failing_mid).await;
    let first = rx.take(1, Duration::from_secs(10)).await;
    let failing_event = webhook_id(&first[0]);
    assert_eq!(erase(&app, &bot, &failing.id).await.status(), 204);

    let slow_mid = reusable(&app, &bot, &slow).await;
    let due_mid = reusable(&app, &bot, &due).await;
    rx.push(Answer::status(200).delay(Duration::from_millis(800)));
    click_ok(&app, &slow, &slow_mid).await;
    let held = rx.take(1, Duration::from_secs(10)).await;
    click_ok(&app, &due, &due_mid).await;
    assert_eq!(erase(&app, &bot, &due.id).await.status(), 204);

    // A later click of the slow conversation still goes out after the
    // held one: the endpoint is free again, and only erased work is gone.
    click_ok(&app, &slow, &slow_mid).await;
    let next = rx.take(1, Duration::from_secs(10)).await;
    let got = next[0].json();
    assert_eq!(got["conversation_id"], slow.id.as_str(), "{got}");
    assert_ne!(webhook_id(&held[0]), webhook_id(&next[0]));
    // Retries of the failing event would come every 200 ms.
    assert!(rx.next(Duration::from_millis(1200)).await.is_none(), "nothing else is sent");
    let sent: Vec<Value> = rx.all().iter().map(|r| r.json()).collect();
    assert!(
        sent.iter().all(|e| e["conversation_id"] != due.id.as_str()),
        "the erased conversation's delivery was sent: {sent:?}"
    );
    let failing_sends = rx
        .all()
        .iter()
        .filter(|r| webhook_id(r) == failing_event)
        .count();
    assert_eq!(failing_sends, 1, "a failed delivery of an erased conversation is not retried");
}
}

store_test! {
async fn an_attempt_on_the_wire_when_erased_is_not_retried() {
    let app = spawn_app_with(|c| {
        c.retry_min_delay = Duration::from_millis(100);
        c.retry_max_delay = Duration::from_millis(100);
    })
    .await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable(&app, &bot, &conv).await;
    rx.push(Answer::status(503).delay(Duration::from_millis(600)));
    click_ok(&app, &conv, &mid).await;
    let on_the_wire = webhook_id(&rx.take(1, Duration::from_secs(10)).await[0]);
    assert_eq!(erase(&app, &bot, &conv.id).await.status(), 204);
    assert!(
        rx.next(Duration::from_millis(1500)).await.is_none(),
        "no retry after the erasure"
    );
    // The store took the late attempt record without failing: other work
    // goes on.
    let other = app.create_conv(&bot).await;
    let other_mid = reusable(&app, &bot, &other).await;
    click_ok(&app, &other, &other_mid).await;
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(got[0].json()["conversation_id"], other.id.as_str());
    let left = rows_left(&app, &conv.id, &[on_the_wire], &[]).await;
    assert_eq!(left.len(), 0, "{left:?}");
}
}

store_test! {
async fn an_open_stream_of_an_erased_conversation_ends() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let other = app.create_conv(&bot).await;
    let mut stream = crate::responses::sse::Sse::connect(&app, &conv, None).await;
    let mut kept = crate::responses::sse::Sse::connect(&app, &other, None).await;
    assert_eq!(erase(&app, &bot, &conv.id).await.status(), 204);
    assert_eq!(visitor_status(&app, &conv).await, 401, "the token is refused at once");
    // An open stream would otherwise go on with a keep-alive every 2 s.
    assert!(stream.ended(Duration::from_secs(5)).await, "the erased conversation's stream ended");
    // Another conversation's stream goes on and still hears its own.
    app.buttons(&bot, &other, false).await;
    kept.until(Duration::from_secs(10), |e| e.event == "message.created")
        .await;
}
}
