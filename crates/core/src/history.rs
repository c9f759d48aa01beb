//! A payment's history: an append-only log of everything that happened to
//! it (and to its refunds), written by the store in the same transaction as
//! each change it records, so the log never tells a story the state does
//! not: a claim, a take-over, each acquirer call and its outcome, the
//! answer stored, a settlement (by the request, an acquirer webhook or the
//! reconciler), a refund's reservation and end, each merchant event
//! delivery, a reconciliation finding, and, when a key expires, how often
//! it was repeated.
//!
//! Repeats themselves (replays, 409s, 422s) write nothing per request: they
//! are counted on the key row ([`RepeatCounts`]) and copied into the history
//! when the key is swept ([`HistoryEvent::KeyExpired`]).
//!
//! Entries are kept as long as the payment. The events are serialized with
//! serde (`type` tag, snake_case) for storage; the API renders them through
//! the wire types.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{PaymentId, PaymentStatus, RecoveryPoint, RefundId, RefundStatus};

/// One entry of a payment's history, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The entry's position: entries of one payment are ordered by it
    /// (increasing, not dense).
    pub seq: i64,
    /// When it was written, by the store's clock.
    pub at: OffsetDateTime,
    /// The payment.
    pub payment_id: PaymentId,
    /// The refund it is about, if it is about one of the payment's refunds.
    pub refund_id: Option<RefundId>,
    /// What happened.
    pub event: HistoryEvent,
}

/// Who settled a payment (moved it from `pending` to a final state).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum SettledBy {
    /// A request with its key (the first, a retry, or the completer),
    /// from the acquirer's answer to its call.
    Request {
        /// The key whose request settled it.
        key: String,
    },
    /// An authentic acquirer webhook.
    Webhook {
        /// The acquirer's event id.
        event_id: String,
    },
    /// The reconciler, from the acquirer's ledger.
    Reconciler,
}

