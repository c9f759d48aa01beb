//! The service on a real socket (from the test kit), and what the server
//! tests send it and read back: answers whole, and raw bytes over TCP.

#![allow(dead_code, unused_imports, clippy::unwrap_used)]

use std::time::Duration;

pub use chargeonce_testkit::{
    Backend, OTHER_SECRET, OTHER_SHOP, SECRET, SHOP, TestService, WEBHOOK_SECRET, body,
};
use serde_json::Value;

/// `Authorization: Basic ...` of shop A, as a raw header line.
pub fn raw_auth() -> String {
    use base64::Engine as _;
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!("{SHOP}:{SECRET}"));
    format!("Authorization: Basic {credentials}\r\n")
}

/// Status, headers and the raw body bytes of an answer.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
}

impl Answer {
    pub async fn of(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.unwrap().to_vec();
        Self {
            status,
            headers,
            bytes,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// Asserts a problem+json answer with this status and code.
    pub fn assert_problem(&self, status: u16, code: &str) {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let problem = self.json();
        assert_eq!(problem["code"], code, "{problem}");
        assert_eq!(problem["status"], status);
        assert!(problem["title"].is_string() && problem["detail"].is_string());
        assert_eq!(problem["type"], format!("urn:chargeonce:problem:{code}"));
    }
}

pub async fn send(request: reqwest::RequestBuilder) -> Answer {
    Answer::of(request.send().await.unwrap()).await
}

/// Sends raw bytes over TCP and returns the status line's code (for headers
/// no HTTP client would send).
pub async fn raw_status(base: &str, request: &[u8]) -> u16 {
    raw_answer(base, request).await.0
}

/// Sends raw bytes over TCP; returns the status code and the whole answer as text.
pub async fn raw_answer(base: &str, request: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}
