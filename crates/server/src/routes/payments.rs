//! `POST /v1/payments`, `GET /v1/payments/{id}`, `GET /v1/payments?reference=`.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use chargeonce_core::{
    CardToken, ClaimRequest, Fingerprint, IdempotencyKey, Money, MoneyError, Outcome, PaymentId,
    PaymentRequest, Reference, ShopId,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::cache::{Arrival, CachedAnswer, Seat};
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId, StrictQuery};
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
    // A key finished on this instance is answered from memory, byte for byte
    // (or 422 for another request under it), without a store round trip.
    if let Some(hit) = state.responses.get(&shop_id, &key, &fingerprint) {
        note_repeats(&state, &shop_id, &key, hit.repeats);
        return Ok(outcome_response(cached_outcome(&state, hit.answer)));
    }
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
    let (outcome, waited) = match wait {
        None if !state.flight_wait.is_zero() => (pay_shared(&state, claim, request).await?, false),
        _ => pay_and_remember(&state, claim, request, wait).await?,
    };
    let mut response = outcome_response(outcome);
    if let (true, Some(wait)) = (waited, wait) {
        let (name, value) = prefer::applied_value(wait);
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}

/// The outcome a cached key gives, counted as the engine would count it.
fn cached_outcome(state: &AppState, answer: CachedAnswer) -> Outcome {
    match answer {
        CachedAnswer::Replay(response) => {
            state.engine.observer().replayed();
            Outcome::Replayed(response)
        }
        CachedAnswer::Mismatch => {
            state.engine.observer().mismatch();
            Outcome::Mismatch
        }
    }
}

/// The engine's repeat warning, for repeats answered without the store
/// (which counts only those it sees): at the threshold and at every doubling.
fn note_repeats(state: &AppState, shop: &ShopId, key: &IdempotencyKey, repeats: u64) {
    let threshold = state.engine.config().repeat_warning;
    if threshold == 0 || repeats < threshold {
        return;
    }
    if repeats.is_multiple_of(threshold) && (repeats / threshold).is_power_of_two() {
        tracing::warn!(
            shop = %shop,
            key = %key,
            repeats,
            "idempotency key repeated unusually often (answered from this instance's cache): \
             client timeouts or double submits?"
        );
        state.engine.observer().repeated_key(repeats);
    }
}

/// Runs the engine once for all identical requests in flight on this
/// instance: the first goes to the engine; each duplicate waits up to the
/// flight wait for its outcome (an execution is then replayed to it), and
/// answers 409 `request_in_progress` if it is still running, as the store
/// would while the first holds the key's lease.
async fn pay_shared(
    state: &AppState,
    claim: ClaimRequest,
    request: PaymentRequest,
) -> Result<Outcome, Problem> {
    match state
        .flights
        .join(&claim.shop_id, &claim.key, claim.fingerprint)
    {
        Seat::Leader(leader) => {
            let result = pay_and_remember(state, claim, request, None).await;
            leader.land(result.as_ref().ok().map(|(outcome, _)| outcome.clone()));
            result.map(|(outcome, _)| outcome)
        }
        Seat::Follower(follower) => match follower.arrive(state.flight_wait).await {
            Arrival::Outcome(outcome) => {
                if let Some(repeats) = state.responses.count_repeat(&claim.shop_id, &claim.key) {
                    note_repeats(state, &claim.shop_id, &claim.key, repeats);
                }
                Ok(follower_outcome(state, *outcome))
            }
            Arrival::StillRunning => {
                state.engine.observer().in_progress();
                Ok(Outcome::InProgress {
                    retry_after: state.engine.config().retry_after,
                })
            }
            Arrival::Alone => Ok(pay_and_remember(state, claim, request, None).await?.0),
        },
        Seat::Alone => Ok(pay_and_remember(state, claim, request, None).await?.0),
    }
}

/// What a duplicate gets from the outcome of the identical request it waited
/// for: the stored response of a final answer as a replay, else the same.
fn follower_outcome(state: &AppState, outcome: Outcome) -> Outcome {
    match outcome {
        Outcome::Executed(response) | Outcome::Replayed(response) => {
            cached_outcome(state, CachedAnswer::Replay(response))
        }
        Outcome::Mismatch => cached_outcome(state, CachedAnswer::Mismatch),
        other => other,
    }
}

/// Runs the engine (see [`prefer::pay`]) and caches a response this request
/// executed until shortly before its key can expire.
async fn pay_and_remember(
    state: &AppState,
    claim: ClaimRequest,
    request: PaymentRequest,
    wait: Option<Duration>,
) -> Result<(Outcome, bool), Problem> {
    let (shop, key, fingerprint) = (claim.shop_id.clone(), claim.key.clone(), claim.fingerprint);
    let (outcome, waited) = prefer::pay(state, claim, request, wait).await?;
    if let Outcome::Executed(response) = &outcome {
        // The key was finished before this point and is kept at least the TTL
        // from then; the margin covers the time since.
        let ttl = state.engine.config().timing.ttl;
        let margin = Duration::from_secs(1) + ttl / 100;
        let until = Instant::now() + ttl.saturating_sub(margin);
        state
            .responses
            .insert(&shop, &key, fingerprint, response, until);
    }
    Ok((outcome, waited))
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
