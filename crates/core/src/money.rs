//! Money: integers of minor units inside, decimal strings outside. Never floats.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;

/// Why an amount or a currency was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    /// Not an ISO 4217 code with defined minor units (`RUB`, `USD`, `JPY`, ...).
    #[error("`{0}` is not a supported ISO 4217 currency code")]
    UnsupportedCurrency(String),
    /// Not a plain decimal string such as `1500.00`.
    #[error("`{0}` is not a decimal amount such as \"1500.00\"")]
    NotADecimal(String),
    /// More fractional digits than the currency has minor units (trailing
    /// zeros count: JPY `"5.0"` is too precise).
    #[error(
        "{currency} amounts have at most {minor_units} decimal places (its minor units), \
         but this one has {scale}"
    )]
    TooPrecise {
        /// The currency.
        currency: String,
        /// Its minor units.
        minor_units: u32,
        /// The decimal places sent.
        scale: u32,
    },
    /// Zero or less.
    #[error("the amount must be greater than zero")]
    NotPositive,
    /// Larger than [`Money::MAX_MINOR_UNITS`].
    #[error("the amount is too large")]
    TooLarge,
}

/// An ISO 4217 currency with defined minor units.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency(iso_currency::Currency);

impl Currency {
    /// Looks up an upper-case ISO 4217 code. Codes without minor units (funds,
    /// precious metals) are refused.
    pub fn from_code(code: &str) -> Result<Self, MoneyError> {
        let unsupported = || MoneyError::UnsupportedCurrency(code.to_owned());
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(unsupported());
        }
        let currency = iso_currency::Currency::from_code(code).ok_or_else(unsupported)?;
        currency.exponent().ok_or_else(unsupported)?;
        Ok(Self(currency))
    }

    /// The three-letter code.
    pub fn code(&self) -> &'static str {
        self.0.code()
    }

    /// How many decimal places the currency's minor unit has (2 for RUB, 0 for JPY).
    pub fn minor_units(&self) -> u32 {
        self.0.exponent().map(u32::from).unwrap_or(0)
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A positive amount of one currency, held as an integer of minor units.
///
/// ```
/// use chargeonce_core::{Money, MoneyError};
///
/// let m = Money::parse("1500", "RUB").unwrap();
/// assert_eq!(m.minor_units(), 150_000);
/// assert_eq!(m.to_decimal_string(), "1500.00");
/// assert_eq!(Money::parse("5", "JPY").unwrap().to_decimal_string(), "5");
/// assert!(matches!(Money::parse("1.001", "RUB"), Err(MoneyError::TooPrecise { .. })));
/// assert!(matches!(Money::parse("1500.00", "JPY"), Err(MoneyError::TooPrecise { .. })));
/// assert!(matches!(Money::parse("1e3", "RUB"), Err(MoneyError::NotADecimal(_))));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Money {
    minor: i64,
    currency: Currency,
}

impl Money {
    /// The largest amount accepted, in minor units (10^15: ten trillion roubles).
    pub const MAX_MINOR_UNITS: i64 = 1_000_000_000_000_000;

    /// Parses a decimal string (`"1500.00"`, `"1500"`, `"0.5"`) in a currency.
    /// Signs, exponents, spaces and more decimals than the currency has are
    /// refused, zeros included: JPY `"1500.00"` and KWD `"1.5000"` are
    /// [`MoneyError::TooPrecise`]. This is the rule for every amount a client
    /// sends; [`Self::parse_lenient`] is for reading other systems' answers.
    pub fn parse(value: &str, currency: &str) -> Result<Self, MoneyError> {
        Self::parse_with(value, currency, true)
    }

    /// As [`Self::parse`], but decimals past the currency's minor units are
    /// accepted when they are zeros (`"1500.000"` RUB is 1500.00 RUB; `"1.5"`
    /// JPY is still refused). For reading amounts written by another system
    /// (the acquirer's answers), where the value is unambiguous and refusing
    /// it would turn a known outcome into an unknown one; never for a
    /// client's input.
    pub fn parse_lenient(value: &str, currency: &str) -> Result<Self, MoneyError> {
        Self::parse_with(value, currency, false)
    }

    fn parse_with(value: &str, currency: &str, strict: bool) -> Result<Self, MoneyError> {
        let currency = Currency::from_code(currency)?;
        let not_decimal = || MoneyError::NotADecimal(value.to_owned());
        let (int, frac) = value.split_once('.').unwrap_or((value, ""));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(int) || (value.contains('.') && !digits(frac)) || int.len() > 19 {
            return Err(not_decimal());
        }
        let too_precise = |scale: usize| MoneyError::TooPrecise {
            currency: currency.code().to_owned(),
            minor_units: currency.minor_units(),
            scale: u32::try_from(scale).unwrap_or(u32::MAX),
        };
        if strict && frac.len() > currency.minor_units() as usize {
            return Err(too_precise(frac.len()));
        }
        let decimal = Decimal::from_str(value)
            .map_err(|_| not_decimal())?
            .normalize();
        if decimal.scale() > currency.minor_units() {
            return Err(too_precise(decimal.scale() as usize));
        }
        let scaled = decimal
            .checked_mul(Decimal::from(10_i64.pow(currency.minor_units())))
            .ok_or(MoneyError::TooLarge)?;
        let minor = scaled.to_i64().ok_or(MoneyError::TooLarge)?;
        Self::from_minor(minor, currency)
    }

