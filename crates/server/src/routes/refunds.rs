//! `POST /v1/payments/{id}/refunds`, `GET /v1/refunds/{id}`.

use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use chargeonce_core::{
    ClaimRequest, Fingerprint, Money, MoneyError, NewRefund, PaymentId, RefundId,
};
use serde::Deserialize;
use serde_json::Value;

use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId};
use crate::problem::{Problem, ProblemCode};
use crate::render::RefundView;
use crate::respond::{engine_problem, outcome_response, store_problem};

/// The body of a refund: `{}` (the rest of the payment) or
/// `{"amount": {"value": "500.00", "currency": "RUB"}}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundBody {
    amount: Option<AmountBody>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AmountBody {
    value: String,
    currency: String,
}

/// Validates a refund body; every failure is a 422 problem.
fn refund_amount(body: &Value) -> Result<Option<Money>, Problem> {
    let parsed = RefundBody::deserialize(body)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    parsed
        .amount
        .map(|amount| {
            Money::parse(&amount.value, &amount.currency).map_err(|e| {
                let code = match e {
                    MoneyError::UnsupportedCurrency(_) => ProblemCode::UnsupportedCurrency,
                    _ => ProblemCode::InvalidAmount,
                };
                Problem::new(code, e.to_string())
            })
        })
        .transpose()
}

fn payment_not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such payment for this shop")
}

fn refund_not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such refund for this shop")
}

/// Refunds (part of) a payment under its own idempotency key, or answers as
/// the first request with this key did. The engine runs in a task the
/// shutdown waits for, so a client that hangs up does not cut the refund.
pub async fn create(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    PathId(id): PathId,
    uri: Uri,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let payment_id = PaymentId::parse(&id).map_err(|_| payment_not_found())?;
    let amount = refund_amount(&body)?;
    let fingerprint = Fingerprint::compute("POST", uri.path(), &body)
        .map_err(|e| Problem::new(ProblemCode::MalformedJson, e.to_string()))?;
    let claim = ClaimRequest {
        shop_id: shop_id.clone(),
        key: key.clone(),
        fingerprint,
        method: "POST".to_owned(),
        path: uri.path().to_owned(),
    };
    let refund = NewRefund::new(shop_id, payment_id, key, amount);
    let engine = state.engine.clone();
    let outcome = state
        .operations
        .spawn(async move { engine.refund(claim, refund).await })
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "refund task failed");
            Problem::new(ProblemCode::Internal, "internal error")
        })?
        .map_err(engine_problem)?;
    Ok(outcome_response(outcome))
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
    Ok(Json(RefundView::of(&refund).to_value()).into_response())
}
