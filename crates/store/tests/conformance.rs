//! One conformance suite, run against both stores: what the engine relies on.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::webhook::EventKind;
use chargeonce_core::{
    AcquirerKey, CardToken, Claim, ClaimRequest, EventRecorded, Fingerprint, FinishOutcome,
    IdempotencyKey, InboundEvent, KeyTiming, Money, NewPayment, NewRefund, PaymentId,
    PaymentRequest, PaymentStatus, RecoveryPoint, Reference, RefundClaim, RefundRefusal,
    RefundSettlement, RefundStatus, SecretHash, SettleOutcome, Settlement, ShopId, ShopSecret,
    Store, StoreError, StoredResponse,
};

trait Stored {
    fn stored(self) -> bool;
}

impl Stored for FinishOutcome {
    fn stored(self) -> bool {
        self == FinishOutcome::Stored
    }
}
use chargeonce_store::PoolConfig;
use chargeonce_testkit::TestDb;

const LONG: KeyTiming = KeyTiming {
    lease: Duration::from_secs(30),
    ttl: Duration::from_secs(3600),
};

struct Fixture {
    store: Arc<dyn Store>,
    shop: ShopId,
    db: TestDb,
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
    Fixture { store, shop, db }
}

/// `n` stores on the fixture's database, as `n` service instances have: on
/// PostgreSQL each with its own pool of 4 connections (the suite shares the
/// server's connection limit with parallel tests); SQLite serves one
/// process, so there it is the fixture's store `n` times.
async fn instances(f: &Fixture, n: usize) -> Vec<Arc<dyn Store>> {
    if f.db.url().starts_with("sqlite:") {
        return vec![Arc::clone(&f.store); n];
    }
    let config = PoolConfig {
        max_connections: 4,
        ..PoolConfig::default()
    };
    let mut stores = Vec::with_capacity(n);
    for _ in 0..n {
        stores.push(
            chargeonce_store::connect(f.db.url(), &config)
                .await
                .unwrap(),
        );
    }
    stores
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
        provider_payment_id: Some("ch_1".into()),
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
            .finish(&lease, Some((&payment, &succeeded())), &stored, LONG.ttl)
            .await
            .unwrap()
            .stored()
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
            .stored()
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
                Some((&payment, &succeeded())),
                &response("zombie"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
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
                Some((&payment, &succeeded())),
                &response("owner"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
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
        provider_payment_id: Some("ch_d".into()),
        decline_code: Some("card_declined".into()),
    };
    assert!(
        f.store
            .finish(&lease, Some((&first, &declined)), &response("d"), LONG.ttl)
            .await
            .unwrap()
            .stored()
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
                Some((&first, &succeeded())),
                &response("r"),
                instant.ttl
            )
            .await
            .unwrap()
            .stored()
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
                    Some((&payment, &succeeded())),
                    &response("r"),
                    instant.ttl
                )
                .await
                .unwrap()
                .stored()
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
            .finish(&lease, Some((&payment, &succeeded())), &stored, LONG.ttl)
            .await
            .unwrap()
            .stored()
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

/// A parked key (after an unknown outcome at an acquirer that ignores keys)
/// has no holder and cannot be taken over until its hold has passed; only
/// the lease's holder can park it.
async fn a_parked_key_is_held_by_nobody_until_its_hold_passes(f: Fixture) {
    let (lease, _) = acquire(&f, "k1", "order-1", LONG).await;
    let mut stale = lease.clone();
    stale.token = chargeonce_core::LeaseToken::generate();
    assert!(
        !f.store
            .park_lease(&stale, Duration::from_secs(5))
            .await
            .unwrap()
    );
    assert!(
        f.store
            .park_lease(&lease, Duration::from_millis(600))
            .await
            .unwrap()
    );
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert!(!record.lease_active, "nobody holds it");
    let left = record.settling.expect("parked");
    assert!(
        left <= Duration::from_millis(600) && !left.is_zero(),
        "{left:?}"
    );
    assert_eq!(record.refund_id, None);
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
            .await
            .unwrap()
            .is_none(),
        "not before its hold passed"
    );
    assert!(
        !f.store.renew_lease(&lease, LONG.lease).await.unwrap(),
        "its holder let go"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.settling, None);
    assert!(
        f.store
            .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
            .await
            .unwrap()
            .is_some()
    );
}

