//! [`ResponseCache`]: the final responses this instance executed, per
//! (shop, key), with their fingerprint.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chargeonce_core::{Fingerprint, IdempotencyKey, ShopId, StoredResponse};

use super::{CacheKey, lock};

/// The limits of a [`ResponseCache`].
#[derive(Debug, Clone, Copy)]
pub struct ResponseCacheLimits {
    /// Most responses held (zero turns the cache off).
    pub entries: usize,
    /// Most bytes of keys, headers and bodies held.
    pub bytes: usize,
    /// The longest an entry is kept, whatever its key's retention.
    pub max_age: Duration,
}

impl Default for ResponseCacheLimits {
    fn default() -> Self {
        Self {
            entries: 50_000,
            bytes: 16 * 1024 * 1024,
            max_age: Duration::from_secs(3600),
        }
    }
}

/// What a cached key says about a request.
#[derive(Debug, Clone)]
pub enum CachedAnswer {
    /// Same fingerprint: the stored first response, to replay.
    Replay(StoredResponse),
    /// The key was first used for another request: 422, as from the store.
    Mismatch,
}

/// A cached key's answer, and how many repeats of the key it has answered
/// (this one included), for the repeat warning.
#[derive(Debug, Clone)]
pub struct CacheHit {
    /// The answer.
    pub answer: CachedAnswer,
    /// Repeats answered from the cache so far.
    pub repeats: u64,
}

#[derive(Debug)]
struct CachedResponse {
    fingerprint: Fingerprint,
    response: StoredResponse,
    until: Instant,
    bytes: usize,
    /// Requests answered from this entry (the store does not see them).
    repeats: u64,
}

#[derive(Debug, Default)]
struct ResponseEntries {
    map: HashMap<CacheKey, CachedResponse>,
    /// Insertion order, for eviction (may name keys already gone).
    order: VecDeque<CacheKey>,
    bytes: usize,
}

impl ResponseEntries {
    fn remove(&mut self, key: &CacheKey) {
        if let Some(old) = self.map.remove(key) {
            self.bytes -= old.bytes;
        }
    }
}

/// Final responses executed on this instance, per (shop, key).
#[derive(Debug)]
pub struct ResponseCache {
    limits: ResponseCacheLimits,
    entries: Mutex<ResponseEntries>,
}

impl ResponseCache {
    /// An empty cache within these limits.
    pub fn new(limits: ResponseCacheLimits) -> Self {
        Self {
            limits,
            entries: Mutex::new(ResponseEntries::default()),
        }
    }

