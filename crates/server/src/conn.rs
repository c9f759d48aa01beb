//! Serving HTTP/1 connections with limits: what a client may hold open and
//! for how long.
//!
//! [`serve_with`] accepts connections and serves each through hyper's HTTP/1
//! connection with these limits ([`ConnectionLimits`]):
//!
//! - **Header timeout**: a connection must deliver a whole request head
//!   within it, counted from the connection's start or from the first byte of
//!   the head; a silent socket or one that sends half a head is closed.
//! - **Idle timeout**: a kept-alive connection with no request for this long
//!   is closed.
//! - **Connection cap**: at most this many connections are open at once
//!   (each holds a permit of a semaphore); at the cap the server stops
//!   accepting until one closes, and new connections wait in the kernel's
//!   backlog. [`ConnectionLimits::fit_fd_limit`] lowers the cap to what the
//!   process's file limit allows, keeping head-room for the database and the
//!   acquirer.
//! - `accept` failing for want of descriptors (`EMFILE`, `ENFILE`) or memory
//!   backs off, 100 ms doubling to 1 s, instead of spinning; the first failure
//!   of a streak is logged, and the end of the streak.
//!
//! The two timeouts are watched per connection, outside hyper (hyper's own
//! header timeout restarts after every response, so it would close idle
//! connections at the header timeout too): the socket is wrapped to note when
//! a head starts arriving, and the service notes when a request starts and
//! ends. While a request runs, neither applies; the request's own limits
//! (body deadline, request timeout) are the router's (see [`crate::limits`]).
//!
//! On shutdown the listener is closed first (nothing more is accepted), then
//! every connection is shut down gracefully through hyper: idle ones close at
//! once, the others after the response of the request in flight. `serve_with`
//! returns once every connection is closed.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::ServiceExt;

/// Default of [`ConnectionLimits::header_timeout`].
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default of [`ConnectionLimits::idle_timeout`].
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default of [`ConnectionLimits::max_connections`].
pub const MAX_CONNECTIONS: usize = 10_000;

/// File descriptors kept free for everything but client connections when
/// nothing better is known: the store's and the simulator's files, the
/// listener, logs, the acquirer's and the relay's HTTP connections.
pub const FD_RESERVE: u64 = 128;

/// The first pause after `accept` ran out of descriptors.
const BACKOFF_START: Duration = Duration::from_millis(100);

/// The longest pause between two `accept`s that ran out of descriptors.
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What a client may hold open, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The longest a connection may take to send a request head, from its
    /// start or from the head's first byte (zero: no limit).
    pub header_timeout: Duration,
    /// The longest a kept-alive connection may sit between requests (zero:
    /// no limit).
    pub idle_timeout: Duration,
    /// The most connections open at once (at least 1).
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// The process's soft limit of open files (`RLIMIT_NOFILE`); `None` when it
/// is unlimited or cannot be read.
pub fn fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

impl ConnectionLimits {
    /// Lowers [`Self::max_connections`] so that, with one descriptor per
    /// connection, `reserve` descriptors of the process's file limit stay
    /// free for the rest (when the limit is small, half of it). Unchanged
    /// when the limit is unknown.
    pub fn fit_fd_limit(self, reserve: u64) -> Self {
        match fd_limit() {
            Some(limit) => self.fit(limit, reserve),
            None => self,
        }
    }

