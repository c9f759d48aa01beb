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
//!   (each holds a permit of a semaphore). [`ConnectionLimits::fit_fd_limit`]
//!   lowers the cap to what the process's file limit allows, keeping
//!   head-room for the database and the acquirer.
//! - **A share per client**: at most
//!   [`ConnectionLimits::max_connections_per_client`] connections from one
//!   client address (an IPv4 address, or an IPv6 /64: one host's share).
//! - **Idle connections make room** (nginx's reuse of idle keep-alive
//!   connections is the model): a new connection over either cap closes
//!   the least recently active connection that is not serving a request
//!   (an idle keep-alive one, or one that has not sent a whole head yet),
//!   among the client's own for its share, among all for the global cap. So
//!   sockets held open and silent cannot keep a new client waiting: only
//!   requests being served hold their slots. When every slot serves a
//!   request, a new connection over the global cap waits in the kernel's
//!   backlog until one ends, and one over its client's share is closed at
//!   once.
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
//! Every request carries its peer's address as axum's
//! [`ConnectInfo`]`<SocketAddr>` (the limits on unauthenticated work and on
//! console logins count per client address).
//!
//! On shutdown the listener is closed first (nothing more is accepted), then
//! every connection is shut down gracefully through hyper: idle ones close at
//! once, the others after the response of the request in flight. `serve_with`
//! returns once every connection is closed.

mod activity;
mod registry;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use activity::{Activity, RequestGuard, Watched};
pub use registry::ClientKey;
use registry::{Registration, Registry};
use tower::ServiceExt;

/// Default of [`ConnectionLimits::header_timeout`].
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default of [`ConnectionLimits::idle_timeout`].
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default of [`ConnectionLimits::max_connections`].
pub const MAX_CONNECTIONS: usize = 10_000;

/// Default of [`ConnectionLimits::max_connections_per_client`]: room for a
/// merchant's pools behind one NAT address, a tenth of the default cap.
pub const MAX_CONNECTIONS_PER_CLIENT: usize = 1_000;

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
    /// The most connections open at once from one client address (an IPv4
    /// address or an IPv6 /64; at least 1).
    pub max_connections_per_client: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_connections_per_client: MAX_CONNECTIONS_PER_CLIENT,
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

/// Why the server closed a client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Idle (or not yet a whole head): closed for a new connection at the
    /// global cap.
    MakeRoom,
    /// Idle: closed for a new connection of the same client at its share.
    ClientShare,
    /// A new connection over its client's share while all of them serve
    /// requests: closed at once.
    ShareBusy,
    /// No whole request head within the header timeout.
    HeaderTimeout,
    /// Kept alive with no request for the idle timeout.
    IdleTimeout,
}

impl CloseReason {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MakeRoom => "make_room",
            Self::ClientShare => "client_share",
            Self::ShareBusy => "share_busy",
            Self::HeaderTimeout => "header_timeout",
            Self::IdleTimeout => "idle_timeout",
        }
    }
}

/// Told when the server closes a client connection (the service counts it
/// in a metric).
pub type CloseObserver = Arc<dyn Fn(CloseReason) + Send + Sync>;

/// Serves `router` on `listener` within `limits` until `shutdown` resolves,
/// then stops accepting, shuts every connection down gracefully and returns
/// once they are all closed.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_observed(listener, router, limits, Arc::new(|_| {}), shutdown).await
}

/// [`serve_with`], telling `closed` of every connection the server closes.
pub async fn serve_observed(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    closed: CloseObserver,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let registry = Arc::new(Registry::default());
    let graceful = GracefulShutdown::new();
    let mut exhausted = Exhaustion::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                exhausted.recovered();
                accepted
            }
            Err(error) if out_of_resources(&error) => {
                // Descriptors ran out below the cap: an idle connection
                // gives its own back.
                if registry.make_room(None) {
                    closed(CloseReason::MakeRoom);
                }
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
        let client = ClientKey::of(peer.ip());
        if !fits_share(&registry, client, &limits, &closed) {
            tracing::debug!(%peer, "closing a connection over its client's share, all busy");
            closed(CloseReason::ShareBusy);
            continue;
        }
        let permit = tokio::select! {
            permit = slot(&permits, &registry, &closed) => match permit {
                Some(permit) => permit,
                None => break,
            },
            () = &mut shutdown => break,
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let activity = Arc::new(Activity::new());
        let close = Arc::new(Notify::new());
        let registration = registry.register(client, activity.clone(), close.clone());
        let connection = Connection {
            stream,
            peer,
            activity,
            close,
        };
        let watcher = graceful.watcher();
        let router = router.clone();
        let observer = closed.clone();
        tokio::spawn(async move {
            if let Some(reason) = serve_connection(connection, router, limits, watcher).await {
                observer(reason);
            }
            drop::<(Registration, OwnedSemaphorePermit)>((registration, permit));
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Whether a new connection of `client` fits its share, once the client's
/// least recently active idle connection (if it is at its share) is closed.
fn fits_share(
    registry: &Registry,
    client: ClientKey,
    limits: &ConnectionLimits,
    closed: &CloseObserver,
) -> bool {
    if registry.share(client) < limits.max_connections_per_client.max(1) {
        return true;
    }
    let made = registry.make_room(Some(client));
    if made {
        closed(CloseReason::ClientShare);
    }
    made
}

/// A slot under the global cap: at once when one is free; else an idle
/// connection is closed to free one, or, when every connection serves a
/// request, the next to end frees it. `None` when the semaphore is closed.
async fn slot(
    permits: &Arc<Semaphore>,
    registry: &Registry,
    closed: &CloseObserver,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = permits.clone().try_acquire_owned() {
        return Some(permit);
    }
    if registry.make_room(None) {
        closed(CloseReason::MakeRoom);
    } else {
        tracing::debug!("every connection serves a request: waiting for one to end");
    }
    permits.clone().acquire_owned().await.ok()
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

/// An accepted connection and what its watchdog and the registry share.
struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    activity: Arc<Activity>,
    /// Notified when the connection is chosen to make room.
    close: Arc<Notify>,
}

/// One connection: hyper's HTTP/1 connection, closed by the watchdog when
/// its header or idle timeout passes or when it is chosen to make room,
/// shut down gracefully with the server. Returns why the watchdog closed it
/// (`None`: it ended on its own, or was chosen to make room, which the
/// chooser counts).
async fn serve_connection(
    connection: Connection,
    router: Router,
    limits: ConnectionLimits,
    watcher: hyper_util::server::graceful::Watcher,
) -> Option<CloseReason> {
    let Connection {
        stream,
        peer,
        activity,
        close,
    } = connection;
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let service_activity = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let request_guard = RequestGuard::begin(service_activity.clone());
        let router = router.clone();
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(peer));
        async move {
            let response = router.oneshot(request).await;
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
                return None;
            }
            () = close.notified() => {
                // Chosen while it served no request; one may have begun
                // since (its head arrived): then it stays.
                if activity.idle_since().is_some() {
                    tracing::debug!(%peer, "closing an idle connection to make room");
                    return None;
                }
            }
            () = tokio::time::sleep_until(wake) => {
                if activity.deadline(&limits).is_some_and(|at| at <= Instant::now()) {
                    tracing::debug!("closing a connection past its header or idle timeout");
                    return Some(activity.timeout_reason());
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
}
