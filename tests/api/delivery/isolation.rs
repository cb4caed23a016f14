//! A receiver that hangs or refuses connections delays nobody else.

use std::time::{Duration, Instant};

use super::{conversation_with_click, refusing_port};
use crate::helpers::{Answer, Receiver, retry_delays, spawn_app_with};

const LIMIT: usize = 4;

store_test! {
async fn a_hung_receiver_does_not_delay_another_chatbot() {
    let app = spawn_app_with(|c| {
        c.delivery_timeout = Duration::from_secs(120);
        c.endpoint_concurrency = LIMIT;
    })
    .await;
    let mut hung = Receiver::start().await;
    hung.set_default(Answer::status(200).delay(Duration::from_secs(600)));
    let slow_bot = app.create_bot(&hung.url).await;
    for _ in 0..LIMIT + 3 {
        conversation_with_click(&app, &slow_bot).await;
    }
    hung.take(LIMIT, Duration::from_secs(5)).await;
    assert!(
        hung.next(Duration::from_millis(500)).await.is_none(),
        "no more than {LIMIT} requests in flight to one endpoint"
    );

    let mut ok = Receiver::start().await;
    let bot = app.create_bot(&ok.url).await;
    let clicked = Instant::now();
    let conv = conversation_with_click(&app, &bot).await;
    let r = ok.take(1, Duration::from_secs(2)).await.remove(0);
    assert!(r.at - clicked <= Duration::from_secs(2));
    assert_eq!(r.json()["conversation_id"], conv.id.as_str());
}
}

store_test! {
async fn a_refusing_receiver_does_not_delay_another_chatbot() {
    let app = spawn_app_with(retry_delays(
        Duration::from_millis(100),
        Duration::from_millis(200),
    ))
    .await;
    let down = format!("http://127.0.0.1:{}/hook", refusing_port());
    let down_bot = app.create_bot(&down).await;
    for _ in 0..12 {
        conversation_with_click(&app, &down_bot).await;
    }

    let mut ok = Receiver::start().await;
    let bot = app.create_bot(&ok.url).await;
    let clicked = Instant::now();
    conversation_with_click(&app, &bot).await;
    let r = ok.take(1, Duration::from_secs(2)).await.remove(0);
    assert!(r.at - clicked <= Duration::from_secs(2));

    // The circuit breaker stops hammering the dead endpoint: with retries
    // every 100–200 ms, 12 events would make dozens of attempts in 1.5 s.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = app.events(&down_bot).await;
    assert_eq!(events.len(), 12);
    let mut attempts = 0;
    for e in &events {
        let id = e["event_id"].as_str().expect("id");
        let full = app.event(&down_bot, id).await;
        for a in full["attempts"].as_array().expect("attempts") {
            let err = a["error"].as_str().unwrap_or_default();
            assert!(err.starts_with("E_CONNECTION"), "{err}");
            attempts += 1;
        }
        assert_ne!(full["status"], "succeeded");
    }
    assert!((5..=14).contains(&attempts), "{attempts} attempts");
}
}

store_test! {
async fn an_endpoint_at_its_limit_gets_the_next_delivery_as_one_ends() {
    // One delivery at a time: each success must start the next at once,
    // not at the claim loop's next idle poll (a second away).
    let app = spawn_app_with(|c| c.endpoint_concurrency = 1).await;
    let mut rx = Receiver::start().await;
    rx.set_default(Answer::status(200).delay(Duration::from_millis(150)));
    let bot = app.create_bot(&rx.url).await;
    for _ in 0..5 {
        conversation_with_click(&app, &bot).await;
    }
    let got = rx.take(5, Duration::from_secs(10)).await;
    for pair in got.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap < Duration::from_millis(600),
            "the next delivery started {gap:?} after the previous one"
        );
    }
}
}
