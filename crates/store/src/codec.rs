//! What the stores' writes bind: domain values turned into column values,
//! shared by both stores so they write exactly alike. (Rows read back are
//! in [`crate::rows`].)

use chargeonce_core::authorization::Hold;
use chargeonce_core::events::AttemptOutcome;
use chargeonce_core::{
    Acquired, ClaimRequest, EventRecorded, Lease, LeaseToken, Money, NewRefund, Payment,
    RecoveryPoint, Refund, RefundSettlement, RefundStatus, StoreError,
};
use chargeonce_core::{CaptureMethod, CaptureSettlement, CaptureStatus, NewPayment};

/// The stored form of an answer's headers ([`crate::stored_headers`]).
pub(crate) fn encode_headers(headers: &[(String, String)]) -> Result<String, StoreError> {
    crate::stored_headers::encode(headers)
}

/// Milliseconds in a duration, saturated to what an SQL BIGINT holds.
pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The stored result of an acquirer event.
pub(crate) fn event_result(recorded: &EventRecorded) -> &'static str {
    match recorded {
        EventRecorded::Settled(_) => "settled",
        EventRecorded::UnknownPayment => "unknown_payment",
        EventRecorded::Unchanged(_) | EventRecorded::Duplicate => "unchanged",
    }
}

/// The `hold` column of a payment phase 1 inserts: open for an
/// authorization (it stands once the charge succeeds), none for a charge
/// made at once.
pub(crate) fn initial_hold(payment: &NewPayment) -> Option<&'static str> {
    (payment.request.capture_method == CaptureMethod::Manual).then_some(Hold::Open.as_str())
}

/// The pending refund row phase 1 inserts.
pub(crate) fn new_refund_row(refund: &NewRefund, amount: Money) -> Refund {
    Refund {
        id: refund.id.clone(),
        shop_id: refund.shop_id.clone(),
        payment_id: refund.payment_id.clone(),
        idempotency_key: refund.idempotency_key.clone(),
        amount,
        status: RefundStatus::Pending,
        acquirer_key: refund.id.acquirer_key(),
        provider_refund_id: None,
        failure_code: None,
        created_at: refund.created_at,
    }
}

/// The refund columns a settlement writes: status, provider id, failure code.
pub(crate) fn refund_settlement_columns(
    settlement: &RefundSettlement,
) -> (RefundStatus, Option<String>, Option<String>) {
    match settlement {
        RefundSettlement::Succeeded { provider_refund_id } => (
            RefundStatus::Succeeded,
            Some(provider_refund_id.clone()),
            None,
        ),
        RefundSettlement::Failed { code } => (RefundStatus::Failed, None, Some(code.clone())),
    }
}

/// The columns a capture's settlement writes: status, provider id,
/// failure code.
pub(crate) fn capture_settlement_columns(
    settlement: &CaptureSettlement,
) -> (CaptureStatus, Option<String>, Option<String>) {
    match settlement {
        CaptureSettlement::Succeeded {
            provider_capture_id,
        } => (
            CaptureStatus::Succeeded,
            Some(provider_capture_id.clone()),
            None,
        ),
        CaptureSettlement::Failed { code } => (CaptureStatus::Failed, None, Some(code.clone())),
    }
}

/// The columns an attempt's outcome writes: status, error, whether delivered,
/// retry delay and give-up time in ms.
pub(crate) fn attempt_columns(
    outcome: &AttemptOutcome,
) -> (Option<i64>, Option<String>, bool, i64, i64) {
    match outcome {
        AttemptOutcome::Delivered { status } => (Some(i64::from(*status)), None, true, 0, 0),
        AttemptOutcome::Failed {
            status,
            error,
            retry_in,
            give_up_after,
        } => (
            status.map(i64::from),
            // Bounded: a long error page is not a log.
            Some(error.chars().take(500).collect()),
            false,
            millis(*retry_in),
            millis(*give_up_after),
        ),
    }
}

/// What a claim that inserted its key row hands back: the new lease, where
/// to resume, and the key's payment (and refund).
pub(crate) fn acquired(
    claim: &ClaimRequest,
    token: LeaseToken,
    recovery_point: RecoveryPoint,
    payment: Payment,
    refund: Option<Refund>,
) -> Acquired {
    Acquired {
        lease: Lease {
            shop_id: claim.shop_id.clone(),
            key: claim.key.clone(),
            token,
        },
        recovery_point,
        payment,
        refund: refund.map(Box::new),
        capture: None,
    }
}
