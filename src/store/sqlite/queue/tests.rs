//! The SQLite queue on a real file: leases, the hot queue, claims.

use super::*;
use crate::domain::model::Chatbot;

/// A store on a fresh file (named `name`) with one chatbot, `cb_1`,
/// whose webhook goes nowhere; its writes announced to `hub`.
pub(in crate::store::sqlite) async fn store_with_chatbot(
    name: &str,
    hub: Arc<crate::hub::Hub>,
) -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name).display().to_string();
    let store = SqliteStore::open(&path, hub).expect("store");
    let bot = Chatbot {
        id: crate::domain::ids::ChatbotId::stored("cb_1"),
        name: "Bot".into(),
        webhook_url: "http://127.0.0.1:9/hook".into(),
        retention_ms: 86_400_000,
        signing_secret: "whsec_x".into(),
        previous_secret: None,
        endpoint_disabled: false,
        member_id: "mem_1".into(),
        created_at: 1,
        allowed_origins: Default::default(),
    };
    store
        .create_chatbot(bot, "hash".into())
        .await
        .expect("chatbot");
    (dir, store)
}

/// A store on a fresh file with one chatbot and one head event of it
/// waiting in the hot queue.
async fn store_with_one_event() -> (tempfile::TempDir, SqliteStore) {
    let (dir, store) = store_with_chatbot("q.db", Arc::new(crate::hub::Hub::new())).await;
    let event = NewEvent {
        id: crate::domain::ids::EventId::stored("evt_1"),
        chatbot_id: crate::domain::ids::ChatbotId::stored("cb_1"),
        conversation_id: crate::domain::ids::ConversationId::stored("conv_1"),
        event_type: "interaction.button_clicked",
        payload: b"{}".to_vec(),
        created_at: 1,
        trace: None,
    };
    store.enqueue_event(event).await.expect("event");
    (dir, store)
}

fn ask(lease_until: i64) -> ClaimAsk {
    ClaimAsk {
        now_ms: 10,
        lease_until,
        limit: 16,
        room: vec![],
    }
}

/// A claim turned away before it ran (an open circuit drops it
/// unpolled) takes nothing: the next claim gets the event at once, not
/// after a lease nobody holds has run out.
#[tokio::test]
async fn a_claim_dropped_unpolled_leaves_the_queue_as_it_was() {
    let (_dir, store) = store_with_one_event().await;
    let far = i64::MAX / 4;
    drop(store.claim_due(ask(far)));
    let claim = store.claim_due(ask(far)).await.expect("claim");
    let ids: Vec<_> = claim.claimed.iter().map(|c| c.event_id.as_str()).collect();
    assert_eq!(ids, ["evt_1"]);
}

/// The same file opened again, as by a restarted process.
fn reopened(dir: &tempfile::TempDir, store: SqliteStore) -> SqliteStore {
    drop(store);
    let path = dir.path().join("q.db").display().to_string();
    SqliteStore::open(&path, Arc::new(crate::hub::Hub::new())).expect("reopened")
}

/// `leased_until` of event `evt_1` as the file holds it.
fn lease_in_table(dir: &tempfile::TempDir) -> i64 {
    lease_of(dir, "evt_1")
}

/// `leased_until` of event `id` as the file holds it.
fn lease_of(dir: &tempfile::TempDir, id: &str) -> i64 {
    let c = Connection::open(dir.path().join("q.db")).expect("open");
    c.query_row("SELECT leased_until FROM events WHERE id = ?1", [id], |r| {
        r.get(0)
    })
    .expect("event")
}

/// A second event of `evt_1`'s conversation, waiting behind it.
async fn second_event(store: &SqliteStore) {
    let event = NewEvent {
        id: crate::domain::ids::EventId::stored("evt_2"),
        chatbot_id: crate::domain::ids::ChatbotId::stored("cb_1"),
        conversation_id: crate::domain::ids::ConversationId::stored("conv_1"),
        event_type: "interaction.button_clicked",
        payload: b"{}".to_vec(),
        created_at: 2,
        trace: None,
    };
    store.enqueue_event(event).await.expect("event");
}

/// The record of a delivered `evt_1`, which makes `evt_2` the head.
async fn deliver_first(store: &SqliteStore, claimed: &Claimed) {
    let now = crate::domain::time::now_ms();
    store
        .record_attempts(vec![AttemptRecord::of(
            claimed,
            1,
            now,
            AttemptNext::Succeeded,
        )])
        .await
        .expect("recorded");
}

