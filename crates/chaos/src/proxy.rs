//! The fault proxy in front of every instance (the shared one of
//! `chargeonce-prooftools`), with the run's seeded rates: clients connect
//! to it, one connection per request, and at set rates it delays the
//! request, resets the connection before forwarding anything, or forwards
//! the request and drops the answer (the client never learns what
//! happened). An instance that is down gets the client a `502`, as from a
//! load balancer.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use chargeonce_prooftools::{Decide, Fault, FaultProxy, ProxyCounts, ProxyStats};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::ChaosError;
use crate::report::ProxyFigures;

/// How often each fault strikes a client connection.
#[derive(Debug, Clone, Copy)]
pub struct FaultRates {
    /// Share delayed (uniformly up to `max_delay`) before forwarding.
    pub delay: f64,
    /// The longest delay.
    pub max_delay: Duration,
    /// Share reset before anything is forwarded.
    pub reset: f64,
    /// Share whose answer is dropped after the request was forwarded.
    pub drop: f64,
}

/// Each connection's fate drawn at `rates` from `seed` (two draws a
/// connection, whatever the fault, so the sequence is the seed's).
fn seeded(rates: FaultRates, seed: u64) -> impl Decide {
    let mut rng = StdRng::seed_from_u64(seed);
    let max_delay = u64::try_from(rates.max_delay.as_millis()).unwrap_or(u64::MAX);
    move || {
        let draw: f64 = rng.random();
        let delay = rng.random_range(0..=max_delay);
        if draw < rates.reset {
            Fault::Reset
        } else if draw < rates.reset + rates.drop {
            Fault::LoseAnswer
        } else if draw < rates.reset + rates.drop + rates.delay {
            Fault::Delay(Duration::from_millis(delay))
        } else {
            Fault::Pass
        }
    }
}

/// A proxy on a free port to the instance on `127.0.0.1:upstream`,
/// counting into the run's `stats`.
pub async fn start(
    upstream: u16,
    rates: FaultRates,
    seed: u64,
    stats: Arc<ProxyStats>,
) -> Result<FaultProxy, ChaosError> {
    let upstream = SocketAddr::from((Ipv4Addr::LOCALHOST, upstream));
    FaultProxy::counted(upstream, seeded(rates, seed), stats)
        .await
        .map_err(|e| ChaosError::Setup(format!("starting a fault proxy: {e}")))
}

/// The proxies' counts as the report names them.
pub fn figures(counts: ProxyCounts) -> ProxyFigures {
    ProxyFigures {
        connections: counts.connections,
        delayed: counts.delayed,
        reset: counts.reset,
        answers_dropped: counts.answers_lost,
        instance_down: counts.upstream_down,
    }
}
