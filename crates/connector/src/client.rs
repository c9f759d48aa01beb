//! [`HttpAcquirer`]: the service's acquirer over the network (the API of
//! [`crate::protocol`], which the standalone simulator serves).
//!
//! Every outcome is classified, and nothing uncertain is ever read as a failure:
//!
//! Every provider answer is mapped to done, refused or unknown here, in one
//! place (a test per row below). Providers answer a duplicate of a request
//! they are still processing in their own ways (BlueSnap and PPRO 409,
//! Primer 400 `TransactionRequestIdempotencyKeyAlreadyExists`, PicPay 208,
//! generic gateways 422 "request in progress"): each is unknown, never a
//! refusal. A refusal the adapter cannot tell from a real one is still
//! judged by the engine's resend rule (a refusal of a resend proves nothing
//! while an earlier attempt's outcome is unknown).
//!
//! | what happened | classified as |
//! |---|---|
//! | 2xx with the charge asked for (200, 201, 208) | done: [`ChargeResult::Succeeded`] or [`ChargeResult::Declined`] |
//! | 2xx without a charge, or with another one (208 "already reported" with an empty body, a 202) | [`AcquirerError::Unknown`] |
//! | 400 or 422 whose code or message says the request is a duplicate, in progress or its key already used (`in_progress`, `in progress`, `duplicate`, `already_exists`, `AlreadyExists`, `idempotency`) | [`AcquirerError::Unknown`], logged |
//! | connection refused, connect timeout, DNS failure | [`AcquirerError::NotSent`]: safe to send again |
//! | 429 (refused before any work) | [`AcquirerError::NotSent`] |
//! | request timeout, connection reset, broken or unreadable answer | [`AcquirerError::Unknown`] |
//! | any 5xx (the request may have arrived and been executed) | [`AcquirerError::Unknown`] |
//! | 422 `idempotency_key_reused`, 408, 409, 425 and any 4xx not listed here (the request may be running or have run under the key) | [`AcquirerError::Unknown`], logged |
//! | 401, 403, 404, 405, 411, 413, 414, 415, 431 (our credentials, URL or framing; nothing executed) | [`AcquirerError::NotSent`], logged as an error: fix the configuration |
//! | a charge answered with another capture method than asked (an authorization as a charge made at once, or the reverse) | [`AcquirerError::Unknown`] |
//! | refunds, captures, voids: the definite refusals of [`crate::moves`] | `Failed` with the refusal's code |
//! | 400, 402, 422 (the request refused for good, nothing executed) | [`AcquirerError::Rejected`], logged as an error: a first send ends declined (`acquirer_rejected`), its order free; a resend only when the acquirer holds no charge for the payment |

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::{
    Acquirer, AcquirerCapture, AcquirerCharge, AcquirerError, AcquirerKey, AcquirerLedger,
    AcquirerRefund, CaptureMethod, CaptureRequest, CaptureSettlement, ChargeRequest, ChargeResult,
    LedgerCursor, PaymentId, Reference, RefundRequest, RefundSettlement, ShopId, VoidRequest,
    VoidSettlement,
};
use reqwest::{StatusCode, Url};
use time::OffsetDateTime;

use crate::answers::{ChargeJson, ListJson, RefundJson, RefundListJson, unreadable};
use crate::credentials::{AcquirerCredentials, take_userinfo};
use crate::protocol::{IDEMPOTENCY_KEY, KEY_REUSED};

/// Why the adapter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL does not parse.
    #[error("bad acquirer URL `{url}`: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// Why.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// Timeouts and mode of the adapter.
#[derive(Debug, Clone)]
pub struct HttpAcquirerConfig {
    /// The longest a TCP connect may take; past it nothing was sent.
    pub connect_timeout: Duration,
    /// The longest a whole request may take; past it the outcome is unknown.
    pub request_timeout: Duration,
    /// Whether the acquirer deduplicates on the key we send (see
    /// [`Acquirer::is_idempotent`]).
    pub idempotent: bool,
    /// HTTP Basic credentials sent with every request (else those in the
    /// URL's userinfo, if any).
    pub credentials: Option<AcquirerCredentials>,
}

impl Default for HttpAcquirerConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(10),
            idempotent: true,
            credentials: None,
        }
    }
}

/// The acquirer over HTTP.
#[derive(Debug, Clone)]
pub struct HttpAcquirer {
    base: Url,
    pub(crate) http: reqwest::Client,
    idempotent: bool,
}

