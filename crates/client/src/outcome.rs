//! What a payment call ended with, and what each attempt saw.

use std::fmt;
use std::time::{Duration, Instant};

use chargeonce_core::IdempotencyKey;

use crate::{Capture, Code, Payment, Refund};

/// Where a payment stands after a call: the only three answers a payment
/// client may give.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Charged (by this call, by an earlier attempt of the same intent, or
    /// earlier for the same order).
    Paid(Payment),
    /// Declined by the acquirer: definite, nothing charged.
    Declined(Payment),
    /// Canceled before any charge was found (a cancel of the payment, or the
    /// service gave up on it): definite, nothing taken. Its order may be
    /// paid again under a new key.
    Canceled(Payment),
    /// The budget ran out before a definite answer. The payment may or may not
    /// have been charged: the acquirer may have charged and the answer been
    /// lost. **Do not pay again with a new key.** Retry later with the same key
    /// (the server answers with the first result, or resolves it), or look the
    /// payment (or the order) up.
    Uncertain {
        /// The payment, when an answer named it (`202` pending, `503`
        /// acquirer unavailable); `None` when no answer arrived at all.
        payment_id: Option<String>,
    },
}

impl Outcome {
    /// The payment, when the outcome is definite.
    pub fn payment(&self) -> Option<&Payment> {
        match self {
            Self::Paid(p) | Self::Declined(p) | Self::Canceled(p) => Some(p),
            Self::Uncertain { .. } => None,
        }
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptAnswer {
    /// An HTTP answer.
    Http {
        /// The status code.
        status: u16,
        /// `Idempotent-Replayed: true`: the stored answer of the key's first request.
        replayed: bool,
        /// `Preference-Applied: wait=...`: the server waited for the key's
        /// first request instead of answering 409.
        waited: bool,
        /// The problem code of an error answer.
        problem: Option<Code>,
        /// The payment's status, when the answer carried a payment.
        payment_status: Option<&'static str>,
    },
    /// No HTTP answer.
    Failed {
        /// Why.
        kind: FailureKind,
        /// The transport's description.
        message: String,
    },
}

/// Why an attempt got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The connection could not be made: the request was not sent.
    Connect,
    /// No answer within the attempt timeout: the request may have executed.
    Timeout,
    /// The connection broke after the request went out (a lost answer): it
    /// may have executed.
    Lost,
}

impl fmt::Display for AttemptAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Http {
                status,
                replayed,
                waited,
                problem,
                payment_status,
            } => {
                write!(f, "{status} {}", reason(*status))?;
                if let Some(code) = problem {
                    write!(f, " {code}")?;
                }
                if let Some(s) = payment_status {
                    write!(f, " (payment {s})")?;
                }
                if *replayed {
                    f.write_str(", replayed")?;
                }
                if *waited {
                    f.write_str(", after waiting on the server (Prefer: wait)")?;
                }
                Ok(())
            }
            Self::Failed { kind, message } => {
                let what = match kind {
                    FailureKind::Connect => "could not connect",
                    FailureKind::Timeout => "no answer in time",
                    FailureKind::Lost => "answer lost",
                };
                write!(f, "{what}: {message}")
            }
        }
    }
}

/// The reason phrase of the statuses the API uses.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

/// One attempt of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the first.
    pub number: u32,
    /// When it was sent.
    pub sent_at: Instant,
    /// How long it took.
    pub took: Duration,
    /// How it ended.
    pub answer: AttemptAnswer,
    /// The answer's body, exactly as received (`None` without an answer):
    /// what a replay must repeat byte for byte.
    pub body: Option<Vec<u8>>,
    /// The wait before the next attempt, when there was one.
    pub retry_in: Option<Duration>,
}

/// The result of a payment call: the outcome, the key it was made under, and
/// every attempt it took.
#[derive(Debug, Clone, PartialEq)]
pub struct PayResult {
    /// Where the payment stands.
    pub outcome: Outcome,
    /// The key every attempt carried.
    pub key: IdempotencyKey,
    /// Every attempt, in order. Empty when the payment was found by the
    /// check before paying and nothing was sent.
    pub attempts: Vec<Attempt>,
    /// The order already had this payment: found by
    /// [`Client::pay_order`](crate::Client::pay_order)'s check before paying,
    /// so no payment was sent.
    pub found_before_paying: bool,
}

impl PayResult {
    /// How many attempts the call made.
    pub fn attempt_count(&self) -> usize {
        self.attempts.len()
    }

