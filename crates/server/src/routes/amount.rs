//! The `{"value": "1500.00", "currency": "RUB"}` of payment and refund bodies.

use chargeonce_core::{Money, MoneyError};
use chargeonce_wire::Amount;

use crate::problem::{Problem, ProblemCode};

/// An amount as sent ([`Amount`]), validated: the money, or a 422 problem:
/// `unsupported_currency`, or `invalid_amount` for anything else wrong with it.
pub(crate) fn money(amount: &Amount) -> Result<Money, Problem> {
    Money::parse(&amount.value, &amount.currency).map_err(|e| {
        let code = match e {
            MoneyError::UnsupportedCurrency(_) => ProblemCode::UnsupportedCurrency,
            _ => ProblemCode::InvalidAmount,
        };
        Problem::new(code, e.to_string())
    })
}
