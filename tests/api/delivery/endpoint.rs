//! HTTP etiquette: `410 Gone` disables the endpoint (nothing dropped),
//! redirects are failures and never followed, private addresses are refused
//! at send time.

use std::time::Duration;

use serde_json::json;

use super::{
    attempt_codes, attempt_header, click_ok, conversation_with_click, edit_bot_in_store, get_bot,
    patch_bot, redeliver, reusable_buttons, webhook_id,
};
use crate::helpers::{ADMIN_TOKEN, Answer, Receiver, TestApp, spawn_app, spawn_app_with};

/// `410 Gone`, then a second event that must wait; returns both event ids.
async fn gone_then_waiting(
    app: &TestApp,
    rx: &mut Receiver,
    bot: &crate::helpers::Bot,
) -> (String, String) {
    conversation_with_click(app, bot).await;
    let gone = rx.take(1, Duration::from_secs(5)).await.remove(0);
    let e1 = webhook_id(&gone);
    let e = app
        .wait_event(bot, &e1, Duration::from_secs(3), |e| {
            !attempt_codes(e).is_empty()
        })
        .await;
    assert_eq!(attempt_codes(&e), [json!(410)]);
    assert_eq!(e["status"], "failed", "kept, not dropped: {e}");
    assert_eq!(get_bot(app, bot).await["endpoint_disabled"], true);

    conversation_with_click(app, bot).await;
    assert!(
        rx.next(Duration::from_millis(800)).await.is_none(),
        "a disabled endpoint gets nothing"
    );
    let ids = super::event_ids_in_order(app, bot).await;
    let e2 = ids[1].clone();
    let e = app.event(bot, &e2).await;
    assert_eq!(e["status"], "pending");
    assert_eq!(e["attempts"], json!([]));
    (e1, e2)
}

store_test! {
async fn gone_disables_the_endpoint_until_its_url_changes() {
    let app = spawn_app().await;
    let mut old = Receiver::start_with(vec![Answer::status(410)]).await;
    let bot = app.create_bot(&old.url).await;
    let (e1, e2) = gone_then_waiting(&app, &mut old, &bot).await;

    let mut new = Receiver::start().await;
    let v = patch_bot(&app, &bot, json!({"webhook_url": new.url})).await;
    assert_eq!(v["endpoint_disabled"], false);
    let got = new.take(2, Duration::from_secs(5)).await;
    let mut seen: Vec<(String, String)> = got
        .iter()
        .map(|r| (webhook_id(r), attempt_header(r)))
        .collect();
    seen.sort();
    let mut want = vec![(e1.clone(), "2".to_string()), (e2.clone(), "1".to_string())];
    want.sort();
    assert_eq!(seen, want, "the waiting deliveries, the 410 one included");
    for id in [&e1, &e2] {
        let e = app
            .wait_event(&bot, id, Duration::from_secs(3), |e| {
                e["status"] == "succeeded"
            })
            .await;
        assert_eq!(e["status"], "succeeded");
    }
    assert!(old.next(Duration::from_millis(200)).await.is_none());
}
}

store_test! {
async fn gone_endpoint_can_be_re_enabled_in_place() {
    let app = spawn_app().await;
    let mut rx = Receiver::start_with(vec![Answer::status(410)]).await;
    let bot = app.create_bot(&rx.url).await;
    let (e1, e2) = gone_then_waiting(&app, &mut rx, &bot).await;
    patch_bot(&app, &bot, json!({"endpoint_disabled": false})).await;
    let got = rx.take(2, Duration::from_secs(5)).await;
    let mut seen: Vec<String> = got.iter().map(webhook_id).collect();
    seen.sort();
    let mut want = vec![e1, e2];
    want.sort();
    assert_eq!(seen, want);
}
}

store_test! {
async fn redirects_are_failures_and_never_followed() {
    let app = spawn_app().await;
    let mut target = Receiver::start().await;
    let mut rx = Receiver::start_with(vec![
        Answer::status(302).header("Location", &target.url),
        Answer::status(307).header("Location", &target.url),
    ])
    .await;
    let bot = app.create_bot(&rx.url).await;
    conversation_with_click(&app, &bot).await;
    let got = rx.take(3, Duration::from_secs(5)).await;
    let id = webhook_id(&got[0]);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(3), |e| {
            e["status"] == "succeeded"
        })
        .await;
    assert_eq!(attempt_codes(&e), [json!(302), json!(307), json!(200)]);
    let err = e["attempts"][0]["error"].as_str().unwrap_or_default();
    assert!(err.contains("redirect"), "{err}");
    assert!(
        target.next(Duration::from_millis(300)).await.is_none(),
        "the redirect target got nothing"
    );
}
}

