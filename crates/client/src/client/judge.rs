//! What one answer of a keyed POST means: done, retry, or fail.

use std::time::Duration;

use chargeonce_core::PaymentStatus;
use serde::Deserialize;

use super::answer::{Answer, transient};
use crate::outcome::{
    AttemptAnswer, CancelOutcome, CaptureOutcome, Outcome, RefundOutcome, VoidOutcome,
};
use crate::{Capture, Error, Payment, Problem, ProblemCode, Refund};
use chargeonce_core::CaptureStatus;

/// Reads one answer of a keyed POST: what the attempt saw and what to do
/// next; records the id the answer named.
pub(super) type Judge<O> = fn(&Answer, u32, &mut Option<String>) -> (AttemptAnswer, Step<O>);

/// What to do after one attempt.
pub(super) enum Step<O> {
    /// A definite outcome.
    Done(O),
    /// Unknown or transient: try again with the same key and body.
    Retry(Option<Duration>),
    /// A definite failure: stop.
    Fail(Error),
}

/// Decides what a payment answer means.
pub(super) fn judge_payment(
    answer: &Answer,
    attempts: u32,
    payment_id: &mut Option<String>,
) -> (AttemptAnswer, Step<Outcome>) {
    let status = answer.status;
    if matches!(status, 200..=202) {
        let payment: Option<Payment> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(payment.as_ref(), None);
        let step = match payment {
            Some(payment) => {
                *payment_id = Some(payment.id.clone());
                match payment.status {
                    PaymentStatus::Succeeded if status != 202 => Step::Done(Outcome::Paid(payment)),
                    PaymentStatus::Declined if status != 202 => {
                        Step::Done(Outcome::Declined(payment))
                    }
                    // 202, or a success status with a pending payment: not known yet.
                    _ => Step::Retry(answer.retry_after()),
                }
            }
            // A success status without a readable payment: something in
            // between mangled it. The outcome is unknown; ask again.
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(
        problem.as_ref().and_then(|p| p.payment.as_ref()),
        problem.as_ref(),
    );
    if let Some(id) = problem
        .as_ref()
        .and_then(|p| p.payment.as_ref())
        .map(|p| p.id.clone())
    {
        *payment_id = Some(id);
    }
    let step = match (status, problem) {
        (409, Some(problem)) if problem.code == ProblemCode::OrderAlreadyPaid => {
            match problem.payment.clone() {
                Some(payment) => Step::Fail(Error::OrderAlreadyPaid {
                    payment: Box::new(payment),
                    problem: Some(Box::new(problem)),
                    attempts,
                }),
                None => unexpected(answer, attempts),
            }
        }
        (409, Some(problem)) if problem.code == ProblemCode::PaymentCanceled => {
            match problem.payment {
                Some(payment) => Step::Done(Outcome::Canceled(payment)),
                None => unexpected(answer, attempts),
            }
        }
        (402, Some(problem)) if problem.code == ProblemCode::PaymentDeclined => {
            match problem.payment {
                Some(payment) => Step::Done(Outcome::Declined(payment)),
                None => unexpected(answer, attempts),
            }
        }
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}

/// Decides what a cancel answer means: a 200 ends it (the payment says
/// how), a 202 is retried, `payment_not_cancelable` is a refusal.
pub(super) fn judge_cancel(
    answer: &Answer,
    attempts: u32,
    payment_id: &mut Option<String>,
) -> (AttemptAnswer, Step<CancelOutcome>) {
    let status = answer.status;
    if matches!(status, 200..=202) {
        let payment: Option<Payment> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(payment.as_ref(), None);
        let step = match payment {
            Some(payment) if status == 200 => {
                *payment_id = Some(payment.id.clone());
                match payment.status {
                    PaymentStatus::Canceled => Step::Done(CancelOutcome::Canceled(payment)),
                    PaymentStatus::Declined => Step::Done(CancelOutcome::Declined(payment)),
                    PaymentStatus::Succeeded
                        if payment.refunded_minor >= payment.amount.minor_units() =>
                    {
                        Step::Done(CancelOutcome::Refunded(payment))
                    }
                    PaymentStatus::Succeeded => Step::Done(CancelOutcome::Charged(payment)),
                    PaymentStatus::Pending => Step::Retry(answer.retry_after()),
                }
            }
            Some(payment) => {
                *payment_id = Some(payment.id.clone());
                Step::Retry(answer.retry_after())
            }
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(
        problem.as_ref().and_then(|p| p.payment.as_ref()),
        problem.as_ref(),
    );
    let step = match (status, problem) {
        // A stored refusal: the payment was final before the cancel came.
        (409, Some(problem)) if problem.code == ProblemCode::PaymentNotCancelable => {
            Step::Fail(Error::Rejected {
                problem: Box::new(problem),
                attempts,
            })
        }
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}

/// Decides what a refund answer means.
pub(super) fn judge_refund(
    answer: &Answer,
    attempts: u32,
    refund_id: &mut Option<String>,
) -> (AttemptAnswer, Step<RefundOutcome>) {
    let status = answer.status;
    if matches!(status, 200..=202) {
        let refund: Option<Refund> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(None, None);
        let step = match refund {
            Some(refund) => {
                *refund_id = Some(refund.id.clone());
                match refund.status.as_str() {
                    "succeeded" if status != 202 => Step::Done(RefundOutcome::Refunded(refund)),
                    _ => Step::Retry(answer.retry_after()),
                }
            }
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(None, problem.as_ref());
    let refund = problem
        .as_ref()
        .and_then(|p| p.raw.get("refund"))
        .and_then(|r| Refund::deserialize(r).ok());
    if let Some(refund) = &refund {
        *refund_id = Some(refund.id.clone());
    }
    let step = match (status, problem) {
        (422, Some(problem)) if problem.code == ProblemCode::RefundFailed => match refund {
            Some(refund) => Step::Done(RefundOutcome::Failed(refund)),
            None => unexpected(answer, attempts),
        },
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}

/// Decides what a capture answer means: a `201` with a succeeded capture
/// ends it, `422 capture_failed` is the acquirer's definite refusal, a
/// `202` (pending) is retried; `409 payment_not_capturable` is a refusal
/// unless the authorization itself is still pending (then not yet).
pub(super) fn judge_capture(
    answer: &Answer,
    attempts: u32,
    capture_id: &mut Option<String>,
) -> (AttemptAnswer, Step<CaptureOutcome>) {
    let status = answer.status;
    if matches!(status, 200..=202) {
        let capture: Option<Capture> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(None, None);
        let step = match capture {
            Some(capture) => {
                *capture_id = Some(capture.id.clone());
                match capture.status {
                    CaptureStatus::Succeeded if status != 202 => {
                        Step::Done(CaptureOutcome::Captured(capture))
                    }
                    _ => Step::Retry(answer.retry_after()),
                }
            }
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(None, problem.as_ref());
    let capture = problem
        .as_ref()
        .and_then(|p| p.raw.get("capture"))
        .and_then(|c| Capture::deserialize(c).ok());
    if let Some(capture) = &capture {
        *capture_id = Some(capture.id.clone());
    }
    let step = match (status, problem) {
        (422, Some(problem)) if problem.code == ProblemCode::CaptureFailed => match capture {
            Some(capture) => Step::Done(CaptureOutcome::Failed(capture)),
            None => unexpected(answer, attempts),
        },
        (409, Some(problem)) if refused_for_good(&problem, ProblemCode::PaymentNotCapturable) => {
            Step::Fail(Error::Rejected {
                problem: Box::new(problem),
                attempts,
            })
        }
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}

/// Decides what a void answer means: a `200` ends it (the payment says
/// how), `422 void_failed` is the acquirer's definite refusal, a `202` is
/// retried; `409 payment_not_voidable` is a refusal unless the
/// authorization itself is still pending.
pub(super) fn judge_void(
    answer: &Answer,
    attempts: u32,
    payment_id: &mut Option<String>,
) -> (AttemptAnswer, Step<VoidOutcome>) {
    let status = answer.status;
    if matches!(status, 200..=202) {
        let payment: Option<Payment> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(payment.as_ref(), None);
        let step = match payment {
            Some(payment) if status == 200 => {
                *payment_id = Some(payment.id.clone());
                Step::Done(VoidOutcome::Voided(payment))
            }
            Some(payment) => {
                *payment_id = Some(payment.id.clone());
                Step::Retry(answer.retry_after())
            }
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(
        problem.as_ref().and_then(|p| p.payment.as_ref()),
        problem.as_ref(),
    );
    let step = match (status, problem) {
        (422, Some(problem)) if problem.code == ProblemCode::VoidFailed => {
            match problem.payment.clone() {
                Some(payment) => Step::Done(VoidOutcome::Failed {
                    failure_code: problem
                        .raw
                        .get("failure_code")
                        .and_then(|c| c.as_str())
                        .map(str::to_owned),
                    payment,
                }),
                None => unexpected(answer, attempts),
            }
        }
        (409, Some(problem)) if refused_for_good(&problem, ProblemCode::PaymentNotVoidable) => {
            Step::Fail(Error::Rejected {
                problem: Box::new(problem),
                attempts,
            })
        }
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}

/// A `409` refusal of an authorization's move that waiting cannot change:
/// `code`, unless the authorization itself is still pending (then it may
/// become capturable: retried like any 409).
fn refused_for_good(problem: &Problem, code: ProblemCode) -> bool {
    problem.code == code
        && problem.raw.get("payment_status").and_then(|s| s.as_str()) != Some("pending")
}

/// An answer that is neither the resource nor its problem document.
fn unexpected<O>(answer: &Answer, attempts: u32) -> Step<O> {
    Step::Fail(Error::Unexpected {
        status: answer.status,
        body: answer.excerpt(),
        attempts,
    })
}

/// What an error answer that is not a definite outcome means, for every
/// keyed POST: transient statuses are retried, `idempotency_key_reused` is
/// its own error, other 4xx problems are refusals.
pub(super) fn not_definite<O>(answer: &Answer, problem: Option<Problem>, attempts: u32) -> Step<O> {
    match (answer.status, problem) {
        (status, _) if transient(status) => Step::Retry(answer.retry_after()),
        (_, Some(problem)) if problem.code == ProblemCode::IdempotencyKeyReused => {
            Step::Fail(Error::KeyReused {
                problem: Box::new(problem),
                attempts,
            })
        }
        (400..=499, Some(problem)) => Step::Fail(Error::Rejected {
            problem: Box::new(problem),
            attempts,
        }),
        _ => unexpected(answer, attempts),
    }
}
