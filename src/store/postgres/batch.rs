//! Group commit for clicks and submits on PostgreSQL, as the SQLite writer
//! does. No timer: a click that finds no batch running starts one at once
//! (alone, it waits for nothing); the clicks that arrive while a batch runs
//! queue, and the batch's task takes all of them into its next transaction
//! when it has committed. Each transaction is one statement per step
//! whatever the number of clicks, and one commit (`synchronous_commit` as
//! the server has it: a click is answered only once its commit is durable),
//! on a connection of the batches' own: `BEGIN`, the read, the write and
//! `COMMIT`, every value a bound parameter (arrays for the write's rows).
//! Under load, three round trips: a batch with clicks waiting behind it
//! sends the next one's `BEGIN` with its `COMMIT`.
//!
//! A batch runs on a task of the runtime of the click that started it (an
//! HTTP worker's), not beside the delivery tasks; one at a time.
//!
//! A batch is the one path of a click ([`clicks::run`]) with N clicks:
//! this file supplies its load and its apply. Each click is decided as a
//! lone click is, one after another in arrival order on the rows as
//! locked, so first-click-wins and the order of a conversation's events
//! hold within a batch, across batches and across
//! instances. Lock order, as everywhere: the batch's messages (by
//! conversation, then id), then their conversations (by id), then the
//! messages' interactions. A batch that fails as a whole (a deadlock with
//! another instance's, a lost connection) is run again one click per
//! transaction, as is a click whose block is gone from its message (the
//! rare `replaced` check, which reads closed interactions too). A batch
//! that found the database out of reach (or waited on it past
//! [`BATCH_BOUND`]) is not run again: all its clicks are answered so (503
//! with `Retry-After`) at once; when one of the clicks run on their own
//! finds it out of reach, the rest are answered so without waiting again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sqlx::postgres::{PgConnection, PgPool};
use tokio::sync::oneshot;

use super::connect::Held;
use super::message_json;
use super::notify::Instance;
use super::queued::{Lease, Queued};
use crate::store::ApiEvent;
use crate::store::script;
use crate::store::script::clicks::{self, Applied, Clicks, Cmd, Decided, Loaded};
use crate::store::{
    BoxFut, Claimed, InteractRequest, Interacted, NewEvent, StoreError, StoreResult, StreamEvent,
};

mod read;
mod write;
pub use write::events_only_sql;

use write::Write;

/// Most clicks in one transaction.
const MAX_BATCH: usize = 256;
/// Batches in flight: a second made smaller batches and more commits, and
/// cost more CPU per click (docs/notes/BENCHMARKS.md).
const RUNNING: usize = 1;
/// The longest a batch's transaction may take once it has its connection:
/// a database that stopped answering (no error, no reset) must not hold
/// the clicks queued behind it, nor the batches after it. Its connection
/// is closed; a commit it may still have made is the case §15 allows (the
/// store lost its answer to a commit it made). Longer than a request's
/// bound (`store::circuit::BOUND`, which answers the clicks 503 first): a
/// batch slowed by lock waits under load is not cut.
const BATCH_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

/// What a click produced, published by the caller once committed.
pub struct Done {
    pub out: Interacted,
    pub stream: Vec<StreamEvent>,
    pub api: Vec<ApiEvent>,
    /// A delivery may be due in the table (not all of it queued here).
    pub due: bool,
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
    /// The batches' own connection (one batch at a time).
    conn: Held,
    instance: Instance,
    single: Single,
    queued: Arc<Queued>,
    /// Whether the batches' connection has a transaction open, begun with
    /// the last batch's `COMMIT` for the clicks that waited behind it.
    /// Read and set only while the connection is held.
    open: AtomicBool,
}

