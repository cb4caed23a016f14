//! §15, store trouble injected for real: PostgreSQL cut off behind a TCP
//! proxy and refusing connections (`ALLOW_CONNECTIONS false`), SQLite on a
//! small file system filled up. Every write answered within 2 s, 2xx (then
//! delivered once) or 503 `store_unavailable` with `Retry-After` (then
//! never delivered); `/readyz` 503 while it lasts, `/healthz` 200; the
//! service back on its own once the store is.

mod full_disk;
mod proxy;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use blockhook::config::Database;
use serde_json::Value;
use sqlx::Connection;

use crate::helpers::*;
use proxy::Proxy;

/// §15: no request waits on a store that does not answer longer than this.
const BOUND: Duration = Duration::from_secs(2);

/// A write's answer as the client saw it.
struct Answered {
    status: u16,
    took: Duration,
    body: Value,
    retry_after: Option<String>,
    content_type: Option<String>,
}

async fn answered(send: impl std::future::Future<Output = reqwest::Response>) -> Answered {
    let t = Instant::now();
    let r = send.await;
    let took = t.elapsed();
    let header = |n: &str| {
        r.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (retry_after, content_type) = (header("retry-after"), header("content-type"));
    let status = r.status().as_u16();
    let body = r.json().await.unwrap_or(Value::Null);
    Answered {
        status,
        took,
        body,
        retry_after,
        content_type,
    }
}

/// A 503 as §15 wants it, within [`BOUND`].
fn store_unavailable(a: &Answered, what: &str) {
    assert_eq!(a.status, 503, "{what}: {}", a.body);
    assert!(a.took < BOUND, "{what} answered after {:?}", a.took);
    assert_eq!(a.body["code"], "store_unavailable", "{what}: {}", a.body);
    assert_eq!(a.body["status"], 503, "{what}: {}", a.body);
    assert_eq!(
        a.content_type.as_deref(),
        Some("application/problem+json"),
        "{what}"
    );
    assert!(a.retry_after.is_some(), "{what}: no Retry-After");
}

async fn get_status(app: &TestApp, path: &str) -> Answered {
    answered(async {
        app.client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .expect("GET")
    })
    .await
}

/// Polls `/readyz` until it answers 200; how long that took.
async fn ready_again(app: &TestApp, within: Duration) -> Duration {
    let t = Instant::now();
    loop {
        if get_status(app, "/readyz").await.status == 200 {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < within,
            "not ready {within:?} after the store came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Once every accepted click's event has been delivered and recorded as
/// such, the receiver got each of them exactly once and nothing else: no
/// refused click's event, no second copy.
async fn delivered_exactly_once(
    app: &TestApp,
    rx: &Receiver,
    bot: &Bot,
    accepted: &HashSet<String>,
    refused: &HashSet<String>,
) {
    let t = Instant::now();
    loop {
        let events = app.events(bot).await;
        let done =
            events.len() >= accepted.len() && events.iter().all(|e| e["status"] == "succeeded");
        if done {
            assert_eq!(events.len(), accepted.len(), "one event per accepted click");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "deliveries not done: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = rx.all();
    let mut ids = HashSet::new();
    let mut messages = HashSet::new();
    for r in &got {
        assert!(
            ids.insert(r.header("webhook-id").unwrap_or_default().to_string()),
            "a webhook-id delivered twice"
        );
        let m = r.json()["message_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            !refused.contains(&m),
            "a click answered 503 was delivered: {m}"
        );
        messages.insert(m);
    }
    assert_eq!(&messages, accepted, "every accepted click delivered");
    assert_eq!(got.len(), accepted.len(), "each once");
}

/// `n` messages of buttons, their ids.
async fn messages(app: &TestApp, bot: &Bot, conv: &Conv, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let m = app.buttons(bot, conv, true).await;
        out.push(m["id"].as_str().expect("id").to_string());
    }
    out
}

/// The `host:port` of a PostgreSQL URL.
fn host_port(url: &str) -> String {
    let after = url.split_once('@').map(|(_, r)| r).unwrap_or(url);
    after.split('/').next().unwrap_or_default().to_string()
}

/// PostgreSQL cut off (every connection closed, new ones refused) under a
/// running instance, clicks before, during and after: during, each is
/// answered 503 within 2 s and `/readyz` 503; after the proxy forwards
/// again the instance is ready without a restart; every 2xx click is
/// delivered once, no 503 click ever.
#[actix_web::test]
async fn postgres_cut_off_and_back_loses_nothing_and_sends_nothing_twice() {
    let url = fresh_postgres_database().await;
    let target = host_port(&url);
    let proxy = Proxy::start(target.clone()).await;
    let proxied = url.replacen(&target, &proxy.addr.to_string(), 1);
    let app = spawn_app_with(|c| c.database = Database::Postgres(proxied)).await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let ids = messages(&app, &bot, &conv, 30).await;
    let (mut accepted, mut refused) = (HashSet::new(), HashSet::new());

    for id in &ids[..6] {
        let a = answered(app.click(&conv, id, "b1", "approve")).await;
        assert_eq!(a.status, 200, "{}", a.body);
        accepted.insert(id.clone());
    }

    proxy.cut();
    let mut slowest = Duration::ZERO;
    // One after another, then eight at once.
    for id in &ids[6..14] {
        let a = answered(app.click(&conv, id, "b1", "approve")).await;
        store_unavailable(&a, "a click while cut off");
        slowest = slowest.max(a.took);
        refused.insert(id.clone());
    }
    let burst = futures_util::future::join_all(
        ids[14..22]
            .iter()
            .map(|id| answered(app.click(&conv, id, "b1", "approve"))),
    )
    .await;
    for (id, a) in ids[14..22].iter().zip(&burst) {
        store_unavailable(a, "a click of a burst while cut off");
        slowest = slowest.max(a.took);
        refused.insert(id.clone());
    }
    store_unavailable(&get_status(&app, "/readyz").await, "/readyz");
    assert_eq!(get_status(&app, "/healthz").await.status, 200);

    proxy.restore();
    let recovered = ready_again(&app, Duration::from_secs(10)).await;
    for id in &ids[22..] {
        let a = answered(app.click(&conv, id, "b1", "approve")).await;
        assert_eq!(a.status, 200, "after the store is back: {}", a.body);
        accepted.insert(id.clone());
    }
    delivered_exactly_once(&app, &rx, &bot, &accepted, &refused).await;
    eprintln!(
        "figures: postgres cut off: slowest 503 {slowest:?}, ready again {recovered:?} after the restore, {} accepted, {} refused, 0 lost",
        accepted.len(),
        refused.len()
    );
}

/// A database that refuses connections (`ALLOW_CONNECTIONS false`, its
/// backends ended): 503 `store_unavailable` within 2 s, not 500; back on
/// its own when it allows them again, the refused click then accepted and
/// delivered once.
#[actix_web::test]
async fn a_database_that_allows_no_connections_answers_503() {
    let url = fresh_postgres_database().await;
    let u = url.clone();
    let app = spawn_app_with(|c| c.database = Database::Postgres(u)).await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let ids = messages(&app, &bot, &conv, 2).await;
    let a = answered(app.click(&conv, &ids[0], "b1", "approve")).await;
    assert_eq!(a.status, 200, "{}", a.body);

    let db = url.rsplit('/').next().unwrap_or_default().to_string();
    let mut admin = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .expect("admin connection");
    sqlx::query(&format!("ALTER DATABASE \"{db}\" ALLOW_CONNECTIONS false"))
        .execute(&mut admin)
        .await
        .expect("allow_connections false");
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
        .bind(&db)
        .execute(&mut admin)
        .await
        .expect("terminate");

    for _ in 0..4 {
        let a = answered(app.click(&conv, &ids[1], "b1", "approve")).await;
        store_unavailable(&a, "a click on a database refusing connections");
    }
    store_unavailable(&get_status(&app, "/readyz").await, "/readyz");

    sqlx::query(&format!("ALTER DATABASE \"{db}\" ALLOW_CONNECTIONS true"))
        .execute(&mut admin)
        .await
        .expect("allow_connections true");
    ready_again(&app, Duration::from_secs(10)).await;
    let a = answered(app.click(&conv, &ids[1], "b1", "approve")).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let accepted: HashSet<String> = ids.iter().cloned().collect();
    delivered_exactly_once(&app, &rx, &bot, &accepted, &HashSet::new()).await;
}
