//! The answers of an authorization's moves that are not stored: a capture
//! or void without a definite answer yet, one the acquirer could not be
//! reached for, and the refusals made before anything executed.

use std::time::Duration;

use axum::response::Response;
use chargeonce_core::authorization::{AuthorizationStatus, CaptureRefusal, ReleaseRefusal};
use chargeonce_core::{Capture, CaptureClaimRefusal, Payment, PaymentStatus, ReleaseClaimRefusal};

use super::accepted;
use crate::problem::{Problem, ProblemCode};
use crate::render::{self, capture_location, payment_location};

/// How long a client waits before retrying a move refused because another
/// is in flight (the other's acquirer call usually ends within this).
const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// 202 with the pending capture: its outcome at the acquirer is not known
/// yet (its amount stays reserved).
pub(super) fn capture_pending(capture: &Capture, retry_after: Duration) -> Response {
    accepted(
        render::to_bytes(&render::capture(capture)),
        retry_after,
        &capture_location(capture),
    )
}

/// 202 with the payment whose void is in flight (its authorization
/// releasing: no capture is accepted meanwhile).
pub(super) fn void_pending(payment: &Payment, retry_after: Duration) -> Response {
    accepted(
        render::to_bytes(&render::payment(payment)),
        retry_after,
        &payment_location(payment),
    )
}

/// 503 `acquirer_unavailable` for a capture: this attempt sent nothing;
/// the capture stays pending (its amount reserved) and will be sent.
pub(super) fn capture_not_sent(capture: &Capture, retry_after: Duration, resumed: bool) -> Problem {
    let detail = if resumed {
        "the acquirer could not be reached, so this attempt sent nothing. An earlier attempt of \
         this capture may have reached it: its outcome is not known yet. The capture stays \
         pending (its amount reserved) and will be resolved: when you retry with the same key, \
         or else by chargeonce itself shortly"
    } else {
        "the acquirer could not be reached, so nothing has been sent yet. The capture stays \
         pending (its amount reserved) and will be sent: when you retry with the same key, or \
         else by chargeonce itself shortly"
    };
    Problem::new(ProblemCode::AcquirerUnavailable, detail)
        .with("capture", render::to_value(&render::capture(capture)))
        .with("will_be_sent", true.into())
        .retry_after(retry_after)
}

/// 503 `acquirer_unavailable` for a void: this attempt sent nothing; the
/// authorization stays releasing and the void will be sent.
pub(super) fn void_not_sent(payment: &Payment, retry_after: Duration, resumed: bool) -> Problem {
    let detail = if resumed {
        "the acquirer could not be reached, so this attempt sent nothing. An earlier attempt of \
         this void may have reached it: its outcome is not known yet. The void will be resolved: \
         when you retry with the same key, or else by chargeonce itself shortly"
    } else {
        "the acquirer could not be reached, so nothing has been sent yet. The void will be sent: \
         when you retry with the same key, or else by chargeonce itself shortly"
    };
    Problem::new(ProblemCode::AcquirerUnavailable, detail)
        .with("payment", render::to_value(&render::payment(payment)))
        .with("will_be_sent", true.into())
        .retry_after(retry_after)
}

