//! What a pass reports: its findings, the payments it settled, and what it
//! held and asked on the way.
//!
//! Every finding is a metric (`chargeonce_reconciler_findings_total{mode,kind}`),
//! a warning in the log, and a row in the [`ReconcileReport`] (the first
//! [`max_findings`](super::ReconcilerConfig::max_findings) of them; all are
//! counted). Questions that got no answer (the acquirer unreachable...) are
//! kept the same way, and make the report not clean.

use std::collections::BTreeMap;
use std::fmt;

use chargeonce_core::findings::NewFinding;
use serde::{Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub use chargeonce_core::findings::FindingKind;

/// A finding's kind as the report's JSON shows it: its stable label.
fn kind_label<S: Serializer>(kind: &FindingKind, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(kind.as_str())
}

/// The counts per kind as the report's JSON shows them: by label, in the
/// kinds' order.
fn counts_by_label<S: Serializer>(
    counts: &BTreeMap<FindingKind, usize>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(counts.iter().map(|(kind, count)| (kind.as_str(), count)))
}

/// One disagreement between our books and the acquirer's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What kind.
    #[serde(serialize_with = "kind_label")]
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

impl From<&NewFinding> for Finding {
    fn from(found: &NewFinding) -> Self {
        Self {
            kind: found.kind,
            shop_id: found.shop_id.to_string(),
            reference: found.reference.as_str().to_owned(),
            payment_id: found.payment_id.as_ref().map(ToString::to_string),
            charge_ids: found.charge_ids.clone(),
            refunded: found.refunded.clone(),
            detail: found.detail.clone(),
        }
    }
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
    #[serde(serialize_with = "counts_by_label")]
    pub finding_counts: BTreeMap<FindingKind, usize>,
    /// Findings logged and counted but not kept in `findings`.
    pub findings_omitted: usize,
    /// Questions that got no answer this pass (acquirer unreachable...).
    pub errors: Vec<String>,
    /// Errors logged but not kept in `errors`.
    pub errors_omitted: usize,
    /// Every finding of the pass, kept or not, to record in the store
    /// once the pass ends (the report keeps only the first
    /// `max_findings`; the store keeps them all).
    #[serde(skip)]
    pub(super) found: Vec<NewFinding>,
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

impl ReconcileReport {
    /// Counts a finding and keeps it, or, past `max_findings`, counts it as
    /// omitted (the caller has logged it).
    pub(super) fn keep_finding(&mut self, max_findings: usize, finding: NewFinding) {
        *self.finding_counts.entry(finding.kind).or_default() += 1;
        if self.findings.len() < max_findings {
            self.findings.push(Finding::from(&finding));
        } else {
            self.findings_omitted += 1;
        }
        self.found.push(finding);
    }

    /// Records a question that got no answer: in the report (the pass's log
    /// line counts them), or, past `max_findings`, in the log only.
    pub(super) fn push_error(&mut self, max_findings: usize, error: String) {
        if self.errors.len() < max_findings {
            self.errors.push(error);
        } else {
            tracing::warn!(%error, "reconciler question without an answer (not kept in the report)");
            self.errors_omitted += 1;
        }
    }
}

/// A time as the report shows it (RFC 3339).
pub(super) fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chargeonce_core::{PaymentId, Reference, ShopId};

    use super::*;

    #[test]
    fn the_json_shows_kinds_by_their_labels() {
        let found = NewFinding {
            kind: FindingKind::DuplicateCharge,
            shop_id: ShopId::new("shop_a").unwrap(),
            reference: Reference::new("order-1").unwrap(),
            payment_id: Some(PaymentId::generate()),
            charge_ids: vec!["ch_1".into(), "ch_2".into()],
            amount: None,
            detail: "two".into(),
            refunded: vec!["ch_2".into()],
        };
        let mut report = ReconcileReport::default();
        report.keep_finding(1, found.clone());
        report.keep_finding(
            1,
            NewFinding {
                kind: FindingKind::OrphanCharge,
                ..found
            },
        );
        assert_eq!(report.found.len(), 2, "every finding is kept to record");
        assert_eq!(report.findings_omitted, 1);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["findings"][0]["kind"], "duplicate_charge");
        assert_eq!(json["findings"][0]["refunded"][0], "ch_2");
        assert_eq!(
            json["finding_counts"],
            serde_json::json!({"duplicate_charge": 1, "orphan_charge": 1})
        );
        assert!(json.get("found").is_none());
    }
}
