//! `bench --preload N`: fills a store, before its server starts, with N
//! conversations' worth of history — per conversation two messages, two
//! delivered events with an attempt each, a response_url use, an answered
//! interaction and three stream entries — of a chatbot of its own, so the
//! measured clicks run against a full store. Rows are made by SQL inside
//! the database (a recursive CTE on SQLite, `generate_series` on
//! PostgreSQL), in transactions of [`CHUNK`] conversations.

use std::sync::Arc;
use std::time::Instant;

use sqlx::ConnectOptions;

use crate::hub::Hub;

/// Conversations per transaction.
const CHUNK: u64 = 50_000;

/// The preloaded chatbot.
pub const BOT: &str = "cb_preload";

/// A bot message as stored (about the size of the bench's own).
const DOC: &str = r#"{"id":"m_preload","conversation_id":"conv_preload","author":{"kind":"bot"},"text":"Approve the request?","blocks":[{"type":"actions","block_id":"b1","disable_on_click":false,"elements":[{"type":"button","action_id":"approve","label":"Approve","value":"req_991","style":"primary"},{"type":"button","action_id":"deny","label":"Deny","value":""}],"state":{"disabled":false,"reason":null,"chosen_action_id":null}}],"metadata":{"flow":"preload"},"typing_on_interaction":false,"created_at":"2026-07-17T03:12:44.120Z","updated_at":"2026-07-17T03:12:44.120Z"}"#;

/// An event payload as stored.
const PAYLOAD: &str = r#"{"api_version":"2026-07-01","block_kit_version":"1","event":"interaction.button_clicked","type":"interaction.button_clicked","event_id":"evt_preload","chatbot_id":"cb_preload","conversation_id":"conv_preload","message_id":"m_preload","block_id":"b1","action_id":"approve","value":"req_991","label":"Approve","message_metadata":{"flow":"preload"},"user":{"kind":"visitor","id":"vs_preload","display_name":"Visitor 0412"},"clicked_at":"2026-07-17T03:12:44.120Z","response_url":"http://127.0.0.1:8080/api/v1/responses/rt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","delivery_attempt":1}"#;

const INTERACTION_PAYLOAD: &str =
    r#"{"options":[{"id":"approve","label":"Approve"},{"id":"deny","label":"Deny"}]}"#;

/// The statements, with `{ids}` the source of numbers `i` from `$from` to
/// `$to` and `{id:prefix}` the id of number `i` with that prefix; `$bot`,
/// `$at`, `$doc`, `$payload`, `$ipayload` bound by name.
const STATEMENTS: &[&str] = &[
    "INSERT INTO conversations (id, chatbot_id, visitor_id, visitor_name, token_hash, created_at)
     SELECT {id:conv_pre}, $bot, {id:vs_pre}, 'Visitor', {id:preload-token-}, $at FROM {ids}",
    "INSERT INTO messages (id, conversation_id, doc, created_at)
     SELECT {id:m_pre} || '_' || k, {id:conv_pre}, $doc, $at FROM {ids} CROSS JOIN {two}",
    "INSERT INTO events (id, chatbot_id, conversation_id, type, payload, created_at, status, attempts, next_attempt_at, is_head)
     SELECT {id:evt_pre} || '_' || k, $bot, {id:conv_pre}, 'interaction.button_clicked', $payload, $at, 'succeeded', 1, 0, 0
     FROM {ids} CROSS JOIN {two}",
    "INSERT INTO attempts (event_id, number, at, status_code, duration_ms)
     SELECT {id:evt_pre} || '_' || k, 1, $at, 200, 3 FROM {ids} CROSS JOIN {two}",
    "INSERT INTO response_uses (event_id, uses) SELECT {id:evt_pre} || '_1', 1 FROM {ids}",
    "INSERT INTO stream_events (conversation_id, kind, data)
     SELECT {id:conv_pre}, 'message.created', $doc FROM {ids} CROSS JOIN {three}",
    "INSERT INTO interactions (id, chatbot_id, conversation_id, message_id, type, status, prompt, payload, spec, is_ask, response, expires_at, created_at, updated_at, answered_at)
     SELECT {id:int_pre}, $bot, {id:conv_pre}, {id:m_pre} || '_1', 'choice', 'answered', 'Approve the request?', $ipayload, '{}', 0,
            '{\"type\":\"choice\",\"option_ids\":[\"approve\"]}', NULL, $at, $at, $at
     FROM {ids}",
];

#[derive(Clone, Copy, PartialEq)]
enum Dialect {
    Sqlite,
    Postgres,
}

