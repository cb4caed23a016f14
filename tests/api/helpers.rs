//! Shared test harness: the real app on port 0 over a real SQLite file (or
//! PostgreSQL), and a real HTTP receiver that records what it got.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use blockhook::config::{Config, Database, ServeArgs};
use blockhook::startup::Application;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub const ADMIN_TOKEN: &str = "adm_test_token";

pub struct TestApp {
    pub address: String,
    pub port: u16,
    pub client: reqwest::Client,
    pub dir: tempfile::TempDir,
    /// The SQLite file's path, or the PostgreSQL database's URL.
    pub db_path: String,
    /// The store the app runs on, to start another instance on it.
    pub database: Database,
}

/// Default test configuration: a fresh SQLite file, loopback webhooks
/// allowed, fast retries.
pub fn test_config(dir: &tempfile::TempDir) -> Config {
    let mut args = ServeArgs::defaults_from_env().expect("defaults");
    args.addr = "127.0.0.1:0".into();
    args.database = format!("sqlite://{}", dir.path().join("blockhook.db").display());
    args.admin_token = Some(ADMIN_TOKEN.into());
    args.allow_private_webhooks = true;
    args.retry_min_delay = Duration::from_millis(100);
    args.retry_max_delay = Duration::from_millis(400);
    args.delivery_timeout = Duration::from_secs(2);
    // The §10 limits are off unless a test sets them (tests/api/public).
    let off = blockhook::limits::Rate::Off;
    args.limit_conversations = off;
    args.limit_visitor = off;
    args.limit_api_key = off;
    args.max_streams_per_visitor = blockhook::config::StreamCap(None);
    let mut config = Config::try_from(args).expect("config");
    // The test process's own threads keep their priority.
    config.store_first = false;
    config
}

/// A configuration tweak: retries between `min` and `max` apart.
pub fn retry_delays(min: Duration, max: Duration) -> impl FnOnce(&mut Config) {
    move |c| {
        c.retry_min_delay = min;
        c.retry_max_delay = max;
    }
}

/// The store a test runs on. Every store-sensitive test is written once
/// inside [`store_test!`], which runs it on each store in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

thread_local! {
    static STORE: std::cell::Cell<StoreKind> = const { std::cell::Cell::new(StoreKind::Sqlite) };
}

/// Selects the store of the apps this test thread spawns from now on.
pub fn use_store(kind: StoreKind) {
    STORE.with(|s| s.set(kind));
}

/// The store this test runs on.
pub fn current_store() -> StoreKind {
    STORE.with(|s| s.get())
}

