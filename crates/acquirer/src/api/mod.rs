//! The standalone acquirer's HTTP API (`chargeonce acquirer`), with fault
//! injection between the network and the ledger.
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/charges` | charge; `Idempotency-Key` header required; optional `"capture_method": "manual"` only authorizes (holds the amount for captures); a W3C `traceparent` header's trace id is recorded on the charge (`trace_id`); 200 with the charge (succeeded or declined), 422 `idempotency_key_reused`, 400 bad input |
//! | `GET /v1/charges?acquirer_key=K` | the charge recorded under a key (idempotent mode only) |
//! | `GET /v1/charges?shop_id=S&payment_id=P` | the charges for a caller's payment (its reference) |
//! | `GET /v1/charges?from=MS&to=MS` | the charges recorded in a window (unix ms), oldest first |
//! | `GET /v1/charges?from=MS&to=MS&limit=N[&after=MS&after_id=ID]` | one page of that window: up to `N` (at most 10 000) charges in (`created_at`, id) order, after the charge (`after`, `after_id`) that ended the previous page |
//! | `GET /v1/charges?shop_id=S&reference=R` | the charges for one order reference of a shop, oldest first |
//! | `POST /v1/charges/{id}/refunds` | refunds a charge, once per `Idempotency-Key` (default `refund-<charge id>`); optional body `{"amount_minor": N, "token": "..."}` (default: what is left); 200 with the refund, 404 `not_found`, 409 `charge_declined`, 422 `refund_exceeds_charge`; a `tok_timeout` token loses the first answer (504) |
//! | `POST /v1/charges/{id}/captures` | takes part of an authorization, once per `Idempotency-Key` (required); body `{"amount_minor"?: N, "final"?: bool, "reference"?: "cap_...", "token"?: "..."}` (no amount: what is left, as the last capture); 200 with the capture, 404 `not_found`, 409 `charge_not_capturable`, `authorization_voided`, `authorization_closed`, 422 `capture_exceeds_authorization`, `idempotency_key_reused` |
//! | `GET /v1/charges/{id}/captures[?reference=R]` | an authorization's captures (under the caller's reference), oldest first |
//! | `POST /v1/charges/{id}/void` | releases what is left of an authorization, once (`Idempotency-Key` required; a repeat answers the first void); optional body `{"token": "..."}`; 200 with the void, 404 `not_found`, 409 `charge_not_capturable`, `authorization_voided` (under another key), `nothing_to_void` |
//! | `GET /ledger` | the whole ledger and totals (as the embedded `/sim/ledger`) |
//! | `GET /admin/faults`, `PUT /admin/faults` | read or replace the [`Faults`] in force |
//! | `POST /admin/charges` | plant a charge in the ledger (reconciliation drills) |
//! | `GET /healthz` | up |
//!
//! Lists answer `{"data": [charge, ...]}`; a charge is the JSON of
//! [`LedgerEntry`]. Errors are `application/problem+json` with a `code`.
//!
//! Faults apply to charges, captures, voids and look-ups (not to the ledger,
//! refunds or the admin routes): latency, 5xx before anything is recorded, hangs, and answers
//! lost after the charge was recorded (a 504, a dropped connection, or silence
//! until the client gives up).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chargeonce_core::{
    AcquirerError, AcquirerKey, CaptureMethod, CardToken, ChargeRequest, Money, PaymentId,
    Reference, ShopId,
};
use serde::Deserialize;
use serde_json::json;

use crate::entry::now_millis;
use crate::faults::{LostAnswer, Mishap};
use crate::{
    ChargeStatus, Faults, IN_FLIGHT_DUPLICATE, KEY_REUSED, LOST_ANSWER, LedgerEntry, Simulator,
};

pub use chargeonce_connector::protocol::IDEMPOTENCY_KEY;

mod captures;
mod refunds;

/// The standalone acquirer's routes (see the [module docs](self)).
pub fn api_router(sim: Arc<Simulator>) -> Router {
    Router::new()
        .route("/v1/charges", post(create_charge).get(list_charges))
        .route(
            "/v1/charges/{id}/refunds",
            post(refunds::refund).get(refunds::list_refunds),
        )
        .route(
            "/v1/charges/{id}/captures",
            post(captures::capture).get(captures::list_captures),
        )
        .route("/v1/charges/{id}/void", post(captures::void))
        .route("/admin/faults", get(get_faults).put(put_faults))
        .route("/admin/charges", post(plant))
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .with_state(Arc::clone(&sim))
        .merge(crate::router(sim))
}

fn problem(status: StatusCode, code: &str, detail: impl Into<String>) -> Response {
    let body = json!({
        "type": format!("urn:chargeonce:acquirer:{code}"),
        "title": code,
        "status": status.as_u16(),
        "detail": detail.into(),
        "code": code,
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// An answer whose connection drops mid-way: the client sees a reset or a
/// broken body, never a usable answer.
fn dropped() -> Response {
    let broken = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("answer lost"))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(broken))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}

/// A lost answer, the way `how` loses it.
async fn lose(how: LostAnswer, hang: Duration) -> Response {
    match how {
        LostAnswer::GatewayTimeout => problem(
            StatusCode::GATEWAY_TIMEOUT,
            "gateway_timeout",
            "the upstream did not answer in time",
        ),
        LostAnswer::Dropped => dropped(),
        LostAnswer::Silence => {
            tokio::time::sleep(hang).await;
            dropped()
        }
    }
}

/// What a request gets instead of an answer, before any work was done.
#[derive(Debug, Clone, Copy)]
enum Refused {
    /// A 5xx.
    ServerError,
    /// A 400: the request is refused for good.
    Rejected,
    /// A connection dropped after a hang.
    Dropped,
}

impl Refused {
    fn answer(self) -> Response {
        match self {
            Self::ServerError => problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "acquirer_error",
                "internal error; nothing was recorded",
            ),
            Self::Rejected => problem(
                StatusCode::BAD_REQUEST,
                "request_rejected",
                "refused (fault injection); nothing was recorded",
            ),
            Self::Dropped => dropped(),
        }
    }
}

/// Applies the network-side faults that come before any work: latency, a
/// 5xx, a hang. `Err` says what to answer instead of working.
async fn before_work(sim: &Simulator) -> Result<Mishap, Refused> {
    let (latency, mishap, faults) = sim.roll(|f, rng| (f.latency(rng), f.mishap(rng), f.clone()));
    tokio::time::sleep(latency).await;
    match mishap {
        Mishap::ErrorBeforeCommit => Err(Refused::ServerError),
        Mishap::Rejected => Err(Refused::Rejected),
        Mishap::Hang => {
            tokio::time::sleep(Duration::from_millis(faults.hang_ms)).await;
            Err(Refused::Dropped)
        }
        other => Ok(other),
    }
}

/// An amount on the wire.
#[derive(Debug, Deserialize)]
struct AmountJson {
    value: String,
    currency: String,
}

/// The body of `POST /v1/charges`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChargeBody {
    shop_id: String,
    payment_id: String,
    reference: String,
    amount: AmountJson,
    token: String,
    /// `automatic` (the default: charged at once) or `manual` (only
    /// authorized: the amount is held for captures).
    #[serde(default)]
    capture_method: Option<String>,
}

fn bad_request(detail: impl Into<String>) -> Response {
    problem(StatusCode::BAD_REQUEST, "invalid_request", detail)
}

/// The charge a request asks for; `Err` says why it is refused.
fn charge_request(headers: &HeaderMap, body: &[u8]) -> Result<ChargeRequest, String> {
    let key = headers
        .get(IDEMPOTENCY_KEY)
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| "an Idempotency-Key header is required".to_owned())?;
    let body: ChargeBody = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let capture_method = match body.capture_method.as_deref() {
        None => CaptureMethod::Automatic,
        Some(method) => CaptureMethod::parse(method)
            .ok_or_else(|| format!("capture_method `{method}` is not automatic or manual"))?,
    };
    Ok(ChargeRequest {
        acquirer_key: AcquirerKey::from_stored(key.to_owned()),
        shop_id: ShopId::new(body.shop_id).map_err(|e| e.to_string())?,
        payment_id: PaymentId::parse(&body.payment_id).map_err(|e| e.to_string())?,
        reference: Reference::new(body.reference).map_err(|e| e.to_string())?,
        amount: Money::parse(&body.amount.value, &body.amount.currency)
            .map_err(|e| e.to_string())?,
        token: CardToken::new(body.token).map_err(|e| e.to_string())?,
        capture_method,
    })
}

async fn create_charge(
    State(sim): State<Arc<Simulator>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = match charge_request(&headers, &body) {
        Ok(request) => request,
        Err(reason) => return bad_request(reason),
    };
    let mishap = match before_work(&sim).await {
        Ok(mishap) => mishap,
        Err(refused) => return refused.answer(),
    };
    let hang = Duration::from_millis(sim.faults().hang_ms);
    let trace_id = chargeonce_telemetry::context::trace_id_of_traceparent(&headers);
    let answer = match sim.charge_traced(&request, trace_id).await {
        Ok(result) => match sim
            .ledger_handle()
            .charge(result.provider_payment_id())
            .await
        {
            Ok(Some(entry)) => Json(entry).into_response(),
            Ok(None) | Err(_) => problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "acquirer_error",
                "the charge was recorded but cannot be read back",
            ),
        },
        Err(AcquirerError::Unknown(reason)) if reason.starts_with(KEY_REUSED) => problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            KEY_REUSED,
            "this idempotency key was first used with other parameters",
        ),
        Err(AcquirerError::Unknown(reason)) if reason == LOST_ANSWER => {
            return lose(LostAnswer::GatewayTimeout, hang).await;
        }
        Err(
            AcquirerError::Unknown(reason)
            | AcquirerError::Rejected(reason)
            | AcquirerError::NotSent(reason),
        ) if reason.starts_with(IN_FLIGHT_DUPLICATE) => {
            return in_flight_answer(sim.faults().in_flight_duplicate, &reason);
        }
        Err(AcquirerError::Unknown(reason)) => {
            problem(StatusCode::INTERNAL_SERVER_ERROR, "acquirer_error", reason)
        }
        Err(AcquirerError::NotSent(reason)) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "acquirer_unavailable",
            reason,
        ),
        Err(AcquirerError::Rejected(reason)) => bad_request(reason),
    };
    match mishap {
        Mishap::LostAfterCommit(how) => lose(how, hang).await,
        _ => answer,
    }
}

/// The answer to a duplicate of a request in flight, as the fault says
/// (`Wait` only if the fault changed meanwhile: 409, still unknown).
fn in_flight_answer(mode: crate::InFlightDuplicate, detail: &str) -> Response {
    match mode.answer() {
        Some((status, body)) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        None => problem(StatusCode::CONFLICT, "request_in_progress", detail),
    }
}

/// Runs a modification of a charge (a refund, a capture, a void) the way
/// the acquirer runs each: a duplicate of one in flight under `key` is
/// answered as the fault says; a delay (`tok_late`, the late-record fault)
/// runs in a task of its own, so the modification happens even when the
/// caller stops waiting, as at a provider still processing it.
async fn modification<T, F>(
    sim: &Arc<Simulator>,
    key: &str,
    token: Option<&str>,
    work: F,
) -> Result<T, Response>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let in_flight = match sim.in_flight_entry(key) {
        Ok(guard) => guard,
        Err(mode) => {
            return Err(in_flight_answer(
                mode,
                "a request with this key is in progress",
            ));
        }
    };
    let delay = sim.refund_delay(token);
    let work = async move {
        tokio::time::sleep(delay).await;
        let answer = work.await;
        drop(in_flight);
        answer
    };
    if delay.is_zero() {
        return Ok(work.await);
    }
    tokio::spawn(work).await.map_err(|error| {
        problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "acquirer_error",
            error.to_string(),
        )
    })
}

/// A JSON body that may be empty (then the default); `Err` says why not.
fn optional_body<T: Default + serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    if body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|error| error.to_string())
}

/// The caller's key from the `Idempotency-Key` header: required, visible
/// ASCII; `Err` says why not.
fn required_key(headers: &HeaderMap) -> Result<String, &'static str> {
    match headers.get(IDEMPOTENCY_KEY).map(|v| v.to_str()) {
        Some(Ok(key)) if !key.is_empty() => Ok(key.to_owned()),
        Some(_) => Err("Idempotency-Key must be visible ASCII"),
        None => Err("an Idempotency-Key header is required"),
    }
}

/// The query of `GET /v1/charges`.
#[derive(Debug, Deserialize)]
struct ListQuery {
    acquirer_key: Option<String>,
    shop_id: Option<String>,
    payment_id: Option<String>,
    reference: Option<String>,
    from: Option<i64>,
    to: Option<i64>,
    limit: Option<u32>,
    after: Option<i64>,
    after_id: Option<String>,
}

/// The most charges one page of `GET /v1/charges?from&to&limit` returns.
const MAX_PAGE: u32 = 10_000;

fn list(entries: Vec<LedgerEntry>) -> Response {
    Json(json!({"data": entries})).into_response()
}

async fn list_charges(
    State(sim): State<Arc<Simulator>>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return bad_request("bad query");
    };
    let ListQuery {
        acquirer_key,
        shop_id,
        payment_id,
        reference,
        from,
        to,
        limit,
        after,
        after_id,
    } = query;
    let asked = (
        acquirer_key,
        shop_id,
        payment_id,
        reference,
        from,
        to,
        limit,
        after,
        after_id,
    );
    let found = match asked {
        (Some(key), None, None, None, None, None, None, None, None) => {
            if let Err(refused) = before_work(&sim).await {
                return refused.answer();
            }
            sim.find(&AcquirerKey::from_stored(key))
                .await
                .map(|e| e.into_iter().collect())
        }
        (None, Some(shop), Some(payment), None, None, None, None, None, None) => {
            if let Err(refused) = before_work(&sim).await {
                return refused.answer();
            }
            let (Ok(shop), Ok(payment)) = (ShopId::new(shop), PaymentId::parse(&payment)) else {
                return list(Vec::new());
            };
            sim.find_for_payment(&shop, &payment).await
        }
        (None, Some(shop), None, Some(reference), None, None, None, None, None) => {
            let (Ok(shop), Ok(reference)) = (ShopId::new(shop), Reference::new(reference)) else {
                return list(Vec::new());
            };
            sim.find_for_reference(&shop, &reference).await
        }
        (None, None, None, None, Some(from), Some(to), None, None, None) => {
            sim.ledger_handle().between(from, to).await
        }
        (None, None, None, None, Some(from), Some(to), Some(limit), after, after_id) => {
            let after = match (after, after_id.as_deref()) {
                (None, None) => None,
                (Some(ms), Some(id)) => Some((ms, id)),
                _ => return bad_request("after and after_id come together"),
            };
            let limit = limit.clamp(1, MAX_PAGE);
            sim.ledger_handle().page(from, to, after, limit).await
        }
        _ => {
            return bad_request(
                "give acquirer_key, or shop_id and payment_id, or shop_id and reference, \
                 or from and to (unix ms) with an optional limit, after and after_id",
            );
        }
    };
    match found {
        Ok(entries) => list(entries),
        Err(error) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger_unavailable",
            error.to_string(),
        ),
    }
}

async fn get_faults(State(sim): State<Arc<Simulator>>) -> Json<Faults> {
    Json(sim.faults())
}

async fn put_faults(State(sim): State<Arc<Simulator>>, body: Bytes) -> Response {
    let faults: Faults = match serde_json::from_slice(&body) {
        Ok(faults) => faults,
        Err(error) => return bad_request(error.to_string()),
    };
    match sim.set_faults(faults) {
        Ok(()) => {
            tracing::info!(faults = ?sim.faults(), "acquirer faults changed");
            Json(sim.faults()).into_response()
        }
        Err(error) => bad_request(error.to_string()),
    }
}

/// The body of `POST /admin/charges`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlantBody {
    id: Option<String>,
    acquirer_key: String,
    shop_id: String,
    payment_id: String,
    reference: String,
    amount: AmountJson,
    #[serde(default)]
    decline_code: Option<String>,
}

async fn plant(State(sim): State<Arc<Simulator>>, body: Bytes) -> Response {
    let body: PlantBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return bad_request(error.to_string()),
    };
    let entry = (|| {
        Ok::<_, String>(LedgerEntry {
            id: body
                .id
                .unwrap_or_else(|| format!("ch_{}", uuid::Uuid::now_v7().simple())),
            acquirer_key: AcquirerKey::from_stored(body.acquirer_key),
            shop_id: ShopId::new(body.shop_id).map_err(|e| e.to_string())?,
            payment_id: PaymentId::parse(&body.payment_id).map_err(|e| e.to_string())?,
            reference: Reference::new(body.reference).map_err(|e| e.to_string())?,
            amount: Money::parse(&body.amount.value, &body.amount.currency)
                .map_err(|e| e.to_string())?,
            status: if body.decline_code.is_some() {
                ChargeStatus::Declined
            } else {
                ChargeStatus::Succeeded
            },
            decline_code: body.decline_code,
            created_at: now_millis(),
            refunded_minor: 0,
            capture_method: CaptureMethod::Automatic,
            captured_minor: 0,
            closed: false,
            voided: false,
            trace_id: None,
        })
    })();
    let entry = match entry {
        Ok(entry) => entry,
        Err(error) => return bad_request(error),
    };
    match sim.plant(&entry).await {
        Ok(()) => (StatusCode::CREATED, Json(entry)).into_response(),
        Err(error) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger_unavailable",
            error.to_string(),
        ),
    }
}
