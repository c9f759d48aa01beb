//! A TCP fault proxy: clients connect to it, and for each new connection a
//! [`Decide`] chooses a [`Fault`]: forward both ways, delay first, reset
//! before forwarding anything, forward the request and lose the answer
//! once the server has started to give it (the client never learns what
//! happened), forward and hang, or answer in the server's place. A server
//! that is down gets the client a `502`, as from a load balancer.
//! [`FaultProxy::heal`] lets every later connection pass.
//!
//! ```
//! use chargeonce_prooftools::{Fault, FaultProxy};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let upstream: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap_or_else(|_| unreachable!());
//! let mut first = true;
//! let proxy = FaultProxy::start(upstream, move || {
//!     // Lose the first answer, pass the rest.
//!     if std::mem::take(&mut first) { Fault::LoseAnswer } else { Fault::Pass }
//! })
//! .await?;
//! assert!(proxy.base().starts_with("http://127.0.0.1:"));
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does to one client connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Forward both ways.
    Pass,
    /// Wait, then forward both ways.
    Delay(Duration),
    /// Read the request and close the connection: nothing forwarded.
    Reset,
    /// Forward the request; when the server starts answering (it has
    /// acted), close the client's side: the answer is lost.
    LoseAnswer,
    /// Forward the request, swallow the answer and keep the client's side
    /// open, silent, this long: the client times out after the server acted.
    ForwardThenHang(Duration),
    /// Read the request and answer this, forwarding nothing.
    Answer(Canned),
}

/// An answer the proxy gives in the server's place (a gateway's refusal,
/// an injected `429` or `503`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canned {
    /// The status line after `HTTP/1.1 `, e.g. `429 Too Many Requests`.
    pub status: &'static str,
    /// The `content-type`.
    pub content_type: &'static str,
    /// A `retry-after` in seconds, if any.
    pub retry_after: Option<u32>,
    /// The body.
    pub body: String,
}

impl Canned {
    fn bytes(&self) -> Vec<u8> {
        let retry = self
            .retry_after
            .map(|s| format!("retry-after: {s}\r\n"))
            .unwrap_or_default();
        format!(
            "HTTP/1.1 {}\r\ncontent-type: {}\r\n{retry}content-length: {}\r\nconnection: close\r\n\r\n{}",
            self.status,
            self.content_type,
            self.body.len(),
            self.body
        )
        .into_bytes()
    }
}

/// Chooses the fault of each new connection, in the order they come.
pub trait Decide: Send + 'static {
    /// The fault for the next connection.
    fn decide(&mut self) -> Fault;
}

impl<F: FnMut() -> Fault + Send + 'static> Decide for F {
    fn decide(&mut self) -> Fault {
        self()
    }
}

/// What proxies did, counted (one set may be shared by several proxies).
#[derive(Debug, Default)]
pub struct ProxyStats {
    connections: AtomicU64,
    delayed: AtomicU64,
    reset: AtomicU64,
    answers_lost: AtomicU64,
    answered: AtomicU64,
    upstream_down: AtomicU64,
}

/// [`ProxyStats`] read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    /// Client connections accepted.
    pub connections: u64,
    /// Delayed before forwarding.
    pub delayed: u64,
    /// Reset before forwarding.
    pub reset: u64,
    /// Forwarded, the answer lost (or swallowed by a hang).
    pub answers_lost: u64,
    /// Answered by the proxy in the server's place.
    pub answered: u64,
    /// Answered `502` because the server was down.
    pub upstream_down: u64,
}

impl ProxyStats {
    /// The counts so far.
    pub fn snapshot(&self) -> ProxyCounts {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ProxyCounts {
            connections: get(&self.connections),
            delayed: get(&self.delayed),
            reset: get(&self.reset),
            answers_lost: get(&self.answers_lost),
            answered: get(&self.answered),
            upstream_down: get(&self.upstream_down),
        }
    }

    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// One proxy in front of one server; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    stats: Arc<ProxyStats>,
    healed: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on a free port of 127.0.0.1 to `upstream`, its own counts.
    pub async fn start(upstream: SocketAddr, decide: impl Decide) -> std::io::Result<Self> {
        Self::counted(upstream, decide, Arc::default()).await
    }

