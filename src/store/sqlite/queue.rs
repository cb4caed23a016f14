//! The delivery queue: events inserted and promoted to head, claims,
//! attempt records, leases and the queue's figures.

use super::claims::Taken;
use super::*;
use crate::domain::ids::EventId;

/// Inserts an event; returns it as a delivery to hand out at once when it
/// is the head of its conversation (nothing earlier still to deliver).
///
/// In the same transaction, the event is routed to its chatbot's endpoints
/// besides the default one (§13): one delivery per endpoint that takes it.
pub(super) fn insert_event(conn: &Connection, e: NewEvent) -> StoreResult<Option<Claimed>> {
    // Two plain statements: a RETURNING clause measured dearer than both.
    let known = writer_cache::active(&e.conversation_id);
    let behind: bool = match known {
        Some(n) => n > 0,
        None => conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?1 AND status IN ('pending', 'failed'))",
            )
            .and_then(|mut s| s.query_row([&e.conversation_id], |r| r.get(0)))?,
    };
    // A head is offered to the hot queue once its batch is on disk and
    // handed out from there with no write of its own: its lease in the
    // table (what a restart counts as a try that may have been sent) is
    // written here, with it.
    conn.prepare_cached(
        "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head, traceparent, routed, leased_until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', 0, ?6, ?7, ?8, 1, CASE WHEN ?7 THEN ?6 ELSE 0 END)",
    )
    .and_then(|mut s| {
        s.execute(params![
            e.id,
            e.chatbot_id,
            e.conversation_id,
            e.event_type,
            e.payload,
            e.created_at,
            !behind,
            e.trace
        ])
    })?;
    match known {
        Some(n) => writer_cache::set_active(&e.conversation_id, n + 1),
        None if !behind => writer_cache::set_active(&e.conversation_id, 1),
        None => {}
    }
    let seq = conn.last_insert_rowid();
    if super::fanout::route_inserted(conn, seq, &e)? > 0 {
        writer_cache::routed();
    }
    Ok((!behind).then(|| Claimed::fresh(seq, e, None)))
}

/// After an event leaves the active states, the next one of its
/// conversation becomes the head (returned with when it is due, if it was
/// not the head already), and whether the conversation has any
/// undelivered event left.
///
/// `hot_at`: the time now, when a head due by then goes to the hot queue
/// (its lease in the table written with the promotion, as an inserted
/// head's is); `None` when it is left to a scan of the table.
pub(super) fn promote_next(
    conn: &Connection,
    conversation_id: &str,
    hot_at: Option<i64>,
) -> StoreResult<(Option<(Claimed, i64)>, bool)> {
    let next = conn
        .prepare_cached(
            "SELECT seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base, next_attempt_at, is_head, traceparent
             FROM events INDEXED BY events_active_by_conversation WHERE conversation_id = ?1 AND status IN ('pending', 'failed') ORDER BY seq LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row([conversation_id], |r| {
                Ok((
                    claim_at(r, 9)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, bool>(8)?,
                ))
            })
            .optional()
        })?;
    let Some((c, at, false)) = next else {
        return Ok((None, next.is_some()));
    };
    let lease = hot_at.filter(|now| at <= *now).unwrap_or(0);
    conn.prepare_cached("UPDATE events SET is_head = 1, leased_until = ?2 WHERE seq = ?1")
        .and_then(|mut s| s.execute([c.seq, lease]))?;
    Ok((Some((c, at)), true))
}

impl SqliteStore {
    /// Writes the lease of claimed deliveries (`0`: given back unsent).
    /// One process owns the file, so the lease itself lives in memory
    /// (`claims`); the table's copy says, after a crash, which deliveries
    /// may have been sent.
    pub(super) async fn mark_leased(&self, seqs: Vec<i64>, until: i64) -> StoreResult<()> {
        if seqs.is_empty() {
            return Ok(());
        }
        self.write_decided(false, move |c| {
            let mut st = c.prepare_cached("UPDATE events SET leased_until = ?2 WHERE seq = ?1")?;
            for seq in seqs {
                st.execute(params![seq, until])?;
            }
            Ok(())
        })
        .await
    }
}