/// The record that makes the next event the head leases it in the table
/// in the same commit, and the hot queue hands it out with no write.
#[tokio::test]
async fn a_promoted_head_carries_its_lease_from_the_record() {
    let (dir, store) = store_with_one_event().await;
    second_event(&store).await;
    assert_eq!(lease_of(&dir, "evt_2"), 0, "behind the head: not leased");
    let far = i64::MAX / 4;
    let claim = store.claim_due(ask(far)).await.expect("claim");
    let ids: Vec<_> = claim.claimed.iter().map(|c| c.event_id.as_str()).collect();
    assert_eq!(ids, ["evt_1"]);
    deliver_first(&store, &claim.claimed[0]).await;
    let lease = lease_of(&dir, "evt_2");
    assert!(lease > 0, "leased by the record that promoted it");
    let now = crate::domain::time::now_ms();
    let next = store.claim_due(ask(far)).await.expect("claim");
    let ids: Vec<_> = next.claimed.iter().map(|c| c.event_id.as_str()).collect();
    assert_eq!(ids, ["evt_2"], "from the hot queue");
    assert!(lease <= now);
    assert_eq!(lease_of(&dir, "evt_2"), lease, "no write to hand it out");
}

/// After the queue was emptied for a shutdown, a last record promotes the
/// next head without a lease: a clean restart counts no try for it.
#[tokio::test]
async fn after_a_shutdown_began_a_promoted_head_is_not_leased() {
    let (dir, store) = store_with_one_event().await;
    second_event(&store).await;
    let far = i64::MAX / 4;
    let claim = store.claim_due(ask(far)).await.expect("claim");
    store.stop_queueing().await.expect("stopped");
    deliver_first(&store, &claim.claimed[0]).await;
    assert_eq!(lease_of(&dir, "evt_2"), 0);
}

/// A head goes to the hot queue with its lease written by the commit
/// that made it (so a crash counts its try), and is handed out and
/// given back with no write; a shutdown ends the lease of what the
/// queue still holds.
#[tokio::test]
async fn a_queued_head_carries_its_lease_from_its_commit() {
    let (dir, store) = store_with_one_event().await;
    assert_eq!(lease_in_table(&dir), 1, "leased as it was committed");
    let far = i64::MAX / 4;
    let claim = store.claim_due(ask(far)).await.expect("claim");
    assert_eq!(claim.claimed.len(), 1);
    assert_eq!(lease_in_table(&dir), 1, "no write to hand it out");
    store.give_back(claim.claimed).await.expect("given back");
    let again = store.claim_due(ask(far)).await.expect("claim");
    assert_eq!(again.claimed.len(), 1, "the queue hands it out again");
    assert_eq!(lease_in_table(&dir), 1);
    store.give_back(again.claimed).await.expect("given back");
    store.stop_queueing().await.expect("stopped");
    assert_eq!(lease_in_table(&dir), 0, "never sent: no try to count");
}

/// A claim read from the table writes its leases before it returns.
#[tokio::test]
async fn a_claim_from_the_table_writes_its_leases() {
    let (dir, store) = store_with_one_event().await;
    let store = reopened(&dir, store);
    let far = i64::MAX / 4;
    let claim = store.claim_due(ask(far)).await.expect("claim");
    assert_eq!(claim.claimed.len(), 1);
    assert_eq!(lease_in_table(&dir), far);
}

/// A claim dropped while its lease is being written gives its
/// deliveries back.
#[tokio::test]
async fn a_claim_dropped_on_the_way_gives_its_deliveries_back() {
    let far = i64::MAX / 4;
    // One poll takes the event and sends the lease to the writer
    // thread. Its answer is almost never there by the end of that poll;
    // when it is (the claim is then done, nothing dropped on the way),
    // the case is set up again on a fresh store.
    for _ in 0..50 {
        let (dir, store) = store_with_one_event().await;
        // Read from the table (the hot queue, whose events carry their
        // leases, needs no write): the queue of a restarted process is
        // empty.
        let store = reopened(&dir, store);
        let mut claim = store.claim_due(ask(far));
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(claim.as_mut().poll(cx))).await;
        if first.is_ready() {
            continue;
        }
        drop(claim);
        let got = store.claim_due(ask(far)).await.expect("claim");
        let ids: Vec<_> = got.claimed.iter().map(|c| c.event_id.as_str()).collect();
        assert_eq!(ids, ["evt_1"]);
        return;
    }
    panic!("the writer answered within the first poll 50 times: the case never arose");
}