/// What happened, in one entry of a payment's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HistoryEvent {
    /// Phase 1: the first request with `key` claimed it and created the payment.
    Claimed {
        /// The idempotency key.
        key: String,
        /// The instance that claimed it.
        instance: String,
    },
    /// A request with `key` found the order already paid (or being paid) by
    /// this payment and was linked to it: nothing charged. The other key of
    /// a double submit, or the same key again after it expired.
    Linked {
        /// The idempotency key.
        key: String,
        /// The instance that claimed it.
        instance: String,
    },
    /// An unfinished key's expired lease was taken over (by a client's
    /// retry or the completer), to resume from `recovery_point`.
    TakenOver {
        /// The idempotency key.
        key: String,
        /// The instance that took it over.
        instance: String,
        /// Where it resumed.
        recovery_point: RecoveryPoint,
    },
    /// One acquirer call ended (a charge, a look-up, or a refund: then the
    /// entry's refund id is set).
    AcquirerCall {
        /// Which call.
        call: AcquirerCall,
        /// How it ended: a definite answer, `unknown`, or `not_sent`.
        outcome: AcquirerOutcomeKind,
        /// How long it took, in milliseconds.
        latency_ms: u64,
        /// The acquirer key it was sent with (the same on every attempt).
        acquirer_key: String,
        /// The instance that called.
        instance: String,
        /// Why the outcome is not a definite answer, or the refusal's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Phase 3: the key's final answer was stored (replayed from now on).
    Answered {
        /// The idempotency key.
        key: String,
        /// The HTTP status stored.
        status: u16,
    },
    /// The payment is to be canceled: from now on whoever drives its key
    /// only looks its charge up (after the settle window), and never sends
    /// it again.
    CancelRequested {
        /// The cancel request's idempotency key; `None` when the completer
        /// gave up on the payment (it stayed pending past its give-up time).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The instance that recorded it.
        instance: String,
    },
    /// The payment left `pending` for a final state.
    Settled {
        /// Its final status.
        status: PaymentStatus,
        /// Who settled it.
        #[serde(flatten)]
        by: SettledBy,
    },
    /// An authentic acquirer webhook about this payment that changed
    /// nothing (the payment was already final, or it carried no outcome).
    WebhookReceived {
        /// The acquirer's event id.
        event_id: String,
        /// The acquirer's event type.
        kind: String,
    },
    /// A refund's phase 1: its amount was reserved on the payment.
    RefundReserved {
        /// The refund's idempotency key.
        key: String,
        /// The amount, in minor units.
        amount_minor: i64,
        /// The currency (ISO 4217).
        currency: String,
        /// The instance that claimed it.
        instance: String,
    },
    /// A refund reached its final state (its key's finish).
    RefundEnded {
        /// Its final status.
        status: RefundStatus,
    },
    /// A capture's phase 1: its amount was reserved on the payment's hold.
    CaptureReserved {
        /// The capture.
        capture_id: String,
        /// The capture's idempotency key.
        key: String,
        /// The amount, in minor units.
        amount_minor: i64,
        /// The currency (ISO 4217).
        currency: String,
        /// Whether it is the last capture (the hold closes meanwhile).
        last: bool,
        /// The instance that claimed it.
        instance: String,
    },
    /// A capture reached its final state (its key's finish).
    CaptureEnded {
        /// The capture.
        capture_id: String,
        /// Its final status.
        status: crate::CaptureStatus,
    },
    /// The release of what is left of the hold was asked: by a void key, or
    /// by the expiry of the authorization.
    ReleaseRequested {
        /// Why: `void` or `expiry`.
        reason: crate::authorization::ReleaseReason,
        /// The void's idempotency key (none for the expiry).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The instance that asked.
        instance: String,
    },
    /// The release ended with the acquirer's answer: released, or (refused)
    /// the hold open again.
    ReleaseEnded {
        /// Why it was asked.
        reason: crate::authorization::ReleaseReason,
        /// Whether the rest was released.
        released: bool,
    },
    /// One delivery attempt of a merchant event about this payment.
    EventAttempt {
        /// The merchant event.
        event_id: String,
        /// Its type (`payment.succeeded`...).
        event_type: String,
        /// The attempt's number, from 1.
        attempt: u32,
        /// `delivered`, `failed` (due again later) or `given_up`.
        result: String,
        /// The merchant's HTTP status, when it answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// The webhook endpoint it went to (absent in entries written
        /// before a shop could have several).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint_id: Option<String>,
    },
    /// An operator made a merchant event due again.
    EventResent {
        /// The merchant event.
        event_id: String,
    },
    /// A key of this payment expired and was swept: how often it had been
    /// repeated, as its row counted.
    KeyExpired {
        /// The idempotency key.
        key: String,
        /// Its repeats.
        repeats: RepeatCounts,
    },
    /// The reconciler found a disagreement about this payment.
    Finding {
        /// The finding.
        finding_id: i64,
        /// Its kind (`duplicate_charge`...).
        kind: String,
    },
    /// A finding about this payment was resolved.
    FindingResolved {
        /// The finding.
        finding_id: i64,
        /// How (`refunded` or `manual`).
        how: String,
    },
}

impl HistoryEvent {
    /// The stable name of the entry's type (the serde tag), as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Claimed { .. } => "claimed",
            Self::Linked { .. } => "linked",
            Self::TakenOver { .. } => "taken_over",
            Self::AcquirerCall { .. } => "acquirer_call",
            Self::Answered { .. } => "answered",
            Self::CancelRequested { .. } => "cancel_requested",
            Self::Settled { .. } => "settled",
            Self::WebhookReceived { .. } => "webhook_received",
            Self::RefundReserved { .. } => "refund_reserved",
            Self::RefundEnded { .. } => "refund_ended",
            Self::CaptureReserved { .. } => "capture_reserved",
            Self::CaptureEnded { .. } => "capture_ended",
            Self::ReleaseRequested { .. } => "release_requested",
            Self::ReleaseEnded { .. } => "release_ended",
            Self::EventAttempt { .. } => "event_attempt",
            Self::EventResent { .. } => "event_resent",
            Self::KeyExpired { .. } => "key_expired",
            Self::Finding { .. } => "finding",
            Self::FindingResolved { .. } => "finding_resolved",
        }
    }

    /// The event as stored (JSON).
    pub fn to_json(&self) -> String {
        // A derived Serialize of strings, numbers and enums cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a stored event.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// Whether this entry is a definite acquirer success that settled the
    /// payment: the one entry a succeeded payment's history must have
    /// exactly once.
    pub fn settled_succeeded(&self) -> bool {
        matches!(
            self,
            Self::Settled {
                status: PaymentStatus::Succeeded,
                ..
            }
        )
    }
}

/// How often one kind of repeat of a key reached the store, and when last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// How many.
    pub count: u64,
    /// The last one, by the store's clock (`None` if none).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub last_at: Option<OffsetDateTime>,
}

