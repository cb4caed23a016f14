//! One log line per request at INFO: method, path, status, duration. The
//! query string is never logged (it may carry a cursor or a filter someone
//! considers private), and a response_url's path is its credential: the
//! token is replaced by `…`.

use std::time::Instant;

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;

const RESPONSES: &str = "/api/v1/responses/";

/// The path as it may be logged.
pub fn loggable_path(path: &str) -> &str {
    if path.starts_with(RESPONSES) && path.len() > RESPONSES.len() {
        "/api/v1/responses/…"
    } else {
        path
    }
}

pub async fn log_request(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    if !tracing::enabled!(tracing::Level::INFO) {
        return next.call(req).await;
    }
    let started = Instant::now();
    let method = req.method().clone();
    let path = loggable_path(req.path()).to_string();
    let res = next.call(req).await;
    let status = match &res {
        Ok(r) => r.status().as_u16(),
        Err(e) => e.as_response_error().status_code().as_u16(),
    };
    tracing::info!(
        method = %method,
        path = %path,
        status,
        duration_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    res
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
