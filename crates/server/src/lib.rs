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
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub mod auth_limits;
#[cfg(feature = "bench-routes")]
pub mod bench_ceiling;
pub mod cache;
pub mod client_addr;
pub mod conn;

pub mod extract;
pub mod home;
pub mod key_use;
pub mod limits;
pub mod metrics;
pub mod openapi;
pub mod operator;
pub mod pipeline;
pub mod prefer;
pub mod problem;
pub mod render;
pub mod request_id;
pub mod respond;
pub mod routes;
pub mod state;
pub mod trace_spans;

pub use metrics::Metrics;
pub use render::HttpRender;
pub use state::AppState;

use problem::{Problem, ProblemCode};

/// Every route of the API, each from a handler with its `#[utoipa::path]`:
/// the router and the OpenAPI document ([`openapi::document`]) are built
/// from the same list, so no route is served without being documented. Add
/// routes here with `routes!`, never with a plain `.route()` (a test reads
/// this file for that).
pub fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(routes::payments::list, routes::payments::create))
        .routes(routes!(routes::payments::get))
        .routes(routes!(routes::history::get))
        .routes(routes!(
            routes::refunds::of_payment,
            routes::refunds::create
        ))
        .routes(routes!(routes::cancel::create))
        .routes(routes!(
            routes::captures::of_payment,
            routes::captures::create
        ))
        .routes(routes!(routes::captures::get))
        .routes(routes!(routes::void::create))
        .routes(routes!(routes::refunds::list))
        .routes(routes!(routes::refunds::get))
        .routes(routes!(routes::keys::get))
        .routes(routes!(routes::events::list))
        .routes(routes!(routes::events::get))
        .routes(routes!(routes::events::resend))
        .routes(routes!(routes::api_keys::list, routes::api_keys::create))
        .routes(routes!(routes::api_keys::get))
        .routes(routes!(routes::api_keys::roll))
        .routes(routes!(routes::api_keys::revoke))
        .routes(routes!(
            routes::webhook_endpoints::list,
            routes::webhook_endpoints::create
        ))
        .routes(routes!(
            routes::webhook_endpoints::get,
            routes::webhook_endpoints::update,
            routes::webhook_endpoints::delete
        ))
        .routes(routes!(routes::webhook_endpoints::roll_secret))
        .routes(routes!(routes::webhooks::acquirer))
        .routes(routes!(routes::health::healthz))
        .routes(routes!(routes::health::readyz))
}

/// The public listener's router: the v1 API ([`api_routes`]), its OpenAPI
/// document at [`openapi::SPEC_PATH`] and its reference page at
/// [`openapi::DOCS_PATH`], health checks, a landing page at `/`
/// ([`home`]), and problem+json for unknown routes. The operator's side
/// (the console, `/metrics`) is not here: it is [`operator_router`]'s, on a
/// listener of its own.
pub fn router(state: AppState) -> Router {
    let (api, mut spec) = api_routes().split_for_parts();
    openapi::finish(&mut spec);
    let public = api
        .merge(openapi::spec_router(openapi::to_json(&spec)))
        .merge(openapi::docs_router())
        .merge(home::router());
    with_layers(public, state, "api")
}

/// The operator listener's router ([`operator`]): `/metrics`, the health
/// checks, and `extra` (the console, the embedded simulator's `/sim`
/// routes), inside the same layers as the API.
pub fn operator_router(state: AppState, extra: Router<AppState>) -> Router {
    let routes = operator::routes().merge(extra);
    with_layers(routes, state, "operator")
}

/// The layers every listener's answers pass: the request limits, panics
/// answered as problems, problem+json for every error the HTTP stack makes
/// on its own, the count of answers by status class (`listener` names it),
/// the trace span, and the request id (outermost).
fn with_layers(routes: Router<AppState>, state: AppState, listener: &'static str) -> Router {
    let responses = state.metrics.responses(listener);
    routes
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
        .layer(axum::middleware::map_response(
            move |response: axum::response::Response| {
                responses.count(response.status().as_u16());
                std::future::ready(response)
            },
        ))
        .layer(match listener {
            "operator" => TraceLayer::new_for_http()
                .make_span_with(request_id::make_operator_span as SpanMaker)
                .on_response(request_id::record_response as ResponseRecorder),
            _ => TraceLayer::new_for_http()
                .make_span_with(request_id::make_span as SpanMaker)
                .on_response(request_id::record_response as ResponseRecorder),
        })
        // Outermost: every answer above carries the request's id (and the
        // span above records it); see `request_id`.
        .layer(axum::middleware::from_fn(request_id::middleware))
}

/// How a listener's requests get their span (see [`request_id`]).
type SpanMaker = fn(&axum::http::Request<axum::body::Body>) -> tracing::Span;

/// How an answer is recorded on its request's span.
type ResponseRecorder =
    fn(&axum::http::Response<axum::body::Body>, std::time::Duration, &tracing::Span);

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
