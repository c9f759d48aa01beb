//! How payments look on the wire. The engine stores what [`HttpRender`]
//! renders, and replays those bytes unchanged.

use axum::http::StatusCode;
use chargeonce_core::{Money, Payment, Refund, Render, Rendered, StoredResponse};
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
    /// How much succeeded refunds gave back (`"0.00"` before any).
    pub amount_refunded: AmountView,
    /// `none`, `partially_refunded` or `refunded`. `status` stays
    /// `succeeded` for a refunded payment: it says what the charge did.
    pub refund_status: &'static str,
}

/// `{"value": "1500.00", "currency": "RUB"}`.
#[derive(Debug, Serialize)]
pub struct AmountView {
    /// Decimal string with exactly the currency's minor units.
    pub value: String,
    /// ISO 4217 code.
    pub currency: &'static str,
}

impl AmountView {
    /// An amount in minor units of `like`'s currency.
    pub fn minor(minor: i64, like: Money) -> Self {
        let currency = like.currency();
        Self {
            value: Money::from_minor(minor, currency)
                .map(|m| m.to_decimal_string())
                .unwrap_or_else(|_| zero(like)),
            currency: currency.code(),
        }
    }
}

/// Zero with the currency's minor digits (`"0.00"` for RUB).
fn zero(like: Money) -> String {
    match like.currency().minor_units() {
        0 => "0".to_owned(),
        digits => format!("0.{}", "0".repeat(digits as usize)),
    }
}

/// A refund as the API shows it.
#[derive(Debug, Serialize)]
pub struct RefundView<'a> {
    /// Our id (`re_...`).
    pub id: &'a str,
    /// Always `refund`.
    pub object: &'static str,
    /// The refunded payment.
    pub payment_id: &'a str,
    /// The owning shop.
    pub shop_id: &'a str,
    /// `pending`, `succeeded` or `failed`.
    pub status: &'static str,
    /// The amount given back.
    pub amount: AmountView,
    /// The acquirer's id of the refund, once known.
    pub provider_refund_id: Option<&'a str>,
    /// Why the acquirer refused, when it did.
    pub failure_code: Option<&'a str>,
    /// When it was created (RFC 3339, UTC, milliseconds).
    pub created_at: String,
}

impl<'a> RefundView<'a> {
    /// The view of one refund.
    pub fn of(refund: &'a Refund) -> Self {
        Self {
            id: refund.id.as_str(),
            object: "refund",
            payment_id: refund.payment_id.as_str(),
            shop_id: refund.shop_id.as_str(),
            status: refund.status.as_str(),
            amount: AmountView {
                value: refund.amount.to_decimal_string(),
                currency: refund.amount.currency().code(),
            },
            provider_refund_id: refund.provider_refund_id.as_deref(),
            failure_code: refund.failure_code.as_deref(),
            created_at: refund.created_at.format(&Rfc3339).unwrap_or_default(),
        }
    }

    /// As a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// As JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The location of a refund resource.
pub fn refund_location(refund: &Refund) -> String {
    format!("/v1/refunds/{}", refund.id)
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
            amount_refunded: AmountView::minor(payment.refunded_minor, payment.amount),
            refund_status: match payment.refunded_minor {
                0 => "none",
                n if n >= payment.amount.minor_units() => "refunded",
                _ => "partially_refunded",
            },
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
            Rendered::Refunded(refund) => StoredResponse {
                status: StatusCode::CREATED.as_u16(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("location".into(), refund_location(refund)),
                ],
                body: RefundView::of(refund).to_bytes(),
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
                .with("refund", RefundView::of(refund).to_value());
                StoredResponse {
                    status: ProblemCode::RefundFailed.status().as_u16(),
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
