//! [`ProblemCode`]: every stable `code` of an error answer.

/// Every `code` an error answer of the API carries: a stable string clients
/// may switch on, with the HTTP status it comes with.
///
/// One code string has two statuses: `payment_not_refundable` is 409
/// ([`Self::PaymentNotYetRefundable`]: retry later) or 422
/// ([`Self::PaymentNotRefundable`]: never); [`Self::parse`] tells them apart
/// by the status. Every other code has one status, except
/// [`Self::HttpError`], which comes with the status it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemCode {
    /// 400: a state-changing request came without an `Idempotency-Key`.
    /// Nothing was executed. Send one, derived from the operation (a client bug).
    MissingIdempotencyKey,
    /// 400: the `Idempotency-Key` is not 1 to 255 visible ASCII characters.
    /// Nothing was executed; fix the key (a client bug).
    InvalidIdempotencyKey,
    /// 400: more than one `Idempotency-Key` header. Nothing was executed;
    /// send exactly one.
    DuplicateIdempotencyKey,
    /// 400: the body is not valid JSON (or names a member twice in an
    /// object). Nothing was executed; fix the body.
    MalformedJson,
    /// 400: a required query parameter is missing. Add it.
    MissingParameter,
    /// 400: a list's query parameter is unknown, repeated or not valid
    /// (`parameter` names it). Nothing was read; fix the query.
    InvalidParameter,
    /// 400: a list's cursor (`starting_after`, `ending_before`) is not one of
    /// the listed objects of this shop. Page with ids from the list itself.
    InvalidCursor,
    /// 401: no valid HTTP Basic credentials of a shop. Nothing was executed;
    /// check the shop id and secret.
    Unauthorized,
    /// 401: the API key was revoked. Nothing was executed; use another key.
    ApiKeyRevoked,
    /// 401: the API key expired (a roll sets the replaced key's expiry).
    /// Nothing was executed; use its successor.
    ApiKeyExpired,
    /// 403: the API key's scope does not allow this request (a `read_only`
    /// key's write, a `payments` key's list). Nothing was executed.
    InsufficientScope,
    /// 409: the shop holds 32 active API keys; revoke one before making or
    /// rolling another. Nothing was made.
    ApiKeyLimitReached,
    /// 409: the key to roll is revoked or expired already. Nothing was made.
    ApiKeyInactive,
    /// 409: the shop has 16 webhook endpoints; delete one before making
    /// another. Nothing was made.
    WebhookEndpointLimitReached,
    /// 409: no enabled webhook endpoint wants the event (or the one named
    /// is disabled or does not want its type): nothing to resend to.
    NoWebhookEndpoint,
    /// 402: the acquirer declined the payment: a definite, stored answer,
    /// replayed to every retry with the same key. The problem carries the
    /// `payment` and its `decline_code`. Do not retry; ask for another
    /// payment method (a new payment needs a new key).
    PaymentDeclined,
    /// 404: no such resource for this shop (or no such route).
    NotFound,
    /// 405: the path exists but not with this method (see `Allow`).
    MethodNotAllowed,
    /// 409: another request with this key is still running. Retry with the
    /// same key after `Retry-After`, or ask to wait with `Prefer: wait=N`.
    RequestInProgress,
    /// 409: the order (`reference`) already has a live payment (succeeded,
    /// or pending) for another amount or currency, made under another key.
    /// Nothing was charged; the problem carries that `payment`. The cart
    /// and the payment disagree: a person must look, never a retry.
    OrderAlreadyPaid,
    /// 409: the payment this key created was canceled before any charge was
    /// found (`POST /v1/payments/{id}/cancel`, or the service gave up on
    /// it): nothing was taken. A stored answer, replayed to every retry;
    /// the problem carries the `payment`. Its order may be paid again
    /// under a new key.
    PaymentCanceled,
    /// 409: the payment was final before the cancel came (succeeded: refund
    /// it instead; declined: nothing was taken). A stored answer; the
    /// problem carries the `payment`.
    PaymentNotCancelable,
    /// 413: the body is larger than the limit. Nothing was executed.
    PayloadTooLarge,
    /// 415: the body is not `application/json`. Nothing was executed.
    UnsupportedMediaType,
    /// 422: this key was first used for a different request (another method,
    /// path or body). Nothing was executed. A client bug: a new operation
    /// needs a new key; never retry it as is.
    IdempotencyKeyReused,
    /// 422: the JSON is well formed but not a valid request (a missing,
    /// unknown or malformed field; `field` names it when it can). Fix the request.
    InvalidRequest,
    /// 422: the amount is not a positive decimal string fitting its
    /// currency's minor units. Fix the amount.
    InvalidAmount,
    /// 422: not a supported ISO 4217 currency.
    UnsupportedCurrency,
    /// 503: the database cannot be reached; the request may or may not have
    /// been recorded. Retry with the same key (it is never executed twice).
    StoreUnavailable,
    /// 503: the acquirer cannot be reached; nothing was sent yet, but the
    /// payment (or refund) stays pending and will be sent by the client's
    /// retry with the same key or else by the server's completer. Retry with
    /// the same key to learn the outcome; never pay again under a new key.
    AcquirerUnavailable,
    /// 400: an acquirer webhook without a well-formed signature header (only
    /// on the acquirer's webhook route).
    MissingSignature,
    /// 401: an acquirer webhook whose signature does not match its body.
    InvalidSignature,
    /// 401: an acquirer webhook signed too long ago (or in the future).
    StaleSignature,
    /// 503: acquirer webhooks are not configured (no secret): nothing was done.
    WebhooksDisabled,
    /// 422: the refund would take the payment's refunds over its amount
    /// (`available_minor` says what is left). Nothing was executed.
    RefundExceedsAmount,
    /// 409 `payment_not_refundable`: the payment has no definite outcome yet
    /// (pending). Nothing was executed; retry the refund once it succeeded.
    PaymentNotYetRefundable,
    /// 422 `payment_not_refundable`: the payment was declined, so there is
    /// nothing to refund. Do not retry.
    PaymentNotRefundable,
    /// 422: the refund's currency is not the payment's. Fix the amount.
    CurrencyMismatch,
    /// 422: the acquirer definitively refused the refund: a stored answer,
    /// replayed to every retry with the same key. The problem carries the
    /// `refund` and its `failure_code`.
    RefundFailed,
    /// 422: the capture asks more than the authorization has left to
    /// capture (`amount_capturable` says how much). Nothing was executed.
    CaptureExceedsCapturable,
    /// 409: the payment cannot be captured: it was charged at once, its
    /// authorization has no definite outcome yet or was declined, or its
    /// hold was used up, voided or expired (`payment_status` says which).
    /// Nothing was executed.
    PaymentNotCapturable,
    /// 409: the payment cannot be voided: it was charged at once, is not
    /// authorized, or its hold was used up, voided or expired. Nothing was
    /// executed.
    PaymentNotVoidable,
    /// 409: a final capture or a release (a void, the expiry) of the
    /// authorization is in flight; a void also waits for captures in
    /// flight. Nothing was executed; retry after `Retry-After`.
    AuthorizationBusy,
    /// 422: the acquirer definitively refused the capture: a stored answer,
    /// replayed to every retry with the same key. The problem carries the
    /// `capture` and its `failure_code`; its amount is capturable again.
    CaptureFailed,
    /// 422: the acquirer definitively refused the void: a stored answer,
    /// replayed to every retry with the same key. The problem carries the
    /// `payment` (its authorization open again) and the `failure_code`.
    VoidFailed,
    /// 429: this shop sent more requests than its rate limit allows; nothing
    /// was executed. Retry (with the same key) after `Retry-After`.
    RateLimited,
    /// 429 `too_many_requests`: not answered by chargeonce itself, but by a
    /// rate limiter in front of it that speaks problem+json. Nothing reached
    /// the API; retry after `Retry-After`.
    TooManyRequests,
    /// 408: the request body did not arrive within the body deadline;
    /// nothing was executed and the connection is closed. Retry.
    BodyTimeout,
    /// 503: the request took longer than the server's per-request limit. A
    /// payment it started runs on; retry with the same key after
    /// `Retry-After` to get its answer.
    RequestTimeout,
    /// 503: the store's queue of new work is full; nothing was executed.
    /// Retry with the same key after `Retry-After`.
    StoreOverloaded,
    /// 500 `internal_error`: a bug on the server. Nothing about it is shown.
    /// The request may or may not have been recorded: retry with the same key.
    InternalError,
    /// 400: the request could not be read as HTTP by the server (a body that
    /// broke off, a refusal of the HTTP stack without a more specific code).
    BadRequest,
    /// Any other error status of the server's HTTP stack (not the API's own)
    /// without a code of its own: the status says what. [`Self::status`]
    /// gives 500, its default.
    HttpError,
}

