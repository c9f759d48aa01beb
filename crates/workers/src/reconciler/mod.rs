//! The reconciler: makes our books and the acquirer's agree, and says where
//! they do not.
//!
//! One pass ([`Reconciler::reconcile_once`], or [`Reconciler::reconcile_at`]
//! for the background worker):
//!
//! 1. **Resolves pending payments.** For every payment still `pending` after
//!    [`ReconcilerConfig::pending_after`], asks the acquirer what it holds for
//!    it (by acquirer key, or by our reference when the acquirer is not
//!    idempotent) and, when it holds a definite answer, settles the payment with
//!    a conditional `pending` -> final transition. A payment the acquirer does
//!    not know is left alone: nothing was charged, and the completer sends it.
//!    The payment's key, still unfinished, is then finished by its next retry
//!    or by the completer, from the settled payment.
//! 2. **Compares the books** over the last [`ReconcilerConfig::window`]:
//!    - `orphan_charge`: money taken for a payment we do not have;
//!    - `duplicate_charge`: more than one charge holding money for one order
//!      reference (with `refund_duplicates`, every charge but the one our
//!      payment names is refunded at the acquirer);
//!    - `missing_charge`: a payment we consider final that the acquirer does
//!      not know;
//!    - `mismatch`: a payment whose status or amount disagrees with its charge.
//!
//! Every finding is a metric, a warning in the log, a row in the
//! [`ReconcileReport`] (the first
//! [`max_findings`](ReconcilerConfig::max_findings)), and, once the pass
//! ends, a finding persisted in the store
//! ([`Findings::record_findings`](chargeonce_core::store::Findings::record_findings):
//! all of them, seen again or new, with the duplicates this pass refunded
//! resolved as refunded), for the operator to resolve.
//!
//! # Where the design lives
//!
//! Each part of the design is documented next to its code:
//!
//! - `rules`: the judgement, pure functions with no I/O: what a group of
//!   charges for one order is, which charge is kept, what an orphan, a
//!   mismatch and a missing charge are;
//! - `slicing`: bounded memory: how a pass walks the window in slices of a
//!   page of charges and a stretch of our payments, never holding the window;
//! - `pass`: one pass, slice by slice (read pages → attach charges → judge
//!   orders), and the targeted look-ups that settle what spans slices;
//! - `filter`: the fixed-size Bloom filter of orders already seen;
//! - `state`: what the background worker keeps between passes, so that
//!   incremental passes compare only what is new, and what closes what they
//!   could miss;
//! - `report`: the report, its findings and how they are counted;
//! - `config`: the settings;
//! - `worker`: the background worker's loop ([`Reconciler::spawn`]).

mod config;
mod filter;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod fixtures;
mod pass;
mod report;
mod rules;
mod slicing;
mod state;
mod worker;

use std::sync::Arc;

use chargeonce_core::acquirer::look_up;
use chargeonce_core::api_key::Mode;
use chargeonce_core::findings::NewFinding;
use chargeonce_core::{
    Acquirer, AcquirerLedger, Chain, Observer, SettleOutcome, Store, StoreError,
};
use time::OffsetDateTime;

pub use config::ReconcilerConfig;
pub use report::{Finding, FindingKind, PassKind, ReconcileReport, Resolved};
pub use state::ReconcilerState;

use config::duration;
use pass::Pass;
use report::rfc3339;
use rules::mismatch;
use slicing::before;

/// Why a pass could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Our store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The acquirer's ledger could not be read.
    #[error("the acquirer's ledger cannot be read: {0}")]
    Acquirer(String),
}

/// What the reconciler talks to. One reconciler compares one mode's books
/// with that mode's acquirer: the live payments with the live acquirer's
/// ledger, the test payments with test mode's simulator.
#[derive(Clone)]
pub struct Reconciler {
    /// The shops' mode whose payments it reconciles.
    pub mode: Mode,
    /// Our books.
    pub store: Arc<dyn Store>,
    /// The acquirer's status look-ups.
    pub acquirer: Arc<dyn Acquirer>,
    /// The acquirer's ledger.
    pub ledger: Arc<dyn AcquirerLedger>,
    /// Where findings are counted.
    pub observer: Arc<dyn Observer>,
}

impl Reconciler {
    /// Counts, logs and reports a finding.
    fn find(&self, config: &ReconcilerConfig, report: &mut ReconcileReport, finding: NewFinding) {
        self.observer
            .reconciler_finding(self.mode, finding.kind.as_str());
        tracing::warn!(
            kind = finding.kind.as_str(),
            shop = %finding.shop_id,
            reference = finding.reference.as_str(),
            payment = finding.payment_id.as_ref().map_or("-", |id| id.as_str()),
            charges = %finding.charge_ids.join(","),
            refunded = %finding.refunded.join(","),
            detail = %finding.detail,
            "reconciliation finding"
        );
        report.keep_finding(config.max_findings, finding);
    }

