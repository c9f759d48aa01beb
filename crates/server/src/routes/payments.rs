//! `POST /v1/payments`, `GET /v1/payments/{id}`, `GET /v1/payments` (a page
//! of the shop's payments, `?reference=` one order's).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{
    CardToken, PaymentFilter, PaymentId, PaymentRequest, PaymentStatus, Reference,
};
use chargeonce_wire::CreatePayment;
use serde::Deserialize;
use serde_json::Value;

use super::amount;
use super::lists::{
    invalid_parameter, list_problem, list_query, list_response, page_request, time_parameter,
};
use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId, StrictQuery};
use crate::pipeline::{self, Operation};
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
    Ok(PaymentRequest {
        amount,
        reference,
        token,
    })
}

/// Creates a payment, or answers as the first request with this key did
/// (through [`crate::pipeline`]: the response cache, duplicates in flight,
/// `Prefer: wait`, then the engine in a task of its own).
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
    pipeline::answer(&state, claim, Operation::Pay(request), &headers).await
}

fn not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such payment for this shop")
}

/// One payment of the authenticated shop.
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
    Ok(Json(render::to_value(&render::payment(&payment))).into_response())
}

/// The query of `GET /v1/payments`: paging and filters, nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<u32>,
    starting_after: Option<String>,
    ending_before: Option<String>,
    status: Option<String>,
    reference: Option<String>,
    created_gte: Option<String>,
    created_lt: Option<String>,
}

/// The authenticated shop's payments, newest first, a page at a time:
/// `?limit=` (1 to 100, default 10), `?starting_after=` or
/// `?ending_before=` (a payment id), filters `?status=`, `?reference=` (one
/// order's payments: the seed's "check the state before paying"),
/// `?created_gte=` and `?created_lt=` (RFC 3339). Bad parameters are `400
/// invalid_parameter`, a cursor that is not the shop's payment `400
/// invalid_cursor`.
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
            PaymentStatus::parse(&s).ok_or_else(|| {
                invalid_parameter("status must be pending, succeeded or declined")
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
