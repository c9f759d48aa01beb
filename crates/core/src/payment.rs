//! Payments: what a shop asks for, what we store, and what the acquirer settled.

use std::fmt;

use time::OffsetDateTime;

use crate::authorization::{Authorization, CaptureMethod};
use crate::{IdempotencyKey, Metadata, Money, ShopId};

/// Why a field of a payment request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// The order reference is empty, too long, or has control characters.
    #[error("reference must be 1 to 255 characters without control characters")]
    Reference,
    /// The payment method token is empty, too long, or not visible ASCII.
    #[error("payment_method.token must be 1 to 255 visible ASCII characters")]
    Token,
    /// A payment id that is not ours (`pay_` and 32 hex digits).
    #[error("`{0}` is not a payment id")]
    PaymentId(String),
    /// A refund id that is not ours (`re_` and 32 hex digits).
    #[error("`{0}` is not a refund id")]
    RefundId(String),
    /// A capture id that is not ours (`cap_` and 32 hex digits).
    #[error("`{0}` is not a capture id")]
    CaptureId(String),
    /// An API key id that is not ours (`key_` and 32 hex digits).
    #[error("`{0}` is not an API key id")]
    ApiKeyId(String),
    /// A webhook endpoint id that is not ours (`we_` and 32 hex digits).
    #[error("`{0}` is not a webhook endpoint id")]
    EndpointId(String),
}

crate::id::prefixed_id!(
    /// Our id of a payment: `pay_` followed by a UUIDv7 (time-ordered).
    PaymentId,
    "pay_"
);

/// The key we send to the acquirer for one payment. It is fixed when the payment
/// row is created (phase 1), so every retry, take-over or completer run sends
/// the same one and the acquirer charges at most once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcquirerKey(String);

impl AcquirerKey {
    /// The acquirer key of a payment: derived from its id, never random.
    pub fn for_payment(id: &PaymentId) -> Self {
        Self(format!("chargeonce-{id}"))
    }

    /// The acquirer key of the void of a payment's authorization: derived
    /// from the payment (one void per authorization), never random.
    pub fn for_void(id: &PaymentId) -> Self {
        Self(format!("chargeonce-void-{id}"))
    }

    /// The payment whose key this is ([`Self::for_payment`]), if it is a
    /// payment's key (not a void's, a refund's, a capture's, nor a key this
    /// service never made). A store that keeps no copy of the key finds the
    /// payment by it.
    pub fn payment_id(&self) -> Option<PaymentId> {
        let id = self.0.strip_prefix("chargeonce-")?;
        PaymentId::parse(id).ok()
    }

    /// Wraps a key read back from a store or received by the simulator.
    pub fn from_stored(key: String) -> Self {
        Self(key)
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The shop's order reference. One order has at most one pending or succeeded
/// payment, whatever idempotency keys are used.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference(String);

impl Reference {
    /// Validates a reference: 1 to 255 characters, no control characters.
    pub fn new(reference: impl Into<String>) -> Result<Self, ValidationError> {
        let reference = reference.into();
        let ok = !reference.is_empty()
            && reference.chars().count() <= 255
            && !reference.chars().any(char::is_control);
        if ok {
            Ok(Self(reference))
        } else {
            Err(ValidationError::Reference)
        }
    }

    /// The reference as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A payment method token, as issued by the acquirer's tokenizer. Simulator
/// tokens (`tok_ok`, `tok_declined`, ...) choose its behaviour. `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct CardToken(String);

impl CardToken {
    /// Validates a token: 1 to 255 visible ASCII characters.
    pub fn new(token: impl Into<String>) -> Result<Self, ValidationError> {
        let token = token.into();
        let ok = (1..=255).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic());
        if ok {
            Ok(Self(token))
        } else {
            Err(ValidationError::Token)
        }
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CardToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CardToken(***)")
    }
}

/// Where a payment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaymentStatus {
    /// Created; the acquirer has not given a definite answer yet.
    Pending,
    /// Charged.
    Succeeded,
    /// Refused by the acquirer: definite, and never charged.
    Declined,
    /// Canceled while pending: a look-up after the settle window found no
    /// charge, so the customer was not charged (a charge that lands later
    /// is refunded by the reconciler). Final; its order is free again.
    Canceled,
}

impl PaymentStatus {
    /// The status as stored and shown (`pending`, `succeeded`, `declined`,
    /// `canceled`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Succeeded => "succeeded",
            Self::Declined => "declined",
            Self::Canceled => "canceled",
        }
    }

    /// Parses a stored status.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "succeeded" => Some(Self::Succeeded),
            "declined" => Some(Self::Declined),
            "canceled" => Some(Self::Canceled),
            _ => None,
        }
    }

    /// Whether the status can no longer change.
    pub fn is_final(&self) -> bool {
        !matches!(self, Self::Pending)
    }

    /// Whether a payment in this status no longer holds its order: nothing
    /// was charged (declined, canceled), so the order may be paid again.
    pub fn frees_order(&self) -> bool {
        matches!(self, Self::Declined | Self::Canceled)
    }
}

