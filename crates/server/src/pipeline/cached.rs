//! Step 1: the response cache ([`crate::cache::ResponseCache`]). A final
//! response this instance executed never changes until its key expires, so
//! a repeat is answered from memory, and the answer reported and warned
//! about by the engine's own rules ([`Engine::repeat_answered`]), which the
//! store (counting only what it sees) would miss.
//!
//! [`Engine::repeat_answered`]: chargeonce_core::Engine::repeat_answered

use std::time::{Duration, Instant};

use chargeonce_core::{ClaimRequest, Fingerprint, IdempotencyKey, Outcome, ShopId, StoredResponse};

use crate::AppState;
use crate::cache::CachedAnswer;

/// The answer for a request whose key this instance finished, if cached.
pub fn answer(state: &AppState, claim: &ClaimRequest) -> Option<Outcome> {
    let hit = state
        .responses
        .get(&claim.shop_id, &claim.key, &claim.fingerprint)?;
    let outcome = match hit.answer {
        CachedAnswer::Replay(response) => Outcome::Replayed(response),
        CachedAnswer::Mismatch => Outcome::Mismatch,
    };
    let repeats = Some(hit.repeats);
    Some(
        state
            .engine
            .repeat_answered(&claim.shop_id, &claim.key, repeats, outcome),
    )
}

/// What a duplicate gets from the outcome of the identical request it
/// waited for (see [`super::flight`]), counted as a repeat of the key.
pub fn shared(state: &AppState, claim: &ClaimRequest, outcome: Outcome) -> Outcome {
    let repeats = state.responses.count_repeat(&claim.shop_id, &claim.key);
    state
        .engine
        .repeat_answered(&claim.shop_id, &claim.key, repeats, outcome)
}

/// Remembers a response this request executed, until shortly before its
/// key can expire.
pub fn remember(
    state: &AppState,
    shop: &ShopId,
    key: &IdempotencyKey,
    fingerprint: Fingerprint,
    response: &StoredResponse,
) {
    // The key was finished before this point and is kept at least the TTL
    // from then; the margin covers the time since.
    let ttl = state.engine.config().timing.ttl;
    let margin = Duration::from_secs(1) + ttl / 100;
    let until = Instant::now() + ttl.saturating_sub(margin);
    state
        .responses
        .insert(shop, key, fingerprint, response, until);
}
