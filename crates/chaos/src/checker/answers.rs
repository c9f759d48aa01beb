//! What each client was told, against the database: `answers-agree-with-
//! database`, `metadata-as-sent`, `no-cross-shop-answer`,
//! `changed-body-refused` and `valid-requests-answered`. One function per
//! kind of answer.

use std::collections::HashMap;
use std::time::Instant;

use super::{Index, Violation, explain, violation};
use crate::evidence;
use crate::history::{CallKind, CallRecord, CallResult, Shown};
use crate::intent::Intent;
use crate::truth::{DbCapture, DbRefund, Truth};

/// One call as the checks see it: its intent, the shop it was made for,
/// and how a violation names it.
struct Seen<'a> {
    call: &'a CallRecord,
    intent: &'a Intent,
    shop: String,
    what: String,
}

/// Every call's answer, checked.
pub(super) fn check(
    out: &mut Vec<Violation>,
    intents: &[Intent],
    shops: &[String],
    calls: &[CallRecord],
    truth: &Truth,
    index: &Index<'_>,
) {
    let by_index: HashMap<usize, &Intent> = intents.iter().map(|i| (i.index, i)).collect();
    let refunds: HashMap<&str, &DbRefund> =
        truth.refunds.iter().map(|r| (r.id.as_str(), r)).collect();
    let captures: HashMap<&str, &DbCapture> =
        truth.captures.iter().map(|c| (c.id.as_str(), c)).collect();
    let origin = evidence::origin(calls);
    for call in calls {
        let Some(intent) = by_index.get(&call.intent) else {
            continue;
        };
        let seen = Seen {
            call,
            intent,
            shop: shops.get(intent.shop).cloned().unwrap_or_default(),
            what: format!(
                "intent {} ({:?} via instance {})",
                intent.index, call.kind, call.instance
            ),
        };
        let from = out.len();
        match &call.result {
            CallResult::Paid(shown) | CallResult::Declined(shown) | CallResult::Canceled(shown) => {
                payment_answer(out, &seen, shown, index);
            }
            CallResult::CancelEnded(shown) => cancel_ended(out, &seen, shown, index),
            CallResult::Refunded(shown) | CallResult::RefundFailed(shown) => {
                refund_answer(out, &seen, shown, &refunds);
            }
            CallResult::Captured(shown) | CallResult::CaptureFailed(shown) => {
                capture_answer(out, &seen, shown, &captures);
            }
            CallResult::Voided(shown) | CallResult::VoidFailed(shown) => {
                void_answer(out, &seen, shown, index);
            }
            CallResult::Refused { status, code } => refused(out, &seen, *status, code),
            CallResult::Uncertain => {}
            CallResult::Error { message } => out.push(violation(
                "valid-requests-answered",
                format!("{}: {message}", seen.what),
            )),
        }
        explain(out, from, || call_evidence(truth, origin, call));
    }
}

/// `no-cross-shop-answer`: what a shop was shown is its own.
fn own_shop(out: &mut Vec<Violation>, seen: &Seen<'_>, shown: &Shown) {
    if shown.shop_id != seen.shop {
        out.push(violation(
            "no-cross-shop-answer",
            format!(
                "{}: shop {} was shown {} of shop {}",
                seen.what, seen.shop, shown.id, shown.shop_id
            ),
        ));
    }
}

/// A payment answered paid, declined or canceled: the database holds it,
/// of this shop, in that status, for the intent's order and amount; a
/// changed body under the same key must never have been answered so.
fn payment_answer(out: &mut Vec<Violation>, seen: &Seen<'_>, shown: &Shown, index: &Index<'_>) {
    own_shop(out, seen, shown);
    let what = &seen.what;
    if seen.call.kind == CallKind::ChangedBody {
        out.push(violation(
            "changed-body-refused",
            format!(
                "{what}: a changed body under the same key got {}",
                shown.status
            ),
        ));
        return;
    }
    let expected = match seen.call.result {
        CallResult::Paid(_) => "succeeded",
        CallResult::Canceled(_) => "canceled",
        _ => "declined",
    };
    let Some(p) = index.payments.get(shown.id.as_str()) else {
        out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: answered with payment {} that the database does not hold",
                shown.id
            ),
        ));
        return;
    };
    if p.shop_id != seen.shop {
        out.push(violation(
            "no-cross-shop-answer",
            format!(
                "{what}: shop {} got payment {} of shop {}",
                seen.shop, p.id, p.shop_id
            ),
        ));
    }
    if p.status != expected || shown.status != expected {
        out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: told {} ({expected}), the database says {}",
                p.id, p.status
            ),
        ));
    }
    let intent = seen.intent;
    if shown.metadata != intent.metadata || p.metadata != intent.metadata {
        out.push(violation(
            "metadata-as-sent",
            format!(
                "{what}: payment {} shows metadata {:?} and holds {:?}; the intent sent {:?}",
                p.id, shown.metadata, p.metadata, intent.metadata
            ),
        ));
    }
    if p.reference != intent.reference || p.amount_minor != intent.amount_minor {
        out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: payment {} is {}/{} but the intent is {}/{}",
                p.id, p.reference, p.amount_minor, intent.reference, intent.amount_minor
            ),
        ));
    }
}