/// A key's repeats by what they were answered: counted on the key row in
/// the statement that reads it (no write of their own), and by each
/// instance's cache for those it answered itself (added in batches, see
/// [`History::add_repeats`](crate::store::History::add_repeats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatCounts {
    /// Finished: the stored answer replayed.
    pub replays: Tally,
    /// In progress (lease alive): 409.
    pub conflicts: Tally,
    /// Another request with the same key: 422.
    pub mismatches: Tally,
}

/// Which kind of repeat an answer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepeatKind {
    /// The stored answer replayed.
    Replay,
    /// 409: the first request is still running.
    Conflict,
    /// 422: the key was reused for another request.
    Mismatch,
}

/// Repeats an instance answered itself (from its cache), to add to a key's
/// counts: `count` of `kind`, the last at `last_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatTally {
    /// The shop.
    pub shop_id: crate::ShopId,
    /// The key.
    pub key: crate::IdempotencyKey,
    /// What they were answered.
    pub kind: RepeatKind,
    /// How many.
    pub count: u64,
    /// When the last one was answered (the instance's clock).
    pub last_at: OffsetDateTime,
}

/// One acquirer call as the engine saw it, handed to the store to record
/// with the state change that follows it (the finish, or the release or
/// parking of the lease after an unknown outcome).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquirerAttempt {
    /// Which call.
    pub call: AcquirerCall,
    /// How it ended.
    pub outcome: AcquirerOutcomeKind,
    /// How long it took.
    pub latency: Duration,
    /// The acquirer key sent.
    pub acquirer_key: String,
    /// Why the outcome is not a definite answer, or the refusal's reason.
    pub reason: Option<String>,
}

impl AcquirerAttempt {
    /// The history event of this attempt, made by `instance`.
    pub fn to_event(&self, instance: &str) -> HistoryEvent {
        HistoryEvent::AcquirerCall {
            call: self.call,
            outcome: self.outcome,
            latency_ms: u64::try_from(self.latency.as_millis()).unwrap_or(u64::MAX),
            acquirer_key: self.acquirer_key.clone(),
            instance: instance.to_owned(),
            reason: self.reason.clone(),
        }
    }
}

/// The entries a key's answer writes with it (both stores): the acquirer
/// calls its holder made (as `instance`), then the answer.
pub fn answered_events(
    lease: &crate::Lease,
    response: &crate::StoredResponse,
    attempts: &[AcquirerAttempt],
    instance: &str,
) -> Vec<HistoryEvent> {
    let mut events: Vec<HistoryEvent> = attempts.iter().map(|a| a.to_event(instance)).collect();
    events.push(HistoryEvent::Answered {
        key: lease.key.as_str().to_owned(),
        status: response.status,
    });
    events
}

/// The three entries of the finish almost every payment has, in the few
/// values that are not already in the payment's row: the request that
/// claimed the payment (its key, on the instance that claimed it) called
/// the acquirer once, to charge with the payment's own acquirer key and no
/// reason given, stored its answer and settled the payment by it.
///
/// A store may keep these values on the payment in place of a history row
/// (as it keeps the `claimed` entry), and read the three entries back with
/// [`ClaimantFinish::entries`]: the same entries, so the history reads the
/// same whichever way they were stored. Any other finish (a take-over by
/// another instance, several calls, a reason, another key) is not one, and
/// is written as entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimantFinish {
    /// How the charge ended.
    pub outcome: AcquirerOutcomeKind,
    /// How long it took, in milliseconds.
    pub latency_ms: u64,
    /// The HTTP status of the answer stored.
    pub answer_status: u16,
    /// The status the payment was settled to (its status from then on: a
    /// settled payment's status never changes again).
    pub status: PaymentStatus,
}

impl ClaimantFinish {
    /// The compact form of `events`, if they are exactly the entries
    /// [`Self::entries`] gives back for this payment, claimed with `key` by
    /// `instance`.
    pub fn of(
        payment: &PaymentId,
        key: &str,
        instance: &str,
        events: &[HistoryEvent],
    ) -> Option<Self> {
        let [call, answered, settled] = events else {
            return None;
        };
        let HistoryEvent::AcquirerCall {
            call: AcquirerCall::Charge,
            outcome,
            latency_ms,
            ..
        } = call
        else {
            return None;
        };
        let HistoryEvent::Answered {
            status: answer_status,
            ..
        } = answered
        else {
            return None;
        };
        let HistoryEvent::Settled { status, .. } = settled else {
            return None;
        };
        let finish = Self {
            outcome: *outcome,
            latency_ms: *latency_ms,
            answer_status: *answer_status,
            status: *status,
        };
        // Whatever the fields above do not hold must be what the entries
        // are rebuilt with, or the history would read back otherwise.
        (finish.entries(payment, key, instance) == *events).then_some(finish)
    }