/// The problem for a capture refused before anything executed. Nothing is
/// stored against the key: the client may retry it once the cause is gone.
pub fn capture_refused(reason: CaptureClaimRefusal) -> Problem {
    match reason {
        CaptureClaimRefusal::PaymentNotFound => not_found(),
        CaptureClaimRefusal::NotAnAuthorization => Problem::new(
            ProblemCode::PaymentNotCapturable,
            "the payment was charged at once (capture_method automatic): there is nothing to capture",
        )
        .with("payment_status", "succeeded".into()),
        CaptureClaimRefusal::NotAuthorized(status) => not_authorized(
            ProblemCode::PaymentNotCapturable,
            status,
            "captured",
        ),
        CaptureClaimRefusal::CurrencyMismatch => Problem::new(
            ProblemCode::CurrencyMismatch,
            "a capture is in the payment's currency",
        ),
        CaptureClaimRefusal::ExceedsCapturable {
            capturable_minor,
            currency,
        } => Problem::new(
            ProblemCode::CaptureExceedsCapturable,
            "captures together never exceed what was authorized (captures in flight hold \
             their amount until they end)",
        )
        .with(
            "amount_capturable",
            render::to_value(&render::amount_in(capturable_minor, currency)),
        ),
        CaptureClaimRefusal::Refused(CaptureRefusal::NotPositive) => Problem::new(
            ProblemCode::InvalidAmount,
            "a capture takes more than zero",
        )
        .with("field", "amount".into()),
        CaptureClaimRefusal::Refused(CaptureRefusal::ExceedsCapturable { capturable_minor }) => {
            Problem::new(
                ProblemCode::CaptureExceedsCapturable,
                "captures together never exceed what was authorized",
            )
            .with("capturable_minor", capturable_minor.into())
        }
        CaptureClaimRefusal::Refused(CaptureRefusal::InProgress) => Problem::new(
            ProblemCode::AuthorizationBusy,
            "a final capture or a release of this authorization is in flight; retry after it ended",
        )
        .retry_after(BUSY_RETRY_AFTER),
        CaptureClaimRefusal::Refused(CaptureRefusal::Closed(status)) => {
            closed(ProblemCode::PaymentNotCapturable, status, "captured")
        }
    }
}

/// The problem for a void refused before anything executed. Nothing is
/// stored against the key.
pub fn void_refused(reason: ReleaseClaimRefusal) -> Problem {
    match reason {
        ReleaseClaimRefusal::PaymentNotFound => not_found(),
        ReleaseClaimRefusal::NotAnAuthorization => Problem::new(
            ProblemCode::PaymentNotVoidable,
            "the payment was charged at once (capture_method automatic): refund it instead",
        )
        .with("payment_status", "succeeded".into()),
        ReleaseClaimRefusal::NotAuthorized(status) => {
            not_authorized(ProblemCode::PaymentNotVoidable, status, "voided")
        }
        ReleaseClaimRefusal::Refused(ReleaseRefusal::CapturesInProgress) => Problem::new(
            ProblemCode::AuthorizationBusy,
            "captures of this authorization are in flight; retry the void after they ended",
        )
        .retry_after(BUSY_RETRY_AFTER),
        ReleaseClaimRefusal::Refused(ReleaseRefusal::ReleaseInProgress) => Problem::new(
            ProblemCode::AuthorizationBusy,
            "a release of this authorization (a void under another key, or its expiry) is in \
             flight; retry after it ended",
        )
        .retry_after(BUSY_RETRY_AFTER),
        ReleaseClaimRefusal::Refused(ReleaseRefusal::Closed(status)) => {
            closed(ProblemCode::PaymentNotVoidable, status, "voided")
        }
    }
}

fn not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such payment for this shop")
}

/// An authorization with no hold standing: still pending, declined or
/// canceled.
fn not_authorized(code: ProblemCode, status: PaymentStatus, what: &str) -> Problem {
    let detail = match status {
        PaymentStatus::Pending => format!(
            "the authorization has no definite outcome yet; it can be {what} once it is authorized"
        ),
        other => format!(
            "a {} authorization holds nothing to be {what}",
            other.as_str()
        ),
    };
    Problem::new(code, detail).with("payment_status", status.as_str().into())
}

/// A hold used up, voided or expired.
fn closed(code: ProblemCode, status: AuthorizationStatus, what: &str) -> Problem {
    let how = match status {
        AuthorizationStatus::Voided => "was voided",
        AuthorizationStatus::Expired => "expired",
        _ => "was used up by its captures",
    };
    Problem::new(
        code,
        format!("the authorization {how}: nothing is left to be {what}"),
    )
    .with("payment_status", status.as_str().into())
}
