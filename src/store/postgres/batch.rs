//! Group commit for clicks and submits on PostgreSQL, as the SQLite writer
//! does. No timer: a click that finds no batch running starts one at once
//! (alone, it waits for nothing); the clicks that arrive while a batch runs
//! queue, and the batch's task takes all of them into its next transaction
//! when it has committed. Each transaction is one statement per step
//! whatever the number of clicks, and one commit (`synchronous_commit` as
//! the server has it: a click is answered only once its commit is durable).
//!
//! A batch runs on a task of the runtime of the click that started it (an
//! HTTP worker's), not beside the delivery tasks; one at a time.
//!
//! The decisions are the same as a lone click's
//! ([`crate::domain::inbox::decide`]), made one after another in arrival
//! order on the rows as locked, so first-click-wins and the order of a
//! conversation's events hold within a batch, across batches and across
//! instances. Lock order, as everywhere: the batch's messages (by
//! conversation, then id), then their conversations (by id), then the
//! messages' interactions. A batch that fails as a whole (a deadlock with
//! another instance's, a lost connection) is run again one click per
//! transaction, as is a click whose block is gone from its message (the
//! rare `replaced` check, which reads closed interactions too).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use sqlx::Row;
use sqlx::postgres::PgPool;
use tokio::sync::oneshot;

use super::notify::Instance;
use super::{Tx, backend, inbox, message_json, parse_message};
use crate::domain::inbox as domain;
use crate::domain::interact::Context;
use crate::domain::model::Message;
use crate::hub::ApiEvent;
use crate::store::script;
use crate::store::{BoxFut, InteractRequest, Interacted, StoreError, StoreResult, StreamEvent};

/// Most clicks in one transaction.
const MAX_BATCH: usize = 256;
/// Batches in flight: a second made smaller batches and more commits, and
/// cost more CPU per click (docs/BENCHMARKS.md).
const RUNNING: usize = 1;

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

#[derive(Default)]
struct Queue {
    waiting: Vec<Job>,
    running: usize,
}

/// Runs one click in a transaction of its own (`interact_single` in the store).
pub type Single = Arc<dyn Fn(InteractRequest) -> BoxFut<'static, StoreResult<Done>> + Send + Sync>;

/// The clicks of one instance.
#[derive(Clone)]
pub struct Batcher {
    inner: Arc<Inner>,
}

struct Inner {
    queue: Mutex<Queue>,
    pool: PgPool,
    instance: Instance,
    single: Single,
}

impl Batcher {
    pub fn new(pool: PgPool, instance: Instance, single: Single) -> Self {
        Self {
            inner: Arc::new(Inner {
                queue: Mutex::new(Queue::default()),
                pool,
                instance,
                single,
            }),
        }
    }

    pub async fn interact(&self, req: InteractRequest) -> StoreResult<Done> {
        let (reply, rx) = oneshot::channel();
        let start = {
            let mut q = self
                .inner
                .queue
                .lock()
                .map_err(|_| StoreError::Backend("the click queue is poisoned".into()))?;
            q.waiting.push(Job { req, reply });
            if q.running < RUNNING {
                q.running += 1;
                Some(take(&mut q))
            } else {
                None
            }
        };
        if let Some(jobs) = start {
            // A task of its own: a caller that goes away does not leave
            // the clicks it took unanswered.
            let inner = self.inner.clone();
            tokio::spawn(async move { inner.run(jobs).await });
        }
        rx.await
            .map_err(|_| StoreError::Backend("the click batch was dropped".into()))?
    }
}

fn take(q: &mut Queue) -> Vec<Job> {
    if q.waiting.len() <= MAX_BATCH {
        std::mem::take(&mut q.waiting)
    } else {
        q.waiting.drain(..MAX_BATCH).collect()
    }
}

impl Inner {
    /// Runs batches until nothing is waiting.
    async fn run(&self, mut jobs: Vec<Job>) {
        loop {
            self.batch(jobs).await;
            let Ok(mut q) = self.queue.lock() else {
                return;
            };
            if q.waiting.is_empty() {
                q.running -= 1;
                return;
            }
            jobs = take(&mut q);
        }
    }

