//! The floor: a minimal actix-web handler that forwards each request body to
//! the receiver with reqwest and answers 200 once the receiver answered — no
//! storage, no signing. One request in and one out, nothing else: what
//! blockhook's throughput is compared with. With `--also`, it also sends
//! each body, after answering, to more receivers (`--also-approve`: only
//! the clicks on `approve`): the cost of the three-endpoint mode's extra
//! sends with nothing stored, the fan-out's floor.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Also sent every body, once the target answered.
    #[arg(long)]
    pub also: Option<String>,
    /// Also sent the bodies of clicks on `approve`, once the target answered.
    #[arg(long)]
    pub also_approve: Option<String>,
}

struct Floor {
    client: reqwest::Client,
    target: String,
    also: Option<String>,
    also_approve: Option<String>,
    /// Numbers the extra sends' `webhook-id`s, one per forwarded body.
    sent: AtomicU64,
}

impl Floor {
    /// The extra sends of one forwarded body, each in its own task, as
    /// blockhook's extra endpoints are sent after the click was answered.
    fn fan_out(&self, body: web::Bytes) {
        let approve = super::check::string_field(&body, "action_id") == Some("approve");
        let to = [
            self.also.as_ref(),
            self.also_approve.as_ref().filter(|_| approve),
        ];
        let id = format!("floor_{}", self.sent.fetch_add(1, Ordering::Relaxed));
        for url in to.into_iter().flatten() {
            let send = self
                .client
                .post(url)
                .header("content-type", "application/json")
                .header("webhook-id", &id)
                .body(body.clone())
                .send();
            actix_web::rt::spawn(async move {
                if let Ok(r) = send.await {
                    let _ = r.bytes().await;
                }
            });
        }
    }
}

async fn forward(body: web::Bytes, st: web::Data<Floor>) -> HttpResponse {
    let sent = st
        .client
        .post(&st.target)
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => {
            let _ = r.bytes().await;
            st.fan_out(body);
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
        also: args.also,
        also_approve: args.also_approve,
        sent: AtomicU64::new(0),
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
