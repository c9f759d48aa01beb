//! Leases and take-overs: fencing tokens, renew and release, the fingerprint check, parked keys.

use std::time::Duration;

use chargeonce_core::{PaymentStatus, RecoveryPoint};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn a_taken_over_lease_is_fenced_off(f: Fixture) {
    let short = lease_of(200);
    let (old, payment) = f.claimed("k1", "order-1", short).await;
    assert!(f.take_over("k1", "order-1").await.is_none(), "lease alive");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let record = f.record("k1").await;
    assert!(!record.lease_active);
    let taken = f.take_over("k1", "order-1").await.unwrap();
    let new = taken.lease;
    assert_ne!(new.token, old.token);
    assert_eq!(taken.payment.id, payment.id);
    assert_eq!(taken.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(f.take_over("k1", "order-1").await.is_none(), "one owner");
    // The zombie can neither renew, release nor finish.
    assert!(!f.store.renew_lease(&old, LONG.lease).await.unwrap());
    assert!(!f.store.release_lease(&old, &[]).await.unwrap());
    assert!(
        !f.finish(&old, Some((&payment, &succeeded())), "zombie", LONG.ttl)
            .await
            .stored()
    );
    let still = f.payment(&payment.id).await;
    assert_eq!(
        still.status,
        PaymentStatus::Pending,
        "the zombie wrote nothing"
    );
    f.finished(&new, &payment, "owner", LONG.ttl).await;
    let record = f.record("k1").await;
    assert_eq!(record.response.unwrap().body, b"owner");
}

async fn release_and_renew_follow_the_token(f: Fixture) {
    let short = lease_of(300);
    let (lease, _) = f.claimed("k1", "order-1", short).await;
    assert!(
        f.store
            .renew_lease(&lease, Duration::from_secs(30))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(f.record("k1").await.lease_active, "renewed");
    assert!(f.take_over("k1", "order-1").await.is_none());
    assert!(f.store.release_lease(&lease, &[]).await.unwrap());
    assert!(!f.record("k1").await.lease_active);
    // A renew sent before the release that commits after it (a heartbeat
    // cut off mid-flight) cannot revive the lease: the release clears the
    // token, so the key is free at once, not 409 for another lease.
    assert!(
        !f.store
            .renew_lease(&lease, Duration::from_secs(30))
            .await
            .unwrap(),
        "released: the token no longer holds"
    );
    assert!(!f.record("k1").await.lease_active);
    assert_eq!(f.record("k1").await.settling, None, "released, not parked");
    assert!(f.take_over("k1", "order-1").await.is_some());
}

async fn a_take_over_needs_the_same_fingerprint(f: Fixture) {
    let short = lease_of(100);
    f.claimed("k1", "order-1", short).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let other = fp("k1", "another body");
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &other, LONG.lease)
            .await
            .unwrap()
            .is_none()
    );
    assert!(f.take_over("k1", "order-1").await.is_some());
}

/// A parked key (after an unknown outcome at an acquirer that ignores keys)
/// has no holder and cannot be taken over until its hold has passed; only
/// the lease's holder can park it.
async fn a_parked_key_is_held_by_nobody_until_its_hold_passes(f: Fixture) {
    let (lease, _) = f.claimed("k1", "order-1", LONG).await;
    let mut stale = lease.clone();
    stale.token = chargeonce_core::LeaseToken::generate();
    assert!(
        !f.store
            .park_lease(&stale, Duration::from_secs(5), &[])
            .await
            .unwrap()
    );
    assert!(
        f.store
            .park_lease(&lease, Duration::from_millis(600), &[])
            .await
            .unwrap()
    );
    let record = f.record("k1").await;
    assert!(!record.lease_active, "nobody holds it");
    let left = record.settling.expect("parked");
    assert!(
        left <= Duration::from_millis(600) && !left.is_zero(),
        "{left:?}"
    );
    assert_eq!(record.refund_id, None);
    assert!(
        f.take_over("k1", "order-1").await.is_none(),
        "not before its hold passed"
    );
    assert!(
        !f.store.renew_lease(&lease, LONG.lease).await.unwrap(),
        "its holder let go"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let record = f.record("k1").await;
    assert_eq!(record.settling, None);
    assert!(f.take_over("k1", "order-1").await.is_some());
}

/// A parked payment key whose payment was settled meanwhile (a webhook, the
/// reconciler) is taken over at once, so the answer its next repeat is given
/// is stored before it is given; while the payment is pending, and for a
/// parked refund key (whose refund only its key settles), the hold stands.
async fn a_parked_key_whose_payment_settled_is_taken_over_at_once(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    let hold = Duration::from_secs(60);
    assert!(f.store.park_lease(&lease, hold, &[]).await.unwrap());
    assert!(
        f.take_over("k1", "order-1").await.is_none(),
        "pending: parked"
    );
    assert!(matches!(
        f.settle(&payment.id, &succeeded()).await,
        chargeonce_core::SettleOutcome::Settled(_)
    ));
    let taken = f.take_over("k1", "order-1").await.expect("settled: free");
    assert_eq!(taken.payment.status, PaymentStatus::Succeeded);
    assert_eq!(taken.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(f.record("k1").await.lease_active, "held by its taker");
    assert!(f.take_over("k1", "order-1").await.is_none(), "one owner");
    assert!(
        f.finish(&taken.lease, None, "answer", LONG.ttl)
            .await
            .stored()
    );
    assert_eq!(f.record("k1").await.response.unwrap().body, b"answer");

    // A parked refund key of that (succeeded) payment keeps its hold.
    let refund = f.refund_acquired(&payment.id, "r1", Some("5.00")).await;
    assert!(f.store.park_lease(&refund.lease, hold, &[]).await.unwrap());
    assert!(
        f.store
            .take_over(&f.shop, &key("r1"), &fp("r1", "refund"), LONG.lease)
            .await
            .unwrap()
            .is_none(),
        "a parked refund waits out its hold"
    );
}

on_both_stores!(
    fixture =>
    a_taken_over_lease_is_fenced_off,
    release_and_renew_follow_the_token,
    a_take_over_needs_the_same_fingerprint,
    a_parked_key_is_held_by_nobody_until_its_hold_passes,
    a_parked_key_whose_payment_settled_is_taken_over_at_once,
);
