//! The deployment of deploy/: nginx (Debian's package, with
//! deploy/nginx/blockhook.conf) in front of two `blockhook` processes on one
//! PostgreSQL database. Clicks, a live stream and a held ask go through
//! nginx while one instance is stopped and started again.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::delivery::refusing_port;
use crate::helpers::{ADMIN_TOKEN, Bot, Conv, Receiver, TestApp, fresh_postgres_database};
use crate::responses::sse::Sse;

/// A child process, killed if the test ends early.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn nginx_bin() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("nginx is installed (scripts/test installs Debian's package)")
}

/// `blockhook serve` on `port`, behind the proxy on loopback.
fn instance(port: u16, db: &str, public: &str, log: &Path) -> Proc {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    Proc(
        Command::new(env!("CARGO_BIN_EXE_blockhook"))
            .args([
                "serve",
                "--addr",
                &format!("127.0.0.1:{port}"),
                "--database",
                db,
                "--public-url",
                public,
                "--admin-token",
                ADMIN_TOKEN,
                "--allow-private-webhooks",
                "--trusted-proxy",
                "127.0.0.1/32",
                "--limit-conversations",
                "1/min",
                // One visitor clicks in bursts through the balancer; the
                // per-visitor limit is not what this test is about.
                "--limit-visitor",
                "off",
                "--log-format",
                "json",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start blockhook"),
    )
}

async fn wait_healthy(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            return;
        }
        assert!(Instant::now() < deadline, "{base} never became healthy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// deploy/nginx/blockhook.conf with the test's ports, inside a main
/// configuration that keeps every file in `dir`.
fn nginx_config(dir: &Path, listen: u16, a: u16, b: u16) -> PathBuf {
    let site = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/nginx/blockhook.conf"
    ))
    .expect("deploy/nginx/blockhook.conf");
    for s in [
        "server 127.0.0.1:8081",
        "server 127.0.0.1:8082",
        "listen 80;",
    ] {
        assert!(site.contains(s), "the shipped configuration has `{s}`");
    }
    let site = site
        .replace("server 127.0.0.1:8081", &format!("server 127.0.0.1:{a}"))
        .replace("server 127.0.0.1:8082", &format!("server 127.0.0.1:{b}"))
        .replace("listen 80;", &format!("listen 127.0.0.1:{listen};"));
    let d = dir.display();
    let main = format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n{site}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, main).expect("write nginx.conf");
    path
}

/// A handle whose address is nginx's.
fn through(address: &str, port: u16, db: &str) -> TestApp {
    TestApp {
        address: address.to_string(),
        port,
        client: reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client"),
        dir: tempfile::tempdir().expect("tempdir"),
        db_path: db.to_string(),
        database: blockhook::config::Database::Postgres(db.to_string()),
    }
}

async fn clicks(app: &TestApp, conv: &Conv, mid: &str, n: usize) {
    for _ in 0..n {
        let r = app.click(conv, mid, "b1", "approve").await;
        assert_eq!(r.status(), 200, "click through nginx: {:?}", r.text().await);
    }
}

async fn widget_conversation(app: &TestApp, bot: &Bot, forwarded_for: &str) -> u16 {
    app.client
        .post(app.url(&format!("/widget/v1/chatbots/{}/conversations", bot.id)))
        .header("X-Forwarded-For", forwarded_for)
        .json(&json!({}))
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

#[actix_web::test]
async fn two_instances_behind_nginx_keep_serving_while_one_restarts() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = fresh_postgres_database().await;
    let (pa, pb, pn) = (refusing_port(), refusing_port(), refusing_port());
    let base = format!("http://127.0.0.1:{pn}");
    let log = dir.path().join("blockhook.log");
    let mut a = instance(pa, &db, &base, &log);
    let _b = instance(pb, &db, &base, &log);
    let conf = nginx_config(dir.path(), pn, pa, pb);
    let _nginx = Proc(
        Command::new(nginx_bin())
            .args(["-e", &dir.path().join("error.log").display().to_string()])
            .args([
                "-p",
                &dir.path().display().to_string(),
                "-c",
                &conf.display().to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx"),
    );
    let app = through(&base, pn, &db);
    wait_healthy(&app.client, &format!("http://127.0.0.1:{pa}")).await;
    wait_healthy(&app.client, &format!("http://127.0.0.1:{pb}")).await;
    wait_healthy(&app.client, &base).await;

    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let r = app
        .post("/api/v1/conversations", &bot.api_key, &json!({}))
        .await;
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.expect("json");
    let conv = Conv {
        id: v["conversation_id"].as_str().expect("id").into(),
        token: v["visitor_token"].as_str().expect("token").into(),
        visitor: v["visitor"].clone(),
    };
    // The live stream, through nginx, before anything happens.
    let mut stream = Sse::connect_at(&base, &app, &conv, None).await;
    let m = app.buttons(&bot, &conv, false).await;
    let mid = m["id"].as_str().expect("id").to_string();
    let seen = stream
        .until(Duration::from_secs(10), |e| {
            e.event == "message.created" && e.data["id"] == mid.as_str()
        })
        .await;
    assert!(!seen.is_empty());
    clicks(&app, &conv, &mid, 4).await;

    // One instance stops cleanly: nginx sends everything to the other.
    unsafe { libc::kill(a.0.id() as i32, libc::SIGTERM) };
    let status = a.0.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "a clean stop exits 0");
    clicks(&app, &conv, &mid, 4).await;
    // A held ask, answered by the visitor through nginx.
    let ask = {
        let (client, url, key) = (
            app.client.clone(),
            app.url(&format!("/api/v1/conversations/{}/ask", conv.id)),
            bot.api_key.clone(),
        );
        tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"message": "Deploy?", "timeout": "60s"}))
                .send()
                .await
                .expect("ask");
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        })
    };
    let asked = stream
        .until(Duration::from_secs(10), |e| {
            e.event == "message.created" && e.data["text"] == "Deploy?"
        })
        .await;
    let ask_mid = asked.last().expect("the ask's message").data["id"]
        .as_str()
        .expect("id")
        .to_string();

    // The instance comes back on its address while the ask is held.
    a = instance(pa, &db, &base, &log);
    wait_healthy(&app.client, &format!("http://127.0.0.1:{pa}")).await;
    let r = app.click(&conv, &ask_mid, "ask", "accept").await;
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let (status, body) = tokio::time::timeout(Duration::from_secs(20), ask)
        .await
        .expect("the ask is answered")
        .expect("join");
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(body.trim()).expect("json");
    assert_eq!(answer["answer"], "accepted", "{answer}");
    clicks(&app, &conv, &mid, 4).await;

    // Every click delivered (at least once, deduplicated by webhook-id).
    let mut ids = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ids.len() < 13 && Instant::now() < deadline {
        if let Some(r) = rx.next(Duration::from_secs(1)).await {
            ids.insert(r.header("webhook-id").expect("webhook-id").to_string());
        }
    }
    assert_eq!(ids.len(), 13, "12 clicks and the ask's answer");

    // X-Forwarded-For from the trusted proxy: each visitor address has its
    // own limit (one new conversation a minute per instance).
    let mut codes = Vec::new();
    for _ in 0..3 {
        codes.push(widget_conversation(&app, &bot, "203.0.113.7").await);
    }
    assert!(codes.contains(&429), "{codes:?}");
    assert_eq!(widget_conversation(&app, &bot, "203.0.113.8").await, 201);
    drop(a);
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!logs.contains(&bot.api_key), "an API key in the log");
}
