//! The floor: a minimal actix-web handler that forwards each request body to
//! the receiver with reqwest and answers 200 once the receiver answered — no
//! storage, no signing. One request in and one out, nothing else: what
//! blockhook's throughput is compared with.

use std::net::TcpListener;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use clap::Args;

use crate::domain::duration;

#[derive(Debug, Clone, Args)]
pub struct FloorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: String,
    /// Where each request body is forwarded.
    #[arg(long)]
    pub target: String,
    /// Timeout of one forward.
    #[arg(long, default_value = "10s", value_parser = duration::parse)]
    pub timeout: Duration,
}

struct Floor {
    client: reqwest::Client,
    target: String,
}

async fn forward(body: web::Bytes, st: web::Data<Floor>) -> HttpResponse {
    let sent = st
        .client
        .post(&st.target)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => {
            let _ = r.bytes().await;
            HttpResponse::Ok().finish()
        }
        _ => HttpResponse::BadGateway().finish(),
    }
}

/// Serves the forwarder until SIGINT/SIGTERM.
pub async fn run(args: FloorArgs) -> Result<i32, String> {
    // The same outbound client as the delivery worker's.
    let client = crate::delivery::client::build(args.timeout, true)?;
    let listener = TcpListener::bind(&args.addr)
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let state = web::Data::new(Floor {
        client,
        target: args.target,
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route("/healthz", web::get().to(HttpResponse::Ok))
            .default_service(web::to(forward))
    })
    .tcp_nodelay(true)
    .listen(listener)
    .map_err(|e| e.to_string())?
    .shutdown_timeout(1)
    .run();
    println!("blockhook bench-floor listening on http://127.0.0.1:{port}");
    server.await.map_err(|e| e.to_string())?;
    Ok(0)
}
