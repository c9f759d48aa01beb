//! The operator's side, served on a listener of its own (`chargeonce serve
//! --operator-listen`, loopback by default) and never on the shop API's:
//! `GET /metrics` (Prometheus text: business volumes are not for the
//! public) and the health checks (so a probe can watch either listener).
//! The binary merges in the operator console (`chargeonce-console`, under
//! `/console`) and the embedded simulator's `/sim` routes.
//!
//! Keeping it apart means a script bug on the public origin (`/docs`, say)
//! cannot run in the console's origin, and a firewall rule (or the loopback
//! default) keeps strangers from the login form altogether.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;
use crate::routes::health;

/// Where the metrics are served on the operator listener.
pub const METRICS_PATH: &str = "/metrics";

/// The operator listener's own routes, before the shared layers
/// ([`crate::operator_router`] adds them).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(METRICS_PATH, get(metrics))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
}

/// `GET /metrics`: every metric of this instance, in the OpenMetrics text
/// format.
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
