//! How payments look on the wire. The engine stores what [`HttpRender`]
//! renders, and replays those bytes unchanged.

use axum::http::StatusCode;
use chargeonce_core::{Payment, Render, Rendered, StoredResponse};
use serde::Serialize;
use time::format_description::well_known::Rfc3339;

use crate::problem::{PROBLEM_JSON, Problem, ProblemCode};

/// A payment as the API shows it. Money is a decimal string with the
/// currency's minor units; the payment method token is never shown.
#[derive(Debug, Serialize)]
pub struct PaymentView<'a> {
    /// Our id (`pay_...`).
    pub id: &'a str,
    /// Always `payment`.
    pub object: &'static str,
    /// The owning shop.
    pub shop_id: &'a str,
    /// `pending`, `succeeded` or `declined`.
    pub status: &'static str,
    /// The amount.
    pub amount: AmountView,
    /// The shop's order reference.
    pub reference: &'a str,
    /// The acquirer's id of the charge, once known.
    pub provider_payment_id: Option<&'a str>,
    /// Why the acquirer declined, when it did.
    pub decline_code: Option<&'a str>,
    /// When it was created (RFC 3339, UTC, milliseconds).
    pub created_at: String,
}

/// `{"value": "1500.00", "currency": "RUB"}`.
#[derive(Debug, Serialize)]
pub struct AmountView {
    /// Decimal string with exactly the currency's minor units.
    pub value: String,
    /// ISO 4217 code.
    pub currency: &'static str,
}

impl<'a> PaymentView<'a> {
    /// The view of one payment.
    pub fn of(payment: &'a Payment) -> Self {
        Self {
            id: payment.id.as_str(),
            object: "payment",
            shop_id: payment.shop_id.as_str(),
            status: payment.status.as_str(),
            amount: AmountView {
                value: payment.amount.to_decimal_string(),
                currency: payment.amount.currency().code(),
            },
            reference: payment.reference.as_str(),
            provider_payment_id: payment.provider_payment_id.as_deref(),
            decline_code: payment.decline_code.as_deref(),
            created_at: payment.created_at.format(&Rfc3339).unwrap_or_default(),
        }
    }

    /// As a JSON value (for embedding in problems and lists).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// As JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The location of a payment resource.
pub fn payment_location(payment: &Payment) -> String {
    format!("/v1/payments/{}", payment.id)
}

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
            body: PaymentView::of(payment).to_bytes(),
        }
    }
}

impl Render for HttpRender {
    fn render(&self, what: Rendered<'_>) -> StoredResponse {
        match what {
            Rendered::Charged(payment) => Self::payment(StatusCode::CREATED, payment),
            Rendered::AlreadyExists(payment) => Self::payment(StatusCode::OK, payment),
            Rendered::Declined(payment) => {
                let problem = Problem::new(
                    ProblemCode::PaymentDeclined,
                    format!(
                        "the acquirer declined the payment: {}",
                        payment.decline_code.as_deref().unwrap_or("declined")
                    ),
                )
                .with("decline_code", payment.decline_code.clone().into())
                .with("payment", PaymentView::of(payment).to_value());
                StoredResponse {
                    status: StatusCode::PAYMENT_REQUIRED.as_u16(),
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
