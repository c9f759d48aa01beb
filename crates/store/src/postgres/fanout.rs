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
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chargeonce_core::ShopId;

/// How long a shop seen with an endpoint is taken to still have one.
pub(super) const HINT_TTL: Duration = Duration::from_secs(60);

/// The shops seen with endpoints, and when (see the module's docs).
#[derive(Debug, Default)]
pub(super) struct EndpointHints {
    seen: Mutex<HashMap<ShopId, Instant>>,
}

impl EndpointHints {
    /// Whether `shop` was seen with an endpoint within [`HINT_TTL`].
    pub(super) fn has_endpoints(&self, shop: &ShopId) -> bool {
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        seen.get(shop).is_some_and(|at| at.elapsed() < HINT_TTL)
    }

    /// Marks `shop` as seen with an endpoint now. Lapsed marks of other
    /// shops are dropped on the way, so the map holds at most the shops
    /// seen within the last [`HINT_TTL`] or so.
    pub(super) fn mark(&self, shop: &ShopId) {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if seen.len() >= 64 && !seen.contains_key(shop) {
            seen.retain(|_, at| at.elapsed() < HINT_TTL);
        }
        seen.insert(shop.clone(), Instant::now());
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
        hints.seen.lock().unwrap().insert(old.clone(), lapsed);
        assert!(!hints.has_endpoints(&old));
        for i in 0..64 {
            hints.mark(&ShopId::new(format!("s{i}")).unwrap());
        }
        assert!(!hints.seen.lock().unwrap().contains_key(&old));
        assert_eq!(hints.seen.lock().unwrap().len(), 64);
    }
}
