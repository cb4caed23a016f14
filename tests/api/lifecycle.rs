//! The data lifecycle (§11): erasure now, the retention purge, a SQLite
//! file that stops growing, backup and restore.

mod backup;
mod endpoints;
mod erasure;
mod purge;

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Bot, Conv, Received, TestApp};
use blockhook::config::Database;

/// A message whose `approve` button can be clicked again and again.
pub async fn reusable(app: &TestApp, bot: &Bot, conv: &Conv) -> String {
    let m = app.buttons(bot, conv, false).await;
    m["id"].as_str().expect("message id").to_string()
}

pub async fn click_ok(app: &TestApp, conv: &Conv, mid: &str) {
    let r = app.click(conv, mid, "b1", "approve").await;
    assert_eq!(r.status(), 200, "click");
}

pub async fn erase(app: &TestApp, bot: &Bot, cid: &str) -> reqwest::Response {
    app.client
        .delete(app.url(&format!("/api/v1/conversations/{cid}")))
        .bearer_auth(&bot.api_key)
        .send()
        .await
        .expect("delete")
}

pub fn webhook_id(r: &Received) -> String {
    r.header("webhook-id").expect("webhook-id").to_string()
}

/// The event ids of a chatbot's deliveries log.
pub async fn event_ids(app: &TestApp, bot: &Bot) -> Vec<String> {
    app.events(bot)
        .await
        .iter()
        .map(|e| e["event_id"].as_str().expect("event_id").to_string())
        .collect()
}

/// The ids of a conversation's interactions.
pub async fn interaction_ids(app: &TestApp, bot: &Bot, cid: &str) -> Vec<String> {
    let v: Value = app
        .get(
            &format!("/api/v1/interactions?conversation_id={cid}&limit=100"),
            &bot.api_key,
        )
        .await
        .json()
        .await
        .expect("json");
    v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|i| i["id"].as_str().expect("id").to_string())
        .collect()
}

/// Whether the visitor token still opens its conversation (200), or is
/// refused (401).
pub async fn visitor_status(app: &TestApp, conv: &Conv) -> u16 {
    app.get(
        &format!("/widget/v1/conversations/{}/messages", conv.id),
        &conv.token,
    )
    .await
    .status()
    .as_u16()
}

/// Polls until the visitor token of `conv` is refused (its conversation
/// deleted); false if `within` passes first.
pub async fn wait_gone(app: &TestApp, conv: &Conv, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match visitor_status(app, conv).await {
            401 => return true,
            200 => {}
            s => panic!("unexpected status {s}"),
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Rows left in the store for a conversation, its events and its
/// interactions, per table (only tables with some), read with SQL as an
/// operator would.
pub async fn rows_left(
    app: &TestApp,
    cid: &str,
    events: &[String],
    interactions: &[String],
) -> Vec<(String, i64)> {
    let mut checks: Vec<(&str, String)> = [
        "SELECT count(*) FROM conversations WHERE id = $1",
        "SELECT count(*) FROM messages WHERE conversation_id = $1",
        "SELECT count(*) FROM events WHERE conversation_id = $1",
        "SELECT count(*) FROM stream_events WHERE conversation_id = $1",
        "SELECT count(*) FROM interactions WHERE conversation_id = $1",
    ]
    .into_iter()
    .map(|q| (q, cid.to_string()))
    .collect();
    for e in events {
        for q in [
            "SELECT count(*) FROM attempts WHERE event_id = $1",
            "SELECT count(*) FROM response_uses WHERE event_id = $1",
            "SELECT count(*) FROM response_idempotency WHERE event_id = $1",
            "SELECT count(*) FROM deliveries WHERE event_id = $1",
            "SELECT count(*) FROM delivery_attempts WHERE event_id = $1",
        ] {
            checks.push((q, e.clone()));
        }
    }
    for i in interactions {
        checks.push((
            "SELECT count(*) FROM interaction_idempotency WHERE interaction_id = $1",
            i.clone(),
        ));
    }
    let mut out = Vec::new();
    match &app.database {
        Database::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).expect("open the SQLite file");
            for (q, arg) in checks {
                let n: i64 = c
                    .query_row(&q.replace("$1", "?1"), [&arg], |r| r.get(0))
                    .expect(q);
                if n > 0 {
                    out.push((format!("{q} [{arg}]"), n));
                }
            }
        }
        Database::Postgres(url) => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
            for (q, arg) in checks {
                let n: i64 = sqlx::query_scalar(q)
                    .bind(&arg)
                    .fetch_one(&mut c)
                    .await
                    .expect(q);
                if n > 0 {
                    out.push((format!("{q} [{arg}]"), n));
                }
            }
        }
    }
    out
}

/// A conversation with everything a conversation can hold: a bot message
/// with buttons, a visitor's message, an accepted click delivered to
/// `rx`, and a use of its response_url with an idempotency key. Returns
/// the response_url.
pub async fn full_conversation(
    app: &TestApp,
    bot: &Bot,
    conv: &Conv,
    rx: &mut crate::helpers::Receiver,
) -> String {
    let mid = reusable(app, bot, conv).await;
    click_ok(app, conv, &mid).await;
    let r = app
        .post(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
            &json!({"text": "hello"}),
        )
        .await;
    assert_eq!(r.status(), 201, "visitor message");
    // A reviewer's answer, with its idempotency record.
    app.buttons(bot, conv, true).await;
    let v: Value = app
        .get(
            &format!(
                "/api/v1/interactions?status=pending&conversation_id={}",
                conv.id
            ),
            &bot.api_key,
        )
        .await
        .json()
        .await
        .expect("json");
    let pending = v["data"][0]["id"].as_str().expect("a pending interaction");
    let r = app
        .client
        .post(app.url(&format!("/api/v1/interactions/{pending}/responses")))
        .bearer_auth(&bot.api_key)
        .header("Idempotency-Key", "answer-1")
        .json(&json!({"type": "choice", "option_ids": ["approve"]}))
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 200, "answer");
    let got = rx.take(3, Duration::from_secs(10)).await;
    let url = got
        .iter()
        .map(Received::json)
        .find(|e| e["type"] == "interaction.button_clicked")
        .expect("the click's event")["response_url"]
        .as_str()
        .expect("response_url")
        .to_string();
    let r = app
        .client
        .post(&url)
        .header("Idempotency-Key", "k1")
        .json(&json!({"text": "Done", "replace_original": false}))
        .send()
        .await
        .expect("reply");
    assert_eq!(r.status(), 200, "response_url use");
    url
}