impl ProblemCode {
    /// Every code, once.
    pub const ALL: &[ProblemCode] = &[
        Self::MissingIdempotencyKey,
        Self::InvalidIdempotencyKey,
        Self::DuplicateIdempotencyKey,
        Self::MalformedJson,
        Self::MissingParameter,
        Self::InvalidParameter,
        Self::InvalidCursor,
        Self::Unauthorized,
        Self::ApiKeyRevoked,
        Self::ApiKeyExpired,
        Self::InsufficientScope,
        Self::ApiKeyLimitReached,
        Self::ApiKeyInactive,
        Self::WebhookEndpointLimitReached,
        Self::NoWebhookEndpoint,
        Self::PaymentDeclined,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::RequestInProgress,
        Self::OrderAlreadyPaid,
        Self::PaymentCanceled,
        Self::PaymentNotCancelable,
        Self::PayloadTooLarge,
        Self::UnsupportedMediaType,
        Self::IdempotencyKeyReused,
        Self::InvalidRequest,
        Self::InvalidAmount,
        Self::UnsupportedCurrency,
        Self::StoreUnavailable,
        Self::AcquirerUnavailable,
        Self::MissingSignature,
        Self::InvalidSignature,
        Self::StaleSignature,
        Self::WebhooksDisabled,
        Self::RefundExceedsAmount,
        Self::PaymentNotYetRefundable,
        Self::PaymentNotRefundable,
        Self::CurrencyMismatch,
        Self::RefundFailed,
        Self::CaptureExceedsCapturable,
        Self::PaymentNotCapturable,
        Self::PaymentNotVoidable,
        Self::AuthorizationBusy,
        Self::CaptureFailed,
        Self::VoidFailed,
        Self::RateLimited,
        Self::TooManyRequests,
        Self::BodyTimeout,
        Self::RequestTimeout,
        Self::StoreOverloaded,
        Self::InternalError,
        Self::BadRequest,
        Self::HttpError,
    ];

