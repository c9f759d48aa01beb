//! `POST /v1/payments`, `GET /v1/payments/{id}`, `GET /v1/payments?reference=`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{CardToken, PaymentId, PaymentRequest, Reference};
use chargeonce_wire::CreatePayment;
use serde::Deserialize;
use serde_json::Value;

use super::amount;
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

/// The query of `GET /v1/payments`: `reference`, nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    reference: Option<String>,
}

/// The payments of one order of the authenticated shop, oldest first: the
/// seed's "check the state before paying".
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    StrictQuery(query): StrictQuery<ListQuery>,
) -> Result<Response, Problem> {
    let reference = query.reference.ok_or_else(|| {
        Problem::new(
            ProblemCode::MissingParameter,
            "give the order as ?reference=",
        )
    })?;
    let reference = Reference::new(reference)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    let payments = state
        .store
        .payments_by_reference(&shop_id, &reference)
        .await
        .map_err(store_problem)?;
    // Everything the order has: no further page.
    let list = chargeonce_wire::List::all(payments.iter().map(render::payment).collect());
    Ok(Json(render::to_value(&list)).into_response())
}
