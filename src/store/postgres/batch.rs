//! Group commit for clicks and submits on PostgreSQL, as the SQLite writer
//! does: the clicks an instance receives while a batch runs wait in a
//! queue and go together into the next transaction, with one statement per
//! step whatever their number, and one commit (`synchronous_commit` as the
//! server has it). The decisions are the same as a lone click's
//! ([`crate::domain::inbox::decide`]), made one after another in arrival
//! order on the rows as locked, so first-click-wins and the order of a
//! conversation's events hold within a batch, across batches and across
//! instances.
//!
//! Lock order, as everywhere: the batch's messages (by conversation, then
//! id), then their conversations (by id). A batch that fails as a whole (a
//! deadlock with another instance's, a lost connection) is run again one
//! click per transaction, as is a click whose block is gone from its
//! message (the rare `replaced` check, which reads closed interactions too).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sqlx::Row;
use sqlx::postgres::PgPool;
use tokio::sync::{mpsc, oneshot};

use super::{Tx, backend, inbox, message_json, parse_message};
use crate::domain::inbox as domain;
use crate::domain::interact::Context;
use crate::domain::model::Message;
use crate::hub::ApiEvent;
use crate::store::{InteractRequest, Interacted, StoreError, StoreResult, StreamEvent};

/// Most clicks in one transaction.
const MAX_BATCH: usize = 256;
/// Batches in flight at once: while one waits on the database the next
/// forms and starts. They take their locks in the same order, so they
/// queue behind each other on shared rows and never deadlock, and a later
/// click of a conversation commits after an earlier one.
const WORKERS: usize = 4;

/// What a click produced, published by the caller once committed.
pub struct Done {
    pub out: Interacted,
    pub stream: Vec<StreamEvent>,
    pub api: Vec<ApiEvent>,
}

struct Job {
    req: InteractRequest,
    reply: oneshot::Sender<StoreResult<Done>>,
}

/// The queue of one instance's clicks.
pub struct Batcher {
    tx: mpsc::UnboundedSender<Job>,
}

/// Runs one click in a transaction of its own (see `PostgresStore::interact_one`).
pub type Single =
    Arc<dyn Fn(InteractRequest) -> super::BoxFut<'static, StoreResult<Done>> + Send + Sync>;

impl Batcher {
    pub fn start(pool: PgPool, instance: Arc<str>, single: Single) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..WORKERS {
            tokio::spawn(run(
                pool.clone(),
                instance.clone(),
                single.clone(),
                rx.clone(),
            ));
        }
        Self { tx }
    }

    pub async fn interact(&self, req: InteractRequest) -> StoreResult<Done> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job { req, reply })
            .map_err(|_| StoreError::Backend("the click queue is closed".into()))?;
        rx.await
            .map_err(|_| StoreError::Backend("the click batch was dropped".into()))?
    }
}

async fn run(
    pool: PgPool,
    instance: Arc<str>,
    single: Single,
    rx: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>>,
) {
    loop {
        // One worker takes what is queued; the others wait their turn.
        let jobs = {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut jobs = vec![first];
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            jobs
        };
        if jobs.len() == 1 {
            // Alone: the single path is as cheap and spawns no waiting.
            for j in jobs {
                let r = single(j.req).await;
                let _ = j.reply.send(r);
            }
            continue;
        }
        let reqs: Vec<InteractRequest> = jobs.iter().map(|j| j.req.clone()).collect();
        match apply_set(&pool, &instance, &reqs).await {
            Ok(results) => {
                let mut later = Vec::new();
                for (job, r) in jobs.into_iter().zip(results) {
                    match r {
                        Some(r) => {
                            let _ = job.reply.send(r);
                        }
                        None => later.push(job),
                    }
                }
                for job in later {
                    let _ = job.reply.send(single(job.req).await);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, clicks = jobs.len(), "a click batch failed; one by one");
                for job in jobs {
                    let _ = job.reply.send(single(job.req).await);
                }
            }
        }
    }
}

/// Context of one conversation, read under its lock.
struct ConvCtx {
    chatbot_id: String,
    retention_ms: i64,
    created_at: i64,
    taken_over: bool,
}

