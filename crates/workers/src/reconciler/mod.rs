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
//! Every finding is a metric (`chargeonce_reconciler_findings_total{kind}`),
//! a warning in the log, and a row in the [`ReconcileReport`] (the first
//! [`ReconcilerConfig::max_findings`] of them; all are counted).
//!
//! # The rules
//!
//! The window's charges are those the acquirer recorded in `[now - window -
//! slack, now + slack)` by its clock; our payments are those created in
//! `[now - window, now)` by ours ([`ReconcilerConfig::clock_slack`], 5 min).
//!
//! - An order's **group** is its succeeded charges in the window, oldest first.
//!   A group of two or more is a duplicate while a charge other than the one
//!   kept still holds money. The charge kept is the one a succeeded payment of
//!   ours names, else the first that holds money. A charge refunded in full
//!   still counts in its group, so it cannot hide a duplicate that still
//!   holds money. While no succeeded payment names a charge and a payment of
//!   ours in the group is still pending, nothing is refunded: the charge to
//!   keep is not known yet (refunding "all but the first" could refund the
//!   very charge that payment settles on); a later pass refunds.
//! - An **orphan** is a charge holding money whose payment we do not have,
//!   and that is in no group of two or more (then it is a duplicate).
//! - A **mismatch** is a charge our payment names whose outcome or amount
//!   disagrees with the payment (a pending payment agrees with anything).
//! - A **missing charge** is a final payment of ours in the window whose
//!   named charge is not among the window's charges and that the acquirer's
//!   status look-up does not know either.
//!
//! # Bounded memory: slices and targeted look-ups
//!
//! A pass never holds the window. It walks it in **slices**: a page of at
//! most [`ReconcilerConfig::slice_charges`] charges from the ledger, in the
//! ledger's order (`created_at`, then id: [`AcquirerLedger::charges_page`],
//! keyset pagination), covering a stretch of time that adapts to hold about
//! two pages of our payments (at most [`ReconcilerConfig::slice_span`]);
//! and our payments created in the same stretch of time, read
//! [`ReconcilerConfig::batch`] at a time (`Store::payments_created_between`)
//! and never kept beyond the page, except the one each charge of the slice
//! belongs to. The walk starts with the charges, the clock slack before the
//! compared range; our payments of that stretch are read only to be found by
//! their charges, not compared (they are before the window, or an earlier
//! pass compared them). The slices' payment ranges split the walk's time
//! exactly, and their charges split the window's charges exactly, so each
//! payment and each charge is compared once. The pass therefore holds at most a slice of
//! charges, their payments, a page and a carry of payments (below), whatever
//! the window's size; the report says how many it held at most
//! ([`ReconcileReport::peak_payments_held`],
//! [`ReconcileReport::peak_charges_held`]).
//!
//! What spans slices is settled by targeted look-ups, not by holding more:
//!
//! - **A charge whose payment is not among its slice's payments** (created a
//!   little earlier, in the previous slice; long pending, created outside the
//!   window): the store's payment by id.
//! - **A final payment whose named charge is not in its slice** (the charge
//!   came a little later): carried to the next slice and looked for there;
//!   if it is not there either, the acquirer's status look-up, as before.
//! - **An order whose charges are in different slices** (or different
//!   passes): every slice remembers the orders of its succeeded charges in a
//!   fixed-size Bloom filter (2 MiB). A charge whose order may have been seen
//!   before, or that shares its slice with another charge of its order, makes
//!   the pass fetch the order's whole group from the acquirer
//!   ([`AcquirerLedger::charges_for_reference`]). The group is judged once,
//!   in the slice that holds its latest charge; an earlier slice only notes
//!   the order. A false positive of the filter costs one look-up, never a
//!   finding; it has no false negatives.
//! - **An orphan candidate** (a charge holding money whose payment we do not
//!   have) also fetches its order's group: if the order has another
//!   succeeded charge anywhere in the window, later slices included, the
//!   charge is part of a duplicate, not an orphan.
//!
//! # Incremental passes (the background worker)
//!
//! The worker ([`Reconciler::spawn`]) keeps a [`ReconcilerState`] in memory
//! and compares only what is new: each pass after the first covers our
//! payments from where the last pass ended less [`ReconcilerConfig::overlap`]
//! (2 min: rows committed a little after their `created_at`, pages read while
//! rows were being inserted), and the charges from there less the clock
//! slack, up to now plus the slack. Its work is proportional to what is new
//! (plus the fixed overlap and slack), not to the window. A **full pass**
//! over the whole window runs on start (a restarted worker remembers nothing,
//! so it begins with one), every [`ReconcilerConfig::full_every`] (6 h), and
//! at the next pass whenever the state could not keep something it should
//! (below).
//!
//! What an incremental pass could miss, and what closes it:
//!
//! - **A duplicate whose charges are far apart** (the second an hour after
//!   the first, the first long out of the incremental range): the Bloom
//!   filter outlives passes. An order is added to it once its charge is
//!   older than anything the next pass re-reads, and a filter generation
//!   lives at least a window plus twice the slack, so the later charge finds
//!   the earlier one's order there and fetches the whole group. Orders the
//!   current pass re-reads (the overlap) are in a second filter of this pass
//!   only, so re-reading them costs no look-up.
//! - **A payment that was pending when its range was compared and settles
//!   later** (missing charge, mismatch): every pending payment a pass sees is
//!   remembered (up to 10 000) and looked up again on each pass until it is
//!   final, then checked like a payment of the window: its charge by the
//!   acquirer's status look-up (a missing charge when it has none, a mismatch
//!   when it disagrees). Settling normally comes from the acquirer's own
//!   answer, so this only finds bugs, as the full pass would.
//! - **Duplicates waiting for a pending payment, or whose refund failed**
//!   (with `refund_duplicates`): their order is remembered (up to 1 000) and
//!   judged again on each pass from a fresh look-up, so the refund happens
//!   once the payment settles, as the next full pass would do it. Orders
//!   whose group look-up failed are remembered the same way, and payments
//!   whose status look-up failed are checked again.
//! - **Rows that commit after a pass read their part of the time** (a
//!   payment's `created_at` is its transaction's start; a charge is stamped
//!   before its insert commits; a page may be read while rows are inserted
//!   below its cursor): the overlap reads the last 2 minutes again. A row
//!   later than that (an acquirer that reports charges hours late) is only
//!   compared by the next full pass, if it is still in the window then.
//! - When one of these memories is full, or a pass failed after it had taken
//!   things out of them, the next pass is a full pass.
//!
//! A finding is reported by every pass whose range holds it: by the pass that
//! first sees it and the next one if it is in the overlap, then by each full
//! pass while it is in the window (a pass over the whole window every 60 s
//! used to report it on every pass).

