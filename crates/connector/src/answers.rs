//! The acquirer's answers as it sends them (JSON), and their reading into
//! the engine's types: an answer that arrived but cannot be read makes the
//! outcome unknown, never a failure.

use chargeonce_core::{
    AcquirerCapture, AcquirerCharge, AcquirerError, AcquirerKey, AcquirerRefund, CaptureMethod,
    ChargeResult, Currency, Money, PaymentId, Reference, ShopId,
};
use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// An amount as the acquirer sends it.
#[derive(Debug, Deserialize)]
struct AmountJson {
    value: String,
    currency: String,
}

/// A charge as the acquirer sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct ChargeJson {
    id: String,
    acquirer_key: String,
    shop_id: String,
    payment_id: String,
    reference: String,
    amount: AmountJson,
    status: String,
    decline_code: Option<String>,
    created_at: String,
    #[serde(default)]
    refunded_minor: i64,
    /// Absent from a charge made at once (and from older acquirers).
    #[serde(default)]
    capture_method: Option<String>,
    /// What captures took from an authorization.
    #[serde(default)]
    captured_minor: i64,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ListJson {
    pub(crate) data: Vec<ChargeJson>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RefundJson {
    pub(crate) id: String,
    charge_id: String,
    pub(crate) amount_minor: i64,
    currency: String,
}

/// `GET /v1/charges/{id}/refunds`.
#[derive(Debug, Deserialize)]
pub(crate) struct RefundListJson {
    pub(crate) data: Vec<RefundJson>,
}

impl RefundJson {
    pub(crate) fn into_refund(self) -> Result<AcquirerRefund, AcquirerError> {
        let currency = Currency::from_code(&self.currency).map_err(unreadable)?;
        Ok(AcquirerRefund {
            id: self.id,
            charge_id: self.charge_id,
            amount: Money::from_minor(self.amount_minor, currency).map_err(unreadable)?,
        })
    }
}

/// An answer that arrived but cannot be used: the outcome is unknown.
pub(crate) fn unreadable(what: impl std::fmt::Display) -> AcquirerError {
    AcquirerError::Unknown(format!("unreadable acquirer answer: {what}"))
}

impl ChargeJson {
    pub(crate) fn into_charge(self) -> Result<AcquirerCharge, AcquirerError> {
        let currency = Currency::from_code(&self.amount.currency).map_err(unreadable)?;
        // Lenient: a known outcome is not turned into an unknown one for a
        // trailing zero the acquirer wrote (our own input is strict).
        let amount =
            Money::parse_lenient(&self.amount.value, currency.code()).map_err(unreadable)?;
        let outcome = match (self.status.as_str(), self.decline_code) {
            ("succeeded", _) => ChargeResult::Succeeded {
                provider_payment_id: self.id,
            },
            ("declined", code) => ChargeResult::Declined {
                provider_payment_id: self.id,
                code: code.unwrap_or_else(|| "declined".to_owned()),
            },
            (other, _) => return Err(unreadable(format!("charge status `{other}`"))),
        };
        let capture_method = match self.capture_method.as_deref() {
            None => CaptureMethod::Automatic,
            Some(method) => CaptureMethod::parse(method)
                .ok_or_else(|| unreadable(format!("capture method `{method}`")))?,
        };
        let taken_minor = match (outcome.is_succeeded(), capture_method) {
            (false, _) => 0,
            (true, CaptureMethod::Automatic) => amount.minor_units(),
            (true, CaptureMethod::Manual) => self.captured_minor,
        };
        Ok(AcquirerCharge {
            outcome,
            acquirer_key: AcquirerKey::from_stored(self.acquirer_key),
            shop_id: ShopId::new(self.shop_id).map_err(unreadable)?,
            payment_id: PaymentId::parse(&self.payment_id).map_err(unreadable)?,
            reference: Reference::new(self.reference).map_err(unreadable)?,
            amount,
            refunded_minor: self.refunded_minor,
            created_at: OffsetDateTime::parse(&self.created_at, &Rfc3339).map_err(unreadable)?,
            capture_method,
            taken_minor,
        })
    }
}

/// A capture as the acquirer sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct CaptureJson {
    pub(crate) id: String,
    pub(crate) charge_id: String,
    pub(crate) amount_minor: i64,
    currency: String,
    #[serde(default)]
    last: bool,
}

/// `GET /v1/charges/{id}/captures`.
#[derive(Debug, Deserialize)]
pub(crate) struct CaptureListJson {
    pub(crate) data: Vec<CaptureJson>,
}

impl CaptureJson {
    pub(crate) fn into_capture(self) -> Result<AcquirerCapture, AcquirerError> {
        let currency = Currency::from_code(&self.currency).map_err(unreadable)?;
        Ok(AcquirerCapture {
            amount: Money::from_minor(self.amount_minor, currency).map_err(unreadable)?,
            id: self.id,
            charge_id: self.charge_id,
            last: self.last,
        })
    }
}

/// A void as the acquirer sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct VoidJson {
    pub(crate) id: String,
    pub(crate) charge_id: String,
    released_minor: i64,
    currency: String,
}

impl VoidJson {
    /// What the void released.
    pub(crate) fn released(&self) -> Result<Money, AcquirerError> {
        let currency = Currency::from_code(&self.currency).map_err(unreadable)?;
        Money::from_minor(self.released_minor, currency).map_err(unreadable)
    }
}
