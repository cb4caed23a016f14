//! Claims on SQLite, kept in memory (one process owns the file): the leases
//! of deliveries handed out, and the hot queue — head events just committed,
//! handed to the dispatcher without reading them back from the table.
//!
//! The table stays the truth: a hot event is an ordinary `pending` row, and
//! whatever the queue does not hold (a retry coming due, a promoted head
//! whose claim fell behind, an overflow, a restart) is found by a scan of the
//! table. `cold_due_at` says when such a scan is next needed, so that a busy
//! dispatcher fed from the queue does not scan after every delivery.

use crate::domain::ids::{ChatbotId, EventId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};

use crate::store::Claimed;

/// Most events waiting in the hot queue; past it they wait in the table.
const HOT_MAX: usize = 4096;
/// Longest time between two scans of the table while the queue feeds the
/// dispatcher (a safety net: every known cause of work sets `cold_due_at`).
pub const RESCAN_MS: i64 = 1000;
/// The lease of a queued (not yet claimed) event: it never expires.
const QUEUED: i64 = i64::MAX;
/// The lease of an event committed and not yet synced, which the syncer is
/// to offer: a scan of the table must not hand it out meanwhile (it would
/// be delivered, recorded and released before the offer queued it again).
const RESERVED: i64 = i64::MAX - 1;

/// What [`Claims::take_one`] found.
pub enum One {
    /// Not queued nor leased: the table says whether it can be sent.
    Free,
    /// Taken out of the queue, leased.
    Queued(Claimed),
    /// Queued for a send already starting, or leased.
    Held,
}

/// `Default`: a (re)started process scans first (`cold_due_at` 0): the
/// table may hold a backlog.
#[derive(Default)]
pub struct Claims {
    /// Claimed or queued deliveries: event id → lease end (ms).
    pub leases: HashMap<EventId, i64>,
    hot: VecDeque<Claimed>,
    /// When the table may next hold a claimable event the queue lacks.
    cold_due_at: i64,
    /// Retry times recorded and not yet come due.
    retries: BinaryHeap<Reverse<i64>>,
    /// The chatbots the last complete scan left out (no room then): their
    /// due events may still wait in the table.
    skipped_by_scan: Vec<ChatbotId>,
    /// Chatbots whose endpoint is disabled (`410 Gone`): their events wait
    /// in the table, which the scan leaves out.
    disabled: HashSet<ChatbotId>,
    /// Shutting down: nothing more is queued.
    closed: bool,
    /// The fan-out's due heads (§13), kept beside the events' queue so that
    /// the writer and the syncer reach both through one lock.
    pub deliveries: super::delivery_heads::DeliveryHeads,
}

