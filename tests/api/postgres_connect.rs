//! TLS to PostgreSQL: the URL's `sslmode` and `sslrootcert` decide, and the
//! server's own view (`pg_stat_ssl`) shows the connections encrypted. The
//! local cluster serves Debian's snakeoil certificate (`CN=localhost`).

use blockhook::config::Database;
use sqlx::Connection;

use crate::helpers::*;

const SNAKEOIL: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";

/// `url` with `key=value` added to its query.
fn with_param(url: &str, param: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

/// `url` on host `localhost` (the name the snakeoil certificate is for).
fn on_localhost(url: &str) -> String {
    url.replace("@127.0.0.1:", "@localhost:")
}

/// The connections to `url`'s database as the server sees them: how many,
/// and how many of them are encrypted.
async fn ssl_of_backends(url: &str) -> (i64, i64) {
    let path = url.split('?').next().unwrap_or_default();
    let db = path.rsplit('/').next().unwrap_or_default().to_string();
    let mut admin = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .expect("admin connection");
    sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE s.ssl)
         FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid WHERE a.datname = $1",
    )
    .bind(db)
    .fetch_one(&mut admin)
    .await
    .expect("pg_stat_ssl")
}

async fn click_through(app: &TestApp) {
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let r = app
        .click(&conv, msg["id"].as_str().unwrap(), "b1", "approve")
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        rx.take(1, std::time::Duration::from_secs(10)).await.len(),
        1
    );
}

/// `sslmode=require`: every connection of the instance is encrypted, and
/// the app works over them.
#[actix_web::test]
async fn sslmode_require_encrypts_every_connection() {
    let url = with_param(&fresh_postgres_database().await, "sslmode=require");
    let u = url.clone();
    let app = spawn_app_with(|c| c.database = Database::Postgres(u)).await;
    click_through(&app).await;
    let (all, encrypted) = ssl_of_backends(&url).await;
    assert!(all > 0, "the instance holds connections");
    assert_eq!(encrypted, all, "every connection is encrypted");
}

/// `sslmode=disable`: in the clear, as asked.
#[actix_web::test]
async fn sslmode_disable_stays_in_the_clear() {
    let url = with_param(&fresh_postgres_database().await, "sslmode=disable");
    let u = url.clone();
    let app = spawn_app_with(|c| c.database = Database::Postgres(u)).await;
    click_through(&app).await;
    let (all, encrypted) = ssl_of_backends(&url).await;
    assert!(all > 0);
    assert_eq!(encrypted, 0);
}

