//! The due heads of (endpoint, conversation) pairs (§13), listed in memory
//! by endpoint: a claim of the fan-out takes each endpoint's room from its
//! list and reads those rows back by `seq`, instead of ranking every head
//! in the table.
//!
//! As with the events' hot queue (`claims`), the table stays the truth.
//! Each head listed here is an ordinary row; a claim reads it back and
//! leaves out what is no longer claimable (ended, leased, not due, its
//! endpoint paused or deleted). Heads are listed as their commits reach the
//! disk (inserted or promoted) and by reads of the table, which find what
//! the list may lack: on start, after any change the list does not follow
//! (a redelivery, an endpoint enabled, a delivery given back), when a retry
//! falls due, when an endpoint the last read left out runs low, and at
//! least every [`RESCAN_MS`] as a safety net.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use super::claims::RESCAN_MS;
use crate::domain::ids::EndpointId;
use crate::store::fanout::Rooms;

/// Most heads listed; past it the table is read again.
const MAX: usize = 16_384;
/// An endpoint with this many heads listed has work enough: a read of the
/// table leaves it out, so that one endpoint's backlog never hides
/// another's, and reads it again once it has fewer.
pub const ENOUGH: usize = 256;

/// `Default`: a (re)started process reads the table first.
#[derive(Default)]
pub struct DeliveryHeads {
    /// Heads by endpoint, oldest first.
    by_endpoint: HashMap<EndpointId, BTreeSet<i64>>,
    len: usize,
    /// When the table may next hold a due head the list lacks.
    scan_due_at: i64,
    /// Retry times recorded and not yet come due.
    retries: BinaryHeap<Reverse<i64>>,
    /// The endpoints the last complete read left out: their due heads may
    /// still wait in the table.
    left_out: Vec<EndpointId>,
}

impl DeliveryHeads {
    /// Lists heads committed due now.
    pub fn add(&mut self, heads: impl IntoIterator<Item = (EndpointId, i64)>) {
        for (endpoint, seq) in heads {
            if self.len >= MAX {
                self.scan_due_at = 0;
                return;
            }
            if self.by_endpoint.entry(endpoint).or_default().insert(seq) {
                self.len += 1;
            }
        }
    }

    /// The table may hold claimable heads the list lacks from `at` on.
    pub fn scan_at(&mut self, at: i64) {
        self.scan_due_at = self.scan_due_at.min(at);
    }

    /// The table is to be read at the next claim.
    pub fn rescan(&mut self) {
        self.scan_due_at = 0;
    }

    /// A retry falls due at `at`.
    pub fn retry_at(&mut self, at: i64) {
        self.retries.push(Reverse(at));
        self.scan_at(at);
    }

    fn listed(&self, endpoint: &EndpointId) -> usize {
        self.by_endpoint.get(endpoint).map_or(0, BTreeSet::len)
    }

    /// Whether the next claim reads the table first.
    pub fn scan_due(&self, now_ms: i64) -> bool {
        now_ms >= self.scan_due_at || self.left_out.iter().any(|e| self.listed(e) < ENOUGH)
    }

    /// The endpoints a read of the table leaves out: those with work
    /// enough listed.
    pub fn enough(&self) -> Vec<EndpointId> {
        self.by_endpoint
            .iter()
            .filter(|(_, q)| q.len() >= ENOUGH)
            .map(|(e, _)| e.clone())
            .collect()
    }

    /// After a read of the table that left out `left_out` and listed what
    /// it found: `complete` when it found fewer rows than it could take.
    pub fn scanned(&mut self, now_ms: i64, complete: bool, left_out: Vec<EndpointId>) {
        if !complete {
            self.scan_due_at = 0;
            return;
        }
        self.left_out = left_out;
        while self.retries.peek().is_some_and(|Reverse(t)| *t <= now_ms) {
            self.retries.pop();
        }
        let next_retry = self.retries.peek().map_or(i64::MAX, |Reverse(t)| *t);
        self.scan_due_at = next_retry.min(now_ms + RESCAN_MS);
    }

