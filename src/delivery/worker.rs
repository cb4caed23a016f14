//! The dispatcher: the claim loop, one task per delivery (bounded globally
//! and per endpoint, behind each endpoint's circuit breaker), and shutdown.

use crate::domain::ids::{ChatbotId, EventId};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::breaker::{Breaker, Outcome};
use super::defaults::{self, Defaults};
use super::window::Window;
use super::{attempt, recorder};
use crate::domain::endpoints::RateLimit;
use crate::domain::model::Chatbot;
use crate::domain::time::now_ms;
use crate::store::fanout::DefaultSettings;
use crate::store::{AttemptRecord, ClaimAsk, Claimed};
use crate::usecase::Services;

/// Most deliveries in flight at once, across all endpoints.
const GLOBAL_IN_FLIGHT: usize = 512;
/// Most deliveries claimed in one store round trip.
const CLAIM_BATCH: usize = 256;
/// Longest sleep of an idle claim loop (other instances may enqueue).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// How often the URLs of failing endpoints are re-read: a new URL is a new
/// endpoint, and its circuit starts closed.
const URL_CHECK: Duration = Duration::from_millis(250);

/// What the dispatcher knows of one chatbot's endpoint.
#[derive(Default)]
struct Endpoint {
    breaker: Breaker,
    /// The webhook URL last sent to.
    url: String,
    /// Its rate limit as last read, and its sends in the last window.
    rate: Option<RateLimit>,
    window: Window,
}

impl Endpoint {
    /// When its rate limit has room again, if it has none now.
    fn rate_room_at(&self, now_ms: i64) -> Option<i64> {
        self.window.full_until(self.rate?, now_ms)
    }
}

pub struct Dispatcher {
    state: Arc<Services>,
    client: reqwest::Client,
    /// Per chatbot: in-flight count and circuit state.
    endpoints: Mutex<HashMap<ChatbotId, Endpoint>>,
    /// Per chatbot: its default endpoint's own settings, if it has some.
    defaults: Defaults,
    url_checked: Mutex<Instant>,
    /// Event ids being sent, to release their leases if shutdown cuts them.
    in_flight: Mutex<HashSet<EventId>>,
    global: Arc<Semaphore>,
    /// Set while the claim loop may be held back for want of room (the
    /// global limit, an endpoint's limit or circuit): only then does a
    /// delivery that succeeded wake it when it ends.
    room_wanted: AtomicBool,
    records: mpsc::UnboundedSender<AttemptRecord>,
    stop_claiming: CancellationToken,
    stop_recording: CancellationToken,
    tracker: TaskTracker,
    claimer: Mutex<Option<JoinHandle<()>>>,
    recorder: Mutex<Option<JoinHandle<()>>>,
}

/// Starts the dispatcher: the claim loop and the recorder. SIGTERM or
/// SIGINT stops claiming at once; [`Dispatcher::stop`] finishes the rest.
pub fn spawn(state: Arc<Services>) -> Result<Arc<Dispatcher>, String> {
    let client = super::client::build(
        state.settings.delivery_timeout,
        state.settings.allow_private_webhooks,
    )?;
    let (tx, rx) = mpsc::unbounded_channel();
    let d = Arc::new(Dispatcher {
        state,
        client,
        endpoints: Mutex::new(HashMap::new()),
        defaults: Defaults::default(),
        url_checked: Mutex::new(Instant::now()),
        in_flight: Mutex::new(HashSet::new()),
        global: Arc::new(Semaphore::new(GLOBAL_IN_FLIGHT)),
        room_wanted: AtomicBool::new(true),
        records: tx,
        stop_claiming: CancellationToken::new(),
        stop_recording: CancellationToken::new(),
        tracker: TaskTracker::new(),
        claimer: Mutex::new(None),
        recorder: Mutex::new(None),
    });
    let rec = tokio::spawn(recorder::run(
        d.state.store.clone(),
        rx,
        d.stop_recording.clone(),
    ));
    *d.recorder.lock() = Some(rec);
    let dd = d.clone();
    *d.claimer.lock() = Some(tokio::spawn(async move { dd.claim_loop().await }));
    tokio::spawn(stop_claiming_on_signal(d.stop_claiming.clone()));
    Ok(d)
}

