//! The acquirer: the bank that really moves money. A trait, so real acquirers,
//! the in-process simulator and the HTTP adapter are interchangeable.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::authorization::{CaptureId, CaptureMethod};
use crate::{
    AcquirerKey, CardToken, Money, PaymentId, PaymentStatus, Reference, RefundId, RefundSettlement,
    Settlement, ShopId,
};

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
    /// Charge at once ([`CaptureMethod::Automatic`]), or only authorize:
    /// hold the amount for captures ([`CaptureMethod::Manual`]).
    pub capture_method: CaptureMethod,
}

/// One capture of an authorization, as sent to the acquirer.
#[derive(Debug, Clone)]
pub struct CaptureRequest {
    /// The acquirer's idempotency key of the capture: derived from the
    /// capture id ([`CaptureId::acquirer_key`]), the same on every attempt.
    pub acquirer_key: AcquirerKey,
    /// The merchant.
    pub shop_id: ShopId,
    /// Our payment id.
    pub payment_id: PaymentId,
    /// Our capture id: our reference for the capture at the acquirer.
    pub capture_id: CaptureId,
    /// The acquirer's id of the authorization.
    pub charge_id: String,
    /// How much to take.
    pub amount: Money,
    /// Whether it is the last capture: the rest is released once it succeeds.
    pub last: bool,
    /// The payment's token: real acquirers ignore it; the simulator's
    /// behaviour rules read it (`tok_timeout` loses the first answer).
    pub token: CardToken,
}

/// A definite answer to a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureSettlement {
    /// The money was taken.
    Succeeded {
        /// The acquirer's id of the capture.
        provider_capture_id: String,
    },
    /// Refused for good; nothing was taken.
    Failed {
        /// Why (`capture_exceeds_authorization`, `authorization_voided`, ...).
        code: String,
    },
}

/// The void of an authorization's remainder, as sent to the acquirer.
#[derive(Debug, Clone)]
pub struct VoidRequest {
    /// The acquirer's idempotency key: [`AcquirerKey::for_void`].
    pub acquirer_key: AcquirerKey,
    /// The merchant.
    pub shop_id: ShopId,
    /// Our payment id.
    pub payment_id: PaymentId,
    /// The acquirer's id of the authorization.
    pub charge_id: String,
    /// The payment's token (the simulator's behaviour rules read it).
    pub token: CardToken,
}

/// A definite answer to a void.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoidSettlement {
    /// The rest of the hold was released.
    Succeeded {
        /// The acquirer's id of the void.
        provider_void_id: String,
        /// What was released: authorized minus captured.
        released: Money,
    },
    /// Refused for good; nothing was released.
    Failed {
        /// Why (`nothing_to_void`, `authorization_voided`, ...).
        code: String,
    },
}

/// A capture made at the acquirer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquirerCapture {
    /// The acquirer's id of the capture.
    pub id: String,
    /// The authorization it takes money from.
    pub charge_id: String,
    /// How much it took.
    pub amount: Money,
    /// Whether it was the last capture.
    pub last: bool,
}

/// The failure code of a capture or a void sent to an acquirer that holds
/// no authorizations (it charges at once): definite, nothing moved.
pub const CAPTURE_NOT_SUPPORTED: &str = "capture_not_supported";

/// One refund, as sent to the acquirer.
#[derive(Debug, Clone)]
pub struct RefundRequest {
    /// The acquirer's idempotency key of the refund: derived from the refund
    /// id, the same on every attempt, never the payment's.
    pub acquirer_key: AcquirerKey,
    /// The merchant.
    pub shop_id: ShopId,
    /// Our payment id.
    pub payment_id: PaymentId,
    /// Our refund id.
    pub refund_id: RefundId,
    /// The acquirer's id of the charge to give money back for.
    pub charge_id: String,
    /// How much (at most what is left of the charge).
    pub amount: Money,
    /// The payment's token: real acquirers ignore it; the simulator's
    /// behaviour rules read it (`tok_timeout` loses the first answer).
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

impl ChargeResult {
    /// The acquirer's id of the charge attempt.
    pub fn provider_payment_id(&self) -> &str {
        match self {
            Self::Succeeded {
                provider_payment_id,
            }
            | Self::Declined {
                provider_payment_id,
                ..
            } => provider_payment_id,
        }
    }

    /// Whether money moved.
    pub fn is_succeeded(&self) -> bool {
        matches!(self, Self::Succeeded { .. })
    }

