//! Group commit on PostgreSQL with two instances on one database: clicks
//! batched on each instance still let exactly one click win a block that
//! disables on click, whichever instance each click reaches; a burst on
//! one instance, whose batches chain their transactions, is accepted whole
//! and leaves no transaction open.

use blockhook::config::Database;
use futures_util::future::join_all;

use crate::core::NOWHERE;
use crate::helpers::*;

#[actix_web::test]
async fn concurrent_clicks_from_two_instances_on_blocks_that_disable_let_one_win_each() {
    let url = fresh_postgres_database().await;
    let (u1, u2) = (url.clone(), url);
    let a = spawn_app_with(move |c| c.database = Database::Postgres(u1)).await;
    let b = spawn_app_with(move |c| c.database = Database::Postgres(u2)).await;
    let bot = a.create_bot(NOWHERE).await;
    let mut targets = Vec::new();
    for _ in 0..8 {
        let conv = a.create_conv(&bot).await;
        let m = a.buttons(&bot, &conv, true).await;
        targets.push((conv, m["id"].as_str().unwrap().to_string()));
    }
    // Six clicks on each message at once, alternating between the
    // instances: 48 clicks in flight, batched on both.
    let (a, b) = (&a, &b);
    let clicks = targets.iter().flat_map(|(conv, mid)| {
        (0..6).map(move |k| {
            let app = if k % 2 == 0 { a } else { b };
            async move {
                (
                    mid.clone(),
                    app.click(conv, mid, "b1", "approve")
                        .await
                        .status()
                        .as_u16(),
                )
            }
        })
    });
    let statuses = join_all(clicks).await;
    for (_, mid) in &targets {
        let mine: Vec<u16> = statuses
            .iter()
            .filter(|(m, _)| m == mid)
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(
            mine.iter().filter(|s| **s == 200).count(),
            1,
            "one click wins {mid}: {mine:?}"
        );
        assert!(
            mine.iter().all(|s| *s == 200 || *s == 409),
            "the others are refused as already clicked: {mine:?}"
        );
    }
    assert_eq!(a.events(&bot).await.len(), 8, "one event per message");
    assert_eq!(
        b.events(&bot).await.len(),
        8,
        "the same on the other instance"
    );
}

/// A burst queues clicks behind a running batch, whose `COMMIT` then opens
/// the next batch's transaction: every click of the burst is accepted once,
/// and when the queue has drained no connection is left with a transaction
/// open.
#[actix_web::test]
async fn a_burst_of_clicks_is_accepted_whole_and_leaves_no_transaction_open() {
    use sqlx::Connection;
    let url = fresh_postgres_database().await;
    let u = url.clone();
    let app = spawn_app_with(move |c| c.database = Database::Postgres(u)).await;
    let bot = app.create_bot(NOWHERE).await;
    let mut targets = Vec::new();
    for _ in 0..64 {
        let conv = app.create_conv(&bot).await;
        let m = app.buttons(&bot, &conv, true).await;
        targets.push((conv, m["id"].as_str().unwrap().to_string()));
    }
    let app = &app;
    let statuses = join_all(targets.iter().map(|(conv, mid)| async move {
        app.click(conv, mid, "b1", "approve")
            .await
            .status()
            .as_u16()
    }))
    .await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(app.events(&bot).await.len(), 64, "one event per click");

    let name = url.rsplit('/').next().unwrap().to_string();
    let mut admin = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .unwrap();
    let mut open = -1;
    for _ in 0..40 {
        open = sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = $1 AND state LIKE 'idle in transaction%'",
        )
        .bind(&name)
        .fetch_one(&mut admin)
        .await
        .unwrap();
        if open == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(open, 0, "no transaction left open once the clicks drained");
}
