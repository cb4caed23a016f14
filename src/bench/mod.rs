//! `blockhook bench`: the whole pipeline measured on loopback. The server
//! runs as a child process (`serve` on a fresh database) so that its CPU and
//! peak memory can be read from `/proc`; a receiver inside this process
//! answers 200 at once and times every arrival; the same load goes through a
//! minimal forwarder (the floor) so that every figure can be read as a share
//! of what this machine can do at all — measured before and, when the closed
//! loop runs, again after it, so that the share is of the two runs' mean.

pub mod check;
pub mod child;
pub mod extra;
pub mod floor;
pub mod load;
pub mod modes;
pub mod preload;
pub mod receiver;
pub mod report;
pub mod server;

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::domain::duration;
use report::ModeReport;

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Closed loop: clicks to measure (runs only the modes asked for; with
    /// no mode flag, all three run with their defaults).
    #[arg(long)]
    pub clicks: Option<u64>,
    /// Clicks in flight at once (closed loop, backlog, floor).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Open loop: clicks per second (default 1000 when --duration is given).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open loop: how long to send (default 10s when --rate is given).
    #[arg(long, value_parser = duration::parse)]
    pub duration: Option<Duration>,
    /// Backlog: clicks accepted while the receiver is down, then drained.
    #[arg(long)]
    pub backlog: Option<u64>,
    /// Conversations to click in (at least --concurrency).
    #[arg(long, default_value_t = 256)]
    pub conversations: usize,
    /// `sqlite` (a fresh file in a temporary folder) or `postgres://…` (a
    /// fresh database on that server for each mode, dropped after).
    #[arg(long, default_value = "sqlite")]
    pub database: String,
    /// Warm-up clicks before each measured phase (default: a tenth of the
    /// clicks, 200 to 2,000).
    #[arg(long)]
    pub warmup: Option<u64>,
    /// The blockhook binary to measure (default: this one), to compare two
    /// builds against the same floor.
    #[arg(long)]
    pub server_exe: Option<PathBuf>,
    /// Fill each mode's store with this many conversations' worth of
    /// history (messages, delivered events and their attempts, …) before
    /// its server starts, so that the clicks run against a full store.
    #[arg(long, default_value_t = 0)]
    pub preload: u64,
    /// Purge: this many conversations past their retention are in the
    /// store; the retention purge deletes them while an open loop (at
    /// --rate, for --duration) clicks.
    #[arg(long)]
    pub purge: Option<u64>,
    /// Server processes on the one database, behind the bench's own
    /// round-robin; 2 or more need a postgres:// database. A list (`1,2`)
    /// runs each mode once per count, so that the figures stand side by
    /// side.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub instances: Vec<usize>,
    /// Endpoints per chatbot in the closed loop: 1 (its default) or 3 (the
    /// default, one taking every event, one filtered to about half). A
    /// list (`1,3`) runs the closed loop once per count. 3 also runs
    /// `floor_3ep`, the floor forwarder also sending each click to two more
    /// receivers: what the extra sends cost with nothing stored. With
    /// `--backlog`, 3 also runs `held`: as many deliveries waiting for a
    /// paused endpoint.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub endpoints: Vec<usize>,
    /// Print one JSON object per line and mode instead of the table.
    #[arg(long, default_value_t = false)]
    pub json: bool,
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub floor_clicks: u64,
    pub closed: Option<u64>,
    pub open: Option<(f64, Duration)>,
    pub backlog: Option<u64>,
    pub purge: Option<u64>,
    /// Instance counts each mode runs with, in order.
    pub instances: Vec<usize>,
}

pub const DEFAULT_CLICKS: u64 = 100_000;
pub const DEFAULT_RATE: f64 = 1_000.0;
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_BACKLOG: u64 = 100_000;

