//! Refunds go through the same request pipeline as payments
//! (crates/server/src/pipeline): a repeat of a refund this instance executed
//! is answered from memory, identical refunds in flight share one
//! execution, and a repeat with `Prefer: wait=N` waits for the first
//! refund's answer instead of a 409. On both stores.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_core::{IdempotencyKey, ShopId};
use chargeonce_testkit::on_both_stores;
use common::{Answer, Backend, TestService, body, send};
use serde_json::{Value, json};

fn refund(s: &TestService, payment_id: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(&format!("/v1/payments/{payment_id}/refunds")))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .header("idempotency-key", key)
        .json(body)
}

fn rub(value: &str) -> Value {
    json!({"amount": {"value": value, "currency": "RUB"}})
}

/// Pays `value` RUB for `reference` with `token` and returns the payment id.
async fn paid(s: &TestService, reference: &str, value: &str, token: &str) -> String {
    let answer = send(s.pay(&format!("{reference}-pay"), &body(reference, value, token))).await;
    assert_eq!(
        answer.status,
        201,
        "{}",
        String::from_utf8_lossy(&answer.bytes)
    );
    answer.json()["id"].as_str().unwrap().to_owned()
}

/// How many repeats of `key` the store saw.
async fn store_replays(s: &TestService, key: &str) -> u64 {
    let record = s
        .store
        .key(
            &ShopId::new(common::SHOP).unwrap(),
            &IdempotencyKey::new(key).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    record.replays
}

async fn refunds_at_acquirer(s: &TestService) -> usize {
    s.sim.refunds().await.unwrap().len()
}

/// A refund repeat is replayed byte for byte from memory (the store is out
/// of reach), and another request under its key is still 422.
async fn a_refund_repeat_is_served_from_the_response_cache(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-rp1", "100.00", "tok_ok").await;
    let first = send(refund(&s, &id, "order-rp1-refund-1", &rub("40.00"))).await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    assert!(!first.replayed());
    let again = send(refund(&s, &id, "order-rp1-refund-1", &rub("40.00"))).await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes);
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(
        store_replays(&s, "order-rp1-refund-1").await,
        0,
        "answered from memory"
    );

    s.break_store().await;
    for _ in 0..3 {
        let cached = send(refund(&s, &id, "order-rp1-refund-1", &rub("40.00"))).await;
        assert_eq!(cached.status, 201);
        assert!(cached.replayed());
        assert_eq!(cached.bytes, first.bytes);
    }
    send(refund(&s, &id, "order-rp1-refund-1", &rub("41.00")))
        .await
        .assert_problem(422, "idempotency_key_reused");
    // The payment's own key, cached too, is not a refund's.
    send(refund(&s, &id, "order-rp1-pay", &rub("40.00")))
        .await
        .assert_problem(422, "idempotency_key_reused");
    assert_eq!(refunds_at_acquirer(&s).await, 1);
}

/// Identical refunds sent at once execute once; the others get that
/// refund replayed (or 409 while it runs).
async fn concurrent_duplicate_refunds_share_one_execution(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-rp2", "100.00", "tok_ok").await;
    let requests = (0..20).map(|_| refund(&s, &id, "order-rp2-refund-1", &rub("25.00")).send());
    let mut executed = Vec::new();
    let mut replays = Vec::new();
    for answer in futures::future::join_all(requests).await {
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
    assert_eq!(refunds_at_acquirer(&s).await, 1);
    let after = send(refund(&s, &id, "order-rp2-refund-1", &rub("25.00"))).await;
    assert!(after.replayed());
    assert_eq!(after.bytes, executed[0]);
}

/// A repeat with `Prefer: wait` waits for the running first refund (the
/// acquirer records refunds of a `tok_late` payment late) and gets its
/// answer, byte for byte, saying it waited.
async fn a_refund_repeat_with_prefer_wait_waits_for_the_first(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-rp3", "100.00", "tok_late").await;
    let first = tokio::spawn(send(refund(&s, &id, "order-rp3-refund-1", &rub("10.00"))));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let repeat =
        send(refund(&s, &id, "order-rp3-refund-1", &rub("10.00")).header("prefer", "wait=10"))
            .await;
    let first = first.await.unwrap();
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    assert_eq!(
        repeat.status,
        201,
        "{}",
        String::from_utf8_lossy(&repeat.bytes)
    );
    assert!(repeat.replayed());
    assert_eq!(repeat.bytes, first.bytes, "the first answer, byte for byte");
    assert_eq!(repeat.header("preference-applied"), Some("wait=10"));
    assert_eq!(refunds_at_acquirer(&s).await, 1);
}

on_both_stores!(
    a_refund_repeat_is_served_from_the_response_cache,
    concurrent_duplicate_refunds_share_one_execution,
    a_refund_repeat_with_prefer_wait_waits_for_the_first,
);
