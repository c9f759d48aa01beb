//! Reconciliation findings, persisted: what the reconciler found wrong
//! between our books and the acquirer's, kept until an operator (or the
//! reconciler's own `refund_duplicates`) resolves it.
//!
//! A finding is identified by what it is about (its kind, shop, order and
//! charges: [`NewFinding::identity`]): seeing it again on a later pass
//! updates its last sighting, never adds a second row.

use time::OffsetDateTime;

use crate::{Money, PaymentId, Reference, ShopId};

/// A finding's id (the store's sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FindingId(pub i64);

impl std::fmt::Display for FindingId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What kind of disagreement a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// Every kind.
    pub const ALL: [Self; 4] = [
        Self::DuplicateCharge,
        Self::OrphanCharge,
        Self::MissingCharge,
        Self::Mismatch,
    ];

    /// The stable label (`duplicate_charge`, `orphan_charge`, `missing_charge`, `mismatch`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::DuplicateCharge => "duplicate_charge",
            Self::OrphanCharge => "orphan_charge",
            Self::MissingCharge => "missing_charge",
            Self::Mismatch => "mismatch",
        }
    }

    /// Parses a label.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == s)
    }
}

/// A finding as a reconciler pass reports it, to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFinding {
    /// What kind.
    pub kind: FindingKind,
    /// The shop.
    pub shop_id: ShopId,
    /// The order reference.
    pub reference: Reference,
    /// Our payment, when we have one.
    pub payment_id: Option<PaymentId>,
    /// The acquirer charges involved (sorted, for the identity).
    pub charge_ids: Vec<String>,
    /// The money involved, when known (a duplicate's extra charges, an
    /// orphan's charge).
    pub amount: Option<Money>,
    /// In words.
    pub detail: String,
    /// Charges this pass refunded because of it (then it is resolved as
    /// [`Resolution::Refunded`]).
    pub refunded: Vec<String>,
}

impl NewFinding {
    /// What identifies the finding across passes: kind, shop, order and
    /// sorted charge ids.
    pub fn identity(&self) -> String {
        let mut charges = self.charge_ids.clone();
        charges.sort();
        format!(
            "{}|{}|{}|{}",
            self.kind.as_str(),
            self.shop_id,
            self.reference.as_str(),
            charges.join(",")
        )
    }
}

/// How a finding was resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The reconciler refunded the extra charges (`refund_duplicates`).
    Refunded {
        /// The charges refunded.
        charge_ids: Vec<String>,
    },
    /// An operator marked it resolved, with a note.
    Manual {
        /// Who (the operator's name as the console knows it).
        by: String,
        /// Why.
        note: String,
    },
}

impl Resolution {
    /// The stable label (`refunded`, `manual`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Refunded { .. } => "refunded",
            Self::Manual { .. } => "manual",
        }
    }
}

/// A persisted finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Its id.
    pub id: FindingId,
    /// What kind.
    pub kind: FindingKind,
    /// The shop.
    pub shop_id: ShopId,
    /// The order reference.
    pub reference: Reference,
    /// Our payment, when we have one.
    pub payment_id: Option<PaymentId>,
    /// The acquirer charges involved.
    pub charge_ids: Vec<String>,
    /// The money involved, when known.
    pub amount: Option<Money>,
    /// In words (as last seen).
    pub detail: String,
    /// First seen, by the store's clock.
    pub first_seen: OffsetDateTime,
    /// Last seen.
    pub last_seen: OffsetDateTime,
    /// How many passes saw it.
    pub seen: u64,
    /// How and when it was resolved, if it was.
    pub resolved: Option<(Resolution, OffsetDateTime)>,
}

/// Which findings to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FindingQuery {
    /// Only resolved (`Some(true)`) or open (`Some(false)`) ones.
    pub resolved: Option<bool>,
    /// Only of this kind.
    pub kind: Option<FindingKind>,
    /// Only of this shop.
    pub shop_id: Option<ShopId>,
    /// Only about this payment.
    pub payment_id: Option<PaymentId>,
    /// At most this many, newest (last seen) first.
    pub limit: u32,
}
