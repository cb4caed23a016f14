//! Routing and fan-out (§13) on SQLite: events still to route, the
//! deliveries to endpoints other than the default, their claims and
//! attempts. One process owns the file and runs one fan-out claim loop, so
//! a claim reads its candidates on a read connection and leases them
//! through the writer.

use super::writer_cache;
use super::*;
use crate::domain::ids::{ChatbotId, EndpointId};
use crate::store::fanout::*;
use std::sync::Arc;

/// The columns of a claimed delivery, with its event's and endpoint's.
const CLAIM_COLS: &str = "d.seq, d.event_id, d.chatbot_id, d.conversation_id, e.payload, d.attempts, d.attempt_base,
     e.traceparent, d.endpoint_id, d.created_at, p.url, p.signing_secret, p.previous_secret, p.previous_until,
     p.headers, p.replies, p.rate_limit";

fn claimed_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ClaimedDelivery> {
    Ok(ClaimedDelivery {
        claim: claim_at(r, 7)?,
        endpoint_id: r.get(8)?,
        created_at: r.get(9)?,
        target: Target {
            url: r.get(10)?,
            signing_secret: r.get(11)?,
            previous_secret: r.get(12)?,
            previous_until: r.get(13)?,
            headers: r.get(14)?,
            replies: r.get(15)?,
            rate_limit: r.get(16)?,
        },
    })
}

/// Up to how many deliveries still to make of one (endpoint,
/// conversation) pair the writer counts, to follow the count from there.
const PAIR_COUNT_BOUND: u32 = 1024;

/// Most due heads one read of the table lists.
const SCAN_ROWS: usize = 4096;
/// Most reads of the table one claim makes.
const SCAN_ROUNDS: usize = 4;

/// The columns [`route_row`] reads, of an `endpoints` row.
const ROUTE_COLS: &str = "id, chatbot_id, created_at, event_types, filter";

/// An endpoint other than the default, as routing needs it.
fn route_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EndpointRoute> {
    let types: Option<String> = r.get(3)?;
    let filter: Option<String> = r.get(4)?;
    Ok(EndpointRoute {
        id: r.get(0)?,
        chatbot_id: r.get(1)?,
        created_at: r.get(2)?,
        route: parse_route(types.as_deref(), filter.as_deref()),
    })
}

/// Inserts a delivery (once per event and endpoint, and only while both
/// exist: `checked` for an event routed after its insert; in the insert's
/// own transaction both were just read), the head of its (endpoint,
/// conversation) pair when nothing earlier of the pair is still to make.
/// Run in event order, each sees the ones before it. A head is listed for
/// the fan-out's claims once its batch is on disk.
fn insert_delivery(c: &Connection, d: &NewDelivery, checked: bool) -> rusqlite::Result<usize> {
    let known = writer_cache::pair_pending(&d.endpoint_id, &d.conversation_id);
    let mut counted = known;
    let head: bool = match known {
        Some(n) => n == 0,
        None => {
            // Counted up to a bound: past it the count stays unknown.
            let n: u32 = c
                .prepare_cached(
                    "SELECT count(*) FROM (SELECT 1 FROM deliveries INDEXED BY deliveries_active
                     WHERE endpoint_id = ?1 AND conversation_id = ?2 AND status IN ('pending', 'failed') LIMIT ?3)",
                )?
                .query_row(params![d.endpoint_id, d.conversation_id, PAIR_COUNT_BOUND], |r| {
                    r.get(0)
                })?;
            counted = (n < PAIR_COUNT_BOUND).then_some(n);
            n == 0
        }
    };
    let sql = if checked {
        "INSERT OR IGNORE INTO deliveries (event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at, is_head)
         SELECT ?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6, ?7
         WHERE EXISTS (SELECT 1 FROM endpoints WHERE id = ?3) AND EXISTS (SELECT 1 FROM events WHERE seq = ?1)"
    } else {
        "INSERT OR IGNORE INTO deliveries (event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at, is_head)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6, ?7)"
    };
    let n = c.prepare_cached(sql)?.execute(params![
        d.event_seq,
        d.event_id,
        d.endpoint_id,
        d.chatbot_id,
        d.conversation_id,
        d.created_at,
        head
    ])?;
    if n == 1 {
        let pending = counted.map(|k| k + 1);
        writer_cache::set_pair_pending(&d.endpoint_id, &d.conversation_id, pending);
        if head {
            writer_cache::routed_head(d.endpoint_id.clone(), c.last_insert_rowid());
        }
    }
    Ok(n)
}

