//! The books: the database's payments against the acquirer's ledger.

use std::collections::HashMap;

use super::{Index, Violation, explain, violation};
use crate::evidence;
use crate::truth::Truth;

/// `one-charge-per-succeeded-payment` (of its amount and shop, the one it
/// names), `no-charge-per-declined-payment`, and `no-unknown-charge`: every
/// succeeded charge is one of our payments, of the same shop.
pub(super) fn charges(out: &mut Vec<Violation>, truth: &Truth, index: &Index<'_>) {
    for p in &truth.payments {
        let from = out.len();
        let charges = index
            .succeeded_charges
            .get(p.id.as_str())
            .map_or(&[][..], Vec::as_slice);
        match p.status.as_str() {
            "succeeded" => {
                if charges.len() != 1 {
                    out.push(violation(
                        "one-charge-per-succeeded-payment",
                        format!(
                            "payment {} succeeded with {} ledger charges",
                            p.id,
                            charges.len()
                        ),
                    ));
                }
                for c in charges {
                    if c.amount_minor != p.amount_minor || c.shop_id != p.shop_id {
                        out.push(violation(
                            "one-charge-per-succeeded-payment",
                            format!(
                                "payment {} is {} for {} but its charge {} is {} for {}",
                                p.id, p.amount_minor, p.shop_id, c.id, c.amount_minor, c.shop_id
                            ),
                        ));
                    }
                    if p.provider_payment_id.as_deref() != Some(c.id.as_str()) {
                        out.push(violation(
                            "one-charge-per-succeeded-payment",
                            format!(
                                "payment {} names charge {:?}, the ledger holds {}",
                                p.id, p.provider_payment_id, c.id
                            ),
                        ));
                    }
                }
            }
            "declined" if !charges.is_empty() => out.push(violation(
                "no-charge-per-declined-payment",
                format!(
                    "payment {} declined, yet {} charge(s) succeeded",
                    p.id,
                    charges.len()
                ),
            )),
            _ => {}
        }
        explain(out, from, || evidence::payment_story(truth, &p.id));
    }
    // Every succeeded charge is one of our payments, of the same shop.
    for c in truth.charges.iter().filter(|c| c.succeeded) {
        let from = out.len();
        match index.payments.get(c.payment_id.as_str()) {
            None => out.push(violation(
                "no-unknown-charge",
                format!("charge {} for unknown payment {}", c.id, c.payment_id),
            )),
            Some(p) if p.shop_id != c.shop_id => out.push(violation(
                "no-unknown-charge",
                format!(
                    "charge {} of shop {} for payment {} of {}",
                    c.id, c.shop_id, p.id, p.shop_id
                ),
            )),
            _ => {}
        }
        explain(out, from, || {
            evidence::order_story(truth, &c.shop_id, &c.reference)
        });
    }
}

/// `one-charge-per-order`: at most one successful charge, and one
/// succeeded payment, per order (shop, reference).
pub(super) fn orders(out: &mut Vec<Violation>, truth: &Truth, index: &Index<'_>) {
    let mut per_order: HashMap<(&str, &str), usize> = HashMap::new();
    for c in truth.charges.iter().filter(|c| index.kept(c)) {
        *per_order.entry((&c.shop_id, &c.reference)).or_default() += 1;
    }
    for ((shop, reference), n) in per_order.into_iter().filter(|(_, n)| *n > 1) {
        out.push(Violation {
            evidence: evidence::order_story(truth, shop, reference),
            ..violation(
                "one-charge-per-order",
                format!("order {shop}/{reference} was charged {n} times"),
            )
        });
    }
    let mut paid_orders: HashMap<(&str, &str), usize> = HashMap::new();
    for p in truth.payments.iter().filter(|p| p.status == "succeeded") {
        *paid_orders.entry((&p.shop_id, &p.reference)).or_default() += 1;
    }
    for ((shop, reference), n) in paid_orders.into_iter().filter(|(_, n)| *n > 1) {
        out.push(Violation {
            evidence: evidence::order_story(truth, shop, reference),
            ..violation(
                "one-charge-per-order",
                format!("order {shop}/{reference} has {n} succeeded payments"),
            )
        });
    }
}

/// `ledger-total-equals-payments` (what moved: a charge made at once its
/// amount, an authorization its captures), `canceled-holds-nothing` (every charge
/// that landed for a canceled payment was refunded in full), and
/// `refunds-agree` / `refunds-within-amount`.
pub(super) fn money(out: &mut Vec<Violation>, truth: &Truth, index: &Index<'_>) {
    // What moved: a charge made at once its amount, an authorization
    // what its captures took.
    let ledger_total: i128 = truth
        .charges
        .iter()
        .filter(|c| index.kept(c))
        .map(|c| i128::from(c.taken_minor))
        .sum();
    let paid_total: i128 = truth
        .payments
        .iter()
        .filter(|p| p.status == "succeeded")
        .map(|p| i128::from(p.taken_minor))
        .sum();
    if ledger_total != paid_total {
        out.push(violation(
            "ledger-total-equals-payments",
            format!("the ledger moved {ledger_total}, succeeded payments sum to {paid_total} (minor units)"),
        ));
    }
    let mut refunded_per_charge: HashMap<&str, i128> = HashMap::new();
    for r in &truth.ledger_refunds {
        *refunded_per_charge.entry(r.charge_id.as_str()).or_default() += i128::from(r.amount_minor);
    }
    // The customer holds nothing for a canceled payment: every charge that
    // landed for it anyway was refunded in full (by the reconciler).
    for c in truth
        .charges
        .iter()
        .filter(|c| c.succeeded && index.canceled.contains(c.payment_id.as_str()))
    {
        let given_back = refunded_per_charge.get(c.id.as_str()).copied().unwrap_or(0);
        // What it took: its amount, or an authorization's captures (an
        // authorization that lands late takes nothing by itself).
        if given_back < i128::from(c.taken_minor) {
            out.push(Violation {
                evidence: evidence::payment_story(truth, &c.payment_id),
                ..violation(
                    "canceled-holds-nothing",
                    format!(
                        "payment {} is canceled, but its charge {} of {} holds {} (refunded {given_back})",
                        c.payment_id,
                        c.id,
                        c.taken_minor,
                        i128::from(c.taken_minor) - given_back
                    ),
                )
            });
        }
    }
    for p in &truth.payments {
        let from = out.len();
        let at_acquirer = p
            .provider_payment_id
            .as_deref()
            .and_then(|c| refunded_per_charge.get(c))
            .copied()
            .unwrap_or(0);
        if i128::from(p.refunded_minor) != at_acquirer {
            out.push(violation(
                "refunds-agree",
                format!(
                    "payment {} shows {} refunded, the acquirer refunded {at_acquirer}",
                    p.id, p.refunded_minor
                ),
            ));
        }
        // Refunds give back what was taken: an authorization's captures.
        let taken = if p.manual {
            p.captured_minor
        } else {
            p.amount_minor
        };
        if p.refunded_minor > taken || at_acquirer > i128::from(taken) {
            out.push(violation(
                "refunds-within-amount",
                format!("payment {} took {taken} and refunded {at_acquirer}", p.id),
            ));
        }
        explain(out, from, || evidence::payment_story(truth, &p.id));
    }
}
