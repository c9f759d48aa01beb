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

/// How long a scrape waits for the store's counts before it answers
/// without refreshing them (the scrape must answer when the store cannot).
const COUNTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /metrics`: every metric of this instance, in the OpenMetrics text
/// format, the store's counts (pending payments, open findings, undelivered
/// and due events) and its pressure (writer queue or pool) read first; when the store does not answer in time they keep
/// their last values and the failure counts as a store error.
pub async fn metrics(State(state): State<AppState>) -> Response {
    // From memory, no statement: read even when the store does not answer.
    state.metrics().store_pressure(state.store().pressure());
    match tokio::time::timeout(COUNTS_TIMEOUT, state.store().counts()).await {
        Ok(Ok(counts)) => state
            .metrics()
            .store_counts(&counts, time::OffsetDateTime::now_utc()),
        Ok(Err(error)) => {
            tracing::warn!(%error, "metrics: the store's counts cannot be read");
            state.metrics().store_error_named("metrics_counts");
        }
        Err(_) => {
            tracing::warn!("metrics: the store's counts took too long");
            state.metrics().store_error_named("metrics_counts");
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics().render(),
    )
        .into_response()
}