impl Batcher {
    /// Clicks on `conn`, a connection of their own; `pool` gives queued
    /// deliveries back to the table.
    pub fn new(
        pool: PgPool,
        conn: Held,
        instance: Instance,
        single: Single,
        queued: Arc<Queued>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                queue: Mutex::new(Queue::default()),
                pool,
                conn,
                instance,
                single,
                queued,
                open: AtomicBool::new(false),
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

    async fn batch(&self, mut jobs: Vec<Job>) {
        // A click whose caller has gone (answered 503 at the store's bound,
        // or disconnected) is not applied: no one would hear it was.
        jobs.retain(|j| !j.reply.is_closed());
        if jobs.is_empty() {
            return;
        }
        let reqs: Vec<&InteractRequest> = jobs.iter().map(|j| &j.req).collect();
        match self.apply_set(&reqs).await {
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
            // The database is out of reach: every click of the batch is
            // answered so at once, none waits again on its own.
            Err(Failed::Reach(e)) => {
                tracing::debug!(error = %e, clicks = jobs.len(), "a click batch found the database out of reach");
                let e = e.to_string();
                for job in jobs {
                    let _ = job.reply.send(Err(StoreError::Unavailable(e.clone())));
                }
            }
            Err(Failed::Run(e)) => {
                tracing::debug!(error = %e, clicks = jobs.len(), "a click batch failed; one by one");
                // A click that finds the database out of reach on its own
                // too answers for the rest: each would wait as long again.
                let mut down: Option<String> = None;
                for job in jobs {
                    let r = match &down {
                        Some(e) => Err(StoreError::Unavailable(e.clone())),
                        None => (self.single)(job.req).await,
                    };
                    if let Err(StoreError::Unavailable(e)) = &r {
                        down = Some(e.clone());
                    }
                    let _ = job.reply.send(r);
                }
            }
        }
    }
}

type Results = Vec<Option<StoreResult<Done>>>;

impl Inner {
    /// Applies the clicks in one transaction. Per click: `Some(result)`, or
    /// `None` for one to run on its own afterwards.
    ///
    /// `BEGIN`, the read, the write, and `COMMIT`, each a round trip (the
    /// `BEGIN` none when the last batch's `COMMIT` brought it); the
    /// notifications one more, only where another instance may hear them
    /// (they name the write's stream entries). The read and the write are
    /// statements of fixed text (one per shape of the write), prepared by
    /// the driver once per connection, every value bound. A failure closes
    /// the connection, whatever transaction it left open with it. Once the
    /// `COMMIT` came back, nothing fails the batch (a failure then would
    /// send committed clicks round again).
    async fn apply_set(&self, reqs: &[&InteractRequest]) -> Result<Results, Failed> {
        let mut held = self.conn.get().await.map_err(Failed::Reach)?;
        if held.fresh() {
            self.open.store(false, Ordering::Relaxed);
        }
        // Only a connection kept between batches may leave one open.
        let chain = held.keeps();
        let r = match held.conn() {
            Ok(conn) => {
                match tokio::time::timeout(BATCH_BOUND, self.apply_on(conn, reqs, chain)).await {
                    Ok(r) => r,
                    Err(_) => {
                        let e = StoreError::Unavailable(format!(
                            "a click batch had no answer within {} ms",
                            BATCH_BOUND.as_millis()
                        ));
                        return held.check_closing(Err(e)).map_err(Failed::Reach);
                    }
                }
            }
            Err(e) => Err(e),
        };
        held.check_closing(r).map_err(Failed::Run)
    }
}

/// How a batch failed.
enum Failed {
    /// No connection, or no answer within [`BATCH_BOUND`]: the database is
    /// out of reach, and each click would wait as long again.
    Reach(StoreError),
    /// The transaction failed (a deadlock, a connection cut under it):
    /// its clicks are run again one by one.
    Run(StoreError),
}

impl Inner {
    async fn apply_on(
        &self,
        conn: &mut PgConnection,
        reqs: &[&InteractRequest],
        chain: bool,
    ) -> StoreResult<Results> {
        let (pool, instance, queued) = (&self.pool, &self.instance, &*self.queued);
        // A failure from here on closes the connection: `open` is then
        // reset by the next batch's fresh one.
        if !self.open.swap(false, Ordering::Relaxed) {
            sqlx::Executor::execute(&mut *conn, "BEGIN").await?;
        }
        let cmds: Vec<Cmd<'_>> = reqs.iter().map(|r| Cmd::visitor(r)).collect();
        let mut on = OnConn {
            conn: &mut *conn,
            queued,
            applied: None,
        };
        let outcomes = clicks::run(&mut on, &cmds).await?;
        let applied = on.applied;
        let due = applied.as_ref().is_some_and(|a| a.1);
        let mut notes = super::notify::Notes::new(instance);
        if due {
            notes.due();
        }
        let mut hot = Vec::new();
        let results: Results = outcomes
            .into_iter()
            .map(|o| {
                o.map(|r| {
                    r.map(|mut fx| {
                        fx.announce.stream.iter().for_each(|e| notes.stream(e));
                        fx.announce.api.iter().for_each(|a| notes.api(a));
                        hot.extend(fx.hot.take());
                        Done {
                            out: fx.out,
                            stream: fx.announce.stream,
                            api: fx.announce.api,
                            due,
                        }
                    })
                })
            })
            .collect();
        // Nothing accepted: nothing written.
        let Some((lease, _)) = applied else {
            sqlx::Executor::execute(&mut *conn, "ROLLBACK").await?;
            return Ok(results);
        };
        notes.send_on(conn).await?;
        // Clicks waiting already: the next batch's `BEGIN` rides with this
        // `COMMIT` (one simple query of fixed text; a failed `COMMIT` stops
        // it before the `BEGIN`). An open transaction that has run nothing
        // holds no snapshot and no lock.
        let next = chain && self.queue.lock().is_ok_and(|q| !q.waiting.is_empty());
        let t0 = std::time::Instant::now();
        sqlx::Executor::execute(&mut *conn, if next { "COMMIT; BEGIN" } else { "COMMIT" }).await?;
        self.open.store(next, Ordering::Relaxed);
        crate::telemetry::metrics::store_commit(t0.elapsed());
        if let Some(l) = &lease {
            let back = queued.push(hot, l.until);
            // Closed while the batch ran: the table's again, for anyone. The
            // clicks are committed whatever this does (an error here must not
            // send them round again).
            if !back.is_empty()
                && let Err(e) = super::queue::release_to_table(pool, instance, back).await
            {
                tracing::warn!(error = %e, "giving back queued deliveries failed; their leases expire");
            }
        }
        Ok(results)
    }
}

/// A batch's load and apply ([`Clicks`]) on its connection.
struct OnConn<'c> {
    conn: &'c mut PgConnection,
    queued: &'c Queued,
    /// Once applied: the lease its head events took, and whether an event
    /// was left to the table (any instance's to claim).
    applied: Option<(Option<Lease>, bool)>,
}