/// A key that only links to its order's payment can be deleted by its
/// holder (the payment was declined; the key claims the order afresh); no
/// other key can.
async fn only_a_key_linking_its_orders_payment_is_abandoned(f: Fixture) {
    let (own, first) = acquire(&f, "k1", "order-1", LONG).await;
    assert!(
        !f.store.abandon_key(&own).await.unwrap(),
        "a key with its own payment stays"
    );
    let Claim::Acquired(linked) = f
        .store
        .claim_payment(
            &claim(&f.shop, "k2", "o"),
            &new_payment(&f.shop, "k2", "order-1"),
            LONG,
        )
        .await
        .unwrap()
    else {
        panic!("a new key is claimed")
    };
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

async fn a_new_key_for_a_paid_order_links_its_payment_and_writes_nothing_else(f: Fixture) {
    let (lease, first) = acquire(&f, "k1", "order-1", LONG).await;
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
    let record = f.store.key(&f.shop, &key("k2")).await.unwrap().unwrap();
    assert_eq!(record.payment_id, Some(first.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert!(record.lease_active);
    assert_eq!(record.replays, 0);
    assert_eq!(record.fingerprint, fp("k2", "o"));
    // Its repeat finds the key, not the order.
    let Claim::Exists(again) = f
        .store
        .claim_payment(
            &claim(&f.shop, "k2", "o"),
            &new_payment(&f.shop, "k2", "order-1"),
            LONG,
        )
        .await
        .unwrap()
    else {
        panic!("the key exists")
    };
    assert_eq!(again.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(again.replays, 1);
    // Once the payment succeeded, a third key links it too.
    assert!(
        f.store
            .finish(
                &lease,
                Some((&first, &succeeded())),
                &response("ok"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
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
    assert_eq!(orders_of(&f, "order-1").await.len(), 1);
    assert_eq!(all_events(&f).await.len(), 1, "claims write no events");
}

async fn an_expired_key_reused_for_a_new_order_is_claimed_anew(f: Fixture) {
    let instant = KeyTiming {
        lease: LONG.lease,
        ttl: Duration::from_millis(1),
    };
    let (lease, first) = acquire(&f, "k1", "order-1", instant).await;
    assert!(
        f.store
            .finish(
                &lease,
                Some((&first, &succeeded())),
                &response("r"),
                instant.ttl
            )
            .await
            .unwrap()
            .stored()
    );
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
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.fingerprint, fp("k1", "another body"));
    assert_eq!(record.payment_id, Some(second.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(record.response.is_none());
    assert!(record.lease_active);
    assert_eq!(record.replays, 0, "reclaiming is not a repeat");
    assert_eq!(
        orders_of(&f, "order-1").await,
        vec![first.settled(&succeeded())]
    );
}

/// Claims of one key (`keys` = 1) or of several keys for one order, each
/// key `duplicates` times at once, spread over 4 instances.
async fn race_for_one_order(f: &Fixture, keys: usize, duplicates: usize) -> Vec<Claim> {
    let stores = instances(f, 4).await;
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
    assert_eq!(orders_of(&f, "order-1").await, vec![won[0].payment.clone()]);
    let record = f.store.key(&f.shop, &key("k0")).await.unwrap().unwrap();
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
    let orders = orders_of(&f, "order-1").await;
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
    let (lease, first) = acquire(&f, "first", "order-1", LONG).await;
    let store = Arc::clone(&f.store);
    let decline = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .finish(
                &lease,
                Some((&first, &declined())),
                &response("d"),
                LONG.ttl,
            )
            .await
    });
    let claims = race_for_one_order(&f, 24, 1).await;
    assert!(decline.await.unwrap().unwrap().stored());
    let orders = orders_of(&f, "order-1").await;
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

/// The key as phase 1 left it, the payment still pending and the events
/// as they were: what a finish that could not apply must leave.
async fn assert_untouched(f: &Fixture, k: &str, payment: &chargeonce_core::Payment, events: usize) {
    let record = f.store.key(&f.shop, &key(k)).await.unwrap().unwrap();
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(record.response.is_none());
    assert!(record.lease_active);
    let stored = f
        .store
        .payment(&f.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&stored, payment);
    assert_eq!(all_events(f).await.len(), events);
}

async fn a_finish_that_cannot_apply_writes_nothing(f: Fixture) {
    // A taken-over lease: LeaseLost, nothing written, the new owner unharmed.
    let short = KeyTiming {
        lease: Duration::from_millis(100),
        ..LONG
    };
    let (old, payment) = acquire(&f, "k1", "order-1", short).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let taken = f
        .store
        .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
        .await
        .unwrap()
        .unwrap();
    for settlement in [Some((&payment, &succeeded())), None] {
        assert_eq!(
            f.store
                .finish(&old, settlement, &response("zombie"), LONG.ttl)
                .await
                .unwrap(),
            FinishOutcome::LeaseLost
        );
        assert_untouched(&f, "k1", &payment, 0).await;
    }
    assert!(f.store.renew_lease(&taken.lease, LONG.lease).await.unwrap());
    assert!(
        f.store
            .finish(
                &taken.lease,
                Some((&payment, &succeeded())),
                &response("owner"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
    assert_eq!(all_events(&f).await.len(), 1);
    // A finished key: even its last owner's token writes nothing more.
    assert_eq!(
        f.store
            .finish(
                &taken.lease,
                Some((&payment, &declined())),
                &response("again"),
                LONG.ttl
            )
            .await
            .unwrap(),
        FinishOutcome::LeaseLost
    );
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.response.unwrap().body, b"owner");
    let stored = f
        .store
        .payment(&f.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, PaymentStatus::Succeeded);
    assert_eq!(all_events(&f).await.len(), 1);

    // A payment settled meanwhile (the reconciler, with its own event):
    // PaymentAlreadySettled, nothing written, the lease still held.
    let (lease, second) = acquire(&f, "k2", "order-2", LONG).await;
    let SettleOutcome::Settled(settled) = f
        .store
        .settle_payment(&f.shop, &second.id, &succeeded())
        .await
        .unwrap()
    else {
        panic!("pending payments settle")
    };
    assert_eq!(all_events(&f).await.len(), 2);
    assert_eq!(
        f.store
            .finish(
                &lease,
                Some((&second, &declined())),
                &response("d"),
                LONG.ttl
            )
            .await
            .unwrap(),
        FinishOutcome::PaymentAlreadySettled
    );
    let record = f.store.key(&f.shop, &key("k2")).await.unwrap().unwrap();
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(record.response.is_none());
    assert!(record.lease_active);
    assert_eq!(
        f.store.payment(&f.shop, &second.id).await.unwrap().unwrap(),
        settled
    );
    assert_eq!(all_events(&f).await.len(), 2);
    // The owner then stores an answer that agrees with the payment.
    assert!(
        f.store
            .finish(&lease, None, &response("s"), LONG.ttl)
            .await
            .unwrap()
            .stored()
    );
    assert_eq!(all_events(&f).await.len(), 2);
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

fn declined() -> Settlement {
    Settlement {
        status: PaymentStatus::Declined,
        provider_payment_id: Some("ch_d".into()),
        decline_code: Some("card_declined".into()),
    }
}

async fn repeats_of_a_key_are_counted(f: Fixture) {
    acquire(&f, "k1", "order-1", LONG).await;
    for expected in 1..=3_u64 {
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
        assert_eq!(record.replays, expected);
    }
    // A mismatch is a repeat too; reading the key is not.
    f.store
        .claim_payment(
            &claim(&f.shop, "k1", "other"),
            &new_payment(&f.shop, "k1", "order-9"),
            LONG,
        )
        .await
        .unwrap();
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.replays, 4);
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(record.replays, 4);
}

async fn finish_refuses_to_overwrite_a_payment_settled_meanwhile(f: Fixture) {
    let (lease, payment) = acquire(&f, "k1", "order-1", LONG).await;
    // A webhook or the reconciler settles the payment first.
    assert!(matches!(
        f.store
            .settle_payment(&f.shop, &payment.id, &succeeded())
            .await
            .unwrap(),
        SettleOutcome::Settled(_)
    ));
    assert_eq!(
        f.store
            .finish(
                &lease,
                Some((&payment, &declined())),
                &response("d"),
                LONG.ttl
            )
            .await
            .unwrap(),
        FinishOutcome::PaymentAlreadySettled
    );
    let record = f.store.key(&f.shop, &key("k1")).await.unwrap().unwrap();
    assert_eq!(
        record.recovery_point,
        RecoveryPoint::PaymentCreated,
        "nothing written"
    );
    let stored = f
        .store
        .payment(&f.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, PaymentStatus::Succeeded);
    assert_eq!(stored.provider_payment_id.as_deref(), Some("ch_1"));
    // The owner then stores an answer that agrees with the payment.
    assert_eq!(
        f.store
            .finish(&lease, None, &response("s"), LONG.ttl)
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
}

async fn stalled_keys_are_unfinished_keys_whose_lease_ran_out(f: Fixture) {
    let short = KeyTiming {
        lease: Duration::from_millis(100),
        ..LONG
    };
    acquire(&f, "expired", "order-1", short).await;
    acquire(&f, "alive", "order-2", LONG).await;
    let (done, payment) = acquire(&f, "done", "order-3", short).await;
    assert!(
        f.store
            .finish(
                &done,
                Some((&payment, &succeeded())),
                &response("r"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
    let (released, _) = acquire(&f, "released", "order-4", LONG).await;
    assert!(f.store.release_lease(&released).await.unwrap());
    tokio::time::sleep(Duration::from_millis(250)).await;

    let stalled = f.store.stalled_keys(Duration::ZERO, 10).await.unwrap();
    let mut names: Vec<&str> = stalled.iter().map(|s| s.key.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["expired", "released"]);
    let expired = stalled
        .iter()
        .find(|s| s.key.as_str() == "expired")
        .unwrap();
    assert_eq!(expired.shop_id, f.shop);
    assert_eq!(expired.fingerprint, fp("expired", "order-1"));
    assert_eq!(
        f.store.stalled_keys(Duration::ZERO, 1).await.unwrap().len(),
        1
    );
    assert!(
        f.store
            .stalled_keys(Duration::from_secs(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "not idle long enough"
    );
    // What the completer does with one: a take-over with its fingerprint.
    assert!(
        f.store
            .take_over(
                &expired.shop_id,
                &expired.key,
                &expired.fingerprint,
                LONG.lease
            )
            .await
            .unwrap()
            .is_some()
    );
    let left = f.store.stalled_keys(Duration::ZERO, 10).await.unwrap();
    assert_eq!(left.len(), 1, "the taken key holds a live lease again");
}

async fn pending_payments_are_listed_oldest_first(f: Fixture) {
    let (_, first) = acquire(&f, "k1", "order-1", LONG).await;
    let (_, second) = acquire(&f, "k2", "order-2", LONG).await;
    let (_, third) = acquire(&f, "k3", "order-3", LONG).await;
    f.store
        .settle_payment(&f.shop, &second.id, &succeeded())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let pending = f.store.pending_payments(Duration::ZERO, 10).await.unwrap();
    let ids: Vec<_> = pending.iter().map(|p| p.id.clone()).collect();
    assert_eq!(ids, [first.id.clone(), third.id]);
    assert_eq!(
        f.store.pending_payments(Duration::ZERO, 1).await.unwrap()[0].id,
        first.id
    );
    assert!(
        f.store
            .pending_payments(Duration::from_secs(3600), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn payments_in_a_window_are_paged_by_id(f: Fixture) {
    let other = ShopId::new("shop-b").unwrap();
    f.store
        .add_shop(&other, &ShopSecret::generate().hash())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..4 {
        let (_, p) = acquire(&f, &format!("k{i}"), &format!("order-{i}"), LONG).await;
        ids.push(p.id);
    }
    let Claim::Acquired(b) = f
        .store
        .claim_payment(
            &claim(&other, "k0", "order-0"),
            &new_payment(&other, "k0", "order-0"),
            LONG,
        )
        .await
        .unwrap()
    else {
        panic!("new key")
    };
    ids.push(b.payment.id);
    ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let now = time::OffsetDateTime::now_utc();
    let from = now - time::Duration::hours(1);
    let to = now + time::Duration::hours(1);
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = f
            .store
            .payments_created_between(from, to, after.as_ref(), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2);
        if page.is_empty() {
            break;
        }
        after = page.last().map(|p| p.id.clone());
        seen.extend(page.into_iter().map(|p| p.id));
    }
    assert_eq!(seen, ids, "every shop, each once, by id");
    let earlier = f
        .store
        .payments_created_between(from - time::Duration::hours(1), from, None, 10)
        .await
        .unwrap();
    assert!(earlier.is_empty());
}

async fn settling_moves_only_pending_payments(f: Fixture) {
    let (_, payment) = acquire(&f, "k1", "order-1", LONG).await;
    let SettleOutcome::Settled(settled) = f
        .store
        .settle_payment(&f.shop, &payment.id, &succeeded())
        .await
        .unwrap()
    else {
        panic!("pending -> succeeded")
    };
    assert_eq!(settled.status, PaymentStatus::Succeeded);
    assert_eq!(settled.provider_payment_id.as_deref(), Some("ch_1"));
    let SettleOutcome::AlreadyFinal(unchanged) = f
        .store
        .settle_payment(&f.shop, &payment.id, &declined())
        .await
        .unwrap()
    else {
        panic!("a final state never changes")
    };
    assert_eq!(unchanged, settled);
    let other = ShopId::new("shop-b").unwrap();
    assert_eq!(
        f.store
            .settle_payment(&other, &payment.id, &succeeded())
            .await
            .unwrap(),
        SettleOutcome::NotFound
    );
    assert_eq!(
        f.store
            .payment_by_acquirer_key(&payment.acquirer_key)
            .await
            .unwrap(),
        Some(settled)
    );
    assert_eq!(
        f.store
            .payment_by_acquirer_key(&AcquirerKey::from_stored("chargeonce-nobody".into()))
            .await
            .unwrap(),
        None
    );
}

fn event(id: &str, kind: EventKind, key: &AcquirerKey, shop: &ShopId) -> InboundEvent {
    let settlement = match kind {
        EventKind::Processing => None,
        EventKind::Succeeded => Some(succeeded()),
        EventKind::Declined => Some(declined()),
    };
    InboundEvent {
        event_id: id.into(),
        kind,
        acquirer_key: key.clone(),
        shop_id: shop.clone(),
        settlement,
    }
}

async fn events_are_recorded_once_and_only_settle_pending_payments(f: Fixture) {
    let (_, payment) = acquire(&f, "k1", "order-1", LONG).await;
    let key = payment.acquirer_key.clone();
    let EventRecorded::Unchanged(p) = f
        .store
        .record_event(&event("evt_0", EventKind::Processing, &key, &f.shop))
        .await
        .unwrap()
    else {
        panic!("processing moves nothing")
    };
    assert_eq!(p.status, PaymentStatus::Pending);
    let EventRecorded::Settled(p) = f
        .store
        .record_event(&event("evt_1", EventKind::Succeeded, &key, &f.shop))
        .await
        .unwrap()
    else {
        panic!("pending -> succeeded")
    };
    assert_eq!(p.status, PaymentStatus::Succeeded);
    assert_eq!(
        f.store
            .record_event(&event("evt_1", EventKind::Succeeded, &key, &f.shop))
            .await
            .unwrap(),
        EventRecorded::Duplicate
    );
    // Late and contradicting events change nothing.
    for (id, kind) in [
        ("evt_2", EventKind::Declined),
        ("evt_3", EventKind::Processing),
    ] {
        let EventRecorded::Unchanged(p) = f
            .store
            .record_event(&event(id, kind, &key, &f.shop))
            .await
            .unwrap()
        else {
            panic!("{id}: final states never change")
        };
        assert_eq!(p.status, PaymentStatus::Succeeded);
    }
    let unknown = AcquirerKey::from_stored("chargeonce-pay_unknown".into());
    assert_eq!(
        f.store
            .record_event(&event("evt_4", EventKind::Succeeded, &unknown, &f.shop))
            .await
            .unwrap(),
        EventRecorded::UnknownPayment
    );
    assert_eq!(
        f.store
            .record_event(&event("evt_4", EventKind::Succeeded, &unknown, &f.shop))
            .await
            .unwrap(),
        EventRecorded::Duplicate
    );
    // Another shop's event never touches this shop's payment.
    let (_, second) = acquire(&f, "k2", "order-2", LONG).await;
    let other = ShopId::new("shop-b").unwrap();
    assert_eq!(
        f.store
            .record_event(&event(
                "evt_5",
                EventKind::Succeeded,
                &second.acquirer_key,
                &other
            ))
            .await
            .unwrap(),
        EventRecorded::UnknownPayment
    );
    let still = f.store.payment(&f.shop, &second.id).await.unwrap().unwrap();
    assert_eq!(still.status, PaymentStatus::Pending);
}

async fn concurrent_deliveries_of_one_event_apply_once(f: Fixture) {
    let (_, payment) = acquire(&f, "k1", "order-1", LONG).await;
    let f = Arc::new(f);
    let tasks = (0..20).map(|_| {
        let f = Arc::clone(&f);
        let key = payment.acquirer_key.clone();
        tokio::spawn(async move {
            f.store
                .record_event(&event("evt_dup", EventKind::Succeeded, &key, &f.shop))
                .await
        })
    });
    let mut applied = 0;
    for result in futures::future::join_all(tasks).await {
        match result.unwrap().unwrap() {
            EventRecorded::Duplicate => {}
            EventRecorded::Settled(_) => applied += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(applied, 1);
}

/// A succeeded payment of 1500.00 RUB.
async fn charged(f: &Fixture, reference: &str) -> chargeonce_core::Payment {
    let k = format!("{reference}-pay");
    let (lease, payment) = acquire(f, &k, reference, LONG).await;
    assert!(
        f.store
            .finish(
                &lease,
                Some((&payment, &succeeded())),
                &response("{}"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
    f.store
        .payment(&f.shop, &payment.id)
        .await
        .unwrap()
        .unwrap()
}

fn new_refund(shop: &ShopId, payment: &PaymentId, k: &str, value: Option<&str>) -> NewRefund {
    NewRefund::new(
        shop.clone(),
        payment.clone(),
        key(k),
        value.map(|v| Money::parse(v, "RUB").unwrap()),
    )
}

async fn claim_refund(
    f: &Fixture,
    payment: &PaymentId,
    k: &str,
    value: Option<&str>,
    timing: KeyTiming,
) -> RefundClaim {
    f.store
        .claim_refund(
            &claim(&f.shop, k, "refund"),
            &new_refund(&f.shop, payment, k, value),
            timing,
        )
        .await
        .unwrap()
}

fn refund_succeeded(id: &str) -> RefundSettlement {
    RefundSettlement::Succeeded {
        provider_refund_id: id.into(),
    }
}

async fn refunds_reserve_within_the_amount_and_settle(f: Fixture) {
    let payment = charged(&f, "order-1").await;
    assert_eq!(payment.refunded_minor, 0);
    let RefundClaim::Acquired(first) =
        claim_refund(&f, &payment.id, "r1", Some("500.00"), LONG).await
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
    let RefundClaim::Acquired(rest) = claim_refund(&f, &payment.id, "r2", None, LONG).await else {
        panic!("expected a claim");
    };
    let rest_refund = rest.refund.clone().unwrap();
    assert_eq!(rest_refund.amount.minor_units(), 100_000);
    match claim_refund(&f, &payment.id, "r3", Some("0.01"), LONG).await {
        RefundClaim::Refused(RefundRefusal::ExceedsAmount { available_minor }) => {
            assert_eq!(available_minor, 0)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(f.store.key(&f.shop, &key("r3")).await.unwrap().is_none());

    // An existing key is found before any rule about the payment.
    assert!(matches!(
        claim_refund(&f, &payment.id, "r1", Some("500.00"), LONG).await,
        RefundClaim::Exists(_)
    ));

    let settled = f
        .store
        .finish_refund(
            &first.lease,
            Some((&first_refund.id, &refund_succeeded("re_acq_1"))),
            &response("r1"),
            LONG.ttl,
        )
        .await
        .unwrap();
    assert_eq!(settled, FinishOutcome::Stored);
    let stored = f
        .store
        .refund(&f.shop, &first_refund.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, RefundStatus::Succeeded);
    assert_eq!(stored.provider_refund_id.as_deref(), Some("re_acq_1"));
    let after = f
        .store
        .payment(&f.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.refunded_minor, 50_000);
    assert_eq!(after.status, PaymentStatus::Succeeded);

    // A refusal gives the reservation back.
    let failed = RefundSettlement::Failed {
        code: "refused".into(),
    };
    assert!(
        f.store
            .finish_refund(
                &rest.lease,
                Some((&rest_refund.id, &failed)),
                &response("r2"),
                LONG.ttl
            )
            .await
            .unwrap()
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
        claim_refund(&f, &payment.id, "r4", Some("1000.00"), LONG).await,
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
    let (_, pending) = acquire(&f, "order-1-pay", "order-1", LONG).await;
    match claim_refund(&f, &pending.id, "r1", None, LONG).await {
        RefundClaim::Refused(RefundRefusal::NotRefundable(PaymentStatus::Pending)) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    match claim_refund(&f, &PaymentId::generate(), "r1", None, LONG).await {
        RefundClaim::Refused(RefundRefusal::PaymentNotFound) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    let payment = charged(&f, "order-2").await;
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
    let other_shop = ShopId::new("shop-b").unwrap();
    f.store
        .add_shop(&other_shop, &ShopSecret::from_string("t").hash())
        .await
        .unwrap();
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
    assert_eq!(
        f.store
            .payment(&f.shop, &payment.id)
            .await
            .unwrap()
            .unwrap()
            .refunded_minor,
        0
    );
}

async fn concurrent_refund_claims_never_exceed_the_amount(f: Fixture) {
    let payment = charged(&f, "order-1").await;
    let f = Arc::new(f);
    let mut tasks = Vec::new();
    for i in 0..20 {
        let f = f.clone();
        let id = payment.id.clone();
        tasks.push(tokio::spawn(async move {
            claim_refund(&f, &id, &format!("r{i}"), Some("500.00"), LONG).await
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
    let payment = charged(&f, "order-1").await;
    let RefundClaim::Acquired(first) = claim_refund(&f, &payment.id, "r1", None, LONG).await else {
        panic!("expected a claim");
    };
    assert!(f.store.release_lease(&first.lease).await.unwrap());
    let taken = f
        .store
        .take_over(&f.shop, &key("r1"), &fp("r1", "refund"), LONG.lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.recovery_point, RecoveryPoint::RefundCreated);
    assert_eq!(taken.refund, first.refund);
    let refund = taken.refund.clone().unwrap();
    let old = f
        .store
        .finish_refund(
            &first.lease,
            Some((&refund.id, &refund_succeeded("x"))),
            &response("old"),
            LONG.ttl,
        )
        .await
        .unwrap();
    assert_eq!(old, FinishOutcome::LeaseLost);
    let stalled = f.store.stalled_keys(Duration::ZERO, 10).await.unwrap();
    assert!(stalled.is_empty(), "the new lease is alive: {stalled:?}");
    assert!(
        f.store
            .finish_refund(
                &taken.lease,
                Some((&refund.id, &refund_succeeded("x"))),
                &response("new"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
    // Settled once: a second settlement under a new key's lease is refused.
    let record = f.store.key(&f.shop, &key("r1")).await.unwrap().unwrap();
    assert_eq!(record.recovery_point, RecoveryPoint::Finished);
    assert_eq!(
        f.store
            .payment(&f.shop, &payment.id)
            .await
            .unwrap()
            .unwrap()
            .refunded_minor,
        150_000
    );
}

// ---- Merchant events (the transactional outbox) ----

use chargeonce_core::events::{
    AttemptOutcome, DeliveryState, Event, EventQuery, EventType, WebhookEndpoint,
};
use chargeonce_core::webhook::WebhookSecret;

async fn all_events(f: &Fixture) -> Vec<Event> {
    f.store
        .events(
            &f.shop,
            &EventQuery {
                limit: 100,
                starting_after: None,
                event_type: None,
            },
        )
        .await
        .unwrap()
}

async fn set_webhook(f: &Fixture) {
    let endpoint = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_test"),
    };
    assert!(f.store.set_webhook(&f.shop, Some(&endpoint)).await.unwrap());
}

async fn a_transition_writes_exactly_one_event_in_its_transaction(f: Fixture) {
    // A finish that lost its lease writes nothing: no settled payment, no event.
    let short = KeyTiming {
        lease: Duration::from_millis(200),
        ..LONG
    };
    let (old, payment) = acquire(&f, "k1", "order-1", short).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let taken = f
        .store
        .take_over(&f.shop, &key("k1"), &fp("k1", "order-1"), LONG.lease)
        .await
        .unwrap()
        .unwrap();
    let lost = f
        .store
        .finish(
            &old,
            Some((&payment, &succeeded())),
            &response("zombie"),
            LONG.ttl,
        )
        .await
        .unwrap();
    assert_eq!(lost, FinishOutcome::LeaseLost);
    assert!(
        all_events(&f).await.is_empty(),
        "a rolled back finish wrote an event"
    );

    // The owner's finish settles the payment and writes its event.
    assert!(
        f.store
            .finish(
                &taken.lease,
                Some((&payment, &succeeded())),
                &response("ok"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
    let events = all_events(&f).await;
    assert_eq!(events.len(), 1);
    let written = &events[0];
    assert_eq!(written.event_type, EventType::PaymentSucceeded);
    assert_eq!(written.payment_id, payment.id);
    assert_eq!(written.refund_id, None);
    assert_eq!(written.delivery.state(), DeliveryState::Pending);
    assert_eq!(written.delivery.attempts, 0);
    let body: serde_json::Value = serde_json::from_slice(&written.payload).unwrap();
    assert_eq!(body["id"], written.id.as_str());
    assert_eq!(body["type"], "payment.succeeded");
    assert_eq!(body["data"]["payment"]["reference"], "order-1");
    assert_eq!(body["data"]["payment"]["amount"]["value"], "1500.00");

    // Settling twice (reconciler, webhook) changes nothing the second time:
    // still one event per transition.
    let (_, second) = acquire(&f, "k2", "order-2", LONG).await;
    assert!(matches!(
        f.store
            .settle_payment(&f.shop, &second.id, &declined())
            .await
            .unwrap(),
        SettleOutcome::Settled(_)
    ));
    assert!(matches!(
        f.store
            .settle_payment(&f.shop, &second.id, &declined())
            .await
            .unwrap(),
        SettleOutcome::AlreadyFinal(_)
    ));
    let declined_events = f
        .store
        .events(
            &f.shop,
            &EventQuery {
                limit: 10,
                starting_after: None,
                event_type: Some(EventType::PaymentDeclined),
            },
        )
        .await
        .unwrap();
    assert_eq!(declined_events.len(), 1);
    assert_eq!(declined_events[0].payment_id, second.id);

    // A finish that finds its payment settled meanwhile writes no second event.
    let (lease3, third) = acquire(&f, "k3", "order-3", LONG).await;
    f.store
        .settle_payment(&f.shop, &third.id, &succeeded())
        .await
        .unwrap();
    let late = f
        .store
        .finish(
            &lease3,
            Some((&third, &succeeded())),
            &response("late"),
            LONG.ttl,
        )
        .await
        .unwrap();
    assert_eq!(late, FinishOutcome::PaymentAlreadySettled);
    // An acquirer webhook that settles a pending payment writes one event;
    // its redelivery writes none.
    let (_, fourth) = acquire(&f, "k4", "order-4", LONG).await;
    let inbound = event(
        "acq_evt_4",
        EventKind::Succeeded,
        &fourth.acquirer_key,
        &f.shop,
    );
    assert!(matches!(
        f.store.record_event(&inbound).await.unwrap(),
        EventRecorded::Settled(_)
    ));
    assert_eq!(
        f.store.record_event(&inbound).await.unwrap(),
        EventRecorded::Duplicate
    );
    let per_payment =
        |events: &[Event], id: &PaymentId| events.iter().filter(|e| &e.payment_id == id).count();
    let events = all_events(&f).await;
    assert_eq!(events.len(), 4);
    for p in [&payment.id, &second.id, &third.id, &fourth.id] {
        assert_eq!(per_payment(&events, p), 1, "{p}");
    }

    // A refund that succeeds writes refund.succeeded; a lost refund finish nothing.
    let RefundClaim::Acquired(refund) =
        claim_refund(&f, &payment.id, "r1", Some("100.00"), LONG).await
    else {
        panic!("expected a refund claim");
    };
    let refund_row = refund.refund.clone().unwrap();
    assert!(
        f.store
            .finish_refund(
                &refund.lease,
                Some((&refund_row.id, &refund_succeeded("re_1"))),
                &response("r1"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
    let refunds = f
        .store
        .events(
            &f.shop,
            &EventQuery {
                limit: 10,
                starting_after: None,
                event_type: Some(EventType::RefundSucceeded),
            },
        )
        .await
        .unwrap();
    assert_eq!(refunds.len(), 1);
    assert_eq!(refunds[0].refund_id.as_ref(), Some(&refund_row.id));
    assert_eq!(refunds[0].payment_id, payment.id);
    let body: serde_json::Value = serde_json::from_slice(&refunds[0].payload).unwrap();
    assert_eq!(body["data"]["refund"]["amount"]["value"], "100.00");
    assert_eq!(body["data"]["refund"]["reference"], "order-1");

    // A refused refund writes refund.failed.
    let RefundClaim::Acquired(refused) =
        claim_refund(&f, &payment.id, "r2", Some("50.00"), LONG).await
    else {
        panic!("expected a refund claim");
    };
    let refused_row = refused.refund.clone().unwrap();
    let failed = RefundSettlement::Failed {
        code: "refund_refused".into(),
    };
    assert!(
        f.store
            .finish_refund(
                &refused.lease,
                Some((&refused_row.id, &failed)),
                &response("r2"),
                LONG.ttl
            )
            .await
            .unwrap()
            .stored()
    );
    let failed_events = f
        .store
        .events(
            &f.shop,
            &EventQuery {
                limit: 10,
                starting_after: None,
                event_type: Some(EventType::RefundFailed),
            },
        )
        .await
        .unwrap();
    assert_eq!(failed_events.len(), 1);
    assert_eq!(failed_events[0].refund_id.as_ref(), Some(&refused_row.id));
    let body: serde_json::Value = serde_json::from_slice(&failed_events[0].payload).unwrap();
    assert_eq!(body["data"]["refund"]["failure_code"], "refund_refused");
    assert_eq!(all_events(&f).await.len(), 6);
}

async fn events_are_claimed_in_payment_order_leased_and_logged(f: Fixture) {
    let payment = charged(&f, "order-1").await;
    let RefundClaim::Acquired(refund) =
        claim_refund(&f, &payment.id, "r1", Some("100.00"), LONG).await
    else {
        panic!("expected a refund claim");
    };
    let refund_row = refund.refund.clone().unwrap();
    f.store
        .finish_refund(
            &refund.lease,
            Some((&refund_row.id, &refund_succeeded("re_1"))),
            &response("r1"),
            LONG.ttl,
        )
        .await
        .unwrap();
    // No webhook yet: nothing is due, and the events are parked (the relay's
    // scan of due events does not read them).
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );
    let parked = f
        .store
        .events(
            &f.shop,
            &EventQuery {
                limit: 10,
                starting_after: None,
                event_type: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(parked.len(), 2);
    assert!(
        parked
            .iter()
            .all(|e| e.delivery.next_attempt_at_ms == chargeonce_core::events::PARKED_UNTIL_MS),
        "{parked:?}"
    );
    set_webhook(&f).await;
    let armed = f
        .store
        .events(
            &f.shop,
            &EventQuery {
                limit: 10,
                starting_after: None,
                event_type: None,
            },
        )
        .await
        .unwrap();
    assert!(
        armed
            .iter()
            .all(|e| e.delivery.next_attempt_at_ms < chargeonce_core::events::PARKED_UNTIL_MS),
        "{armed:?}"
    );

    // Only the payment's first event is due; the refund's waits for it.
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.event_type, EventType::PaymentSucceeded);
    assert_eq!(due[0].endpoint.url, "http://127.0.0.1:9/hooks");
    let first = due[0].event.id.clone();
    // Leased: another relay gets nothing meanwhile.
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );

    // A failed attempt: due again later, still blocking the refund event.
    f.store
        .record_attempt(
            &first,
            &AttemptOutcome::Failed {
                status: Some(500),
                error: "HTTP 500".into(),
                retry_in: Duration::from_millis(300),
                give_up_after: Duration::from_secs(3600),
            },
        )
        .await
        .unwrap();
    let logged = f.store.event(&f.shop, &first).await.unwrap().unwrap();
    assert_eq!(logged.delivery.attempts, 1);
    assert_eq!(logged.delivery.last_status, Some(500));
    assert_eq!(logged.delivery.state(), DeliveryState::Pending);
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.id, first);
    f.store
        .record_attempt(&first, &AttemptOutcome::Delivered { status: 200 })
        .await
        .unwrap();
    let logged = f.store.event(&f.shop, &first).await.unwrap().unwrap();
    assert_eq!(logged.delivery.state(), DeliveryState::Delivered);
    assert_eq!(logged.delivery.attempts, 2);
    assert_eq!(logged.delivery.last_status, Some(200));
    assert_eq!(logged.delivery.last_error, None);

    // Now the refund's event; a failure past the give-up time gives up.
    let due = f
        .store
        .claim_due_events(10, Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    let second = due[0].event.id.clone();
    assert_eq!(due[0].event.event_type, EventType::RefundSucceeded);
    f.store
        .record_attempt(
            &second,
            &AttemptOutcome::Failed {
                status: None,
                error: "connection refused".into(),
                retry_in: Duration::from_secs(1),
                give_up_after: Duration::ZERO,
            },
        )
        .await
        .unwrap();
    let logged = f.store.event(&f.shop, &second).await.unwrap().unwrap();
    assert_eq!(logged.delivery.state(), DeliveryState::GaveUp);
    assert_eq!(
        logged.delivery.last_error.as_deref(),
        Some("connection refused")
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );

    // Resent by hand: due again at once, same id.
    let resent = f
        .store
        .resend_event(&f.shop, &second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resent.delivery.state(), DeliveryState::Pending);
    assert_eq!(resent.delivery.attempts, 1);
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.id, second);

    // Newest first, paged; another shop sees none of it.
    let page = f
        .store
        .events(
            &f.shop,
            &EventQuery {
                limit: 1,
                starting_after: None,
                event_type: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].id, second);
    let next = f
        .store
        .events(
            &f.shop,
            &EventQuery {
                limit: 10,
                starting_after: Some(second.clone()),
                event_type: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        next.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        vec![first.clone()]
    );
    let other = ShopId::new("shop-b").unwrap();
    f.store
        .add_shop(&other, &ShopSecret::from_string("b").hash())
        .await
        .unwrap();
    assert!(f.store.event(&other, &first).await.unwrap().is_none());
    assert!(
        f.store
            .resend_event(&other, &first)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        f.store
            .events(
                &other,
                &EventQuery {
                    limit: 10,
                    starting_after: None,
                    event_type: None
                }
            )
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !f.store
            .set_webhook(&ShopId::new("nobody").unwrap(), None)
            .await
            .unwrap()
    );
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
    a_parked_key_is_held_by_nobody_until_its_hold_passes,
    only_a_key_linking_its_orders_payment_is_abandoned,
    one_live_payment_per_order,
    an_expired_finished_key_counts_as_new,
    the_sweeper_deletes_expired_finished_keys_in_batches,
    finishing_keeps_the_key_for_its_ttl_from_now,
    a_take_over_needs_the_same_fingerprint,
    concurrent_claims_of_one_key_have_one_winner,
    concurrent_keys_for_one_order_make_one_payment,
    a_new_key_for_a_paid_order_links_its_payment_and_writes_nothing_else,
    an_expired_key_reused_for_a_new_order_is_claimed_anew,
    claims_of_one_key_across_instances_have_one_winner,
    keys_for_one_order_across_instances_make_one_payment,
    claims_racing_a_decline_of_the_orders_payment_link_a_live_one,
    a_finish_that_cannot_apply_writes_nothing,
    shops_are_kept_apart,
    keys_with_sql_metacharacters_are_opaque,
    repeats_of_a_key_are_counted,
    finish_refuses_to_overwrite_a_payment_settled_meanwhile,
    stalled_keys_are_unfinished_keys_whose_lease_ran_out,
    pending_payments_are_listed_oldest_first,
    payments_in_a_window_are_paged_by_id,
    settling_moves_only_pending_payments,
    events_are_recorded_once_and_only_settle_pending_payments,
    concurrent_deliveries_of_one_event_apply_once,
    refunds_reserve_within_the_amount_and_settle,
    refunds_of_unrefundable_payments_are_refused_and_not_stored,
    concurrent_refund_claims_never_exceed_the_amount,
    a_refund_key_is_taken_over_with_its_refund,
    a_transition_writes_exactly_one_event_in_its_transaction,
    events_are_claimed_in_payment_order_leased_and_logged,
);