    /// What this answer writes on our payment.
    pub fn settlement(&self) -> Settlement {
        match self {
            Self::Succeeded {
                provider_payment_id,
            } => Settlement {
                status: PaymentStatus::Succeeded,
                provider_payment_id: Some(provider_payment_id.clone()),
                decline_code: None,
            },
            Self::Declined {
                provider_payment_id,
                code,
            } => Settlement {
                status: PaymentStatus::Declined,
                provider_payment_id: Some(provider_payment_id.clone()),
                decline_code: Some(code.clone()),
            },
        }
    }
}

/// A charge as the acquirer reports it: from a status look-up or from its
/// ledger (the settlement report the reconciler compares with our payments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquirerCharge {
    /// The definite answer the acquirer gave (its id is the charge's id).
    pub outcome: ChargeResult,
    /// The key we sent with it.
    pub acquirer_key: AcquirerKey,
    /// The merchant.
    pub shop_id: ShopId,
    /// Our payment id: our reference for the charge at the acquirer.
    pub payment_id: PaymentId,
    /// The shop's order reference.
    pub reference: Reference,
    /// How much.
    pub amount: Money,
    /// How much of it was refunded, in minor units of its currency.
    pub refunded_minor: i64,
    /// When the acquirer recorded it (the acquirer's clock), to the millisecond.
    pub created_at: OffsetDateTime,
    /// Charged at once, or only authorized.
    pub capture_method: CaptureMethod,
    /// The money it took, in minor units: the amount of a succeeded charge
    /// made at once, what captures took from an authorization, 0 when
    /// declined.
    pub taken_minor: i64,
}

impl AcquirerCharge {
    /// The acquirer's id of the charge.
    pub fn id(&self) -> &str {
        self.outcome.provider_payment_id()
    }

    /// A charge that took money not (fully) given back. An authorization
    /// holds none until a capture takes some.
    pub fn holds_money(&self) -> bool {
        self.outcome.is_succeeded() && self.refunded_minor < self.taken_minor
    }
}

/// A refund made at the acquirer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquirerRefund {
    /// The acquirer's id of the refund.
    pub id: String,
    /// The charge it gives money back for.
    pub charge_id: String,
    /// How much was given back.
    pub amount: Money,
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
    /// The acquirer definitively refused the request without executing it
    /// (an HTTP 4xx other than 408, 409, 425 and 429: a request it will
    /// refuse again however often it is sent). A charge refused this way
    /// ends declined with [`REJECTED`], which frees its order.
    #[error("rejected by the acquirer: {0}")]
    Rejected(String),
}

/// The decline (or refund failure) code of a request the acquirer
/// definitively refused ([`AcquirerError::Rejected`]).
pub const REJECTED: &str = "acquirer_rejected";

/// The refund failure code an adapter gives when the acquirer refuses a
/// refund because it would exceed what is left of the charge. For a refund
/// sent again to an acquirer that ignores keys it is ambiguous (the attempt
/// resumed may be what used the charge up), so the engine never takes it as
/// a failure there.
pub const REFUND_EXCEEDS_CHARGE: &str = "refund_exceeds_charge";

/// Capture or void refusal code: the authorization's rest was voided. For
/// a void sent again to an acquirer that ignores keys it is ambiguous (the
/// attempt resumed may be what voided it).
pub const AUTHORIZATION_VOIDED: &str = "authorization_voided";

/// Capture refusal code: the authorization was closed by its last capture
/// (or fully captured). Ambiguous for a capture sent again to an acquirer
/// that ignores keys (the attempt resumed may be what closed it).
pub const AUTHORIZATION_CLOSED: &str = "authorization_closed";

/// Capture refusal code: the capture exceeds what is left of the
/// authorization. Ambiguous for a capture sent again to an acquirer that
/// ignores keys, as [`AUTHORIZATION_CLOSED`].
pub const CAPTURE_EXCEEDS_AUTHORIZATION: &str = "capture_exceeds_authorization";

/// Void refusal code: nothing is left to release (the authorization was
/// closed by its last capture, or fully captured).
pub const NOTHING_TO_VOID: &str = "nothing_to_void";

