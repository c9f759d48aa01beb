//! Refunds: money given back for a succeeded payment, never more than it charged.
//!
//! A refund's amount is reserved on its payment when the refund row is
//! created (one conditional update), so concurrent refunds under different
//! keys can never together exceed the captured amount. A refund the acquirer
//! definitively refuses gives its reservation back.

use time::OffsetDateTime;

use crate::{AcquirerKey, IdempotencyKey, Money, Payment, PaymentId, PaymentStatus, ShopId};

crate::id::prefixed_id!(
    /// Our id of a refund: `re_` followed by a UUIDv7 (time-ordered).
    RefundId,
    "re_"
);

impl RefundId {
    /// The acquirer key of this refund: derived from its id, never random,
    /// so every retry, take-over or completer run sends the same one.
    pub fn acquirer_key(&self) -> AcquirerKey {
        AcquirerKey::from_stored(format!("chargeonce-{}", self.0))
    }
}

/// Where a refund stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    /// Reserved; the acquirer has not given a definite answer yet.
    Pending,
    /// The money went back.
    Succeeded,
    /// The acquirer refused; the reservation was given back.
    Failed,
}

impl RefundStatus {
    /// The status as stored and shown (`pending`, `succeeded`, `failed`).
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

/// A refund as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    /// Our id (`re_...`).
    pub id: RefundId,
    /// The owning shop (the payment's).
    pub shop_id: ShopId,
    /// The payment it gives money back for.
    pub payment_id: PaymentId,
    /// The idempotency key that created it.
    pub idempotency_key: IdempotencyKey,
    /// How much, in the payment's currency.
    pub amount: Money,
    /// Where it stands.
    pub status: RefundStatus,
    /// The key sent to the acquirer, fixed when the refund was created.
    pub acquirer_key: AcquirerKey,
    /// The acquirer's id of the refund, once known.
    pub provider_refund_id: Option<String>,
    /// Why the acquirer refused, when it did.
    pub failure_code: Option<String>,
    /// When it was created.
    pub created_at: OffsetDateTime,
}

impl Refund {
    /// The refund after a definite acquirer answer.
    pub fn settled(mut self, settlement: &RefundSettlement) -> Self {
        match settlement {
            RefundSettlement::Succeeded { provider_refund_id } => {
                self.status = RefundStatus::Succeeded;
                self.provider_refund_id = Some(provider_refund_id.clone());
                self.failure_code = None;
            }
            RefundSettlement::Failed { code } => {
                self.status = RefundStatus::Failed;
                self.failure_code = Some(code.clone());
            }
        }
        self
    }
}

/// A refund about to be created: what phase 1 reserves.
#[derive(Debug, Clone)]
pub struct NewRefund {
    /// Our id, generated before the claim.
    pub id: RefundId,
    /// The shop asking.
    pub shop_id: ShopId,
    /// The payment to refund (of that shop, or the refund is refused).
    pub payment_id: PaymentId,
    /// The idempotency key of the request.
    pub idempotency_key: IdempotencyKey,
    /// How much; `None` is the rest of the payment not yet reserved by
    /// other refunds.
    pub amount: Option<Money>,
    /// When it is created.
    pub created_at: OffsetDateTime,
}

impl NewRefund {
    /// A new refund with a fresh id, created now.
    pub fn new(
        shop_id: ShopId,
        payment_id: PaymentId,
        idempotency_key: IdempotencyKey,
        amount: Option<Money>,
    ) -> Self {
        let now = OffsetDateTime::now_utc();
        let created_at = now
            .replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
            .unwrap_or(now);
        Self {
            id: RefundId::generate(),
            shop_id,
            payment_id,
            idempotency_key,
            amount,
            created_at,
        }
    }
}

/// Why phase 1 refused a refund before anything executed: nothing was
/// written, not even the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundRefusal {
    /// No payment with that id belongs to the shop.
    PaymentNotFound,
    /// The payment is not `succeeded` (still pending, or declined).
    NotRefundable(PaymentStatus),
    /// The refund's currency is not the payment's.
    CurrencyMismatch,
    /// The refund would take the refunds of the payment over its amount.
    ExceedsAmount {
        /// What is left to refund (amount minus reserved), possibly zero.
        available_minor: i64,
    },
}

