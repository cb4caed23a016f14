//! The command line: `serve` (default), `bench`, `ask`, `mcp`, `backup`.

use std::io::IsTerminal;

use clap::{Parser, Subcommand};

use crate::config::{Config, LogFormat, ServeArgs};
use crate::startup::StartError;

#[derive(Parser)]
#[command(
    name = "blockhook",
    version,
    about = "Signed, durable webhook events for chat-widget buttons and forms",
    args_conflicts_with_subcommands = true,
    after_help = SERVE_HELP
)]
pub struct Cli {
    /// The flags of `serve`, the default command: `blockhook --addr …`
    /// is `blockhook serve --addr …`.
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the service (the default command).
    #[command(after_help = SERVE_HELP)]
    Serve(ServeArgs),
    /// Ask a person in a conversation and wait for the answer.
    #[command(after_help = crate::ask_cli::EXIT_CODES_HELP)]
    Ask(crate::ask_cli::AskArgs),
    /// Serve MCP tools (`ask`, `ask_start`, `ask_result`) over stdio for agents.
    Mcp(crate::mcp::McpArgs),
    /// Write a consistent copy of a running SQLite store to a new file.
    Backup(crate::lifecycle::backup::BackupArgs),
    /// Measure the whole pipeline on loopback against a floor forwarder.
    Bench(crate::bench::BenchArgs),
    /// The floor of `bench`: a bare forwarder (started by `bench` itself).
    #[command(name = "bench-floor", hide = true)]
    BenchFloor(crate::bench::floor::FloorArgs),
}

/// Shown by `blockhook --help` and `blockhook serve --help`.
const SERVE_HELP: &str = "\
Examples:
  blockhook                                  SQLite in ./blockhook.db on 127.0.0.1:8080
  blockhook --addr 0.0.0.0:8080 --public-url https://hooks.example.com
  blockhook --database postgres://app:secret@db:5432/blockhook --trusted-proxy 10.0.0.0/8
  blockhook --log-format json                JSON log lines (the default off a terminal)
  blockhook --otlp-endpoint http://127.0.0.1:4318   spans to an OpenTelemetry collector
  blockhook ask conv_01J… \"Deploy?\"        ask a person, exit with the answer

Exit codes of serve:
  0   stopped cleanly (SIGTERM, SIGINT)
  69  the store cannot be reached (the cause is named) or the address is taken
  73  the SQLite file or its folder cannot be created or opened
  78  a bad flag or value (named)";

/// Usage errors exit 64 (EX_USAGE), not clap's 2: for `ask`, 2 means
/// "expired".
pub const EXIT_USAGE: i32 = crate::ask_cli::EXIT_USAGE;

/// Logs go to stderr: stdout carries what commands print for scripts
/// (`ask` answers, `bench --json` reports). Colour only on a terminal.
pub fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "blockhook=info,warn".into());
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
}

/// Exit code of a bad flag or value of `serve` (EX_CONFIG).
pub const EXIT_CONFIG: i32 = 78;

/// The commands whose bad flags exit [`EXIT_USAGE`]; `serve`'s exit
/// [`EXIT_CONFIG`].
const OTHER_COMMANDS: [&str; 5] = ["ask", "mcp", "backup", "bench", "bench-floor"];

