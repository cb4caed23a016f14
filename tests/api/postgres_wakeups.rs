//! Two instances on one PostgreSQL database hear each other at once
//! (LISTEN/NOTIFY): what one commits wakes the ask waiters, widget streams,
//! `/api/v1/stream` and claim loops of the other, well within the safety
//! net polls (an ask's 2 s keep-alive, a stream's 1 s, a claim loop's 1 s).

use std::time::{Duration, Instant};

use blockhook::config::{Config, Database};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::responses::sse::Sse;

const WAIT: Duration = Duration::from_secs(10);
/// How soon the other instance must have heard.
const PROMPT: Duration = Duration::from_millis(500);

/// Two instances, A and B, on one fresh database.
async fn two_instances(tweak: impl Fn(&mut Config) + Clone) -> (TestApp, TestApp) {
    let url = fresh_postgres_database().await;
    let (u1, u2, t1, t2) = (url.clone(), url, tweak.clone(), tweak);
    let a = spawn_app_with(move |c| {
        c.database = Database::Postgres(u1);
        t1(c);
    })
    .await;
    let b = spawn_app_with(move |c| {
        c.database = Database::Postgres(u2);
        t2(c);
    })
    .await;
    (a, b)
}

async fn first_message(app: &TestApp, conv: &Conv) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let v: Value = app
            .get(
                &format!("/widget/v1/conversations/{}/messages", conv.id),
                &conv.token,
            )
            .await
            .json()
            .await
            .unwrap();
        if v["data"][0].is_object() {
            return v["data"][0].clone();
        }
        assert!(Instant::now() < deadline, "the question is stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[actix_web::test]
async fn an_ask_waiting_on_b_hears_a_click_on_a() {
    let (a, b) = two_instances(|_| {}).await;
    let rx = Receiver::start().await;
    let bot = a.create_bot(&rx.url).await;
    let conv = a.create_conv(&bot).await;
    let (client, url, key) = (
        b.client.clone(),
        b.url(&format!("/api/v1/conversations/{}/ask", conv.id)),
        bot.api_key.clone(),
    );
    // A long timeout: only the answer can end the wait.
    let waiting = tokio::spawn(async move {
        let r = client
            .post(url)
            .bearer_auth(key)
            .json(
                &json!({"message": "Deploy?", "accept": "Yes", "decline": "No", "timeout": "60s"}),
            )
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        (
            Instant::now(),
            serde_json::from_str::<Value>(text.trim()).unwrap(),
        )
    });
    let m = first_message(&a, &conv).await;
    assert_eq!(
        a.click(&conv, m["id"].as_str().unwrap(), "ask", "accept")
            .await
            .status(),
        200
    );
    let clicked = Instant::now();
    let (answered, answer) = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert_eq!(answer, json!({"answer": "accepted"}));
    let took = answered.saturating_duration_since(clicked);
    assert!(took < PROMPT, "B heard the answer after {took:?}");
}

#[actix_web::test]
async fn a_widget_stream_on_b_sees_a_click_on_a() {
    let (a, b) = two_instances(|_| {}).await;
    let rx = Receiver::start().await;
    let bot = a.create_bot(&rx.url).await;
    let conv = a.create_conv(&bot).await;
    let msg = a.buttons(&bot, &conv, true).await;
    let mut stream = Sse::connect_at(&b.address, &b, &conv, None).await;
    assert_eq!(
        a.click(&conv, msg["id"].as_str().unwrap(), "b1", "approve")
            .await
            .status(),
        200
    );
    let clicked = Instant::now();
    let seen = stream
        .until(WAIT, |e| {
            e.event == "message.updated" && e.data["blocks"][0]["state"]["disabled"] == true
        })
        .await;
    let took = seen
        .last()
        .map(|e| e.at.saturating_duration_since(clicked))
        .unwrap();
    assert!(took < PROMPT, "B's stream saw the click after {took:?}");
}

/// Reads `/api/v1/stream` frames (`event`, `data`) as they come.
async fn api_stream(
    app: &TestApp,
    key: &str,
) -> tokio::sync::mpsc::UnboundedReceiver<(String, Value, Instant)> {
    let resp = app
        .client
        .get(app.url("/api/v1/stream"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut body = resp.bytes_stream();
    actix_web::rt::spawn(async move {
        let mut buf = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let frame: String = buf.drain(..end + 2).collect();
                let mut event = String::new();
                let mut data = None;
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        event = v.to_string();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = serde_json::from_str(v).ok();
                    }
                }
                if let Some(d) = data
                    && tx.send((event, d, Instant::now())).is_err()
                {
                    return;
                }
            }
        }
    });
    rx
}

