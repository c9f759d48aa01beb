//! `POST /v1/webhooks/acquirer`: events from the acquirer, delivered at least
//! once and in any order.
//!
//! 1. The signature (HMAC-SHA256 over the timestamp and the raw body, header
//!    `Chargeonce-Signature: t=...,v1=...`) is checked in bounded work
//!    before anything is trusted: a body over [`MAX_WEBHOOK_BODY_BYTES`] is
//!    413 `payload_too_large` (on its declared length, before it is read);
//!    the header is parsed with caps (at most 8 `v1=` parts of 64 hex
//!    digits, 1 KiB) and its timestamp must be within 5 minutes of now,
//!    before any MAC is computed; then one MAC over the body is compared with
//!    each signature in constant time: 400 `missing_signature`, 401
//!    `stale_signature` or 401 `invalid_signature`, with nothing stored.
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
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use chargeonce_core::api_key::Mode;
use chargeonce_core::webhook::{
    AcquirerEvent, EventKind, SIGNATURE_HEADER, SignatureError, SignatureHeader, TOLERANCE,
};
use chargeonce_core::{
    AcquirerKey, EventRecorded, InboundEvent, Money, PaymentStatus, Settlement, ShopId,
};
use serde::Deserialize;
use time::OffsetDateTime;

use crate::AppState;
use crate::extract::{check_declared_length, parse_strict_json, read_body};
use crate::problem::{Problem, ProblemCode};
use crate::respond::store_problem;

/// The largest acquirer webhook body accepted: 64 KiB (an event is well
/// under 1 KiB). A larger one is 413 `payload_too_large`, refused on its
/// declared length before it is read, or cut at the limit when chunked.
pub const MAX_WEBHOOK_BODY_BYTES: usize = 64 * 1024;

fn refused(state: &AppState, error: &SignatureError) -> Response {
    let (code, result) = match error {
        SignatureError::Malformed => (ProblemCode::MissingSignature, "missing_signature"),
        SignatureError::Mismatch => (ProblemCode::InvalidSignature, "invalid_signature"),
        SignatureError::OutsideTolerance { .. } => (ProblemCode::StaleSignature, "stale_signature"),
    };
    tracing::warn!(%error, "acquirer webhook refused");
    state.metrics().webhook(result);
    Problem::new(code, error.to_string()).into_response()
}

/// The answer to an authentic acquirer event: always `received`, with what
/// was done with it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct WebhookReceipt {
    /// Always `true`: the acquirer may stop resending the event.
    pub received: bool,
    /// What was done: `applied`, `duplicate`, `no_change`, `conflict`,
    /// `unknown_payment` or `amount_mismatch`.
    #[schema(example = "applied")]
    pub result: String,
}

fn received(state: &AppState, result: &'static str) -> Response {
    state.metrics().webhook(result);
    Json(WebhookReceipt {
        received: true,
        result: result.to_owned(),
    })
    .into_response()
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
    let theirs = Money::parse_lenient(&amount.value, &amount.currency).ok();
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

/// Receives one acquirer event: the size, the signature header and its
/// timestamp are checked before the body is read, and the body's one MAC
/// before it is parsed (strictly: a repeated member is 400 `malformed_json`).
#[utoipa::path(
    post,
    path = "/v1/webhooks/acquirer",
    operation_id = "acquirerWebhook",
    tag = "webhooks",
    summary = "Receive an acquirer event",
    description = "For the acquirer, not for shops: an event (`payment.processing`, `payment.succeeded`, `payment.declined`) delivered at least once and in any order, signed with the webhook secret in `Chargeonce-Signature`. The signature is checked before the body is parsed; a repeat of an event id changes nothing.",
    security(("acquirer_signature" = [])),
    request_body(content = Object, content_type = "application/json",
        description = "The acquirer's event: `id`, `type`, `created` (unix seconds) and `data` (`charge_id`, `acquirer_key`, `shop_id`, `payment_id`, `reference`, `amount`, `decline_code`); at most 64 KiB.",
        example = json!({"id": "evt_ch_1", "type": "payment.succeeded", "created": 1764456152, "data": {"charge_id": "ch_01a2297968b7769e806e9688e92895b9",
            "acquirer_key": "chargeonce-pay_01a2297968b375bcb36eb8e661248216", "shop_id": "demo",
            "payment_id": "pay_01a2297968b375bcb36eb8e661248216", "reference": "order-123",
            "amount": {"value": "1500.00", "currency": "RUB"}, "decline_code": null}})),
    responses(
        (status = 200, description = "An authentic event, acknowledged (whatever it did: see `result`).", body = WebhookReceipt,
            example = json!({"received": true, "result": "applied"})),
        (status = 400, description = "`missing_signature`: no well-formed `Chargeonce-Signature`; `malformed_json`: the body is not (strict) JSON; `bad_request`: the body broke off."),
        (status = 401, description = "`invalid_signature`: the signature does not match the body; `stale_signature`: signed more than 5 minutes from now."),
        (status = 408, description = "`body_timeout`: the body did not arrive in time."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 422, description = "`invalid_request`: an authentic body that is not an acquirer event."),
        (status = 503, description = "`webhooks_disabled`: no webhook secret is configured; `store_unavailable`, `store_overloaded`: nothing was recorded, a retry is welcome; `request_timeout`."),
    ),
)]
pub async fn acquirer(State(state): State<AppState>, request: Request) -> Response {
    match authentic_event(&state, request).await {
        Ok(event) => apply(&state, &event).await,
        Err(refusal) => refusal,
    }
}