    /// Step 1: settles pending payments the acquirer has a definite answer for.
    async fn resolve_pending(
        &self,
        config: &ReconcilerConfig,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        let pending = self
            .store
            .pending_payments_of(Some(self.mode), config.pending_after, config.batch)
            .await?;
        report.pending_checked = pending.len();
        for payment in pending {
            let found = look_up(
                self.acquirer.as_ref(),
                &payment.shop_id,
                &payment.id,
                &payment.acquirer_key,
            )
            .await;
            let charge = match found {
                Ok(Some(charge)) => charge,
                Ok(None) => {
                    report.pending_unknown_to_acquirer += 1;
                    continue;
                }
                Err(error) => {
                    report.push_error(
                        config.max_findings,
                        format!("status of payment {}: {error}", payment.id),
                    );
                    continue;
                }
            };
            if charge.amount != payment.amount {
                // Money moved for another amount than we asked: a finding
                // for a person, never a settlement of our payment.
                self.find(config, report, mismatch(&payment, &charge));
                continue;
            }
            let settlement = charge.outcome.settlement();
            match self
                .store
                .settle_payment(&payment.shop_id, &payment.id, &settlement)
                .await?
            {
                SettleOutcome::Settled(settled) => {
                    tracing::info!(payment = %settled.id, status = settled.status.as_str(), "reconciler settled a pending payment");
                    self.observer.reconciler_resolved();
                    report.resolved.push(Resolved {
                        shop_id: settled.shop_id.to_string(),
                        payment_id: settled.id.to_string(),
                        status: settled.status.as_str().to_owned(),
                    });
                }
                SettleOutcome::AlreadyFinal(_) | SettleOutcome::NotFound => {}
            }
        }
        Ok(())
    }

    /// One full pass at the current time: resolve pending payments, then
    /// compare the whole window, slice by slice. What `chargeonce reconcile`
    /// runs.
    pub async fn reconcile_once(
        &self,
        config: &ReconcilerConfig,
    ) -> Result<ReconcileReport, ReconcileError> {
        self.reconcile_at(
            config,
            &mut ReconcilerState::new(),
            OffsetDateTime::now_utc(),
        )
        .await
    }

    /// One pass as of `now` with the worker's memory: resolve pending
    /// payments, then compare the whole window (a full pass, see
    /// [`ReconcilerState::next_pass_is_full`]) or only what is new since the
    /// last pass (an incremental one). On success the state moves on; on an
    /// error it stays where it was, so the next pass covers this one's part.
    pub async fn reconcile_at(
        &self,
        config: &ReconcilerConfig,
        state: &mut ReconcilerState,
        now: OffsetDateTime,
    ) -> Result<ReconcileReport, ReconcileError> {
        let mut report = ReconcileReport::default();
        let outcome = self.pass_at(config, state, now, &mut report).await;
        // Recorded whatever the outcome: a failed pass may have refunded
        // duplicates already, which no later pass finds again.
        self.record(config, &mut report).await;
        outcome.map(|()| report)
    }

    /// Records every finding of the pass in the store. A store error is
    /// logged, counted and reported among the pass's unanswered questions,
    /// never the pass's failure: the next pass finds the disagreements
    /// again (all but a refunded duplicate's, which the report and the log
    /// still show).
    async fn record(&self, config: &ReconcilerConfig, report: &mut ReconcileReport) {
        let found = std::mem::take(&mut report.found);
        if found.is_empty() {
            return;
        }
        if let Err(error) = self.store.record_findings(&found).await {
            self.observer.store_error("reconciler_findings");
            tracing::warn!(error = %Chain(&error), findings = found.len(), "reconciler findings could not be recorded");
            report.push_error(
                config.max_findings,
                format!("recording {} findings: {error}", found.len()),
            );
        }
    }

    /// The pass itself, into `report`.
    async fn pass_at(
        &self,
        config: &ReconcilerConfig,
        state: &mut ReconcilerState,
        now: OffsetDateTime,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        self.resolve_pending(config, report).await?;

        let window = time::Duration::try_from(config.window).unwrap_or(time::Duration::DAY);
        let slack = duration(config.clock_slack);
        let overlap = duration(config.overlap);
        let from = before(now, window);
        let full = state.next_pass_is_full(config, now);
        let start = match (full, state.compared_to()) {
            (false, Some(compared_to)) => before(compared_to, overlap).clamp(from, now),
            _ => from,
        };
        state.begin(
            full,
            now,
            window.saturating_add(slack).saturating_add(slack),
        );
        report.pass = if full {
            PassKind::Full
        } else {
            PassKind::Incremental
        };
        report.window_from = rfc3339(start);
        report.window_to = rfc3339(now);
        let mut pass = Pass::new(self, config, state, report, now, from, start);
        let outcome = pass.run(full).await;
        let overflowed = pass.overflowed();
        if let Err(error) = outcome {
            state.failed();
            return Err(error);
        }
        state.passed(full, now, overflowed);
        report.findings.sort_by(|a, b| {
            (a.kind, &a.shop_id, &a.reference).cmp(&(b.kind, &b.shop_id, &b.reference))
        });
        Ok(())
    }
}
