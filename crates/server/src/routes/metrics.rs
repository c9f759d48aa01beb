//! `GET /metrics`: Prometheus text format.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::AppState;

/// Every metric of this instance.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "operations",
    summary = "Prometheus metrics",
    responses((status = 200, description = "Every metric of this instance, in the OpenMetrics text format.",
        body = String, content_type = "application/openmetrics-text")),
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics().render(),
    )
        .into_response()
}
