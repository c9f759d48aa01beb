//! `POST /v1/payments/{id}/refunds`, `GET /v1/refunds/{id}`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{Money, PaymentId, RefundId};
use chargeonce_wire::CreateRefund;
use serde::Deserialize;
use serde_json::Value;

use super::amount;
use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId};
use crate::pipeline::{self, Operation};
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
    let operation = Operation::Refund { payment_id, amount };
    pipeline::answer(&state, claim, operation, &headers).await
}

/// One refund of the authenticated shop.
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
    Ok(Json(render::to_value(&render::refund(&refund))).into_response())
}
