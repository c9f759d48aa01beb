//! What the engine answers: the [`Outcome`] of a request, the final answers
//! a [`Render`] turns into stored bytes, and the [`EngineError`] when there
//! is no answer. The HTTP layer matches on these; the engine never looks
//! inside a rendered response.

use std::time::Duration;

use crate::{
    Capture, CaptureClaimRefusal, Payment, Refund, RefundRefusal, ReleaseClaimRefusal, StoreError,
    StoredResponse,
};

/// What a final answer is about; the caller's [`Render`] turns it into bytes.
#[derive(Debug, Clone, Copy)]
pub enum Rendered<'a> {
    /// The payment was charged by this key's operation.
    Charged(&'a Payment),
    /// The acquirer declined this key's payment.
    Declined(&'a Payment),
    /// The order already had a pending or succeeded payment under another key;
    /// this key answers with that payment and charged nothing.
    AlreadyExists(&'a Payment),
    /// The acquirer gave this key's refund back to the payer.
    Refunded(&'a Refund),
    /// The acquirer definitively refused this key's refund; its reservation
    /// was given back.
    RefundFailed(&'a Refund),
    /// This key's payment was canceled before any charge was found (the
    /// payment key's answer: nothing charged).
    Canceled(&'a Payment),
    /// A cancel key's answer: the payment as the cancel ended it
    /// (`canceled`, `declined`, or `succeeded` and refunded).
    CancelAnswered(&'a Payment),
    /// A cancel key's answer when the payment was final before the cancel
    /// came (succeeded or declined): nothing to cancel.
    NotCancelable(&'a Payment),
    /// The acquirer took this key's capture.
    Captured(&'a Capture),
    /// The acquirer definitively refused this key's capture; its
    /// reservation was given back.
    CaptureFailed(&'a Capture),
    /// A void key's answer: the payment with the rest of its authorization
    /// released (`voided`, or `succeeded` when part was captured).
    Voided(&'a Payment),
    /// A void key's answer when the acquirer definitively refused the
    /// void: the payment's authorization open again, as it was.
    VoidFailed(&'a Payment, &'a str),
}

/// Turns a final answer into the response stored against the key and replayed
/// byte for byte. The HTTP layer implements it; the engine never looks inside.
pub trait Render: Send + Sync + 'static {
    /// Renders one final answer.
    fn render(&self, what: Rendered<'_>) -> StoredResponse;
}

/// What happened to a request, for the HTTP layer to answer.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// This request ran the operation to a final answer, now stored.
    Executed(StoredResponse),
    /// A finished key with the same fingerprint: the stored first answer.
    Replayed(StoredResponse),
    /// No definite answer yet, and none is stored: the acquirer's answer is not
    /// known (timeout, lost answer), or the key answers with its order's payment
    /// and that payment is still pending. A retry with the same key resumes.
    Pending {
        /// The pending payment.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
    },
    /// The order already has a live payment (succeeded or pending) for
    /// another amount or currency, under another key: nothing was charged,
    /// and nothing is stored against this key (a retry judges afresh: the
    /// order is free again if that payment ends declined).
    OrderPaidOtherwise {
        /// The order's payment.
        payment: Payment,
    },
    /// Another request holds the key's lease right now.
    InProgress {
        /// When to try again.
        retry_after: Duration,
    },
    /// The key was first used for another request (body, path or method).
    Mismatch,
    /// A refund whose acquirer answer is not known yet; nothing is stored
    /// and a retry with the same key resumes.
    RefundPending {
        /// The pending refund.
        refund: Refund,
        /// When to try again.
        retry_after: Duration,
    },
    /// The acquirer could not be reached for a refund and certainly got
    /// nothing; the refund stays pending and a retry with the same key sends it.
    RefundAcquirerUnavailable {
        /// The pending refund.
        refund: Refund,
        /// When to try again.
        retry_after: Duration,
        /// This attempt resumed the refund (a retry or take-over): an earlier
        /// attempt may have reached the acquirer, and its outcome is unknown.
        resumed: bool,
    },
    /// The refund was refused before anything executed; nothing is stored
    /// against the key.
    RefundRefused(RefundRefusal),
    /// A cancel not finished yet: the payment is still pending (its charge
    /// is looked up once the settle window has passed) or the refund of a
    /// charge found is. Nothing is stored; a retry with the same key resumes.
    CancelPending {
        /// The payment as it stands.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
    },
    /// The shop has no such payment; nothing was written.
    NoSuchPayment,
    /// A capture whose acquirer answer is not known yet (its amount stays
    /// reserved); nothing is stored and a retry with the same key resumes.
    CapturePending {
        /// The pending capture.
        capture: Capture,
        /// When to try again.
        retry_after: Duration,
    },
    /// The acquirer could not be reached for a capture and certainly got
    /// nothing; the capture stays pending and a retry with the same key
    /// sends it.
    CaptureAcquirerUnavailable {
        /// The pending capture.
        capture: Capture,
        /// When to try again.
        retry_after: Duration,
        /// This attempt resumed the capture: an earlier attempt may have
        /// reached the acquirer, and its outcome is unknown.
        resumed: bool,
    },
    /// The capture was refused before anything executed; nothing is
    /// stored against the key.
    CaptureRefused(CaptureClaimRefusal),
    /// A void whose acquirer answer is not known yet (the authorization
    /// stays releasing: no capture is accepted meanwhile); nothing is
    /// stored and a retry with the same key resumes.
    VoidPending {
        /// The payment as it stands.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
    },
    /// The acquirer could not be reached for a void and certainly got
    /// nothing; a retry with the same key sends it.
    VoidAcquirerUnavailable {
        /// The payment as it stands.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
        /// This attempt resumed the void: an earlier attempt may have
        /// reached the acquirer.
        resumed: bool,
    },
    /// The void was refused before anything executed; nothing is stored
    /// against the key.
    VoidRefused(ReleaseClaimRefusal),
    /// The acquirer could not be reached and certainly got nothing; the payment
    /// stays pending and a retry with the same key sends it.
    AcquirerUnavailable {
        /// The pending payment.
        payment: Payment,
        /// When to try again.
        retry_after: Duration,
        /// This attempt resumed the payment (a retry or take-over): an
        /// earlier attempt may have reached the acquirer and charged, and
        /// its outcome is unknown.
        resumed: bool,
    },
}

/// Why the engine could not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed before anything was executed: nothing happened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The acquirer answered, but the answer could not be recorded. The key
    /// keeps its recovery point; a retry with the same key gets the same
    /// acquirer answer (it is idempotent on its key) and records it.
    #[error("the acquirer's answer could not be recorded")]
    Unrecorded(#[source] StoreError),
}
