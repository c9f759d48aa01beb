//! Turning engine outcomes and errors into HTTP answers.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{
    Chain, EngineError, Outcome, PaymentStatus, Refund, RefundRefusal, StoreError, StoredResponse,
};

use crate::problem::{Problem, ProblemCode, retry_after_value};
use crate::render::{self, payment_location, refund_location};

mod lifecycle;
pub mod made;

/// Marks an answer that is a stored first response, replayed.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The answer for an engine outcome.
pub fn outcome_response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Executed(stored) => stored_response(stored, false),
        Outcome::Replayed(stored) => stored_response(stored, true),
        // A payment without a definite answer yet, or a cancel not ended:
        // 202 with the payment as it stands.
        Outcome::Pending {
            payment,
            retry_after,
        }
        | Outcome::CancelPending {
            payment,
            retry_after,
        } => accepted(
            render::to_bytes(&render::payment(&payment)),
            retry_after,
            &payment_location(&payment),
        ),
        Outcome::NoSuchPayment => {
            Problem::new(ProblemCode::NotFound, "no such payment for this shop").into_response()
        }
        Outcome::OrderPaidOtherwise { payment } => Problem::new(
            ProblemCode::OrderAlreadyPaid,
            format!(
                "order {} already has a payment ({}) of {} {} under another key; nothing was \
                 charged. The request asks for another amount: do not ship it as paid, and do \
                 not retry it as is",
                payment.reference.as_str(),
                chargeonce_core::ShownStatus::of(&payment).as_str(),
                payment.amount.to_decimal_string(),
                payment.amount.currency().code()
            ),
        )
        .with("payment", render::to_value(&render::payment(&payment)))
        .into_response(),
        Outcome::InProgress { retry_after } => Problem::new(
            ProblemCode::RequestInProgress,
            "the first request with this key is still running; retry with the same key",
        )
        .retry_after(retry_after)
        .into_response(),
        Outcome::Mismatch => Problem::new(
            ProblemCode::IdempotencyKeyReused,
            "this key was first used with another method, path or body; nothing was executed. \
             Use a new key for a new operation",
        )
        .into_response(),
        Outcome::AcquirerUnavailable {
            payment,
            retry_after,
            resumed,
        } => Problem::new(
            ProblemCode::AcquirerUnavailable,
            if resumed {
                RESUMED_NOT_SENT
            } else {
                NOT_SENT_YET
            },
        )
        .with("payment", render::to_value(&render::payment(&payment)))
        .with("will_be_sent", true.into())
        .retry_after(retry_after)
        .into_response(),
        Outcome::RefundPending {
            refund,
            retry_after,
        } => refund_pending(&refund, retry_after),
        Outcome::RefundAcquirerUnavailable {
            refund,
            retry_after,
            resumed,
        } => Problem::new(
            ProblemCode::AcquirerUnavailable,
            if resumed {
                REFUND_RESUMED_NOT_SENT
            } else {
                REFUND_NOT_SENT_YET
            },
        )
        .with("refund", render::to_value(&render::refund(&refund)))
        .with("will_be_sent", true.into())
        .retry_after(retry_after)
        .into_response(),
        Outcome::RefundRefused(reason) => refund_refused(reason).into_response(),
        Outcome::CapturePending {
            capture,
            retry_after,
        } => lifecycle::capture_pending(&capture, retry_after),
        Outcome::CaptureAcquirerUnavailable {
            capture,
            retry_after,
            resumed,
        } => lifecycle::capture_not_sent(&capture, retry_after, resumed).into_response(),
        Outcome::CaptureRefused(reason) => lifecycle::capture_refused(reason).into_response(),
        Outcome::VoidPending {
            payment,
            retry_after,
        } => lifecycle::void_pending(&payment, retry_after),
        Outcome::VoidAcquirerUnavailable {
            payment,
            retry_after,
            resumed,
        } => lifecycle::void_not_sent(&payment, retry_after, resumed).into_response(),
        Outcome::VoidRefused(reason) => lifecycle::void_refused(reason).into_response(),
    }
}

/// What a 503 `acquirer_unavailable` says: true now, and true later. The
/// acquirer got nothing yet, but the payment stays pending and will be sent:
/// by the client's retry with the same key, or else by the completer. It is
/// not a failure; nothing may be paid again under a new key.
const NOT_SENT_YET: &str = "the acquirer could not be reached, so nothing has been sent yet. \
     The payment stays pending and will be sent: when you retry with the same key, or else by \
     chargeonce itself shortly. Retry with the same key to learn the outcome; do not pay the \
     order again under a new key";

/// What a 503 `acquirer_unavailable` says of a resumed attempt (a retry or
/// a take-over): this attempt sent nothing, but an earlier one may have
/// reached the acquirer, and may have charged (issue 31: a support agent
/// read "nothing has been sent yet" and told the customer "not charged"
/// while the first attempt had charged).
const RESUMED_NOT_SENT: &str = "the acquirer could not be reached, so this attempt sent \
     nothing. An earlier attempt of this payment may have reached it, and may have charged: its \
     outcome is not known yet. The payment stays pending and will be resolved: when you retry \
     with the same key, or else by chargeonce itself shortly. Retry with the same key to learn \
     the outcome; do not pay the order again under a new key";

