//! # chargeonce-server
//!
//! The HTTP face of chargeonce, on axum: shop authentication, the
//! `Idempotency-Key` header, bounded JSON bodies, `application/problem+json`
//! errors with stable codes, and byte-identical replays. The idempotency
//! itself is [`chargeonce_core::Engine`]'s; this crate only translates. The
//! background workers that run beside it are in `chargeonce-workers`.
//!
//! ```no_run
//! # async fn demo(engine: std::sync::Arc<chargeonce_core::Engine>) -> std::io::Result<()> {
//! let app = chargeonce_server::router(chargeonce_server::AppState::new(engine));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! chargeonce_server::serve(listener, app, std::future::pending()).await
//! # }
//! ```

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{Engine, Store};
use tokio_util::task::TaskTracker;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

pub mod bench_ceiling;
pub mod cache;
pub mod conn;
pub mod extract;
pub mod limits;
pub mod metrics;
pub mod prefer;
pub mod problem;
pub mod render;
pub mod respond;
pub mod routes;

pub use metrics::Metrics;
pub use render::HttpRender;

use problem::{Problem, ProblemCode};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    engine: Arc<Engine>,
    store: Arc<dyn Store>,
    operations: TaskTracker,
    metrics: Arc<Metrics>,
    webhook_secret: Option<Arc<WebhookSecret>>,
    auth_cache: Arc<cache::AuthCache>,
    responses: Arc<cache::ResponseCache>,
    flights: Arc<cache::Flights>,
    flight_wait: std::time::Duration,
    request_limits: limits::RequestLimits,
    rate_limiter: Arc<limits::ShopRateLimiter>,
    waiters: Arc<limits::Waiters>,
}

impl AppState {
    /// State around an engine (its store serves the reads).
    pub fn new(engine: Arc<Engine>) -> Self {
        let store = engine.store().clone();
        Self {
            engine,
            store,
            operations: TaskTracker::new(),
            metrics: Arc::new(Metrics::new()),
            webhook_secret: None,
            auth_cache: Arc::new(cache::AuthCache::default()),
            responses: Arc::new(cache::ResponseCache::default()),
            flights: Arc::new(cache::Flights::default()),
            flight_wait: cache::FLIGHT_WAIT,
            request_limits: limits::RequestLimits::default(),
            rate_limiter: Arc::new(limits::ShopRateLimiter::default()),
            waiters: Arc::new(limits::Waiters::default()),
        }
    }

    /// The time limits of a request (default [`limits::RequestLimits::default`]).
    pub fn with_request_limits(mut self, request_limits: limits::RequestLimits) -> Self {
        self.request_limits = request_limits;
        self
    }

    /// Each shop's request rate limit (default [`limits::RateLimit::default`];
    /// [`limits::RateLimit::OFF`] turns it off).
    pub fn with_rate_limit(mut self, limit: limits::RateLimit) -> Self {
        self.rate_limiter = Arc::new(limits::ShopRateLimiter::new(limit));
        self
    }

    /// How many `Prefer: wait` requests may wait on this instance, in all and
    /// per shop (default [`limits::WaiterCaps::default`]).
    pub fn with_waiter_caps(mut self, caps: limits::WaiterCaps) -> Self {
        self.waiters = Arc::new(limits::Waiters::new(caps));
        self
    }

    /// The requests waiting (`Prefer: wait`) on this instance.
    pub fn waiters(&self) -> &limits::Waiters {
        &self.waiters
    }

    /// Trusts a shop's secret hash read from the store for `ttl` (default
    /// [`cache::AUTH_CACHE_TTL`]; zero reads it on every request).
    pub fn with_auth_cache_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.auth_cache = Arc::new(cache::AuthCache::new(ttl));
        self
    }

    /// Limits of the cache of completed responses (zero entries turns it off).
    pub fn with_response_cache(mut self, limits: cache::ResponseCacheLimits) -> Self {
        self.responses = Arc::new(cache::ResponseCache::new(limits));
        self
    }

    /// How long a duplicate of a request running on this instance waits for
    /// its outcome before answering 409 (default [`cache::FLIGHT_WAIT`]); zero
    /// turns the sharing off: every duplicate goes to the engine.
    pub fn with_flight_wait(mut self, wait: std::time::Duration) -> Self {
        self.flight_wait = wait;
        self
    }

    /// The cache of completed responses executed on this instance.
    pub fn response_cache(&self) -> &cache::ResponseCache {
        &self.responses
    }

    /// Serves these metrics at `/metrics` (give the engine the same object as
    /// its observer, so they count what it does).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Accepts acquirer webhooks signed with this secret; without one,
    /// `POST /v1/webhooks/acquirer` answers 503.
    pub fn with_webhook_secret(mut self, secret: WebhookSecret) -> Self {
        self.webhook_secret = Some(Arc::new(secret));
        self
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The webhook secret, if webhooks are on.
    pub fn webhook_secret(&self) -> Option<&WebhookSecret> {
        self.webhook_secret.as_deref()
    }

    /// The engine operations started by requests. They outlive their request
    /// (a client that hangs up does not cut them); on shutdown, `close()` it and
    /// `wait()` for them, so no payment is left half-way by a clean stop.
    pub fn operations(&self) -> &TaskTracker {
        &self.operations
    }
}

/// The v1 API, health checks, and problem+json for unknown routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/v1/payments",
            get(routes::payments::list).post(routes::payments::create),
        )
        .route("/v1/payments/{id}", get(routes::payments::get))
        .route("/v1/payments/{id}/refunds", post(routes::refunds::create))
        .route("/v1/refunds/{id}", get(routes::refunds::get))
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
                ProblemCode::Internal,
                "internal error",
            ))
        }))
        // Every error the HTTP stack makes on its own is a problem too.
        .layer(axum::middleware::map_response(problem::problems_only))
        .layer(TraceLayer::new_for_http())
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
