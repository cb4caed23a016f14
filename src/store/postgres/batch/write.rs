//! A click batch's writes, in one statement.

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use sqlx::postgres::{PgArguments, PgConnection, PgRow};
use sqlx::{Postgres, Row};

use super::super::message_json;
use super::super::queued::Lease;
use crate::domain::model::Message;
use crate::store::script::clicks::{Decided, Loaded};
use crate::store::{NewEvent, StoreResult};

/// What a batch's writes report.
pub(super) struct Written {
    /// The `message.updated` entries' sequence numbers, in click order.
    pub seqs: Vec<i64>,
    /// The head events leased to this instance: id → sequence number.
    pub queued: HashMap<String, i64>,
    /// Whether a head event was left to the table (any instance's to claim).
    pub due: bool,
}

/// The batch's writes in one statement, its values bound as arrays: the
/// interactions it answered and the messages it changed (each once, as the
/// batch left it), its events in click order (a conversation's first is
/// its head when nothing of it is waiting, read after the locks; a head is
/// leased as `lease` says), and its `message.updated` entries in click
/// order.
pub(super) struct Write<'a> {
    shape: Shape,
    i_ids: Vec<&'a str>,
    statuses: Vec<&'a str>,
    responses: Vec<Option<String>>,
    updated: Vec<i64>,
    at: Vec<Option<i64>>,
    specs: Vec<String>,
    m_ids: Vec<&'a str>,
    docs: Vec<String>,
    ids: Vec<&'a str>,
    bots: Vec<&'a str>,
    convs: Vec<&'a str>,
    types: Vec<&'a str>,
    payloads: Vec<&'a [u8]>,
    created: Vec<i64>,
    leases: Vec<i64>,
    traces: Vec<Option<&'a str>>,
    s_convs: Vec<&'a str>,
    s_data: Vec<&'a str>,
}

impl<'a> Write<'a> {
    /// `events[k]` and `docs[k]` (the message as JSON, when changed) are
    /// `decided[k]`'s.
    pub fn new(
        loaded: &'a Loaded,
        decided: &'a [Decided],
        events: &'a [NewEvent],
        docs: &'a [Option<String>],
        lease: Option<&Lease>,
    ) -> Self {
        let answered: HashSet<&str> = decided
            .iter()
            .filter_map(|d| d.answered.as_ref().map(|a| a.id.as_str()))
            .collect();
        let (mut i_ids, mut statuses, mut responses, mut updated, mut at, mut specs) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for i in loaded.interactions.values().flatten() {
            if answered.contains(i.id.as_str()) {
                i_ids.push(i.id.as_str());
                statuses.push(i.status.as_str());
                responses.push(i.response.as_ref().map(|v| v.to_string()));
                updated.push(i.updated_at);
                at.push(i.answered_at);
                specs.push(serde_json::to_string(&i.spec).unwrap_or_default());
            }
        }
        // Each changed message once, as its last accepted click left it
        // (a click after it that changed nothing left it so too).
        let changed: HashSet<&str> = decided
            .iter()
            .filter(|d| d.changed)
            .map(|d| d.message.id.as_str())
            .collect();
        let mut last: HashMap<&str, &Message> = HashMap::new();
        for d in decided {
            if changed.contains(d.message.id.as_str()) {
                last.insert(d.message.id.as_str(), &d.message);
            }
        }
        let (mut m_ids, mut m_docs) = (Vec::new(), Vec::new());
        for (id, m) in last {
            m_ids.push(id);
            m_docs.push(message_json(m));
        }
        let n = decided.len();
        let mut w = Self {
            shape: Shape {
                answering: !i_ids.is_empty(),
                changing: !m_ids.is_empty(),
                streaming: false,
            },
            i_ids,
            statuses,
            responses,
            updated,
            at,
            specs,
            m_ids,
            docs: m_docs,
            ids: Vec::with_capacity(n),
            bots: Vec::with_capacity(n),
            convs: Vec::with_capacity(n),
            types: Vec::with_capacity(n),
            payloads: Vec::with_capacity(n),
            created: Vec::with_capacity(n),
            leases: Vec::with_capacity(n),
            traces: Vec::with_capacity(n),
            s_convs: Vec::new(),
            s_data: Vec::new(),
        };
        for ((d, e), doc) in decided.iter().zip(events).zip(docs) {
            w.ids.push(e.id.as_str());
            w.bots.push(e.chatbot_id.as_str());
            w.leases.push(match (lease, &d.bot) {
                (Some(l), Some(b)) => l.for_chatbot(b),
                _ => 0,
            });
            w.convs.push(e.conversation_id.as_str());
            w.types.push(e.event_type);
            w.payloads.push(e.payload.as_slice());
            w.created.push(e.created_at);
            w.traces.push(e.trace.as_deref());
            if let Some(j) = doc {
                w.s_convs.push(e.conversation_id.as_str());
                w.s_data.push(j.as_str());
            }
        }
        w.shape.streaming = !w.s_convs.is_empty();
        w
    }

