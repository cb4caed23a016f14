//! The process under test: `blockhook serve` (or the floor forwarder) as a
//! child, so that its CPU time and peak memory can be read from `/proc`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// A running child process and the base URL it listens on.
pub struct Child {
    proc: tokio::process::Child,
    pub pid: u32,
    pub base: String,
}

impl Child {
    /// Runs `exe` with `args`, its stderr appended to `log`, and waits for
    /// the `listening on http://…` line it prints once bound.
    pub async fn spawn(exe: &Path, args: &[String], log: &Path) -> Result<Self, String> {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let mut proc = Command::new(exe)
            .args(args)
            // The purge pass is logged at info: the purge mode reads it.
            .env("RUST_LOG", "warn,blockhook::lifecycle=info")
            // The load is one client clicking as fast as it can: the §10
            // limits would measure themselves. Set in the environment, not
            // as flags, so that a build from before the limits (which
            // knows no such flag) can be measured with `--server-exe`.
            .env("BLOCKHOOK_LIMIT_CONVERSATIONS", "off")
            .env("BLOCKHOOK_LIMIT_VISITOR", "off")
            .env("BLOCKHOOK_LIMIT_API_KEY", "off")
            .env("BLOCKHOOK_MAX_STREAMS_PER_VISITOR", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?;
        let pid = proc.id().ok_or("the server exited at once")?;
        let stdout = proc.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let find = async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    return rest.split_whitespace().next().map(str::to_string);
                }
            }
            None
        };
        let base = match tokio::time::timeout(Duration::from_secs(60), find).await {
            Ok(Some(base)) => base,
            _ => {
                let _ = proc.start_kill();
                let tail = std::fs::read_to_string(log).unwrap_or_default();
                return Err(format!(
                    "`{} {}` did not start; its log:\n{tail}",
                    exe.display(),
                    shown(args).join(" ")
                ));
            }
        };
        // Keep reading so that the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { proc, pid, base })
    }

    /// Waits until `GET {base}/healthz` answers 200.
    pub async fn wait_healthy(&self, client: &reqwest::Client) -> Result<(), String> {
        for _ in 0..500 {
            if let Ok(r) = client.get(format!("{}/healthz", self.base)).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(format!("{} never became healthy", self.base))
    }

    /// SIGTERM, then SIGKILL if it has not exited within the grace period.
    pub async fn stop(mut self) {
        if let Ok(pid) = i32::try_from(self.pid) {
            // SAFETY: signalling our own child by its pid.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(Duration::from_secs(20), self.proc.wait())
            .await
            .is_err()
        {
            let _ = self.proc.kill().await;
        }
    }
}

/// Arguments as they may be printed: a database URL's password and the
/// admin token masked.
fn shown(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut secret_next = false;
    for a in args {
        out.push(if secret_next {
            "***".to_string()
        } else if a.contains("://") {
            crate::config::redact_url(a)
        } else {
            a.clone()
        });
        secret_next = a == "--admin-token";
    }
    out
}

/// User plus system CPU seconds a process has used (`/proc/<pid>/stat`).
pub fn cpu_seconds(pid: &str) -> f64 {
    stat_cpu_seconds(pid, false)
}

/// As [`cpu_seconds`]; with `reaped`, plus what its children that ended
/// and were waited for used (`cutime`, `cstime`).
fn stat_cpu_seconds(pid: &str, reaped: bool) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces: fields are counted after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
        return 0.0;
    };
    // cutime and cstime are fields 16 and 17.
    let children = if reaped {
        ticks(13).unwrap_or(0.0) + ticks(14).unwrap_or(0.0)
    } else {
        0.0
    };
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (user + system + children) / hz
}

/// CPU seconds used by every process named `comm` (the PostgreSQL
/// server's processes, which are not our children), counting those that
/// ended since: a backend that exits is waited for by the postmaster, so
/// its CPU moves to the postmaster's children's figure instead of
/// vanishing from the sum (which could then fall).
pub fn cpu_seconds_of_all(comm: &str) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == comm)
        })
        .map(|pid| stat_cpu_seconds(&pid, true))
        .sum()
}

/// A memory figure of `/proc/<pid>/status` (`VmHWM` = peak RSS, `VmRSS`) in MB.
pub fn memory_mb(pid: &str, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key) && l[key.len()..].starts_with(':'))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// The 1-minute load average, to judge how quiet the machine was.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// A quiet administrative connection (no statement logs on stdout, where
/// the JSON report goes).
async fn admin(url: &str) -> Result<sqlx::PgConnection, String> {
    use sqlx::ConnectOptions;
    let shown = crate::config::redact_url(url);
    let opts: sqlx::postgres::PgConnectOptions = url.parse().map_err(|e: sqlx::Error| {
        format!("{shown}: {}", crate::config::redact_in(&e.to_string(), url))
    })?;
    opts.disable_statement_logging()
        .connect()
        .await
        .map_err(|e| {
            format!(
                "cannot connect to {shown}: {}",
                crate::config::redact_in(&e.to_string(), url)
            )
        })
}

/// A fresh, empty PostgreSQL database on the server of `url`; returns its URL.
pub async fn fresh_postgres(url: &str) -> Result<String, String> {
    let mut conn = admin(url).await?;
    let name = format!("blockhook_bench_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .map_err(|e| {
            format!(
                "cannot create a database on {}: {e}",
                crate::config::redact_url(url)
            )
        })?;
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let server = match base.rsplit_once('/') {
        Some((s, _)) if s.contains("://") && !s.ends_with('/') => s,
        _ => base,
    };
    Ok(format!("{server}/{name}{query}"))
}

/// Drops a database made by [`fresh_postgres`].
pub async fn drop_postgres(admin_url: &str, db_url: &str) {
    let name = db_url
        .split('?')
        .next()
        .and_then(|b| b.rsplit('/').next())
        .unwrap_or_default();
    if !name.starts_with("blockhook_bench_") {
        return;
    }
    if let Ok(mut conn) = admin(admin_url).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpu_of_a_child_that_ended_and_was_waited_for_counts_when_asked() {
        let me = std::process::id().to_string();
        let reaped = || super::stat_cpu_seconds(&me, true) - super::stat_cpu_seconds(&me, false);
        let before = reaped();
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh runs");
        assert!(status.success());
        let after = reaped();
        assert!(
            after - before >= 0.05,
            "children's CPU {before} s, then {after} s"
        );
    }

    #[test]
    fn printed_arguments_hold_no_credential() {
        let args: Vec<String> = [
            "serve",
            "--database",
            "postgres://app:hunter2@db:5432/x",
            "--admin-token",
            "adm_secret",
            "--addr",
            "127.0.0.1:0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let shown = super::shown(&args).join(" ");
        assert!(
            !shown.contains("hunter2") && !shown.contains("adm_secret"),
            "{shown}"
        );
        assert!(shown.contains("postgres://app:***@db:5432/x"), "{shown}");
        assert!(shown.contains("--addr 127.0.0.1:0"), "{shown}");
    }
}
