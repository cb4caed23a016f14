//! Builds the application on a listener and runs it until stopped.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{HttpServer, web};

use crate::config::{Config, Database};
use crate::delivery::{self, Dispatcher};
use crate::domain::ids::{hash_secret, new_secret, random_bytes};
use crate::http::{self, AppState};
use crate::hub::Hub;
use crate::store::Store;
use crate::store::guarded::Guarded;
use crate::store::postgres::PostgresStore;
use crate::store::sqlite::SqliteStore;

/// How long in-flight deliveries may take to finish on shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// How long a client may take to send a request's head (§15), then 408.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Application {
    port: u16,
    server: actix_web::dev::Server,
    dispatcher: Arc<Dispatcher>,
    fanout: Arc<delivery::fanout::Fanout>,
    purge: tokio::task::JoinHandle<()>,
    state: web::Data<AppState>,
    conns: Arc<http::conns::Conns>,
    /// Printed once on the first start, when the token was generated.
    pub generated_admin_token: Option<String>,
}

/// Why `serve` could not start, each with its exit code (sysexits.h).
#[derive(Debug)]
pub enum StartError {
    /// A bad flag or value (78, EX_CONFIG); the message names it.
    Config(String),
    /// The store or the address is unavailable (69, EX_UNAVAILABLE).
    Unavailable(String),
    /// The SQLite file or its folder cannot be created or opened (73,
    /// EX_CANTCREAT).
    CannotCreate(String),
}

impl StartError {
    pub fn exit_code(&self) -> i32 {
        match self {
            StartError::Config(_) => 78,
            StartError::Unavailable(_) => 69,
            StartError::CannotCreate(_) => 73,
        }
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(m) | StartError::Unavailable(m) | StartError::CannotCreate(m) => {
                f.write_str(m)
            }
        }
    }
}

impl std::error::Error for StartError {}

/// What of the configuration the running service reads.
fn settings(config: &Config) -> crate::usecase::Settings {
    crate::usecase::Settings {
        interactive_window: config.interactive_window,
        response_url_ttl: config.response_url_ttl,
        delivery_timeout: config.delivery_timeout,
        retry_min_delay: config.retry_min_delay,
        retry_max_delay: config.retry_max_delay,
        retry_max_attempts: config.retry_max_attempts,
        allow_private_webhooks: config.allow_private_webhooks,
        max_hold: config.max_hold,
        endpoint_concurrency: config.endpoint_concurrency,
        body_timeout: config.body_timeout,
        trusted_proxy: config.trusted_proxy.clone(),
    }
}

/// Opens the store named by the configuration. A SQLite file's folder must
/// exist: it is not created (a typo in a path would otherwise start an
/// empty store somewhere unexpected).
pub async fn open_store(config: &Config, hub: Arc<Hub>) -> Result<Arc<dyn Store>, StartError> {
    match &config.database {
        Database::Sqlite(path) => {
            let p = std::path::Path::new(path);
            if let Some(parent) = p.parent()
                && !parent.as_os_str().is_empty()
                && !parent.is_dir()
            {
                return Err(StartError::CannotCreate(format!(
                    "cannot create the SQLite file {path}: its folder {} does not exist (create it first)",
                    parent.display()
                )));
            }
            Ok(Arc::new(Guarded::new(
                SqliteStore::open(path, hub).map_err(|e| {
                    StartError::CannotCreate(format!(
                        "cannot create or open the SQLite file {path}: {e}"
                    ))
                })?,
            )))
        }
        Database::Postgres(url) => Ok(Arc::new(Guarded::new({
            crate::store::postgres::connect::options(url).map_err(|e| {
                StartError::Config(format!(
                    "--database: {}",
                    crate::config::redact_in(&e.to_string(), url)
                ))
            })?;
            PostgresStore::open(url, hub, config.database_pool)
                .await
                .map_err(|e| {
                    StartError::Unavailable(format!(
                        "cannot open {}: {}",
                        config.database.redacted(),
                        crate::config::redact_in(&e.to_string(), url)
                    ))
                })?
        }))),
    }
}

