//! The load generator: clicks over HTTP/1.1 keep-alive connections, in a
//! closed loop (C workers, one click in flight each) or an open loop (a
//! fixed arrival rate, timed from the schedule).
//!
//! With several server instances the bench is its own load balancer: a
//! conversation's k-th click goes to instance `(conversation + k) % N`, so
//! its clicks spread evenly over the instances and every two consecutive
//! ones land on different instances (a global round-robin would pin a
//! conversation to one instance whenever the worker count is a multiple
//! of N). The clicks alternate between the message's two buttons, so that
//! the receiver can tell a conversation's events apart and check their order.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::receiver::Tracker;

/// The two buttons a conversation's clicks alternate between, by the
/// parity of the click's number: the receiver checks it (see
/// [`super::check`]).
pub const ACTIONS: [&str; 2] = ["approve", "deny"];

/// One conversation's click, ready to send to any instance.
pub struct Target {
    pub idx: usize,
    /// The click's URL on each instance.
    pub urls: Vec<reqwest::Url>,
    pub auth: Option<HeaderValue>,
    /// The body of a click on each of [`ACTIONS`].
    pub bodies: [Bytes; 2],
    /// Clicks sent on this conversation so far.
    clicks: AtomicU64,
}

impl Target {
    pub fn new(
        idx: usize,
        urls: Vec<reqwest::Url>,
        auth: Option<HeaderValue>,
        bodies: [Bytes; 2],
    ) -> Self {
        Self {
            idx,
            urls,
            auth,
            bodies,
            clicks: AtomicU64::new(0),
        }
    }

    /// The next click: the instance it goes to and which button.
    fn next(&self) -> (&reqwest::Url, usize) {
        let k = self.clicks.fetch_add(1, Ordering::Relaxed) as usize;
        let n = self.urls.len().max(1);
        (&self.urls[(self.idx + k) % n], k % 2)
    }
}

/// What a load run got back.
#[derive(Debug, Default, Clone)]
pub struct Sent {
    pub accepted: u64,
    /// Click sent (or scheduled) → its 200 answer, in microseconds.
    pub accept_us: Vec<u64>,
    pub errors: u64,
    pub first_error: Option<String>,
    pub started: Option<Instant>,
    pub finished: Option<Instant>,
}

impl Sent {
    fn merge(&mut self, o: Sent) {
        self.accepted += o.accepted;
        self.accept_us.extend(o.accept_us);
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
        self.finished = self.finished.max(o.finished);
    }

    /// Accepted clicks per second, first send to last answer.
    pub fn per_s(&self) -> f64 {
        match (self.started, self.finished) {
            (Some(a), Some(b)) if b > a => self.accepted as f64 / (b - a).as_secs_f64(),
            _ => 0.0,
        }
    }
}

/// The client of the load generator: keep-alive HTTP/1.1, no proxy.
pub fn client(connections: usize) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .http1_only()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(connections)
        .pool_idle_timeout(Duration::from_secs(90))
        .timeout(Duration::from_secs(30))
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())
}

async fn send(
    client: &reqwest::Client,
    t: &Target,
    url: &reqwest::Url,
    action: usize,
) -> Result<(), String> {
    let mut req = client
        .post(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .body(t.bodies[action].clone());
    if let Some(a) = &t.auth {
        req = req.header(AUTHORIZATION, a.clone());
    }
    let r = req.send().await.map_err(|e| e.to_string())?;
    let status = r.status();
    // Read the answer to the end so the connection goes back to the pool.
    let body = r.bytes().await.unwrap_or_default();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ))
    }
}

/// One click on `t`, sent (or scheduled) at `at`, recorded in `out`.
async fn click(
    client: &reqwest::Client,
    tracker: &Tracker,
    t: &Target,
    at: Instant,
    out: &mut Sent,
) {
    let (url, action) = t.next();
    tracker.sent(t.idx, at, action);
    match send(client, t, url, action).await {
        Ok(()) => {
            out.accepted += 1;
            out.accept_us
                .push(at.elapsed().as_micros().min(u128::from(u64::MAX)) as u64);
        }
        Err(e) => {
            tracker.unsent(t.idx);
            out.errors += 1;
            out.first_error.get_or_insert(e);
        }
    }
    out.finished = Some(Instant::now());
}

/// `clicks` clicks by `concurrency` workers; worker w owns the targets
/// `idx % concurrency == w`, so no conversation has two clicks in flight.
pub async fn closed_loop(
    client: &reqwest::Client,
    targets: &Arc<Vec<Target>>,
    tracker: &Arc<Tracker>,
    clicks: u64,
    concurrency: usize,
) -> Sent {
    let c = concurrency.clamp(1, targets.len().max(1)) as u64;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..c {
        let share = clicks / c + u64::from(w < clicks % c);
        let (client, targets, tracker) = (client.clone(), targets.clone(), tracker.clone());
        tasks.spawn(async move {
            let mine: Vec<&Target> = targets
                .iter()
                .skip(w as usize)
                .step_by(c as usize)
                .collect();
            let mut out = Sent::default();
            for j in 0..share as usize {
                click(
                    &client,
                    &tracker,
                    mine[j % mine.len()],
                    Instant::now(),
                    &mut out,
                )
                .await;
            }
            out
        });
    }
    let mut total = Sent {
        started: Some(started),
        ..Sent::default()
    };
    while let Some(r) = tasks.join_next().await {
        total.merge(r.unwrap_or_default());
    }
    total
}

