//! `{"value": "1500.00", "currency": "RUB"}`: money on the wire.

use serde::{Deserialize, Serialize};

/// An amount of money: a decimal string and its currency. Never a JSON
/// number (a float would lose kopecks).
///
/// The same shape in requests and answers, with exactly these two members
/// (a request with another one is refused).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({"value": "1500.00", "currency": "RUB"}))
)]
pub struct Amount {
    /// A decimal string with exactly the currency's minor units
    /// (`"1500.00"` for RUB, `"1500"` for JPY); positive in a request
    /// (`"0.00"` in an answer is nothing refunded yet).
    #[cfg_attr(
        feature = "openapi",
        schema(example = "1500.00", pattern = r"^[0-9]{1,19}(\.[0-9]+)?$")
    )]
    pub value: String,
    /// The ISO 4217 currency code (three capital letters).
    #[cfg_attr(feature = "openapi", schema(example = "RUB", pattern = "^[A-Z]{3}$"))]
    pub currency: String,
}

impl Amount {
    /// An amount from its two members.
    pub fn new(value: impl Into<String>, currency: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            currency: currency.into(),
        }
    }
}
