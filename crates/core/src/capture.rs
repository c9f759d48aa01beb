//! Captures and releases: parts of an authorization taken, each under its
//! own key, and the rest released by a void or the authorization's expiry.
//!
//! A capture's amount is reserved on its payment's hold when the capture
//! row is created (under the lock, or the single writer, that serialises the
//! payment's moves), so concurrent captures under different keys never
//! together exceed what was authorized; a capture the acquirer definitively
//! refuses gives its reservation back. The rule is [`reservation`], on top
//! of the hold's own judgement ([`Authorization::reserve_capture`]).

use time::OffsetDateTime;

use crate::authorization::{
    Authorization, CaptureAsk, CaptureId, CaptureRefusal, CaptureReservation, ReleasePlan,
    ReleaseReason, ReleaseRefusal,
};
use crate::{AcquirerKey, IdempotencyKey, Money, Payment, PaymentId, PaymentStatus, ShopId};

/// Where a capture stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureStatus {
    /// Reserved on the hold; the acquirer has not given a definite answer yet.
    Pending,
    /// The money was taken.
    Succeeded,
    /// The acquirer refused; the reservation was given back.
    Failed,
}

impl CaptureStatus {
    /// As stored and shown (`pending`, `succeeded`, `failed`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }

    /// Parses a stored status.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "succeeded" => Some(Self::Succeeded),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }

    /// Whether the status can no longer change.
    pub fn is_final(&self) -> bool {
        !matches!(self, Self::Pending)
    }
}

/// A capture as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// Our id (`cap_...`).
    pub id: CaptureId,
    /// The owning shop (the payment's).
    pub shop_id: ShopId,
    /// The authorized payment it takes money from.
    pub payment_id: PaymentId,
    /// The idempotency key that created it.
    pub idempotency_key: IdempotencyKey,
    /// How much, in the payment's currency.
    pub amount: Money,
    /// Whether it is the last capture: the rest of the hold is released
    /// once it succeeds.
    pub last: bool,
    /// Where it stands.
    pub status: CaptureStatus,
    /// The key sent to the acquirer, derived from the id.
    pub acquirer_key: AcquirerKey,
    /// The acquirer's id of the capture, once known.
    pub provider_capture_id: Option<String>,
    /// Why the acquirer refused, when it did.
    pub failure_code: Option<String>,
    /// When it was created.
    pub created_at: OffsetDateTime,
}

impl Capture {
    /// The capture after a definite acquirer answer.
    pub fn settled(mut self, settlement: &crate::CaptureSettlement) -> Self {
        match settlement {
            crate::CaptureSettlement::Succeeded {
                provider_capture_id,
            } => {
                self.status = CaptureStatus::Succeeded;
                self.provider_capture_id = Some(provider_capture_id.clone());
                self.failure_code = None;
            }
            crate::CaptureSettlement::Failed { code } => {
                self.status = CaptureStatus::Failed;
                self.failure_code = Some(code.clone());
            }
        }
        self
    }

    /// The reservation it holds on its payment's hold while pending.
    pub fn reservation(&self) -> CaptureReservation {
        CaptureReservation::from_parts(self.amount.minor_units(), self.last)
    }
}

/// A capture about to be created: what phase 1 reserves.
#[derive(Debug, Clone)]
pub struct NewCapture {
    /// Our id, generated before the claim.
    pub id: CaptureId,
    /// The shop asking.
    pub shop_id: ShopId,
    /// The payment to capture (of that shop, or the capture is refused).
    pub payment_id: PaymentId,
    /// The idempotency key of the request.
    pub idempotency_key: IdempotencyKey,
    /// How much; `None` is everything capturable, as the last capture.
    pub amount: Option<Money>,
    /// Whether it is the last capture (always, when no amount is given).
    pub last: bool,
    /// When it is created.
    pub created_at: OffsetDateTime,
}