/// Classifies a transport error. Only a failed connect proves nothing was sent.
pub fn classify_transport(error: &reqwest::Error) -> AcquirerError {
    if error.is_connect() || error.is_builder() {
        AcquirerError::NotSent(format!("acquirer not reached: {error}"))
    } else if error.is_timeout() {
        AcquirerError::Unknown(format!("acquirer timed out: {error}"))
    } else {
        AcquirerError::Unknown(format!("acquirer connection failed: {error}"))
    }
}

/// Classifies an HTTP status that is not a success.
pub fn classify_status(status: StatusCode, body: &str) -> AcquirerError {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return AcquirerError::NotSent("acquirer rate limit (429): nothing was done".to_owned());
    }
    if status.is_server_error() {
        return AcquirerError::Unknown(format!("acquirer answered {status}"));
    }
    let parsed = serde_json::from_str::<serde_json::Value>(body).ok();
    let member = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v[name].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let code = member("code");
    if code == KEY_REUSED {
        tracing::error!(%status, "the acquirer says our key was used with other parameters");
        return AcquirerError::Unknown(format!(
            "{KEY_REUSED}: the acquirer key was first used with other parameters"
        ));
    }
    let said = [
        code.as_str(),
        &member("message"),
        &member("detail"),
        &member("title"),
    ]
    .join(" ");
    match client_error_kind(status) {
        ClientError4xx::Refused if says_duplicate(&said) => {
            tracing::warn!(%status, code, "the acquirer says our request is a duplicate or in progress");
            AcquirerError::Unknown(format!(
                "acquirer answered {status} {code}: a duplicate or a request in progress"
            ))
        }
        ClientError4xx::Refused => {
            tracing::error!(%status, code, "the acquirer refused our request for good");
            AcquirerError::Rejected(format!("acquirer refused the request: {status} {code}"))
        }
        ClientError4xx::NotAccepted => {
            // Our credentials, URL or framing, not the payment: fix the
            // configuration; the payment is sent once it works.
            tracing::error!(%status, code, "the acquirer did not accept our request: check --acquirer-url and credentials");
            AcquirerError::NotSent(format!(
                "acquirer did not accept the request: {status} {code}"
            ))
        }
        ClientError4xx::Ambiguous => {
            tracing::warn!(%status, code, "the acquirer could not take our request now");
            AcquirerError::Unknown(format!("acquirer answered {status} {code}"))
        }
    }
}

/// Whether a refusal's words say it is of a duplicate: a request in
/// progress, or a key already used (the first may have executed).
fn says_duplicate(said: &str) -> bool {
    let said = said.to_ascii_lowercase();
    [
        "in_progress",
        "in progress",
        "inprogress",
        "duplicate",
        "already_exists",
        "alreadyexists",
        "already exists",
        "idempotency",
    ]
    .iter()
    .any(|word| said.contains(word))
}

/// What a 4xx (other than 429 and a reused key) says about our request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientError4xx {
    /// 400, 402, 422: the request itself is refused and would be again.
    Refused,
    /// 401, 403, 404, 405, 411, 413, 414, 415, 431: refused before any work
    /// because of how we reached the acquirer (credentials, URL, framing).
    NotAccepted,
    /// Anything else (408 timeout, 409 a request running under the key, 425
    /// too early, codes we do not know): proves nothing.
    Ambiguous,
}

fn client_error_kind(status: StatusCode) -> ClientError4xx {
    match status.as_u16() {
        400 | 402 | 422 => ClientError4xx::Refused,
        401 | 403 | 404 | 405 | 411 | 413 | 414 | 415 | 431 => ClientError4xx::NotAccepted,
        _ => ClientError4xx::Ambiguous,
    }
}

impl HttpAcquirer {
    /// An adapter for the acquirer at `base_url` (e.g. `http://127.0.0.1:9000`).
    pub fn new(base_url: &str, config: HttpAcquirerConfig) -> Result<Self, ClientError> {
        let with_slash = if base_url.ends_with('/') {
            base_url.to_owned()
        } else {
            format!("{base_url}/")
        };
        let mut base = Url::parse(&with_slash).map_err(|e| ClientError::Url {
            url: crate::redact_url(base_url),
            reason: e.to_string(),
        })?;
        let in_url = take_userinfo(&mut base);
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(value) = config.credentials.or(in_url).and_then(|c| c.header()) {
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self {
            base,
            http,
            idempotent: config.idempotent,
        })
    }

    pub(crate) fn url(&self, path: &str) -> Result<Url, AcquirerError> {
        self.base
            .join(path)
            .map_err(|e| AcquirerError::NotSent(format!("bad acquirer URL: {e}")))
    }

