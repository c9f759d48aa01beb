//! RFC 9457 problem details (`application/problem+json`) with a stable `code`.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// The media type of every error answer.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Every error this API answers with. The `code` string is stable: clients may
/// switch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemCode {
    /// 400: a state-changing request came without an `Idempotency-Key`.
    MissingIdempotencyKey,
    /// 400: the `Idempotency-Key` is not 1 to 255 visible ASCII characters.
    InvalidIdempotencyKey,
    /// 400: more than one `Idempotency-Key` header.
    DuplicateIdempotencyKey,
    /// 400: the body is not valid JSON.
    MalformedJson,
    /// 400: a required query parameter is missing.
    MissingParameter,
    /// 400: a list's query parameter is unknown, repeated or not valid.
    InvalidParameter,
    /// 400: a list's cursor is not one of the listed objects of this shop.
    InvalidCursor,
    /// 401: no valid HTTP Basic credentials of a shop.
    Unauthorized,
    /// 402: the acquirer declined the payment (a definite, replayed answer).
    PaymentDeclined,
    /// 404: no such resource for this shop.
    NotFound,
    /// 405: the path exists but not with this method.
    MethodNotAllowed,
    /// 409: another request with this key is still running; retry with the same key.
    RequestInProgress,
    /// 413: the body is larger than the limit.
    PayloadTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 422: this key was first used for a different request.
    IdempotencyKeyReused,
    /// 422: the JSON is well formed but not a valid request.
    InvalidRequest,
    /// 422: the amount is not a positive decimal string fitting its currency.
    InvalidAmount,
    /// 422: not a supported ISO 4217 currency.
    UnsupportedCurrency,
    /// 503: the database cannot be reached; the request may or may not have
    /// been recorded. Retry with the same key (never executed twice).
    StoreUnavailable,
    /// 503: the acquirer cannot be reached; nothing was sent yet, but the
    /// payment (or refund) stays pending and will be sent by the client's
    /// retry with the same key or else by the completer.
    AcquirerUnavailable,
    /// 400: an acquirer webhook without a well-formed signature header.
    MissingSignature,
    /// 401: an acquirer webhook whose signature does not match its body.
    InvalidSignature,
    /// 401: an acquirer webhook signed too long ago (or in the future).
    StaleSignature,
    /// 503: acquirer webhooks are not configured (no secret): nothing was done.
    WebhooksDisabled,
    /// 422: the refund would take the payment's refunds over its amount.
    RefundExceedsAmount,
    /// 409: the payment has no definite outcome yet (pending); retry later.
    PaymentNotYetRefundable,
    /// 422: the payment was declined: nothing to refund.
    PaymentNotRefundable,
    /// 422: the refund's currency is not the payment's.
    CurrencyMismatch,
    /// 422: the acquirer definitively refused the refund (a stored, replayed answer).
    RefundFailed,
    /// 429: this shop sent more requests than its rate limit allows; nothing
    /// was executed. Retry after `Retry-After`.
    RateLimited,
    /// 408: the request body did not arrive within the body deadline; nothing
    /// was executed and the connection is closed.
    BodyTimeout,
    /// 503: the request took longer than the server's per-request limit.
    /// A payment it started runs on; retry with the same key to get its answer.
    RequestTimeout,
    /// 503: the store's queue of new work is full; nothing was executed.
    /// Retry with the same key after `Retry-After`.
    StoreOverloaded,
    /// 500: a bug. Nothing about it is shown to the client.
    Internal,
    /// 400: the request could not be read as HTTP by the server (a body that
    /// broke off, a refusal of the HTTP stack without a more specific code).
    BadRequest,
    /// Any other status of the HTTP stack's own (not the API's) without a
    /// code of its own: the status says what (see [`Problem::for_status`]).
    HttpError,
}