/// The request's event, once its signature is checked (step 1), or the
/// answer that refuses it.
async fn authentic_event(state: &AppState, request: Request) -> Result<AcquirerEvent, Response> {
    let Some(secret) = state.webhook_secret() else {
        return Err(Problem::new(
            ProblemCode::WebhooksDisabled,
            "this service has no webhook secret configured",
        )
        .into_response());
    };
    let (parts, body) = request.into_parts();
    if let Err(problem) = check_declared_length(&parts.headers, MAX_WEBHOOK_BODY_BYTES) {
        state.metrics().webhook(problem.code().as_str());
        return Err(problem.into_response());
    }
    let header = parts
        .headers
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let signature = match SignatureHeader::parse(header).and_then(|signature| {
        signature
            .check_timestamp(now, TOLERANCE)
            .map(|()| signature)
    }) {
        Ok(signature) => signature,
        Err(error) => {
            // Refused on the header alone, with no MAC computed; the body
            // (within the size limit) is still read and dropped, so the
            // client gets the answer instead of a connection closed while
            // it was still sending.
            let _ = read_body(body, &parts.headers, MAX_WEBHOOK_BODY_BYTES).await;
            return Err(refused(state, &error));
        }
    };
    let body = match read_body(body, &parts.headers, MAX_WEBHOOK_BODY_BYTES).await {
        Ok(body) => body,
        Err(problem) => {
            state.metrics().webhook(problem.code().as_str());
            return Err(problem.into_response());
        }
    };
    if let Err(error) = signature.verify_body(secret, &body) {
        return Err(refused(state, &error));
    }
    let event = parse_strict_json(&body).and_then(|value| {
        AcquirerEvent::deserialize(&value)
            .map_err(|error| Problem::new(ProblemCode::InvalidRequest, error.to_string()))
    });
    event.map_err(|problem| {
        state.metrics().webhook("malformed");
        problem.into_response()
    })
}

/// Records an authentic event and applies what it may (steps 2 to 5).
async fn apply(state: &AppState, event: &AcquirerEvent) -> Response {
    // The acquirer that signs these webhooks is live mode's: its word never
    // settles a test payment (those are test mode's simulator's alone).
    let Some(shop_id) = ShopId::new(event.data.shop_id.as_str())
        .ok()
        .filter(ShopId::is_live)
    else {
        tracing::warn!(event = %event.id, "acquirer event for a shop id we cannot have");
        return received(state, "unknown_payment");
    };
    let mut inbound = InboundEvent {
        event_id: event.id.clone(),
        kind: event.kind,
        acquirer_key: AcquirerKey::from_stored(event.data.acquirer_key.clone()),
        shop_id,
        settlement: settlement_of(event),
    };
    let mismatched = match amount_mismatch(state, &inbound, event).await {
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
    let store = state.store.clone();
    let event_in = inbound.clone();
    let recorded = state.detached(async move { store.record_event(&event_in).await });
    let recorded = match recorded.await {
        Ok(recorded) => recorded,
        Err(error) => {
            state.metrics().store_error_webhook();
            return store_problem(error).into_response();
        }
    };
    answer(state, event, &inbound, mismatched, recorded)
}

/// The receipt of a recorded event, with what it did logged and counted.
fn answer(
    state: &AppState,
    event: &AcquirerEvent,
    inbound: &InboundEvent,
    mismatched: bool,
    recorded: EventRecorded,
) -> Response {
    match recorded {
        EventRecorded::Duplicate => received(state, "duplicate"),
        _ if mismatched => {
            state
                .engine
                .observer()
                .reconciler_finding(Mode::Live, "amount_mismatch");
            received(state, "amount_mismatch")
        }
        EventRecorded::Settled(payment) => {
            tracing::info!(event = %event.id, payment = %payment.id, status = payment.status.as_str(), "acquirer event settled a payment");
            received(state, "applied")
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
                received(state, "conflict")
            }
            _ => received(state, "no_change"),
        },
        EventRecorded::UnknownPayment => {
            tracing::warn!(event = %event.id, charge = %event.data.charge_id, "acquirer event for a payment we do not have");
            received(state, "unknown_payment")
        }
    }
}