/// The refund reservation rule: how much a new refund of `payment` takes, or
/// why it is refused.
///
/// `reserved_minor` is what the payment's pending and succeeded refunds
/// already hold (in minor units); what is left to refund is the payment's
/// amount (for an authorization: what its captures took) minus that, never
/// below zero. `requested` is the refund's amount,
/// or `None` for all that is left. A refund is allowed only of a
/// `succeeded` payment, in the payment's currency, for more than zero and at
/// most what is left.
///
/// The stores call it on the payment as read under the lock (or the single
/// writer) that serialises the payment's refunds, and then reserve the
/// amount it returns with a conditional update that re-checks the bound.
///
/// ```
/// # use chargeonce_core::{Money, RefundRefusal};
/// # use chargeonce_core::refund::reservation;
/// # fn demo(paid: &chargeonce_core::Payment) {
/// // 1500.00 RUB succeeded, 1000.00 already reserved by earlier refunds:
/// let rest = reservation(paid, 100_000, None);
/// assert_eq!(rest.map(|m| m.minor_units()), Ok(50_000));
/// let more = Money::from_minor(60_000, paid.amount.currency()).unwrap();
/// assert_eq!(
///     reservation(paid, 100_000, Some(more)),
///     Err(RefundRefusal::ExceedsAmount { available_minor: 50_000 })
/// );
/// # }
/// ```
pub fn reservation(
    payment: &Payment,
    reserved_minor: i64,
    requested: Option<Money>,
) -> Result<Money, RefundRefusal> {
    if payment.status != PaymentStatus::Succeeded {
        return Err(RefundRefusal::NotRefundable(payment.status));
    }
    // An authorization gives back only what its captures took.
    let total = match payment.authorization() {
        Some(hold) => hold.captured_minor(),
        None => payment.amount.minor_units(),
    };
    let available_minor = total.saturating_sub(reserved_minor).max(0);
    let amount = match requested {
        Some(amount) if amount.currency() != payment.amount.currency() => {
            return Err(RefundRefusal::CurrencyMismatch);
        }
        Some(amount) => amount.minor_units(),
        None => available_minor,
    };
    if amount <= 0 || amount > available_minor {
        return Err(RefundRefusal::ExceedsAmount { available_minor });
    }
    Money::from_minor(amount, payment.amount.currency())
        .map_err(|_| RefundRefusal::ExceedsAmount { available_minor })
}

/// A definite answer from the acquirer about a refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundSettlement {
    /// The money went back.
    Succeeded {
        /// The acquirer's id of the refund.
        provider_refund_id: String,
    },
    /// The acquirer refused; no money moved.
    Failed {
        /// Why.
        code: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paid(minor: i64, status: PaymentStatus) -> Payment {
        let request = crate::PaymentRequest {
            amount: Money::from_minor(minor, rub()).unwrap(),
            reference: crate::Reference::new("order-1").unwrap(),
            token: crate::CardToken::new("tok_ok").unwrap(),
            metadata: Default::default(),
            capture_method: crate::CaptureMethod::Automatic,
        };
        let mut payment = crate::NewPayment::new(
            ShopId::new("shop").unwrap(),
            IdempotencyKey::new("order-1-pay").unwrap(),
            request,
        )
        .to_payment();
        payment.status = status;
        payment
    }

    fn rub() -> crate::Currency {
        crate::Currency::from_code("RUB").unwrap()
    }

    fn money(minor: i64, code: &str) -> Money {
        Money::from_minor(minor, crate::Currency::from_code(code).unwrap()).unwrap()
    }

    #[test]
    fn a_refund_without_an_amount_takes_what_is_left() {
        let payment = paid(150_000, PaymentStatus::Succeeded);
        assert_eq!(reservation(&payment, 0, None), Ok(money(150_000, "RUB")));
        assert_eq!(
            reservation(&payment, 100_000, None),
            Ok(money(50_000, "RUB"))
        );
    }

    #[test]
    fn a_refund_may_take_up_to_what_is_left_and_no_more() {
        let payment = paid(150_000, PaymentStatus::Succeeded);
        let half = Some(money(75_000, "RUB"));
        assert_eq!(
            reservation(&payment, 75_000, half),
            Ok(money(75_000, "RUB"))
        );
        assert_eq!(
            reservation(&payment, 75_001, half),
            Err(RefundRefusal::ExceedsAmount {
                available_minor: 74_999
            })
        );
    }

    #[test]
    fn nothing_left_refuses_even_a_refund_of_the_rest() {
        let payment = paid(150_000, PaymentStatus::Succeeded);
        let refused = Err(RefundRefusal::ExceedsAmount { available_minor: 0 });
        assert_eq!(reservation(&payment, 150_000, None), refused);
        // More reserved than paid (a manual edit) counts as nothing left.
        assert_eq!(reservation(&payment, 200_000, None), refused);
    }

    #[test]
    fn only_succeeded_payments_in_their_currency_are_refunded() {
        for status in [PaymentStatus::Pending, PaymentStatus::Declined] {
            assert_eq!(
                reservation(&paid(150_000, status), 0, None),
                Err(RefundRefusal::NotRefundable(status))
            );
        }
        let payment = paid(150_000, PaymentStatus::Succeeded);
        assert_eq!(
            reservation(&payment, 0, Some(money(100, "USD"))),
            Err(RefundRefusal::CurrencyMismatch)
        );
    }

    #[test]
    fn refund_ids_round_trip_and_reject_others() {
        let id = RefundId::generate();
        assert!(id.as_str().starts_with("re_"));
        assert_eq!(RefundId::parse(id.as_str()).ok(), Some(id.clone()));
        assert!(RefundId::parse("pay_0190b2a4c8e07c3a9f1e2d3c4b5a6978").is_err());
        assert!(RefundId::parse("re_nothex").is_err());
        assert_eq!(id.acquirer_key().as_str(), format!("chargeonce-{id}"));
    }

    #[test]
    fn statuses_round_trip() {
        for status in [
            RefundStatus::Pending,
            RefundStatus::Succeeded,
            RefundStatus::Failed,
        ] {
            assert_eq!(RefundStatus::parse(status.as_str()), Some(status));
        }
        assert!(!RefundStatus::Pending.is_final());
    }
}
