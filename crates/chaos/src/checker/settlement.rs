//! `history-has-one-settlement`: each payment's history tells how it
//! ended, once, and no acquirer answer in it says otherwise.

use chargeonce_core::history::HistoryEvent;
use chargeonce_core::{AcquirerCall, AcquirerOutcomeKind, PaymentStatus};

use super::{Violation, explain, violation};
use crate::evidence;
use crate::truth::{DbPayment, Truth};

/// Every final payment's history, checked.
pub(super) fn check(out: &mut Vec<Violation>, truth: &Truth) {
    for p in &truth.payments {
        let events = truth
            .histories
            .get(p.id.as_str())
            .map_or(&[][..], Vec::as_slice);
        let from = out.len();
        one_settlement(out, p, events);
        explain(out, from, || evidence::payment_story(truth, &p.id));
    }
}

/// `history-has-one-settlement`: a succeeded payment's history settles it
/// to succeeded exactly once, and no charge the acquirer declined says
/// otherwise; a declined payment's settles it to declined exactly once,
/// never to succeeded, and no charge the acquirer took says otherwise. (A
/// pending payment is `every-intent-definite`'s.)
fn one_settlement(out: &mut Vec<Violation>, p: &DbPayment, events: &[HistoryEvent]) {
    let settled = |status: PaymentStatus| {
        events
            .iter()
            .filter(|e| matches!(e, HistoryEvent::Settled { status: s, .. } if *s == status))
            .count()
    };
    let charged = |outcome: AcquirerOutcomeKind| {
        events
            .iter()
            .filter(|e| {
                matches!(e, HistoryEvent::AcquirerCall { call: AcquirerCall::Charge, outcome: o, .. } if *o == outcome)
            })
            .count()
    };
    let succeeded = events.iter().filter(|e| e.settled_succeeded()).count();
    let declined = settled(PaymentStatus::Declined);
    let canceled = settled(PaymentStatus::Canceled);
    let mut broken = |what: String| {
        out.push(violation(
            "history-has-one-settlement",
            format!("payment {} ({}): {what}", p.id, p.status),
        ));
    };
    match p.status.as_str() {
        "succeeded" => {
            if succeeded != 1 {
                broken(format!(
                    "its history settles it to succeeded {succeeded} times"
                ));
            }
            if declined > 0 {
                broken(format!(
                    "its history settles it to declined {declined} times"
                ));
            }
            let refused = charged(AcquirerOutcomeKind::Declined);
            if refused > 0 {
                broken(format!(
                    "its history has {refused} charge(s) the acquirer declined"
                ));
            }
        }
        "canceled" if canceled != 1 || succeeded > 0 || declined > 0 => {
            broken(format!(
                "its history settles it {canceled} time(s) canceled, {succeeded} succeeded, \
                 {declined} declined"
            ));
        }
        "declined" => {
            if declined != 1 {
                broken(format!(
                    "its history settles it to declined {declined} times"
                ));
            }
            if succeeded > 0 {
                broken(format!(
                    "its history settles it to succeeded {succeeded} times"
                ));
            }
            let taken = charged(AcquirerOutcomeKind::Succeeded);
            if taken > 0 {
                broken(format!(
                    "its history has {taken} charge(s) the acquirer took"
                ));
            }
        }
        _ => {}
    }
}