impl Claims {
    /// Holds back head events about to be committed from scans of the
    /// table until the syncer offers them (or [`Self::unreserve`]).
    pub fn reserve<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            self.leases.entry(EventId::stored(id)).or_insert(RESERVED);
        }
    }

    /// Ends reservations whose events will not be offered (their commit or
    /// sync failed): the table is the truth for them.
    pub fn unreserve<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            if self.leases.get(id) == Some(&RESERVED) {
                self.leases.remove(id);
            }
        }
        self.cold_due_at = 0;
    }

    /// Queues committed head events, due now, for the next claims. An
    /// event leased otherwise (handed out by a scan) is left to its lease;
    /// one that cannot be queued is left to the table.
    pub fn offer(&mut self, items: impl IntoIterator<Item = Claimed>) {
        if self.closed {
            // Left to the table, as an overflow is.
            for c in items {
                if self.leases.get(&c.event_id) == Some(&RESERVED) {
                    self.leases.remove(&c.event_id);
                }
            }
            self.cold_due_at = 0;
            return;
        }
        for c in items {
            let free = matches!(self.leases.get(&c.event_id), None | Some(&RESERVED));
            if !free {
                continue;
            }
            if self.disabled.contains(&c.chatbot_id) {
                self.leases.remove(&c.event_id);
                continue;
            }
            if self.hot.len() < HOT_MAX {
                self.leases.insert(c.event_id.clone(), QUEUED);
                self.hot.push_back(c);
            } else {
                self.leases.remove(&c.event_id);
                self.cold_due_at = 0;
            }
        }
    }

    /// The table holds claimable work from `at` on.
    pub fn cold_at(&mut self, at: i64) {
        self.cold_due_at = self.cold_due_at.min(at);
    }

    /// A retry falls due at `at`.
    pub fn retry_at(&mut self, at: i64) {
        self.retries.push(Reverse(at));
        self.cold_at(at);
    }

    /// Puts claimed events that could not start back at the front of the
    /// queue, in their order.
    pub fn give_back(&mut self, mut items: Vec<Claimed>) {
        items.sort_by_key(|c| std::cmp::Reverse(c.seq));
        for c in items {
            self.leases.insert(c.event_id.clone(), QUEUED);
            self.hot.push_front(c);
        }
    }

    /// After a change of a chatbot: its queued events drop the copy they
    /// carry (the dispatcher reads it afresh); a disabled endpoint's queued
    /// events go back to the table, an enabled one's are scanned for.
    pub fn chatbot_changed(&mut self, chatbot_id: &str, disabled: bool) {
        for c in self.hot.iter_mut().filter(|c| c.chatbot_id == chatbot_id) {
            c.bot = None;
        }
        if disabled {
            self.disabled.insert(ChatbotId::stored(chatbot_id));
            let leases = &mut self.leases;
            self.hot.retain(|c| {
                let keep = c.chatbot_id != chatbot_id;
                if !keep {
                    leases.remove(&c.event_id);
                }
                keep
            });
        } else if self.disabled.remove(chatbot_id) {
            self.cold_due_at = 0;
        }
    }

    /// Events deleted with their conversation: out of the queue, their
    /// leases and reservations ended (a delivery already handed out finds
    /// no row to record).
    pub fn forget(&mut self, event_ids: &[EventId]) {
        if event_ids.is_empty() {
            return;
        }
        let gone: HashSet<&str> = event_ids.iter().map(EventId::as_str).collect();
        self.hot.retain(|c| !gone.contains(c.event_id.as_str()));
        for id in event_ids {
            self.leases.remove(id);
        }
    }

    /// Ends the leases of deliveries whose leases may not be in the table:
    /// the table hands them out again (with a lease written first).
    pub fn back_to_table(&mut self, items: Vec<Claimed>) {
        for c in items {
            self.leases.remove(&c.event_id);
        }
        self.cold_due_at = 0;
    }

    /// Empties the hot queue (on shutdown): its events, never handed out,
    /// are the table's again; their ids, for their leases in the table to
    /// be ended.
    pub fn drain_hot(&mut self) -> Vec<i64> {
        self.closed = true;
        let hot = std::mem::take(&mut self.hot);
        for c in &hot {
            self.leases.remove(&c.event_id);
        }
        self.cold_due_at = 0;
        hot.into_iter().map(|c| c.seq).collect()
    }

    /// Whether the queue was emptied for a shutdown.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// Ends the leases of every claimed delivery (not of queued or reserved
    /// events, which no one has started).
    pub fn release_claimed(&mut self) {
        self.leases.retain(|_, until| *until >= RESERVED);
    }

    /// Ends expired leases; their events are the table's to hand out again.
    pub fn expire(&mut self, now_ms: i64) {
        let before = self.leases.len();
        self.leases.retain(|_, until| *until > now_ms);
        if self.leases.len() != before {
            self.cold_due_at = 0;
        }
    }

    /// Takes up to `limit` queued events whose chatbot is not in `skip`,
    /// leasing them until `lease_until`.
    pub fn take_hot(&mut self, limit: usize, skip: &[ChatbotId], lease_until: i64) -> Vec<Claimed> {
        let mut out = Vec::new();
        let mut i = 0;
        while out.len() < limit && i < self.hot.len() {
            if skip.contains(&self.hot[i].chatbot_id) {
                i += 1;
                continue;
            }
            if let Some(c) = self.hot.remove(i) {
                self.leases.insert(c.event_id.clone(), lease_until);
                out.push(c);
            }
        }
        out
    }

    /// Whether event `event_id` may be leased for a manual send, and if it
    /// waited in the queue, the delivery taken out of it (leased until
    /// `lease_until`). A reserved or leased event is someone else's.
    pub fn take_one(&mut self, event_id: &str, lease_until: i64) -> One {
        match self.leases.get(event_id) {
            None => One::Free,
            Some(&QUEUED) => match self.hot.iter().position(|c| c.event_id == event_id) {
                Some(i) => match self.hot.remove(i) {
                    Some(c) => {
                        self.leases.insert(c.event_id.clone(), lease_until);
                        One::Queued(c)
                    }
                    None => One::Held,
                },
                None => One::Held,
            },
            Some(_) => One::Held,
        }
    }

    /// Whether the table is to be scanned now, leaving out `skip`.
    pub fn cold_due(&self, now_ms: i64, skip: &[ChatbotId]) -> bool {
        now_ms >= self.cold_due_at || self.skipped_by_scan.iter().any(|b| !skip.contains(b))
    }

    /// After a scan that left out `skip`: `complete` when it found
    /// everything due (fewer rows than asked for), so the next scan waits for
    /// the next known cause.
    pub fn scanned(&mut self, now_ms: i64, complete: bool, skip: &[ChatbotId]) {
        if !complete {
            self.cold_due_at = 0;
            return;
        }
        self.skipped_by_scan = skip.to_vec();
        while self.retries.peek().is_some_and(|Reverse(t)| *t <= now_ms) {
            self.retries.pop();
        }
        let next_retry = self.retries.peek().map_or(i64::MAX, |Reverse(t)| *t);
        self.cold_due_at = next_retry.min(now_ms + RESCAN_MS);
    }

    /// When the next claim may find work that no wake-up announces.
    pub fn next_due_at(&self, now_ms: i64) -> Option<i64> {
        (self.cold_due_at > now_ms).then_some(self.cold_due_at)
    }
}

