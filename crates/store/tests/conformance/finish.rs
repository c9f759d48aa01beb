//! The finish: the stored answer and the settlement, and a finish that cannot apply writing nothing.

use std::time::Duration;

use chargeonce_core::{Claim, FinishOutcome, PaymentStatus, RecoveryPoint, SettleOutcome};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn finish_stores_the_response_and_settles_the_payment(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    let stored = response(r#"{"id":"x"}"#);
    assert!(
        f.store
            .finish(
                &lease,
                Some((&payment, &succeeded())),
                &stored,
                LONG.ttl,
                &[]
            )
            .await
            .unwrap()
            .stored()
    );
    let record = f.record("k1").await;
    assert_eq!(record.recovery_point, RecoveryPoint::Finished);
    assert_eq!(record.response, Some(stored.clone()));
    assert!(!record.lease_active);
    let settled = f.payment(&payment.id).await;
    assert_eq!(settled.status, PaymentStatus::Succeeded);
    assert_eq!(settled.provider_payment_id.as_deref(), Some("ch_1"));
    // A finished key answers every later claim with the stored bytes.
    let again = f.claim("k1", "order-1", "order-1", LONG).await;
    let Claim::Exists(record) = again else {
        panic!("expected Exists")
    };
    assert_eq!(record.response, Some(stored));
    // And a second finish, even with the right token, is refused.
    assert!(!f.finish(&lease, None, "other", LONG.ttl).await.stored());
}

/// The key as phase 1 left it, the payment still pending and the events
/// as they were: what a finish that could not apply must leave.
async fn assert_untouched(f: &Fixture, k: &str, payment: &chargeonce_core::Payment, events: usize) {
    let record = f.record(k).await;
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(record.response.is_none());
    assert!(record.lease_active);
    let stored = f.payment(&payment.id).await;
    assert_eq!(&stored, payment);
    assert_eq!(f.all_events().await.len(), events);
}

async fn a_finish_that_cannot_apply_writes_nothing(f: Fixture) {
    // A taken-over lease: LeaseLost, nothing written, the new owner unharmed.
    let short = lease_of(100);
    let (old, payment) = f.claimed("k1", "order-1", short).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let taken = f.take_over("k1", "order-1").await.unwrap();
    for settlement in [Some((&payment, &succeeded())), None] {
        assert_eq!(
            f.finish(&old, settlement, "zombie", LONG.ttl).await,
            FinishOutcome::LeaseLost
        );
        assert_untouched(&f, "k1", &payment, 0).await;
    }
    assert!(f.store.renew_lease(&taken.lease, LONG.lease).await.unwrap());
    f.finished(&taken.lease, &payment, "owner", LONG.ttl).await;
    assert_eq!(f.all_events().await.len(), 1);
    // A finished key: even its last owner's token writes nothing more.
    assert_eq!(
        f.finish(
            &taken.lease,
            Some((&payment, &declined())),
            "again",
            LONG.ttl
        )
        .await,
        FinishOutcome::LeaseLost
    );
    let record = f.record("k1").await;
    assert_eq!(record.response.unwrap().body, b"owner");
    let stored = f.payment(&payment.id).await;
    assert_eq!(stored.status, PaymentStatus::Succeeded);
    assert_eq!(f.all_events().await.len(), 1);

    // A payment settled meanwhile (the reconciler, with its own event):
    // PaymentAlreadySettled, nothing written, the lease still held.
    let (lease, second) = f.claimed("k2", "order-2", LONG).await;
    let SettleOutcome::Settled(settled) = f.settle(&second.id, &succeeded()).await else {
        panic!("pending payments settle")
    };
    assert_eq!(f.all_events().await.len(), 2);
    assert_eq!(
        f.finish(&lease, Some((&second, &declined())), "d", LONG.ttl)
            .await,
        FinishOutcome::PaymentAlreadySettled
    );
    let record = f.record("k2").await;
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(record.response.is_none());
    assert!(record.lease_active);
    assert_eq!(f.payment(&second.id).await, settled);
    assert_eq!(f.all_events().await.len(), 2);
    // The owner then stores an answer that agrees with the payment.
    assert!(f.finish(&lease, None, "s", LONG.ttl).await.stored());
    assert_eq!(f.all_events().await.len(), 2);
}

async fn finish_refuses_to_overwrite_a_payment_settled_meanwhile(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    // A webhook or the reconciler settles the payment first.
    assert!(matches!(
        f.settle(&payment.id, &succeeded()).await,
        SettleOutcome::Settled(_)
    ));
    assert_eq!(
        f.finish(&lease, Some((&payment, &declined())), "d", LONG.ttl)
            .await,
        FinishOutcome::PaymentAlreadySettled
    );
    let record = f.record("k1").await;
    assert_eq!(
        record.recovery_point,
        RecoveryPoint::PaymentCreated,
        "nothing written"
    );
    let stored = f.payment(&payment.id).await;
    assert_eq!(stored.status, PaymentStatus::Succeeded);
    assert_eq!(stored.provider_payment_id.as_deref(), Some("ch_1"));
    // The owner then stores an answer that agrees with the payment.
    assert_eq!(
        f.finish(&lease, None, "s", LONG.ttl).await,
        FinishOutcome::Stored
    );
}

on_both_stores!(
    fixture =>
    finish_stores_the_response_and_settles_the_payment,
    a_finish_that_cannot_apply_writes_nothing,
    finish_refuses_to_overwrite_a_payment_settled_meanwhile,
);
