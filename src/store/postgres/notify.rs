//! Instances that hear each other: every transaction that commits a stream
//! entry, an inbox change or a delivery that may be claimed says so with
//! `NOTIFY` in the same transaction (PostgreSQL delivers it on commit, and
//! never for a rollback). Each instance `LISTEN`s on one connection of its
//! own and raises the same in-process signals ([`Hub`]) as its own commits
//! do, so claim loops, ask waiters, widget streams and `/api/v1/stream`
//! wake within milliseconds whichever instance committed. Polls remain as
//! a safety net only.
//!
//! A payload is one line of tab-separated fields, the committing instance
//! first (an instance skips its own):
//! `{instance}\te` (a delivery may be due),
//! `{instance}\ts\t{conversation}\t{seq}\t{kind}\t{data}` (a stream entry),
//! `{instance}\ta\t{chatbot}\t{interaction}\t{kind}\t{data}` (an inbox
//! change), `{instance}\tx\t{conversation}` (an erasure committed: the
//! conversation's streams end, its claimed deliveries are dropped),
//! `{instance}\tv` (visitor tokens may read otherwise: a takeover, a
//! chatbot's change, a purge; every instance empties its cache of them),
//! `{instance}\tj` (that instance started listening: see [`Instance`]; an
//! instance that hears of no other sends only these, erasures and token
//! changes).
//! `kind` and `data` are left empty when they would make the
//! payload longer than PostgreSQL takes; the listener then reads the row.
//! JSON text never holds a raw tab, so `data` is the rest of the line.
//!
//! A lost listening connection may have missed notifications: its visitor
//! token cache keeps nothing until it is back and starts empty; once back,
//! the listener wakes the claim loops and re-reads the inbox changes
//! since a little before the loss (widget streams re-read the store on
//! their own safety-net poll, ask waiters on theirs).

use crate::domain::ids::{ChatbotId, ConversationId, InteractionId};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};

use super::{Visitors, inbox};
use crate::domain::status::InteractionStatus;
use crate::store::{ApiEvent, Signals};
use crate::store::{StoreResult, StreamEvent};

pub const CHANNEL: &str = "blockhook";
/// PostgreSQL refuses payloads of 8000 bytes or more.
const MAX_PAYLOAD: usize = 7900;
/// How far before a lost connection the inbox is re-read (commits in
/// flight when it was lost).
const RESYNC_MARGIN_MS: i64 = 5_000;

/// How often an instance counts the others listening (besides hearing
/// each one that starts listening at once).
const RECOUNT: Duration = Duration::from_secs(5);
/// The `application_name` of every listening connection.
const LISTENER: &str = "blockhook listener";

/// This instance as the others hear it: its id, and whether any other
/// instance listens on the database. While none does, transactions send no
/// notifications: each `NOTIFY` holds PostgreSQL's notification queue lock
/// from the statement until its commit is flushed, which puts the commits
/// of all notifying transactions one after another. An instance that starts
/// listening says so (`{instance}\tj`), so the others notify again at
/// once; each instance counts the listening connections every [`RECOUNT`]
/// to find out that the others have gone.
#[derive(Clone)]
pub struct Instance {
    id: Arc<str>,
    /// Bit 0: another instance listens. The rest: how many times one was
    /// heard starting, so a count begun before it cannot undo it.
    peers: Arc<AtomicU64>,
    /// The backend pid of this instance's listening connection.
    listener_pid: Arc<AtomicI32>,
}

impl Instance {
    /// A new instance, taken to have others until it has counted them.
    pub fn new() -> Self {
        Self {
            id: uuid::Uuid::new_v4().simple().to_string().into(),
            peers: Arc::new(AtomicU64::new(1)),
            listener_pid: Arc::new(AtomicI32::new(0)),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether another instance listens (or may: until counted).
    pub fn has_peers(&self) -> bool {
        self.peers.load(Ordering::Acquire) & 1 == 1
    }

    /// Another instance started listening.
    fn joined(&self) {
        let _ = self
            .peers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(((v >> 1) + 1) << 1 | 1)
            });
    }

