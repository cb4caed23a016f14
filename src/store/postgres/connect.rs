//! Opening the pool: the URL's connection options (`sslmode`,
//! `sslrootcert` and the rest, as libpq reads them) over rustls with the
//! ring provider, and a clear message when TLS is what failed.

use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgSslMode};
use sqlx::{Connection, Postgres};

use crate::store::{StoreError, StoreResult};

/// Connections per instance when not configured: room for the HTTP
/// workers' group commits, the delivery claims and records, and the reads
/// of streams and pages at once (docs/deploying.md).
pub const DEFAULT_POOL: u32 = 16;

/// How long a caller waits for a connection, a new one's connect included
/// (sqlx's default is 30 s). A request waits less: the store's circuit
/// answers it 503 once the store has not answered anyone for
/// `store::circuit::BOUND` (docs/notes/reliability.md).
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection idle for longer than this is checked (one round trip)
/// before it is handed out; one in use within it is not: a ping on every
/// acquire was a round trip more per statement on the hot path
/// (docs/notes/BENCHMARKS.md). A connection that broke since fails its statement,
/// which the caller sees as a store error (nothing accepted is lost), and
/// the pool opens a new one.
const CHECK_IF_IDLE: Duration = Duration::from_secs(1);

/// How long after a statement failed for its connection every connection
/// is checked before it is handed out: a restart or a failover cuts them
/// all at once, and the others are found out by the check, not by the
/// statements of the next requests.
const CHECK_AFTER_A_CUT_MS: i64 = 10_000;

/// When a statement last failed for its connection (ms since the epoch),
/// in this process.
static CUT_AT: AtomicI64 = AtomicI64::new(i64::MIN / 2);

/// Notes an error that lost its connection (the server closed it, a
/// socket broke), so that the next acquires check theirs.
pub fn note_error(e: &sqlx::Error) {
    if lost_connection(e) {
        CUT_AT.store(crate::domain::time::now_ms(), Ordering::Relaxed);
    }
}

/// An I/O or protocol failure, or PostgreSQL's classes 08 (connection
/// exception) and 57P (the server shutting down or terminating backends).
fn lost_connection(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    }
}

/// A failure that says nothing of the request, only that the database
/// cannot be reached now: a lost or refused connection, no connection
/// free within [`ACQUIRE_TIMEOUT`], PostgreSQL's class 53 (insufficient
/// resources, such as too many connections), 57P03 (starting up), 55000
/// (the database does not allow connections: `ALLOW_CONNECTIONS false`),
/// 3D000 (no such database) and class 28 (the role may not log in now). A
/// deadlock is not one of them: the click batch runs its clicks again one
/// by one for it.
pub fn transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
        sqlx::Error::Database(d) => {
            d.code().is_some_and(|c| {
                c.starts_with("53")
                    || c.starts_with("28")
                    || matches!(&*c, "57P03" | "55000" | "3D000")
            }) || lost_connection(e)
        }
        _ => lost_connection(e),
    }
}

fn recently_cut() -> bool {
    crate::domain::time::now_ms() - CUT_AT.load(Ordering::Relaxed) < CHECK_AFTER_A_CUT_MS
}

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
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > CHECK_IF_IDLE || recently_cut() {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
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
    let at = format!("{}:{}", opts.get_host(), opts.get_port());
    let cause = match e {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("connection refused at {at} (is PostgreSQL running and listening there?)")
        }
        sqlx::Error::Io(io) => format!("cannot reach {at}: {io}"),
        sqlx::Error::Database(d) => match d.code().as_deref() {
            Some("28P01") => format!(
                "bad password: {at} refused the password of user `{}` (password authentication failed)",
                opts.get_username()
            ),
            Some("28000") => format!(
                "{at} refused user `{}`: {}",
                opts.get_username(),
                d.message()
            ),
            Some("3D000") => format!("{at}: {}", d.message()),
            _ => format!("{at}: {e}"),
        },
        sqlx::Error::PoolTimedOut => format!("no connection to {at} within {ACQUIRE_TIMEOUT:?}"),
        _ => format!("{at}: {e}"),
    };
    StoreError::Backend(format!(
        "cannot connect to PostgreSQL (sslmode={mode}): {cause}"
    ))
}

