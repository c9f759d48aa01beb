//! What the clients saw, recorded the way Jepsen records operations: every
//! call and every attempt, each ending ok, failed, or unknown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chargeonce_client::{Attempt, AttemptAnswer, FailureKind};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Why a call was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// The intent's payment (also the client coming back after an uncertain call).
    Pay,
    /// The same payment sent a second time at once (a double click).
    DoubleClick,
    /// The same payment repeated much later.
    LateRetry,
    /// The same key with another amount: must be refused (422).
    ChangedBody,
    /// A refund of the intent's payment under its own key (`refund-1`, `refund-2`).
    Refund(u8),
    /// A cancel of the intent's payment under its own key (`cancel`).
    Cancel,
    /// A capture of the intent's authorization under its own key
    /// (`capture-1`, ...).
    Capture(u8),
    /// A void of the intent's authorization under its own key (`void`).
    Void,
}

impl CallKind {
    /// Whether the call carries the intent's payment request unchanged.
    pub fn is_payment(&self) -> bool {
        matches!(self, Self::Pay | Self::DoubleClick | Self::LateRetry)
    }
}

/// A payment or refund as an answer showed it (the fields the checker needs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shown {
    /// `pay_...` or `re_...`.
    pub id: String,
    /// The shop the answer says it belongs to.
    pub shop_id: String,
    /// `succeeded`, `declined`, `failed`, ...
    pub status: String,
    /// In minor units.
    pub amount_minor: i64,
    /// The payment's order reference, or the refunded payment's id.
    pub parent: String,
    /// A payment's metadata as shown (empty for a refund).
    pub metadata: std::collections::BTreeMap<String, String>,
}

/// How a call ended, Jepsen style.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CallResult {
    /// Definite: paid.
    Paid(Shown),
    /// Definite: declined.
    Declined(Shown),
    /// Definite: canceled, nothing taken (the completer gave up on it, or a
    /// cancel ended it).
    Canceled(Shown),
    /// Definite: refunded.
    Refunded(Shown),
    /// Definite: the acquirer refused the refund.
    RefundFailed(Shown),
    /// Definite: a cancel ended, with the payment as it ended (`canceled`,
    /// `declined`, or `succeeded` and refunded).
    CancelEnded(Shown),
    /// Definite: captured (the capture as shown; `parent` is its payment).
    Captured(Shown),
    /// Definite: the acquirer refused the capture.
    CaptureFailed(Shown),
    /// Definite: the rest of the authorization released (the payment as
    /// shown, `status` its authorization's: `voided` or `succeeded`).
    Voided(Shown),
    /// Definite: the acquirer refused the void (the payment as shown).
    VoidFailed(Shown),
    /// Unknown: the budget ran out; either outcome is possible.
    Uncertain,
    /// Refused before anything executed (or after, if an earlier attempt may
    /// have executed: then the SDK says uncertain instead).
    Refused {
        /// The HTTP status.
        status: u16,
        /// The problem code.
        code: String,
    },
    /// Anything else (an answer the SDK could not read).
    Error {
        /// What.
        message: String,
    },
}

impl CallResult {
    /// `ok`, `fail` or `info` (unknown), as Jepsen calls them.
    pub fn verdict(&self) -> &'static str {
        match self {
            Self::Paid(_)
            | Self::Refunded(_)
            | Self::CancelEnded(_)
            | Self::Captured(_)
            | Self::Voided(_) => "ok",
            Self::Declined(_)
            | Self::Canceled(_)
            | Self::RefundFailed(_)
            | Self::CaptureFailed(_)
            | Self::VoidFailed(_)
            | Self::Refused { .. } => "fail",
            Self::Uncertain | Self::Error { .. } => "info",
        }
    }
}

/// One attempt of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// The HTTP status, when an answer came.
    pub status: Option<u16>,
    /// Why no answer came.
    pub failure: Option<FailureKind>,
    /// `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// SHA-256 of the answer's body.
    pub body_sha256: Option<[u8; 32]>,
    /// The body itself, for an answer that may be definitive (not a 202,
    /// a 409, a 429 or a 5xx): a report names what two answers differ in.
    pub body: Option<Arc<[u8]>>,
    /// How long it took.
    pub took: Duration,
    /// When it was sent (so the report can tell which attempts a failover
    /// overlapped).
    pub sent_at: Instant,
}

impl AttemptRecord {
    /// Records an SDK attempt, keeping only a hash of its body.
    pub fn of(attempt: &Attempt) -> Self {
        let (status, failure, replayed) = match &attempt.answer {
            AttemptAnswer::Http {
                status, replayed, ..
            } => (Some(*status), None, *replayed),
            AttemptAnswer::Failed { kind, .. } => (None, Some(*kind), false),
        };
        let kept = status.is_some_and(|s| !matches!(s, 202 | 409 | 429 | 500..));
        Self {
            status,
            failure,
            replayed,
            body_sha256: attempt.body.as_ref().map(|b| Sha256::digest(b).into()),
            body: attempt
                .body
                .as_ref()
                .filter(|_| kept)
                .map(|b| Arc::from(b.as_ref())),
            took: attempt.took,
            sent_at: attempt.sent_at,
        }
    }

    /// When it ended: its answer came, or the client gave up on it.
    pub fn ended_at(&self) -> Instant {
        self.sent_at + self.took
    }

    /// It got no definitive answer: a 5xx (a 503 while the store was away,
    /// a 502 from a proxy whose instance was down) or no answer at all.
    pub fn failed(&self) -> bool {
        match self.status {
            Some(status) => status >= 500,
            None => true,
        }
    }

    /// How the report names what it got: the HTTP status, or the failure
    /// (`lost`, `timeout`, `connect`).
    pub fn answer_name(&self) -> String {
        match (self.status, self.failure) {
            (Some(status), _) => status.to_string(),
            (None, Some(kind)) => format!("{kind:?}").to_lowercase(),
            (None, None) => "none".to_owned(),
        }
    }

    /// Sent, but no answer: the request may have executed.
    pub fn is_unknown(&self) -> bool {
        matches!(self.failure, Some(FailureKind::Timeout | FailureKind::Lost))
    }
}

/// One call of the client SDK (its own retries included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// The intent.
    pub intent: usize,
    /// Why.
    pub kind: CallKind,
    /// Through which instance's proxy.
    pub instance: usize,
    /// Every attempt.
    pub attempts: Vec<AttemptRecord>,
    /// How it ended.
    pub result: CallResult,
    /// From the first attempt to the end.
    pub took: Duration,
}

impl CallRecord {
    /// The definitive answer of the call (status and body hash), if it got one.
    pub fn definitive(&self) -> Option<(u16, [u8; 32])> {
        match self.result {
            CallResult::Paid(_)
            | CallResult::Declined(_)
            | CallResult::Canceled(_)
            | CallResult::CancelEnded(_)
            | CallResult::Refunded(_)
            | CallResult::RefundFailed(_) => {
                let last = self.attempts.last()?;
                Some((last.status?, last.body_sha256?))
            }
            _ => None,
        }
    }
}
