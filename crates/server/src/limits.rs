//! Limits on requests: how long one may take, how fast its body must
//! arrive, how many requests a shop may send, and how many may wait.
//!
//! - [`RequestLimits`]: the request body must arrive within
//!   [`RequestLimits::body_timeout`] of the head (else `408 body_timeout`,
//!   the connection closed), and the whole request is answered within
//!   [`RequestLimits::request_timeout`], plus N seconds for `Prefer: wait=N`
//!   (else `503 request_timeout` with `Retry-After`). Cutting a handler never
//!   cuts a payment: engine operations run in tasks of their own
//!   ([`crate::AppState::engine_tasks`]), which finish and store their answer
//!   for the retry.
//! - [`ShopRateLimiter`]: requests per second per authenticated shop (GCRA,
//!   [`governor`]), checked right after the shop's credentials; over it,
//!   `429 rate_limited` with `Retry-After`.
//! - [`Waiters`]: how many `Prefer: wait` requests may wait on this
//!   instance, in all and per shop; a request over a cap does not wait and
//!   gets the plain `409 request_in_progress`.
//!
//! Every refusal is counted in `chargeonce_refusals_total{reason}` (429s
//! where they are decided, by their reason: `rate_limited`, `auth_failures`,
//! `unseen_lookups`, `console_logins`).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, HttpBody as _};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chargeonce_core::ShopId;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http_body_util::BodyExt;
use tower_http::timeout::{DeadlineBody, TimeoutError};

use crate::AppState;
use crate::problem::{Problem, ProblemCode};

/// Default of [`RequestLimits::request_timeout`].
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Default of [`RequestLimits::body_timeout`].
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client is told to wait after a request timeout.
const TIMEOUT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Time limits of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// The longest a request may take to be answered, not counting the wait
    /// a `Prefer: wait=N` asks for (zero: no limit).
    pub request_timeout: Duration,
    /// The longest the request body may take to arrive, from the end of the
    /// head (zero: no limit).
    pub body_timeout: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        Self {
            request_timeout: REQUEST_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
        }
    }
}

/// The middleware of [`RequestLimits`], and the counter of refusals (it sees
/// every answer; a refusal's code is in its extensions).
pub async fn middleware(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limits = state.request_limits;
    let wait = crate::prefer::wait_preference(request.headers()).unwrap_or_default();
    let body_timed_out = Arc::new(AtomicBool::new(false));
    // A request without a body (most reads) needs no deadline: no timer.
    let request = if limits.body_timeout.is_zero() || request.body().is_end_stream() {
        request
    } else {
        let flag = body_timed_out.clone();
        request.map(|body| {
            Body::new(
                DeadlineBody::new(limits.body_timeout, body).map_err(move |error| {
                    if error.is::<TimeoutError>() {
                        flag.store(true, Ordering::Relaxed);
                    }
                    error
                }),
            )
        })
    };
    let response = if limits.request_timeout.is_zero() {
        next.run(request).await
    } else {
        let limit = limits.request_timeout + wait;
        match tokio::time::timeout(limit, next.run(request)).await {
            Ok(response) => response,
            Err(_) => {
                tracing::warn!(limit_ms = limit.as_millis() as u64, "request timed out");
                Problem::new(
                    ProblemCode::RequestTimeout,
                    format!(
                        "no answer within {} s; an operation it started goes on. \
                         Retry with the same key to get its answer",
                        limit.as_secs_f64()
                    ),
                )
                .retry_after(TIMEOUT_RETRY_AFTER)
                .into_response()
            }
        }
    };
    // The body extractor saw a read error; the deadline was its cause.
    let response = if body_timed_out.load(Ordering::Relaxed) {
        Problem::new(
            ProblemCode::BodyTimeout,
            format!(
                "the body did not arrive within {} s; nothing was executed",
                limits.body_timeout.as_secs_f64()
            ),
        )
        .into_response()
    } else {
        response
    };
    if let Some(code) = response.extensions().get::<ProblemCode>() {
        match code {
            // 429s are counted where they are decided, each by its reason
            // (a shop's rate, a client's failure budget, the unseen ceiling).
            ProblemCode::BodyTimeout
            | ProblemCode::RequestTimeout
            | ProblemCode::StoreOverloaded => state.metrics.refused(code.as_str()),
            _ => {}
        }
    }
    response
}

