//! Step 3: `Prefer: wait=N` (see [`crate::prefer`]). A repeat that finds its
//! key's first request running waits up to N seconds for that request's
//! result instead of getting 409 at once.
//!
//! The wait is a transport convenience, so it lives here and not in the
//! engine: it only reads the key through
//! [`Store::key`](chargeonce_core::Store::key) and asks the engine again once
//! the key changed. The engine's answers and guarantees are the same with or
//! without it.
//!
//! Waiters are capped per instance and per shop ([`crate::limits::Waiters`]):
//! a request over a cap does not wait and gets the plain 409 at once.
//!
//! While the key's lease is held the waiter only polls (a read, every
//! [`POLL_INTERVAL`] at first). When the key is finished, or its lease is no
//! longer held (the first request ended without a final answer, e.g. `202`
//! pending, or its process died), the waiter runs the engine again, exactly
//! as the client's own retry would: it gets the replay, resumes, or takes
//! over.

use std::time::Duration;

use chargeonce_core::{Chain, ClaimRequest, Outcome, RecoveryPoint};
use tokio::time::Instant;

use super::Command;
use crate::AppState;
use crate::problem::Problem;

/// How often a waiting request looks at the key, at first.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The longest pause between two reads of a waited-for key.
const MAX_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Runs the engine, and with `wait`, keeps answering `InProgress` with a
/// wait for the key instead, until the deadline. Returns the outcome and
/// whether the request waited.
pub async fn run(
    state: &AppState,
    claim: ClaimRequest,
    command: Command,
    wait: Option<Duration>,
) -> Result<(Outcome, bool), Problem> {
    let deadline = wait.map(|wait| Instant::now() + wait);
    let mut waited = false;
    // Held while this request waits; freed however the wait ends.
    let mut slot = None;
    loop {
        let outcome = command.clone().run(state, claim.clone()).await?;
        let Some(deadline) = deadline else {
            return Ok((outcome, waited));
        };
        if !matches!(outcome, Outcome::InProgress { .. }) {
            return Ok((outcome, waited));
        }
        if slot.is_none() {
            // One cap per shop for both its modes (`{shop}.test` is its own).
            match state.waiters.enter(&claim.shop_id.shop()) {
                Ok(entered) => slot = Some(entered),
                Err(refused) => {
                    // Over a cap: the plain 409 with Retry-After, at once.
                    tracing::debug!(key = %claim.key, cap = refused.reason(), "too many waiters");
                    state.metrics.refused(refused.reason());
                    return Ok((outcome, waited));
                }
            }
        }
        waited = true;
        if !key_changed_by(state, &claim, deadline).await {
            return Ok((outcome, waited));
        }
    }
}

/// Polls the key until it is finished or its lease is no longer held (then
/// `true`: ask the engine again), or until the deadline (`false`). A store
/// error also returns `true`: the engine's next answer reports it properly.
///
/// The pause between reads starts at [`POLL_INTERVAL`] and doubles up to
/// [`MAX_POLL_INTERVAL`], so many waiting duplicates of a long command do
/// not take the connections the command itself needs.
async fn key_changed_by(state: &AppState, claim: &ClaimRequest, deadline: Instant) -> bool {
    let mut pause = POLL_INTERVAL;
    loop {
        if Instant::now() >= deadline {
            return false;
        }
        let next = (Instant::now() + pause).min(deadline);
        pause = (pause * 2).min(MAX_POLL_INTERVAL);
        tokio::time::sleep_until(next).await;
        match state.store.key(&claim.shop_id, &claim.key).await {
            Ok(Some(record))
                if record.recovery_point != RecoveryPoint::Finished && record.lease_active => {}
            Ok(_) => return true,
            Err(error) => {
                tracing::warn!(key = %claim.key, error = %Chain(&error), "reading the key while waiting failed");
                return true;
            }
        }
    }
}
