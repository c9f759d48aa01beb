//! `POST /v1/payments/{id}/captures`, `GET /v1/payments/{id}/captures` and
//! `GET /v1/captures/{id}`: the captures of an authorized payment.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{CaptureId, Money, PaymentId};
use chargeonce_wire::{Capture, CreateCapture};
use serde::Deserialize;
use serde_json::Value;

use super::amount;
use super::lists::{ListQuery, list_problem, list_query, list_response, page_request};
use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId, StrictQuery};
use crate::pipeline::{self, Command};
use crate::problem::{Problem, ProblemCode};
use crate::render;
use crate::respond::store_problem;

/// Validates a capture body ([`CreateCapture`]): the amount (`None`: all
/// that is capturable) and whether it is the last capture (always without
/// an amount); every failure is a 422 problem.
fn capture_body(body: &Value) -> Result<(Option<Money>, bool), Problem> {
    let parsed = CreateCapture::deserialize(body)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    let amount = parsed.amount.as_ref().map(amount::money).transpose()?;
    if amount.is_none() && parsed.last == Some(false) {
        return Err(Problem::new(
            ProblemCode::InvalidRequest,
            "a capture without an amount takes all that is capturable, so it is final; \
             give an amount for a partial capture",
        )
        .with("field", "final".into()));
    }
    Ok((amount, parsed.last.unwrap_or(amount.is_none())))
}

fn payment_not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such payment for this shop")
}

fn capture_not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such capture for this shop")
}