mod filter;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chargeonce_core::acquirer::look_up;
use chargeonce_core::{
    Acquirer, AcquirerCharge, AcquirerLedger, LedgerCursor, Observer, Payment, PaymentId,
    PaymentStatus, Reference, SettleOutcome, ShopId, Store, StoreError,
};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::task::JoinHandle;

use filter::{Bloom, ReferenceFilter};

/// Reconciler settings.
#[derive(Debug, Clone, Copy)]
pub struct ReconcilerConfig {
    /// Pause between passes (the background worker).
    pub interval: Duration,
    /// How old a pending payment must be before the acquirer is asked about it.
    pub pending_after: Duration,
    /// How far back the books are compared.
    pub window: Duration,
    /// Pending payments resolved per pass, and payments read per page.
    pub batch: u32,
    /// Refund duplicate charges at the acquirer.
    pub refund_duplicates: bool,
    /// The most acquirer charges one slice of the window holds.
    pub slice_charges: u32,
    /// The longest stretch of time one slice covers. Slices start at 10 s
    /// (or this, if shorter) and adapt to hold about two pages
    /// ([`Self::batch`]) of our payments: a page of payments is read from
    /// the slice's range of the `created_at` index, so a slice with many
    /// pages would read its range many times.
    pub slice_span: Duration,
    /// How far the acquirer's clock may be from ours: the window's charges
    /// are read this much wider on both sides.
    pub clock_slack: Duration,
    /// How far before the end of the last pass an incremental pass starts.
    pub overlap: Duration,
    /// How often the background worker compares the whole window again.
    pub full_every: Duration,
    /// Findings (and errors) kept in a report; the rest are logged and
    /// counted, not kept.
    pub max_findings: usize,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            pending_after: Duration::from_secs(30),
            window: Duration::from_secs(24 * 60 * 60),
            batch: 500,
            refund_duplicates: false,
            slice_charges: 5000,
            slice_span: Duration::from_secs(10 * 60),
            clock_slack: Duration::from_secs(5 * 60),
            overlap: Duration::from_secs(2 * 60),
            full_every: Duration::from_secs(6 * 60 * 60),
            max_findings: 1000,
        }
    }
}

/// Pending payments (and payments whose look-up failed) the worker
/// remembers to check again; past this, the next pass is a full pass.
const RECHECK_LIMIT: usize = 10_000;

/// Orders the worker remembers to judge again; past this, the next pass is
/// a full pass.
const REVISIT_LIMIT: usize = 1_000;

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

/// What kind of disagreement a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// More than one charge holding money for one order reference.
    DuplicateCharge,
    /// Money taken for a payment we do not have.
    OrphanCharge,
    /// A payment we consider final that the acquirer does not know.
    MissingCharge,
    /// A payment whose status or amount disagrees with its charge.
    Mismatch,
}

impl FindingKind {
    /// The stable label (`orphan_charge`, `duplicate_charge`, `missing_charge`, `mismatch`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::OrphanCharge => "orphan_charge",
            Self::DuplicateCharge => "duplicate_charge",
            Self::MissingCharge => "missing_charge",
            Self::Mismatch => "mismatch",
        }
    }
}

/// One disagreement between our books and the acquirer's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// The shop.
    pub shop_id: String,
    /// The order reference.
    pub reference: String,
    /// Our payment, when we have one.
    pub payment_id: Option<String>,
    /// The acquirer charges involved.
    pub charge_ids: Vec<String>,
    /// Charges refunded because of this finding.
    pub refunded: Vec<String>,
    /// In words.
    pub detail: String,
}

/// A pending payment the reconciler settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// The shop.
    pub shop_id: String,
    /// The payment.
    pub payment_id: String,
    /// Its status now (`succeeded` or `declined`).
    pub status: String,
}

/// Which part of the window a pass compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PassKind {
    /// The whole window.
    #[default]
    Full,
    /// What is new since the last pass, with an overlap.
    Incremental,
}

impl PassKind {
    /// `full` or `incremental`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Incremental => "incremental",
        }
    }
}

/// What one pass found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    /// Start of the compared part of the window (RFC 3339): the window's
    /// start for a full pass.
    pub window_from: String,
    /// End of the compared window (RFC 3339).
    pub window_to: String,
    /// Whether the pass compared the whole window.
    pub pass: PassKind,
    /// Pending payments asked about.
    pub pending_checked: usize,
    /// Pending payments settled from the acquirer's answer.
    pub resolved: Vec<Resolved>,
    /// Pending payments the acquirer does not know (nothing charged yet; the
    /// completer sends them).
    pub pending_unknown_to_acquirer: usize,
    /// Our payments compared.
    pub payments_compared: usize,
    /// Acquirer charges compared.
    pub charges_compared: usize,
    /// Slices the compared part was walked in.
    pub slices: usize,
    /// The most of our payments the pass held in memory at once.
    pub peak_payments_held: usize,
    /// The most acquirer charges the pass held in memory at once.
    pub peak_charges_held: usize,
    /// Targeted reads of our store (one payment by id).
    pub store_lookups: usize,
    /// Targeted questions to the acquirer (a payment's status, an order's charges).
    pub acquirer_lookups: usize,
    /// The disagreements (the first `max_findings`).
    pub findings: Vec<Finding>,
    /// Findings per kind, including those not kept in `findings`.
    pub finding_counts: BTreeMap<FindingKind, usize>,
    /// Findings logged and counted but not kept in `findings`.
    pub findings_omitted: usize,
    /// Questions that got no answer this pass (acquirer unreachable...).
    pub errors: Vec<String>,
    /// Errors logged but not kept in `errors`.
    pub errors_omitted: usize,
}

impl ReconcileReport {
    /// No finding and no unanswered question.
    pub fn is_clean(&self) -> bool {
        self.finding_counts.is_empty()
            && self.findings.is_empty()
            && self.errors.is_empty()
            && self.errors_omitted == 0
    }

    /// Findings counted per kind.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        self.finding_counts
            .iter()
            .map(|(kind, count)| (kind.as_str(), *count))
            .collect()
    }
}