/// `total` clicks at `rate` per second. Click i is due at `t0 + i/rate`
/// and its latency counts from then, so a stall of the server delays the
/// clicks behind it and shows in their latency (no coordinated omission).
pub async fn open_loop(
    client: &reqwest::Client,
    targets: &Arc<Vec<Target>>,
    tracker: &Arc<Tracker>,
    rate: f64,
    total: u64,
) -> Sent {
    let mut senders = Vec::with_capacity(targets.len());
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..targets.len() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Instant>();
        senders.push(tx);
        let (client, targets, tracker) = (client.clone(), targets.clone(), tracker.clone());
        tasks.spawn(async move {
            let mut out = Sent::default();
            while let Some(at) = rx.recv().await {
                click(&client, &tracker, &targets[i], at, &mut out).await;
            }
            out
        });
    }
    let t0 = Instant::now() + Duration::from_millis(5);
    for i in 0..total {
        let due = t0 + Duration::from_secs_f64(i as f64 / rate.max(0.001));
        if due > Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
        let _ = senders[i as usize % senders.len()].send(due);
    }
    drop(senders);
    let mut out = Sent {
        started: Some(t0),
        ..Sent::default()
    };
    while let Some(r) = tasks.join_next().await {
        out.merge(r.unwrap_or_default());
    }
    out
}

async fn post(
    client: &reqwest::Client,
    url: String,
    bearer: &str,
    body: Value,
) -> Result<Value, String> {
    let r = client
        .post(&url)
        .bearer_auth(bearer)
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = r.status();
    let bytes = r.bytes().await.map_err(|e| format!("POST {url}: {e}"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| format!("POST {url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("POST {url}: {status} {v}"));
    }
    Ok(v)
}

/// A chatbot sending to `webhook_url` and `n` conversations, each with one
/// message of buttons that stay on after a click, made through the first of
/// `bases` (the instances share one database); returns one target each,
/// with its click URL on every instance, and the chatbot's API key.
pub async fn setup_blockhook(
    client: &reqwest::Client,
    bases: &[String],
    admin_token: &str,
    webhook_url: &str,
    n: usize,
    tracker: &Tracker,
) -> Result<(Vec<Target>, String), String> {
    let base = bases.first().ok_or("no server")?;
    let bot = post(
        client,
        format!("{base}/api/v1/chatbots"),
        admin_token,
        json!({"name": "bench", "webhook_url": webhook_url}),
    )
    .await?;
    let bot_id = bot["id"].as_str().unwrap_or_default().to_string();
    let key = bot["api_key"].as_str().unwrap_or_default().to_string();
    let bodies = ACTIONS.map(|a| Bytes::from(format!(r#"{{"block_id":"b1","action_id":"{a}"}}"#)));
    let made = futures_util::stream::iter(0..n)
        .map(|idx| {
            let (bot_id, key, bodies) = (&bot_id, &key, bodies.clone());
            async move {
                let conv = post(
                    client,
                    format!("{base}/widget/v1/chatbots/{bot_id}/conversations"),
                    "",
                    json!({}),
                )
                .await?;
                let cid = conv["conversation_id"].as_str().unwrap_or_default();
                let vt = conv["visitor_token"].as_str().unwrap_or_default();
                let msg = post(
                    client,
                    format!("{base}/api/v1/conversations/{cid}/messages"),
                    key,
                    json!({"text": "Pick one", "metadata": {"order_id": "4821"}, "blocks": [
                        {"type": "actions", "block_id": "b1", "disable_on_click": false, "elements": [
                            {"type": "button", "action_id": "approve", "label": "Approve", "value": "req_991", "style": "primary"},
                            {"type": "button", "action_id": "deny", "label": "Deny"}]}]}),
                )
                .await?;
                let mid = msg["id"].as_str().unwrap_or_default();
                let urls = bases
                    .iter()
                    .map(|b| {
                        let url = format!("{b}/widget/v1/messages/{mid}/clicks");
                        url.parse().map_err(|e| format!("{url}: {e}"))
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                tracker.register(cid, idx);
                Ok::<_, String>(Target::new(
                    idx,
                    urls,
                    Some(HeaderValue::from_str(&format!("Bearer {vt}")).map_err(|e| e.to_string())?),
                    bodies,
                ))
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    let mut targets = made.into_iter().collect::<Result<Vec<_>, String>>()?;
    targets.sort_by_key(|t| t.idx);
    Ok((targets, key))
}

/// Adds an endpoint (§13) to the chatbot of `key`: all its events to
/// `url`, or those `filter` takes.
pub async fn add_endpoint(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    url: &str,
    filter: Option<Value>,
    enabled: bool,
) -> Result<(), String> {
    post(
        client,
        format!("{base}/api/v1/endpoints"),
        key,
        json!({"url": url, "filter": filter, "enabled": enabled}),
    )
    .await
    .map(|_| ())
}

/// Targets for the floor forwarder: bodies that name a conversation, so the
/// receiver matches arrivals the same way.
pub fn setup_floor(base: &str, n: usize, tracker: &Tracker) -> Result<Vec<Target>, String> {
    let url: reqwest::Url = format!("{base}/forward")
        .parse()
        .map_err(|e| format!("{base}: {e}"))?;
    Ok((0..n)
        .map(|idx| {
            let cid = format!("floor_{idx}");
            tracker.register(&cid, idx);
            let bodies = ACTIONS.map(|a| {
                Bytes::from(format!(
                    r#"{{"conversation_id":"{cid}","block_id":"b1","action_id":"{a}"}}"#
                ))
            });
            Target::new(idx, vec![url.clone()], None, bodies)
        })
        .collect())
}
