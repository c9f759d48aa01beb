//! One conformance suite, run against both stores: what the engine relies on.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{
    CardToken, Claim, ClaimRequest, Fingerprint, IdempotencyKey, KeyTiming, Money, NewPayment,
    PaymentRequest, PaymentStatus, RecoveryPoint, Reference, SecretHash, Settlement, ShopId,
    ShopSecret, Store, StoreError, StoredResponse,
};
use chargeonce_store::PoolConfig;
use chargeonce_testkit::TestDb;

const LONG: KeyTiming = KeyTiming {
    lease: Duration::from_secs(30),
    ttl: Duration::from_secs(3600),
};

struct Fixture {
    store: Arc<dyn Store>,
    shop: ShopId,
    _db: TestDb,
}

async fn fixture(db: TestDb) -> Fixture {
    let store = chargeonce_store::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop-a").unwrap();
    store
        .add_shop(&shop, &ShopSecret::from_string("s").hash())
        .await
        .unwrap();
    Fixture {
        store,
        shop,
        _db: db,
    }
}

fn key(k: &str) -> IdempotencyKey {
    IdempotencyKey::new(k).unwrap()
}

fn claim(shop: &ShopId, k: &str, body: &str) -> ClaimRequest {
    ClaimRequest {
        shop_id: shop.clone(),
        key: key(k),
        fingerprint: Fingerprint::compute("POST", "/v1/payments", &serde_json::json!({"b": body}))
            .unwrap(),
        method: "POST".into(),
        path: "/v1/payments".into(),
    }
}

fn new_payment(shop: &ShopId, k: &str, reference: &str) -> NewPayment {
    NewPayment::new(
        shop.clone(),
        key(k),
        PaymentRequest {
            amount: Money::parse("1500.00", "RUB").unwrap(),
            reference: Reference::new(reference).unwrap(),
            token: CardToken::new("tok_ok").unwrap(),
        },
    )
}

fn fp(k: &str, body: &str) -> Fingerprint {
    claim(&ShopId::new("shop-a").unwrap(), k, body).fingerprint
}

fn response(body: &str) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    }
}

fn succeeded() -> Settlement {
    Settlement {
        status: PaymentStatus::Succeeded,
        provider_payment_id: "ch_1".into(),
        decline_code: None,
    }
}

async fn acquire(
    f: &Fixture,
    k: &str,
    reference: &str,
    timing: KeyTiming,
) -> (chargeonce_core::Lease, chargeonce_core::Payment) {
    match f
        .store
        .claim_payment(
            &claim(&f.shop, k, reference),
            &new_payment(&f.shop, k, reference),
            timing,
        )
        .await
        .unwrap()
    {
        Claim::Acquired(a) => (a.lease, a.payment),
        Claim::Exists(record) => panic!("expected a new claim, got {record:?}"),
    }
}

async fn orders_of(f: &Fixture, reference: &str) -> Vec<chargeonce_core::Payment> {
    let reference = Reference::new(reference).unwrap();
    f.store
        .payments_by_reference(&f.shop, &reference)
        .await
        .unwrap()
}