impl Application {
    /// Opens the store, binds the listener (port 0 picks a free port) and
    /// starts the delivery workers.
    pub async fn build(config: Config) -> Result<Self, StartError> {
        use std::net::ToSocketAddrs;
        let nofile = raise_nofile();
        if config.addr.to_socket_addrs().is_err() {
            return Err(StartError::Config(format!(
                "--addr must be host:port, like 127.0.0.1:8080, got `{}`",
                config.addr
            )));
        }
        let listener = TcpListener::bind(&config.addr).map_err(|e| {
            StartError::Unavailable(format!("cannot listen on {}: {e}", config.addr))
        })?;
        let local = listener
            .local_addr()
            .map_err(|e| StartError::Unavailable(e.to_string()))?;
        // Before the store: the handles it registers at its first commit
        // are kept.
        let metrics = crate::telemetry::metrics::install();
        let hub = Arc::new(Hub::new());
        let store = open_store(&config, hub.clone()).await?;
        if config.store_first && !store.shared() {
            store_first();
        }

        let (admin_token_hash, generated_admin_token) = match &config.admin_token {
            Some(t) => (hash_secret(t), None),
            None => {
                let token = new_secret("adm");
                let fresh = hash_secret(&token);
                let stored = store
                    .meta_get_or_init("admin_token_hash", fresh.clone())
                    .await
                    .map_err(unavailable)?;
                let generated = (stored == fresh).then_some(token);
                (stored, generated)
            }
        };
        let key_hex = store
            .meta_get_or_init(
                "server_key",
                data_encoding::HEXLOWER.encode(&random_bytes::<32>()),
            )
            .await
            .map_err(unavailable)?;
        let server_key = crate::domain::token::TokenKey::new(
            &data_encoding::HEXLOWER
                .decode(key_hex.as_bytes())
                .map_err(unavailable)?,
        );
        // A store of one instance: leases left by a crash are void.
        if !store.shared() {
            store.release_leases(None).await.map_err(unavailable)?;
        }
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}"));
        let state = web::Data::new(AppState {
            store,
            admin_token_hash,
            server_key,
            public_url,
            hub,
            metrics,
            limits: crate::limits::Limits::new(
                config.limit_conversations,
                config.limit_visitor,
                config.limit_api_key,
                config.max_streams_per_visitor,
            ),
            stopping: tokio_util::sync::CancellationToken::new(),
            settings: settings(&config),
        });
        let conns = http::conns::Conns::new(
            config
                .max_connections
                .unwrap_or_else(|| http::conns::default_cap(nofile, config.database_pool)),
        );
        let dispatcher =
            delivery::spawn(state.clone().into_inner()).map_err(StartError::Unavailable)?;
        let fanout =
            delivery::fanout::spawn(state.clone().into_inner()).map_err(StartError::Unavailable)?;
        let purge = crate::lifecycle::spawn_purge(state.store.clone(), config.purge_interval);
        tracing::info!(
            open_file_limit = nofile,
            max_connections = conns.cap(),
            "connections capped below the open-file limit"
        );
        let st = state.clone();
        let on_connect = conns.clone();
        // Small writes (stream events, short answers) go out at once.
        let workers = config.http_workers;
        let grace = config.shutdown_timeout;
        let server = HttpServer::new(move || http::app(st.clone()))
            .workers(workers)
            .tcp_nodelay(true)
            .client_request_timeout(HEAD_TIMEOUT)
            // Actix counts a connection from its accept until it is
            // dropped and stops accepting at its limit (per worker); `conns`
            // makes room at its cap by closing the one stalled longest. A
            // few above the cap, actix's limit bounds the descriptors of the
            // connections still closing, so an accept never meets EMFILE.
            .max_connections((conns.cap() + http::conns::CLOSING).div_ceil(workers))
            .on_connect(move |c, data| on_connect.on_connect(c, data))
            .listen(listener)
            .map_err(unavailable)?
            .shutdown_timeout(grace.as_secs() + u64::from(grace.subsec_nanos() > 0))
            // SIGTERM and SIGINT are handled by `run_until_signalled`: both
            // stop gracefully (actix's own handlers stop at once on SIGINT).
            .shutdown_signal(state.stopping.clone().cancelled_owned())
            .run();
        Ok(Self {
            port: local.port(),
            server,
            dispatcher,
            fanout,
            purge,
            state,
            conns,
            generated_admin_token,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn public_url(&self) -> &str {
        &self.state.public_url
    }

    /// The open connections and their cap.
    pub fn conns(&self) -> &Arc<http::conns::Conns> {
        &self.conns
    }

    /// Cancelling it stops the server as SIGTERM does.
    pub fn stopping(&self) -> tokio_util::sync::CancellationToken {
        self.state.stopping.clone()
    }

    /// [`Application::run_until_stopped`], stopping on SIGTERM or SIGINT.
    pub async fn run_until_signalled(self) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let stopping = self.stopping();
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                _ = stopping.cancelled() => return,
            };
            tracing::info!(
                signal = name,
                "stopping: no new connections; finishing the requests in flight"
            );
            stopping.cancel();
        });
        self.run_until_stopped().await
    }

    /// Serves until stopped, then stops accepting, ends held asks with
    /// `pending` and streams, lets requests in flight finish (at most
    /// `--shutdown-timeout`), stops claiming deliveries and lets in-flight
    /// attempts finish within a bound.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let r = self.server.await;
        self.purge.abort();
        tokio::join!(
            self.dispatcher.stop(SHUTDOWN_GRACE),
            self.fanout.stop(SHUTDOWN_GRACE)
        );
        r
    }
}

/// Raises the soft open-file limit to the hard limit; returns the limit
/// now in force.
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot raise the open-file limit");
    }
    lim.rlim_cur
}

fn unavailable(e: impl std::fmt::Display) -> StartError {
    StartError::Unavailable(e.to_string())
}

/// How far the threads started after the SQLite store yield to its writer
/// and syncer (a nice value; 0 is the default).
pub const STORE_FIRST_NICE: i32 = 5;

/// Lowers this thread's scheduling priority, and so that of every thread it
/// starts from now on — the HTTP workers and the delivery runtime — below
/// the SQLite writer and syncer, started just before at the default. The
/// writer is the pipeline's one serial stage and a click is answered only
/// after its batch's sync: under CPU contention they run first, the rest
/// takes the gaps; with spare CPU nothing changes (docs/notes/DECISIONS.md).
fn store_first() {
    #[cfg(target_os = "linux")]
    {
        // On Linux the nice value belongs to the thread, and a new thread
        // inherits its creator's.
        let tid = unsafe { libc::gettid() };
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, STORE_FIRST_NICE) }
            != 0
        {
            tracing::warn!(error = %std::io::Error::last_os_error(), "cannot lower the priority of the threads after the store");
        }
    }
}
