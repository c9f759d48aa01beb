//! Claims: a new key with its payment, an existing key, one live payment per order, links, abandoned links and repeat counts.

use chargeonce_core::{Claim, PaymentStatus, RecoveryPoint, Reference, Settlement};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn a_new_key_is_claimed_with_its_payment(f: Fixture) {
    let new = new_payment(&f.shop, "k1", "order-1");
    let Claim::Acquired(chargeonce_core::Acquired {
        lease,
        recovery_point,
        payment,
        ..
    }) = f
        .store
        .claim_payment(&claim(&f.shop, "k1", "x"), &new, LONG)
        .await
        .unwrap()
    else {
        panic!("expected Acquired")
    };
    assert_eq!(recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(lease.key, key("k1"));
    assert_eq!(payment, new.to_payment());
    assert_eq!(
        f.store.payment(&f.shop, &new.id).await.unwrap(),
        Some(new.to_payment())
    );
    let record = f.record("k1").await;
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(record.payment_id, Some(new.id.clone()));
    assert!(record.lease_active);
    assert!(record.response.is_none());
    assert_eq!(record.method, "POST");
    assert!(record.expires_at_ms > record.created_at_ms);
}

async fn an_existing_key_is_returned_not_overwritten(f: Fixture) {
    let (_, first) = f.claimed("k1", "order-1", LONG).await;
    let other = claim(&f.shop, "k1", "another body");
    let Claim::Exists(record) = f
        .store
        .claim_payment(&other, &new_payment(&f.shop, "k1", "order-2"), LONG)
        .await
        .unwrap()
    else {
        panic!("expected Exists")
    };
    assert_eq!(
        record.fingerprint,
        claim(&f.shop, "k1", "order-1").fingerprint
    );
    assert_eq!(record.payment_id, Some(first.id));
    assert!(record.lease_active);
    let orders = f.orders_of("order-2").await;
    assert!(orders.is_empty(), "nothing written for the loser");
}

async fn one_live_payment_per_order(f: Fixture) {
    let (lease, first) = f.claimed("k1", "order-1", LONG).await;
    // Another key for the same order links the live payment and inserts nothing.
    let (_, linked) = f.claimed("k2", "order-1", LONG).await;
    assert_eq!(linked.id, first.id);
    assert_eq!(linked.idempotency_key, key("k1"));
    let record = f.record("k2").await;
    assert_eq!(record.payment_id, Some(first.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    // A take-over resumes at the same recovery point.
    let k2 = f.record("k1").await;
    assert_eq!(k2.recovery_point, RecoveryPoint::PaymentCreated);
    // Once declined, the order is free for a new payment.
    let declined = Settlement {
        status: PaymentStatus::Declined,
        provider_payment_id: Some("ch_d".into()),
        decline_code: Some("card_declined".into()),
    };
    assert!(
        f.store
            .finish(
                &lease,
                Some((&first, &declined)),
                &response("d"),
                LONG.ttl,
                &[]
            )
            .await
            .unwrap()
            .stored()
    );
    let (_, fresh) = f.claimed("k3", "order-1", LONG).await;
    assert_ne!(fresh.id, first.id);
    let all = f
        .store
        .payments_by_reference(&f.shop, &Reference::new("order-1").unwrap())
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
        vec![first.id, fresh.id]
    );
}

async fn a_new_key_for_a_paid_order_links_its_payment_and_writes_nothing_else(f: Fixture) {
    let (lease, first) = f.claimed("k1", "order-1", LONG).await;
    // The order has a pending payment: a claim under another key is new, but
    // links that payment instead of inserting its own.
    let second = new_payment(&f.shop, "k2", "order-1");
    let Claim::Acquired(linked) = f
        .store
        .claim_payment(&claim(&f.shop, "k2", "o"), &second, LONG)
        .await
        .unwrap()
    else {
        panic!("a new key is claimed")
    };
    assert_eq!(linked.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(linked.payment, first);
    assert_eq!(linked.lease.key, key("k2"));
    assert!(
        f.store
            .payment(&f.shop, &second.id)
            .await
            .unwrap()
            .is_none()
    );
    let record = f.record("k2").await;
    assert_eq!(record.payment_id, Some(first.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert!(record.lease_active);
    assert_eq!(record.replays, 0);
    assert_eq!(record.fingerprint, fp("k2", "o"));
    // Its repeat finds the key, not the order.
    let Claim::Exists(again) = f.claim("k2", "o", "order-1", LONG).await else {
        panic!("the key exists")
    };
    assert_eq!(again.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(again.replays, 1);
    // Once the payment succeeded, a third key links it too.
    f.finished(&lease, &first, "ok", LONG.ttl).await;
    let third = new_payment(&f.shop, "k3", "order-1");
    let Claim::Acquired(linked) = f
        .store
        .claim_payment(&claim(&f.shop, "k3", "o"), &third, LONG)
        .await
        .unwrap()
    else {
        panic!("a new key is claimed")
    };
    assert_eq!(linked.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(linked.payment.id, first.id);
    assert_eq!(linked.payment.status, PaymentStatus::Succeeded);
    assert!(f.store.payment(&f.shop, &third.id).await.unwrap().is_none());
    assert_eq!(f.orders_of("order-1").await.len(), 1);
    assert_eq!(f.all_events().await.len(), 1, "claims write no events");
}

/// A key that only links to its order's payment can be deleted by its
/// holder (the payment was declined; the key claims the order afresh); no
/// other key can.
async fn only_a_key_linking_its_orders_payment_is_abandoned(f: Fixture) {
    let (own, first) = f.claimed("k1", "order-1", LONG).await;
    assert!(
        !f.store.abandon_key(&own).await.unwrap(),
        "a key with its own payment stays"
    );
    let linked = f.acquired("k2", "o", "order-1").await;
    assert_eq!(linked.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    let mut stale = linked.lease.clone();
    stale.token = chargeonce_core::LeaseToken::generate();
    assert!(
        !f.store.abandon_key(&stale).await.unwrap(),
        "fenced by the lease"
    );
    assert!(f.store.abandon_key(&linked.lease).await.unwrap());
    assert!(f.store.key(&f.shop, &key("k2")).await.unwrap().is_none());
    assert!(f.store.key(&f.shop, &key("k1")).await.unwrap().is_some());
    assert_eq!(
        f.store.payment(&f.shop, &first.id).await.unwrap(),
        Some(first)
    );
}

async fn repeats_of_a_key_are_counted(f: Fixture) {
    f.claimed("k1", "order-1", LONG).await;
    for expected in 1..=3_u64 {
        let again = f.claim("k1", "order-1", "order-1", LONG).await;
        let Claim::Exists(record) = again else {
            panic!("expected Exists")
        };
        assert_eq!(record.replays, expected);
    }
    // A mismatch is a repeat too; reading the key is not.
    f.claim("k1", "other", "order-9", LONG).await;
    let record = f.record("k1").await;
    assert_eq!(record.replays, 4);
    let record = f.record("k1").await;
    assert_eq!(record.replays, 4);
}

async fn keys_with_sql_metacharacters_are_opaque(f: Fixture) {
    let nasty = "';DROP_TABLE_idempotency_keys;--%_\\$$";
    f.claimed(nasty, "order-1", LONG).await;
    assert!(f.store.key(&f.shop, &key(nasty)).await.unwrap().is_some());
    assert!(f.store.key(&f.shop, &key("%")).await.unwrap().is_none());
    f.store.ping().await.unwrap();
}

on_both_stores!(
    fixture =>
    a_new_key_is_claimed_with_its_payment,
    an_existing_key_is_returned_not_overwritten,
    one_live_payment_per_order,
    a_new_key_for_a_paid_order_links_its_payment_and_writes_nothing_else,
    only_a_key_linking_its_orders_payment_is_abandoned,
    repeats_of_a_key_are_counted,
    keys_with_sql_metacharacters_are_opaque,
);