    /// Counts the other instances' listening connections on `pool`'s
    /// database: none unsets [`Self::has_peers`] unless one was heard
    /// starting meanwhile.
    async fn count(&self, pool: &PgPool) {
        let before = self.peers.load(Ordering::Acquire);
        let listening: Result<i64, _> = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = $1 AND pid <> $2",
        )
        .bind(LISTENER)
        .bind(self.listener_pid.load(Ordering::Acquire))
        .fetch_one(pool)
        .await;
        match listening {
            Ok(0) => {
                let _ = self.peers.compare_exchange(
                    before,
                    before & !1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            Ok(_) => {
                self.peers.fetch_or(1, Ordering::AcqRel);
            }
            Err(e) => tracing::debug!(error = %e, "cannot count the listening instances"),
        }
    }
}

impl Default for Instance {
    fn default() -> Self {
        Self::new()
    }
}

/// The payloads a transaction sends on commit.
pub struct Notes {
    instance: Instance,
    payloads: Vec<String>,
    due: bool,
}

impl Notes {
    pub fn new(instance: &Instance) -> Self {
        Self {
            instance: instance.clone(),
            payloads: Vec::new(),
            due: false,
        }
    }

    pub fn stream(&mut self, e: &StreamEvent) {
        self.payloads.push(line(
            &self.instance.id,
            's',
            &e.conversation_id,
            &e.seq.to_string(),
            &e.kind,
            &e.data,
        ));
    }

    pub fn api(&mut self, e: &ApiEvent) {
        self.payloads.push(line(
            &self.instance.id,
            'a',
            &e.chatbot_id,
            &e.interaction_id,
            e.kind,
            &e.data.to_string(),
        ));
    }