    /// The stable code string.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "missing_idempotency_key",
            Self::InvalidIdempotencyKey => "invalid_idempotency_key",
            Self::DuplicateIdempotencyKey => "duplicate_idempotency_key",
            Self::MalformedJson => "malformed_json",
            Self::MissingParameter => "missing_parameter",
            Self::InvalidParameter => "invalid_parameter",
            Self::InvalidCursor => "invalid_cursor",
            Self::Unauthorized => "unauthorized",
            Self::ApiKeyRevoked => "api_key_revoked",
            Self::ApiKeyExpired => "api_key_expired",
            Self::InsufficientScope => "insufficient_scope",
            Self::ApiKeyLimitReached => "api_key_limit_reached",
            Self::ApiKeyInactive => "api_key_inactive",
            Self::WebhookEndpointLimitReached => "webhook_endpoint_limit_reached",
            Self::NoWebhookEndpoint => "no_webhook_endpoint",
            Self::PaymentDeclined => "payment_declined",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::RequestInProgress => "request_in_progress",
            Self::OrderAlreadyPaid => "order_already_paid",
            Self::PaymentCanceled => "payment_canceled",
            Self::PaymentNotCancelable => "payment_not_cancelable",
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
            Self::CaptureExceedsCapturable => "capture_exceeds_capturable",
            Self::PaymentNotCapturable => "payment_not_capturable",
            Self::PaymentNotVoidable => "payment_not_voidable",
            Self::AuthorizationBusy => "authorization_busy",
            Self::CaptureFailed => "capture_failed",
            Self::VoidFailed => "void_failed",
            Self::RateLimited => "rate_limited",
            Self::TooManyRequests => "too_many_requests",
            Self::BodyTimeout => "body_timeout",
            Self::RequestTimeout => "request_timeout",
            Self::StoreOverloaded => "store_overloaded",
            Self::InternalError => "internal_error",
            Self::BadRequest => "bad_request",
            Self::HttpError => "http_error",
        }
    }

    /// The HTTP status it is answered with ([`Self::HttpError`] comes with
    /// the status it stands for; this is its default, 500).
    pub const fn status(self) -> u16 {
        match self {
            Self::MissingIdempotencyKey
            | Self::InvalidIdempotencyKey
            | Self::DuplicateIdempotencyKey
            | Self::MalformedJson
            | Self::MissingParameter
            | Self::InvalidParameter
            | Self::InvalidCursor
            | Self::MissingSignature
            | Self::BadRequest => 400,
            Self::Unauthorized
            | Self::ApiKeyRevoked
            | Self::ApiKeyExpired
            | Self::InvalidSignature
            | Self::StaleSignature => 401,
            Self::PaymentDeclined => 402,
            Self::InsufficientScope => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::BodyTimeout => 408,
            Self::RequestInProgress
            | Self::OrderAlreadyPaid
            | Self::PaymentCanceled
            | Self::PaymentNotCancelable
            | Self::PaymentNotYetRefundable
            | Self::PaymentNotCapturable
            | Self::PaymentNotVoidable
            | Self::AuthorizationBusy
            | Self::ApiKeyLimitReached
            | Self::ApiKeyInactive
            | Self::WebhookEndpointLimitReached
            | Self::NoWebhookEndpoint => 409,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::IdempotencyKeyReused
            | Self::InvalidRequest
            | Self::InvalidAmount
            | Self::UnsupportedCurrency
            | Self::RefundExceedsAmount
            | Self::PaymentNotRefundable
            | Self::CurrencyMismatch
            | Self::RefundFailed
            | Self::CaptureExceedsCapturable
            | Self::CaptureFailed
            | Self::VoidFailed => 422,
            Self::RateLimited | Self::TooManyRequests => 429,
            Self::InternalError | Self::HttpError => 500,
            Self::StoreUnavailable
            | Self::AcquirerUnavailable
            | Self::WebhooksDisabled
            | Self::RequestTimeout
            | Self::StoreOverloaded => 503,
        }
    }

    /// A short human summary, the same for every occurrence (the problem
    /// document's `title`).
    pub const fn title(self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "Idempotency-Key header is required",
            Self::InvalidIdempotencyKey => "Idempotency-Key header is invalid",
            Self::DuplicateIdempotencyKey => "Only one Idempotency-Key header is allowed",
            Self::MalformedJson => "The body is not valid JSON",
            Self::MissingParameter => "A required parameter is missing",
            Self::InvalidParameter => "A query parameter is not valid",
            Self::InvalidCursor => "The cursor is not one of this list's objects",
            Self::Unauthorized => "Shop credentials are missing or wrong",
            Self::ApiKeyRevoked => "The API key was revoked",
            Self::ApiKeyExpired => "The API key expired",
            Self::InsufficientScope => "The API key's scope does not allow this request",
            Self::ApiKeyLimitReached => "The shop holds as many active API keys as it may",
            Self::ApiKeyInactive => "The API key is revoked or expired",
            Self::WebhookEndpointLimitReached => "The shop has as many webhook endpoints as it may",
            Self::NoWebhookEndpoint => "No enabled webhook endpoint wants this event",
            Self::PaymentDeclined => "The payment was declined",
            Self::NotFound => "Not found",
            Self::MethodNotAllowed => "Method not allowed",
            Self::RequestInProgress => "A request with this key is still in progress",
            Self::OrderAlreadyPaid => "The order is already paid with another amount",
            Self::PaymentCanceled => "The payment was canceled",
            Self::PaymentNotCancelable => "The payment is final and cannot be canceled",
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
            Self::CaptureExceedsCapturable => "The capture exceeds what the authorization has left",
            Self::PaymentNotCapturable => "The payment cannot be captured",
            Self::PaymentNotVoidable => "The payment cannot be voided",
            Self::AuthorizationBusy => "Another move of the authorization is in flight",
            Self::CaptureFailed => "The acquirer refused the capture",
            Self::VoidFailed => "The acquirer refused the void",
            Self::RateLimited => "Too many requests for this shop",
            Self::TooManyRequests => "Too many requests",
            Self::BodyTimeout => "The request body did not arrive in time",
            Self::RequestTimeout => "The request took too long",
            Self::StoreOverloaded => "The service is too busy to take new work",
            Self::InternalError => "Internal error",
            Self::BadRequest => "The request could not be read",
            Self::HttpError => "The request was refused",
        }
    }

    /// Reads a `code` string with the status it came with; `None` for a code
    /// this version does not know. The status only tells apart the two
    /// meanings of `payment_not_refundable` (409: not yet; anything else:
    /// never).
    pub fn parse(code: &str, status: u16) -> Option<Self> {
        if code == "payment_not_refundable" {
            return Some(if status == 409 {
                Self::PaymentNotYetRefundable
            } else {
                Self::PaymentNotRefundable
            });
        }
        Self::ALL
            .iter()
            .copied()
            .find(|known| known.as_str() == code)
    }

    /// The type URI of its problem documents (`urn:chargeonce:problem:<code>`).
    pub fn type_uri(self) -> String {
        format!("{}{}", crate::PROBLEM_TYPE_PREFIX, self.as_str())
    }
}