/// `sql` for one dialect, and the parameters it takes, in order, by their
/// number: 1 from, 2 to, 3 bot, 4 at, 5 doc, 6 payload, 7 interaction
/// payload (PostgreSQL wants `$1…$n` without gaps, so each statement
/// numbers what it uses).
fn render(sql: &str, d: Dialect) -> (String, Vec<u8>) {
    let mut s = sql.to_string();
    let (ids, two, three) = match d {
        Dialect::Sqlite => (
            "(WITH RECURSIVE s(i) AS (SELECT @1 UNION ALL SELECT i + 1 FROM s WHERE i < @2) SELECT i FROM s) AS n",
            "(SELECT 1 AS k UNION ALL SELECT 2) AS kk",
            "(SELECT 1 AS k UNION ALL SELECT 2 UNION ALL SELECT 3) AS kk",
        ),
        Dialect::Postgres => (
            "generate_series(@1::bigint, @2::bigint) AS n(i)",
            "generate_series(1, 2) AS kk(k)",
            "generate_series(1, 3) AS kk(k)",
        ),
    };
    s = s
        .replace("{ids}", ids)
        .replace("{two}", two)
        .replace("{three}", three);
    while let Some(start) = s.find("{id:") {
        let end = start + s[start..].find('}').unwrap_or(0);
        let prefix = s[start + 4..end].to_string();
        let expr = match d {
            Dialect::Sqlite => format!("printf('{prefix}%018d', i)"),
            Dialect::Postgres => format!("('{prefix}' || lpad(i::text, 18, '0'))"),
        };
        s.replace_range(start..=end, &expr);
    }
    let payload = match d {
        Dialect::Sqlite => "CAST(@6 AS BLOB)",
        Dialect::Postgres => "convert_to(@6, 'UTF8')",
    };
    s = s
        .replace("$bot", "@3")
        .replace("$at", "@4")
        .replace("$doc", "@5")
        .replace("$payload", payload)
        .replace("$ipayload", "@7");
    let mut order: Vec<u8> = Vec::new();
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(ch) = chars.next() {
        match chars.peek().and_then(|c| c.to_digit(10)) {
            Some(n) if ch == '@' => {
                chars.next();
                let n = n as u8;
                let pos = match order.iter().position(|&o| o == n) {
                    Some(p) => p + 1,
                    None => {
                        order.push(n);
                        order.len()
                    }
                };
                out.push(if d == Dialect::Sqlite { '?' } else { '$' });
                out.push_str(&pos.to_string());
            }
            _ => out.push(ch),
        }
    }
    (out, order)
}

