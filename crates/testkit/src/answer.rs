//! An HTTP answer read whole, for the tests' assertions.

#![allow(clippy::unwrap_used)]

use serde_json::Value;

/// Status, headers and the raw body bytes of an answer.
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The headers.
    pub headers: reqwest::header::HeaderMap,
    /// The body, byte for byte.
    pub bytes: Vec<u8>,
}

impl Answer {
    /// Reads `response` whole.
    ///
    /// # Panics
    /// When the body breaks off.
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

    /// The body as JSON.
    ///
    /// # Panics
    /// When it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap()
    }

    /// The body as text (lossy), for assertion messages.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// A header's value, when it is one visible-ASCII value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the answer was a replay (`Idempotent-Replayed: true`).
    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// Asserts a problem+json answer with this status and code.
    ///
    /// # Panics
    /// When it is not one.
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

/// An HTTP client whose connections come from `ip`, a loopback address
/// (Linux answers on all of 127.0.0.0/8): two clients of one host, apart,
/// for the limits counted per client address. It follows no redirect.
///
/// # Panics
/// When `ip` is not an address.
pub fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(ip.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// Sends `request` and reads its answer whole.
///
/// # Panics
/// When no answer comes.
pub async fn send(request: reqwest::RequestBuilder) -> Answer {
    Answer::of(request.send().await.unwrap()).await
}
