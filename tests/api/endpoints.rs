//! Endpoints (§13), part one: managed with the chatbot's key — created,
//! listed (the default first), read, changed, paused, deleted, rotated —
//! over real HTTP on both stores.

mod crud;
mod default;
mod default_delivery;
mod heads;
mod log;
mod secrets;
mod validation;

use blockhook::config::Database;
use reqwest::Response;
use serde_json::Value;

use crate::helpers::{Bot, TestApp};

/// A request with the chatbot's key and an optional JSON body.
pub async fn call(
    app: &TestApp,
    bot: &Bot,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> Response {
    let mut rb = app
        .client
        .request(method, app.url(path))
        .bearer_auth(&bot.api_key);
    if let Some(b) = body {
        rb = rb.json(b);
    }
    rb.send().await.expect("request")
}

/// The JSON of an answer with `status`.
pub async fn json_with(r: Response, status: u16) -> Value {
    let got = r.status().as_u16();
    let text = r.text().await.expect("body");
    assert_eq!(got, status, "{text}");
    serde_json::from_str(&text).expect("json")
}

/// `POST /api/v1/endpoints` → 201: the endpoint with its secret.
pub async fn create(app: &TestApp, bot: &Bot, body: Value) -> Value {
    json_with(
        call(
            app,
            bot,
            reqwest::Method::POST,
            "/api/v1/endpoints",
            Some(&body),
        )
        .await,
        201,
    )
    .await
}

/// The chatbot's endpoints as `GET /api/v1/endpoints` lists them.
pub async fn list(app: &TestApp, bot: &Bot) -> Vec<Value> {
    let v = json_with(
        call(
            app,
            bot,
            reqwest::Method::GET,
            "/api/v1/endpoints?limit=100",
            None,
        )
        .await,
        200,
    )
    .await;
    v["data"].as_array().expect("data").clone()
}

/// The default endpoint's id: `ep_` and the chatbot id's 26 characters.
pub fn default_id(bot: &Bot) -> String {
    format!("ep_{}", bot.id.trim_start_matches("cb_"))
}

/// Runs statements on the store's database directly (the `deliveries`
/// rows routing will write, a 410 recorded).
pub async fn sql(app: &TestApp, statements: &[String]) {
    match &app.database {
        Database::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).expect("open the SQLite file");
            for s in statements {
                c.execute_batch(s).expect(s);
            }
        }
        Database::Postgres(url) => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
            for s in statements {
                sqlx::query(s).execute(&mut c).await.expect(s);
            }
        }
    }
}

/// One number a query counts.
pub async fn count(app: &TestApp, q: &str) -> i64 {
    match &app.database {
        Database::Sqlite(path) => {
            let c = rusqlite::Connection::open(path).expect("open the SQLite file");
            c.query_row(q, [], |r| r.get(0)).expect(q)
        }
        Database::Postgres(url) => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
            sqlx::query_scalar(q).fetch_one(&mut c).await.expect(q)
        }
    }
}