impl ProblemCode {
    /// The stable code string.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "missing_idempotency_key",
            Self::InvalidIdempotencyKey => "invalid_idempotency_key",
            Self::DuplicateIdempotencyKey => "duplicate_idempotency_key",
            Self::MalformedJson => "malformed_json",
            Self::MissingParameter => "missing_parameter",
            Self::InvalidParameter => "invalid_parameter",
            Self::InvalidCursor => "invalid_cursor",
            Self::Unauthorized => "unauthorized",
            Self::PaymentDeclined => "payment_declined",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::RequestInProgress => "request_in_progress",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::InvalidRequest => "invalid_request",
            Self::InvalidAmount => "invalid_amount",
            Self::UnsupportedCurrency => "unsupported_currency",
            Self::StoreUnavailable => "store_unavailable",
            Self::AcquirerUnavailable => "acquirer_unavailable",
            Self::MissingSignature => "missing_signature",
            Self::InvalidSignature => "invalid_signature",
            Self::StaleSignature => "stale_signature",
            Self::WebhooksDisabled => "webhooks_disabled",
            Self::RefundExceedsAmount => "refund_exceeds_amount",
            Self::PaymentNotYetRefundable | Self::PaymentNotRefundable => "payment_not_refundable",
            Self::CurrencyMismatch => "currency_mismatch",
            Self::RefundFailed => "refund_failed",
            Self::RateLimited => "rate_limited",
            Self::BodyTimeout => "body_timeout",
            Self::RequestTimeout => "request_timeout",
            Self::StoreOverloaded => "store_overloaded",
            Self::Internal => "internal_error",
            Self::BadRequest => "bad_request",
            Self::HttpError => "http_error",
        }
    }

    /// The HTTP status it is answered with ([`Self::HttpError`] is answered
    /// with the status it stands for; this is its default, 500).
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MissingIdempotencyKey
            | Self::InvalidIdempotencyKey
            | Self::DuplicateIdempotencyKey
            | Self::MalformedJson
            | Self::MissingParameter
            | Self::InvalidParameter
            | Self::InvalidCursor
            | Self::MissingSignature
            | Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::InvalidSignature | Self::StaleSignature => StatusCode::UNAUTHORIZED,
            Self::WebhooksDisabled => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::PaymentDeclined => StatusCode::PAYMENT_REQUIRED,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestInProgress => StatusCode::CONFLICT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::IdempotencyKeyReused
            | Self::InvalidRequest
            | Self::InvalidAmount
            | Self::UnsupportedCurrency
            | Self::RefundExceedsAmount
            | Self::PaymentNotRefundable
            | Self::CurrencyMismatch
            | Self::RefundFailed => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PaymentNotYetRefundable => StatusCode::CONFLICT,
            Self::StoreUnavailable
            | Self::AcquirerUnavailable
            | Self::RequestTimeout
            | Self::StoreOverloaded => StatusCode::SERVICE_UNAVAILABLE,
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::Internal | Self::HttpError => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A short human summary, the same for every occurrence.
    pub fn title(&self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "Idempotency-Key header is required",
            Self::InvalidIdempotencyKey => "Idempotency-Key header is invalid",
            Self::DuplicateIdempotencyKey => "Only one Idempotency-Key header is allowed",
            Self::MalformedJson => "The body is not valid JSON",
            Self::MissingParameter => "A required parameter is missing",
            Self::InvalidParameter => "A query parameter is not valid",
            Self::InvalidCursor => "The cursor is not one of the listed objects",
            Self::Unauthorized => "Shop credentials are missing or wrong",
            Self::PaymentDeclined => "The payment was declined",
            Self::NotFound => "Not found",
            Self::MethodNotAllowed => "Method not allowed",
            Self::RequestInProgress => "A request with this key is still in progress",
            Self::PayloadTooLarge => "The body is too large",
            Self::UnsupportedMediaType => "The body must be application/json",
            Self::IdempotencyKeyReused => "This Idempotency-Key was used for a different request",
            Self::InvalidRequest => "The request is not valid",
            Self::InvalidAmount => "The amount is not valid",
            Self::UnsupportedCurrency => "The currency is not supported",
            Self::StoreUnavailable => "The service cannot reach its database",
            Self::AcquirerUnavailable => "The acquirer cannot be reached",
            Self::MissingSignature => "The webhook signature header is missing or malformed",
            Self::InvalidSignature => "The webhook signature does not match",
            Self::StaleSignature => "The webhook signature is too old",
            Self::WebhooksDisabled => "Acquirer webhooks are not configured",
            Self::RefundExceedsAmount => "The refund exceeds what is left of the payment",
            Self::PaymentNotYetRefundable => "The payment has no definite outcome yet",
            Self::PaymentNotRefundable => "The payment cannot be refunded",
            Self::CurrencyMismatch => "The currency is not the payment's",
            Self::RefundFailed => "The acquirer refused the refund",
            Self::RateLimited => "Too many requests for this shop",
            Self::BodyTimeout => "The request body did not arrive in time",
            Self::RequestTimeout => "The request took too long",
            Self::StoreOverloaded => "The service is too busy to take new work",
            Self::Internal => "Internal error",
            Self::BadRequest => "The request could not be read",
            Self::HttpError => "The request was refused",
        }
    }
}