/// A question asked on A, with B's `/api/v1/stream` already told of it.
struct Asked {
    a: TestApp,
    b: TestApp,
    _rx: Receiver,
    conv: Conv,
    msg: Value,
    events: tokio::sync::mpsc::UnboundedReceiver<(String, Value, Instant)>,
    /// The `interaction.created` frame B's stream got.
    created: (String, Value, Instant),
}

async fn asked_on_a_told_on_b() -> Asked {
    let (a, b) = two_instances(|_| {}).await;
    let rx = Receiver::start().await;
    let bot = a.create_bot(&rx.url).await;
    let conv = a.create_conv(&bot).await;
    let mut events = api_stream(&b, &bot.api_key).await;
    let msg = a.buttons(&bot, &conv, true).await;
    let created = tokio::time::timeout(WAIT, events.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(created.0, "interaction.created", "{created:?}");
    Asked {
        a,
        b,
        _rx: rx,
        conv,
        msg,
        events,
        created,
    }
}

#[actix_web::test]
async fn the_api_stream_on_b_sees_an_interaction_answered_on_a() {
    // B stays up: its stream is the one listened to.
    let Asked {
        a,
        b: _b,
        conv,
        msg,
        mut events,
        created,
        _rx,
    } = asked_on_a_told_on_b().await;
    assert_eq!(
        a.click(&conv, msg["id"].as_str().unwrap(), "b1", "approve")
            .await
            .status(),
        200
    );
    let clicked = Instant::now();
    let answered = tokio::time::timeout(WAIT, events.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answered.0, "interaction.answered", "{answered:?}");
    assert_eq!(answered.1["id"], created.1["id"]);
    assert_eq!(answered.1["status"], "answered");
    let took = answered.2.saturating_duration_since(clicked);
    assert!(
        took < PROMPT,
        "B's API stream saw the answer after {took:?}"
    );
}

/// A's endpoint slot (one per instance here) is held by a slow delivery:
/// the events A commits next are claimed by B, each at once.
#[actix_web::test]
async fn a_head_event_committed_on_a_busy_instance_is_claimed_by_the_other() {
    let one_slot = |c: &mut Config| c.endpoint_concurrency = 1;
    let url = fresh_postgres_database().await;
    let u = url.clone();
    let a = spawn_app_with(move |c| {
        c.database = Database::Postgres(u);
        one_slot(c);
    })
    .await;
    let mut rx =
        Receiver::start_with(vec![Answer::status(200).delay(Duration::from_secs(8))]).await;
    let bot = a.create_bot(&rx.url).await;
    let mut convs = Vec::new();
    for _ in 0..4 {
        let c = a.create_conv(&bot).await;
        let m = a.buttons(&bot, &c, true).await;
        convs.push((c, m["id"].as_str().unwrap().to_string()));
    }
    // A alone: it claims the first event and waits on the slow endpoint.
    assert_eq!(
        a.click(&convs[0].0, &convs[0].1, "b1", "approve")
            .await
            .status(),
        200
    );
    let first = rx.take(1, WAIT).await;
    assert_eq!(first.len(), 1);
    // B joins; A stays busy for seconds yet.
    let _b = spawn_app_with(move |c| {
        c.database = Database::Postgres(url);
        one_slot(c);
    })
    .await;
    for (c, m) in &convs[1..] {
        assert_eq!(a.click(c, m, "b1", "approve").await.status(), 200);
        let clicked = Instant::now();
        let got = rx.take(1, WAIT).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].json()["conversation_id"], c.id.as_str());
        let took = clicked.elapsed();
        assert!(took < PROMPT, "B claimed A's event after {took:?}");
    }
}

