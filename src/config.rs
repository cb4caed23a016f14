//! Configuration: flags, each with a `BLOCKHOOK_*` environment variable,
//! validated once into [`Config`].

use std::time::Duration;

use clap::Args;

use crate::domain::duration;
use crate::limits::Rate;

fn dur(s: &str) -> Result<Duration, String> {
    duration::parse(s)
}

fn rate(s: &str) -> Result<Rate, String> {
    Rate::parse(s)
}

/// A stream cap as the flag writes it: a number ≥ 1, or `off` (`None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCap(pub Option<usize>);

fn max_streams(s: &str) -> Result<StreamCap, String> {
    if s.trim().eq_ignore_ascii_case("off") {
        return Ok(StreamCap(None));
    }
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(StreamCap(Some(n))),
        _ => Err(format!("a stream count is a number ≥ 1 or off, got `{s}`")),
    }
}

fn cidr(s: &str) -> Result<ipnet::IpNet, String> {
    let t = s.trim();
    t.parse::<ipnet::IpNet>()
        .or_else(|_| t.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("--trusted-proxy is a CIDR like 10.0.0.0/8, got `{s}`"))
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
    /// Connections to PostgreSQL per instance, at least 2: one is the click
    /// batches' own (with several instances the server must allow their
    /// sum; docs/deploying.md).
    #[arg(long, env = "BLOCKHOOK_DATABASE_POOL", default_value_t = crate::store::postgres::connect::DEFAULT_POOL)]
    pub database_pool: u32,
    /// Base of every response_url (default `http://{addr}`).
    #[arg(long, env = "BLOCKHOOK_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Admin token; generated, stored and printed once on first start if unset.
    #[arg(long, env = "BLOCKHOOK_ADMIN_TOKEN")]
    pub admin_token: Option<String>,
    /// Allow webhook URLs on loopback, private and link-local addresses
    /// (the variable takes 1/0, true/false, yes/no, on/off, in any case).
    #[arg(
        long,
        env = "BLOCKHOOK_ALLOW_PRIVATE_WEBHOOKS",
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
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
    /// How long a delivery waits for a paused or gone endpoint before it
    /// is `dead` (§13).
    #[arg(long, env = "BLOCKHOOK_MAX_HOLD", default_value = "7d", value_parser = dur)]
    pub max_hold: Duration,
    /// How long a response_url works.
    #[arg(long, env = "BLOCKHOOK_RESPONSE_URL_TTL", default_value = "24h", value_parser = dur)]
    pub response_url_ttl: Duration,
    /// Concurrent deliveries to one chatbot's endpoint.
    #[arg(long, env = "BLOCKHOOK_ENDPOINT_CONCURRENCY", default_value_t = 32)]
    pub endpoint_concurrency: usize,
    /// New conversations per client IP (`N/s`, `N/min`, `N/h` or `off`).
    #[arg(long, env = "BLOCKHOOK_LIMIT_CONVERSATIONS", default_value = "30/min", value_parser = rate)]
    pub limit_conversations: Rate,
    /// Widget writes (clicks, form submits, messages) per visitor token.
    #[arg(long, env = "BLOCKHOOK_LIMIT_VISITOR", default_value = "10/s", value_parser = rate)]
    pub limit_visitor: Rate,
    /// Requests per chatbot API key on /api/v1.
    #[arg(long, env = "BLOCKHOOK_LIMIT_API_KEY", default_value = "200/s", value_parser = rate)]
    pub limit_api_key: Rate,
    /// Live streams open at once per visitor token (a number or `off`).
    #[arg(long, env = "BLOCKHOOK_MAX_STREAMS_PER_VISITOR", default_value = "8", value_parser = max_streams)]
    pub max_streams_per_visitor: StreamCap,
    /// A proxy whose `X-Forwarded-For` is believed (a CIDR; repeatable;
    /// comma-separated in the variable).
    #[arg(long, env = "BLOCKHOOK_TRUSTED_PROXY", value_delimiter = ',', value_parser = cidr)]
    pub trusted_proxy: Vec<ipnet::IpNet>,
    /// How often the retention purge runs: a conversation is deleted within
    /// this time of passing its chatbot's retention.
    #[arg(long, env = "BLOCKHOOK_PURGE_INTERVAL", default_value = "10m", value_parser = dur)]
    pub purge_interval: Duration,
    /// HTTP worker threads (default: one per core but one, at least one;
    /// the SQLite writer and syncer and the delivery runtime use the rest).
    #[arg(long, env = "BLOCKHOOK_HTTP_WORKERS")]
    pub http_workers: Option<usize>,
    /// How long a request body may take to arrive in full (then 408).
    #[arg(long, env = "BLOCKHOOK_BODY_TIMEOUT", default_value = "10s", value_parser = dur)]
    pub body_timeout: Duration,
    /// Open connections at most (default: below the open-file limit, which
    /// is raised to its hard limit at start, keeping descriptors for the
    /// store and the deliveries); at the cap the connection stalled
    /// longest is closed to make room.
    #[arg(long, env = "BLOCKHOOK_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// On SIGTERM/SIGINT, how long requests in flight may take to finish.
    #[arg(long, env = "BLOCKHOOK_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = dur)]
    pub shutdown_timeout: Duration,
    /// Log lines as text (colour on a terminal only) or as JSON, one object
    /// a line, for log shippers (default: JSON unless on a terminal).
    #[arg(long, env = "BLOCKHOOK_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
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

/// The validated configuration the app runs with. Its `Debug` masks the
/// admin token and the database password.
#[derive(Clone)]
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
    pub max_hold: Duration,
    pub response_url_ttl: Duration,
    pub endpoint_concurrency: usize,
    pub purge_interval: Duration,
    pub http_workers: usize,
    pub body_timeout: Duration,
    pub max_connections: Option<usize>,
    pub shutdown_timeout: Duration,
    pub limit_conversations: Rate,
    pub limit_visitor: Rate,
    pub limit_api_key: Rate,
    pub max_streams_per_visitor: Option<usize>,
    pub trusted_proxy: Vec<ipnet::IpNet>,
    /// Every thread started after the store runs at [`STORE_FIRST_NICE`]:
    /// see `startup::store_first`. On for `serve`; tests leave their own
    /// threads alone.
    pub store_first: bool,
    pub quiet: bool,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("addr", &self.addr)
            .field("database", &self.database)
            .field("public_url", &self.public_url)
            .field("admin_token", &self.admin_token.as_ref().map(|_| MASK))
            .field("allow_private_webhooks", &self.allow_private_webhooks)
            .field("interactive_window", &self.interactive_window)
            .field("delivery_timeout", &self.delivery_timeout)
            .field("retry_min_delay", &self.retry_min_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("retry_max_attempts", &self.retry_max_attempts)
            .field("max_hold", &self.max_hold)
            .field("response_url_ttl", &self.response_url_ttl)
            .field("endpoint_concurrency", &self.endpoint_concurrency)
            .field("http_workers", &self.http_workers)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("limit_conversations", &self.limit_conversations)
            .field("limit_visitor", &self.limit_visitor)
            .field("limit_api_key", &self.limit_api_key)
            .field("max_streams_per_visitor", &self.max_streams_per_visitor)
            .field("trusted_proxy", &self.trusted_proxy)
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
pub enum Database {
    Sqlite(String),
    Postgres(String),
}

impl Database {
    /// The store as it may be shown (start line, logs): a PostgreSQL URL's
    /// password masked.
    pub fn redacted(&self) -> String {
        match self {
            Database::Sqlite(p) => format!("sqlite://{p}"),
            Database::Postgres(u) => redact_url(u),
        }
    }
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

const MASK: &str = "***";

/// A URL with its password — in the userinfo or as a `password=` query
/// parameter — replaced by `***`. Text that is no URL is masked whole after
/// its scheme (it could hold anything).
pub fn redact_url(raw: &str) -> String {
    let Ok(mut u) = url::Url::parse(raw) else {
        return match raw.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://{MASK}"),
            None => MASK.to_string(),
        };
    };
    if u.password().is_some() {
        let _ = u.set_password(Some(MASK));
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let secret = ["password", "sslpassword", "passfile"].contains(&k.as_ref());
                (
                    k.into_owned(),
                    if secret { MASK.into() } else { v.into_owned() },
                )
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

/// `text` with every occurrence of the password of `url` masked (for error
/// messages of a driver that may quote its connection string).
pub fn redact_in(text: &str, url: &str) -> String {
    let mut out = text.replace(url, &redact_url(url));
    if let Ok(u) = url::Url::parse(url)
        && let Some(p) = u.password()
        && !p.is_empty()
    {
        out = out.replace(p, MASK);
        // As the driver may show it: percent-decoded.
        let decoded: String = url::form_urlencoded::parse(format!("x={p}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        if !decoded.is_empty() {
            out = out.replace(&decoded, MASK);
        }
    }
    out
}

/// For people: `SQLite blockhook.db`, `PostgreSQL postgres://app:***@db:5432/app`
/// (a password is never shown).
impl std::fmt::Display for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Database::Sqlite(path) => write!(f, "SQLite {path}"),
            Database::Postgres(u) => write!(f, "PostgreSQL {}", redact_url(u)),
        }
    }
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
                redact_url(&a.database)
            ));
        };
        if a.database_pool < 2 {
            return Err(
                "--database-pool must be at least 2 (one connection is the click batches' own)"
                    .into(),
            );
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
            max_hold: a.max_hold,
            response_url_ttl: a.response_url_ttl,
            endpoint_concurrency: a.endpoint_concurrency.max(1),
            purge_interval: a.purge_interval.max(Duration::from_millis(10)),
            http_workers: a.http_workers.unwrap_or_else(default_http_workers).max(1),
            body_timeout: a.body_timeout.max(Duration::from_millis(100)),
            max_connections: a.max_connections.map(|n| n.max(1)),
            shutdown_timeout: a.shutdown_timeout,
            limit_conversations: a.limit_conversations,
            limit_visitor: a.limit_visitor,
            limit_api_key: a.limit_api_key,
            max_streams_per_visitor: a.max_streams_per_visitor.0,
            trusted_proxy: a.trusted_proxy,
            store_first: true,
            quiet: false,
        })
    }
}

