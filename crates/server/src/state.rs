//! [`AppState`]: what every handler shares (the engine, the store for reads,
//! the caches, the limits, the metrics), and its settings.

use std::sync::Arc;

use chargeonce_core::endpoint::UrlCheck;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{Engine, Store, StoreError};
use tokio_util::task::TaskTracker;

use crate::{Metrics, cache, limits};

/// What every handler shares. Cloning it is one reference count: axum
/// clones the state for every request (its router, each `from_fn_with_state`
/// layer and every `State` extractor), so a state of a dozen `Arc`s cost a
/// dozen atomic increments and decrements per clone, about a tenth of a
/// replay's CPU (`perf record` of the server during `bench replay`).
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

/// What an [`AppState`] holds, once for all its clones (reached through
/// `Deref`; its fields are this crate's).
#[derive(Clone)]
pub struct Shared {
    pub(crate) engine: Arc<Engine>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) engine_tasks: TaskTracker,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) webhook_secret: Option<Arc<WebhookSecret>>,
    pub(crate) auth_cache: Arc<cache::AuthCache>,
    pub(crate) auth_limits: Arc<crate::auth_limits::AuthLimits>,
    pub(crate) responses: Arc<cache::ResponseCache>,
    pub(crate) flights: Arc<cache::Flights>,
    pub(crate) flight_wait: std::time::Duration,
    pub(crate) request_limits: limits::RequestLimits,
    pub(crate) rate_limiter: Arc<limits::ShopRateLimiter>,
    pub(crate) waiters: Arc<limits::Waiters>,
    /// Where the operator listener is, for the landing page (`None`: off).
    pub(crate) operator_listen: Option<std::net::SocketAddr>,
    /// Proxies whose `X-Forwarded-For` names the client ([`crate::client_addr`]).
    pub(crate) trusted_proxies: Arc<[ipnet::IpNet]>,
    /// The judge of webhook endpoint URLs a shop registers; without one,
    /// every URL is refused.
    pub(crate) url_check: Option<Arc<dyn UrlCheck>>,
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

