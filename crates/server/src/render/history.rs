//! A payment's history as the API shows it (`GET
//! /v1/payments/{id}/history`): each entry's event in the wire's terms, and
//! its keys' repeat counts. The console tells the same entries in words
//! (its `prose` module); both read them from the core's [`HistoryEvent`].

use chargeonce_core::authorization::ReleaseReason;
use chargeonce_core::history::{HistoryEntry, HistoryEvent, RepeatCounts, SettledBy, Tally};
use chargeonce_core::store::KeyRepeats;
use chargeonce_core::{
    AcquirerCall, AcquirerOutcomeKind, CaptureMethod, CaptureStatus, Payment, RefundStatus,
};
use chargeonce_wire as wire;

use super::{money_of, payment_status, recovery_point, rfc3339};

fn tally(tally: &Tally) -> wire::HistoryTally {
    wire::HistoryTally {
        count: tally.count,
        last_at: tally.last_at.map(rfc3339),
    }
}

/// An amount in minor units of a currency given by its code, as a decimal
/// string (the raw minor units if the code is not one we know, which a
/// stored entry cannot have).
fn amount(minor: i64, currency: &str) -> wire::Amount {
    let value = money_of(minor, currency)
        .map(|m| m.to_decimal_string())
        .unwrap_or_else(|| minor.to_string());
    wire::Amount::new(value, currency)
}

/// One event as the API shows it.
pub fn event_view(event: &HistoryEvent) -> wire::HistoryEvent {
    match event.clone() {
        HistoryEvent::Claimed { key, instance } => wire::HistoryEvent::Claimed { key, instance },
        HistoryEvent::Linked { key, instance } => wire::HistoryEvent::Linked { key, instance },
        HistoryEvent::TakenOver {
            key,
            instance,
            recovery_point: point,
        } => wire::HistoryEvent::TakenOver {
            key,
            instance,
            recovery_point: recovery_point(point),
        },
        HistoryEvent::AcquirerCall {
            call,
            outcome,
            latency_ms,
            acquirer_key,
            instance,
            // The reason is the acquirer client's own error text (it may name
            // the acquirer's URL): operators read it in the console, shops
            // get the outcome only.
            reason: _,
        } => wire::HistoryEvent::AcquirerCall {
            call: match call {
                AcquirerCall::Charge => wire::HistoryAcquirerCall::Charge,
                AcquirerCall::Lookup => wire::HistoryAcquirerCall::Lookup,
                AcquirerCall::Refund => wire::HistoryAcquirerCall::Refund,
                AcquirerCall::Capture => wire::HistoryAcquirerCall::Capture,
                AcquirerCall::Void => wire::HistoryAcquirerCall::Void,
            },
            outcome: match outcome {
                AcquirerOutcomeKind::Succeeded => wire::HistoryCallOutcome::Succeeded,
                AcquirerOutcomeKind::Declined => wire::HistoryCallOutcome::Declined,
                AcquirerOutcomeKind::Refused => wire::HistoryCallOutcome::Refused,
                AcquirerOutcomeKind::NotFound => wire::HistoryCallOutcome::NotFound,
                AcquirerOutcomeKind::Unknown => wire::HistoryCallOutcome::Unknown,
                AcquirerOutcomeKind::NotSent => wire::HistoryCallOutcome::NotSent,
            },
            latency_ms,
            acquirer_key,
            instance,
            reason: None,
        },
        HistoryEvent::Answered { key, status } => wire::HistoryEvent::Answered { key, status },
        HistoryEvent::CancelRequested { key, instance } => {
            wire::HistoryEvent::CancelRequested { key, instance }
        }
        HistoryEvent::Settled { status, by } => {
            let (by, key, event_id) = match by {
                SettledBy::Request { key } => (wire::HistorySettledBy::Request, Some(key), None),
                SettledBy::Webhook { event_id } => {
                    (wire::HistorySettledBy::Webhook, None, Some(event_id))
                }
                SettledBy::Reconciler => (wire::HistorySettledBy::Reconciler, None, None),
            };
            wire::HistoryEvent::Settled {
                status: payment_status(status),
                by,
                key,
                event_id,
            }
        }
        HistoryEvent::WebhookReceived { event_id, kind } => {
            wire::HistoryEvent::WebhookReceived { event_id, kind }
        }
        HistoryEvent::RefundReserved {
            key,
            amount_minor,
            currency,
            instance,
        } => wire::HistoryEvent::RefundReserved {
            key,
            amount: amount(amount_minor, &currency),
            instance,
        },
        HistoryEvent::RefundEnded { status } => wire::HistoryEvent::RefundEnded {
            status: match status {
                RefundStatus::Pending => wire::RefundStatus::Pending,
                RefundStatus::Succeeded => wire::RefundStatus::Succeeded,
                RefundStatus::Failed => wire::RefundStatus::Failed,
            },
        },
        HistoryEvent::CaptureReserved {
            capture_id,
            key,
            amount_minor,
            currency,
            last,
            instance,
        } => wire::HistoryEvent::CaptureReserved {
            capture_id,
            key,
            amount: amount(amount_minor, &currency),
            last,
            instance,
        },
        HistoryEvent::CaptureEnded { capture_id, status } => wire::HistoryEvent::CaptureEnded {
            capture_id,
            status: match status {
                CaptureStatus::Pending => wire::CaptureStatus::Pending,
                CaptureStatus::Succeeded => wire::CaptureStatus::Succeeded,
                CaptureStatus::Failed => wire::CaptureStatus::Failed,
            },
        },
        HistoryEvent::ReleaseRequested {
            reason,
            key,
            instance,
        } => wire::HistoryEvent::ReleaseRequested {
            reason: release_reason(reason),
            key,
            instance,
        },
        HistoryEvent::ReleaseEnded { reason, released } => wire::HistoryEvent::ReleaseEnded {
            reason: release_reason(reason),
            released,
        },
        HistoryEvent::EventAttempt {
            event_id,
            event_type,
            attempt,
            result,
            status,
            endpoint_id,
        } => wire::HistoryEvent::EventAttempt {
            event_id,
            event_type,
            attempt,
            result,
            status,
            endpoint_id,
        },
        HistoryEvent::EventResent { event_id } => wire::HistoryEvent::EventResent { event_id },
        HistoryEvent::KeyExpired { key, repeats } => {
            let RepeatCounts {
                replays,
                conflicts,
                mismatches,
            } = repeats;
            wire::HistoryEvent::KeyExpired {
                key,
                replays: tally(&replays),
                conflicts: tally(&conflicts),
                mismatches: tally(&mismatches),
            }
        }
        HistoryEvent::Finding { finding_id, kind } => {
            wire::HistoryEvent::Finding { finding_id, kind }
        }
        HistoryEvent::FindingResolved { finding_id, how } => {
            wire::HistoryEvent::FindingResolved { finding_id, how }
        }
    }
}

