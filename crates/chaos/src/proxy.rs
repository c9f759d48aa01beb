//! The fault proxy in front of every instance. Clients connect to it, one
//! connection per request, and at set rates it delays the request, resets the
//! connection before forwarding anything, or forwards the request and drops
//! the answer (the client never learns what happened). An instance that is
//! down gets the client a `502`, as from a load balancer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::report::ProxyFigures;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::error::ChaosError;

/// How often each fault strikes a client connection.
#[derive(Debug, Clone, Copy)]
pub struct FaultRates {
    /// Share delayed (uniformly up to `max_delay`) before forwarding.
    pub delay: f64,
    /// The longest delay.
    pub max_delay: Duration,
    /// Share reset before anything is forwarded.
    pub reset: f64,
    /// Share whose answer is dropped after the request was forwarded.
    pub drop: f64,
}

/// What the proxies did, summed over a run.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub connections: AtomicU64,
    /// Delayed before forwarding.
    pub delayed: AtomicU64,
    /// Reset before forwarding.
    pub reset: AtomicU64,
    /// Forwarded, answer dropped.
    pub answers_dropped: AtomicU64,
    /// Answered `502` because the instance was down.
    pub upstream_down: AtomicU64,
}

impl ProxyStats {
    /// The figures so far, for the report.
    pub fn snapshot(&self) -> ProxyFigures {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ProxyFigures {
            connections: get(&self.connections),
            delayed: get(&self.delayed),
            reset: get(&self.reset),
            answers_dropped: get(&self.answers_dropped),
            instance_down: get(&self.upstream_down),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Pass,
    Delay(Duration),
    Reset,
    DropAnswer,
}

/// One proxy, in front of one instance.
#[derive(Debug)]
pub struct FaultProxy {
    /// The port clients connect to.
    pub port: u16,
    faulty: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free port and forwards to `127.0.0.1:upstream`, drawing
    /// each connection's fate from `seed`.
    pub async fn start(
        upstream: u16,
        rates: FaultRates,
        seed: u64,
        stats: Arc<ProxyStats>,
    ) -> Result<Self, ChaosError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| ChaosError::Setup(format!("binding a proxy: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| ChaosError::Setup(format!("proxy address: {e}")))?
            .port();
        let faulty = Arc::new(AtomicBool::new(true));
        let on = faulty.clone();
        let task = tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                stats.connections.fetch_add(1, Ordering::Relaxed);
                // Draw every time, so the sequence does not depend on healing.
                let draw: f64 = rng.random();
                let delay = rng.random_range(0..=millis(rates.max_delay));
                let fault = if !on.load(Ordering::Relaxed) {
                    Fault::Pass
                } else if draw < rates.reset {
                    Fault::Reset
                } else if draw < rates.reset + rates.drop {
                    Fault::DropAnswer
                } else if draw < rates.reset + rates.drop + rates.delay {
                    Fault::Delay(Duration::from_millis(delay))
                } else {
                    Fault::Pass
                };
                tokio::spawn(handle(client, upstream, fault, stats.clone()));
            }
        });
        Ok(Self { port, faulty, task })
    }

    /// Stops injecting faults: every connection passes from now on.
    pub fn heal(&self) {
        self.faulty.store(false, Ordering::Relaxed);
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

async fn handle(mut client: TcpStream, upstream: u16, fault: Fault, stats: Arc<ProxyStats>) {
    let _ = client.set_nodelay(true);
    match fault {
        Fault::Reset => {
            stats.reset.fetch_add(1, Ordering::Relaxed);
            let _ = read_request(&mut client).await;
            // Dropping the socket closes it with nothing answered.
        }
        Fault::Pass | Fault::Delay(_) => {
            if let Fault::Delay(delay) = fault {
                stats.delayed.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(delay).await;
            }
            let Some(mut server) = connect(&mut client, upstream, &stats).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
        Fault::DropAnswer => {
            let Some(server) = connect(&mut client, upstream, &stats).await else {
                return;
            };
            let (mut client_read, client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let forward = tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
            });
            // The first byte of the answer: the instance has decided.
            let mut buf = [0_u8; 1];
            if server_read.read(&mut buf).await.is_ok_and(|n| n > 0) {
                stats.answers_dropped.fetch_add(1, Ordering::Relaxed);
            }
            forward.abort();
            drop(client_write);
        }
    }
}

/// Connects to the instance; when it is down, answers the client `502`.
async fn connect(client: &mut TcpStream, upstream: u16, stats: &ProxyStats) -> Option<TcpStream> {
    match TcpStream::connect(("127.0.0.1", upstream)).await {
        Ok(server) => {
            let _ = server.set_nodelay(true);
            Some(server)
        }
        Err(_) => {
            stats.upstream_down.fetch_add(1, Ordering::Relaxed);
            let _ = read_request(client).await;
            let body = "instance down";
            let answer = format!(
                "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.write_all(answer.as_bytes()).await;
            let _ = client.shutdown().await;
            None
        }
    }
}

/// Reads one HTTP/1.1 request (headers and a `content-length` body).
async fn read_request(client: &mut TcpStream) -> std::io::Result<()> {
    let mut data = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        let n = client.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
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
                return Ok(());
            }
        }
    }
}
