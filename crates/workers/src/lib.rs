//! # chargeonce-workers
//!
//! The background workers that keep the store tidy, drive work to an end and
//! deliver merchant events. They run beside the HTTP server (`chargeonce
//! serve`) or on their own (`chargeonce reconcile`), and talk only to the
//! core's traits ([`chargeonce_core::Store`], [`chargeonce_core::Acquirer`],
//! [`chargeonce_core::AcquirerLedger`], [`chargeonce_core::Observer`]), so
//! each is testable over any store and acquirer, without HTTP:
//!
//! - [`completer`] finishes idempotency keys nobody retries;
//! - [`expirer`] releases authorizations nobody captured in time;
//! - [`reconciler`] makes our books and the acquirer's agree, and says where
//!   they do not;
//! - [`relay`] delivers merchant events from the outbox to the shops'
//!   webhook URLs, only where [`egress`] allows (no request forgery into
//!   the service's own network);
//! - [`sweeper`] deletes finished idempotency keys whose retention has
//!   passed;
//! - [`tally`] adds the repeats an instance answered from its caches to
//!   their keys' counts in the store.
//!
//! Every worker starts the same way: a value built with what it works on
//! (`new`, or the [`reconciler::Reconciler`]'s fields), told where to report
//! (`with_observer`, metrics), and started with `spawn`, which gives the
//! task's handle (the flusher's handle flushes once more when stopped). Each
//! also has a one-pass function (`complete_once`, `expire_once`, `reconcile_once`,
//! `run_once`, `sweep_once`, `flush_once`) for tests and the CLI.

pub mod completer;
pub mod egress;
pub mod expirer;
pub mod reconciler;
pub mod relay;
pub mod sweeper;
pub mod tally;
