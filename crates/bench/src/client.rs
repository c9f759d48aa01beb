//! The HTTP side: one pooled client, payment requests, and the answers'
//! parts the checks need.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};

use crate::BenchError;

/// The header a replayed answer carries (chargeonce's; another server's can
/// be named with [`Target::with_replayed_header`]).
pub const REPLAYED: &str = "idempotent-replayed";

/// The key header every payment request carries.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// A header sent on every request (`--header 'name: value'`), e.g. a
/// session cookie a peer server needs before it caches anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraHeader {
    /// The header's name (lower case).
    pub name: HeaderName,
    /// Its value, marked sensitive so `Debug` does not print it.
    pub value: HeaderValue,
}

impl ExtraHeader {
    /// Parses `name: value` (as curl's `-H`): the name a valid header name
    /// other than the ones the bench sets itself (`authorization`,
    /// `content-type`, `idempotency-key`), the value (trimmed of spaces)
    /// a valid header value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((name, value)) = text.split_once(':') else {
            return Err(format!("`{text}` is not `name: value`"));
        };
        let name = name.trim();
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a valid header name"))?;
        if [AUTHORIZATION, CONTENT_TYPE].contains(&name) || name == IDEMPOTENCY_KEY {
            return Err(format!(
                "`{name}` is set by the bench itself and cannot be given with --header"
            ));
        }
        let mut value = HeaderValue::from_str(value.trim())
            .map_err(|_| format!("the value of `{name}` is not a valid header value"))?;
        value.set_sensitive(true);
        Ok(Self { name, value })
    }
}

/// Parses the name of the header that marks a replay (`--replayed-header`).
pub fn parse_header_name(text: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(text.trim().as_bytes())
        .map_err(|_| format!("`{text}` is not a valid header name"))
}

/// A client for one target and one shop.
#[derive(Debug, Clone)]
pub struct Target {
    http: reqwest::Client,
    payments: String,
    base: String,
    /// Where `/sim/ledger` is (the operator listener), if anywhere.
    ledger_base: Option<String>,
    auth: HeaderValue,
    headers: Arc<[ExtraHeader]>,
    replayed: HeaderName,
}

/// What a request came back with.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// Whether the replay marker (by default `Idempotent-Replayed`) was
    /// `true`.
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
            ledger_base: None,
            auth,
            headers: Arc::from(Vec::new()),
            replayed: HeaderName::from_static(REPLAYED),
        })
    }

    /// Reads the acquirer ledger from `GET {base}/sim/ledger` (the
    /// service's operator listener); `None`: no ledger.
    pub fn with_ledger_base(mut self, base: Option<&str>) -> Self {
        self.ledger_base = base.map(|b| b.trim_end_matches('/').to_owned());
        self
    }

    /// Sends these headers on every request as well (`--header`).
    pub fn with_headers(mut self, headers: Vec<ExtraHeader>) -> Self {
        self.headers = headers.into();
        self
    }

    /// Reads a replay from this header (`--replayed-header`; default
    /// [`REPLAYED`]): an answer is a replay when its value is `true`.
    pub fn with_replayed_header(mut self, name: HeaderName) -> Self {
        self.replayed = name;
        self
    }

    /// `request` with the `--header`s added.
    fn with_extra_headers(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        self.headers.iter().fold(request, |request, extra| {
            request.header(extra.name.clone(), extra.value.clone())
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

    /// A POST of `body` under an idempotency key to any path of the target
    /// (a capture).
    pub async fn post_keyed(
        &self,
        path: &str,
        key: &str,
        body: String,
    ) -> Result<Answer, reqwest::Error> {
        let url = format!("{}{path}", self.base);
        self.post(&url, Some(key), body).await
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
        request = self.with_extra_headers(request);
        if let Some(key) = key {
            request = request.header(IDEMPOTENCY_KEY, key);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get(&self.replayed)
            .is_some_and(|v| v.as_bytes() == b"true");
        let body = response.bytes().await?;
        Ok(Answer {
            status,
            replayed,
            body: body.as_ref().into(),
            latency: started.elapsed(),
        })
    }

    /// `GET /sim/ledger` of the ledger base ([`Self::with_ledger_base`]):
    /// `Ok(None)` without one, or when it does not expose it.
    pub async fn ledger(&self) -> Result<Option<serde_json::Value>, BenchError> {
        let Some(base) = &self.ledger_base else {
            return Ok(None);
        };
        let url = format!("{base}/sim/ledger");
        let response = self
            .with_extra_headers(self.http.get(&url))
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

/// The body of an authorization (`capture_method` `manual`) of `value` RUB.
pub fn manual_payment_body(reference: &str, value: &str) -> String {
    format!(
        r#"{{"amount":{{"value":"{value}","currency":"RUB"}},"reference":"{reference}","payment_method":{{"token":"tok_ok"}},"capture_method":"manual"}}"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_is_name_colon_value_trimmed() {
        let header = ExtraHeader::parse("Cookie:  session=abc; other=1 ").expect("parses");
        assert_eq!(header.name, "cookie");
        assert_eq!(header.value, "session=abc; other=1");
        assert!(header.value.is_sensitive());
        // Only the first colon splits.
        let header = ExtraHeader::parse("x-at: 12:30").expect("parses");
        assert_eq!(header.value, "12:30");
        // An empty value is a value.
        assert_eq!(ExtraHeader::parse("x-empty:").expect("parses").value, "");
    }

    #[test]
    fn a_bad_header_is_refused_with_a_reason() {
        for (text, reason) in [
            ("cookie session=abc", "is not `name: value`"),
            (": value", "is not a valid header name"),
            ("bad name: value", "is not a valid header name"),
            ("x-line: a\nb", "is not a valid header value"),
            ("Authorization: Basic eDp5", "set by the bench itself"),
            ("content-type: text/plain", "set by the bench itself"),
            ("Idempotency-Key: k", "set by the bench itself"),
        ] {
            let error = ExtraHeader::parse(text).expect_err(text);
            assert!(error.contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn the_replayed_header_is_a_header_name() {
        assert_eq!(
            parse_header_name("Idempotency-Replayed").expect("parses"),
            "idempotency-replayed"
        );
        assert!(parse_header_name("not a name").is_err());
        assert!(parse_header_name("").is_err());
    }

    #[test]
    fn the_target_sends_the_headers_and_reads_the_named_marker() {
        let target = Target::new("http://127.0.0.1:1/", "shop", "secret", 1)
            .expect("a target")
            .with_headers(vec![
                ExtraHeader::parse("cookie: session=abc").expect("parses"),
            ])
            .with_replayed_header(parse_header_name("idempotency-replayed").expect("parses"));
        assert_eq!(target.base(), "http://127.0.0.1:1");
        assert_eq!(target.headers.len(), 1);
        assert_eq!(target.replayed, "idempotency-replayed");
        // The cookie's value stays out of Debug.
        assert!(!format!("{target:?}").contains("session=abc"));
    }
}
