//! A charge attempt as the ledger records it, and its JSON form.

use chargeonce_core::{
    AcquirerCharge, AcquirerKey, CaptureMethod, ChargeResult, Money, PaymentId, Reference, ShopId,
};
use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::FormatItem;
use time::macros::format_description;

/// `created_at` as shown: RFC 3339 in UTC, to the millisecond.
const RFC3339_MILLIS: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// Whether a charge attempt moved money.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChargeStatus {
    /// The money moved.
    Succeeded,
    /// The acquirer refused; no money moved.
    Declined,
}

impl ChargeStatus {
    /// The status as stored and shown (`succeeded`, `declined`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Declined => "declined",
        }
    }

    /// Parses a stored status.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "succeeded" => Some(Self::Succeeded),
            "declined" => Some(Self::Declined),
            _ => None,
        }
    }
}

/// One charge attempt, as the acquirer recorded it.
///
/// Serialises as `{"id", "acquirer_key", "shop_id", "payment_id", "reference",
/// "amount": {"value": "1500.00", "currency": "RUB"}, "amount_minor": 150000,
/// "status", "decline_code", "created_at": "2026-11-29T12:00:00.123Z",
/// "refunded_minor": 0}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    /// The acquirer's id of the attempt (`ch_` and a UUIDv7): the
    /// `provider_payment_id` its answers carry.
    pub id: String,
    /// The caller's idempotency key at the acquirer. Unique in the ledger.
    pub acquirer_key: AcquirerKey,
    /// The merchant.
    pub shop_id: ShopId,
    /// The caller's payment id.
    pub payment_id: PaymentId,
    /// The shop's order reference.
    pub reference: Reference,
    /// How much, in which currency.
    pub amount: Money,
    /// Whether money moved.
    pub status: ChargeStatus,
    /// Why it was declined (`Some` exactly when declined).
    pub decline_code: Option<String>,
    /// When the acquirer recorded it, to the millisecond.
    pub created_at: OffsetDateTime,
    /// How much of it was refunded, in minor units.
    pub refunded_minor: i64,
    /// Charged at once, or only authorized ([`CaptureMethod::Manual`]: a
    /// succeeded manual charge is an authorization holding its amount).
    pub capture_method: CaptureMethod,
    /// What captures took from an authorization, in minor units (0 for a
    /// charge made at once: its whole amount moved when it succeeded).
    pub captured_minor: i64,
    /// An authorization closed by its last capture (nothing more can be
    /// captured or voided).
    pub closed: bool,
    /// An authorization whose rest was released by a void.
    pub voided: bool,
    /// The W3C trace id of the request that recorded it (its
    /// `traceparent`), when it carried one: how a caller's trace finds the
    /// charge.
    pub trace_id: Option<String>,
}

impl LedgerEntry {
    /// The answer the acquirer gives for this attempt, first time or replayed.
    pub fn result(&self) -> ChargeResult {
        match self.status {
            ChargeStatus::Succeeded => ChargeResult::Succeeded {
                provider_payment_id: self.id.clone(),
            },
            ChargeStatus::Declined => ChargeResult::Declined {
                provider_payment_id: self.id.clone(),
                code: self
                    .decline_code
                    .clone()
                    .unwrap_or_else(|| "declined".to_owned()),
            },
        }
    }

    /// The money this charge took, in minor units: its amount when charged
    /// at once and succeeded, what captures took when only authorized.
    pub fn taken_minor(&self) -> i64 {
        match (self.status, self.capture_method) {
            (ChargeStatus::Declined, _) => 0,
            (ChargeStatus::Succeeded, CaptureMethod::Automatic) => self.amount.minor_units(),
            (ChargeStatus::Succeeded, CaptureMethod::Manual) => self.captured_minor,
        }
    }

    /// The charge as the core's acquirer traits report it.
    pub fn to_charge(&self) -> AcquirerCharge {
        AcquirerCharge {
            outcome: self.result(),
            acquirer_key: self.acquirer_key.clone(),
            shop_id: self.shop_id.clone(),
            payment_id: self.payment_id.clone(),
            reference: self.reference.clone(),
            amount: self.amount,
            refunded_minor: self.refunded_minor,
            created_at: self.created_at,
            capture_method: self.capture_method,
            taken_minor: self.taken_minor(),
        }
    }

    /// `created_at` as RFC 3339 in UTC with milliseconds.
    pub fn created_at_rfc3339(&self) -> Result<String, time::error::Format> {
        self.created_at
            .to_offset(time::UtcOffset::UTC)
            .format(RFC3339_MILLIS)
    }
}

/// An amount as JSON: `{"value": "1500.00", "currency": "RUB"}`.
#[derive(Serialize)]
struct AmountJson {
    value: String,
    currency: &'static str,
}

/// The JSON form of a [`LedgerEntry`].
#[derive(Serialize)]
struct EntryJson<'a> {
    id: &'a str,
    acquirer_key: &'a str,
    shop_id: &'a str,
    payment_id: &'a str,
    reference: &'a str,
    amount: AmountJson,
    amount_minor: i64,
    status: &'static str,
    decline_code: Option<&'a str>,
    created_at: String,
    refunded_minor: i64,
    /// Only for an authorization: a charge made at once shows what it always did.
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_method: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    captured_minor: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    closed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    voided: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
}

impl Serialize for LedgerEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let manual = self.capture_method == CaptureMethod::Manual;
        EntryJson {
            id: &self.id,
            acquirer_key: self.acquirer_key.as_str(),
            shop_id: self.shop_id.as_str(),
            payment_id: self.payment_id.as_str(),
            reference: self.reference.as_str(),
            amount: AmountJson {
                value: self.amount.to_decimal_string(),
                currency: self.amount.currency().code(),
            },
            amount_minor: self.amount.minor_units(),
            status: self.status.as_str(),
            decline_code: self.decline_code.as_deref(),
            created_at: self.created_at_rfc3339().map_err(S::Error::custom)?,
            refunded_minor: self.refunded_minor,
            capture_method: manual.then_some(self.capture_method.as_str()),
            captured_minor: manual.then_some(self.captured_minor),
            closed: manual.then_some(self.closed),
            voided: manual.then_some(self.voided),
            trace_id: self.trace_id.as_deref(),
        }
        .serialize(serializer)
    }
}

/// The current time, truncated to the millisecond (what the ledger stores).
pub(crate) fn now_millis() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
        .unwrap_or(now)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for status in [ChargeStatus::Succeeded, ChargeStatus::Declined] {
            assert_eq!(ChargeStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(ChargeStatus::parse("pending"), None);
    }
}
