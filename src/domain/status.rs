//! The statuses of interactions and of events (deliveries), each spelled
//! exactly as stored and as shown in JSON.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A stored status text that names no status of its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} status {value:?}")]
pub struct UnknownStatus {
    /// `interaction` or `event`.
    pub kind: &'static str,
    pub value: String,
}

/// `FromStr` (by the stored spelling, `kind` naming the status in the
/// error) and `Display` for a status enum with `ALL` and `as_str`.
macro_rules! text_forms {
    ($status:ident, $kind:literal) => {
        impl FromStr for $status {
            type Err = UnknownStatus;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| UnknownStatus {
                        kind: $kind,
                        value: s.to_string(),
                    })
            }
        }

        impl fmt::Display for $status {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Where an interaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InteractionStatus {
    Pending,
    Answered,
    Expired,
    Cancelled,
}

impl InteractionStatus {
    pub const ALL: [InteractionStatus; 4] = [
        InteractionStatus::Pending,
        InteractionStatus::Answered,
        InteractionStatus::Expired,
        InteractionStatus::Cancelled,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            InteractionStatus::Pending => "pending",
            InteractionStatus::Answered => "answered",
            InteractionStatus::Expired => "expired",
            InteractionStatus::Cancelled => "cancelled",
        }
    }
}

text_forms!(InteractionStatus, "interaction");

/// Where an event's delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// Waiting for its first attempt (or redelivered).
    Pending,
    /// An attempt failed; another is due.
    Failed,
    Succeeded,
    /// The last attempt failed; no more are made.
    Dead,
    /// Not sent to this endpoint: the event did not match its event types
    /// or filter (§13). Only a delivery is skipped; an event never shows it.
    Skipped,
}

impl EventStatus {
    pub const ALL: [EventStatus; 5] = [
        EventStatus::Pending,
        EventStatus::Failed,
        EventStatus::Succeeded,
        EventStatus::Dead,
        EventStatus::Skipped,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "pending",
            EventStatus::Failed => "failed",
            EventStatus::Succeeded => "succeeded",
            EventStatus::Dead => "dead",
            EventStatus::Skipped => "skipped",
        }
    }

    /// An event's status from its deliveries' (§13): `dead` if any is dead,
    /// else `failed` if any failed, else `pending` if any is pending, else
    /// `succeeded` (also when there is none). Skipped ones do not count.
    pub fn aggregate(deliveries: impl IntoIterator<Item = EventStatus>) -> EventStatus {
        let rank = |s: EventStatus| match s {
            EventStatus::Dead => 3,
            EventStatus::Failed => 2,
            EventStatus::Pending => 1,
            EventStatus::Succeeded | EventStatus::Skipped => 0,
        };
        deliveries
            .into_iter()
            .max_by_key(|s| rank(*s))
            .filter(|s| rank(*s) > 0)
            .unwrap_or(EventStatus::Succeeded)
    }

    /// Whether more attempts are to come (`pending` or `failed`).
    pub const fn is_active(self) -> bool {
        matches!(self, EventStatus::Pending | EventStatus::Failed)
    }
}

text_forms!(EventStatus, "event");

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant round-trips through its spelling and serde; `bad`
    /// spellings are errors naming `kind`.
    fn round_trips<T>(all: &[T], kind: &str, bad: &[&str])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + Serialize,
        T: for<'de> Deserialize<'de> + FromStr<Err = UnknownStatus>,
    {
        for &s in all {
            assert_eq!(s.to_string().parse::<T>(), Ok(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<T>(&format!("\"{s}\"")).unwrap(), s);
        }
        for &b in bad {
            let e = b.parse::<T>().unwrap_err();
            assert_eq!((e.kind, e.value.as_str()), (kind, b));
        }
    }

    #[test]
    fn interaction_status_round_trips() {
        round_trips(
            &InteractionStatus::ALL,
            "interaction",
            &["", "Pending", "withdrawn", "succeeded", " pending"],
        );
        assert_eq!(InteractionStatus::Cancelled.as_str(), "cancelled");
    }

    #[test]
    fn event_status_round_trips() {
        round_trips(
            &EventStatus::ALL,
            "event",
            &["", "Dead", "retrying", "answered", "delivered"],
        );
        assert_eq!(EventStatus::Succeeded.as_str(), "succeeded");
    }

    #[test]
    fn only_pending_and_failed_are_active() {
        let active: Vec<_> = EventStatus::ALL
            .into_iter()
            .filter(|s| s.is_active())
            .collect();
        assert_eq!(active, [EventStatus::Pending, EventStatus::Failed]);
    }

    #[test]
    fn an_event_is_as_bad_as_its_worst_delivery() {
        use EventStatus::*;
        assert_eq!(EventStatus::aggregate([]), Succeeded);
        assert_eq!(EventStatus::aggregate([Skipped]), Succeeded);
        assert_eq!(EventStatus::aggregate([Succeeded, Pending]), Pending);
        assert_eq!(EventStatus::aggregate([Pending, Failed, Succeeded]), Failed);
        assert_eq!(EventStatus::aggregate([Failed, Dead, Pending]), Dead);
        assert_eq!(EventStatus::aggregate([Skipped, Succeeded]), Succeeded);
    }
}
