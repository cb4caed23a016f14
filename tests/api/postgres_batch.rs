//! Group commit on PostgreSQL with two instances on one database: clicks
//! batched on each instance still let exactly one click win a block that
//! disables on click, whichever instance each click reaches.

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
