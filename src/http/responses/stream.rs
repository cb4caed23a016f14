//! The widget's live stream (Server-Sent Events): `message.created`,
//! `message.updated`, `message.deleted`, `typing`. Every entry is stored
//! with a sequence number sent as the event id, so a reconnect with
//! `Last-Event-ID` replays what was missed from the store.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, get, web};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::Visitor;
use crate::store::StreamEvent;
use crate::usecase::Services as AppState;
use crate::usecase::stream::{Entries, PAGE};
/// A comment line this long after the last bytes sent. It is also how a
/// closed connection is found: the server notices a peer that went away
/// only when a write to it fails (the first write after the close draws a
/// reset, the next fails), so an idle stream's place and descriptor are
/// freed within about two of these.
const KEEP_ALIVE: Duration = Duration::from_secs(2);
/// With several instances (PostgreSQL) an entry may be committed by another
/// process whose in-memory signal never reaches this one: look in the store
/// this often as well.
const SHARED_POLL: Duration = Duration::from_secs(1);

fn frame(e: &StreamEvent) -> Bytes {
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {}\n\n",
        e.seq, e.kind, e.data
    ))
}

struct Cursor {
    entries: Entries,
    rx: broadcast::Receiver<StreamEvent>,
    /// Read from the store, not yet sent.
    ready: VecDeque<StreamEvent>,
    /// The last entry sent (or the client's `Last-Event-ID`); `None` until
    /// the first live entry when the client asked for no replay.
    last_seq: Option<i64>,
    /// More entries may be in the store past `last_seq`.
    behind: bool,
    /// Look in the store when idle this long (several instances).
    poll: Option<Duration>,
    /// When the last bytes were sent, for keep-alive comments.
    last_write: Instant,
    /// When the store was last looked at for other instances' entries.
    last_poll: Instant,
    /// This stream's place among the visitor's streams.
    _slot: crate::limits::StreamSlot,
    /// Erasures: the stream ends with its conversation's.
    erasures: broadcast::Receiver<String>,
    hub: Arc<crate::hub::Hub>,
}

/// What woke an idle stream.
enum Woke {
    Entry(Result<StreamEvent, broadcast::error::RecvError>),
    Erased(Result<String, broadcast::error::RecvError>),
}

impl Cursor {
    /// Reads the next page after `last_seq` from the store, in commit order.
    async fn catch_up(&mut self, after: i64) -> bool {
        match self.entries.after(after).await {
            Ok(page) => {
                self.behind = page.len() == PAGE;
                self.ready.extend(page);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "stream replay read failed");
                false
            }
        }
    }

    /// The next frame to send: stored entries first, then live ones. A live
    /// signal triggers a store read so entries arrive in commit order even
    /// when signals race.
    async fn next(&mut self) -> Option<Bytes> {
        let out = self.next_inner().await;
        self.last_write = Instant::now();
        out
    }

    async fn next_inner(&mut self) -> Option<Bytes> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                if self.last_seq.is_none_or(|l| e.seq > l) {
                    self.last_seq = Some(e.seq);
                    return Some(frame(&e));
                }
                continue;
            }
            if self.behind {
                let after = self.last_seq.unwrap_or(0);
                if !self.catch_up(after).await {
                    self.behind = false;
                }
                continue;
            }
            // Wake for a keep-alive comment, or to look in the store when
            // another instance may have written (signals for other
            // conversations do not postpone either).
            let keep_alive_at = self.last_write + KEEP_ALIVE;
            let wake = match self.poll {
                Some(p) => keep_alive_at.min(self.last_poll + p),
                None => keep_alive_at,
            };
            let (rx, erasures) = (&mut self.rx, &mut self.erasures);
            let woke = tokio::time::timeout_at(wake, async {
                tokio::select! {
                    e = rx.recv() => Woke::Entry(e),
                    x = erasures.recv() => Woke::Erased(x),
                }
            });
            match woke.await {
                Ok(Woke::Erased(Ok(cid))) => {
                    if cid == self.entries.conversation_id() {
                        return None;
                    }
                }
                Ok(Woke::Erased(Err(broadcast::error::RecvError::Lagged(_)))) => {
                    // Missed some: the marks still hold this one if it was.
                    if self.hub.erased.contains(self.entries.conversation_id()) {
                        return None;
                    }
                }
                Ok(Woke::Erased(Err(broadcast::error::RecvError::Closed))) => return None,
                Err(_) => {
                    if Instant::now() >= keep_alive_at {
                        return Some(Bytes::from_static(b":\n\n"));
                    }
                    self.last_poll = Instant::now();
                    if let Some(after) = self.last_seq {
                        self.catch_up(after).await;
                    }
                }
                Ok(Woke::Entry(Ok(e))) => {
                    if e.conversation_id != self.entries.conversation_id()
                        || self.last_seq.is_some_and(|l| e.seq <= l)
                    {
                        continue;
                    }
                    let after = self.last_seq.unwrap_or(e.seq - 1);
                    if !self.catch_up(after).await || self.ready.is_empty() {
                        self.ready.push_back(e);
                    }
                }
                Ok(Woke::Entry(Err(broadcast::error::RecvError::Lagged(_)))) => {
                    // Fell behind the in-memory signals: the store has it all.
                    self.behind = self.last_seq.is_some();
                }
                Ok(Woke::Entry(Err(broadcast::error::RecvError::Closed))) => return None,
            }
        }
    }
}