/// Writes a test once and runs it on SQLite and on PostgreSQL: each
/// `async fn name() { … }` becomes a module `name` with the tests `sqlite`
/// and `postgres`. A PostgreSQL server that cannot be reached fails the
/// `postgres` half; it is never skipped.
#[macro_export]
macro_rules! store_test {
    ($(#[$meta:meta])* async fn $name:ident() $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run() $body

            $(#[$meta])*
            #[actix_web::test]
            async fn sqlite() {
                $crate::helpers::use_store($crate::helpers::StoreKind::Sqlite);
                run().await
            }

            $(#[$meta])*
            #[actix_web::test]
            async fn postgres() {
                $crate::helpers::use_store($crate::helpers::StoreKind::Postgres);
                run().await
            }
        }
    };
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Spawns the app with a tweaked configuration, on the test's store
/// ([`current_store`]): a fresh SQLite file or a fresh PostgreSQL database.
pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = test_config(&dir);
    if current_store() == StoreKind::Postgres {
        config.database = Database::Postgres(fresh_postgres_database().await);
    }
    tweak(&mut config);
    let database = config.database.clone();
    let db_path = match &config.database {
        Database::Sqlite(p) => p.clone(),
        Database::Postgres(u) => u.clone(),
    };
    let app = Application::build(config).await.expect("build app");
    let port = app.port();
    actix_web::rt::spawn(app.run_until_stopped());
    TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client"),
        dir,
        db_path,
        database,
    }
}

/// Opens the store `app` runs on, as a second process would.
pub async fn open_store(app: &TestApp) -> std::sync::Arc<dyn blockhook::store::Store> {
    let hub = std::sync::Arc::new(blockhook::hub::Hub::new());
    match &app.database {
        Database::Sqlite(p) => std::sync::Arc::new(
            blockhook::store::sqlite::SqliteStore::open(p, hub).expect("open SQLite store"),
        ),
        Database::Postgres(u) => std::sync::Arc::new(
            blockhook::store::postgres::PostgresStore::connect(u, hub)
                .await
                .expect("connect PostgreSQL store"),
        ),
    }
}

/// The URL `blockhook serve --database` takes for the store `app` runs on.
pub fn database_url(app: &TestApp) -> String {
    match &app.database {
        Database::Sqlite(p) => format!("sqlite://{p}"),
        Database::Postgres(u) => u.clone(),
    }
}

/// A created chatbot with its credentials.
#[derive(Debug, Clone)]
pub struct Bot {
    pub id: String,
    pub api_key: String,
    pub signing_secret: String,
    pub json: Value,
}

/// A visitor's conversation.
#[derive(Debug, Clone)]
pub struct Conv {
    pub id: String,
    pub token: String,
    pub visitor: Value,
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    pub async fn post(&self, path: &str, bearer: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .bearer_auth(bearer)
            .json(body)
            .send()
            .await
            .expect("request")
    }

    pub async fn get(&self, path: &str, bearer: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .bearer_auth(bearer)
            .send()
            .await
            .expect("request")
    }

    pub async fn create_bot(&self, webhook_url: &str) -> Bot {
        let r = self
            .post(
                "/api/v1/chatbots",
                ADMIN_TOKEN,
                &json!({"name": "Test bot", "webhook_url": webhook_url}),
            )
            .await;
        assert_eq!(r.status(), 201, "create chatbot");
        let v: Value = r.json().await.expect("json");
        Bot {
            id: v["id"].as_str().expect("id").into(),
            api_key: v["api_key"].as_str().expect("api_key").into(),
            signing_secret: v["signing_secret"].as_str().expect("secret").into(),
            json: v,
        }
    }

    pub async fn create_conv(&self, bot: &Bot) -> Conv {
        let r = self
            .post(
                &format!("/widget/v1/chatbots/{}/conversations", bot.id),
                "",
                &json!({}),
            )
            .await;
        assert_eq!(r.status(), 201, "create conversation");
        let v: Value = r.json().await.expect("json");
        Conv {
            id: v["conversation_id"].as_str().expect("cid").into(),
            token: v["visitor_token"].as_str().expect("token").into(),
            visitor: v["visitor"].clone(),
        }
    }

    /// Posts a bot message; returns the created message.
    pub async fn bot_message(&self, bot: &Bot, conv: &Conv, body: Value) -> Value {
        let r = self
            .post(
                &format!("/api/v1/conversations/{}/messages", conv.id),
                &bot.api_key,
                &body,
            )
            .await;
        let status = r.status();
        let v: Value = r.json().await.expect("json");
        assert_eq!(status, 201, "bot message: {v}");
        v
    }

    /// A message with one `actions` block `b1` of buttons `approve` and `deny`.
    pub async fn buttons(&self, bot: &Bot, conv: &Conv, disable_on_click: bool) -> Value {
        self.bot_message(
            bot,
            conv,
            json!({"text": "Approve?", "metadata": {"order_id": "4821"}, "blocks": [
                {"type": "actions", "block_id": "b1", "disable_on_click": disable_on_click, "elements": [
                    {"type": "button", "action_id": "approve", "label": "Approve", "value": "req_991", "style": "primary"},
                    {"type": "button", "action_id": "deny", "label": "Deny"},
                    {"type": "button", "action_id": "docs", "label": "Docs", "url": "https://example.com/docs"}]}]}),
        )
        .await
    }

    pub async fn click(
        &self,
        conv: &Conv,
        message_id: &str,
        block_id: &str,
        action_id: &str,
    ) -> reqwest::Response {
        self.post(
            &format!("/widget/v1/messages/{message_id}/clicks"),
            &conv.token,
            &json!({"block_id": block_id, "action_id": action_id}),
        )
        .await
    }

    pub async fn submit(
        &self,
        conv: &Conv,
        message_id: &str,
        form_id: &str,
        values: Value,
    ) -> reqwest::Response {
        self.post(
            &format!("/widget/v1/messages/{message_id}/forms/{form_id}"),
            &conv.token,
            &json!({"values": values}),
        )
        .await
    }

    /// The deliveries log of a chatbot.
    pub async fn events(&self, bot: &Bot) -> Vec<Value> {
        let v: Value = self
            .get("/api/v1/events?limit=100", &bot.api_key)
            .await
            .json()
            .await
            .expect("json");
        v["data"].as_array().cloned().unwrap_or_default()
    }

    pub async fn event(&self, bot: &Bot, event_id: &str) -> Value {
        self.get(&format!("/api/v1/events/{event_id}"), &bot.api_key)
            .await
            .json()
            .await
            .expect("json")
    }

    /// Polls the event until `pred` holds or `timeout` passes.
    pub async fn wait_event(
        &self,
        bot: &Bot,
        event_id: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let e = self.event(bot, event_id).await;
            if pred(&e) || tokio::time::Instant::now() > deadline {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// One request as the receiver got it.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
    pub at: std::time::Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("json body")
    }
}

/// What the receiver answers to one request.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
    /// Wait this long before answering (a hung receiver: a long delay).
    pub delay: Duration,
}

impl Answer {
    pub fn status(status: u16) -> Self {
        Self {
            status,
            body: String::new(),
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            body: body.to_string(),
            ..Self::status(status)
        }
    }
    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.into(), v.into()));
        self
    }
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
}

