//! §10 limits: per client IP on new conversations, per visitor token on
//! widget writes, per API key on /api/v1, and live streams per visitor.
//! Over a limit → 429 `rate_limited` with `Retry-After`; nothing stored
//! or sent.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::core::{NOWHERE, json_of, problem};
use crate::helpers::{Receiver, StoreKind, TestApp, current_store, spawn_app_with};
use blockhook::limits::Rate;

fn rate(s: &str) -> Rate {
    Rate::parse(s).expect("rate")
}

/// Rows of `table` in the app's store, read from the database itself.
async fn count_rows(app: &TestApp, table: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table}");
    match current_store() {
        StoreKind::Sqlite => {
            let db = rusqlite::Connection::open_with_flags(
                &app.db_path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .expect("open the database file");
            db.query_row(&sql, [], |r| r.get(0)).expect("count")
        }
        StoreKind::Postgres => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(&app.db_path)
                .await
                .expect("connect");
            let n: i64 = sqlx::query_scalar(&sql)
                .fetch_one(&mut c)
                .await
                .expect("count");
            n
        }
    }
}

/// Asserts a 429 `rate_limited` with a whole-second `Retry-After` ≥ 1;
/// returns it.
async fn limited(r: reqwest::Response) -> u64 {
    let retry_after = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .expect("Retry-After");
    problem(r, 429, "rate_limited").await;
    let secs: u64 = retry_after.parse().expect("whole seconds");
    assert!(secs >= 1, "{retry_after}");
    secs
}

fn new_conversation_path(bot_id: &str) -> String {
    format!("/widget/v1/chatbots/{bot_id}/conversations")
}

store_test! {
async fn new_conversations_are_limited_per_client_ip() {
    let app = spawn_app_with(|c| c.limit_conversations = rate("3/min")).await;
    let bot = app.create_bot(NOWHERE).await;
    for _ in 0..3 {
        app.create_conv(&bot).await;
    }
    let before = count_rows(&app, "conversations").await;
    for _ in 0..5 {
        let secs = limited(app.post(&new_conversation_path(&bot.id), "", &json!({})).await).await;
        assert!(
            (59..=60).contains(&secs),
            "the first of the three leaves the 60 s window: {secs}"
        );
    }
    assert_eq!(count_rows(&app, "conversations").await, before, "nothing stored");
}
}

store_test! {
async fn behind_a_trusted_proxy_the_forwarded_client_is_limited() {
    let app = spawn_app_with(|c| {
        c.limit_conversations = rate("2/min");
        c.trusted_proxy = vec!["127.0.0.0/8".parse().unwrap()];
    })
    .await;
    let bot = app.create_bot(NOWHERE).await;
    let from = |xff: &'static str| {
        app.client
            .post(app.url(&new_conversation_path(&bot.id)))
            .header("X-Forwarded-For", xff)
            .json(&json!({}))
            .send()
    };
    for _ in 0..2 {
        assert_eq!(from("198.51.100.7").await.unwrap().status(), 201);
    }
    limited(from("198.51.100.7").await.unwrap()).await;
    // A client cannot escape by prepending an address of its choosing.
    limited(from("203.0.113.1, 198.51.100.7").await.unwrap()).await;
    // Another client behind the same proxy has its own allowance.
    assert_eq!(from("198.51.100.8").await.unwrap().status(), 201);

    // Without a trusted proxy the header is ignored: the peer is the client.
    let app = spawn_app_with(|c| c.limit_conversations = rate("2/min")).await;
    let bot = app.create_bot(NOWHERE).await;
    for (xff, status) in [("198.51.100.1", 201), ("198.51.100.2", 201), ("198.51.100.3", 429)] {
        let r = app
            .client
            .post(app.url(&new_conversation_path(&bot.id)))
            .header("X-Forwarded-For", xff)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{xff}");
    }
}
}