async fn a_new_key_is_claimed_with_its_payment(f: Fixture) {
    let new = new_payment(&f.shop, "k1", "order-1");
    let Claim::Acquired(chargeonce_core::Acquired {
        lease,
        recovery_point,
        payment,
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
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(record.payment_id, Some(new.id.clone()));
    assert!(record.lease_active);
    assert!(record.response.is_none());
    assert_eq!(record.method, "POST");
    assert!(record.expires_at_ms > record.created_at_ms);
}

async fn an_existing_key_is_returned_not_overwritten(f: Fixture) {
    let (_, first) = acquire(&f, "k1", "order-1", LONG).await;
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
    let orders = orders_of(&f, "order-2").await;
    assert!(orders.is_empty(), "nothing written for the loser");
}

async fn finish_stores_the_response_and_settles_the_payment(f: Fixture) {
    let (lease, payment) = acquire(&f, "k1", "order-1", LONG).await;
    let stored = response(r#"{"id":"x"}"#);
    assert!(
        f.store
            .finish(&lease, Some((&payment.id, &succeeded())), &stored, LONG.ttl)
            .await
            .unwrap()
    );
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.recovery_point, RecoveryPoint::Finished);
    assert_eq!(record.response, Some(stored.clone()));
    assert!(!record.lease_active);
    let settled = f
        .store
        .payment(&f.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(settled.status, PaymentStatus::Succeeded);
    assert_eq!(settled.provider_payment_id.as_deref(), Some("ch_1"));
    // A finished key answers every later claim with the stored bytes.
    let again = f
        .store
        .claim_payment(
            &claim(&f.shop, "k1", "order-1"),
            &new_payment(&f.shop, "k1", "order-1"),
            LONG,
        )
        .await
        .unwrap();
    let Claim::Exists(record) = again else {
        panic!("expected Exists")
    };
    assert_eq!(record.response, Some(stored));
    // And a second finish, even with the right token, is refused.
    assert!(
        !f.store
            .finish(&lease, None, &response("other"), LONG.ttl)
            .await
            .unwrap()
    );
}

async fn a_taken_over_lease_is_fenced_off(f: Fixture) {
    let short = KeyTiming {
        lease: Duration::from_millis(200),
        ..LONG
    };
    let (old, payment) = acquire(&f, "k1", "order-1", short).await;
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
            .await
            .unwrap()
            .is_none(),
        "lease alive"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert!(!record.lease_active);
    let taken = f
        .store
        .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
        .await
        .unwrap()
        .unwrap();
    let new = taken.lease;
    assert_ne!(new.token, old.token);
    assert_eq!(taken.payment.id, payment.id);
    assert_eq!(taken.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
            .await
            .unwrap()
            .is_none(),
        "one owner"
    );
    // The zombie can neither renew, release nor finish.
    assert!(!f.store.renew_lease(&old, LONG.lease).await.unwrap());
    assert!(!f.store.release_lease(&old).await.unwrap());
    assert!(
        !f.store
            .finish(
                &old,
                Some((&payment.id, &succeeded())),
                &response("zombie"),
                LONG.ttl
            )
            .await
            .unwrap()
    );
    let still = f
        .store
        .payment(&f.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        still.status,
        PaymentStatus::Pending,
        "the zombie wrote nothing"
    );
    assert!(
        f.store
            .finish(
                &new,
                Some((&payment.id, &succeeded())),
                &response("owner"),
                LONG.ttl
            )
            .await
            .unwrap()
    );
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.response.unwrap().body, b"owner");
}

async fn release_and_renew_follow_the_token(f: Fixture) {
    let short = KeyTiming {
        lease: Duration::from_millis(300),
        ..LONG
    };
    let (lease, _) = acquire(&f, "k1", "order-1", short).await;
    assert!(
        f.store
            .renew_lease(&lease, Duration::from_secs(30))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        f.store
            .key(&f.shop, &key("k1"))
            .await
            .unwrap()
            .unwrap()
            .lease_active,
        "renewed"
    );
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
            .await
            .unwrap()
            .is_none()
    );
    assert!(f.store.release_lease(&lease).await.unwrap());
    assert!(
        !f.store
            .key(&f.shop, &key("k1"))
            .await
            .unwrap()
            .unwrap()
            .lease_active
    );
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
            .await
            .unwrap()
            .is_some()
    );
}

