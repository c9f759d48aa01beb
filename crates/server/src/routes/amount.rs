//! The `{"value": "1500.00", "currency": "RUB"}` of payment and refund bodies.

use chargeonce_core::{Money, MoneyError};
use serde::Deserialize;

use crate::problem::{Problem, ProblemCode};

/// An amount as sent: validated by [`AmountBody::money`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AmountBody {
    value: String,
    currency: String,
}

impl AmountBody {
    /// The amount, or a 422 problem: `unsupported_currency`, or
    /// `invalid_amount` for anything else wrong with it.
    pub(crate) fn money(&self) -> Result<Money, Problem> {
        Money::parse(&self.value, &self.currency).map_err(|e| {
            let code = match e {
                MoneyError::UnsupportedCurrency(_) => ProblemCode::UnsupportedCurrency,
                _ => ProblemCode::InvalidAmount,
            };
            Problem::new(code, e.to_string())
        })
    }
}