store_test! {
async fn widget_writes_are_limited_per_visitor_and_nothing_is_sent() {
    let mut rx = Receiver::start().await;
    let app = spawn_app_with(|c| c.limit_visitor = rate("4/min")).await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let m = app.buttons(&bot, &conv, false).await;
    let mid = m["id"].as_str().unwrap();
    for _ in 0..3 {
        json_of(app.click(&conv, mid, "b1", "approve").await, 200).await;
    }
    let msg = format!("/widget/v1/conversations/{}/messages", conv.id);
    json_of(app.post(&msg, &conv.token, &json!({"text": "hi"})).await, 201).await;
    // The fifth write of any kind is refused.
    limited(app.click(&conv, mid, "b1", "approve").await).await;
    limited(app.post(&msg, &conv.token, &json!({"text": "again"})).await).await;
    limited(app.submit(&conv, mid, "f1", json!({})).await).await;
    // Reads are not writes.
    json_of(app.get(&msg, &conv.token).await, 200).await;
    // Another visitor has its own allowance.
    let other = app.create_conv(&bot).await;
    let m2 = app.buttons(&bot, &other, false).await;
    json_of(app.click(&other, m2["id"].as_str().unwrap(), "b1", "deny").await, 200).await;

    // Exactly the accepted writes became events and reached the receiver.
    let got = rx.take(5, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 5);
    assert!(rx.next(Duration::from_millis(300)).await.is_none(), "nothing more sent");
    assert_eq!(count_rows(&app, "events").await, 5, "nothing more stored");
}
}

store_test! {
async fn requests_are_limited_per_api_key() {
    let app = spawn_app_with(|c| c.limit_api_key = rate("3/min")).await;
    let bot = app.create_bot(NOWHERE).await;
    let other = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    for _ in 0..3 {
        json_of(app.get("/api/v1/interactions", &bot.api_key).await, 200).await;
    }
    let path = format!("/api/v1/conversations/{}/messages", conv.id);
    limited(app.post(&path, &bot.api_key, &json!({"text": "hello"})).await).await;
    assert_eq!(count_rows(&app, "messages").await, 0, "nothing stored");
    json_of(app.get("/api/v1/interactions", &other.api_key).await, 200).await;
    // The admin token and the widget are not counted against the key.
    json_of(app.get(&format!("/api/v1/chatbots/{}", bot.id), crate::helpers::ADMIN_TOKEN).await, 200).await;
}
}

/// Opens the widget stream over a raw connection; returns the status and
/// the connection (kept open while held).
async fn raw_stream(app: &TestApp, cid: &str, token: &str) -> (u16, TcpStream) {
    let mut s = TcpStream::connect(("127.0.0.1", app.port))
        .await
        .expect("connect");
    let req = format!(
        "GET /widget/v1/conversations/{cid}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).await.expect("read");
        assert!(n > 0, "closed before the headers");
        head.extend_from_slice(&buf[..n]);
    }
    let status = String::from_utf8_lossy(&head)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    (status, s)
}

store_test! {
async fn streams_per_visitor_are_capped_and_a_closed_one_frees_its_place() {
    let app = spawn_app_with(|c| c.max_streams_per_visitor = Some(2)).await;
    let bot = app.create_bot(NOWHERE).await;
    let conv = app.create_conv(&bot).await;
    let (a, first) = raw_stream(&app, &conv.id, &conv.token).await;
    let (b, _second) = raw_stream(&app, &conv.id, &conv.token).await;
    assert_eq!((a, b), (200, 200));
    let r = app
        .get(&format!("/widget/v1/conversations/{}/stream", conv.id), &conv.token)
        .await;
    limited(r).await;
    // Another visitor is not affected.
    let other = app.create_conv(&bot).await;
    let (c, _third) = raw_stream(&app, &other.id, &other.token).await;
    assert_eq!(c, 200);

    // The client goes away: its place is free again within a few seconds
    // (a closed connection is found at the next keep-alive write).
    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, conn) = raw_stream(&app, &conv.id, &conv.token).await;
        if status == 200 {
            drop(conn);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the closed stream's place was not freed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
}
