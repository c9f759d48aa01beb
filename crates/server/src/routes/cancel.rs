//! `POST /v1/payments/{id}/cancel`: ending a pending payment without
//! charging the customer, once per idempotency key (see the engine's
//! `cancel` module for how).

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use chargeonce_core::PaymentId;
use chargeonce_wire::{CancelPayment, Payment};
use serde::Deserialize;

use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId};
use crate::pipeline::{self, Command};
use crate::problem::{Problem, ProblemCode};

/// Cancels a pending payment under its own idempotency key, or answers as
/// the first request with this key did, through the same
/// [`crate::pipeline`] as a payment.
#[utoipa::path(
    post,
    path = "/v1/payments/{id}/cancel",
    operation_id = "cancelPayment",
    tag = "payments",
    summary = "Cancel a pending payment (once per Idempotency-Key)",
    description = "Makes sure the customer is not charged for a payment that is still `pending`. From the \
        cancel on, nobody sends its charge again; once the settle window has passed since it was last sent, \
        the charge is looked up at the acquirer. Nothing found: the payment becomes `canceled` and its order \
        is free (a charge that lands later anyway is refunded by the reconciler and shown in the payment's \
        history). Found succeeded: the payment becomes `succeeded` and is refunded in full, under one refund \
        however often cancel is called. Found declined: the payment becomes `declined`. Until then the answer \
        is 202; retry with the same key after `Retry-After`.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216"),
        ("Idempotency-Key" = String, Header, description = "The key of the business operation (for example `order-123-cancel`): 1 to 255 visible ASCII characters, exactly one header; the structured-field string form `\"...\"` is the same key. A repeat with the same key gets the first answer, replayed byte for byte (`Idempotent-Replayed: true`).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "order-123-cancel"),
        ("Prefer" = Option<String>, Header, description = "`wait=N` (RFC 7240): a repeat that finds the key's first request still running waits up to N seconds (at most 60) for its answer instead of a 409.", example = "wait=10"),
    ),
    request_body(content = CancelPayment, content_type = "application/json",
        description = "`{}` (at most 64 KiB, strict JSON)."),
    responses(
        (status = 200, description = "The cancel ended: the payment is `canceled` (nothing was taken), `declined`, or `succeeded` and refunded in full (`amount_refunded`; the refund may still show pending if the acquirer has not answered it). A repeat with the same key replays these bytes with `Idempotent-Replayed: true`.",
            body = Payment, headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a replay of the key's first answer; absent otherwise."))),
        (status = 202, description = "Cancel recorded, not ended yet: the payment is still pending (its charge is looked up once the settle window has passed), or the refund of a charge found is. Retry with the same key after `Retry-After`; the service also ends it on its own.",
            body = Payment, headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Retry-After" = i64, description = "Whole seconds to wait before retrying with the same key."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`: the key header is missing, malformed or repeated; `malformed_json`: the body is not (strict) JSON; `bad_request`: the body broke off. Nothing was executed."),
        (status = 404, description = "`not_found`: no such payment for this shop. Nothing was stored."),
        (status = 408, description = "`body_timeout`: the body did not arrive in time; the connection is closed. Nothing was executed."),
        (status = 409, description = "`request_in_progress`: the key's first request is still running; `payment_not_cancelable`: the payment was already final (succeeded: refund it instead; declined: nothing was taken) when the cancel came, a stored answer carrying the `payment`."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`idempotency_key_reused`: the key was first used for another request; `invalid_request`: the body is not `{}`."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`, `request_timeout`: retry with the same key after `Retry-After`."),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    PathId(id): PathId,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let payment_id = PaymentId::parse(&id)
        .map_err(|_| Problem::new(ProblemCode::NotFound, "no such payment for this shop"))?;
    CancelPayment::deserialize(&body)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    let claim = pipeline::claim(shop_id, key, uri.path(), &body)?;
    pipeline::answer(&state, claim, Command::Cancel { payment_id }, &headers).await
}