/// A validated request to pay: what the engine needs from the HTTP body.
#[derive(Debug, Clone)]
pub struct PaymentRequest {
    /// How much, in which currency.
    pub amount: Money,
    /// The shop's order.
    pub reference: Reference,
    /// How to pay.
    pub token: CardToken,
    /// The shop's own pairs, kept on the payment and shown with it.
    pub metadata: Metadata,
    /// Charge at once, or only authorize and capture later.
    pub capture_method: CaptureMethod,
}

/// How long an authorization holds its amount unless told otherwise
/// (`serve --authorization-ttl`): 7 days, as card networks keep most holds.
pub const DEFAULT_AUTHORIZATION_TTL: std::time::Duration =
    std::time::Duration::from_secs(7 * 24 * 60 * 60);

/// The payment row phase 1 inserts, next to the key row.
#[derive(Debug, Clone)]
pub struct NewPayment {
    /// Our id.
    pub id: PaymentId,
    /// The owner.
    pub shop_id: ShopId,
    /// The key that created it.
    pub idempotency_key: IdempotencyKey,
    /// The request.
    pub request: PaymentRequest,
    /// The key the acquirer will see on every attempt.
    pub acquirer_key: AcquirerKey,
    /// Creation time, to the millisecond.
    pub created_at: OffsetDateTime,
    /// When an authorization is released unless captured: `Some` exactly
    /// when the request asked for [`CaptureMethod::Manual`] (counted from
    /// creation, so never later than the acquirer's own hold).
    pub authorization_expires_at: Option<OffsetDateTime>,
}

impl NewPayment {
    /// A new pending payment for a request, with a fresh id and its derived acquirer key.
    pub fn new(shop_id: ShopId, idempotency_key: IdempotencyKey, request: PaymentRequest) -> Self {
        let id = PaymentId::generate();
        let now = OffsetDateTime::now_utc();
        let created_at = now
            .replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
            .unwrap_or(now);
        let authorization_expires_at = (request.capture_method == CaptureMethod::Manual)
            .then(|| created_at + DEFAULT_AUTHORIZATION_TTL);
        Self {
            acquirer_key: AcquirerKey::for_payment(&id),
            id,
            shop_id,
            idempotency_key,
            request,
            created_at,
            authorization_expires_at,
        }
    }

    /// The same payment with its authorization (if any) held for `ttl`
    /// from creation.
    pub fn with_authorization_ttl(mut self, ttl: std::time::Duration) -> Self {
        if self.request.capture_method == CaptureMethod::Manual {
            self.authorization_expires_at = Some(self.created_at + ttl);
        }
        self
    }

    /// How the payment takes its money, as phase 1 stores it.
    pub fn capture(&self) -> PaymentCapture {
        match self.authorization_expires_at {
            Some(expires_at) if self.request.capture_method == CaptureMethod::Manual => {
                PaymentCapture::Manual {
                    hold: Authorization::new(self.request.amount.minor_units()),
                    expires_at,
                }
            }
            _ => PaymentCapture::Automatic,
        }
    }

    /// The payment as it stands right after phase 1.
    pub fn to_payment(&self) -> Payment {
        Payment {
            id: self.id.clone(),
            shop_id: self.shop_id.clone(),
            idempotency_key: self.idempotency_key.clone(),
            reference: self.request.reference.clone(),
            amount: self.request.amount,
            token: self.request.token.clone(),
            status: PaymentStatus::Pending,
            acquirer_key: self.acquirer_key.clone(),
            provider_payment_id: None,
            decline_code: None,
            created_at: self.created_at,
            refunded_minor: 0,
            metadata: self.request.metadata.clone(),
            capture: self.capture(),
        }
    }
}