impl NewCapture {
    /// A new capture with a fresh id, created now: `amount` (`None`: all
    /// that is capturable, as the last capture), `last` as asked.
    pub fn new(
        shop_id: ShopId,
        payment_id: PaymentId,
        idempotency_key: IdempotencyKey,
        amount: Option<Money>,
        last: bool,
    ) -> Self {
        let now = OffsetDateTime::now_utc();
        let created_at = now
            .replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
            .unwrap_or(now);
        Self {
            id: CaptureId::generate(),
            shop_id,
            payment_id,
            idempotency_key,
            last: last || amount.is_none(),
            amount,
            created_at,
        }
    }

    /// The capture row phase 1 inserts, for the amount the reservation took.
    pub fn to_capture(&self, amount: Money, last: bool) -> Capture {
        Capture {
            id: self.id.clone(),
            shop_id: self.shop_id.clone(),
            payment_id: self.payment_id.clone(),
            idempotency_key: self.idempotency_key.clone(),
            amount,
            last,
            status: CaptureStatus::Pending,
            acquirer_key: self.id.acquirer_key(),
            provider_capture_id: None,
            failure_code: None,
            created_at: self.created_at,
        }
    }
}

/// Why phase 1 refused a capture before anything executed: nothing was
/// written, not even the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureClaimRefusal {
    /// No payment with that id belongs to the shop.
    PaymentNotFound,
    /// The payment was charged at once: there is no hold to capture.
    NotAnAuthorization,
    /// The payment is not authorized (its charge is still pending, or was
    /// declined or canceled).
    NotAuthorized(PaymentStatus),
    /// The capture's currency is not the payment's.
    CurrencyMismatch,
    /// More than the hold has left to capture.
    ExceedsCapturable {
        /// What a capture may take now, in minor units (0 while captures
        /// in flight reserved the rest).
        capturable_minor: i64,
        /// The payment's currency.
        currency: crate::Currency,
    },
    /// The hold refused it otherwise (not positive, closed, or a final
    /// capture or a release in flight).
    Refused(CaptureRefusal),
}

/// The capture reservation rule: the payment's hold after reserving a new
/// capture, the reservation, and its amount; or why it is refused.
///
/// The stores call it on the payment as read under the lock (or the single
/// writer) that serialises the payment's moves, and write the hold it
/// returns.
pub fn reservation(
    payment: &Payment,
    capture: &NewCapture,
) -> Result<(Authorization, CaptureReservation, Money), CaptureClaimRefusal> {
    let hold = match (payment.capture, payment.authorization()) {
        (crate::PaymentCapture::Automatic, _) => {
            return Err(CaptureClaimRefusal::NotAnAuthorization);
        }
        (_, None) => return Err(CaptureClaimRefusal::NotAuthorized(payment.status)),
        (_, Some(hold)) => *hold,
    };
    let ask = match capture.amount {
        Some(amount) if amount.currency() != payment.amount.currency() => {
            return Err(CaptureClaimRefusal::CurrencyMismatch);
        }
        Some(amount) if capture.last => CaptureAsk::last(amount.minor_units()),
        Some(amount) => CaptureAsk::part(amount.minor_units()),
        None => CaptureAsk::rest(),
    };
    let currency = payment.amount.currency();
    let exceeds = |capturable_minor| CaptureClaimRefusal::ExceedsCapturable {
        capturable_minor,
        currency,
    };
    let (next, reserved) = hold.reserve_capture(ask).map_err(|refusal| match refusal {
        CaptureRefusal::ExceedsCapturable { capturable_minor } => exceeds(capturable_minor),
        other => CaptureClaimRefusal::Refused(other),
    })?;
    let amount = Money::from_minor(reserved.amount_minor(), currency)
        .map_err(|_| exceeds(hold.capturable_minor()))?;
    Ok((next, reserved, amount))
}

/// Why a release (a void, or the expiry) is refused before anything
/// executed: nothing was written, not even the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseClaimRefusal {
    /// No payment with that id belongs to the shop.
    PaymentNotFound,
    /// The payment was charged at once: there is no hold to release.
    NotAnAuthorization,
    /// The payment is not authorized (its charge is still pending, or was
    /// declined or canceled).
    NotAuthorized(PaymentStatus),
    /// The hold refused it (captures in flight, a release in flight, or
    /// closed).
    Refused(ReleaseRefusal),
}

