//! `POST /v1/payments/{id}/void`: releasing what is left of an
//! authorization, once per idempotency key (see the engine's `void`
//! module for how).

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use chargeonce_core::PaymentId;
use chargeonce_wire::{Payment, VoidPayment};
use serde::Deserialize;

use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId};
use crate::pipeline::{self, Command};
use crate::problem::{Problem, ProblemCode};

/// Voids what is left of an authorized payment under its own idempotency
/// key, or answers as the first request with this key did, through the
/// same [`crate::pipeline`] as a payment.
#[utoipa::path(
    post,
    path = "/v1/payments/{id}/void",
    operation_id = "voidPayment",
    tag = "payments",
    summary = "Void what is left of an authorization (once per Idempotency-Key)",
    description = "Releases what an authorization still holds at the acquirer. With nothing captured the \
        payment becomes `voided` (nothing was taken); after partial captures it becomes `succeeded` with \
        the rest released. A void waits for captures in flight (`authorization_busy`), and no capture is \
        accepted while the void is in flight: exactly one of a void and a racing capture wins.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216"),
        ("Idempotency-Key" = String, Header, description = "The key of the business operation (for example `order-123-void`): 1 to 255 visible ASCII characters, exactly one header; the structured-field string form `\"...\"` is the same key. A repeat with the same key gets the first answer, replayed byte for byte (`Idempotent-Replayed: true`).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "order-123-void"),
        ("Prefer" = Option<String>, Header, description = "`wait=N` (RFC 7240): a repeat that finds the key's first request still running waits up to N seconds (at most 60) for its answer instead of a 409.", example = "wait=10"),
    ),
    request_body(content = VoidPayment, content_type = "application/json",
        description = "`{}` (at most 64 KiB, strict JSON)."),
    responses(
        (status = 200, description = "Voided: the payment is `voided`, or `succeeded` with the rest released. A repeat with the same key replays these bytes with `Idempotent-Replayed: true`.",
            body = Payment, headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a replay of the key's first answer; absent otherwise."))),
        (status = 202, description = "The void is in flight and its outcome at the acquirer is not known yet; no capture is accepted meanwhile. Retry with the same key after `Retry-After`; the service also ends it on its own.",
            body = Payment, headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Retry-After" = i64, description = "Whole seconds to wait before retrying with the same key."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`: the key header is missing, malformed or repeated; `malformed_json`: the body is not (strict) JSON; `bad_request`: the body broke off. Nothing was executed."),
        (status = 404, description = "`not_found`: no such payment for this shop. Nothing was stored."),
        (status = 408, description = "`body_timeout`: the body did not arrive in time; the connection is closed. Nothing was executed."),
        (status = 409, description = "`request_in_progress`: the key's first request is still running; `payment_not_voidable`: the payment was charged at once (refund it instead), is not authorized, or its authorization was used up, voided or expired (`payment_status`); `authorization_busy`: captures or another release are in flight (retry after `Retry-After`). Nothing was executed."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`idempotency_key_reused`: the key was first used for another request; `invalid_request`: the body is not `{}`; `void_failed`: the acquirer refused the void (a stored answer with the `payment`, its authorization open again, and `failure_code`)."),
        (status = 503, description = "`acquirer_unavailable`: nothing was sent yet; the void will be sent (retry with the same key); `store_unavailable`, `store_overloaded`, `request_timeout`: retry with the same key after `Retry-After`."),
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
    VoidPayment::deserialize(&body)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    let claim = pipeline::claim(shop_id, key, uri.path(), &body)?;
    pipeline::answer(&state, claim, Command::Void { payment_id }, &headers).await
}
