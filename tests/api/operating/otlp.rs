//! OTLP/HTTP export from a real `blockhook serve` to a real collector on
//! loopback (decoded with the OTLP protobuf definitions): a click's request
//! span, store commits' spans and its delivery attempt's span arrive, share the trace id the
//! webhook receiver saw in `traceparent`, and the attempt's parent is the
//! click's span; a caller's `traceparent` is continued. Without an
//! endpoint nothing is sent. (The store plays no part: SQLite only.)

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::{Span, span::SpanKind};
use parking_lot::Mutex;
use prost::Message;
use serde_json::{Value, json};

use super::logs::{start_with, stop};
use crate::helpers::{Received, Receiver, TestApp};

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const CLICK_ROUTE: &str = "/widget/v1/messages/{mid}/clicks";

/// Each request's path and, for a traces export, its decoded body.
type Seen = Arc<Mutex<Vec<(String, Option<ExportTraceServiceRequest>)>>>;

/// A collector: every POST to `/v1/traces` decoded and kept; any other
/// request counted as one too (so "nothing sent" means nothing at all).
struct Collector {
    url: String,
    requests: Seen,
    handle: actix_web::dev::ServerHandle,
}

impl Collector {
    async fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests: Seen = Arc::default();
        let seen = requests.clone();
        let server = HttpServer::new(move || {
            let seen = seen.clone();
            App::new()
                .app_data(web::PayloadConfig::new(16 * 1024 * 1024))
                .default_service(web::to(
                    move |req: actix_web::HttpRequest, body: web::Bytes| {
                        let seen = seen.clone();
                        async move {
                            let decoded = (req.method() == "POST" && req.path() == "/v1/traces")
                                .then(|| ExportTraceServiceRequest::decode(body.as_ref()).ok())
                                .flatten();
                            let ok = decoded.is_some();
                            seen.lock().push((req.path().to_string(), decoded));
                            if ok {
                                HttpResponse::Ok()
                                    .content_type("application/x-protobuf")
                                    .finish()
                            } else {
                                HttpResponse::BadRequest().finish()
                            }
                        }
                    },
                ))
        })
        .workers(1)
        .listen(listener)
        .expect("listen")
        .run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Collector {
            url: format!("http://127.0.0.1:{port}"),
            requests,
            handle,
        }
    }

    fn request_count(&self) -> usize {
        self.requests.lock().len()
    }

    /// Every span received so far.
    fn spans(&self) -> Vec<Span> {
        let r = self.requests.lock();
        for (path, body) in r.iter() {
            assert_eq!(path, "/v1/traces", "an OTLP/HTTP traces export");
            assert!(body.is_some(), "a protobuf ExportTraceServiceRequest");
        }
        r.iter()
            .filter_map(|(_, b)| b.as_ref())
            .flat_map(|b| &b.resource_spans)
            .flat_map(|rs| &rs.scope_spans)
            .flat_map(|ss| ss.spans.iter().cloned())
            .collect()
    }

    async fn stop(self) {
        self.handle.stop(false).await;
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn attr(s: &Span, key: &str) -> Option<Any> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

fn str_attr(s: &Span, key: &str) -> Option<String> {
    match attr(s, key) {
        Some(Any::StringValue(v)) => Some(v),
        _ => None,
    }
}

fn int_attr(s: &Span, key: &str) -> Option<i64> {
    match attr(s, key) {
        Some(Any::IntValue(v)) => Some(v),
        _ => None,
    }
}

/// `traceparent` as a receiver got it: (trace id, span id).
fn traceparent(g: &Received) -> (String, String) {
    let h = g
        .header("traceparent")
        .expect("a traceparent on the webhook");
    let p: Vec<&str> = h.split('-').collect();
    assert_eq!(p.len(), 4, "{h}");
    (p[1].to_string(), p[2].to_string())
}

/// One click on a fresh button message, with `traceparent` when given;
/// returns what the receiver got and the event's id once delivered.
async fn click(
    app: &TestApp,
    rx: &mut Receiver,
    bot: &crate::helpers::Bot,
    trace: Option<&str>,
) -> (Received, String) {
    let conv = app.create_conv(bot).await;
    let m = app.buttons(bot, &conv, false).await;
    let mid = m["id"].as_str().expect("id");
    let mut req = app
        .client
        .post(app.url(&format!("/widget/v1/messages/{mid}/clicks")))
        .bearer_auth(&conv.token)
        .json(&json!({"block_id": "b1", "action_id": "approve"}));
    if let Some(t) = trace {
        req = req.header("traceparent", t);
    }
    let r = req.send().await.expect("click");
    assert_eq!(r.status(), 200);
    let got = rx.take(1, Duration::from_secs(10)).await.remove(0);
    let event: Value = got.json();
    let event_id = event["event_id"].as_str().expect("event_id").to_string();
    app.wait_event(bot, &event_id, Duration::from_secs(10), |e| {
        e["status"] == "succeeded"
    })
    .await;
    (got, event_id)
}

/// The click's request span and its delivery's span, checked against what
/// the receiver got.
fn check_click(spans: &[Span], got: &Received, event_id: &str, bot_id: &str) -> (Span, Span) {
    let (trace_id, attempt_span_id) = traceparent(got);
    let delivery = spans
        .iter()
        .find(|s| str_attr(s, "blockhook.event_id").as_deref() == Some(event_id))
        .unwrap_or_else(|| panic!("no delivery span of {event_id} in {spans:#?}"))
        .clone();
    assert_eq!(delivery.name, "webhook delivery");
    assert_eq!(delivery.kind, SpanKind::Client as i32);
    assert_eq!(hex(&delivery.trace_id), trace_id, "the receiver's trace");
    assert_eq!(
        hex(&delivery.span_id),
        attempt_span_id,
        "the attempt's own span"
    );
    assert_eq!(
        str_attr(&delivery, "blockhook.endpoint_id"),
        Some(bot_id.replacen("cb_", "ep_", 1)),
        "the default endpoint's id"
    );
    assert_eq!(
        int_attr(&delivery, "blockhook.attempt"),
        Some(1),
        "{delivery:?}"
    );
    assert_eq!(int_attr(&delivery, "http.response.status_code"), Some(200));
    // Its parent is the click's request span, in the same trace.
    let request = spans
        .iter()
        .find(|s| s.span_id == delivery.parent_span_id)
        .unwrap_or_else(|| panic!("the delivery's parent is not exported: {spans:#?}"))
        .clone();
    assert_eq!(request.name, CLICK_ROUTE, "named by its route pattern");
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(request.trace_id, delivery.trace_id);
    assert_eq!(
        str_attr(&request, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        str_attr(&request, "http.route").as_deref(),
        Some(CLICK_ROUTE)
    );
    assert_eq!(int_attr(&request, "http.response.status_code"), Some(200));
    assert!(request.end_time_unix_nano >= request.start_time_unix_nano);
    (request, delivery)
}

#[actix_web::test]
async fn a_click_and_its_delivery_are_exported_as_one_trace_and_flushed_on_stop() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _, app) = start_with(&dir, &["--otlp-endpoint", &collector.url], &[]);
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;

    let (got, event_id) = click(&app, &mut rx, &bot, Some(CALLER)).await;
    let (fresh, fresh_id) = click(&app, &mut rx, &bot, None).await;
    // The batch goes out every few seconds; a clean stop sends what is left.
    let (status, _, err) = stop(server).await;
    assert_eq!(status.code(), Some(0), "{err}");
    let spans = collector.spans();

    // The caller's trace is continued: the click's span is its child.
    let (request, _) = check_click(&spans, &got, &event_id, &bot.id);
    assert_eq!(hex(&request.trace_id), CALLER_TRACE);
    assert_eq!(hex(&request.parent_span_id), CALLER_SPAN);
    assert_eq!(traceparent(&got).0, CALLER_TRACE);

    // Without a traceparent the click starts a trace, which its webhook
    // carries.
    let (request, _) = check_click(&spans, &fresh, &fresh_id, &bot.id);
    assert!(request.parent_span_id.is_empty(), "a root span");
    assert_ne!(hex(&request.trace_id), CALLER_TRACE);

    // Store commits are spans too.
    let commit = spans
        .iter()
        .find(|s| s.name == "store commit")
        .unwrap_or_else(|| panic!("no store commit span in {spans:#?}"));
    assert_eq!(commit.kind, SpanKind::Internal as i32);
    assert!(commit.end_time_unix_nano >= commit.start_time_unix_nano);
    collector.stop().await;
}

#[actix_web::test]
async fn the_standard_variable_configures_the_export_too() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _, app) = start_with(
        &dir,
        &[],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str())],
    );
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let (got, event_id) = click(&app, &mut rx, &bot, Some(CALLER)).await;
    let (status, _, err) = stop(server).await;
    assert_eq!(status.code(), Some(0), "{err}");
    check_click(&collector.spans(), &got, &event_id, &bot.id);
    collector.stop().await;
}

#[actix_web::test]
async fn without_an_endpoint_nothing_is_exported() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _, app) = start_with(&dir, &[], &[]);
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let (got, _) = click(&app, &mut rx, &bot, Some(CALLER)).await;
    // The trace context still reaches the receiver.
    assert_eq!(traceparent(&got).0, CALLER_TRACE);
    let (status, _, err) = stop(server).await;
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(collector.request_count(), 0, "nothing sent");
    collector.stop().await;
}

#[actix_web::test]
async fn a_bad_endpoint_is_a_configuration_error_that_names_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .current_dir(dir.path())
        .args(["serve", "--otlp-endpoint", "collector:4318"])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("BLOCKHOOK_OTLP_ENDPOINT")
        .output()
        .expect("run blockhook");
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--otlp-endpoint"), "{err}");
}
