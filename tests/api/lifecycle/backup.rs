//! `blockhook backup`: the real binary copies a SQLite store while the real
//! server writes to it; a server started on the copy sees everything
//! committed before the backup began.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{event_ids, reusable};
use crate::helpers::{ADMIN_TOKEN, Bot, Conv, Receiver, TestApp};

/// The child process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A handle for a server on the SQLite file `db` (the child serves it).
fn handle(dir: &tempfile::TempDir, db: &str) -> TestApp {
    let port = crate::delivery::refusing_port();
    let _ = rustls::crypto::ring::default_provider().install_default();
    TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client"),
        dir: tempfile::tempdir_in(dir.path()).expect("tempdir"),
        db_path: db.to_string(),
        database: blockhook::config::Database::Sqlite(db.to_string()),
    }
}

/// `blockhook serve` on `app.db_path`, answering `/healthz`.
async fn serve(app: &TestApp) -> Server {
    let mut child = Server(
        Command::new(env!("CARGO_BIN_EXE_blockhook"))
            .args([
                "serve",
                "--addr",
                &format!("127.0.0.1:{}", app.port),
                "--database",
                &format!("sqlite://{}", app.db_path),
                "--admin-token",
                ADMIN_TOKEN,
                "--allow-private-webhooks",
                // The checks read every event one by one, faster than the
                // default 200 requests a second of one API key.
                "--limit-api-key",
                "off",
                // Each visitor clicks in bursts (ten, then more while the
                // copy is made): more than the default 10 a second.
                "--limit-visitor",
                "off",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start blockhook"),
    );
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

/// Runs `blockhook backup ARGS`; its exit code and stderr.
fn backup(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .arg("backup")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run blockhook backup");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[actix_web::test]
async fn a_backup_of_a_running_server_restores_everything_committed_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("live.db").display().to_string();
    let live = handle(&dir, &db);
    let _server = serve(&live).await;
    let rx = Receiver::start().await;
    let bot: Bot = live.create_bot(&rx.url).await;
    let mut convs: Vec<(Conv, String)> = Vec::new();
    for _ in 0..20 {
        let conv = live.create_conv(&bot).await;
        let mid = reusable(&live, &bot, &conv).await;
        convs.push((conv, mid));
    }
    for (conv, mid) in &convs {
        for _ in 0..10 {
            assert_eq!(live.click(conv, mid, "b1", "approve").await.status(), 200);
        }
    }
    let before: Vec<String> = {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/api/v1/events?limit=100&cursor={c}"),
                None => "/api/v1/events?limit=100".to_string(),
            };
            let v: Value = live
                .get(&path, &bot.api_key)
                .await
                .json()
                .await
                .expect("json");
            for e in v["data"].as_array().expect("data") {
                all.push(e["event_id"].as_str().expect("id").to_string());
            }
            match v["page"]["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        all
    };
    assert_eq!(before.len(), 200);

    // Clicks keep coming while the copy is made.
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let traffic = {
        let live = handle_clone(&live);
        let convs = convs.clone();
        actix_web::rt::spawn(async move {
            let mut n = 0u64;
            loop {
                for (conv, mid) in &convs {
                    if stop_rx.try_recv().is_ok() {
                        return n;
                    }
                    if live.click(conv, mid, "b1", "approve").await.status() == 200 {
                        n += 1;
                    }
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let copy = dir.path().join("copy.db").display().to_string();
    let src = format!("sqlite://{db}");
    let (code, err) = actix_web::rt::task::spawn_blocking({
        let (copy, src) = (copy.clone(), src.clone());
        move || backup(&[&copy, "--database", &src])
    })
    .await
    .expect("backup");
    assert_eq!(code, 0, "backup failed: {err}");
    assert!(
        !err.contains('\r'),
        "no progress line when stderr is not a terminal: {err}"
    );
    let _ = stop_tx.send(());
    let during = traffic.await.expect("traffic");
    assert!(during > 0, "clicks were accepted while the backup ran");

    let check = rusqlite::Connection::open(&copy).expect("open the copy");
    let ok: String = check
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(ok, "ok");
    drop(check);

    // A server on the copy: the chatbot, its key, the conversations and
    // every event committed before the backup began.
    let restored = handle(&dir, &copy);
    let _server2 = serve(&restored).await;
    for id in &before {
        let r = restored
            .get(&format!("/api/v1/events/{id}"), &bot.api_key)
            .await;
        assert_eq!(r.status(), 200, "event {id} in the copy");
    }
    let (conv, mid) = &convs[0];
    let r = restored
        .get(
            &format!("/widget/v1/conversations/{}/messages", conv.id),
            &conv.token,
        )
        .await;
    assert_eq!(r.status(), 200, "the visitor token works on the copy");
    assert_eq!(
        restored.click(conv, mid, "b1", "approve").await.status(),
        200
    );
    assert!(event_ids(&restored, &bot).await.len() >= 100);
}

fn handle_clone(app: &TestApp) -> TestApp {
    TestApp {
        address: app.address.clone(),
        port: app.port,
        client: app.client.clone(),
        dir: tempfile::tempdir().expect("tempdir"),
        db_path: app.db_path.clone(),
        database: app.database.clone(),
    }
}

#[actix_web::test]
async fn backup_refuses_postgres_an_existing_file_and_a_missing_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, err) = backup(&["x.db", "--database", "postgres://u@127.0.0.1/db"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("pg_dump"), "{err}");
    let missing = dir.path().join("none.db").display().to_string();
    let out = dir.path().join("out.db").display().to_string();
    let (code, err) = backup(&[&out, "--database", &format!("sqlite://{missing}")]);
    assert_eq!(code, 66, "{err}");
    assert!(
        !std::path::Path::new(&missing).exists(),
        "no store is created"
    );
    std::fs::write(&out, b"keep").expect("write");
    let db = dir.path().join("live.db").display().to_string();
    rusqlite::Connection::open(&db)
        .and_then(|c| c.execute_batch("CREATE TABLE t (x)"))
        .expect("a store");
    let (code, err) = backup(&[&out, "--database", &format!("sqlite://{db}")]);
    assert_eq!(code, 73, "{err}");
    assert_eq!(std::fs::read(&out).expect("read"), b"keep", "left alone");
}
