//! The background worker: a pass every
//! [`ReconcilerConfig::interval`](super::ReconcilerConfig::interval) with
//! the worker's memory ([`super::ReconcilerState`]), and one log line per
//! pass.

use std::time::{Duration, Instant};

use chargeonce_core::Chain;
use time::OffsetDateTime;
use tokio::task::JoinHandle;

use super::{PassKind, ReconcileReport, Reconciler, ReconcilerConfig, ReconcilerState};

impl Reconciler {
    /// Starts the reconciler on the current runtime; abort the handle to stop
    /// it. It keeps a [`ReconcilerState`]: a full pass first, then
    /// incremental passes every [`ReconcilerConfig::interval`], with a full
    /// one every [`ReconcilerConfig::full_every`].
    pub fn spawn(self, config: ReconcilerConfig) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut state = ReconcilerState::new();
            loop {
                let started = Instant::now();
                match self
                    .reconcile_at(&config, &mut state, OffsetDateTime::now_utc())
                    .await
                {
                    Ok(report) => log_pass(&report, started.elapsed()),
                    Err(error) => {
                        self.observer.store_error("reconciler");
                        tracing::warn!(error = %Chain(&error), "reconciler pass failed; will retry");
                    }
                }
                tokio::time::sleep(config.interval).await;
            }
        })
    }
}

/// One line per pass: `info` for a full pass or one that found or settled
/// something, `debug` otherwise.
fn log_pass(report: &ReconcileReport, took: Duration) {
    let findings: usize = report.finding_counts.values().sum();
    let loud = report.pass == PassKind::Full || !report.is_clean() || !report.resolved.is_empty();
    macro_rules! pass_line {
        ($level:ident) => {
            tracing::$level!(
                kind = report.pass.as_str(),
                from = %report.window_from,
                to = %report.window_to,
                resolved = report.resolved.len(),
                findings,
                errors = report.errors.len() + report.errors_omitted,
                payments = report.payments_compared,
                charges = report.charges_compared,
                slices = report.slices,
                peak_payments_held = report.peak_payments_held,
                peak_charges_held = report.peak_charges_held,
                store_lookups = report.store_lookups,
                acquirer_lookups = report.acquirer_lookups,
                took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                "reconciler pass"
            )
        };
    }
    if loud {
        pass_line!(info);
    } else {
        pass_line!(debug);
    }
}
