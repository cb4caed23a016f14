//! The four measurements: floor, closed loop, open loop, backlog. Each
//! starts its own server process on a fresh database and its own receiver.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::BenchArgs;
use super::child::{self, Child};
use super::load::{self, Sent, Target};
use super::receiver::{Arrivals, Receiver, Tracker};
use super::report::{ModeReport, Percentiles};

pub struct Ctx {
    pub dir: PathBuf,
    pub admin_token: String,
    pub client: reqwest::Client,
    /// The server PostgreSQL databases are made on, if not SQLite.
    pub postgres: Option<String>,
    pub db_label: &'static str,
    pub conversations: usize,
    pub concurrency: usize,
    pub warmup: Option<u64>,
    /// Conversations preloaded into each mode's store (`--preload`).
    pub preload: u64,
    /// On SQLite, the store `--preload` filled once, copied for each mode,
    /// and the seconds the fill took.
    sqlite_template: tokio::sync::OnceCell<(PathBuf, f64)>,
    /// This binary: the floor forwarder.
    pub own_exe: PathBuf,
    /// The blockhook binary measured (this one unless told otherwise).
    pub server_exe: PathBuf,
}

impl Ctx {
    pub fn new(a: &BenchArgs, dir: PathBuf) -> Result<Self, String> {
        let postgres = match a.database.as_str() {
            "sqlite" => None,
            u if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Some(u.to_string())
            }
            other => {
                return Err(format!(
                    "--database must be `sqlite` or postgres://…, got `{other}`"
                ));
            }
        };
        let conversations = a.conversations.max(a.concurrency);
        let own_exe = std::env::current_exe().map_err(|e| e.to_string())?;
        Ok(Self {
            server_exe: a.server_exe.clone().unwrap_or_else(|| own_exe.clone()),
            own_exe,
            dir,
            admin_token: crate::domain::ids::new_secret("adm"),
            client: load::client(conversations + 16)?,
            db_label: if postgres.is_some() {
                "postgres"
            } else {
                "sqlite"
            },
            postgres,
            conversations,
            concurrency: a.concurrency,
            warmup: a.warmup,
            preload: a.preload,
            sqlite_template: tokio::sync::OnceCell::new(),
        })
    }

    fn warmup_clicks(&self, clicks: u64) -> u64 {
        self.warmup.unwrap_or((clicks / 10).clamp(200, 2_000))
    }

    /// Generous time for `n` deliveries to arrive.
    fn delivery_timeout(n: u64) -> Duration {
        Duration::from_secs(60 + n / 200)
    }
}

fn bind() -> Result<TcpListener, String> {
    TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind the receiver: {e}"))
}

