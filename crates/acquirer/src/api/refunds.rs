//! `POST /v1/charges/{id}/refunds` and `GET /v1/charges/{id}/refunds`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{IDEMPOTENCY_KEY, bad_request, modification, optional_body, problem};
use crate::{LOST_ANSWER, RefundError, Simulator};

/// The optional body of a refund.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundBody {
    amount_minor: Option<i64>,
    token: Option<String>,
    /// The caller's id of the refund, to find it by later.
    reference: Option<String>,
}

/// The query of `GET /v1/charges/{id}/refunds`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RefundsQuery {
    reference: String,
}

/// The refunds of a charge made under the caller's reference, oldest first.
pub(super) async fn list_refunds(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    query: Result<Query<RefundsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return bad_request("`reference` is required");
    };
    match sim.refunds_for_reference(&id, &query.reference).await {
        Ok(refunds) => Json(json!({"data": refunds})).into_response(),
        Err(error) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger_unavailable",
            error.to_string(),
        ),
    }
}

pub(super) async fn refund(
    State(sim): State<Arc<Simulator>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: RefundBody = match optional_body(&body) {
        Ok(body) => body,
        Err(reason) => return bad_request(reason),
    };
    let key = match headers.get(IDEMPOTENCY_KEY).map(|v| v.to_str()) {
        Some(Ok(key)) if !key.is_empty() => key.to_owned(),
        Some(_) => return bad_request("Idempotency-Key must be visible ASCII"),
        None => format!("refund-{id}"),
    };
    let lose_first = body.token.as_deref() == Some(crate::tokens::TIMEOUT);
    let work = {
        let (sim, key) = (Arc::clone(&sim), key.clone());
        async move {
            sim.refund_part(&id, &key, body.amount_minor, body.reference.as_deref())
                .await
        }
    };
    let answer = match modification(&sim, &key, body.token.as_deref(), work).await {
        Ok(answer) => answer,
        Err(refused) => return refused,
    };
    match answer {
        Ok((_, true)) if lose_first => {
            problem(StatusCode::GATEWAY_TIMEOUT, "lost_answer", LOST_ANSWER)
        }
        Ok((record, _)) => Json(record).into_response(),
        Err(RefundError::NoSuchCharge(_)) => {
            problem(StatusCode::NOT_FOUND, "not_found", "no such charge")
        }
        Err(error @ RefundError::Declined(_)) => {
            problem(StatusCode::CONFLICT, "charge_declined", error.to_string())
        }
        Err(error @ RefundError::ExceedsCharge(_)) => problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            crate::REFUND_EXCEEDS_CHARGE,
            error.to_string(),
        ),
        Err(RefundError::Ledger(error)) => problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger_unavailable",
            error.to_string(),
        ),
    }
}
