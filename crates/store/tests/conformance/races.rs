//! Claims racing each other, in one store and across instances: one winner per key, one payment per order.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{Claim, PaymentStatus, RecoveryPoint};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn concurrent_claims_of_one_key_have_one_winner(f: Fixture) {
    let f = Arc::new(f);
    let tasks = (0..50).map(|_| {
        let f = Arc::clone(&f);
        tokio::spawn(async move {
            f.store
                .claim_payment(
                    &claim(&f.shop, "hot", "o"),
                    &new_payment(&f.shop, "hot", "order-hot"),
                    LONG,
                )
                .await
        })
    });
    let results = futures::future::join_all(tasks).await;
    let mut won = 0;
    for result in results {
        match result.unwrap() {
            Ok(Claim::Acquired(_)) => won += 1,
            Ok(Claim::Exists(record)) => assert!(record.lease_active),
            Err(e) => panic!("a lost race must not be an error: {e}"),
        }
    }
    assert_eq!(won, 1);
    let orders = f.orders_of("order-hot").await;
    assert_eq!(orders.len(), 1);
}

async fn concurrent_keys_for_one_order_make_one_payment(f: Fixture) {
    let f = Arc::new(f);
    let tasks = (0..30).map(|i| {
        let f = Arc::clone(&f);
        tokio::spawn(async move {
            let k = format!("k{i}");
            f.store
                .claim_payment(
                    &claim(&f.shop, &k, "o"),
                    &new_payment(&f.shop, &k, "order-1"),
                    LONG,
                )
                .await
        })
    });
    let mut ids = std::collections::HashSet::new();
    for result in futures::future::join_all(tasks).await {
        match result.unwrap().unwrap() {
            Claim::Acquired(a) => ids.insert(a.payment.id),
            Claim::Exists(_) => panic!("every key is new"),
        };
    }
    assert_eq!(ids.len(), 1, "every key links the same payment");
    let orders = f.orders_of("order-1").await;
    assert_eq!(orders.len(), 1);
}

/// Claims of one key (`keys` = 1) or of several keys for one order, each
/// key `duplicates` times at once, spread over 4 instances.
async fn race_for_one_order(f: &Fixture, keys: usize, duplicates: usize) -> Vec<Claim> {
    let stores = f.instances(4).await;
    let start = Arc::new(tokio::sync::Barrier::new(keys * duplicates));
    let tasks = (0..keys * duplicates).map(|i| {
        let store = Arc::clone(&stores[i % stores.len()]);
        let shop = f.shop.clone();
        let start = Arc::clone(&start);
        tokio::spawn(async move {
            let k = format!("k{}", i % keys);
            start.wait().await;
            store
                .claim_payment(
                    &claim(&shop, &k, "o"),
                    &new_payment(&shop, &k, "order-1"),
                    LONG,
                )
                .await
        })
    });
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|result| match result.unwrap() {
            Ok(claim) => claim,
            Err(e) => panic!("a lost race must not be an error: {e}"),
        })
        .collect()
}

async fn claims_of_one_key_across_instances_have_one_winner(f: Fixture) {
    let claims = race_for_one_order(&f, 1, 64).await;
    let won: Vec<_> = claims
        .iter()
        .filter_map(|c| match c {
            Claim::Acquired(a) => Some(a),
            Claim::Exists(_) => None,
        })
        .collect();
    assert_eq!(won.len(), 1);
    assert_eq!(won[0].recovery_point, RecoveryPoint::PaymentCreated);
    for lost in claims.iter().filter_map(|c| match c {
        Claim::Exists(record) => Some(record),
        Claim::Acquired(_) => None,
    }) {
        assert!(lost.lease_active);
        assert_eq!(lost.payment_id, Some(won[0].payment.id.clone()));
        assert_eq!(lost.recovery_point, RecoveryPoint::PaymentCreated);
    }
    assert_eq!(f.orders_of("order-1").await, vec![won[0].payment.clone()]);
    let record = f.record("k0").await;
    assert_eq!(record.replays, 63);
}

async fn keys_for_one_order_across_instances_make_one_payment(f: Fixture) {
    // 16 keys, each 4 times at once: one winner per key, one payment in all.
    let claims = race_for_one_order(&f, 16, 4).await;
    let mut winners = std::collections::HashMap::new();
    for c in &claims {
        if let Claim::Acquired(a) = c {
            assert!(
                winners.insert(a.lease.key.clone(), a.clone()).is_none(),
                "two winners for key {}",
                a.lease.key
            );
        }
    }
    assert_eq!(winners.len(), 16, "every key is new once");
    let orders = f.orders_of("order-1").await;
    assert_eq!(orders.len(), 1);
    let paid = &orders[0];
    let created = winners
        .values()
        .filter(|a| a.recovery_point == RecoveryPoint::PaymentCreated)
        .count();
    assert_eq!(created, 1, "one key created the payment");
    for (k, a) in &winners {
        assert_eq!(&a.payment.id, &paid.id);
        let record = f.store.key(&f.shop, k).await.unwrap().unwrap();
        assert_eq!(record.payment_id.as_ref(), Some(&paid.id));
        assert_eq!(record.recovery_point, a.recovery_point);
        assert_eq!(record.replays, 3);
    }
}

async fn claims_racing_a_decline_of_the_orders_payment_link_a_live_one(f: Fixture) {
    let (lease, first) = f.claimed("first", "order-1", LONG).await;
    let store = Arc::clone(&f.store);
    let decline = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .finish(
                &lease,
                Some((&first, &declined())),
                &response("d"),
                LONG.ttl,
                &[],
            )
            .await
    });
    let claims = race_for_one_order(&f, 24, 1).await;
    assert!(decline.await.unwrap().unwrap().stored());
    let orders = f.orders_of("order-1").await;
    assert!(
        orders.len() <= 2,
        "at most one payment after the decline: {orders:?}"
    );
    let live: Vec<_> = orders
        .iter()
        .filter(|p| p.status == PaymentStatus::Pending)
        .collect();
    assert!(live.len() <= 1);
    for c in claims {
        let Claim::Acquired(a) = c else {
            panic!("every key is new")
        };
        let record = f.store.key(&f.shop, &a.lease.key).await.unwrap().unwrap();
        assert_eq!(record.payment_id.as_ref(), Some(&a.payment.id));
        assert!(orders.iter().any(|p| p.id == a.payment.id));
        if a.recovery_point == RecoveryPoint::PaymentCreated {
            assert_eq!(Some(&a.payment.id), live.first().map(|p| &p.id));
        }
    }
}

on_both_stores!(
    fixture =>
    concurrent_claims_of_one_key_have_one_winner,
    concurrent_keys_for_one_order_make_one_payment,
    claims_of_one_key_across_instances_have_one_winner,
    keys_for_one_order_across_instances_make_one_payment,
    claims_racing_a_decline_of_the_orders_payment_link_a_live_one,
);
