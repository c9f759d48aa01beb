//! `POST /v1/webhooks/acquirer`: events from the acquirer, delivered at least
//! once and in any order.
//!
//! 1. The signature (HMAC-SHA256 over the timestamp and the raw body, header
//!    `Chargeonce-Signature: t=...,v1=...`) is checked in constant time, and
//!    its timestamp must be within 5 minutes of now: 400 `missing_signature`,
//!    401 `invalid_signature` or 401 `stale_signature`, with nothing stored.
//! 2. The event id is recorded under a unique constraint in the same
//!    transaction as its effect: a repeat answers 200 and changes nothing.
//! 3. Only allowed transitions are applied: `pending` -> `succeeded` or
//!    `declined`. A final state never changes; `payment.processing` never moves
//!    a payment. An event that contradicts a final state is logged as an error
//!    and acknowledged (the reconciler compares the books).
//! 4. An event for a payment we do not have is acknowledged (200, recorded,
//!    logged): resending it would not make it known; the reconciler reports
//!    the orphan charge.
//! 5. An event whose amount or currency is not the payment's settles
//!    nothing: it is recorded (so its repeats are duplicates), logged as an
//!    error and counted as an `amount_mismatch` finding
//!    (`chargeonce_reconciler_findings_total`), and answered
//!    `amount_mismatch`. Money moved for another amount than we asked is for
//!    a person to look at, never to be written over our payment.
//!
//! Every authentic event gets a 200 with `{"received": true, "result": ...}`
//! (`applied`, `duplicate`, `no_change`, `conflict`, `unknown_payment`,
//! `amount_mismatch`), so
//! the acquirer stops resending it. A store failure answers 503: nothing was
//! recorded, and the acquirer's retry is welcome.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use chargeonce_core::webhook::{
    AcquirerEvent, EventKind, SIGNATURE_HEADER, SignatureError, TOLERANCE, verify,
};
use chargeonce_core::{
    AcquirerKey, EventRecorded, InboundEvent, Money, PaymentStatus, Settlement, ShopId,
};
use serde_json::json;
use time::OffsetDateTime;

use crate::AppState;
use crate::problem::{Problem, ProblemCode};
use crate::respond::store_problem;

fn received(state: &AppState, result: &'static str) -> Response {
    state.metrics().webhook(result);
    Json(json!({"received": true, "result": result})).into_response()
}

fn settlement_of(event: &AcquirerEvent) -> Option<Settlement> {
    let status = match event.kind {
        EventKind::Processing => return None,
        EventKind::Succeeded => PaymentStatus::Succeeded,
        EventKind::Declined => PaymentStatus::Declined,
    };
    Some(Settlement {
        status,
        provider_payment_id: Some(event.data.charge_id.clone()),
        decline_code: match status {
            PaymentStatus::Declined => Some(
                event
                    .data
                    .decline_code
                    .clone()
                    .unwrap_or_else(|| "declined".to_owned()),
            ),
            _ => None,
        },
    })
}

/// Whether an event would settle a payment for another amount or currency
/// than the payment's (a payment's amount never changes, so reading it
/// before recording the event is safe). Logged as an error when it does.
async fn amount_mismatch(
    state: &AppState,
    inbound: &InboundEvent,
    event: &AcquirerEvent,
) -> Result<bool, chargeonce_core::StoreError> {
    if inbound.settlement.is_none() {
        return Ok(false);
    }
    let Some(payment) = state
        .store
        .payment_by_acquirer_key(&inbound.acquirer_key)
        .await?
    else {
        return Ok(false);
    };
    if payment.shop_id != inbound.shop_id {
        return Ok(false);
    }
    let amount = &event.data.amount;
    let theirs = Money::parse(&amount.value, &amount.currency).ok();
    if theirs == Some(payment.amount) {
        return Ok(false);
    }
    tracing::error!(
        event = %event.id,
        payment = %payment.id,
        ours = %format!("{} {}", payment.amount.to_decimal_string(), payment.amount.currency()),
        theirs = %format!("{} {}", amount.value, amount.currency),
        charge = %event.data.charge_id,
        "acquirer event for another amount than the payment's; not applied (a finding)"
    );
    Ok(true)
}

/// Receives one acquirer event.
pub async fn acquirer(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(secret) = state.webhook_secret() else {
        return Problem::new(
            ProblemCode::WebhooksDisabled,
            "this service has no webhook secret configured",
        )
        .into_response();
    };
    let header = headers
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let now = OffsetDateTime::now_utc().unix_timestamp();
    if let Err(error) = verify(secret, header, &body, now, TOLERANCE) {
        let (code, result) = match error {
            SignatureError::Malformed => (ProblemCode::MissingSignature, "missing_signature"),
            SignatureError::Mismatch => (ProblemCode::InvalidSignature, "invalid_signature"),
            SignatureError::OutsideTolerance { .. } => {
                (ProblemCode::StaleSignature, "stale_signature")
            }
        };
        tracing::warn!(%error, "acquirer webhook refused");
        state.metrics().webhook(result);
        return Problem::new(code, error.to_string()).into_response();
    }
    let event: AcquirerEvent = match serde_json::from_slice(&body) {
        Ok(event) => event,
        Err(error) => {
            state.metrics().webhook("malformed");
            return Problem::new(ProblemCode::InvalidRequest, error.to_string()).into_response();
        }
    };
    let Ok(shop_id) = ShopId::new(event.data.shop_id.as_str()) else {
        tracing::warn!(event = %event.id, "acquirer event for a shop id we cannot have");
        return received(&state, "unknown_payment");
    };
    let mut inbound = InboundEvent {
        event_id: event.id.clone(),
        kind: event.kind,
        acquirer_key: AcquirerKey::from_stored(event.data.acquirer_key.clone()),
        shop_id,
        settlement: settlement_of(&event),
    };
    let mismatched = match amount_mismatch(&state, &inbound, &event).await {
        Ok(mismatched) => mismatched,
        Err(error) => {
            state.metrics().store_error_webhook();
            return store_problem(error).into_response();
        }
    };
    if mismatched {
        // Recorded without its settlement: a repeat is a duplicate.
        inbound.settlement = None;
    }
    let recorded = match state.store.record_event(&inbound).await {
        Ok(recorded) => recorded,
        Err(error) => {
            state.metrics().store_error_webhook();
            return store_problem(error).into_response();
        }
    };
    match recorded {
        EventRecorded::Duplicate => received(&state, "duplicate"),
        _ if mismatched => {
            state
                .engine
                .observer()
                .reconciler_finding("amount_mismatch");
            received(&state, "amount_mismatch")
        }
        EventRecorded::Settled(payment) => {
            tracing::info!(event = %event.id, payment = %payment.id, status = payment.status.as_str(), "acquirer event settled a payment");
            received(&state, "applied")
        }
        EventRecorded::Unchanged(payment) => match &inbound.settlement {
            Some(settlement)
                if settlement.status != payment.status
                    || payment.provider_payment_id.as_deref()
                        != settlement.provider_payment_id.as_deref() =>
            {
                tracing::error!(
                    event = %event.id,
                    kind = event.kind.as_str(),
                    payment = %payment.id,
                    status = payment.status.as_str(),
                    charge = %event.data.charge_id,
                    "acquirer event contradicts the payment's final state; not applied"
                );
                received(&state, "conflict")
            }
            _ => received(&state, "no_change"),
        },
        EventRecorded::UnknownPayment => {
            tracing::warn!(event = %event.id, charge = %event.data.charge_id, "acquirer event for a payment we do not have");
            received(&state, "unknown_payment")
        }
    }
}
