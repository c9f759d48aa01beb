//! The reconciler: makes our books and the acquirer's agree, and says where
//! they do not.
//!
//! One pass ([`Reconciler::reconcile_once`]):
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
//! a warning in the log, and a row in the [`ReconcileReport`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::acquirer::look_up;
use chargeonce_core::{
    Acquirer, AcquirerCharge, AcquirerLedger, Observer, Payment, PaymentId, PaymentStatus,
    SettleOutcome, Store, StoreError,
};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::task::JoinHandle;

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
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            pending_after: Duration::from_secs(30),
            window: Duration::from_secs(24 * 60 * 60),
            batch: 500,
            refund_duplicates: false,
        }
    }
}

/// Slack around the window for the difference between our clock and the acquirer's.
const CLOCK_SLACK: time::Duration = time::Duration::minutes(5);

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

/// What one pass found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    /// Start of the compared window (RFC 3339).
    pub window_from: String,
    /// End of the compared window (RFC 3339).
    pub window_to: String,
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
    /// The disagreements.
    pub findings: Vec<Finding>,
    /// Questions that got no answer this pass (acquirer unreachable...).
    pub errors: Vec<String>,
}

impl ReconcileReport {
    /// No finding and no unanswered question.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty() && self.errors.is_empty()
    }

    /// Findings counted per kind.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for finding in &self.findings {
            *counts.entry(finding.kind.as_str()).or_default() += 1;
        }
        counts
    }
}

