//! A payment's history told as a timeline: one line an entry, oldest
//! first, each with a sentence in words. Each kind of entry has its own
//! small function below; the API's view of the same entries is the
//! server's `render::history`.

use chargeonce_core::history::{HistoryEntry, HistoryEvent, RepeatCounts, SettledBy};
use chargeonce_core::{AcquirerCall, AcquirerOutcomeKind, PaymentStatus, RecoveryPoint};
use chargeonce_server::render::money_of;

use super::{money, when};

/// One line of the timeline.
pub struct TimelineEntry {
    /// The entry's type (`data-type`).
    pub kind: &'static str,
    /// An acquirer call's outcome (`data-outcome`).
    pub outcome: Option<&'static str>,
    /// An acquirer call's kind (`data-call`).
    pub call: Option<&'static str>,
    /// An answer's HTTP status (`data-status`).
    pub status: Option<u16>,
    /// When, in full.
    pub at: String,
    /// How long after the first entry.
    pub offset: String,
    /// The refund it is about.
    pub refund: Option<String>,
    /// What happened, in words.
    pub sentence: String,
}

/// The timeline of a history, oldest first.
pub fn timeline(entries: &[HistoryEntry]) -> Vec<TimelineEntry> {
    let first = entries.first().map(|e| e.at);
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let (outcome, call, status) = match &entry.event {
                HistoryEvent::AcquirerCall { call, outcome, .. } => {
                    (Some(outcome.as_str()), Some(call.as_str()), None)
                }
                HistoryEvent::Answered { status, .. } => (None, None, Some(*status)),
                _ => (None, None, None),
            };
            let offset = first
                .map(|f| format!("+{:.3} s", (entry.at - f).as_seconds_f64()))
                .unwrap_or_default();
            TimelineEntry {
                kind: entry.event.kind(),
                outcome,
                call,
                status,
                at: when(entry.at),
                offset,
                refund: entry.refund_id.as_ref().map(|id| id.as_str().to_owned()),
                sentence: sentence(entry, entries.get(i + 1)),
            }
        })
        .collect()
}

/// One entry in words (`next` is the entry after it, for what an
/// acquirer call led to).
pub fn sentence(entry: &HistoryEntry, next: Option<&HistoryEntry>) -> String {
    match &entry.event {
        HistoryEvent::Claimed { key, instance } => {
            format!("Claimed by key {key} on instance {instance}: the payment was created")
        }
        HistoryEvent::Linked { key, instance } => format!(
            "Key {key} (instance {instance}) found the order already paid or being paid by this \
             payment: linked to it, nothing charged"
        ),
        HistoryEvent::TakenOver {
            key,
            instance,
            recovery_point,
        } => taken_over(key, instance, *recovery_point),
        HistoryEvent::AcquirerCall { .. } => acquirer_call(&entry.event, next),
        HistoryEvent::Answered { key, status } => {
            format!("Answered {status}{} (key {key})", answered_words(*status))
        }
        HistoryEvent::CancelRequested { key, instance } => {
            cancel_requested(key.as_deref(), instance)
        }
        HistoryEvent::Settled { status, by } => settled(*status, by),
        HistoryEvent::WebhookReceived { event_id, kind } => {
            format!("Acquirer webhook {event_id} ({kind}) received: nothing to change")
        }
        HistoryEvent::RefundReserved {
            key,
            amount_minor,
            currency,
            instance,
        } => refund_reserved(key, *amount_minor, currency, instance),
        HistoryEvent::RefundEnded { status } => format!("Refund ended {}", status.as_str()),
        HistoryEvent::CaptureReserved {
            capture_id,
            key,
            amount_minor,
            currency,
            last,
            instance,
        } => capture_reserved(capture_id, key, (*amount_minor, currency), *last, instance),
        HistoryEvent::CaptureEnded { capture_id, status } => {
            format!("Capture {capture_id} ended {}", status.as_str())
        }
        HistoryEvent::ReleaseRequested {
            reason,
            key,
            instance,
        } => match key {
            Some(key) => format!(
                "Void asked (key {key}, instance {instance}): what is left of the \
                 authorization is being released"
            ),
            None => format!(
                "The authorization expired ({}): what is left is being released (instance \
                 {instance})",
                reason.as_str()
            ),
        },
        HistoryEvent::ReleaseEnded { reason, released } => {
            if *released {
                format!(
                    "Released what was left of the authorization ({})",
                    reason.as_str()
                )
            } else {
                format!(
                    "The acquirer refused the release ({}): the authorization is open again",
                    reason.as_str()
                )
            }
        }
        HistoryEvent::EventAttempt {
            event_id,
            event_type,
            attempt,
            result,
            status,
            endpoint_id,
        } => format!(
            "Merchant event {event_id} ({event_type}), delivery attempt {attempt}{}: {result}{}",
            endpoint_id
                .as_ref()
                .map(|id| format!(" to {id}"))
                .unwrap_or_default(),
            status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
        ),
        HistoryEvent::EventResent { event_id } => {
            format!("Merchant event {event_id} made due again")
        }
        HistoryEvent::KeyExpired { key, repeats } => {
            format!(
                "Key {key} expired and was swept: {}",
                repeats_words(repeats)
            )
        }
        HistoryEvent::Finding { finding_id, kind } => {
            format!("The reconciler found a {kind} (finding #{finding_id})")
        }
        HistoryEvent::FindingResolved { finding_id, how } => {
            format!("Finding #{finding_id} resolved ({how})")
        }
    }
}

fn taken_over(key: &str, instance: &str, point: RecoveryPoint) -> String {
    format!(
        "Retry took over on instance {instance}, resuming at {} (key {key}: its lease had run \
         out)",
        point.as_str()
    )
}

