//! Connections under abuse: the accept loop and what bounds each
//! connection, so that slow, idle or too many clients cannot hold the
//! server.
//!
//! - **Header read** ([`HEADER_READ_TIMEOUT`]): from the moment the server
//!   waits for a request (a new connection, or a kept-alive one after its
//!   last response) to the request's complete head. A client that sends
//!   its head a byte at a time (slowloris) is closed then.
//! - **Idle** ([`IDLE_TIMEOUT`]): a connection on which nothing moves --
//!   no byte read since the last byte written (or since it was accepted)
//!   -- while no request is being answered, is closed. This ends idle
//!   keep-alive connections, clients that connect and send nothing, and
//!   clients that stop reading an answer.
//! - **Request** (the query timeout plus [`REQUEST_MARGIN`]): an answer
//!   not ready by then is a 503 (queries have their own time limit; this
//!   bounds everything else a request waits for).
//! - **Open connections** ([`MAX_CONNECTIONS`]): at the cap, a new
//!   connection closes the oldest one that has not yet made a request the
//!   token let through (with no token: any answered request); when every
//!   open connection has, the new one is closed instead.

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A request's head must be complete this long after the server starts
/// waiting for it.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection with no traffic while no request is answered is closed
/// after this long.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(5);
/// A request is answered within the query timeout plus this.
pub const REQUEST_MARGIN: Duration = Duration::from_secs(5);
/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 256;

/// Set on a connection once a request on it passed the token check (the
/// auth middleware finds it among the request's extensions).
#[derive(Clone, Default)]
pub(crate) struct Trusted(Arc<AtomicBool>);

impl Trusted {
    pub fn set(&self) {
        self.0.store(true, Relaxed);
    }
}

/// One open connection as the registry sees it.
struct Entry {
    trusted: Trusted,
    close: Arc<Notify>,
}

/// The open connections, by accept order.
#[derive(Default)]
struct Registry {
    open: Mutex<BTreeMap<u64, Entry>>,
}

impl Registry {
    /// Makes room for connection `id`: `false` when every open connection
    /// is trusted (the new one is not admitted).
    fn admit(&self, id: u64, trusted: Trusted, close: Arc<Notify>, cap: usize) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= cap {
            let victim = open.iter().find(|(_, e)| !e.trusted.0.load(Relaxed)).map(|(k, _)| *k);
            match victim.and_then(|k| open.remove(&k)) {
                Some(e) => e.close.notify_one(),
                None => return false,
            }
        }
        open.insert(id, Entry { trusted, close });
        true
    }

    fn gone(&self, id: u64) {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }
}

/// Accepts connections and serves each on a task of its own, within the
/// bounds above. Runs until the listener fails for good.
pub(crate) async fn serve(listener: TcpListener, app: Router, request_timeout: Duration) {
    let registry = Arc::new(Registry::default());
    let app = app.layer(axum::middleware::from_fn(move |req, next| request_deadline(req, next, request_timeout)));
    let mut next_id = 0u64;
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of descriptors, or a connection reset before it was
                // accepted: pause a moment rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        let trusted = Trusted::default();
        let close = Arc::new(Notify::new());
        if !registry.admit(id, trusted.clone(), close.clone(), MAX_CONNECTIONS) {
            drop(stream);
            continue;
        }
        let registry = registry.clone();
        let app = app.clone();
        tokio::spawn(async move {
            one(stream, app, trusted, close).await;
            registry.gone(id);
        });
    }
}

/// Serves one connection until it ends, is idle, or is closed for room.
async fn one(stream: TcpStream, app: Router, trusted: Trusted, close: Arc<Notify>) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: stream, activity: activity.clone() });
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(trusted.clone());
        let mut app = app.clone();
        tower_service::Service::call(&mut app, req)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true)
        .serve_connection(io, svc);
    tokio::select! {
        _ = conn => {}
        _ = close.notified() => {}
        _ = idle(&activity) => {}
    }
}

/// Ends once the connection has been idle for [`IDLE_TIMEOUT`]: nothing
/// read since the last write (a request being answered has been read
/// after the last write, so it is never idle).
async fn idle(a: &Activity) {
    loop {
        let (read, wrote) = (a.read.load(Relaxed), a.wrote.load(Relaxed));
        if read > wrote {
            // A request arriving or being answered: the header and request
            // timeouts bound it.
            tokio::time::sleep(IDLE_TIMEOUT).await;
            continue;
        }
        let at = a.start + Duration::from_millis(wrote) + IDLE_TIMEOUT;
        if Instant::now() >= at {
            return;
        }
        tokio::time::sleep_until(at.into()).await;
    }
}

/// When bytes last moved each way, in ms since the connection was accepted.
struct Activity {
    start: Instant,
    read: AtomicU64,
    wrote: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity { start: Instant::now(), read: AtomicU64::new(0), wrote: AtomicU64::new(0) }
    }

    fn now(&self) -> u64 {
        // +1: a byte moved in the first millisecond is later than "accepted".
        self.start.elapsed().as_millis() as u64 + 1
    }
}

/// A stream that notes when bytes move.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let t = self.activity.now();
            self.activity.read.store(t, Relaxed);
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            let t = self.activity.now();
            self.activity.wrote.store(t, Relaxed);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            let t = self.activity.now();
            self.activity.wrote.store(t, Relaxed);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request whose answer is not ready within `timeout` gets a 503.
async fn request_deadline(
    req: axum::extract::Request,
    next: axum::middleware::Next,
    timeout: Duration,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => crate::api::ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            None,
            format!("the request took longer than {} s and was stopped", timeout.as_secs_f64()),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_untrusted_connection_goes_first() {
        let r = Registry::default();
        let (t1, t2, t3) = (Trusted::default(), Trusted::default(), Trusted::default());
        let (c1, c2) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        assert!(r.admit(1, t1.clone(), c1.clone(), 2));
        assert!(r.admit(2, t2.clone(), c2.clone(), 2));
        t1.set();
        // 1 is trusted: 2 makes room.
        assert!(r.admit(3, t3.clone(), Arc::new(Notify::new()), 2));
        let open: Vec<u64> = r.open.lock().unwrap().keys().copied().collect();
        assert_eq!(open, vec![1, 3]);
        t3.set();
        // All trusted: the newcomer is refused.
        assert!(!r.admit(4, Trusted::default(), Arc::new(Notify::new()), 2));
        r.gone(1);
        assert!(r.admit(5, Trusted::default(), Arc::new(Notify::new()), 2));
    }
}
