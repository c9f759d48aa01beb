//! Step 2: identical requests in flight on this instance ([`crate::cache::Flights`])
//! share one trip through the engine. The first goes to the engine; each
//! duplicate waits up to the flight wait for its outcome (an execution is
//! then replayed to it), and answers 409 `request_in_progress` if it is
//! still running, as the store would while the first holds the key's
//! lease. A first that ends without an outcome (an error, its client hung
//! up) sends its duplicates to the engine themselves.

use chargeonce_core::{ClaimRequest, Outcome};

use super::{Command, cached, run_and_remember};
use crate::AppState;
use crate::cache::{Arrival, Seat};
use crate::problem::Problem;

/// The outcome of a request that shares its trip with identical ones.
pub async fn share(
    state: &AppState,
    claim: ClaimRequest,
    command: Command,
) -> Result<Outcome, Problem> {
    let seat = state
        .flights
        .join(&claim.shop_id, &claim.key, claim.fingerprint);
    let follower = match seat {
        Seat::Leader(leader) => {
            let result = run_and_remember(state, claim, command, None).await;
            leader.land(result.as_ref().ok().map(|(outcome, _)| outcome.clone()));
            return result.map(|(outcome, _)| outcome);
        }
        Seat::Follower(follower) => follower,
        Seat::Alone => return alone(state, claim, command).await,
    };
    match follower.arrive(state.flight_wait).await {
        Arrival::Outcome(outcome) => Ok(cached::shared(state, &claim, *outcome)),
        Arrival::StillRunning => Ok(state.engine.repeat_in_progress(&claim.shop_id, &claim.key)),
        Arrival::Alone => alone(state, claim, command).await,
    }
}

/// To the engine without a flight.
async fn alone(
    state: &AppState,
    claim: ClaimRequest,
    command: Command,
) -> Result<Outcome, Problem> {
    Ok(run_and_remember(state, claim, command, None).await?.0)
}
