//! W3C trace context (`traceparent`): parsed from a request or started
//! anew, kept with each event it causes, and continued on every webhook
//! POST of that event with the same trace id and a span id of its own.

use std::fmt;

/// One position in a trace: the trace, the span, the sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value (version 00, or a later version
    /// read as 00 as the recommendation asks). An invalid value is `None`:
    /// the caller starts a new trace.
    pub fn parse(value: &str) -> Option<Self> {
        let v = value.trim();
        let mut parts = v.split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let version = hex::<1>(version)?;
        let _ = version;
        let trace_id = hex::<16>(trace)?;
        let span_id = hex::<8>(span)?;
        let flags = hex::<1>(flags)?[0];
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            flags,
        })
    }

    /// A new trace, sampled.
    pub fn new_root() -> Self {
        Self {
            trace_id: nonzero(),
            span_id: nonzero(),
            flags: 1,
        }
    }

    /// The next span in the same trace.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id: nonzero(),
            flags: self.flags,
        }
    }

    pub fn trace_id_hex(&self) -> String {
        data_encoding::HEXLOWER.encode(&self.trace_id)
    }

    pub fn span_id_hex(&self) -> String {
        data_encoding::HEXLOWER.encode(&self.span_id)
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_id_hex(),
            self.span_id_hex(),
            self.flags
        )
    }
}

fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != N * 2 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let v = data_encoding::HEXLOWER.decode(s.as_bytes()).ok()?;
    v.try_into().ok()
}

fn nonzero<const N: usize>() -> [u8; N] {
    loop {
        let b: [u8; N] = rand::random();
        if b != [0; N] {
            return b;
        }
    }
}

/// The trace position of the request being served (its server span), put
/// in the request's extensions by the access log.
#[derive(Debug, Clone, Copy)]
pub struct RequestTrace(pub TraceParent);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_and_writes_back_unchanged() {
        let h = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let t = TraceParent::parse(h).expect("valid");
        assert_eq!(t.to_string(), h);
        let c = t.child();
        assert_eq!(c.trace_id, t.trace_id);
        assert_ne!(c.span_id, t.span_id);
    }

    #[test]
    fn invalid_traceparents_start_a_new_trace() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
        // A later version may carry more fields.
        assert!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
    }
}
