//! Fan-out (§13): delivers to a chatbot's endpoints other than the
//! default. Its own claim loop, in-flight limits, circuit breakers and
//! rate windows, all keyed by endpoint id, so a slow, failing or paused
//! endpoint never holds back another (nor the default endpoints' queue).
//! Attempts use the same sending code as the default endpoint.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::attempt::{self, Target};
use super::breaker::Breaker;
use super::window::Window;
use crate::domain::endpoints::RateLimit;
use crate::domain::time::now_ms;
use crate::store::ClaimAsk;
use crate::store::fanout::{ClaimedDelivery, DeliveryRecord, Rooms};
use crate::usecase::Services;

/// Most deliveries in flight at once, across all extra endpoints.
const GLOBAL_IN_FLIGHT: usize = 512;
/// Most deliveries claimed in one store round trip.
const CLAIM_BATCH: usize = 256;
/// How long a claim holds a delivery (a crash gives it back after this).
pub const LEASE: Duration = Duration::from_secs(60);
/// Longest sleep of an idle claim loop (retries fall due, other instances
/// route events, an endpoint is enabled again).
const IDLE_POLL: Duration = Duration::from_millis(250);
/// The longest pause between two claims while deliveries are flowing (the
/// last claim found some, not all it could take): ends and new deliveries
/// gather, so that one claim (a ranked read of every head, and a lease
/// write) serves many. It ends as soon as as many attempts ended as one
/// endpoint may have in flight, so that the pause never caps how fast a
/// quick receiver is served; after an idle claim the next one runs at
/// once.
const CLAIM_GAP: Duration = Duration::from_millis(10);
/// Outcomes written in one transaction.
const RECORD_BATCH: usize = 512;

#[derive(Default)]
struct Endpoint {
    breaker: Breaker,
    url: String,
    window: Window,
}

pub struct Fanout {
    state: Arc<Services>,
    client: reqwest::Client,
    endpoints: Mutex<HashMap<crate::domain::ids::EndpointId, Endpoint>>,
    /// Deliveries being sent, to give back if shutdown cuts them.
    in_flight: Mutex<HashSet<i64>>,
    global: Arc<Semaphore>,
    /// Attempts ended since the last claim, and the signal that enough of
    /// them ended for the next claim not to wait out [`CLAIM_GAP`].
    ended: AtomicUsize,
    room_made: Notify,
    records: mpsc::UnboundedSender<DeliveryRecord>,
    stop_claiming: CancellationToken,
    stop_recording: CancellationToken,
    tracker: TaskTracker,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// Starts the fan-out claim loop, its recorder and the router.
pub fn spawn(state: Arc<Services>) -> Result<Arc<Fanout>, String> {
    let client = super::client::build(
        state.settings.delivery_timeout,
        state.settings.allow_private_webhooks,
    )?;
    let (tx, rx) = mpsc::unbounded_channel();
    let f = Arc::new(Fanout {
        state,
        client,
        endpoints: Mutex::new(HashMap::new()),
        in_flight: Mutex::new(HashSet::new()),
        global: Arc::new(Semaphore::new(GLOBAL_IN_FLIGHT)),
        ended: AtomicUsize::new(0),
        room_made: Notify::new(),
        records: tx,
        stop_claiming: CancellationToken::new(),
        stop_recording: CancellationToken::new(),
        tracker: TaskTracker::new(),
        tasks: Mutex::new(Vec::new()),
    });
    let rec = tokio::spawn(record(f.state.clone(), rx, f.stop_recording.clone()));
    let router = super::router::spawn(f.state.clone(), f.stop_claiming.clone());
    let ff = f.clone();
    let claimer = tokio::spawn(async move { ff.claim_loop().await });
    f.tasks.lock().extend([claimer, router, rec]);
    Ok(f)
}

impl Fanout {
    /// Stops claiming and routing, lets in-flight attempts finish within
    /// `grace`, records them, and gives back any still running.
    pub async fn stop(&self, grace: Duration) {
        self.stop_claiming.cancel();
        self.tracker.close();
        let _ = tokio::time::timeout(grace, self.tracker.wait()).await;
        self.stop_recording.cancel();
        let tasks: Vec<JoinHandle<()>> = self.tasks.lock().drain(..).collect();
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
        let left: Vec<(i64, i64)> = self.in_flight.lock().drain().map(|s| (s, 0)).collect();
        if !left.is_empty() {
            let _ = self.state.store.give_back_deliveries(left).await;
        }
    }

    /// How many deliveries each endpoint may start now (fewer than the
    /// limit while some are in flight, none while its circuit is open), and
    /// when the earliest open circuit lets a probe through.
    fn held_back(&self, now: Instant) -> (Rooms, Option<Instant>) {
        let limit = self.state.settings.endpoint_concurrency;
        let ms = now_ms();
        let mut eps = self.endpoints.lock();
        eps.retain(|_, e| !e.breaker.is_idle() || !e.window.is_idle(ms, 3_600_000));
        let named = eps
            .iter()
            .map(|(k, e)| (k.clone(), e.breaker.room(limit, now) as i64))
            .filter(|(_, room)| *room < limit as i64)
            .collect();
        let rooms = Rooms {
            named,
            others: limit as i64,
        };
        let reopen = eps
            .values()
            .filter_map(|e| e.breaker.reopens_at())
            .filter(|at| *at > now)
            .min();
        (rooms, reopen)
    }

