//! The use cases between the HTTP layer and the store: what a handler and
//! the delivery worker both need (applying a reply, building messages,
//! typing), with their dependencies held in one value, [`Services`].

pub mod content;
pub mod endpoints;
pub mod reply;
pub mod typing;

use std::sync::Arc;

use crate::config::Config;
use crate::hub::Hub;
use crate::store::Store;

/// What every use case shares: the store, the configuration, the keys and
/// the in-process hub.
pub struct Services {
    pub store: Arc<dyn Store>,
    pub config: Config,
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

impl Services {
    pub fn now_ms(&self) -> i64 {
        crate::domain::time::now_ms()
    }
}
