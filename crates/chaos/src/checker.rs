//! The checker: what the clients saw (the history), what the database holds
//! and what the acquirer's ledger says moved, held against the money
//! invariants of PRODUCT.md. It is a pure function of its inputs, so it is
//! tested on hand-made histories that break each invariant.

use std::collections::{BTreeMap, HashMap, HashSet};

use chargeonce_core::history::HistoryEvent;
use chargeonce_core::{AcquirerCall, AcquirerOutcomeKind, PaymentStatus};
use serde::Serialize;

use crate::evidence;
use crate::history::{CallKind, CallRecord, CallResult, Shown};
use crate::workload::Intent;

/// A payment as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbPayment {
    /// `pay_...`.
    pub id: String,
    /// Its shop.
    pub shop_id: String,
    /// Its order.
    pub reference: String,
    /// In minor units.
    pub amount_minor: i64,
    /// `pending`, `succeeded`, `declined`.
    pub status: String,
    /// The acquirer's charge id, once known.
    pub provider_payment_id: Option<String>,
    /// What succeeded refunds gave back.
    pub refunded_minor: i64,
}

/// A refund as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbRefund {
    /// `re_...`.
    pub id: String,
    /// Its shop.
    pub shop_id: String,
    /// The refunded payment.
    pub payment_id: String,
    /// `pending`, `succeeded`, `failed`.
    pub status: String,
    /// In minor units.
    pub amount_minor: i64,
}

/// A charge attempt in the acquirer's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCharge {
    /// `ch_...`.
    pub id: String,
    /// The shop it was made for.
    pub shop_id: String,
    /// Our payment id it carried.
    pub payment_id: String,
    /// The order.
    pub reference: String,
    /// In minor units.
    pub amount_minor: i64,
    /// Whether money moved.
    pub succeeded: bool,
}

/// A refund in the acquirer's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRefund {
    /// The refunded charge.
    pub charge_id: String,
    /// In minor units.
    pub amount_minor: i64,
}

/// Where things stand once everything settled.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// Every payment in the database.
    pub payments: Vec<DbPayment>,
    /// The refunds the clients were told about, read back from the database
    /// (by the shop that made them).
    pub refunds: Vec<DbRefund>,
    /// Every charge attempt at the acquirer.
    pub charges: Vec<LedgerCharge>,
    /// Every refund at the acquirer.
    pub ledger_refunds: Vec<LedgerRefund>,
    /// Each payment's history as the store recorded it, oldest first, by
    /// payment id (a payment without an entry has an empty history).
    pub histories: HashMap<String, Vec<HistoryEvent>>,
    /// Pending payments in the whole database, counted from their rows.
    pub pending_rows: u64,
    /// Pending payments as the store's overview counts them: on PostgreSQL
    /// the rows of the pending queue (`pending_payments`), which the claim
    /// fills and every settle empties; on SQLite the partial index.
    pub pending_counted: u64,
}

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

