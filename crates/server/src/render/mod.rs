//! How the service's objects look on the wire: the core's domain types
//! converted into the wire types of [`chargeonce_wire`], in one place for
//! the routes and the console: payments, refunds and keys here, a payment's
//! history in [`history`], merchant events in [`event`]. The engine stores
//! what [`HttpRender`] ([`stored`]) renders, and replays those bytes
//! unchanged.

pub mod api_key;
pub mod event;
pub mod history;
mod stored;
pub mod webhook_endpoint;

pub use stored::HttpRender;

use chargeonce_core::{
    Capture, CaptureMethod, CaptureStatus, Currency, KeyInfo, Money, Payment, PaymentCapture,
    PaymentStatus, RecoveryPoint, Refund, RefundStatus, ShownStatus,
};
use chargeonce_wire as wire;
use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An amount as the API shows it: a decimal string with exactly the
/// currency's minor units.
pub fn amount(money: Money) -> wire::Amount {
    wire::Amount::new(money.to_decimal_string(), money.currency().code())
}

/// An amount in minor units of `like`'s currency.
pub fn amount_minor(minor: i64, like: Money) -> wire::Amount {
    amount_in(minor, like.currency())
}

/// An amount in minor units of `currency` (zero included: `"0.00"`).
pub fn amount_in(minor: i64, currency: Currency) -> wire::Amount {
    wire::Amount::new(
        Money::from_minor(minor, currency)
            .map(|m| m.to_decimal_string())
            .unwrap_or_else(|_| zero(currency)),
        currency.code(),
    )
}

/// Zero with the currency's minor digits (`"0.00"` for RUB).
fn zero(currency: Currency) -> String {
    match currency.minor_units() {
        0 => "0".to_owned(),
        digits => format!("0.{}", "0".repeat(digits as usize)),
    }
}

/// A payment as the API shows it; the payment method token is never shown.
pub fn payment(payment: &Payment) -> wire::Payment {
    wire::Payment {
        id: payment.id.as_str().to_owned(),
        object: wire::PaymentObject::Payment,
        livemode: payment.shop_id.is_live(),
        // The shop's own id in either mode (`{shop}.test` is how test
        // mode is stored, not a name the shop knows).
        shop_id: payment.shop_id.shop().as_str().to_owned(),
        status: shown_status(payment),
        amount: amount(payment.amount),
        reference: payment.reference.as_str().to_owned(),
        provider_payment_id: payment.provider_payment_id.clone(),
        decline_code: payment.decline_code.clone(),
        created_at: rfc3339(payment.created_at),
        amount_refunded: amount_minor(payment.refunded_minor, payment.amount),
        refund_status: match payment.refunded_minor {
            0 => wire::PaymentRefundStatus::None,
            n if n >= payment.amount.minor_units() => wire::PaymentRefundStatus::Refunded,
            _ => wire::PaymentRefundStatus::PartiallyRefunded,
        },
        metadata: payment.metadata.as_map().clone(),
        capture_method: match payment.capture.method() {
            CaptureMethod::Automatic => wire::CaptureMethod::Automatic,
            CaptureMethod::Manual => wire::CaptureMethod::Manual,
        },
        amount_capturable: Some(amount_minor(capturable_minor(payment), payment.amount)),
        amount_captured: Some(amount_minor(captured_minor(payment), payment.amount)),
        authorization_expires_at: match payment.capture {
            PaymentCapture::Manual { expires_at, .. } => Some(rfc3339(expires_at)),
            PaymentCapture::Automatic => None,
        },
    }
}

/// What a payment's status shows: an authorization's own once it stands
/// (`authorized`, `partially_captured`, `succeeded`, `voided`, `expired`).
fn shown_status(payment: &Payment) -> wire::PaymentStatus {
    match ShownStatus::of(payment) {
        ShownStatus::Pending => wire::PaymentStatus::Pending,
        ShownStatus::Succeeded => wire::PaymentStatus::Succeeded,
        ShownStatus::Declined => wire::PaymentStatus::Declined,
        ShownStatus::Canceled => wire::PaymentStatus::Canceled,
        ShownStatus::Authorized => wire::PaymentStatus::Authorized,
        ShownStatus::PartiallyCaptured => wire::PaymentStatus::PartiallyCaptured,
        ShownStatus::Voided => wire::PaymentStatus::Voided,
        ShownStatus::Expired => wire::PaymentStatus::Expired,
    }
}

/// What captures may still take (0 for a payment charged at once).
fn capturable_minor(payment: &Payment) -> i64 {
    payment
        .authorization()
        .map_or(0, |hold| hold.capturable_minor())
}

/// What was taken: a succeeded charge's amount, an authorization's
/// captures.
fn captured_minor(payment: &Payment) -> i64 {
    match (payment.capture, payment.authorization()) {
        (_, Some(hold)) => hold.captured_minor(),
        (PaymentCapture::Automatic, None) if payment.status == PaymentStatus::Succeeded => {
            payment.amount.minor_units()
        }
        _ => 0,
    }
}