/// A decided click, its writes still to do.
struct Decision {
    job: usize,
    message_id: String,
    conversation_id: String,
    chatbot_id: String,
    event_id: String,
    event_type: &'static str,
    payload: Vec<u8>,
    created_at: i64,
    /// The message after this click, when the click changed it.
    changed: Option<String>,
    answered: Option<ApiEvent>,
}

/// Applies the clicks in one transaction. Per click: `Some(result)`, or
/// `None` for one to run on its own afterwards.
async fn apply_set(
    pool: &PgPool,
    instance: &str,
    reqs: &[InteractRequest],
) -> StoreResult<Vec<Option<StoreResult<Done>>>> {
    let mut tx = pool.begin().await.map_err(backend)?;
    let mut ids: Vec<&str> = reqs.iter().map(|r| r.message_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let rows = sqlx::query(
        "SELECT id, doc, created_at FROM messages WHERE id = ANY($1) AND deleted = 0
         ORDER BY conversation_id, id FOR UPDATE",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await
    .map_err(backend)?;
    let mut messages: HashMap<String, Message> = HashMap::with_capacity(rows.len());
    for r in &rows {
        let id: String = r.try_get(0).map_err(backend)?;
        let m = parse_message(
            &r.try_get::<String, _>(1).map_err(backend)?,
            r.try_get(2).map_err(backend)?,
        )?;
        messages.insert(id, m);
    }
    let mut convs: Vec<&str> = messages
        .values()
        .map(|m| m.conversation_id.as_str())
        .collect();
    convs.sort_unstable();
    convs.dedup();
    let ctx = lock_conversations(&mut tx, &convs).await?;
    let mut interactions = pending_interactions(&mut tx, &ids).await?;
    let mut active: HashSet<String> = sqlx::query_scalar(
        "SELECT DISTINCT conversation_id FROM events WHERE conversation_id = ANY($1) AND status IN ('pending', 'failed')",
    )
    .bind(&convs)
    .fetch_all(&mut *tx)
    .await
    .map_err(backend)?
    .into_iter()
    .collect();

    let mut results: Vec<Option<StoreResult<Done>>> = (0..reqs.len()).map(|_| None).collect();
    let mut decisions = Vec::new();
    let mut outs: HashMap<usize, Interacted> = HashMap::new();
    for (k, req) in reqs.iter().enumerate() {
        let Some(msg) = messages.get_mut(&req.message_id) else {
            results[k] = Some(Err(StoreError::NotFound));
            continue;
        };
        if msg.conversation_id != req.conversation_id {
            results[k] = Some(Err(StoreError::NotFound));
            continue;
        }
        if domain::block_gone(msg, &req.action) {
            continue; // on its own, after this batch
        }
        let Some(c) = ctx.get(&msg.conversation_id) else {
            results[k] = Some(Err(StoreError::NotFound));
            continue;
        };
        let list = interactions.entry(msg.id.clone()).or_default();
        let context = Context {
            now_ms: req.now_ms,
            interactive_window_ms: req.interactive_window_ms,
            retention_ms: c.retention_ms,
            conversation_created_ms: c.created_at,
            taken_over: c.taken_over,
            chatbot_id: &c.chatbot_id,
            user: &req.user,
            event_id: &req.event_id,
            response_url: &req.response_url,
            allow_comment: false,
            require_one_checked: false,
        };
        // Decided on a copy: a refused click leaves the message as it was.
        let mut after = msg.clone();
        let d = match domain::decide(list, &mut after, &req.action, context) {
            Ok(d) => d,
            Err(e) => {
                results[k] = Some(Err(StoreError::Api(e)));
                continue;
            }
        };
        *msg = after;
        let answered = d.answered.as_ref().map(|i| ApiEvent {
            chatbot_id: c.chatbot_id.clone(),
            interaction_id: i.id.clone(),
            kind: "interaction.answered",
            data: i.to_json(req.now_ms),
        });
        decisions.push(Decision {
            job: k,
            message_id: msg.id.clone(),
            conversation_id: msg.conversation_id.clone(),
            chatbot_id: c.chatbot_id.clone(),
            event_id: req.event_id.clone(),
            event_type: d.accepted.event_type,
            payload: d.accepted.payload,
            created_at: req.now_ms,
            changed: d.changed.then(|| message_json(msg)),
            answered,
        });
        outs.insert(
            k,
            Interacted {
                message: msg.clone(),
                typing: msg.typing_on_interaction,
                json: None,
            },
        );
    }
    if decisions.is_empty() {
        tx.rollback().await.map_err(backend)?;
        return Ok(results);
    }

    save_interactions(&mut tx, &interactions, &decisions).await?;
    insert_events(&mut tx, &decisions, &mut active).await?;
    save_messages(&mut tx, &messages, &decisions).await?;
    let seqs = insert_stream(&mut tx, &decisions).await?;

    let mut notes = super::notify::Notes::default();
    notes.due(instance);
    let mut done: Vec<(usize, Done)> = Vec::with_capacity(decisions.len());
    let mut seqs = seqs.into_iter();
    for d in decisions {
        let mut stream = Vec::new();
        if let Some(data) = d.changed {
            let seq = seqs
                .next()
                .ok_or_else(|| backend("stream entries missing"))?;
            let e = StreamEvent {
                seq,
                conversation_id: d.conversation_id.clone(),
                kind: "message.updated".into(),
                data,
            };
            notes.stream(instance, &e);
            stream.push(e);
        }
        let api: Vec<ApiEvent> = d.answered.into_iter().collect();
        for a in &api {
            notes.api(instance, a);
        }
        let out = outs
            .remove(&d.job)
            .ok_or_else(|| backend("click result missing"))?;
        done.push((d.job, Done { out, stream, api }));
    }
    notes.send(&mut tx).await?;
    tx.commit().await.map_err(backend)?;
    for (k, d) in done {
        results[k] = Some(Ok(d));
    }
    Ok(results)
}

async fn lock_conversations(
    tx: &mut Tx<'_>,
    convs: &[&str],
) -> StoreResult<HashMap<String, ConvCtx>> {
    let rows = sqlx::query(
        "SELECT v.id, v.chatbot_id, b.retention_ms, v.created_at, v.taken_over_by
         FROM conversations v JOIN chatbots b ON b.id = v.chatbot_id
         WHERE v.id = ANY($1) ORDER BY v.id FOR UPDATE OF v",
    )
    .bind(convs)
    .fetch_all(&mut **tx)
    .await
    .map_err(backend)?;
    let mut out = HashMap::with_capacity(rows.len());
    for r in rows {
        let taken: Option<String> = r.try_get(4).map_err(backend)?;
        out.insert(
            r.try_get(0).map_err(backend)?,
            ConvCtx {
                chatbot_id: r.try_get(1).map_err(backend)?,
                retention_ms: r.try_get(2).map_err(backend)?,
                created_at: r.try_get(3).map_err(backend)?,
                taken_over: taken.is_some(),
            },
        );
    }
    Ok(out)
}

/// The pending and asked interactions of the messages, locked, by message.
async fn pending_interactions(
    tx: &mut Tx<'_>,
    message_ids: &[&str],
) -> StoreResult<HashMap<String, Vec<domain::Interaction>>> {
    let rows = sqlx::query(&format!(
        "SELECT {} FROM interactions WHERE message_id = ANY($1) AND (status = 'pending' OR is_ask = 1)
         ORDER BY message_id, seq FOR UPDATE",
        inbox::COLS
    ))
    .bind(message_ids)
    .fetch_all(&mut **tx)
    .await
    .map_err(backend)?;
    let mut out: HashMap<String, Vec<domain::Interaction>> = HashMap::new();
    for r in &rows {
        let i = inbox::row(r).map_err(backend)?;
        out.entry(i.message_id.clone()).or_default().push(i);
    }
    Ok(out)
}

/// Saves the interactions the batch answered, each once as it ended.
async fn save_interactions(
    tx: &mut Tx<'_>,
    interactions: &HashMap<String, Vec<domain::Interaction>>,
    decisions: &[Decision],
) -> StoreResult<()> {
    let answered: HashSet<&str> = decisions
        .iter()
        .filter_map(|d| d.answered.as_ref().map(|a| a.interaction_id.as_str()))
        .collect();
    if answered.is_empty() {
        return Ok(());
    }
    let (mut ids, mut statuses, mut responses, mut updated, mut at, mut specs) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for i in interactions.values().flatten() {
        if answered.contains(i.id.as_str()) {
            ids.push(i.id.clone());
            statuses.push(i.status.clone());
            responses.push(i.response.as_ref().map(|v| v.to_string()));
            updated.push(i.updated_at);
            at.push(i.answered_at);
            specs.push(serde_json::to_string(&i.spec).unwrap_or_default());
        }
    }
    sqlx::query(
        "UPDATE interactions i SET status = u.status, response = u.response, updated_at = u.updated_at,
           answered_at = u.answered_at, spec = u.spec
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[])
           AS u(id, status, response, updated_at, answered_at, spec)
         WHERE i.id = u.id",
    )
    .bind(&ids)
    .bind(&statuses)
    .bind(&responses)
    .bind(&updated)
    .bind(&at)
    .bind(&specs)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(())
}

/// Inserts the batch's events in click order; a conversation's first is
/// its head when nothing of it is waiting.
async fn insert_events(
    tx: &mut Tx<'_>,
    decisions: &[Decision],
    active: &mut HashSet<String>,
) -> StoreResult<()> {
    let n = decisions.len();
    let (mut ids, mut bots, mut convs, mut types, mut payloads, mut created, mut heads) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for d in decisions {
        ids.push(d.event_id.as_str());
        bots.push(d.chatbot_id.as_str());
        convs.push(d.conversation_id.as_str());
        types.push(d.event_type);
        payloads.push(d.payload.as_slice());
        created.push(d.created_at);
        heads.push(i64::from(active.insert(d.conversation_id.clone())));
    }
    sqlx::query(
        "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head)
         SELECT id, bot, conv, type, payload, created, 'pending', 0, created, head
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::bigint[], $7::bigint[])
           WITH ORDINALITY AS u(id, bot, conv, type, payload, created, head, ord)
         ORDER BY ord",
    )
    .bind(&ids)
    .bind(&bots)
    .bind(&convs)
    .bind(&types)
    .bind(&payloads)
    .bind(&created)
    .bind(&heads)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(())
}

