//! The check after each mode: every accepted click delivered (none lost),
//! none delivered twice, and each conversation's events in the order of its
//! clicks — across instances too, since a conversation's consecutive clicks
//! go to different instances (see [`super::load`]).
//!
//! Order is read from the events themselves: a conversation's clicks
//! alternate between two buttons, so its k-th event must carry the button
//! of its k-th click (two adjacent events swapped, or one lost, break the
//! alternation), and its `clicked_at` must not be before the previous
//! event's (a swap over a longer distance).

use serde::Serialize;

use super::load::ACTIONS;
use super::receiver::Arrivals;

/// The value of a string field `"key":"…"` of a JSON body, found without
/// parsing it (the values looked for hold no escaped quote).
pub fn string_field<'a>(body: &'a [u8], key: &str) -> Option<&'a str> {
    let needle = format!("\"{key}\":\"");
    let needle = needle.as_bytes();
    let start = body.windows(needle.len()).position(|w| w == needle)? + needle.len();
    let len = body[start..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&body[start..start + len]).ok()
}

/// What a conversation's last delivered event said.
#[derive(Debug, Default)]
pub struct Order {
    last_clicked_at: Option<i64>,
}

impl Order {
    /// Whether `body` can be the event of a click on button
    /// `ACTIONS[action]` following the events seen so far; remembers it.
    pub fn next(&mut self, action: usize, body: &[u8]) -> bool {
        let button = string_field(body, "action_id") == ACTIONS.get(action).copied();
        let at = string_field(body, "clicked_at").and_then(crate::domain::time::parse_rfc3339);
        let later = match (self.last_clicked_at, at) {
            (Some(last), Some(at)) => at >= last,
            _ => true,
        };
        if at.is_some() {
            self.last_clicked_at = at;
        }
        button && later
    }
}

/// The check's verdict on one mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Check {
    /// Accepted clicks whose event never arrived.
    pub lost: u64,
    /// Events that arrived again (a `webhook-id` seen before).
    pub duplicates: u64,
    /// Events that arrived before an event of an earlier click of the same
    /// conversation.
    pub out_of_order: u64,
    /// Events no click was waiting for.
    pub unmatched: u64,
}

impl Check {
    pub fn of(accepted: u64, a: &Arrivals) -> Self {
        Self {
            lost: accepted.saturating_sub(a.matched),
            duplicates: a.duplicates,
            out_of_order: a.out_of_order,
            unmatched: a.unmatched,
        }
    }

    /// No loss, no duplicate, order held, nothing unexplained.
    pub fn passed(&self) -> bool {
        *self == Self::default()
    }

    /// `0 lost, 0 duplicates, order held`, or what broke.
    pub fn describe(&self) -> String {
        let order = if self.out_of_order == 0 {
            "order held".to_string()
        } else {
            format!("{} out of order", self.out_of_order)
        };
        let mut s = format!(
            "{} lost, {} duplicates, {order}",
            self.lost, self.duplicates
        );
        if self.unmatched > 0 {
            s.push_str(&format!(", {} unmatched", self.unmatched));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::bench::receiver::Tracker;

    fn event(action: &str, clicked_at: &str) -> Vec<u8> {
        format!(r#"{{"conversation_id":"c0","action_id":"{action}","clicked_at":"{clicked_at}"}}"#)
            .into_bytes()
    }

    /// A tracker with `n` clicks sent on conversation c0, alternating
    /// buttons as the load does.
    fn sent(n: usize) -> (std::sync::Arc<Tracker>, Instant) {
        let t = Tracker::new(1);
        t.register("c0", 0);
        let t0 = Instant::now();
        for k in 0..n {
            t.sent(0, t0 + Duration::from_millis(k as u64), k % 2);
        }
        (t, t0)
    }

    const T1: &str = "2026-07-17T03:12:44.120Z";
    const T2: &str = "2026-07-17T03:12:44.125Z";
    const T3: &str = "2026-07-17T03:12:44.131Z";

    #[test]
    fn events_in_click_order_pass() {
        let (t, t0) = sent(3);
        t.arrived(&event("approve", T1), Some(b"e1"), t0);
        t.arrived(&event("deny", T2), Some(b"e2"), t0);
        t.arrived(&event("approve", T2), Some(b"e3"), t0);
        let c = Check::of(3, &t.snapshot());
        assert!(c.passed(), "{c:?}");
        assert_eq!(c.describe(), "0 lost, 0 duplicates, order held");
    }

    #[test]
    fn a_duplicate_fails() {
        let (t, t0) = sent(2);
        t.arrived(&event("approve", T1), Some(b"e1"), t0);
        t.arrived(&event("approve", T1), Some(b"e1"), t0);
        t.arrived(&event("deny", T2), Some(b"e2"), t0);
        let c = Check::of(2, &t.snapshot());
        assert_eq!((c.duplicates, c.lost, c.out_of_order), (1, 0, 0));
        assert!(!c.passed());
    }

    #[test]
    fn an_adjacent_pair_swapped_fails() {
        let (t, t0) = sent(2);
        t.arrived(&event("deny", T2), Some(b"e2"), t0);
        t.arrived(&event("approve", T1), Some(b"e1"), t0);
        let c = Check::of(2, &t.snapshot());
        assert_eq!((c.lost, c.duplicates), (0, 0));
        assert_eq!(c.out_of_order, 2);
        assert!(!c.passed());
        assert!(c.describe().contains("2 out of order"), "{}", c.describe());
    }

    #[test]
    fn a_swap_over_two_clicks_fails_by_its_time() {
        // Clicks 1 and 3 (both `approve`) swapped: the buttons match, the
        // times do not.
        let (t, t0) = sent(3);
        t.arrived(&event("approve", T3), Some(b"e3"), t0);
        t.arrived(&event("deny", T2), Some(b"e2"), t0);
        t.arrived(&event("approve", T1), Some(b"e1"), t0);
        let c = Check::of(3, &t.snapshot());
        assert_eq!(c.out_of_order, 2, "{c:?}");
        assert!(!c.passed());
    }

    #[test]
    fn a_loss_fails() {
        let (t, t0) = sent(3);
        t.arrived(&event("approve", T1), Some(b"e1"), t0);
        // The second click's event never comes; the third takes its place.
        t.arrived(&event("approve", T3), Some(b"e3"), t0);
        let c = Check::of(3, &t.snapshot());
        assert_eq!(c.lost, 1);
        assert_eq!(c.out_of_order, 1);
        assert!(!c.passed());
    }

    #[test]
    fn an_event_nobody_clicked_fails() {
        let (t, t0) = sent(0);
        t.arrived(&event("approve", T1), Some(b"e1"), t0);
        let c = Check::of(0, &t.snapshot());
        assert_eq!(c.unmatched, 1);
        assert!(!c.passed());
    }

    #[test]
    fn fields_are_read_without_parsing() {
        let body = br#"{"event":"x","conversation_id":"conv_01ABC","action_id":"deny"}"#;
        assert_eq!(string_field(body, "conversation_id"), Some("conv_01ABC"));
        assert_eq!(string_field(body, "action_id"), Some("deny"));
        assert_eq!(string_field(body, "clicked_at"), None);
    }
}
