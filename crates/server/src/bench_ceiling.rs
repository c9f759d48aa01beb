//! The throughput ceiling for `chargeonce bench` (mounted only by
//! `chargeonce serve --bench-ceiling`): the same HTTP stack with no
//! idempotency and no payment.
//!
//! - `POST /bench/ceiling`: the shop auth extractor (one indexed read of the
//!   shop's secret hash in the store, and a constant-time compare), then a
//!   small JSON answer. No key, no transaction, no acquirer.
//! - `POST /bench/noop`: the same answer without auth: HTTP alone, no database.

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::post;
use tower_http::trace::TraceLayer;

use crate::AppState;
use crate::extract::AuthenticatedShop;

/// The ceiling routes, with the main router's limits and trace layers.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/bench/ceiling", post(ceiling))
        .route("/bench/noop", post(noop))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::limits::middleware,
        ))
        .with_state(state)
        .layer(TraceLayer::new_for_http())
}

async fn ceiling(AuthenticatedShop(shop): AuthenticatedShop) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "application/json")],
        format!(r#"{{"object":"bench_ceiling","shop_id":"{shop}"}}"#),
    )
}

async fn noop() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "application/json")],
        r#"{"object":"bench_noop"}"#,
    )
}
