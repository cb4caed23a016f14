//! §2 "Clicks are atomic": of many concurrent clicks on one group that turns
//! off on click, exactly one is accepted and produces one event.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Value, json};

use super::{events_of, json_of};
use crate::helpers::{Receiver, spawn_app, verify_signature};

const CLICKS: usize = 32;

store_test! {
async fn thirty_two_concurrent_clicks_yield_one_200_and_one_event() {
    let mut rx = Receiver::start().await;
    let app = spawn_app().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, true).await;
    let mid = m["id"].as_str().unwrap();

    let clicks = (0..CLICKS).map(|i| {
        let action = if i % 2 == 0 { "approve" } else { "deny" };
        app.click(&conv, mid, "b1", action)
    });
    let answers = join_all(clicks).await;
    let mut accepted: Vec<Value> = Vec::new();
    let mut refused = 0;
    for r in answers {
        match r.status().as_u16() {
            200 => accepted.push(r.json().await.unwrap()),
            409 => {
                let v: Value = r.json().await.unwrap();
                assert_eq!(v["code"], "block_disabled", "{v}");
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", r.text().await.unwrap_or_default()),
        }
    }
    assert_eq!(accepted.len(), 1, "exactly one click is accepted");
    assert_eq!(
        refused,
        CLICKS - 1,
        "every other click is 409 block_disabled"
    );
    let chosen = accepted[0]["message"]["blocks"][0]["state"]["chosen_action_id"].clone();

    let events = events_of(&app, &bot, "interaction.button_clicked").await;
    assert_eq!(events.len(), 1, "exactly one event in the outbox");
    assert_eq!(events[0]["payload"]["action_id"], chosen);

    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(got[0].header("webhook-id"), events[0]["event_id"].as_str());
    assert_eq!(got[0].json()["action_id"], chosen);
    assert!(verify_signature(&bot.signing_secret, &got[0]));

    // Events of one conversation arrive in order: a later visitor message is
    // delivered only after every earlier event, so if it comes next, no
    // second click event was ever queued.
    json_of(
        app.post(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
            &json!({"text": "after the clicks"}),
        )
        .await,
        201,
    )
    .await;
    let next = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(next[0].json()["type"], "message.received");
    assert_eq!(
        rx.all().len(),
        2,
        "the receiver got exactly one click event"
    );
}
}
