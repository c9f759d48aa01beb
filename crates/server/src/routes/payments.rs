//! `POST /v1/payments`, `GET /v1/payments/{id}`, `GET /v1/payments?reference=`.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{
    CardToken, ClaimRequest, Fingerprint, Money, MoneyError, PaymentId, PaymentRequest, Reference,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody};
use crate::prefer;
use crate::problem::{Problem, ProblemCode};
use crate::render::PaymentView;
use crate::respond::{outcome_response, store_problem};

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
struct AmountBody {
    value: String,
    currency: String,
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
    let amount = Money::parse(&parsed.amount.value, &parsed.amount.currency).map_err(|e| {
        let code = match e {
            MoneyError::UnsupportedCurrency(_) => ProblemCode::UnsupportedCurrency,
            _ => ProblemCode::InvalidAmount,
        };
        Problem::new(code, e.to_string())
    })?;
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

/// Creates a payment, or answers as the first request with this key did.
///
/// The engine runs in a spawned task: if the client hangs up, hyper drops this
/// handler's future, but the payment still runs to a stored end. With
/// `Prefer: wait=N`, a repeat that finds the key in progress waits for its
/// result (and says `Preference-Applied: wait=N`) instead of answering 409.
pub async fn create(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let request = payment_request(&body)?;
    let fingerprint = Fingerprint::compute("POST", uri.path(), &body)
        .map_err(|e| Problem::new(ProblemCode::MalformedJson, e.to_string()))?;
    let claim = ClaimRequest {
        shop_id,
        key,
        fingerprint,
        method: "POST".to_owned(),
        path: uri.path().to_owned(),
    };
    // With `Prefer: wait=N`, a repeat waits for the first request's result
    // instead of a 409 (see `crate::prefer`).
    let wait = prefer::wait_preference(&headers);
    let (outcome, waited) = prefer::pay(&state, claim, request, wait).await?;
    let mut response = outcome_response(outcome);
    if let (true, Some(wait)) = (waited, wait) {
        let (name, value) = prefer::applied_value(wait);
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}

fn not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such payment for this shop")
}

/// One payment of the authenticated shop.
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    Path(id): Path<String>,
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

/// The query of `GET /v1/payments`.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    reference: Option<String>,
}

/// The payments of one order of the authenticated shop, oldest first: the
/// seed's "check the state before paying".
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let Query(query) =
        query.map_err(|e| Problem::new(ProblemCode::InvalidRequest, e.body_text()))?;
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
