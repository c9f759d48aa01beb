//! A payment's history as `GET /v1/payments/{id}/history` shows it: every
//! entry oldest first (a claim, a take-over, each acquirer call, the answer
//! stored, the settlement, refunds, merchant event deliveries, findings),
//! and the repeat counts of the payment's keys. Amounts are decimal
//! strings, times RFC 3339.

use serde::{Deserialize, Serialize};

pub use crate::capture::CaptureStatus;

use crate::{Amount, KeyRecoveryPoint, PaymentStatus, RefundStatus};

/// Always `payment_history`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PaymentHistoryObject {
    /// `payment_history`.
    #[default]
    PaymentHistory,
}

/// Which acquirer call an entry is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HistoryAcquirerCall {
    /// A charge.
    Charge,
    /// A look-up of what the acquirer holds for the payment.
    Lookup,
    /// A refund.
    Refund,
    /// A capture of (part of) the authorization.
    Capture,
    /// A void of what is left of the authorization.
    Void,
}

/// How an acquirer call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HistoryCallOutcome {
    /// Charged (or, for a look-up, a charge was found; for a refund, refunded).
    Succeeded,
    /// Declined: the acquirer's answer (a card declined, a refund refused
    /// by its rules).
    Declined,
    /// The request itself refused (a 4xx): definite from a first send; from
    /// a resend, confirmed only by a look-up after the settle window.
    Refused,
    /// A look-up found nothing.
    NotFound,
    /// No definite answer: a timeout, a reset, a 5xx, a lost answer.
    Unknown,
    /// Certainly never reached the acquirer.
    NotSent,
}

/// Who settled a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HistorySettledBy {
    /// A request with its key (`key` names it), from the acquirer's answer.
    Request,
    /// An authentic acquirer webhook (`event_id` names it).
    Webhook,
    /// The reconciler, from the acquirer's ledger.
    Reconciler,
}

/// How often one kind of repeat of a key reached the service, and when last.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryTally {
    /// How many.
    pub count: u64,
    /// The last one (RFC 3339), null if none.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub last_at: Option<String>,
}