    /// The three entries, in order, for this payment, claimed with `key` by
    /// `instance`: the charge, the answer, the settlement.
    pub fn entries(&self, payment: &PaymentId, key: &str, instance: &str) -> [HistoryEvent; 3] {
        [
            HistoryEvent::AcquirerCall {
                call: AcquirerCall::Charge,
                outcome: self.outcome,
                latency_ms: self.latency_ms,
                acquirer_key: crate::AcquirerKey::for_payment(payment).as_str().to_owned(),
                instance: instance.to_owned(),
                reason: None,
            },
            HistoryEvent::Answered {
                key: key.to_owned(),
                status: self.answer_status,
            },
            HistoryEvent::Settled {
                status: self.status,
                by: SettledBy::Request {
                    key: key.to_owned(),
                },
            },
        ]
    }
}

/// How a refund's or a capture's usual finish ended it: the last of its
/// three entries (see [`TurnFinish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// A refund, ended in `status`.
    Refund {
        /// Its final status.
        status: RefundStatus,
    },
    /// A capture, ended in `status`.
    Capture {
        /// The capture.
        capture_id: String,
        /// Its final status.
        status: crate::CaptureStatus,
    },
}

impl TurnEnd {
    /// The acquirer call the turn makes.
    fn call(&self) -> AcquirerCall {
        match self {
            Self::Refund { .. } => AcquirerCall::Refund,
            Self::Capture { .. } => AcquirerCall::Capture,
        }
    }

    /// The entry that ends the turn.
    fn event(&self) -> HistoryEvent {
        match self {
            Self::Refund { status } => HistoryEvent::RefundEnded { status: *status },
            Self::Capture { capture_id, status } => HistoryEvent::CaptureEnded {
                capture_id: capture_id.clone(),
                status: *status,
            },
        }
    }

    /// The end `event` records, if it ends a refund or a capture.
    fn of(event: &HistoryEvent) -> Option<Self> {
        match event {
            HistoryEvent::RefundEnded { status } => Some(Self::Refund { status: *status }),
            HistoryEvent::CaptureEnded { capture_id, status } => Some(Self::Capture {
                capture_id: capture_id.clone(),
                status: *status,
            }),
            _ => None,
        }
    }
}

/// The three entries of the finish almost every refund and capture has, in
/// the few values that are not already in the refund's or capture's row:
/// the request that claimed it (its key, on the instance that claimed it)
/// called the acquirer once, with the row's own acquirer key and no reason
/// given, stored its answer and ended the refund or capture by it.
///
/// As [`ClaimantFinish`] is for a payment: a store may keep these values on
/// the row in place of a history row and read the entries back with
/// [`TurnFinish::entries`], the same entries whichever way they were
/// stored. Any other finish is not one, and is written as entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFinish {
    /// How the acquirer call ended.
    pub outcome: AcquirerOutcomeKind,
    /// How long it took, in milliseconds.
    pub latency_ms: u64,
    /// The HTTP status of the answer stored.
    pub answer_status: u16,
    /// How it ended (the row's status from then on: an ended refund's or
    /// capture's status never changes again).
    pub end: TurnEnd,
}

impl TurnFinish {
    /// The compact form of `events`, if they are exactly the entries
    /// [`Self::entries`] gives back for a refund or capture sent with
    /// `acquirer_key`, claimed with `key` by `instance`.
    pub fn of(
        acquirer_key: &str,
        key: &str,
        instance: &str,
        events: &[HistoryEvent],
    ) -> Option<Self> {
        let [
            HistoryEvent::AcquirerCall {
                outcome,
                latency_ms,
                ..
            },
            HistoryEvent::Answered {
                status: answer_status,
                ..
            },
            end,
        ] = events
        else {
            return None;
        };
        let finish = Self {
            outcome: *outcome,
            latency_ms: *latency_ms,
            answer_status: *answer_status,
            end: TurnEnd::of(end)?,
        };
        // What the fields above do not hold (the call among them) must be
        // what the entries are rebuilt with, or the history would read back
        // otherwise.
        (finish.entries(acquirer_key, key, instance) == *events).then_some(finish)
    }