pub async fn run() -> Result<i32, String> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if !e.use_stderr() {
                0
            } else if std::env::args()
                .nth(1)
                .is_some_and(|a| OTHER_COMMANDS.contains(&a.as_str()))
            {
                EXIT_USAGE
            } else {
                EXIT_CONFIG
            };
            let _ = e.print();
            return Ok(code);
        }
    };
    let args = match cli.command {
        Some(Command::Serve(a)) => a,
        Some(Command::Ask(a)) => {
            init_logs(LogFormat::Text);
            return Ok(crate::ask_cli::run(a).await);
        }
        Some(Command::Mcp(a)) => {
            init_logs(LogFormat::Text);
            return Ok(crate::mcp::run(a).await);
        }
        Some(Command::Backup(a)) => {
            init_logs(LogFormat::Text);
            return tokio::task::spawn_blocking(move || crate::lifecycle::backup::run(a))
                .await
                .map_err(|e| e.to_string());
        }
        Some(Command::Bench(a)) => {
            init_logs(LogFormat::Text);
            return crate::bench::run(a).await;
        }
        Some(Command::BenchFloor(a)) => {
            init_logs(LogFormat::Text);
            return crate::bench::floor::run(a).await;
        }
        None => cli.serve,
    };
    let format = crate::telemetry::logs::resolve(args.log_format);
    let otlp = crate::telemetry::otlp::endpoint(
        args.otlp_endpoint.as_deref(),
        std::env::var(crate::telemetry::otlp::OTEL_ENDPOINT_VAR)
            .ok()
            .as_deref(),
    );
    let exporter = match otlp {
        Ok(None) => {
            init_logs(format);
            None
        }
        Ok(Some(url)) => match init_logs_with_otlp(format, &url) {
            Ok(e) => Some(e),
            Err(e) => return Ok(fail(StartError::Config(e), format)),
        },
        Err(e) => {
            init_logs(format);
            return Ok(fail(StartError::Config(e), format));
        }
    };
    let code = serve(args, format).await;
    if let Some(e) = exporter {
        e.shutdown().await;
    }
    Ok(code)
}

/// [`init_logs`] with the OTLP span exporter beside the log: the log's
/// lines are the same (no span prefix, no span fields), the exporter sees
/// this crate's spans only.
fn init_logs_with_otlp(
    format: LogFormat,
    url: &str,
) -> Result<crate::telemetry::otlp::Exporter, String> {
    use tracing_subscriber::filter::{FilterExt, filter_fn};
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "blockhook=info,warn".into())
        .and(filter_fn(|m| !m.is_span()));
    let (exporter, otel) = crate::telemetry::otlp::build(url)?;
    let registry = tracing_subscriber::registry().with(otel);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => registry
            .with(
                fmt.json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_filter(filter),
            )
            .try_init(),
        LogFormat::Text => registry
            .with(
                fmt.with_ansi(std::io::stderr().is_terminal())
                    .with_filter(filter),
            )
            .try_init(),
    };
    Ok(exporter)
}

/// Runs the service; the exit code says how it ended (0 after a clean
/// shutdown, else [`StartError::exit_code`]).
async fn serve(args: ServeArgs, format: LogFormat) -> i32 {
    let config = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => return fail(StartError::Config(e), format),
    };
    let db = config.database.to_string();
    let app = match crate::startup::Application::build(config).await {
        Ok(app) => app,
        Err(e) => return fail(e, format),
    };
    let url = format!("http://127.0.0.1:{}", app.port());
    let started = format!(
        "blockhook listening on {url} (public url {}; database {db})",
        app.public_url()
    );
    let admin = app
        .generated_admin_token
        .as_ref()
        .map(|t| (format!("admin token (shown once, store it now): {t}"), t));
    match format {
        LogFormat::Json => {
            let now = || chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            println!(
                "{}",
                serde_json::json!({
                    "timestamp": now(),
                    "level": "INFO",
                    "message": started,
                    "url": url,
                    "public_url": app.public_url(),
                    "database": db,
                    "version": env!("CARGO_PKG_VERSION"),
                })
            );
            if let Some((line, token)) = admin {
                println!(
                    "{}",
                    serde_json::json!({"timestamp": now(), "level": "WARN", "message": line, "admin_token": token})
                );
            }
        }
        LogFormat::Text => {
            println!("{started}");
            if let Some((line, _)) = admin {
                println!("{line}");
            }
        }
    }
    match app.run_until_signalled().await {
        Ok(()) => 0,
        Err(e) => fail(StartError::Unavailable(e.to_string()), format),
    }
}

/// Says why `serve` stops, on stderr in the log's format, and gives its
/// exit code.
fn fail(e: StartError, format: LogFormat) -> i32 {
    match format {
        LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "level": "ERROR",
                "message": format!("blockhook: {e}"),
                "exit_code": e.exit_code(),
            })
        ),
        LogFormat::Text => eprintln!("blockhook: {e}"),
    }
    e.exit_code()
}