impl SqliteStore {
    /// The claimable deliveries, leased in memory until `lease_until`: the
    /// hot queue first, the table when it may hold more; and when the next
    /// claim may find work no wake-up announces.
    /// The first `.1` of them come from the hot queue (their leases are in
    /// the table already), the rest from the table.
    #[allow(clippy::type_complexity)]
    fn take_due(&self, ask: &ClaimAsk) -> StoreResult<(Vec<Claimed>, usize, Option<Option<i64>>)> {
        let (now_ms, lease_until, limit, skip) =
            (ask.now_ms, ask.lease_until, ask.limit, &ask.room[..]);
        // One process owns a SQLite file, so leases live in memory: a claim
        // takes the hot queue first and reads the table only when it may
        // hold more (see `claims`), with no write transaction of its own.
        let mut cl = self.claims.lock();
        cl.expire(now_ms);
        let mut out = cl.take_hot(limit, skip, lease_until);
        let hot = out.len();
        let r = if out.len() < limit && cl.cold_due(now_ms, skip) {
            let want = limit - out.len();
            let scan = self.read(|c| {
                let skip = serde_json::to_string(skip).unwrap_or_default();
                let mut s = c.prepare_cached(
                    "SELECT seq, id, chatbot_id, conversation_id, payload, attempts, attempt_base, traceparent FROM events e
                     WHERE e.is_head = 1 AND e.status IN ('pending', 'failed') AND e.next_attempt_at <= ?1
                       AND e.chatbot_id NOT IN (SELECT value FROM json_each(?2))
                       AND e.chatbot_id NOT IN (SELECT id FROM chatbots WHERE endpoint_disabled = 1)
                     ORDER BY e.next_attempt_at, e.seq LIMIT ?3",
                )?;
                let mut found = Vec::with_capacity(want);
                let mut rows = s.query(params![now_ms, skip, (want + cl.leases.len()) as i64])?;
                while let Some(r) = rows.next()? {
                    if found.len() == want {
                        break;
                    }
                    let id: EventId = r.get(1)?;
                    if cl.leases.contains_key(&id) {
                        continue;
                    }
                    found.push(Claimed {
                        seq: r.get(0)?,
                        event_id: id,
                        chatbot_id: r.get(2)?,
                        conversation_id: r.get(3)?,
                        payload: bytes::Bytes::from(r.get::<_, Vec<u8>>(4)?),
                        attempts: r.get(5)?,
                        attempt_base: r.get(6)?,
                        trace: r.get(7)?,
                        bot: None,
                    });
                }
                Ok(found)
            });
            match scan {
                Ok(found) => {
                    cl.scanned(now_ms, found.len() < want, skip);
                    for c in found {
                        cl.leases.insert(c.event_id.clone(), lease_until);
                        out.push(c);
                    }
                    Ok(out)
                }
                Err(e) => {
                    // What the queue gave is the next claim's.
                    cl.give_back(out);
                    Err(e)
                }
            }
        } else {
            Ok(out)
        };
        // Known in memory: the next retry, or the next safety scan.
        let next = match &r {
            Ok(rows) if rows.len() < limit => Some(cl.next_due_at(now_ms)),
            _ => None,
        };
        Ok((r?, hot, next))
    }
}