impl AppState {
    /// State around an engine (its store serves the reads).
    pub fn new(engine: Arc<Engine>) -> Self {
        let store = engine.store().clone();
        let shared = Shared {
            engine,
            store,
            engine_tasks: TaskTracker::new(),
            metrics: Arc::new(Metrics::new()),
            webhook_secret: None,
            auth_cache: Arc::new(cache::AuthCache::default()),
            auth_limits: Arc::new(crate::auth_limits::AuthLimits::default()),
            responses: Arc::new(cache::ResponseCache::default()),
            flights: Arc::new(cache::Flights::default()),
            flight_wait: cache::FLIGHT_WAIT,
            request_limits: limits::RequestLimits::default(),
            rate_limiter: Arc::new(limits::ShopRateLimiter::default()),
            waiters: Arc::new(limits::Waiters::default()),
            operator_listen: None,
            trusted_proxies: Arc::from(Vec::new()),
            url_check: None,
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// The shared part, to change while the state is being built: copied
    /// first if a clone of this state already shares it (so a clone never
    /// sees a later `with_*` call).
    fn shared_mut(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.shared)
    }

    /// The metrics, shared (for a task that holds them weakly).
    pub fn shared_metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The store behind the reads (the engine's).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The engine behind the routes.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The proxies whose `X-Forwarded-For` names the client
    /// ([`crate::client_addr`]).
    pub fn trusted_proxies(&self) -> &[ipnet::IpNet] {
        &self.trusted_proxies
    }

    /// This instance's limits on work before a shop is authenticated (to
    /// tell them the shops that exist, [`crate::auth_limits::AuthLimits::know`]).
    pub fn auth_limits(&self) -> &crate::auth_limits::AuthLimits {
        &self.auth_limits
    }

    /// The limits on work before a shop is authenticated
    /// ([`crate::auth_limits`]).
    pub fn with_auth_limits(mut self, settings: crate::auth_limits::AuthLimitSettings) -> Self {
        self.shared_mut().auth_limits = Arc::new(crate::auth_limits::AuthLimits::new(settings));
        self
    }

    /// The proxies (load balancers) whose `X-Forwarded-For` names the
    /// client for the per-address limits ([`crate::client_addr`]).
    pub fn with_trusted_proxies(mut self, proxies: Vec<ipnet::IpNet>) -> Self {
        self.shared_mut().trusted_proxies = Arc::from(proxies);
        self
    }

    /// Where the operator listener is (the landing page names it when it is
    /// a loopback address).
    pub fn with_operator_listen(mut self, addr: Option<std::net::SocketAddr>) -> Self {
        self.shared_mut().operator_listen = addr;
        self
    }

    /// The time limits of a request (default [`limits::RequestLimits::default`]).
    pub fn with_request_limits(mut self, request_limits: limits::RequestLimits) -> Self {
        self.shared_mut().request_limits = request_limits;
        self
    }

    /// Each shop's request rate limit (default [`limits::RateLimit::default`];
    /// [`limits::RateLimit::OFF`] turns it off).
    pub fn with_rate_limit(mut self, limit: limits::RateLimit) -> Self {
        self.shared_mut().rate_limiter = Arc::new(limits::ShopRateLimiter::new(limit));
        self
    }

    /// How many `Prefer: wait` requests may wait on this instance, in all and
    /// per shop (default [`limits::WaiterCaps::default`]).
    pub fn with_waiter_caps(mut self, caps: limits::WaiterCaps) -> Self {
        self.shared_mut().waiters = Arc::new(limits::Waiters::new(caps));
        self
    }

    /// The requests waiting (`Prefer: wait`) on this instance.
    pub fn waiters(&self) -> &limits::Waiters {
        &self.waiters
    }

    /// Trusts a shop's secret hash read from the store for `ttl` (default
    /// [`cache::AUTH_CACHE_TTL`]; zero reads it on every request).
    pub fn with_auth_cache_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.shared_mut().auth_cache = Arc::new(cache::AuthCache::new(ttl));
        self
    }

    /// Limits of the cache of completed responses (zero entries turns it off).
    pub fn with_response_cache(mut self, limits: cache::ResponseCacheLimits) -> Self {
        self.shared_mut().responses = Arc::new(cache::ResponseCache::new(limits));
        self
    }

    /// How long a duplicate of a request running on this instance waits for
    /// its outcome before answering 409 (default [`cache::FLIGHT_WAIT`]); zero
    /// turns the sharing off: every duplicate goes to the engine.
    pub fn with_flight_wait(mut self, wait: std::time::Duration) -> Self {
        self.shared_mut().flight_wait = wait;
        self
    }

    /// The cache of completed responses executed on this instance.
    pub fn response_cache(&self) -> &cache::ResponseCache {
        &self.responses
    }

    /// Serves these metrics at `/metrics` (give the engine the same object as
    /// its observer, so they count what it does).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.shared_mut().metrics = metrics;
        self
    }

    /// Judges the URLs of webhook endpoints shops register with `check`
    /// (the workers' egress guard, so that registration and delivery refuse
    /// the same addresses); without one, every URL is refused.
    pub fn with_url_check(mut self, check: Arc<dyn UrlCheck>) -> Self {
        self.shared_mut().url_check = Some(check);
        self
    }

    /// Accepts acquirer webhooks signed with this secret; without one,
    /// `POST /v1/webhooks/acquirer` answers 503.
    pub fn with_webhook_secret(mut self, secret: WebhookSecret) -> Self {
        self.shared_mut().webhook_secret = Some(Arc::new(secret));
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

    /// The engine commands started by requests. They outlive their request
    /// (a client that hangs up does not cut them); on shutdown, `close()` it and
    /// `wait()` for them, so no payment is left half-way by a clean stop.
    pub fn engine_tasks(&self) -> &TaskTracker {
        &self.engine_tasks
    }

    /// Runs a store write that a handler would otherwise run inline in a
    /// task of its own ([`AppState::engine_tasks`]), so a client that hangs
    /// up cannot cut it halfway. A PostgreSQL transaction cut after its
    /// `COMMIT` was sent is committed, yet sqlx, not knowing it, sends a
    /// `ROLLBACK` after it, which PostgreSQL answers with "there is no
    /// transaction in progress" (the warnings of issue 39, from acquirer
    /// webhooks hung up on); cut before, it is rolled back, and the work is
    /// lost for a reason that is not the client's.
    pub async fn detached<T: Send + 'static>(
        &self,
        write: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.engine_tasks.spawn(write).await.unwrap_or_else(|e| {
            Err(StoreError::other(format!(
                "the store write's task failed: {e}"
            )))
        })
    }
}
