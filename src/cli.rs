//! The command line: `serve` (default), `bench`, `ask`, `mcp`, `backup`.

use std::io::IsTerminal;

use clap::{Parser, Subcommand};

use crate::config::{Config, LogFormat, ServeArgs};

#[derive(Parser)]
#[command(
    name = "blockhook",
    version,
    about = "Signed, durable webhook events for chat-widget buttons and forms",
    args_conflicts_with_subcommands = true
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

pub async fn run() -> Result<i32, String> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
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
    init_logs(args.log_format);
    serve(args).await
}

async fn serve(args: ServeArgs) -> Result<i32, String> {
    let config = Config::try_from(args)?;
    let db = config.database.to_string();
    let app = crate::startup::Application::build(config).await?;
    println!(
        "blockhook listening on http://127.0.0.1:{} (public url {}; database {db})",
        app.port(),
        app.public_url()
    );
    if let Some(t) = &app.generated_admin_token {
        println!("admin token (shown once, store it now): {t}");
    }
    app.run_until_signalled().await.map_err(|e| e.to_string())?;
    Ok(0)
}
