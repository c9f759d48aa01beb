//! [`AuthCache`]: each shop's API keys as the store last returned them, for
//! a short time; and which keys were used since their use was last written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chargeonce_core::ShopId;
use chargeonce_core::api_key::{ApiKeyId, KeyCredential};

use super::lock;

/// How long a shop's keys are trusted without reading the store again: also
/// the longest a revoked key, or a rolled key past its new expiry, keeps
/// working on an instance that read it before (docs/api.md, "API keys"). A
/// key made with an expiry is refused at it: its expiry travels with it.
pub const AUTH_CACHE_TTL: Duration = Duration::from_secs(30);

/// How old cached keys must be for a secret that matches none of them to
/// make the instance read them again (a key made or rolled since): at most
/// ten reads a second per shop, however many wrong secrets arrive (and each
/// client's wrong secrets count against its failure budget).
pub const REREAD_AFTER_MISS: Duration = Duration::from_millis(100);

/// Most shops the auth cache holds (past it, the cache starts over).
const AUTH_CACHE_SHOPS: usize = 10_000;

/// One shop's keys, and when the read that found them began.
pub type ShopKeys = (Arc<[KeyCredential]>, Instant);

/// The cache's maps.
#[derive(Debug, Default)]
struct Entries {
    /// Each shop's keys and when their read began.
    keys: HashMap<ShopId, ShopKeys>,
    /// When this instance changed a shop's keys itself ([`AuthCache::forget`]):
    /// a read that began before is not cached (it may hold a key revoked
    /// since). Entries older than the TTL are dropped: such a read is
    /// stale anyway.
    fences: HashMap<ShopId, Instant>,
}

/// Shops' keys read from the store, for a short time.
#[derive(Debug)]
pub struct AuthCache {
    ttl: Duration,
    /// The cached keys and the fences, under one lock: a fence set by
    /// [`Self::forget`] and an [`Self::insert`] of an older read cannot
    /// interleave.
    shops: Mutex<Entries>,
    /// The keys used since the last write of their use (ids are unique
    /// across shops), with their shops.
    used: Mutex<HashMap<ApiKeyId, ShopId>>,
}

impl AuthCache {
    /// A cache keeping each shop's keys `ttl`; a zero `ttl` turns it off.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            shops: Mutex::new(Entries::default()),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// The shop's cached keys and when their read began, unless absent or
    /// older than the TTL.
    pub fn get(&self, shop: &ShopId) -> Option<ShopKeys> {
        if self.ttl.is_zero() {
            return None;
        }
        let shops = lock(&self.shops);
        let (keys, read_at) = shops.keys.get(shop)?;
        (read_at.elapsed() < self.ttl).then(|| (keys.clone(), *read_at))
    }

    /// Remembers a shop's keys read from the store by a read that began at
    /// `read_at`; an entry of a read that began later stays (a slow read
    /// must not bring back a key revoked since).
    pub fn insert(&self, shop: ShopId, keys: Arc<[KeyCredential]>, read_at: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = lock(&self.shops);
        if entries
            .fences
            .get(&shop)
            .is_some_and(|fence| read_at < *fence)
        {
            return;
        }
        let shops = &mut entries.keys;
        if shops.len() >= AUTH_CACHE_SHOPS {
            let ttl = self.ttl;
            shops.retain(|_, (_, stored_at)| stored_at.elapsed() < ttl);
            if shops.len() >= AUTH_CACHE_SHOPS {
                shops.clear();
            }
        }
        match shops.get(&shop) {
            Some((_, newer)) if *newer > read_at => {}
            _ => {
                shops.insert(shop, (keys, read_at));
            }
        }
    }

    /// Drops the shop's cached keys after this instance changed them (a
    /// revocation, a roll through the API): its next request reads them
    /// again, so the change holds here at once (other instances within the
    /// TTL). A read that began before now is not cached afterwards.
    pub fn forget(&self, shop: &ShopId) {
        let mut entries = lock(&self.shops);
        let ttl = self.ttl;
        entries.fences.retain(|_, at| at.elapsed() < ttl);
        entries.fences.insert(shop.clone(), Instant::now());
        entries.keys.remove(shop);
    }

    /// Notes that `key` of `shop` authenticated a request, for the next
    /// [`Self::take_uses`]; in memory only, so a request writes nothing.
    pub fn note_use(&self, shop: &ShopId, key: &ApiKeyId) {
        let mut used = lock(&self.used);
        // Allocates only for a key's first use since the last write.
        if used.len() < AUTH_CACHE_SHOPS && !used.contains_key(key) {
            used.insert(key.clone(), shop.clone());
        }
    }

    /// The keys used since the last call, each once.
    pub fn take_uses(&self) -> Vec<(ShopId, ApiKeyId)> {
        lock(&self.used)
            .drain()
            .map(|(key, shop)| (shop, key))
            .collect()
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
    use chargeonce_core::api_key::{ApiKeySecret, Mode, NewApiKey, Scope};

    fn keys() -> Arc<[KeyCredential]> {
        let secret = ApiKeySecret::generate(Mode::Live);
        let new = NewApiKey::of(shop("a"), Mode::Live, Scope::Full, &secret);
        let key = chargeonce_core::api_key::ApiKey {
            id: new.id,
            shop_id: new.shop_id,
            mode: new.mode,
            scope: new.scope,
            prefix: Some(new.prefix),
            description: None,
            created_at: time::OffsetDateTime::now_utc(),
            expires_at: None,
            revoked_at: None,
            last_used_at: None,
        };
        Arc::from(vec![KeyCredential {
            key,
            hash: new.hash,
        }])
    }

    #[test]
    fn a_read_begun_before_a_forget_is_not_cached() {
        let cache = AuthCache::new(Duration::from_secs(30));
        let before = Instant::now();
        cache.insert(shop("a"), keys(), before);
        cache.forget(&shop("a"));
        assert_eq!(cache.get(&shop("a")), None, "forgotten");
        // A read that began before the forget (a revoked key in it) comes
        // back late: it is not cached.
        cache.insert(shop("a"), keys(), before);
        assert_eq!(cache.get(&shop("a")), None, "fenced");
        let after = Instant::now();
        let fresh = keys();
        cache.insert(shop("a"), fresh.clone(), after);
        assert_eq!(cache.get(&shop("a")), Some((fresh, after)));
    }

    #[test]
    fn auth_cache_expires_and_can_be_off() {
        let cache = AuthCache::new(Duration::from_secs(30));
        let keys = keys();
        let read_at = Instant::now();
        cache.insert(shop("a"), keys.clone(), read_at);
        assert_eq!(cache.get(&shop("a")), Some((keys.clone(), read_at)));
        assert_eq!(cache.get(&shop("b")), None);
        let off = AuthCache::new(Duration::ZERO);
        off.insert(shop("a"), keys.clone(), read_at);
        assert_eq!(off.get(&shop("a")), None);
        // A read that began earlier does not replace a later one's keys.
        let stale: Arc<[KeyCredential]> = Arc::from(Vec::new());
        cache.insert(shop("a"), stale, read_at - Duration::from_millis(5));
        assert_eq!(cache.get(&shop("a")), Some((keys, read_at)));
    }

    #[test]
    fn a_keys_uses_are_taken_once() {
        let cache = AuthCache::default();
        let id = ApiKeyId::generate();
        cache.note_use(&shop("a"), &id);
        cache.note_use(&shop("a"), &id);
        assert_eq!(cache.take_uses(), vec![(shop("a"), id)]);
        assert!(cache.take_uses().is_empty());
    }
}