/// Default of [`RateLimit::per_second`].
pub const RATE_LIMIT: u32 = 1000;

/// Default of [`RateLimit::burst`].
pub const RATE_LIMIT_BURST: u32 = 2000;

/// A shop's request rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests per second a shop may send, sustained (zero: no limit).
    pub per_second: u32,
    /// Requests a shop may send at once after a quiet spell (at least 1).
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            per_second: RATE_LIMIT,
            burst: RATE_LIMIT_BURST,
        }
    }
}

impl RateLimit {
    /// No limit.
    pub const OFF: Self = Self {
        per_second: 0,
        burst: 0,
    };
}

/// How many checks pass between two sweeps of shops that are back at a full
/// bucket (they are forgotten: the map holds only recently busy shops).
const SWEEP_EVERY: u64 = 16_384;

/// Per-shop request rate limits.
pub struct ShopRateLimiter {
    limiter: Option<DefaultKeyedRateLimiter<ShopId>>,
    checks: AtomicU64,
}

impl std::fmt::Debug for ShopRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShopRateLimiter")
            .field("on", &self.limiter.is_some())
            .field("shops", &self.shops())
            .finish()
    }
}

impl ShopRateLimiter {
    /// A limiter for `limit` (off when its rate is zero).
    pub fn new(limit: RateLimit) -> Self {
        let limiter = NonZeroU32::new(limit.per_second).map(|rate| {
            let burst = NonZeroU32::new(limit.burst.max(1)).unwrap_or(NonZeroU32::MIN);
            RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
        });
        Self {
            limiter,
            checks: AtomicU64::new(0),
        }
    }

    /// Counts one request of `shop`; `Err` with how long until it would be
    /// allowed when the shop is over its limit.
    pub fn check(&self, shop: &ShopId) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
        limiter
            .check_key(shop)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// How many shops the limiter remembers now.
    pub fn shops(&self) -> usize {
        self.limiter.as_ref().map_or(0, |l| l.len())
    }
}

impl Default for ShopRateLimiter {
    fn default() -> Self {
        Self::new(RateLimit::default())
    }
}

/// The answer to a shop over its rate limit, `Retry-After` in whole
/// seconds rounded up.
pub fn rate_limited(wait: Duration) -> Problem {
    Problem::new(
        ProblemCode::RateLimited,
        "this shop sent more requests than its rate limit allows; nothing was executed. \
         Retry after Retry-After",
    )
    .retry_after(Duration::from_secs(retry_after_seconds(wait)))
}

/// A limiter's wait as `Retry-After` wants it: whole seconds, rounded up,
/// at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// Default of [`WaiterCaps::instance`].
pub const MAX_WAITERS: usize = 1000;

/// Default of [`WaiterCaps::shop`].
pub const MAX_WAITERS_PER_SHOP: usize = 100;

/// How many `Prefer: wait` requests may wait at once on this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaiterCaps {
    /// In all (zero: none waits).
    pub instance: usize,
    /// Per shop (zero: none waits).
    pub shop: usize,
}

impl Default for WaiterCaps {
    fn default() -> Self {
        Self {
            instance: MAX_WAITERS,
            shop: MAX_WAITERS_PER_SHOP,
        }
    }
}

/// Which cap refused a waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitRefused {
    /// The instance's.
    Instance,
    /// The shop's.
    Shop,
}

impl WaitRefused {
    /// The `reason` label of the refusal metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Instance => "waiters_instance",
            Self::Shop => "waiters_shop",
        }
    }
}

#[derive(Debug, Default)]
struct Waiting {
    all: usize,
    /// Only shops with a waiter: at most `all` entries.
    shops: HashMap<ShopId, usize>,
}

/// The requests waiting (`Prefer: wait`) on this instance.
#[derive(Debug)]
pub struct Waiters {
    caps: WaiterCaps,
    waiting: Mutex<Waiting>,
}

