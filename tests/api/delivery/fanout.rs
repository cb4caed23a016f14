//! §13 fan-out over real HTTP: several endpoints per chatbot, each with
//! its own filter, secret, order, health and rate limit, on both stores.
//! Endpoints are written straight into the store's `endpoints` table (the
//! routes that manage them are tested with them).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::json;

use super::signatures::reference_verifies;
use super::{click_ok, reusable_buttons, webhook_id};
use crate::helpers::{
    Answer, Bot, Receiver, TestApp, open_store, retry_delays, spawn_app_with, verify_signature,
};

/// Runs statements on the store `app` runs on, as another process would.
pub async fn sql(app: &TestApp, stmts: &[String]) {
    match &app.database {
        blockhook::config::Database::Sqlite(p) => {
            let c = rusqlite::Connection::open(p).expect("open SQLite");
            c.busy_timeout(Duration::from_secs(10)).expect("busy");
            for s in stmts {
                c.execute_batch(s).expect("statement");
            }
        }
        blockhook::config::Database::Postgres(u) => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(u).await.expect("connect");
            for s in stmts {
                sqlx::query(s).execute(&mut c).await.expect("statement");
            }
        }
    }
}

/// One integer a query returns.
pub async fn count(app: &TestApp, q: &str) -> i64 {
    match &app.database {
        blockhook::config::Database::Sqlite(p) => {
            let c = rusqlite::Connection::open(p).expect("open SQLite");
            c.query_row(q, [], |r| r.get(0)).expect("query")
        }
        blockhook::config::Database::Postgres(u) => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(u).await.expect("connect");
            sqlx::query_scalar(q)
                .fetch_one(&mut c)
                .await
                .expect("query")
        }
    }
}

/// One click in each of `n` new conversations of `bot`.
async fn click_in_new_conversations(app: &TestApp, bot: &Bot, n: usize) {
    for _ in 0..n {
        let conv = app.create_conv(bot).await;
        let mid = reusable_buttons(app, bot, &conv).await;
        click_ok(app, &conv, &mid).await;
    }
}

