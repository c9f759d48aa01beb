//! Limits on the work a request costs before its shop is known: an
//! unauthenticated flood (random shop ids, guessed secrets) must not reach
//! the store faster than the store can take it, and must not slow real
//! shops down.
//!
//! - **Unknown shop ids are remembered** ([`AuthLimits::is_known_unknown`]):
//!   a shop id the store did not know is answered 401 without a store read
//!   for [`UNKNOWN_SHOP_TTL`] (a shop added meanwhile works after at most
//!   that), in a bounded set.
//! - **Failed authentications are budgeted per client address**
//!   ([`AuthLimitSettings::failures_per_minute`], an IPv4 address or an IPv6
//!   /64): past the budget, a request from that address is answered
//!   `429 rate_limited` with `Retry-After` before its credentials cost a
//!   store read. Credentials of a shop this instance has in its cache are
//!   still checked (a hash comparison, no I/O), so a real shop behind the
//!   same NAT address as a guesser keeps working.
//! - **Store look-ups of shop ids never seen** have a global ceiling
//!   ([`AuthLimitSettings::unseen_lookups_per_second`]): past it, `429
//!   rate_limited` too. A shop this instance knows never counts against it:
//!   `chargeonce serve` loads every shop id at start ([`AuthLimits::know`],
//!   up to [`KNOWN_SHOPS_KEPT`]), and a look-up that finds a shop adds it.
//!   So after a restart a flood cannot delay a real shop's first request.

use std::collections::{HashMap, HashSet};
use std::num::NonZeroU32;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use chargeonce_core::ShopId;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::conn::ClientKey;
use crate::problem::{Problem, ProblemCode};

/// How long a shop id the store did not know is answered without a look-up.
pub const UNKNOWN_SHOP_TTL: Duration = Duration::from_secs(5);

/// The most unknown shop ids remembered (then the set starts again).
const UNKNOWN_SHOPS_KEPT: usize = 10_000;

/// The most shop ids remembered as known (past it, new ones are not added:
/// they count against the unseen ceiling until cached).
pub const KNOWN_SHOPS_KEPT: usize = 200_000;

/// The most client addresses tracked before the stale ones are dropped.
const CLIENTS_KEPT: usize = 10_000;

/// Default of [`AuthLimitSettings::failures_per_minute`].
pub const AUTH_FAILURES_PER_MINUTE: u32 = 60;

/// Default of [`AuthLimitSettings::unseen_lookups_per_second`].
pub const UNSEEN_LOOKUPS_PER_SECOND: u32 = 200;

/// The limits' settings (`serve --auth-failures-per-client`,
/// `--unseen-shop-lookups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthLimitSettings {
    /// Failed authentications one client address may cause a minute (and
    /// at once after a quiet minute); zero: no limit.
    pub failures_per_minute: u32,
    /// Store look-ups of shop ids this instance has not seen, per second
    /// (and at once); zero: no limit.
    pub unseen_lookups_per_second: u32,
}

impl Default for AuthLimitSettings {
    fn default() -> Self {
        Self {
            failures_per_minute: AUTH_FAILURES_PER_MINUTE,
            unseen_lookups_per_second: UNSEEN_LOOKUPS_PER_SECOND,
        }
    }
}

/// The limits on unauthenticated work of one instance.
pub struct AuthLimits {
    failures: Option<DefaultKeyedRateLimiter<ClientKey>>,
    /// Clients past their failure budget, until when.
    blocked: Mutex<HashMap<ClientKey, Instant>>,
    unseen: Option<DefaultDirectRateLimiter>,
    unknown: Mutex<HashMap<ShopId, Instant>>,
    known: RwLock<HashSet<ShopId>>,
}

