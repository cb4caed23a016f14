//! The three-endpoint mode (§13): besides the chatbot's default endpoint
//! (the timed receiver), one endpoint takes every event and one only the
//! clicks on `approve` (about half). Their receivers keep the ids that
//! arrived, so that the run can tell whether every matching delivery was
//! made: the filtered endpoint got exactly the `approve` events the other
//! one got, and that one got every accepted click.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::{HttpRequest, HttpResponse, web};
use parking_lot::Mutex;
use serde_json::json;

use super::check::string_field;
use super::receiver::Receiver;

/// The ids that arrived, and those of them that were `approve` clicks.
#[derive(Default)]
pub struct Seen {
    all: Mutex<HashSet<String>>,
    approve: Mutex<HashSet<String>>,
}

impl Seen {
    fn counts(&self) -> (usize, usize) {
        (self.all.lock().len(), self.approve.lock().len())
    }
}

async fn hook(req: HttpRequest, body: web::Bytes, seen: web::Data<Arc<Seen>>) -> HttpResponse {
    if let Some(id) = req
        .headers()
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
    {
        if string_field(&body, "action_id") == Some("approve") {
            seen.approve.lock().insert(id.to_string());
        }
        seen.all.lock().insert(id.to_string());
    }
    HttpResponse::Ok().finish()
}

/// A receiver of one extra endpoint.
pub struct Counter {
    pub url: String,
    pub seen: Arc<Seen>,
    receiver: Receiver,
}

impl Counter {
    pub fn start() -> Result<Self, String> {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let seen = Arc::new(Seen::default());
        let receiver = Receiver::serve(l, seen.clone(), hook)?;
        Ok(Self {
            url: receiver.url.clone(),
            seen,
            receiver,
        })
    }

    pub async fn stop(self) {
        self.receiver.stop().await;
    }
}

/// The two extra endpoints' receivers, added to the chatbot of `key`.
pub async fn add_two(
    client: &reqwest::Client,
    base: &str,
    key: &str,
) -> Result<(Counter, Counter), String> {
    let all = Counter::start()?;
    let half = Counter::start()?;
    super::load::add_endpoint(client, base, key, &all.url, None, true).await?;
    let filter = json!({"action_id": ["approve"]});
    super::load::add_endpoint(client, base, key, &half.url, Some(filter), true).await?;
    Ok((all, half))
}

/// Waits until the endpoint taking everything got `accepted` events and
/// the filtered one exactly its `approve` ones; whether they did.
pub async fn all_made(all: &Counter, half: &Counter, accepted: u64, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let (n, approve) = all.seen.counts();
        let made = n as u64 >= accepted && {
            let want = all.seen.approve.lock().clone();
            let got = half.seen.all.lock().clone();
            got == want
        };
        if made {
            return n as u64 == accepted && half.seen.counts().0 == approve;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
