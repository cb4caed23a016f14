//! The claim loop, the per-delivery send step, and batched recording.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::web;
use parking_lot::Mutex;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{retry, signing, ssrf};
use crate::domain::model::Chatbot;
use crate::domain::time::now_ms;
use crate::http::AppState;
use crate::store::{AttemptNext, AttemptRecord, Claimed};

/// Most deliveries in flight at once, across all endpoints.
const GLOBAL_IN_FLIGHT: usize = 512;
/// Consecutive failures that open an endpoint's circuit.
const BREAKER_THRESHOLD: u32 = 5;
/// How long an open circuit rests before a probe.
const BREAKER_REST: Duration = Duration::from_secs(30);
const EXCERPT: usize = 1024;

#[derive(Default)]
struct Endpoint {
    in_flight: usize,
    consecutive_failures: u32,
    open_until: Option<Instant>,
}

pub struct Dispatcher {
    state: web::Data<AppState>,
    client: reqwest::Client,
    endpoints: Mutex<HashMap<String, Endpoint>>,
    global: Arc<Semaphore>,
    records: mpsc::UnboundedSender<AttemptRecord>,
    pub shutdown: CancellationToken,
    pub tracker: TaskTracker,
}

/// Starts the dispatcher: the claim loop and the recorder.
pub fn spawn(state: web::Data<AppState>) -> Result<Arc<Dispatcher>, String> {
    let client = super::client::build(state.config.delivery_timeout)?;
    let (tx, rx) = mpsc::unbounded_channel();
    let d = Arc::new(Dispatcher {
        state,
        client,
        endpoints: Mutex::new(HashMap::new()),
        global: Arc::new(Semaphore::new(GLOBAL_IN_FLIGHT)),
        records: tx,
        shutdown: CancellationToken::new(),
        tracker: TaskTracker::new(),
    });
    let recorder = tokio::spawn(record_loop(d.state.clone(), rx));
    let dd = d.clone();
    tokio::spawn(async move {
        dd.claim_loop().await;
        // In-flight sends finish (bounded by the delivery timeout), then the
        // recorder drains once every sender is gone.
        dd.tracker.close();
        dd.tracker.wait().await;
        drop(recorder);
    });
    Ok(d)
}

