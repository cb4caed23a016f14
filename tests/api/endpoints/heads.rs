//! A redelivery that revives an older delivery of an (endpoint,
//! conversation) pair keeps the pair one head, its oldest delivery still to
//! make: the claims rely on it and check no order themselves.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::call;
use crate::delivery::fanout::{Ep, add_endpoint, sql, wait_count};
use crate::delivery::{click_ok, reusable_buttons};
use crate::helpers::*;

const WAIT: Duration = Duration::from_secs(15);

/// The pair's deliveries still to make, oldest first, as (seq, is_head),
/// and the first delivery's event id.
async fn pair(app: &TestApp, ep: &Ep) -> (Vec<(i64, i64)>, String) {
    let q = format!(
        "SELECT seq, is_head, event_id FROM deliveries
         WHERE endpoint_id = '{}' AND status IN ('pending', 'failed') ORDER BY seq",
        ep.id
    );
    let rows: Vec<(i64, i64, String)> = match &app.database {
        blockhook::config::Database::Sqlite(p) => {
            let c = rusqlite::Connection::open(p).expect("open SQLite");
            let mut st = c.prepare(&q).expect("prepare");
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .expect("query")
                .collect::<Result<_, _>>()
                .expect("rows")
        }
        blockhook::config::Database::Postgres(u) => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(u).await.expect("connect");
            sqlx::query_as(&q).fetch_all(&mut c).await.expect("query")
        }
    };
    let first = rows.first().map(|r| r.2.clone()).unwrap_or_default();
    (rows.into_iter().map(|r| (r.0, r.1)).collect(), first)
}

fn marks(rows: &[(i64, i64)]) -> Vec<i64> {
    rows.iter().map(|r| r.1).collect()
}

store_test! {
/// Three deliveries of one pair to a paused endpoint (they wait). The
/// first is then dead, the second the head, as the recorder leaves them.
/// Redelivering the first makes it the head and the second waits behind
/// it; a bulk redelivery of all three leaves the first the only head.
async fn a_revived_older_delivery_takes_the_head_from_a_newer_one() {
    let app = spawn_app().await;
    let main = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, "http://127.0.0.1:9/hook", None, None, false).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    for _ in 0..3 {
        click_ok(&app, &conv, &mid).await;
    }
    let routed = format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'", ep.id);
    wait_count(&app, &routed, 3, WAIT, "routed").await;
    let (rows, first_event) = pair(&app, &ep).await;
    assert_eq!(marks(&rows), [1, 0, 0], "one head, the oldest: {rows:?}");
    let first = rows[0].0;
    sql(
        &app,
        &[
            format!("UPDATE deliveries SET status = 'dead', is_head = 0 WHERE seq = {first}"),
            format!("UPDATE deliveries SET is_head = 1 WHERE seq = {}", rows[1].0),
        ],
    )
    .await;

    let path = format!("/api/v1/events/{first_event}/redeliver");
    let r = call(&app, &bot, Method::POST, &path, Some(&json!({"endpoint_id": ep.id}))).await;
    assert_eq!(r.status(), 202);
    let (after, _) = pair(&app, &ep).await;
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(after[0].0, first, "{after:?}");
    assert_eq!(marks(&after), [1, 0, 0], "the revived one heads its pair, alone: {after:?}");

    sql(&app, &[format!("UPDATE deliveries SET status = 'dead' WHERE endpoint_id = '{}'", ep.id)]).await;
    let bulk = json!({"status": "dead", "endpoint_id": ep.id});
    let r = call(&app, &bot, Method::POST, "/api/v1/events/redeliver", Some(&bulk)).await;
    assert_eq!(r.status(), 202);
    let (after, _) = pair(&app, &ep).await;
    assert_eq!(marks(&after), [1, 0, 0], "after a bulk redelivery: {after:?}");
}
}
