//! PostgreSQL: each (endpoint, conversation) pair of the fan-out has one
//! head, its oldest delivery still to make, however its deliveries were
//! routed or revived; the claim relies on it and checks no order itself.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::delivery::fanout::{Ep, add_endpoint, count, sql, wait_count};
use crate::delivery::{click_ok, reusable_buttons};
use crate::endpoints::call;
use crate::helpers::*;

const WAIT: Duration = Duration::from_secs(15);

/// The key the router and the recorder lock an endpoint by.
const LOCK: &str = "pg_advisory_lock(7261537, hashtext($1))";

/// The pair's deliveries still to make, oldest first, as (seq, is_head).
async fn pair(conn: &mut sqlx::PgConnection, ep: &Ep) -> Vec<(i64, i64)> {
    sqlx::query_as(
        "SELECT seq, is_head FROM deliveries
         WHERE endpoint_id = $1 AND status IN ('pending', 'failed') ORDER BY seq",
    )
    .bind(&ep.id)
    .fetch_all(conn)
    .await
    .unwrap()
}

/// Four events of one conversation routed in one statement: only the
/// first is its pair's head. The endpoint is paused, so its deliveries
/// wait; the router is held on the endpoint's lock by a click in another
/// conversation while the four are accepted.
#[actix_web::test]
async fn deliveries_of_one_pair_routed_together_have_one_head() {
    let (app, mut conn) = crate::postgres::migrated_database().await;
    let main = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, "http://127.0.0.1:9/hook", None, None, false).await;
    let (plug, conv) = (app.create_conv(&bot).await, app.create_conv(&bot).await);
    let (plug_mid, mid) = (
        reusable_buttons(&app, &bot, &plug).await,
        reusable_buttons(&app, &bot, &conv).await,
    );

    let blockhook::config::Database::Postgres(url) = &app.database else {
        panic!("a PostgreSQL app")
    };
    let mut lock: sqlx::PgConnection = sqlx::Connection::connect(url).await.unwrap();
    sqlx::query(&format!("SELECT {LOCK}"))
        .bind(&ep.id)
        .execute(&mut lock)
        .await
        .unwrap();
    click_ok(&app, &plug, &plug_mid).await;
    // The router has the plug's event and waits for the lock.
    wait_count(&app, "SELECT count(*) FROM unrouted_events", 1, WAIT, "queued").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..4 {
        click_ok(&app, &conv, &mid).await;
    }
    wait_count(&app, "SELECT count(*) FROM unrouted_events", 5, WAIT, "all queued").await;
    sqlx::query("SELECT pg_advisory_unlock(7261537, hashtext($1))")
        .bind(&ep.id)
        .execute(&mut lock)
        .await
        .unwrap();
    let routed = format!(
        "SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'",
        ep.id
    );
    wait_count(&app, &routed, 5, WAIT, "routed").await;
    let mut heads = sqlx::query_as::<_, (String, i64)>(
        "SELECT conversation_id, sum(is_head)::bigint FROM deliveries WHERE endpoint_id = $1 GROUP BY 1",
    )
    .bind(&ep.id)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    heads.sort();
    assert!(heads.iter().all(|(_, n)| *n == 1), "one head per pair: {heads:?}");
    let rows = pair(&mut conn, &ep).await;
    let of_conv: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT seq, is_head FROM deliveries WHERE endpoint_id = $1 AND conversation_id = $2 ORDER BY seq",
    )
    .bind(&ep.id)
    .bind(&conv.id)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(of_conv.len(), 4, "{rows:?}");
    assert_eq!(of_conv[0].1, 1, "the oldest is the head: {of_conv:?}");
}

/// A redelivery revives an older delivery of a pair whose newer one is
/// its head: the revived one is the head and the newer one waits behind
/// it. Dead by hand, as the recorder would leave them: the first dead,
/// the second the head, the third behind it.
#[actix_web::test]
async fn a_revived_older_delivery_takes_the_head_from_a_newer_one() {
    let (app, mut conn) = crate::postgres::migrated_database().await;
    let main = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, "http://127.0.0.1:9/hook", None, None, false).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    for _ in 0..3 {
        click_ok(&app, &conv, &mid).await;
    }
    let routed = format!(
        "SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'",
        ep.id
    );
    wait_count(&app, &routed, 3, WAIT, "routed").await;
    let first: (i64, String) = sqlx::query_as(
        "SELECT seq, event_id FROM deliveries WHERE endpoint_id = $1 ORDER BY seq LIMIT 1",
    )
    .bind(&ep.id)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    sql(
        &app,
        &[
            format!("UPDATE deliveries SET status = 'dead', is_head = 0 WHERE seq = {}", first.0),
            format!(
                "UPDATE deliveries SET is_head = 1 WHERE seq = (SELECT min(seq) FROM deliveries
                 WHERE endpoint_id = '{}' AND status = 'pending')",
                ep.id
            ),
        ],
    )
    .await;
    let before = pair(&mut conn, &ep).await;
    assert_eq!(before.iter().map(|r| r.1).collect::<Vec<_>>(), [1, 0], "{before:?}");

    let path = format!("/api/v1/events/{}/redeliver", first.1);
    let r = call(&app, &bot, Method::POST, &path, Some(&json!({"endpoint_id": ep.id}))).await;
    assert_eq!(r.status(), 202);
    let after = pair(&mut conn, &ep).await;
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(after[0], (first.0, 1), "the revived one heads its pair: {after:?}");
    assert_eq!(after.iter().map(|r| r.1).sum::<i64>(), 1, "and alone: {after:?}");

    // The bulk redelivery keeps one head as well.
    sql(&app, &[format!("UPDATE deliveries SET status = 'dead' WHERE endpoint_id = '{}'", ep.id)]).await;
    let r = call(
        &app,
        &bot,
        Method::POST,
        "/api/v1/events/redeliver",
        Some(&json!({"status": "dead", "endpoint_id": ep.id})),
    )
    .await;
    assert_eq!(r.status(), 202);
    let bulk = pair(&mut conn, &ep).await;
    assert_eq!(bulk.len(), 3, "{bulk:?}");
    assert_eq!(bulk.iter().map(|r| r.1).collect::<Vec<_>>(), [1, 0, 0], "{bulk:?}");
    assert_eq!(
        count(&app, "SELECT count(*) FROM deliveries WHERE is_head = 1 AND status IN ('pending', 'failed')").await,
        1
    );
}
