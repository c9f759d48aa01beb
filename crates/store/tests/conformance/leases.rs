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

on_both_stores!(
    fixture =>
    a_taken_over_lease_is_fenced_off,
    release_and_renew_follow_the_token,
    a_take_over_needs_the_same_fingerprint,
    a_parked_key_is_held_by_nobody_until_its_hold_passes,
);
