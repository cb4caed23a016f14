//! The servers a mode measures: one or more `blockhook serve` processes on
//! one fresh database, their CPU and memory read around the measured phase.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::check::Check;
use super::child::{self, Child};
use super::load::{self, Sent, Target};
use super::modes::Ctx;
use super::receiver::{Arrivals, Tracker};
use super::report::{ModeReport, Percentiles};

/// `instances` blockhook servers on one fresh database, their chatbot
/// sending to `webhook_url`, and one target per conversation (its click on
/// every instance).
pub struct Server {
    children: Vec<Child>,
    pub pids: Vec<String>,
    pub targets: Arc<Vec<Target>>,
    db_url: String,
    /// Conversations preloaded, and the seconds it took.
    pub preloaded: Option<(u64, f64)>,
    /// The first server's log file.
    pub log: PathBuf,
    /// The chatbot's API key, and the first server's base URL.
    pub api_key: String,
    pub base: String,
}

/// History to put in a store before its server starts: conversations,
/// their retention, and when they were created (ms).
pub struct Preload {
    pub conversations: u64,
    pub retention_ms: i64,
    pub created_at: i64,
}

impl Preload {
    /// `--preload`: conversations of today under the default retention.
    fn of(ctx: &Ctx) -> Option<Self> {
        (ctx.preload > 0).then(|| Preload {
            conversations: ctx.preload,
            retention_ms: 90 * 86_400_000,
            created_at: crate::domain::time::now_ms(),
        })
    }
}

pub async fn start_server(
    ctx: &Ctx,
    mode: &str,
    instances: usize,
    webhook_url: &str,
    tracker: &Tracker,
) -> Result<Server, String> {
    start_server_with(
        ctx,
        mode,
        instances,
        webhook_url,
        tracker,
        Preload::of(ctx),
        &[],
    )
    .await
}

pub async fn start_server_with(
    ctx: &Ctx,
    mode: &str,
    instances: usize,
    webhook_url: &str,
    tracker: &Tracker,
    preload: Option<Preload>,
    extra: &[String],
) -> Result<Server, String> {
    let db_url = match &ctx.postgres {
        Some(url) => child::fresh_postgres(url).await?,
        None => format!("sqlite://{}", ctx.dir.join(format!("{mode}.db")).display()),
    };
    let standard = preload
        .as_ref()
        .is_some_and(|p| p.retention_ms == 90 * 86_400_000);
    let preloaded = match preload {
        Some(p) if standard && ctx.postgres.is_none() => {
            let (template, s) = ctx
                .sqlite_template
                .get_or_try_init(|| async {
                    let path = ctx.dir.join("preload-template.db");
                    eprintln!("bench: preloading {} conversations", p.conversations);
                    let url = format!("sqlite://{}", path.display());
                    let s =
                        super::preload::fill(&url, p.conversations, p.retention_ms, p.created_at)
                            .await?;
                    eprintln!("bench: preloaded in {s:.1} s");
                    Ok::<_, String>((path, s))
                })
                .await?;
            let to = ctx.dir.join(format!("{mode}.db"));
            super::preload::copy_synced(template, &to)
                .await
                .map_err(|e| format!("copying the preloaded store: {e}"))?;
            Some((p.conversations, *s))
        }
        Some(p) => {
            eprintln!(
                "bench: {mode}: preloading {} conversations",
                p.conversations
            );
            let s = super::preload::fill(&db_url, p.conversations, p.retention_ms, p.created_at)
                .await?;
            eprintln!("bench: {mode}: preloaded in {s:.1} s");
            Some((p.conversations, s))
        }
        None => None,
    };
    let mut args: Vec<String> = [
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--database",
        &db_url,
        "--admin-token",
        &ctx.admin_token,
        "--allow-private-webhooks",
        // Only the backlog mode sees failures; let its retries come soon
        // and never give up.
        "--retry-min-delay",
        "50ms",
        "--retry-max-delay",
        "1s",
        "--retry-max-attempts",
        "1000000",
        // The §10 limits are off through the environment (see `Child`).
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().cloned());
    let log = ctx.dir.join(format!("{mode}.log"));
    let mut server = Server {
        children: Vec::new(),
        pids: Vec::new(),
        targets: Arc::new(Vec::new()),
        db_url,
        preloaded,
        log,
        api_key: String::new(),
        base: String::new(),
    };
    // One at a time: each runs the migrations (under PostgreSQL's advisory
    // lock) before it listens.
    for i in 0..instances.max(1) {
        let log = match i {
            0 => server.log.clone(),
            i => ctx.dir.join(format!("{mode}-{i}.log")),
        };
        let started = async {
            let child = Child::spawn(&ctx.server_exe, &args, &log).await?;
            child.wait_healthy(&ctx.client).await?;
            Ok::<_, String>(child)
        }
        .await;
        match started {
            Ok(child) => {
                server.pids.push(child.pid.to_string());
                server.children.push(child);
            }
            Err(e) => {
                server.stop(ctx).await;
                return Err(e);
            }
        }
    }
    let bases: Vec<String> = server.children.iter().map(|c| c.base.clone()).collect();
    match load::setup_blockhook(
        &ctx.client,
        &bases,
        &ctx.admin_token,
        webhook_url,
        ctx.conversations,
        tracker,
    )
    .await
    {
        Ok((targets, key)) => {
            server.targets = Arc::new(targets);
            server.api_key = key;
            server.base = bases.first().cloned().unwrap_or_default();
        }
        Err(e) => {
            server.stop(ctx).await;
            return Err(e);
        }
    }
    Ok(server)
}

