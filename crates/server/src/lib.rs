//! # chargeonce-server
//!
//! The HTTP face of chargeonce, on axum: shop authentication, the
//! `Idempotency-Key` header, bounded JSON bodies, `application/problem+json`
//! errors with stable codes, and byte-identical replays. The idempotency
//! itself is [`chargeonce_core::Engine`]'s; this crate only translates. The
//! background workers that run beside it are in `chargeonce-workers`.
//!
//! An idempotent request (a payment, a refund) goes from its handler in
//! [`routes`] (parse, fingerprint) through [`pipeline`] (the response
//! cache, duplicates in flight, `Prefer: wait`) to the engine. What every
//! handler shares is the [`AppState`]. Every answer carries a `Request-Id`
//! ([`request_id`]).
//!
//! ```no_run
//! # async fn demo(engine: std::sync::Arc<chargeonce_core::Engine>) -> std::io::Result<()> {
//! let app = chargeonce_server::router(chargeonce_server::AppState::new(engine));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! chargeonce_server::serve(listener, app, std::future::pending()).await
//! # }
//! ```

use std::future::Future;

use axum::Router;
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

#[cfg(feature = "bench-routes")]
pub mod bench_ceiling;
pub mod cache;
pub mod conn;
pub mod extract;
pub mod limits;
pub mod metrics;
pub mod pipeline;
pub mod prefer;
pub mod problem;
pub mod render;
pub mod request_id;
pub mod respond;
pub mod routes;
pub mod state;

pub use metrics::Metrics;
pub use render::HttpRender;
pub use state::AppState;

use problem::{Problem, ProblemCode};

/// The v1 API, health checks, and problem+json for unknown routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/v1/payments",
            get(routes::payments::list).post(routes::payments::create),
        )
        .route("/v1/payments/{id}", get(routes::payments::get))
        .route(
            "/v1/payments/{id}/refunds",
            get(routes::refunds::of_payment).post(routes::refunds::create),
        )
        .route("/v1/refunds", get(routes::refunds::list))
        .route("/v1/refunds/{id}", get(routes::refunds::get))
        .route("/v1/idempotency-keys/{key}", get(routes::keys::get))
        .route("/v1/events", get(routes::events::list))
        .route("/v1/events/{id}", get(routes::events::get))
        .route("/v1/events/{id}/resend", post(routes::events::resend))
        .route("/v1/webhooks/acquirer", post(routes::webhooks::acquirer))
        .route("/metrics", get(routes::metrics::metrics))
        .route("/healthz", get(routes::health::healthz))
        .route("/readyz", get(routes::health::readyz))
        .fallback(|| async { Problem::new(ProblemCode::NotFound, "no such route") })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                ProblemCode::MethodNotAllowed,
                "this route does not take that method",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            limits::middleware,
        ))
        .with_state(state)
        .layer(CatchPanicLayer::custom(|_| {
            axum::response::IntoResponse::into_response(Problem::new(
                ProblemCode::InternalError,
                "internal error",
            ))
        }))
        // Every error the HTTP stack makes on its own is a problem too.
        .layer(axum::middleware::map_response(problem::problems_only))
        .layer(TraceLayer::new_for_http().make_span_with(request_id::make_span))
        // Outermost: every answer above carries the request's id (and the
        // span above records it); see `request_id`.
        .layer(axum::middleware::from_fn(request_id::middleware))
}

/// Serves a router until `shutdown` resolves, then stops accepting and lets
/// requests in flight finish, with the default [`conn::ConnectionLimits`]
/// fitted to the process's file limit (see [`conn::serve_with`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = conn::ConnectionLimits::default().fit_fd_limit(conn::FD_RESERVE);
    conn::serve_with(listener, router, limits, shutdown).await
}
