//! The request bodies: `POST /v1/payments` and `POST /v1/payments/{id}/refunds`.
//!
//! Unknown members are refused (`422 invalid_request`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Amount;

/// How the payment is paid: the acquirer's token of a payment method.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(example = json!({"token": "tok_ok"})))]
pub struct PaymentMethod {
    /// The acquirer's payment method token (the simulator's: `tok_ok`,
    /// `tok_declined`, `tok_timeout`, `tok_slow`, ...). Never shown back.
    #[cfg_attr(
        feature = "openapi",
        schema(
            example = "tok_ok",
            min_length = 1,
            max_length = 255,
            pattern = "^[!-~]+$"
        )
    )]
    pub token: String,
}

/// The body of `POST /v1/payments`: how much, for which order, with which
/// payment method. Sent with an `Idempotency-Key` derived from the order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({
        "amount": {"value": "1500.00", "currency": "RUB"},
        "reference": "order-123",
        "payment_method": {"token": "tok_ok"}
    }))
)]
pub struct CreatePayment {
    /// How much: a positive amount with exactly the currency's minor units.
    pub amount: Amount,
    /// The shop's order: 1 to 255 characters, no control characters. One
    /// order gets at most one successful payment.
    #[cfg_attr(
        feature = "openapi",
        schema(
            example = "order-123",
            min_length = 1,
            max_length = 255,
            pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
        )
    )]
    pub reference: String,
    /// The payment method.
    pub payment_method: PaymentMethod,
    /// The shop's own pairs (its order id, customer id, ...), returned on
    /// the payment: at most 50, keys of 1 to 40 characters without control
    /// characters, string values of at most 500. Part of the request: the
    /// same key with other metadata is `idempotency_key_reused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(schema_with = metadata_schema)
    )]
    pub metadata: Option<BTreeMap<String, String>>,
    /// `automatic` (the default) charges at once; `manual` only authorizes:
    /// the payment answers `authorized`, and its amount is taken by captures
    /// or released by a void or when the authorization expires. Part of the
    /// request, as metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_method: Option<crate::CaptureMethod>,
}

/// The body of `POST /v1/payments/{id}/refunds`: `{}` refunds what is left
/// of the payment, an amount refunds that much of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({"amount": {"value": "500.00", "currency": "RUB"}}))
)]
pub struct CreateRefund {
    /// How much, in the payment's currency; absent: what is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amount>,
}

/// The body of `POST /v1/payments/{id}/captures`: `{}` captures all that
/// is capturable as the final capture; an amount captures that much, and
/// more captures may follow unless `final` is `true`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({"amount": {"value": "1000.00", "currency": "RUB"}, "final": false}))
)]
pub struct CreateCapture {
    /// How much, in the payment's currency; absent: all that is capturable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amount>,
    /// Whether this is the last capture: once it succeeds, the rest of the
    /// authorization is released. Default `false` with an amount; always
    /// `true` without one.
    #[serde(default, rename = "final", skip_serializing_if = "Option::is_none")]
    pub last: Option<bool>,
}

/// The body of `POST /v1/payments/{id}/void`: an empty object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(example = json!({})))]
pub struct VoidPayment {}

/// The body of `POST /v1/payments/{id}/cancel`: an empty object (the
/// payment is named by the path). Kept an object so that options can be
/// added later without breaking clients.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(example = json!({})))]
pub struct CancelPayment {}

/// The schema of `metadata`, on the request and on the payment: at most 50
/// pairs, keys of 1 to 40 characters without control characters, string
/// values of at most 500 characters.
#[cfg(feature = "openapi")]
pub(crate) fn metadata_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "The shop's own pairs: at most 50, keys of 1 to 40 characters without control \
             characters, string values of at most 500 characters.",
        ))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(40))
                .pattern(Some("^[^\\u0000-\\u001F\\u007F-\\u009F]+$")),
        ))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(500)),
        ))
        .max_properties(Some(50))
        .examples([serde_json::json!({"order_id": "6735", "customer": "cus_42"})])
        .build()
}