impl fmt::Display for ReconcileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "reconciliation of {} .. {} ({} pass)",
            self.window_from,
            self.window_to,
            self.pass.as_str()
        )?;
        writeln!(
            f,
            "pending payments: {} checked, {} resolved, {} unknown to the acquirer",
            self.pending_checked,
            self.resolved.len(),
            self.pending_unknown_to_acquirer
        )?;
        for resolved in &self.resolved {
            writeln!(
                f,
                "  resolved  {} {} -> {}",
                resolved.shop_id, resolved.payment_id, resolved.status
            )?;
        }
        writeln!(
            f,
            "compared: {} payments, {} acquirer charges",
            self.payments_compared, self.charges_compared
        )?;
        writeln!(
            f,
            "in {} slices, holding at most {} payments and {} charges; {} store and {} acquirer look-ups",
            self.slices,
            self.peak_payments_held,
            self.peak_charges_held,
            self.store_lookups,
            self.acquirer_lookups
        )?;
        let total: usize = self.finding_counts.values().sum();
        if total == 0 {
            writeln!(f, "findings: none")?;
        } else {
            writeln!(f, "findings: {total}")?;
        }
        for finding in &self.findings {
            write!(
                f,
                "  {:<16} shop={} reference={} payment={} charges=[{}]",
                finding.kind.as_str(),
                finding.shop_id,
                finding.reference,
                finding.payment_id.as_deref().unwrap_or("-"),
                finding.charge_ids.join(",")
            )?;
            if !finding.refunded.is_empty() {
                write!(f, " refunded=[{}]", finding.refunded.join(","))?;
            }
            writeln!(f, ": {}", finding.detail)?;
        }
        if self.findings_omitted > 0 {
            writeln!(
                f,
                "  ... and {} more findings (in the log)",
                self.findings_omitted
            )?;
        }
        for error in &self.errors {
            writeln!(f, "  error: {error}")?;
        }
        if self.errors_omitted > 0 {
            writeln!(
                f,
                "  ... and {} more errors (in the log)",
                self.errors_omitted
            )?;
        }
        write!(
            f,
            "{}",
            if self.is_clean() {
                "CLEAN"
            } else {
                "NOT CLEAN"
            }
        )
    }
}

/// What the reconciler talks to.
#[derive(Clone)]
pub struct Reconciler {
    /// Our books.
    pub store: Arc<dyn Store>,
    /// The acquirer's status look-ups.
    pub acquirer: Arc<dyn Acquirer>,
    /// The acquirer's ledger.
    pub ledger: Arc<dyn AcquirerLedger>,
    /// Where findings are counted.
    pub observer: Arc<dyn Observer>,
}

/// What the background worker remembers between passes, in memory only: a
/// restarted worker starts from nothing, and its first pass is a full pass.
/// Its size is bounded whatever the window holds: two 2 MiB filters of order
/// references, and at most 10 000 payments and 1 000 orders to check again.
#[derive(Debug, Clone, Default)]
pub struct ReconcilerState {
    /// Where the compared part of the last successful pass ended.
    compared_to: Option<OffsetDateTime>,
    /// When the last full pass ran.
    last_full: Option<OffsetDateTime>,
    /// Something could not be remembered: the next pass is a full pass.
    full_due: bool,
    /// Orders that had a succeeded charge in the window, up to what the next
    /// pass re-reads.
    references: ReferenceFilter,
    /// Payments to check again: pending ones (until they are final) and
    /// those whose status look-up failed.
    recheck: HashSet<(ShopId, PaymentId)>,
    /// Orders to judge again: duplicates waiting for a refund, orders whose
    /// look-up failed.
    revisit: HashSet<(ShopId, Reference)>,
}

impl ReconcilerState {
    /// A state that remembers nothing: its first pass is a full pass.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the compared part of the last successful pass ended.
    pub fn compared_to(&self) -> Option<OffsetDateTime> {
        self.compared_to
    }

    /// Whether a pass at `now` compares the whole window.
    pub fn next_pass_is_full(&self, config: &ReconcilerConfig, now: OffsetDateTime) -> bool {
        let window = duration(config.window);
        let every = duration(config.full_every);
        match (self.compared_to, self.last_full) {
            (Some(compared_to), Some(last_full)) => {
                self.full_due || now - last_full >= every || now - compared_to >= window
            }
            _ => true,
        }
    }

    /// Payments remembered to check again.
    pub fn rechecks(&self) -> usize {
        self.recheck.len()
    }

