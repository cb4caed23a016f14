//! Opening the pool: the URL's connection options (`sslmode`,
//! `sslrootcert` and the rest, as libpq reads them) over rustls with the
//! ring provider, and a clear message when TLS is what failed.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgSslMode};

use crate::store::{StoreError, StoreResult};

/// Connections per instance when not configured: room for the HTTP
/// workers' group commits, the delivery claims and records, and the reads
/// of streams and pages at once (docs/DEPLOYMENT.md).
pub const DEFAULT_POOL: u32 = 16;

/// The options a URL names. `sslmode` is `prefer` when unset: TLS when the
/// server offers it, in the clear otherwise.
pub fn options(url: &str) -> StoreResult<PgConnectOptions> {
    PgConnectOptions::from_str(url)
        .map_err(|e| StoreError::Backend(format!("invalid PostgreSQL URL: {e}")))
}

/// A pool of `size` connections; the first is opened now, so that a wrong
/// URL, password or certificate fails the start.
pub async fn pool(opts: &PgConnectOptions, size: u32) -> StoreResult<PgPool> {
    PgPoolOptions::new()
        .max_connections(size.max(1))
        .connect_with(opts.clone())
        .await
        .map_err(|e| explain(opts, &e))
}

/// The error of a failed connection, saying which TLS check failed and how
/// to satisfy it.
pub fn explain(opts: &PgConnectOptions, e: &sqlx::Error) -> StoreError {
    let mode = match opts.get_ssl_mode() {
        PgSslMode::Disable => "disable",
        PgSslMode::Allow => "allow",
        PgSslMode::Prefer => "prefer",
        PgSslMode::Require => "require",
        PgSslMode::VerifyCa => "verify-ca",
        PgSslMode::VerifyFull => "verify-full",
    };
    let tls = matches!(e, sqlx::Error::Tls(_))
        || (matches!(
            opts.get_ssl_mode(),
            PgSslMode::VerifyCa | PgSslMode::VerifyFull
        ) && e.to_string().to_ascii_lowercase().contains("certificate"));
    if tls {
        let hint = match opts.get_ssl_mode() {
            PgSslMode::VerifyCa | PgSslMode::VerifyFull => {
                "; the server's certificate must chain to the CA of `sslrootcert=` (or to the system's trusted roots when unset)"
            }
            PgSslMode::Require => "; the server must accept TLS",
            _ => "",
        };
        return StoreError::Backend(format!(
            "TLS to PostgreSQL failed (sslmode={mode}): {e}{hint}"
        ));
    }
    StoreError::Backend(format!(
        "cannot connect to PostgreSQL (sslmode={mode}): {e}"
    ))
}