/// The public roots (Debian's bundle), without the snakeoil certificate
/// that Debian also keeps in the system's certificate folder.
const PUBLIC_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// `blockhook serve` on `url` trusting the public roots only, besides the
/// URL's `sslrootcert` (`empty` is an empty folder, in place of the
/// system's).
fn serve_trusting(url: &str, empty: &std::path::Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--database", url])
        .env("BLOCKHOOK_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("SSL_CERT_FILE", PUBLIC_ROOTS)
        .env("SSL_CERT_DIR", empty)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// `sslmode=verify-full` with the server's CA as `sslrootcert` and the
/// certificate's host name: verified (no other root is trusted) and
/// encrypted.
#[actix_web::test]
async fn verify_full_with_the_servers_ca_connects() {
    use tokio::io::AsyncBufReadExt;
    let url = with_param(
        &on_localhost(&fresh_postgres_database().await),
        &format!("sslmode=verify-full&sslrootcert={SNAKEOIL}"),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut child = serve_trusting(&url, dir.path()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the server starts")
        .unwrap()
        .unwrap_or_default();
    // The startup line is JSON off a terminal; its message names the address.
    assert!(first.contains("blockhook listening"), "{first}");
    let (all, encrypted) = ssl_of_backends(&url).await;
    assert!(all > 0);
    assert_eq!(encrypted, all);
    child.kill().await.unwrap();
}

/// `sslmode=verify-full` with no root that trusts the server's self-signed
/// certificate: the start fails, saying it was TLS and what to set, and
/// without the password.
#[actix_web::test]
async fn verify_full_without_a_trusted_root_fails_clearly() {
    let url = with_param(
        &on_localhost(&fresh_postgres_database().await),
        "sslmode=verify-full",
    );
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        serve_trusting(&url, dir.path()).output(),
    )
    .await
    .expect("the start fails at once")
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TLS to PostgreSQL failed (sslmode=verify-full)"),
        "{err}"
    );
    assert!(err.contains("sslrootcert"), "{err}");
    assert!(!err.contains(":postgres@"), "no password in {err}");
}

/// `sslmode=verify-full` against a host name the certificate is not for.
#[actix_web::test]
async fn verify_full_checks_the_host_name() {
    let url = with_param(
        &fresh_postgres_database().await,
        &format!("sslmode=verify-full&sslrootcert={SNAKEOIL}"),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir);
    config.database = Database::Postgres(url);
    let err = match blockhook::startup::Application::build(config).await {
        Ok(_) => panic!("a certificate for another name must not be accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("TLS to PostgreSQL failed (sslmode=verify-full)"),
        "{err}"
    );
}

/// `--database-pool`: an instance opens no more connections than asked,
/// plus the one it listens on, however many requests come at once.
#[actix_web::test]
async fn the_pool_holds_as_many_connections_as_configured() {
    let url = fresh_postgres_database().await;
    let u = url.clone();
    let app = spawn_app_with(|c| {
        c.database = Database::Postgres(u);
        c.database_pool = 2;
    })
    .await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let mut convs = Vec::new();
    for _ in 0..8 {
        let c = app.create_conv(&bot).await;
        let m = app.buttons(&bot, &c, true).await;
        convs.push((c, m["id"].as_str().unwrap().to_string()));
    }
    let codes = futures_util::future::join_all(
        convs
            .iter()
            .map(|(c, m)| async { app.click(c, m, "b1", "approve").await.status() }),
    )
    .await;
    assert!(codes.iter().all(|s| *s == 200), "{codes:?}");
    let (all, _) = ssl_of_backends(&url).await;
    assert!((1..=3).contains(&all), "{all} connections");
}

/// A start that cannot connect — a wrong password, or no server on the
/// port — says so without the URL's password, wherever the error quotes it.
#[actix_web::test]
async fn connection_errors_never_show_the_password() {
    const SECRET: &str = "n0t-the-Passw0rd";
    let url = fresh_postgres_database().await;
    let (user, host) = url.split_once('@').expect("a URL with credentials");
    let (user, _password) = user.rsplit_once(':').expect("a URL with a password");
    let wrong = format!("{user}:{SECRET}@{host}");
    assert!(wrong.contains(SECRET), "{wrong}");
    let nothing_there = wrong.replacen("127.0.0.1:5432", "127.0.0.1:1", 1);
    for url in [wrong, nothing_there] {
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(90),
            tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
                .args(["serve", "--addr", "127.0.0.1:0", "--database", &url])
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the start fails")
        .unwrap();
        assert!(!out.status.success());
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(all.contains("cannot open postgres://"), "{all}");
        assert!(all.contains(":***@"), "the URL is named, masked: {all}");
        assert!(!all.contains(SECRET), "no password in {all}");
    }
}

/// An instance on a fresh database (its URL), a receiver, and a
/// conversation of a chatbot that sends to it.
async fn on_a_fresh_database() -> (String, TestApp, Receiver, Bot, Conv) {
    let url = fresh_postgres_database().await;
    let u = url.clone();
    let app = spawn_app_with(|c| c.database = Database::Postgres(u)).await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    (url, app, rx, bot, conv)
}

/// The name of `url`'s database, and an administrator's connection.
async fn admin_of(url: &str) -> (String, sqlx::PgConnection) {
    let db = url.rsplit('/').next().unwrap_or_default().to_string();
    let admin = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .expect("admin connection");
    (db, admin)
}

/// A click on `msg`'s button is accepted and its event delivered, and no
/// other event arrives within `quiet_ms`.
async fn accepted_and_delivered_once(
    app: &TestApp,
    rx: &mut Receiver,
    conv: &Conv,
    msg: &serde_json::Value,
    quiet_ms: u64,
) {
    let id = msg["id"].as_str().expect("a message id");
    let r = app.click(conv, id, "b1", "approve").await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let got = rx.take(1, std::time::Duration::from_secs(15)).await;
    let body: serde_json::Value = serde_json::from_slice(&got[0].body).expect("a JSON event");
    assert_eq!(body["message_id"], msg["id"], "{body}");
    assert!(
        rx.next(std::time::Duration::from_millis(quiet_ms))
            .await
            .is_none(),
        "each event delivered once"
    );
}

/// Connections cut under a running instance (a database restart, a
/// failover, an operator's `pg_terminate_backend`), including the ones its
/// claim loop and recorder keep: the next click is accepted, and both
/// clicks' events are delivered, each once.
#[actix_web::test]
async fn connections_cut_under_the_instance_lose_no_click() {
    let (url, app, mut rx, bot, conv) = on_a_fresh_database().await;
    let first = app.buttons(&bot, &conv, true).await;
    let second = app.buttons(&bot, &conv, true).await;
    let r = app
        .click(&conv, first["id"].as_str().unwrap(), "b1", "approve")
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        rx.take(1, std::time::Duration::from_secs(10)).await.len(),
        1
    );

    let (db, mut admin) = admin_of(&url).await;
    let cut: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = $1 AND application_name <> 'blockhook listener'",
    )
    .bind(&db)
    .fetch_one(&mut admin)
    .await
    .expect("terminate");
    assert!(
        cut >= 3,
        "the pool's, the claim loop's and the recorder's connections: {cut}"
    );

    accepted_and_delivered_once(&app, &mut rx, &conv, &second, 700).await;
}

/// A database that refuses connections (restarting, failing over, out of
/// connection slots): a click waits no longer than the pool's acquire
/// timeout, twice, and is answered 503 `store_unavailable` with
/// `Retry-After`, as problem JSON; nothing of it is stored. Once the
/// database takes connections again, the same click is accepted and its
/// event delivered, once.
#[actix_web::test]
async fn a_database_out_of_reach_answers_503_with_retry_after() {
    let (url, app, mut rx, bot, conv) = on_a_fresh_database().await;
    let msg = app.buttons(&bot, &conv, true).await;
    let msg_id = msg["id"].as_str().unwrap();

    let (db, mut admin) = admin_of(&url).await;
    sqlx::query(&format!("ALTER DATABASE \"{db}\" CONNECTION LIMIT 0"))
        .execute(&mut admin)
        .await
        .expect("connection limit");
    let cut: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1",
    )
    .bind(&db)
    .fetch_one(&mut admin)
    .await
    .expect("terminate");
    assert!(cut >= 1, "{cut}");

    let t = std::time::Instant::now();
    let r = app.click(&conv, msg_id, "b1", "approve").await;
    let waited = t.elapsed();
    assert_eq!(r.status(), 503, "{}", r.text().await.unwrap_or_default());
    assert_eq!(r.headers()["retry-after"], "1");
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let body: serde_json::Value = r.json().await.expect("problem JSON");
    assert_eq!(body["code"], "store_unavailable", "{body}");
    assert_eq!(body["status"], 503, "{body}");
    // Readiness says so too, as problem JSON (documented in the OpenAPI).
    let r = app.get("/readyz", "").await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let body: serde_json::Value = r.json().await.expect("problem JSON");
    assert_eq!(body["code"], "store_unavailable", "{body}");
    assert!(
        waited < std::time::Duration::from_secs(2),
        "answered after {waited:?}"
    );

    sqlx::query(&format!("ALTER DATABASE \"{db}\" CONNECTION LIMIT -1"))
        .execute(&mut admin)
        .await
        .expect("connection limit lifted");
    // The service comes back by itself: its circuit's probe finds the store
    // again (twice a second) without a restart.
    let back = std::time::Instant::now();
    loop {
        let r = app.get("/readyz", "").await;
        if r.status() == 200 {
            break;
        }
        assert!(
            back.elapsed() < std::time::Duration::from_secs(10),
            "not ready 10 s after the store came back: {}",
            r.status()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Once: the refused click left no event.
    accepted_and_delivered_once(&app, &mut rx, &conv, &msg, 1500).await;
    let mut store = sqlx::PgConnection::connect(&url)
        .await
        .expect("a connection to the store");
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
        .fetch_one(&mut store)
        .await
        .expect("events");
    assert_eq!(events, 1, "only the accepted click is stored");
}

/// A click batch whose write fails inside its transaction (here every new
/// event is refused by a constraint) leaves no connection in that
/// transaction: the batches' connection is closed, not handed back, and
/// once the fault is gone the same click is accepted on a new one (its
/// statements prepared again) and delivered once, nothing of the failed
/// attempt stored.
#[actix_web::test]
async fn a_batch_that_fails_in_its_transaction_leaves_no_connection_in_it() {
    let (url, app, mut rx, bot, conv) = on_a_fresh_database().await;
    let warm = app.buttons(&bot, &conv, true).await;
    let msg = app.buttons(&bot, &conv, true).await;
    let msg_id = msg["id"].as_str().unwrap();
    // A first click prepares the batch's statements on its connection.
    let r = app
        .click(&conv, warm["id"].as_str().unwrap(), "b1", "approve")
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        rx.take(1, std::time::Duration::from_secs(10)).await.len(),
        1
    );

    let mut owner = sqlx::PgConnection::connect(&url).await.expect("owner");
    sqlx::query("ALTER TABLE events ADD CONSTRAINT refuse_all CHECK (false) NOT VALID")
        .execute(&mut owner)
        .await
        .expect("constraint");
    let r = app.click(&conv, msg_id, "b1", "approve").await;
    assert!(r.status().is_server_error(), "{}", r.status());

    let (db, mut admin) = admin_of(&url).await;
    let mut open: i64 = -1;
    for _ in 0..50 {
        open = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = $1 AND state LIKE 'idle in transaction%'",
        )
        .bind(&db)
        .fetch_one(&mut admin)
        .await
        .expect("pg_stat_activity");
        if open == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(open, 0, "connections left in a transaction");

    sqlx::query("ALTER TABLE events DROP CONSTRAINT refuse_all")
        .execute(&mut owner)
        .await
        .expect("drop constraint");
    accepted_and_delivered_once(&app, &mut rx, &conv, &msg, 700).await;
    assert_eq!(
        app.events(&bot).await.len(),
        2,
        "nothing of the failed click"
    );
}