/// Points a chatbot at `url` behind the API's back (as a database edit
/// would), so that the send-time guard is what is tested.
async fn set_url_in_store(app: &TestApp, bot_id: &str, url: &str) {
    edit_bot_in_store(app, bot_id, |b| b.webhook_url = url.to_string()).await;
}

store_test! {
async fn private_addresses_are_refused_at_send_time() {
    // Retries far apart: the second attempt is the redelivery below.
    let app = spawn_app_with(|c| {
        c.allow_private_webhooks = false;
        c.retry_min_delay = Duration::from_secs(600);
        c.retry_max_delay = Duration::from_secs(600);
    })
    .await;
    let mut rx = Receiver::start().await;
    let r = app
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "b", "webhook_url": rx.url}),
        )
        .await;
    assert_eq!(r.status(), 422, "refused at registration");
    let bot = app.create_bot("http://93.184.216.34/hook").await;
    set_url_in_store(&app, &bot.id, &rx.url).await;

    conversation_with_click(&app, &bot).await;
    let id = super::super::event_ids_in_order(&app, &bot).await.remove(0);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(5), |e| {
            !attempt_codes(e).is_empty()
        })
        .await;
    let a = &e["attempts"][0];
    let err = a["error"].as_str().unwrap_or_default();
    assert!(
        err.starts_with("E_PRIVATE_ADDRESS") && err.contains("127.0.0.1"),
        "{err}"
    );
    assert!(a["status_code"].is_null());
    assert_eq!(e["status"], "failed");

    // A host name that resolves to loopback is refused as well.
    set_url_in_store(&app, &bot.id, &rx.url.replace("127.0.0.1", "localhost")).await;
    assert_eq!(redeliver(&app, &bot, &id).await.status(), 202);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(5), |e| {
            attempt_codes(e).len() >= 2
        })
        .await;
    let err = e["attempts"][1]["error"].as_str().unwrap_or_default();
    assert!(
        err.starts_with("E_PRIVATE_ADDRESS") && (err.contains("127.0.0.1") || err.contains("::1")),
        "{err}"
    );
    assert!(
        rx.next(Duration::from_millis(300)).await.is_none(),
        "nothing was sent"
    );
}
}

store_test! {
async fn a_chatbot_edited_by_another_connection_is_seen_by_the_next_click() {
    let app = spawn_app().await;
    let mut first = Receiver::start().await;
    let mut second = Receiver::start().await;
    let bot = app.create_bot(&first.url).await;
    // The first click reads the conversation and its chatbot, and the
    // service keeps them for the clicks after it.
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    assert_eq!(first.take(1, Duration::from_secs(5)).await.len(), 1);

    set_url_in_store(&app, &bot.id, &second.url).await;
    click_ok(&app, &conv, &mid).await;
    let got = second.take(1, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1, "the next click goes to the URL in the file");
    assert!(
        first.next(Duration::from_millis(300)).await.is_none(),
        "nothing more goes to the old URL"
    );
}
}

store_test! {
async fn ipv6_transition_forms_are_refused_at_send_time() {
    let app = spawn_app_with(|c| {
        c.allow_private_webhooks = false;
        c.retry_min_delay = Duration::from_secs(600);
        c.retry_max_delay = Duration::from_secs(600);
    })
    .await;
    let bot = app.create_bot("http://93.184.216.34/hook").await;
    // NAT64 of 127.0.0.1, behind the API's back.
    set_url_in_store(&app, &bot.id, "http://[64:ff9b::7f00:1]:9/hook").await;
    conversation_with_click(&app, &bot).await;
    let id = super::super::event_ids_in_order(&app, &bot).await.remove(0);
    let e = app
        .wait_event(&bot, &id, Duration::from_secs(5), |e| {
            !attempt_codes(e).is_empty()
        })
        .await;
    let err = e["attempts"][0]["error"].as_str().unwrap_or_default();
    assert!(err.starts_with("E_PRIVATE_ADDRESS"), "{err}");
}
}
