//! # chargeonce-prooftools
//!
//! What the proof tools share, written once: [`proxy`], a TCP fault proxy
//! that sits between a client and a server and, connection by connection,
//! passes, delays, resets, loses the answer after the server has acted,
//! hangs, or answers in the server's place; and [`histogram`], the HDR
//! latency histogram the load generator (`chargeonce bench`) and the
//! chaos report print. Used by `chargeonce-chaos`, `chargeonce-bench` and
//! the client crate's tests; what each injects (seeded rates, a planned
//! sequence) is its own [`proxy::Decide`].

pub mod histogram;
pub mod proxy;

pub use histogram::{Latency, LatencySummary};
pub use proxy::{Canned, Decide, Fault, FaultProxy, ProxyCounts, ProxyStats};