/// Waits until `q` (one integer) reaches `n`; fails with `what` after `within`.
pub async fn wait_count(app: &TestApp, q: &str, n: i64, within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while count(app, q).await < n {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An endpoint other than the default, as stored.
pub struct Ep {
    pub id: String,
    pub secret: String,
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// A fresh `whsec_` secret (24 random bytes).
fn secret() -> String {
    use base64::Engine;
    let bytes: [u8; 24] = rand::random();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// Adds an endpoint to `bot`: `filter` a JSON object or `None`,
/// `extra` more `column = value` settings.
pub async fn add_endpoint(
    app: &TestApp,
    bot: &Bot,
    url: &str,
    filter: Option<serde_json::Value>,
    rate_limit: Option<&str>,
    enabled: bool,
) -> Ep {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let id = format!("ep_TEST{n:022}");
    let secret = secret();
    let q = |s: Option<String>| s.map_or("NULL".to_string(), |s| format!("'{s}'"));
    let now = blockhook::domain::time::now_ms() - 1000;
    sql(
        app,
        &[format!(
            "INSERT INTO endpoints (id, chatbot_id, is_default, url, event_types, filter, replies, rate_limit, headers,
               enabled, disabled_reason, signing_secret, created_at, updated_at)
             VALUES ('{id}', '{}', 0, '{url}', NULL, {}, 0, {}, '{{\"x-team\":\"{id}\"}}', {}, {}, '{secret}', {now}, {now})",
            bot.id,
            q(filter.map(|f| f.to_string())),
            q(rate_limit.map(str::to_string)),
            enabled as i64,
            if enabled { "NULL" } else { "'paused'" },
        )],
    )
    .await;
    Ep { id, secret }
}

pub async fn set_enabled(app: &TestApp, ep: &Ep, on: bool) {
    let reason = if on { "NULL" } else { "'paused'" };
    sql(
        app,
        &[format!(
            "UPDATE endpoints SET enabled = {}, disabled_reason = {reason} WHERE id = '{}'",
            on as i64, ep.id
        )],
    )
    .await;
}

/// A message with buttons `approve` and `reject` that stay clickable.
pub(super) async fn two_buttons(app: &TestApp, bot: &Bot, conv: &crate::helpers::Conv) -> String {
    let m = app
        .bot_message(
            bot,
            conv,
            json!({"text": "Choose", "blocks": [{"type": "actions", "block_id": "b1", "disable_on_click": false, "elements": [
                {"type": "button", "action_id": "approve", "label": "Approve", "value": "yes"},
                {"type": "button", "action_id": "reject", "label": "Reject", "value": "no"}
            ]}]}),
        )
        .await;
    m["id"].as_str().expect("message id").to_string()
}

pub(super) async fn click(app: &TestApp, conv: &crate::helpers::Conv, mid: &str, action: &str) {
    let r = app.click(conv, mid, "b1", action).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
}

/// The events of `bot`, by id, with their payloads.
async fn accepted(app: &TestApp, bot: &Bot) -> HashMap<String, serde_json::Value> {
    app.events(bot)
        .await
        .into_iter()
        .map(|e| (e["event_id"].as_str().expect("id").to_string(), e))
        .collect()
}

fn fast() -> impl FnOnce(&mut blockhook::config::Config) {
    retry_delays(Duration::from_millis(50), Duration::from_millis(200))
}

/// Waits until `rx` holds nothing new for `quiet`.
async fn settle(rx: &mut Receiver, quiet: Duration) -> Vec<crate::helpers::Received> {
    let mut out = Vec::new();
    while let Some(r) = rx.next(quiet).await {
        out.push(r);
    }
    out
}

store_test! {
async fn each_endpoint_gets_exactly_its_matching_events_signed_with_its_own_secret() {
    let app = spawn_app_with(fast()).await;
    let mut main = Receiver::start().await;
    let mut all = Receiver::start().await;
    let mut approvals = Receiver::start().await;
    let mut forms = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep_all = add_endpoint(&app, &bot, &all.url, None, None, true).await;
    let ep_yes = add_endpoint(&app, &bot, &approvals.url, Some(json!({"action_id": ["approve"]})), None, true).await;
    let ep_forms = add_endpoint(&app, &bot, &forms.url, Some(json!({"values.topic": ["billing"]})), None, true).await;
    let conv = app.create_conv(&bot).await;
    let mid = two_buttons(&app, &bot, &conv).await;
    for action in ["approve", "reject", "approve", "reject", "reject"] {
        click(&app, &conv, &mid, action).await;
    }
    let by_default = main.take(5, Duration::from_secs(20)).await;
    let to_all = all.take(5, Duration::from_secs(20)).await;
    let to_yes = approvals.take(2, Duration::from_secs(20)).await;
    assert!(settle(&mut approvals, Duration::from_millis(700)).await.is_empty(), "only approvals");
    assert!(settle(&mut forms, Duration::from_millis(100)).await.is_empty(), "no form was submitted");

    let events = accepted(&app, &bot).await;
    assert_eq!(events.len(), 5);
    let original: HashMap<String, bytes::Bytes> =
        by_default.iter().map(|r| (webhook_id(r), r.body.clone())).collect();
    for r in &to_all {
        assert_eq!(original.get(&webhook_id(r)), Some(&r.body), "same webhook-id, same bytes");
        assert!(verify_signature(&ep_all.secret, r));
        assert!(reference_verifies(&ep_all.secret, r));
        assert!(!verify_signature(&bot.signing_secret, r), "not the default's secret");
        assert_eq!(r.header("x-team"), Some(ep_all.id.as_str()), "its own headers");
    }
    for r in &to_yes {
        assert_eq!(original.get(&webhook_id(r)), Some(&r.body));
        assert_eq!(r.json()["action_id"], "approve");
        assert!(reference_verifies(&ep_yes.secret, r));
        assert!(!verify_signature(&ep_all.secret, r));
    }
    for r in &by_default {
        assert!(verify_signature(&bot.signing_secret, r));
        assert_eq!(r.header("x-team"), None);
    }
    let _ = ep_forms;
}
}

store_test! {
async fn a_failing_and_a_paused_endpoint_do_not_delay_a_healthy_one() {
    let app = spawn_app_with(fast()).await;
    let main = Receiver::start().await;
    let failing = Receiver::start().await;
    failing.set_default(Answer::status(500));
    let mut healthy = Receiver::start().await;
    let paused_rx = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    add_endpoint(&app, &bot, &failing.url, None, None, true).await;
    let paused = add_endpoint(&app, &bot, &paused_rx.url, None, None, false).await;
    add_endpoint(&app, &bot, &healthy.url, None, None, true).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    let started = Instant::now();
    for _ in 0..10 {
        click_ok(&app, &conv, &mid).await;
    }
    let got = healthy.take(10, Duration::from_secs(10)).await;
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    assert_eq!(got.len(), 10);
    let deadline = Instant::now() + Duration::from_secs(5);
    while failing.all().len() < 2 {
        assert!(Instant::now() < deadline, "the failing endpoint is retried");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(paused_rx.all().is_empty(), "nothing goes to a paused endpoint");
    assert_eq!(
        count(&app, &format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}' AND status = 'pending'", paused.id)).await,
        10,
        "its deliveries wait"
    );
}
}

store_test! {
async fn a_paused_endpoints_deliveries_go_out_oldest_first_in_each_conversations_order() {
    let app = spawn_app_with(fast()).await;
    let main = Receiver::start().await;
    let mut later = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, &later.url, None, None, false).await;
    let mut convs = Vec::new();
    for _ in 0..3 {
        let conv = app.create_conv(&bot).await;
        let mid = reusable_buttons(&app, &bot, &conv).await;
        convs.push((conv, mid));
    }
    for _ in 0..4 {
        for (conv, mid) in &convs {
            click_ok(&app, conv, mid).await;
        }
    }
    // Accepted order: the events log lists the newest first.
    let mut order: Vec<String> = app.events(&bot).await.iter()
        .map(|e| e["event_id"].as_str().expect("id").to_string()).collect();
    order.reverse();
    let routed = format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'", ep.id);
    wait_count(&app, &routed, 12, Duration::from_secs(10), "routed while paused").await;
    assert!(later.all().is_empty());
    set_enabled(&app, &ep, true).await;
    let got = later.take(12, Duration::from_secs(10)).await;
    let ids: Vec<String> = got.iter().map(webhook_id).collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 12, "each once");
    // Each conversation's events arrive in the order they were accepted.
    for (conv, _) in &convs {
        let received: Vec<String> = got.iter()
            .filter(|r| r.json()["conversation_id"] == conv.id.as_str())
            .map(webhook_id).collect();
        let accepted_order: Vec<String> = order.iter()
            .filter(|id| received.contains(id)).cloned().collect();
        assert_eq!(received.len(), 4);
        assert_eq!(received, accepted_order, "conversation order kept");
    }
    let got = ids;
    // Oldest first: the first delivered was the first accepted.
    assert_eq!(got[0], order[0]);
}
}

store_test! {
async fn a_410_marks_the_endpoint_gone_and_its_deliveries_wait() {
    let app = spawn_app_with(fast()).await;
    let mut main = Receiver::start().await;
    let gone_rx = Receiver::start().await;
    gone_rx.set_default(Answer::status(410));
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, &gone_rx.url, None, None, true).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    click_ok(&app, &conv, &mid).await;
    main.take(2, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&app, &format!("SELECT count(*) FROM endpoints WHERE id = '{}' AND enabled = 0 AND disabled_reason = 'gone'", ep.id)).await != 1 {
        assert!(Instant::now() < deadline, "the endpoint is gone");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(gone_rx.all().len(), 1, "no more tries once gone");
    assert_eq!(
        count(&app, &format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}' AND status IN ('pending', 'failed')", ep.id)).await,
        2,
        "both wait"
    );
    // Enabled again, both go out.
    gone_rx.set_default(Answer::status(200));
    set_enabled(&app, &ep, true).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while gone_rx.all().len() < 3 {
        assert!(Instant::now() < deadline, "the waiting deliveries go out");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
}

store_test! {
async fn the_rate_limit_is_respected_and_nothing_is_dropped() {
    let app = spawn_app_with(fast()).await;
    let main = Receiver::start().await;
    let mut limited = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    add_endpoint(&app, &bot, &limited.url, None, Some("2/s"), true).await;
    let mut convs = Vec::new();
    for _ in 0..6 {
        let conv = app.create_conv(&bot).await;
        let mid = reusable_buttons(&app, &bot, &conv).await;
        convs.push((conv, mid));
    }
    for (conv, mid) in &convs {
        click_ok(&app, conv, mid).await;
    }
    let got = limited.take(6, Duration::from_secs(15)).await;
    for w in got.windows(3) {
        let span = w[2].at.duration_since(w[0].at);
        assert!(span >= Duration::from_millis(950), "3 within {span:?}");
    }
    let ids: HashSet<String> = got.iter().map(webhook_id).collect();
    assert_eq!(ids.len(), 6, "each once");
}
}

store_test! {
async fn deleting_an_endpoint_drops_its_pending_deliveries() {
    let app = spawn_app_with(fast()).await;
    let main = Receiver::start().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, &rx.url, None, None, false).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    for _ in 0..3 {
        click_ok(&app, &conv, &mid).await;
    }
    let q = format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'", ep.id);
    wait_count(&app, &q, 3, Duration::from_secs(10), "routed").await;
    let r = app
        .client
        .delete(app.url(&format!("/api/v1/endpoints/{}", ep.id)))
        .bearer_auth(&bot.api_key)
        .send()
        .await
        .expect("delete");
    assert_eq!(r.status(), 204);
    assert_eq!(count(&app, &q).await, 0);
}
}

store_test! {
async fn held_deliveries_past_max_hold_end_dead_and_the_next_one_of_their_conversation_goes_out() {
    let app = spawn_app_with(|c| {
        fast()(c);
        c.max_hold = Duration::from_secs(4);
    })
    .await;
    let main = Receiver::start().await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, &rx.url, None, None, false).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    // Routed one after the other: the third waits behind the first.
    let q = format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'", ep.id);
    for n in 1..=3 {
        click_ok(&app, &conv, &mid).await;
        wait_count(&app, &q, n, Duration::from_secs(10), "routed while paused").await;
    }
    // The two oldest held for an hour, the newest made in an hour's time:
    // the next check ends the two, and the third is its pair's head then.
    sql(
        &app,
        &[
            format!(
                "UPDATE deliveries SET created_at = created_at - 3600000 WHERE endpoint_id = '{0}'
                   AND seq < (SELECT max(seq) FROM deliveries WHERE endpoint_id = '{0}')",
                ep.id
            ),
            format!(
                "UPDATE deliveries SET created_at = created_at + 3600000 WHERE endpoint_id = '{0}'
                   AND seq = (SELECT max(seq) FROM deliveries WHERE endpoint_id = '{0}')",
                ep.id
            ),
        ],
    )
    .await;
    let dead = format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}' AND status = 'dead'", ep.id);
    wait_count(&app, &dead, 2, Duration::from_secs(15), "held past max-hold: dead").await;
    let mut order: Vec<String> = app.events(&bot).await.iter()
        .map(|e| e["event_id"].as_str().expect("id").to_string()).collect();
    order.reverse();
    assert_eq!(order.len(), 3);

    // Enabled: the newest goes out, not stuck behind the two that ended.
    set_enabled(&app, &ep, true).await;
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(webhook_id(&got[0]), order[2]);
    assert!(rx.next(Duration::from_millis(500)).await.is_none(), "an ended delivery was sent");

    // A redelivered one goes out again.
    let r = app
        .client
        .post(app.url(&format!("/api/v1/events/{}/redeliver", order[0])))
        .bearer_auth(&bot.api_key)
        .json(&json!({"endpoint_id": ep.id}))
        .send()
        .await
        .expect("redeliver");
    assert!(r.status().is_success(), "{}", r.status());
    let got = rx.take(1, Duration::from_secs(10)).await;
    assert_eq!(webhook_id(&got[0]), order[0]);
}
}

store_test! {
async fn a_claim_takes_no_more_from_an_endpoint_than_its_room() {
    use blockhook::store::fanout::Rooms;
    // One delivery at a time to the endpoint, and it hangs: the app holds
    // one leased and claims no more while it waits.
    let app = spawn_app_with(|c| {
        fast()(c);
        c.endpoint_concurrency = 1;
    })
    .await;
    let main = Receiver::start().await;
    let slow = Receiver::start_with(vec![Answer::status(200).delay(Duration::from_secs(30))]).await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, &slow.url, None, None, true).await;
    click_in_new_conversations(&app, &bot, 4).await;
    let leased = format!(
        "SELECT count(*) FROM deliveries WHERE endpoint_id = '{}' AND leased_until > 0",
        ep.id
    );
    let all = format!("SELECT count(*) FROM deliveries WHERE endpoint_id = '{}'", ep.id);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&app, &all).await < 4 || count(&app, &leased).await < 1 {
        assert!(Instant::now() < deadline, "routed, and one on the wire");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Three heads are due (one per conversation); each claim takes no more
    // than the room it is given for this endpoint.
    let store = open_store(&app).await;
    let now = blockhook::domain::time::now_ms();
    let lease = now + 60_000;
    let ask = |room: Rooms| blockhook::store::ClaimAsk { now_ms: now, lease_until: lease, limit: 10, room };
    let room = |n: i64| Rooms {
        named: vec![(blockhook::domain::ids::EndpointId::stored(ep.id.clone()), n)],
        others: 32,
    };
    assert!(store.claim_deliveries(ask(room(0))).await.expect("claim").is_empty());
    let one = store.claim_deliveries(ask(room(1))).await.expect("claim");
    assert_eq!(one.len(), 1);
    let rest = store
        .claim_deliveries(ask(Rooms { named: vec![], others: 5 }))
        .await
        .expect("claim");
    assert_eq!(rest.len(), 2, "the two heads left, when the room is larger");
    assert!(rest.iter().all(|d| d.endpoint_id == ep.id && d.claim.seq != one[0].claim.seq));
    assert_eq!(count(&app, &leased).await, 4);
}
}

