//! What the engine and the workers report as they go, for metrics. A trait, so
//! the core stays free of any metrics library: the service implements it (with
//! Prometheus counters), tests may record, and [`NoObserver`] ignores it all.

use crate::api_key::Mode;
use std::time::Duration;

/// Which acquirer call an observation is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcquirerCall {
    /// A charge.
    Charge,
    /// A look-up of what the acquirer holds for a payment.
    Lookup,
    /// A refund.
    Refund,
    /// A capture of (part of) an authorization.
    Capture,
    /// A void of what is left of an authorization.
    Void,
}

impl AcquirerCall {
    /// The name of the call's trace span (`acquirer charge`, ...).
    pub fn span_name(&self) -> &'static str {
        match self {
            Self::Charge => "acquirer charge",
            Self::Lookup => "acquirer lookup",
            Self::Refund => "acquirer refund",
            Self::Capture => "acquirer capture",
            Self::Void => "acquirer void",
        }
    }

    /// A stable label (`charge`, `lookup`, `refund`, `capture`, `void`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Charge => "charge",
            Self::Lookup => "lookup",
            Self::Refund => "refund",
            Self::Capture => "capture",
            Self::Void => "void",
        }
    }
}

/// How an acquirer call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcquirerOutcomeKind {
    /// Charged (or, for a look-up, a charge was found).
    Succeeded,
    /// Declined: the acquirer's definite answer (a card declined; for a
    /// refund, refused by the acquirer's rules).
    Declined,
    /// The request itself refused (a 4xx such as 400, 402 or 422): nothing
    /// was executed by this request. From a first send it is definite; from
    /// a resend it proves nothing until confirmed (the engine's resend rule).
    Refused,
    /// A look-up found nothing.
    NotFound,
    /// No definite answer: timeout, reset, 5xx, lost answer.
    Unknown,
    /// Certainly never reached the acquirer.
    NotSent,
}

impl AcquirerOutcomeKind {
    /// A stable label (`succeeded`, `declined`, `refused`, `not_found`,
    /// `unknown`, `not_sent`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Declined => "declined",
            Self::Refused => "refused",
            Self::NotFound => "not_found",
            Self::Unknown => "unknown",
            Self::NotSent => "not_sent",
        }
    }

    /// Parses a stored label (the inverse of [`Self::as_str`]).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "succeeded" => Some(Self::Succeeded),
            "declined" => Some(Self::Declined),
            "refused" => Some(Self::Refused),
            "not_found" => Some(Self::NotFound),
            "unknown" => Some(Self::Unknown),
            "not_sent" => Some(Self::NotSent),
            _ => None,
        }
    }
}

/// How one completer attempt on a stalled key ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompleterResult {
    /// The key now has its final answer stored.
    Finished,
    /// Still no definite answer (acquirer unknown or unreachable, or the
    /// order's payment is pending); the key waits for the next pass.
    StillPending,
    /// Someone else holds the key (a client retry, another instance).
    Skipped,
    /// The store failed.
    Failed,
}

impl CompleterResult {
    /// A stable label (`finished`, `still_pending`, `skipped`, `failed`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Finished => "finished",
            Self::StillPending => "still_pending",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
        }
    }
}

/// Receives what happens, as it happens. Every method has an empty default, so
/// an implementation picks what it counts. Methods must be cheap and never block.
pub trait Observer: Send + Sync + 'static {
    /// A new key was claimed (phase 1 committed).
    fn claimed(&self) {}
    /// A finished key's stored answer was replayed.
    fn replayed(&self) {}
    /// A repeat found the key's lease alive: 409.
    fn in_progress(&self) {}
    /// A key was reused for another request: 422.
    fn mismatch(&self) {}
    /// An expired lease was taken over (by a retry or the completer).
    fn taken_over(&self) {}
    /// A key was repeated unusually often (`repeats` requests after its first).
    fn repeated_key(&self, repeats: u64) {
        let _ = repeats;
    }
    /// An acquirer call of `mode`'s acquirer ended (test mode's calls are
    /// the simulator's: kept apart, so test traffic never reads as the live
    /// acquirer's health).
    fn acquirer_call(
        &self,
        mode: Mode,
        call: AcquirerCall,
        outcome: AcquirerOutcomeKind,
        latency: Duration,
    ) {
        let _ = (mode, call, outcome, latency);
    }
    /// A store call failed (`operation` names the step).
    fn store_error(&self, operation: &'static str) {
        let _ = operation;
    }
    /// The completer worked on one stalled key.
    fn completer_run(&self, result: CompleterResult) {
        let _ = result;
    }
    /// The reconciler of `mode` found something (`kind`: `orphan_charge`,
    /// `duplicate_charge`, `missing_charge`, `mismatch`).
    fn reconciler_finding(&self, mode: Mode, kind: &'static str) {
        let _ = (mode, kind);
    }
    /// The reconciler settled a pending payment from the acquirer's answer.
    fn reconciler_resolved(&self) {}
    /// The sweeper deleted expired keys.
    fn swept(&self, deleted: u64) {
        let _ = deleted;
    }
    /// The outbox relay attempted one merchant event delivery of `mode`'s
    /// (`result`: `delivered`, `failed` (due again later) or `gave_up`
    /// (failed, and the event was given up)).
    fn event_delivery(&self, mode: Mode, result: &'static str) {
        let _ = (mode, result);
    }
}

/// Observes nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {}
