//! Expired keys and the sweeper: what counts as new, what is kept, and batches of deletes.

use std::time::Duration;

use chargeonce_core::{Claim, RecoveryPoint};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn an_expired_finished_key_counts_as_new(f: Fixture) {
    let (lease, first) = f.claimed("k1", "order-1", INSTANT).await;
    // Unfinished keys never expire: a retry still finds it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(matches!(
        f.claim("k1", "order-1", "order-1", LONG).await,
        Claim::Exists(_)
    ));
    assert_eq!(
        f.store.sweep_expired_keys(100).await.unwrap(),
        0,
        "unfinished keys are kept"
    );
    f.finished(&lease, &first, "r", INSTANT.ttl).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Expired and finished: treated as new, but the order's live payment is what it gets.
    let again = f.claim("k1", "order-1", "order-1", LONG).await;
    let Claim::Acquired(again) = again else {
        panic!("an expired finished key is new")
    };
    assert_eq!(again.payment.id, first.id, "the order is not paid twice");
    assert_eq!(again.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    // A new order under the reused key is a new payment.
    let (_, other) = f.claimed("k2", "order-2", INSTANT).await;
    assert_ne!(other.id, first.id);
}

async fn the_sweeper_deletes_expired_finished_keys_in_batches(f: Fixture) {
    for i in 0..5 {
        f.finished_key(&format!("k{i}"), &format!("order-{i}"), INSTANT)
            .await;
    }
    f.claimed("live", "order-live", LONG).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(f.store.sweep_expired_keys(2).await.unwrap(), 2);
    assert_eq!(f.store.sweep_expired_keys(10).await.unwrap(), 3);
    assert_eq!(f.store.sweep_expired_keys(10).await.unwrap(), 0);
    assert!(f.store.key(&f.shop, &key("k0")).await.unwrap().is_none());
    assert!(f.store.key(&f.shop, &key("live")).await.unwrap().is_some());
}

async fn finishing_keeps_the_key_for_its_ttl_from_now(f: Fixture) {
    // Claimed with a retention that runs out before the operation ends (a 202
    // retried a day later): the answer must still be kept a full TTL.
    let (lease, payment) = f.claimed("k1", "order-1", INSTANT).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stored = response("kept");
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
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(f.store.sweep_expired_keys(10).await.unwrap(), 0);
    let again = f.claim("k1", "order-1", "order-1", LONG).await;
    let Claim::Exists(record) = again else {
        panic!("the finished key is still replayed")
    };
    assert_eq!(record.response, Some(stored));
}

async fn an_expired_key_reused_for_a_new_order_is_claimed_anew(f: Fixture) {
    let first = f.finished_key("k1", "order-1", INSTANT).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = new_payment(&f.shop, "k1", "order-2");
    let Claim::Acquired(again) = f
        .store
        .claim_payment(&claim(&f.shop, "k1", "another body"), &second, LONG)
        .await
        .unwrap()
    else {
        panic!("an expired finished key is new")
    };
    assert_eq!(again.recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(again.payment, second.to_payment());
    let record = f.record("k1").await;
    assert_eq!(record.fingerprint, fp("k1", "another body"));
    assert_eq!(record.payment_id, Some(second.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(record.response.is_none());
    assert!(record.lease_active);
    assert_eq!(record.replays, 0, "reclaiming is not a repeat");
    assert_eq!(
        f.orders_of("order-1").await,
        vec![first.settled(&succeeded())]
    );
}

on_both_stores!(
    fixture =>
    an_expired_finished_key_counts_as_new,
    the_sweeper_deletes_expired_finished_keys_in_batches,
    finishing_keeps_the_key_for_its_ttl_from_now,
    an_expired_key_reused_for_a_new_order_is_claimed_anew,
);
