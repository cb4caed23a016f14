//! The delivery queue: conversations locked in order, events inserted and
//! promoted to head, claims, attempt records, leases and the queue's figures.

use crate::domain::ids::{ChatbotId, EventId};
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use std::collections::HashMap;

use super::*;

/// Serialises the event queue of one conversation across instances; false
/// when the conversation is gone (erased or purged).
pub(super) async fn lock_conversation(tx: &mut Tx<'_>, conversation_id: &str) -> StoreResult<bool> {
    let row = sqlx::query("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE")
        .bind(conversation_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.is_some())
}

pub(super) async fn insert_event(tx: &mut Tx<'_>, e: &NewEvent) -> StoreResult<()> {
    if !lock_conversation(tx, &e.conversation_id).await? {
        return Err(StoreError::NotFound);
    }
    sqlx::query(
        "WITH queued AS (
           INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head, traceparent, routed)
           VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $6,
                   CASE WHEN EXISTS (SELECT 1 FROM events WHERE conversation_id = $3 AND status IN ('pending', 'failed')) THEN 0 ELSE 1 END, $7,
                   CASE WHEN EXISTS (SELECT 1 FROM endpoints WHERE chatbot_id = $2 AND is_default = 0) THEN 0 ELSE 1 END)
           RETURNING seq, routed)
         INSERT INTO unrouted_events (seq) SELECT seq FROM queued WHERE routed = 0",
    )
    .bind(&e.id)
    .bind(&e.chatbot_id)
    .bind(&e.conversation_id)
    .bind(e.event_type)
    .bind(&e.payload)
    .bind(e.created_at)
    .bind(&e.trace)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

pub(super) async fn promote_next(tx: &mut Tx<'_>, conversation_id: &str) -> StoreResult<()> {
    sqlx::query(
        "UPDATE events SET is_head = 1 WHERE seq = (
            SELECT min(seq) FROM events WHERE conversation_id = $1 AND status IN ('pending', 'failed'))
         AND is_head = 0",
    )
    .bind(conversation_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// An attempt's effect on its event: status, next attempt time, and whether
/// the event stays its conversation's head.
pub(super) fn attempt_outcome(rec: &AttemptRecord) -> (&'static str, i64, bool) {
    let (next, is_head) = match rec.next {
        AttemptNext::Succeeded | AttemptNext::Dead | AttemptNext::Skipped => (0, false),
        AttemptNext::RetryAt(t) => (t, true),
        AttemptNext::EndpointGone => (rec.at_ms, true),
    };
    (rec.next.status_str(), next, is_head)
}

/// Binds what one attempt came to, `at` to `request_headers`, in the order
/// both attempts tables keep them.
pub(super) fn bind_outcome<'q>(
    q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    rec: &'q AttemptRecord,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    q.bind(rec.at_ms)
        .bind(rec.status_code.map(i64::from))
        .bind(rec.duration_ms)
        .bind(&rec.error)
        .bind(&rec.response_excerpt)
        .bind(&rec.request_headers)
}

/// An attempt of an event's delivery to its default endpoint (not for an
/// event erased while it was on the wire).
const RECORD_ATTEMPT: &str = "INSERT INTO attempts (event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
     SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM events WHERE id = $1)
     ON CONFLICT (event_id, number) DO UPDATE SET at = EXCLUDED.at, status_code = EXCLUDED.status_code,
       duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error, response_excerpt = EXCLUDED.response_excerpt,
       request_headers = EXCLUDED.request_headers";

/// Records one attempt; true when its conversation's next event may have
/// become the head.
pub(super) async fn record_one(tx: &mut Tx<'_>, rec: &AttemptRecord) -> StoreResult<bool> {
    // Not for an event erased with its conversation while on the wire,
    // nor for one skipped unsent.
    if rec.next != AttemptNext::Skipped {
        let q = sqlx::query(RECORD_ATTEMPT)
            .bind(&rec.event_id)
            .bind(rec.number as i64);
        bind_outcome(q, rec).execute(&mut **tx).await?;
    }
    let (status, next, is_head) = attempt_outcome(rec);
    if !is_head {
        lock_conversation(tx, &rec.conversation_id).await?;
    }
    sqlx::query(
        "UPDATE events SET status = $2, attempts = GREATEST(attempts, $3), next_attempt_at = $4,
         is_head = $5, leased_until = 0 WHERE id = $1",
    )
    .bind(&rec.event_id)
    .bind(status)
    .bind(rec.number as i64)
    .bind(next)
    .bind(is_head as i64)
    .execute(&mut **tx)
    .await?;
    if rec.next == AttemptNext::EndpointGone {
        sqlx::query("UPDATE chatbots SET endpoint_disabled = 1 WHERE id = (SELECT chatbot_id FROM events WHERE id = $1)")
            .bind(&rec.event_id)
            .execute(&mut **tx)
            .await?;
    }
    if !is_head {
        promote_next(tx, &rec.conversation_id).await?;
    }
    Ok(!is_head)
}