struct ReceiverState {
    script: Mutex<VecDeque<Answer>>,
    default: Mutex<Answer>,
    tx: mpsc::UnboundedSender<Received>,
    log: Mutex<Vec<Received>>,
}

/// A real webhook receiver on loopback. Answers from a script, then the
/// default (200).
pub struct Receiver {
    pub url: String,
    pub port: u16,
    state: Arc<ReceiverState>,
    rx: mpsc::UnboundedReceiver<Received>,
    handle: actix_web::dev::ServerHandle,
}

async fn receive(
    req: HttpRequest,
    body: web::Bytes,
    st: web::Data<Arc<ReceiverState>>,
) -> HttpResponse {
    let rec = Received {
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body,
        at: std::time::Instant::now(),
    };
    let answer = st
        .script
        .lock()
        .pop_front()
        .unwrap_or_else(|| st.default.lock().clone());
    st.log.lock().push(rec.clone());
    let _ = st.tx.send(rec);
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let mut r =
        HttpResponse::build(actix_web::http::StatusCode::from_u16(answer.status).expect("status"));
    for (k, v) in &answer.headers {
        r.insert_header((k.as_str(), v.as_str()));
    }
    if answer.body.is_empty() {
        r.finish()
    } else {
        r.content_type("application/json").body(answer.body)
    }
}

impl Receiver {
    pub async fn start() -> Receiver {
        Self::start_with(Vec::new()).await
    }

    pub async fn start_with(script: Vec<Answer>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (tx, rx) = mpsc::unbounded_channel();
        let state = Arc::new(ReceiverState {
            script: Mutex::new(script.into()),
            default: Mutex::new(Answer::status(200)),
            tx,
            log: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(web::Data::new(st.clone()))
                .app_data(web::PayloadConfig::new(4 * 1024 * 1024))
                .default_service(web::to(receive))
        })
        .workers(1)
        .listen(listener)
        .expect("listen")
        .run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            port,
            state,
            rx,
            handle,
        }
    }

    /// Sets what is answered once the script is used up.
    pub fn set_default(&self, a: Answer) {
        *self.state.default.lock() = a;
    }

    pub fn push(&self, a: Answer) {
        self.state.script.lock().push_back(a);
    }

    /// The next request, or `None` after `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<Received> {
        tokio::time::timeout(timeout, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Waits for `n` requests (panics after `timeout`).
    pub async fn take(&mut self, n: usize, timeout: Duration) -> Vec<Received> {
        let mut out = Vec::with_capacity(n);
        let deadline = tokio::time::Instant::now() + timeout;
        while out.len() < n {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(r) => out.push(r),
                None => panic!(
                    "receiver got {} of {n} requests within {timeout:?}",
                    out.len()
                ),
            }
        }
        out
    }

    pub fn all(&self) -> Vec<Received> {
        self.state.log.lock().clone()
    }

    pub async fn stop(&self) {
        self.handle.stop(false).await;
    }
}

/// Verifies a Standard Webhooks signature independently of the server's
/// code: HMAC-SHA256 with the decoded `whsec_` key over `id.ts.body`.
pub fn verify_signature(secret: &str, r: &Received) -> bool {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .expect("secret base64");
    let id = r.header("webhook-id").unwrap_or_default();
    let ts = r.header("webhook-timestamp").unwrap_or_default();
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&r.body);
    let expected = format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    r.header("webhook-signature")
        .unwrap_or_default()
        .split(' ')
        .any(|s| s == expected)
}

/// The PostgreSQL server the tests use (`BLOCKHOOK_TEST_POSTGRES_URL`, by
/// default the local server `.ci/run` starts). A missing server fails the
/// test: it is never skipped.
pub fn postgres_admin_url() -> String {
    std::env::var("BLOCKHOOK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres:postgres@127.0.0.1:5432/postgres".into())
}

/// Creates a fresh, empty database and returns its URL.
pub async fn fresh_postgres_database() -> String {
    use sqlx::Connection;
    let admin = postgres_admin_url();
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {admin} is required for this test: {e}"));
    let name = format!("bh_test_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    format!("{base}/{name}")
}

/// The app on a fresh PostgreSQL database.
pub async fn spawn_app_pg() -> TestApp {
    spawn_app_pg_with(|_| {}).await
}

pub async fn spawn_app_pg_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    use_store(StoreKind::Postgres);
    spawn_app_with(tweak).await
}