    /// Sends a request and reads the whole answer; non-2xx are classified.
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<Vec<u8>, AcquirerError> {
        // The caller's trace goes with the call (nothing while traces are off).
        let mut trace = reqwest::header::HeaderMap::new();
        chargeonce_telemetry::context::inject_current(&mut trace);
        let response = request
            .headers(trace)
            .send()
            .await
            .map_err(|e| classify_transport(&e))?;
        let status = response.status();
        // A body that breaks off after the status is an answer lost mid-way.
        let body = response.bytes().await.map_err(|e| {
            AcquirerError::Unknown(format!("acquirer answer broke off ({status}): {e}"))
        })?;
        if !status.is_success() {
            return Err(classify_status(status, &String::from_utf8_lossy(&body)));
        }
        Ok(body.to_vec())
    }

    async fn list(&self, query: &[(&str, &str)]) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        let mut url = self.url("v1/charges")?;
        url.query_pairs_mut().extend_pairs(query);
        let body = self.send(self.http.get(url)).await?;
        let list: ListJson = serde_json::from_slice(&body).map_err(unreadable)?;
        list.data.into_iter().map(ChargeJson::into_charge).collect()
    }
}

#[async_trait]
impl Acquirer for HttpAcquirer {
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError> {
        let mut body = serde_json::json!({
            "shop_id": request.shop_id.as_str(),
            "payment_id": request.payment_id.as_str(),
            "reference": request.reference.as_str(),
            "amount": {
                "value": request.amount.to_decimal_string(),
                "currency": request.amount.currency().code(),
            },
            "token": request.token.as_str(),
        });
        // Sent only to authorize: an acquirer that knows nothing of holds
        // gets the request it always did.
        if request.capture_method == CaptureMethod::Manual {
            body["capture_method"] = CaptureMethod::Manual.as_str().into();
        }
        let call = self
            .http
            .post(self.url("v1/charges")?)
            .header(IDEMPOTENCY_KEY, request.acquirer_key.as_str())
            .json(&body);
        let answer = self.send(call).await?;
        let charge: ChargeJson = serde_json::from_slice(&answer).map_err(unreadable)?;
        let charge = charge.into_charge()?;
        if charge.payment_id != request.payment_id || charge.amount != request.amount {
            return Err(unreadable("the charge answered is not the one asked for"));
        }
        // An authorization answered as a charge made at once (an acquirer
        // that ignored the capture method) took the whole amount, and the
        // other way round: neither is what was asked, so neither is known.
        if charge.outcome.is_succeeded() && charge.capture_method != request.capture_method {
            return Err(unreadable(format!(
                "asked for capture method {}, answered {}",
                request.capture_method.as_str(),
                charge.capture_method.as_str()
            )));
        }
        Ok(charge.outcome)
    }

    async fn status(&self, key: &AcquirerKey) -> Result<Option<AcquirerCharge>, AcquirerError> {
        Ok(self
            .list(&[("acquirer_key", key.as_str())])
            .await?
            .into_iter()
            .next())
    }

    async fn charges_for_payment(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        self.list(&[
            ("shop_id", shop_id.as_str()),
            ("payment_id", payment_id.as_str()),
        ])
        .await
    }

    async fn refund_payment(
        &self,
        request: &RefundRequest,
    ) -> Result<RefundSettlement, AcquirerError> {
        self.refund_move(request).await
    }

    async fn refunds_for_refund(
        &self,
        request: &RefundRequest,
    ) -> Result<Vec<AcquirerRefund>, AcquirerError> {
        let mut url = self.url(&format!("v1/charges/{}/refunds", request.charge_id))?;
        url.query_pairs_mut()
            .append_pair("reference", request.refund_id.as_str());
        let body = self.send(self.http.get(url)).await?;
        let list: RefundListJson = serde_json::from_slice(&body).map_err(unreadable)?;
        list.data.into_iter().map(RefundJson::into_refund).collect()
    }

    fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    async fn capture(&self, request: &CaptureRequest) -> Result<CaptureSettlement, AcquirerError> {
        self.capture_move(request).await
    }

    async fn void(&self, request: &VoidRequest) -> Result<VoidSettlement, AcquirerError> {
        self.void_move(request).await
    }

    async fn captures_for_capture(
        &self,
        request: &CaptureRequest,
    ) -> Result<Vec<AcquirerCapture>, AcquirerError> {
        self.captures_of(request).await
    }
}

fn unix_ms(at: OffsetDateTime) -> String {
    (at.unix_timestamp_nanos() / 1_000_000).to_string()
}