async fn record_loop(state: web::Data<AppState>, mut rx: mpsc::UnboundedReceiver<AttemptRecord>) {
    let mut batch = Vec::with_capacity(256);
    while rx.recv_many(&mut batch, 256).await > 0 {
        let records = std::mem::take(&mut batch);
        let mut tries = 0;
        loop {
            match state.store.record_attempts(records.clone()).await {
                Ok(()) => break,
                Err(e) => {
                    tries += 1;
                    tracing::error!(error = %e, tries, "recording delivery attempts failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * tries.min(25))).await;
                }
            }
        }
    }
}

impl Dispatcher {
    /// Chatbots not to claim for now: at their concurrency limit, or with an
    /// open circuit.
    fn skip_list(&self) -> Vec<String> {
        let now = Instant::now();
        let limit = self.state.config.endpoint_concurrency;
        self.endpoints
            .lock()
            .iter()
            .filter(|(_, e)| e.in_flight >= limit || e.open_until.is_some_and(|t| t > now))
            .map(|(k, _)| k.clone())
            .collect()
    }

    async fn claim_loop(self: &Arc<Self>) {
        let store = self.state.store.clone();
        let lease = (self.state.config.delivery_timeout * 3).max(Duration::from_secs(30));
        loop {
            if self.shutdown.is_cancelled() {
                return;
            }
            let free = self.global.available_permits();
            let mut claimed_any = false;
            if free > 0 {
                let now = now_ms();
                match store
                    .claim_due(
                        now,
                        now + lease.as_millis() as i64,
                        free.min(256),
                        self.skip_list(),
                    )
                    .await
                {
                    Ok(batch) => {
                        claimed_any = !batch.is_empty();
                        for c in batch {
                            self.start(c);
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "claiming deliveries failed");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
            if claimed_any {
                continue;
            }
            let wait = match store.next_due_at().await {
                Ok(Some(t)) => Duration::from_millis((t - now_ms()).clamp(1, 1000) as u64),
                _ => Duration::from_secs(1),
            };
            tokio::select! {
                _ = self.state.hub.new_events.notified() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = self.shutdown.cancelled() => return,
            }
        }
    }

    fn start(self: &Arc<Self>, c: Claimed) {
        let Ok(permit) = self.global.clone().try_acquire_owned() else {
            // No room after all: the lease expires and it is claimed again.
            return;
        };
        self.endpoints
            .lock()
            .entry(c.chatbot_id.clone())
            .or_default()
            .in_flight += 1;
        let d = self.clone();
        self.tracker.spawn(async move {
            let chatbot_id = c.chatbot_id.clone();
            let record = d.attempt(c).await;
            let ok = record.next == AttemptNext::Succeeded;
            {
                let mut eps = d.endpoints.lock();
                let e = eps.entry(chatbot_id).or_default();
                e.in_flight = e.in_flight.saturating_sub(1);
                if ok {
                    e.consecutive_failures = 0;
                    e.open_until = None;
                } else if record.error.as_deref() != Some("endpoint_disabled") {
                    e.consecutive_failures += 1;
                    if e.consecutive_failures >= BREAKER_THRESHOLD {
                        e.open_until = Some(Instant::now() + BREAKER_REST);
                    }
                }
            }
            let _ = d.records.send(record);
            drop(permit);
            d.state.hub.new_events.notify_one();
        });
    }

    /// One attempt: sign, send, classify. Never holds a transaction.
    pub async fn attempt(&self, c: Claimed) -> AttemptRecord {
        let number = c.attempts + 1;
        let started = Instant::now();
        let at_ms = now_ms();
        let mut rec = AttemptRecord {
            event_id: c.event_id.clone(),
            conversation_id: c.conversation_id.clone(),
            number,
            at_ms,
            status_code: None,
            duration_ms: 0,
            error: None,
            response_excerpt: None,
            next: AttemptNext::Succeeded,
        };
        let bot = match self.state.store.get_chatbot(&c.chatbot_id).await {
            Ok(b) => b,
            Err(e) => {
                rec.error = Some(format!("E_STORE: {e}"));
                rec.next = self.failure_next(number, None);
                return rec;
            }
        };
        let result = self.send(&bot, &c, number).await;
        rec.duration_ms = started.elapsed().as_millis() as i64;
        metrics::histogram!("blockhook_attempt_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        match result {
            Ok(resp) => {
                let status = resp.status();
                rec.status_code = Some(status.as_u16());
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let body = resp.bytes().await.unwrap_or_default();
                if !body.is_empty() {
                    let n = body.len().min(EXCERPT);
                    rec.response_excerpt = Some(String::from_utf8_lossy(&body[..n]).into_owned());
                }
                if status.is_success() {
                    rec.next = AttemptNext::Succeeded;
                    if let Some(err) = self.apply_webhook_reply(&c.payload, &body).await {
                        rec.error = Some(err);
                    }
                } else if status.as_u16() == 410 {
                    rec.error = Some("E_GONE: endpoint answered 410 Gone; disabled until its webhook_url changes".into());
                    rec.next = AttemptNext::EndpointGone;
                } else {
                    rec.error = Some(if status.is_redirection() {
                        format!("E_REDIRECT: {status} (redirects are not followed)")
                    } else {
                        format!("E_HTTP: {status}")
                    });
                    let ra = if matches!(status.as_u16(), 429 | 503) {
                        retry_after.and_then(|v| {
                            retry::retry_after(
                                &v,
                                std::time::SystemTime::now(),
                                self.state.config.retry_max_delay,
                            )
                        })
                    } else {
                        None
                    };
                    rec.next = self.failure_next(number, ra);
                }
            }
            Err(e) => {
                rec.error = Some(e);
                rec.next = self.failure_next(number, None);
            }
        }
        let outcome = match rec.next {
            AttemptNext::Succeeded => "succeeded",
            AttemptNext::Dead => "dead",
            AttemptNext::RetryAt(_) => "failed",
            AttemptNext::EndpointGone => "gone",
        };
        metrics::counter!("blockhook_deliveries_total", "outcome" => outcome).increment(1);
        rec
    }

    fn failure_next(&self, number: u32, retry_after: Option<Duration>) -> AttemptNext {
        let cfg = &self.state.config;
        if number >= cfg.retry_max_attempts {
            return AttemptNext::Dead;
        }
        let d = retry_after.unwrap_or_else(|| {
            retry::delay(
                number,
                cfg.retry_min_delay,
                cfg.retry_max_delay,
                rand::random(),
            )
        });
        AttemptNext::RetryAt(now_ms() + d.as_millis() as i64)
    }

    async fn send(
        &self,
        bot: &Chatbot,
        c: &Claimed,
        number: u32,
    ) -> Result<reqwest::Response, String> {
        ssrf::check(&bot.webhook_url, self.state.config.allow_private_webhooks)
            .await
            .map_err(|r| match r {
                ssrf::Refusal::Private(ip) => {
                    format!("E_PRIVATE_ADDRESS: {ip} is not a public address")
                }
                ssrf::Refusal::Unresolvable(m) => format!("E_DNS: {m}"),
                ssrf::Refusal::Invalid(m) => format!("E_URL: {m}"),
            })?;
        let ts = now_ms() / 1000;
        let sig = signing::header(&bot.live_secrets(now_ms()), &c.event_id, ts, &c.payload);
        self.client
            .post(&bot.webhook_url)
            .header("content-type", "application/json")
            .header("webhook-id", &c.event_id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sig)
            .header("X-MyAIChatbot-Attempt", number.to_string())
            .body(c.payload.clone())
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    format!(
                        "E_TIMEOUT: no answer within {:?}",
                        self.state.config.delivery_timeout
                    )
                } else if e.is_connect() {
                    format!("E_CONNECTION: {e}")
                } else {
                    format!("E_HTTP: {e}")
                }
            })
    }

    /// A 2xx answer whose JSON body is a reply is applied like a POST to the
    /// event's response_url. Returns an error note for the attempt if the
    /// reply was bad (the delivery still succeeded).
    async fn apply_webhook_reply(&self, payload: &[u8], body: &[u8]) -> Option<String> {
        let trimmed = body.iter().position(|b| !b.is_ascii_whitespace())?;
        if body[trimmed] != b'{' {
            return None;
        }
        let reply: serde_json::Value = serde_json::from_slice(body).ok()?;
        let obj = reply.as_object()?;
        const KEYS: [&str; 5] = [
            "text",
            "blocks",
            "metadata",
            "replace_original",
            "delete_original",
        ];
        if obj.is_empty() || !obj.keys().any(|k| KEYS.contains(&k.as_str())) {
            return None;
        }
        let event: serde_json::Value = serde_json::from_slice(payload).ok()?;
        let url = event.get("response_url")?.as_str()?;
        let token = url.rsplit('/').next()?;
        match crate::http::responses::apply_reply(&self.state, token, &reply, None).await {
            Ok(_) => None,
            Err(e) => Some(format!(
                "E_REPLY: the reply body was not applied: {} ({})",
                e.code(),
                reply_detail(&e)
            )),
        }
    }
}

fn reply_detail(e: &crate::error::ApiError) -> String {
    match e {
        crate::error::ApiError::Validation(errs) => errs
            .iter()
            .map(|f| format!("{} {}", f.field, f.code))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}