impl std::fmt::Display for ProblemCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The schema of a problem's `code`: a string, one of the code strings
/// (a client must still expect codes it does not know).
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ProblemCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let mut codes: Vec<&'static str> = Self::ALL.iter().map(|code| code.as_str()).collect();
        codes.dedup();
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "The stable code of the problem; `payment_not_refundable` is 409 (not yet) or \
                 422 (never). Clients must expect codes they do not know.",
            ))
            .enum_values(Some(codes))
            .examples(["idempotency_key_reused"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ProblemCode {}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_code_round_trips_through_parse() {
        for &code in ProblemCode::ALL {
            assert_eq!(
                ProblemCode::parse(code.as_str(), code.status()),
                Some(code),
                "{code}"
            );
        }
        assert_eq!(ProblemCode::parse("brand_new", 400), None);
    }

    #[test]
    fn codes_are_unique_per_code_and_status() {
        let pairs: HashSet<_> = ProblemCode::ALL
            .iter()
            .map(|code| (code.as_str(), code.status()))
            .collect();
        assert_eq!(pairs.len(), ProblemCode::ALL.len());
        let variants: HashSet<_> = ProblemCode::ALL.iter().collect();
        assert_eq!(variants.len(), ProblemCode::ALL.len());
    }

    #[test]
    fn payment_not_refundable_is_told_apart_by_status() {
        assert_eq!(
            ProblemCode::parse("payment_not_refundable", 409),
            Some(ProblemCode::PaymentNotYetRefundable)
        );
        assert_eq!(
            ProblemCode::parse("payment_not_refundable", 422),
            Some(ProblemCode::PaymentNotRefundable)
        );
    }
}