    /// Orders remembered to judge again.
    pub fn revisits(&self) -> usize {
        self.revisit.len()
    }
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// A configured duration as a `time` one (saturating).
fn duration(d: Duration) -> time::Duration {
    time::Duration::try_from(d).unwrap_or(time::Duration::MAX)
}

/// `at - d`, saturating at the earliest time there is.
fn before(at: OffsetDateTime, d: time::Duration) -> OffsetDateTime {
    at.checked_sub(d).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `at + d`, saturating.
fn after(at: OffsetDateTime, d: time::Duration) -> OffsetDateTime {
    at.checked_add(d).unwrap_or(at)
}

/// Records a question that got no answer: in the report (the pass's log
/// line counts them), or, past `max_findings`, in the log only.
fn push_error(config: &ReconcilerConfig, report: &mut ReconcileReport, error: String) {
    if report.errors.len() < config.max_findings {
        report.errors.push(error);
    } else {
        tracing::warn!(%error, "reconciler question without an answer (not kept in the report)");
        report.errors_omitted += 1;
    }
}

impl Reconciler {
    fn find(&self, config: &ReconcilerConfig, report: &mut ReconcileReport, finding: Finding) {
        self.observer.reconciler_finding(finding.kind.as_str());
        tracing::warn!(
            kind = finding.kind.as_str(),
            shop = %finding.shop_id,
            reference = %finding.reference,
            payment = finding.payment_id.as_deref().unwrap_or("-"),
            charges = %finding.charge_ids.join(","),
            refunded = %finding.refunded.join(","),
            detail = %finding.detail,
            "reconciliation finding"
        );
        *report.finding_counts.entry(finding.kind).or_default() += 1;
        if report.findings.len() < config.max_findings {
            report.findings.push(finding);
        } else {
            report.findings_omitted += 1;
        }
    }

    /// Step 1: settles pending payments the acquirer has a definite answer for.
    async fn resolve_pending(
        &self,
        config: &ReconcilerConfig,
        report: &mut ReconcileReport,
    ) -> Result<(), ReconcileError> {
        let pending = self
            .store
            .pending_payments(config.pending_after, config.batch)
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
                    push_error(
                        config,
                        report,
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
        self.resolve_pending(config, &mut report).await?;

        let window = time::Duration::try_from(config.window).unwrap_or(time::Duration::DAY);
        let slack = duration(config.clock_slack);
        let overlap = duration(config.overlap);
        let from = before(now, window);
        let full = state.next_pass_is_full(config, now);
        let start = match (full, state.compared_to) {
            (false, Some(compared_to)) => before(compared_to, overlap).clamp(from, now),
            _ => from,
        };
        if full {
            // The pass sees every order and payment of the window again.
            state.references.clear(now);
            state.recheck.clear();
            state.revisit.clear();
        } else {
            state
                .references
                .roll(now, window.saturating_add(slack).saturating_add(slack));
        }
        report.pass = if full {
            PassKind::Full
        } else {
            PassKind::Incremental
        };
        report.window_from = rfc3339(start);
        report.window_to = rfc3339(now);
        let mut pass = Pass {
            reconciler: self,
            config,
            state,
            report: &mut report,
            now,
            from,
            start,
            slack,
            charges_from: before(start, slack),
            group_from: before(from, slack),
            group_to: after(now, slack),
            // What the next pass re-reads starts here (if it is incremental).
            reread_from: before(before(now, overlap), slack),
            seen: Bloom::default(),
            overflowed: false,
        };
        let outcome = pass.run(full).await;
        let overflowed = pass.overflowed;
        if let Err(error) = outcome {
            // What this pass took out of the state to check again may be
            // lost: the next pass compares everything.
            state.full_due = true;
            return Err(error);
        }
        state.full_due = overflowed;
        state.compared_to = Some(now);
        if full {
            state.last_full = Some(now);
        }
        report.findings.sort_by(|a, b| {
            (a.kind, &a.shop_id, &a.reference).cmp(&(b.kind, &b.shop_id, &b.reference))
        });
        Ok(report)
    }

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
                        tracing::warn!(%error, "reconciler pass failed; will retry");
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

/// Where a slice ends: the end of our payments' time range and how many of
/// the page's charges belong to it.
///
/// `t` is where the slice starts (our clock), `span_end` the furthest it may
/// reach (`t` + the slice span, at most `now`), `page` the charges read after
/// the previous slice's last one and before `span_end` (or, for the last
/// span, before `now` plus the slack), `full` whether the page was full.
///
/// - A page that is not full holds every charge up to `span_end`: the slice
///   is all of it and ends at `span_end`.
/// - A full page ends at its last charge's time: the slice takes the charges
///   before that millisecond (the rest of it comes again in the next page),
///   and our payments before it.
/// - If that time is at or before `t` (more charges in one millisecond than
///   a page), the slice takes the whole page and no payments, and the next
///   page goes on.
/// - If it is at or after `now` (the slack after the window), the slice takes
///   the whole page and every payment up to `now`.
fn slice_end(
    t: OffsetDateTime,
    span_end: OffsetDateTime,
    now: OffsetDateTime,
    full: bool,
    page: &[AcquirerCharge],
) -> (OffsetDateTime, usize) {
    let last = match page.last() {
        Some(last) if full => last.created_at,
        _ => return (span_end, page.len()),
    };
    if last <= t {
        return (t, page.len());
    }
    if last >= now {
        return (now, page.len());
    }
    let end = last.min(span_end);
    let take = page.iter().take_while(|c| c.created_at < end).count();
    (end, take)
}

/// The first slice's span.
const FIRST_SPAN: time::Duration = time::Duration::seconds(10);

/// The next slice's span, after one that covered `covered` of time and held
/// `payments` of ours: aiming at `target` payments, at most twice the last
/// span, at most `longest`, at least a millisecond.
fn next_span(
    span: time::Duration,
    covered: time::Duration,
    payments: u64,
    target: u64,
    longest: time::Duration,
) -> time::Duration {
    if covered <= time::Duration::ZERO {
        return span;
    }
    let grown = span.as_seconds_f64() * 2.0;
    let aimed = if payments == 0 {
        grown
    } else {
        (covered.as_seconds_f64() * target as f64 / payments as f64).min(grown)
    };
    let secs = aimed.min(longest.as_seconds_f64()).max(0.001);
    time::Duration::seconds_f64(secs)
}

/// The verdict on one order's group of succeeded charges.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    /// The charge kept.
    keep: usize,
    /// The other charges that still hold money.
    holding: Vec<usize>,
    /// No charge is named yet and a payment of ours in the group is pending:
    /// which charge to keep is not known, so none is refunded.
    undecided: bool,
}

/// Judges a group (oldest first), each charge with our payment if we have it.
fn judge(group: &[(AcquirerCharge, Option<Payment>)]) -> Verdict {
    let named = group.iter().position(|(charge, payment)| {
        payment.as_ref().is_some_and(|p| {
            p.status == PaymentStatus::Succeeded
                && p.provider_payment_id.as_deref() == Some(charge.id())
        })
    });
    let keep = named
        .or_else(|| group.iter().position(|(c, _)| c.holds_money()))
        .unwrap_or(0);
    let holding = group
        .iter()
        .enumerate()
        .filter(|(i, (c, _))| *i != keep && c.holds_money())
        .map(|(i, _)| i)
        .collect();
    let undecided = named.is_none()
        && group.iter().any(|(_, payment)| {
            payment
                .as_ref()
                .is_some_and(|p| p.status == PaymentStatus::Pending)
        });
    Verdict {
        keep,
        holding,
        undecided,
    }
}

/// Whether a payment and the charge it names agree (a pending payment
/// agrees with anything).
fn agrees(payment: &Payment, charge: &AcquirerCharge) -> bool {
    (match payment.status {
        PaymentStatus::Succeeded => charge.outcome.is_succeeded(),
        PaymentStatus::Declined => !charge.outcome.is_succeeded(),
        PaymentStatus::Pending => true,
    }) && payment.amount == charge.amount
}

fn mismatch(payment: &Payment, charge: &AcquirerCharge) -> Finding {
    Finding {
        kind: FindingKind::Mismatch,
        shop_id: payment.shop_id.to_string(),
        reference: payment.reference.as_str().to_owned(),
        payment_id: Some(payment.id.to_string()),
        charge_ids: vec![charge.id().to_owned()],
        refunded: Vec::new(),
        detail: format!(
            "payment {} {} {}, charge {} {} {}",
            payment.status.as_str(),
            payment.amount.to_decimal_string(),
            payment.amount.currency(),
            if charge.outcome.is_succeeded() {
                "succeeded"
            } else {
                "declined"
            },
            charge.amount.to_decimal_string(),
            charge.amount.currency()
        ),
    }
}

/// Whether the acquirer should know a final payment: all but those it
/// refused without recording an attempt (declined `acquirer_rejected`, no
/// charge id), which it rightly does not know.
fn has_attempt(payment: &Payment) -> bool {
    payment.status != PaymentStatus::Declined || payment.provider_payment_id.is_some()
}

fn missing(payment: &Payment) -> Finding {
    Finding {
        kind: FindingKind::MissingCharge,
        shop_id: payment.shop_id.to_string(),
        reference: payment.reference.as_str().to_owned(),
        payment_id: Some(payment.id.to_string()),
        charge_ids: payment.provider_payment_id.iter().cloned().collect(),
        refunded: Vec::new(),
        detail: format!(
            "our payment is {} but the acquirer has no charge for it",
            payment.status.as_str()
        ),
    }
}

fn orphan(charge: &AcquirerCharge) -> Finding {
    Finding {
        kind: FindingKind::OrphanCharge,
        shop_id: charge.shop_id.to_string(),
        reference: charge.reference.as_str().to_owned(),
        payment_id: None,
        charge_ids: vec![charge.id().to_owned()],
        refunded: Vec::new(),
        detail: format!(
            "{} {} charged for payment {}, which we do not have",
            charge.amount.to_decimal_string(),
            charge.amount.currency(),
            charge.payment_id
        ),
    }
}

/// Whether a final payment's named charge is among `ids`.
fn named_in(payment: &Payment, ids: &HashMap<&str, usize>) -> bool {
    payment
        .provider_payment_id
        .as_deref()
        .is_some_and(|id| ids.contains_key(id))
}

/// One pass in progress.
struct Pass<'a> {
    reconciler: &'a Reconciler,
    config: &'a ReconcilerConfig,
    state: &'a mut ReconcilerState,
    report: &'a mut ReconcileReport,
    now: OffsetDateTime,
    /// The window's start: our payments from here are in the window.
    from: OffsetDateTime,
    /// Our payments from here on are compared by this pass.
    start: OffsetDateTime,
    slack: time::Duration,
    /// The acquirer's charges from here on are compared by this pass.
    charges_from: OffsetDateTime,
    /// An order's group is its succeeded charges in `[group_from, group_to)`.
    group_from: OffsetDateTime,
    group_to: OffsetDateTime,
    /// Charges from here on are read again by the next pass: their orders go
    /// into this pass's filter only.
    reread_from: OffsetDateTime,
    /// Orders of the succeeded charges of this pass's earlier slices.
    seen: Bloom,
    /// The state could not remember something: the next pass is full.
    overflowed: bool,
}

impl Pass<'_> {
    fn find(&mut self, finding: Finding) {
        self.reconciler.find(self.config, self.report, finding);
    }

    fn error(&mut self, error: String) {
        push_error(self.config, self.report, error);
    }

    fn held(&mut self, payments: usize, charges: usize) {
        self.report.peak_payments_held = self.report.peak_payments_held.max(payments);
        self.report.peak_charges_held = self.report.peak_charges_held.max(charges);
    }

    /// Remembers a payment to check again on the next pass.
    fn recheck_later(&mut self, payment: &Payment) {
        if payment.created_at < self.from {
            return;
        }
        let key = (payment.shop_id.clone(), payment.id.clone());
        if self.state.recheck.len() < RECHECK_LIMIT || self.state.recheck.contains(&key) {
            self.state.recheck.insert(key);
        } else {
            self.overflowed = true;
        }
    }

    /// Remembers an order to judge again on the next pass.
    fn revisit_later(&mut self, shop_id: &ShopId, reference: &Reference) {
        let key = (shop_id.clone(), reference.clone());
        if self.state.revisit.len() < REVISIT_LIMIT || self.state.revisit.contains(&key) {
            self.state.revisit.insert(key);
        } else {
            self.overflowed = true;
        }
    }

    /// One payment of ours, from the store.
    async fn payment_of(
        &mut self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, ReconcileError> {
        self.report.store_lookups += 1;
        Ok(self.reconciler.store.payment(shop_id, id).await?)
    }

    /// An order's group: its succeeded charges in the window, oldest first.
    async fn group_of(
        &mut self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<AcquirerCharge>, String> {
        self.report.acquirer_lookups += 1;
        let charges = self
            .reconciler
            .ledger
            .charges_for_reference(shop_id, reference)
            .await
            .map_err(|e| {
                format!(
                    "charges of order {} of shop {shop_id}: {e}",
                    reference.as_str()
                )
            })?;
        let mut group: Vec<AcquirerCharge> = charges
            .into_iter()
            .filter(|c| {
                c.outcome.is_succeeded()
                    && c.created_at >= self.group_from
                    && c.created_at < self.group_to
            })
            .collect();
        group.sort_by(|a, b| (a.created_at, a.id()).cmp(&(b.created_at, b.id())));
        Ok(group)
    }

    /// A final payment whose named charge was not among the charges read
    /// next to it: the acquirer's status look-up decides.
    async fn check_missing(&mut self, payment: &Payment) {
        if !has_attempt(payment) {
            return;
        }
        self.report.acquirer_lookups += 1;
        let known = look_up(
            self.reconciler.acquirer.as_ref(),
            &payment.shop_id,
            &payment.id,
            &payment.acquirer_key,
        )
        .await;
        match known {
            Ok(Some(_)) => {}
            Ok(None) => self.find(missing(payment)),
            Err(error) => {
                self.error(format!("status of payment {}: {error}", payment.id));
                self.recheck_later(payment);
            }
        }
    }

    /// Judges an order's group (two or more succeeded charges, oldest
    /// first, each with our payment if we have it): a finding while an
    /// extra charge holds money, refunds when asked and decided.
    async fn judge_order(
        &mut self,
        shop_id: &ShopId,
        reference: &Reference,
        group: &[(AcquirerCharge, Option<Payment>)],
    ) {
        let verdict = judge(group);
        if verdict.holding.is_empty() {
            // Every extra charge was given back: nothing left to find.
            return;
        }
        let refund = self.config.refund_duplicates;
        if refund && verdict.undecided {
            tracing::warn!(%shop_id, reference = reference.as_str(), "duplicate charges wait for a pending payment to settle before any is refunded");
        }
        let mut refunded = Vec::new();
        let mut failed = false;
        if refund && !verdict.undecided {
            for &i in &verdict.holding {
                let Some((charge, _)) = group.get(i) else {
                    continue;
                };
                match self.reconciler.ledger.refund(charge.id()).await {
                    Ok(done) => {
                        tracing::warn!(charge = charge.id(), refund = %done.id, "duplicate charge refunded");
                        refunded.push(charge.id().to_owned());
                    }
                    Err(error) => {
                        failed = true;
                        self.error(format!("refund of duplicate {}: {error}", charge.id()));
                    }
                }
            }
        }
        if refund && (verdict.undecided || failed) {
            self.revisit_later(shop_id, reference);
        }
        let payment_id = group
            .get(verdict.keep)
            .filter(|(_, payment)| payment.is_some())
            .map(|(charge, _)| charge.payment_id.to_string());
        self.find(Finding {
            kind: FindingKind::DuplicateCharge,
            shop_id: shop_id.to_string(),
            reference: reference.as_str().to_owned(),
            payment_id,
            charge_ids: group.iter().map(|(c, _)| c.id().to_owned()).collect(),
            refunded,
            detail: format!(
                "{} charges for one order, {} more than the one kept still holding money",
                group.len(),
                verdict.holding.len()
            ),
        });
    }

    /// The comparison: for an incremental pass, first what it remembers to
    /// check again, then its range; for a full pass, the whole window.
    async fn run(&mut self, full: bool) -> Result<(), ReconcileError> {
        if !full {
            self.recheck_payments().await?;
            self.revisit_orders().await?;
        }
        self.compare().await
    }

    /// Incremental passes: payments that were pending (or could not be
    /// checked) when their part of the window was compared, now final.
    async fn recheck_payments(&mut self) -> Result<(), ReconcileError> {
        let keys: Vec<(ShopId, PaymentId)> = self.state.recheck.drain().collect();
        for (shop_id, id) in keys {
            let Some(payment) = self.payment_of(&shop_id, &id).await? else {
                continue;
            };
            // Out of the window: no pass compares it any more. In this
            // pass's range: compared there (and remembered again if pending).
            if payment.created_at < self.from || payment.created_at >= self.start {
                continue;
            }
            if !payment.status.is_final() {
                self.recheck_later(&payment);
                continue;
            }
            if !has_attempt(&payment) {
                continue;
            }
            self.report.acquirer_lookups += 1;
            let known = look_up(
                self.reconciler.acquirer.as_ref(),
                &payment.shop_id,
                &payment.id,
                &payment.acquirer_key,
            )
            .await;
            match known {
                Ok(Some(charge)) => {
                    let named = payment.provider_payment_id.as_deref() == Some(charge.id());
                    let in_window = charge.created_at >= self.group_from;
                    // A charge this pass reads is compared with its payment there.
                    let read_here = charge.created_at >= self.charges_from;
                    if named && in_window && !read_here && !agrees(&payment, &charge) {
                        self.find(mismatch(&payment, &charge));
                    }
                }
                Ok(None) => self.find(missing(&payment)),
                Err(error) => {
                    self.error(format!("status of payment {}: {error}", payment.id));
                    self.recheck_later(&payment);
                }
            }
        }
        Ok(())
    }

    /// Incremental passes: orders to judge again (duplicates waiting for a
    /// refund, orders whose look-up failed), from a fresh look-up.
    async fn revisit_orders(&mut self) -> Result<(), ReconcileError> {
        let orders: Vec<(ShopId, Reference)> = self.state.revisit.drain().collect();
        for (shop_id, reference) in orders {
            let charges = match self.group_of(&shop_id, &reference).await {
                Ok(group) => group,
                Err(error) => {
                    self.error(error);
                    self.revisit_later(&shop_id, &reference);
                    continue;
                }
            };
            match charges.last() {
                None => continue,
                // This pass reads the group's latest charge and judges it there.
                Some(latest) if latest.created_at >= self.charges_from => continue,
                Some(_) => {}
            }
            let mut group = Vec::with_capacity(charges.len());
            for charge in charges {
                let payment = self.payment_of(&charge.shop_id, &charge.payment_id).await?;
                group.push((charge, payment));
            }
            self.held(group.len(), group.len());
            match group.as_slice() {
                [(charge, None)] if charge.holds_money() => self.find(orphan(charge)),
                [_] => {}
                _ => self.judge_order(&shop_id, &reference, &group).await,
            }
        }
        Ok(())
    }

    /// Compares this pass's part of the window, slice by slice.
    async fn compare(&mut self) -> Result<(), ReconcileError> {
        let longest = duration(self.config.slice_span).max(time::Duration::MILLISECOND);
        let mut span = FIRST_SPAN.min(longest);
        let target = 2 * u64::from(self.config.batch.max(1));
        let limit = self.config.slice_charges.max(1);
        let charges_to = after(self.now, self.slack);
        // The walk starts where the charges do, the clock slack before the
        // range: our payments there are read (not compared: an earlier pass,
        // or nobody, owns them) so that the charges there find theirs
        // without a look-up each.
        let mut t = self.charges_from;
        let mut cursor: Option<LedgerCursor> = None;
        let mut carry: Vec<Payment> = Vec::new();
        loop {
            let span_end = after(t, span).min(self.now);
            let page_to = if span_end >= self.now {
                charges_to
            } else {
                span_end
            };
            let mut page = self
                .reconciler
                .ledger
                .charges_page(self.charges_from, page_to, cursor.as_ref(), limit)
                .await
                .map_err(|e| ReconcileError::Acquirer(e.to_string()))?;
            let full = page.len() >= limit as usize;
            let (end, take) = slice_end(t, span_end, self.now, full, &page);
            page.truncate(take);
            if let Some(last) = page.last() {
                cursor = Some(LedgerCursor::after(last));
            }
            let payments = self.slice(page, t, end, span, &mut carry).await?;
            span = next_span(span, end - t, payments, target, longest);
            t = end;
            if !full && t >= self.now {
                break;
            }
        }
        for payment in std::mem::take(&mut carry) {
            self.check_missing(&payment).await;
        }
        Ok(())
    }

    /// One slice: `charges` (in ledger order), and our payments created in
    /// `[from, to)`; those before the pass's range are read only to match
    /// charges, the others are compared. `carry` brings the previous slice's
    /// final payments whose named charge it did not hold, and takes this
    /// slice's. Returns how many payments it compared.
    async fn slice(
        &mut self,
        charges: Vec<AcquirerCharge>,
        from: OffsetDateTime,
        to: OffsetDateTime,
        span: time::Duration,
        carry: &mut Vec<Payment>,
    ) -> Result<u64, ReconcileError> {
        let batch = self.config.batch.max(1);
        let mut owned_payments = 0u64;
        self.report.slices += 1;
        self.report.charges_compared += charges.len();
        self.held(carry.len(), charges.len());

        let ids: HashMap<&str, usize> = charges
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id(), i))
            .collect();
        let mut by_payment: HashMap<&PaymentId, Vec<usize>> = HashMap::new();
        for (i, charge) in charges.iter().enumerate() {
            by_payment.entry(&charge.payment_id).or_default().push(i);
        }
        let mut payments: Vec<Option<Payment>> = vec![None; charges.len()];
        let mut attached = 0usize;

        // The previous slice's final payments whose charge came in this one.
        for payment in std::mem::take(carry) {
            if !named_in(&payment, &ids) {
                self.check_missing(&payment).await;
            }
        }

        // Our payments, a page at a time, in ranges of at most a span (a page
        // reads its whole range of the created_at index).
        let owned_from = from.max(self.start);
        let ranges = [(from, owned_from.min(to), false), (owned_from, to, true)];
        for (range_from, range_to, owned) in ranges {
            let mut part_from = range_from;
            while part_from < range_to {
                let part_to = after(part_from, span).min(range_to);
                let mut last: Option<PaymentId> = None;
                loop {
                    let page = self
                        .reconciler
                        .store
                        .payments_created_between(part_from, part_to, last.as_ref(), batch)
                        .await?;
                    let more = page.len() >= batch as usize;
                    last = page.last().map(|p| p.id.clone());
                    self.held(attached + page.len() + carry.len(), charges.len());
                    for payment in page {
                        if let Some(indexes) = by_payment.get(&payment.id) {
                            for &i in indexes {
                                if let (Some(slot), Some(charge)) =
                                    (payments.get_mut(i), charges.get(i))
                                    && slot.is_none()
                                    && charge.shop_id == payment.shop_id
                                {
                                    *slot = Some(payment.clone());
                                    attached += 1;
                                }
                            }
                        }
                        if !owned {
                            continue;
                        }
                        self.report.payments_compared += 1;
                        owned_payments += 1;
                        if !payment.status.is_final() {
                            self.recheck_later(&payment);
                        } else if !named_in(&payment, &ids) {
                            if carry.len() < batch as usize {
                                carry.push(payment);
                            } else {
                                self.check_missing(&payment).await;
                            }
                        }
                    }
                    if !more {
                        break;
                    }
                }
                part_from = part_to;
            }
        }

        // Charges whose payment was not among those pages: one look-up each.
        for (charge, slot) in charges.iter().zip(payments.iter_mut()) {
            if slot.is_none() {
                *slot = self.payment_of(&charge.shop_id, &charge.payment_id).await?;
                if slot.is_some() {
                    attached += 1;
                }
            }
        }
        self.held(attached + carry.len(), charges.len());
        for payment in payments.iter().flatten() {
            if !payment.status.is_final() {
                self.recheck_later(payment);
            }
        }

        // Duplicates: the orders of this slice's succeeded charges.
        let mut orders: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
        for (i, charge) in charges.iter().enumerate() {
            if charge.outcome.is_succeeded() {
                orders
                    .entry((charge.shop_id.as_str(), charge.reference.as_str()))
                    .or_default()
                    .push(i);
            }
        }
        // Per order looked up: whether it has two succeeded charges or more
        // in the window (`None`: the look-up failed).
        let mut grouped: HashMap<(&str, &str), Option<bool>> = HashMap::new();
        for (&(shop, reference), local) in &orders {
            let Some(&first) = local.first() else {
                continue;
            };
            let seen_before = self.seen.may_contain(shop, reference)
                || self.state.references.may_contain(shop, reference);
            if local.len() < 2 && !seen_before {
                continue;
            }
            let Some(charge) = charges.get(first) else {
                continue;
            };
            let (shop_id, order) = (charge.shop_id.clone(), charge.reference.clone());
            let judged = self
                .judge_if_latest(&shop_id, &order, &charges, &payments, &ids)
                .await?;
            grouped.insert((shop, reference), judged);
        }

        // Orphans and mismatches, charge by charge.
        for (charge, payment) in charges.iter().zip(payments.iter()) {
            match payment {
                None if charge.holds_money() => {
                    let key = (charge.shop_id.as_str(), charge.reference.as_str());
                    let in_group = match grouped.get(&key) {
                        Some(known) => *known,
                        None => {
                            let (shop_id, order) =
                                (charge.shop_id.clone(), charge.reference.clone());
                            let looked = self
                                .group_of(&shop_id, &order)
                                .await
                                .map(|group| group.len() >= 2);
                            match looked {
                                Ok(in_group) => Some(in_group),
                                Err(error) => {
                                    self.error(error);
                                    self.revisit_later(&shop_id, &order);
                                    None
                                }
                            }
                        }
                    };
                    // In a group: the group's finding covers it.
                    if in_group == Some(false) {
                        self.find(orphan(charge));
                    }
                }
                Some(payment)
                    if payment.provider_payment_id.as_deref() == Some(charge.id())
                        && !agrees(payment, charge) =>
                {
                    self.find(mismatch(payment, charge));
                }
                // A pending payment's charge (in flight), a declined extra
                // attempt, or an extra charge counted as a duplicate.
                _ => {}
            }
        }

        // Remember this slice's orders for the slices and passes after it.
        for charge in charges.iter().filter(|c| c.outcome.is_succeeded()) {
            let (shop, reference) = (charge.shop_id.as_str(), charge.reference.as_str());
            self.seen.insert(shop, reference);
            if charge.created_at < self.reread_from {
                self.state.references.insert(shop, reference);
            }
        }
        Ok(owned_payments)
    }

    /// Fetches an order's group and judges it if its latest charge is in
    /// this slice (else the slice that holds it does). `Some(true)`: the
    /// order has two succeeded charges or more in the window; `None`: the
    /// look-up failed (reported; the order is judged again next pass).
    async fn judge_if_latest(
        &mut self,
        shop_id: &ShopId,
        reference: &Reference,
        charges: &[AcquirerCharge],
        payments: &[Option<Payment>],
        ids: &HashMap<&str, usize>,
    ) -> Result<Option<bool>, ReconcileError> {
        let group = match self.group_of(shop_id, reference).await {
            Ok(group) => group,
            Err(error) => {
                self.error(error);
                self.revisit_later(shop_id, reference);
                return Ok(None);
            }
        };
        if group.len() < 2 {
            return Ok(Some(false));
        }
        if !group
            .last()
            .is_some_and(|latest| ids.contains_key(latest.id()))
        {
            return Ok(Some(true));
        }
        let mut members = Vec::with_capacity(group.len());
        for charge in group {
            let here = ids.get(charge.id()).and_then(|&i| payments.get(i));
            let payment = match here {
                Some(payment) => payment.clone(),
                None => self.payment_of(&charge.shop_id, &charge.payment_id).await?,
            };
            members.push((charge, payment));
        }
        self.held(
            payments.iter().flatten().count() + members.len(),
            charges.len() + members.len(),
        );
        self.judge_order(shop_id, reference, &members).await;
        Ok(Some(true))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chargeonce_core::{
        AcquirerKey, CardToken, ChargeResult, IdempotencyKey, Money, PaymentRequest,
    };

    fn at(ms: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(ms)
    }

    fn charge(id: &str, ms: i64, succeeded: bool, refunded_minor: i64) -> AcquirerCharge {
        let payment_id = PaymentId::generate();
        AcquirerCharge {
            outcome: if succeeded {
                ChargeResult::Succeeded {
                    provider_payment_id: id.to_owned(),
                }
            } else {
                ChargeResult::Declined {
                    provider_payment_id: id.to_owned(),
                    code: "card_declined".into(),
                }
            },
            acquirer_key: AcquirerKey::for_payment(&payment_id),
            shop_id: ShopId::new("shop").unwrap(),
            payment_id,
            reference: Reference::new("order-1").unwrap(),
            amount: Money::parse("10.00", "RUB").unwrap(),
            refunded_minor,
            created_at: at(ms),
        }
    }

    fn payment_for(charge: &AcquirerCharge, status: PaymentStatus, names: bool) -> Payment {
        let request = PaymentRequest {
            amount: charge.amount,
            reference: charge.reference.clone(),
            token: CardToken::new("tok_ok").unwrap(),
        };
        let mut payment = chargeonce_core::NewPayment::new(
            charge.shop_id.clone(),
            IdempotencyKey::new("k").unwrap(),
            request,
        )
        .to_payment();
        payment.id = charge.payment_id.clone();
        payment.created_at = charge.created_at;
        payment.status = status;
        payment.provider_payment_id = names.then(|| charge.id().to_owned());
        payment
    }

    #[test]
    fn a_page_that_is_not_full_is_the_whole_slice() {
        let page = [charge("a", 5, true, 0), charge("b", 7, true, 0)];
        assert_eq!(slice_end(at(0), at(60), at(100), false, &page), (at(60), 2));
        assert_eq!(slice_end(at(0), at(60), at(100), false, &[]), (at(60), 0));
    }

    #[test]
    fn a_full_page_ends_before_its_last_millisecond() {
        let page = [
            charge("a", 5, true, 0),
            charge("b", 7, true, 0),
            charge("c", 7, true, 0),
        ];
        // The charges of millisecond 7 come again with the next page.
        assert_eq!(slice_end(at(0), at(60), at(100), true, &page), (at(7), 1));
    }

    #[test]
    fn a_full_page_before_the_slice_or_in_one_millisecond_is_taken_whole() {
        let slack = [charge("a", -50, true, 0), charge("b", -40, true, 0)];
        assert_eq!(slice_end(at(0), at(60), at(100), true, &slack), (at(0), 2));
        let dense = [charge("a", 0, true, 0), charge("b", 0, true, 0)];
        assert_eq!(slice_end(at(0), at(60), at(100), true, &dense), (at(0), 2));
        let late = [charge("a", 99, true, 0), charge("b", 130, true, 0)];
        assert_eq!(
            slice_end(at(90), at(100), at(100), true, &late),
            (at(100), 2),
            "the slack after the window: every payment up to now"
        );
    }

    #[test]
    fn slices_grow_over_quiet_time_and_shrink_over_busy_time() {
        let s = time::Duration::seconds;
        let longest = s(600);
        assert_eq!(next_span(s(10), s(10), 0, 1000, longest), s(20), "doubles");
        assert_eq!(next_span(s(400), s(400), 0, 1000, longest), longest);
        assert_eq!(next_span(s(10), s(10), 500, 1000, longest), s(20));
        assert_eq!(next_span(s(10), s(10), 4000, 1000, longest), s_f(2.5));
        assert_eq!(
            next_span(s(10), s(2), 2000, 1000, longest),
            s(1),
            "a short slice"
        );
        assert_eq!(
            next_span(s(10), s(0), 5, 1000, longest),
            s(10),
            "covered nothing"
        );
        assert_eq!(
            next_span(s(1), s(1), u64::MAX, 1000, longest),
            time::Duration::MILLISECOND
        );
    }

    fn s_f(secs: f64) -> time::Duration {
        time::Duration::seconds_f64(secs)
    }

    #[test]
    fn the_charge_a_succeeded_payment_names_is_kept() {
        let first = charge("ch_1", 1, true, 0);
        let ours = charge("ch_2", 2, true, 0);
        let paid = payment_for(&ours, PaymentStatus::Succeeded, true);
        let verdict = judge(&[(first, None), (ours, Some(paid))]);
        assert_eq!(
            verdict,
            Verdict {
                keep: 1,
                holding: vec![0],
                undecided: false
            }
        );
    }

    #[test]
    fn a_refunded_charge_stays_in_its_group_and_hides_nothing() {
        let ours = charge("ch_1", 1, true, 1000);
        let paid = payment_for(&ours, PaymentStatus::Succeeded, true);
        let extra = charge("ch_2", 2, true, 0);
        let verdict = judge(&[(ours, Some(paid)), (extra, None)]);
        assert_eq!((verdict.keep, verdict.holding), (0, vec![1]));
        // Every extra given back: nothing holds money but the one kept.
        let first = charge("ch_1", 1, true, 0);
        let given_back = charge("ch_2", 2, true, 1000);
        assert!(
            judge(&[(first, None), (given_back, None)])
                .holding
                .is_empty()
        );
    }

    #[test]
    fn a_pending_payment_leaves_the_group_undecided() {
        let stray = charge("ch_1", 1, true, 0);
        let ours = charge("ch_2", 2, true, 0);
        let pending = payment_for(&ours, PaymentStatus::Pending, false);
        let verdict = judge(&[(stray, None), (ours, Some(pending))]);
        assert_eq!(
            verdict,
            Verdict {
                keep: 0,
                holding: vec![1],
                undecided: true
            }
        );
    }

    #[test]
    fn without_a_named_charge_the_first_holding_money_is_kept() {
        let refunded = charge("ch_1", 1, true, 1000);
        let second = charge("ch_2", 2, true, 0);
        let third = charge("ch_3", 3, true, 0);
        let verdict = judge(&[(refunded, None), (second, None), (third, None)]);
        assert_eq!((verdict.keep, verdict.holding), (1, vec![2]));
    }

    #[test]
    fn agreement_is_status_and_amount() {
        let c = charge("ch_1", 1, true, 0);
        assert!(agrees(&payment_for(&c, PaymentStatus::Succeeded, true), &c));
        assert!(agrees(&payment_for(&c, PaymentStatus::Pending, true), &c));
        assert!(!agrees(&payment_for(&c, PaymentStatus::Declined, true), &c));
        let declined = charge("ch_2", 1, false, 0);
        assert!(agrees(
            &payment_for(&declined, PaymentStatus::Declined, true),
            &declined
        ));
        let mut other = payment_for(&c, PaymentStatus::Succeeded, true);
        other.amount = Money::parse("11.00", "RUB").unwrap();
        assert!(!agrees(&other, &c));
    }

    #[test]
    fn the_first_pass_is_full_then_incremental_until_full_every() {
        let config = ReconcilerConfig {
            window: Duration::from_secs(3600),
            full_every: Duration::from_secs(6 * 3600),
            ..ReconcilerConfig::default()
        };
        let mut state = ReconcilerState::new();
        let t0 = at(1_800_000_000_000);
        assert!(state.next_pass_is_full(&config, t0));
        state.compared_to = Some(t0);
        state.last_full = Some(t0);
        assert!(!state.next_pass_is_full(&config, t0 + time::Duration::minutes(1)));
        assert!(state.next_pass_is_full(&config, t0 + time::Duration::hours(6)));
        assert!(
            state.next_pass_is_full(&config, t0 + time::Duration::minutes(61)),
            "a gap longer than the window"
        );
        state.full_due = true;
        assert!(state.next_pass_is_full(&config, t0 + time::Duration::minutes(1)));
    }
}
