//! `POST /v1/payments`, `GET /v1/payments/{id}`, `GET /v1/payments?reference=`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{CardToken, PaymentId, PaymentRequest, Reference};
use serde::Deserialize;
use serde_json::{Value, json};

use super::amount::AmountBody;
use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId, StrictQuery};
use crate::pipeline::{self, Operation};
use crate::problem::{Problem, ProblemCode};
use crate::render::PaymentView;
use crate::respond::store_problem;

/// The body of `POST /v1/payments`, as in the seed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PaymentBody {
    amount: AmountBody,
    reference: String,
    payment_method: PaymentMethodBody,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PaymentMethodBody {
    token: String,
}

/// Validates a payment body into a domain request; every failure is a 422
/// problem naming the field.
fn payment_request(body: &Value) -> Result<PaymentRequest, Problem> {
    let parsed = PaymentBody::deserialize(body)
        .map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.to_string()))?;
    let amount = parsed.amount.money()?;
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
    Ok(Json(PaymentView::of(&payment).to_value()).into_response())
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
    let data: Vec<Value> = payments
        .iter()
        .map(|p| PaymentView::of(p).to_value())
        .collect();
    Ok(Json(json!({"object": "list", "data": data})).into_response())
}