    /// A delivery may have become due (a new event, a new head, a
    /// redelivery, an endpoint enabled again).
    pub fn due(&mut self) {
        if !self.due {
            self.due = true;
            self.payloads.push(format!("{}\te", self.instance.id));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.payloads.is_empty()
    }

    /// Queues the notifications in the transaction (sent on its commit),
    /// when another instance may hear them.
    pub async fn send(&self, tx: &mut Transaction<'_, Postgres>) -> StoreResult<()> {
        self.send_on(tx).await
    }

    /// The same as [`Self::send`] on a connection with a transaction open
    /// on it (the click batch's).
    pub async fn send_on(&self, conn: &mut PgConnection) -> StoreResult<()> {
        if self.payloads.is_empty() || !self.instance.has_peers() {
            return Ok(());
        }
        sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
            .bind(CHANNEL)
            .bind(&self.payloads)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

/// The payload of an erasure of `conversation`, sent in its transaction
/// (always: an erasure is rare, and an instance just started must hear it).
pub fn erased(instance: &Instance, conversation: &str) -> String {
    format!("{}\tx\t{conversation}", instance.id)
}

/// The payload of a change of visitor tokens (see [`super::PostgresStore::tokens_changed`]).
pub fn tokens(instance: &Instance) -> String {
    format!("{}\tv", instance.id)
}

fn line(instance: &str, tag: char, a: &str, b: &str, kind: &str, data: &str) -> String {
    let full = format!("{instance}\t{tag}\t{a}\t{b}\t{kind}\t{data}");
    if full.len() <= MAX_PAYLOAD {
        full
    } else {
        format!("{instance}\t{tag}\t{a}\t{b}\t\t")
    }
}

/// What one notification asks of this instance.
#[derive(Debug, PartialEq)]
enum Heard<'a> {
    Due,
    /// Another instance started listening.
    Joined,
    Tokens,
    Erased(&'a str),
    Stream {
        conversation: &'a str,
        seq: i64,
        entry: Option<(&'a str, &'a str)>,
    },
    Api {
        chatbot: &'a str,
        interaction: &'a str,
        event: Option<(&'a str, &'a str)>,
    },
}

/// Parses a payload; `None` for this instance's own or one not understood.
fn parse<'a>(own: &str, payload: &'a str) -> Option<Heard<'a>> {
    let mut f = payload.splitn(6, '\t');
    if f.next()? == own {
        return None;
    }
    let tag = f.next()?;
    if tag == "e" {
        return Some(Heard::Due);
    }
    if tag == "j" {
        return Some(Heard::Joined);
    }
    if tag == "v" {
        return Some(Heard::Tokens);
    }
    if tag == "x" {
        return Some(Heard::Erased(f.next()?));
    }
    let (a, b) = (f.next()?, f.next()?);
    let (kind, data) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
    let inline = (!kind.is_empty()).then_some((kind, data));
    match tag {
        "s" => Some(Heard::Stream {
            conversation: a,
            seq: b.parse().ok()?,
            entry: inline,
        }),
        "a" => Some(Heard::Api {
            chatbot: a,
            interaction: b,
            event: inline,
        }),
        _ => None,
    }
}

/// The kind of API stream entry an interaction's status stands for.
fn api_kind(status: InteractionStatus) -> &'static str {
    match status {
        InteractionStatus::Answered => "interaction.answered",
        InteractionStatus::Expired => "interaction.expired",
        InteractionStatus::Cancelled => "interaction.cancelled",
        InteractionStatus::Pending => "interaction.created",
    }
}

/// The listening task and the counting one, stopped when the store is
/// dropped.
pub struct Listening([tokio::task::AbortHandle; 2]);

/// What the listener keeps up to date.
#[derive(Clone)]
struct Ears {
    pool: PgPool,
    signals: Arc<dyn Signals>,
    me: Instance,
    visitors: Arc<Visitors>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Listens on a connection of its own (outside the store's pool), once
/// listening before this returns: what commits afterwards is heard.
pub async fn listen(
    opts: &PgConnectOptions,
    pool: PgPool,
    signals: Arc<dyn Signals>,
    me: Instance,
    visitors: Arc<Visitors>,
) -> StoreResult<Listening> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(opts.clone().application_name(LISTENER));
    let listener = subscribe(&own, &pool, &me).await?;
    let counting = tokio::spawn(count_peers(pool.clone(), me.clone()));
    let ears = Ears {
        pool,
        signals,
        me,
        visitors,
    };
    let task = tokio::spawn(run(own, listener, ears));
    Ok(Listening([task.abort_handle(), counting.abort_handle()]))
}

/// Listens, then tells the other instances so and counts them.
async fn subscribe(own: &PgPool, pool: &PgPool, me: &Instance) -> StoreResult<PgListener> {
    let mut l = PgListener::connect_with(own).await?;
    l.listen(CHANNEL).await?;
    join(&mut l, pool, me).await?;
    Ok(l)
}

/// Says on `pool` that `l` listens, and counts the others.
async fn join(l: &mut PgListener, pool: &PgPool, me: &Instance) -> StoreResult<()> {
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *l)
        .await?;
    me.listener_pid.store(pid, Ordering::Release);
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(format!("{}\tj", me.id))
        .execute(pool)
        .await?;
    me.count(pool).await;
    Ok(())
}

async fn count_peers(pool: PgPool, me: Instance) {
    loop {
        tokio::time::sleep(RECOUNT).await;
        me.count(&pool).await;
    }
}

async fn run(own: PgPool, mut listener: PgListener, ears: Ears) {
    let Ears {
        pool,
        signals,
        me,
        visitors,
    } = &ears;
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                if let Some(h) = parse(&me.id, n.payload()) {
                    heard(&ears, h).await;
                }
            }
            // Lost, and listening again (sqlx reconnects before saying so).
            Ok(None) => {
                tracing::warn!("the listening connection to PostgreSQL was lost; listening again");
                visitors.invalidate();
                if let Err(e) = join(&mut listener, pool, me).await {
                    tracing::warn!(error = %e, "cannot tell the other instances this one listens again");
                }
                resync(pool, signals.as_ref(), crate::domain::time::now_ms()).await;
            }
            Err(e) => {
                let lost_at = crate::domain::time::now_ms();
                visitors.deaf();
                tracing::warn!(error = %e, "the listening connection to PostgreSQL failed");
                listener = loop {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    match subscribe(&own, pool, me).await {
                        Ok(l) => break l,
                        Err(e) => tracing::warn!(error = %e, "cannot listen on PostgreSQL yet"),
                    }
                };
                visitors.hearing();
                resync(pool, signals.as_ref(), lost_at).await;
            }
        }
    }
}

