//! `replays-identical`: every definitive answer of a key is byte for byte
//! the first one.

use std::collections::{BTreeMap, HashSet};

use super::{Definitive, Violation, violation};
use crate::evidence;
use crate::history::{CallKind, CallRecord};
use crate::truth::Truth;

/// Every key's definitive answers, compared.
pub(super) fn check(out: &mut Vec<Violation>, calls: &[CallRecord], truth: &Truth) {
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
                evidence: replay_evidence(truth, evidence::origin(calls), &given),
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
