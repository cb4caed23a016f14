//! A small Server-Sent Events client over a real HTTP connection: reads the
//! body with `bytes_stream()` and parses `id:`/`event:`/`data:` lines.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::helpers::{Conv, TestApp};

/// One event as the stream delivered it.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<i64>,
    pub event: String,
    pub data: Value,
    /// When the client parsed it.
    pub at: Instant,
}

/// An open stream; the reading task ends when this is dropped.
pub struct Sse {
    rx: mpsc::UnboundedReceiver<SseEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sse {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Parses one frame (the lines between blank lines). Comments and `retry:`
/// yield nothing.
fn parse_frame(frame: &str) -> Option<SseEvent> {
    let (mut id, mut event, mut data) = (None, None, Vec::new());
    for line in frame.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => id = Some(value.parse::<i64>().expect("numeric event id")),
            "event" => event = Some(value.to_string()),
            "data" => data.push(value.to_string()),
            _ => {}
        }
    }
    if data.is_empty() {
        return None;
    }
    let data = data.join("\n");
    Some(SseEvent {
        id,
        event: event.unwrap_or_else(|| "message".into()),
        data: serde_json::from_str(&data).expect("data is JSON"),
        at: Instant::now(),
    })
}

impl Sse {
    /// Opens the widget stream of `conv`, optionally resuming after
    /// `last_event_id`. Returns once the response headers arrived.
    pub async fn connect(app: &TestApp, conv: &Conv, last_event_id: Option<i64>) -> Sse {
        Self::connect_at(&app.address, app, conv, last_event_id).await
    }

    /// As [`Sse::connect`], against the server at `address`.
    pub async fn connect_at(
        address: &str,
        app: &TestApp,
        conv: &Conv,
        last_event_id: Option<i64>,
    ) -> Sse {
        let mut req = app
            .client
            .get(format!(
                "{address}/widget/v1/conversations/{}/stream",
                conv.id
            ))
            .bearer_auth(&conv.token);
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = req.send().await.expect("stream request");
        assert_eq!(resp.status(), 200, "stream status");
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert!(ct.starts_with("text/event-stream"), "content-type {ct}");
        let (tx, rx) = mpsc::unbounded_channel();
        let mut body = resp.bytes_stream();
        let task = actix_web::rt::spawn(async move {
            let mut buf = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n"));
                while let Some(end) = buf.find("\n\n") {
                    let frame: String = buf.drain(..end + 2).collect();
                    if let Some(e) = parse_frame(&frame)
                        && tx.send(e).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Sse { rx, task }
    }

    /// The next event, or `None` after `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseEvent> {
        tokio::time::timeout(timeout, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Whether the server ends the stream within `timeout` (events sent
    /// before the end are skipped).
    pub async fn ended(&mut self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(None) => return true,
                Ok(Some(_)) => {}
                Err(_) => return false,
            }
        }
    }

    /// Every event up to and including the first that satisfies `pred`;
    /// panics if none does within `timeout`.
    pub async fn until(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&SseEvent) -> bool,
    ) -> Vec<SseEvent> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(e) => {
                    let done = pred(&e);
                    seen.push(e);
                    if done {
                        return seen;
                    }
                }
                None => panic!("no matching stream event within {timeout:?}; saw {seen:#?}"),
            }
        }
    }
}
