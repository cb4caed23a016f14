//! Routing and fan-out (§13) on PostgreSQL: events still to route, the
//! deliveries to endpoints other than the default, their claims and
//! attempts. Several instances may claim: a claim locks its rows with
//! `FOR UPDATE SKIP LOCKED` and leases them in the same statement.

use super::*;
use crate::domain::ids::{ChatbotId, EndpointId};
use crate::store::fanout::*;

fn claimed_row(r: &PgRow) -> Result<ClaimedDelivery, sqlx::Error> {
    Ok(ClaimedDelivery {
        claim: Claimed {
            seq: r.try_get("seq")?,
            event_id: r.try_get("event_id")?,
            chatbot_id: r.try_get("chatbot_id")?,
            conversation_id: r.try_get("conversation_id")?,
            payload: bytes::Bytes::from(r.try_get::<Vec<u8>, _>("payload")?),
            attempts: r.try_get::<i64, _>("attempts")? as u32,
            attempt_base: r.try_get::<i64, _>("attempt_base")? as u32,
            trace: r.try_get("traceparent")?,
            bot: None,
        },
        endpoint_id: r.try_get("endpoint_id")?,
        created_at: r.try_get("created_at")?,
        target: Target {
            url: r.try_get("url")?,
            signing_secret: r.try_get("signing_secret")?,
            previous_secret: r.try_get("previous_secret")?,
            previous_until: r.try_get("previous_until")?,
            headers: r.try_get("headers")?,
            replies: r.try_get::<i64, _>("replies")? != 0,
            rate_limit: r.try_get("rate_limit")?,
        },
    })
}

