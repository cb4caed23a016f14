//! OTLP/HTTP export of spans (§16), only when `--otlp-endpoint` (or the
//! standard `OTEL_EXPORTER_OTLP_ENDPOINT`) is given: the accepting request's
//! span, each store commit's and each delivery attempt's, through `tracing` and
//! `tracing-opentelemetry`, batched on the tokio runtime and flushed on a
//! graceful stop.
//!
//! Without an endpoint no layer is installed and [`enabled`] is false: the
//! request and the attempt take today's path ([`TraceParent`] ids of their
//! own, no span). With one, the ids in the `traceparent` kept with an event
//! and sent on each webhook POST are those of the exported spans, so the
//! trace a collector shows is the one a receiver sees.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer as _;

use super::trace::TraceParent;

/// The standard variable read when the flag is not given.
pub const OTEL_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The path of the traces signal under an OTLP/HTTP base URL.
const TRACES_PATH: &str = "/v1/traces";
/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a graceful stop waits for the last batch to be sent.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

static ENABLED: AtomicBool = AtomicBool::new(false);
/// The tracer of the spans made after the fact (store commits).
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether spans are exported (an endpoint was configured and the exporter
/// installed). False means no span is made at all.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The traces URL to export to: `--otlp-endpoint`, else
/// `OTEL_EXPORTER_OTLP_ENDPOINT` (`env`), else none. Either is an OTLP/HTTP
/// base URL (`http://collector:4318`), to which `/v1/traces` is added
/// unless it already ends so. A value that is not an http(s) URL is an
/// error that names the flag or variable.
pub fn endpoint(flag: Option<&str>, env: Option<&str>) -> Result<Option<String>, String> {
    let (name, raw) = match (flag, env) {
        (Some(f), _) => ("--otlp-endpoint", f),
        (None, Some(e)) if !e.trim().is_empty() => (OTEL_ENDPOINT_VAR, e),
        _ => return Ok(None),
    };
    let bad = || {
        format!(
            "{name} must be an http:// or https:// URL such as http://127.0.0.1:4318, got `{}`",
            crate::config::redact_url(raw)
        )
    };
    let mut url = url::Url::parse(raw.trim()).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad());
    }
    if !url.path().ends_with(TRACES_PATH) {
        let path = format!("{}{TRACES_PATH}", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(Some(url.to_string()))
}

/// The installed exporter; [`Exporter::shutdown`] sends what is left.
pub struct Exporter {
    provider: SdkTracerProvider,
}

/// Builds the OTLP/HTTP (protobuf) exporter for `url` and its batch
/// processor on the current tokio runtime. Returns the layer to install
/// with the log's.
pub fn build<S>(url: &str) -> Result<(Exporter, impl tracing_subscriber::Layer<S>), String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the OTLP client: {e}"))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("--otlp-endpoint: {e}"))?;
    let processor =
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            Resource::builder()
                .with_service_name("blockhook")
                .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                .build(),
        )
        .build();
    let tracer = provider.tracer("blockhook");
    let _ = TRACER.set(tracer.clone());
    // Only this crate's spans: log events stay log lines.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_threads(false)
        .with_location(false)
        .with_tracked_inactivity(false)
        .with_filter(tracing_subscriber::filter::filter_fn(|m| {
            m.is_span() && m.target().starts_with("blockhook")
        }));
    ENABLED.store(true, Ordering::Relaxed);
    Ok((Exporter { provider }, layer))
}

impl Exporter {
    /// Sends the spans still queued and stops the processor (on a graceful
    /// stop). The processor runs on this runtime: the wait is off it.
    pub async fn shutdown(self) {
        ENABLED.store(false, Ordering::Relaxed);
        let provider = self.provider;
        // The processor's own shutdown waits for the export however long
        // it takes: the stop waits at most FLUSH_TIMEOUT.
        let done = tokio::time::timeout(
            FLUSH_TIMEOUT,
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT)),
        )
        .await;
        match done {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the last spans could not be exported"),
            Ok(Err(e)) => tracing::warn!(error = %e, "the span exporter did not stop"),
            Err(_) => tracing::warn!(
                timeout = ?FLUSH_TIMEOUT,
                "the last spans were not exported in time; stopping without them"
            ),
        }
    }
}

/// An OpenTelemetry context whose remote parent is `p`.
fn remote(p: &TraceParent) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from_bytes(p.trace_id),
        SpanId::from_bytes(p.span_id),
        TraceFlags::new(p.flags),
        true,
        TraceState::default(),
    ))
}