/// The listening connection cut by the server: the instance listens again,
/// and still hears the other.
#[actix_web::test]
async fn a_lost_listening_connection_listens_again() {
    use sqlx::Connection;
    let (a, b) = two_instances(|_| {}).await;
    let rx = Receiver::start().await;
    let bot = a.create_bot(&rx.url).await;
    let conv = a.create_conv(&bot).await;
    let msg = a.buttons(&bot, &conv, true).await;
    let Database::Postgres(url) = &b.database else {
        unreachable!()
    };
    let db = url.rsplit('/').next().unwrap().to_string();
    let mut admin = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .unwrap();
    let cut: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = $1 AND application_name = 'blockhook listener'",
    )
    .bind(&db)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(cut, 2, "each instance listens on one connection");
    let mut stream = Sse::connect_at(&b.address, &b, &conv, None).await;
    // Listening again (the stream's own poll would see it within 1 s too:
    // this asserts only that the click is seen).
    let deadline = Instant::now() + WAIT;
    loop {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'blockhook listener'",
        )
        .bind(&db)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if n == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "listening again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        a.click(&conv, msg["id"].as_str().unwrap(), "b1", "approve")
            .await
            .status(),
        200
    );
    stream.until(WAIT, |e| e.event == "message.updated").await;
}

