//! The use cases between the HTTP layer and the store: what a handler and
//! the delivery worker both need (applying a reply, building messages,
//! typing), with their dependencies held in one value, [`Services`].

pub mod access;
pub mod ask;
pub mod bot;
pub mod chatbots;
pub mod content;
pub mod conversations;
pub mod endpoints;
pub mod error;
pub mod events;
pub mod inbox;
pub mod reply;
pub mod stream;
pub mod typing;
pub mod widget;

use std::sync::Arc;
use std::time::Duration;

use crate::hub::Hub;
use crate::store::Store;

/// What every use case shares: the store, the settings, the keys and the
/// in-process hub.
pub struct Services {
    pub store: Arc<dyn Store>,
    pub settings: Settings,
    pub admin_token_hash: String,
    /// Signs response_url tokens.
    pub server_key: crate::domain::token::TokenKey,
    /// Base of every response_url, without a trailing slash.
    pub public_url: String,
    pub hub: Arc<Hub>,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// The §10 limits of this instance.
    pub limits: crate::limits::Limits,
    /// Cancelled when the server begins to stop (SIGTERM, SIGINT): held
    /// asks end with `pending`, streams end, nothing is withdrawn.
    pub stopping: tokio_util::sync::CancellationToken,
}

/// The settings the use cases, handlers and the delivery worker read while
/// the service runs (taken from the configuration at start).
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long a message's blocks take clicks.
    pub interactive_window: Duration,
    /// How long a response_url can be used.
    pub response_url_ttl: Duration,
    /// Bound of one delivery attempt.
    pub delivery_timeout: Duration,
    /// First retry delay.
    pub retry_min_delay: Duration,
    /// Longest wait between attempts.
    pub retry_max_delay: Duration,
    /// Attempts in all, the first included.
    pub retry_max_attempts: u32,
    /// Whether webhook URLs may name private addresses.
    pub allow_private_webhooks: bool,
    /// How long a delivery waits for a paused or gone endpoint before it is
    /// `dead`.
    pub max_hold: Duration,
    /// Concurrent deliveries to one chatbot's endpoint.
    pub endpoint_concurrency: usize,
    /// Bound of reading one request body.
    pub body_timeout: Duration,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxy: Vec<ipnet::IpNet>,
}

impl Services {
    pub fn now_ms(&self) -> i64 {
        crate::domain::time::now_ms()
    }
}
