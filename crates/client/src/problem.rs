//! The API's errors: RFC 9457 problem documents, typed by their stable `code`.

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::Payment;

/// Every `code` the API answers with, as a type. Codes this version of the
/// client does not know yet arrive as [`ProblemCode::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemCode {
    /// 400: no `Idempotency-Key` on a POST.
    MissingIdempotencyKey,
    /// 400: the key is not 1 to 255 visible ASCII characters.
    InvalidIdempotencyKey,
    /// 400: more than one `Idempotency-Key` header.
    DuplicateIdempotencyKey,
    /// 400: the body is not JSON, or names a member twice in an object.
    MalformedJson,
    /// 400: a required query parameter is missing.
    MissingParameter,
    /// 401: no or wrong shop credentials.
    Unauthorized,
    /// 402: the acquirer declined the payment (a definite answer).
    PaymentDeclined,
    /// 404: no such resource for this shop.
    NotFound,
    /// 405: the route does not take this method.
    MethodNotAllowed,
    /// 409: the key's first request is still running; retry with the same key.
    RequestInProgress,
    /// 413: the body is too large.
    PayloadTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 422: the key was first used for another request: a client bug.
    IdempotencyKeyReused,
    /// 422: a missing, unknown or malformed field.
    InvalidRequest,
    /// 422: the amount is not a positive decimal string fitting its currency.
    InvalidAmount,
    /// 422: not a supported ISO 4217 currency.
    UnsupportedCurrency,
    /// 429: too many requests (a rate limiter in front of the API).
    TooManyRequests,
    /// 429: the shop sent more requests than its rate limit allows; nothing
    /// was executed. Retried after `Retry-After`.
    RateLimited,
    /// 408: the request body did not arrive in time; nothing was executed.
    /// Retried.
    BodyTimeout,
    /// 503: the server's per-request time limit passed; an operation it
    /// started goes on. Retried with the same key after `Retry-After`.
    RequestTimeout,
    /// 503: the service is too busy to take new work; nothing was executed.
    /// Retried with the same key after `Retry-After`.
    StoreOverloaded,
    /// 500: a bug on the server.
    InternalError,
    /// 503: the service cannot reach its database; retry with the same key.
    StoreUnavailable,
    /// 503: the acquirer cannot be reached; nothing was sent yet, and the payment stays
    /// pending until a retry with the same key (or the server's completer) sends it.
    AcquirerUnavailable,
    /// 409 (the payment is still pending: retry) or 422 (it was declined):
    /// the payment cannot be refunded now.
    PaymentNotRefundable,
    /// 422: the refund would take the payment's refunds over its amount.
    RefundExceedsAmount,
    /// 422: a refund in another currency than the payment's.
    CurrencyMismatch,
    /// 422: the acquirer refused the refund (a stored, replayed answer).
    RefundFailed,
    /// 400: the server could not read the request as HTTP (a body that broke
    /// off before its end).
    BadRequest,
    /// An error status of the server's HTTP stack without a code of its own;
    /// the status says what.
    HttpError,
    /// A code this client does not know.
    Other(String),
}

impl ProblemCode {
    /// Reads a `code` string.
    pub fn parse(code: &str) -> Self {
        match code {
            "missing_idempotency_key" => Self::MissingIdempotencyKey,
            "invalid_idempotency_key" => Self::InvalidIdempotencyKey,
            "duplicate_idempotency_key" => Self::DuplicateIdempotencyKey,
            "malformed_json" => Self::MalformedJson,
            "missing_parameter" => Self::MissingParameter,
            "unauthorized" => Self::Unauthorized,
            "payment_declined" => Self::PaymentDeclined,
            "not_found" => Self::NotFound,
            "method_not_allowed" => Self::MethodNotAllowed,
            "request_in_progress" => Self::RequestInProgress,
            "payload_too_large" => Self::PayloadTooLarge,
            "unsupported_media_type" => Self::UnsupportedMediaType,
            "idempotency_key_reused" => Self::IdempotencyKeyReused,
            "invalid_request" => Self::InvalidRequest,
            "invalid_amount" => Self::InvalidAmount,
            "unsupported_currency" => Self::UnsupportedCurrency,
            "too_many_requests" => Self::TooManyRequests,
            "rate_limited" => Self::RateLimited,
            "body_timeout" => Self::BodyTimeout,
            "request_timeout" => Self::RequestTimeout,
            "store_overloaded" => Self::StoreOverloaded,
            "internal_error" => Self::InternalError,
            "store_unavailable" => Self::StoreUnavailable,
            "acquirer_unavailable" => Self::AcquirerUnavailable,
            "payment_not_refundable" => Self::PaymentNotRefundable,
            "refund_exceeds_amount" => Self::RefundExceedsAmount,
            "currency_mismatch" => Self::CurrencyMismatch,
            "refund_failed" => Self::RefundFailed,
            "bad_request" => Self::BadRequest,
            "http_error" => Self::HttpError,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The stable code string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::MissingIdempotencyKey => "missing_idempotency_key",
            Self::InvalidIdempotencyKey => "invalid_idempotency_key",
            Self::DuplicateIdempotencyKey => "duplicate_idempotency_key",
            Self::MalformedJson => "malformed_json",
            Self::MissingParameter => "missing_parameter",
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
            Self::TooManyRequests => "too_many_requests",
            Self::RateLimited => "rate_limited",
            Self::BodyTimeout => "body_timeout",
            Self::RequestTimeout => "request_timeout",
            Self::StoreOverloaded => "store_overloaded",
            Self::InternalError => "internal_error",
            Self::StoreUnavailable => "store_unavailable",
            Self::AcquirerUnavailable => "acquirer_unavailable",
            Self::PaymentNotRefundable => "payment_not_refundable",
            Self::RefundExceedsAmount => "refund_exceeds_amount",
            Self::CurrencyMismatch => "currency_mismatch",
            Self::RefundFailed => "refund_failed",
            Self::BadRequest => "bad_request",
            Self::HttpError => "http_error",
            Self::Other(code) => code,
        }
    }
}