    /// Runs the statement in the transaction open on `conn`.
    pub async fn run(&self, conn: &mut PgConnection) -> StoreResult<Written> {
        let rows = self.query().fetch_all(&mut *conn).await?;
        parse(&rows)
    }

    /// The statement of this write's shape, its arrays bound in the order
    /// [`write_sql`] takes them.
    fn query(&self) -> sqlx::query::Query<'_, Postgres, PgArguments> {
        let mut q = sqlx::query(self.shape.sql());
        if self.shape.answering {
            q = q
                .bind(&self.i_ids)
                .bind(&self.statuses)
                .bind(&self.responses)
                .bind(&self.updated)
                .bind(&self.at)
                .bind(&self.specs);
        }
        if self.shape.changing {
            q = q.bind(&self.m_ids).bind(&self.docs);
        }
        q = q
            .bind(&self.ids)
            .bind(&self.bots)
            .bind(&self.convs)
            .bind(&self.types)
            .bind(&self.payloads)
            .bind(&self.created)
            .bind(&self.leases)
            .bind(&self.traces);
        if self.shape.streaming {
            q = q.bind(&self.s_convs).bind(&self.s_data);
        }
        q
    }
}

/// Which parts a batch's write has: a statement for each (only the parts
/// with rows to write: fewer parts, less to plan and run; a click that
/// answers and changes nothing is one insert).
#[derive(Clone, Copy)]
struct Shape {
    answering: bool,
    changing: bool,
    streaming: bool,
}

impl Shape {
    /// Each shape's number, 0 to 7.
    fn bit(self) -> usize {
        self.answering as usize | (self.changing as usize) << 1 | (self.streaming as usize) << 2
    }

    /// This shape's statement, made once.
    fn sql(self) -> &'static str {
        static SQL: [OnceLock<String>; 8] = [const { OnceLock::new() }; 8];
        SQL[self.bit()].get_or_init(|| {
            let n = 6 * self.answering as usize
                + 2 * self.changing as usize
                + 8
                + 2 * self.streaming as usize;
            let args = (1..=n).map(|k| format!("${k}")).collect();
            write_sql(self.answering, self.changing, self.streaming, args)
        })
    }
}

/// What the rows of [`write_sql`]'s statement say.
fn parse(rows: &[PgRow]) -> StoreResult<Written> {
    let mut out = Written {
        seqs: Vec::new(),
        queued: HashMap::new(),
        due: false,
    };
    for r in rows {
        let seq: i64 = r.try_get(0)?;
        let id: Option<String> = r.try_get(1)?;
        let leased_until: Option<i64> = r.try_get(2)?;
        match (id, leased_until) {
            (Some(id), Some(l)) if l > 0 => {
                out.queued.insert(id, seq);
            }
            (Some(_), _) => out.due = true,
            (None, _) => out.seqs.push(seq),
        }
    }
    out.seqs.sort_unstable();
    Ok(out)
}

