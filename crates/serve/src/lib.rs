//! `wirelog serve` and `capture --listen`: an HTTP API, the web UI and
//! Prometheus metrics over a store (and the live counters of a running
//! capture).
//!
//! The server runs on its own thread with its own single-threaded tokio
//! runtime; queries run on at most [`QUERY_THREADS`] blocking threads of that
//! runtime, each with a row limit and a time limit ([`Limits`]), so a page
//! can never stall the probe. Nothing here is on the packet path: a capture
//! hands over a [`Live`] source, read when a page or a scrape asks.
//!
//! Every answer to a question about records comes from `wirelog_query`'s
//! engine, the one `wirelog query` runs: the rows of `/api/query` are the
//! objects `wirelog query --format json` prints for the same parameters.
//!
//! Security: a non-loopback address needs a token ([`check_listen`]); the
//! token is checked in constant time on every request (API, UI, metrics);
//! no CORS headers are sent and every endpoint is GET only. Slow, idle and
//! too many clients are bounded by [`conn`]'s timeouts and connection cap.

mod api;
mod auth;
mod gzip;
mod conn;
mod health;
mod loss;
mod map;
mod metrics;
mod pcap;
mod procstat;
mod ui;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use conn::{HEADER_READ_TIMEOUT, IDLE_TIMEOUT, MAX_CONNECTIONS, REQUEST_MARGIN};
pub use api::schema_json;
pub use health::{KindExtent, Live, LiveSnapshot, StoreWritten, WorkerLive};

/// Queries run at once; more wait (each request still has its time limit).
pub const QUERY_THREADS: usize = 2;

/// What one query may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Rows (groups, or series x intervals) one answer may hold.
    pub max_rows: usize,
    /// Wall time a query may scan before it is abandoned (503).
    pub timeout: Duration,
    /// Intervals a time series may have (`(to - from) / every`).
    pub max_intervals: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_rows: 10_000,
            timeout: Duration::from_secs(10),
            max_intervals: 5_000,
        }
    }
}

/// Why a [`Backend`] did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// The deadline passed (503, as for the store).
    Time,
    /// The engine's groups outgrew the byte limit given (503).
    Memory,
    /// The backend failed (502: the server behind us did).
    Failed(String),
}

/// Where the API's questions go instead of the local store (`serve
/// --clickhouse`): the same `QuerySpec`s every endpoint builds, answered by
/// another backend with the same engine's `ResultTable`s.
pub trait Backend: Send + Sync {
    /// What it is, for messages ("ClickHouse http://host:8123, database wirelog").
    fn name(&self) -> String;
    /// Answers one query by `deadline`, the engine within `max_bytes` of groups.
    fn run(
        &self,
        spec: wirelog_query::QuerySpec,
        deadline: std::time::Instant,
        max_bytes: usize,
    ) -> Result<wirelog_query::ResultTable, BackendError>;
    /// Per kind: rows, first and last time (files and bytes as the backend
    /// counts its storage), for `/api/extent` and the UI's timeline.
    fn extent(&self) -> Result<Vec<KindExtent>, String>;
}

/// What to serve.
pub struct Options {
    pub listen: SocketAddr,
    /// The store the API reads (`None`: metrics and health only, unless
    /// `backend`).
    pub store: Option<PathBuf>,
    /// Answers the API instead of the store.
    pub backend: Option<Arc<dyn Backend>>,
    /// Required on every request when set.
    pub token: Option<String>,
    /// Serve the UI and the API (`false`: `/metrics` only, for
    /// `capture --metrics-listen`).
    pub api: bool,
    pub live: Option<Arc<dyn Live>>,
    pub limits: Limits,
    /// Kept packets (`--pcap-dir`): `/api/pcap?uid=` downloads a
    /// connection's packets from here.
    pub pcap_dir: Option<PathBuf>,
    /// A running capture's records not yet in the store (`capture
    /// --listen`): every query reads them with the store, each record once
    /// (see `wirelog_store::live`).
    pub records: Option<Arc<wirelog_store::LiveRecords>>,
}

/// Loopback needs nothing; any other address needs a token.
pub fn check_listen(addr: &SocketAddr, token: Option<&str>, flag: &str) -> Result<(), String> {
    if let Some(t) = token {
        if t.trim().is_empty() {
            return Err(format!("{flag}: the token is empty"));
        }
        if t.len() < 16 {
            return Err(format!(
                "{flag}: the token has {} characters; give at least 16",
                t.len()
            ));
        }
    }
    if addr.ip().is_loopback() || token.is_some() {
        Ok(())
    } else {
        Err(format!(
            "{flag} {addr}: not a loopback address; anyone who reaches it could read the records, so give --token or --token-file too"
        ))
    }
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    thread: JoinHandle<Result<(), String>>,
}

impl Server {
    /// The bound address (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until the server stops (only its runtime failing to start
    /// stops it: accept errors are waited out).
    pub fn join(self) -> Result<(), String> {
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the server thread panicked".into()))
    }
}

/// Binds `opts.listen` (errors come back here, before any thread starts)
/// and serves on a thread of its own.
pub fn start(opts: Options) -> Result<Server, String> {
    check_listen(&opts.listen, opts.token.as_deref(), "--listen")?;
    let listener = TcpListener::bind(opts.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", opts.listen))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot listen on {}: {e}", opts.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("{}: {e}", opts.listen))?;
    let thread = std::thread::Builder::new()
        .name("wirelog-serve".into())
        .spawn(move || run(listener, opts))
        .map_err(|e| format!("cannot start the server thread: {e}"))?;
    Ok(Server { addr, thread })
}

fn run(listener: TcpListener, opts: Options) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(QUERY_THREADS + 1)
        .thread_name("wirelog-serve-q")
        .build()
        .map_err(|e| format!("cannot start the server's runtime: {e}"))?;
    let opts_timeout = opts.limits.timeout;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| e.to_string())?;
        let state = Arc::new(api::State::new(opts));
        tokio::spawn(health::sample_loop(state.clone()));
        let request_timeout = opts_timeout + conn::REQUEST_MARGIN;
        let app = api::router(state);
        conn::serve(listener, app, request_timeout).await;
        Ok(())
    })
}
