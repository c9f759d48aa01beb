//! The repeat warning: a key repeated unusually often points at client
//! timeouts or double submits, so it is logged and reported, at the
//! threshold ([`EngineConfig::repeat_warning`](super::EngineConfig::repeat_warning))
//! and at every doubling after it, so a hot key does not flood the log.
//!
//! The one place that decides it. Repeats reach it from two sides: the
//! engine, for the repeats the store counts (its `replays` column), and the
//! HTTP layer's response cache, for the repeats it answers from memory,
//! which the store never sees. Each side counts its own repeats; the rule
//! and the report are the same.

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
