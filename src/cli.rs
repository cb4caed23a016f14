//! The command line: `serve` (default), `bench`, `ask`, `backup`.

use clap::{Parser, Subcommand};

use crate::config::{Config, ServeArgs};

#[derive(Parser)]
#[command(
    name = "blockhook",
    version,
    about = "Signed, durable webhook events for chat-widget buttons and forms"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the service.
    Serve(ServeArgs),
    /// Ask a person in a conversation and wait for the answer.
    Ask(crate::ask_cli::AskArgs),
    /// Write a consistent copy of a running SQLite store to a new file.
    Backup(crate::lifecycle::backup::BackupArgs),
    /// Measure the whole pipeline on loopback against a floor forwarder.
    Bench(crate::bench::BenchArgs),
    /// The floor of `bench`: a bare forwarder (started by `bench` itself).
    #[command(name = "bench-floor", hide = true)]
    BenchFloor(crate::bench::floor::FloorArgs),
}

pub async fn run() -> Result<i32, String> {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(a)) => a,
        Some(Command::Ask(a)) => return Ok(crate::ask_cli::run(a).await),
        Some(Command::Backup(a)) => {
            return tokio::task::spawn_blocking(move || crate::lifecycle::backup::run(a))
                .await
                .map_err(|e| e.to_string());
        }
        Some(Command::Bench(a)) => return crate::bench::run(a).await,
        Some(Command::BenchFloor(a)) => return crate::bench::floor::run(a).await,
        None => ServeArgs::defaults_from_env()?,
    };
    serve(args).await
}

async fn serve(args: ServeArgs) -> Result<i32, String> {
    let config = Config::try_from(args)?;
    let db = format!("{:?}", config.database);
    let app = crate::startup::Application::build(config).await?;
    println!(
        "blockhook listening on http://127.0.0.1:{} (public url {}; database {db})",
        app.port(),
        app.public_url()
    );
    if let Some(t) = &app.generated_admin_token {
        println!("admin token (shown once, store it now): {t}");
    }
    app.run_until_stopped().await.map_err(|e| e.to_string())?;
    Ok(0)
}
