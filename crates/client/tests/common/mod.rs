//! The test kit's service on a real socket (PostgreSQL or SQLite, and the
//! acquirer simulator), a fault proxy to put between it and the client, and
//! the client itself with a fast retry policy.

#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chargeonce_client::{Client, CreatePayment, IdempotencyKey, Money, RetryPolicy};
use chargeonce_testkit::{ServiceBuilder, TestService};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub use chargeonce_testkit::{Backend, SECRET, SHOP};

/// The test kit's service, with the simulator's routes under `/sim` and a
/// `tok_slow` of 1 s.
pub async fn start(backend: Backend) -> TestService {
    start_with(backend, |service| service).await
}

/// The same with more options for the service.
pub async fn start_with(
    backend: Backend,
    options: impl FnOnce(ServiceBuilder) -> ServiceBuilder,
) -> TestService {
    let service = TestService::builder(backend)
        .slow(Duration::from_millis(1000))
        .sim_routes();
    options(service).start().await
}

/// What the client tests ask of the service.
pub trait Served {
    /// A client of this server (directly, no proxy).
    fn client(&self) -> Client;

    /// Succeeded charges in the acquirer's ledger for one order.
    async fn charges_for(&self, reference: &str) -> usize;
}

impl Served for TestService {
    fn client(&self) -> Client {
        client_for(&self.base, fast_policy())
    }

    async fn charges_for(&self, reference: &str) -> usize {
        self.charges(reference).await.len()
    }
}

/// Retries quickly, so every path runs in a second or two.
pub fn fast_policy() -> RetryPolicy {
    RetryPolicy::default()
        .budget(Duration::from_secs(8))
        .attempt_timeout(Duration::from_secs(5))
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .prefer_wait(None)
}

pub fn client_for(base: &str, policy: RetryPolicy) -> Client {
    Client::builder(base, SHOP, SECRET)
        .retry_policy(policy)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// A unique order for one test.
pub fn order(label: &str) -> String {
    format!("{label}-{}", &uuid_like())
}

fn uuid_like() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{nanos:x}")
}

/// The seed's order: 1500.00 RUB.
pub fn payment(reference: &str, token: &str) -> CreatePayment {
    CreatePayment::new(Money::parse("1500.00", "RUB").unwrap(), reference, token)
}

pub fn pay_key(reference: &str) -> IdempotencyKey {
    IdempotencyKey::for_operation(reference, "pay").unwrap()
}

/// What the proxy does to one client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward both ways.
    Pass,
    /// Forward the request; when the server starts answering (it has
    /// committed), close the client's side: the answer is lost.
    LoseAnswer,
    /// Forward the request, swallow the answer and keep the client's side open:
    /// the client times out after the server committed.
    ForwardThenHang,
    /// Read the request and answer `429` with `Retry-After: 1`, forwarding nothing.
    TooManyRequests,
    /// Read the request and answer `503` with `Retry-After: 1`, forwarding nothing.
    Unavailable,
    /// Read the request and answer a gateway's plain-text `400`, forwarding nothing.
    GatewayRefuses,
}

/// A TCP proxy between the client and the server that applies one fault per
/// new connection, in order, then a default one.
pub struct FaultProxy {
    pub addr: SocketAddr,
    pub base: String,
    state: Arc<ProxyState>,
    task: JoinHandle<()>,
}

struct ProxyState {
    plan: Mutex<VecDeque<Fault>>,
    then: Fault,
    connections: Mutex<Vec<Fault>>,
}

impl FaultProxy {
    /// A proxy on a fresh port: the faults in `plan` for the first
    /// connections, then `then` for every later one.
    pub async fn start(upstream: SocketAddr, plan: &[Fault], then: Fault) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, upstream, plan, then)
    }

    /// The same on a listener the caller bound.
    pub fn serve(listener: TcpListener, upstream: SocketAddr, plan: &[Fault], then: Fault) -> Self {
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ProxyState {
            plan: Mutex::new(plan.iter().copied().collect()),
            then,
            connections: Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let fault = shared
                    .plan
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or(shared.then);
                shared.connections.lock().unwrap().push(fault);
                tokio::spawn(handle(client, upstream, fault));
            }
        });
        Self {
            addr,
            base: format!("http://{addr}"),
            state,
            task,
        }
    }

    /// The faults applied so far, one per connection.
    pub fn connections(&self) -> Vec<Fault> {
        self.state.connections.lock().unwrap().clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(mut client: TcpStream, upstream: SocketAddr, fault: Fault) {
    match fault {
        Fault::Pass => {
            let Ok(mut server) = TcpStream::connect(upstream).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
        Fault::LoseAnswer | Fault::ForwardThenHang => {
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            let (mut client_read, client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let forward = tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
            });
            // Wait for the first byte of the answer: the server has finished.
            let mut buf = [0_u8; 1];
            let _ = server_read.read(&mut buf).await;
            forward.abort();
            if fault == Fault::ForwardThenHang {
                // Keep the client's connection open, silent, until it gives up.
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            drop(client_write);
        }
        Fault::GatewayRefuses => {
            read_request(&mut client).await;
            let body = "<html>bad request</html>";
            let answer = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.write_all(answer.as_bytes()).await;
            let _ = client.shutdown().await;
        }
        Fault::TooManyRequests | Fault::Unavailable => {
            read_request(&mut client).await;
            let (status, code) = if fault == Fault::TooManyRequests {
                ("429 Too Many Requests", "too_many_requests")
            } else {
                ("503 Service Unavailable", "store_unavailable")
            };
            let body = format!(
                r#"{{"type":"about:blank","title":"injected","status":{},"detail":"injected by the test proxy","code":"{code}"}}"#,
                &status[..3]
            );
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/problem+json\r\nretry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.write_all(answer.as_bytes()).await;
            let _ = client.shutdown().await;
        }
    }
}

/// Reads one HTTP/1.1 request (headers and a `content-length` body).
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
        let text = String::from_utf8_lossy(&data);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
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
}

/// A free port nobody listens on (yet).
pub async fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}
