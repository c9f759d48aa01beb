//! Key introspection: a key's state, first request, repeats and lease
//! holder (never its token), as the store reads it for one shop.

use std::time::Duration;

use chargeonce_core::{Claim, RecoveryPoint, ShopSecret, Store};
use chargeonce_store::PoolConfig;
use chargeonce_testkit::on_both_stores;

use crate::support::*;

/// A key in progress shows its holder and deadline; repeats are counted with
/// the time of the last; once finished it shows its status and payment.
async fn a_key_is_shown_in_progress_then_finished(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    let info = f
        .store
        .key_info(&f.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.key, key("k1"));
    assert_eq!(info.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(!info.is_finished());
    assert_eq!(info.method, "POST");
    assert_eq!(info.path, "/v1/payments");
    assert_eq!(info.fingerprint, fp("k1", "order-1"));
    assert_eq!(info.payment_id.as_ref(), Some(&payment.id));
    assert_eq!(info.refund_id, None);
    assert_eq!(info.status, None);
    assert_eq!((info.repeats, info.last_repeat_at), (0, None));
    let held = info.lease.expect("held");
    assert_eq!(
        held.holder.as_deref(),
        Some(PoolConfig::default().instance.as_str())
    );
    assert!(held.until > info.created_at + Duration::from_secs(20));
    assert!(info.expires_at > info.created_at);

    // A repeat reaches the store: counted, with its time.
    assert!(matches!(
        f.claim("k1", "order-1", "order-1", LONG).await,
        Claim::Exists(_)
    ));
    let info = f
        .store
        .key_info(&f.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.repeats, 1);
    let repeated = info.last_repeat_at.expect("a repeat");
    assert!(repeated >= info.created_at);

    f.finished(&lease, &payment, "r", LONG.ttl).await;
    let info = f
        .store
        .key_info(&f.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    assert!(info.is_finished());
    assert_eq!(info.status, Some(201));
    assert_eq!(info.payment_id.as_ref(), Some(&payment.id));
    assert_eq!(info.lease, None);
    assert_eq!(info.parked_until, None);
    assert_eq!(info.repeats, 1);
}

/// A key taken over after its lease ran out names its new holder.
async fn a_taken_over_key_names_its_new_holder(f: Fixture) {
    f.claimed("k1", "order-1", lease_of(150)).await;
    let before = f
        .store
        .key_info(&f.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    let first = before.lease.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other: std::sync::Arc<dyn Store> = chargeonce_store::connect(
        f.db.url(),
        &PoolConfig {
            max_connections: 2,
            instance: "instance-b".into(),
            ..PoolConfig::default()
        },
    )
    .await
    .unwrap();
    let taken = other
        .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
        .await
        .unwrap()
        .expect("its lease ran out");
    let info = f
        .store
        .key_info(&f.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    let now = info.lease.expect("held again");
    assert_eq!(now.holder.as_deref(), Some("instance-b"));
    assert_ne!(now.holder, first.holder);
    assert!(now.until > first.until);
    assert_eq!(info.recovery_point, taken.recovery_point);
}

/// A parked key has no holder, only the end of its hold; a refund key
/// names its refund.
async fn parked_and_refund_keys_say_so(f: Fixture) {
    let (lease, _) = f.claimed("k1", "order-1", LONG).await;
    assert!(
        f.store
            .park_lease(&lease, Duration::from_secs(5), &[])
            .await
            .unwrap()
    );
    let info = f
        .store
        .key_info(&f.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.lease, None);
    assert!(info.parked_until.is_some());

    let paid = f.paid_payment("order-2").await;
    let acquired = f.refund_acquired(&paid.id, "r1", Some("1.00")).await;
    let info = f
        .store
        .key_info(&f.shop, &key("r1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.recovery_point, RecoveryPoint::RefundCreated);
    assert_eq!(info.refund_id, acquired.refund.map(|r| r.id));
    assert_eq!(info.payment_id, Some(paid.id));
}

/// Another shop's key, an unknown key and an expired finished key are not found.
async fn another_shops_key_is_not_found(f: Fixture) {
    f.finished_key("k1", "order-1", LONG).await;
    let other = f.other_shop(&ShopSecret::from_string("b")).await;
    assert!(
        f.store
            .key_info(&other, &key("k1"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        f.store
            .key_info(&f.shop, &key("nope"))
            .await
            .unwrap()
            .is_none()
    );
    f.finished_key("k2", "order-2", INSTANT).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        f.store
            .key_info(&f.shop, &key("k2"))
            .await
            .unwrap()
            .is_none()
    );
}

on_both_stores!(
    fixture =>
    a_key_is_shown_in_progress_then_finished,
    a_taken_over_key_names_its_new_holder,
    parked_and_refund_keys_say_so,
    another_shops_key_is_not_found,
);