/// One problem answer.
#[derive(Debug, Clone)]
pub struct Problem {
    code: ProblemCode,
    status: StatusCode,
    detail: String,
    extensions: Map<String, Value>,
    retry_after: Option<Duration>,
}

impl Problem {
    /// A problem with a detail sentence for this occurrence.
    pub fn new(code: ProblemCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            status: code.status(),
            detail: detail.into(),
            extensions: Map::new(),
            retry_after: None,
        }
    }

    /// Adds an extension member.
    pub fn with(mut self, name: &str, value: Value) -> Self {
        self.extensions.insert(name.to_owned(), value);
        self
    }

    /// Adds a `Retry-After` header (whole seconds, at least 1).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// The problem that stands for an error status the HTTP stack (axum,
    /// hyper, tower-http) answered with on its own: the code of that status
    /// where the API has one (`404 not_found`, `405 method_not_allowed`,
    /// `413 payload_too_large`, `415 unsupported_media_type`, `422
    /// invalid_request`, `400 bad_request`, `401 unauthorized`, `500
    /// internal_error`), else [`ProblemCode::HttpError`] with the status kept.
    pub fn for_status(status: StatusCode, detail: impl Into<String>) -> Self {
        let code = match status {
            StatusCode::BAD_REQUEST => ProblemCode::BadRequest,
            StatusCode::UNAUTHORIZED => ProblemCode::Unauthorized,
            StatusCode::NOT_FOUND => ProblemCode::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ProblemCode::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ProblemCode::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ProblemCode::UnsupportedMediaType,
            StatusCode::UNPROCESSABLE_ENTITY => ProblemCode::InvalidRequest,
            StatusCode::INTERNAL_SERVER_ERROR => ProblemCode::Internal,
            _ => ProblemCode::HttpError,
        };
        let mut problem = Self::new(code, detail);
        problem.status = status;
        problem
    }

    /// The code.
    pub fn code(&self) -> ProblemCode {
        self.code
    }

    /// The HTTP status it is answered with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The detail sentence.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The JSON body.
    pub fn to_body(&self) -> Vec<u8> {
        let mut body = Map::new();
        body.insert(
            "type".into(),
            Value::from(format!("urn:chargeonce:problem:{}", self.code.as_str())),
        );
        body.insert("title".into(), Value::from(self.code.title()));
        body.insert("status".into(), Value::from(self.status.as_u16()));
        body.insert("detail".into(), Value::from(self.detail.clone()));
        body.insert("code".into(), Value::from(self.code.as_str()));
        for (name, value) in &self.extensions {
            body.insert(name.clone(), value.clone());
        }
        serde_json::to_vec(&Value::Object(body)).unwrap_or_default()
    }
}

/// `Retry-After` in whole seconds, never 0.
pub(crate) fn retry_after_value(after: Duration) -> HeaderValue {
    HeaderValue::from(after.as_secs().max(1))
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
            self.to_body(),
        )
            .into_response();
        if let Some(after) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after_value(after));
        }
        // For the layers that count refusals (see `crate::limits`).
        response.extensions_mut().insert(self.code);
        if self.code == ProblemCode::BodyTimeout {
            // The rest of the body is never read: the connection cannot be reused.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.code == ProblemCode::Unauthorized {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"chargeonce\""),
            );
        }
        response
    }
}

