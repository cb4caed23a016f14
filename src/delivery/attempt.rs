//! One delivery attempt: sign, POST the stored bytes, classify the answer.
//! Pure of storage: the outcome is returned for batched recording, and no
//! transaction is open while the request is in flight.

use std::time::{Duration, Instant};

use reqwest::header::HeaderName;

use super::{reply, retry, signing, ssrf};
use crate::domain::model::Chatbot;
use crate::domain::time::now_ms;
use crate::store::fanout::DefaultSettings;
use crate::store::{AttemptNext, AttemptRecord, Claimed};
use crate::telemetry::metrics::{Outcome, endpoint_label};
use crate::telemetry::trace::TraceParent;
use crate::usecase::Services;

/// The bytes of a response body kept in the attempt log.
const EXCERPT: usize = 1024;
/// The most of a response body read (a reply is at most this long).
const MAX_BODY: usize = 1024 * 1024;

/// Where one attempt goes: an endpoint's URL, its live secrets and extra
/// headers, and whether its 2xx reply is applied.
pub struct Target<'a> {
    pub url: &'a str,
    pub secrets: Vec<&'a str>,
    pub headers: &'a [(String, String)],
    pub replies: bool,
    /// Its id as logged and counted.
    pub endpoint_id: std::borrow::Cow<'a, str>,
    pub chatbot_id: &'a str,
}

impl<'a> Target<'a> {
    /// A chatbot's default endpoint: its `webhook_url` and secrets, and
    /// its own headers and `replies` when it has a settings row.
    pub fn default_of(bot: &'a Chatbot, own: Option<&'a DefaultSettings>, now_ms: i64) -> Self {
        Target {
            url: &bot.webhook_url,
            secrets: bot.live_secrets(now_ms),
            headers: own.map_or(&[], |s| s.headers.as_slice()),
            replies: own.is_none_or(|s| s.replies),
            endpoint_id: endpoint_label(bot).into(),
            chatbot_id: &bot.id,
        }
    }
}

/// Sends attempt number `c.attempts + 1` of a claimed delivery to `bot`'s
/// default endpoint (`own`: its settings, if it has a settings row).
pub async fn run(
    st: &Services,
    client: &reqwest::Client,
    bot: &Chatbot,
    own: Option<&DefaultSettings>,
    c: &Claimed,
) -> AttemptRecord {
    run_to(st, client, &Target::default_of(bot, own, now_ms()), c).await
}