impl Fanout for PostgresStore {
    fn unrouted(&self, limit: usize) -> StoreFut<'_, Vec<Unrouted>> {
        Box::pin(async move {
            let rows = sqlx::query(
                // The queue's oldest first (its key's order), then each
                // event by its key: never a join planned over all events.
                "SELECT e.seq, e.id, e.chatbot_id, e.conversation_id, e.type, e.payload, e.created_at
                 FROM (SELECT seq FROM unrouted_events ORDER BY seq LIMIT $1) u
                 CROSS JOIN LATERAL (SELECT * FROM events x WHERE x.seq = u.seq) e ORDER BY u.seq",
            )
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|r| {
                    Ok(Unrouted {
                        seq: r.try_get("seq")?,
                        event_id: r.try_get("id")?,
                        chatbot_id: r.try_get("chatbot_id")?,
                        conversation_id: r.try_get("conversation_id")?,
                        event_type: r.try_get("type")?,
                        payload: bytes::Bytes::from(r.try_get::<Vec<u8>, _>("payload")?),
                        created_at: r.try_get("created_at")?,
                    })
                })
                .collect::<Result<_, sqlx::Error>>()
                .map_err(StoreError::from)
        })
    }

    fn routes_of(&self, chatbot_ids: Vec<ChatbotId>) -> StoreFut<'_, Vec<EndpointRoute>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "SELECT id, chatbot_id, created_at, event_types, filter FROM endpoints
                 WHERE chatbot_id = ANY($1) AND is_default = 0 ORDER BY created_at, id",
            )
            .bind(&chatbot_ids)
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(|r| {
                    let types: Option<String> = r.try_get("event_types")?;
                    let filter: Option<String> = r.try_get("filter")?;
                    Ok(EndpointRoute {
                        id: r.try_get("id")?,
                        chatbot_id: r.try_get("chatbot_id")?,
                        created_at: r.try_get("created_at")?,
                        route: parse_route(types.as_deref(), filter.as_deref()),
                    })
                })
                .collect::<Result<_, sqlx::Error>>()
                .map_err(StoreError::from)
        })
    }

    fn default_settings(&self, chatbot_id: &str) -> StoreFut<'_, Option<DefaultSettings>> {
        let chatbot_id = chatbot_id.to_string();
        Box::pin(async move {
            let row = sqlx::query(
                "SELECT event_types, filter, headers, replies, rate_limit FROM endpoints
                 WHERE chatbot_id = $1 AND is_default = 1",
            )
            .bind(&chatbot_id)
            .fetch_optional(&self.pool)
            .await?;
            match row {
                None => Ok(None),
                Some(r) => {
                    let types: Option<String> = r.try_get("event_types")?;
                    let filter: Option<String> = r.try_get("filter")?;
                    let headers: Option<String> = r.try_get("headers")?;
                    let rate: Option<String> = r.try_get("rate_limit")?;
                    let replies = r.try_get::<i64, _>("replies")? != 0;
                    Ok(Some(DefaultSettings::from_row(
                        types.as_deref(),
                        filter.as_deref(),
                        headers.as_deref(),
                        replies,
                        rate.as_deref(),
                    )))
                }
            }
        })
    }

    fn route(&self, deliveries: Vec<NewDelivery>, routed: Vec<i64>) -> StoreFut<'_, ()> {
        Box::pin(async move {
            let any = !deliveries.is_empty();
            let mut tx = self.pool.begin().await?;
            if any {
                // One array per column.
                let (mut seqs, mut ids, mut eps, mut bots, mut convs, mut ats) =
                    <(Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>)>::default();
                for d in deliveries {
                    seqs.push(d.event_seq);
                    ids.push(d.event_id);
                    eps.push(d.endpoint_id);
                    bots.push(d.chatbot_id);
                    convs.push(d.conversation_id);
                    ats.push(d.created_at);
                }
                lock_endpoints(&mut tx, &eps).await?;
                // In event order, so that a conversation's deliveries to
                // one endpoint are numbered as its events are. A delivery
                // is its pair's head when none is waiting before it and it
                // is the first of its pair inserted here: one head per pair,
                // so the claim needs no order check. Under the endpoints'
                // locks, the rows routed already (by another instance) are
                // left out before the first is picked, not dropped after by
                // the conflict. The head check is one probe per delivery
                // (`LATERAL … LIMIT 1`), never a hash of every waiting
                // delivery (see `batch/write.rs`).
                sqlx::query(
                    "INSERT INTO deliveries (event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at, is_head)
                     SELECT u.seq, u.id, u.ep, u.bot, u.conv, 'pending', u.at, u.at,
                            CASE WHEN w.busy IS NULL AND u.nth = 1 THEN 1 ELSE 0 END
                     FROM (SELECT u.*, row_number() OVER (PARTITION BY u.ep, u.conv ORDER BY u.ord) AS nth
                           FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])
                             WITH ORDINALITY AS u(seq, id, ep, bot, conv, at, ord)
                           WHERE EXISTS (SELECT 1 FROM endpoints p WHERE p.id = u.ep)
                             AND EXISTS (SELECT 1 FROM events e WHERE e.seq = u.seq)
                             AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.event_seq = u.seq AND x.endpoint_id = u.ep)) u
                     LEFT JOIN LATERAL (SELECT 1 AS busy FROM deliveries b WHERE b.endpoint_id = u.ep AND b.conversation_id = u.conv
                                          AND b.status IN ('pending', 'failed') LIMIT 1) w ON true
                     ORDER BY u.ord
                     ON CONFLICT (event_seq, endpoint_id) DO NOTHING",
                )
                .bind(&seqs)
                .bind(&ids)
                .bind(&eps)
                .bind(&bots)
                .bind(&convs)
                .bind(&ats)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query("DELETE FROM unrouted_events WHERE seq = ANY($1)")
                .bind(&routed)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            if any {
                self.signals.deliveries_due();
            }
            Ok(())
        })
    }

    fn claim_deliveries(&self, ask: ClaimAsk<Rooms>) -> StoreFut<'_, Vec<ClaimedDelivery>> {
        let (now_ms, lease_until, limit, rooms) =
            (ask.now_ms, ask.lease_until, ask.limit, ask.room);
        Box::pin(async move {
            // The due heads ranked within their endpoint, so that each
            // endpoint gives no more than its room. A pair has one head,
            // its oldest delivery still to make (see `route`).
            let rows = sqlx::query(
                "WITH ranked AS (
                   SELECT d.seq, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.seq) AS rank,
                          COALESCE(($4::jsonb ->> d.endpoint_id)::bigint, $5) AS room
                   FROM deliveries d JOIN endpoints p ON p.id = d.endpoint_id
                   WHERE d.is_head = 1 AND d.status IN ('pending', 'failed') AND d.next_attempt_at <= $1 AND d.leased_until <= $1
                     AND p.enabled = 1),
                 due AS (
                   SELECT d.seq FROM deliveries d JOIN ranked r ON r.seq = d.seq
                   WHERE r.rank <= r.room AND d.leased_until <= $1
                   ORDER BY d.next_attempt_at, d.seq LIMIT $3
                   FOR UPDATE OF d SKIP LOCKED),
                 leased AS (
                   UPDATE deliveries d SET leased_until = $2 FROM due WHERE d.seq = due.seq
                   RETURNING d.*)
                 SELECT l.seq, l.event_id, l.chatbot_id, l.conversation_id, e.payload, l.attempts, l.attempt_base,
                        e.traceparent, l.endpoint_id, l.created_at, l.next_attempt_at, p.url, p.signing_secret,
                        p.previous_secret, p.previous_until, p.headers, p.replies, p.rate_limit
                 FROM leased l JOIN events e ON e.seq = l.event_seq JOIN endpoints p ON p.id = l.endpoint_id
                 ORDER BY l.next_attempt_at, l.seq",
            )
            .bind(now_ms)
            .bind(lease_until)
            .bind(limit as i64)
            .bind(rooms.named_json())
            .bind(rooms.others)
            .fetch_all(&self.pool)
            .await?;
            rows.iter()
                .map(claimed_row)
                .collect::<Result<_, sqlx::Error>>()
                .map_err(StoreError::from)
        })
    }

    fn record_delivery_attempts(&self, records: Vec<DeliveryRecord>) -> StoreFut<'_, ()> {
        Box::pin(async move {
            if records.is_empty() {
                return Ok(());
            }
            let b = RecordColumns::of(&records);
            // One call: the endpoints' locks, then each attempt's three
            // statements (migration 0013), in its own transaction.
            sqlx::query(
                "SELECT blockhook_record_deliveries($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            )
            .bind(&b.seq)
            .bind(&b.status)
            .bind(&b.number)
            .bind(&b.next)
            .bind(&b.is_final)
            .bind(&b.endpoint)
            .bind(&b.conversation)
            .bind(&b.event)
            .bind(&b.at)
            .bind(&b.code)
            .bind(&b.duration)
            .bind(&b.error)
            .bind(&b.excerpt)
            .bind(&b.headers)
            .bind(&b.gone)
            .execute(&self.pool)
            .await?;
            self.signals.deliveries_due();
            Ok(())
        })
    }

    fn give_back_deliveries(&self, back: Vec<(i64, i64)>) -> StoreFut<'_, ()> {
        Box::pin(async move {
            if back.is_empty() {
                return Ok(());
            }
            let (seqs, ats): (Vec<i64>, Vec<i64>) = back.into_iter().unzip();
            sqlx::query(
                "UPDATE deliveries d SET leased_until = 0, next_attempt_at = GREATEST(d.next_attempt_at, u.at)
                 FROM UNNEST($1::bigint[], $2::bigint[]) AS u(seq, at) WHERE d.seq = u.seq",
            )
            .bind(&seqs)
            .bind(&ats)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
    }

    fn expire_held(&self, cutoff_ms: i64) -> StoreFut<'_, u64> {
        Box::pin(async move {
            let mut tx = self.pool.begin().await?;
            let disabled: Vec<EndpointId> =
                sqlx::query_scalar("SELECT id FROM endpoints WHERE enabled = 0 AND is_default = 0")
                    .fetch_all(&mut *tx)
                    .await?;
            lock_endpoints(&mut tx, &disabled).await?;
            let mut pairs: Vec<(String, String)> = sqlx::query_as(
                "UPDATE deliveries SET status = 'dead', leased_until = 0
                 WHERE status IN ('pending', 'failed') AND created_at < $1 AND endpoint_id = ANY($2)
                 RETURNING endpoint_id, conversation_id",
            )
            .bind(cutoff_ms)
            .bind(&disabled)
            .fetch_all(&mut *tx)
            .await?;
            let expired = pairs.len() as u64;
            pairs.sort_unstable();
            pairs.dedup();
            for (endpoint_id, conversation_id) in &pairs {
                promote_next(&mut tx, endpoint_id, conversation_id).await?;
            }
            // The default endpoint's deliveries are its events: those
            // waiting for a disabled default end too. A conversation's
            // older events end first, so its oldest left becomes the head.
            let convs: Vec<String> = sqlx::query_scalar(
                "UPDATE events SET status = 'dead', is_head = 0, leased_until = 0
                 WHERE status IN ('pending', 'failed') AND created_at < $1
                   AND chatbot_id IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                 RETURNING conversation_id",
            )
            .bind(cutoff_ms)
            .fetch_all(&mut *tx)
            .await?;
            let n = expired + convs.len() as u64;
            let mut convs = convs;
            convs.sort_unstable();
            convs.dedup();
            for cid in &convs {
                super::queue::promote_next(&mut tx, cid).await?;
            }
            tx.commit().await?;
            Ok(n)
        })
    }
}

