//! What one answer of a keyed POST means: done, retry, or fail.

use std::time::Duration;

use chargeonce_core::PaymentStatus;
use serde::Deserialize;

use super::answer::{Answer, transient};
use crate::outcome::{AttemptAnswer, CancelOutcome, Outcome, RefundOutcome};
use crate::{Error, Payment, Problem, ProblemCode, Refund};

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
fn not_definite<O>(answer: &Answer, problem: Option<Problem>, attempts: u32) -> Step<O> {
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