    /// The three entries, in order, for a refund or capture sent with
    /// `acquirer_key`, claimed with `key` by `instance`: the acquirer call,
    /// the answer, the end.
    pub fn entries(&self, acquirer_key: &str, key: &str, instance: &str) -> [HistoryEvent; 3] {
        [
            HistoryEvent::AcquirerCall {
                call: self.end.call(),
                outcome: self.outcome,
                latency_ms: self.latency_ms,
                acquirer_key: acquirer_key.to_owned(),
                instance: instance.to_owned(),
                reason: None,
            },
            HistoryEvent::Answered {
                key: key.to_owned(),
                status: self.answer_status,
            },
            self.end.event(),
        ]
    }
}

/// Whether a payment's history records a cancel request.
pub fn cancel_requested(history: &[HistoryEntry]) -> bool {
    history
        .iter()
        .any(|entry| matches!(entry.event, HistoryEvent::CancelRequested { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_their_stored_form() {
        let events = [
            HistoryEvent::Settled {
                status: PaymentStatus::Succeeded,
                by: SettledBy::Webhook {
                    event_id: "evt_1".into(),
                },
            },
            HistoryEvent::TakenOver {
                key: "k".into(),
                instance: "a:1".into(),
                recovery_point: RecoveryPoint::PaymentCreated,
            },
            HistoryEvent::KeyExpired {
                key: "k".into(),
                repeats: RepeatCounts::default(),
            },
        ];
        for event in events {
            let json = event.to_json();
            assert!(
                json.contains(&format!("\"type\":\"{}\"", event.kind())),
                "{json}"
            );
            assert_eq!(HistoryEvent::from_json(&json).unwrap(), event);
        }
    }

    #[test]
    fn only_a_settlement_to_succeeded_counts_as_the_success() {
        let settled = HistoryEvent::Settled {
            status: PaymentStatus::Succeeded,
            by: SettledBy::Reconciler,
        };
        assert!(settled.settled_succeeded());
        let call = AcquirerAttempt {
            call: AcquirerCall::Charge,
            outcome: AcquirerOutcomeKind::Succeeded,
            latency: Duration::from_millis(3),
            acquirer_key: "ak".into(),
            reason: None,
        }
        .to_event("a:1");
        assert!(!call.settled_succeeded());
    }

    fn a_claimants_finish(payment: &PaymentId) -> Vec<HistoryEvent> {
        vec![
            AcquirerAttempt {
                call: AcquirerCall::Charge,
                outcome: AcquirerOutcomeKind::Declined,
                latency: Duration::from_millis(7),
                acquirer_key: crate::AcquirerKey::for_payment(payment).as_str().to_owned(),
                reason: None,
            }
            .to_event("a:1"),
            HistoryEvent::Answered {
                key: "k".into(),
                status: 402,
            },
            HistoryEvent::Settled {
                status: PaymentStatus::Declined,
                by: SettledBy::Request { key: "k".into() },
            },
        ]
    }

    #[test]
    fn a_claimants_finish_reads_back_as_the_same_entries() {
        let payment = PaymentId::generate();
        let events = a_claimants_finish(&payment);
        let finish = ClaimantFinish::of(&payment, "k", "a:1", &events).unwrap();
        assert_eq!(
            finish,
            ClaimantFinish {
                outcome: AcquirerOutcomeKind::Declined,
                latency_ms: 7,
                answer_status: 402,
                status: PaymentStatus::Declined,
            }
        );
        assert_eq!(finish.entries(&payment, "k", "a:1").to_vec(), events);
    }

    fn a_refunds_finish() -> Vec<HistoryEvent> {
        vec![
            AcquirerAttempt {
                call: AcquirerCall::Refund,
                outcome: AcquirerOutcomeKind::Succeeded,
                latency: Duration::from_millis(4),
                acquirer_key: "rk".into(),
                reason: None,
            }
            .to_event("a:1"),
            HistoryEvent::Answered {
                key: "k".into(),
                status: 201,
            },
            HistoryEvent::RefundEnded {
                status: RefundStatus::Succeeded,
            },
        ]
    }

    fn a_captures_finish() -> Vec<HistoryEvent> {
        vec![
            AcquirerAttempt {
                call: AcquirerCall::Capture,
                outcome: AcquirerOutcomeKind::Declined,
                latency: Duration::from_millis(9),
                acquirer_key: "ck".into(),
                reason: None,
            }
            .to_event("a:1"),
            HistoryEvent::Answered {
                key: "k".into(),
                status: 402,
            },
            HistoryEvent::CaptureEnded {
                capture_id: "cap_1".into(),
                status: crate::CaptureStatus::Failed,
            },
        ]
    }

    #[test]
    fn a_turns_usual_finish_reads_back_as_the_same_entries() {
        let events = a_refunds_finish();
        let finish = TurnFinish::of("rk", "k", "a:1", &events).unwrap();
        assert_eq!(
            finish,
            TurnFinish {
                outcome: AcquirerOutcomeKind::Succeeded,
                latency_ms: 4,
                answer_status: 201,
                end: TurnEnd::Refund {
                    status: RefundStatus::Succeeded
                },
            }
        );
        assert_eq!(finish.entries("rk", "k", "a:1").to_vec(), events);
        let events = a_captures_finish();
        let finish = TurnFinish::of("ck", "k", "a:1", &events).unwrap();
        assert_eq!(
            finish.end,
            TurnEnd::Capture {
                capture_id: "cap_1".into(),
                status: crate::CaptureStatus::Failed
            }
        );
        assert_eq!(finish.entries("ck", "k", "a:1").to_vec(), events);
    }

    #[test]
    fn any_other_turn_finish_is_not_the_usual_one() {
        for (acquirer_key, events) in [("rk", a_refunds_finish()), ("ck", a_captures_finish())] {
            // Another acquirer key, key or instance than the row's.
            assert!(TurnFinish::of("xk", "k", "a:1", &events).is_none());
            assert!(TurnFinish::of(acquirer_key, "k2", "a:1", &events).is_none());
            assert!(TurnFinish::of(acquirer_key, "k", "b:1", &events).is_none());
            let changes: [fn(&mut Vec<HistoryEvent>); 5] = [
                |e| e.truncate(2),
                |e| {
                    let again = e[0].clone();
                    e.insert(0, again);
                },
                |e| {
                    if let HistoryEvent::AcquirerCall { reason, .. } = &mut e[0] {
                        *reason = Some("timeout".into());
                    }
                },
                |e| {
                    if let HistoryEvent::AcquirerCall { call, .. } = &mut e[0] {
                        *call = AcquirerCall::Lookup;
                    }
                },
                |e| {
                    e[2] = HistoryEvent::Answered {
                        key: "k".into(),
                        status: 201,
                    }
                },
            ];
            for change in changes {
                let mut changed = events.clone();
                change(&mut changed);
                assert!(
                    TurnFinish::of(acquirer_key, "k", "a:1", &changed).is_none(),
                    "{changed:?}"
                );
            }
        }
    }

    #[test]
    fn any_other_finish_is_not_a_claimants() {
        let payment = PaymentId::generate();
        let other = PaymentId::generate();
        let events = a_claimants_finish(&payment);
        // Claimed with another key, by another instance, or another payment's.
        assert!(ClaimantFinish::of(&payment, "k2", "a:1", &events).is_none());
        assert!(ClaimantFinish::of(&payment, "k", "b:1", &events).is_none());
        assert!(ClaimantFinish::of(&other, "k", "a:1", &events).is_none());
        // Each entry changed in one way the compact form cannot hold.
        let changes: [fn(&mut Vec<HistoryEvent>); 6] = [
            |e| e.truncate(2),
            |e| {
                let again = e[0].clone();
                e.insert(0, again);
            },
            |e| {
                if let HistoryEvent::AcquirerCall { reason, .. } = &mut e[0] {
                    *reason = Some("timeout".into());
                }
            },
            |e| {
                if let HistoryEvent::AcquirerCall { call, .. } = &mut e[0] {
                    *call = AcquirerCall::Lookup;
                }
            },
            |e| {
                if let HistoryEvent::Answered { key, .. } = &mut e[1] {
                    *key = "k2".into();
                }
            },
            |e| {
                e[2] = HistoryEvent::Settled {
                    status: PaymentStatus::Declined,
                    by: SettledBy::Reconciler,
                }
            },
        ];
        for change in changes {
            let mut changed = events.clone();
            change(&mut changed);
            assert!(
                ClaimantFinish::of(&payment, "k", "a:1", &changed).is_none(),
                "{changed:?}"
            );
        }
    }
}