    async fn batch(&self, jobs: Vec<Job>) {
        let reqs: Vec<&InteractRequest> = jobs.iter().map(|j| &j.req).collect();
        match apply_set(&self.pool, &self.instance, &reqs).await {
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
                    let _ = job.reply.send((self.single)(job.req).await);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, clicks = jobs.len(), "a click batch failed; one by one");
                for job in jobs {
                    let _ = job.reply.send((self.single)(job.req).await);
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

type Results = Vec<Option<StoreResult<Done>>>;

/// Applies the clicks in one transaction. Per click: `Some(result)`, or
/// `None` for one to run on its own afterwards.
async fn apply_set(
    pool: &PgPool,
    instance: &Instance,
    reqs: &[&InteractRequest],
) -> StoreResult<Results> {
    let mut tx = pool.begin().await?;
    let mut ids: Vec<&str> = reqs.iter().map(|r| r.message_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let (mut messages, ctx, mut interactions) = lock_and_read(&mut tx, &ids).await?;

    let mut results: Results = (0..reqs.len()).map(|_| None).collect();
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
            answer: None,
        };
        // Decided on copies: a refused click leaves the message and its
        // interactions as they were.
        let mut after = msg.clone();
        let mut list_after = list.clone();
        let d = match domain::decide(&mut list_after, &mut after, &req.action, context) {
            Ok(d) => d,
            Err(e) => {
                results[k] = Some(Err(StoreError::from(e)));
                continue;
            }
        };
        *msg = after;
        *list = list_after;
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
        let typing = msg.typing_on_interaction;
        outs.insert(
            k,
            Interacted {
                message: msg.clone(),
                typing,
                json: None,
            },
        );
    }
    if decisions.is_empty() {
        tx.rollback().await?;
        return Ok(results);
    }

    let seqs = write(&mut tx, &interactions, &messages, &decisions).await?;

    let mut notes = super::notify::Notes::new(instance);
    notes.due();
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
            notes.stream(&e);
            stream.push(e);
        }
        let api: Vec<ApiEvent> = d.answered.into_iter().collect();
        for a in &api {
            notes.api(a);
        }
        let out = outs
            .remove(&d.job)
            .ok_or_else(|| backend("click result missing"))?;
        done.push((d.job, Done { out, stream, api }));
    }
    notes.send(&mut tx).await?;
    tx.commit().await?;
    for (k, d) in done {
        results[k] = Some(Ok(d));
    }
    Ok(results)
}

/// What a batch reads under its locks: messages, conversations, interactions.
type Locked = (
    HashMap<String, Message>,
    HashMap<String, ConvCtx>,
    HashMap<String, Vec<domain::Interaction>>,
);

/// Locks the messages (by conversation, then id), then their conversations
/// (by id), then the messages' pending and asked interactions (by message,
/// then seq), in one statement: each part is a CTE read only by its own
/// branch of the `UNION ALL`, and the branches run in order, so the locks
/// are taken in the order every writer takes them (the Sort under `v`'s
/// lock takes every message row before the first conversation is locked).
/// A row changed since the statement began is read as committed
/// (PostgreSQL rechecks a row it waited for). A row of the first branch is
/// a message with its conversation; of the second, an interaction.
async fn lock_and_read(tx: &mut Tx<'_>, ids: &[&str]) -> StoreResult<Locked> {
    let typed = "NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, \
                 NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint";
    let rows = sqlx::query(&format!(
        "WITH m AS MATERIALIZED (
           SELECT id, doc, created_at, conversation_id FROM messages WHERE id = ANY($1) AND deleted = 0
           ORDER BY conversation_id, id FOR UPDATE),
         v AS MATERIALIZED (
           SELECT m.id, m.doc, m.created_at, v.id AS conv, v.chatbot_id, b.retention_ms, v.created_at AS conv_at,
             v.taken_over_by
           FROM m JOIN conversations v ON v.id = m.conversation_id JOIN chatbots b ON b.id = v.chatbot_id
           ORDER BY v.id, m.id FOR UPDATE OF v),
         i AS MATERIALIZED (
           SELECT {cols} FROM interactions WHERE message_id = ANY($1) AND (status = 'pending' OR is_ask = 1)
           ORDER BY message_id, seq FOR UPDATE)
         SELECT false, v.*, {typed} FROM v
         UNION ALL
         SELECT true, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, i.* FROM i",
        cols = inbox::COLS
    ))
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    let mut messages = HashMap::with_capacity(rows.len());
    let mut convs = HashMap::new();
    let mut interactions: HashMap<String, Vec<domain::Interaction>> = HashMap::new();
    for r in &rows {
        if r.try_get::<bool, _>(0)? {
            let i = inbox::row_at(r, 9)?;
            interactions
                .entry(i.message_id.clone())
                .or_default()
                .push(i);
            continue;
        }
        let id: String = r.try_get(1)?;
        let m = parse_message(&r.try_get::<String, _>(2)?, r.try_get(3)?)?;
        messages.insert(id, m);
        let cid: String = r.try_get(4)?;
        if let std::collections::hash_map::Entry::Vacant(e) = convs.entry(cid) {
            let taken: Option<String> = r.try_get(8)?;
            e.insert(ConvCtx {
                chatbot_id: r.try_get(5)?,
                retention_ms: r.try_get(6)?,
                created_at: r.try_get(7)?,
                taken_over: taken.is_some(),
            });
        }
    }
    Ok((messages, convs, interactions))
}