store_test! {
/// An attempt whose delivery was deleted (with its endpoint or its event)
/// while it was on the wire records nothing, and the rest of its batch is
/// recorded.
async fn an_attempt_on_a_delivery_deleted_on_the_wire_records_nothing_and_its_batch_goes_on() {
    use blockhook::domain::ids::{ConversationId, EndpointId, EventId};
    use blockhook::store::{AttemptNext, AttemptRecord, fanout::DeliveryRecord};
    let app = spawn_app_with(fast()).await;
    let main = Receiver::start().await;
    let hold = Answer::status(200).delay(Duration::from_secs(30));
    let slow = Receiver::start_with(vec![hold.clone(), hold]).await;
    let bot = app.create_bot(&main.url).await;
    let ep = add_endpoint(&app, &bot, &slow.url, None, None, true).await;
    click_in_new_conversations(&app, &bot, 2).await;
    let of_ep = format!("FROM deliveries WHERE endpoint_id = '{}'", ep.id);
    let leased = format!("SELECT count(*) {of_ep} AND leased_until > 0");
    wait_count(&app, &leased, 2, Duration::from_secs(10), "both on the wire").await;
    let gone = count(&app, &format!("SELECT min(seq) {of_ep}")).await;
    let kept = count(&app, &format!("SELECT max(seq) {of_ep}")).await;
    sql(&app, &[format!("DELETE FROM deliveries WHERE seq = {gone}")]).await;
    let record = |seq: i64| DeliveryRecord {
        endpoint_id: EndpointId::stored(ep.id.clone()),
        rec: AttemptRecord {
            event_id: EventId::stored(format!("evt_{seq}")),
            seq,
            conversation_id: ConversationId::stored(format!("conv_{seq}")),
            number: 1,
            at_ms: blockhook::domain::time::now_ms(),
            status_code: Some(200),
            duration_ms: 3,
            error: None,
            response_excerpt: None,
            request_headers: None,
            next: AttemptNext::Succeeded,
        },
    };
    let store = open_store(&app).await;
    store
        .record_delivery_attempts(vec![record(gone), record(kept)])
        .await
        .expect("recorded");
    let attempts = |seq: i64| format!("SELECT count(*) FROM delivery_attempts WHERE delivery_seq = {seq}");
    assert_eq!(count(&app, &attempts(gone)).await, 0, "nothing for the deleted one");
    assert_eq!(count(&app, &attempts(kept)).await, 1);
    assert_eq!(
        count(&app, &format!("SELECT count(*) {of_ep} AND status = 'succeeded'")).await,
        1
    );
}
}
