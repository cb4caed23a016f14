//! The same contract on PostgreSQL: ingest, first-click-wins, validation,
//! retries, order, replies, and two instances sharing one database.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;

const WAIT: Duration = Duration::from_secs(10);

#[actix_web::test]
async fn click_is_delivered_signed_with_the_exact_payload() {
    let app = spawn_app_pg().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let mid = msg["id"].as_str().unwrap();

    let r = app.click(&conv, mid, "b1", "approve").await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["message"]["blocks"][0]["state"],
        json!({"disabled": true, "reason": "used", "chosen_action_id": "approve", "answered_by": "visitor"})
    );

    let got = rx.take(1, WAIT).await.remove(0);
    assert!(
        verify_signature(&bot.signing_secret, &got),
        "signature must verify"
    );
    let ev = got.json();
    assert_eq!(ev["type"], "interaction.button_clicked");
    assert_eq!(ev["value"], "req_991");
    assert_eq!(ev["message_metadata"], json!({"order_id": "4821"}));
    assert_eq!(ev["user"]["kind"], "visitor");
    assert_eq!(got.header("webhook-id"), ev["event_id"].as_str());
    assert_eq!(got.header("x-myaichatbot-attempt"), Some("1"));
    let e = app
        .wait_event(&bot, ev["event_id"].as_str().unwrap(), WAIT, |e| {
            e["status"] == "succeeded"
        })
        .await;
    assert_eq!(e["status"], "succeeded");
}