/// Whether a batch of records can be written set-wise: each event once
/// (one statement cannot update a row twice) and no endpoint to disable.
pub(super) fn settable(records: &[AttemptRecord]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(records.len());
    records.iter().all(|r| {
        !matches!(r.next, AttemptNext::EndpointGone | AttemptNext::Skipped)
            && seen.insert(r.event_id.as_str())
    })
}

/// Records a batch in two statements whatever its size (each round trip
/// measured as most of PostgreSQL's CPU for a lone delivery): the
/// conversations whose event ends are locked in one order (which waits for
/// a click inserting an event into one of them), then one statement, with
/// a snapshot taken after the locks, inserts the attempts, updates the
/// events and promotes each such conversation's next event to head: the
/// earliest undelivered one that is not in the batch (the statement sees
/// the batch's events as they were before it). Same effect as
/// [`record_one`] for each record; true when an event became head.
pub(super) async fn record_set(tx: &mut Tx<'_>, records: &[AttemptRecord]) -> StoreResult<bool> {
    let n = records.len();
    let mut headers = Vec::with_capacity(n);
    // One array per column (a batch is a few hundred rows at most).
    let (mut ids, mut numbers, mut ats, mut codes, mut durations, mut errors, mut excerpts) =
        <(Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>)>::default();
    let (mut statuses, mut nexts, mut heads) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut ended: Vec<&str> = Vec::new();
    for rec in records {
        ids.push(rec.event_id.as_str());
        numbers.push(rec.number as i64);
        ats.push(rec.at_ms);
        codes.push(rec.status_code.map(i64::from));
        durations.push(rec.duration_ms);
        errors.push(rec.error.as_deref());
        excerpts.push(rec.response_excerpt.as_deref());
        headers.push(rec.request_headers.as_deref());
        let (status, next, is_head) = attempt_outcome(rec);
        statuses.push(status);
        nexts.push(next);
        heads.push(is_head as i64);
        if !is_head {
            ended.push(rec.conversation_id.as_str());
        }
    }
    ended.sort_unstable();
    ended.dedup();
    if !ended.is_empty() {
        sqlx::query("SELECT 1 FROM conversations WHERE id = ANY($1) ORDER BY id FOR UPDATE")
            .bind(&ended)
            .execute(&mut **tx)
            .await?;
    }
    let promoted: i64 = sqlx::query_scalar(
        "WITH unflushed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)),
         attempted AS (
           INSERT INTO attempts (event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
           SELECT u.* FROM UNNEST($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[])
             AS u(event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
           WHERE EXISTS (SELECT 1 FROM events e WHERE e.id = u.event_id)
           ON CONFLICT (event_id, number) DO UPDATE SET at = EXCLUDED.at, status_code = EXCLUDED.status_code,
             duration_ms = EXCLUDED.duration_ms, error = EXCLUDED.error, response_excerpt = EXCLUDED.response_excerpt,
             request_headers = EXCLUDED.request_headers
         ), updated AS (
           UPDATE events e SET status = u.status, attempts = GREATEST(e.attempts, u.number),
             next_attempt_at = u.next, is_head = u.is_head, leased_until = 0
           FROM UNNEST($1::text[], $9::text[], $2::bigint[], $10::bigint[], $11::bigint[]) AS u(id, status, number, next, is_head)
           WHERE e.id = u.id
         ), promoted AS (
           -- Each conversation's first waiting event other than those just
           -- ended (this statement does not see its own updates), read
           -- from the front of its index: a long queue behind it is not read.
           UPDATE events SET is_head = 1 WHERE seq IN (
             SELECT n.seq FROM UNNEST($12::text[]) AS c(id)
             CROSS JOIN LATERAL (
               SELECT seq FROM events
               WHERE conversation_id = c.id AND status IN ('pending', 'failed') AND NOT (id = ANY($1))
               ORDER BY seq LIMIT 1) n)
           AND is_head = 0
           RETURNING 1
         )
         SELECT (SELECT count(*) FROM promoted) FROM unflushed",
    )
    .bind(&ids)
    .bind(&numbers)
    .bind(&ats)
    .bind(&codes)
    .bind(&durations)
    .bind(&errors)
    .bind(&excerpts)
    .bind(&headers)
    .bind(&statuses)
    .bind(&nexts)
    .bind(&heads)
    .bind(&ended)
    .fetch_one(&mut **tx)
    .await?;
    Ok(promoted > 0)
}

/// Ends the leases of deliveries queued here that will not start here, and
/// says they are due: any instance may claim them.
pub(super) async fn release_to_table(
    pool: &PgPool,
    instance: &notify::Instance,
    ids: Vec<EventId>,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE events SET leased_until = 0 WHERE id = ANY($1)")
        .bind(&ids)
        .execute(&mut *tx)
        .await?;
    commit_noting(instance, tx, &[], &[], true).await
}

impl PostgresStore {
    /// Takes from [`queued`] for a claim; what goes back to the table is
    /// released there, and this instance's claim loop reads the table next.
    async fn take_queued(&self, ask: &ClaimAsk) -> Vec<Claimed> {
        let (taken, back) = self
            .queued
            .take(ask.now_ms, ask.lease_until, ask.limit, &ask.room);
        if !back.is_empty() {
            // The ones taken start whatever this does.
            if let Err(e) = release_to_table(&self.pool, &self.instance, back).await {
                tracing::warn!(error = %e, "giving back queued deliveries failed; their leases expire");
            }
            self.signals.events_due();
        }
        taken
    }

    /// Records a batch of attempts in one transaction on `conn`.
    async fn record(&self, conn: &mut PgConnection, records: &[AttemptRecord]) -> StoreResult<()> {
        let mut tx = conn.begin().await?;
        let promoted = if settable(records) {
            record_set(&mut tx, records).await?
        } else {
            sqlx::query("SELECT set_config('synchronous_commit', 'off', true)")
                .execute(&mut *tx)
                .await?;
            let mut promoted = false;
            for rec in records {
                promoted |= record_one(&mut tx, rec).await?;
            }
            promoted
        };
        self.commit(tx, &[], &[], promoted).await?;
        if promoted {
            self.signals.events_due();
        }
        Ok(())
    }
}

impl Queue for PostgresStore {
    fn claim_due(&self, ask: ClaimAsk) -> StoreFut<'_, Claim> {
        Box::pin(async move {
            let mut out = self.take_queued(&ask).await;
            let ClaimAsk {
                now_ms,
                lease_until,
                limit,
                room: skip,
            } = ask;
            if out.len() >= limit {
                return Ok(Claim {
                    claimed: out,
                    next_due_at: None,
                });
            }
            let limit = limit - out.len();
            // The chatbot's row comes with its claimed events (the
            // delivery needs its URL and secrets), and a short claim says
            // when the next delivery it left falls due (read in the same
            // snapshot, the claimed rows left out): one round trip, not
            // three. The one `next` row is there when nothing was claimed.
            let q = format!(
                "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)),
                 claimed AS (
                   UPDATE events SET leased_until = $2,
                     attempts = attempts + CASE WHEN leased_until > 0 THEN 1 ELSE 0 END
                   WHERE seq IN (
                    SELECT e.seq FROM events e
                    WHERE e.is_head = 1 AND e.status IN ('pending', 'failed')
                      AND e.next_attempt_at <= $1 AND e.leased_until <= $1
                      AND NOT (e.chatbot_id = ANY($3))
                      AND e.chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                    ORDER BY e.next_attempt_at, e.seq LIMIT $4
                    FOR UPDATE SKIP LOCKED)
                   RETURNING seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base, traceparent),
                 next AS (
                   SELECT s.short, CASE WHEN s.short THEN (
                     SELECT min(GREATEST(e.next_attempt_at, e.leased_until)) FROM events e
                     WHERE e.is_head = 1 AND e.status IN ('pending', 'failed')
                       AND e.chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                       AND e.seq NOT IN (SELECT seq FROM claimed)) END AS at
                   FROM (SELECT count(*) < $4 AS short FROM claimed) s)
                 SELECT {}, c.seq, c.id, c.chatbot_id, c.conversation_id, c.payload, c.attempts, c.attempt_base,
                   n.short, n.at, c.traceparent
                 FROM next n CROSS JOIN unflushed
                   LEFT JOIN (claimed c LEFT JOIN chatbots b ON b.id = c.chatbot_id) ON true",
                CHATBOT_COLS
                    .split(", ")
                    .map(|col| format!("b.{col}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let mut held = self.claiming.get().await?;
            let r = sqlx::query(&q)
                .bind(now_ms)
                .bind(lease_until)
                .bind(&skip)
                .bind(limit as i64)
                .fetch_all(held.conn()?)
                .await
                .map_err(StoreError::from);
            let rows = match held.check(r) {
                Ok(rows) => rows,
                // The queued deliveries are claimed already: they start.
                Err(e) if !out.is_empty() => {
                    tracing::warn!(error = %e, "claiming deliveries from the table failed");
                    return Ok(Claim {
                        claimed: out,
                        next_due_at: None,
                    });
                }
                Err(e) => return Err(e),
            };
            // The event's columns follow the chatbot's.
            let at = CHATBOT_COLS.split(", ").count();
            let mut bots: HashMap<ChatbotId, Arc<Chatbot>> = HashMap::new();
            out.reserve(rows.len());
            let mut next_due_at = None;
            for r in &rows {
                if r.try_get::<bool, _>(at + 7)? {
                    next_due_at = Some(r.try_get::<Option<i64>, _>(at + 8)?);
                }
                let Some(chatbot_id) = r.try_get::<Option<ChatbotId>, _>(at + 2)? else {
                    continue; // the `next` row alone: nothing was claimed
                };
                // None when the chatbot is gone: the dispatcher reads it
                // and records what it finds.
                let bot = match bots.get(&chatbot_id) {
                    Some(b) => Some(b.clone()),
                    None if r.try_get::<Option<String>, _>(0)?.is_none() => None,
                    None => {
                        let b = Arc::new(chatbot_row(r)?);
                        bots.insert(chatbot_id.clone(), b.clone());
                        Some(b)
                    }
                };
                out.push(Claimed {
                    seq: r.try_get(at)?,
                    event_id: r.try_get(at + 1)?,
                    chatbot_id,
                    conversation_id: r.try_get(at + 3)?,
                    payload: bytes::Bytes::from(r.try_get::<Vec<u8>, _>(at + 4)?),
                    attempts: r.try_get::<i64, _>(at + 5)? as u32,
                    attempt_base: r.try_get::<i64, _>(at + 6)? as u32,
                    trace: r.try_get(at + 9)?,
                    bot,
                });
            }
            out.sort_by_key(|c| c.seq);
            self.queued.scanned(next_due_at);
            Ok(Claim {
                claimed: out,
                next_due_at,
            })
        })
    }

    fn claim_queued(&self, ask: ClaimAsk) -> StoreFut<'_, Claim> {
        Box::pin(async move {
            let claimed = self.take_queued(&ask).await;
            Ok(Claim {
                claimed,
                next_due_at: self.queued.due(),
            })
        })
    }

    fn stop_queueing(&self) -> StoreFut<'_, ()> {
        Box::pin(async move {
            let ids = self.queued.close();
            if ids.is_empty() {
                return Ok(());
            }
            release_to_table(&self.pool, &self.instance, ids).await
        })
    }

    /// What an attempt did is not accepted work: a record lost with the
    /// database's last moments sends its event again (at least once, the
    /// same event_id), so its commit does not wait for the disk
    /// (`synchronous_commit` off for this transaction; docs/notes/DECISIONS.md).
    fn record_attempts(&self, records: Vec<AttemptRecord>) -> StoreFut<'_, ()> {
        Box::pin(async move {
            let mut held = self.recording.get().await?;
            let r = self.record(held.conn()?, &records).await;
            held.check(r)
        })
    }

    fn release_leases(&self, event_ids: Option<Vec<EventId>>) -> StoreFut<'_, ()> {
        Box::pin(async move {
            match event_ids {
                // Several instances may share this database: only expired
                // leases are everyone's to release.
                // A lease that ran out was neither recorded nor given
                // back: its try may have reached the receiver, and counts.
                None => sqlx::query("UPDATE events SET leased_until = 0, attempts = attempts + 1 WHERE leased_until > 0 AND leased_until < $1")
                    .bind(crate::domain::time::now_ms())
                    .execute(&self.pool)
                    .await,
                Some(ids) => sqlx::query("UPDATE events SET leased_until = 0 WHERE id = ANY($1)")
                    .bind(&ids)
                    .execute(&self.pool)
                    .await,
            }?;
            Ok(())
        })
    }

    fn next_due_at(&self) -> StoreFut<'_, Option<i64>> {
        Box::pin(async move {
            let mut held = self.claiming.get().await?;
            let r = sqlx::query_scalar(
                "SELECT min(GREATEST(next_attempt_at, leased_until)) FROM events WHERE is_head = 1 AND status IN ('pending', 'failed')
                 AND chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)",
            )
            .fetch_one(held.conn()?)
            .await
            .map_err(StoreError::from);
            held.check(r)
        })
    }
    fn queue_stats(&self) -> StoreFut<'_, QueueStats> {
        Box::pin(async move {
            let row = sqlx::query("SELECT count(*), min(created_at) FROM events WHERE status IN ('pending', 'failed')")
                .fetch_one(&self.pool)
                .await?;
            Ok(QueueStats {
                pending: row.try_get(0)?,
                oldest_pending_created_at: row.try_get(1)?,
            })
        })
    }
}
