//! The acquirer: the bank that really moves money. A trait, so real acquirers,
//! the in-process simulator and the HTTP adapter are interchangeable.

use async_trait::async_trait;

use crate::{AcquirerKey, CardToken, Money, PaymentId, Reference, ShopId};

/// One charge, as sent to the acquirer.
#[derive(Debug, Clone)]
pub struct ChargeRequest {
    /// The acquirer's idempotency key: the same on every attempt for one payment.
    pub acquirer_key: AcquirerKey,
    /// The merchant.
    pub shop_id: ShopId,
    /// Our payment id.
    pub payment_id: PaymentId,
    /// The shop's order reference.
    pub reference: Reference,
    /// How much.
    pub amount: Money,
    /// How to pay.
    pub token: CardToken,
}

/// A definite answer from the acquirer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeResult {
    /// The money moved.
    Succeeded {
        /// The acquirer's id of the charge.
        provider_payment_id: String,
    },
    /// The acquirer refused; no money moved.
    Declined {
        /// The acquirer's id of the attempt.
        provider_payment_id: String,
        /// Why (`card_declined`, `insufficient_funds`, ...).
        code: String,
    },
}

/// An answer that is not definite.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcquirerError {
    /// The request may have reached the acquirer and may have been executed
    /// (timeout, reset, 5xx after sending, answer lost). Never to be read as
    /// "failed": resolve it by asking again with the same acquirer key.
    #[error("outcome unknown: {0}")]
    Unknown(String),
    /// The request certainly never reached the acquirer (connection refused):
    /// safe to send again.
    #[error("not sent: {0}")]
    NotSent(String),
}

/// An acquirer that is idempotent on [`ChargeRequest::acquirer_key`]: the same
/// key always yields the same charge, executed at most once.
#[async_trait]
pub trait Acquirer: Send + Sync + 'static {
    /// Charges, or returns the answer of the charge already made under this key.
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError>;
}
