//! What explains a violation, a line each: the answers a key was given (who
//! gave each, when, and what they differ in), a payment as the database
//! holds it, its charges in the acquirer's ledger and its history. A failed
//! run's report carries them, so a failure seen once (in CI, say) can be
//! understood from its report alone.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::Value;

use crate::history::{AttemptRecord, CallRecord};
use crate::truth::Truth;

/// At most this many history entries of one payment are quoted.
const HISTORY_LINES: usize = 40;

/// When the run's first attempt was sent: the origin of the `+s` times.
pub fn origin(calls: &[CallRecord]) -> Option<Instant> {
    calls
        .iter()
        .flat_map(|c| &c.attempts)
        .map(|a| a.sent_at)
        .min()
}

/// Seconds since `origin`, as the report prints them.
fn at(origin: Option<Instant>, attempt: &AttemptRecord) -> String {
    match origin {
        Some(origin) => format!(
            "+{:.3}s",
            attempt
                .sent_at
                .saturating_duration_since(origin)
                .as_secs_f64()
        ),
        None => "+?".to_owned(),
    }
}

/// One definitive answer: which call and attempt gave it, through which
/// instance, when, and its body.
pub fn answer_line(
    origin: Option<Instant>,
    call: &CallRecord,
    label: &str,
) -> (String, Option<Value>) {
    let Some((index, last)) = call.attempts.iter().enumerate().next_back() else {
        return (
            format!("{label}: {:?} call with no attempt", call.kind),
            None,
        );
    };
    let body = last
        .body
        .as_deref()
        .and_then(|b| serde_json::from_slice::<Value>(b).ok());
    let line = format!(
        "{label}: {} to the {:?} call's attempt {} of {} via instance {}, sent {} (took {} ms){}: {}",
        last.answer_name(),
        call.kind,
        index + 1,
        call.attempts.len(),
        call.instance,
        at(origin, last),
        last.took.as_millis(),
        if last.replayed { ", replayed" } else { "" },
        body.as_ref()
            .map_or_else(|| "(body not kept)".to_owned(), Value::to_string),
    );
    (line, body)
}

/// The members in which `theirs` differs from `ours`, as `path: ours -> theirs`.
pub fn differences(ours: &Value, theirs: &Value) -> Vec<String> {
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    flatten("", ours, &mut a);
    flatten("", theirs, &mut b);
    let mut paths: Vec<&String> = a.keys().chain(b.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|p| a.get(*p) != b.get(*p))
        .map(|p| {
            let show = |m: &BTreeMap<String, Value>| {
                m.get(p)
                    .map_or_else(|| "(absent)".to_owned(), Value::to_string)
            };
            format!("{p}: {} -> {}", show(&a), show(&b))
        })
        .collect()
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(members) if !members.is_empty() => {
            for (name, member) in members {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                flatten(&path, member, out);
            }
        }
        _ => {
            out.insert(prefix.to_owned(), value.clone());
        }
    }
}

/// The payment an answer's body names: a payment's `id`, a refund's
/// `payment_id`, or the one embedded in a problem document.
pub fn payment_named(body: &Value) -> Option<String> {
    let named = |v: &Value| -> Option<String> {
        let id = v.get("payment_id").or_else(|| v.get("id"))?.as_str()?;
        id.starts_with("pay_").then(|| id.to_owned())
    };
    named(body)
        .or_else(|| body.get("payment").and_then(named))
        .or_else(|| body.get("refund").and_then(named))
}