impl Server {
    pub async fn stop(self, ctx: &Ctx) {
        futures_util::future::join_all(self.children.into_iter().map(Child::stop)).await;
        if let Some(admin) = &ctx.postgres {
            child::drop_postgres(admin, &self.db_url).await;
        } else if self.preloaded.is_some()
            && let Some(path) = self.db_url.strip_prefix("sqlite://")
        {
            // A preloaded store is gigabytes: the next mode makes its own.
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{path}{suffix}"));
            }
        }
    }
}

/// Closed-loop warm-up: connections, caches and the first pages of the
/// database are ready before anything is timed.
pub async fn warm_up(
    ctx: &Ctx,
    targets: &Arc<Vec<Target>>,
    tracker: &Arc<Tracker>,
    clicks: u64,
) -> Result<u64, String> {
    let sent = load::closed_loop(&ctx.client, targets, tracker, clicks, ctx.concurrency).await;
    if let Some(e) = sent.first_error {
        return Err(format!("warm-up clicks failed: {e}"));
    }
    if !tracker
        .wait_matched(sent.accepted, Ctx::delivery_timeout(sent.accepted))
        .await
    {
        return Err("warm-up clicks were not all delivered".into());
    }
    tracker.reset();
    Ok(sent.accepted)
}

/// CPU readings around a measured phase, of every server process.
pub struct Meter {
    pids: Vec<String>,
    server0: f64,
    own0: f64,
    /// The PostgreSQL server's CPU, when it is the database.
    db0: Option<f64>,
    t0: Instant,
}

const POSTGRES_COMM: &str = "postgres";

impl Meter {
    pub fn start(pids: &[String], ctx: &Ctx) -> Self {
        Self {
            pids: pids.to_vec(),
            server0: cpu_of(pids),
            own0: child::cpu_seconds("self"),
            db0: ctx
                .postgres
                .as_ref()
                .map(|_| child::cpu_seconds_of_all(POSTGRES_COMM)),
            t0: Instant::now(),
        }
    }

    /// The server's CPU seconds since the start, and PostgreSQL's.
    pub fn cpu_so_far(&self) -> (f64, Option<f64>) {
        (
            cpu_of(&self.pids) - self.server0,
            self.db0
                .map(|db0| child::cpu_seconds_of_all(POSTGRES_COMM) - db0),
        )
    }

    pub fn report(
        &self,
        mode: &'static str,
        ctx: &Ctx,
        clicks: u64,
        mut sent: Sent,
        a: Arrivals,
    ) -> ModeReport {
        let server_cpu_s = cpu_of(&self.pids) - self.server0;
        let delivered_per_s = match (a.first, a.last) {
            (Some(f), Some(l)) if l > f => a.matched as f64 / (l - f).as_secs_f64(),
            _ => 0.0,
        };
        let floor = mode.starts_with("floor");
        let check = Check::of(sent.accepted, &a);
        let mut r = ModeReport {
            mode,
            database: if floor { "none" } else { ctx.db_label },
            conversations: ctx.conversations,
            instances: self.pids.len(),
            clicks,
            accepted: sent.accepted,
            delivered: a.matched,
            errors: sent.errors,
            check,
            accepted_per_s: sent.per_s(),
            delivered_per_s,
            e2e_ms: Percentiles::of(a.latencies_us),
            accept_ms: Percentiles::of(std::mem::take(&mut sent.accept_us)),
            server_cpu_s,
            server_cpu_us_per_click: if sent.accepted > 0 {
                server_cpu_s * 1e6 / sent.accepted as f64
            } else {
                0.0
            },
            server_peak_rss_mb: memory_of(&self.pids, "VmHWM"),
            bench_cpu_s: child::cpu_seconds("self") - self.own0,
            database_cpu_s: self
                .db0
                .filter(|_| !floor)
                .map(|db0| child::cpu_seconds_of_all(POSTGRES_COMM) - db0),
            elapsed_s: self.t0.elapsed().as_secs_f64(),
            load_average: child::load_average(),
            endpoints: None,
            endpoints_made: None,
            endpoints_lag_s: None,
            first_error: sent.first_error,
            ..ModeReport::default()
        };
        r.consistent = r.consistent();
        r
    }
}

/// CPU seconds of the processes, summed.
fn cpu_of(pids: &[String]) -> f64 {
    pids.iter().map(|p| child::cpu_seconds(p)).sum()
}

/// A memory figure of the processes (`VmHWM`, `VmRSS`), summed, in MB.
pub fn memory_of(pids: &[String], key: &str) -> f64 {
    pids.iter().map(|p| child::memory_mb(p, key)).sum()
}