/// The batch's statement with the parts it needs, `args` (arrays, each
/// cast by the statement) in this order: answered interactions (6), changed
/// messages (2), events (8, always), stream entries (2). It returns the
/// head events (sequence number, id, lease) and the stream entries'
/// sequence numbers (id and lease NULL).
///
/// Whether an event heads its conversation is one probe of
/// `events_active_by_conversation` per event (a `LATERAL` subquery with
/// `LIMIT 1`), whatever the statistics say: a correlated `NOT EXISTS` let
/// the planner read every waiting event into a hash instead, which its
/// statistics of a large store (few waiting events when last analysed)
/// made look cheap — 72 ms per batch with 75,000 waiting.
fn write_sql(answering: bool, changing: bool, streaming: bool, args: Vec<String>) -> String {
    let mut args = args.into_iter();
    let mut p = |k: usize| -> Vec<String> { args.by_ref().take(k).collect() };
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
    let v = p(8);
    parts.push(format!(
        "queued AS (
           INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts,
             next_attempt_at, is_head, leased_until, traceparent, routed)
           SELECT id, bot, conv, type, payload, created, 'pending', 0, created, head,
             CASE WHEN head = 1 THEN lease ELSE 0 END, trace,
             CASE WHEN EXISTS (SELECT 1 FROM endpoints WHERE chatbot_id = bot AND is_default = 0) THEN 0 ELSE 1 END
           FROM (SELECT u.*,
               CASE WHEN row_number() OVER (PARTITION BY u.conv ORDER BY u.ord) = 1 AND w.busy IS NULL
                    THEN 1 ELSE 0 END AS head
             FROM UNNEST({}::text[], {}::text[], {}::text[], {}::text[], {}::bytea[], {}::bigint[], {}::bigint[], {}::text[])
               WITH ORDINALITY AS u(id, bot, conv, type, payload, created, lease, trace, ord)
             LEFT JOIN LATERAL (SELECT 1 AS busy FROM events x WHERE x.conversation_id = u.conv
                                AND x.status IN ('pending', 'failed') LIMIT 1) w ON true) s
           ORDER BY ord
           RETURNING seq, id, is_head, leased_until, routed)",
        v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
    ));
    // The router's queue (migration 0014): the events a chatbot's other
    // endpoints may take.
    parts.push(
        "routing AS (INSERT INTO unrouted_events (seq) SELECT seq FROM queued WHERE routed = 0)"
            .to_string(),
    );
    let heads = "SELECT seq, id, leased_until FROM queued WHERE is_head = 1";
    let last = if streaming {
        let v = p(2);
        parts.push(format!(
            "streamed AS (
           INSERT INTO stream_events (conversation_id, kind, data)
           SELECT conv, 'message.updated', data FROM UNNEST({}::text[], {}::text[]) WITH ORDINALITY AS u(conv, data, ord)
           ORDER BY ord RETURNING seq)",
            v[0], v[1]
        ));
        format!("{heads} UNION ALL SELECT seq, NULL, NULL FROM streamed")
    } else {
        heads.to_string()
    };
    format!("WITH {}\n         {last}", parts.join(", "))
}
/// The statement of a batch that only inserts events, its arrays `$1`–`$8`
/// (for plan checks).
pub fn events_only_sql() -> String {
    write_sql(
        false,
        false,
        false,
        (1..=8).map(|k| format!("${k}")).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::write_sql;

    #[test]
    fn each_statement_takes_its_arrays_in_order() {
        for bits in 0..8u8 {
            let (a, c, s) = (bits & 1 == 1, bits & 2 == 2, bits & 4 == 4);
            let want = 6 * a as usize + 2 * c as usize + 8 + 2 * s as usize;
            let args = (1..=want).map(|k| format!("${k}")).collect();
            let sql = write_sql(a, c, s, args);
            for k in 1..=want {
                assert!(sql.contains(&format!("${k}::")), "{bits}: ${k} in {sql}");
            }
            assert!(!sql.contains(&format!("${}::", want + 1)), "{bits}: {sql}");
            assert_eq!(sql.contains("interactions"), a);
            assert_eq!(sql.contains("UPDATE messages"), c);
            assert_eq!(sql.contains("stream_events"), s);
        }
    }
}