/// One HTTP worker per core but one: a click also costs the writer, the
/// syncer and the delivery runtime a share of a core (docs/notes/BENCHMARKS.md).
fn default_http_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_passwords_are_masked() {
        let url = "postgres://app:s3cr%40t@db.internal:5432/blockhook?sslmode=require";
        let shown = redact_url(url);
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(
            shown.contains("app:***@db.internal:5432/blockhook"),
            "{shown}"
        );
        assert!(shown.contains("sslmode=require"), "{shown}");
        let q = redact_url("postgresql://db/x?user=app&password=hunter2");
        assert!(!q.contains("hunter2") && q.contains("password=***"), "{q}");
        assert!(!redact_url("postgres://app:pw@[bad").contains("pw"));
        let d = format!("{:?}", Database::Postgres(url.into()));
        assert!(!d.contains("s3cr"), "{d}");
        let e = redact_in(
            "error connecting with s3cr@t to postgres://app:s3cr%40t@db",
            url,
        );
        assert!(!e.contains("s3cr"), "{e}");
    }

    #[test]
    fn a_pool_leaves_the_click_batches_a_connection_of_their_own() {
        let with = |n: u32| {
            let mut a = ServeArgs::defaults_from_env().expect("defaults");
            a.database_pool = n;
            Config::try_from(a).map(|c| c.database_pool)
        };
        let e = with(1).expect_err("a pool of one is refused");
        assert!(e.contains("--database-pool must be at least 2"), "{e}");
        assert_eq!(with(2), Ok(2));
    }
}
