//! The simulator's HTTP API: the ledger, as JSON.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::Simulator;

/// The simulator's routes, to be nested by the service (at `/sim`):
///
/// - `GET /ledger`: `{"charges": [...], "total_succeeded": [{"currency": "RUB",
///   "amount": "1500.00", "count": 1}]}`; every charge attempt oldest first (see
///   [`LedgerEntry`](crate::LedgerEntry) for its fields) and the succeeded ones
///   summed per currency. A ledger failure is a `500` `application/problem+json`
///   with code `ledger_unavailable`.
pub fn router(sim: Arc<Simulator>) -> Router {
    Router::new().route("/ledger", get(ledger)).with_state(sim)
}

async fn ledger(State(sim): State<Arc<Simulator>>) -> Response {
    match sim.report().await {
        Ok(report) => Json(report).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot read the acquirer ledger");
            let body = serde_json::json!({
                "type": "about:blank",
                "title": "The acquirer ledger cannot be read",
                "status": 500,
                "code": "ledger_unavailable",
            });
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "application/problem+json")],
                body.to_string(),
            )
                .into_response()
        }
    }
}
