//! Deliveries claimed as their events commit: a click batch leases the head
//! events it inserts to this instance, in its own transaction, and queues
//! them here once committed, so that a click's delivery starts without a
//! claim's round trip to the database.
//!
//! The table stays the truth. A queued event is an ordinary `pending` row
//! whose lease says this instance has it: if the instance dies, the lease
//! ends as any claim's does and another instance (or this one, restarted)
//! claims it. The other instances never see it due meanwhile, so a batch
//! that queues all its heads need not wake them. What the queue cannot hand
//! out (its chatbot has no room now, its lease runs short, the queue was
//! closed) goes back to the table, announced as due.

use crate::domain::ids::{ChatbotId, EventId};
use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::domain::model::Chatbot;
use crate::store::Claimed;
use crate::store::Signals;

/// Most deliveries queued; past it, a batch's head events wait in the table.
const MAX_QUEUED: usize = 4096;

struct Entry {
    claimed: Claimed,
    /// The lease its batch wrote (ms).
    until: i64,
}

#[derive(Default)]
struct State {
    entries: VecDeque<Entry>,
    /// The claim loop's lease (ms), learnt from its claims: 0 until it has
    /// claimed once (no claim loop, nothing queued).
    lease_ms: i64,
    closed: bool,
    /// The chatbots the last claim left out (no room at their endpoint):
    /// their events stay the table's, for whichever instance has room.
    skipped: Vec<ChatbotId>,
    /// What the last claim of the table said of the next due time.
    due: Option<Option<i64>>,
}

pub struct Queued {
    state: Mutex<State>,
    signals: Arc<dyn Signals>,
}

/// What a batch about to be written may lease: until when, and the
/// chatbots whose events it may not.
pub struct Lease {
    pub until: i64,
    pub skipped: Vec<ChatbotId>,
}

impl Lease {
    /// The lease to write on a head event of `bot` (0: none, for an
    /// endpoint disabled or without room).
    pub fn for_chatbot(&self, bot: &Chatbot) -> i64 {
        if bot.endpoint_disabled || self.skipped.contains(&bot.id) {
            0
        } else {
            self.until
        }
    }
}

impl Queued {
    pub fn new(signals: Arc<dyn Signals>) -> Self {
        Self {
            state: Mutex::new(State::default()),
            signals,
        }
    }

    /// The lease for the head events of a batch written at `now_ms`, or
    /// `None` when they are to wait in the table.
    pub fn lease(&self, now_ms: i64) -> Option<Lease> {
        let st = self.state.lock();
        (!st.closed && st.lease_ms > 0 && st.entries.len() < MAX_QUEUED).then(|| Lease {
            until: now_ms + st.lease_ms,
            skipped: st.skipped.clone(),
        })
    }

    /// Queues committed head events leased until `until` and wakes the
    /// claim loop; returns the ids of those it cannot queue (closed since
    /// the batch began), to go back to the table.
    pub fn push(&self, items: Vec<Claimed>, until: i64) -> Vec<EventId> {
        if items.is_empty() {
            return Vec::new();
        }
        let mut st = self.state.lock();
        if st.closed {
            return items.into_iter().map(|c| c.event_id).collect();
        }
        st.entries
            .extend(items.into_iter().map(|claimed| Entry { claimed, until }));
        drop(st);
        self.signals.events_queued();
        Vec::new()
    }

    /// For a claim at `now_ms` leasing until `lease_until`, leaving out
    /// `skip`: up to `limit` queued deliveries, in their order, and the ids
    /// of those that go back to the table (their chatbot has no room, or
    /// less than half the claim loop's lease is left of theirs, too little
    /// to be sure a delivery ends before another instance may take it).
    pub fn take(
        &self,
        now_ms: i64,
        lease_until: i64,
        limit: usize,
        skip: &[ChatbotId],
    ) -> (Vec<Claimed>, Vec<EventId>) {
        let mut st = self.state.lock();
        st.lease_ms = lease_until - now_ms;
        st.skipped = skip.to_vec();
        let half = st.lease_ms / 2;
        let (mut taken, mut back) = (Vec::new(), Vec::new());
        while taken.len() < limit
            && let Some(e) = st.entries.pop_front()
        {
            if skip.contains(&e.claimed.chatbot_id) || e.until - now_ms < half {
                back.push(e.claimed.event_id);
            } else {
                taken.push(e.claimed);
            }
        }
        (taken, back)
    }