#[async_trait]
impl AcquirerLedger for HttpAcquirer {
    async fn charges_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        let (from, to) = (unix_ms(from), unix_ms(to));
        self.list(&[("from", from.as_str()), ("to", to.as_str())])
            .await
    }

    async fn charges_page(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&LedgerCursor>,
        limit: u32,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        let (from, to, limit) = (unix_ms(from), unix_ms(to), limit.to_string());
        let mut query = vec![
            ("from", from.as_str()),
            ("to", to.as_str()),
            ("limit", limit.as_str()),
        ];
        let after_ms = after.map(|a| unix_ms(a.created_at));
        if let (Some(after), Some(after_ms)) = (after, after_ms.as_deref()) {
            query.push(("after", after_ms));
            query.push(("after_id", after.charge_id.as_str()));
        }
        self.list(&query).await
    }

    async fn charges_for_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        self.list(&[
            ("shop_id", shop_id.as_str()),
            ("reference", reference.as_str()),
        ])
        .await
    }

    async fn refund(&self, charge_id: &str) -> Result<AcquirerRefund, AcquirerError> {
        let url = self.url(&format!("v1/charges/{charge_id}/refunds"))?;
        let call = self
            .http
            .post(url)
            .header(IDEMPOTENCY_KEY, format!("refund-{charge_id}"));
        let body = self.send(call).await?;
        let refund: RefundJson = serde_json::from_slice(&body).map_err(unreadable)?;
        refund.into_refund()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_leave_the_url_and_are_never_printed() {
        let acquirer = HttpAcquirer::new(
            "http://merchant:p%40ss-w0rd@127.0.0.1:1/base",
            HttpAcquirerConfig::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(acquirer.base.as_str(), "http://127.0.0.1:1/base/");
        let shown = format!("{acquirer:?}");
        assert!(
            !shown.contains("p@ss-w0rd") && !shown.contains("p%40ss"),
            "{shown}"
        );
        let basic = AcquirerCredentials::new("merchant", "p@ss-w0rd");
        let header = basic.header().unwrap_or_else(|| panic!("a header"));
        assert!(header.is_sensitive());
        // base64("merchant:p@ss-w0rd")
        assert_eq!(header.to_str().ok(), Some("Basic bWVyY2hhbnQ6cEBzcy13MHJk"));
        assert!(!shown.contains("bWVyY2hhbnQ6cEBzcy13MHJk"), "{shown}");
        assert!(!format!("{basic:?}").contains("p@ss"));
        assert_eq!(
            AcquirerCredentials::parse("u:with:colons"),
            Some(AcquirerCredentials::new("u", "with:colons"))
        );
        assert_eq!(AcquirerCredentials::parse("no-colon"), None);
    }

    fn kind(status: u16, body: &str) -> &'static str {
        match classify_status(
            StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT),
            body,
        ) {
            AcquirerError::Rejected(_) => "rejected",
            AcquirerError::NotSent(_) => "not_sent",
            AcquirerError::Unknown(_) => "unknown",
        }
    }

    #[test]
    fn only_a_refusal_of_the_request_itself_is_a_rejection() {
        for status in [400, 402, 422] {
            assert_eq!(
                kind(status, r#"{"code":"invalid_request"}"#),
                "rejected",
                "{status}"
            );
        }
        for status in [401, 403, 404, 405, 411, 413, 414, 415, 431, 429] {
            assert_eq!(kind(status, ""), "not_sent", "{status}");
        }
        for status in [408, 409, 410, 425, 451, 500, 502, 503, 504] {
            assert_eq!(kind(status, ""), "unknown", "{status}");
        }
        let reused = format!(r#"{{"code":"{KEY_REUSED}"}}"#);
        assert_eq!(kind(422, &reused), "unknown", "a reused key proves nothing");
    }

    /// Providers' answers to a duplicate of a request still in progress:
    /// none is a refusal.
    #[test]
    fn a_duplicate_in_progress_is_unknown_however_a_provider_says_it() {
        // BlueSnap, PPRO.
        assert_eq!(kind(409, r#"{"code":"request_in_progress"}"#), "unknown");
        // Primer.
        assert_eq!(
            kind(
                400,
                r#"{"error":{"errorId":"x"},"code":"TransactionRequestIdempotencyKeyAlreadyExists"}"#
            ),
            "unknown"
        );
        // A generic gateway, in its message.
        assert_eq!(
            kind(
                422,
                r#"{"code":"unprocessable","message":"Request in progress"}"#
            ),
            "unknown"
        );
        assert_eq!(kind(400, r#"{"detail":"duplicate request"}"#), "unknown");
        // A refusal that says nothing of the kind stays a refusal (the
        // engine's resend rule judges it).
        assert_eq!(kind(422, r#"{"code":"unprocessable_entity"}"#), "rejected");
        assert_eq!(kind(400, "not json"), "rejected");
    }
}
