//! The real binary as a child process: killed with SIGKILL it loses no
//! accepted click; on SIGTERM it finishes the attempt in flight and exits 0.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{attempt_header, click_ok, patch_bot, refusing_port, reusable_buttons, webhook_id};
use crate::helpers::{ADMIN_TOKEN, Answer, Receiver, TestApp};

/// `blockhook serve` on a SQLite file in `app.dir`, listening on `app.port`.
fn serve(app: &TestApp) -> Child {
    Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{}", app.port),
            "--database",
            &crate::helpers::database_url(app),
            "--admin-token",
            ADMIN_TOKEN,
            "--allow-private-webhooks",
            "--retry-min-delay",
            "100ms",
            "--retry-max-delay",
            "500ms",
            "--retry-max-attempts",
            "1000",
            "--delivery-timeout",
            "10s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start blockhook")
}

/// A handle on a fresh port and store (the test's), for a child process to serve.
async fn child_app() -> TestApp {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db_path, database) = match crate::helpers::current_store() {
        crate::helpers::StoreKind::Sqlite => {
            let p = dir.path().join("blockhook.db").display().to_string();
            (p.clone(), blockhook::config::Database::Sqlite(p))
        }
        crate::helpers::StoreKind::Postgres => {
            let u = crate::helpers::fresh_postgres_database().await;
            (u.clone(), blockhook::config::Database::Postgres(u))
        }
    };
    let port = refusing_port();
    let _ = rustls::crypto::ring::default_provider().install_default();
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

