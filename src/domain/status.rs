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

impl FromStr for InteractionStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownStatus {
                kind: "interaction",
                value: s.to_string(),
            })
    }
}

impl fmt::Display for InteractionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
}

impl EventStatus {
    pub const ALL: [EventStatus; 4] = [
        EventStatus::Pending,
        EventStatus::Failed,
        EventStatus::Succeeded,
        EventStatus::Dead,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "pending",
            EventStatus::Failed => "failed",
            EventStatus::Succeeded => "succeeded",
            EventStatus::Dead => "dead",
        }
    }

    /// Whether more attempts are to come (`pending` or `failed`).
    pub const fn is_active(self) -> bool {
        matches!(self, EventStatus::Pending | EventStatus::Failed)
    }
}

impl FromStr for EventStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownStatus {
                kind: "event",
                value: s.to_string(),
            })
    }
}

impl fmt::Display for EventStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interaction_status_round_trips() {
        for s in InteractionStatus::ALL {
            assert_eq!(s.as_str().parse::<InteractionStatus>(), Ok(s));
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
            assert_eq!(
                serde_json::from_str::<InteractionStatus>(&format!("\"{s}\"")).unwrap(),
                s
            );
        }
        for bad in ["", "Pending", "withdrawn", "succeeded", " pending"] {
            let e = bad.parse::<InteractionStatus>().unwrap_err();
            assert_eq!(e.kind, "interaction");
            assert_eq!(e.value, bad);
        }
    }

    #[test]
    fn event_status_round_trips() {
        for s in EventStatus::ALL {
            assert_eq!(s.as_str().parse::<EventStatus>(), Ok(s));
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
            assert_eq!(
                serde_json::from_str::<EventStatus>(&format!("\"{s}\"")).unwrap(),
                s
            );
        }
        for bad in ["", "Dead", "retrying", "answered", "delivered"] {
            let e = bad.parse::<EventStatus>().unwrap_err();
            assert_eq!(e.kind, "event");
            assert_eq!(e.value, bad);
        }
    }

    #[test]
    fn only_pending_and_failed_are_active() {
        let active: Vec<_> = EventStatus::ALL
            .into_iter()
            .filter(|s| s.is_active())
            .collect();
        assert_eq!(active, [EventStatus::Pending, EventStatus::Failed]);
    }
}