    /// The same, counting into `stats` (shared with other proxies).
    pub async fn counted(
        upstream: SocketAddr,
        decide: impl Decide,
        stats: Arc<ProxyStats>,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Self::serve(listener, upstream, decide, stats)
    }

    /// The same on a listener the caller bound.
    pub fn serve(
        listener: TcpListener,
        upstream: SocketAddr,
        mut decide: impl Decide,
        stats: Arc<ProxyStats>,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let healed = Arc::new(AtomicBool::new(false));
        let (on_stats, on_healed) = (stats.clone(), healed.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                ProxyStats::add(&on_stats.connections);
                // Decided every time, so a seeded sequence does not depend
                // on when the proxy was healed.
                let fault = decide.decide();
                let fault = if on_healed.load(Ordering::Relaxed) {
                    Fault::Pass
                } else {
                    fault
                };
                tokio::spawn(handle(client, upstream, fault, on_stats.clone()));
            }
        });
        Ok(Self {
            addr,
            stats,
            healed,
            task,
        })
    }

    /// Stops injecting faults: every later connection passes.
    pub fn heal(&self) {
        self.healed.store(true, Ordering::Relaxed);
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What this proxy (and those sharing its counts) did.
    pub fn stats(&self) -> &ProxyStats {
        &self.stats
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(mut client: TcpStream, upstream: SocketAddr, fault: Fault, stats: Arc<ProxyStats>) {
    let _ = client.set_nodelay(true);
    match fault {
        Fault::Reset => {
            ProxyStats::add(&stats.reset);
            read_request(&mut client).await;
            // Dropping the socket closes it with nothing answered.
        }
        Fault::Answer(canned) => {
            ProxyStats::add(&stats.answered);
            read_request(&mut client).await;
            let _ = client.write_all(&canned.bytes()).await;
            let _ = client.shutdown().await;
        }
        Fault::Pass | Fault::Delay(_) => {
            if let Fault::Delay(delay) = fault {
                ProxyStats::add(&stats.delayed);
                tokio::time::sleep(delay).await;
            }
            let Some(mut server) = connect(&mut client, upstream, &stats).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
        Fault::LoseAnswer | Fault::ForwardThenHang(_) => {
            let Some(server) = connect(&mut client, upstream, &stats).await else {
                return;
            };
            let (mut client_read, client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let forward = tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
            });
            // The first byte of the answer: the server has acted.
            let mut buf = [0_u8; 1];
            if server_read.read(&mut buf).await.is_ok_and(|n| n > 0) {
                ProxyStats::add(&stats.answers_lost);
            }
            forward.abort();
            if let Fault::ForwardThenHang(hang) = fault {
                tokio::time::sleep(hang).await;
            }
            drop(client_write);
        }
    }
}

/// Connects to the server; when it is down, answers the client `502`.
async fn connect(
    client: &mut TcpStream,
    upstream: SocketAddr,
    stats: &ProxyStats,
) -> Option<TcpStream> {
    match TcpStream::connect(upstream).await {
        Ok(server) => {
            let _ = server.set_nodelay(true);
            Some(server)
        }
        Err(_) => {
            ProxyStats::add(&stats.upstream_down);
            read_request(client).await;
            let down = Canned {
                status: "502 Bad Gateway",
                content_type: "text/plain",
                retry_after: None,
                body: "instance down".to_owned(),
            };
            let _ = client.write_all(&down.bytes()).await;
            let _ = client.shutdown().await;
            None
        }
    }
}

/// Reads one HTTP/1.1 request (its head and a `content-length` body), or
/// until the client closes or fails.
async fn read_request(client: &mut TcpStream) {
    let mut data = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        let Ok(n) = client.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&data[..end]);
        let length = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())
                    .flatten()
            })
            .unwrap_or(0);
        if data.len() >= end + 4 + length {
            return;
        }
    }
}