async fn stop_claiming_on_signal(stop: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = stop.cancelled() => return,
        }
    }
    #[cfg(not(unix))]
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = stop.cancelled() => return,
    }
    tracing::info!("stopping: no new deliveries are claimed");
    stop.cancel();
}

impl Dispatcher {
    /// Stops claiming, lets in-flight attempts finish within `grace`,
    /// records their outcomes, and releases the leases of any still running.
    pub async fn stop(&self, grace: Duration) {
        self.stop_claiming.cancel();
        let claimer = self.claimer.lock().take();
        if let Some(h) = claimer {
            let _ = h.await;
        }
        if let Err(e) = self.state.store.stop_queueing().await {
            tracing::warn!(error = %e, "giving back queued deliveries failed; their leases expire");
        }
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "in-flight deliveries did not finish in time; their leases are released"
            );
        }
        self.stop_recording.cancel();
        let recorder = self.recorder.lock().take();
        if let Some(h) = recorder {
            let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
        }
        let left: Vec<EventId> = self.in_flight.lock().drain().collect();
        if !left.is_empty() {
            self.release(left).await;
        }
    }

    /// Chatbots not to claim for now (no room at their endpoint, or its
    /// rate limit reached), and when the earliest open circuit lets a probe
    /// through or rate limit has room again.
    fn held_back(&self, now: Instant) -> (Vec<ChatbotId>, Option<Instant>) {
        let limit = self.state.settings.endpoint_concurrency;
        let ms = now_ms();
        let mut eps = self.endpoints.lock();
        eps.retain(|_, e| {
            !e.breaker.is_idle() || e.rate.is_some_and(|r| !e.window.is_idle(ms, r.window_ms))
        });
        let skip = eps
            .iter()
            .filter(|(_, e)| e.breaker.room(limit, now) == 0 || e.rate_room_at(ms).is_some())
            .map(|(k, _)| k.clone())
            .collect();
        let rate_room = eps.values().filter_map(|e| e.rate_room_at(ms)).min();
        let reopen = eps
            .values()
            .filter_map(|e| e.breaker.reopens_at())
            .filter(|at| *at > now)
            .chain(rate_room.map(|at| now + Duration::from_millis((at - ms).max(1) as u64)))
            .min();
        (skip, reopen)
    }

    /// Closes the circuit of a failing endpoint whose chatbot now has
    /// another webhook URL (read at most every [`URL_CHECK`]).
    async fn check_failing_urls(&self) {
        {
            let mut at = self.url_checked.lock();
            if at.elapsed() < URL_CHECK {
                return;
            }
            *at = Instant::now();
        }
        let failing: Vec<(ChatbotId, String)> = self
            .endpoints
            .lock()
            .iter()
            .filter(|(_, e)| e.breaker.is_tripped())
            .map(|(k, e)| (k.clone(), e.url.clone()))
            .collect();
        for (id, url) in failing {
            let Ok(bot) = self.state.store.get_chatbot(&id).await else {
                continue;
            };
            if bot.webhook_url == url {
                continue;
            }
            if let Some(e) = self.endpoints.lock().get_mut(&id) {
                e.breaker.reset();
                e.url = bot.webhook_url;
            }
        }
    }

    async fn claim_loop(self: Arc<Self>) {
        let store = self.state.store.clone();
        let lease = (self.state.settings.delivery_timeout * 3).max(Duration::from_secs(30));
        // Whether this claim reads the table, or only takes what the store
        // queued as it committed (woken by that alone).
        let mut scan = true;
        while !self.stop_claiming.is_cancelled() {
            self.check_failing_urls().await;
            // Set before room is looked at: a delivery ending from here on
            // wakes the loop; one that ended before left its room to see.
            self.room_wanted.store(true, Ordering::SeqCst);
            let free = self.global.available_permits();
            let (skip, reopen) = self.held_back(Instant::now());
            let mut wanted = free == 0 || !skip.is_empty();
            // Whether the claim may have left due deliveries behind: only a
            // full one (a short one took all there were; whatever falls due
            // after it wakes the loop).
            let mut more = false;
            let mut next_due = None;
            if free > 0 {
                let now = now_ms();
                let lease_until = now + lease.as_millis() as i64;
                let size = self.claim_size(free);
                let ask = ClaimAsk {
                    now_ms: now,
                    lease_until,
                    limit: size,
                    room: skip,
                };
                let claim = if scan {
                    store.claim_due(ask).await
                } else {
                    store.claim_queued(ask).await
                };
                match claim {
                    Ok(claim) if self.stop_claiming.is_cancelled() => {
                        self.release(claim.claimed.into_iter().map(|c| c.event_id).collect())
                            .await;
                        return;
                    }
                    Ok(claim) => {
                        more = claim.claimed.len() >= size;
                        next_due = claim.next_due_at;
                        wanted |= self.dispatch(claim.claimed).await;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "claiming deliveries failed");
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                            _ = self.stop_claiming.cancelled() => return,
                        }
                        scan = true;
                        continue;
                    }
                }
            }
            self.room_wanted.store(wanted, Ordering::SeqCst);
            if more {
                continue;
            }
            let wait = self.idle_wait(reopen, next_due).await;
            // A permit left by the branch not taken wakes the next wait.
            scan = tokio::select! {
                biased;
                _ = self.state.hub.new_events.notified() => true,
                _ = self.state.hub.queued_events.notified() => false,
                _ = tokio::time::sleep(wait) => true,
                _ = self.stop_claiming.cancelled() => return,
            };
            // Whatever woke this loop may have committed events to route
            // to other endpoints (§13).
            self.state.hub.to_route.notify_one();
        }
    }

    /// How many deliveries to claim at once: no more than there is room
    /// for, and no more than one endpoint's limit, so that a busy endpoint
    /// does not make every claim lease rows only to give them back (the
    /// loop claims again at once when a claim found work).
    fn claim_size(&self, free: usize) -> usize {
        free.min(CLAIM_BATCH)
            .min(self.state.settings.endpoint_concurrency.max(1))
    }

    /// How long to sleep when nothing could be claimed: until the next
    /// delivery falls due or a circuit lets a probe through, at most
    /// [`IDLE_POLL`]. A finished delivery or a new event wakes the loop.
    /// `known`: the time the claim just made reported, if it did.
    async fn idle_wait(&self, reopen: Option<Instant>, known: Option<Option<i64>>) -> Duration {
        let now = now_ms();
        let next = match known {
            Some(at) => Ok(at),
            None => self.state.store.next_due_at().await,
        };
        let mut wait = match next {
            Ok(Some(t)) if t > now => Duration::from_millis((t - now) as u64),
            _ => IDLE_POLL,
        }
        .min(IDLE_POLL);
        if let Some(at) = reopen {
            wait = wait.min(at.saturating_duration_since(Instant::now()));
        }
        wait.max(Duration::from_millis(1))
    }

    /// Starts what there is room for (in claim order, so a conversation's
    /// head goes first) and releases the rest at once; true when some had
    /// no room.
    async fn dispatch(self: &Arc<Self>, batch: Vec<Claimed>) -> bool {
        if batch.is_empty() {
            return false;
        }
        let bots = self.load_bots(&batch).await;
        let settings = self.defaults.of(&self.state.store, &batch).await;
        let limit = self.state.settings.endpoint_concurrency;
        let mut release = Vec::new();
        let mut back = Vec::new();
        for c in batch {
            let own = settings.get(&c.chatbot_id).cloned();
            if let Some(s) = &own
                && !defaults::takes(&s.route, &c.payload)
            {
                // The default endpoint does not take it: skipped unsent,
                // and its conversation's next event becomes the head.
                let _ = self.records.send(defaults::skipped(&c));
                self.state.hub.new_events.notify_one();
                continue;
            }
            let bot = match bots.get(&c.chatbot_id) {
                Some(Ok(b)) => b.clone(),
                Some(Err(e)) => {
                    let rec = self.store_failure(&c, e);
                    let _ = self.records.send(rec);
                    continue;
                }
                None => {
                    release.push(c.event_id);
                    continue;
                }
            };
            let rate = own.as_ref().and_then(|s| s.rate_limit);
            let admitted = self.admit(&c.chatbot_id, &bot.webhook_url, limit, rate);
            match admitted {
                Some((probe, permit)) => self.start(c, bot, own, probe, permit),
                None => back.push(c),
            }
        }
        self.release(release).await;
        let no_room = !back.is_empty();
        if no_room && let Err(e) = self.state.store.give_back(back).await {
            tracing::warn!(error = %e, "giving back deliveries failed; their leases expire");
        }
        no_room
    }

    /// A slot for one delivery to this endpoint, if its limit, its circuit,
    /// its rate limit and the global limit allow: whether it is a probe,
    /// and the permit.
    fn admit(
        &self,
        chatbot_id: &str,
        url: &str,
        limit: usize,
        rate: Option<RateLimit>,
    ) -> Option<(bool, OwnedSemaphorePermit)> {
        let now = Instant::now();
        let mut eps = self.endpoints.lock();
        let e = eps.entry(ChatbotId::stored(chatbot_id)).or_default();
        if e.url != url {
            // A new URL is a new endpoint: its circuit starts closed.
            e.breaker.reset();
            e.url = url.to_string();
        }
        if e.breaker.room(limit, now) == 0 {
            return None;
        }
        let permit = self.global.clone().try_acquire_owned().ok()?;
        e.rate = rate;
        if let Some(r) = rate {
            // Over it: given back, claimed again once it has room.
            e.window.take(r, now_ms()).ok()?;
        }
        Some((e.breaker.start(now), permit))
    }

    /// Each chatbot of the batch, read once.
    async fn load_bots(
        &self,
        batch: &[Claimed],
    ) -> HashMap<ChatbotId, Result<Arc<Chatbot>, String>> {
        let mut bots = HashMap::new();
        for c in batch {
            if bots.contains_key(&c.chatbot_id) {
                continue;
            }
            if let Some(b) = &c.bot {
                // Read in the transaction that committed the event.
                bots.insert(c.chatbot_id.clone(), Ok(b.clone()));
                continue;
            }
            let b = self
                .state
                .store
                .get_chatbot(&c.chatbot_id)
                .await
                .map(Arc::new)
                .map_err(|e| e.to_string());
            bots.insert(c.chatbot_id.clone(), b);
        }
        bots
    }

    fn store_failure(&self, c: &Claimed, e: &str) -> AttemptRecord {
        let number = c.attempts + 1;
        let next = attempt::failure_next(&self.state, number - c.attempt_base, None);
        AttemptRecord {
            error: Some(format!("E_STORE: {e}")),
            ..AttemptRecord::of(c, number, now_ms(), next)
        }
    }

    async fn release(&self, ids: Vec<EventId>) {
        if ids.is_empty() {
            return;
        }
        if let Err(e) = self.state.store.release_leases(Some(ids)).await {
            tracing::warn!(error = %e, "releasing leases failed; they expire");
        }
    }

    fn start(
        self: &Arc<Self>,
        c: Claimed,
        bot: Arc<Chatbot>,
        own: Option<Arc<DefaultSettings>>,
        probe: bool,
        permit: OwnedSemaphorePermit,
    ) {
        self.in_flight.lock().insert(c.event_id.clone());
        let d = self.clone();
        self.tracker.spawn(async move {
            if d.state.hub.erased.contains(&c.conversation_id) {
                // Erased after it was claimed: never sent, nothing to
                // record (its row is gone).
                d.in_flight.lock().remove(&c.event_id);
                drop(permit);
                d.endpoints
                    .lock()
                    .entry(c.chatbot_id.clone())
                    .or_default()
                    .breaker
                    .cancel(probe);
                d.release(vec![c.event_id.clone()]).await;
                d.state.hub.new_events.notify_one();
                return;
            }
            let record = attempt::run(&d.state, &d.client, &bot, own.as_deref(), &c).await;
            let outcome = attempt::outcome(&record.next);
            d.endpoints
                .lock()
                .entry(c.chatbot_id.clone())
                .or_default()
                .breaker
                .finished(probe, outcome, Instant::now());
            let _ = d.records.send(record);
            d.in_flight.lock().remove(&c.event_id);
            drop(permit);
            // The room this delivery held is free again. A success
            // changes nothing else the claim loop waits on (the next event
            // of its conversation wakes it when recorded); any other end
            // may change a circuit or a retry time.
            if probe || outcome != Outcome::Success || d.room_wanted.load(Ordering::SeqCst) {
                d.state.hub.new_events.notify_one();
            }
        });
    }
}