async fn one_live_payment_per_order(f: Fixture) {
    let (lease, first) = acquire(&f, "k1", "order-1", LONG).await;
    // Another key for the same order links the live payment and inserts nothing.
    let (_, linked) = acquire(&f, "k2", "order-1", LONG).await;
    assert_eq!(linked.id, first.id);
    assert_eq!(linked.idempotency_key, key("k1"));
    let record = f.store.key(&f.shop, &key("k2")).await.unwrap().unwrap();
    assert_eq!(record.payment_id, Some(first.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    // A take-over resumes at the same recovery point.
    let k2 = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(k2.recovery_point, RecoveryPoint::PaymentCreated);
    // Once declined, the order is free for a new payment.
    let declined = Settlement {
        status: PaymentStatus::Declined,
        provider_payment_id: "ch_d".into(),
        decline_code: Some("card_declined".into()),
    };
    assert!(
        f.store
            .finish(
                &lease,
                Some((&first.id, &declined)),
                &response("d"),
                LONG.ttl
            )
            .await
            .unwrap()
    );
    let (_, fresh) = acquire(&f, "k3", "order-1", LONG).await;
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

async fn an_expired_finished_key_counts_as_new(f: Fixture) {
    let instant = KeyTiming {
        lease: LONG.lease,
        ttl: Duration::from_millis(1),
    };
    let (lease, first) = acquire(&f, "k1", "order-1", instant).await;
    // Unfinished keys never expire: a retry still finds it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(matches!(
        f.store
            .claim_payment(
                &claim(&f.shop, "k1", "order-1"),
                &new_payment(&f.shop, "k1", "order-1"),
                LONG
            )
            .await
            .unwrap(),
        Claim::Exists(_)
    ));
    assert_eq!(
        f.store.sweep_expired_keys(100).await.unwrap(),
        0,
        "unfinished keys are kept"
    );
    assert!(
        f.store
            .finish(
                &lease,
                Some((&first.id, &succeeded())),
                &response("r"),
                instant.ttl
            )
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Expired and finished: treated as new, but the order's live payment is what it gets.
    let again = f
        .store
        .claim_payment(
            &claim(&f.shop, "k1", "order-1"),
            &new_payment(&f.shop, "k1", "order-1"),
            LONG,
        )
        .await
        .unwrap();
    let Claim::Acquired(again) = again else {
        panic!("an expired finished key is new")
    };
    assert_eq!(again.payment.id, first.id, "the order is not paid twice");
    assert_eq!(again.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    // A new order under the reused key is a new payment.
    let (_, other) = acquire(&f, "k2", "order-2", instant).await;
    assert_ne!(other.id, first.id);
}

async fn the_sweeper_deletes_expired_finished_keys_in_batches(f: Fixture) {
    let instant = KeyTiming {
        lease: LONG.lease,
        ttl: Duration::from_millis(1),
    };
    for i in 0..5 {
        let (lease, payment) = acquire(&f, &format!("k{i}"), &format!("order-{i}"), instant).await;
        assert!(
            f.store
                .finish(
                    &lease,
                    Some((&payment.id, &succeeded())),
                    &response("r"),
                    instant.ttl
                )
                .await
                .unwrap()
        );
    }
    acquire(&f, "live", "order-live", LONG).await;
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
    let instant = KeyTiming {
        lease: LONG.lease,
        ttl: Duration::from_millis(1),
    };
    let (lease, payment) = acquire(&f, "k1", "order-1", instant).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stored = response("kept");
    assert!(
        f.store
            .finish(&lease, Some((&payment.id, &succeeded())), &stored, LONG.ttl)
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(f.store.sweep_expired_keys(10).await.unwrap(), 0);
    let again = f
        .store
        .claim_payment(
            &claim(&f.shop, "k1", "order-1"),
            &new_payment(&f.shop, "k1", "order-1"),
            LONG,
        )
        .await
        .unwrap();
    let Claim::Exists(record) = again else {
        panic!("the finished key is still replayed")
    };
    assert_eq!(record.response, Some(stored));
}

async fn a_take_over_needs_the_same_fingerprint(f: Fixture) {
    let short = KeyTiming {
        lease: Duration::from_millis(100),
        ..LONG
    };
    acquire(&f, "k1", "order-1", short).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let other = fp("k1", "another body");
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &other, LONG.lease)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
            .await
            .unwrap()
            .is_some()
    );
}

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
    let orders = orders_of(&f, "order-hot").await;
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
    let orders = orders_of(&f, "order-1").await;
    assert_eq!(orders.len(), 1);
}

async fn shops_are_kept_apart(f: Fixture) {
    let other = ShopId::new("shop-b").unwrap();
    let secret = ShopSecret::generate();
    f.store.add_shop(&other, &secret.hash()).await.unwrap();
    assert!(matches!(
        f.store
            .add_shop(&other, &SecretHash::from_bytes(&[0; 32]).unwrap())
            .await,
        Err(StoreError::ShopExists(_))
    ));
    assert!(
        f.store
            .shop_secret(&other)
            .await
            .unwrap()
            .unwrap()
            .verify(&secret)
    );
    assert!(
        f.store
            .shop_secret(&ShopId::new("nobody").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    // The same key and order in two shops are two claims and two payments.
    let (_, a) = acquire(&f, "k1", "order-1", LONG).await;
    let Claim::Acquired(chargeonce_core::Acquired { payment: b, .. }) = f
        .store
        .claim_payment(
            &claim(&other, "k1", "order-1"),
            &new_payment(&other, "k1", "order-1"),
            LONG,
        )
        .await
        .unwrap()
    else {
        panic!("shop B's key is its own")
    };
    assert_ne!(a.id, b.id);
    assert!(
        f.store.payment(&other, &a.id).await.unwrap().is_none(),
        "B cannot read A's payment"
    );
    assert!(
        f.store
            .key(&other, &key("k1"))
            .await
            .unwrap()
            .unwrap()
            .payment_id
            == Some(b.id)
    );
}

async fn keys_with_sql_metacharacters_are_opaque(f: Fixture) {
    let nasty = "';DROP_TABLE_idempotency_keys;--%_\\$$";
    acquire(&f, nasty, "order-1", LONG).await;
    assert!(f.store.key(&f.shop, &key(nasty)).await.unwrap().is_some());
    assert!(f.store.key(&f.shop, &key("%")).await.unwrap().is_none());
    f.store.ping().await.unwrap();
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(super::fixture(chargeonce_testkit::TestDb::postgres().await).await).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(super::fixture(chargeonce_testkit::TestDb::sqlite()).await).await;
                }
            )*
        }
    };
}

conformance!(
    a_new_key_is_claimed_with_its_payment,
    an_existing_key_is_returned_not_overwritten,
    finish_stores_the_response_and_settles_the_payment,
    a_taken_over_lease_is_fenced_off,
    release_and_renew_follow_the_token,
    one_live_payment_per_order,
    an_expired_finished_key_counts_as_new,
    the_sweeper_deletes_expired_finished_keys_in_batches,
    finishing_keeps_the_key_for_its_ttl_from_now,
    a_take_over_needs_the_same_fingerprint,
    concurrent_claims_of_one_key_have_one_winner,
    concurrent_keys_for_one_order_make_one_payment,
    shops_are_kept_apart,
    keys_with_sql_metacharacters_are_opaque,
);
