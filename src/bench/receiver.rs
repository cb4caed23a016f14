//! The bench's own webhook receiver: answers 200 at once and matches every
//! arrival to the click that caused it.
//!
//! A click's answer does not carry its event id, so arrivals are matched by
//! conversation: each conversation has at most one click in flight and its
//! events arrive in the order they were accepted, so the k-th arrival for a
//! conversation belongs to its k-th click — which [`super::check`] checks.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use parking_lot::{Mutex, RwLock};

use super::check::{Order, string_field};

/// What the receiver saw since the last [`Tracker::reset`].
#[derive(Debug, Default, Clone)]
pub struct Arrivals {
    /// Click sent (or scheduled) → webhook arrived, in microseconds.
    pub latencies_us: Vec<u64>,
    pub first: Option<Instant>,
    pub last: Option<Instant>,
    pub matched: u64,
    /// Arrivals with no click waiting for them (should stay 0).
    pub unmatched: u64,
    /// A `webhook-id` seen before (at-least-once redelivery).
    pub duplicates: u64,
    /// Arrivals that are not the event of their conversation's next click.
    pub out_of_order: u64,
}

/// One conversation's clicks waiting for their events (when each was sent
/// and which button), and the order of what arrived.
#[derive(Default)]
struct Conversation {
    waiting: VecDeque<(Instant, usize)>,
    order: Order,
}

/// Send times per conversation, and what arrived.
pub struct Tracker {
    index: RwLock<HashMap<String, usize>>,
    queues: Vec<Mutex<Conversation>>,
    arrivals: Mutex<Arrivals>,
    seen: Mutex<HashSet<Box<str>>>,
}

impl Tracker {
    pub fn new(conversations: usize) -> Arc<Self> {
        Arc::new(Self {
            index: RwLock::new(HashMap::with_capacity(conversations)),
            queues: (0..conversations)
                .map(|_| Mutex::new(Conversation::default()))
                .collect(),
            arrivals: Mutex::new(Arrivals::default()),
            seen: Mutex::new(HashSet::new()),
        })
    }

    /// Names conversation `idx` by the id its events carry.
    pub fn register(&self, conversation_id: &str, idx: usize) {
        self.index.write().insert(conversation_id.to_string(), idx);
    }

    /// A click on conversation `idx`, on button `action` of
    /// [`super::load::ACTIONS`], is sent (or was scheduled) at `at`.
    pub fn sent(&self, idx: usize, at: Instant, action: usize) {
        self.queues[idx].lock().waiting.push_back((at, action));
    }

    /// The last click on `idx` was refused: no event will come for it.
    pub fn unsent(&self, idx: usize) {
        self.queues[idx].lock().waiting.pop_back();
    }

    pub(super) fn arrived(&self, body: &[u8], webhook_id: Option<&[u8]>, at: Instant) {
        if let Some(id) = webhook_id.and_then(|b| std::str::from_utf8(b).ok())
            && !self.seen.lock().insert(id.into())
        {
            self.arrivals.lock().duplicates += 1;
            return;
        }
        let idx = conversation_of(body).and_then(|c| self.index.read().get(c).copied());
        let sent = idx.and_then(|i| {
            let mut q = self.queues[i].lock();
            let (at, action) = q.waiting.pop_front()?;
            Some((at, q.order.next(action, body)))
        });
        let mut a = self.arrivals.lock();
        match sent {
            Some((sent, in_order)) => {
                if !in_order {
                    a.out_of_order += 1;
                }
                a.latencies_us
                    .push(at.saturating_duration_since(sent).as_micros() as u64);
                a.matched += 1;
                a.first.get_or_insert(at);
                a.last = Some(at);
            }
            None => a.unmatched += 1,
        }
    }

    pub fn matched(&self) -> u64 {
        self.arrivals.lock().matched
    }

    /// Returns what arrived so far and starts afresh (after a warm-up).
    pub fn reset(&self) -> Arrivals {
        std::mem::take(&mut *self.arrivals.lock())
    }

    pub fn snapshot(&self) -> Arrivals {
        self.arrivals.lock().clone()
    }

    /// Waits until `n` arrivals matched since the last reset; false on timeout.
    pub async fn wait_matched(&self, n: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.matched() < n {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        true
    }
}

/// The `conversation_id` of an event body, found without parsing the JSON.
pub fn conversation_of(body: &[u8]) -> Option<&str> {
    string_field(body, "conversation_id")
}

async fn hook(req: HttpRequest, body: web::Bytes, t: web::Data<Arc<Tracker>>) -> HttpResponse {
    let at = Instant::now();
    let id = req.headers().get("webhook-id").map(|v| v.as_bytes());
    t.arrived(&body, id, at);
    HttpResponse::Ok().finish()
}

/// A running receiver.
pub struct Receiver {
    pub url: String,
    handle: actix_web::dev::ServerHandle,
}

impl Receiver {
    /// Serves on `listener` (one worker thread) until stopped.
    pub fn start(listener: TcpListener, tracker: Arc<Tracker>) -> Result<Self, String> {
        Self::serve(listener, tracker, hook)
    }

    /// Serves `hook` with `state` on `listener` (one worker thread) until
    /// stopped.
    pub fn serve<T, F, R>(listener: TcpListener, state: Arc<T>, hook: F) -> Result<Self, String>
    where
        T: Send + Sync + 'static,
        F: Fn(HttpRequest, web::Bytes, web::Data<Arc<T>>) -> R + Clone + Send + 'static,
        R: std::future::Future<Output = HttpResponse> + 'static,
    {
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(web::Data::new(state.clone()))
                .default_service(web::to(hook.clone()))
        })
        .workers(1)
        .tcp_nodelay(true)
        .backlog(4096)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)
        .map_err(|e| e.to_string())?
        .run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Ok(Self {
            url: format!("http://127.0.0.1:{port}/hook"),
            handle,
        })
    }

    pub async fn stop(self) {
        self.handle.stop(false).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_conversation_in_an_event_body() {
        let body = br#"{"event":"x","conversation_id":"conv_01ABC","message_id":"m_1"}"#;
        assert_eq!(conversation_of(body), Some("conv_01ABC"));
        assert_eq!(conversation_of(b"{}"), None);
    }

    #[test]
    fn arrivals_match_clicks_in_order_and_duplicates_are_counted() {
        let t = Tracker::new(2);
        t.register("c0", 0);
        t.register("c1", 1);
        let t0 = Instant::now();
        t.sent(0, t0, 0);
        t.sent(0, t0 + Duration::from_millis(5), 1);
        let body = br#"{"conversation_id":"c0"}"#;
        t.arrived(body, Some(b"e1"), t0 + Duration::from_millis(10));
        t.arrived(body, Some(b"e1"), t0 + Duration::from_millis(11));
        t.arrived(body, Some(b"e2"), t0 + Duration::from_millis(12));
        t.arrived(br#"{"conversation_id":"c1"}"#, Some(b"e3"), t0);
        let a = t.snapshot();
        assert_eq!(a.latencies_us, vec![10_000, 7_000]);
        assert_eq!((a.matched, a.duplicates, a.unmatched), (2, 1, 1));
    }
}