/// The batch's writes in one statement: the interactions it answered and
/// the messages it changed (each once, as the batch left it), its events
/// in click order (a conversation's first is its head when nothing of it
/// is waiting, read after the locks), and its `message.updated` entries in
/// click order. Returns the entries' sequence numbers, in that order.
async fn write(
    tx: &mut Tx<'_>,
    interactions: &HashMap<String, Vec<domain::Interaction>>,
    messages: &HashMap<String, Message>,
    decisions: &[Decision],
) -> StoreResult<Vec<i64>> {
    let answered: HashSet<&str> = decisions
        .iter()
        .filter_map(|d| d.answered.as_ref().map(|a| a.interaction_id.as_str()))
        .collect();
    let (mut i_ids, mut statuses, mut responses, mut updated, mut at, mut specs) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for i in interactions.values().flatten() {
        if answered.contains(i.id.as_str()) {
            i_ids.push(i.id.as_str());
            statuses.push(i.status.as_str());
            responses.push(i.response.as_ref().map(|v| v.to_string()));
            updated.push(i.updated_at);
            at.push(i.answered_at);
            specs.push(serde_json::to_string(&i.spec).unwrap_or_default());
        }
    }
    let changed: HashSet<&str> = decisions
        .iter()
        .filter(|d| d.changed.is_some())
        .map(|d| d.message_id.as_str())
        .collect();
    let (mut m_ids, mut docs) = (Vec::new(), Vec::new());
    for id in changed {
        if let Some(m) = messages.get(id) {
            m_ids.push(id);
            docs.push(message_json(m));
        }
    }
    let n = decisions.len();
    let (mut ids, mut bots, mut convs, mut types, mut payloads, mut created) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut s_convs, mut s_data) = (Vec::new(), Vec::new());
    for d in decisions {
        ids.push(d.event_id.as_str());
        bots.push(d.chatbot_id.as_str());
        convs.push(d.conversation_id.as_str());
        types.push(d.event_type);
        payloads.push(d.payload.as_slice());
        created.push(d.created_at);
        if let Some(j) = &d.changed {
            s_convs.push(d.conversation_id.as_str());
            s_data.push(j.as_str());
        }
    }
    // Only the parts with rows to write: fewer parts, less to plan (each
    // time) and run; a click that answers and changes nothing is one insert.
    let answering = !i_ids.is_empty();
    let changing = !m_ids.is_empty();
    let streaming = !s_convs.is_empty();
    let sql = write_sql(answering, changing, streaming);
    let mut q = sqlx::query_scalar::<_, i64>(&sql);
    if answering {
        q = q
            .bind(&i_ids)
            .bind(&statuses)
            .bind(&responses)
            .bind(&updated)
            .bind(&at)
            .bind(&specs);
    }
    if changing {
        q = q.bind(&m_ids).bind(&docs);
    }
    q = q
        .bind(&ids)
        .bind(&bots)
        .bind(&convs)
        .bind(&types)
        .bind(&payloads)
        .bind(&created);
    if streaming {
        q = q.bind(&s_convs).bind(&s_data);
    }
    let mut seqs: Vec<i64> = q.fetch_all(&mut **tx).await?;
    seqs.sort_unstable();
    Ok(seqs)
}