/// What happened, in one entry (`type` says which; its other members
/// follow from it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HistoryEvent {
    /// The first request with `key` claimed it and created the payment.
    Claimed {
        /// The idempotency key.
        key: String,
        /// The instance that claimed it.
        instance: String,
    },
    /// A request with `key` found the order already paid (or being paid)
    /// by this payment and was linked to it: nothing was charged.
    Linked {
        /// The idempotency key.
        key: String,
        /// The instance that claimed it.
        instance: String,
    },
    /// An unfinished key's expired lease was taken over (by a retry or the
    /// completer), to resume from `recovery_point`.
    TakenOver {
        /// The idempotency key.
        key: String,
        /// The instance that took it over.
        instance: String,
        /// Where it resumed.
        recovery_point: KeyRecoveryPoint,
    },
    /// One acquirer call ended.
    AcquirerCall {
        /// Which call.
        call: HistoryAcquirerCall,
        /// How it ended.
        outcome: HistoryCallOutcome,
        /// How long it took, in milliseconds.
        latency_ms: u64,
        /// The key the acquirer saw (the same on every attempt).
        acquirer_key: String,
        /// The instance that called.
        instance: String,
        /// Why the outcome is not a definite answer, or the refusal's reason.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The key's final answer was stored (replayed from now on).
    Answered {
        /// The idempotency key.
        key: String,
        /// The HTTP status stored.
        status: u16,
    },
    /// The payment is to be canceled: its charge is only looked up from now
    /// on (after the settle window), never sent again.
    CancelRequested {
        /// The cancel request's idempotency key; absent when the service
        /// gave up on a payment pending too long.
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
        by: HistorySettledBy,
        /// The key whose request settled it (`by` = `request`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The acquirer's webhook event (`by` = `webhook`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    /// An authentic acquirer webhook about the payment that changed nothing.
    WebhookReceived {
        /// The acquirer's event id.
        event_id: String,
        /// The acquirer's event type.
        kind: String,
    },
    /// A refund's amount was reserved on the payment (the entry's
    /// `refund_id` names the refund).
    RefundReserved {
        /// The refund's idempotency key.
        key: String,
        /// How much.
        amount: Amount,
        /// The instance that claimed it.
        instance: String,
    },
    /// A refund reached its final state.
    RefundEnded {
        /// Its final status.
        status: RefundStatus,
    },
    /// A capture's amount was reserved on the payment's authorization.
    CaptureReserved {
        /// The capture (`cap_...`).
        capture_id: String,
        /// The capture's idempotency key.
        key: String,
        /// How much.
        amount: Amount,
        /// Whether it is the last capture.
        #[cfg_attr(feature = "openapi", schema(rename = "final"))]
        #[serde(rename = "final")]
        last: bool,
        /// The instance that claimed it.
        instance: String,
    },
    /// A capture reached its final state.
    CaptureEnded {
        /// The capture.
        capture_id: String,
        /// Its final status: `succeeded` or `failed`.
        status: CaptureStatus,
    },
    /// The release of what is left of the authorization was asked.
    ReleaseRequested {
        /// Why: a void, or the authorization's expiry.
        reason: ReleaseReason,
        /// The void's idempotency key (absent for the expiry).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The instance that asked.
        instance: String,
    },
    /// The release ended: the rest released, or (the acquirer refused) the
    /// authorization open again.
    ReleaseEnded {
        /// Why it was asked.
        reason: ReleaseReason,
        /// Whether the rest was released.
        released: bool,
    },
    /// One delivery attempt of a merchant event about the payment.
    EventAttempt {
        /// The merchant event.
        event_id: String,
        /// Its type (`payment.succeeded`...).
        event_type: String,
        /// The attempt's number, from 1.
        attempt: u32,
        /// `delivered`, `failed` (due again later) or `given_up`.
        result: String,
        /// The shop's HTTP status, when it answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        /// The webhook endpoint it went to (`we_...`); absent in entries
        /// written before a shop could have several.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint_id: Option<String>,
    },
    /// A merchant event was made due again (by the shop or an operator).
    EventResent {
        /// The merchant event.
        event_id: String,
    },
    /// A key of the payment expired and was swept: how often it had been
    /// repeated.
    KeyExpired {
        /// The idempotency key.
        key: String,
        /// Its stored answer replayed.
        replays: HistoryTally,
        /// 409s: its first request was still running.
        conflicts: HistoryTally,
        /// 422s: the key reused for another request.
        mismatches: HistoryTally,
    },
    /// The reconciler found a disagreement about the payment.
    Finding {
        /// The finding.
        finding_id: i64,
        /// Its kind (`duplicate_charge`, `orphan_charge`, `missing_charge`, `mismatch`).
        kind: String,
    },
    /// A finding about the payment was resolved.
    FindingResolved {
        /// The finding.
        finding_id: i64,
        /// How (`refunded` or `manual`).
        how: String,
    },
    /// An entry this version cannot read, a type a newer server added among
    /// them: kept as sent, so a client reads the rest of the history instead
    /// of failing on it (as the Python and TypeScript SDKs do). This server
    /// never sends it; it is not in the OpenAPI document.
    #[serde(untagged, skip_serializing)]
    Unknown {
        /// Its `type`.
        #[serde(rename = "type")]
        kind: String,
        /// Its other members, as sent.
        #[serde(flatten)]
        members: serde_json::Map<String, serde_json::Value>,
    },
}

/// One entry of a payment's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryEntry {
    /// Its position: increasing, not dense.
    pub seq: i64,
    /// When it was written (RFC 3339, the store's clock).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub at: String,
    /// The refund it is about, when it is about one of the payment's refunds.
    pub refund_id: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub event: HistoryEvent,
}

/// A key of the payment that still exists, and its repeats by answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryKey {
    /// The idempotency key.
    pub key: String,
    /// Its stored answer replayed.
    pub replays: HistoryTally,
    /// 409s: its first request was still running.
    pub conflicts: HistoryTally,
    /// 422s: the key reused for another request.
    pub mismatches: HistoryTally,
}

/// A payment's history.
///
/// The fields are declared in the order the server sends them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PaymentHistory {
    /// Always `payment_history`.
    pub object: PaymentHistoryObject,
    /// The payment.
    pub payment_id: String,
    /// Every entry, oldest first.
    pub entries: Vec<HistoryEntry>,
    /// The payment's keys that still exist (named by its `claimed`,
    /// `linked` and `taken_over` entries) and their repeats; a swept key's
    /// counts are in its `key_expired` entry.
    pub keys: Vec<HistoryKey>,
}

/// Why an authorization's rest is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// The shop voided it.
    Void,
    /// It was not captured in time.
    Expiry,
}