/// An acquirer call: what was sent, what came back, and (from `next`) an
/// unknown outcome answered 202.
fn acquirer_call(event: &HistoryEvent, next: Option<&HistoryEntry>) -> String {
    let HistoryEvent::AcquirerCall {
        call,
        outcome,
        latency_ms,
        acquirer_key,
        instance,
        reason,
    } = event
    else {
        return String::new();
    };
    let what = call_result(*call, *outcome, *latency_ms, reason.as_deref());
    let then = match next.map(|n| &n.event) {
        Some(HistoryEvent::Answered { status: 202, .. })
            if *outcome == AcquirerOutcomeKind::Unknown =>
        {
            "; answered 202, the payment stays pending"
        }
        _ => "",
    };
    format!(
        "{} sent to the acquirer (key {acquirer_key}) from {instance}: {what}{then}",
        call_name(*call)
    )
}

/// What an acquirer call came to, in words.
fn call_result(
    call: AcquirerCall,
    outcome: AcquirerOutcomeKind,
    latency_ms: u64,
    reason: Option<&str>,
) -> String {
    let aside = |open: &str, close: &str| {
        reason
            .map(|r| format!("{open}{r}{close}"))
            .unwrap_or_default()
    };
    match (call, outcome) {
        (_, AcquirerOutcomeKind::Unknown) => format!(
            "no answer within {latency_ms} ms — outcome unknown{}",
            aside(" (", ")")
        ),
        (_, AcquirerOutcomeKind::NotSent) => format!("not sent{}", aside(" (", ")")),
        (AcquirerCall::Lookup, AcquirerOutcomeKind::Succeeded) => {
            format!("the acquirer has the charge (answered in {latency_ms} ms)")
        }
        (AcquirerCall::Refund, AcquirerOutcomeKind::Succeeded) => {
            format!("refunded (answered in {latency_ms} ms)")
        }
        (AcquirerCall::Capture, AcquirerOutcomeKind::Succeeded) => {
            format!("captured (answered in {latency_ms} ms)")
        }
        (AcquirerCall::Void, AcquirerOutcomeKind::Succeeded) => {
            format!("the rest of the authorization released (answered in {latency_ms} ms)")
        }
        (AcquirerCall::Capture | AcquirerCall::Void, AcquirerOutcomeKind::Declined) => {
            format!("refused{} (answered in {latency_ms} ms)", aside(": ", ""))
        }
        (_, AcquirerOutcomeKind::Succeeded) => format!("charged (answered in {latency_ms} ms)"),
        (_, AcquirerOutcomeKind::Declined) => {
            format!("declined{} (answered in {latency_ms} ms)", aside(": ", ""))
        }
        (_, AcquirerOutcomeKind::Refused) => format!(
            "the request refused{} (answered in {latency_ms} ms)",
            aside(": ", "")
        ),
        (_, AcquirerOutcomeKind::NotFound) => {
            format!("the acquirer has no such charge (answered in {latency_ms} ms)")
        }
    }
}

fn call_name(call: AcquirerCall) -> &'static str {
    match call {
        AcquirerCall::Charge => "Charge",
        AcquirerCall::Lookup => "Look-up",
        AcquirerCall::Refund => "Refund",
        AcquirerCall::Capture => "Capture",
        AcquirerCall::Void => "Void",
    }
}

/// What an answer's status means, for the sentence.
fn answered_words(status: u16) -> &'static str {
    match status {
        201 => "",
        200 => ": the order was already paid by this payment",
        202 => {
            ": outcome unknown, the payment stays pending (a retry with the same key resumes it)"
        }
        402 => ": declined",
        409 => ": not refundable yet",
        422 => ": refused",
        503 => ": not sent yet, it will be",
        _ => "",
    }
}

fn cancel_requested(key: Option<&str>, instance: &str) -> String {
    match key {
        Some(key) => format!(
            "Cancel requested by key {key} (instance {instance}): the charge is only looked up \
             from now on, after the settle window, never sent again"
        ),
        None => format!(
            "Given up on by the completer (instance {instance}): pending past its give-up time, \
             so it is canceled — the charge is only looked up, never sent again"
        ),
    }
}

fn settled(status: PaymentStatus, by: &SettledBy) -> String {
    let by = match by {
        SettledBy::Request { key } => format!("by the request (key {key})"),
        SettledBy::Webhook { event_id } => format!("by an acquirer webhook (event {event_id})"),
        SettledBy::Reconciler => "by the reconciler, from the acquirer's ledger".into(),
    };
    format!("Settled {} {by}", status.as_str())
}

fn refund_reserved(key: &str, amount_minor: i64, currency: &str, instance: &str) -> String {
    let amount = money_of(amount_minor, currency)
        .map(money)
        .unwrap_or_else(|| format!("{amount_minor} minor units of {currency}"));
    format!("Refund of {amount} reserved (key {key}, instance {instance})")
}

fn capture_reserved(
    capture_id: &str,
    key: &str,
    (amount_minor, currency): (i64, &str),
    last: bool,
    instance: &str,
) -> String {
    let amount = money_of(amount_minor, currency)
        .map(money)
        .unwrap_or_else(|| format!("{amount_minor} minor units of {currency}"));
    let last = if last { ", the last" } else { "" };
    format!("Capture {capture_id} of {amount} reserved{last} (key {key}, instance {instance})")
}

/// A key's repeats in words.
pub fn repeats_words(repeats: &RepeatCounts) -> String {
    format!(
        "{} replay(s), {} 409(s), {} 422(s)",
        repeats.replays.count, repeats.conflicts.count, repeats.mismatches.count
    )
}