/// Deliveries taken out of the queue or leased by a claim that has not
/// returned them yet: given back, first in line, should the claim be
/// dropped on the way (a caller that gave up, a cut at the store's bound),
/// so that no lease outlives a claim nobody received.
pub struct Taken<'a> {
    claims: &'a parking_lot::Mutex<Claims>,
    items: Vec<Claimed>,
    /// Whether their leases are in the table (they may wait in the hot
    /// queue again) or possibly not (they go back to the table).
    leased: bool,
}

impl<'a> Taken<'a> {
    /// Taken from the hot queue, whose events have their leases in the
    /// table: given back to the queue.
    pub fn queued(claims: &'a parking_lot::Mutex<Claims>, items: Vec<Claimed>) -> Self {
        Self {
            claims,
            items,
            leased: true,
        }
    }

    /// Read from the table, their leases not written yet: given back to
    /// the table (a scan finds them again).
    pub fn unleased(claims: &'a parking_lot::Mutex<Claims>, items: Vec<Claimed>) -> Self {
        Self {
            claims,
            items,
            leased: false,
        }
    }

    pub fn items(&self) -> &[Claimed] {
        &self.items
    }

    /// The claim returns them: they are its caller's now.
    pub fn handed(mut self) -> Vec<Claimed> {
        std::mem::take(&mut self.items)
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if self.items.is_empty() {
            return;
        }
        let items = std::mem::take(&mut self.items);
        let mut cl = self.claims.lock();
        if self.leased {
            cl.give_back(items);
        } else {
            cl.back_to_table(items);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: &str, bot: &str) -> Claimed {
        Claimed::sample(id, bot, "c")
    }

    /// Emptied for a shutdown, the queue takes nothing more: what is
    /// offered then (a head promoted by a last record) is the table's,
    /// its reservation ended.
    #[test]
    fn a_queue_emptied_for_a_shutdown_takes_no_more() {
        let mut c = Claims::default();
        c.offer([ev("a", "x")]);
        assert_eq!(c.drain_hot().len(), 1);
        assert!(c.closed());
        c.reserve(["b"]);
        c.offer([ev("b", "x")]);
        assert!(c.take_hot(8, &[], 100).is_empty());
        assert!(!c.leases.contains_key("b"));
    }

    #[test]
    fn queued_events_are_taken_in_order_skipping_held_back_chatbots() {
        let mut c = Claims::default();
        c.scanned(0, true, &[]);
        c.offer([ev("a", "x"), ev("b", "y"), ev("c", "x")]);
        let got = c.take_hot(10, &[ChatbotId::stored("y")], 99);
        let ids: Vec<_> = got.iter().map(|c| c.event_id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(c.leases.get("a"), Some(&99));
        assert_eq!(c.leases.get("b"), Some(&QUEUED));
        assert_eq!(c.take_hot(10, &[], 5).len(), 1);
    }

    #[test]
    fn a_complete_scan_waits_for_the_next_retry_and_no_longer_than_the_rescan() {
        let mut c = Claims::default();
        assert!(c.cold_due(0, &[]), "a fresh process scans first");
        c.retry_at(1_500);
        c.scanned(1_000, true, &[]);
        assert!(!c.cold_due(1_499, &[]));
        assert!(c.cold_due(1_500, &[]));
        c.scanned(1_600, true, &[]);
        assert_eq!(c.next_due_at(1_600), Some(1_600 + RESCAN_MS));
        c.scanned(1_700, false, &[]);
        assert!(c.cold_due(1_700, &[]), "an incomplete scan scans again");
    }

    #[test]
    fn expired_leases_and_overflow_send_the_next_claim_to_the_table() {
        let mut c = Claims::default();
        c.scanned(0, true, &[]);
        c.offer([ev("a", "x")]);
        c.take_hot(1, &[], 10);
        assert!(!c.cold_due(5, &[]));
        c.expire(11);
        assert!(c.cold_due(11, &[]));
        c.scanned(11, true, &[]);
        c.offer((0..=HOT_MAX).map(|i| ev(&i.to_string(), "x")));
        assert!(c.cold_due(12, &[]));
    }

    #[test]
    fn a_chatbot_left_out_of_a_scan_is_scanned_for_once_it_has_room() {
        let mut c = Claims::default();
        let held = vec![ChatbotId::stored("x")];
        c.scanned(0, true, &held);
        assert!(!c.cold_due(1, &held));
        assert!(c.cold_due(1, &[]));
        c.scanned(1, true, &[]);
        assert!(!c.cold_due(2, &[]));
    }

    #[test]
    fn a_disabled_endpoint_gets_nothing_from_the_queue_until_enabled() {
        let mut c = Claims::default();
        c.scanned(0, true, &[]);
        c.offer([ev("a", "x"), ev("b", "y")]);
        c.chatbot_changed("x", true);
        c.offer([ev("c", "x")]);
        let ids: Vec<_> = c
            .take_hot(9, &[], 9)
            .into_iter()
            .map(|c| c.event_id)
            .collect();
        assert_eq!(ids, ["b"]);
        assert!(!c.leases.contains_key("a"), "back to the table");
        assert!(!c.cold_due(1, &[]));
        c.chatbot_changed("x", false);
        assert!(c.cold_due(1, &[]), "enabled again: the table is scanned");
    }

    #[test]
    fn a_reserved_event_is_queued_by_its_offer_and_never_twice() {
        let mut c = Claims::default();
        c.scanned(0, true, &[]);
        c.reserve(["a", "b"]);
        assert_eq!(c.leases.get("a"), Some(&RESERVED), "a scan skips it");
        c.expire(i64::MAX - 2);
        assert!(c.leases.contains_key("a"), "a reservation does not expire");
        c.offer([ev("a", "x")]);
        let got = c.take_hot(9, &[], 10);
        assert_eq!(got.len(), 1);
        // Delivered and released; an offer of it again (as from a second
        // hand-over) must not queue what a lease did not hold back.
        c.leases.remove("a");
        c.leases.insert(EventId::stored("b"), 10);
        c.offer([ev("b", "x")]);
        assert!(c.take_hot(9, &[], 10).is_empty(), "b is leased by a scan");
        c.unreserve(["b"]);
        assert_eq!(c.leases.get("b"), Some(&10), "a real lease stays");
    }

    #[test]
    fn a_reservation_that_cannot_be_queued_goes_back_to_the_table() {
        let mut c = Claims::default();
        c.scanned(0, true, &[]);
        c.chatbot_changed("x", true);
        c.reserve(["a"]);
        c.offer([ev("a", "x")]);
        assert!(!c.leases.contains_key("a"), "disabled: the table keeps it");
        c.reserve(["b"]);
        c.unreserve(["b"]);
        assert!(!c.leases.contains_key("b"));
        assert!(c.cold_due(1, &[]), "a scan looks for it");
    }

    #[test]
    fn one_event_is_taken_out_of_the_queue_for_a_manual_send() {
        let mut c = Claims::default();
        c.offer([ev("a", "b1"), ev("b", "b1")]);
        assert!(matches!(c.take_one("b", 50), One::Queued(x) if x.event_id == "b"));
        assert!(matches!(c.take_one("b", 50), One::Held), "leased now");
        assert!(matches!(c.take_one("z", 50), One::Free));
        let rest = c.take_hot(10, &[], 60);
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].event_id, "a");
    }