    /// [`Self::fit_fd_limit`] for a given file limit.
    pub fn fit(mut self, fd_limit: u64, reserve: u64) -> Self {
        let reserve = reserve.min(fd_limit / 2);
        let allowed = usize::try_from(fd_limit - reserve).unwrap_or(usize::MAX);
        self.max_connections = self.max_connections.min(allowed).max(1);
        self
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves,
/// then stops accepting, shuts every connection down gracefully and returns
/// once they are all closed.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut exhausted = Exhaustion::default();
    tokio::pin!(shutdown);
    loop {
        // At the cap, wait for a connection to close before accepting again.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => {
                exhausted.recovered();
                stream
            }
            Err(error) if out_of_resources(&error) => {
                let pause = exhausted.failed(&error);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = &mut shutdown => break,
                }
                continue;
            }
            Err(error) => {
                // A connection that died in the backlog (ECONNABORTED, ...).
                tracing::debug!(%error, "accept error");
                continue;
            }
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let watcher = graceful.watcher();
        let router = router.clone();
        tokio::spawn(async move {
            serve_connection(stream, router, limits, watcher).await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Whether `accept` failed for want of descriptors or memory: retrying at
/// once would fail the same way.
fn out_of_resources(error: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        Errno::from_io_error(error),
        Some(Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)
    )
}

/// A streak of `accept` failures for want of resources.
#[derive(Debug, Default)]
struct Exhaustion {
    failures: u64,
    since: Option<Instant>,
    pause: Duration,
}

impl Exhaustion {
    /// Counts a failure; the pause before the next `accept`.
    fn failed(&mut self, error: &io::Error) -> Duration {
        self.failures += 1;
        if self.since.is_none() {
            self.since = Some(Instant::now());
            self.pause = BACKOFF_START;
            tracing::warn!(
                %error,
                "accept failed for want of file descriptors or memory; backing off \
                 (lower --max-client-connections or raise the file limit)"
            );
        } else {
            self.pause = (self.pause * 2).min(BACKOFF_MAX);
        }
        self.pause
    }

    /// An `accept` succeeded: ends the streak.
    fn recovered(&mut self) {
        if let Some(since) = self.since.take() {
            tracing::warn!(
                failures = self.failures,
                after_ms = since.elapsed().as_millis() as u64,
                "accepting connections again"
            );
            self.failures = 0;
        }
    }
}

/// One connection: hyper's HTTP/1 connection, closed by the watchdog when
/// its header or idle timeout passes, shut down gracefully with the server.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    watcher: hyper_util::server::graceful::Watcher,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let service_activity = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let request_guard = RequestGuard::begin(service_activity.clone());
        let router = router.clone();
        async move {
            let response = router.oneshot(request.map(Body::new)).await;
            drop(request_guard);
            response
        }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service);
    let connection = watcher.watch(connection);
    tokio::pin!(connection);
    loop {
        let deadline = activity.deadline(&limits);
        // While a request runs there is no deadline; look again later.
        let wake = deadline.unwrap_or_else(|| Instant::now() + recheck(&limits));
        tokio::select! {
            served = &mut connection => {
                if let Err(error) = served {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(wake) => {
                if activity.deadline(&limits).is_some_and(|at| at <= Instant::now()) {
                    tracing::debug!("closing a connection past its header or idle timeout");
                    return;
                }
            }
        }
    }
}

/// How often a connection with a request in flight looks at its deadline.
fn recheck(limits: &ConnectionLimits) -> Duration {
    [limits.header_timeout, limits.idle_timeout]
        .into_iter()
        .filter(|d| !d.is_zero())
        .min()
        .unwrap_or(Duration::from_secs(60))
}

/// What a connection is doing, for its watchdog.
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
}

#[derive(Debug)]
struct ActivityState {
    /// Requests handed to the service and not answered yet.
    in_flight: usize,
    /// When the first byte of a head arrived, while no request ran.
    head_since: Option<Instant>,
    /// When the connection started, or its last request ended.
    idle_since: Instant,
    /// Whether a request has ended on this connection.
    served: bool,
}

impl Activity {
    fn new() -> Self {
        Self {
            state: Mutex::new(ActivityState {
                in_flight: 0,
                head_since: None,
                idle_since: Instant::now(),
                served: false,
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut ActivityState) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Bytes arrived: between requests, a head has started.
    fn read(&self) {
        self.with(|s| {
            if s.in_flight == 0 && s.head_since.is_none() {
                s.head_since = Some(Instant::now());
            }
        });
    }

    /// When the connection is to be closed, if nothing changes; `None`
    /// while a request runs.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        let after = |since: Instant, limit: Duration| (!limit.is_zero()).then(|| since + limit);
        self.with(|s| {
            if s.in_flight > 0 {
                None
            } else if let Some(since) = s.head_since {
                after(since, limits.header_timeout)
            } else if !s.served {
                // A new connection owes its first head within the header timeout.
                after(s.idle_since, limits.header_timeout)
            } else {
                after(s.idle_since, limits.idle_timeout)
            }
        })
    }
}

/// A request being served; dropping it (answered, or the connection gone)
/// starts the connection's idle time.
struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.with(|s| {
            s.in_flight += 1;
            s.head_since = None;
        });
        Self(activity)
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.with(|s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.served = true;
            s.idle_since = Instant::now();
        });
    }
}

/// A socket that tells its connection's [`Activity`] when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_under_the_file_limit() {
        let limits = ConnectionLimits::default();
        assert_eq!(limits.fit(1_048_576, 128).max_connections, 10_000);
        assert_eq!(limits.fit(1024, 128).max_connections, 896);
        assert_eq!(
            limits.fit(256, 160).max_connections,
            128,
            "half of a small limit"
        );
        assert_eq!(limits.fit(0, 128).max_connections, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_the_connection() {
        let limits = ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1,
        };
        let activity = Arc::new(Activity::new());
        let start = Instant::now();
        assert_eq!(
            activity.deadline(&limits),
            Some(start + limits.header_timeout)
        );
        let guard = RequestGuard::begin(activity.clone());
        assert_eq!(
            activity.deadline(&limits),
            None,
            "no deadline while serving"
        );
        activity.read();
        assert_eq!(
            activity.deadline(&limits),
            None,
            "body bytes are not a head"
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        drop(guard);
        let ended = Instant::now();
        assert_eq!(
            activity.deadline(&limits),
            Some(ended + limits.idle_timeout)
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        activity.read();
        assert_eq!(
            activity.deadline(&limits),
            Some(Instant::now() + limits.header_timeout),
            "a head started: the header timeout counts"
        );
    }
}
