//! [`AuthCache`]: each shop's stored secret hash, for a short time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chargeonce_core::{SecretHash, ShopId};

use super::lock;

/// How long a shop's secret hash is trusted without reading the store again.
pub const AUTH_CACHE_TTL: Duration = Duration::from_secs(30);

/// Most shops the auth cache holds (past it, the cache starts over).
const AUTH_CACHE_SHOPS: usize = 10_000;

/// Shops' secret hashes read from the store, for a short time.
#[derive(Debug)]
pub struct AuthCache {
    ttl: Duration,
    shops: Mutex<HashMap<ShopId, (SecretHash, Instant)>>,
}

impl AuthCache {
    /// A cache keeping each hash `ttl`; a zero `ttl` turns it off.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            shops: Mutex::new(HashMap::new()),
        }
    }

    /// The shop's cached hash, unless absent or older than the TTL.
    pub fn get(&self, shop: &ShopId) -> Option<SecretHash> {
        if self.ttl.is_zero() {
            return None;
        }
        let shops = lock(&self.shops);
        let (hash, stored_at) = shops.get(shop)?;
        (stored_at.elapsed() < self.ttl).then(|| hash.clone())
    }

    /// Remembers a hash just read from the store.
    pub fn insert(&self, shop: ShopId, hash: SecretHash) {
        if self.ttl.is_zero() {
            return;
        }
        let mut shops = lock(&self.shops);
        if shops.len() >= AUTH_CACHE_SHOPS {
            let ttl = self.ttl;
            shops.retain(|_, (_, stored_at)| stored_at.elapsed() < ttl);
            if shops.len() >= AUTH_CACHE_SHOPS {
                shops.clear();
            }
        }
        shops.insert(shop, (hash, Instant::now()));
    }
}

impl Default for AuthCache {
    fn default() -> Self {
        Self::new(AUTH_CACHE_TTL)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cache::fixtures::*;

    #[test]
    fn auth_cache_expires_and_can_be_off() {
        let hash = chargeonce_core::ShopSecret::from_string("s").hash();
        let cache = AuthCache::new(Duration::from_secs(30));
        cache.insert(shop("a"), hash.clone());
        assert_eq!(cache.get(&shop("a")), Some(hash.clone()));
        assert_eq!(cache.get(&shop("b")), None);
        let off = AuthCache::new(Duration::ZERO);
        off.insert(shop("a"), hash);
        assert_eq!(off.get(&shop("a")), None);
    }
}