/// Captures (part of) an authorized payment under its own idempotency
/// key, or answers as the first request with this key did, through the
/// same [`crate::pipeline`] as a payment.
#[utoipa::path(
    post,
    path = "/v1/payments/{id}/captures",
    operation_id = "createCapture",
    tag = "captures",
    summary = "Capture (part of) an authorized payment (once per Idempotency-Key)",
    description = "Takes money held by an authorization (a payment created with `capture_method` `manual`). \
        Each capture has its own key (for example `order-123-capture-1`); several partial captures may \
        follow each other until one is `final` or the authorization is used up. Captures under different \
        keys never together exceed what was authorized, whichever instance they reach: each amount is \
        reserved in the database before the acquirer is asked.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The authorized payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216"),
        ("Idempotency-Key" = String, Header, description = "The key of the business operation (for example `order-123-capture-1`): 1 to 255 visible ASCII characters, exactly one header; the structured-field string form `\"...\"` is the same key. A repeat with the same key gets the first answer, replayed byte for byte (`Idempotent-Replayed: true`).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "order-123-capture-1"),
        ("Prefer" = Option<String>, Header, description = "`wait=N` (RFC 7240): a repeat that finds the key's first request still running waits up to N seconds (at most 60) for its answer instead of a 409.", example = "wait=10"),
    ),
    request_body(content = CreateCapture, content_type = "application/json",
        description = "`{}` captures all that is capturable as the final capture; an amount captures that much (at most 64 KiB, strict JSON)."),
    responses(
        (status = 201, description = "Captured. A repeat with the same key replays these bytes with `Idempotent-Replayed: true`.",
            body = Capture, headers(
                ("Location" = String, description = "`/v1/captures/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a replay of the key's first answer; absent otherwise."),
                ("Preference-Applied" = String, description = "`wait=N` when a `Prefer: wait=N` was honoured.")),
            example = json!({"id": "cap_01a22982a1c07d11b0f4c7e8e0d6a3b1", "object": "capture", "payment_id": "pay_01a2297968b375bcb36eb8e661248216",
                "shop_id": "demo", "status": "succeeded", "amount": {"value": "1000.00", "currency": "RUB"}, "final": false,
                "provider_capture_id": "cp_01a22982a1c47a52a0e1b1d8c2f3e4a5", "failure_code": null, "created_at": "2026-11-29T22:45:01.120Z"})),
        (status = 202, description = "Pending at the acquirer (its amount reserved). Retry with the same key after `Retry-After`.",
            body = Capture, headers(
                ("Location" = String, description = "`/v1/captures/{id}`"),
                ("Retry-After" = i64, description = "Whole seconds to wait before retrying with the same key."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`: the key header is missing, malformed or repeated; `malformed_json`: the body is not (strict) JSON; `bad_request`: the body broke off. Nothing was executed."),
        (status = 404, description = "`not_found`: no such payment for this shop."),
        (status = 408, description = "`body_timeout`: the body did not arrive in time; the connection is closed. Nothing was executed."),
        (status = 409, description = "`request_in_progress`: the key's first request is still running; `payment_not_capturable`: the payment was charged at once, is not authorized (yet), or its authorization was used up, voided or expired (`payment_status`); `authorization_busy`: a final capture or a release is in flight (retry after `Retry-After`). Nothing was executed."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`idempotency_key_reused`: the key was first used for another request; `invalid_request`, `invalid_amount`, `unsupported_currency`: not a valid capture; `currency_mismatch`: not the payment's currency; `capture_exceeds_capturable`: more than the authorization has left (`amount_capturable`); `capture_failed`: the acquirer refused (a stored answer with `capture` and `failure_code`, replayed to every retry)."),
        (status = 503, description = "`acquirer_unavailable`: nothing was sent yet; the capture stays pending and will be sent (retry with the same key); `store_unavailable`, `store_overloaded`, `request_timeout`: retry with the same key after `Retry-After`."),
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
    let payment_id = PaymentId::parse(&id).map_err(|_| payment_not_found())?;
    let (amount, last) = capture_body(&body)?;
    let claim = pipeline::claim(shop_id, key, uri.path(), &body)?;
    let command = Command::Capture {
        payment_id,
        amount,
        last,
    };
    pipeline::answer(&state, claim, command, &headers).await
}

/// One capture of the authenticated shop.
#[utoipa::path(
    get,
    path = "/v1/captures/{id}",
    operation_id = "getCapture",
    tag = "captures",
    summary = "Get a capture",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The capture's id (`cap_...`).", example = "cap_01a22982a1c07d11b0f4c7e8e0d6a3b1")),
    responses(
        (status = 200, description = "The capture.", body = Capture),
        (status = 404, description = "`not_found`: no such capture for this shop."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = CaptureId::parse(&id).map_err(|_| capture_not_found())?;
    let capture = state
        .store
        .capture(&shop_id, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(capture_not_found)?;
    Ok(Json(render::capture(&capture)).into_response())
}

/// One payment's captures, newest first, a page at a time; `404` when the
/// payment is not the shop's.
#[utoipa::path(
    get,
    path = "/v1/payments/{id}/captures",
    operation_id = "listPaymentCaptures",
    tag = "captures",
    summary = "List one payment's captures, newest first, a page at a time",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216"),
        ListQuery,
    ),
    responses(
        (status = 200, description = "One page, newest first.", body = chargeonce_wire::List<Capture>),
        (status = 400, description = "`invalid_parameter`: an unknown or repeated parameter, a `limit` outside 1 to 100, both cursors, a malformed value (`parameter` names it); `invalid_cursor`: a cursor that is not one of the payment's captures."),
        (status = 404, description = "`not_found`: no such payment for this shop."),
    ),
)]
pub async fn of_payment(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
    query: Result<StrictQuery<ListQuery>, Problem>,
) -> Result<Response, Problem> {
    let payment_id = PaymentId::parse(&id).map_err(|_| payment_not_found())?;
    let query = list_query(query)?;
    state
        .store
        .payment(&shop_id, &payment_id)
        .await
        .map_err(store_problem)?
        .ok_or_else(payment_not_found)?;
    let page = page_request(
        query.limit,
        query.starting_after,
        query.ending_before,
        |id| CaptureId::parse(id).ok(),
    )?;
    let listed = state
        .store
        .list_captures(&shop_id, &payment_id, &page)
        .await
        .map_err(list_problem)?;
    let data: Vec<_> = listed.items.iter().map(render::capture).collect();
    Ok(list_response(data, listed.has_more))
}
