//! In-process caches that spare the store work it would answer the same way.
//!
//! - [`AuthCache`]: each shop's stored secret hash, for a short time
//!   ([`AUTH_CACHE_TTL`] by default). The presented secret is still hashed and
//!   compared with it in constant time on every request; only the store read
//!   is saved. A shop whose secret was rotated or that was removed keeps
//!   working with its old secret on an instance for at most the TTL.
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

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chargeonce_core::{Fingerprint, IdempotencyKey, Outcome, SecretHash, ShopId, StoredResponse};
use tokio::sync::watch;

/// How long a shop's secret hash is trusted without reading the store again.
pub const AUTH_CACHE_TTL: Duration = Duration::from_secs(30);

/// Most shops the auth cache holds (past it, the cache starts over).
const AUTH_CACHE_SHOPS: usize = 10_000;

/// How long a duplicate waits for the in-flight first request of its key on
/// this instance before it answers 409 `request_in_progress` itself.
pub const FLIGHT_WAIT: Duration = Duration::from_millis(50);

/// Most flights running at once on an instance. Each is a request in flight
/// (so they are also bounded by the connection cap); past it, new requests
/// go to the engine alone instead of starting a flight.
pub const MAX_FLIGHTS: usize = 10_000;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps stay consistent at every step, so a panic elsewhere does not
    // make them unusable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

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

type CacheKey = (ShopId, IdempotencyKey);

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

/// The answer a flight's first request got, for the requests that joined it.
/// `None` while it runs, and for good when it ended without an outcome.
type Landing = Option<Option<Outcome>>;

#[derive(Debug)]
struct Flight {
    fingerprint: Fingerprint,
    id: u64,
    landed: watch::Receiver<Landing>,
}

/// Requests in flight on this instance, per (shop, key).
#[derive(Debug, Default)]
pub struct Flights {
    flights: Mutex<(u64, HashMap<CacheKey, Flight>)>,
}

/// What a request is in a flight.
#[derive(Debug)]
pub enum Seat {
    /// The first: it runs the engine and lands the flight with its outcome.
    Leader(FlightLeader),
    /// A duplicate of a running identical request: wait for its outcome.
    Follower(FlightFollower),
    /// A request for the same key with another fingerprint is running: go
    /// to the engine alone.
    Alone,
}

/// The running first request of a flight. Dropping it without
/// [`land`](Self::land)ing (its client hung up, an error) lets the followers
/// go to the engine themselves.
#[derive(Debug)]
pub struct FlightLeader {
    flights: Arc<Flights>,
    key: CacheKey,
    id: u64,
    landed: watch::Sender<Landing>,
}

impl FlightLeader {
    /// Gives the outcome to the followers and ends the flight.
    pub fn land(self, outcome: Option<Outcome>) {
        let _ = self.landed.send(Some(outcome));
    }
}

impl Drop for FlightLeader {
    fn drop(&mut self) {
        let _ = self.landed.send_if_modified(|landed| {
            if landed.is_none() {
                *landed = Some(None);
                true
            } else {
                false
            }
        });
        let mut flights = lock(&self.flights.flights);
        if flights.1.get(&self.key).is_some_and(|f| f.id == self.id) {
            flights.1.remove(&self.key);
        }
    }
}

/// A duplicate waiting for the first request's outcome.
#[derive(Debug)]
pub struct FlightFollower {
    landed: watch::Receiver<Landing>,
}

/// How a follower's wait ended.
#[derive(Debug)]
pub enum Arrival {
    /// The first request's outcome.
    Outcome(Box<Outcome>),
    /// The first request is still running after the wait.
    StillRunning,
    /// The first request ended without an outcome: run the engine yourself.
    Alone,
}