/// Sends attempt number `c.attempts + 1` of a claimed delivery to `to`.
pub async fn run_to(
    st: &Services,
    client: &reqwest::Client,
    to: &Target<'_>,
    c: &Claimed,
) -> AttemptRecord {
    let number = c.attempts + 1;
    let started = Instant::now();
    let mut rec = AttemptRecord::of(c, number, now_ms(), AttemptNext::Succeeded);
    // The attempt's span: exported when OTLP export is on, else only its
    // position in the trace, for the `traceparent` header.
    let span = crate::telemetry::otlp::enabled().then(|| {
        crate::telemetry::otlp::attempt_span(
            c.trace.as_deref(),
            &c.event_id,
            &to.endpoint_id,
            number,
        )
    });
    let trace = span
        .as_ref()
        .and_then(|(_, at)| *at)
        .unwrap_or_else(|| attempt_trace(c.trace.as_deref()));
    match send(st, client, to, c, number, trace, &mut rec.request_headers).await {
        Ok(mut resp) => {
            let status = resp.status();
            rec.status_code = Some(status.as_u16());
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let (body, complete) = read_bounded(&mut resp, MAX_BODY).await;
            if !body.is_empty() {
                let n = body.len().min(EXCERPT);
                rec.response_excerpt = Some(String::from_utf8_lossy(&body[..n]).into_owned());
            }
            if status.is_success() {
                if complete && to.replies {
                    rec.error = reply::apply(st, &c.payload, &body).await;
                }
            } else if status == reqwest::StatusCode::GONE {
                rec.error = Some(
                    "E_GONE: the endpoint answered 410 Gone; it is disabled until its webhook_url changes or it is re-enabled"
                        .into(),
                );
                rec.next = AttemptNext::EndpointGone;
            } else {
                rec.error = Some(if status.is_redirection() {
                    format!("E_REDIRECT: {status} (redirects are failures and never followed)")
                } else {
                    format!("E_HTTP_STATUS: {status}")
                });
                let honoured = matches!(status.as_u16(), 429 | 503)
                    .then_some(retry_after)
                    .flatten()
                    .and_then(|v| {
                        retry::retry_after(
                            &v,
                            std::time::SystemTime::now(),
                            st.settings.retry_max_delay,
                        )
                    });
                rec.next = failure_next(st, number - c.attempt_base, honoured);
            }
        }
        Err(e) => {
            rec.error = Some(e);
            rec.next = failure_next(st, number - c.attempt_base, None);
        }
    }
    rec.duration_ms = started.elapsed().as_millis() as i64;
    // One line per attempt; the endpoint's URL is not logged (its query
    // may hold a secret), the chatbot id says whose it is.
    let outcome = match rec.next {
        AttemptNext::Succeeded => "succeeded",
        AttemptNext::Dead => "dead",
        AttemptNext::RetryAt(_) => "retrying",
        AttemptNext::EndpointGone => "endpoint_gone",
        AttemptNext::Skipped => "skipped",
    };
    tracing::info!(
        event_id = %rec.event_id,
        endpoint_id = %to.endpoint_id,
        chatbot_id = %to.chatbot_id,
        attempt = number,
        status = rec.status_code,
        duration_ms = rec.duration_ms,
        outcome,
        // The code only (`E_TIMEOUT`, `E_HTTP_STATUS`): a transport
        // error's text names the URL.
        error = rec.error.as_deref().and_then(|e| e.split(':').next()),
        "delivery attempt"
    );
    if let Some((s, _)) = &span {
        crate::telemetry::otlp::end_attempt(s, rec.status_code, rec.error.as_deref());
    }
    let counted = match rec.next {
        AttemptNext::Succeeded | AttemptNext::Skipped => Outcome::Succeeded,
        AttemptNext::Dead => Outcome::Dead,
        AttemptNext::RetryAt(_) => Outcome::Failed,
        AttemptNext::EndpointGone => Outcome::Gone,
    };
    crate::telemetry::metrics::attempt(&to.endpoint_id, counted, started.elapsed());
    rec
}

/// What an attempt's next step tells its endpoint's circuit breaker.
pub fn outcome(next: &AttemptNext) -> super::breaker::Outcome {
    use super::breaker::Outcome as B;
    match next {
        AttemptNext::Succeeded | AttemptNext::Skipped => B::Success,
        AttemptNext::EndpointGone => B::Disabled,
        AttemptNext::RetryAt(_) | AttemptNext::Dead => B::Failure,
    }
}

/// A failed attempt's next step: a retry at a time, or `dead` after the last.
/// `number` counts the attempts since the event was (re)queued.
pub fn failure_next(st: &Services, number: u32, retry_after: Option<Duration>) -> AttemptNext {
    let cfg = &st.settings;
    if number >= cfg.retry_max_attempts {
        return AttemptNext::Dead;
    }
    let d = retry::next_delay(
        number,
        cfg.retry_min_delay,
        cfg.retry_max_delay,
        rand::random(),
        retry_after,
    );
    AttemptNext::RetryAt(now_ms() + d.as_millis() as i64)
}

/// The Standard Webhooks headers and the attempt number, named once.
const WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
const WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
const WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");
const ATTEMPT: HeaderName = HeaderName::from_static("x-myaichatbot-attempt");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The `traceparent` of one attempt: a span of its own in the trace of the
/// request that caused the event (a new trace for an event kept without
/// one, such as one accepted before traces were kept).
pub fn attempt_trace(event_trace: Option<&str>) -> TraceParent {
    event_trace
        .and_then(TraceParent::parse)
        .map_or_else(TraceParent::new_root, |t| t.child())
}