/// The longest text of a bare error answer kept as the problem's detail.
const MAX_BARE_DETAIL: usize = 512;

/// A response layer (`axum::middleware::map_response`) that turns every
/// error answer the HTTP stack made on its own (an axum rejection in
/// `text/plain`, an empty 405 or 413 of a layer, ...) into
/// `application/problem+json` with a stable code ([`Problem::for_status`]),
/// so that no error leaves the API in another shape. The status and the
/// other headers (`Allow`, `Retry-After`) are kept; a short `text/plain`
/// reason of a 4xx becomes the detail (a 5xx shows none). Answers that are
/// problems already, and successes, pass untouched.
pub async fn problems_only(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type.eq_ignore_ascii_case(PROBLEM_JSON) {
        return response;
    }
    let plain = content_type.starts_with("text/plain");
    let (parts, body) = response.into_parts();
    let text = if plain && status.is_client_error() {
        axum::body::to_bytes(body, MAX_BARE_DETAIL)
            .await
            .ok()
            .and_then(|bytes| String::from_utf8(bytes.to_vec()).ok())
            .filter(|text| !text.trim().is_empty())
    } else {
        None
    };
    let detail = match text {
        Some(text) => text,
        None if status.is_server_error() => "internal error".to_owned(),
        None => status
            .canonical_reason()
            .unwrap_or("the request was refused")
            .to_owned(),
    };
    let mut answer = Problem::for_status(status, detail).into_response();
    for name in parts.headers.keys() {
        let framing = name == header::CONTENT_TYPE
            || name == header::CONTENT_LENGTH
            || name == header::TRANSFER_ENCODING;
        if framing || answer.headers().contains_key(name) {
            continue;
        }
        for value in parts.headers.get_all(name) {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    answer
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    async fn converted(response: Response) -> (StatusCode, HeaderMapLite, Value) {
        let answer = problems_only(response).await;
        let status = answer.status();
        let headers = answer
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, headers, serde_json::from_slice(&body).unwrap())
    }

    type HeaderMapLite = Vec<(String, String)>;

    #[tokio::test]
    async fn bare_errors_become_problems_with_their_status() {
        let cases = [
            (StatusCode::BAD_REQUEST, "bad_request"),
            (StatusCode::NOT_FOUND, "not_found"),
            (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
            (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
            (StatusCode::REQUEST_TIMEOUT, "http_error"),
            (StatusCode::BAD_GATEWAY, "http_error"),
        ];
        for (status, code) in cases {
            let bare = (
                status,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                [(header::ALLOW, "GET")],
                "Failed to deserialize: secret internals",
            )
                .into_response();
            let (answered, headers, problem) = converted(bare).await;
            assert_eq!(answered, status);
            assert_eq!(problem["code"], code);
            assert_eq!(problem["status"], status.as_u16());
            assert_eq!(problem["type"], format!("urn:chargeonce:problem:{code}"));
            assert!(headers.contains(&("content-type".into(), PROBLEM_JSON.into())));
            assert!(headers.contains(&("allow".into(), "GET".into())));
            let detail = problem["detail"].as_str().unwrap();
            if status.is_server_error() {
                assert_eq!(detail, "internal error", "5xx details are not shown");
            } else {
                assert!(detail.starts_with("Failed to deserialize"), "{detail}");
            }
        }
        // An empty one gets the reason phrase.
        let (_, _, problem) = converted(StatusCode::METHOD_NOT_ALLOWED.into_response()).await;
        assert_eq!(problem["detail"], "Method Not Allowed");
    }

    #[tokio::test]
    async fn problems_and_successes_pass_untouched() {
        let problem = Problem::new(ProblemCode::RequestInProgress, "wait")
            .retry_after(Duration::from_secs(2))
            .into_response();
        let (status, headers, body) = converted(problem).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body["detail"], "wait");
        assert!(headers.contains(&("retry-after".into(), "2".into())));
        let ok = (StatusCode::OK, "fine").into_response();
        let answer = problems_only(ok).await;
        assert_eq!(answer.status(), StatusCode::OK);
        let body = axum::body::to_bytes(answer.into_body(), 64).await.unwrap();
        assert_eq!(&body[..], b"fine");
    }
}