impl Waiters {
    /// No waiter yet, within `caps`.
    pub fn new(caps: WaiterCaps) -> Self {
        Self {
            caps,
            waiting: Mutex::new(Waiting::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A waiting slot for a request of `shop`, held until dropped, or which
    /// cap is full.
    pub fn enter(self: &Arc<Self>, shop: &ShopId) -> Result<WaiterSlot, WaitRefused> {
        let mut waiting = self.lock();
        if waiting.all >= self.caps.instance {
            return Err(WaitRefused::Instance);
        }
        let of_shop = waiting.shops.get(shop).copied().unwrap_or(0);
        if of_shop >= self.caps.shop {
            return Err(WaitRefused::Shop);
        }
        waiting.all += 1;
        waiting.shops.insert(shop.clone(), of_shop + 1);
        Ok(WaiterSlot {
            waiters: self.clone(),
            shop: shop.clone(),
        })
    }

    /// Requests waiting now, in all.
    pub fn len(&self) -> usize {
        self.lock().all
    }

    /// Whether no request waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Requests of `shop` waiting now.
    pub fn of_shop(&self, shop: &ShopId) -> usize {
        self.lock().shops.get(shop).copied().unwrap_or(0)
    }
}

impl Default for Waiters {
    fn default() -> Self {
        Self::new(WaiterCaps::default())
    }
}

/// A waiting request's place; dropping it (the wait ended, or the client
/// hung up and the handler was dropped) frees it.
#[derive(Debug)]
pub struct WaiterSlot {
    waiters: Arc<Waiters>,
    shop: ShopId,
}

impl Drop for WaiterSlot {
    fn drop(&mut self) {
        let mut waiting = self.waiters.lock();
        waiting.all = waiting.all.saturating_sub(1);
        if let Some(n) = waiting.shops.get_mut(&self.shop) {
            *n -= 1;
            if *n == 0 {
                waiting.shops.remove(&self.shop);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shop(s: &str) -> ShopId {
        ShopId::new(s).unwrap()
    }

    #[test]
    fn waiters_are_capped_per_shop_and_in_all() {
        let waiters = Arc::new(Waiters::new(WaiterCaps {
            instance: 3,
            shop: 2,
        }));
        let a1 = waiters.enter(&shop("a")).unwrap();
        let _a2 = waiters.enter(&shop("a")).unwrap();
        assert_eq!(waiters.enter(&shop("a")).unwrap_err(), WaitRefused::Shop);
        let _b1 = waiters.enter(&shop("b")).unwrap();
        assert_eq!(
            waiters.enter(&shop("c")).unwrap_err(),
            WaitRefused::Instance
        );
        drop(a1);
        assert_eq!(waiters.of_shop(&shop("a")), 1);
        let _c1 = waiters.enter(&shop("c")).unwrap();
        assert_eq!(waiters.len(), 3);
    }

    #[test]
    fn slots_are_freed_and_shops_forgotten() {
        let waiters = Arc::new(Waiters::default());
        let slots: Vec<_> = (0..10)
            .map(|_| waiters.enter(&shop("a")).unwrap())
            .collect();
        assert_eq!(waiters.of_shop(&shop("a")), 10);
        drop(slots);
        assert!(waiters.is_empty());
        assert!(waiters.lock().shops.is_empty());
    }

    #[test]
    fn the_rate_limit_is_per_shop() {
        let limiter = ShopRateLimiter::new(RateLimit {
            per_second: 1,
            burst: 3,
        });
        for _ in 0..3 {
            limiter.check(&shop("a")).unwrap();
        }
        let wait = limiter.check(&shop("a")).unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        limiter.check(&shop("b")).unwrap();
        assert_eq!(limiter.shops(), 2);
    }

    #[test]
    fn zero_turns_the_rate_limit_off() {
        let limiter = ShopRateLimiter::new(RateLimit::OFF);
        for _ in 0..10_000 {
            limiter.check(&shop("a")).unwrap();
        }
        assert_eq!(limiter.shops(), 0);
    }

    #[test]
    fn retry_after_is_rounded_up_to_whole_seconds() {
        let header = |wait| {
            rate_limited(wait)
                .into_response()
                .headers()
                .get("retry-after")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(header(Duration::from_millis(1)), "1");
        assert_eq!(header(Duration::from_millis(1500)), "2");
        assert_eq!(header(Duration::from_secs(3)), "3");
    }
}