#[actix_web::test]
async fn an_erasure_on_a_refuses_the_token_on_b_and_ends_its_stream_there() {
    let (a, b) = two_instances(|_| {}).await;
    let rx = Receiver::start().await;
    let bot = a.create_bot(&rx.url).await;
    let conv = a.create_conv(&bot).await;
    a.buttons(&bot, &conv, false).await;
    let messages = format!("/widget/v1/conversations/{}/messages", conv.id);
    assert_eq!(b.get(&messages, &conv.token).await.status(), 200);
    let mut stream = Sse::connect_at(&b.address, &b, &conv, None).await;
    let r = a
        .client
        .delete(a.url(&format!("/api/v1/conversations/{}", conv.id)))
        .bearer_auth(&bot.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let erased = Instant::now();
    // B read the token before (and keeps what it read): it forgets it on
    // hearing the erasure.
    refused_within(PROMPT, || async {
        b.get(&messages, &conv.token).await.status() == 401
    })
    .await
    .expect("B refuses the token");
    // Without the erasure heard, B's stream would go on with a keep-alive
    // every 2 s (and look in the store every 1 s, finding nothing new).
    assert!(stream.ended(WAIT).await, "B's stream ended");
    let took = erased.elapsed();
    assert!(took < PROMPT, "B's stream ended after {took:?}");
}

/// Polls `refused` until true; how long it took, or `None` after `within`.
async fn refused_within<F, Fut>(within: Duration, refused: F) -> Option<Duration>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let began = Instant::now();
    while began.elapsed() < within {
        if refused().await {
            return Some(began.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// A visitor token B has read (and keeps: its conversation and the
/// chatbot's allowed origins) is read again once A changes what it stands
/// for (here the chatbot's allowed origins; a takeover, an erasure and
/// the purge say so the same way).
#[actix_web::test]
async fn a_change_on_a_of_what_a_token_stands_for_is_seen_on_b() {
    let (a, b) = two_instances(|_| {}).await;
    let rx = Receiver::start().await;
    let shop = "https://shop.example";
    let r = a
        .post(
            "/api/v1/chatbots",
            ADMIN_TOKEN,
            &json!({"name": "Shop bot", "webhook_url": rx.url, "allowed_origins": [shop]}),
        )
        .await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let bot_id = v["id"].as_str().unwrap().to_string();
    let r = a
        .client
        .post(a.url(&format!("/widget/v1/chatbots/{bot_id}/conversations")))
        .header("Origin", shop)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let (cid, token) = (
        v["conversation_id"].as_str().unwrap().to_string(),
        v["visitor_token"].as_str().unwrap().to_string(),
    );
    let messages = b.url(&format!("/widget/v1/conversations/{cid}/messages"));
    let from_shop = || async {
        b.client
            .get(&messages)
            .header("Origin", shop)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    for _ in 0..3 {
        assert_eq!(from_shop().await, 200, "B takes the token from the shop");
    }
    let r = a
        .client
        .patch(a.url(&format!("/api/v1/chatbots/{bot_id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"allowed_origins": ["https://elsewhere.example"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let took = refused_within(PROMPT, || async { from_shop().await == 403 })
        .await
        .expect("B refuses the shop's origin once A changed the chatbot's");
    eprintln!("origins changed on A, refused on B after {took:?}");
}

/// An answer committed while the other instance's listening connection is
/// down (the database refuses new connections, so it cannot listen again
/// yet) reaches `/api/v1/stream` on that instance once it listens again:
/// the listener re-reads what changed around the loss, and this stream has
/// no poll of its own to hide a loss.
#[actix_web::test]
async fn an_answer_committed_while_the_listener_is_down_is_told_after_it_listens_again() {
    use sqlx::Connection;
    let Asked {
        a,
        b,
        conv,
        msg,
        mut events,
        created,
        _rx,
    } = asked_on_a_told_on_b().await;
    let Database::Postgres(url) = &b.database else {
        unreachable!()
    };
    let db = url.rsplit('/').next().unwrap().to_string();
    let mut admin = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .unwrap();
    let allow = |on: bool| format!("ALTER DATABASE {db} WITH ALLOW_CONNECTIONS {on}");
    sqlx::query(&allow(false))
        .execute(&mut admin)
        .await
        .unwrap();
    let cut: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = $1 AND application_name = 'blockhook listener'",
    )
    .bind(&db)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(cut, 2, "each instance listens on one connection");
    // A answers on a connection its pool already holds; B cannot listen.
    let clicked = a
        .click(&conv, msg["id"].as_str().unwrap(), "b1", "approve")
        .await
        .status();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let listening: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'blockhook listener'",
    )
    .bind(&db)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    sqlx::query(&allow(true)).execute(&mut admin).await.unwrap();
    assert_eq!(clicked, 200);
    assert_eq!(listening, 0, "no instance listened while refused");
    let answered = tokio::time::timeout(WAIT, async {
        loop {
            let e = events.recv().await.unwrap();
            if e.0 == "interaction.answered" {
                return e;
            }
        }
    })
    .await
    .expect("B's API stream is told the answer once B listens again");
    assert_eq!(answered.1["id"], created.1["id"]);
    assert_eq!(answered.1["status"], "answered");
}

/// One instance alone on its database sends no notifications (each would
/// put its commit behind PostgreSQL's notification queue lock); once a
/// second instance listens, the first notifies again at once.
#[actix_web::test]
async fn an_instance_alone_sends_no_notifications_until_another_listens() {
    let url = fresh_postgres_database().await;
    let u1 = url.clone();
    let a = spawn_app_with(move |c| c.database = Database::Postgres(u1)).await;
    let rx = Receiver::start().await;
    let bot = a.create_bot(&rx.url).await;
    // A plain connection listening on the channel (not an instance).
    let mut ear = sqlx::postgres::PgListener::connect(&url).await.unwrap();
    ear.listen("blockhook").await.unwrap();
    let conv = a.create_conv(&bot).await;
    let msg = a.buttons(&bot, &conv, false).await;
    let clicked = a
        .click(&conv, msg["id"].as_str().unwrap(), "b1", "approve")
        .await;
    assert_eq!(clicked.status(), 200);
    let heard = tokio::time::timeout(Duration::from_millis(500), ear.recv()).await;
    assert!(
        heard.is_err(),
        "an instance alone notifies nobody: {heard:?}"
    );
    let u2 = url.clone();
    let b = spawn_app_with(move |c| c.database = Database::Postgres(u2)).await;
    // B's start is announced (`j`), then A notifies its commits again.
    let joined = tokio::time::timeout(WAIT, ear.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(joined.payload().ends_with("\tj"), "{}", joined.payload());
    let mut stream = Sse::connect_at(&b.address, &b, &conv, None).await;
    let msg = a.buttons(&bot, &conv, false).await;
    let started = Instant::now();
    let heard = tokio::time::timeout(WAIT, ear.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(!heard.payload().ends_with("\tj"), "{}", heard.payload());
    stream
        .until(WAIT, |e| {
            e.event == "message.created" && e.data["id"] == msg["id"]
        })
        .await;
    assert!(
        started.elapsed() < PROMPT,
        "B heard A after {:?}",
        started.elapsed()
    );
}
