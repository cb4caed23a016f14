/// mimalloc: the service allocates many small, short-lived buffers on several
/// threads (requests, payloads, SQLite pages), where it measured cheaper than
/// the system allocator (docs/notes/BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[actix_web::main]
async fn main() {
    // Logging starts once the command line is read (`--log-format`).
    match blockhook::cli::run().await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("blockhook: {e}");
            std::process::exit(69);
        }
    }
}