/// How a payment takes its money: at once, or held for captures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PaymentCapture {
    /// Charged at once ([`CaptureMethod::Automatic`]).
    #[default]
    Automatic,
    /// Only authorized ([`CaptureMethod::Manual`]): the hold, which stands
    /// once the charge succeeded (until then it is the fresh hold it will
    /// be), and when it is released unless captured.
    Manual {
        /// The hold: what was captured, what captures in flight reserved,
        /// where it stands.
        hold: Authorization,
        /// When it is released unless captured.
        expires_at: OffsetDateTime,
    },
}

impl PaymentCapture {
    /// The capture method.
    pub fn method(&self) -> CaptureMethod {
        match self {
            Self::Automatic => CaptureMethod::Automatic,
            Self::Manual { .. } => CaptureMethod::Manual,
        }
    }
}

/// A stored payment.
#[derive(Debug, Clone, PartialEq)]
pub struct Payment {
    /// Our id.
    pub id: PaymentId,
    /// The owner.
    pub shop_id: ShopId,
    /// The idempotency key of the request that created it.
    pub idempotency_key: IdempotencyKey,
    /// The shop's order.
    pub reference: Reference,
    /// How much.
    pub amount: Money,
    /// The payment method token (needed to resume the acquirer call).
    pub token: CardToken,
    /// Where it stands.
    pub status: PaymentStatus,
    /// The key the acquirer sees.
    pub acquirer_key: AcquirerKey,
    /// The acquirer's id of the charge, once known.
    pub provider_payment_id: Option<String>,
    /// Why the acquirer declined, when it did.
    pub decline_code: Option<String>,
    /// Creation time, to the millisecond.
    pub created_at: OffsetDateTime,
    /// How much of it succeeded refunds gave back, in minor units of its
    /// currency (0 until a refund succeeds).
    pub refunded_minor: i64,
    /// The shop's own pairs, as its request gave them.
    pub metadata: Metadata,
    /// Charged at once, or held for captures.
    pub capture: PaymentCapture,
}

impl Payment {
    /// The same payment with `hold` as its authorization's hold (a payment
    /// charged at once is returned as it is: it holds nothing).
    pub fn with_hold(mut self, hold: Authorization) -> Self {
        if let PaymentCapture::Manual { expires_at, .. } = self.capture {
            self.capture = PaymentCapture::Manual { hold, expires_at };
        }
        self
    }

    /// The authorization's hold, once the acquirer authorized the payment
    /// (a manual payment that succeeded); `None` otherwise.
    pub fn authorization(&self) -> Option<&Authorization> {
        match (&self.capture, self.status) {
            (PaymentCapture::Manual { hold, .. }, PaymentStatus::Succeeded) => Some(hold),
            _ => None,
        }
    }

    /// The payment after a definite acquirer answer.
    pub fn settled(mut self, settlement: &Settlement) -> Self {
        self.status = settlement.status;
        self.provider_payment_id = settlement.provider_payment_id.clone();
        self.decline_code = settlement.decline_code.clone();
        self
    }
}

/// A payment's status as the API shows it: the charge's, or an
/// authorization's own once it stands (what `GET /v1/payments?status=`
/// filters on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShownStatus {
    /// No definite answer yet.
    Pending,
    /// Charged at once, or an authorization whose capture finished.
    Succeeded,
    /// Declined.
    Declined,
    /// Canceled while pending.
    Canceled,
    /// Authorized, nothing captured yet.
    Authorized,
    /// Some captured, more capturable.
    PartiallyCaptured,
    /// Released by a void with nothing captured.
    Voided,
    /// Released by expiry with nothing captured.
    Expired,
}

impl ShownStatus {
    /// Every status, in the API's order.
    pub const ALL: [Self; 8] = [
        Self::Pending,
        Self::Succeeded,
        Self::Declined,
        Self::Canceled,
        Self::Authorized,
        Self::PartiallyCaptured,
        Self::Voided,
        Self::Expired,
    ];

