//! A refund as the API shows it.

use serde::{Deserialize, Serialize};

use crate::Amount;

/// Always `refund`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RefundObject {
    /// `refund`.
    #[default]
    Refund,
}

/// What the refund did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RefundStatus {
    /// No definite outcome yet; its amount is reserved. Ask again with the same key.
    Pending,
    /// The acquirer gave the money back.
    Succeeded,
    /// The acquirer refused it (`failure_code` says why); its amount is free again.
    Failed,
}

/// A refund of (part of) a payment.
///
/// The fields are declared in the order the server sends them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({
        "id": "re_01a22982a1c07d11b0f4c7e8e0d6a3b1",
        "object": "refund",
        "livemode": true,
        "payment_id": "pay_01a2297968b375bcb36eb8e661248216",
        "shop_id": "demo",
        "status": "succeeded",
        "amount": {"value": "500.00", "currency": "RUB"},
        "provider_refund_id": "re_01a22982a1c47a52a0e1b1d8c2f3e4a5",
        "failure_code": null,
        "created_at": "2026-11-29T22:45:01.120Z"
    }))
)]
pub struct Refund {
    /// Its id (`re_...`).
    #[cfg_attr(
        feature = "openapi",
        schema(example = "re_01a22982a1c07d11b0f4c7e8e0d6a3b1")
    )]
    pub id: String,
    /// Always `refund`.
    pub object: RefundObject,
    /// `true` for an object of live mode (real money), `false` for test
    /// mode's (the simulator's). Absent only in answers stored before test
    /// mode existed, which were all live.
    #[serde(default = "crate::live")]
    pub livemode: bool,
    /// The refunded payment.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "pay_01a2297968b375bcb36eb8e661248216")
    )]
    pub payment_id: String,
    /// The owning shop.
    #[cfg_attr(feature = "openapi", schema(example = "demo"))]
    pub shop_id: String,
    /// What the refund did.
    pub status: RefundStatus,
    /// The amount given back, in the payment's currency.
    pub amount: Amount,
    /// The acquirer's id of the refund, once known.
    pub provider_refund_id: Option<String>,
    /// Why the acquirer refused, when it did.
    pub failure_code: Option<String>,
    /// When it was created (RFC 3339, UTC, milliseconds).
    #[cfg_attr(
        feature = "openapi",
        schema(format = DateTime, example = "2026-11-29T22:45:01.120Z")
    )]
    pub created_at: String,
}