/// Checks every invariant; returns the violations (none: the run is clean).
pub fn check(
    intents: &[Intent],
    shops: &[String],
    calls: &[CallRecord],
    truth: &Truth,
) -> Vec<Violation> {
    let mut out = Vec::new();
    let shop_of = |i: &Intent| shops.get(i.shop).cloned().unwrap_or_default();
    let payments: HashMap<&str, &DbPayment> =
        truth.payments.iter().map(|p| (p.id.as_str(), p)).collect();
    let mut succeeded_charges: HashMap<&str, Vec<&LedgerCharge>> = HashMap::new();
    for charge in truth.charges.iter().filter(|c| c.succeeded) {
        succeeded_charges
            .entry(charge.payment_id.as_str())
            .or_default()
            .push(charge);
    }

    // Every intent definite: no payment left pending.
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
    // The pending queue is the pending payments: a settle that left its
    // payment queued (or a claim that queued none) shows here.
    if truth.pending_counted != truth.pending_rows {
        out.push(violation(
            "pending-queue-agrees",
            format!(
                "the store counts {} pending payments, the rows say {}",
                truth.pending_counted, truth.pending_rows
            ),
        ));
    }

    // Exactly one ledger charge per succeeded payment, none per declined one.
    for p in &truth.payments {
        let from = out.len();
        let charges = succeeded_charges
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
        explain(&mut out, from, || evidence::payment_story(truth, &p.id));
    }
    // Every succeeded charge is one of our payments, of the same shop.
    for c in truth.charges.iter().filter(|c| c.succeeded) {
        let from = out.len();
        match payments.get(c.payment_id.as_str()) {
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
        explain(&mut out, from, || {
            evidence::order_story(truth, &c.shop_id, &c.reference)
        });
    }

    // A canceled payment's charges (landed after its cancel) must all be
    // given back: checked below; they count for no order and no total.
    let canceled: HashSet<&str> = truth
        .payments
        .iter()
        .filter(|p| p.status == "canceled")
        .map(|p| p.id.as_str())
        .collect();
    let kept = |c: &&LedgerCharge| c.succeeded && !canceled.contains(c.payment_id.as_str());

    // At most one successful charge per order (shop, reference).
    let mut per_order: HashMap<(&str, &str), usize> = HashMap::new();
    for c in truth.charges.iter().filter(kept) {
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

    // Money: the ledger's total equals the succeeded payments'; refunds too.
    let ledger_total: i128 = truth
        .charges
        .iter()
        .filter(kept)
        .map(|c| i128::from(c.amount_minor))
        .sum();
    let paid_total: i128 = truth
        .payments
        .iter()
        .filter(|p| p.status == "succeeded")
        .map(|p| i128::from(p.amount_minor))
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
        .filter(|c| c.succeeded && canceled.contains(c.payment_id.as_str()))
    {
        let given_back = refunded_per_charge.get(c.id.as_str()).copied().unwrap_or(0);
        if given_back < i128::from(c.amount_minor) {
            out.push(Violation {
                evidence: evidence::payment_story(truth, &c.payment_id),
                ..violation(
                    "canceled-holds-nothing",
                    format!(
                        "payment {} is canceled, but its charge {} of {} holds {} (refunded {given_back})",
                        c.payment_id,
                        c.id,
                        c.amount_minor,
                        i128::from(c.amount_minor) - given_back
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
        if p.refunded_minor > p.amount_minor || at_acquirer > i128::from(p.amount_minor) {
            out.push(violation(
                "refunds-within-amount",
                format!(
                    "payment {} of {} refunded {at_acquirer}",
                    p.id, p.amount_minor
                ),
            ));
        }
        explain(&mut out, from, || evidence::payment_story(truth, &p.id));
    }

    // Every final payment's history tells how it ended, once.
    for p in &truth.payments {
        let events = truth
            .histories
            .get(p.id.as_str())
            .map_or(&[][..], Vec::as_slice);
        let from = out.len();
        check_settlement(&mut out, p, events);
        explain(&mut out, from, || evidence::payment_story(truth, &p.id));
    }

    // Every answer a client saw agrees with the database, and with its shop.
    let by_index: HashMap<usize, &Intent> = intents.iter().map(|i| (i.index, i)).collect();
    let refunds: HashMap<&str, &DbRefund> =
        truth.refunds.iter().map(|r| (r.id.as_str(), r)).collect();
    let origin = evidence::origin(calls);
    for call in calls {
        let Some(intent) = by_index.get(&call.intent) else {
            continue;
        };
        let from = out.len();
        let story = || call_evidence(truth, origin, call);
        let shop = shop_of(intent);
        let what = || {
            format!(
                "intent {} ({:?} via instance {})",
                intent.index, call.kind, call.instance
            )
        };
        let check_shown = |out: &mut Vec<Violation>, shown: &Shown| {
            if shown.shop_id != shop {
                out.push(violation(
                    "no-cross-shop-answer",
                    format!(
                        "{}: shop {shop} was shown {} of shop {}",
                        what(),
                        shown.id,
                        shown.shop_id
                    ),
                ));
            }
        };
        match &call.result {
            CallResult::Paid(shown) | CallResult::Declined(shown) | CallResult::Canceled(shown) => {
                check_shown(&mut out, shown);
                if call.kind == CallKind::ChangedBody {
                    out.push(violation(
                        "changed-body-refused",
                        format!(
                            "{}: a changed body under the same key got {}",
                            what(),
                            shown.status
                        ),
                    ));
                    explain(&mut out, from, story);
                    continue;
                }
                let expected = match call.result {
                    CallResult::Paid(_) => "succeeded",
                    CallResult::Canceled(_) => "canceled",
                    _ => "declined",
                };
                match payments.get(shown.id.as_str()) {
                    None => out.push(violation(
                        "answers-agree-with-database",
                        format!(
                            "{}: answered with payment {} that the database does not hold",
                            what(),
                            shown.id
                        ),
                    )),
                    Some(p) => {
                        if p.shop_id != shop {
                            out.push(violation(
                                "no-cross-shop-answer",
                                format!(
                                    "{}: shop {shop} got payment {} of shop {}",
                                    what(),
                                    p.id,
                                    p.shop_id
                                ),
                            ));
                        }
                        if p.status != expected || shown.status != expected {
                            out.push(violation(
                                "answers-agree-with-database",
                                format!(
                                    "{}: told {} ({expected}), the database says {}",
                                    what(),
                                    p.id,
                                    p.status
                                ),
                            ));
                        }
                        if p.reference != intent.reference || p.amount_minor != intent.amount_minor
                        {
                            out.push(violation(
                                "answers-agree-with-database",
                                format!(
                                    "{}: payment {} is {}/{} but the intent is {}/{}",
                                    what(),
                                    p.id,
                                    p.reference,
                                    p.amount_minor,
                                    intent.reference,
                                    intent.amount_minor
                                ),
                            ));
                        }
                    }
                }
            }
            CallResult::CancelEnded(shown) => {
                check_shown(&mut out, shown);
                match payments.get(shown.id.as_str()) {
                    Some(p) if p.status == shown.status && p.shop_id == shop => {}
                    Some(p) => out.push(violation(
                        "answers-agree-with-database",
                        format!(
                            "{}: a cancel ended with {} {}, the database says {} ({})",
                            what(),
                            p.id,
                            shown.status,
                            p.status,
                            p.shop_id
                        ),
                    )),
                    None => out.push(violation(
                        "answers-agree-with-database",
                        format!(
                            "{}: a cancel answered with payment {} that the database does not hold",
                            what(),
                            shown.id
                        ),
                    )),
                }
            }
            CallResult::Refunded(shown) | CallResult::RefundFailed(shown) => {
                check_shown(&mut out, shown);
                let expected = if matches!(call.result, CallResult::Refunded(_)) {
                    "succeeded"
                } else {
                    "failed"
                };
                match refunds.get(shown.id.as_str()) {
                    Some(r) if r.status == expected && r.shop_id == shop => {}
                    Some(r) => out.push(violation(
                        "answers-agree-with-database",
                        format!(
                            "{}: told refund {} {expected}, the database says {} ({})",
                            what(),
                            r.id,
                            r.status,
                            r.shop_id
                        ),
                    )),
                    None => out.push(violation(
                        "answers-agree-with-database",
                        format!(
                            "{}: answered with refund {} that the database does not hold",
                            what(),
                            shown.id
                        ),
                    )),
                }
            }
            CallResult::Refused { status, code } => {
                let expected = match call.kind {
                    CallKind::ChangedBody => code == "idempotency_key_reused",
                    // Two refunds at once may together exceed the payment.
                    CallKind::Refund(_) => code == "refund_exceeds_amount",
                    // The payment ended before the cancel came.
                    CallKind::Cancel => code == "payment_not_cancelable",
                    _ => false,
                };
                if !expected {
                    out.push(violation(
                        "valid-requests-answered",
                        format!("{}: refused with {status} {code}", what()),
                    ));
                }
            }
            CallResult::Uncertain => {}
            CallResult::Error { message } => out.push(violation(
                "valid-requests-answered",
                format!("{}: {message}", what()),
            )),
        }
        explain(&mut out, from, story);
    }

    // Every replay byte-identical to the first definitive answer of its key.
    let mut answers: BTreeMap<(usize, String), Vec<(Definitive, &CallRecord)>> = BTreeMap::new();
    for call in calls {
        let key = match call.kind {
            k if k.is_payment() => "pay".to_owned(),
            CallKind::Refund(n) => format!("refund-{n}"),
            CallKind::Cancel => "cancel".to_owned(),
            _ => continue,
        };
        if let Some(answer) = call.definitive() {
            answers
                .entry((call.intent, key))
                .or_default()
                .push((answer, call));
        }
    }
    for ((intent, key), given) in answers {
        let distinct: HashSet<Definitive> = given.iter().map(|(answer, _)| *answer).collect();
        if distinct.len() > 1 {
            out.push(Violation {
                evidence: replay_evidence(truth, origin, &given),
                ..violation(
                    "replays-identical",
                    format!(
                        "intent {intent} key {key}: {} different definitive answers",
                        distinct.len()
                    ),
                )
            });
        }
    }
    out
}

/// The definitive answers one key was given, in the order they came: the
/// first of each kind whole (who gave it, when, its body), then what the
/// others differ in from the first, and the story of the payment concerned.
fn replay_evidence(
    truth: &Truth,
    origin: Option<std::time::Instant>,
    given: &[(Definitive, &CallRecord)],
) -> Vec<String> {
    let mut given: Vec<&(Definitive, &CallRecord)> = given.iter().collect();
    given.sort_by_key(|(_, call)| call.attempts.last().map(|a| a.sent_at));
    let mut lines = Vec::new();
    let mut seen: Vec<(Definitive, Option<serde_json::Value>)> = Vec::new();
    for (answer, call) in given {
        if seen.iter().any(|(a, _)| a == answer) {
            continue;
        }
        let label = format!("answer {}", seen.len() + 1);
        let (line, body) = evidence::answer_line(origin, call, &label);
        lines.push(line);
        if let (Some((_, Some(first))), Some(body)) = (seen.first(), &body) {
            for difference in evidence::differences(first, body) {
                lines.push(format!("  differs from answer 1 in {difference}"));
            }
        }
        seen.push((*answer, body));
    }
    if let Some(payment) = seen
        .iter()
        .find_map(|(_, body)| body.as_ref().and_then(evidence::payment_named))
    {
        lines.extend(evidence::payment_story(truth, &payment));
    }
    lines
}

/// A call's attempts and the story of the payment its answer named.
fn call_evidence(
    truth: &Truth,
    origin: Option<std::time::Instant>,
    call: &CallRecord,
) -> Vec<String> {
    let mut lines = evidence::call_story(origin, call);
    let payment = match &call.result {
        CallResult::Paid(shown) | CallResult::Declined(shown) | CallResult::Canceled(shown) => {
            Some(&shown.id)
        }
        CallResult::Refunded(shown) | CallResult::RefundFailed(shown) => Some(&shown.parent),
        _ => None,
    };
    if let Some(payment) = payment {
        lines.extend(evidence::payment_story(truth, payment));
    }
    lines
}

/// `history-has-one-settlement`: a succeeded payment's history settles it
/// to succeeded exactly once, and no charge the acquirer declined says
/// otherwise; a declined payment's settles it to declined exactly once,
/// never to succeeded, and no charge the acquirer took says otherwise. (A
/// pending payment is `every-intent-definite`'s.)
fn check_settlement(out: &mut Vec<Violation>, p: &DbPayment, events: &[HistoryEvent]) {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use chargeonce_core::history::SettledBy;

    use super::*;
    use crate::args::ChaosArgs;
    use crate::history::AttemptRecord;

    /// A history as the store writes it for a payment its first request
    /// settled: claimed, charged (`outcome`), settled to `status`, answered.
    fn history(outcome: AcquirerOutcomeKind, status: PaymentStatus) -> Vec<HistoryEvent> {
        vec![
            HistoryEvent::Claimed {
                key: "k".into(),
                instance: "a:1".into(),
            },
            charge_call(outcome),
            settled(status),
            HistoryEvent::Answered {
                key: "k".into(),
                status: 201,
            },
        ]
    }

    fn charge_call(outcome: AcquirerOutcomeKind) -> HistoryEvent {
        HistoryEvent::AcquirerCall {
            call: AcquirerCall::Charge,
            outcome,
            latency_ms: 3,
            acquirer_key: "ak".into(),
            instance: "a:1".into(),
            reason: None,
        }
    }

    fn settled(status: PaymentStatus) -> HistoryEvent {
        HistoryEvent::Settled {
            status,
            by: SettledBy::Request { key: "k".into() },
        }
    }

    fn paid_history() -> Vec<HistoryEvent> {
        history(AcquirerOutcomeKind::Succeeded, PaymentStatus::Succeeded)
    }

    fn declined_history() -> Vec<HistoryEvent> {
        history(AcquirerOutcomeKind::Declined, PaymentStatus::Declined)
    }

    const SHOPS: [&str; 2] = ["shop_a", "shop_b"];

    fn shops() -> Vec<String> {
        SHOPS.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Intent 0 (shop_a, order-0) and intent 1 (shop_b, order-0): the same
    /// key and reference in two shops.
    fn intents() -> Vec<Intent> {
        let mut args = ChaosArgs::small(2, 1);
        args.decline_rate = 0.0;
        (0..2)
            .map(|i| Intent::generate(7, i, &args).unwrap())
            .collect()
    }

    fn paid(intent: &Intent, id: &str, charge: &str) -> (DbPayment, LedgerCharge) {
        let shop = SHOPS[intent.shop].to_owned();
        (
            DbPayment {
                id: id.into(),
                shop_id: shop.clone(),
                reference: intent.reference.clone(),
                amount_minor: intent.amount_minor,
                status: "succeeded".into(),
                provider_payment_id: Some(charge.into()),
                refunded_minor: 0,
            },
            LedgerCharge {
                id: charge.into(),
                shop_id: shop,
                payment_id: id.into(),
                reference: intent.reference.clone(),
                amount_minor: intent.amount_minor,
                succeeded: true,
            },
        )
    }

    fn answer(status: u16, body: u8) -> AttemptRecord {
        AttemptRecord {
            status: Some(status),
            failure: None,
            replayed: false,
            body_sha256: Some([body; 32]),
            body: None,
            took: Duration::from_millis(5),
            sent_at: std::time::Instant::now(),
        }
    }

    fn call(
        intent: &Intent,
        kind: CallKind,
        result: CallResult,
        attempts: Vec<AttemptRecord>,
    ) -> CallRecord {
        CallRecord {
            intent: intent.index,
            kind,
            instance: 0,
            attempts,
            result,
            took: Duration::from_millis(5),
        }
    }

    fn shown(p: &DbPayment) -> Shown {
        Shown {
            id: p.id.clone(),
            shop_id: p.shop_id.clone(),
            status: p.status.clone(),
            amount_minor: p.amount_minor,
            parent: p.reference.clone(),
        }
    }

    /// Two intents paid once each, a double click replayed identically.
    fn clean() -> (Vec<Intent>, Vec<CallRecord>, Truth) {
        let intents = intents();
        let (p0, c0) = paid(&intents[0], "pay_0", "ch_0");
        let (p1, c1) = paid(&intents[1], "pay_1", "ch_1");
        let calls = vec![
            call(
                &intents[0],
                CallKind::Pay,
                CallResult::Paid(shown(&p0)),
                vec![answer(201, 1)],
            ),
            call(
                &intents[0],
                CallKind::DoubleClick,
                CallResult::Paid(shown(&p0)),
                vec![answer(201, 1)],
            ),
            call(
                &intents[1],
                CallKind::Pay,
                CallResult::Paid(shown(&p1)),
                vec![answer(201, 2)],
            ),
        ];
        let histories = [
            (p0.id.clone(), paid_history()),
            (p1.id.clone(), paid_history()),
        ]
        .into_iter()
        .collect();
        let truth = Truth {
            payments: vec![p0, p1],
            charges: vec![c0, c1],
            histories,
            ..Truth::default()
        };
        (intents, calls, truth)
    }

    fn invariants(intents: &[Intent], calls: &[CallRecord], truth: &Truth) -> Vec<&'static str> {
        let mut names: Vec<_> = check(intents, &shops(), calls, truth)
            .into_iter()
            .map(|v| v.invariant)
            .collect();
        names.dedup();
        names
    }

    #[test]
    fn a_clean_history_passes() {
        let (intents, calls, truth) = clean();
        assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
    }

    /// Intent 1's payment canceled (its history says so), its charge landed
    /// anyway: refunded in full it passes, holding money it is caught; a
    /// cancel that says otherwise than the database is caught.
    #[test]
    fn a_canceled_payment_holding_money_is_caught() {
        let (intents, mut calls, mut truth) = clean();
        calls.pop();
        truth.payments[1].status = "canceled".into();
        truth.payments[1].provider_payment_id = None;
        truth.histories.insert(
            truth.payments[1].id.clone(),
            vec![
                HistoryEvent::Claimed {
                    key: "k".into(),
                    instance: "a:1".into(),
                },
                settled(PaymentStatus::Canceled),
            ],
        );
        let found = invariants(&intents, &calls, &truth);
        assert_eq!(found, vec!["canceled-holds-nothing"], "{found:?}");

        truth.ledger_refunds.push(LedgerRefund {
            charge_id: truth.charges[1].id.clone(),
            amount_minor: truth.charges[1].amount_minor,
        });
        assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);

        let mut told = shown(&truth.payments[1]);
        told.status = "succeeded".into();
        calls.push(call(
            &intents[1],
            CallKind::Cancel,
            CallResult::CancelEnded(told),
            vec![answer(200, 3)],
        ));
        let found = invariants(&intents, &calls, &truth);
        assert!(found.contains(&"answers-agree-with-database"), "{found:?}");
    }

    #[test]
    fn a_second_charge_is_caught() {
        let (intents, calls, mut truth) = clean();
        let mut again = truth.charges[0].clone();
        again.id = "ch_dup".into();
        truth.charges.push(again);
        let found = invariants(&intents, &calls, &truth);
        assert!(
            found.contains(&"one-charge-per-succeeded-payment"),
            "{found:?}"
        );
        assert!(found.contains(&"one-charge-per-order"), "{found:?}");
        assert!(found.contains(&"ledger-total-equals-payments"), "{found:?}");
    }

    #[test]
    fn a_second_payment_of_an_order_is_caught() {
        let (intents, calls, mut truth) = clean();
        let (p, c) = paid(&intents[0], "pay_other", "ch_other");
        truth.payments.push(p);
        truth.charges.push(c);
        assert!(invariants(&intents, &calls, &truth).contains(&"one-charge-per-order"));
    }

    #[test]
    fn a_charge_for_a_declined_or_unknown_payment_is_caught() {
        let (intents, calls, mut truth) = clean();
        truth.payments[1].status = "declined".into();
        let found = invariants(&intents, &calls, &truth);
        assert!(
            found.contains(&"no-charge-per-declined-payment"),
            "{found:?}"
        );
        assert!(found.contains(&"answers-agree-with-database"), "{found:?}");

        let (intents, calls, mut truth) = clean();
        truth.payments.remove(1);
        let found = invariants(&intents, &calls, &truth);
        assert!(found.contains(&"no-unknown-charge"), "{found:?}");
    }

    #[test]
    fn a_pending_queue_that_disagrees_is_caught() {
        let (intents, calls, mut truth) = clean();
        truth.pending_counted = 1;
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["pending-queue-agrees"]
        );
    }

    #[test]
    fn a_pending_payment_is_caught() {
        let (intents, calls, mut truth) = clean();
        let (mut p, _) = paid(&intents[1], "pay_pending", "ch_none");
        p.status = "pending".into();
        p.provider_payment_id = None;
        p.reference = "order-9".into();
        truth.payments.push(p);
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["every-intent-definite"]
        );
    }

    #[test]
    fn a_replay_with_other_bytes_is_caught() {
        let (intents, mut calls, truth) = clean();
        calls[1].attempts = vec![answer(201, 9)];
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["replays-identical"]
        );
    }

    /// A replays-identical violation names both answers (status, call,
    /// instance, time, body), what the second differs in, and the story of
    /// the payment: the report alone explains it.
    #[test]
    fn a_replay_with_other_bytes_names_both_answers() {
        let (intents, mut calls, mut truth) = clean();
        truth.histories.insert("pay_0".into(), paid_history());
        let body = |refunded: &str| -> Option<std::sync::Arc<[u8]>> {
            let json = serde_json::json!({"id": "pay_0", "status": "succeeded",
                "amount_refunded": {"value": refunded, "currency": "RUB"}});
            Some(serde_json::to_vec(&json).unwrap().into())
        };
        calls[0].attempts[0].body = body("0.00");
        let mut later = answer(201, 9);
        later.body = body("5.00");
        later.replayed = true;
        later.sent_at = calls[0].attempts[0].sent_at + Duration::from_secs(2);
        calls[1].instance = 2;
        calls[1].attempts = vec![answer(503, 0), later];
        let found = check(&intents, &shops(), &calls, &truth);
        assert_eq!(found.len(), 1, "{found:#?}");
        let evidence = found[0].evidence.join("\n");
        assert!(
            evidence.contains(
                "answer 1: 201 to the Pay call's attempt 1 of 1 via instance 0, sent +0.000s"
            ),
            "{evidence}"
        );
        assert!(
            evidence.contains("answer 2: 201 to the DoubleClick call's attempt 2 of 2 via instance 2, sent +2.000s (took 5 ms), replayed"),
            "{evidence}"
        );
        assert!(
            evidence
                .contains("differs from answer 1 in amount_refunded.value: \"0.00\" -> \"5.00\""),
            "{evidence}"
        );
        assert!(
            evidence.contains("payment pay_0 (shop_a/order-0)"),
            "{evidence}"
        );
        assert!(evidence.contains("ledger charge ch_0"), "{evidence}");
        assert!(
            evidence.contains("history 3: {\"type\":\"settled\""),
            "{evidence}"
        );
    }

    #[test]
    fn another_shops_answer_is_caught() {
        let (intents, mut calls, truth) = clean();
        // Shop a's client is shown shop b's payment of the same key.
        let other = shown(&truth.payments[1]);
        calls[0].result = CallResult::Paid(other);
        let found = invariants(&intents, &calls, &truth);
        assert!(found.contains(&"no-cross-shop-answer"), "{found:?}");
    }

    #[test]
    fn a_changed_body_accepted_is_caught_and_its_refusal_is_not() {
        let (intents, mut calls, truth) = clean();
        calls.push(call(
            &intents[0],
            CallKind::ChangedBody,
            CallResult::Refused {
                status: 422,
                code: "idempotency_key_reused".into(),
            },
            vec![answer(422, 3)],
        ));
        assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
        let p0 = shown(&truth.payments[0]);
        calls.last_mut().unwrap().result = CallResult::Paid(p0);
        assert!(invariants(&intents, &calls, &truth).contains(&"changed-body-refused"));
    }

    #[test]
    fn unknown_outcomes_are_accepted_either_way() {
        let (intents, mut calls, mut truth) = clean();
        // Intent 1's only call is uncertain: charged once is fine...
        calls[2].result = CallResult::Uncertain;
        calls[2].attempts = vec![AttemptRecord {
            status: None,
            failure: Some(chargeonce_client::FailureKind::Lost),
            replayed: false,
            body_sha256: None,
            body: None,
            took: Duration::from_secs(3),
            sent_at: std::time::Instant::now(),
        }];
        assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
        // ...and so is not charged at all.
        truth.payments[1].status = "declined".into();
        truth.charges[1].succeeded = false;
        truth
            .histories
            .insert(truth.payments[1].id.clone(), declined_history());
        assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
    }

    #[test]
    fn a_succeeded_payment_settled_never_or_twice_is_caught() {
        let (intents, calls, mut truth) = clean();
        let id = truth.payments[0].id.clone();
        // Never: the history lost the settlement (or the store never wrote it).
        truth
            .histories
            .get_mut(&id)
            .unwrap()
            .retain(|e| !e.settled_succeeded());
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["history-has-one-settlement"]
        );
        // No history at all.
        truth.histories.remove(&id);
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["history-has-one-settlement"]
        );
        // Twice: settled by the request and again by a webhook.
        let mut twice = paid_history();
        twice.push(HistoryEvent::Settled {
            status: PaymentStatus::Succeeded,
            by: SettledBy::Webhook {
                event_id: "evt_1".into(),
            },
        });
        truth.histories.insert(id.clone(), twice);
        let found = check(&intents, &shops(), &calls, &truth);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].invariant, "history-has-one-settlement");
        assert!(found[0].detail.contains("2 times"), "{found:?}");
        // Once, by the reconciler after an unknown outcome: clean.
        let once = vec![
            charge_call(AcquirerOutcomeKind::Unknown),
            HistoryEvent::Settled {
                status: PaymentStatus::Succeeded,
                by: SettledBy::Reconciler,
            },
        ];
        truth.histories.insert(id, once);
        assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
    }

    #[test]
    fn a_history_contradicting_the_payment_is_caught() {
        // A succeeded payment whose charge the acquirer declined.
        let (intents, calls, mut truth) = clean();
        let id = truth.payments[0].id.clone();
        truth
            .histories
            .get_mut(&id)
            .unwrap()
            .insert(1, charge_call(AcquirerOutcomeKind::Declined));
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["history-has-one-settlement"]
        );

        // A declined payment: settled declined once, and nothing else.
        let (intents, mut calls, mut truth) = clean();
        calls.truncate(2);
        truth.payments[1].status = "declined".into();
        truth.charges[1].succeeded = false;
        let id = truth.payments[1].id.clone();
        truth.histories.insert(id.clone(), declined_history());
        assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
        // Settled to succeeded too.
        let mut both = declined_history();
        both.push(settled(PaymentStatus::Succeeded));
        truth.histories.insert(id.clone(), both);
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["history-has-one-settlement"]
        );
        // A charge the acquirer took.
        let mut taken = declined_history();
        taken.insert(1, charge_call(AcquirerOutcomeKind::Succeeded));
        truth.histories.insert(id.clone(), taken);
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["history-has-one-settlement"]
        );
        // Never settled.
        truth.histories.remove(&id);
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["history-has-one-settlement"]
        );
    }

    #[test]
    fn refunds_beyond_the_amount_or_unrecorded_are_caught() {
        let (intents, calls, mut truth) = clean();
        truth.ledger_refunds.push(LedgerRefund {
            charge_id: "ch_0".into(),
            amount_minor: truth.payments[0].amount_minor + 1,
        });
        let found = invariants(&intents, &calls, &truth);
        assert!(found.contains(&"refunds-agree"), "{found:?}");
        assert!(found.contains(&"refunds-within-amount"), "{found:?}");
    }

    #[test]
    fn a_valid_request_refused_is_caught() {
        let (intents, mut calls, truth) = clean();
        calls[1].result = CallResult::Refused {
            status: 422,
            code: "idempotency_key_reused".into(),
        };
        assert_eq!(
            invariants(&intents, &calls, &truth),
            vec!["valid-requests-answered"]
        );
    }
}
