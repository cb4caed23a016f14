//! Configuration: flags, each with a `BLOCKHOOK_*` environment variable,
//! validated once into [`Config`].

use std::time::Duration;

use clap::Args;

use crate::domain::duration;

fn dur(s: &str) -> Result<Duration, String> {
    duration::parse(s)
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "BLOCKHOOK_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// `sqlite://path.db` (embedded default) or `postgres://…`.
    #[arg(
        long,
        env = "BLOCKHOOK_DATABASE",
        default_value = "sqlite://blockhook.db"
    )]
    pub database: String,
    /// Connections to PostgreSQL per instance (with several instances the
    /// server must allow their sum; docs/DEPLOYMENT.md).
    #[arg(long, env = "BLOCKHOOK_DATABASE_POOL", default_value_t = crate::store::postgres::connect::DEFAULT_POOL)]
    pub database_pool: u32,
    /// Base of every response_url (default `http://{addr}`).
    #[arg(long, env = "BLOCKHOOK_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Admin token; generated, stored and printed once on first start if unset.
    #[arg(long, env = "BLOCKHOOK_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// Allow webhook URLs on loopback, private and link-local addresses.
    #[arg(
        long,
        env = "BLOCKHOOK_ALLOW_PRIVATE_WEBHOOKS",
        default_value_t = false
    )]
    pub allow_private_webhooks: bool,
    /// How long a message's blocks accept clicks.
    #[arg(long, env = "BLOCKHOOK_INTERACTIVE_WINDOW", default_value = "30d", value_parser = dur)]
    pub interactive_window: Duration,
    /// Timeout of one delivery attempt.
    #[arg(long, env = "BLOCKHOOK_DELIVERY_TIMEOUT", default_value = "10s", value_parser = dur)]
    pub delivery_timeout: Duration,
    /// First retry delay.
    #[arg(long, env = "BLOCKHOOK_RETRY_MIN_DELAY", default_value = "5s", value_parser = dur)]
    pub retry_min_delay: Duration,
    /// Longest retry delay.
    #[arg(long, env = "BLOCKHOOK_RETRY_MAX_DELAY", default_value = "12h", value_parser = dur)]
    pub retry_max_delay: Duration,
    /// Attempts in all, the first included.
    #[arg(long, env = "BLOCKHOOK_RETRY_MAX_ATTEMPTS", default_value_t = 12)]
    pub retry_max_attempts: u32,
    /// How long a response_url works.
    #[arg(long, env = "BLOCKHOOK_RESPONSE_URL_TTL", default_value = "24h", value_parser = dur)]
    pub response_url_ttl: Duration,
    /// Concurrent deliveries to one chatbot's endpoint.
    #[arg(long, env = "BLOCKHOOK_ENDPOINT_CONCURRENCY", default_value_t = 32)]
    pub endpoint_concurrency: usize,
    /// HTTP worker threads (default: one per core but one, at least one;
    /// the SQLite writer and syncer and the delivery runtime use the rest).
    #[arg(long, env = "BLOCKHOOK_HTTP_WORKERS")]
    pub http_workers: Option<usize>,
}

impl ServeArgs {
    /// The flags' defaults, overridden by `BLOCKHOOK_*` variables.
    pub fn defaults_from_env() -> Result<Self, String> {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: ServeArgs,
        }
        P::try_parse_from(["blockhook"])
            .map(|p| p.a)
            .map_err(|e| e.to_string())
    }
}

/// The validated configuration the app runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub addr: String,
    pub database: Database,
    pub database_pool: u32,
    pub public_url: Option<String>,
    pub admin_token: Option<String>,
    pub allow_private_webhooks: bool,
    pub interactive_window: Duration,
    pub delivery_timeout: Duration,
    pub retry_min_delay: Duration,
    pub retry_max_delay: Duration,
    pub retry_max_attempts: u32,
    pub response_url_ttl: Duration,
    pub endpoint_concurrency: usize,
    pub http_workers: usize,
    /// Every thread started after the store runs at [`STORE_FIRST_NICE`]:
    /// see `startup::store_first`. On for `serve`; tests leave their own
    /// threads alone.
    pub store_first: bool,
    pub quiet: bool,
}

#[derive(Debug, Clone)]
pub enum Database {
    Sqlite(String),
    Postgres(String),
}

impl TryFrom<ServeArgs> for Config {
    type Error = String;

    fn try_from(a: ServeArgs) -> Result<Self, String> {
        let database = if let Some(path) = a.database.strip_prefix("sqlite://") {
            Database::Sqlite(path.to_string())
        } else if a.database.starts_with("postgres://") || a.database.starts_with("postgresql://") {
            Database::Postgres(a.database.clone())
        } else {
            return Err(format!(
                "--database must be sqlite://… or postgres://…, got `{}`",
                a.database
            ));
        };
        if a.database_pool == 0 {
            return Err("--database-pool must be at least 1".into());
        }
        if a.retry_max_attempts == 0 {
            return Err("--retry-max-attempts must be at least 1".into());
        }
        Ok(Config {
            addr: a.addr,
            database,
            database_pool: a.database_pool,
            public_url: a.public_url.map(|u| u.trim_end_matches('/').to_string()),
            admin_token: a.admin_token,
            allow_private_webhooks: a.allow_private_webhooks,
            interactive_window: a.interactive_window,
            delivery_timeout: a.delivery_timeout,
            retry_min_delay: a.retry_min_delay,
            retry_max_delay: a.retry_max_delay,
            retry_max_attempts: a.retry_max_attempts,
            response_url_ttl: a.response_url_ttl,
            endpoint_concurrency: a.endpoint_concurrency.max(1),
            http_workers: a.http_workers.unwrap_or_else(default_http_workers).max(1),
            store_first: true,
            quiet: false,
        })
    }
}

/// One HTTP worker per core but one: a click also costs the writer, the
/// syncer and the delivery runtime a share of a core (docs/BENCHMARKS.md).
fn default_http_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}
