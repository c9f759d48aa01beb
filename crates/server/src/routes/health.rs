//! `GET /healthz` (the process is up) and `GET /readyz` (the store answers).

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::AppState;
use crate::respond::store_problem;

/// The body of a health answer: `{"status": "ok"}` or `{"status": "ready"}`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HealthStatus {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    #[schema(example = "ok")]
    pub status: String,
}

fn status(status: &str) -> Json<HealthStatus> {
    Json(HealthStatus {
        status: status.to_owned(),
    })
}

/// The process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "operations",
    summary = "The process is up",
    responses((status = 200, description = "Always `{\"status\": \"ok\"}` while the process serves.", body = HealthStatus,
        example = json!({"status": "ok"}))),
)]
pub async fn healthz() -> Json<HealthStatus> {
    status("ok")
}

/// The store answers; 503 problem otherwise.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "operations",
    summary = "The store answers",
    responses((status = 200, description = "`{\"status\": \"ready\"}`: the database answered a ping.", body = HealthStatus,
        example = json!({"status": "ready"}))),
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    match state.store.ping().await {
        Ok(()) => status("ready").into_response(),
        Err(error) => store_problem(error).into_response(),
    }
}
