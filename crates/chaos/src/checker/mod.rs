//! The checker: what the clients saw (the history), what the database holds
//! and what the acquirer's ledger says moved, held against the money
//! invariants of PRODUCT.md. It is a pure function of its inputs, so it is
//! tested on hand-made histories that break each invariant.
//!
//! [`check`] runs each invariant's check in turn, each in the module of
//! what it reads: [`books`] (the charges, orders and money against the
//! ledger), [`settlement`] (each payment's history), [`authorizations`]
//! (captures and releases against the ledger), [`answers`] (what each
//! client was told) and [`replays`] (each key's answers alike).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::evidence;
use crate::history::CallRecord;
use crate::intent::Intent;
use crate::truth::{DbPayment, LedgerCharge, Truth};

mod answers;
mod authorizations;
mod books;
mod replays;
mod settlement;

/// A definitive answer: its status and the SHA-256 of its body.
type Definitive = (u16, [u8; 32]);

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Which invariant (a stable name).
    pub invariant: &'static str,
    /// What exactly.
    pub detail: String,
    /// What explains it, a line each ([`crate::evidence`]): the answers and
    /// the calls concerned, the payment as the database holds it, its
    /// charges in the ledger and its history.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
}

fn violation(invariant: &'static str, detail: String) -> Violation {
    Violation {
        invariant,
        detail,
        evidence: Vec::new(),
    }
}

/// Gives the violations pushed since `from` this evidence (where they have none yet).
fn explain(out: &mut [Violation], from: usize, evidence: impl Fn() -> Vec<String>) {
    for v in out.iter_mut().skip(from).filter(|v| v.evidence.is_empty()) {
        v.evidence = evidence();
    }
}

/// The truth looked up the ways the checks need it.
struct Index<'a> {
    /// The database's payments by id.
    payments: HashMap<&'a str, &'a DbPayment>,
    /// The ledger's succeeded charges by the payment they carried.
    succeeded_charges: HashMap<&'a str, Vec<&'a LedgerCharge>>,
    /// The canceled payments: their charges (landed after the cancel) must
    /// all be given back, and count for no order and no total.
    canceled: HashSet<&'a str>,
}

impl<'a> Index<'a> {
    fn of(truth: &'a Truth) -> Self {
        let mut succeeded_charges: HashMap<&str, Vec<&LedgerCharge>> = HashMap::new();
        for charge in truth.charges.iter().filter(|c| c.succeeded) {
            succeeded_charges
                .entry(charge.payment_id.as_str())
                .or_default()
                .push(charge);
        }
        Self {
            payments: truth.payments.iter().map(|p| (p.id.as_str(), p)).collect(),
            succeeded_charges,
            canceled: truth
                .payments
                .iter()
                .filter(|p| p.status == "canceled")
                .map(|p| p.id.as_str())
                .collect(),
        }
    }

    /// A succeeded charge of a payment not canceled, and not an
    /// authorization released with nothing captured (which frees its
    /// order): what the customer paid (or holds) for an order.
    fn kept(&self, charge: &LedgerCharge) -> bool {
        let released_empty = charge.manual && charge.voided && charge.captured_minor == 0;
        charge.succeeded && !released_empty && !self.canceled.contains(charge.payment_id.as_str())
    }
}

/// Checks every invariant; returns the violations (none: the run is clean).
pub fn check(
    intents: &[Intent],
    shops: &[String],
    calls: &[CallRecord],
    truth: &Truth,
) -> Vec<Violation> {
    let index = Index::of(truth);
    let mut out = Vec::new();
    definite(&mut out, truth);
    books::charges(&mut out, truth, &index);
    books::orders(&mut out, truth, &index);
    books::money(&mut out, truth, &index);
    settlement::check(&mut out, truth);
    authorizations::check(&mut out, truth);
    answers::check(&mut out, intents, shops, calls, truth, &index);
    replays::check(&mut out, calls, truth);
    out
}

/// `every-intent-definite`: no payment or refund left pending;
/// `pending-queue-agrees`: the pending queue is the pending payments (a
/// settle that left its payment queued, or a claim that queued none, shows
/// here).
fn definite(out: &mut Vec<Violation>, truth: &Truth) {
    for p in truth.payments.iter().filter(|p| p.status == "pending") {
        out.push(Violation {
            evidence: evidence::payment_story(truth, &p.id),
            ..violation(
                "every-intent-definite",
                format!(
                    "payment {} ({}/{}) is still pending",
                    p.id, p.shop_id, p.reference
                ),
            )
        });
    }
    for r in truth.refunds.iter().filter(|r| r.status == "pending") {
        out.push(violation(
            "every-intent-definite",
            format!("refund {} of {} is still pending", r.id, r.payment_id),
        ));
    }
    authorizations::definite(out, truth);
    if truth.pending_counted != truth.pending_rows {
        out.push(violation(
            "pending-queue-agrees",
            format!(
                "the store counts {} pending payments, the rows say {}",
                truth.pending_counted, truth.pending_rows
            ),
        ));
    }
}

#[cfg(test)]
mod tests;
