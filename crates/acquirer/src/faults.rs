//! Fault injection: how badly the simulated acquirer (and the network to it)
//! behaves. Set by `chargeonce acquirer` flags, changed at run time through
//! `PUT /admin/faults`.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

pub use crate::in_flight_duplicate::InFlightDuplicate;

/// Rates are probabilities in `[0, 1]`, drawn independently for every request
/// (first executions and repeats alike, as a real network loses any answer).
/// All zero by default: a well-behaved acquirer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Shortest answer time, in ms.
    pub latency_min_ms: u64,
    /// Longest ordinary answer time, in ms (uniform between min and max).
    pub latency_max_ms: u64,
    /// Share of answers in the slow tail.
    pub slow_rate: f64,
    /// Answer time in the slow tail, in ms.
    pub slow_ms: u64,
    /// Share of charges declined (`do_not_honor`) whatever the token.
    pub decline_rate: f64,
    /// Share of charges recorded whose answer is then lost: a 504, a dropped
    /// connection, or no answer until the client gives up.
    pub lost_answer_rate: f64,
    /// Share of requests answered 500/503 before anything is recorded.
    pub error_rate: f64,
    /// Share of requests refused with a 400 before anything is recorded, as a
    /// provider refuses a request it will never accept (a definite refusal).
    pub reject_rate: f64,
    /// Share of requests that hang (record nothing, answer nothing) until the
    /// client gives up.
    pub hang_rate: f64,
    /// How long a hang lasts before the connection is dropped, in ms.
    pub hang_ms: u64,
    /// Share of webhook events delivered twice.
    pub webhook_duplicate_rate: f64,
    /// Share of webhook events held back so later ones overtake them.
    pub webhook_reorder_rate: f64,
    /// Share of webhook delivery attempts the sender hangs up on after at
    /// most [`WEBHOOK_HANGUP_MAX`] (then retries): the receiver's handler is
    /// cut wherever it was, as when a sender times out.
    pub webhook_hangup_rate: f64,
    /// How long a held-back event waits, in ms.
    pub webhook_reorder_ms: u64,
    /// Share of charges recorded only after [`Faults::late_ms`], whoever
    /// still waits for the answer (as `tok_late` is): the key is in flight
    /// meanwhile, and a duplicate is answered as `in_flight_duplicate` says.
    pub late_rate: f64,
    /// How long a late charge takes to be recorded, in ms.
    pub late_ms: u64,
    /// How a charge whose key is still being processed is answered (see
    /// [`InFlightDuplicate`]; an idempotent acquirer only).
    pub in_flight_duplicate: InFlightDuplicate,
}

/// The longest a sender waits before it hangs up on a delivery
/// ([`Faults::webhook_hangup_rate`]): about as long as a receiver's handler
/// takes, so the cut lands anywhere in it.
pub const WEBHOOK_HANGUP_MAX: Duration = Duration::from_millis(5);

impl Default for Faults {
    fn default() -> Self {
        Self {
            latency_min_ms: 0,
            latency_max_ms: 0,
            slow_rate: 0.0,
            slow_ms: 2000,
            decline_rate: 0.0,
            lost_answer_rate: 0.0,
            error_rate: 0.0,
            reject_rate: 0.0,
            hang_rate: 0.0,
            hang_ms: 30_000,
            webhook_duplicate_rate: 0.0,
            webhook_reorder_rate: 0.0,
            webhook_hangup_rate: 0.0,
            webhook_reorder_ms: 500,
            late_rate: 0.0,
            late_ms: 3000,
            in_flight_duplicate: InFlightDuplicate::Wait,
        }
    }
}

/// Why a fault setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultsError {
    /// A rate outside `[0, 1]`.
    #[error("`{0}` must be between 0 and 1")]
    Rate(&'static str),
    /// `latency_min_ms` above `latency_max_ms`.
    #[error("latency_min_ms must not exceed latency_max_ms")]
    Latency,
}

/// What the network does to one request, drawn from [`Faults`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mishap {
    /// Answered normally.
    None,
    /// 5xx before anything is recorded.
    ErrorBeforeCommit,
    /// 400 before anything is recorded: a definite refusal.
    Rejected,
    /// Nothing recorded, nothing answered, until the hang ends.
    Hang,
    /// Recorded, then the answer is lost in one of three ways.
    LostAfterCommit(LostAnswer),
}

