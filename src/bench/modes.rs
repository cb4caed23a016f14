//! The measurements: floor, closed loop, open loop, backlog, purge. Each
//! starts its own server processes (one, or `instances` on one PostgreSQL
//! database) on a fresh database and its own receiver.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::BenchArgs;
use super::child::Child;
use super::load;
use super::receiver::{Receiver, Tracker};
use super::report::ModeReport;
use super::server::{Meter, Preload, Server, memory_of, start_server, start_server_with, warm_up};

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
    pub(super) sqlite_template: tokio::sync::OnceCell<(PathBuf, f64)>,
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

    pub(super) fn warmup_clicks(&self, clicks: u64) -> u64 {
        self.warmup.unwrap_or((clicks / 10).clamp(200, 2_000))
    }

    /// Generous time for `n` deliveries to arrive.
    pub(super) fn delivery_timeout(n: u64) -> Duration {
        Duration::from_secs(60 + n / 200)
    }
}

fn bind() -> Result<TcpListener, String> {
    TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind the receiver: {e}"))
}

fn port(l: &TcpListener) -> Result<u16, String> {
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// The floor forwarder under the closed loop's load; `mode` names the run
/// (`floor` before the blockhook modes, `floor_after` after the closed
/// loop, `floor_3ep` for the forwarder that also sends each body to the
/// three-endpoint mode's two extra receivers, measured until they got all).
pub async fn floor(ctx: &Ctx, mode: &'static str, clicks: u64) -> Result<ModeReport, String> {
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let extra = match mode {
        "floor_3ep" => Some((
            super::extra::Counter::start()?,
            super::extra::Counter::start()?,
        )),
        _ => None,
    };
    let mut args: Vec<String> = ["bench-floor", "--target", &receiver.url]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some((all, half)) = &extra {
        args.extend(["--also", &all.url, "--also-approve", &half.url].map(String::from));
    }
    let log = ctx.dir.join(format!("{mode}.log"));
    let child = Child::spawn(&ctx.own_exe, &args, &log).await?;
    let result = async {
        child.wait_healthy(&ctx.client).await?;
        let targets = Arc::new(load::setup_floor(&child.base, ctx.conversations, &tracker)?);
        let pids = [child.pid.to_string()];
        let warm = warm_up(ctx, &targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let closed = load::closed_loop(&ctx.client, &targets, &tracker, clicks, ctx.concurrency);
        let (meter, sent) = metered(ctx, &pids, &tracker, clicks, closed).await;
        let accepted = warm + sent.accepted;
        let made = match &extra {
            Some((all, half)) => Some(
                super::extra::all_made(all, half, accepted, Ctx::delivery_timeout(accepted)).await,
            ),
            None => None,
        };
        let mut r = meter.report(mode, ctx, clicks, sent, tracker.snapshot());
        r.concurrency = Some(ctx.concurrency);
        if made.is_some() {
            r.endpoints = Some(3);
            r.endpoints_made = made;
        }
        Ok(r)
    }
    .await;
    child.stop().await;
    receiver.stop().await;
    if let Some((a, b)) = extra {
        a.stop().await;
        b.stop().await;
    }
    result
}

/// Closed loop: `clicks` clicks by `concurrency` workers; with
/// `endpoints` 3, the chatbot has two more endpoints (one filtered to
/// about half the clicks), and the run checks that each got its events.
pub async fn closed(
    ctx: &Ctx,
    clicks: u64,
    instances: usize,
    endpoints: usize,
) -> Result<ModeReport, String> {
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let server = start_server(ctx, "closed", instances, &receiver.url, &tracker).await?;
    let mut extra = None;
    let result = async {
        if endpoints > 1 {
            extra = Some(super::extra::add_two(&ctx.client, &server.base, &server.api_key).await?);
        }
        let warm = warm_up(ctx, &server.targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let (meter, sent) = metered_closed(ctx, &server, &tracker, clicks).await;
        let accepted = warm + sent.accepted;
        let mode = if extra.is_some() {
            "closed_3ep"
        } else {
            "closed"
        };
        let mut r = meter.report(mode, ctx, clicks, sent, tracker.snapshot());
        if let Some((all, half)) = &extra {
            let t0 = std::time::Instant::now();
            let made =
                super::extra::all_made(all, half, accepted, Ctx::delivery_timeout(accepted)).await;
            r.endpoints = Some(endpoints);
            r.endpoints_made = Some(made);
            r.endpoints_lag_s = Some(t0.elapsed().as_secs_f64());
            let (cpu, db) = meter.cpu_so_far();
            let per_click = |s: f64| s * 1e6 / r.accepted.max(1) as f64;
            r.endpoints_cpu_us_per_click = Some(per_click(cpu));
            r.endpoints_database_cpu_us_per_click = db.map(per_click);
        }
        r.preload = server.preloaded.map(|p| p.0);
        r.preload_s = server.preloaded.map(|p| p.1);
        r.concurrency = Some(ctx.concurrency);
        Ok(r)
    }
    .await;
    server.stop(ctx).await;
    receiver.stop().await;
    if let Some((a, b)) = extra {
        a.stop().await;
        b.stop().await;
    }
    result
}

/// Open loop: `rate` clicks per second for `duration`.
pub async fn open(
    ctx: &Ctx,
    rate: f64,
    duration: Duration,
    instances: usize,
) -> Result<ModeReport, String> {
    let clicks = ((rate * duration.as_secs_f64()).round() as u64).max(1);
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let server = start_server(ctx, "open", instances, &receiver.url, &tracker).await?;
    let result = async {
        warm_up(ctx, &server.targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let open = load::open_loop(&ctx.client, &server.targets, &tracker, rate, clicks);
        let (meter, sent) = metered(ctx, &server.pids, &tracker, clicks, open).await;
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
pub async fn backlog(ctx: &Ctx, clicks: u64, instances: usize) -> Result<ModeReport, String> {
    let tracker = Tracker::new(ctx.conversations);
    // Take a free port, then let it go: nothing listens there until later.
    let port = port(&bind()?)?;
    let url = format!("http://127.0.0.1:{port}/hook");
    let server = start_server(ctx, "backlog", instances, &url, &tracker).await?;
    let mut receiver = None;
    let result = async {
        let meter = Meter::start(&server.pids, ctx);
        let sent = load::closed_loop(
            &ctx.client,
            &server.targets,
            &tracker,
            clicks,
            ctx.concurrency,
        )
        .await;
        let queued_rss = memory_of(&server.pids, "VmRSS");
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

/// Held: the default endpoint's receiver is up and a second endpoint is
/// paused, so that every accepted click leaves a delivery waiting for it;
/// the server's RSS is read once `clicks` of them wait (the counterpart of
/// [`backlog`]'s waiting events).
pub async fn held(ctx: &Ctx, clicks: u64) -> Result<ModeReport, String> {
    let tracker = Tracker::new(ctx.conversations);
    let receiver = Receiver::start(bind()?, tracker.clone())?;
    let server = start_server(ctx, "held", 1, &receiver.url, &tracker).await?;
    let result = async {
        // Nothing listens on the paused endpoint's port: nothing is sent there.
        let port = port(&bind()?)?;
        let url = format!("http://127.0.0.1:{port}/held");
        load::add_endpoint(
            &ctx.client,
            &server.base,
            &server.api_key,
            &url,
            None,
            false,
        )
        .await?;
        let (meter, sent) = metered_closed(ctx, &server, &tracker, clicks).await;
        // The router runs at most every 20 ms: time for the last to be
        // routed and held.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let held_rss = memory_of(&server.pids, "VmRSS");
        let mut r = meter.report("held", ctx, clicks, sent, tracker.snapshot());
        r.concurrency = Some(ctx.concurrency);
        r.endpoints = Some(2);
        r.backlog_rss_mb = Some(held_rss);
        r.server_peak_rss_mb = r.server_peak_rss_mb.max(held_rss);
        Ok(r)
    }
    .await;
    server.stop(ctx).await;
    receiver.stop().await;
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
    let server = start_server_with(
        ctx,
        "purge",
        1,
        &receiver.url,
        &tracker,
        Some(preload),
        &extra,
    )
    .await?;
    let result = async {
        let preload_s = server.preloaded.map_or(0.0, |p| p.1);
        warm_up(ctx, &server.targets, &tracker, ctx.warmup_clicks(clicks)).await?;
        let pass_at = started + Duration::from_secs_f64(preload_s) + PURGE_AFTER;
        if Instant::now() > pass_at {
            eprintln!("bench: purge: the setup outlasted the wait; the pass began before the loop");
        }
        tokio::time::sleep_until(pass_at.into()).await;
        let open = load::open_loop(&ctx.client, &server.targets, &tracker, rate, clicks);
        let (meter, sent) = metered(ctx, &server.pids, &tracker, clicks, open).await;
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
        // The server logs JSON when its output is not a terminal.
        if let Some(found) = text.lines().find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            (v["message"] == "retention purge")
                .then(|| Some((v["conversations"].as_u64()?, v["seconds"].as_f64()?)))?
        }) {
            return Ok(found);
        }
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

/// `load` metered, then its deliveries awaited (nothing of it runs before
/// the meter starts).
async fn metered(
    ctx: &Ctx,
    pids: &[String],
    tracker: &Tracker,
    clicks: u64,
    load: impl std::future::Future<Output = load::Sent>,
) -> (Meter, load::Sent) {
    let meter = Meter::start(pids, ctx);
    let sent = load.await;
    tracker
        .wait_matched(sent.accepted, Ctx::delivery_timeout(clicks))
        .await;
    (meter, sent)
}

/// `clicks` clicks in a closed loop on `server`, metered and delivered.
async fn metered_closed(
    ctx: &Ctx,
    server: &Server,
    tracker: &Arc<Tracker>,
    clicks: u64,
) -> (Meter, load::Sent) {
    let closed = load::closed_loop(
        &ctx.client,
        &server.targets,
        tracker,
        clicks,
        ctx.concurrency,
    );
    metered(ctx, &server.pids, tracker, clicks, closed).await
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