async fn send(
    st: &Services,
    client: &reqwest::Client,
    to: &Target<'_>,
    c: &Claimed,
    number: u32,
    trace: TraceParent,
    sent_headers: &mut Option<String>,
) -> Result<reqwest::Response, String> {
    // Parsed once: the checked URL is the one sent to.
    let url = ssrf::check_literal(to.url, st.settings.allow_private_webhooks)
        .map_err(|r| refusal_error(&r))?;
    let ts = now_ms() / 1000;
    let sig = signing::header(&to.secrets, &c.event_id, ts, &c.payload);
    let mut req = client.post(url);
    for (k, v) in to.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(WEBHOOK_ID, c.event_id.as_str())
        .header(WEBHOOK_TIMESTAMP, reqwest::header::HeaderValue::from(ts))
        .header(WEBHOOK_SIGNATURE, sig)
        .header(ATTEMPT, reqwest::header::HeaderValue::from(number))
        .header(TRACEPARENT, trace.to_string())
        .body(c.payload.clone())
        .build()
        .map_err(|e| format!("E_REQUEST: {}", causes(&e)))?;
    *sent_headers = Some(headers_json(req.headers(), c.payload.len()));
    client.execute(req).await.map_err(|e| {
        if let Some(r) = ssrf::refusal_in(&e) {
            refusal_error(r)
        } else if e.is_timeout() {
            format!(
                "E_TIMEOUT: no answer within {:?}",
                st.settings.delivery_timeout
            )
        } else if e.is_connect() {
            format!("E_CONNECTION: {}", causes(&e))
        } else {
            format!("E_REQUEST: {}", causes(&e))
        }
    })
}

/// The headers of a request as sent, as one JSON object (the length the
/// connection adds included), for the attempt log. Written straight into
/// one buffer: it runs on every attempt.
fn headers_json(headers: &reqwest::header::HeaderMap, body_len: usize) -> String {
    use std::io::Write;
    let mut out = Vec::with_capacity(384);
    out.push(b'{');
    for (k, v) in headers {
        // A header name is a lowercase token: nothing in it needs escaping.
        out.push(b'"');
        out.extend_from_slice(k.as_str().as_bytes());
        out.extend_from_slice(b"\":");
        let _ = serde_json::to_writer(&mut out, &*String::from_utf8_lossy(v.as_bytes()));
        out.push(b',');
    }
    let _ = write!(out, "\"content-length\":\"{body_len}\"}}");
    String::from_utf8(out).unwrap_or_default()
}

fn refusal_error(r: &ssrf::Refusal) -> String {
    match r {
        ssrf::Refusal::Private(ip) => format!(
            "E_PRIVATE_ADDRESS: {ip} is a private address; nothing was sent (--allow-private-webhooks is off)"
        ),
        ssrf::Refusal::Unresolvable(m) => format!("E_DNS: {m}"),
        ssrf::Refusal::Invalid(m) => format!("E_URL: {m}"),
    }
}

/// An error and its causes on one line.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// Reads at most `max` bytes of the body; `complete` is false when the body
/// was longer or broke off.
async fn read_bounded(resp: &mut reqwest::Response, max: usize) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    let room = max - body.len();
                    body.extend_from_slice(&chunk[..room]);
                    return (body, false);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return (body, true),
            Err(_) => return (body, false),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_headers_sent_are_one_json_object() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("webhook-id", "evt_1".parse().expect("value"));
        h.insert(
            "webhook-signature",
            "v1,a+b/c= v1,\"q\"".parse().expect("value"),
        );
        let v: serde_json::Value =
            serde_json::from_str(&super::headers_json(&h, 42)).expect("JSON");
        assert_eq!(
            v,
            serde_json::json!({"webhook-id": "evt_1", "webhook-signature": "v1,a+b/c= v1,\"q\"", "content-length": "42"})
        );
    }
}
