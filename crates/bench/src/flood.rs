//! An unauthenticated flood beside a scenario (`chargeonce bench ...
//! --flood N`): N closed-loop workers send `GET /v1/payments` with random
//! shop ids and secrets, from their own local address (`--flood-from`, so
//! the service counts them as another client than the measured shop). The
//! scenario's own figures then show what the flood costs a real shop; the
//! flood's answers are tallied by status (401 until the address's failure
//! budget is spent, 429 after it; a 5xx is a failure of the run).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use rand::RngCore;
use serde::Serialize;
use std::time::Instant;

use crate::BenchError;

/// The flood's shape.
#[derive(Debug, Clone, Copy)]
pub struct FloodConfig {
    /// Concurrent flooding requests.
    pub connections: usize,
    /// The local address they come from (`None`: the system's choice).
    pub from: Option<IpAddr>,
}

/// What the flood got.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FloodReport {
    /// Requests sent.
    pub requests: u64,
    /// Answers by status code (`"none"`: no answer).
    pub statuses: BTreeMap<String, u64>,
    /// 5xx answers and requests without an answer: the service gave way.
    pub failures: u64,
}

impl FloodReport {
    fn count(&mut self, status: Option<u16>) {
        self.requests += 1;
        let key = status.map_or_else(|| "none".to_owned(), |s| s.to_string());
        *self.statuses.entry(key).or_insert(0) += 1;
        if status.is_none_or(|s| s >= 500) {
            self.failures += 1;
        }
    }

    fn merge(&mut self, other: Self) {
        self.requests += other.requests;
        self.failures += other.failures;
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_insert(0) += n;
        }
    }
}

/// Starts the flood against `base` until `deadline`; its report when joined.
pub fn start(
    base: &str,
    config: FloodConfig,
    deadline: Instant,
) -> Result<tokio::task::JoinHandle<FloodReport>, BenchError> {
    let mut builder = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(config.connections.max(1));
    if let Some(ip) = config.from {
        builder = builder.local_address(ip);
    }
    let http = builder
        .build()
        .map_err(|e| BenchError::Config(format!("building the flood's HTTP client: {e}")))?;
    let url = format!("{}/v1/payments", base.trim_end_matches('/'));
    let workers: Vec<_> = (0..config.connections.max(1))
        .map(|_| tokio::spawn(worker(http.clone(), url.clone(), deadline)))
        .collect();
    Ok(tokio::spawn(async move {
        let mut report = FloodReport::default();
        for worker in workers {
            if let Ok(part) = worker.await {
                report.merge(part);
            }
        }
        report
    }))
}

/// One closed-loop flooder: a new random shop id on every request.
async fn worker(http: reqwest::Client, url: String, deadline: Instant) -> FloodReport {
    let mut report = FloodReport::default();
    while Instant::now() < deadline {
        let shop = format!("flood-{:016x}", rand::rng().next_u64());
        let answer = http
            .get(&url)
            .basic_auth(shop, Some("sk_flood_guess_0123456789"))
            .send()
            .await;
        let status = match answer {
            Ok(response) => {
                let status = response.status().as_u16();
                // Read the body so the connection is reused.
                let _ = response.bytes().await;
                Some(status)
            }
            Err(_) => None,
        };
        report.count(status);
    }
    report
}