/// The refund's version of [`RESUMED_NOT_SENT`].
const REFUND_RESUMED_NOT_SENT: &str = "the acquirer could not be reached, so this attempt sent \
     nothing. An earlier attempt of this refund may have reached it: its outcome is not known \
     yet. The refund stays pending (its amount reserved) and will be resolved: when you retry \
     with the same key, or else by chargeonce itself shortly. Retry with the same key to learn \
     the outcome";

/// The refund's version of [`NOT_SENT_YET`].
const REFUND_NOT_SENT_YET: &str = "the acquirer could not be reached, so nothing has been sent \
     yet. The refund stays pending (its amount reserved) and will be sent: when you retry with \
     the same key, or else by chargeonce itself shortly. Retry with the same key to learn the \
     outcome";

/// 202 with the pending refund: its outcome at the acquirer is not known yet.
fn refund_pending(refund: &Refund, retry_after: std::time::Duration) -> Response {
    accepted(
        render::to_bytes(&render::refund(refund)),
        retry_after,
        &refund_location(refund),
    )
}

/// 202 with a JSON body (an object as it stands), `Retry-After` and the
/// object's `Location`.
fn accepted(body: Vec<u8>, retry_after: std::time::Duration, location: &str) -> Response {
    let mut response = (
        StatusCode::ACCEPTED,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, retry_after_value(retry_after));
    if let Ok(location) = HeaderValue::try_from(location) {
        headers.insert(header::LOCATION, location);
    }
    response
}

/// The problem for a refund refused before anything executed. Nothing is
/// stored against the key: the client may retry it once the cause is gone.
pub fn refund_refused(reason: RefundRefusal) -> Problem {
    match reason {
        RefundRefusal::PaymentNotFound => {
            Problem::new(ProblemCode::NotFound, "no such payment for this shop")
        }
        RefundRefusal::NotRefundable(PaymentStatus::Pending) => Problem::new(
            ProblemCode::PaymentNotYetRefundable,
            "the payment has no definite outcome yet; retry the refund once it succeeded",
        )
        .with("payment_status", "pending".into()),
        RefundRefusal::NotRefundable(status) => Problem::new(
            ProblemCode::PaymentNotRefundable,
            format!("a {} payment moved no money to refund", status.as_str()),
        )
        .with("payment_status", status.as_str().into()),
        RefundRefusal::CurrencyMismatch => Problem::new(
            ProblemCode::CurrencyMismatch,
            "a refund is in the payment's currency",
        ),
        RefundRefusal::ExceedsAmount { available_minor } => Problem::new(
            ProblemCode::RefundExceedsAmount,
            "the refunds of a payment never exceed its amount",
        )
        .with("available_minor", available_minor.into()),
    }
}

/// A stored response, byte for byte, with `Idempotent-Replayed: true` on replays.
fn stored_response(stored: StoredResponse, replayed: bool) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, stored.body).into_response();
    let headers = response.headers_mut();
    for (name, value) in stored.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            headers.insert(name, value);
        }
    }
    if replayed {
        headers.insert(
            HeaderName::from_static(IDEMPOTENT_REPLAYED),
            HeaderValue::from_static("true"),
        );
    }
    response
}

/// The problem for a store failure: 503 when the database is out of reach,
/// 500 otherwise, never with internals in the body. The 503 does not claim
/// that nothing happened: a write may have committed just before the
/// connection broke (then its key is resumed by the retry or the completer).
pub fn store_problem(error: StoreError) -> Problem {
    match error {
        StoreError::Unavailable { source: reason } => {
            tracing::warn!(reason = %Chain(reason.as_ref()), "store unavailable");
            Problem::new(
                ProblemCode::StoreUnavailable,
                "the database could not be reached, so this request may or may not have been \
                 recorded. Retry with the same key: what was recorded is resumed, never \
                 executed twice",
            )
            .retry_after(std::time::Duration::from_secs(1))
        }
        StoreError::Overloaded { source: reason } => {
            tracing::debug!(%reason, "store overloaded; new work refused");
            Problem::new(
                ProblemCode::StoreOverloaded,
                "the service is too busy to take new work; nothing was executed. \
                 Retry with the same key",
            )
            .retry_after(std::time::Duration::from_secs(1))
        }
        other => {
            tracing::error!(error = %Chain(&other), "store error");
            Problem::new(ProblemCode::InternalError, "internal error")
        }
    }
}

/// The problem for an engine failure.
pub fn engine_problem(error: EngineError) -> Problem {
    match error {
        EngineError::Store(error) => store_problem(error),
        EngineError::Unrecorded(error) => {
            tracing::error!(error = %Chain(&error), "acquirer answer not recorded");
            Problem::new(
                ProblemCode::StoreUnavailable,
                "the acquirer answered but the answer could not be recorded; \
                 retry with the same key to get it (nothing will be charged twice)",
            )
            .retry_after(std::time::Duration::from_secs(1))
        }
    }
}
