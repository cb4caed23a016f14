//! Slow clients (§15): a body that does not arrive within `--body-timeout`
//! is a 408 and the connection is closed; under a low `ulimit -n`, stalled
//! uploads cannot keep a health probe or a click from being served.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{child_app, start};
use crate::delivery::{reusable_buttons, webhook_id};
use crate::helpers::{Receiver, spawn_app_with};

/// Reads what the server sends until it closes the connection.
async fn read_to_close(s: &mut TcpStream, bound: Duration) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(bound, s.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .ok();
    String::from_utf8_lossy(&out).into_owned()
}

store_test! {
async fn a_body_that_stalls_is_408_and_the_connection_closed() {
    let app = spawn_app_with(|c| c.body_timeout = Duration::from_secs(1)).await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;

    let mut s = TcpStream::connect(("127.0.0.1", app.port)).await.expect("connect");
    let head = format!(
        "POST /widget/v1/messages/{mid}/clicks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"block_id\"",
        conv.token
    );
    s.write_all(head.as_bytes()).await.expect("write");
    let got = read_to_close(&mut s, Duration::from_secs(10)).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("request_timeout"), "{got}");
    assert!(got.to_ascii_lowercase().contains("connection: close"), "{got}");

    // Headers that never end: 408 from the head timeout (5 s).
    let mut s = TcpStream::connect(("127.0.0.1", app.port)).await.expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.expect("write");
    let got = read_to_close(&mut s, Duration::from_secs(15)).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");

    // Nothing was stored by the cut click.
    assert!(app.events(&bot).await.is_empty());
}
}

store_test! {
async fn stalled_uploads_under_a_low_fd_limit_do_not_keep_health_or_clicks_out() {
    // This process holds the client ends of the stalled uploads.
    raise_own_nofile(4096);
    let app = child_app().await;
    let server = start(&app, Some(256), &[]).await;
    let mut rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let mid = reusable_buttons(&app, &bot, &conv).await;

    // 400 uploads that send their head and a little of the body, then
    // stall: more than the 256 descriptors the server may open.
    let head = format!(
        "POST /widget/v1/messages/{mid}/clicks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{",
        conv.token
    );
    let mut stalled = Vec::new();
    for _ in 0..400 {
        let mut s = TcpStream::connect(("127.0.0.1", app.port)).await.expect("connect");
        s.write_all(head.as_bytes()).await.expect("write");
        stalled.push(s);
    }

    // A new connection is served within a second: a health probe, a click.
    let fresh = || {
        reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(1))
            .build()
            .expect("client")
    };
    let r = fresh()
        .get(app.url("/healthz"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("healthz within 1 s: {e}\n{}", server.stderr_text()));
    assert_eq!(r.status(), 200);
    let r = fresh()
        .post(app.url(&format!("/widget/v1/messages/{mid}/clicks")))
        .bearer_auth(&conv.token)
        .json(&serde_json::json!({"block_id": "b1", "action_id": "approve"}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("click within 1 s: {e}\n{}", server.stderr_text()));
    assert_eq!(r.status(), 200);

    // The accepted click is delivered.
    let got = rx.take(1, Duration::from_secs(20)).await;
    let events = app.events(&bot).await;
    assert_eq!(events.len(), 1);
    assert_eq!(Some(webhook_id(&got[0]).as_str()), events[0]["event_id"].as_str());

    // Room was made by closing stalled uploads, the oldest first.
    let mut closed = 0;
    for s in stalled.iter_mut().take(100) {
        let mut buf = [0u8; 64];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await {
            closed += 1;
        }
    }
    assert!(closed > 0, "no stalled upload was closed");
    let log = server.stderr_text();
    assert!(log.contains("connection cap reached"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(!log.contains("Too many open files"), "{log}");
}
}

/// Raises this process's soft open-file limit to at least `n` (within the
/// hard limit).
fn raise_own_nofile(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < n {
            lim.rlim_cur = n.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