    async fn claim_loop(self: Arc<Self>) {
        let store = self.state.store.clone();
        while !self.stop_claiming.is_cancelled() {
            let (rooms, reopen) = self.held_back(Instant::now());
            let free = self.global.available_permits();
            let (mut more, mut found) = (false, false);
            if free > 0 {
                let now = now_ms();
                let size = free.min(CLAIM_BATCH);
                self.ended.store(0, Ordering::Relaxed);
                let ask = ClaimAsk {
                    now_ms: now,
                    lease_until: now + LEASE.as_millis() as i64,
                    limit: size,
                    room: rooms,
                };
                match store.claim_deliveries(ask).await {
                    Ok(claimed) => {
                        more = claimed.len() >= size;
                        found = !claimed.is_empty();
                        self.dispatch(claimed).await;
                    }
                    Err(e) => tracing::error!(error = %e, "claiming deliveries failed"),
                }
            }
            if more {
                continue;
            }
            let mut wait = IDLE_POLL;
            if let Some(at) = reopen {
                wait = wait.min(at.saturating_duration_since(Instant::now()));
            }
            tokio::select! {
                _ = self.state.hub.deliveries.notified() => {}
                _ = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {}
                _ = self.stop_claiming.cancelled() => return,
            }
            // Every ended attempt and every routed event wakes the loop:
            // while deliveries flow, a pause lets those arriving together
            // be taken by one claim. It ends early once an endpoint's whole
            // room could have come free: without that, an endpoint could
            // be served no faster than its room per pause.
            if found {
                tokio::select! {
                    _ = tokio::time::sleep(CLAIM_GAP) => {}
                    _ = self.room_made.notified() => {}
                }
            }
        }
    }

    /// Starts what may go now; gives back what has no room or is over its
    /// endpoint's rate limit (no attempt counted).
    async fn dispatch(self: &Arc<Self>, batch: Vec<ClaimedDelivery>) {
        let limit = self.state.settings.endpoint_concurrency;
        let mut back = Vec::new();
        for d in batch {
            if self.stop_claiming.is_cancelled() {
                back.push((d.claim.seq, 0));
                continue;
            }
            match self.admit(&d, limit) {
                Ok((probe, permit)) => self.start(d, probe, permit),
                Err(at) => back.push((d.claim.seq, at)),
            }
        }
        if !back.is_empty()
            && let Err(e) = self.state.store.give_back_deliveries(back).await
        {
            tracing::warn!(error = %e, "giving back deliveries failed; their leases expire");
        }
    }

    /// A slot for one delivery, or the time to try it again.
    fn admit(
        &self,
        d: &ClaimedDelivery,
        limit: usize,
    ) -> Result<(bool, OwnedSemaphorePermit), i64> {
        let now = Instant::now();
        let ms = now_ms();
        let mut eps = self.endpoints.lock();
        let e = eps.entry(d.endpoint_id.clone()).or_default();
        if e.url != d.target.url {
            // A new URL is a new endpoint: its circuit starts closed.
            e.breaker.reset();
            e.url = d.target.url.clone();
        }
        if e.breaker.room(limit, now) == 0 {
            return Err(ms);
        }
        let permit = self.global.clone().try_acquire_owned().map_err(|_| ms)?;
        if let Some(rl) = d.target.rate_limit.as_deref().and_then(RateLimit::parse) {
            e.window.take(rl, ms)?;
        }
        Ok((e.breaker.start(now), permit))
    }

    fn start(self: &Arc<Self>, d: ClaimedDelivery, probe: bool, permit: OwnedSemaphorePermit) {
        self.in_flight.lock().insert(d.claim.seq);
        let f = self.clone();
        self.tracker.spawn(async move {
            let headers = d.target.header_pairs();
            let to = Target {
                url: &d.target.url,
                secrets: d.target.live_secrets(now_ms()),
                headers: &headers,
                replies: d.target.replies,
                endpoint_id: d.endpoint_id.as_str().into(),
                chatbot_id: &d.claim.chatbot_id,
            };
            let rec = attempt::run_to(&f.state, &f.client, &to, &d.claim).await;
            let outcome = attempt::outcome(&rec.next);
            f.endpoints
                .lock()
                .entry(d.endpoint_id.clone())
                .or_default()
                .breaker
                .finished(probe, outcome, Instant::now());
            let _ = f.records.send(DeliveryRecord {
                endpoint_id: d.endpoint_id.clone(),
                rec,
            });
            f.in_flight.lock().remove(&d.claim.seq);
            drop(permit);
            f.state.hub.deliveries.notify_one();
            let enough = f.state.settings.endpoint_concurrency.max(1);
            if f.ended.fetch_add(1, Ordering::Relaxed) + 1 == enough {
                f.room_made.notify_one();
            }
        });
    }
}

/// Writes outcomes in batches until `stop`, then what is left.
async fn record(
    state: Arc<Services>,
    mut rx: mpsc::UnboundedReceiver<DeliveryRecord>,
    stop: CancellationToken,
) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    loop {
        let n = tokio::select! {
            biased;
            n = rx.recv_many(&mut batch, RECORD_BATCH) => n,
            _ = stop.cancelled() => {
                while let Ok(r) = rx.try_recv() {
                    batch.push(r);
                }
                0
            }
        };
        if !batch.is_empty() {
            let mut tries = 0u32;
            while let Err(e) = state.store.record_delivery_attempts(batch.clone()).await {
                tries += 1;
                tracing::error!(error = %e, tries, "recording delivery attempts failed; retrying");
                if stop.is_cancelled() && tries >= 5 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200 * u64::from(tries.min(25)))).await;
            }
            batch.clear();
        }
        if n == 0 {
            return;
        }
    }
}