/// Routes an event in the transaction that inserts it (`seq`): one
/// delivery per endpoint of its chatbot, other than the default, whose
/// route takes it. Returns how many.
pub(super) fn route_inserted(c: &Connection, seq: i64, e: &NewEvent) -> StoreResult<usize> {
    let routes = match writer_cache::routes(&e.chatbot_id) {
        Some(r) => r,
        None => {
            let routes: Arc<[EndpointRoute]> = c
                .prepare_cached(&format!(
                    "SELECT {ROUTE_COLS} FROM endpoints
                     WHERE chatbot_id = ?1 AND is_default = 0 ORDER BY created_at, id"
                ))?
                .query_map([&e.chatbot_id], route_row)?
                .collect::<rusqlite::Result<_>>()?;
            writer_cache::put_routes(&e.chatbot_id, routes.clone());
            routes
        }
    };
    let mut n = 0;
    for ep in takers(e.event_type, &e.payload, e.created_at, routes.iter()) {
        n += insert_delivery(
            c,
            &NewDelivery {
                event_seq: seq,
                event_id: e.id.clone(),
                endpoint_id: ep.id.clone(),
                chatbot_id: e.chatbot_id.clone(),
                conversation_id: e.conversation_id.clone(),
                created_at: e.created_at,
            },
            false,
        )?;
    }
    Ok(n)
}