/// Saves each changed message once, as the batch left it.
async fn save_messages(
    tx: &mut Tx<'_>,
    messages: &HashMap<String, Message>,
    decisions: &[Decision],
) -> StoreResult<()> {
    let changed: HashSet<&str> = decisions
        .iter()
        .filter(|d| d.changed.is_some())
        .map(|d| d.message_id.as_str())
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let (mut ids, mut docs) = (Vec::new(), Vec::new());
    for id in changed {
        if let Some(m) = messages.get(id) {
            ids.push(id.to_string());
            docs.push(message_json(m));
        }
    }
    sqlx::query(
        "UPDATE messages m SET doc = u.doc FROM UNNEST($1::text[], $2::text[]) AS u(id, doc) WHERE m.id = u.id",
    )
    .bind(&ids)
    .bind(&docs)
    .execute(&mut **tx)
    .await
    .map_err(backend)?;
    Ok(())
}

/// Inserts the `message.updated` entries in click order; their sequence
/// numbers, in the same order.
async fn insert_stream(tx: &mut Tx<'_>, decisions: &[Decision]) -> StoreResult<Vec<i64>> {
    let (mut convs, mut data) = (Vec::new(), Vec::new());
    for d in decisions {
        if let Some(j) = &d.changed {
            convs.push(d.conversation_id.as_str());
            data.push(j.as_str());
        }
    }
    if convs.is_empty() {
        return Ok(Vec::new());
    }
    let mut seqs: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO stream_events (conversation_id, kind, data)
         SELECT conv, 'message.updated', data FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS u(conv, data, ord)
         ORDER BY ord RETURNING seq",
    )
    .bind(&convs)
    .bind(&data)
    .fetch_all(&mut **tx)
    .await
    .map_err(backend)?;
    seqs.sort_unstable();
    Ok(seqs)
}
