//! In-process caches that spare the store work it would answer the same way.
//!
//! - [`AuthCache`]: each shop's API keys, for a short time ([`AUTH_CACHE_TTL`]
//!   by default). The presented secret is still hashed and compared with
//!   every key's hash in constant time on every request; only the store read
//!   is saved. A revoked key, or a rolled one past its new expiry, keeps
//!   working on an instance for at most the TTL; a secret that matches no
//!   cached key has them read again (at most ten times a second per shop), so
//!   a new key works at once.
//! - [`ResponseCache`]: the final responses this instance executed, per
//!   (shop, key), with their fingerprint. A finished key's response never
//!   changes until the key expires, so a repeat with the same fingerprint is
//!   answered from memory, byte for byte, and a repeat with another one gets
//!   the 422 it would get from the store. Entries end before their key's
//!   expiry and are bounded in count and bytes (oldest out first). Only final
//!   responses enter it, never a pending or in-progress state.
//! - [`Flights`]: concurrent identical requests (same shop, key and
//!   fingerprint) on one instance share one trip through the engine: the first
//!   runs it, the others wait a short while for its answer (see
//!   [`Flights::join`]). The store still decides between instances.
//!
//! A shop never sees another shop's entries: every cache is keyed by the shop.

mod auth;
mod flights;
mod responses;

use std::sync::{Mutex, MutexGuard, PoisonError};

use chargeonce_core::{IdempotencyKey, ShopId};

pub use auth::{AUTH_CACHE_TTL, AuthCache, REREAD_AFTER_MISS, ShopKeys};
pub use flights::{Arrival, FLIGHT_WAIT, FlightFollower, FlightLeader, Flights, MAX_FLIGHTS, Seat};
pub use responses::{CacheHit, CachedAnswer, ResponseCache, ResponseCacheLimits};

/// What the response cache and the flights are keyed by: the shop first,
/// so shops never meet.
type CacheKey = (ShopId, IdempotencyKey);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps stay consistent at every step, so a panic elsewhere does not
    // make them unusable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the caches' tests share.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod fixtures {
    use std::time::{Duration, Instant};

    use chargeonce_core::{Fingerprint, IdempotencyKey, ShopId, StoredResponse};

    pub(super) fn shop(s: &str) -> ShopId {
        ShopId::new(s).unwrap()
    }

    pub(super) fn key(s: &str) -> IdempotencyKey {
        IdempotencyKey::new(s).unwrap()
    }

    pub(super) fn fp(n: u8) -> Fingerprint {
        Fingerprint::from_bytes(&[n; 32]).unwrap()
    }

    pub(super) fn response(body: &str) -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    pub(super) fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }
}