    /// The last attempt's answer was a replay of the key's first answer.
    pub fn replayed(&self) -> bool {
        matches!(
            self.attempts.last().map(|a| &a.answer),
            Some(AttemptAnswer::Http { replayed: true, .. })
        )
    }
}

/// Where a refund stands after a call.
#[derive(Debug, Clone, PartialEq)]
pub enum RefundOutcome {
    /// The acquirer gave the money back (by this call or an earlier attempt
    /// of the same key).
    Refunded(Refund),
    /// The acquirer refused the refund: definite, nothing was given back, and
    /// the amount can be refunded again under a new refund key.
    Failed(Refund),
    /// The budget ran out before a definite answer: the refund may or may not
    /// have happened. Retry later with the same key, or read the refund.
    Uncertain {
        /// The refund, when an answer named it (`202` pending).
        refund_id: Option<String>,
    },
}

/// Where a payment stands after a cancel call: each definite outcome says
/// whether the customer was charged.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    /// Canceled: no charge was found after the settle window, nothing was
    /// taken (a charge that lands later is refunded by the service).
    Canceled(Payment),
    /// The charge was found: the payment is kept `succeeded` and was
    /// refunded in full.
    Refunded(Payment),
    /// The charge was found and kept, but not refunded in full (the refund
    /// was refused by the acquirer, or part of it was refunded already):
    /// the customer holds a charge of `amount - refunded_minor`.
    Charged(Payment),
    /// The acquirer had declined the charge: nothing taken.
    Declined(Payment),
    /// The budget ran out while the cancel was still running (the charge is
    /// looked up only once the settle window has passed): retry later with
    /// the same key; the service ends it on its own too.
    Uncertain {
        /// The payment, when an answer named it.
        payment_id: Option<String>,
    },
}

impl CancelOutcome {
    /// The payment, when the outcome is definite.
    pub fn payment(&self) -> Option<&Payment> {
        match self {
            Self::Canceled(p) | Self::Refunded(p) | Self::Charged(p) | Self::Declined(p) => Some(p),
            Self::Uncertain { .. } => None,
        }
    }
}

/// The result of a cancel call: the outcome, its key, and every attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct CancelResult {
    /// Where the payment stands.
    pub outcome: CancelOutcome,
    /// The key every attempt carried.
    pub key: IdempotencyKey,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
}

/// The result of a refund call: the outcome, its key, and every attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct RefundResult {
    /// Where the refund stands.
    pub outcome: RefundOutcome,
    /// The key every attempt carried.
    pub key: IdempotencyKey,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
}

/// Where a capture stands after [`Client::capture`](crate::Client::capture).
#[derive(Debug, Clone, PartialEq)]
pub enum CaptureOutcome {
    /// The acquirer took the money (by this call or an earlier attempt of
    /// the same key).
    Captured(Capture),
    /// The acquirer refused the capture: definite, nothing was taken, and
    /// the amount is capturable again under a new capture key.
    Failed(Capture),
    /// The budget ran out before a definite answer: the capture may or may
    /// not have happened (its amount stays reserved meanwhile). Retry later
    /// with the same key, or read the capture.
    Uncertain {
        /// The capture, when an answer named it (`202` pending).
        capture_id: Option<String>,
    },
}

/// The result of a capture call: the outcome, its key, and every attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureResult {
    /// Where the capture stands.
    pub outcome: CaptureOutcome,
    /// The key every attempt carried.
    pub key: IdempotencyKey,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
}

/// Where a void stands after [`Client::void`](crate::Client::void).
#[derive(Debug, Clone, PartialEq)]
pub enum VoidOutcome {
    /// The rest of the authorization was released: the payment is `voided`
    /// (nothing captured) or `succeeded` with its captures.
    Voided(Payment),
    /// The acquirer refused the void: definite, the authorization is open
    /// again as it was.
    Failed {
        /// The payment, its authorization open again.
        payment: Payment,
        /// The acquirer's code.
        failure_code: Option<String>,
    },
    /// The budget ran out before a definite answer: the void may or may not
    /// have happened (no capture is accepted meanwhile). Retry later with
    /// the same key.
    Uncertain {
        /// The payment, when an answer named it.
        payment_id: Option<String>,
    },
}

/// The result of a void call: the outcome, its key, and every attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct VoidResult {
    /// Where the void stands.
    pub outcome: VoidOutcome,
    /// The key every attempt carried.
    pub key: IdempotencyKey,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
}
