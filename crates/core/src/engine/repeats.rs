//! The repeat warning: a key repeated unusually often points at client
//! timeouts or double submits, so it is logged and reported, at the
//! threshold ([`EngineConfig::repeat_warning`](super::EngineConfig::repeat_warning))
//! and at every doubling after it, so a hot key does not flood the log.
//!
//! The one place that decides it, and that reports repeats. They reach it
//! from two sides: the engine, for the repeats the store counts (its
//! `replays` column), and the HTTP layer's caches, for the repeats they
//! answer from memory, which the store never sees
//! ([`Engine::repeat_answered`], [`Engine::repeat_in_progress`]). Each side
//! counts its own repeats; the rule and the report are the same. The
//! caches' repeats are also tallied ([`super::tally`]) for a worker to add
//! to the keys' counts in the store ([`Engine::take_repeat_tallies`]), so a
//! key's introspection counts every repeat, wherever it was answered.

use time::OffsetDateTime;

use super::{Engine, Outcome};
use crate::history::{RepeatKind, RepeatTally};
use crate::observe::Observer;
use crate::{IdempotencyKey, ShopId};

/// Who counted the repeats of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatSource {
    /// The store (repeats that reached the engine).
    Store,
    /// A cache of this instance (repeats answered without the store).
    Cache,
}

/// When a key's repeats are worth a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepeatPolicy {
    threshold: u64,
}

impl RepeatPolicy {
    /// Warns at `threshold` repeats and at every doubling; zero never warns.
    pub fn new(threshold: u64) -> Self {
        Self { threshold }
    }

    /// Whether the `repeats`-th repeat of a key is warned about: the
    /// threshold, twice it, four times it, and so on.
    ///
    /// ```
    /// use chargeonce_core::engine::RepeatPolicy;
    ///
    /// let policy = RepeatPolicy::new(10);
    /// let warned: Vec<u64> = (1..=100).filter(|&n| policy.warns_at(n)).collect();
    /// assert_eq!(warned, [10, 20, 40, 80]);
    /// assert!(!RepeatPolicy::new(0).warns_at(10));
    /// ```
    pub fn warns_at(&self, repeats: u64) -> bool {
        let threshold = self.threshold;
        if threshold == 0 || repeats < threshold {
            return false;
        }
        repeats.is_multiple_of(threshold) && (repeats / threshold).is_power_of_two()
    }

    /// Logs and reports the `repeats`-th repeat of a key if the policy
    /// warns at it.
    pub fn note(
        &self,
        observer: &dyn Observer,
        shop: &ShopId,
        key: &IdempotencyKey,
        repeats: u64,
        source: RepeatSource,
    ) {
        if !self.warns_at(repeats) {
            return;
        }
        match source {
            RepeatSource::Store => tracing::warn!(
                shop = %shop,
                key = %key,
                repeats,
                "idempotency key repeated unusually often: client timeouts or double submits?"
            ),
            RepeatSource::Cache => tracing::warn!(
                shop = %shop,
                key = %key,
                repeats,
                "idempotency key repeated unusually often (answered from this instance's cache): \
                 client timeouts or double submits?"
            ),
        }
        observer.repeated_key(repeats);
    }
}

impl Engine {
    /// The outcome of a repeat answered without the store, from an outcome
    /// this instance already has (a response it cached, or the outcome of an
    /// identical request in flight): an execution is a replay to a repeat.
    /// Reported as the engine reports the repeats it answers itself (a
    /// replay, a mismatch), with the repeat warning at the `repeats`-th
    /// repeat the cache counted (`None`: the cache does not hold the key),
    /// and tallied for the store's counts.
    pub fn repeat_answered(
        &self,
        shop: &ShopId,
        key: &IdempotencyKey,
        repeats: Option<u64>,
        outcome: Outcome,
    ) -> Outcome {
        if let Some(repeats) = repeats {
            let observer = self.observer.as_ref();
            self.repeat_policy()
                .note(observer, shop, key, repeats, RepeatSource::Cache);
        }
        match outcome {
            Outcome::Executed(response) | Outcome::Replayed(response) => {
                self.observer.replayed();
                self.tally(shop, key, RepeatKind::Replay);
                Outcome::Replayed(response)
            }
            Outcome::Mismatch => {
                self.observer.mismatch();
                self.tally(shop, key, RepeatKind::Mismatch);
                Outcome::Mismatch
            }
            other => other,
        }
    }

    /// The outcome of a repeat that finds its key's first request still
    /// running on this instance: in progress, as the store would answer
    /// while the first holds the lease, reported as such and tallied for
    /// the store's counts.
    pub fn repeat_in_progress(&self, shop: &ShopId, key: &IdempotencyKey) -> Outcome {
        self.observer.in_progress();
        self.tally(shop, key, RepeatKind::Conflict);
        self.in_progress()
    }

    /// Takes the repeats this instance answered itself since the last call,
    /// to add to their keys' counts in the store
    /// ([`History::add_repeats`](crate::store::History::add_repeats)); put
    /// them back ([`RepeatTallies::put_back`](super::RepeatTallies::put_back))
    /// if that fails.
    pub fn take_repeat_tallies(&self) -> Vec<RepeatTally> {
        self.repeat_tallies().take()
    }

    /// Counts one repeat answered without the store, now.
    fn tally(&self, shop: &ShopId, key: &IdempotencyKey, kind: RepeatKind) {
        self.repeat_tallies()
            .count(shop, key, kind, OffsetDateTime::now_utc());
    }
}