/// Raises the in-process signal a notification stands for, reading the row
/// when the payload could not hold it.
async fn heard(ears: &Ears, h: Heard<'_>) {
    let (pool, signals) = (&ears.pool, &ears.signals);
    match h {
        Heard::Due => signals.events_due(),
        Heard::Joined => ears.me.joined(),
        Heard::Tokens => ears.visitors.invalidate(),
        Heard::Erased(conversation) => {
            ears.visitors.invalidate();
            signals.erased(conversation)
        }
        Heard::Stream {
            conversation,
            seq,
            entry,
        } => {
            if !signals.follows_streams() {
                return;
            }
            let e = match entry {
                Some((kind, data)) => StreamEvent {
                    seq,
                    conversation_id: ConversationId::stored(conversation),
                    kind: kind.to_string(),
                    data: data.to_string(),
                },
                None => match stream_entry(pool, conversation, seq).await {
                    Some(e) => e,
                    None => return,
                },
            };
            signals.stream(vec![e]);
        }
        Heard::Api {
            chatbot,
            interaction,
            event,
        } => {
            if !signals.follows_api() {
                return;
            }
            let inline = event.and_then(|(kind, data)| {
                let data = serde_json::from_str(data).ok()?;
                Some((api_kind_of(kind)?, data))
            });
            let (kind, data) = match inline {
                Some(x) => x,
                None => {
                    let Some(i) = interaction_row(pool, chatbot, interaction).await else {
                        return;
                    };
                    let now = crate::domain::time::now_ms();
                    (api_kind(i.status_at(now)), i.to_json(now))
                }
            };
            signals.api(vec![ApiEvent {
                chatbot_id: ChatbotId::stored(chatbot),
                interaction_id: InteractionId::stored(interaction),
                kind,
                data,
            }]);
        }
    }
}

fn api_kind_of(kind: &str) -> Option<&'static str> {
    [
        "interaction.created",
        "interaction.answered",
        "interaction.expired",
        "interaction.cancelled",
    ]
    .into_iter()
    .find(|k| *k == kind)
}

async fn stream_entry(pool: &PgPool, conversation: &str, seq: i64) -> Option<StreamEvent> {
    let r =
        sqlx::query("SELECT kind, data FROM stream_events WHERE conversation_id = $1 AND seq = $2")
            .bind(conversation)
            .bind(seq)
            .fetch_optional(pool)
            .await
            .ok()??;
    Some(StreamEvent {
        seq,
        conversation_id: ConversationId::stored(conversation),
        kind: r.try_get(0).ok()?,
        data: r.try_get(1).ok()?,
    })
}

async fn interaction_row(
    pool: &PgPool,
    chatbot: &str,
    id: &str,
) -> Option<crate::domain::inbox::Interaction> {
    let r = sqlx::query(&format!(
        "SELECT {} FROM interactions WHERE id = $1 AND chatbot_id = $2",
        inbox::COLS
    ))
    .bind(id)
    .bind(chatbot)
    .fetch_optional(pool)
    .await
    .ok()??;
    inbox::row(&r).ok()
}

/// After a loss: deliveries may be due, and the inbox changes since a
/// little before `lost_at` are told again (a consumer of `/api/v1/stream`
/// may see one twice; an ask waiter takes the first).
async fn resync(pool: &PgPool, signals: &dyn Signals, lost_at: i64) {
    signals.events_due();
    if !signals.follows_api() {
        return;
    }
    let rows = sqlx::query(&format!(
        "SELECT {} FROM interactions WHERE updated_at >= $1 ORDER BY seq",
        inbox::COLS
    ))
    .bind(lost_at - RESYNC_MARGIN_MS)
    .fetch_all(pool)
    .await;
    let Ok(rows) = rows else {
        return;
    };
    let now = crate::domain::time::now_ms();
    for r in rows {
        if let Ok(i) = inbox::row(&r) {
            signals.api(vec![ApiEvent {
                chatbot_id: i.chatbot_id.clone(),
                interaction_id: i.id.clone(),
                kind: api_kind(i.status_at(now)),
                data: i.to_json(now),
            }]);
        }
    }
}

#[cfg(test)]
mod tests;
