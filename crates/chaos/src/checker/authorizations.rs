//! The authorizations: what captures took and what releases let go, in
//! the books against the acquirer's ledger.
//!
//! - `captures-within-authorization`: captures never took more than was
//!   authorized, in the books or at the acquirer;
//! - `captures-agree`: each capture the books call succeeded is one
//!   capture of its amount at the acquirer (under its reference), each
//!   failed one none; what a payment's captures took is what the
//!   acquirer's authorization says was captured;
//! - `release-agrees`: a hold the books released is voided at the
//!   acquirer, and an authorization voided at the acquirer is released in
//!   the books;
//! - `no-capture-after-release`: no capture succeeded after its
//!   authorization's rest was released (the payment's history, in order).

use std::collections::HashMap;

use chargeonce_core::CaptureStatus;
use chargeonce_core::history::HistoryEvent;

use super::{Violation, explain, violation};
use crate::evidence;
use crate::truth::{DbCapture, LedgerCharge, Truth};

/// Every authorization's checks.
pub(super) fn check(out: &mut Vec<Violation>, truth: &Truth) {
    let charges: HashMap<&str, &LedgerCharge> =
        truth.charges.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut captures: HashMap<&str, Vec<&DbCapture>> = HashMap::new();
    for c in &truth.captures {
        captures.entry(c.payment_id.as_str()).or_default().push(c);
    }
    for p in truth.payments.iter().filter(|p| p.manual) {
        let from = out.len();
        let charge = p
            .provider_payment_id
            .as_deref()
            .and_then(|id| charges.get(id));
        let mine = captures.get(p.id.as_str()).map_or(&[][..], Vec::as_slice);
        within(out, p.id.as_str(), p.amount_minor, p.captured_minor, charge);
        agree(out, p.id.as_str(), p.captured_minor, mine, charge);
        released(out, p.id.as_str(), &p.hold, charge);
        if let Some(history) = truth.histories.get(&p.id) {
            no_capture_after_release(out, &p.id, history);
        }
        explain(out, from, || evidence::payment_story(truth, &p.id));
    }
}

fn within(
    out: &mut Vec<Violation>,
    payment: &str,
    amount: i64,
    captured: i64,
    charge: Option<&&LedgerCharge>,
) {
    let at_acquirer = charge.map_or(0, |c| c.captured_minor);
    if captured > amount || at_acquirer > amount {
        out.push(violation(
            "captures-within-authorization",
            format!(
                "authorization {payment} of {amount}: the books captured {captured}, the acquirer {at_acquirer}"
            ),
        ));
    }
}

fn agree(
    out: &mut Vec<Violation>,
    payment: &str,
    captured: i64,
    captures: &[&DbCapture],
    charge: Option<&&LedgerCharge>,
) {
    let at_acquirer = charge.map_or(0, |c| c.captured_minor);
    if captured != at_acquirer {
        out.push(violation(
            "captures-agree",
            format!(
                "authorization {payment}: the books captured {captured}, the acquirer {at_acquirer}"
            ),
        ));
    }
    let mut succeeded = 0;
    for c in captures {
        let ok = match CaptureStatus::parse(&c.status) {
            Some(CaptureStatus::Succeeded) => {
                succeeded += c.amount_minor;
                c.at_acquirer == [c.amount_minor]
            }
            Some(CaptureStatus::Failed) => c.at_acquirer.is_empty(),
            // A pending capture is `every-intent-definite`'s.
            Some(CaptureStatus::Pending) | None => true,
        };
        if !ok {
            out.push(violation(
                "captures-agree",
                format!(
                    "capture {} of {payment} is {} for {}, the acquirer holds {:?} under its reference",
                    c.id, c.status, c.amount_minor, c.at_acquirer
                ),
            ));
        }
    }
    if succeeded != captured {
        out.push(violation(
            "captures-agree",
            format!(
                "authorization {payment}: its succeeded captures sum to {succeeded}, its hold says {captured}"
            ),
        ));
    }
}

fn released(out: &mut Vec<Violation>, payment: &str, hold: &str, charge: Option<&&LedgerCharge>) {
    let ours = hold.starts_with("released_");
    let theirs = charge.is_some_and(|c| c.voided);
    if ours != theirs {
        out.push(violation(
            "release-agrees",
            format!(
                "authorization {payment}: the books' hold is {hold:?}, the acquirer {} it",
                if theirs { "voided" } else { "did not void" }
            ),
        ));
    }
}

fn no_capture_after_release(out: &mut Vec<Violation>, payment: &str, history: &[HistoryEvent]) {
    let mut released = false;
    for event in history {
        match event {
            HistoryEvent::ReleaseEnded { released: true, .. } => released = true,
            HistoryEvent::CaptureEnded {
                capture_id,
                status: CaptureStatus::Succeeded,
            } if released => out.push(violation(
                "no-capture-after-release",
                format!("capture {capture_id} of {payment} succeeded after its authorization was released"),
            )),
            _ => {}
        }
    }
}

/// `every-intent-definite` for authorizations: no capture left pending,
/// no hold left closing or releasing.
pub(super) fn definite(out: &mut Vec<Violation>, truth: &Truth) {
    for c in truth.captures.iter().filter(|c| c.status == "pending") {
        out.push(violation(
            "every-intent-definite",
            format!("capture {} of {} is still pending", c.id, c.payment_id),
        ));
    }
    for p in truth
        .payments
        .iter()
        .filter(|p| p.hold == "closing" || p.hold.starts_with("releasing_"))
    {
        out.push(Violation {
            evidence: evidence::payment_story(truth, &p.id),
            ..violation(
                "every-intent-definite",
                format!("authorization {} is still {}", p.id, p.hold),
            )
        });
    }
}