/// Fills the store at `db_url` (migrated first) with `n` conversations of
/// [`BOT`], created at `created_at` (ms), under a retention of
/// `retention_ms`. Returns the seconds it took.
pub async fn fill(db_url: &str, n: u64, retention_ms: i64, created_at: i64) -> Result<f64, String> {
    let t0 = Instant::now();
    if let Some(path) = db_url.strip_prefix("sqlite://") {
        // Migrated by the store, then filled on a connection of its own.
        drop(
            crate::store::sqlite::SqliteStore::open(path, Arc::new(Hub::new()))
                .map_err(|e| e.to_string())?,
        );
        let path = path.to_string();
        tokio::task::spawn_blocking(move || fill_sqlite(&path, n, retention_ms, created_at))
            .await
            .map_err(|e| e.to_string())??;
    } else {
        drop(
            crate::store::postgres::PostgresStore::connect(db_url, Arc::new(Hub::new()))
                .await
                .map_err(|e| e.to_string())?,
        );
        fill_postgres(db_url, n, retention_ms, created_at).await?;
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Copies a preloaded SQLite store to `to` and waits until the copy is on
/// the disk: the kernel's writeback of gigabytes would otherwise run during
/// the measured loops, on the same disk as every commit's sync.
pub async fn copy_synced(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    let (from, to) = (from.to_path_buf(), to.to_path_buf());
    tokio::task::spawn_blocking(move || {
        std::fs::copy(&from, &to)?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&to)?
            .sync_all()
    })
    .await
    .map_err(std::io::Error::other)?
}

const BOT_ROW: &str = "INSERT INTO chatbots (id, name, webhook_url, retention_ms, api_key_hash, signing_secret, member_id, created_at)
     VALUES ('cb_preload', 'preload', 'http://127.0.0.1:9/preload', $1, 'preload-key-hash', 'whsec_cHJlbG9hZHByZWxvYWRwcmVsb2FkcHJlbG9hZA==', 'mem_preload', $2)";

fn fill_sqlite(path: &str, n: u64, retention_ms: i64, created_at: i64) -> Result<(), String> {
    let e = |e: rusqlite::Error| format!("preloading {path}: {e}");
    let c = rusqlite::Connection::open(path).map_err(e)?;
    c.pragma_update(None, "synchronous", "OFF").map_err(e)?;
    c.execute(
        &BOT_ROW.replace('$', "?"),
        rusqlite::params![retention_ms, created_at],
    )
    .map_err(e)?;
    let statements: Vec<(String, Vec<u8>)> = STATEMENTS
        .iter()
        .map(|s| render(s, Dialect::Sqlite))
        .collect();
    let mut from = 1u64;
    while from <= n {
        let to = (from + CHUNK - 1).min(n);
        c.execute_batch("BEGIN").map_err(e)?;
        for (sql, order) in &statements {
            let (f, t) = (from as i64, to as i64);
            let args: Vec<&dyn rusqlite::ToSql> = order
                .iter()
                .map(|i| -> &dyn rusqlite::ToSql {
                    match i {
                        1 => &f,
                        2 => &t,
                        3 => &BOT,
                        4 => &created_at,
                        5 => &DOC,
                        6 => &PAYLOAD,
                        _ => &INTERACTION_PAYLOAD,
                    }
                })
                .collect();
            c.prepare(sql)
                .and_then(|mut st| st.execute(&args[..]))
                .map_err(e)?;
        }
        c.execute_batch("COMMIT").map_err(e)?;
        from = to + 1;
    }
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .map_err(e)?;
    Ok(())
}

async fn fill_postgres(
    url: &str,
    n: u64,
    retention_ms: i64,
    created_at: i64,
) -> Result<(), String> {
    use sqlx::Connection;
    let e = |e: sqlx::Error| crate::config::redact_in(&format!("preloading {url}: {e}"), url);
    // Statements of a fill take seconds by design: not worth a warning each.
    let opts = <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(url)
        .map_err(e)?
        .disable_statement_logging();
    let mut c = sqlx::PgConnection::connect_with(&opts).await.map_err(e)?;
    sqlx::query(BOT_ROW)
        .bind(retention_ms)
        .bind(created_at)
        .execute(&mut c)
        .await
        .map_err(e)?;
    let statements: Vec<(String, Vec<u8>)> = STATEMENTS
        .iter()
        .map(|s| render(s, Dialect::Postgres))
        .collect();
    let mut from = 1u64;
    while from <= n {
        let to = (from + CHUNK - 1).min(n);
        let mut tx = c.begin().await.map_err(e)?;
        for (sql, order) in &statements {
            let mut q = sqlx::query(sql);
            for i in order {
                q = match i {
                    1 => q.bind(from as i64),
                    2 => q.bind(to as i64),
                    3 => q.bind(BOT),
                    4 => q.bind(created_at),
                    5 => q.bind(DOC),
                    6 => q.bind(PAYLOAD),
                    _ => q.bind(INTERACTION_PAYLOAD),
                };
            }
            q.execute(&mut *tx).await.map_err(e)?;
        }
        tx.commit().await.map_err(e)?;
        from = to + 1;
    }
    // What an operator's autovacuum would have done by then: the visibility
    // map set and statistics taken (a fresh table's inserts are otherwise
    // checked against the commit log row by row), and the fill's WAL
    // checkpointed before the measure instead of during it.
    // Its own tables only: a database-wide VACUUM warns of every shared
    // catalog a non-superuser may not vacuum.
    sqlx::raw_sql(
        "VACUUM ANALYZE chatbots, conversations, messages, events, attempts, \
         response_uses, stream_events, interactions",
    )
    .execute(&mut c)
    .await
    .map_err(e)?;
    if let Err(err) = sqlx::raw_sql("CHECKPOINT").execute(&mut c).await {
        eprintln!(
            "bench: no CHECKPOINT after the preload ({err}); its WAL is written back during the measure"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statements_fill_a_sqlite_store_with_what_a_conversation_holds() {
        let dir =
            std::env::temp_dir().join(format!("bh-preload-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("p.db").display().to_string();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(fill(&format!("sqlite://{path}"), 60_000, 1_000, 5))
            .expect("fill");
        let c = rusqlite::Connection::open(&path).expect("open");
        let count = |t: &str| -> i64 {
            c.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                .expect(t)
        };
        assert_eq!(count("conversations"), 60_000);
        assert_eq!(count("messages"), 120_000);
        assert_eq!(count("events"), 120_000);
        assert_eq!(count("attempts"), 120_000);
        assert_eq!(count("stream_events"), 180_000);
        assert_eq!(count("interactions"), 60_000);
        assert_eq!(count("response_uses"), 60_000);
        let orphans: i64 = c
            .query_row(
                "SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = a.event_id)",
                [],
                |r| r.get(0),
            )
            .expect("orphans");
        assert_eq!(orphans, 0);
        drop(c);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
