//! The command line: `serve` (default), `bench`, `ask`.

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
    deliveries_yield_to_clicks();
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

/// Lowers the scheduling priority of this thread — the runtime that runs
/// the deliveries — below the threads that accept clicks (HTTP workers,
/// SQLite writer and syncer, all started by now and keeping the default).
/// Under CPU contention a click is committed and answered first and
/// deliveries run in the gaps, so acceptance latency stays low; with spare
/// CPU nothing changes. See docs/DECISIONS.md.
fn deliveries_yield_to_clicks() {
    #[cfg(target_os = "linux")]
    {
        // On Linux the nice value belongs to the thread.
        let tid = unsafe { libc::gettid() };
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, DELIVERY_NICE) } != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), "cannot lower the delivery thread's priority");
        }
    }
}

/// How much the delivery thread yields (a nice value, relative to 0).
const DELIVERY_NICE: i32 = 5;