impl Plan {
    pub fn of(a: &BenchArgs) -> Result<Self, String> {
        let purge = a.purge.is_some();
        let open_asked = !purge && (a.rate.is_some() || a.duration.is_some());
        let none = a.clicks.is_none() && !open_asked && a.backlog.is_none() && !purge;
        let rate = a.rate.unwrap_or(DEFAULT_RATE);
        let dur = a.duration.unwrap_or(DEFAULT_DURATION);
        if !(rate > 0.0 && rate.is_finite()) {
            return Err("--rate must be a positive number".into());
        }
        if a.concurrency == 0 || a.conversations == 0 {
            return Err("--concurrency and --conversations must be at least 1".into());
        }
        // The floor runs as many clicks as the closed loop, or no more than
        // the smallest mode asked for.
        let open_clicks = (rate * dur.as_secs_f64()).round().max(1.0) as u64;
        let smallest = [
            a.backlog,
            (open_asked || purge).then_some(open_clicks),
            Some(DEFAULT_CLICKS),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(DEFAULT_CLICKS);
        let plan = Plan {
            floor_clicks: a.clicks.unwrap_or(smallest),
            closed: if none { Some(DEFAULT_CLICKS) } else { a.clicks },
            open: (none || open_asked).then_some((rate, dur)),
            backlog: if none {
                Some(DEFAULT_BACKLOG)
            } else {
                a.backlog
            },
            purge: a.purge,
            instances: a.instances.clone(),
        };
        if plan.instances.is_empty() || plan.instances.contains(&0) {
            return Err("--instances must be at least 1".into());
        }
        let shared =
            a.database.starts_with("postgres://") || a.database.starts_with("postgresql://");
        if plan.instances.iter().any(|&n| n > 1) && !shared {
            return Err(
                "--instances 2 or more needs a database the instances share: --database postgres://…"
                    .into(),
            );
        }
        if plan.purge.is_some() && plan.instances != [1] {
            return Err("--purge measures one instance; leave out --instances".into());
        }
        if plan.floor_clicks == 0
            || plan.closed == Some(0)
            || plan.backlog == Some(0)
            || plan.purge == Some(0)
        {
            return Err("--clicks, --backlog and --purge must be at least 1".into());
        }
        Ok(plan)
    }
}

/// A temporary folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the plan and prints the reports. Exit code 0 when every accepted
/// click of every mode was delivered, 1 otherwise.
pub async fn run(args: BenchArgs) -> Result<i32, String> {
    let plan = Plan::of(&args)?;
    let dir = TempDir(std::env::temp_dir().join(format!(
        "blockhook-bench-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )));
    std::fs::create_dir_all(&dir.0).map_err(|e| format!("{}: {e}", dir.0.display()))?;
    let ctx = modes::Ctx::new(&args, dir.0.clone())?;

    let mut reports: Vec<ModeReport> = Vec::new();
    eprintln!("bench: floor, {} clicks", plan.floor_clicks);
    reports.push(modes::floor(&ctx, "floor", plan.floor_clicks).await?);
    if plan.closed.is_some() && args.endpoints.contains(&3) {
        // What the three-endpoint mode's extra sends cost with nothing
        // stored: the same forwarder, also sending to two more receivers.
        eprintln!(
            "bench: floor with two more receivers, {} clicks",
            plan.floor_clicks
        );
        reports.push(modes::floor(&ctx, "floor_3ep", plan.floor_clicks).await?);
    }
    let of = |n: usize| {
        if n > 1 {
            format!(", {n} instances")
        } else {
            String::new()
        }
    };
    if args.endpoints.iter().any(|&e| e != 1 && e != 3) {
        return Err("--endpoints takes 1 or 3".into());
    }
    if let Some(n) = plan.closed {
        for &i in &plan.instances {
            for &e in &args.endpoints {
                eprintln!(
                    "bench: closed loop, {n} clicks, concurrency {}{}, {e} endpoint(s)",
                    ctx.concurrency,
                    of(i)
                );
                reports.push(modes::closed(&ctx, n, i, e).await?);
            }
        }
        // The floor again, so that the closed loop stands between two
        // measures of the machine: a drift of its speed (other tenants,
        // page cache, CPU frequency) is averaged out instead of counted.
        eprintln!("bench: floor again, {} clicks", plan.floor_clicks);
        reports.push(modes::floor(&ctx, "floor_after", plan.floor_clicks).await?);
    }
    if let Some((rate, dur)) = plan.open {
        for &i in &plan.instances {
            eprintln!("bench: open loop, {rate}/s for {dur:?}{}", of(i));
            reports.push(modes::open(&ctx, rate, dur, i).await?);
        }
    }
    if let Some(n) = plan.backlog {
        for &i in &plan.instances {
            eprintln!("bench: backlog of {n} clicks{}", of(i));
            reports.push(modes::backlog(&ctx, n, i).await?);
        }
        if args.endpoints.contains(&3) {
            eprintln!("bench: {n} deliveries held for a paused endpoint");
            reports.push(modes::held(&ctx, n).await?);
        }
    }
    if let Some(n) = plan.purge {
        let rate = args.rate.unwrap_or(DEFAULT_RATE);
        let dur = args.duration.unwrap_or(DEFAULT_DURATION);
        eprintln!("bench: purge of {n} conversations, open loop {rate}/s for {dur:?}");
        reports.push(modes::purge(&ctx, n, rate, dur).await?);
    }

    let floor_runs: Vec<f64> = reports
        .iter()
        .filter(|r| r.mode == "floor" || r.mode == "floor_after")
        .map(ModeReport::throughput)
        .collect();
    let floor_per_s = floor_runs.iter().sum::<f64>() / floor_runs.len().max(1) as f64;
    let closed_per_s = |instances: usize| {
        reports
            .iter()
            .find(|r| r.mode == "closed" && r.instances == instances)
            .map(|r| r.delivered_per_s)
    };
    let closed_per_s: Vec<Option<f64>> =
        reports.iter().map(|r| closed_per_s(r.instances)).collect();
    for (r, closed) in reports.iter_mut().zip(closed_per_s) {
        r.set_floor(floor_per_s, &floor_runs);
        if r.mode == "backlog" && r.delivered_per_s > 0.0 {
            r.drain_vs_closed = closed.map(|c| r.delivered_per_s / c);
        }
    }
    report::sends_only_share(&mut reports);
    if args.json {
        for r in &reports {
            println!("{}", serde_json::to_string(r).map_err(|e| e.to_string())?);
        }
    } else {
        println!(
            "blockhook bench: {} database{}{}, {} conversations, {} cores, load average {:.2}",
            ctx.db_label,
            match plan.instances.as_slice() {
                [1] => String::new(),
                l => format!(
                    ", {} instances",
                    l.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            },
            if ctx.preload > 0 {
                format!(" preloaded with {} conversations", ctx.preload)
            } else {
                String::new()
            },
            ctx.conversations,
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            child::load_average()
        );
        print!("{}", report::table(&reports));
    }
    Ok(if reports.iter().all(ModeReport::consistent) {
        0
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        a: BenchArgs,
    }

    fn plan(args: &[&str]) -> Plan {
        let mut v = vec!["bench"];
        v.extend_from_slice(args);
        Plan::of(&P::parse_from(v).a).expect("plan")
    }

    #[test]
    fn no_mode_flag_runs_every_mode_with_defaults() {
        let p = plan(&[]);
        assert_eq!(p.closed, Some(DEFAULT_CLICKS));
        assert_eq!(p.open, Some((DEFAULT_RATE, DEFAULT_DURATION)));
        assert_eq!(p.backlog, Some(DEFAULT_BACKLOG));
    }

    #[test]
    fn mode_flags_pick_modes() {
        let p = plan(&["--clicks", "300"]);
        assert_eq!((p.closed, p.open, p.backlog), (Some(300), None, None));
        assert_eq!(p.floor_clicks, 300);
        let p = plan(&["--rate", "500"]);
        assert_eq!(p.open, Some((500.0, DEFAULT_DURATION)));
        assert_eq!(p.closed, None);
        assert_eq!(p.floor_clicks, 5_000);
        let p = plan(&["--backlog", "10", "--duration", "2s"]);
        assert_eq!(p.backlog, Some(10));
        assert_eq!(p.open, Some((DEFAULT_RATE, Duration::from_secs(2))));
        assert_eq!(p.floor_clicks, 10);
        assert_eq!(p.instances, vec![1]);
    }

    fn refused(args: &[&str]) -> String {
        let mut v = vec!["bench"];
        v.extend_from_slice(args);
        Plan::of(&P::parse_from(v).a).expect_err("refused")
    }

    #[test]
    fn several_instances_need_postgres() {
        let pg = "postgres://u:p@127.0.0.1/x";
        let p = plan(&["--instances", "1,2", "--database", pg]);
        assert_eq!(p.instances, vec![1, 2]);
        assert!(refused(&["--instances", "2"]).contains("postgres://"));
        assert!(refused(&["--instances", "0", "--database", pg]).contains("at least 1"));
        assert!(
            refused(&["--instances", "2", "--purge", "5", "--database", pg])
                .contains("one instance")
        );
    }
}
