/// mimalloc: the service allocates many small, short-lived buffers on several
/// threads (requests, payloads, SQLite pages), where it measured cheaper than
/// the system allocator (docs/BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[actix_web::main]
async fn main() {
    // Logs go to stderr: stdout carries what commands print for scripts
    // (`ask` answers, `bench --json` reports).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "blockhook=info,warn".into()),
        )
        .init();
    match blockhook::cli::run().await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("blockhook: {e}");
            std::process::exit(69);
        }
    }
}
