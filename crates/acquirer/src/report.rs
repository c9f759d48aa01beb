//! The whole ledger and the money that moved, per currency.

use std::collections::BTreeMap;

use chargeonce_core::Currency;
use serde::{Serialize, Serializer};

use crate::{ChargeStatus, LedgerEntry};

/// The money that moved in one currency: the sum of its succeeded charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrencyTotal {
    /// The currency.
    pub currency: Currency,
    /// The sum in minor units (wide, so that no sum of valid amounts overflows).
    pub amount_minor: i128,
    /// How many succeeded charges.
    pub count: u64,
}

impl CurrencyTotal {
    /// The sum as a decimal string with the currency's minor units (`"1500.00"`).
    pub fn amount_string(&self) -> String {
        format_minor(self.amount_minor, self.currency.minor_units())
    }
}

/// The JSON form of a [`CurrencyTotal`].
#[derive(Serialize)]
struct TotalJson {
    currency: &'static str,
    amount: String,
    count: u64,
}

impl Serialize for CurrencyTotal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        TotalJson {
            currency: self.currency.code(),
            amount: self.amount_string(),
            count: self.count,
        }
        .serialize(serializer)
    }
}

/// The whole ledger and the money that moved: what `GET /ledger` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerReport {
    /// Every charge attempt, oldest first.
    pub charges: Vec<LedgerEntry>,
    /// The money succeeded charges took, summed per currency, ordered by
    /// currency code (an authorization counts what its captures took).
    pub total_succeeded: Vec<CurrencyTotal>,
}

impl LedgerReport {
    /// Builds the report of a set of entries (totals computed from them alone,
    /// so both halves always describe the same snapshot).
    pub fn from_entries(charges: Vec<LedgerEntry>) -> Self {
        let mut totals: BTreeMap<&'static str, CurrencyTotal> = BTreeMap::new();
        for entry in charges
            .iter()
            .filter(|e| e.status == ChargeStatus::Succeeded)
        {
            let currency = entry.amount.currency();
            let total = totals.entry(currency.code()).or_insert(CurrencyTotal {
                currency,
                amount_minor: 0,
                count: 0,
            });
            total.amount_minor += i128::from(entry.taken_minor());
            total.count += 1;
        }
        Self {
            charges,
            total_succeeded: totals.into_values().collect(),
        }
    }
}

/// A non-negative integer of minor units as a decimal string with exactly
/// `minor_units` decimals. Integer arithmetic only.
fn format_minor(amount: i128, minor_units: u32) -> String {
    if minor_units == 0 {
        return amount.to_string();
    }
    let scale = 10_i128.pow(minor_units);
    let sign = if amount < 0 { "-" } else { "" };
    let abs = amount.unsigned_abs();
    let scale = scale.unsigned_abs();
    format!(
        "{sign}{}.{:0width$}",
        abs / scale,
        abs % scale,
        width = minor_units as usize
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chargeonce_core::Money;

    #[test]
    fn totals_format_like_money() {
        for (value, currency) in [
            ("1500.00", "RUB"),
            ("0.01", "USD"),
            ("0.5", "EUR"),
            ("5", "JPY"),
            ("1.234", "KWD"),
            ("10000000000000.00", "RUB"),
        ] {
            let money = Money::parse(value, currency).unwrap();
            assert_eq!(
                format_minor(
                    i128::from(money.minor_units()),
                    money.currency().minor_units()
                ),
                money.to_decimal_string(),
                "{value} {currency}"
            );
        }
        assert_eq!(format_minor(0, 2), "0.00");
        assert_eq!(
            format_minor(2 * i128::from(i64::MAX), 0),
            "18446744073709551614"
        );
    }
}