/// A key's repeats as the API shows them.
pub fn key_view(key: &KeyRepeats) -> wire::HistoryKey {
    wire::HistoryKey {
        key: key.key.as_str().to_owned(),
        replays: tally(&key.repeats.replays),
        conflicts: tally(&key.repeats.conflicts),
        mismatches: tally(&key.repeats.mismatches),
    }
}

/// The history as the API shows it.
pub fn view(
    payment: &Payment,
    entries: &[HistoryEntry],
    keys: &[KeyRepeats],
) -> wire::PaymentHistory {
    let manual = payment.capture.method() == CaptureMethod::Manual;
    wire::PaymentHistory {
        object: wire::PaymentHistoryObject::PaymentHistory,
        payment_id: payment.id.as_str().to_owned(),
        entries: entries
            .iter()
            .map(|entry| wire::HistoryEntry {
                seq: entry.seq,
                at: rfc3339(entry.at),
                refund_id: entry.refund_id.as_ref().map(|id| id.as_str().to_owned()),
                event: authorization_settled(event_view(&entry.event), manual),
            })
            .collect(),
        keys: keys.iter().map(key_view).collect(),
    }
}

/// An authorization's charge settles it `authorized` (nothing was taken
/// yet), as its merchant event says; the store records the charge's own
/// status.
fn authorization_settled(event: wire::HistoryEvent, manual: bool) -> wire::HistoryEvent {
    match event {
        wire::HistoryEvent::Settled {
            status: wire::PaymentStatus::Succeeded,
            by,
            key,
            event_id,
        } if manual => wire::HistoryEvent::Settled {
            status: wire::PaymentStatus::Authorized,
            by,
            key,
            event_id,
        },
        other => other,
    }
}

/// A release's reason as the API names it.
fn release_reason(reason: ReleaseReason) -> wire::ReleaseReason {
    match reason {
        ReleaseReason::Void => wire::ReleaseReason::Void,
        ReleaseReason::Expiry => wire::ReleaseReason::Expiry,
    }
}
