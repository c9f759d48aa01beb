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

pub use chargeonce_testkit::{Answer, send};

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