impl FlightFollower {
    /// Waits up to `wait` for the first request's outcome.
    pub async fn arrive(mut self, wait: Duration) -> Arrival {
        let landed =
            tokio::time::timeout(wait, self.landed.wait_for(|landed| landed.is_some())).await;
        match landed {
            Err(_) => Arrival::StillRunning,
            Ok(Err(_)) => Arrival::Alone,
            Ok(Ok(landed)) => match landed.clone() {
                Some(Some(outcome)) => Arrival::Outcome(Box::new(outcome)),
                _ => Arrival::Alone,
            },
        }
    }
}

impl Flights {
    /// Joins the flight of (shop, key), or starts one.
    pub fn join(
        self: &Arc<Self>,
        shop: &ShopId,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> Seat {
        let cache_key = (shop.clone(), key.clone());
        let mut flights = lock(&self.flights);
        if let Some(flight) = flights.1.get(&cache_key)
            && flight.landed.borrow().is_none()
        {
            return if flight.fingerprint == fingerprint {
                Seat::Follower(FlightFollower {
                    landed: flight.landed.clone(),
                })
            } else {
                Seat::Alone
            };
        }
        if flights.1.len() >= MAX_FLIGHTS {
            // Bounded: past the cap, requests simply go to the engine alone.
            return Seat::Alone;
        }
        flights.0 += 1;
        let id = flights.0;
        let (sender, receiver) = watch::channel(None);
        flights.1.insert(
            cache_key.clone(),
            Flight {
                fingerprint,
                id,
                landed: receiver,
            },
        );
        Seat::Leader(FlightLeader {
            flights: self.clone(),
            key: cache_key,
            id,
            landed: sender,
        })
    }

    /// How many flights are running.
    pub fn len(&self) -> usize {
        lock(&self.flights).1.len()
    }

    /// Whether no flight is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shop(s: &str) -> ShopId {
        ShopId::new(s).unwrap()
    }

    fn key(s: &str) -> IdempotencyKey {
        IdempotencyKey::new(s).unwrap()
    }

    fn fp(n: u8) -> Fingerprint {
        Fingerprint::from_bytes(&[n; 32]).unwrap()
    }

    fn response(body: &str) -> StoredResponse {
        StoredResponse {
            status: 201,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

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

    #[tokio::test]
    async fn flights_share_one_outcome_per_shop_key_and_fingerprint() {
        let flights = Arc::new(Flights::default());
        let Seat::Leader(leader) = flights.join(&shop("a"), &key("k"), fp(1)) else {
            panic!("first is the leader")
        };
        let Seat::Follower(follower) = flights.join(&shop("a"), &key("k"), fp(1)) else {
            panic!("same request follows")
        };
        assert!(matches!(
            flights.join(&shop("a"), &key("k"), fp(2)),
            Seat::Alone
        ));
        let Seat::Leader(other_shop) = flights.join(&shop("b"), &key("k"), fp(1)) else {
            panic!("another shop has its own flight")
        };
        drop(other_shop);
        leader.land(Some(Outcome::Executed(response("A"))));
        let Arrival::Outcome(outcome) = follower.arrive(Duration::from_secs(5)).await else {
            panic!("the leader's outcome")
        };
        let Outcome::Executed(got) = *outcome else {
            panic!("an execution")
        };
        assert_eq!(got.body, b"A");
        assert!(flights.is_empty());
    }

    #[tokio::test]
    async fn a_dropped_leader_sends_followers_alone() {
        let flights = Arc::new(Flights::default());
        let Seat::Leader(leader) = flights.join(&shop("a"), &key("k"), fp(1)) else {
            panic!("leader")
        };
        let Seat::Follower(follower) = flights.join(&shop("a"), &key("k"), fp(1)) else {
            panic!("follower")
        };
        drop(leader);
        assert!(matches!(
            follower.arrive(Duration::from_secs(5)).await,
            Arrival::Alone
        ));
        assert!(matches!(
            flights.join(&shop("a"), &key("k"), fp(1)),
            Seat::Leader(_)
        ));
    }
}
