//! `POST /v1/payments`, `GET /v1/payments/{id}`, `GET /v1/payments` (a page
//! of the shop's payments, `?reference=` one order's).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{
    CardToken, Metadata, PaymentFilter, PaymentId, PaymentRequest, Reference, ShownStatus,
};
use chargeonce_wire::{CreatePayment, Payment};
use serde::Deserialize;
use serde_json::Value;

use super::amount;
use super::lists::{
    invalid_parameter, list_problem, list_query, list_response, page_request, time_parameter,
};
use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId, StrictQuery};
use crate::pipeline::{self, Command};
use crate::problem::{Problem, ProblemCode};
use crate::render;
use crate::respond::store_problem;

/// Validates a payment body into a domain request; every failure is a 422
/// problem naming the field.
fn payment_request(body: &Value) -> Result<PaymentRequest, Problem> {
    let parsed = CreatePayment::deserialize(body)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    let amount = amount::money(&parsed.amount)?;
    let reference = Reference::new(parsed.reference).map_err(|e| {
        Problem::new(ProblemCode::InvalidRequest, e.to_string()).with("field", "reference".into())
    })?;
    let token = CardToken::new(parsed.payment_method.token).map_err(|e| {
        Problem::new(ProblemCode::InvalidRequest, e.to_string())
            .with("field", "payment_method.token".into())
    })?;
    let metadata = Metadata::new(parsed.metadata.unwrap_or_default()).map_err(|e| {
        let field = match e.key() {
            Some(key) => format!("metadata.{key}"),
            None => "metadata".to_owned(),
        };
        Problem::new(ProblemCode::InvalidRequest, e.to_string()).with("field", field.into())
    })?;
    Ok(PaymentRequest {
        amount,
        reference,
        token,
        metadata,
        capture_method: match parsed.capture_method.unwrap_or_default() {
            chargeonce_wire::CaptureMethod::Automatic => chargeonce_core::CaptureMethod::Automatic,
            chargeonce_wire::CaptureMethod::Manual => chargeonce_core::CaptureMethod::Manual,
        },
    })
}

/// Creates a payment, or answers as the first request with this key did
/// (through [`crate::pipeline`]: the response cache, duplicates in flight,
/// `Prefer: wait`, then the engine in a task of its own).
#[utoipa::path(
    post,
    path = "/v1/payments",
    operation_id = "createPayment",
    tag = "payments",
    summary = "Create a payment (once per Idempotency-Key)",
    security(("shop_basic" = [])),
    params(
        ("Idempotency-Key" = String, Header, description = "The key of the business operation (for example `order-123-pay`): 1 to 255 visible ASCII characters, exactly one header; the structured-field string form `\"order-123-pay\"` is the same key. A repeat with the same key gets the first answer, replayed byte for byte (`Idempotent-Replayed: true`).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "order-123-pay"),
        ("Prefer" = Option<String>, Header, description = "`wait=N` (RFC 7240): a repeat that finds the key's first request still running waits up to N seconds (at most 60) for its answer instead of a 409. Other preferences, and a malformed `wait`, are ignored.", example = "wait=10"),
    ),
    request_body(content = CreatePayment, content_type = "application/json",
        description = "How much, for which order, with which payment method (at most 64 KiB, strict JSON: no member twice)."),
    responses(
        (status = 201, description = "Charged: the payment succeeded. A repeat with the same key replays these bytes with `Idempotent-Replayed: true`.",
            body = Payment, headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a replay of the key's first answer; absent otherwise."),
                ("Preference-Applied" = String, description = "`wait=N` when a `Prefer: wait=N` was honoured (this request waited for the key's first request).")),
            example = json!({"id": "pay_01a2297968b375bcb36eb8e661248216", "object": "payment", "shop_id": "demo", "status": "succeeded",
                "amount": {"value": "1500.00", "currency": "RUB"}, "reference": "order-123",
                "provider_payment_id": "ch_01a2297968b7769e806e9688e92895b9", "decline_code": null,
                "created_at": "2026-11-29T22:42:32.243Z", "amount_refunded": {"value": "0.00", "currency": "RUB"}, "refund_status": "none"})),
        (status = 200, description = "The order already has a successful payment (another key): that payment, not charged again.",
            body = Payment, headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a replay."))),
        (status = 202, description = "Pending: the acquirer has not answered yet. Retry with the same key after `Retry-After` (or `GET` the `Location`).",
            body = Payment, headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Retry-After" = i64, description = "Whole seconds to wait before retrying with the same key."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`: the key header is missing, malformed or repeated; `malformed_json`: the body is not (strict) JSON; `bad_request`: the body broke off. Nothing was executed."),
        (status = 402, description = "`payment_declined`: the acquirer declined (a stored answer, replayed to every retry with the key; `payment` and `decline_code` members).",
            headers(
                ("Location" = String, description = "`/v1/payments/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a replay.")),
            example = json!({"type": "urn:chargeonce:problem:payment_declined", "title": "The payment was declined", "status": 402,
                "detail": "the acquirer declined the payment: insufficient_funds", "code": "payment_declined", "decline_code": "insufficient_funds"})),
        (status = 408, description = "`body_timeout`: the body did not arrive in time; the connection is closed. Nothing was executed."),
        (status = 409, description = "`request_in_progress`: the key's first request is still running; retry with the same key after `Retry-After`, or send `Prefer: wait=N`. `order_already_paid`: the order (`reference`) already has a live payment (succeeded or pending) for another amount or currency under another key; nothing was charged and nothing is stored against this key; the problem carries that `payment`."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`idempotency_key_reused`: the key was first used for another request (never retry it as is); `invalid_request` (`field` names the member), `invalid_amount`, `unsupported_currency`: the body is not a valid payment. Nothing was executed.",
            example = json!({"type": "urn:chargeonce:problem:idempotency_key_reused", "title": "This Idempotency-Key was used for a different request", "status": 422,
                "detail": "this key was first used with another method, path or body; nothing was executed. Use a new key for a new command", "code": "idempotency_key_reused"})),
        (status = 503, description = "`acquirer_unavailable`: nothing was sent yet; the payment stays pending and will be sent (retry with the same key; `payment` and `will_be_sent` members); `store_unavailable`, `store_overloaded`, `request_timeout`: retry with the same key after `Retry-After`."),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let request = payment_request(&body)?;
    let claim = pipeline::claim(shop_id, key, uri.path(), &body)?;
    pipeline::answer(&state, claim, Command::Pay(request), &headers).await
}

/// The answer for a payment the shop does not have (or an id that is no
/// payment's).
pub(super) fn not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such payment for this shop")
}