#[actix_web::test]
async fn concurrent_clicks_on_one_group_accept_exactly_one() {
    let app = spawn_app_pg().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let mid = msg["id"].as_str().unwrap().to_string();

    let mut tasks = Vec::new();
    for i in 0..32 {
        let (c, m, client, url) = (conv.clone(), mid.clone(), app.client.clone(), app.url(""));
        tasks.push(tokio::spawn(async move {
            let action = if i % 2 == 0 { "approve" } else { "deny" };
            client
                .post(format!("{url}/widget/v1/messages/{m}/clicks"))
                .bearer_auth(&c.token)
                .json(&json!({"block_id": "b1", "action_id": action}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 1, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 409).count(), 31, "{codes:?}");
    assert_eq!(app.events(&bot).await.len(), 1);
}

#[actix_web::test]
async fn a_bad_form_stores_nothing_and_a_good_one_is_typed() {
    let app = spawn_app_pg().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app
        .bot_message(
            &bot,
            &conv,
            json!({"blocks": [{"type": "form", "form_id": "callback", "fields": [
                {"name": "email", "type": "email", "label": "Email", "required": true},
                {"name": "team_size", "type": "number", "label": "Team", "min": 1, "max": 10},
                {"name": "consent", "type": "checkbox", "label": "OK"}]}]}),
        )
        .await;
    let mid = msg["id"].as_str().unwrap();
    let r = app
        .submit(
            &conv,
            mid,
            "callback",
            json!({"email": "nope", "team_size": "11"}),
        )
        .await;
    assert_eq!(r.status(), 422);
    let p: Value = r.json().await.unwrap();
    let fields: HashSet<(String, String)> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap().to_string(),
                e["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        fields.contains(&("/values/email".into(), "invalid_email".into())),
        "{fields:?}"
    );
    assert!(
        fields.contains(&("/values/team_size".into(), "too_large".into())),
        "{fields:?}"
    );
    assert!(
        app.events(&bot).await.is_empty(),
        "nothing stored after a 422"
    );

    let r = app
        .submit(
            &conv,
            mid,
            "callback",
            json!({"email": "a@b.co", "team_size": "7", "consent": "on"}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let ev = rx.take(1, WAIT).await.remove(0).json();
    assert_eq!(
        ev["values"],
        json!({"email": "a@b.co", "team_size": 7, "consent": true})
    );
}

#[actix_web::test]
async fn retries_send_identical_bytes_and_keep_conversation_order() {
    let app = spawn_app_pg().await;
    let mut rx = Receiver::start_with(vec![Answer::status(500), Answer::status(500)]).await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, false).await;
    let mid = msg["id"].as_str().unwrap();
    assert_eq!(app.click(&conv, mid, "b1", "approve").await.status(), 200);
    assert_eq!(app.click(&conv, mid, "b1", "deny").await.status(), 200);

    let got = rx.take(4, WAIT).await;
    let attempts: Vec<_> = got
        .iter()
        .map(|r| r.header("x-myaichatbot-attempt").unwrap().to_string())
        .collect();
    assert_eq!(attempts, ["1", "2", "3", "1"]);
    assert_eq!(got[0].body, got[1].body);
    assert_eq!(got[1].body, got[2].body);
    assert_eq!(got[2].json()["action_id"], "approve");
    assert_eq!(
        got[3].json()["action_id"],
        "deny",
        "the second click waits for the first"
    );
}

#[actix_web::test]
async fn dead_delivery_is_redelivered_with_the_same_event_id() {
    let app = spawn_app_pg_with(|c| c.retry_max_attempts = 2).await;
    let mut rx = Receiver::start_with(vec![Answer::status(500), Answer::status(500)]).await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    assert_eq!(
        app.click(&conv, msg["id"].as_str().unwrap(), "b1", "approve")
            .await
            .status(),
        200
    );
    let first = rx.take(2, WAIT).await;
    let id = first[0].header("webhook-id").unwrap().to_string();
    let e = app
        .wait_event(&bot, &id, WAIT, |e| e["status"] == "dead")
        .await;
    assert_eq!(e["status"], "dead");

    let r = app
        .post(
            &format!("/api/v1/events/{id}/redeliver"),
            &bot.api_key,
            &json!({}),
        )
        .await;
    assert_eq!(r.status(), 202);
    let again = rx.take(1, WAIT).await.remove(0);
    assert_eq!(again.header("webhook-id"), Some(id.as_str()));
    assert_eq!(again.body, first[0].body);
    assert_eq!(again.header("x-myaichatbot-attempt"), Some("3"));
}

#[actix_web::test]
async fn response_url_replaces_the_message() {
    let app = spawn_app_pg().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let mid = msg["id"].as_str().unwrap();
    app.click(&conv, mid, "b1", "approve").await;
    let ev = rx.take(1, WAIT).await.remove(0).json();
    let url = ev["response_url"].as_str().unwrap();
    let r = app
        .client
        .post(url)
        .json(&json!({"text": "Approved."}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["message"]["id"], mid);
    assert_eq!(v["message"]["text"], "Approved.");
}

/// Two instances on one database: every event is delivered, in order per
/// conversation.
#[actix_web::test]
async fn two_instances_share_the_queue() {
    let url = fresh_postgres_database().await;
    let u2 = url.clone();
    let a = spawn_app_with(|c| c.database = blockhook::config::Database::Postgres(url)).await;
    let b = spawn_app_with(|c| c.database = blockhook::config::Database::Postgres(u2)).await;
    let mut rx = Receiver::start().await;
    let bot = a.create_bot(&rx.url).await;
    let mut convs = Vec::new();
    for _ in 0..4 {
        let c = a.create_conv(&bot).await;
        let m = a.buttons(&bot, &c, false).await;
        convs.push((c, m["id"].as_str().unwrap().to_string()));
    }
    for round in 0..5 {
        for (i, (c, m)) in convs.iter().enumerate() {
            let app = if (i + round) % 2 == 0 { &a } else { &b };
            let action = if round % 2 == 0 { "approve" } else { "deny" };
            assert_eq!(app.click(c, m, "b1", action).await.status(), 200);
        }
    }
    let got = rx.take(20, WAIT).await;
    let ids: HashSet<_> = got
        .iter()
        .map(|r| r.header("webhook-id").unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 20, "every event exactly once here");
    for (c, _) in &convs {
        let actions: Vec<_> = got
            .iter()
            .map(|r| r.json())
            .filter(|e| e["conversation_id"] == c.id.as_str())
            .map(|e| e["action_id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(actions, ["approve", "deny", "approve", "deny", "approve"]);
    }
}

/// Many conversations clicked at once: the delivery bookkeeping arrives in
/// batches of several attempts (a few failed and retried, most succeeded),
/// written set-wise. Every event arrives, each conversation's in click
/// order, and each ends succeeded with its attempts counted.
#[actix_web::test]
async fn a_burst_over_many_conversations_is_recorded_in_order() {
    use crate::delivery::{click_ok, event_ids_in_order, reusable_buttons, webhook_id};

    const CONVS: usize = 8;
    const CLICKS: usize = 5;
    const FAILS: usize = 6;
    let app = spawn_app_pg_with(retry_delays(
        Duration::from_millis(50),
        Duration::from_millis(100),
    ))
    .await;
    let mut rx = Receiver::start_with((0..FAILS).map(|_| Answer::status(500)).collect()).await;
    let bot = app.create_bot(&rx.url).await;
    let mut convs = Vec::new();
    for _ in 0..CONVS {
        let c = app.create_conv(&bot).await;
        let m = reusable_buttons(&app, &bot, &c).await;
        convs.push((c, m));
    }
    // Each conversation clicks in turn; the conversations all at once.
    futures_util::future::join_all(convs.iter().map(|(c, m)| async {
        for _ in 0..CLICKS {
            click_ok(&app, c, m).await;
        }
    }))
    .await;

    let got = rx.take(CONVS * CLICKS + FAILS, WAIT).await;
    assert_eq!(got.len(), CONVS * CLICKS + FAILS);
    let ids = event_ids_in_order(&app, &bot).await;
    assert_eq!(ids.len(), CONVS * CLICKS);
    let rank: std::collections::HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    for (c, _) in &convs {
        // A retried event arrives again before the next one of its
        // conversation, never after it.
        let arrivals: Vec<usize> = got
            .iter()
            .filter(|r| r.json()["conversation_id"] == c.id.as_str())
            .map(|r| rank[webhook_id(r).as_str()])
            .collect();
        assert!(
            arrivals.windows(2).all(|w| w[0] <= w[1]),
            "conversation {} out of order: {arrivals:?}",
            c.id
        );
        let distinct: HashSet<usize> = arrivals.iter().copied().collect();
        assert_eq!(distinct.len(), CLICKS, "{arrivals:?}");
    }
    let mut attempts = 0;
    for id in &ids {
        let e = app
            .wait_event(&bot, id, WAIT, |e| e["status"] == "succeeded")
            .await;
        assert_eq!(e["status"], "succeeded", "{e}");
        let log = e["attempts"].as_array().expect("attempt log");
        assert_eq!(e["attempt_count"], log.len(), "{e}");
        assert_eq!(
            log.last().map(|a| &a["status_code"]),
            Some(&json!(200)),
            "{e}"
        );
        attempts += log.len();
    }
    assert_eq!(attempts, CONVS * CLICKS + FAILS);
    assert!(
        rx.next(Duration::from_millis(300)).await.is_none(),
        "nothing delivered twice"
    );
}

/// A server on a fresh database (its migrations run), and a connection of
/// the test's own to that database.
pub(crate) async fn migrated_database() -> (TestApp, sqlx::PgConnection) {
    use blockhook::config::Database;
    use sqlx::Connection;
    let url = fresh_postgres_database().await;
    let u = url.clone();
    let app = spawn_app_with(move |c| c.database = Database::Postgres(u)).await;
    let conn = sqlx::PgConnection::connect(&url).await.unwrap();
    (app, conn)
}

/// A page of the retention purge is read from the index where the last
/// page ended (`conversations_by_age_id`), never by sorting every
/// conversation that shares a `created_at`. Sequential scans are turned
/// off so that the small table of a test plans as a large one would.
#[actix_web::test]
async fn a_purge_page_is_read_in_index_order_without_a_sort() {
    let (_app, mut conn) = migrated_database().await;
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(&format!(
        "EXPLAIN {}",
        blockhook::store::postgres::PURGE_PAGE
    ))
    .bind("cb")
    .bind(0_i64)
    .bind(0_i64)
    .bind("")
    .bind(100_i64)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let plan = plan.join(" / ");
    assert!(plan.contains("conversations_by_age_id"), "{plan}");
    assert!(!plan.contains("Sort"), "{plan}");
}

/// Whether a batch's event heads its conversation is one index probe per
/// event, even where the statistics were taken when almost nothing was
/// waiting (a large store analysed before a receiver went down): then a
/// correlated `NOT EXISTS` was planned as a hash of every waiting event,
/// read in full for each batch.
#[actix_web::test]
async fn a_click_batch_probes_its_conversations_heads_whatever_the_statistics() {
    let (_app, mut conn) = migrated_database().await;
    let events = |status: &str, prefix: &str, n: i64, convs: i64| {
        format!(
            "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head)
             SELECT '{prefix}' || i, 'cb_x', 'conv_{prefix}' || (i % {convs}), 'interaction.button_clicked', '\\x7b7d', 0, '{status}', 0, 0, 0
             FROM generate_series(1, {n}) i"
        )
    };
    sqlx::raw_sql(&events("succeeded", "evt_old_", 20_000, 10_000))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::raw_sql("ANALYZE events")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::raw_sql(&events("pending", "evt_wait_", 5_000, 50))
        .execute(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(&format!(
        "EXPLAIN {}",
        blockhook::store::postgres::click_batch_events_sql()
    ))
    .bind(vec!["evt_a", "evt_b"])
    .bind(vec!["cb_x", "cb_x"])
    .bind(vec!["conv_evt_wait_1", "conv_fresh"])
    .bind(vec!["interaction.button_clicked"; 2])
    .bind(vec![b"{}".to_vec(); 2])
    .bind(vec![1_i64, 1])
    .bind(vec![0_i64, 0])
    .bind(vec![None::<String>, None])
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("Index Cond: (conversation_id = u.conv)"),
        "{plan}"
    );
}

/// The router takes a routed event off its queue (`unrouted_events`)
/// without updating the event's row, which keeps `routed` as it was
/// inserted; an event erased while queued leaves the queue with it.
#[actix_web::test]
async fn routing_takes_an_event_off_its_queue_without_updating_the_event() {
    use crate::delivery::fanout::{add_endpoint, count, wait_count};
    use crate::delivery::{click_ok, reusable_buttons};
    let (app, mut conn) = migrated_database().await;
    let main = Receiver::start().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, &rx.url, None, None, true).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    let routed = format!(
        "SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'",
        ep.id
    );
    wait_count(&app, &routed, 1, WAIT, "routed").await;
    assert_eq!(count(&app, "SELECT count(*) FROM unrouted_events").await, 0);
    assert_eq!(
        count(&app, "SELECT count(*) FROM events WHERE routed = 0").await,
        1,
        "the event's row is as it was inserted"
    );

    // Erased while queued (in one transaction, so no router sees it): the
    // erasure's statements take it off the queue.
    let conv_id: String = sqlx::query_scalar("SELECT conversation_id FROM events")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    sqlx::query("INSERT INTO unrouted_events (seq) SELECT seq FROM events")
        .execute(&mut *tx)
        .await
        .unwrap();
    for q in blockhook::store::postgres::ERASE_CONVERSATIONS {
        sqlx::query(q)
            .bind(vec![conv_id.clone()])
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM unrouted_events")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(left, 0, "an erased event leaves the router's queue");
    tx.rollback().await.unwrap();
}
