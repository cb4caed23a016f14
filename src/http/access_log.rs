//! Every request: its trace position (the caller's `traceparent` continued,
//! or a new trace; an exported span when OTLP export is on), its id
//! (`X-Request-Id`, echoed), its metrics by route pattern, and one log line
//! at INFO — method, route, path, status, whole milliseconds, request id,
//! trace id. The query string is never logged (it
//! may carry a cursor or a filter someone considers private), and a
//! response_url's path is its credential: its token is replaced by `…`.

use std::time::Instant;

use actix_web::Error;
use actix_web::HttpMessage;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use tracing::Instrument;

use crate::telemetry::trace::{RequestTrace, TraceParent};

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const TRACEPARENT: &str = "traceparent";

const RESPONSES: &str = "/api/v1/responses/";

/// The path as it may be logged: a response_url's token (its credential)
/// replaced by `…`.
pub fn loggable_path(path: &str) -> &str {
    if path.starts_with(RESPONSES) && path.len() > RESPONSES.len() {
        "/api/v1/responses/…"
    } else {
        path
    }
}

/// The route label of a request no route matched.
pub const UNMATCHED: &str = "unmatched";

/// A caller's request id when it is short and plain, else a new one.
fn request_id(req: &ServiceRequest) -> String {
    req.headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 64
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
        .map(str::to_string)
        .unwrap_or_else(|| crate::domain::ids::new_id("req"))
}

pub async fn log_request(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let parent = req
        .headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(TraceParent::parse);
    let method = req.method().clone();
    // This request's own span, in the caller's trace or a new one: the
    // exported span's ids when spans are exported, else ids of its own.
    let span = crate::telemetry::otlp::enabled()
        .then(|| crate::telemetry::otlp::request_span(method.as_str(), parent.as_ref()));
    let trace = span
        .as_ref()
        .and_then(|(_, at)| *at)
        .unwrap_or_else(|| parent.map_or_else(TraceParent::new_root, |p| p.child()));
    req.extensions_mut().insert(RequestTrace(trace));
    let id = request_id(&req);
    let path = loggable_path(req.path()).to_string();
    let res = match &span {
        Some((s, _)) => next.call(req).instrument(s.clone()).await,
        None => next.call(req).await,
    };
    let (status, route) = match &res {
        Ok(r) => (
            r.status().as_u16(),
            r.request()
                .match_pattern()
                .unwrap_or_else(|| UNMATCHED.to_string()),
        ),
        Err(e) => (
            e.as_response_error().status_code().as_u16(),
            UNMATCHED.to_string(),
        ),
    };
    let took = started.elapsed();
    if let Some((s, _)) = &span {
        crate::telemetry::otlp::end_request(s, &route, status);
    }
    crate::telemetry::metrics::http_request(&route, method.as_str(), status, took);
    tracing::info!(
        method = %method,
        route = %route,
        path = %path,
        status,
        duration_ms = took.as_millis() as u64,
        request_id = %id,
        trace_id = %trace.trace_id_hex(),
        "request"
    );
    res.map(|mut r| {
        if let Ok(v) = HeaderValue::from_str(&id) {
            r.headers_mut().insert(REQUEST_ID, v);
        }
        r
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_url_token_is_not_logged() {
        assert_eq!(
            loggable_path("/api/v1/responses/abc.def"),
            "/api/v1/responses/…"
        );
        assert_eq!(
            loggable_path("/api/v1/events/evt_1"),
            "/api/v1/events/evt_1"
        );
    }
}
