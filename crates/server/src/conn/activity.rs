//! What a connection is doing, for its watchdog and for the choice of
//! which idle connection makes room ([`super::registry`]).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::ConnectionLimits;

/// What a connection is doing, for its watchdog.
#[derive(Debug)]
pub(crate) struct Activity {
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
    pub(crate) fn new() -> Self {
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
    pub(crate) fn read(&self) {
        self.with(|s| {
            if s.in_flight == 0 && s.head_since.is_none() {
                s.head_since = Some(Instant::now());
            }
        });
    }

    /// Since when the connection has not served a request, when it is not
    /// serving one now (idle between requests, or still owing a head):
    /// such a connection may be closed to make room.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        self.with(|s| (s.in_flight == 0).then_some(s.idle_since))
    }

    /// Which timeout a connection past its deadline met: the header timeout
    /// while it owes a head, the idle timeout between requests.
    pub(crate) fn timeout_reason(&self) -> super::CloseReason {
        self.with(|s| {
            if s.head_since.is_some() || !s.served {
                super::CloseReason::HeaderTimeout
            } else {
                super::CloseReason::IdleTimeout
            }
        })
    }

    /// When the connection is to be closed, if nothing changes; `None`
    /// while a request runs.
    pub(crate) fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
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
pub(crate) struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    pub(crate) fn begin(activity: Arc<Activity>) -> Self {
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
pub(crate) struct Watched {
    pub(crate) inner: TcpStream,
    pub(crate) activity: Arc<Activity>,
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

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_the_connection() {
        let limits = ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1,
            max_connections_per_client: 1,
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
