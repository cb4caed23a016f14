#[actix_web::main]
async fn main() {
    tracing_subscriber::fmt()
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