    /// Takes up to `limit` heads, no more from an endpoint than its room;
    /// the rest stay listed, in their order.
    pub fn take(&mut self, rooms: &Rooms, limit: usize) -> Vec<i64> {
        let mut out = Vec::new();
        for (endpoint, queue) in self.by_endpoint.iter_mut() {
            let n = usize::try_from(rooms.of(endpoint))
                .unwrap_or(0)
                .min(queue.len())
                .min(limit - out.len());
            for _ in 0..n {
                out.extend(queue.pop_first());
            }
            if out.len() == limit {
                break;
            }
        }
        self.by_endpoint.retain(|_, q| !q.is_empty());
        self.len -= out.len();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(id: &str) -> EndpointId {
        EndpointId::stored(id)
    }

    const OPEN: Rooms = Rooms {
        named: Vec::new(),
        others: 32,
    };

    #[test]
    fn an_endpoint_a_read_left_out_is_read_again_once_it_runs_low() {
        let mut h = DeliveryHeads::default();
        h.add((0..ENOUGH as i64).map(|s| (ep("a"), s)));
        h.add([(ep("b"), 1_000_000)]);
        assert_eq!(h.enough(), [ep("a")]);
        h.scanned(1_000, true, h.enough());
        assert!(!h.scan_due(1_001));
        // Two taken: at least one of them is a's, whichever list comes first.
        h.take(&OPEN, 2);
        assert!(h.scan_due(1_001), "a has fewer than enough listed");
        h.scanned(1_001, true, h.enough());
        assert!(!h.scan_due(1_002));
    }

    #[test]
    fn a_head_listed_twice_is_taken_once() {
        let mut h = DeliveryHeads::default();
        h.add([(ep("a"), 7), (ep("a"), 7), (ep("a"), 3)]);
        assert_eq!(h.take(&OPEN, 10), [3, 7]);
        assert!(h.take(&OPEN, 10).is_empty());
    }

    #[test]
    fn an_endpoint_gives_no_more_than_its_room_and_keeps_the_rest_in_order() {
        let mut h = DeliveryHeads::default();
        h.add([(ep("a"), 1), (ep("a"), 2), (ep("a"), 3), (ep("b"), 4)]);
        let rooms = Rooms {
            named: vec![(ep("a"), 2)],
            others: 32,
        };
        let mut got = h.take(&rooms, 10);
        got.sort_unstable();
        assert_eq!(got, [1, 2, 4]);
        assert_eq!(h.take(&rooms, 10), [3]);
        assert!(h.take(&rooms, 10).is_empty());
    }

    #[test]
    fn a_full_endpoint_gives_nothing_and_the_limit_holds() {
        let mut h = DeliveryHeads::default();
        h.add((1..=5).map(|s| (ep("a"), s)));
        let full = Rooms {
            named: vec![(ep("a"), 0)],
            others: 32,
        };
        assert!(h.take(&full, 10).is_empty());
        let open = Rooms {
            named: vec![],
            others: 32,
        };
        assert_eq!(h.take(&open, 3), [1, 2, 3]);
        assert_eq!(h.take(&open, 3), [4, 5]);
    }

    #[test]
    fn the_table_is_read_on_start_after_an_incomplete_read_and_when_a_retry_falls_due() {
        let mut h = DeliveryHeads::default();
        assert!(h.scan_due(1_000));
        h.scanned(1_000, true, vec![]);
        assert!(!h.scan_due(1_001));
        assert!(!h.scan_due(1_000 + RESCAN_MS - 1));
        assert!(h.scan_due(1_000 + RESCAN_MS));
        h.retry_at(1_500);
        assert!(!h.scan_due(1_499));
        assert!(h.scan_due(1_500));
        h.scanned(1_500, false, vec![]);
        assert!(h.scan_due(1_501));
        h.scanned(1_600, true, vec![]);
        assert!(!h.scan_due(1_600 + RESCAN_MS - 1));
        h.rescan();
        assert!(h.scan_due(1_601));
    }

    #[test]
    fn past_its_size_the_list_sends_the_claim_to_the_table() {
        let mut h = DeliveryHeads::default();
        h.scanned(0, true, vec![]);
        h.add((0..MAX as i64 + 1).map(|s| (ep("a"), s)));
        assert!(h.scan_due(1));
    }
}