/// Serialises, per endpoint, the transactions that mark heads: a delivery
/// routed while the one before it ends sees it ended, or is promoted by it.
/// Taken in one order (by key) so that two transactions never wait on each
/// other.
async fn lock_endpoints(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    ids: &[EndpointId],
) -> StoreResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "SELECT pg_advisory_xact_lock(7261537, k) FROM (
           SELECT DISTINCT hashtext(id) AS k FROM UNNEST($1::text[]) AS u(id) ORDER BY k) s",
    )
    .bind(ids)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Locks a chatbot's endpoints other than the default (`endpoint` `""`),
/// or the one named, before a redelivery revives their deliveries; taken
/// before any conversation's lock, by the single and the bulk redelivery
/// alike, so that the two never wait on each other.
pub(super) async fn lock_chatbot_endpoints(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    chatbot_id: &str,
    endpoint: &str,
) -> StoreResult<()> {
    let ids: Vec<EndpointId> = sqlx::query_scalar(
        "SELECT id FROM endpoints WHERE chatbot_id = $1 AND is_default = 0 AND ($2 = '' OR id = $2)",
    )
    .bind(chatbot_id)
    .bind(endpoint)
    .fetch_all(&mut **tx)
    .await?;
    lock_endpoints(tx, &ids).await
}