impl Clicks for OnConn<'_> {
    async fn load(&mut self, cmds: &[Cmd<'_>]) -> StoreResult<Loaded> {
        // A message id with a NUL names no message (text cannot hold one).
        let mut ids: Vec<&str> = cmds
            .iter()
            .map(|c| c.message_id)
            .filter(|id| !id.contains('\0'))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        read::read(self.conn, &ids).await
    }

    async fn apply(
        &mut self,
        loaded: &Loaded,
        decided: &[Decided],
        events: Vec<NewEvent>,
    ) -> StoreResult<Vec<Applied>> {
        let lease = self.queued.lease(crate::domain::time::now_ms());
        let docs: Vec<Option<String>> = decided
            .iter()
            .map(|d| d.changed.then(|| message_json(&d.message)))
            .collect();
        let written = Write::new(loaded, decided, &events, &docs, lease.as_ref())
            .run(self.conn)
            .await?;
        self.applied = Some((lease, written.due));
        let mut seqs = written.seqs.into_iter();
        let mut applied = Vec::with_capacity(decided.len());
        for ((d, e), doc) in decided.iter().zip(events).zip(docs) {
            let mut a = Applied::default();
            // One entry per changed click, by the statement's making.
            if let Some(data) = doc
                && let Some(seq) = seqs.next()
            {
                a.stream = Some(StreamEvent {
                    seq,
                    conversation_id: e.conversation_id.clone(),
                    kind: "message.updated".into(),
                    data,
                });
            }
            if let Some(&seq) = written.queued.get(e.id.as_str()) {
                a.hot = Some(Claimed::fresh(seq, e, d.bot.clone()));
            }
            applied.push(a);
        }
        Ok(applied)
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
    let fx = script::clicks::interact(&mut tx, &req).await?;
    let (stream, api) = (fx.announce.stream, fx.announce.api);
    super::commit_noting(instance, tx, &stream, &api, true).await?;
    Ok(Done {
        out: fx.out,
        stream,
        api,
        due: true,
    })
}

/// The single path as the batcher calls it.
pub fn single(pool: PgPool, instance: Instance) -> Single {
    Arc::new(move |req| {
        let (pool, instance) = (pool.clone(), instance.clone());
        Box::pin(async move { interact_single(&pool, &instance, req).await })
    })
}
