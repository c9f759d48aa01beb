//! The in-process caches (crates/server/src/cache.rs) over real HTTP, on both
//! stores. Closing the store's connections proves an answer came from memory:
//! anything that still needs the database then gets 503.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_core::{IdempotencyKey, KeyTiming, ShopId};
use chargeonce_testkit::on_both_stores;
use common::{Answer, Backend, OTHER_SECRET, OTHER_SHOP, TestService, body, send};
use serde_json::Value;

fn pay_as(
    s: &TestService,
    shop: &str,
    secret: &str,
    key: &str,
    b: &Value,
) -> reqwest::RequestBuilder {
    s.http
        .post(s.url("/v1/payments"))
        .basic_auth(shop, Some(secret))
        .header("idempotency-key", key)
        .json(b)
}

async fn store_replays(s: &TestService, key: &str) -> i64 {
    let record = s
        .store
        .key(
            &ShopId::new(common::SHOP).unwrap(),
            &IdempotencyKey::new(key).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    record.replays as i64
}

async fn a_cached_replay_is_byte_identical_and_needs_no_store(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-c1", "12.00", "tok_ok");
    let first = send(s.pay("c1", &b)).await;
    assert_eq!(first.status, 201);
    assert!(!first.replayed());
    let again = send(s.pay("c1", &b)).await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes);
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(store_replays(&s, "c1").await, 0, "answered from memory");

    s.break_store().await;
    for _ in 0..3 {
        let cached = send(s.pay("c1", &b)).await;
        assert_eq!(cached.status, 201);
        assert!(cached.replayed());
        assert_eq!(cached.bytes, first.bytes);
    }
    // A key the cache does not hold still needs the store.
    let other = send(s.pay("c2", &body("order-c2", "12.00", "tok_ok"))).await;
    assert_eq!(
        other.status,
        503,
        "{}",
        String::from_utf8_lossy(&other.bytes)
    );
    assert_eq!(s.ledger_len().await, 1);
}

async fn a_mismatch_on_a_cached_key_is_still_422(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-m1", "12.00", "tok_ok");
    let first = send(s.pay("m1", &b)).await;
    assert_eq!(first.status, 201);
    s.break_store().await;
    for other in [
        body("order-m1", "13.00", "tok_ok"),
        body("order-m2", "12.00", "tok_ok"),
    ] {
        send(s.pay("m1", &other))
            .await
            .assert_problem(422, "idempotency_key_reused");
    }
    // The original is untouched.
    let again = send(s.pay("m1", &b)).await;
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes);
    assert_eq!(s.ledger_len().await, 1);
}

async fn the_same_key_under_two_shops_gets_each_shops_own_response(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-shared", "5.00", "tok_ok");
    let a = send(pay_as(&s, common::SHOP, common::SECRET, "shared", &b)).await;
    let o = send(pay_as(&s, OTHER_SHOP, OTHER_SECRET, "shared", &b)).await;
    assert_eq!((a.status, o.status), (201, 201));
    assert!(
        !a.replayed() && !o.replayed(),
        "each shop's key executes once"
    );
    assert_ne!(a.bytes, o.bytes);
    assert_eq!(a.json()["shop_id"], common::SHOP);
    assert_eq!(o.json()["shop_id"], OTHER_SHOP);
    // From the cache (the store is gone), each shop gets its own answer.
    s.break_store().await;
    for _ in 0..2 {
        let a2 = send(pay_as(&s, common::SHOP, common::SECRET, "shared", &b)).await;
        let o2 = send(pay_as(&s, OTHER_SHOP, OTHER_SECRET, "shared", &b)).await;
        assert!(a2.replayed() && o2.replayed());
        assert_eq!(a2.bytes, a.bytes);
        assert_eq!(o2.bytes, o.bytes);
    }
    // Another shop's key under a different fingerprint is not a mismatch of ours.
    let b2 = body("order-other", "6.00", "tok_ok");
    let fresh = send(pay_as(&s, OTHER_SHOP, OTHER_SECRET, "only-a", &b2)).await;
    assert_eq!(fresh.status, 503, "not in the cache: needs the store");
}

async fn the_auth_cache_refuses_a_wrong_secret_for_a_cached_shop(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-auth", "7.00", "tok_ok");
    let first = send(s.pay("auth", &b)).await;
    assert_eq!(first.status, 201);
    // The shop's hash is now cached; without the store, auth runs on it alone.
    s.break_store().await;
    // Past the 100 ms after which a secret matching no cached key has the
    // keys read again: that read fails, and the cached keys still answer.
    tokio::time::sleep(Duration::from_millis(150)).await;
    for wrong in [
        "sk_wrong",
        "",
        common::OTHER_SECRET,
        &format!("{}x", common::SECRET),
    ] {
        send(pay_as(&s, common::SHOP, wrong, "auth", &b))
            .await
            .assert_problem(401, "unauthorized");
    }
    let right = send(s.pay("auth", &b)).await;
    assert_eq!(right.status, 201);
    assert!(right.replayed());
    assert_eq!(right.bytes, first.bytes);
}

async fn a_pending_answer_is_not_cached(backend: Backend) {
    let s = TestService::builder(backend)
        .timing(KeyTiming {
            lease: Duration::from_secs(30),
            ttl: Duration::from_secs(3600),
        })
        .slow(Duration::from_millis(1500))
        .acquirer_timeout(Duration::from_millis(200))
        .start()
        .await;
    let b = body("order-p", "9.00", "tok_slow");
    let first = send(s.pay("p", &b)).await;
    assert_eq!(
        first.status,
        202,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    s.break_store().await;
    let again = send(s.pay("p", &b)).await;
    assert_eq!(again.status, 503, "a pending key is asked to the store");
}

async fn concurrent_duplicates_share_one_execution(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-flight", "3.00", "tok_ok");
    let answers = futures::future::join_all((0..40).map(|_| s.pay("flight", &b).send())).await;
    let mut executed = Vec::new();
    let mut replays = Vec::new();
    for answer in answers {
        let answer = Answer::of(answer.unwrap()).await;
        match (answer.status, answer.replayed()) {
            (201, false) => executed.push(answer.bytes),
            (201, true) => replays.push(answer.bytes),
            (409, _) => answer.assert_problem(409, "request_in_progress"),
            (other, _) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(executed.len(), 1, "one execution");
    assert!(replays.iter().all(|r| *r == executed[0]));
    assert_eq!(s.charges("order-flight").await.len(), 1);
    let after = send(s.pay("flight", &b)).await;
    assert!(after.replayed());
    assert_eq!(after.bytes, executed[0]);
}

on_both_stores!(
    a_cached_replay_is_byte_identical_and_needs_no_store,
    a_mismatch_on_a_cached_key_is_still_422,
    the_same_key_under_two_shops_gets_each_shops_own_response,
    the_auth_cache_refuses_a_wrong_secret_for_a_cached_shop,
    a_pending_answer_is_not_cached,
    concurrent_duplicates_share_one_execution,
);