/// [`crate::store::event_detail::ONE_HEAD_PER_PAIR`], under
/// [`lock_chatbot_endpoints`].
pub(super) async fn one_head_per_pair(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    chatbot_id: &str,
    endpoint: &str,
    conversation: &str,
) -> StoreResult<()> {
    sqlx::query(crate::store::event_detail::ONE_HEAD_PER_PAIR)
        .bind(chatbot_id)
        .bind(endpoint)
        .bind(conversation)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Marks the oldest delivery still to make of an (endpoint, conversation)
/// pair as its head, once the one before it has ended.
async fn promote_next(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    endpoint_id: &str,
    conversation_id: &str,
) -> StoreResult<()> {
    sqlx::query(
        "UPDATE deliveries SET is_head = 1 WHERE seq = (
           SELECT min(seq) FROM deliveries
           WHERE endpoint_id = $1 AND conversation_id = $2 AND status IN ('pending', 'failed'))
         AND is_head = 0",
    )
    .bind(endpoint_id)
    .bind(conversation_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A batch of fan-out attempt records as the columns
/// `blockhook_record_deliveries` takes.
#[derive(Default)]
struct RecordColumns<'a> {
    seq: Vec<i64>,
    status: Vec<&'static str>,
    number: Vec<i64>,
    next: Vec<i64>,
    is_final: Vec<bool>,
    endpoint: Vec<&'a str>,
    conversation: Vec<&'a str>,
    event: Vec<&'a str>,
    at: Vec<i64>,
    code: Vec<Option<i64>>,
    duration: Vec<i64>,
    error: Vec<Option<&'a str>>,
    excerpt: Vec<Option<&'a str>>,
    headers: Vec<Option<&'a str>>,
    gone: Vec<bool>,
}

impl<'a> RecordColumns<'a> {
    fn of(records: &'a [DeliveryRecord]) -> Self {
        let mut b = Self::default();
        for r in records {
            let rec = &r.rec;
            b.seq.push(rec.seq);
            b.status.push(rec.next.status_str());
            b.number.push(i64::from(rec.number));
            b.next.push(rec.delivery_next_at());
            b.is_final.push(rec.next.is_final());
            b.endpoint.push(r.endpoint_id.as_str());
            b.conversation.push(rec.conversation_id.as_str());
            b.event.push(rec.event_id.as_str());
            b.at.push(rec.at_ms);
            b.code.push(rec.status_code.map(i64::from));
            b.duration.push(rec.duration_ms);
            b.error.push(rec.error.as_deref());
            b.excerpt.push(rec.response_excerpt.as_deref());
            b.headers.push(rec.request_headers.as_deref());
            b.gone.push(rec.next == AttemptNext::EndpointGone);
        }
        b
    }
}
