//! The fan-out on a real SQLite file: routing in the insert's commit, and
//! the due heads listed for claims.

use super::*;
use crate::domain::ids::{ConversationId, EventId};
use std::time::Duration;

fn event(id: &str, payload: &str) -> NewEvent {
    NewEvent {
        id: EventId::stored(id),
        chatbot_id: ChatbotId::stored("cb_1"),
        conversation_id: ConversationId::stored("conv_1"),
        event_type: "interaction.button_clicked",
        payload: payload.as_bytes().to_vec(),
        created_at: 100,
        trace: None,
    }
}

/// No router runs here: the deliveries are there once the insert's
/// batch is committed, and the fan-out has been woken.
#[tokio::test]
async fn an_event_is_routed_in_the_commit_that_stores_it() {
    let hub = Arc::new(crate::hub::Hub::new());
    let (_dir, store) = super::super::queue::tests::store_with_chatbot("r.db", hub.clone()).await;
    store
        .write(|c| {
            let mut st = c.prepare(
                "INSERT INTO endpoints (id, chatbot_id, is_default, url, filter, replies, signing_secret, created_at, updated_at)
                 VALUES (?1, 'cb_1', 0, 'http://127.0.0.1:9/x', ?2, 1, 'whsec_y', ?3, ?3)",
            )?;
            st.execute(params!["ep_all", None::<String>, 10])?;
            st.execute(params!["ep_yes", Some(r#"{"action_id":["yes"]}"#), 10])?;
            st.execute(params!["ep_late", None::<String>, 500])?;
            Ok(())
        })
        .await
        .expect("endpoints");
    store
        .enqueue_event(event("evt_yes", r#"{"action_id":"yes"}"#))
        .await
        .expect("event");
    store
        .enqueue_event(event("evt_no", r#"{"action_id":"no"}"#))
        .await
        .expect("event");
    let got: Vec<(String, String, bool)> = store
        .read(|c| {
            c.prepare("SELECT event_id, endpoint_id, is_head FROM deliveries ORDER BY seq")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .expect("deliveries");
    let want = [
        ("evt_yes", "ep_all", true),
        ("evt_yes", "ep_yes", true),
        ("evt_no", "ep_all", false),
    ]
    .map(|(e, p, h)| (e.to_string(), p.to_string(), h));
    assert_eq!(got, want);
    assert!(store.unrouted(10).await.expect("unrouted").is_empty());
    tokio::time::timeout(Duration::from_secs(5), hub.deliveries.notified())
        .await
        .expect("the fan-out is woken once the batch is on disk");
}

fn claim_ask(now: i64, room: Rooms) -> ClaimAsk<Rooms> {
    ClaimAsk {
        now_ms: now,
        lease_until: now + 60_000,
        limit: 64,
        room,
    }
}

fn open_rooms() -> Rooms {
    Rooms {
        named: vec![],
        others: 32,
    }
}

async fn add_endpoints(store: &SqliteStore, ids: &[&'static str]) {
    let ids: Vec<&'static str> = ids.to_vec();
    store
        .write(move |c| {
            let mut st = c.prepare(
                "INSERT INTO endpoints (id, chatbot_id, is_default, url, replies, signing_secret, created_at, updated_at)
                 VALUES (?1, 'cb_1', 0, 'http://127.0.0.1:9/x', 1, 'whsec_y', 10, 10)",
            )?;
            for id in ids {
                st.execute([id])?;
            }
            Ok(())
        })
        .await
        .expect("endpoints");
}

/// A store on a fresh file with chatbot `cb_1` and, beside its default,
/// the endpoints `ids`.
async fn store_with_endpoints(
    file: &str,
    ids: &[&'static str],
) -> (tempfile::TempDir, SqliteStore) {
    let hub = Arc::new(crate::hub::Hub::new());
    let (dir, store) = super::super::queue::tests::store_with_chatbot(file, hub).await;
    add_endpoints(&store, ids).await;
    (dir, store)
}

/// After a read of the table that found nothing, the next read is a
/// second away: a head routed meanwhile is claimed at once only if its
/// commit listed it.
#[tokio::test]
async fn a_routed_head_is_listed_by_its_commit_and_claimed_from_the_list() {
    let (_dir, store) = store_with_endpoints("l.db", &["ep_all"]).await;
    let now = crate::domain::time::now_ms();
    assert!(
        store
            .claim_deliveries(claim_ask(now, open_rooms()))
            .await
            .expect("claim")
            .is_empty()
    );
    assert!(!store.claims.lock().deliveries.scan_due(now + 1));
    let mut e = event("evt_1", r#"{"action_id":"yes"}"#);
    e.created_at = now;
    store.enqueue_event(e).await.expect("event");
    let got = store
        .claim_deliveries(claim_ask(now + 1, open_rooms()))
        .await
        .expect("claim");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].endpoint_id.as_str(), "ep_all");
    assert_eq!(got[0].claim.event_id.as_str(), "evt_1");
}

/// More due heads of one endpoint than a read lists, and that endpoint
/// has no room: the other endpoint's head is still found and claimed.
#[tokio::test]
async fn one_endpoints_backlog_does_not_hide_anothers_heads() {
    let (_dir, store) = store_with_endpoints("b.db", &["ep_a", "ep_b"]).await;
    let backlog = SCAN_ROWS as i64 + 10;
    store
        .write(move |c| {
            // Each delivery's event (delivered to the default endpoint).
            let mut ev = c.prepare(
                "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head, routed)
                 VALUES (?1, 'cb_1', ?2, 'interaction.button_clicked', X'7B7D', ?3, 'succeeded', 1, 0, 0, 1)",
            )?;
            let mut st = c.prepare(
                "INSERT INTO deliveries (event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at, is_head)
                 VALUES (?1, ?2, ?3, 'cb_1', ?4, 'pending', ?5, ?5, 1)",
            )?;
            for i in 0..=backlog {
                let (ep, conv) = if i < backlog {
                    ("ep_a", format!("conv_{i}"))
                } else {
                    ("ep_b", "conv_b".to_string())
                };
                let id = format!("evt_{i}");
                ev.execute(params![id, conv, 10 + i])?;
                st.execute(params![c.last_insert_rowid(), id, ep, conv, 10 + i])?;
            }
            Ok(())
        })
        .await
        .expect("backlog");
    let room = Rooms {
        named: vec![(EndpointId::stored("ep_a"), 0)],
        others: 32,
    };
    let now = crate::domain::time::now_ms();
    let got = store
        .claim_deliveries(claim_ask(now, room))
        .await
        .expect("claim");
    let to: Vec<&str> = got.iter().map(|d| d.endpoint_id.as_str()).collect();
    assert_eq!(to, ["ep_b"]);
}

/// A head of a paused endpoint is dropped from the list by the claim that
/// finds it paused; enabling the endpoint has the next claim read the
/// table, well before the next read the clock would bring.
#[tokio::test]
async fn an_endpoint_enabled_again_has_its_heads_read_from_the_table() {
    let (_dir, store) = store_with_endpoints("p.db", &["ep_p"]).await;
    store
        .write(|c| {
            c.execute(
                "UPDATE endpoints SET enabled = 0, disabled_reason = 'paused' WHERE id = 'ep_p'",
                [],
            )?;
            Ok(())
        })
        .await
        .expect("paused");
    let now = crate::domain::time::now_ms();
    let claim = || store.claim_deliveries(claim_ask(now, open_rooms()));
    assert!(claim().await.expect("claim").is_empty());
    let mut e = event("evt_p", r#"{"action_id":"yes"}"#);
    e.created_at = now;
    store.enqueue_event(e).await.expect("event");
    assert!(claim().await.expect("claim").is_empty(), "paused");
    let mut ep = store.get_endpoint("cb_1", "ep_p").await.expect("endpoint");
    ep.enabled = true;
    ep.disabled_reason = None;
    store.update_endpoint(ep).await.expect("enabled");
    let got = claim().await.expect("claim");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].claim.event_id.as_str(), "evt_p");
}

fn succeeded(d: &ClaimedDelivery, at_ms: i64) -> DeliveryRecord {
    DeliveryRecord {
        endpoint_id: d.endpoint_id.clone(),
        rec: AttemptRecord {
            event_id: d.claim.event_id.clone(),
            seq: d.claim.seq,
            conversation_id: d.claim.conversation_id.clone(),
            number: 1,
            at_ms,
            status_code: Some(200),
            duration_ms: 1,
            error: None,
            response_excerpt: None,
            request_headers: None,
            next: AttemptNext::Succeeded,
        },
    }
}

/// The writer counts each pair's deliveries still to make, and promotes
/// no next one when the count says none is left: an attempt recorded
/// twice (a redelivery's answer arriving late) must not be counted twice,
/// or the third delivery of the pair would never be sent.
#[tokio::test]
async fn an_attempt_recorded_twice_does_not_hold_the_pairs_next_delivery() {
    let (_dir, store) = store_with_endpoints("t.db", &["ep_all"]).await;
    let now = crate::domain::time::now_ms();
    for id in ["evt_1", "evt_2", "evt_3"] {
        insert_as_a_click(&store, id, now).await;
    }
    let first = claimed(&store, now + 1).await;
    assert_eq!(event_ids(&first), ["evt_1"], "one at a time per pair");
    for _ in 0..2 {
        record_success(&store, &first[0], now + 1).await;
    }
    let second = claimed(&store, now + 1).await;
    assert_eq!(event_ids(&second), ["evt_2"]);
    record_success(&store, &second[0], now + 1).await;
    let third = claimed(&store, now + 1).await;
    assert_eq!(
        event_ids(&third),
        ["evt_3"],
        "the pair's last delivery is its head"
    );
}

/// What a claim at `now` takes, with room everywhere.
async fn claimed(store: &SqliteStore, now: i64) -> Vec<ClaimedDelivery> {
    store
        .claim_deliveries(claim_ask(now, open_rooms()))
        .await
        .expect("claim")
}

fn event_ids(got: &[ClaimedDelivery]) -> Vec<&str> {
    got.iter().map(|d| d.claim.event_id.as_str()).collect()
}

async fn record_success(store: &SqliteStore, d: &ClaimedDelivery, at_ms: i64) {
    store
        .record_delivery_attempts(vec![succeeded(d, at_ms)])
        .await
        .expect("recorded");
}

/// Inserts an event in a job that decides before it writes, as a click
/// does: such a job keeps the writer's caches.
async fn insert_as_a_click(store: &SqliteStore, id: &'static str, now: i64) {
    store
        .write_decided(true, move |c| {
            let mut e = event(id, r#"{"action_id":"yes"}"#);
            e.created_at = now;
            super::super::queue::insert_event(c, e)
        })
        .await
        .expect("event");
}

/// The writer keeps each chatbot's routes between clicks: a change of an
/// endpoint applies from the next event on.
#[tokio::test]
async fn an_endpoint_changed_between_two_clicks_routes_the_second_as_changed() {
    let (_dir, store) = store_with_endpoints("c.db", &["ep_all"]).await;
    let now = crate::domain::time::now_ms();
    insert_as_a_click(&store, "evt_1", now).await;
    let mut ep = store
        .get_endpoint("cb_1", "ep_all")
        .await
        .expect("endpoint");
    ep.event_types = Some(vec!["message.received".to_string()]);
    store.update_endpoint(ep).await.expect("updated");
    insert_as_a_click(&store, "evt_2", now).await;
    add_endpoints(&store, &["ep_new"]).await;
    insert_as_a_click(&store, "evt_3", now).await;
    let got: Vec<(String, String)> = store
        .read(|c| {
            c.prepare("SELECT event_id, endpoint_id FROM deliveries ORDER BY seq")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .expect("deliveries");
    let want =
        [("evt_1", "ep_all"), ("evt_3", "ep_new")].map(|(e, p)| (e.to_string(), p.to_string()));
    assert_eq!(got, want);
}