/// The release rule: the payment's hold once a release for `reason` is
/// accepted (releasing), and what it gives back; or why it is refused.
/// Called, as [`reservation`], under the lock that serialises the
/// payment's moves.
pub fn release(
    payment: &Payment,
    reason: ReleaseReason,
) -> Result<(Authorization, ReleasePlan), ReleaseClaimRefusal> {
    let hold = match (payment.capture, payment.authorization()) {
        (crate::PaymentCapture::Automatic, _) => {
            return Err(ReleaseClaimRefusal::NotAnAuthorization);
        }
        (_, None) => return Err(ReleaseClaimRefusal::NotAuthorized(payment.status)),
        (_, Some(hold)) => *hold,
    };
    hold.request_release(reason)
        .map_err(ReleaseClaimRefusal::Refused)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::authorization::{AuthorizationStatus, CaptureMethod};
    use crate::{CardToken, Metadata, NewPayment, PaymentRequest, Reference};

    fn authorized(value: &str) -> Payment {
        let request = PaymentRequest {
            amount: Money::parse(value, "RUB").unwrap(),
            reference: Reference::new("order-1").unwrap(),
            token: CardToken::new("tok_ok").unwrap(),
            metadata: Metadata::default(),
            capture_method: CaptureMethod::Manual,
        };
        let key = IdempotencyKey::new("k1").unwrap();
        let mut payment = NewPayment::new(ShopId::new("s").unwrap(), key, request).to_payment();
        payment.status = PaymentStatus::Succeeded;
        payment
    }

    fn new(payment: &Payment, amount: Option<&str>, last: bool) -> NewCapture {
        NewCapture::new(
            payment.shop_id.clone(),
            payment.id.clone(),
            IdempotencyKey::new("c1").unwrap(),
            amount.map(|a| Money::parse(a, "RUB").unwrap()),
            last,
        )
    }

    #[test]
    fn a_capture_reserves_on_the_hold_of_an_authorized_payment_only() {
        let payment = authorized("100.00");
        let (hold, reserved, amount) =
            reservation(&payment, &new(&payment, Some("30.00"), false)).unwrap();
        assert_eq!((amount.minor_units(), reserved.is_last()), (3000, false));
        assert_eq!(hold.in_flight_minor(), 3000);
        assert_eq!(hold.capturable_minor(), 7000);
        // No amount: the rest, as the last capture.
        let (hold, reserved, amount) = reservation(&payment, &new(&payment, None, false)).unwrap();
        assert_eq!((amount.minor_units(), reserved.is_last()), (10_000, true));
        assert_eq!(hold.status(), AuthorizationStatus::Authorized);

        let mut pending = payment.clone();
        pending.status = PaymentStatus::Pending;
        assert_eq!(
            reservation(&pending, &new(&pending, Some("1.00"), false)),
            Err(CaptureClaimRefusal::NotAuthorized(PaymentStatus::Pending))
        );
        let mut at_once = payment.clone();
        at_once.capture = crate::PaymentCapture::Automatic;
        assert_eq!(
            reservation(&at_once, &new(&at_once, Some("1.00"), false)),
            Err(CaptureClaimRefusal::NotAnAuthorization)
        );
        let mut dollars = new(&payment, None, false);
        dollars.amount = Some(Money::parse("1.00", "USD").unwrap());
        assert_eq!(
            reservation(&payment, &dollars),
            Err(CaptureClaimRefusal::CurrencyMismatch)
        );
        assert!(matches!(
            release(&payment, ReleaseReason::Void),
            Ok((hold, plan)) if plan.release_minor == 10_000
                && hold.hold() == crate::authorization::Hold::Releasing(ReleaseReason::Void)
        ));
        assert_eq!(
            release(&pending, ReleaseReason::Expiry),
            Err(ReleaseClaimRefusal::NotAuthorized(PaymentStatus::Pending))
        );
        assert_eq!(
            release(&at_once, ReleaseReason::Void),
            Err(ReleaseClaimRefusal::NotAnAuthorization)
        );
        assert_eq!(
            reservation(&payment, &new(&payment, Some("100.01"), false)),
            Err(CaptureClaimRefusal::ExceedsCapturable {
                capturable_minor: 10_000,
                currency: payment.amount.currency(),
            })
        );
    }
}
