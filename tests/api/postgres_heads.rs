//! PostgreSQL: deliveries of one (endpoint, conversation) pair routed in
//! one statement give the pair one head, its oldest; the claim relies on it
//! and checks no order itself (a revived delivery: `endpoints::heads`).

use std::time::Duration;

use crate::delivery::fanout::{Ep, add_endpoint, wait_count};
use crate::delivery::{click_ok, reusable_buttons};
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
    wait_count(
        &app,
        "SELECT count(*) FROM unrouted_events",
        1,
        WAIT,
        "queued",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..4 {
        click_ok(&app, &conv, &mid).await;
    }
    wait_count(
        &app,
        "SELECT count(*) FROM unrouted_events",
        5,
        WAIT,
        "all queued",
    )
    .await;
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
    assert!(
        heads.iter().all(|(_, n)| *n == 1),
        "one head per pair: {heads:?}"
    );
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