impl fmt::Display for ProblemCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `application/problem+json` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The stable code.
    pub code: ProblemCode,
    /// The HTTP status.
    pub status: u16,
    /// The problem type URI (`urn:chargeonce:problem:<code>`).
    pub problem_type: String,
    /// The short summary, the same for every occurrence of the code.
    pub title: String,
    /// What happened this time.
    pub detail: String,
    /// `payment_declined` and `acquirer_unavailable` carry the payment.
    pub payment: Option<Payment>,
    /// `payment_declined`: the acquirer's reason.
    pub decline_code: Option<String>,
    /// The field a validation problem is about, when it names one.
    pub field: Option<String>,
    /// Every member of the document, as sent.
    pub raw: Map<String, Value>,
}

#[derive(Deserialize)]
struct ProblemJson {
    code: Option<String>,
    status: Option<u16>,
    #[serde(rename = "type")]
    problem_type: Option<String>,
    title: Option<String>,
    detail: Option<String>,
    decline_code: Option<String>,
    field: Option<String>,
}

impl Problem {
    /// Reads a problem document; `None` when the body is not a JSON object with
    /// a `code` (an answer from something other than the API, such as a proxy).
    pub fn from_body(http_status: u16, body: &[u8]) -> Option<Self> {
        let raw: Map<String, Value> = serde_json::from_slice(body).ok()?;
        let parsed = ProblemJson::deserialize(Value::Object(raw.clone())).ok()?;
        let code = ProblemCode::parse(&parsed.code?);
        let payment = raw
            .get("payment")
            .and_then(|p| Payment::deserialize(p).ok());
        Some(Self {
            code,
            status: parsed.status.unwrap_or(http_status),
            problem_type: parsed.problem_type.unwrap_or_default(),
            title: parsed.title.unwrap_or_default(),
            detail: parsed.detail.unwrap_or_default(),
            payment,
            decline_code: parsed.decline_code,
            field: parsed.field,
            raw,
        })
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.title)?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const CODES: &[&str] = &[
        "missing_idempotency_key",
        "invalid_idempotency_key",
        "duplicate_idempotency_key",
        "malformed_json",
        "missing_parameter",
        "unauthorized",
        "payment_declined",
        "not_found",
        "method_not_allowed",
        "request_in_progress",
        "payload_too_large",
        "unsupported_media_type",
        "idempotency_key_reused",
        "invalid_request",
        "invalid_amount",
        "unsupported_currency",
        "too_many_requests",
        "rate_limited",
        "body_timeout",
        "request_timeout",
        "store_overloaded",
        "internal_error",
        "store_unavailable",
        "acquirer_unavailable",
        "bad_request",
        "http_error",
    ];

    #[test]
    fn every_code_round_trips() {
        for code in CODES {
            let parsed = ProblemCode::parse(code);
            assert!(!matches!(parsed, ProblemCode::Other(_)), "{code}");
            assert_eq!(parsed.as_str(), *code);
        }
        assert_eq!(
            ProblemCode::parse("brand_new"),
            ProblemCode::Other("brand_new".into())
        );
    }

    #[test]
    fn reads_a_problem_document() {
        let body = br#"{"type":"urn:chargeonce:problem:idempotency_key_reused","title":"T","status":422,"detail":"D","code":"idempotency_key_reused"}"#;
        let problem = Problem::from_body(422, body).unwrap();
        assert_eq!(problem.code, ProblemCode::IdempotencyKeyReused);
        assert_eq!(problem.status, 422);
        assert_eq!(problem.detail, "D");
        assert!(problem.payment.is_none());
        assert!(Problem::from_body(502, b"<html>bad gateway</html>").is_none());
        assert!(Problem::from_body(404, br#"{"error":"x"}"#).is_none());
    }
}
