//! The judgement: pure functions that say, from the charges and payments in
//! hand, what disagrees. No I/O: the pass reads, looks up and refunds; these
//! only decide.
//!
//! The window's charges are those the acquirer recorded in `[now - window -
//! slack, now + slack)` by its clock; our payments are those created in
//! `[now - window, now)` by ours
//! ([`clock_slack`](super::ReconcilerConfig::clock_slack), 5 min).
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

use std::collections::HashMap;

use chargeonce_core::authorization::Hold;
use chargeonce_core::findings::{FindingKind, NewFinding};
use chargeonce_core::{
    AcquirerCharge, Money, Payment, PaymentStatus, Reference, ShopId, ShownStatus,
};

/// The verdict on one order's group of succeeded charges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Verdict {
    /// The charge kept.
    pub(super) keep: usize,
    /// The other charges that still hold money.
    pub(super) holding: Vec<usize>,
    /// No charge is named yet and a payment of ours in the group is pending:
    /// which charge to keep is not known, so none is refunded.
    pub(super) undecided: bool,
}

/// Judges a group (oldest first), each charge with our payment if we have it.
pub(super) fn judge(group: &[(AcquirerCharge, Option<Payment>)]) -> Verdict {
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
pub(super) fn agrees(payment: &Payment, charge: &AcquirerCharge) -> bool {
    (match payment.status {
        PaymentStatus::Succeeded => {
            charge.outcome.is_succeeded() && captures_agree(payment, charge)
        }
        PaymentStatus::Declined => !charge.outcome.is_succeeded(),
        PaymentStatus::Canceled => !charge.holds_money(),
        PaymentStatus::Pending => true,
    }) && payment.amount == charge.amount
}

/// Whether an authorization's captures are what the acquirer's
/// authorization says it captured. Judged only once the hold is final
/// (captured, or released): while it is open a capture may be claimed
/// between the reads of the books and of the ledger, and one in flight
/// is the books' until it ends.
fn captures_agree(payment: &Payment, charge: &AcquirerCharge) -> bool {
    match payment.authorization() {
        Some(hold) if matches!(hold.hold(), Hold::Captured | Hold::Released(_)) => {
            hold.captured_minor() == charge.taken_minor
        }
        _ => true,
    }
}

/// A payment that disagrees with the charge it names.
pub(super) fn mismatch(payment: &Payment, charge: &AcquirerCharge) -> NewFinding {
    NewFinding {
        kind: FindingKind::Mismatch,
        shop_id: payment.shop_id.clone(),
        reference: payment.reference.clone(),
        payment_id: Some(payment.id.clone()),
        charge_ids: vec![charge.id().to_owned()],
        // The money the acquirer moved (or refused) for it.
        amount: Some(charge.amount),
        refunded: Vec::new(),
        detail: match payment.authorization() {
            Some(hold) => format!(
                "authorization {} captured {} minor units of {} {}, the acquirer's captured {}",
                ShownStatus::of(payment).as_str(),
                hold.captured_minor(),
                payment.amount.to_decimal_string(),
                payment.amount.currency(),
                charge.taken_minor
            ),
            None => format!(
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
    }
}

/// Whether the acquirer should know a final payment: all but those it
/// refused without recording an attempt (declined `acquirer_rejected`, no
/// charge id), which it rightly does not know.
pub(super) fn has_attempt(payment: &Payment) -> bool {
    // A canceled payment names no charge: a look-up found none.
    !payment.status.frees_order() || payment.provider_payment_id.is_some()
}

/// A charge that landed for a payment we canceled (a look-up after the
/// settle window found none, and the merchant was told nothing was
/// taken), with the charges refunded because of it.
pub(super) fn charge_after_cancel(
    payment: &Payment,
    charge: &AcquirerCharge,
    refunded: Vec<String>,
) -> NewFinding {
    NewFinding {
        kind: FindingKind::Mismatch,
        shop_id: payment.shop_id.clone(),
        reference: payment.reference.clone(),
        payment_id: Some(payment.id.clone()),
        charge_ids: vec![charge.id().to_owned()],
        amount: Some(charge.amount),
        detail: format!(
            "payment canceled, but charge {} of {} {} landed after it{}",
            charge.id(),
            charge.amount.to_decimal_string(),
            charge.amount.currency(),
            if refunded.is_empty() {
                "; its refund failed and is tried again"
            } else {
                ": refunded in full"
            }
        ),
        refunded,
    }
}

/// A final payment the acquirer does not know.
pub(super) fn missing(payment: &Payment) -> NewFinding {
    NewFinding {
        kind: FindingKind::MissingCharge,
        shop_id: payment.shop_id.clone(),
        reference: payment.reference.clone(),
        payment_id: Some(payment.id.clone()),
        charge_ids: payment.provider_payment_id.iter().cloned().collect(),
        // What our books say was (or was not) taken.
        amount: Some(payment.amount),
        refunded: Vec::new(),
        detail: format!(
            "our payment is {} but the acquirer has no charge for it",
            payment.status.as_str()
        ),
    }
}

/// Money held for a payment we do not have.
pub(super) fn orphan(charge: &AcquirerCharge) -> NewFinding {
    NewFinding {
        kind: FindingKind::OrphanCharge,
        shop_id: charge.shop_id.clone(),
        reference: charge.reference.clone(),
        payment_id: None,
        charge_ids: vec![charge.id().to_owned()],
        amount: Some(charge.amount),
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
pub(super) fn named_in(payment: &Payment, ids: &HashMap<&str, usize>) -> bool {
    payment
        .provider_payment_id
        .as_deref()
        .is_some_and(|id| ids.contains_key(id))
}

/// An order whose extra charges still hold money (`verdict` on `group`,
/// oldest first), with the charges refunded because of it.
pub(super) fn duplicate(
    shop_id: &ShopId,
    reference: &Reference,
    group: &[(AcquirerCharge, Option<Payment>)],
    verdict: &Verdict,
    refunded: Vec<String>,
) -> NewFinding {
    let payment_id = group
        .get(verdict.keep)
        .filter(|(_, payment)| payment.is_some())
        .map(|(charge, _)| charge.payment_id.clone());
    NewFinding {
        kind: FindingKind::DuplicateCharge,
        shop_id: shop_id.clone(),
        reference: reference.clone(),
        payment_id,
        charge_ids: group.iter().map(|(c, _)| c.id().to_owned()).collect(),
        amount: extra_amount(group, &verdict.holding),
        refunded,
        detail: format!(
            "{} charges for one order, {} more than the one kept still holding money",
            group.len(),
            verdict.holding.len()
        ),
    }
}

/// What the extra charges of a duplicate (`holding`, indexes into `group`)
/// took together: `None` when there are none, or they are not of one
/// currency (the acquirer charges an order in its payment's currency, so
/// that is never expected).
fn extra_amount(group: &[(AcquirerCharge, Option<Payment>)], holding: &[usize]) -> Option<Money> {
    let mut extras = holding
        .iter()
        .filter_map(|&i| group.get(i))
        .map(|(c, _)| c.amount);
    let first = extras.next()?;
    let mut minor = first.minor_units();
    for amount in extras {
        if amount.currency() != first.currency() {
            return None;
        }
        minor = minor.checked_add(amount.minor_units())?;
    }
    Money::from_minor(minor, first.currency()).ok()
}

/// Whether a slice fetches an order's whole group from the acquirer: when
/// it holds two succeeded charges of the order or more, or the order may
/// have had one in an earlier slice or pass (the Bloom filters say so).
pub(super) fn needs_group(charges_here: usize, seen_before: bool) -> bool {
    charges_here >= 2 || seen_before
}

/// What one charge of a slice says on its own, with our payment if we have
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ChargeVerdict {
    /// Money held for a payment we do not have: an orphan, unless its order
    /// has two succeeded charges or more in the window (then it is part of a
    /// duplicate, and the group's finding covers it).
    OrphanUnlessGrouped,
    /// The charge our payment names disagrees with it.
    Mismatch(NewFinding),
    /// Money held for a payment we canceled: it landed after the cancel's
    /// look-up, and is refunded.
    AfterCancel,
    /// Nothing to find: a pending payment's charge (in flight), a declined
    /// extra attempt, or an extra charge counted as a duplicate.
    Nothing,
}

/// Judges one charge with our payment, if we have it.
pub(super) fn check_charge(charge: &AcquirerCharge, payment: Option<&Payment>) -> ChargeVerdict {
    match payment {
        None if charge.holds_money() => ChargeVerdict::OrphanUnlessGrouped,
        Some(payment) if payment.status == PaymentStatus::Canceled && charge.holds_money() => {
            ChargeVerdict::AfterCancel
        }
        Some(payment)
            if payment.provider_payment_id.as_deref() == Some(charge.id())
                && !agrees(payment, charge) =>
        {
            ChargeVerdict::Mismatch(mismatch(payment, charge))
        }
        _ => ChargeVerdict::Nothing,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::fixtures::{charge, payment_for};
    use super::*;

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
    fn a_charge_that_holds_money_for_a_canceled_payment_is_refunded() {
        let late = charge("ch_1", 1, true, 0);
        let canceled = payment_for(&late, PaymentStatus::Canceled, false);
        assert_eq!(
            check_charge(&late, Some(&canceled)),
            ChargeVerdict::AfterCancel
        );
        assert!(
            !has_attempt(&canceled),
            "a canceled payment names no charge"
        );
        // Given back already: nothing to do.
        let given_back = charge("ch_2", 1, true, 1000);
        assert_eq!(
            check_charge(&given_back, Some(&canceled)),
            ChargeVerdict::Nothing
        );
        let finding = charge_after_cancel(&canceled, &late, vec!["ch_1".into()]);
        assert_eq!(finding.refunded, vec!["ch_1".to_owned()]);
        assert_eq!(finding.payment_id, Some(canceled.id.clone()));
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
        assert!(!agrees(
            &payment_for(&c, PaymentStatus::Canceled, false),
            &c
        ));
        let mut other = payment_for(&c, PaymentStatus::Succeeded, true);
        other.amount = Money::parse("11.00", "RUB").unwrap();
        assert!(!agrees(&other, &c));
    }

    #[test]
    fn an_authorization_agrees_once_final_on_what_was_captured() {
        use chargeonce_core::authorization::{Authorization, ReleaseReason};
        let mut c = charge("ch_1", 1, true, 0);
        c.capture_method = chargeonce_core::CaptureMethod::Manual;
        c.taken_minor = 400;
        let manual = |hold: Hold, captured: i64| {
            let mut p = payment_for(&c, PaymentStatus::Succeeded, true);
            p.capture = chargeonce_core::PaymentCapture::Manual {
                hold: Authorization::from_parts(1000, captured, 0, 0, hold),
                expires_at: p.created_at,
            };
            p
        };
        assert!(agrees(
            &manual(Hold::Released(ReleaseReason::Void), 400),
            &c
        ));
        assert!(!agrees(
            &manual(Hold::Released(ReleaseReason::Void), 300),
            &c
        ));
        assert!(!agrees(&manual(Hold::Captured, 1000), &c));
        // Open: a capture may land between the two reads; judged later.
        assert!(agrees(&manual(Hold::Open, 300), &c));
        let finding = mismatch(&manual(Hold::Captured, 1000), &c);
        assert!(
            finding.detail.contains("the acquirer's captured 400"),
            "{}",
            finding.detail
        );
    }
}
