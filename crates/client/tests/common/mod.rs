//! The test kit's service on a real socket (PostgreSQL or SQLite, and the
//! acquirer simulator), a fault proxy to put between it and the client, and
//! the client itself with a fast retry policy.

#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chargeonce_client::{Client, CreatePayment, IdempotencyKey, Money, RetryPolicy};
use chargeonce_prooftools as prooftools;
use chargeonce_testkit::{ServiceBuilder, TestService};
use tokio::net::TcpListener;

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

impl Fault {
    /// The shared proxy's fault for this one.
    fn wire(self) -> prooftools::Fault {
        let problem = |status: &'static str, code: &str| prooftools::Canned {
            status,
            content_type: "application/problem+json",
            retry_after: Some(1),
            body: format!(
                r#"{{"type":"about:blank","title":"injected","status":{},"detail":"injected by the test proxy","code":"{code}"}}"#,
                &status[..3]
            ),
        };
        match self {
            Self::Pass => prooftools::Fault::Pass,
            Self::LoseAnswer => prooftools::Fault::LoseAnswer,
            Self::ForwardThenHang => prooftools::Fault::ForwardThenHang(Duration::from_secs(60)),
            Self::TooManyRequests => {
                prooftools::Fault::Answer(problem("429 Too Many Requests", "too_many_requests"))
            }
            Self::Unavailable => {
                prooftools::Fault::Answer(problem("503 Service Unavailable", "store_unavailable"))
            }
            Self::GatewayRefuses => prooftools::Fault::Answer(prooftools::Canned {
                status: "400 Bad Request",
                content_type: "text/html",
                retry_after: None,
                body: "<html>bad request</html>".to_owned(),
            }),
        }
    }
}

/// The shared fault proxy (`chargeonce-prooftools`) between the client and
/// the server, applying one fault per new connection, in order, then a
/// default one, and remembering which it applied.
pub struct FaultProxy {
    pub addr: SocketAddr,
    pub base: String,
    applied: Arc<Mutex<Vec<Fault>>>,
    _proxy: prooftools::FaultProxy,
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
        let applied = Arc::new(Mutex::new(Vec::new()));
        let mut plan: VecDeque<Fault> = plan.iter().copied().collect();
        let log = applied.clone();
        let decide = move || {
            let fault = plan.pop_front().unwrap_or(then);
            log.lock().unwrap().push(fault);
            fault.wire()
        };
        let proxy =
            prooftools::FaultProxy::serve(listener, upstream, decide, Arc::default()).unwrap();
        Self {
            addr: proxy.addr(),
            base: proxy.base(),
            applied,
            _proxy: proxy,
        }
    }

    /// The faults applied so far, one per connection.
    pub fn connections(&self) -> Vec<Fault> {
        self.applied.lock().unwrap().clone()
    }
}

/// A free port nobody listens on (yet).
pub async fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}
