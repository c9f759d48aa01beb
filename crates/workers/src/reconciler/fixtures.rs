//! Charges and payments for the unit tests of the reconciler's modules.

use chargeonce_core::{
    AcquirerCharge, AcquirerKey, CaptureMethod, CardToken, ChargeResult, IdempotencyKey, Money,
    Payment, PaymentId, PaymentRequest, PaymentStatus, Reference, ShopId,
};
use time::OffsetDateTime;

/// A time `ms` milliseconds after the Unix epoch.
pub(super) fn at(ms: i64) -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(ms)
}

/// A charge of 10.00 RUB for order `order-1` of shop `shop`, `id` at
/// millisecond `ms`, succeeded or declined, with `refunded_minor` refunded.
pub(super) fn charge(id: &str, ms: i64, succeeded: bool, refunded_minor: i64) -> AcquirerCharge {
    let payment_id = PaymentId::generate();
    AcquirerCharge {
        outcome: if succeeded {
            ChargeResult::Succeeded {
                provider_payment_id: id.to_owned(),
            }
        } else {
            ChargeResult::Declined {
                provider_payment_id: id.to_owned(),
                code: "card_declined".into(),
            }
        },
        acquirer_key: AcquirerKey::for_payment(&payment_id),
        shop_id: ShopId::new("shop").unwrap(),
        payment_id,
        reference: Reference::new("order-1").unwrap(),
        amount: Money::parse("10.00", "RUB").unwrap(),
        refunded_minor,
        created_at: at(ms),
        capture_method: CaptureMethod::Automatic,
        taken_minor: if succeeded { 1000 } else { 0 },
    }
}

/// Our payment for a charge, with a status, naming the charge or not.
pub(super) fn payment_for(charge: &AcquirerCharge, status: PaymentStatus, names: bool) -> Payment {
    let request = PaymentRequest {
        amount: charge.amount,
        reference: charge.reference.clone(),
        token: CardToken::new("tok_ok").unwrap(),
        metadata: Default::default(),
        capture_method: chargeonce_core::CaptureMethod::Automatic,
    };
    let mut payment = chargeonce_core::NewPayment::new(
        charge.shop_id.clone(),
        IdempotencyKey::new("k").unwrap(),
        request,
    )
    .to_payment();
    payment.id = charge.payment_id.clone();
    payment.created_at = charge.created_at;
    payment.status = status;
    payment.provider_payment_id = names.then(|| charge.id().to_owned());
    payment
}
