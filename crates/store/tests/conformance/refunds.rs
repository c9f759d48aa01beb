//! Refunds: reservations within the amount, refusals, races and take-overs.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{
    FinishOutcome, Money, NewRefund, PaymentId, PaymentStatus, RecoveryPoint, RefundClaim,
    RefundRefusal, RefundSettlement, RefundStatus, ShopId, ShopSecret,
};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn refunds_reserve_within_the_amount_and_settle(f: Fixture) {
    let payment = f.paid_payment("order-1").await;
    assert_eq!(payment.refunded_minor, 0);
    let RefundClaim::Acquired(first) = f
        .claim_refund(&payment.id, "r1", Some("500.00"), LONG)
        .await
    else {
        panic!("expected a claim");
    };
    assert_eq!(first.recovery_point, RecoveryPoint::RefundCreated);
    let first_refund = first.refund.clone().unwrap();
    assert_eq!(first_refund.status, RefundStatus::Pending);
    assert_eq!(first_refund.amount.minor_units(), 50_000);
    assert_eq!(first_refund.acquirer_key, first_refund.id.acquirer_key());
    assert_eq!(first.payment.id, payment.id);

    // No amount: the rest not yet reserved.
    let RefundClaim::Acquired(rest) = f.claim_refund(&payment.id, "r2", None, LONG).await else {
        panic!("expected a claim");
    };
    let rest_refund = rest.refund.clone().unwrap();
    assert_eq!(rest_refund.amount.minor_units(), 100_000);
    match f.claim_refund(&payment.id, "r3", Some("0.01"), LONG).await {
        RefundClaim::Refused(RefundRefusal::ExceedsAmount { available_minor }) => {
            assert_eq!(available_minor, 0)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(f.store.key(&f.shop, &key("r3")).await.unwrap().is_none());

    // An existing key is found before any rule about the payment.
    assert!(matches!(
        f.claim_refund(&payment.id, "r1", Some("500.00"), LONG)
            .await,
        RefundClaim::Exists(_)
    ));

    let settled = f
        .finish_refund(
            &first.lease,
            Some((&first_refund, &refund_succeeded("re_acq_1"))),
            "r1",
            LONG.ttl,
        )
        .await;
    assert_eq!(settled, FinishOutcome::Stored);
    let stored = f
        .store
        .refund(&f.shop, &first_refund.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, RefundStatus::Succeeded);
    assert_eq!(stored.provider_refund_id.as_deref(), Some("re_acq_1"));
    let after = f.payment(&payment.id).await;
    assert_eq!(after.refunded_minor, 50_000);
    assert_eq!(after.status, PaymentStatus::Succeeded);

    // A refusal gives the reservation back.
    let failed = RefundSettlement::Failed {
        code: "refused".into(),
    };
    assert!(
        f.finish_refund(&rest.lease, Some((&rest_refund, &failed)), "r2", LONG.ttl)
            .await
            .stored()
    );
    let stored = f
        .store
        .refund(&f.shop, &rest_refund.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, RefundStatus::Failed);
    assert_eq!(stored.failure_code.as_deref(), Some("refused"));
    assert!(matches!(
        f.claim_refund(&payment.id, "r4", Some("1000.00"), LONG)
            .await,
        RefundClaim::Acquired(_)
    ));
    let other_shop = ShopId::new("shop-b").unwrap();
    assert!(
        f.store
            .refund(&other_shop, &first_refund.id)
            .await
            .unwrap()
            .is_none()
    );
}

async fn refunds_of_unrefundable_payments_are_refused_and_not_stored(f: Fixture) {
    let (_, pending) = f.claimed("order-1-pay", "order-1", LONG).await;
    match f.claim_refund(&pending.id, "r1", None, LONG).await {
        RefundClaim::Refused(RefundRefusal::NotRefundable(PaymentStatus::Pending)) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    match f
        .claim_refund(&PaymentId::generate(), "r1", None, LONG)
        .await
    {
        RefundClaim::Refused(RefundRefusal::PaymentNotFound) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    let payment = f.paid_payment("order-2").await;
    let usd = NewRefund::new(
        f.shop.clone(),
        payment.id.clone(),
        key("r1"),
        Some(Money::parse("1.00", "USD").unwrap()),
    );
    match f
        .store
        .claim_refund(&claim(&f.shop, "r1", "refund"), &usd, LONG)
        .await
        .unwrap()
    {
        RefundClaim::Refused(RefundRefusal::CurrencyMismatch) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Another shop's payment is not found.
    let other_shop = f.other_shop(&ShopSecret::from_string("t")).await;
    let foreign = f
        .store
        .claim_refund(
            &claim(&other_shop, "r1", "refund"),
            &new_refund(&other_shop, &payment.id, "r1", None),
            LONG,
        )
        .await
        .unwrap();
    assert!(matches!(
        foreign,
        RefundClaim::Refused(RefundRefusal::PaymentNotFound)
    ));
    assert!(f.store.key(&f.shop, &key("r1")).await.unwrap().is_none());
    assert!(
        f.store
            .key(&other_shop, &key("r1"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(f.payment(&payment.id).await.refunded_minor, 0);
}

async fn concurrent_refund_claims_never_exceed_the_amount(f: Fixture) {
    let payment = f.paid_payment("order-1").await;
    let f = Arc::new(f);
    let mut tasks = Vec::new();
    for i in 0..20 {
        let f = f.clone();
        let id = payment.id.clone();
        tasks.push(tokio::spawn(async move {
            f.claim_refund(&id, &format!("r{i}"), Some("500.00"), LONG)
                .await
        }));
    }
    let mut acquired = 0;
    for task in tasks {
        match task.await.unwrap() {
            RefundClaim::Acquired(_) => acquired += 1,
            RefundClaim::Refused(RefundRefusal::ExceedsAmount { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(acquired, 3);
}

async fn a_refund_key_is_taken_over_with_its_refund(f: Fixture) {
    let payment = f.paid_payment("order-1").await;
    let RefundClaim::Acquired(first) = f.claim_refund(&payment.id, "r1", None, LONG).await else {
        panic!("expected a claim");
    };
    assert!(f.store.release_lease(&first.lease, &[]).await.unwrap());
    let taken = f.take_over("r1", "refund").await.unwrap();
    assert_eq!(taken.recovery_point, RecoveryPoint::RefundCreated);
    assert_eq!(taken.refund, first.refund);
    let refund = taken.refund.clone().unwrap();
    let old = f
        .finish_refund(
            &first.lease,
            Some((&refund, &refund_succeeded("x"))),
            "old",
            LONG.ttl,
        )
        .await;
    assert_eq!(old, FinishOutcome::LeaseLost);
    let stalled = f.store.stalled_keys(Duration::ZERO, 10).await.unwrap();
    assert!(stalled.is_empty(), "the new lease is alive: {stalled:?}");
    assert!(
        f.finish_refund(
            &taken.lease,
            Some((&refund, &refund_succeeded("x"))),
            "new",
            LONG.ttl
        )
        .await
        .stored()
    );
    // Settled once: a second settlement under a new key's lease is refused.
    let record = f.record("r1").await;
    assert_eq!(record.recovery_point, RecoveryPoint::Finished);
    assert_eq!(f.payment(&payment.id).await.refunded_minor, 150_000);
}

on_both_stores!(
    fixture =>
    refunds_reserve_within_the_amount_and_settle,
    refunds_of_unrefundable_payments_are_refused_and_not_stored,
    concurrent_refund_claims_never_exceed_the_amount,
    a_refund_key_is_taken_over_with_its_refund,
);