impl Fanout for SqliteStore {
    fn unrouted(&self, limit: usize) -> StoreFut<'_, Vec<Unrouted>> {
        let r = self.read(|c| {
            c.prepare_cached(
                "SELECT seq, id, chatbot_id, conversation_id, type, payload, created_at
                 FROM events INDEXED BY events_unrouted WHERE routed = 0 ORDER BY seq LIMIT ?1",
            )?
            .query_map([limit as i64], |r| {
                Ok(Unrouted {
                    seq: r.get(0)?,
                    event_id: r.get(1)?,
                    chatbot_id: r.get(2)?,
                    conversation_id: r.get(3)?,
                    event_type: r.get(4)?,
                    payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(5)?),
                    created_at: r.get(6)?,
                })
            })?
            .collect()
        });
        Box::pin(async move { r })
    }

    fn routes_of(&self, chatbot_ids: Vec<ChatbotId>) -> StoreFut<'_, Vec<EndpointRoute>> {
        let r = self.read(|c| {
            let ids = serde_json::to_string(&chatbot_ids).unwrap_or_default();
            c.prepare_cached(&format!(
                "SELECT {ROUTE_COLS} FROM endpoints
                 WHERE chatbot_id IN (SELECT value FROM json_each(?1)) AND is_default = 0
                 ORDER BY created_at, id"
            ))?
            .query_map([ids], route_row)?
            .collect()
        });
        Box::pin(async move { r })
    }

    fn default_settings(&self, chatbot_id: &str) -> StoreFut<'_, Option<DefaultSettings>> {
        let r = self.read(|c| {
            c.prepare_cached(
                "SELECT event_types, filter, headers, replies, rate_limit FROM endpoints
                 WHERE chatbot_id = ?1 AND is_default = 1",
            )?
            .query_row([chatbot_id], |r| {
                let types: Option<String> = r.get(0)?;
                let filter: Option<String> = r.get(1)?;
                let headers: Option<String> = r.get(2)?;
                let rate: Option<String> = r.get(4)?;
                Ok(DefaultSettings::from_row(
                    types.as_deref(),
                    filter.as_deref(),
                    headers.as_deref(),
                    r.get(3)?,
                    rate.as_deref(),
                ))
            })
            .optional()
        });
        Box::pin(async move { r })
    }

    fn route(&self, deliveries: Vec<NewDelivery>, routed: Vec<i64>) -> StoreFut<'_, ()> {
        let any = !deliveries.is_empty();
        let signals = self.signals.clone();
        Box::pin(async move {
            self.write_decided(true, move |c| {
                // In event order, one by one: each sees the ones before it,
                // so the head of its (endpoint, conversation) pair is exact.
                for d in &deliveries {
                    insert_delivery(c, d, true)?;
                }
                let mut done = c.prepare_cached("UPDATE events SET routed = 1 WHERE seq = ?1")?;
                for seq in routed {
                    done.execute([seq])?;
                }
                Ok(())
            })
            .await?;
            if any {
                signals.deliveries_due();
            }
            Ok(())
        })
    }

    fn claim_deliveries(&self, ask: ClaimAsk<Rooms>) -> StoreFut<'_, Vec<ClaimedDelivery>> {
        let (now_ms, lease_until, limit, rooms) =
            (ask.now_ms, ask.lease_until, ask.limit, &ask.room);
        // Each endpoint's room from its listed heads, read back by seq;
        // the table is read first when the list may lack some.
        let found = self.list_due_heads(now_ms).and_then(|()| {
            let seqs = self.claims.lock().deliveries.take(rooms, limit);
            self.listed_heads(seqs, now_ms)
        });
        Box::pin(async move {
            let found = found.inspect_err(|_| self.claims.lock().deliveries.rescan())?;
            if found.is_empty() {
                return Ok(found);
            }
            let seqs: Vec<i64> = found.iter().map(|d| d.claim.seq).collect();
            // Written before any is sent: a crash from here on counts the
            // try when the lease is found at the next start. Should it
            // fail, the next claim finds them in the table.
            self.write_decided(false, move |c| {
                let mut st =
                    c.prepare_cached("UPDATE deliveries SET leased_until = ?2 WHERE seq = ?1")?;
                for seq in seqs {
                    st.execute(params![seq, lease_until])?;
                }
                Ok(())
            })
            .await
            .inspect_err(|_| self.claims.lock().deliveries.rescan())?;
            Ok(found)
        })
    }

    fn record_delivery_attempts(&self, records: Vec<DeliveryRecord>) -> StoreFut<'_, ()> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let (promoted, retries) = self.write_decided(false, move |c| {
                let mut promoted = Vec::new();
                let mut retries = Vec::new();
                for r in &records {
                    let rec = &r.rec;
                    let next = rec.delivery_next_at();
                    let set = params![rec.seq, rec.next.status_str(), rec.number, next];
                    // Whether it was still to make (as the pair's count has it).
                    let mut was_pending = true;
                    let mut changed = c
                        .prepare_cached(
                            "UPDATE deliveries SET status = ?2, attempts = max(attempts, ?3), next_attempt_at = ?4,
                             leased_until = 0 WHERE seq = ?1 AND status IN ('pending', 'failed')",
                        )?
                        .execute(set)?;
                    if changed == 0 {
                        was_pending = false;
                        changed = c
                            .prepare_cached(
                                "UPDATE deliveries SET status = ?2, attempts = max(attempts, ?3), next_attempt_at = ?4,
                                 leased_until = 0 WHERE seq = ?1",
                            )?
                            .execute(set)?;
                    }
                    if changed == 0 {
                        // Deleted with its endpoint or event while on the wire.
                        continue;
                    }
                    if rec.next.is_final() {
                        let (ep, conv) = (&r.endpoint_id, &rec.conversation_id);
                        let left = writer_cache::pair_pending(ep, conv)
                            .filter(|_| was_pending)
                            .map(|n| n.saturating_sub(1));
                        writer_cache::set_pair_pending(ep, conv, left);
                        // None left of its pair: no next to promote.
                        if left != Some(0)
                            && let Some(seq) = promote_next(c, ep, conv)?
                        {
                            promoted.push((ep.clone(), seq));
                        }
                    } else if let AttemptNext::RetryAt(t) = rec.next {
                        retries.push(t);
                    }
                    c.prepare_cached(
                        "INSERT OR REPLACE INTO delivery_attempts (delivery_seq, number, event_id, endpoint_id, at, status_code,
                           duration_ms, error, response_excerpt, request_headers)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    )?
                    .execute(rusqlite::params_from_iter(
                        [
                            &rec.seq as &dyn rusqlite::ToSql,
                            &rec.number,
                            &rec.event_id,
                            &r.endpoint_id,
                        ]
                        .into_iter()
                        .chain(attempt_outcome(rec)),
                    ))?;
                    if rec.next == AttemptNext::EndpointGone {
                        c.prepare_cached(
                            "UPDATE endpoints SET enabled = 0, disabled_reason = 'gone', updated_at = ?2 WHERE id = ?1",
                        )?
                        .execute(params![r.endpoint_id, rec.at_ms])?;
                    }
                }
                Ok((promoted, retries))
            })
            .await?;
            {
                // Committed: a claim reads them back.
                let mut cl = self.claims.lock();
                cl.deliveries.add(promoted);
                for t in retries {
                    cl.deliveries.retry_at(t);
                }
            }
            signals.deliveries_due();
            Ok(())
        })
    }

    fn give_back_deliveries(&self, back: Vec<(i64, i64)>) -> StoreFut<'_, ()> {
        Box::pin(async move {
            if back.is_empty() {
                return Ok(());
            }
            self.write_decided(false, move |c| {
                let mut st = c.prepare_cached(
                    "UPDATE deliveries SET leased_until = 0, next_attempt_at = max(next_attempt_at, ?2) WHERE seq = ?1",
                )?;
                for (seq, at) in &back {
                    st.execute(params![seq, at])?;
                }
                Ok(back.iter().map(|(_, at)| *at).min().unwrap_or(0))
            })
            .await
            .map(|first| self.claims.lock().deliveries.scan_at(first))
        })
    }

    fn expire_held(&self, cutoff_ms: i64) -> StoreFut<'_, u64> {
        Box::pin(async move {
            self.write_decided(false, move |c| {
                let pairs: Vec<(String, String)> = c
                    .prepare_cached(
                        "UPDATE deliveries SET status = 'dead', leased_until = 0
                         WHERE status IN ('pending', 'failed') AND created_at < ?1
                           AND endpoint_id IN (SELECT id FROM endpoints WHERE enabled = 0)
                         RETURNING endpoint_id, conversation_id",
                    )?
                    .query_map([cutoff_ms], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()?;
                let n = pairs.len();
                if n > 0 {
                    writer_cache::forget_pairs();
                }
                let mut pairs = pairs;
                pairs.sort_unstable();
                pairs.dedup();
                for (endpoint_id, conversation_id) in &pairs {
                    promote_next(c, endpoint_id, conversation_id)?;
                }
                // The default endpoint's deliveries are its events: those
                // waiting for a disabled default end too. A conversation's
                // older events end first, so its oldest left becomes the head.
                let ended: Vec<(EventId, String)> = c
                    .prepare_cached(
                        "UPDATE events SET status = 'dead', is_head = 0, leased_until = 0
                         WHERE status IN ('pending', 'failed') AND created_at < ?1
                           AND chatbot_id IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                         RETURNING id, conversation_id",
                    )?
                    .query_map([cutoff_ms], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()?;
                if ended.is_empty() {
                    return Ok((n as u64, Vec::new()));
                }
                // Its counts of undelivered events per conversation.
                writer_cache::clear();
                let mut convs: Vec<&str> = ended.iter().map(|(_, c)| c.as_str()).collect();
                convs.sort_unstable();
                convs.dedup();
                for cid in convs {
                    super::queue::promote_next(c, cid, None)?;
                }
                let ids = ended.into_iter().map(|(id, _)| id).collect();
                Ok((n as u64, ids))
            })
            .await
            .map(|(n, ids): (u64, Vec<EventId>)| {
                let ended = ids.len() as u64;
                self.claims.lock().forget(&ids);
                n + ended
            })
        })
    }
}