    /// As the API names it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Succeeded => "succeeded",
            Self::Declined => "declined",
            Self::Canceled => "canceled",
            Self::Authorized => "authorized",
            Self::PartiallyCaptured => "partially_captured",
            Self::Voided => "voided",
            Self::Expired => "expired",
        }
    }

    /// Parses the API's name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == s)
    }

    /// What `payment` shows.
    pub fn of(payment: &Payment) -> Self {
        use crate::authorization::AuthorizationStatus as A;
        match payment.authorization().map(|hold| hold.status()) {
            None => payment.status.into(),
            Some(A::Authorized) => Self::Authorized,
            Some(A::PartiallyCaptured) => Self::PartiallyCaptured,
            Some(A::Succeeded) => Self::Succeeded,
            Some(A::Voided) => Self::Voided,
            Some(A::Expired) => Self::Expired,
        }
    }
}

impl From<PaymentStatus> for ShownStatus {
    fn from(status: PaymentStatus) -> Self {
        match status {
            PaymentStatus::Pending => Self::Pending,
            PaymentStatus::Succeeded => Self::Succeeded,
            PaymentStatus::Declined => Self::Declined,
            PaymentStatus::Canceled => Self::Canceled,
        }
    }
}

/// A definite acquirer answer, as phase 3 writes it on the payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// `Succeeded` or `Declined`.
    pub status: PaymentStatus,
    /// The acquirer's id of the charge attempt; `None` when the acquirer
    /// refused the request without recording an attempt
    /// ([`AcquirerError::Rejected`](crate::AcquirerError::Rejected)).
    pub provider_payment_id: Option<String>,
    /// Why it was declined.
    pub decline_code: Option<String>,
}

impl Settlement {
    /// A charge the acquirer definitively refused without recording an
    /// attempt ([`AcquirerError::Rejected`](crate::AcquirerError::Rejected)):
    /// declined with [`REJECTED`](crate::acquirer::REJECTED), no charge id.
    pub fn rejected() -> Self {
        Self {
            status: PaymentStatus::Declined,
            provider_payment_id: None,
            decline_code: Some(crate::acquirer::REJECTED.to_owned()),
        }
    }

    /// A pending payment canceled: the acquirer holds no charge for it
    /// after the settle window.
    pub fn canceled() -> Self {
        Self {
            status: PaymentStatus::Canceled,
            provider_payment_id: None,
            decline_code: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payment_ids_round_trip_and_order_by_time() {
        let a = PaymentId::generate();
        let b = PaymentId::generate();
        assert_eq!(PaymentId::parse(a.as_str()).unwrap(), a);
        assert!(a.as_str() < b.as_str());
        assert!(PaymentId::parse("pay_xyz").is_err());
        assert!(PaymentId::parse(&a.as_str().replace("pay_", "ref_")).is_err());
    }

    #[test]
    fn acquirer_key_is_derived_from_the_payment() {
        let id = PaymentId::generate();
        assert_eq!(AcquirerKey::for_payment(&id), AcquirerKey::for_payment(&id));
        // And the payment is found from it again; no other key names one.
        assert_eq!(AcquirerKey::for_payment(&id).payment_id(), Some(id.clone()));
        assert_eq!(AcquirerKey::for_void(&id).payment_id(), None);
        for other in [
            String::new(),
            id.as_str().to_owned(),
            format!("other-{id}"),
            format!("chargeonce-{id}x"),
            "chargeonce-".to_owned(),
        ] {
            assert_eq!(
                AcquirerKey::from_stored(other.clone()).payment_id(),
                None,
                "{other}"
            );
        }
    }

    #[test]
    fn references_and_tokens_are_checked() {
        assert!(Reference::new("order-123").is_ok());
        assert!(Reference::new("заказ 7").is_ok());
        assert!(Reference::new("").is_err());
        assert!(Reference::new("a\nb").is_err());
        assert!(Reference::new("x".repeat(256)).is_err());
        assert!(CardToken::new("tok_ok").is_ok());
        assert!(CardToken::new("tok ok").is_err());
        assert!(!format!("{:?}", CardToken::new("tok_secret").unwrap()).contains("secret"));
    }
}
