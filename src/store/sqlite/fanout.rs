//! Routing and fan-out (§13) on SQLite: events still to route, the
//! deliveries to endpoints other than the default, their claims and
//! attempts. One process owns the file and runs one fan-out claim loop, so
//! a claim reads its candidates on a read connection and leases them
//! through the writer.

use super::*;
use crate::domain::ids::ChatbotId;
use crate::store::fanout::*;

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
/// exist), the head of its (endpoint, conversation) pair when nothing
/// earlier of the pair is still to make. Run in event order, each sees the
/// ones before it.
fn insert_delivery(c: &Connection, d: &NewDelivery) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "INSERT OR IGNORE INTO deliveries (event_seq, event_id, endpoint_id, chatbot_id, conversation_id, status, next_attempt_at, created_at, is_head)
         SELECT ?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6,
                NOT EXISTS (SELECT 1 FROM deliveries b INDEXED BY deliveries_active
                            WHERE b.endpoint_id = ?3 AND b.conversation_id = ?5 AND b.status IN ('pending', 'failed'))
         WHERE EXISTS (SELECT 1 FROM endpoints WHERE id = ?3) AND EXISTS (SELECT 1 FROM events WHERE seq = ?1)",
    )?
    .execute(params![
        d.event_seq,
        d.event_id,
        d.endpoint_id,
        d.chatbot_id,
        d.conversation_id,
        d.created_at
    ])
}

