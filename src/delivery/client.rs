//! The outbound HTTP client: pooled keep-alive connections, connect and
//! total timeouts, redirects never followed, no transparent retries, and
//! (unless private webhooks are allowed) a resolver that refuses private
//! addresses.

use std::sync::Arc;
use std::time::Duration;

use super::ssrf::GuardedResolver;

pub fn build(timeout: Duration, allow_private: bool) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // One attempt is one request: the retry queue retries, logged and
        // signed anew; the client never resends on its own (and so keeps no
        // copy of every request's headers in case it might).
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .user_agent(concat!("blockhook/", env!("CARGO_PKG_VERSION")))
        .no_proxy();
    if !allow_private {
        b = b.dns_resolver(Arc::new(GuardedResolver));
    }
    b.build().map_err(|e| e.to_string())
}
