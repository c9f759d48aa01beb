//! `GET /healthz` (the process is up) and `GET /readyz` (the store answers).

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::AppState;
use crate::respond::store_problem;

/// The process is up.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// The store answers; 503 problem otherwise.
pub async fn readyz(State(state): State<AppState>) -> Response {
    match state.store.ping().await {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(error) => store_problem(error).into_response(),
    }
}