/// The child process, killed if a test ends early.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts the binary and waits until it answers `/healthz`.
async fn start(app: &TestApp) -> Server {
    let mut child = Server(serve(app));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = app.client.get(app.url("/healthz")).send().await;
        if r.is_ok_and(|r| r.status() == 200) {
            return child;
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("blockhook exited early: {status}");
        }
        assert!(Instant::now() < deadline, "blockhook did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for the child to exit, at most `bound`.
async fn exit_within(child: &mut Server, bound: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.0.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            panic!("blockhook did not exit within {bound:?}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

store_test! {
async fn sigkill_with_undelivered_clicks_loses_none() {
    let mut app = child_app().await;
    let mut child = start(&app).await;
    let down = format!("http://127.0.0.1:{}/hook", refusing_port());
    let bot = app.create_bot(&down).await;
    let mut convs = Vec::new();
    for _ in 0..10 {
        let conv = app.create_conv(&bot).await;
        let mid = reusable_buttons(&app, &bot, &conv).await;
        convs.push((conv, mid));
    }
    let clicks = convs.iter().map(|(conv, mid)| {
        let app = &app;
        async move {
            for _ in 0..10 {
                click_ok(app, conv, mid).await;
            }
        }
    });
    futures_util::future::join_all(clicks).await;
    let accepted: HashSet<String> = app
        .events(&bot)
        .await
        .iter()
        .map(|e| e["event_id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(accepted.len(), 100);

    child.0.kill().expect("SIGKILL");
    child.0.wait().expect("reaped");

    let mut rx = Receiver::start().await;
    app.port = refusing_port();
    app.address = format!("http://127.0.0.1:{}", app.port);
    let child = start(&app).await;
    patch_bot(&app, &bot, json!({"webhook_url": rx.url})).await;
    let mut delivered = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while delivered.len() < accepted.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let r = rx
            .next(left)
            .await
            .unwrap_or_else(|| panic!("{} of 100 delivered", delivered.len()));
        delivered.insert(webhook_id(&r));
    }
    assert_eq!(delivered, accepted);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let done = app
            .events(&bot)
            .await
            .iter()
            .filter(|e| e["status"] == "succeeded")
            .count();
        if done == 100 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{done} of 100 recorded as succeeded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(child);
}
}

store_test! {
async fn sigterm_finishes_the_attempt_in_flight_and_exits_cleanly() {
    let app = child_app().await;
    let mut child = start(&app).await;
    let mut rx = Receiver::start().await;
    rx.set_default(Answer::status(200).delay(Duration::from_millis(1500)));
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    let first = rx.take(1, Duration::from_secs(5)).await.remove(0);

    // The attempt is in flight (the receiver answers in 1.5 s).
    let pid = i32::try_from(child.0.id()).expect("pid");
    // SAFETY: signals our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = exit_within(&mut child, Duration::from_secs(15)).await;
    assert_eq!(status.code(), Some(0), "clean exit: {status}");

    // Restarted, it finds the attempt recorded: nothing is sent again.
    let child = start(&app).await;
    let id = webhook_id(&first);
    let e = app.event(&bot, &id).await;
    assert_eq!(e["status"], "succeeded", "{e}");
    assert_eq!(e["attempts"].as_array().map(Vec::len), Some(1));
    assert!(rx.next(Duration::from_millis(700)).await.is_none());
    drop(child);
}
}

store_test! {
/// §15: a try that may have reached the receiver counts. The first try is
/// on the wire (the receiver got it and has not answered) when the server
/// is killed with SIGKILL; restarted, the server sends the delivery again
/// with the next attempt number, the same webhook-id and the same body
/// (on PostgreSQL once the lease of the killed server has run out).
async fn a_delivery_resent_after_sigkill_carries_the_next_attempt_number() {
    let mut app = child_app().await;
    let mut child = start(&app).await;
    let mut rx = Receiver::start().await;
    rx.set_default(Answer::status(200).delay(Duration::from_secs(120)));
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;
    click_ok(&app, &conv, &mid).await;
    let first = rx.take(1, Duration::from_secs(10)).await.remove(0);
    assert_eq!(attempt_header(&first), "1");

    child.0.kill().expect("SIGKILL");
    child.0.wait().expect("reaped");
    rx.set_default(Answer::status(200));
    app.port = refusing_port();
    app.address = format!("http://127.0.0.1:{}", app.port);
    let child = start(&app).await;
    let again = rx.take(1, Duration::from_secs(60)).await.remove(0);
    assert_eq!(attempt_header(&again), "2", "the cut try counts");
    assert_eq!(webhook_id(&again), webhook_id(&first));
    assert_eq!(again.body, first.body);
    drop(child);
}
}

store_test! {
/// §13: killed with SIGKILL while clicks are delivered to three endpoints
/// (one taking only `approve`), restarted, the server makes every matching
/// delivery of every accepted click (on PostgreSQL once the leases of the
/// killed server have run out).
async fn sigkill_with_three_endpoints_loses_no_delivery() {
    use crate::delivery::fanout::{add_endpoint, click, two_buttons};
    let mut app = child_app().await;
    let mut child = start(&app).await;
    let slow = || Answer::status(200).delay(Duration::from_millis(30));
    let main = Receiver::start().await;
    let all = Receiver::start().await;
    let yes = Receiver::start().await;
    for r in [&main, &all, &yes] {
        r.set_default(slow());
    }
    let bot = app.create_bot(&main.url).await;
    add_endpoint(&app, &bot, &all.url, None, None, true).await;
    add_endpoint(&app, &bot, &yes.url, Some(json!({"action_id": ["approve"]})), None, true).await;
    let mut convs = Vec::new();
    for _ in 0..6 {
        let conv = app.create_conv(&bot).await;
        let mid = two_buttons(&app, &bot, &conv).await;
        convs.push((conv, mid));
    }
    let clicks = convs.iter().map(|(conv, mid)| {
        let app = &app;
        async move {
            for i in 0..10 {
                let action = if i % 2 == 0 { "approve" } else { "reject" };
                click(app, conv, mid, action).await;
            }
        }
    });
    futures_util::future::join_all(clicks).await;
    child.0.kill().expect("SIGKILL");
    child.0.wait().expect("reaped");

    app.port = refusing_port();
    app.address = format!("http://127.0.0.1:{}", app.port);
    let child = start(&app).await;
    let events = app.events(&bot).await;
    assert_eq!(events.len(), 60, "every click was accepted");
    let every: HashSet<String> = events.iter().map(|e| e["event_id"].as_str().expect("id").to_string()).collect();
    let approvals: HashSet<String> = events.iter()
        .filter(|e| e["payload"]["action_id"] == "approve" || e["action_id"] == "approve")
        .map(|e| e["event_id"].as_str().expect("id").to_string()).collect();
    let deadline = Instant::now() + Duration::from_secs(100);
    loop {
        let got = |r: &Receiver| -> HashSet<String> { r.all().iter().map(webhook_id).collect() };
        let (m, a, y) = (got(&main), got(&all), got(&yes));
        let y_expected: HashSet<String> = every.iter()
            .filter(|id| all.all().iter().any(|r| &webhook_id(r) == *id && r.json()["action_id"] == "approve"))
            .cloned().collect();
        if m == every && a == every && !y.is_empty() && y == y_expected && y_expected.len() == 30 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "default {} / all {} / approve {} (expected {}) of 60",
            m.len(), a.len(), y.len(), y_expected.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = approvals;
    drop(child);
}
}

/// (comm, nice) of every thread of process `pid`.
fn threads_of(pid: u32) -> Vec<(u32, String, i32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let t = t.expect("task");
        let tid: u32 = t.file_name().to_string_lossy().parse().expect("tid");
        let comm = std::fs::read_to_string(t.path().join("comm")).expect("comm");
        let stat = std::fs::read_to_string(t.path().join("stat")).expect("stat");
        // Fields after the parenthesised name: state is the 3rd field of
        // the line, nice the 19th.
        let rest = &stat[stat.rfind(')').expect("comm end") + 2..];
        let nice: i32 = rest
            .split(' ')
            .nth(16)
            .expect("nice")
            .parse()
            .expect("nice value");
        out.push((tid, comm.trim().to_string(), nice));
    }
    out
}

/// SQLite only: the store's own threads (PostgreSQL has none).
#[actix_web::test]
async fn the_store_threads_run_before_the_http_workers_and_the_deliveries() {
    let app = child_app().await;
    let server = start(&app).await;
    let pid = server.0.id();
    let threads = threads_of(pid);
    let store: Vec<i32> = threads
        .iter()
        .filter(|(_, c, _)| c.starts_with("blockhook-sqlit"))
        .map(|t| t.2)
        .collect();
    assert_eq!(store.len(), 3, "writer, syncer, checkpointer: {threads:?}");
    assert!(store.iter().all(|n| *n == store[0]), "{threads:?}");
    let lowered = (store[0] + 5).min(19);
    let main = threads.iter().find(|t| t.0 == pid).expect("main thread");
    assert_eq!(main.2, lowered, "the delivery runtime yields: {threads:?}");
    let workers: Vec<_> = threads
        .iter()
        .filter(|(_, c, _)| c.starts_with("actix-rt"))
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        workers.len(),
        cores.saturating_sub(1).max(1),
        "one HTTP worker per core but one: {threads:?}"
    );
    assert!(
        workers.iter().all(|t| t.2 == lowered),
        "the HTTP workers yield: {threads:?}"
    );
}
