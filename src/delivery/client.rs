//! The outbound HTTP client: pooled keep-alive connections, connect and
//! total timeouts, redirects never followed.

use std::time::Duration;

pub fn build(timeout: Duration) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .user_agent(concat!("blockhook/", env!("CARGO_PKG_VERSION")))
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())
}
