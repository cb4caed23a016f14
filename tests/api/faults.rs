//! Contract §15 over HTTP, with the faults injected for real: a child
//! `blockhook` under a low `ulimit -n` held by stalled uploads, SIGTERM
//! during a held ask and during a click load, a body that never arrives.

mod cancel;
mod shutdown;
mod slow;

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::helpers::{ADMIN_TOKEN, TestApp};

/// A handle on a fresh port and store for a child process to serve.
pub async fn child_app() -> TestApp {
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
    let port = crate::delivery::refusing_port();
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

/// The child process (killed if a test ends early) and its stderr file.
pub struct Server {
    pub child: tokio::process::Child,
    pub stderr: std::path::PathBuf,
}

impl Server {
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id().expect("running")).expect("pid")
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signals our own child process.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for the exit, at most `bound`.
    pub async fn exit_within(&mut self, bound: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(bound, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("blockhook did not exit within {bound:?}"))
            .expect("wait")
    }
}

/// Starts `blockhook serve` on `app`'s port and store, under `ulimit -n
/// nofile` when given, and waits until it answers `/healthz`.
pub async fn start(app: &TestApp, nofile: Option<u32>, extra: &[&str]) -> Server {
    let bin = env!("CARGO_BIN_EXE_blockhook");
    let mut args: Vec<String> = [
        "serve",
        "--addr",
        &format!("127.0.0.1:{}", app.port),
        "--database",
        &crate::helpers::database_url(app),
        "--admin-token",
        ADMIN_TOKEN,
        "--allow-private-webhooks",
        "--limit-visitor",
        "off",
        "--limit-api-key",
        "off",
        "--retry-min-delay",
        "100ms",
        "--retry-max-delay",
        "500ms",
        "--retry-max-attempts",
        "1000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut cmd = match nofile {
        // The limit is set for the process and its hard limit with it, so
        // the server cannot raise it back.
        Some(n) => {
            let mut c = tokio::process::Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(bin)
                .args(&args);
            c
        }
        None => {
            let mut c = tokio::process::Command::new(bin);
            c.args(&args);
            c
        }
    };
    let stderr = app
        .dir
        .path()
        .join(format!("stderr-{}.log", crate::delivery::refusing_port()));
    let file = std::fs::File::create(&stderr).expect("stderr file");
    let child = cmd
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .kill_on_drop(true)
        .spawn()
        .expect("start blockhook");
    let mut server = Server { child, stderr };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = app.client.get(app.url("/healthz")).send().await;
        if r.is_ok_and(|r| r.status() == 200) {
            return server;
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("blockhook exited early: {status}: {}", server.stderr_text());
        }
        assert!(Instant::now() < deadline, "blockhook did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