/// The position of an exported span, or `None` when it was not started
/// (no exporter, or a disabled span).
fn position(span: &tracing::Span) -> Option<TraceParent> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| TraceParent {
        trace_id: sc.trace_id().to_bytes(),
        span_id: sc.span_id().to_bytes(),
        flags: sc.trace_flags().to_u8(),
    })
}

/// The span of an accepted request, continuing `parent` (the caller's
/// `traceparent`) when there is one, and its position. Named by the route
/// pattern when it ends ([`end_request`]).
pub fn request_span(
    method: &str,
    parent: Option<&TraceParent>,
) -> (tracing::Span, Option<TraceParent>) {
    let span = tracing::info_span!(
        target: "blockhook::http",
        "request",
        otel.kind = "server",
        http.request.method = method,
    );
    if let Some(p) = parent {
        let _ = span.set_parent(remote(p));
    }
    let at = position(&span);
    (span, at)
}

/// Ends a request's span: its name is the route pattern, with the status.
pub fn end_request(span: &tracing::Span, route: &str, status: u16) {
    let cx = span.context();
    let s = cx.span();
    s.update_name(route.to_string());
    s.set_attributes([
        KeyValue::new("http.route", route.to_string()),
        KeyValue::new("http.response.status_code", i64::from(status)),
    ]);
    if status >= 500 {
        s.set_status(Status::error(format!("HTTP {status}")));
    }
}

/// The span of one delivery attempt, a child of the span kept with the
/// event (`event_trace`, the accepting request's) or a new trace for an
/// event kept without one; and the `traceparent` its POST carries.
pub fn attempt_span(
    event_trace: Option<&str>,
    event_id: &str,
    endpoint_id: &str,
    attempt: u32,
) -> (tracing::Span, Option<TraceParent>) {
    let span = tracing::info_span!(
        target: "blockhook::delivery",
        "webhook delivery",
        otel.kind = "client",
        blockhook.event_id = event_id,
        blockhook.endpoint_id = endpoint_id,
        blockhook.attempt = i64::from(attempt),
    );
    if let Some(p) = event_trace.and_then(TraceParent::parse) {
        let _ = span.set_parent(remote(&p));
    }
    let at = position(&span);
    (span, at)
}

/// Ends an attempt's span with the receiver's status code (none for a
/// transport error) and the error code when it failed.
pub fn end_attempt(span: &tracing::Span, status: Option<u16>, error: Option<&str>) {
    let cx = span.context();
    let s = cx.span();
    if let Some(code) = status {
        s.set_attribute(KeyValue::new("http.response.status_code", i64::from(code)));
    }
    if let Some(e) = error {
        // The code only: a transport error's text names the URL.
        let code = e.split(':').next().unwrap_or(e).to_string();
        s.set_attribute(KeyValue::new("error.type", code.clone()));
        s.set_status(Status::error(code));
    }
}

/// A store commit that just took `took`: a span of its own, the child of
/// the request being served when the commit is that request's, else a
/// trace of its own (a batch of several requests' writes).
pub fn store_commit(took: Duration) {
    if !enabled() {
        return;
    }
    let Some(tracer) = TRACER.get() else {
        return;
    };
    let end = SystemTime::now();
    let start = end.checked_sub(took).unwrap_or(end);
    let parent = tracing::Span::current().context();
    let mut span = tracer
        .span_builder("store commit")
        .with_kind(SpanKind::Internal)
        .with_start_time(start)
        .start_with_context(tracer, &parent);
    span.end_with_timestamp(end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_a_base_url_with_the_traces_path_added() {
        assert_eq!(endpoint(None, None), Ok(None));
        assert_eq!(endpoint(None, Some(" ")), Ok(None));
        assert_eq!(
            endpoint(Some("http://127.0.0.1:4318"), None),
            Ok(Some("http://127.0.0.1:4318/v1/traces".to_string()))
        );
        assert_eq!(
            endpoint(Some("https://otel.example.com/base/"), Some("http://x")),
            Ok(Some("https://otel.example.com/base/v1/traces".to_string()))
        );
        assert_eq!(
            endpoint(None, Some("http://collector:4318/v1/traces")),
            Ok(Some("http://collector:4318/v1/traces".to_string()))
        );
        let e = endpoint(Some("collector:4318"), None).expect_err("no scheme");
        assert!(e.contains("--otlp-endpoint"), "{e}");
        let e = endpoint(None, Some("ftp://collector")).expect_err("not http");
        assert!(e.contains(OTEL_ENDPOINT_VAR), "{e}");
    }
}
