//! One conformance suite, run against both stores: what the engine relies on.
//!
//! Every scenario gets a [`support::Fixture`] (a store on a fresh database,
//! with one shop) and runs once per store; the rooms are by concern.

#![allow(clippy::unwrap_used, missing_docs)]

mod support;

mod captures;
mod claim;
mod expiry;
mod findings;
mod finish;
mod history;
mod inbound;
mod introspection;
mod leases;
mod lists;
mod operations;
mod outbox;
mod races;
mod reconciliation;
mod refunds;
mod releases;
mod repeats;
mod shops;
mod stalled;
