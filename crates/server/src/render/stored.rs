//! The answers the engine stores: [`HttpRender`] renders a payment's or a
//! refund's final answer (status, headers, body) once, and every repeat
//! replays those bytes.

use axum::http::StatusCode;
use chargeonce_core::{Payment, PaymentStatus, Render, Rendered, ShownStatus, StoredResponse};

use super::{capture_location, payment_location, refund_location, to_bytes, to_value};
use crate::problem::{PROBLEM_JSON, Problem, ProblemCode};

/// Renders final answers for the engine to store.
#[derive(Debug, Default, Clone, Copy)]
pub struct HttpRender;

impl HttpRender {
    fn payment(status: StatusCode, payment: &Payment) -> StoredResponse {
        StoredResponse {
            status: status.as_u16(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("location".into(), payment_location(payment)),
            ],
            body: to_bytes(&super::payment(payment)),
        }
    }
}

impl Render for HttpRender {
    fn render(&self, what: Rendered<'_>) -> StoredResponse {
        match what {
            Rendered::Charged(payment) => Self::payment(StatusCode::CREATED, payment),
            Rendered::AlreadyExists(payment) => Self::payment(StatusCode::OK, payment),
            Rendered::Refunded(refund) => StoredResponse {
                status: StatusCode::CREATED.as_u16(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("location".into(), refund_location(refund)),
                ],
                body: to_bytes(&super::refund(refund)),
            },
            Rendered::RefundFailed(refund) => {
                let problem = Problem::new(
                    ProblemCode::RefundFailed,
                    format!(
                        "the acquirer refused the refund: {}",
                        refund.failure_code.as_deref().unwrap_or("refused")
                    ),
                )
                .with("failure_code", refund.failure_code.clone().into())
                .with("refund", to_value(&super::refund(refund)));
                StoredResponse {
                    status: ProblemCode::RefundFailed.status(),
                    headers: vec![
                        ("content-type".into(), PROBLEM_JSON.into()),
                        ("location".into(), refund_location(refund)),
                    ],
                    body: problem.to_body(),
                }
            }
            Rendered::Declined(payment) => {
                let problem = Problem::new(
                    ProblemCode::PaymentDeclined,
                    format!(
                        "the acquirer declined the payment: {}",
                        payment.decline_code.as_deref().unwrap_or("declined")
                    ),
                )
                .with("decline_code", payment.decline_code.clone().into())
                .with("payment", to_value(&super::payment(payment)));
                StoredResponse {
                    status: StatusCode::PAYMENT_REQUIRED.as_u16(),
                    headers: vec![
                        ("content-type".into(), PROBLEM_JSON.into()),
                        ("location".into(), payment_location(payment)),
                    ],
                    body: problem.to_body(),
                }
            }
            Rendered::Canceled(payment) => Self::payment_problem(
                ProblemCode::PaymentCanceled,
                "the payment was canceled before any charge was found: nothing was taken. \
                 Its order may be paid again under a new key",
                payment,
            ),
            Rendered::CancelAnswered(payment) => Self::payment(StatusCode::OK, payment),
            Rendered::NotCancelable(payment) => Self::payment_problem(
                ProblemCode::PaymentNotCancelable,
                format!(
                    "the payment was already {} when the cancel came; {}",
                    ShownStatus::of(payment).as_str(),
                    match (payment.status, payment.authorization()) {
                        (PaymentStatus::Succeeded, Some(_)) => {
                            "void what is left of the authorization, or refund what was captured"
                        }
                        (PaymentStatus::Succeeded, None) => "refund it instead",
                        _ => "nothing was taken",
                    }
                ),
                payment,
            ),
            Rendered::Captured(capture) => StoredResponse {
                status: StatusCode::CREATED.as_u16(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("location".into(), capture_location(capture)),
                ],
                body: to_bytes(&super::capture(capture)),
            },
            Rendered::CaptureFailed(capture) => {
                let problem = Problem::new(
                    ProblemCode::CaptureFailed,
                    format!(
                        "the acquirer refused the capture: {}; its amount is capturable again",
                        capture.failure_code.as_deref().unwrap_or("refused")
                    ),
                )
                .with("failure_code", capture.failure_code.clone().into())
                .with("capture", to_value(&super::capture(capture)));
                StoredResponse {
                    status: ProblemCode::CaptureFailed.status(),
                    headers: vec![
                        ("content-type".into(), PROBLEM_JSON.into()),
                        ("location".into(), capture_location(capture)),
                    ],
                    body: problem.to_body(),
                }
            }
            Rendered::Voided(payment) => Self::payment(StatusCode::OK, payment),
            Rendered::VoidFailed(payment, code) => {
                let problem = Problem::new(
                    ProblemCode::VoidFailed,
                    format!(
                        "the acquirer refused the void: {code}; the authorization stands as it was"
                    ),
                )
                .with("failure_code", code.into())
                .with("payment", to_value(&super::payment(payment)));
                StoredResponse {
                    status: ProblemCode::VoidFailed.status(),
                    headers: vec![
                        ("content-type".into(), PROBLEM_JSON.into()),
                        ("location".into(), payment_location(payment)),
                    ],
                    body: problem.to_body(),
                }
            }
        }
    }
}

impl HttpRender {
    /// A stored problem about a payment, which it carries.
    fn payment_problem(
        code: ProblemCode,
        detail: impl Into<String>,
        payment: &Payment,
    ) -> StoredResponse {
        let problem =
            Problem::new(code, detail).with("payment", to_value(&super::payment(payment)));
        StoredResponse {
            status: code.status(),
            headers: vec![
                ("content-type".into(), PROBLEM_JSON.into()),
                ("location".into(), payment_location(payment)),
            ],
            body: problem.to_body(),
        }
    }
}