    /// After a claim of the table: what it said of the next due time.
    pub fn scanned(&self, due: Option<Option<i64>>) {
        self.state.lock().due = due;
    }

    /// The next due time the last claim of the table reported.
    pub fn due(&self) -> Option<Option<i64>> {
        self.state.lock().due
    }

    /// Queues nothing more; returns the ids of what was queued.
    pub fn close(&self) -> Vec<EventId> {
        let mut st = self.state.lock();
        st.closed = true;
        st.entries.drain(..).map(|e| e.claimed.event_id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: &str, bot: &str) -> Claimed {
        Claimed::sample(id, bot, &format!("c-{id}"))
    }

    fn ids(v: &[Claimed]) -> Vec<&str> {
        v.iter().map(|c| c.event_id.as_str()).collect()
    }

    #[test]
    fn nothing_is_leased_before_the_claim_loop_has_claimed_or_once_closed() {
        let q = Queued::new(Arc::new(crate::hub::Hub::new()));
        assert!(q.lease(1_000).is_none());
        let _ = q.take(1_000, 31_000, 10, &[]);
        let lease = q.lease(2_000).map(|l| l.until);
        assert_eq!(lease, Some(32_000));
        assert_eq!(q.push(vec![ev("e1", "b")], 32_000), Vec::<String>::new());
        assert_eq!(q.close(), vec!["e1".to_string()]);
        assert!(q.lease(3_000).is_none());
        assert_eq!(q.push(vec![ev("e2", "b")], 33_000), vec!["e2".to_string()]);
    }

    #[test]
    fn deliveries_are_taken_in_order_and_a_skipped_chatbot_s_go_back() {
        let q = Queued::new(Arc::new(crate::hub::Hub::new()));
        let _ = q.take(0, 30_000, 10, &[]);
        q.push(vec![ev("e1", "a"), ev("e2", "busy"), ev("e3", "a")], 30_000);
        let (taken, back) = q.take(10, 30_010, 10, &[ChatbotId::stored("busy")]);
        assert_eq!(ids(&taken), ["e1", "e3"]);
        assert_eq!(back, ["e2"]);
        let lease = q.lease(20).expect("a lease");
        let bot = |id: &str, endpoint_disabled| Chatbot {
            id: crate::domain::ids::ChatbotId::stored(id),
            name: "b".into(),
            webhook_url: "http://127.0.0.1:9/".into(),
            retention_ms: 0,
            signing_secret: "s".into(),
            previous_secret: None,
            endpoint_disabled,
            member_id: "m".into(),
            created_at: 0,
            allowed_origins: crate::domain::origins::AllowedOrigins::from_stored(""),
        };
        assert_eq!(lease.for_chatbot(&bot("busy", false)), 0);
        assert_eq!(lease.for_chatbot(&bot("a", false)), 30_020);
        assert_eq!(lease.for_chatbot(&bot("a", true)), 0);
    }

    #[test]
    fn a_claim_takes_no_more_than_its_limit_and_leaves_the_rest_queued() {
        let q = Queued::new(Arc::new(crate::hub::Hub::new()));
        let _ = q.take(0, 30_000, 10, &[]);
        q.push(vec![ev("e1", "a"), ev("e2", "a"), ev("e3", "a")], 30_000);
        let (taken, back) = q.take(0, 30_000, 2, &[]);
        assert_eq!((ids(&taken), back.len()), (vec!["e1", "e2"], 0));
        let (taken, _) = q.take(0, 30_000, 2, &[]);
        assert_eq!(ids(&taken), ["e3"]);
    }

    #[test]
    fn a_delivery_whose_lease_runs_short_goes_back_to_the_table() {
        let q = Queued::new(Arc::new(crate::hub::Hub::new()));
        let _ = q.take(0, 30_000, 10, &[]);
        q.push(vec![ev("old", "a")], 30_000);
        q.push(vec![ev("new", "a")], 50_000);
        let (taken, back) = q.take(20_000, 50_000, 10, &[]);
        assert_eq!(
            (ids(&taken), back),
            (vec!["new"], vec![EventId::stored("old")])
        );
    }
}
