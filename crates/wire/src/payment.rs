//! A payment as the API shows it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Amount;

/// Always `payment`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PaymentObject {
    /// `payment`.
    #[default]
    Payment,
}

/// What the charge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PaymentStatus {
    /// No definite outcome yet: the acquirer has not answered (or was not
    /// reached). It will be settled; ask again with the same key.
    Pending,
    /// The acquirer charged it.
    Succeeded,
    /// The acquirer declined it (`decline_code` says why).
    Declined,
    /// Canceled while pending (`POST /v1/payments/{id}/cancel`, or the
    /// service gave up on it): the acquirer held no charge for it after the
    /// settle window, so nothing was taken. A charge that lands later is
    /// refunded by the reconciler. Its order may be paid again.
    Canceled,
    /// Authorized (`capture_method` `manual`): the amount is held on the
    /// card for captures, nothing taken yet.
    Authorized,
    /// Some of the authorization was captured; more is capturable
    /// (`amount_capturable`).
    PartiallyCaptured,
    /// Released by a void with nothing captured: nothing was taken.
    Voided,
    /// Released when its hold expired with nothing captured
    /// (`authorization_expires_at`): nothing was taken.
    Expired,
}

/// How a payment takes its money.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CaptureMethod {
    /// Charged at once (the default).
    #[default]
    Automatic,
    /// Only authorized: the amount is held for captures
    /// (`POST /v1/payments/{id}/captures`) or a void, and released unless
    /// captured before `authorization_expires_at`.
    Manual,
}

/// How much of a payment refunds gave back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PaymentRefundStatus {
    /// Nothing refunded.
    None,
    /// Part of the amount refunded.
    PartiallyRefunded,
    /// All of the amount refunded.
    Refunded,
}

/// A payment. Money is a decimal string with the currency's minor units; the
/// payment method token is never shown.
///
/// The fields are declared in the order the server sends them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({
        "id": "pay_01a2297968b375bcb36eb8e661248216",
        "object": "payment",
        "livemode": true,
        "shop_id": "demo",
        "status": "succeeded",
        "amount": {"value": "1500.00", "currency": "RUB"},
        "reference": "order-123",
        "provider_payment_id": "ch_01a2297968b7769e806e9688e92895b9",
        "decline_code": null,
        "created_at": "2026-11-29T22:42:32.243Z",
        "amount_refunded": {"value": "0.00", "currency": "RUB"},
        "refund_status": "none",
        "metadata": {"order_id": "6735"},
        "capture_method": "automatic",
        "amount_capturable": {"value": "0.00", "currency": "RUB"},
        "amount_captured": {"value": "1500.00", "currency": "RUB"},
        "authorization_expires_at": null
    }))
)]
pub struct Payment {
    /// Its id (`pay_...`).
    #[cfg_attr(
        feature = "openapi",
        schema(example = "pay_01a2297968b375bcb36eb8e661248216")
    )]
    pub id: String,
    /// Always `payment`.
    pub object: PaymentObject,
    /// `true` for an object of live mode (real money), `false` for test
    /// mode's (the simulator's). Absent only in answers stored before test
    /// mode existed, which were all live.
    #[serde(default = "crate::live")]
    pub livemode: bool,
    /// The owning shop.
    #[cfg_attr(feature = "openapi", schema(example = "demo"))]
    pub shop_id: String,
    /// What the charge did.
    pub status: PaymentStatus,
    /// How much.
    pub amount: Amount,
    /// The shop's order reference. One order gets at most one successful payment.
    #[cfg_attr(feature = "openapi", schema(example = "order-123"))]
    pub reference: String,
    /// The acquirer's id of the charge, once known.
    pub provider_payment_id: Option<String>,
    /// Why the acquirer declined, when it did.
    pub decline_code: Option<String>,
    /// When it was created (RFC 3339, UTC, milliseconds).
    #[cfg_attr(
        feature = "openapi",
        schema(format = DateTime, example = "2026-11-29T22:42:32.243Z")
    )]
    pub created_at: String,
    /// How much succeeded refunds gave back (`"0.00"` before any).
    pub amount_refunded: Amount,
    /// How much was refunded. `status` stays `succeeded` for a refunded
    /// payment: it says what the charge did.
    pub refund_status: PaymentRefundStatus,
    /// The shop's own pairs, as the request gave them (`{}` when it gave
    /// none). Absent only from answers stored before metadata existed,
    /// which are replayed byte for byte.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(required = false, schema_with = crate::request::metadata_schema)
    )]
    pub metadata: BTreeMap<String, String>,
    /// Charged at once (`automatic`), or authorized for captures
    /// (`manual`). Absent only from answers stored before it existed.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub capture_method: CaptureMethod,
    /// What captures may still take: the authorization's open rest
    /// (`"0.00"` for a payment charged at once, and once the hold is used
    /// up, voided or expired). Absent only from answers stored before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub amount_capturable: Option<Amount>,
    /// What was taken: the amount of a payment charged at once that
    /// succeeded, the succeeded captures of an authorization. Absent only
    /// from answers stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(required = false))]
    pub amount_captured: Option<Amount>,
    /// When an authorization is released unless captured (RFC 3339, UTC,
    /// milliseconds); `null` for a payment charged at once.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(required = false, format = DateTime, example = "2026-12-06T22:42:32.243Z")
    )]
    pub authorization_expires_at: Option<String>,
}