/// Routes an event in the transaction that inserts it (`seq`): one
/// delivery per endpoint of its chatbot, other than the default, whose
/// route takes it. Returns how many.
pub(super) fn route_inserted(c: &Connection, seq: i64, e: &NewEvent) -> StoreResult<usize> {
    let routes: Vec<EndpointRoute> = c
        .prepare_cached(&format!(
            "SELECT {ROUTE_COLS} FROM endpoints
             WHERE chatbot_id = ?1 AND is_default = 0 ORDER BY created_at, id"
        ))?
        .query_map([&e.chatbot_id], route_row)?
        .collect::<rusqlite::Result<_>>()?;
    let mut n = 0;
    for ep in takers(e.event_type, &e.payload, e.created_at, &routes) {
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
                    insert_delivery(c, d)?;
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
        let found = self.read(|c| {
            // The due heads ranked within their endpoint, so that each
            // endpoint gives no more than its room; an endpoint without
            // room is passed over before its rows are read.
            c.prepare_cached(&format!(
                "SELECT {CLAIM_COLS} FROM (
                   SELECT h.seq AS hs, h.room AS room,
                          row_number() OVER (PARTITION BY h.endpoint_id ORDER BY h.next_attempt_at, h.seq) AS rank
                   FROM (SELECT d.seq, d.endpoint_id, d.conversation_id, d.next_attempt_at,
                                coalesce((SELECT r.value FROM json_each(?2) r WHERE r.key = d.endpoint_id), ?4) AS room
                         FROM deliveries d INDEXED BY deliveries_heads
                         WHERE d.is_head = 1 AND d.status IN ('pending', 'failed')
                           AND d.next_attempt_at <= ?1 AND d.leased_until <= ?1) h
                   WHERE h.room > 0
                     AND NOT EXISTS (SELECT 1 FROM deliveries b INDEXED BY deliveries_active
                                     WHERE b.endpoint_id = h.endpoint_id
                                       AND b.conversation_id = h.conversation_id
                                       AND b.status IN ('pending', 'failed') AND b.seq < h.seq)) r
                 JOIN deliveries d ON d.seq = r.hs
                 JOIN endpoints p ON p.id = d.endpoint_id
                 JOIN events e ON e.seq = d.event_seq
                 WHERE r.rank <= r.room AND p.enabled = 1
                 ORDER BY d.next_attempt_at, d.seq LIMIT ?3"
            ))?
            .query_map(params![now_ms, rooms.named_json(), limit as i64, rooms.others], claimed_row)?
            .collect::<rusqlite::Result<Vec<_>>>()
        });
        Box::pin(async move {
            let found = found?;
            if found.is_empty() {
                return Ok(found);
            }
            let seqs: Vec<i64> = found.iter().map(|d| d.claim.seq).collect();
            // Written before any is sent: a crash from here on counts the
            // try when the lease is found at the next start.
            self.write_decided(false, move |c| {
                let mut st =
                    c.prepare_cached("UPDATE deliveries SET leased_until = ?2 WHERE seq = ?1")?;
                for seq in seqs {
                    st.execute(params![seq, lease_until])?;
                }
                Ok(())
            })
            .await?;
            Ok(found)
        })
    }

    fn record_delivery_attempts(&self, records: Vec<DeliveryRecord>) -> StoreFut<'_, ()> {
        let signals = self.signals.clone();
        Box::pin(async move {
            self.write_decided(false, move |c| {
                for r in &records {
                    let rec = &r.rec;
                    let next = match rec.next {
                        AttemptNext::Succeeded | AttemptNext::Dead => 0,
                        AttemptNext::RetryAt(t) => t,
                        AttemptNext::EndpointGone => rec.at_ms,
                        AttemptNext::Skipped => 0,
                    };
                    let changed = c
                        .prepare_cached(
                            "UPDATE deliveries SET status = ?2, attempts = max(attempts, ?3), next_attempt_at = ?4,
                             leased_until = 0 WHERE seq = ?1",
                        )?
                        .execute(params![rec.seq, rec.next.status_str(), rec.number, next])?;
                    if changed == 0 {
                        // Deleted with its endpoint or event while on the wire.
                        continue;
                    }
                    if rec.next.is_final() {
                        promote_next(c, &r.endpoint_id, &rec.conversation_id)?;
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
                Ok(())
            })
            .await?;
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
                for (seq, at) in back {
                    st.execute(params![seq, at])?;
                }
                Ok(())
            })
            .await
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
                super::writer_cache::clear();
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

/// Marks the oldest delivery still to make of an (endpoint, conversation)
/// pair as its head, once the one before it has ended.
fn promote_next(c: &Connection, endpoint_id: &str, conversation_id: &str) -> rusqlite::Result<()> {
    c.prepare_cached(
        "UPDATE deliveries SET is_head = 1 WHERE seq = (
           SELECT min(seq) FROM deliveries INDEXED BY deliveries_active
           WHERE endpoint_id = ?1 AND conversation_id = ?2 AND status IN ('pending', 'failed'))
         AND is_head = 0",
    )?
    .execute([endpoint_id, conversation_id])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{ConversationId, EventId};
    use std::time::Duration;

    fn event(id: &str, payload: &str) -> NewEvent {
        NewEvent {
            id: EventId::stored(id),
            chatbot_id: ChatbotId::stored("cb_1"),
            conversation_id: ConversationId::stored("conv_1"),
            event_type: "interaction.button_clicked",
            payload: payload.as_bytes().to_vec(),
            created_at: 100,
            trace: None,
        }
    }

    /// No router runs here: the deliveries are there once the insert's
    /// batch is committed, and the fan-out has been woken.
    #[tokio::test]
    async fn an_event_is_routed_in_the_commit_that_stores_it() {
        let hub = Arc::new(crate::hub::Hub::new());
        let (_dir, store) =
            super::super::queue::tests::store_with_chatbot("r.db", hub.clone()).await;
        store
            .write(|c| {
                let mut st = c.prepare(
                    "INSERT INTO endpoints (id, chatbot_id, is_default, url, filter, replies, signing_secret, created_at, updated_at)
                     VALUES (?1, 'cb_1', 0, 'http://127.0.0.1:9/x', ?2, 1, 'whsec_y', ?3, ?3)",
                )?;
                st.execute(params!["ep_all", None::<String>, 10])?;
                st.execute(params!["ep_yes", Some(r#"{"action_id":["yes"]}"#), 10])?;
                st.execute(params!["ep_late", None::<String>, 500])?;
                Ok(())
            })
            .await
            .expect("endpoints");
        store
            .enqueue_event(event("evt_yes", r#"{"action_id":"yes"}"#))
            .await
            .expect("event");
        store
            .enqueue_event(event("evt_no", r#"{"action_id":"no"}"#))
            .await
            .expect("event");
        let got: Vec<(String, String, bool)> = store
            .read(|c| {
                c.prepare("SELECT event_id, endpoint_id, is_head FROM deliveries ORDER BY seq")?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect()
            })
            .expect("deliveries");
        let want = [
            ("evt_yes", "ep_all", true),
            ("evt_yes", "ep_yes", true),
            ("evt_no", "ep_all", false),
        ]
        .map(|(e, p, h)| (e.to_string(), p.to_string(), h));
        assert_eq!(got, want);
        assert!(store.unrouted(10).await.expect("unrouted").is_empty());
        tokio::time::timeout(Duration::from_secs(5), hub.deliveries.notified())
            .await
            .expect("the fan-out is woken once the batch is on disk");
    }
}