/// One payment of the authenticated shop.
#[utoipa::path(
    get,
    path = "/v1/payments/{id}",
    operation_id = "getPayment",
    tag = "payments",
    summary = "Get a payment",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216")),
    responses(
        (status = 200, description = "The payment.", body = Payment),
        (status = 404, description = "`not_found`: no such payment for this shop."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = PaymentId::parse(&id).map_err(|_| not_found())?;
    let payment = state
        .store
        .payment(&shop_id, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    Ok(Json(render::payment(&payment)).into_response())
}

/// The query of `GET /v1/payments`: paging and filters, nothing else (the
/// spec's parameters, from these fields).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// How many objects, 1 to 100 (default 10).
    #[param(minimum = 1, maximum = 100, example = 10)]
    limit: Option<u32>,
    /// An object id from a previous page: the page after it (older). Not
    /// with `ending_before`.
    #[param(min_length = 1)]
    starting_after: Option<String>,
    /// An object id from a previous page: the page before it (newer), still
    /// newest first. Not with `starting_after`.
    #[param(min_length = 1)]
    ending_before: Option<String>,
    /// Only payments in this status.
    #[param(value_type = Option<chargeonce_wire::PaymentStatus>)]
    status: Option<String>,
    /// Only the payments of this order (the seed's "check the state before
    /// paying").
    #[param(
        min_length = 1,
        max_length = 255,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        example = "order-123"
    )]
    reference: Option<String>,
    /// Only payments created at or after this RFC 3339 time (an offset's `+`
    /// encoded as `%2B`).
    #[param(format = DateTime)]
    created_gte: Option<String>,
    /// Only payments created before this RFC 3339 time.
    #[param(format = DateTime)]
    created_lt: Option<String>,
}

/// The authenticated shop's payments, newest first, a page at a time:
/// `?limit=` (1 to 100, default 10), `?starting_after=` or
/// `?ending_before=` (a payment id), filters `?status=`, `?reference=` (one
/// order's payments: the seed's "check the state before paying"),
/// `?created_gte=` and `?created_lt=` (RFC 3339). Bad parameters are `400
/// invalid_parameter`, a cursor that is not the shop's payment `400
/// invalid_cursor`.
#[utoipa::path(
    get,
    path = "/v1/payments",
    operation_id = "listPayments",
    tag = "payments",
    summary = "List the shop's payments, newest first, a page at a time",
    security(("shop_basic" = [])),
    params(
        ListQuery,
    ),
    responses(
        (status = 200, description = "One page, newest first; `has_more` says whether more lie beyond it in the direction read.", body = chargeonce_wire::List<Payment>),
        (status = 400, description = "`invalid_parameter`: an unknown or repeated parameter, a `limit` outside 1 to 100, both cursors, a malformed value (`parameter` names it); `invalid_cursor`: a cursor that is not one of the listed objects of this shop."),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    query: Result<StrictQuery<ListQuery>, Problem>,
) -> Result<Response, Problem> {
    let query = list_query(query)?;
    let page = page_request(
        query.limit,
        query.starting_after,
        query.ending_before,
        |id| PaymentId::parse(id).ok(),
    )?;
    let status = query
        .status
        .map(|s| {
            ShownStatus::parse(&s).ok_or_else(|| {
                invalid_parameter(
                    "status must be pending, succeeded, declined, canceled, authorized, \
                     partially_captured, voided or expired",
                )
                .with("parameter", "status".into())
            })
        })
        .transpose()?;
    let reference = query
        .reference
        .map(|r| {
            Reference::new(r)
                .map_err(|e| invalid_parameter(e.to_string()).with("parameter", "reference".into()))
        })
        .transpose()?;
    let filter = PaymentFilter {
        status,
        reference,
        created_gte: time_parameter("created_gte", query.created_gte.as_deref())?,
        created_lt: time_parameter("created_lt", query.created_lt.as_deref())?,
    };
    let listed = state
        .store
        .list_payments(&shop_id, &filter, &page)
        .await
        .map_err(list_problem)?;
    let data: Vec<_> = listed.items.iter().map(render::payment).collect();
    Ok(list_response(data, listed.has_more))
}