    /// Builds an amount from minor units, as read back from a store.
    pub fn from_minor(minor: i64, currency: Currency) -> Result<Self, MoneyError> {
        if minor <= 0 {
            return Err(MoneyError::NotPositive);
        }
        if minor > Self::MAX_MINOR_UNITS {
            return Err(MoneyError::TooLarge);
        }
        Ok(Self { minor, currency })
    }

    /// The amount in minor units (kopecks for RUB).
    pub fn minor_units(&self) -> i64 {
        self.minor
    }

    /// The currency.
    pub fn currency(&self) -> Currency {
        self.currency
    }

    /// The amount as a decimal string with exactly the currency's minor units:
    /// `150000` kopecks is `"1500.00"`.
    pub fn to_decimal_string(&self) -> String {
        Decimal::new(self.minor, self.currency.minor_units()).to_string()
    }
}

impl fmt::Debug for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.to_decimal_string(), self.currency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_with_minor_units() {
        let cases = [
            ("1500.00", "RUB", 150_000, "1500.00"),
            ("1500", "RUB", 150_000, "1500.00"),
            ("0.5", "USD", 50, "0.50"),
            ("0.01", "EUR", 1, "0.01"),
            ("007.10", "EUR", 710, "7.10"),
            ("5", "JPY", 5, "5"),
            ("1.234", "KWD", 1_234, "1.234"),
            ("1.5", "KWD", 1_500, "1.500"),
            ("1.50", "KWD", 1_500, "1.500"),
        ];
        for (value, currency, minor, shown) in cases {
            let m = Money::parse(value, currency).unwrap();
            assert_eq!(m.minor_units(), minor, "{value} {currency}");
            assert_eq!(m.to_decimal_string(), shown, "{value} {currency}");
        }
    }

    #[test]
    fn refuses_more_decimals_than_the_currency_has_zeros_included() {
        for (value, currency, minor_units, scale) in [
            ("1500.00", "JPY", 0, 2),
            ("5.0", "JPY", 0, 1),
            ("1.5000", "KWD", 3, 4),
            ("1.000", "RUB", 2, 3),
            ("1.001", "RUB", 2, 3),
            ("0.000", "RUB", 2, 3),
        ] {
            let error = Money::parse(value, currency).unwrap_err();
            assert_eq!(
                error,
                MoneyError::TooPrecise {
                    currency: currency.to_owned(),
                    minor_units,
                    scale
                },
                "{value} {currency}"
            );
            assert!(
                error
                    .to_string()
                    .contains(&format!("at most {minor_units} decimal places")),
                "{error}"
            );
        }
    }

    #[test]
    fn lenient_parsing_accepts_trailing_zeros_only() {
        let cases = [
            ("1500.00", "JPY", 1500),
            ("1.5000", "KWD", 1_500),
            ("1.000", "RUB", 100),
        ];
        for (value, currency, minor) in cases {
            assert_eq!(
                Money::parse_lenient(value, currency).unwrap().minor_units(),
                minor
            );
        }
        assert!(matches!(
            Money::parse_lenient("1.001", "RUB"),
            Err(MoneyError::TooPrecise { .. })
        ));
        assert!(matches!(
            Money::parse_lenient("1.5", "JPY"),
            Err(MoneyError::TooPrecise { .. })
        ));
        assert!(matches!(
            Money::parse_lenient("-1", "RUB"),
            Err(MoneyError::NotADecimal(_))
        ));
    }

    #[test]
    fn refuses_what_is_not_plain_decimal() {
        for bad in [
            "", ".5", "5.", "-1", "+1", "1e3", " 1", "1 ", "1,00", "0x10", "NaN", "1..0",
        ] {
            assert!(
                matches!(Money::parse(bad, "RUB"), Err(MoneyError::NotADecimal(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn refuses_zero_precision_and_size() {
        assert_eq!(Money::parse("0", "RUB"), Err(MoneyError::NotPositive));
        assert_eq!(Money::parse("0.00", "RUB"), Err(MoneyError::NotPositive));
        assert!(matches!(
            Money::parse("1.5", "JPY"),
            Err(MoneyError::TooPrecise { .. })
        ));
        assert_eq!(
            Money::parse("99999999999999999", "RUB"),
            Err(MoneyError::TooLarge)
        );
        assert_eq!(
            Money::parse("10000000000000.00", "RUB")
                .unwrap()
                .minor_units(),
            Money::MAX_MINOR_UNITS
        );
        assert_eq!(
            Money::parse("10000000000000.01", "RUB"),
            Err(MoneyError::TooLarge)
        );
        assert!(Money::parse("9".repeat(40).as_str(), "RUB").is_err());
    }

    #[test]
    fn refuses_unknown_or_lower_case_currency() {
        for bad in ["rub", "RU", "RUBB", "XXZ", "XAU", ""] {
            assert!(
                matches!(
                    Money::parse("1", bad),
                    Err(MoneyError::UnsupportedCurrency(_))
                ),
                "{bad:?}"
            );
        }
    }
}
