//! `POST /v1/payments/{id}/refunds`, `GET /v1/refunds/{id}`, and the lists
//! `GET /v1/refunds` and `GET /v1/payments/{id}/refunds`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{Money, PaymentId, RefundId, ShopId};
use chargeonce_wire::{CreateRefund, Refund};
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

/// Validates a refund body ([`CreateRefund`]: `{}` for the rest of the
/// payment, or an amount); every failure is a 422 problem.
fn refund_amount(body: &Value) -> Result<Option<Money>, Problem> {
    let parsed = CreateRefund::deserialize(body)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    parsed.amount.as_ref().map(amount::money).transpose()
}

fn payment_not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such payment for this shop")
}

fn refund_not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such refund for this shop")
}

/// Refunds (part of) a payment under its own idempotency key, or answers as
/// the first request with this key did, through the same
/// [`crate::pipeline`] as a payment (the response cache, duplicates in
/// flight, `Prefer: wait`, then the engine in a task of its own).
#[utoipa::path(
    post,
    path = "/v1/payments/{id}/refunds",
    operation_id = "createRefund",
    tag = "refunds",
    summary = "Refund (part of) a payment (once per Idempotency-Key)",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The refunded payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216"),
        ("Idempotency-Key" = String, Header, description = "The key of the business operation (for example `order-123-refund-1`): 1 to 255 visible ASCII characters, exactly one header; the structured-field string form `\"...\"` is the same key. A repeat with the same key gets the first answer, replayed byte for byte (`Idempotent-Replayed: true`).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "order-123-refund-1"),
        ("Prefer" = Option<String>, Header, description = "`wait=N` (RFC 7240): a repeat that finds the key's first request still running waits up to N seconds (at most 60) for its answer instead of a 409. Other preferences, and a malformed `wait`, are ignored.", example = "wait=10"),
    ),
    request_body(content = CreateRefund, content_type = "application/json",
        description = "`{}` refunds what is left of the payment; an amount refunds that much (at most 64 KiB, strict JSON)."),
    responses(
        (status = 201, description = "Refunded. A repeat with the same key replays these bytes with `Idempotent-Replayed: true`.",
            body = Refund, headers(
                ("Location" = String, description = "`/v1/refunds/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a replay of the key's first answer; absent otherwise."),
                ("Preference-Applied" = String, description = "`wait=N` when a `Prefer: wait=N` was honoured.")),
            example = json!({"id": "re_01a22982a1c07d11b0f4c7e8e0d6a3b1", "object": "refund", "payment_id": "pay_01a2297968b375bcb36eb8e661248216",
                "shop_id": "demo", "status": "succeeded", "amount": {"value": "500.00", "currency": "RUB"},
                "provider_refund_id": "re_01a22982a1c47a52a0e1b1d8c2f3e4a5", "failure_code": null, "created_at": "2026-11-29T22:45:01.120Z"})),
        (status = 202, description = "Pending at the acquirer (its amount reserved). Retry with the same key after `Retry-After`.",
            body = Refund, headers(
                ("Location" = String, description = "`/v1/refunds/{id}`"),
                ("Retry-After" = i64, description = "Whole seconds to wait before retrying with the same key."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`: the key header is missing, malformed or repeated; `malformed_json`: the body is not (strict) JSON; `bad_request`: the body broke off. Nothing was executed."),
        (status = 404, description = "`not_found`: no such payment for this shop."),
        (status = 408, description = "`body_timeout`: the body did not arrive in time; the connection is closed. Nothing was executed."),
        (status = 409, description = "`request_in_progress`: the key's first request is still running (retry after `Retry-After`, or `Prefer: wait=N`); `payment_not_refundable`: the payment has no definite outcome yet (retry once it succeeded)."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`idempotency_key_reused`: the key was first used for another request; `invalid_request`, `invalid_amount`, `unsupported_currency`: not a valid refund; `currency_mismatch`: not the payment's currency; `refund_exceeds_amount`: more than is left (`available_minor`); `payment_not_refundable`: the payment was declined; `refund_failed`: the acquirer refused (a stored answer with `refund` and `failure_code`, replayed to every retry)."),
        (status = 503, description = "`acquirer_unavailable`: nothing was sent yet; the refund stays pending and will be sent (retry with the same key); `store_unavailable`, `store_overloaded`, `request_timeout`: retry with the same key after `Retry-After`."),
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
    let amount = refund_amount(&body)?;
    let claim = pipeline::claim(shop_id, key, uri.path(), &body)?;
    let command = Command::Refund { payment_id, amount };
    pipeline::answer(&state, claim, command, &headers).await
}

/// One refund of the authenticated shop.
#[utoipa::path(
    get,
    path = "/v1/refunds/{id}",
    operation_id = "getRefund",
    tag = "refunds",
    summary = "Get a refund",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The refund's id (`re_...`).", example = "re_01a22982a1c07d11b0f4c7e8e0d6a3b1")),
    responses(
        (status = 200, description = "The refund.", body = Refund),
        (status = 404, description = "`not_found`: no such refund for this shop."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = RefundId::parse(&id).map_err(|_| refund_not_found())?;
    let refund = state
        .store
        .refund(&shop_id, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(refund_not_found)?;
    Ok(Json(render::refund(&refund)).into_response())
}

/// The authenticated shop's refunds, newest first, a page at a time
/// (`?limit=`, `?starting_after=`, `?ending_before=` a refund id).
#[utoipa::path(
    get,
    path = "/v1/refunds",
    operation_id = "listRefunds",
    tag = "refunds",
    summary = "List the shop's refunds, newest first, a page at a time",
    security(("shop_basic" = [])),
    params(
        ListQuery,
    ),
    responses(
        (status = 200, description = "One page, newest first.", body = chargeonce_wire::List<Refund>),
        (status = 400, description = "`invalid_parameter`: an unknown or repeated parameter, a `limit` outside 1 to 100, both cursors, a malformed value (`parameter` names it); `invalid_cursor`: a cursor that is not one of the listed objects of this shop."),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    query: Result<StrictQuery<ListQuery>, Problem>,
) -> Result<Response, Problem> {
    let query = list_query(query)?;
    list_of(&state, &shop_id, None, query).await
}

/// One payment's refunds, newest first, a page at a time; `404` when the
/// payment is not the shop's.
#[utoipa::path(
    get,
    path = "/v1/payments/{id}/refunds",
    operation_id = "listPaymentRefunds",
    tag = "refunds",
    summary = "List one payment's refunds, newest first, a page at a time",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216"),
        ListQuery,
    ),
    responses(
        (status = 200, description = "One page, newest first.", body = chargeonce_wire::List<Refund>),
        (status = 400, description = "`invalid_parameter`: an unknown or repeated parameter, a `limit` outside 1 to 100, both cursors, a malformed value (`parameter` names it); `invalid_cursor`: a cursor that is not one of the listed objects of this shop."),
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
    list_of(&state, &shop_id, Some(&payment_id), query).await
}

async fn list_of(
    state: &AppState,
    shop_id: &ShopId,
    payment_id: Option<&PaymentId>,
    query: ListQuery,
) -> Result<Response, Problem> {
    let page = page_request(
        query.limit,
        query.starting_after,
        query.ending_before,
        |id| RefundId::parse(id).ok(),
    )?;
    let listed = state
        .store
        .list_refunds(shop_id, payment_id, &page)
        .await
        .map_err(list_problem)?;
    let data: Vec<_> = listed.items.iter().map(render::refund).collect();
    Ok(list_response(data, listed.has_more))
}