    /// How many responses are held.
    pub fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }

    /// Whether no response is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answer for a request with this key, if the key is cached; counts
    /// the request as a repeat of the key.
    pub fn get(
        &self,
        shop: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
    ) -> Option<CacheHit> {
        if self.limits.entries == 0 {
            return None;
        }
        let mut entries = lock(&self.entries);
        let cache_key = (shop.clone(), key.clone());
        let entry = entries.map.get_mut(&cache_key)?;
        if entry.until <= Instant::now() {
            entries.remove(&cache_key);
            return None;
        }
        entry.repeats += 1;
        let answer = if entry.fingerprint == *fingerprint {
            CachedAnswer::Replay(entry.response.clone())
        } else {
            CachedAnswer::Mismatch
        };
        Some(CacheHit {
            answer,
            repeats: entry.repeats,
        })
    }

    /// Counts one more repeat of a cached key answered without the store
    /// (a duplicate that shared the first request's outcome); `None` if the
    /// key is not cached.
    pub fn count_repeat(&self, shop: &ShopId, key: &IdempotencyKey) -> Option<u64> {
        let mut entries = lock(&self.entries);
        let entry = entries.map.get_mut(&(shop.clone(), key.clone()))?;
        entry.repeats += 1;
        Some(entry.repeats)
    }

    /// Remembers a final response until `until` (capped by the max age), the
    /// latest its key is certain to be kept.
    pub fn insert(
        &self,
        shop: &ShopId,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
        response: &StoredResponse,
        until: Instant,
    ) {
        let until = until.min(Instant::now() + self.limits.max_age);
        if self.limits.entries == 0 || until <= Instant::now() {
            return;
        }
        // What the entry holds, with a rough allowance for each heap
        // allocation and for the map and order slots, so the byte bound is
        // close to the memory really used.
        let allocations = 3 + 2 * response.headers.len();
        let bytes = std::mem::size_of::<CachedResponse>()
            + 3 * std::mem::size_of::<CacheKey>()
            + 32 * allocations
            + shop.as_str().len()
            + key.as_str().len()
            + response.body.len()
            + response
                .headers
                .iter()
                .map(|(n, v)| n.len() + v.len())
                .sum::<usize>();
        if bytes > self.limits.bytes {
            return;
        }
        let cache_key = (shop.clone(), key.clone());
        let mut entries = lock(&self.entries);
        entries.remove(&cache_key);
        while entries.map.len() >= self.limits.entries || entries.bytes + bytes > self.limits.bytes
        {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            entries.remove(&oldest);
        }
        entries.bytes += bytes;
        entries.map.insert(
            cache_key.clone(),
            CachedResponse {
                fingerprint,
                response: response.clone(),
                until,
                bytes,
                repeats: 0,
            },
        );
        entries.order.push_back(cache_key);
        // Keys re-inserted or expired leave stale names in the order; drop
        // them once they outnumber the live entries.
        if entries.order.len() > 2 * entries.map.len() + 64 {
            let ResponseEntries { map, order, .. } = &mut *entries;
            order.retain(|k| map.contains_key(k));
        }
    }
}

impl Default for ResponseCache {
    fn default() -> Self {
        Self::new(ResponseCacheLimits::default())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cache::fixtures::*;

    #[test]
    fn response_cache_keeps_shops_apart_and_checks_the_fingerprint() {
        let cache = ResponseCache::default();
        cache.insert(&shop("a"), &key("k"), fp(1), &response("A"), later());
        cache.insert(&shop("b"), &key("k"), fp(1), &response("B"), later());
        let Some(CacheHit {
            answer: CachedAnswer::Replay(a),
            repeats: 1,
        }) = cache.get(&shop("a"), &key("k"), &fp(1))
        else {
            panic!("a's entry")
        };
        assert_eq!(a.body, b"A");
        let Some(CacheHit {
            answer: CachedAnswer::Replay(b),
            ..
        }) = cache.get(&shop("b"), &key("k"), &fp(1))
        else {
            panic!("b's entry")
        };
        assert_eq!(b.body, b"B");
        assert!(matches!(
            cache.get(&shop("a"), &key("k"), &fp(2)),
            Some(CacheHit {
                answer: CachedAnswer::Mismatch,
                repeats: 2
            })
        ));
        assert_eq!(cache.count_repeat(&shop("a"), &key("k")), Some(3));
        assert!(cache.get(&shop("c"), &key("k"), &fp(1)).is_none());
    }

    #[test]
    fn response_cache_drops_expired_and_oldest_entries() {
        let cache = ResponseCache::new(ResponseCacheLimits {
            entries: 2,
            ..ResponseCacheLimits::default()
        });
        cache.insert(
            &shop("a"),
            &key("gone"),
            fp(1),
            &response("x"),
            Instant::now(),
        );
        assert!(cache.get(&shop("a"), &key("gone"), &fp(1)).is_none());
        for k in ["1", "2", "3"] {
            cache.insert(&shop("a"), &key(k), fp(1), &response(k), later());
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&shop("a"), &key("1"), &fp(1)).is_none());
        assert!(cache.get(&shop("a"), &key("3"), &fp(1)).is_some());

        let small = ResponseCache::new(ResponseCacheLimits {
            bytes: 10,
            ..ResponseCacheLimits::default()
        });
        small.insert(&shop("a"), &key("k"), fp(1), &response("x"), later());
        assert!(
            small.is_empty(),
            "an entry larger than the budget is not kept"
        );
    }
}