impl Queue for SqliteStore {
    fn claim_due(&self, ask: ClaimAsk) -> StoreFut<'_, Claim> {
        // Nothing is taken before the future runs: a claim turned away
        // unpolled (an open circuit) leaves the queue as it was.
        Box::pin(async move {
            let (mut claimed, hot, next) = self.take_due(&ask)?;
            let scanned = claimed.split_off(hot);
            let queued = Taken::queued(&self.claims, claimed);
            let scanned = Taken::unleased(&self.claims, scanned);
            // What the table gave is leased there before any of it is
            // sent: a crash from here on counts its tries (see
            // `release_leases`); the hot queue's events were leased as they
            // became heads. Should this fail, or the claim be dropped
            // meanwhile, the guards give them back.
            let seqs = scanned.items().iter().map(|c| c.seq).collect();
            self.mark_leased(seqs, ask.lease_until).await?;
            let mut claimed = queued.handed();
            claimed.extend(scanned.handed());
            claimed.sort_by_key(|r| r.seq);
            Ok(Claim {
                claimed,
                next_due_at: next,
            })
        })
    }

    fn record_attempts(&self, records: Vec<AttemptRecord>) -> StoreFut<'_, ()> {
        let signals = self.signals.clone();
        Box::pin(async move {
            let ids: Vec<EventId> = records.iter().map(|r| r.event_id.clone()).collect();
            // One time for the promotions' leases and the offer below: a
            // head goes to the hot queue only with its lease in the table.
            let now = crate::domain::time::now_ms();
            let (promoted, retries, gone) = self
                .write_decided(false, move |c| {
                    let mut promoted = Vec::new();
                    let mut retries = Vec::new();
                    let mut gone = Vec::new();
                    for rec in &records {
                        let (next, is_head) = match rec.next {
                            AttemptNext::Succeeded | AttemptNext::Dead | AttemptNext::Skipped => {
                                (0, false)
                            }
                            AttemptNext::RetryAt(t) => (t, true),
                            AttemptNext::EndpointGone => (rec.at_ms, true),
                        };
                        let status = rec.next.status_str();
                        let args = params![rec.seq, status, rec.number, next, is_head as i64];
                        // Whether the event was undelivered before: what
                        // keeps the writer's count of its conversation right.
                        let was_active = c
                            .prepare_cached(
                                "UPDATE events SET status = ?2, attempts = max(attempts, ?3), next_attempt_at = ?4,
                                 is_head = ?5, leased_until = 0 WHERE seq = ?1 AND status IN ('pending', 'failed')",
                            )
                            .and_then(|mut s| s.execute(args))?
                            == 1;
                        if !was_active {
                            // A late record of an event already ended, or
                            // of one erased with its conversation while on
                            // the wire (no row: nothing to record or retry).
                            writer_cache::forget_active(&rec.conversation_id);
                            let exists = c
                                .prepare_cached(
                                    "UPDATE events SET status = ?2, attempts = max(attempts, ?3), next_attempt_at = ?4,
                                     is_head = ?5, leased_until = 0 WHERE seq = ?1",
                                )
                                .and_then(|mut s| s.execute(args))?
                                == 1;
                            if !exists {
                                continue;
                            }
                        }
                        if rec.next != AttemptNext::Skipped {
                        c.prepare_cached(
                            "INSERT OR REPLACE INTO attempts (event_id, number, at, status_code, duration_ms, error, response_excerpt, request_headers)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        )
                        .and_then(|mut s| {
                            let ids: [&dyn rusqlite::ToSql; 2] = [&rec.event_id, &rec.number];
                            s.execute(rusqlite::params_from_iter(
                                ids.into_iter().chain(attempt_outcome(rec)),
                            ))
                        })?;
                        }
                        if let AttemptNext::RetryAt(t) = rec.next {
                            retries.push(t);
                        }
                        if rec.next == AttemptNext::EndpointGone {
                            writer_cache::clear_conversations();
                            let bot: String = c
                                .prepare_cached(
                                    "UPDATE chatbots SET endpoint_disabled = 1 WHERE id = (SELECT chatbot_id FROM events WHERE id = ?1)
                                     RETURNING id",
                                )
                                .and_then(|mut s| s.query_row([&rec.event_id], |r| r.get(0)))?;
                            gone.push(bot);
                        }
                        if is_head {
                            continue;
                        }
                        // The event left the undelivered states: the next
                        // of its conversation, if any, becomes the head.
                        let left = match writer_cache::active(&rec.conversation_id) {
                            Some(n) if was_active && n > 0 => {
                                let left = n.saturating_sub(1);
                                writer_cache::set_active(&rec.conversation_id, left);
                                Some(left)
                            }
                            _ => None,
                        };
                        if left == Some(0) {
                            continue;
                        }
                        let (next, any_left) = promote_next(c, &rec.conversation_id, Some(now))?;
                        if let Some(mut p) = next {
                            // Its chatbot as the writer knows it, if it
                            // does: the dispatcher need not read it.
                            p.0.bot = writer_cache::conversation(&rec.conversation_id).map(|c| c.bot);
                            promoted.push(p);
                        }
                        if !any_left {
                            writer_cache::set_active(&rec.conversation_id, 0);
                        }
                    }
                    Ok((promoted, retries, gone))
                })
                .await?;
            let wake = !promoted.is_empty() || !gone.is_empty();
            let mut unleased = Vec::new();

            {
                let mut cl = self.claims.lock();
                for id in &ids {
                    cl.leases.remove(id);
                }
                for t in retries {
                    cl.retry_at(t);
                }
                for bot in &gone {
                    cl.chatbot_changed(bot, true);
                }
                let mut due = Vec::with_capacity(promoted.len());
                for (c, at) in promoted {
                    if at <= now {
                        due.push(c);
                    } else {
                        cl.cold_at(at);
                    }
                }
                if cl.closed() {
                    // Emptied for a shutdown: what this record leased will
                    // not be sent by this process, so its leases end.
                    unleased = due.iter().map(|c| c.seq).collect();
                } else {
                    cl.offer(due);
                }
            }
            self.mark_leased(unleased, 0).await?;
            if wake {
                signals.events_due();
            }
            Ok(())
        })
    }

    /// `None` on start: a lease left in the table is a delivery handed out
    /// by a process that ended without recording it or giving it back (a
    /// crash): its try may have reached the receiver, so it counts, and the
    /// next carries the next number (§15).
    fn release_leases(&self, event_ids: Option<Vec<EventId>>) -> StoreFut<'_, ()> {
        Box::pin(async move {
            let ids = event_ids.clone();
            self.write_decided(false, move |c| {
                match ids {
                    None => {
                        c.prepare_cached(
                            "UPDATE events SET attempts = attempts + 1, leased_until = 0
                             WHERE leased_until > 0 AND status IN ('pending', 'failed')",
                        )?
                        .execute([])?
                            + c.prepare_cached(
                                "UPDATE deliveries SET attempts = attempts + 1, leased_until = 0
                                 WHERE leased_until > 0 AND status IN ('pending', 'failed')",
                            )?
                            .execute([])?
                    }
                    Some(ids) => {
                        let mut st =
                            c.prepare_cached("UPDATE events SET leased_until = 0 WHERE id = ?1")?;
                        for id in ids {
                            st.execute([id])?;
                        }
                        0
                    }
                };
                Ok(())
            })
            .await?;
            let mut cl = self.claims.lock();
            match event_ids {
                None => cl.release_claimed(),
                Some(ids) => {
                    for id in ids {
                        cl.leases.remove(&id);
                    }
                }
            }
            cl.cold_at(0);
            Ok(())
        })
    }

    /// Back to the front of the hot queue, their leases kept in the table:
    /// each was written before it was handed out, and the queue hands
    /// them out again with no write.
    fn give_back(&self, claims: Vec<Claimed>) -> StoreFut<'_, ()> {
        self.claims.lock().give_back(claims);
        Box::pin(async { Ok(()) })
    }

    /// The hot queue's events go back to the table, their leases in it
    /// ended: a restart must not count tries that were never sent.
    fn stop_queueing(&self) -> StoreFut<'_, ()> {
        let seqs = self.claims.lock().drain_hot();
        Box::pin(async move { self.mark_leased(seqs, 0).await })
    }

    fn next_due_at(&self) -> StoreFut<'_, Option<i64>> {
        // Known in memory: the next retry, or the next safety scan.
        let now = crate::domain::time::now_ms();
        let at = self.claims.lock().next_due_at(now);
        Box::pin(async move { Ok(at) })
    }
    fn queue_stats(&self) -> StoreFut<'_, QueueStats> {
        let r = self.read(|c| {
            c.prepare_cached(
                "SELECT count(*), min(created_at) FROM events WHERE status IN ('pending', 'failed')",
            )?
            .query_row([], |r| {
                Ok(QueueStats {
                    pending: r.get(0)?,
                    oldest_pending_created_at: r.get(1)?,
                })
            })
        });
        Box::pin(async move { r })
    }
}

#[cfg(test)]
pub(super) mod tests;
