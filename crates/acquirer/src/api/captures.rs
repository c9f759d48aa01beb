//! An authorization's captures and its void:
//! `POST /v1/charges/{id}/captures`, `GET /v1/charges/{id}/captures`,
//! `POST /v1/charges/{id}/void`.
//!
//! Both moves go through the network faults a charge does (latency, a 5xx
//! before anything is recorded, a hang, an answer lost after the ledger
//! recorded it) and through the token's behaviour (`tok_timeout` loses the
//! answer of the execution that recorded it, `tok_late` records it late).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{bad_request, before_work, lose, modification, optional_body, problem, required_key};
use crate::faults::Mishap;
use crate::{CaptureError, LOST_ANSWER, Simulator};
use chargeonce_connector::protocol::{
    AUTHORIZATION_CLOSED, AUTHORIZATION_VOIDED, CAPTURE_EXCEEDS_AUTHORIZATION,
    CHARGE_NOT_CAPTURABLE, KEY_REUSED, NOTHING_TO_VOID,
};

/// The body of a capture: no amount takes what is left, as the last capture.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaptureBody {
    amount_minor: Option<i64>,
    /// The last capture: the rest of the authorization is released.
    #[serde(default)]
    r#final: bool,
    /// The payment's token (behaviour rules read it).
    token: Option<String>,
    /// The caller's id of the capture, to find it by later.
    reference: Option<String>,
}

/// The optional body of a void.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct VoidBody {
    token: Option<String>,
}

/// The query of `GET /v1/charges/{id}/captures`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CapturesQuery {
    reference: Option<String>,
}

/// The captures of an authorization (those made under the caller's
/// reference when one is given), oldest first.
pub(super) async fn list_captures(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    query: Result<Query<CapturesQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return bad_request("the only parameter is `reference`");
    };
    match sim.captures_of(&id, query.reference.as_deref()).await {
        Ok(captures) => Json(json!({"data": captures})).into_response(),
        Err(error) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger_unavailable",
            error.to_string(),
        ),
    }
}

pub(super) async fn capture(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = match required_key(&headers) {
        Ok(key) => key,
        Err(reason) => return bad_request(reason),
    };
    let body: CaptureBody = match optional_body(&body) {
        Ok(body) => body,
        Err(reason) => return bad_request(reason),
    };
    let mishap = match before_work(&sim).await {
        Ok(mishap) => mishap,
        Err(refused) => return refused.answer(),
    };
    let lose_first = body.token.as_deref() == Some(crate::tokens::TIMEOUT);
    let work = {
        let (sim, key) = (Arc::clone(&sim), key.clone());
        async move {
            sim.capture_part(
                &id,
                &key,
                body.amount_minor,
                body.r#final,
                body.reference.as_deref(),
            )
            .await
        }
    };
    let answer = match modification(&sim, &key, body.token.as_deref(), work).await {
        Ok(Ok((_, true))) if lose_first => lost(),
        Ok(Ok((record, _))) => Json(record).into_response(),
        Ok(Err(error)) => refusal(error, false),
        Err(refused) => return refused,
    };
    after_work(&sim, mishap, answer).await
}

pub(super) async fn void(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = match required_key(&headers) {
        Ok(key) => key,
        Err(reason) => return bad_request(reason),
    };
    let body: VoidBody = match optional_body(&body) {
        Ok(body) => body,
        Err(reason) => return bad_request(reason),
    };
    let mishap = match before_work(&sim).await {
        Ok(mishap) => mishap,
        Err(refused) => return refused.answer(),
    };
    let lose_first = body.token.as_deref() == Some(crate::tokens::TIMEOUT);
    let work = {
        let (sim, key) = (Arc::clone(&sim), key.clone());
        async move { sim.void_charge(&id, &key).await }
    };
    let answer = match modification(&sim, &key, body.token.as_deref(), work).await {
        Ok(Ok((_, true))) if lose_first => lost(),
        Ok(Ok((record, _))) => Json(record).into_response(),
        Ok(Err(error)) => refusal(error, true),
        Err(refused) => return refused,
    };
    after_work(&sim, mishap, answer).await
}

/// The answer the token's behaviour loses.
fn lost() -> Response {
    problem(StatusCode::GATEWAY_TIMEOUT, "lost_answer", LOST_ANSWER)
}

/// The answer, unless the fault drawn before the work loses it now.
async fn after_work(sim: &Simulator, mishap: Mishap, answer: Response) -> Response {
    match mishap {
        Mishap::LostAfterCommit(how) => {
            lose(how, Duration::from_millis(sim.faults().hang_ms)).await
        }
        _ => answer,
    }
}

/// A refusal on the wire: 404 for no such charge, 409 for a charge in the
/// wrong state, 422 for an amount over what is left or a reused key.
fn refusal(error: CaptureError, voiding: bool) -> Response {
    let detail = error.to_string();
    let (status, code) = match error {
        CaptureError::NoSuchCharge(_) => (StatusCode::NOT_FOUND, "not_found"),
        CaptureError::NotCapturable(_) => (StatusCode::CONFLICT, CHARGE_NOT_CAPTURABLE),
        CaptureError::Voided(_) => (StatusCode::CONFLICT, AUTHORIZATION_VOIDED),
        // A closed authorization has nothing left to release.
        CaptureError::Closed(_) if voiding => (StatusCode::CONFLICT, NOTHING_TO_VOID),
        CaptureError::Closed(_) => (StatusCode::CONFLICT, AUTHORIZATION_CLOSED),
        CaptureError::ExceedsAuthorization(_) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            CAPTURE_EXCEEDS_AUTHORIZATION,
        ),
        CaptureError::KeyReused(_) => (StatusCode::UNPROCESSABLE_ENTITY, KEY_REUSED),
        CaptureError::Ledger(_) => (StatusCode::INTERNAL_SERVER_ERROR, "ledger_unavailable"),
    };
    problem(status, code, detail)
}