/// One connection made and closed, so that a start that cannot reach the
/// server says why at once (a pool retries a refused connection until its
/// timeout, and then says only that it timed out).
pub async fn probe(opts: &PgConnectOptions) -> StoreResult<()> {
    let conn = PgConnection::connect_with(opts)
        .await
        .map_err(|e| explain(opts, &e))?;
    let _ = conn.close().await;
    Ok(())
}

/// A connection kept by one caller that runs one statement after another
/// (the claim loop, the recorder of attempts): taken from the pool once,
/// not at each use, since the pool checks a connection with a round trip
/// each time it comes back. One that failed is given up and the next use
/// takes a fresh one. A pool smaller than [`HOLD_FROM`] keeps none: each
/// use takes one and gives it back, so that the two kept ones cannot leave
/// clicks without.
pub struct Held {
    pool: PgPool,
    keep: bool,
    conn: tokio::sync::Mutex<Option<PoolConnection<Postgres>>>,
}

/// The smallest pool whose claim loop and recorder keep a connection each.
pub const HOLD_FROM: u32 = 8;

impl Held {
    pub fn new(pool: PgPool, size: u32) -> Self {
        Self {
            pool,
            keep: size >= HOLD_FROM,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// A connection kept whatever the size of its pool (a pool of its own).
    pub fn kept(pool: PgPool) -> Self {
        Self {
            pool,
            keep: true,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// The connection, for one use at a time.
    pub async fn get(&self) -> StoreResult<HeldConn<'_>> {
        let mut g = self.conn.lock().await;
        let fresh = g.is_none();
        if fresh {
            *g = Some(self.pool.acquire().await?);
        }
        Ok(HeldConn {
            conn: g,
            keep: self.keep,
            fresh,
        })
    }
}

impl Drop for Held {
    /// Closes the kept connection where it is: the pool would hand it back
    /// in a task of its own, and the store may go away where no runtime
    /// runs one.
    fn drop(&mut self) {
        if let Some(c) = self.conn.get_mut().take() {
            drop(c.detach());
        }
    }
}

/// A use of a [`Held`] connection; [`HeldConn::check`] gives the
/// connection up when the use failed.
pub struct HeldConn<'a> {
    conn: tokio::sync::MutexGuard<'a, Option<PoolConnection<Postgres>>>,
    keep: bool,
    fresh: bool,
}

impl HeldConn<'_> {
    /// Whether this use took the connection from the pool (what an earlier
    /// use set up on the connection it kept, such as prepared statements,
    /// is not there).
    pub fn fresh(&self) -> bool {
        self.fresh
    }

    /// Whether the connection stays held after this use (not given back
    /// to the pool).
    pub fn keeps(&self) -> bool {
        self.keep
    }

    pub fn conn(&mut self) -> StoreResult<&mut PgConnection> {
        self.conn
            .as_deref_mut()
            .ok_or_else(|| StoreError::Backend("no connection".into()))
    }

    /// `r`, having let the connection go if `r` failed (or if the pool is
    /// too small to keep it).
    pub fn check<T>(mut self, r: StoreResult<T>) -> StoreResult<T> {
        if r.is_err() || !self.keep {
            *self.conn = None;
        }
        r
    }

    /// `r`, having closed the connection if `r` failed: for a use that may
    /// leave a transaction open on failure (its `BEGIN` sent as text, not
    /// through a `Transaction`, which rolls back), so that the pool never
    /// hands such a connection out again.
    pub fn check_closing<T>(mut self, r: StoreResult<T>) -> StoreResult<T> {
        if r.is_err() {
            if let Some(mut c) = self.conn.take() {
                c.close_on_drop();
            }
        } else if !self.keep {
            *self.conn = None;
        }
        r
    }
}