    #[test]
    fn given_back_events_are_claimed_first_in_their_order() {
        let mut c = Claims::default();
        c.offer([ev("c", "x")]);
        let mut a = ev("a", "x");
        a.seq = 1;
        let mut b = ev("b", "x");
        b.seq = 2;
        c.give_back(vec![b, a]);
        let ids: Vec<_> = c
            .take_hot(3, &[], 9)
            .into_iter()
            .map(|c| c.event_id)
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
    }

    #[test]
    fn deliveries_taken_by_a_claim_that_is_dropped_go_back_first_in_line() {
        let claims = parking_lot::Mutex::new(Claims::default());
        claims.lock().offer([ev("a", "x"), ev("b", "x")]);
        let out = claims.lock().take_hot(1, &[], 50);
        drop(Taken::queued(&claims, out));
        let out = claims.lock().take_hot(2, &[], 50);
        let ids: Vec<_> = out.iter().map(|c| c.event_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"], "given back, in their order");
        let handed = Taken::queued(&claims, out).handed();
        assert_eq!(handed.len(), 2);
        assert!(
            claims.lock().take_hot(2, &[], 50).is_empty(),
            "handed out, not given back"
        );
        assert_eq!(
            claims.lock().leases.get("a"),
            Some(&50),
            "leased to the claim's caller"
        );
    }
}
