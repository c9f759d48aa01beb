//! The repeats this instance answered itself, counted in memory until a
//! worker adds them to their keys' counts in the store
//! ([`History::add_repeats`](crate::store::History::add_repeats)).
//!
//! A repeat answered from the response cache, or from an identical request
//! in flight, never reaches the store, so the key row cannot count it in
//! the statement that reads it, as it does the others. Counting it here
//! costs a map update; the store gets one batched write per flush instead
//! of one per repeat, which is the point of answering from memory.
//!
//! The map is bounded ([`RepeatTallies::DEFAULT_CAP`] keys): a burst of
//! distinct keys between two flushes (or a store down for long) must not
//! grow memory without end. Beyond the cap, a repeat of a key not already
//! counted is dropped, and the number of repeats dropped is kept
//! ([`RepeatTallies::dropped`]) so the loss is visible. Counts are lost too
//! if the instance dies before a flush: they are statistics, not money.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Mutex, PoisonError};

use time::OffsetDateTime;

use crate::history::{RepeatKind, RepeatTally};
use crate::{IdempotencyKey, ShopId};

/// What one tally counts: a key of a shop, and how its repeats were answered.
type TallyKey = (ShopId, IdempotencyKey, RepeatKind);

/// The repeats this instance answered itself since the last flush, by key
/// and kind: how many, and when the last.
#[derive(Debug)]
pub struct RepeatTallies {
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    counts: HashMap<TallyKey, (u64, OffsetDateTime)>,
    dropped: u64,
}

impl Default for RepeatTallies {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAP)
    }
}

impl RepeatTallies {
    /// The most keys counted at once by default.
    pub const DEFAULT_CAP: usize = 100_000;

    /// Counts at most `cap` keys (by kind) at once.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Counting cannot leave the map half-updated: a panic elsewhere
        // while holding the lock leaves counts worth keeping.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one repeat of `key` answered as `kind` at `at`.
    pub fn count(&self, shop: &ShopId, key: &IdempotencyKey, kind: RepeatKind, at: OffsetDateTime) {
        self.add((shop.clone(), key.clone(), kind), 1, at);
    }

    /// Adds `count` repeats, the last at `at`, to one tally: to its count
    /// if it exists, as a new one if there is room, else to what is dropped.
    fn add(&self, tally: TallyKey, count: u64, at: OffsetDateTime) {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let full = inner.counts.len() >= self.cap;
        match inner.counts.entry(tally) {
            Entry::Occupied(mut entry) => {
                let (total, last_at) = entry.get_mut();
                *total = total.saturating_add(count);
                *last_at = (*last_at).max(at);
            }
            Entry::Vacant(_) if full => inner.dropped = inner.dropped.saturating_add(count),
            Entry::Vacant(entry) => {
                entry.insert((count, at));
            }
        }
    }

    /// Takes every tally counted so far, leaving none.
    pub fn take(&self) -> Vec<RepeatTally> {
        let counts = std::mem::take(&mut self.lock().counts);
        counts
            .into_iter()
            .map(|((shop_id, key, kind), (count, last_at))| RepeatTally {
                shop_id,
                key,
                kind,
                count,
                last_at,
            })
            .collect()
    }

    /// Puts back tallies that could not be written (the store failed),
    /// merged with those counted since: counts add up, the last time is the
    /// later one. Beyond the cap, what does not fit is dropped (and counted
    /// as dropped).
    pub fn put_back(&self, tallies: Vec<RepeatTally>) {
        for tally in tallies {
            self.add(
                (tally.shop_id, tally.key, tally.kind),
                tally.count,
                tally.last_at,
            );
        }
    }

    /// How many repeats were dropped since the start because the map was
    /// full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// How many keys (by kind) are counted now.
    pub fn len(&self) -> usize {
        self.lock().counts.len()
    }

    /// Whether nothing is counted now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shop() -> ShopId {
        ShopId::new("shop_a").unwrap()
    }

    fn key(name: &str) -> IdempotencyKey {
        IdempotencyKey::new(name).unwrap()
    }

    fn at(seconds: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000 + seconds).unwrap()
    }

    fn sorted(mut tallies: Vec<RepeatTally>) -> Vec<(String, RepeatKind, u64, OffsetDateTime)> {
        let mut out: Vec<_> = tallies
            .drain(..)
            .map(|t| (t.key.as_str().to_owned(), t.kind, t.count, t.last_at))
            .collect();
        out.sort_by_key(|(key, kind, ..)| (key.clone(), format!("{kind:?}")));
        out
    }

    #[test]
    fn repeats_are_counted_by_key_and_kind_with_the_last_time() {
        let tallies = RepeatTallies::default();
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(1));
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(3));
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(2));
        tallies.count(&shop(), &key("k1"), RepeatKind::Conflict, at(4));
        tallies.count(&shop(), &key("k2"), RepeatKind::Mismatch, at(5));
        assert_eq!(tallies.len(), 3);
        assert_eq!(
            sorted(tallies.take()),
            vec![
                ("k1".into(), RepeatKind::Conflict, 1, at(4)),
                ("k1".into(), RepeatKind::Replay, 3, at(3)),
                ("k2".into(), RepeatKind::Mismatch, 1, at(5)),
            ]
        );
        assert!(tallies.is_empty(), "taken: nothing left");
        assert!(tallies.take().is_empty());
    }

    #[test]
    fn the_same_key_of_another_shop_is_another_tally() {
        let tallies = RepeatTallies::default();
        let other = ShopId::new("shop_b").unwrap();
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(1));
        tallies.count(&other, &key("k1"), RepeatKind::Replay, at(1));
        let taken = tallies.take();
        assert_eq!(taken.len(), 2);
        assert!(taken.iter().all(|t| t.count == 1));
    }

    #[test]
    fn beyond_the_cap_new_keys_are_dropped_and_counted_known_ones_still_count() {
        let tallies = RepeatTallies::new(2);
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(1));
        tallies.count(&shop(), &key("k2"), RepeatKind::Replay, at(1));
        tallies.count(&shop(), &key("k3"), RepeatKind::Replay, at(2));
        tallies.count(&shop(), &key("k3"), RepeatKind::Replay, at(3));
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(4));
        assert_eq!(tallies.len(), 2);
        assert_eq!(tallies.dropped(), 2);
        assert_eq!(
            sorted(tallies.take()),
            vec![
                ("k1".into(), RepeatKind::Replay, 2, at(4)),
                ("k2".into(), RepeatKind::Replay, 1, at(1)),
            ]
        );
        // Taken: room again.
        tallies.count(&shop(), &key("k3"), RepeatKind::Replay, at(5));
        assert_eq!(tallies.len(), 1);
        assert_eq!(tallies.dropped(), 2);
    }

    #[test]
    fn tallies_put_back_merge_with_those_counted_since() {
        let tallies = RepeatTallies::new(2);
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(1));
        tallies.count(&shop(), &key("k2"), RepeatKind::Mismatch, at(2));
        let failed = tallies.take();
        // Counted while the write failed.
        tallies.count(&shop(), &key("k1"), RepeatKind::Replay, at(3));
        tallies.count(&shop(), &key("k3"), RepeatKind::Conflict, at(4));
        tallies.put_back(failed);
        assert_eq!(
            sorted(tallies.take()),
            vec![
                ("k1".into(), RepeatKind::Replay, 2, at(3)),
                ("k3".into(), RepeatKind::Conflict, 1, at(4)),
            ]
        );
        // k2's one repeat did not fit.
        assert_eq!(tallies.dropped(), 1);
    }
}
