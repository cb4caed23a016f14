//! A click batch's writes, in one statement.

use std::collections::{HashMap, HashSet};

use super::super::queued::Lease;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::super::{literal, message_json};
use super::Decision;
use crate::domain::inbox as domain;
use crate::domain::model::Message;
use crate::store::StoreResult;

/// What a batch's writes report.
pub(super) struct Written {
    /// The `message.updated` entries' sequence numbers, in click order.
    pub seqs: Vec<i64>,
    /// The head events leased to this instance: id → sequence number.
    pub queued: HashMap<String, i64>,
    /// Whether a head event was left to the table (any instance's to claim).
    pub due: bool,
}

impl Written {
    /// What a batch whose rows did not read must assume: every delivery
    /// is the table's.
    pub fn unread() -> Self {
        Self {
            seqs: Vec::new(),
            queued: HashMap::new(),
            due: true,
        }
    }
}

/// The batch's writes in one statement, returned as the `EXECUTE` of its
/// [`Shape`]'s statement with its values written into it (see
/// [`literal`]), to be sent with the `COMMIT` after it in one message: the
/// interactions it answered and
/// the messages it changed (each once, as the batch left it), its events
/// in click order (a conversation's first is its head when nothing of it
/// is waiting, read after the locks; a head is leased as `lease` says),
/// and its `message.updated` entries in click order.
pub(super) fn write_statement(
    interactions: &HashMap<String, Vec<domain::Interaction>>,
    messages: &HashMap<String, Message>,
    decisions: &[Decision],
    lease: Option<&Lease>,
) -> StoreResult<(Shape, String)> {
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
    let mut leases: Vec<i64> = Vec::with_capacity(n);
    let mut traces: Vec<Option<&str>> = Vec::with_capacity(n);
    let (mut s_convs, mut s_data) = (Vec::new(), Vec::new());
    for d in decisions {
        ids.push(d.event_id.as_str());
        bots.push(d.bot.id.as_str());
        leases.push(lease.map_or(0, |l| l.for_chatbot(&d.bot)));
        convs.push(d.conversation_id.as_str());
        types.push(d.event_type);
        payloads.push(d.payload.as_slice());
        created.push(d.created_at);
        traces.push(d.trace.as_deref());
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
    let mut args = Vec::with_capacity(17);
    if answering {
        args.push(literal::texts(i_ids)?);
        args.push(literal::texts(statuses)?);
        args.push(literal::opt_texts(responses.iter().map(Option::as_deref))?);
        args.push(literal::bigints(&updated)?);
        args.push(literal::opt_bigints(&at)?);
        args.push(literal::texts(specs.iter().map(String::as_str))?);
    }
    if changing {
        args.push(literal::texts(m_ids)?);
        args.push(literal::texts(docs.iter().map(String::as_str))?);
    }
    args.push(literal::texts(ids)?);
    args.push(literal::texts(bots)?);
    args.push(literal::texts(convs)?);
    args.push(literal::texts(types)?);
    args.push(literal::byteas(payloads)?);
    args.push(literal::bigints(&created)?);
    args.push(literal::bigints(&leases)?);
    args.push(literal::opt_texts(traces)?);
    if streaming {
        args.push(literal::texts(s_convs)?);
        args.push(literal::texts(s_data)?);
    }
    let shape = Shape {
        answering,
        changing,
        streaming,
    };
    Ok((
        shape,
        format!("EXECUTE {}({})", shape.name(), args.join(", ")),
    ))
}

/// Which parts a batch's write has: a statement prepared for each.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    answering: bool,
    changing: bool,
    streaming: bool,
}

impl Shape {
    /// Each shape's number, 0 to 7.
    pub fn bit(self) -> u8 {
        self.answering as u8 | (self.changing as u8) << 1 | (self.streaming as u8) << 2
    }

    fn name(self) -> String {
        format!("bh_click_write_{}", self.bit())
    }

    /// The `PREPARE` of this shape's statement, whose [`write_statement`]
    /// `EXECUTE`s it.
    pub fn prepare(self) -> String {
        let mut types = Vec::new();
        if self.answering {
            types.extend([
                "text[]", "text[]", "text[]", "bigint[]", "bigint[]", "text[]",
            ]);
        }
        if self.changing {
            types.extend(["text[]", "text[]"]);
        }
        types.extend([
            "text[]", "text[]", "text[]", "text[]", "bytea[]", "bigint[]", "bigint[]", "text[]",
        ]);
        if self.streaming {
            types.extend(["text[]", "text[]"]);
        }
        let args = (1..=types.len()).map(|k| format!("${k}")).collect();
        format!(
            "PREPARE {}({}) AS {}",
            self.name(),
            types.join(", "),
            write_sql(self.answering, self.changing, self.streaming, args)
        )
    }
}

/// What the rows of [`write_sql`]'s statement say.
pub(super) fn parse(rows: &[PgRow]) -> StoreResult<Written> {
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
               CASE WHEN row_number() OVER (PARTITION BY conv ORDER BY ord) = 1
                      AND NOT EXISTS (SELECT 1 FROM events x WHERE x.conversation_id = u.conv
                                      AND x.status IN ('pending', 'failed'))
                    THEN 1 ELSE 0 END AS head
             FROM UNNEST({}::text[], {}::text[], {}::text[], {}::text[], {}::bytea[], {}::bigint[], {}::bigint[], {}::text[])
               WITH ORDINALITY AS u(id, bot, conv, type, payload, created, lease, trace, ord)) s
           ORDER BY ord
           RETURNING seq, id, is_head, leased_until)",
        v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
    ));
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
