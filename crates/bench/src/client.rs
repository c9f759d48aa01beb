//! The HTTP side: one pooled client, payment requests, and the answers'
//! parts the checks need.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};

use crate::BenchError;

/// The header a replayed answer carries.
pub const REPLAYED: &str = "idempotent-replayed";

/// A client for one target and one shop.
#[derive(Debug, Clone)]
pub struct Target {
    http: reqwest::Client,
    payments: String,
    base: String,
    auth: HeaderValue,
}

/// What a request came back with.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// Whether `Idempotent-Replayed: true` was set.
    pub replayed: bool,
    /// The body, byte for byte.
    pub body: Arc<[u8]>,
    /// From sending the request to the last body byte.
    pub latency: Duration,
}

impl Target {
    /// A client for `base` (e.g. `http://127.0.0.1:8080`) with HTTP Basic
    /// credentials of a shop. `connections` sizes the idle pool.
    pub fn new(
        base: &str,
        shop: &str,
        secret: &str,
        connections: usize,
    ) -> Result<Self, BenchError> {
        use base64::Engine as _;
        let base = base.trim_end_matches('/').to_owned();
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{shop}:{secret}"));
        let mut auth = HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| {
            BenchError::Config("the shop id or secret is not a valid header value".into())
        })?;
        // Debug of the target (and of reqwest's request) then hides the credentials.
        auth.set_sensitive(true);
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(connections.max(1))
            .tcp_nodelay(true)
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| BenchError::Config(format!("building the HTTP client: {e}")))?;
        Ok(Self {
            http,
            payments: format!("{base}/v1/payments"),
            base,
            auth,
        })
    }

    /// The target's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `POST /v1/payments` with this key and body; `Err` only when no HTTP
    /// answer came (connection or timeout).
    pub async fn pay(&self, key: &str, body: String) -> Result<Answer, reqwest::Error> {
        self.post(&self.payments, Some(key), body).await
    }

    /// A POST to any path of the target (used for the ceiling endpoints).
    pub async fn post_path(&self, path: &str, body: String) -> Result<Answer, reqwest::Error> {
        let url = format!("{}{path}", self.base);
        self.post(&url, None, body).await
    }

    async fn post(
        &self,
        url: &str,
        key: Option<&str>,
        body: String,
    ) -> Result<Answer, reqwest::Error> {
        let started = Instant::now();
        let mut request = self
            .http
            .post(url)
            .header(AUTHORIZATION, self.auth.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get(REPLAYED)
            .is_some_and(|v| v.as_bytes() == b"true");
        let body = response.bytes().await?;
        Ok(Answer {
            status,
            replayed,
            body: body.as_ref().into(),
            latency: started.elapsed(),
        })
    }

    /// `GET /sim/ledger`: `Ok(None)` when the target does not expose it.
    pub async fn ledger(&self) -> Result<Option<serde_json::Value>, BenchError> {
        let url = format!("{}/sim/ledger", self.base);
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| BenchError::Ledger(e.to_string()))?;
        if response.status().as_u16() == 404 {
            return Ok(None);
        }
        if !response.status().is_success() {
            return Err(BenchError::Ledger(format!(
                "GET /sim/ledger answered {}",
                response.status()
            )));
        }
        let value = response
            .json()
            .await
            .map_err(|e| BenchError::Ledger(e.to_string()))?;
        Ok(Some(value))
    }
}

/// The body of a payment for an order, as the seed writes it.
pub fn payment_body(reference: &str, value: &str) -> String {
    format!(
        r#"{{"amount":{{"value":"{value}","currency":"RUB"}},"reference":"{reference}","payment_method":{{"token":"tok_ok"}}}}"#
    )
}