/// How an answer is lost after the charge was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostAnswer {
    /// A gateway timeout (504).
    GatewayTimeout,
    /// The connection is dropped mid-answer.
    Dropped,
    /// No answer until the client gives up.
    Silence,
}

impl Faults {
    /// Checks every rate and the latency range.
    pub fn validate(&self) -> Result<(), FaultsError> {
        for (name, rate) in [
            ("slow_rate", self.slow_rate),
            ("decline_rate", self.decline_rate),
            ("lost_answer_rate", self.lost_answer_rate),
            ("error_rate", self.error_rate),
            ("reject_rate", self.reject_rate),
            ("hang_rate", self.hang_rate),
            ("webhook_duplicate_rate", self.webhook_duplicate_rate),
            ("webhook_reorder_rate", self.webhook_reorder_rate),
            ("webhook_hangup_rate", self.webhook_hangup_rate),
            ("late_rate", self.late_rate),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                return Err(FaultsError::Rate(name));
            }
        }
        if self.latency_min_ms > self.latency_max_ms && self.latency_max_ms > 0 {
            return Err(FaultsError::Latency);
        }
        Ok(())
    }

    /// How long to take for one answer.
    pub fn latency(&self, rng: &mut impl Rng) -> Duration {
        if self.slow_rate > 0.0 && rng.random_bool(self.slow_rate) {
            return Duration::from_millis(self.slow_ms);
        }
        let max = self.latency_max_ms.max(self.latency_min_ms);
        Duration::from_millis(rng.random_range(self.latency_min_ms..=max))
    }

    /// What happens to one request.
    pub fn mishap(&self, rng: &mut impl Rng) -> Mishap {
        let roll: f64 = rng.random();
        let mut edge = self.error_rate;
        if roll < edge {
            return Mishap::ErrorBeforeCommit;
        }
        edge += self.reject_rate;
        if roll < edge {
            return Mishap::Rejected;
        }
        edge += self.hang_rate;
        if roll < edge {
            return Mishap::Hang;
        }
        edge += self.lost_answer_rate;
        if roll < edge {
            let how = match rng.random_range(0..3) {
                0 => LostAnswer::GatewayTimeout,
                1 => LostAnswer::Dropped,
                _ => LostAnswer::Silence,
            };
            return Mishap::LostAfterCommit(how);
        }
        Mishap::None
    }

    /// How long this charge takes to be recorded: [`Faults::late_ms`] at the
    /// late rate, else nothing.
    pub fn record_delay(&self, rng: &mut impl Rng) -> Duration {
        if self.late_rate > 0.0 && rng.random_bool(self.late_rate) {
            Duration::from_millis(self.late_ms)
        } else {
            Duration::ZERO
        }
    }

    /// Whether this charge is declined by the decline rate.
    pub fn declines(&self, rng: &mut impl Rng) -> bool {
        self.decline_rate > 0.0 && rng.random_bool(self.decline_rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn rates_are_checked() {
        assert_eq!(Faults::default().validate(), Ok(()));
        let bad = Faults {
            error_rate: 1.5,
            ..Faults::default()
        };
        assert_eq!(bad.validate(), Err(FaultsError::Rate("error_rate")));
    }

    #[test]
    fn mishaps_follow_their_rates() {
        let faults = Faults {
            error_rate: 0.1,
            lost_answer_rate: 0.3,
            ..Faults::default()
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let n = 20_000;
        let (mut errors, mut lost) = (0, 0);
        for _ in 0..n {
            match faults.mishap(&mut rng) {
                Mishap::ErrorBeforeCommit => errors += 1,
                Mishap::LostAfterCommit(_) => lost += 1,
                Mishap::Hang | Mishap::Rejected => panic!("no hang or reject rate"),
                Mishap::None => {}
            }
        }
        assert!((1700..2300).contains(&errors), "{errors}");
        assert!((5500..6500).contains(&lost), "{lost}");
        assert_eq!(Faults::default().mishap(&mut rng), Mishap::None);
    }
}