fn port(l: &TcpListener) -> Result<u16, String> {
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// A blockhook server on a fresh database, its chatbot sending to
/// `webhook_url`, and one target per conversation.
struct Server {
    child: Child,
    pid: String,
    targets: Arc<Vec<Target>>,
    db_url: String,
    /// Conversations preloaded, and the seconds it took.
    preloaded: Option<(u64, f64)>,
    /// The server's log file.
    log: PathBuf,
}

/// History to put in a store before its server starts: conversations,
/// their retention, and when they were created (ms).
struct Preload {
    conversations: u64,
    retention_ms: i64,
    created_at: i64,
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

async fn start_server(
    ctx: &Ctx,
    mode: &str,
    webhook_url: &str,
    tracker: &Tracker,
) -> Result<Server, String> {
    start_server_with(ctx, mode, webhook_url, tracker, Preload::of(ctx), &[]).await
}

async fn start_server_with(
    ctx: &Ctx,
    mode: &str,
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
        // The load is one client clicking as fast as it can: the §10
        // limits would measure themselves.
        "--limit-conversations",
        "off",
        "--limit-visitor",
        "off",
        "--limit-api-key",
        "off",
        "--max-streams-per-visitor",
        "off",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().cloned());
    let log = ctx.dir.join(format!("{mode}.log"));
    let child = Child::spawn(&ctx.server_exe, &args, &log).await?;
    child.wait_healthy(&ctx.client).await?;
    let targets = load::setup_blockhook(
        &ctx.client,
        &child.base,
        &ctx.admin_token,
        webhook_url,
        ctx.conversations,
        tracker,
    )
    .await?;
    Ok(Server {
        pid: child.pid.to_string(),
        child,
        targets: Arc::new(targets),
        db_url,
        preloaded,
        log,
    })
}

impl Server {
    async fn stop(self, ctx: &Ctx) {
        self.child.stop().await;
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
async fn warm_up(
    ctx: &Ctx,
    targets: &Arc<Vec<Target>>,
    tracker: &Arc<Tracker>,
    clicks: u64,
) -> Result<(), String> {
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
    Ok(())
}

/// CPU readings around a measured phase.
struct Meter {
    pid: String,
    server0: f64,
    own0: f64,
    /// The PostgreSQL server's CPU, when it is the database.
    db0: Option<f64>,
    t0: Instant,
}

const POSTGRES_COMM: &str = "postgres";

impl Meter {
    fn start(pid: &str, ctx: &Ctx) -> Self {
        Self {
            pid: pid.to_string(),
            server0: child::cpu_seconds(pid),
            own0: child::cpu_seconds("self"),
            db0: ctx
                .postgres
                .as_ref()
                .map(|_| child::cpu_seconds_of_all(POSTGRES_COMM)),
            t0: Instant::now(),
        }
    }

    fn report(
        &self,
        mode: &'static str,
        ctx: &Ctx,
        clicks: u64,
        sent: Sent,
        a: Arrivals,
    ) -> ModeReport {
        let server_cpu_s = child::cpu_seconds(&self.pid) - self.server0;
        let delivered_per_s = match (a.first, a.last) {
            (Some(f), Some(l)) if l > f => a.matched as f64 / (l - f).as_secs_f64(),
            _ => 0.0,
        };
        let floor = mode.starts_with("floor");
        ModeReport {
            mode,
            database: if floor { "none" } else { ctx.db_label },
            conversations: ctx.conversations,
            clicks,
            accepted: sent.accepted,
            delivered: a.matched,
            errors: sent.errors,
            unmatched: a.unmatched,
            duplicates: a.duplicates,
            accepted_per_s: sent.per_s(),
            delivered_per_s,
            e2e_ms: Percentiles::of(a.latencies_us),
            server_cpu_s,
            server_cpu_us_per_click: if sent.accepted > 0 {
                server_cpu_s * 1e6 / sent.accepted as f64
            } else {
                0.0
            },
            server_peak_rss_mb: child::memory_mb(&self.pid, "VmHWM"),
            bench_cpu_s: child::cpu_seconds("self") - self.own0,
            database_cpu_s: self
                .db0
                .filter(|_| !floor)
                .map(|db0| child::cpu_seconds_of_all(POSTGRES_COMM) - db0),
            elapsed_s: self.t0.elapsed().as_secs_f64(),
            load_average: child::load_average(),
            first_error: sent.first_error,
            ..ModeReport::default()
        }
    }
}

/// The same closed loop through the minimal forwarder.
/// The floor forwarder under the closed loop's load; `mode` names the run
/// (`floor` before the blockhook modes, `floor_after` after the closed loop).
pub async fn floor(ctx: &Ctx, mode: &'static str, clicks: u64) -> Result<ModeReport, String> {
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let args: Vec<String> = ["bench-floor", "--target", &receiver.url]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let log = ctx.dir.join(format!("{mode}.log"));
    let child = Child::spawn(&ctx.own_exe, &args, &log).await?;
    child.wait_healthy(&ctx.client).await?;
    let targets = Arc::new(load::setup_floor(&child.base, ctx.conversations, &tracker)?);
    let pid = child.pid.to_string();
    let result = async {
        warm_up(ctx, &targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let meter = Meter::start(&pid, ctx);
        let sent =
            load::closed_loop(&ctx.client, &targets, &tracker, clicks, ctx.concurrency).await;
        tracker
            .wait_matched(sent.accepted, Ctx::delivery_timeout(clicks))
            .await;
        let mut r = meter.report(mode, ctx, clicks, sent, tracker.snapshot());
        r.concurrency = Some(ctx.concurrency);
        Ok(r)
    }
    .await;
    child.stop().await;
    receiver.stop().await;
    result
}

/// Closed loop: `clicks` clicks by `concurrency` workers.
pub async fn closed(ctx: &Ctx, clicks: u64) -> Result<ModeReport, String> {
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let server = start_server(ctx, "closed", &receiver.url, &tracker).await?;
    let result = async {
        warm_up(ctx, &server.targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let meter = Meter::start(&server.pid, ctx);
        let sent = load::closed_loop(
            &ctx.client,
            &server.targets,
            &tracker,
            clicks,
            ctx.concurrency,
        )
        .await;
        tracker
            .wait_matched(sent.accepted, Ctx::delivery_timeout(clicks))
            .await;
        let mut r = meter.report("closed", ctx, clicks, sent, tracker.snapshot());
        r.preload = server.preloaded.map(|p| p.0);
        r.preload_s = server.preloaded.map(|p| p.1);
        r.concurrency = Some(ctx.concurrency);
        Ok(r)
    }
    .await;
    server.stop(ctx).await;
    receiver.stop().await;
    result
}

/// Open loop: `rate` clicks per second for `duration`.
pub async fn open(ctx: &Ctx, rate: f64, duration: Duration) -> Result<ModeReport, String> {
    let clicks = ((rate * duration.as_secs_f64()).round() as u64).max(1);
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let server = start_server(ctx, "open", &receiver.url, &tracker).await?;
    let result = async {
        warm_up(ctx, &server.targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let meter = Meter::start(&server.pid, ctx);
        let sent = load::open_loop(&ctx.client, &server.targets, &tracker, rate, clicks).await;
        tracker
            .wait_matched(sent.accepted, Ctx::delivery_timeout(clicks))
            .await;
        let mut r = meter.report("open", ctx, clicks, sent, tracker.snapshot());
        r.preload = server.preloaded.map(|p| p.0);
        r.preload_s = server.preloaded.map(|p| p.1);
        r.rate = Some(rate);
        Ok(r)
    }
    .await;
    server.stop(ctx).await;
    receiver.stop().await;
    result
}

/// Backlog: the receiver refuses connections while `clicks` clicks are
/// accepted, then comes up on the same port; the queue drains.
pub async fn backlog(ctx: &Ctx, clicks: u64) -> Result<ModeReport, String> {
    let tracker = Tracker::new(ctx.conversations);
    // Take a free port, then let it go: nothing listens there until later.
    let port = port(&bind()?)?;
    let url = format!("http://127.0.0.1:{port}/hook");
    let server = start_server(ctx, "backlog", &url, &tracker).await?;
    let mut receiver = None;
    let result = async {
        let meter = Meter::start(&server.pid, ctx);
        let sent = load::closed_loop(
            &ctx.client,
            &server.targets,
            &tracker,
            clicks,
            ctx.concurrency,
        )
        .await;
        let queued_rss = child::memory_mb(&server.pid, "VmRSS");
        let listener = TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| format!("cannot bring the receiver back on port {port}: {e}"))?;
        let up = Instant::now();
        receiver = Some(Receiver::start(listener, tracker.clone())?);
        tracker
            .wait_matched(sent.accepted, Ctx::delivery_timeout(clicks) * 2)
            .await;
        let a = tracker.snapshot();
        let resume = a
            .first
            .map(|f| f.saturating_duration_since(up).as_secs_f64());
        let mut r = meter.report("backlog", ctx, clicks, sent, a);
        r.preload = server.preloaded.map(|p| p.0);
        r.preload_s = server.preloaded.map(|p| p.1);
        r.concurrency = Some(ctx.concurrency);
        r.backlog_rss_mb = Some(queued_rss);
        // The kernel's VmHWM and VmRSS are kept apart per thread and can
        // disagree by a few pages; the peak is at least any RSS seen.
        r.server_peak_rss_mb = r.server_peak_rss_mb.max(queued_rss);
        r.resume_s = resume;
        Ok(r)
    }
    .await;
    server.stop(ctx).await;
    if let Some(r) = receiver {
        r.stop().await;
    }
    result
}

/// How long after its start the server runs its first purge pass: time
/// enough for the setup and the warm-up, so that the open loop sends
/// while the purge runs.
const PURGE_AFTER: Duration = Duration::from_secs(8);

/// Purge: the store holds `n` conversations past their retention (created
/// an hour ago, retention 1 s); the server's first purge pass deletes them
/// while an open loop clicks at `rate` for `duration`, from the start of
/// the pass. The purge rate is read from the server's log.
pub async fn purge(ctx: &Ctx, n: u64, rate: f64, duration: Duration) -> Result<ModeReport, String> {
    let clicks = ((rate * duration.as_secs_f64()).round() as u64).max(1);
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let preload = Preload {
        conversations: n,
        retention_ms: 1_000,
        created_at: crate::domain::time::now_ms() - 3_600_000,
    };
    let extra = vec![
        "--purge-interval".to_string(),
        format!("{}s", PURGE_AFTER.as_secs()),
    ];
    // The log names the pass; the server's clock starts just before it
    // binds, so the pass comes PURGE_AFTER after this.
    let started = Instant::now();
    let server =
        start_server_with(ctx, "purge", &receiver.url, &tracker, Some(preload), &extra).await?;
    let result = async {
        let preload_s = server.preloaded.map_or(0.0, |p| p.1);
        warm_up(ctx, &server.targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let pass_at = started + Duration::from_secs_f64(preload_s) + PURGE_AFTER;
        if Instant::now() > pass_at {
            eprintln!("bench: purge: the setup outlasted the wait; the pass began before the loop");
        }
        tokio::time::sleep_until(pass_at.into()).await;
        let meter = Meter::start(&server.pid, ctx);
        let sent = load::open_loop(&ctx.client, &server.targets, &tracker, rate, clicks).await;
        tracker
            .wait_matched(sent.accepted, Ctx::delivery_timeout(clicks))
            .await;
        let mut r = meter.report("purge", ctx, clicks, sent, tracker.snapshot());
        r.rate = Some(rate);
        r.preload = Some(n);
        r.preload_s = Some(preload_s);
        let (deleted, secs) = purge_logged(&server.log, Duration::from_secs(600)).await?;
        if deleted != n {
            return Err(format!("the purge deleted {deleted} of {n} conversations"));
        }
        r.purge_s = Some(secs);
        r.purge_per_s = Some(deleted as f64 / secs.max(1e-6));
        r.purge_overlap = Some((secs / duration.as_secs_f64()).min(1.0));
        Ok(r)
    }
    .await;
    server.stop(ctx).await;
    receiver.stop().await;
    result
}

/// Waits for the server's log line of a purge pass: conversations deleted
/// and the seconds it took.
async fn purge_logged(log: &std::path::Path, within: Duration) -> Result<(u64, f64), String> {
    let deadline = Instant::now() + within;
    loop {
        let text = strip_ansi(&std::fs::read_to_string(log).unwrap_or_default());
        if let Some(line) = text
            .lines()
            .find(|l| l.contains("retention purge") && l.contains("conversations="))
        {
            let field = |name: &str| -> Option<f64> {
                let rest = &line[line.find(&format!("{name}="))? + name.len() + 1..];
                rest.split_whitespace().next()?.parse().ok()
            };
            if let (Some(n), Some(s)) = (field("conversations"), field("seconds")) {
                return Ok((n as u64, s));
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no purge pass in {} within {within:?}",
                log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The text without its terminal colour sequences (`ESC [ … m`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_coloured_log_line_reads_as_plain_text() {
        let line = "\u{1b}[2mx\u{1b}[0m retention purge \u{1b}[3mconversations\u{1b}[0m\u{1b}[2m=\u{1b}[0m3000 \u{1b}[3mseconds\u{1b}[0m\u{1b}[2m=\u{1b}[0m4.75";
        assert_eq!(
            super::strip_ansi(line),
            "x retention purge conversations=3000 seconds=4.75"
        );
    }
}