/// The batch's statement with the parts it needs, parameters numbered in
/// the order [`write`] binds them: answered interactions (6), changed
/// messages (2), events (6, always), stream entries (2, whose sequence
/// numbers it returns).
fn write_sql(answering: bool, changing: bool, streaming: bool) -> String {
    let mut n = 0;
    let mut p = |k: usize| -> Vec<String> {
        (0..k)
            .map(|_| {
                n += 1;
                format!("${n}")
            })
            .collect()
    };
    let mut parts = Vec::new();
    if answering {
        let v = p(6);
        parts.push(format!(
            "answered AS (
           UPDATE interactions i SET status = u.status, response = u.response, updated_at = u.updated_at,
             answered_at = u.answered_at, spec = u.spec
           FROM UNNEST({}::text[], {}::text[], {}::text[], {}::bigint[], {}::bigint[], {}::text[])
             AS u(id, status, response, updated_at, answered_at, spec)
           WHERE i.id = u.id RETURNING 1)",
            v[0], v[1], v[2], v[3], v[4], v[5]
        ));
    }
    if changing {
        let v = p(2);
        parts.push(format!(
            "changed AS (
           UPDATE messages m SET doc = u.doc FROM UNNEST({}::text[], {}::text[]) AS u(id, doc)
           WHERE m.id = u.id RETURNING 1)",
            v[0], v[1]
        ));
    }
    let v = p(6);
    let events = format!(
        "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head)
           SELECT id, bot, conv, type, payload, created, 'pending', 0, created,
             CASE WHEN row_number() OVER (PARTITION BY conv ORDER BY ord) = 1
                    AND NOT EXISTS (SELECT 1 FROM events x WHERE x.conversation_id = u.conv AND x.status IN ('pending', 'failed'))
                  THEN 1 ELSE 0 END
           FROM UNNEST({}::text[], {}::text[], {}::text[], {}::text[], {}::bytea[], {}::bigint[])
             WITH ORDINALITY AS u(id, bot, conv, type, payload, created, ord)
           ORDER BY ord",
        v[0], v[1], v[2], v[3], v[4], v[5]
    );
    let last = if streaming {
        parts.push(format!("queued AS ({events} RETURNING 1)"));
        let v = p(2);
        format!(
            "INSERT INTO stream_events (conversation_id, kind, data)
         SELECT conv, 'message.updated', data FROM UNNEST({}::text[], {}::text[]) WITH ORDINALITY AS u(conv, data, ord)
         ORDER BY ord RETURNING seq",
            v[0], v[1]
        )
    } else {
        events
    };
    if parts.is_empty() {
        last
    } else {
        format!("WITH {}\n         {last}", parts.join(", "))
    }
}

/// One click in a transaction of its own, as before group commit: for a
/// click a batch set aside or a batch that failed.
pub async fn interact_single(
    pool: &PgPool,
    instance: &Instance,
    req: InteractRequest,
) -> StoreResult<Done> {
    let mut tx = pool.begin().await?;
    let fx = script::inbox::interact(&mut tx, &req).await?;
    let (stream, api) = (fx.announce.stream, fx.announce.api);
    super::commit_noting(instance, tx, &stream, &api, true).await?;
    Ok(Done {
        out: fx.out,
        stream,
        api,
    })
}

/// The single path as the batcher calls it.
pub fn single(pool: PgPool, instance: Instance) -> Single {
    Arc::new(move |req| {
        let (pool, instance) = (pool.clone(), instance.clone());
        Box::pin(async move { interact_single(&pool, &instance, req).await })
    })
}

#[cfg(test)]
mod tests {
    use super::write_sql;

    #[test]
    fn each_statement_numbers_its_parameters_in_binding_order() {
        for bits in 0..8u8 {
            let (a, c, s) = (bits & 1 == 1, bits & 2 == 2, bits & 4 == 4);
            let sql = write_sql(a, c, s);
            let want = 6 * a as usize + 2 * c as usize + 6 + 2 * s as usize;
            for k in 1..=want {
                assert!(sql.contains(&format!("${k}::")), "{bits}: ${k} in {sql}");
            }
            assert!(!sql.contains(&format!("${}::", want + 1)), "{bits}: {sql}");
            assert_eq!(sql.contains("interactions"), a);
            assert_eq!(sql.contains("UPDATE messages"), c);
            assert_eq!(sql.contains("RETURNING seq"), s);
        }
    }
}