/// A cancel's end: the payment it names is in the status it was told.
fn cancel_ended(out: &mut Vec<Violation>, seen: &Seen<'_>, shown: &Shown, index: &Index<'_>) {
    own_shop(out, seen, shown);
    let what = &seen.what;
    match index.payments.get(shown.id.as_str()) {
        Some(p) if p.status == shown.status && p.shop_id == seen.shop => {}
        Some(p) => out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: a cancel ended with {} {}, the database says {} ({})",
                p.id, shown.status, p.status, p.shop_id
            ),
        )),
        None => out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: a cancel answered with payment {} that the database does not hold",
                shown.id
            ),
        )),
    }
}

/// A refund answered succeeded or failed: the database holds it so, of
/// this shop.
fn refund_answer(
    out: &mut Vec<Violation>,
    seen: &Seen<'_>,
    shown: &Shown,
    refunds: &HashMap<&str, &DbRefund>,
) {
    own_shop(out, seen, shown);
    let what = &seen.what;
    let expected = if matches!(seen.call.result, CallResult::Refunded(_)) {
        "succeeded"
    } else {
        "failed"
    };
    match refunds.get(shown.id.as_str()) {
        Some(r) if r.status == expected && r.shop_id == seen.shop => {}
        Some(r) => out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: told refund {} {expected}, the database says {} ({})",
                r.id, r.status, r.shop_id
            ),
        )),
        None => out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: answered with refund {} that the database does not hold",
                shown.id
            ),
        )),
    }
}

/// A capture answered succeeded or failed: the database holds it so, of
/// this shop, for the amount shown.
fn capture_answer(
    out: &mut Vec<Violation>,
    seen: &Seen<'_>,
    shown: &Shown,
    captures: &HashMap<&str, &DbCapture>,
) {
    own_shop(out, seen, shown);
    let what = &seen.what;
    let expected = if matches!(seen.call.result, CallResult::Captured(_)) {
        "succeeded"
    } else {
        "failed"
    };
    match captures.get(shown.id.as_str()) {
        Some(c)
            if c.status == expected
                && c.shop_id == seen.shop
                && c.amount_minor == shown.amount_minor => {}
        Some(c) => out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: told capture {} {expected} for {}, the database says {} for {} ({})",
                c.id, shown.amount_minor, c.status, c.amount_minor, c.shop_id
            ),
        )),
        None => out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: answered with capture {} that the database does not hold",
                shown.id
            ),
        )),
    }
}

/// A void answered: released (the hold released by the void in the
/// books, and the status shown the one the books give), or refused by the
/// acquirer (the payment exists, of this shop).
fn void_answer(out: &mut Vec<Violation>, seen: &Seen<'_>, shown: &Shown, index: &Index<'_>) {
    own_shop(out, seen, shown);
    let what = &seen.what;
    let Some(p) = index.payments.get(shown.id.as_str()) else {
        out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: a void answered with payment {} that the database does not hold",
                shown.id
            ),
        ));
        return;
    };
    if !matches!(seen.call.result, CallResult::Voided(_)) {
        return;
    }
    let status = if p.captured_minor == 0 {
        "voided"
    } else {
        "succeeded"
    };
    if p.hold != "released_void" || shown.status != status {
        out.push(violation(
            "answers-agree-with-database",
            format!(
                "{what}: told {} {}, the books' hold is {:?} with {} captured",
                p.id, shown.status, p.hold, p.captured_minor
            ),
        ));
    }
}

/// `valid-requests-answered`: a valid request is refused only where the
/// workload made it refusable.
fn refused(out: &mut Vec<Violation>, seen: &Seen<'_>, status: u16, code: &str) {
    let expected = match seen.call.kind {
        CallKind::ChangedBody => code == "idempotency_key_reused",
        // Two refunds at once may together exceed the payment.
        CallKind::Refund(_) => code == "refund_exceeds_amount",
        // The payment ended before the cancel came.
        CallKind::Cancel => code == "payment_not_cancelable",
        // Parts may together ask more than was authorized; a void, a final
        // capture or the expiry may have closed the authorization first.
        CallKind::Capture(_) => {
            code == "capture_exceeds_capturable" || code == "payment_not_capturable"
        }
        // Used up by its captures, or expired, before the void came.
        CallKind::Void => code == "payment_not_voidable",
        _ => false,
    };
    if !expected {
        out.push(violation(
            "valid-requests-answered",
            format!("{}: refused with {status} {code}", seen.what),
        ));
    }
}

/// A call's attempts and the story of the payment its answer named.
fn call_evidence(truth: &Truth, origin: Option<Instant>, call: &CallRecord) -> Vec<String> {
    let mut lines = evidence::call_story(origin, call);
    let payment = match &call.result {
        CallResult::Paid(shown) | CallResult::Declined(shown) | CallResult::Canceled(shown) => {
            Some(&shown.id)
        }
        CallResult::Refunded(shown)
        | CallResult::RefundFailed(shown)
        | CallResult::Captured(shown)
        | CallResult::CaptureFailed(shown) => Some(&shown.parent),
        CallResult::Voided(shown) | CallResult::VoidFailed(shown) => Some(&shown.id),
        _ => None,
    };
    if let Some(payment) = payment {
        lines.extend(evidence::payment_story(truth, payment));
    }
    lines
}
