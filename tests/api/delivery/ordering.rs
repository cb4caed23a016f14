//! Per-conversation order: the next event of a conversation waits while an
//! earlier one is pending or retrying; other conversations go on.

use std::time::Duration;

use super::{
    attempt_header, click_ok, conversation_with_click, event_ids_in_order, redeliver,
    reusable_buttons, webhook_id,
};
use crate::helpers::{Answer, Receiver, retry_delays, spawn_app_with};

store_test! {
async fn one_conversation_arrives_in_order_while_others_go_on() {
    // Three seconds between attempts: a window in which another
    // conversation's event must get through.
    let app = spawn_app_with(retry_delays(Duration::from_secs(3), Duration::from_secs(3))).await;
    let mut rx = Receiver::start_with(vec![Answer::status(500)]).await;
    let bot = app.create_bot(&rx.url).await;
    let a = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &a).await;
    for _ in 0..3 {
        click_ok(&app, &a, &mid).await;
    }
    let first = rx.take(1, Duration::from_secs(5)).await.remove(0);
    assert_eq!(first.json()["conversation_id"], a.id.as_str());

    let b = conversation_with_click(&app, &bot).await;
    let second = rx.take(1, Duration::from_secs(2)).await.remove(0);
    assert_eq!(
        second.json()["conversation_id"],
        b.id.as_str(),
        "another conversation is not held up by a retrying one"
    );
    // A's first event fails once more, then everything succeeds.
    rx.push(Answer::status(500));
    let rest = rx.take(4, Duration::from_secs(15)).await;

    let ids = event_ids_in_order(&app, &bot).await;
    let (e1, e2, e3, eb) = (&ids[0], &ids[1], &ids[2], &ids[3]);
    let got: Vec<(String, String)> = std::iter::once(&first)
        .chain(std::iter::once(&second))
        .chain(rest.iter())
        .map(|r| (webhook_id(r), attempt_header(r)))
        .collect();
    let want: Vec<(String, String)> = [
        (e1, "1"),
        (eb, "1"),
        (e1, "2"),
        (e1, "3"),
        (e2, "1"),
        (e3, "1"),
    ]
    .iter()
    .map(|(id, n)| (id.to_string(), n.to_string()))
    .collect();
    assert_eq!(got, want);
    assert!(
        rx.next(Duration::from_millis(300)).await.is_none(),
        "nothing delivered twice"
    );
}
}

store_test! {
async fn a_dead_event_lets_the_next_of_its_conversation_go() {
    let app = spawn_app_with(|c| c.retry_max_attempts = 1).await;
    let mut rx = Receiver::start_with(vec![Answer::status(500)]).await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    click_ok(&app, &conv, &mid).await;
    let got = rx.take(2, Duration::from_secs(5)).await;
    let ids = event_ids_in_order(&app, &bot).await;
    assert_eq!(webhook_id(&got[0]), ids[0]);
    assert_eq!(webhook_id(&got[1]), ids[1]);
    let e = app
        .wait_event(&bot, &ids[0], Duration::from_secs(3), |e| {
            e["status"] == "dead"
        })
        .await;
    assert_eq!(e["status"], "dead");
}
}

store_test! {
async fn a_redelivered_event_holds_back_the_next_click_of_its_conversation() {
    // The store keeps count of each conversation's undelivered events; a
    // redelivery makes a delivered event undelivered again, and the next
    // click must queue behind it, not overtake it.
    let app = spawn_app_with(retry_delays(Duration::from_secs(2), Duration::from_secs(2))).await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    let e1 = webhook_id(&rx.take(1, Duration::from_secs(5)).await.remove(0));
    let done = app
        .wait_event(&bot, &e1, Duration::from_secs(3), |e| {
            e["status"] == "succeeded"
        })
        .await;
    assert_eq!(done["status"], "succeeded");

    rx.push(Answer::status(500));
    assert_eq!(redeliver(&app, &bot, &e1).await.status(), 202);
    let again = rx.take(1, Duration::from_secs(5)).await.remove(0);
    assert_eq!(
        (webhook_id(&again), attempt_header(&again)),
        (e1.clone(), "2".into())
    );
    click_ok(&app, &conv, &mid).await;
    assert!(
        rx.next(Duration::from_millis(1000)).await.is_none(),
        "the new click waits for the redelivered event's retry"
    );
    let rest = rx.take(2, Duration::from_secs(6)).await;
    let got: Vec<(String, String)> = rest
        .iter()
        .map(|r| (webhook_id(r), attempt_header(r)))
        .collect();
    let ids = event_ids_in_order(&app, &bot).await;
    assert_eq!(ids.len(), 2);
    assert_eq!(
        got,
        vec![(e1, "3".to_string()), (ids[1].clone(), "1".to_string())]
    );
}
}

store_test! {
async fn clicks_of_many_conversations_at_once_arrive_once_each_in_their_conversations_order() {
    let app = spawn_app_with(|_| {}).await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let mut convs = Vec::new();
    for _ in 0..8 {
        let conv = app.create_conv(&bot).await;
        let mid = reusable_buttons(&app, &bot, &conv).await;
        convs.push((conv, mid));
    }
    // Each conversation clicks four times in a row, all eight at once:
    // the store takes clicks of several conversations together.
    futures_util::future::join_all(convs.iter().map(|(conv, mid)| {
        let app = &app;
        async move {
            for _ in 0..4 {
                click_ok(app, conv, mid).await;
            }
        }
    }))
    .await;
    let got = rx.take(32, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 32, "every click delivered");
    assert!(
        rx.next(Duration::from_millis(300)).await.is_none(),
        "nothing delivered twice"
    );
    let accepted = event_ids_in_order(&app, &bot).await;
    for (conv, _) in &convs {
        let delivered: Vec<String> = got
            .iter()
            .filter(|r| r.json()["conversation_id"] == conv.id.as_str())
            .map(webhook_id)
            .collect();
        let conv_of: std::collections::HashSet<&String> = delivered.iter().collect();
        let want: Vec<String> = accepted
            .iter()
            .filter(|id| conv_of.contains(id))
            .cloned()
            .collect();
        assert_eq!(delivered.len(), 4, "four events of {}", conv.id);
        assert_eq!(delivered, want, "{} in the order accepted", conv.id);
    }
}
}