impl fmt::Display for ReconcileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "reconciliation of {} .. {}",
            self.window_from, self.window_to
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
        if self.findings.is_empty() {
            writeln!(f, "findings: none")?;
        } else {
            writeln!(f, "findings: {}", self.findings.len())?;
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
        for error in &self.errors {
            writeln!(f, "  error: {error}")?;
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

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

impl Reconciler {
    fn find(&self, report: &mut ReconcileReport, finding: Finding) {
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
        report.findings.push(finding);
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
                    report
                        .errors
                        .push(format!("status of payment {}: {error}", payment.id));
                    continue;
                }
            };
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

    /// Our payments created in a window, every page.
    async fn payments_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        batch: u32,
    ) -> Result<Vec<Payment>, ReconcileError> {
        let mut all = Vec::new();
        let mut after: Option<PaymentId> = None;
        loop {
            let page = self
                .store
                .payments_created_between(from, to, after.as_ref(), batch.max(1))
                .await?;
            let full = page.len() >= batch.max(1) as usize;
            after = page.last().map(|p| p.id.clone());
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// Step 2: compares the books over the window.
    async fn compare(
        &self,
        config: &ReconcilerConfig,
        report: &mut ReconcileReport,
        now: OffsetDateTime,
    ) -> Result<(), ReconcileError> {
        let window = time::Duration::try_from(config.window).unwrap_or(time::Duration::DAY);
        let from = now - window;
        report.window_from = rfc3339(from);
        report.window_to = rfc3339(now);
        let charges = self
            .ledger
            .charges_between(from - CLOCK_SLACK, now + CLOCK_SLACK)
            .await
            .map_err(|e| ReconcileError::Acquirer(e.to_string()))?;
        let ours = self.payments_between(from, now, config.batch).await?;
        report.charges_compared = charges.len();
        report.payments_compared = ours.len();
        let mut payments: HashMap<PaymentId, Payment> =
            ours.into_iter().map(|p| (p.id.clone(), p)).collect();
        let compared: HashSet<PaymentId> = payments.keys().cloned().collect();

        // Payments of charges outside our window (clock slack, long pendings).
        for charge in &charges {
            if !payments.contains_key(&charge.payment_id)
                && let Some(payment) = self
                    .store
                    .payment(&charge.shop_id, &charge.payment_id)
                    .await?
            {
                payments.insert(payment.id.clone(), payment);
            }
        }

        // Succeeded charges per order: more than one is a duplicate while an
        // extra one still holds money. A charge refunded in full (the
        // merchant refunded the order) still counts in its group: it must not
        // hide a duplicate that holds money.
        let mut per_order: BTreeMap<(String, String), Vec<&AcquirerCharge>> = BTreeMap::new();
        for charge in charges.iter().filter(|c| c.outcome.is_succeeded()) {
            per_order
                .entry((
                    charge.shop_id.to_string(),
                    charge.reference.as_str().to_owned(),
                ))
                .or_default()
                .push(charge);
        }
        let mut in_duplicates: HashSet<&str> = HashSet::new();
        for ((shop_id, reference), group) in &per_order {
            if group.len() < 2 {
                continue;
            }
            // Keep the charge a succeeded payment of ours names; else the
            // first that holds money.
            let named = group.iter().position(|c| {
                payments.get(&c.payment_id).is_some_and(|p| {
                    p.status == PaymentStatus::Succeeded
                        && p.provider_payment_id.as_deref() == Some(c.id())
                })
            });
            let keep = named
                .or_else(|| group.iter().position(|c| c.holds_money()))
                .unwrap_or(0);
            let holding: Vec<&AcquirerCharge> = group
                .iter()
                .enumerate()
                .filter(|(i, c)| *i != keep && c.holds_money())
                .map(|(_, c)| *c)
                .collect();
            in_duplicates.extend(group.iter().map(|c| c.id()));
            if holding.is_empty() {
                // Every extra charge was given back: nothing left to find.
                continue;
            }
            // While a payment of ours in the group is still pending, which charge
            // is the one to keep is not known yet: refunding "all but the first"
            // could refund the very charge that payment settles on. Report the
            // duplicate now, refund on a later pass once the payment settled.
            let undecided = named.is_none()
                && group.iter().any(|c| {
                    payments
                        .get(&c.payment_id)
                        .is_some_and(|p| p.status == PaymentStatus::Pending)
                });
            if config.refund_duplicates && undecided {
                tracing::warn!(%shop_id, %reference, "duplicate charges wait for a pending payment to settle before any is refunded");
            }
            let mut refunded = Vec::new();
            if config.refund_duplicates && !undecided {
                for charge in &holding {
                    match self.ledger.refund(charge.id()).await {
                        Ok(refund) => {
                            tracing::warn!(charge = charge.id(), refund = %refund.id, "duplicate charge refunded");
                            refunded.push(charge.id().to_owned());
                        }
                        Err(error) => report
                            .errors
                            .push(format!("refund of duplicate {}: {error}", charge.id())),
                    }
                }
            }
            let payment_id = group
                .get(keep)
                .filter(|c| payments.contains_key(&c.payment_id))
                .map(|c| c.payment_id.to_string());
            self.find(
                report,
                Finding {
                    kind: FindingKind::DuplicateCharge,
                    shop_id: shop_id.clone(),
                    reference: reference.clone(),
                    payment_id,
                    charge_ids: group.iter().map(|c| c.id().to_owned()).collect(),
                    refunded,
                    detail: format!(
                        "{} charges for one order, {} more than the one kept still holding money",
                        group.len(),
                        holding.len()
                    ),
                },
            );
        }

        for charge in &charges {
            let payment = payments.get(&charge.payment_id);
            match payment {
                None if charge.holds_money() && !in_duplicates.contains(charge.id()) => self.find(
                    report,
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
                    },
                ),
                Some(payment) if payment.provider_payment_id.as_deref() == Some(charge.id()) => {
                    let agrees = match payment.status {
                        PaymentStatus::Succeeded => charge.outcome.is_succeeded(),
                        PaymentStatus::Declined => !charge.outcome.is_succeeded(),
                        PaymentStatus::Pending => true,
                    } && payment.amount == charge.amount;
                    if !agrees {
                        self.find(
                            report,
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
                            },
                        );
                    }
                }
                // A pending payment's charge (in flight), a declined extra
                // attempt, or an extra charge counted as a duplicate above.
                _ => {}
            }
        }

        // Our final payments in the window that the acquirer does not know.
        let listed: HashSet<&str> = charges.iter().map(|c| c.id()).collect();
        for id in &compared {
            let Some(payment) = payments.get(id) else {
                continue;
            };
            if !payment.status.is_final() {
                continue;
            }
            if payment
                .provider_payment_id
                .as_deref()
                .is_some_and(|p| listed.contains(p))
            {
                continue;
            }
            let known = look_up(
                self.acquirer.as_ref(),
                &payment.shop_id,
                &payment.id,
                &payment.acquirer_key,
            )
            .await;
            match known {
                Ok(Some(_)) => {}
                Ok(None) => self.find(
                    report,
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
                    },
                ),
                Err(error) => report
                    .errors
                    .push(format!("status of payment {}: {error}", payment.id)),
            }
        }
        report.findings.sort_by(|a, b| {
            (a.kind, &a.shop_id, &a.reference).cmp(&(b.kind, &b.shop_id, &b.reference))
        });
        Ok(())
    }

    /// One pass: resolve pending payments, then compare the books.
    pub async fn reconcile_once(
        &self,
        config: &ReconcilerConfig,
    ) -> Result<ReconcileReport, ReconcileError> {
        let mut report = ReconcileReport::default();
        self.resolve_pending(config, &mut report).await?;
        self.compare(config, &mut report, OffsetDateTime::now_utc())
            .await?;
        Ok(report)
    }

    /// Starts the reconciler on the current runtime; abort the handle to stop it.
    pub fn spawn(self, config: ReconcilerConfig) -> JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                match self.reconcile_once(&config).await {
                    Ok(report) if !report.is_clean() || !report.resolved.is_empty() => {
                        tracing::info!(
                            resolved = report.resolved.len(),
                            findings = report.findings.len(),
                            errors = report.errors.len(),
                            "reconciler pass"
                        );
                    }
                    Ok(_) => {}
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