impl SqliteStore {
    /// Listed heads read back by seq, those still claimable: a head that
    /// ended, is leased, is not due or whose endpoint is paused or gone is
    /// left out (a read of the table finds it again should it come due).
    /// A pair has one head, its oldest delivery still to make (the insert
    /// marks it, a redelivery keeps it so: `ONE_HEAD_PER_PAIR`), so no
    /// order is checked here.
    fn listed_heads(&self, seqs: Vec<i64>, now_ms: i64) -> StoreResult<Vec<ClaimedDelivery>> {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        self.read(|c| {
            let seqs = serde_json::to_string(&seqs).unwrap_or_default();
            c.prepare_cached(&format!(
                "SELECT {CLAIM_COLS} FROM deliveries d
                 JOIN endpoints p ON p.id = d.endpoint_id
                 JOIN events e ON e.seq = d.event_seq
                 WHERE d.seq IN (SELECT value FROM json_each(?1)) AND d.is_head = 1
                   AND d.status IN ('pending', 'failed') AND d.next_attempt_at <= ?2
                   AND d.leased_until <= ?2 AND p.enabled = 1
                 ORDER BY d.seq"
            ))?
            .query_map(params![seqs, now_ms], claimed_row)?
            .collect()
        })
    }

    /// When the list may lack due heads: reads them from the table (but
    /// those of endpoints with work enough listed, and of paused ones) and
    /// lists them. A read cut at its size is followed by another that
    /// leaves out the endpoints it filled, so that one endpoint's backlog
    /// never hides another's.
    fn list_due_heads(&self, now_ms: i64) -> StoreResult<()> {
        for _ in 0..SCAN_ROUNDS {
            let enough = {
                let cl = self.claims.lock();
                if !cl.deliveries.scan_due(now_ms) {
                    return Ok(());
                }
                cl.deliveries.enough()
            };
            let heads: Vec<(EndpointId, i64)> = self.read(|c| {
                let skip = serde_json::to_string(&enough).unwrap_or_default();
                c.prepare_cached(
                    "SELECT endpoint_id, seq FROM deliveries INDEXED BY deliveries_heads
                     WHERE is_head = 1 AND status IN ('pending', 'failed')
                       AND next_attempt_at <= ?1 AND leased_until <= ?1
                       AND endpoint_id NOT IN (SELECT value FROM json_each(?2))
                       AND endpoint_id NOT IN (SELECT id FROM endpoints WHERE enabled = 0)
                     ORDER BY next_attempt_at, seq LIMIT ?3",
                )?
                .query_map(params![now_ms, skip, SCAN_ROWS as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect()
            })?;
            let complete = heads.len() < SCAN_ROWS;
            let mut cl = self.claims.lock();
            cl.deliveries.add(heads);
            cl.deliveries.scanned(now_ms, complete, enough.clone());
            if complete || cl.deliveries.enough().len() <= enough.len() {
                break;
            }
        }
        Ok(())
    }
}

/// Marks the oldest delivery still to make of an (endpoint, conversation)
/// pair as its head, once the one before it has ended; returns it when it
/// was not the head already.
fn promote_next(
    c: &Connection,
    endpoint_id: &str,
    conversation_id: &str,
) -> rusqlite::Result<Option<i64>> {
    c.prepare_cached(
        "UPDATE deliveries SET is_head = 1 WHERE seq = (
           SELECT min(seq) FROM deliveries INDEXED BY deliveries_active
           WHERE endpoint_id = ?1 AND conversation_id = ?2 AND status IN ('pending', 'failed'))
         AND is_head = 0 RETURNING seq",
    )?
    .query_row([endpoint_id, conversation_id], |r| r.get(0))
    .optional()
}

#[cfg(test)]
mod tests;
