//! Which shops this instance has lately seen with webhook endpoints: a hint
//! for the choice of a request's settling statement (PostgreSQL only).
//!
//! Why: the statement that settles a payment writes its merchant event and,
//! in the same statement, one delivery per enabled endpoint of the shop
//! that wants it. PostgreSQL sets up every part of a statement each time it
//! runs it, whether the part writes or not, and the deliveries' part (an
//! insert fed by a join) was 5 % of a fresh payment's instructions
//! (`bench/pginstructions`) for the shops that have no endpoint, which
//! write no delivery at all. So the usual finish has two forms
//! (`super::finish`): one with the deliveries' part, and one without it
//! that settles only if the shop has no enabled endpoint at all (a
//! guard in its own snapshot, so no delivery is ever missed: where an
//! endpoint exists it writes nothing, and the statement with the
//! deliveries runs).
//!
//! The hint only says which form to try first. A shop is marked when a
//! guarded statement found an endpoint (or did not settle for another
//! reason) and when this instance adds or enables one; the mark lapses
//! after [`HINT_TTL`], so a shop that deleted its endpoints goes back to
//! the cheaper form, and a shop with endpoints pays one guarded statement
//! that writes nothing per [`HINT_TTL`] and instance. A wrong hint costs a
//! statement, never a delivery.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chargeonce_core::ShopId;

/// How long a shop seen with an endpoint is taken to still have one.
const HINT_TTL: Duration = Duration::from_secs(60);

/// The shops seen with endpoints, and when (see the module's docs).
#[derive(Debug, Default)]
pub(super) struct EndpointHints {
    seen: Mutex<Seen>,
}

/// The marks, and the size at which lapsed ones are next dropped.
#[derive(Debug, Default)]
struct Seen {
    at: HashMap<ShopId, Instant>,
    prune_at: usize,
}

/// The fewest marks kept before lapsed ones are dropped.
const PRUNE_FLOOR: usize = 64;

impl EndpointHints {
    /// The marks, locked. A panic while they were held cannot leave them
    /// half-written in a way that matters (a hint is only a hint), so a
    /// poisoned lock is taken as it is.
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `shop` was seen with an endpoint within [`HINT_TTL`].
    pub(super) fn has_endpoints(&self, shop: &ShopId) -> bool {
        self.seen()
            .at
            .get(shop)
            .is_some_and(|at| at.elapsed() < HINT_TTL)
    }

    /// Marks `shop` as seen with an endpoint now. Lapsed marks are dropped
    /// when the map has doubled since the last time (so each mark costs
    /// O(1) amortised), which keeps it within twice the shops seen within
    /// the last [`HINT_TTL`] or so.
    pub(super) fn mark(&self, shop: &ShopId) {
        let mut seen = self.seen();
        if seen.at.len() >= seen.prune_at.max(PRUNE_FLOOR) && !seen.at.contains_key(shop) {
            seen.at.retain(|_, at| at.elapsed() < HINT_TTL);
            seen.prune_at = 2 * seen.at.len();
        }
        seen.at.insert(shop.clone(), Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shop_is_unmarked_until_marked_and_each_shop_on_its_own() {
        let hints = EndpointHints::default();
        let (a, b) = (ShopId::new("a").unwrap(), ShopId::new("b").unwrap());
        assert!(!hints.has_endpoints(&a));
        hints.mark(&a);
        assert!(hints.has_endpoints(&a));
        assert!(!hints.has_endpoints(&b));
    }

    #[test]
    fn a_lapsed_mark_says_nothing_and_is_dropped_when_the_map_fills() {
        let hints = EndpointHints::default();
        let old = ShopId::new("old").unwrap();
        let lapsed = Instant::now().checked_sub(HINT_TTL + Duration::from_secs(1));
        let Some(lapsed) = lapsed else { return };
        hints.seen.lock().unwrap().at.insert(old.clone(), lapsed);
        assert!(!hints.has_endpoints(&old));
        for i in 0..PRUNE_FLOOR {
            hints.mark(&ShopId::new(format!("s{i}")).unwrap());
        }
        let seen = hints.seen.lock().unwrap();
        assert!(!seen.at.contains_key(&old));
        assert_eq!(seen.at.len(), PRUNE_FLOOR);
        // The next drop waits for the map to double.
        assert_eq!(seen.prune_at, 2 * (PRUNE_FLOOR - 1));
    }
}