/// The replay point: the `Last-Event-ID` header, or a `last_event_id` query
/// parameter for clients that cannot set headers.
fn last_event_id(req: &HttpRequest) -> Option<i64> {
    let header = req
        .headers()
        .get("last-event-id")
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let query =
        web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
            .ok()
            .and_then(|q| q.get("last_event_id").cloned());
    header
        .or(query)
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|n| *n >= 0)
}

/// Server-Sent Events of the visitor's conversation: `message.created`,
/// `message.updated`, `message.deleted` (`{"message_id"}`), `typing`
/// (`{"conversation_id", "message_id", "active"}`). Each event's `id` is
/// its position; `Last-Event-ID` replays what came after it.
#[utoipa::path(tag = "widget", params(("Last-Event-ID" = Option<String>, Header, description = "Replay the entries after this event id")), responses((status = 403, description = "origin_not_allowed: the chatbot does not allow the request's Origin"), (status = 200, description = "Server-Sent Events: `message.created`, `message.updated`, `message.deleted`, `typing`; each `data:` is the message (or `{\"message_id\"}`)", content_type = "text/event-stream", body = String)), security(("visitor_token" = [])))]
#[get("/widget/v1/conversations/{cid}/stream")]
pub async fn widget_stream(
    req: HttpRequest,
    v: Visitor,
    st: web::Data<AppState>,
    cid: web::Path<String>,
) -> ApiResult<HttpResponse> {
    if v.0.id != *cid {
        return Err(ApiError::not_found());
    }
    // Held by the stream's body: dropped, and the place freed, when the
    // connection ends.
    let slot = crate::http::guard::stream(&st, &v.0.id)?;
    // Subscribed before the check: an erasure committed after the token
    // was read either is marked already or is heard by the stream.
    let erasures = st.hub.erased.subscribe();
    if st.hub.erased.contains(&v.0.id) {
        return Err(ApiError::unauthorized());
    }
    let entries = Entries::of(&st, cid.into_inner());
    let shared = entries.shared();
    let last = last_event_id(&req);
    // Subscribe before any read so nothing committed meanwhile is missed.
    let mut cursor = Cursor {
        rx: st.hub.stream.subscribe(),
        entries,
        ready: VecDeque::new(),
        last_seq: last,
        behind: last.is_some(),
        poll: shared.then_some(SHARED_POLL),
        last_write: Instant::now(),
        last_poll: Instant::now(),
        _slot: slot,
        erasures,
        hub: st.hub.clone(),
    };
    if shared && last.is_none() {
        // Polling needs a starting point: the newest stored entry.
        cursor.last_seq = Some(cursor.entries.newest().await?);
    }
    let first = Bytes::from_static(b"retry: 2000\n: connected\n\n");
    let head = futures_util::stream::once(async move { Ok::<Bytes, actix_web::Error>(first) });
    let body = futures_util::stream::unfold(cursor, |mut c| async move {
        c.next()
            .await
            .map(|b| (Ok::<Bytes, actix_web::Error>(b), c))
    })
    // A shutdown ends the stream; the widget reconnects with Last-Event-ID.
    .take_until(st.stopping.clone().cancelled_owned());
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(head.chain(body)))
}
