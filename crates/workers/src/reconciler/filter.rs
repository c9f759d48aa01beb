//! A fixed-size memory of order references: which orders had a succeeded
//! charge in the part of the window already compared.
//!
//! A Bloom filter: [`Bloom::may_contain`] never answers `false` for a
//! reference that was inserted, and answers `true` for one that was not with
//! a small probability (about 1 in 10 000 with half a million orders in a
//! 2 MiB filter). The reconciler only uses a `true` to decide to look the
//! order up at the acquirer, so a false positive costs one look-up and never
//! a finding; a false negative, which would lose a duplicate, cannot happen.
//! Its size never changes, however many orders the window holds.

use std::hash::{DefaultHasher, Hash, Hasher};

use time::OffsetDateTime;

/// Bits in one filter: 2^24, 2 MiB.
const BITS_LOG2: u32 = 24;

/// Bits set per reference.
const HASHES: u32 = 4;

/// One Bloom filter of `(shop, reference)` pairs. Takes no memory until the
/// first insert, then 2 MiB.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bloom {
    words: Vec<u64>,
}

impl Bloom {
    /// The bits of one reference: double hashing of one 64-bit SipHash.
    fn positions(shop: &str, reference: &str) -> impl Iterator<Item = usize> {
        let mut hasher = DefaultHasher::new();
        shop.hash(&mut hasher);
        reference.hash(&mut hasher);
        let hash = hasher.finish();
        let first = (hash & 0xffff_ffff) as u32;
        let step = ((hash >> 32) as u32) | 1;
        let mask = (1u32 << BITS_LOG2) - 1;
        (0..HASHES).map(move |i| (first.wrapping_add(step.wrapping_mul(i)) & mask) as usize)
    }

    /// Remembers a reference.
    pub(crate) fn insert(&mut self, shop: &str, reference: &str) {
        if self.words.is_empty() {
            self.words = vec![0; 1 << (BITS_LOG2 - 6)];
        }
        for bit in Self::positions(shop, reference) {
            if let Some(word) = self.words.get_mut(bit >> 6) {
                *word |= 1 << (bit & 63);
            }
        }
    }

    /// `false`: certainly never inserted. `true`: probably inserted.
    pub(crate) fn may_contain(&self, shop: &str, reference: &str) -> bool {
        !self.words.is_empty()
            && Self::positions(shop, reference).all(|bit| {
                self.words
                    .get(bit >> 6)
                    .is_some_and(|word| word & (1 << (bit & 63)) != 0)
            })
    }
}

/// Two [`Bloom`] generations that roll with time, so references older than
/// the window drop out and the false-positive rate stays where it was
/// sized, without ever deleting one reference.
///
/// A reference inserted at time `i` stays in the filter until at least
/// `i + period`: the current generation becomes the previous one when it is
/// `period` old, and the previous one is dropped then. With `period` at least
/// the window plus twice the clock slack, every order charged in the window
/// is still remembered.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReferenceFilter {
    current: Bloom,
    previous: Bloom,
    current_since: Option<OffsetDateTime>,
}

impl ReferenceFilter {
    /// Starts a new generation if the current one is `period` old.
    pub(crate) fn roll(&mut self, now: OffsetDateTime, period: time::Duration) {
        match self.current_since {
            Some(since) if now - since < period => {}
            Some(_) => {
                self.previous = std::mem::take(&mut self.current);
                self.current_since = Some(now);
            }
            None => self.current_since = Some(now),
        }
    }

    /// Forgets everything (a full pass rebuilds it).
    pub(crate) fn clear(&mut self, now: OffsetDateTime) {
        *self = Self {
            current_since: Some(now),
            ..Self::default()
        };
    }

    /// Remembers a reference.
    pub(crate) fn insert(&mut self, shop: &str, reference: &str) {
        self.current.insert(shop, reference);
    }

    /// `false`: certainly not inserted in either live generation.
    pub(crate) fn may_contain(&self, shop: &str, reference: &str) -> bool {
        self.current.may_contain(shop, reference) || self.previous.may_contain(shop, reference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inserted_reference_is_always_found() {
        let mut bloom = Bloom::default();
        assert!(!bloom.may_contain("shop", "order-1"), "empty");
        for i in 0..10_000 {
            bloom.insert("shop", &format!("order-{i}"));
        }
        for i in 0..10_000 {
            assert!(bloom.may_contain("shop", &format!("order-{i}")));
        }
        let false_positives = (10_000..110_000)
            .filter(|i| bloom.may_contain("shop", &format!("order-{i}")))
            .count();
        assert!(false_positives < 10, "{false_positives} in 100 000");
        assert_eq!(bloom.words.len() * 8, 2 << 20, "2 MiB, fixed");
    }

    #[test]
    fn the_shop_and_the_reference_do_not_run_together() {
        let mut bloom = Bloom::default();
        bloom.insert("ab", "c");
        assert!(bloom.may_contain("ab", "c"));
        // One reference sets 4 of 16 million bits: another key matching all
        // four by chance is out of the question, unless the key's parts
        // were simply concatenated.
        assert!(!bloom.may_contain("a", "bc"));
        assert!(!bloom.may_contain("abc", ""));
    }

    #[test]
    fn generations_keep_a_reference_for_at_least_one_period() {
        let t0 = OffsetDateTime::UNIX_EPOCH;
        let period = time::Duration::hours(1);
        let mut filter = ReferenceFilter::default();
        filter.roll(t0, period);
        filter.insert("shop", "old");
        filter.roll(t0 + time::Duration::minutes(59), period);
        filter.insert("shop", "newer");
        filter.roll(t0 + time::Duration::minutes(61), period);
        assert!(filter.may_contain("shop", "old"), "kept one period");
        assert!(filter.may_contain("shop", "newer"));
        filter.roll(t0 + time::Duration::minutes(122), period);
        assert!(!filter.may_contain("shop", "old"), "dropped after two");
        assert!(!filter.may_contain("shop", "newer"));
        filter.insert("shop", "x");
        filter.clear(t0);
        assert!(!filter.may_contain("shop", "x"));
    }
}