impl std::fmt::Debug for AuthLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthLimits")
            .field("failures", &self.failures.is_some())
            .field("unseen", &self.unseen.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for AuthLimits {
    fn default() -> Self {
        Self::new(AuthLimitSettings::default())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AuthLimits {
    /// Limits as `settings` say.
    pub fn new(settings: AuthLimitSettings) -> Self {
        let failures = NonZeroU32::new(settings.failures_per_minute)
            .map(|n| RateLimiter::keyed(Quota::per_minute(n).allow_burst(n)));
        let unseen = NonZeroU32::new(settings.unseen_lookups_per_second)
            .map(|n| RateLimiter::direct(Quota::per_second(n).allow_burst(n)));
        Self {
            failures,
            blocked: Mutex::new(HashMap::new()),
            unseen,
            unknown: Mutex::new(HashMap::new()),
            known: RwLock::new(HashSet::new()),
        }
    }

    /// How long `client` must wait, when it is past its failure budget.
    pub fn blocked(&self, client: ClientKey) -> Option<Duration> {
        let mut blocked = lock(&self.blocked);
        let until = *blocked.get(&client)?;
        let now = Instant::now();
        if until <= now {
            blocked.remove(&client);
            return None;
        }
        Some(until - now)
    }

    /// Counts a failed authentication of `client`; past its budget, the
    /// client is blocked and the wait is returned.
    pub fn failed(&self, client: ClientKey) -> Option<Duration> {
        let limiter = self.failures.as_ref()?;
        if limiter.len() > CLIENTS_KEPT {
            limiter.retain_recent();
        }
        let wait = limiter
            .check_key(&client)
            .err()
            .map(|not_until| not_until.wait_time_from(DefaultClock::default().now()))?;
        let mut blocked = lock(&self.blocked);
        if blocked.len() > CLIENTS_KEPT {
            let now = Instant::now();
            blocked.retain(|_, until| *until > now);
        }
        blocked.insert(client, Instant::now() + wait);
        Some(wait)
    }

    /// Whether the store said `shop` is unknown a moment ago.
    pub fn is_known_unknown(&self, shop: &ShopId) -> bool {
        lock(&self.unknown)
            .get(shop)
            .is_some_and(|at| at.elapsed() < UNKNOWN_SHOP_TTL)
    }

    /// Remembers that the store does not know `shop`.
    pub fn remember_unknown(&self, shop: ShopId) {
        let mut unknown = lock(&self.unknown);
        if unknown.len() >= UNKNOWN_SHOPS_KEPT {
            unknown.retain(|_, at| at.elapsed() < UNKNOWN_SHOP_TTL);
            if unknown.len() >= UNKNOWN_SHOPS_KEPT {
                unknown.clear();
            }
        }
        unknown.insert(shop, Instant::now());
    }

    /// Remembers shops as known (the store has them): their look-ups never
    /// count against the unseen ceiling. Bounded by [`KNOWN_SHOPS_KEPT`].
    pub fn know(&self, shops: impl IntoIterator<Item = ShopId>) {
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        for shop in shops {
            if known.len() >= KNOWN_SHOPS_KEPT {
                break;
            }
            known.insert(shop);
        }
    }

    /// Whether `shop` is known to exist.
    pub fn is_known(&self, shop: &ShopId) -> bool {
        self.known
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(shop)
    }

    /// Takes one look-up of a shop id never seen; `Err` with the wait past
    /// the ceiling.
    pub fn unseen_lookup(&self) -> Result<(), Duration> {
        let Some(limiter) = &self.unseen else {
            return Ok(());
        };
        limiter
            .check()
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

/// The answer to a client past its failure budget, or to a look-up past
/// the ceiling: nothing was executed.
pub fn too_many_failures(wait: Duration) -> Problem {
    Problem::new(
        ProblemCode::RateLimited,
        "too many failed authentications from this address, or too many look-ups of \
         unknown shops; nothing was executed. Check the credentials, then retry after \
         Retry-After",
    )
    .retry_after(Duration::from_secs(crate::limits::retry_after_seconds(
        wait,
    )))
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    #[test]
    fn a_client_past_its_budget_is_blocked_and_others_are_not() {
        let limits = AuthLimits::new(AuthLimitSettings {
            failures_per_minute: 3,
            unseen_lookups_per_second: 0,
        });
        let one = ClientKey::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        let two = ClientKey::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        for _ in 0..3 {
            assert_eq!(limits.failed(one), None);
        }
        assert_eq!(limits.blocked(one), None);
        assert!(
            limits.failed(one).is_some(),
            "the fourth is past the budget"
        );
        assert!(limits.blocked(one).is_some());
        assert_eq!(limits.blocked(two), None);
        assert_eq!(limits.failed(two), None);
        assert!(limits.unseen_lookup().is_ok(), "no ceiling when zero");
    }

    #[test]
    fn unknown_shops_are_remembered() {
        let limits = AuthLimits::default();
        let shop = ShopId::new("nobody").unwrap();
        assert!(!limits.is_known_unknown(&shop));
        limits.remember_unknown(shop.clone());
        assert!(limits.is_known_unknown(&shop));
    }

    #[test]
    fn the_ceiling_refuses_past_its_burst() {
        let limits = AuthLimits::new(AuthLimitSettings {
            failures_per_minute: 0,
            unseen_lookups_per_second: 2,
        });
        assert!(limits.unseen_lookup().is_ok());
        assert!(limits.unseen_lookup().is_ok());
        assert!(limits.unseen_lookup().is_err());
    }
}