/// The acquirer. Normally idempotent on [`ChargeRequest::acquirer_key`]: the
/// same key always yields the same charge, executed at most once. Some real
/// providers ignore idempotency keys ([`Acquirer::is_idempotent`] is `false`);
/// then whoever sends a payment again first looks its charges up by our
/// reference ([`Acquirer::charges_for_payment`]).
#[async_trait]
pub trait Acquirer: Send + Sync + 'static {
    /// Charges, or (idempotent acquirers) returns the answer of the charge
    /// already made under this key.
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError>;

    /// What the acquirer recorded under an acquirer key, charging nothing.
    /// `Ok(None)`: it holds no charge under this key (a non-idempotent acquirer
    /// keeps no keys and always says so).
    async fn status(&self, key: &AcquirerKey) -> Result<Option<AcquirerCharge>, AcquirerError>;

    /// Every charge the acquirer holds for one of our payments (our reference
    /// for it is the payment id), oldest first, charging nothing.
    async fn charges_for_payment(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError>;

    /// Gives (part of) a charge back, idempotent on
    /// [`RefundRequest::acquirer_key`]: the same key always yields the same
    /// refund, executed at most once. `Ok(Failed)` is a definite refusal
    /// (no money moved).
    async fn refund_payment(
        &self,
        request: &RefundRequest,
    ) -> Result<RefundSettlement, AcquirerError>;

    /// Every refund the acquirer holds for one of our refunds (our
    /// reference for it is the refund id), oldest first, refunding nothing.
    /// Asked before a refund is sent again to an acquirer that does not
    /// deduplicate on keys.
    async fn refunds_for_refund(
        &self,
        request: &RefundRequest,
    ) -> Result<Vec<AcquirerRefund>, AcquirerError>;

    /// Whether the acquirer deduplicates charges and refunds on the acquirer key.
    fn is_idempotent(&self) -> bool {
        true
    }

    /// Takes (part of) an authorization, idempotent on
    /// [`CaptureRequest::acquirer_key`]: the same key always yields the same
    /// capture, executed at most once. `Ok(Failed)` is a definite refusal.
    /// An acquirer that only charges at once answers
    /// [`CAPTURE_NOT_SUPPORTED`] (the default).
    async fn capture(&self, request: &CaptureRequest) -> Result<CaptureSettlement, AcquirerError> {
        let _ = request;
        Ok(CaptureSettlement::Failed {
            code: CAPTURE_NOT_SUPPORTED.to_owned(),
        })
    }

    /// Releases what is left of an authorization, idempotent on
    /// [`VoidRequest::acquirer_key`]. `Ok(Failed)` is a definite refusal.
    /// An acquirer that only charges at once answers
    /// [`CAPTURE_NOT_SUPPORTED`] (the default).
    async fn void(&self, request: &VoidRequest) -> Result<VoidSettlement, AcquirerError> {
        let _ = request;
        Ok(VoidSettlement::Failed {
            code: CAPTURE_NOT_SUPPORTED.to_owned(),
        })
    }

    /// Every capture the acquirer holds for one of our captures (our
    /// reference for it is the capture id), oldest first, taking nothing.
    /// Asked before a capture is sent again to an acquirer that does not
    /// deduplicate on keys, and to confirm a resent capture's refusal. By
    /// default the look-up is not supported: an unknown outcome, never
    /// "nothing found" (which would let a refusal be confirmed, and a
    /// capture that was made be failed).
    async fn captures_for_capture(
        &self,
        request: &CaptureRequest,
    ) -> Result<Vec<AcquirerCapture>, AcquirerError> {
        let _ = request;
        Err(AcquirerError::Unknown(
            "this acquirer cannot look captures up".to_owned(),
        ))
    }
}

/// Where a page of the acquirer's ledger ended: the last charge read, in the
/// ledger's order (`created_at`, then the charge id). The next page starts
/// right after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCursor {
    /// The last charge's `created_at` (the acquirer's clock, to the millisecond).
    pub created_at: OffsetDateTime,
    /// The last charge's id.
    pub charge_id: String,
}

impl LedgerCursor {
    /// The cursor just after `charge`.
    pub fn after(charge: &AcquirerCharge) -> Self {
        Self {
            created_at: charge.created_at,
            charge_id: charge.id().to_owned(),
        }
    }
}

/// The acquirer's books, for the reconciler: its charges over a time window
/// (whole, or a page at a time), the charges of one order, and refunds of
/// charges that should not have happened.
#[async_trait]
pub trait AcquirerLedger: Send + Sync + 'static {
    /// Every charge recorded in `[from, to)` by the acquirer's clock, oldest first.
    async fn charges_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError>;

    /// Up to `limit` charges recorded in `[from, to)` by the acquirer's clock,
    /// ordered by `created_at` then id, starting after `after` (keyset
    /// pagination: `None` is the first page). Fewer than `limit` means the
    /// window has no more. What the reconciler walks the window with, so it
    /// never holds more than a page.
    async fn charges_page(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&LedgerCursor>,
        limit: u32,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError>;

    /// Every charge recorded for one order reference of one shop, whenever it
    /// was made, oldest first (`created_at`, then id). An order normally has
    /// one; the reconciler asks to see a whole group of duplicates that its
    /// pages see only a part of.
    async fn charges_for_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError>;

    /// Refunds the whole charge, once: a repeat returns the same refund.
    async fn refund(&self, charge_id: &str) -> Result<AcquirerRefund, AcquirerError>;
}

/// What the acquirer knows of one payment, asked the way it can answer: by
/// acquirer key when it is idempotent, by our reference otherwise. When it
/// holds several charges for the payment (only a non-idempotent acquirer can),
/// the first succeeded one counts, else the first; the others are duplicates
/// for the reconciler.
pub async fn look_up(
    acquirer: &dyn Acquirer,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    key: &AcquirerKey,
) -> Result<Option<AcquirerCharge>, AcquirerError> {
    if acquirer.is_idempotent() {
        return acquirer.status(key).await;
    }
    let charges = acquirer.charges_for_payment(shop_id, payment_id).await?;
    let first_succeeded = charges.iter().position(|c| c.outcome.is_succeeded());
    Ok(match first_succeeded {
        Some(i) => charges.into_iter().nth(i),
        None => charges.into_iter().next(),
    })
}
