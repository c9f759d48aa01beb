//! [`Flights`]: concurrent identical requests on one instance share one
//! trip through the engine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chargeonce_core::{Fingerprint, IdempotencyKey, Outcome, ShopId};
use tokio::sync::watch;

use super::{CacheKey, lock};

/// How long a duplicate waits for the in-flight first request of its key on
/// this instance before it answers 409 `request_in_progress` itself.
pub const FLIGHT_WAIT: Duration = Duration::from_millis(50);

/// Most flights running at once on an instance. Each is a request in flight
/// (so they are also bounded by the connection cap); past it, new requests
/// go to the engine alone instead of starting a flight.
pub const MAX_FLIGHTS: usize = 10_000;

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
    use crate::cache::fixtures::*;

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