/// A capture as the API shows it.
pub fn capture(capture: &Capture) -> wire::Capture {
    wire::Capture {
        id: capture.id.as_str().to_owned(),
        object: wire::CaptureObject::Capture,
        livemode: capture.shop_id.is_live(),
        payment_id: capture.payment_id.as_str().to_owned(),
        shop_id: capture.shop_id.shop().as_str().to_owned(),
        status: match capture.status {
            CaptureStatus::Pending => wire::CaptureStatus::Pending,
            CaptureStatus::Succeeded => wire::CaptureStatus::Succeeded,
            CaptureStatus::Failed => wire::CaptureStatus::Failed,
        },
        amount: amount(capture.amount),
        last: capture.last,
        provider_capture_id: capture.provider_capture_id.clone(),
        failure_code: capture.failure_code.clone(),
        created_at: rfc3339(capture.created_at),
    }
}

/// The location of a capture resource.
pub fn capture_location(capture: &Capture) -> String {
    format!("/v1/captures/{}", capture.id)
}

/// A payment's status as the API names it.
pub fn payment_status(status: PaymentStatus) -> wire::PaymentStatus {
    match status {
        PaymentStatus::Pending => wire::PaymentStatus::Pending,
        PaymentStatus::Succeeded => wire::PaymentStatus::Succeeded,
        PaymentStatus::Declined => wire::PaymentStatus::Declined,
        PaymentStatus::Canceled => wire::PaymentStatus::Canceled,
    }
}

/// A key's recovery point as the API names it.
pub fn recovery_point(point: RecoveryPoint) -> wire::KeyRecoveryPoint {
    match point {
        RecoveryPoint::PaymentCreated => wire::KeyRecoveryPoint::PaymentCreated,
        RecoveryPoint::OrderAlreadyPaid => wire::KeyRecoveryPoint::OrderAlreadyPaid,
        RecoveryPoint::RefundCreated => wire::KeyRecoveryPoint::RefundCreated,
        RecoveryPoint::CancelRequested => wire::KeyRecoveryPoint::CancelRequested,
        RecoveryPoint::CaptureCreated => wire::KeyRecoveryPoint::CaptureCreated,
        RecoveryPoint::VoidRequested => wire::KeyRecoveryPoint::VoidRequested,
        RecoveryPoint::Finished => wire::KeyRecoveryPoint::Finished,
    }
}

/// An amount stored as minor units and a currency code (a history entry's)
/// as money, when the code is one we know (a stored entry always has one).
pub fn money_of(minor: i64, currency: &str) -> Option<Money> {
    Currency::from_code(currency)
        .ok()
        .and_then(|c| Money::from_minor(minor, c).ok())
}

/// A refund as the API shows it.
pub fn refund(refund: &Refund) -> wire::Refund {
    wire::Refund {
        id: refund.id.as_str().to_owned(),
        object: wire::RefundObject::Refund,
        livemode: refund.shop_id.is_live(),
        payment_id: refund.payment_id.as_str().to_owned(),
        shop_id: refund.shop_id.shop().as_str().to_owned(),
        status: match refund.status {
            RefundStatus::Pending => wire::RefundStatus::Pending,
            RefundStatus::Succeeded => wire::RefundStatus::Succeeded,
            RefundStatus::Failed => wire::RefundStatus::Failed,
        },
        amount: amount(refund.amount),
        provider_refund_id: refund.provider_refund_id.clone(),
        failure_code: refund.failure_code.clone(),
        created_at: rfc3339(refund.created_at),
    }
}

/// A time as RFC 3339 (UTC, as the store keeps it): every time the API
/// answers is written by this.
pub fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// An idempotency key as `GET /v1/idempotency-keys/{key}` shows it: never
/// the lease's token, only its holder and deadline.
pub fn key(info: &KeyInfo) -> wire::IdempotencyKeyInfo {
    let finished = info.recovery_point == RecoveryPoint::Finished;
    wire::IdempotencyKeyInfo {
        object: wire::IdempotencyKeyObject::IdempotencyKey,
        key: info.key.as_str().to_owned(),
        state: if finished {
            wire::KeyState::Finished
        } else {
            wire::KeyState::InProgress
        },
        recovery_point: recovery_point(info.recovery_point),
        request: wire::KeyRequest {
            method: info.method.clone(),
            path: info.path.clone(),
            fingerprint: info.fingerprint.to_hex(),
        },
        created_at: rfc3339(info.created_at),
        repeats: info.repeats,
        last_repeat_at: info.last_repeat_at.map(rfc3339),
        expires_at: rfc3339(info.expires_at),
        lease: info.lease.as_ref().map(|lease| wire::KeyLease {
            holder: lease.holder.clone(),
            expires_at: rfc3339(lease.until),
        }),
        parked_until: info.parked_until.map(rfc3339),
        response_status: info.status,
        payment_id: info.payment_id.as_ref().map(|id| id.as_str().to_owned()),
        refund_id: info.refund_id.as_ref().map(|id| id.as_str().to_owned()),
    }
}

/// As a JSON value, its members sorted by name: a resource embedded in a
/// problem document (an extension member). Resources answered on their own
/// (a `GET`, a list, a `POST`'s stored answer) are serialised from their
/// wire type, in declaration order.
pub fn to_value(resource: &impl Serialize) -> Value {
    serde_json::to_value(resource).unwrap_or_default()
}

/// As JSON bytes, its members in declaration order: the stored (and
/// replayed) bodies of `POST`s and the 202s.
pub fn to_bytes(resource: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(resource).unwrap_or_default()
}

/// The location of a refund resource.
pub fn refund_location(refund: &Refund) -> String {
    format!("/v1/refunds/{}", refund.id)
}

/// The location of a payment resource.
pub fn payment_location(payment: &Payment) -> String {
    format!("/v1/payments/{}", payment.id)
}