/// A payment as the database holds it, its charges in the acquirer's
/// ledger, and its history, oldest first.
pub fn payment_story(truth: &Truth, payment_id: &str) -> Vec<String> {
    let mut lines = Vec::new();
    match truth.payments.iter().find(|p| p.id == payment_id) {
        Some(p) => lines.push(format!(
            "payment {} ({}/{}): {} minor units, {}, charge {:?}, refunded {}",
            p.id,
            p.shop_id,
            p.reference,
            p.amount_minor,
            p.status,
            p.provider_payment_id,
            p.refunded_minor
        )),
        None => lines.push(format!("payment {payment_id}: not in the database")),
    }
    for c in truth.charges.iter().filter(|c| c.payment_id == payment_id) {
        lines.push(format!(
            "ledger charge {} ({}/{}): {} minor units, {}",
            c.id,
            c.shop_id,
            c.reference,
            c.amount_minor,
            if c.succeeded { "succeeded" } else { "declined" }
        ));
    }
    let history = truth
        .histories
        .get(payment_id)
        .map_or(&[][..], Vec::as_slice);
    if history.is_empty() {
        lines.push("history: none".to_owned());
    }
    for (n, event) in history.iter().enumerate().take(HISTORY_LINES) {
        let json = serde_json::to_string(event).unwrap_or_else(|e| format!("({e})"));
        lines.push(format!("history {}: {json}", n + 1));
    }
    if history.len() > HISTORY_LINES {
        lines.push(format!(
            "history: {} more entries",
            history.len() - HISTORY_LINES
        ));
    }
    lines
}

/// The story of every payment of an order (shop, reference).
pub fn order_story(truth: &Truth, shop: &str, reference: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for p in truth
        .payments
        .iter()
        .filter(|p| p.shop_id == shop && p.reference == reference)
    {
        lines.extend(payment_story(truth, &p.id));
    }
    for c in truth
        .charges
        .iter()
        .filter(|c| c.shop_id == shop && c.reference == reference)
        .filter(|c| !truth.payments.iter().any(|p| p.id == c.payment_id))
    {
        lines.push(format!(
            "ledger charge {} for payment {} that the database does not hold: {} minor units, {}",
            c.id,
            c.payment_id,
            c.amount_minor,
            if c.succeeded { "succeeded" } else { "declined" }
        ));
    }
    lines
}

/// Every attempt of a call, a line each.
pub fn call_story(origin: Option<Instant>, call: &CallRecord) -> Vec<String> {
    call.attempts
        .iter()
        .enumerate()
        .map(|(n, a)| {
            format!(
                "{:?} call via instance {}, attempt {}: {} sent {} (took {} ms){}",
                call.kind,
                call.instance,
                n + 1,
                a.answer_name(),
                at(origin, a),
                a.took.as_millis(),
                if a.replayed { ", replayed" } else { "" }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn differences_name_each_member_that_differs() {
        let ours = json!({"id": "pay_1", "amount_refunded": {"value": "0.00", "currency": "RUB"}, "status": "succeeded"});
        let theirs = json!({"id": "pay_1", "amount_refunded": {"value": "5.00", "currency": "RUB"}, "status": "succeeded", "refund_status": "partially_refunded"});
        assert_eq!(
            differences(&ours, &theirs),
            vec![
                "amount_refunded.value: \"0.00\" -> \"5.00\"".to_owned(),
                "refund_status: (absent) -> \"partially_refunded\"".to_owned(),
            ]
        );
        assert!(differences(&ours, &ours).is_empty());
    }

    #[test]
    fn the_payment_is_found_in_payments_refunds_and_problems() {
        assert_eq!(
            payment_named(&json!({"id": "pay_1"})).as_deref(),
            Some("pay_1")
        );
        assert_eq!(
            payment_named(&json!({"id": "re_1", "payment_id": "pay_2"})).as_deref(),
            Some("pay_2")
        );
        assert_eq!(
            payment_named(&json!({"code": "payment_declined", "payment": {"id": "pay_3"}}))
                .as_deref(),
            Some("pay_3")
        );
        assert_eq!(
            payment_named(
                &json!({"code": "refund_failed", "refund": {"id": "re_1", "payment_id": "pay_4"}})
            )
            .as_deref(),
            Some("pay_4")
        );
        assert_eq!(payment_named(&json!({"code": "x"})), None);
    }
}
