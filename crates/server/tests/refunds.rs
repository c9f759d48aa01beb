//! Refunds over real HTTP, on both stores: replay, key reuse, concurrent
//! partial refunds that must not exceed the charge, a lost acquirer answer
//! resolved by a retry, and refusals that are not stored against the key.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_testkit::on_both_stores;
use common::{Answer, Backend, OTHER_SECRET, OTHER_SHOP, TestService, body, send};
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

/// Pays `value` RUB for `reference` and returns the payment id.
async fn paid(s: &TestService, reference: &str, value: &str) -> String {
    let answer = send(s.pay(
        &format!("{reference}-pay"),
        &body(reference, value, "tok_ok"),
    ))
    .await;
    assert_eq!(answer.status, 201);
    answer.json()["id"].as_str().unwrap().to_owned()
}

async fn payment(s: &TestService, id: &str) -> Value {
    let answer = send(s.get(&format!("/v1/payments/{id}"))).await;
    assert_eq!(answer.status, 200);
    answer.json()
}

async fn refunded_at_acquirer(s: &TestService) -> i64 {
    s.sim
        .refunds()
        .await
        .unwrap()
        .iter()
        .map(|r| r.amount_minor)
        .sum()
}

async fn a_refund_is_replayed_byte_for_byte_and_shows_on_the_payment(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-1", "1000.00").await;
    let before = payment(&s, &id).await;
    assert_eq!(
        before["amount_refunded"],
        json!({"value": "0.00", "currency": "RUB"})
    );
    assert_eq!(before["refund_status"], "none");

    let first = send(refund(&s, &id, "order-1-refund-1", &rub("300.00"))).await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    assert!(!first.replayed());
    let made = first.json();
    let refund_id = made["id"].as_str().unwrap();
    assert!(refund_id.starts_with("re_"));
    assert_eq!(made["object"], "refund");
    assert_eq!(made["payment_id"], id.as_str());
    assert_eq!(made["shop_id"], common::SHOP);
    assert_eq!(made["status"], "succeeded");
    assert_eq!(
        made["amount"],
        json!({"value": "300.00", "currency": "RUB"})
    );
    assert!(made["provider_refund_id"].is_string());
    assert!(made["created_at"].is_string());
    let location = format!("/v1/refunds/{refund_id}");
    assert_eq!(first.header("location"), Some(location.as_str()));

    for _ in 0..5 {
        let again = send(refund(&s, &id, "order-1-refund-1", &rub("300.00"))).await;
        assert_eq!(again.status, 201);
        assert!(again.replayed());
        assert_eq!(again.bytes, first.bytes, "replay must be byte-identical");
    }
    assert_eq!(s.sim.refunds().await.unwrap().len(), 1);
    assert_eq!(refunded_at_acquirer(&s).await, 30_000);

    let after = payment(&s, &id).await;
    assert_eq!(after["status"], "succeeded");
    assert_eq!(
        after["amount_refunded"],
        json!({"value": "300.00", "currency": "RUB"})
    );
    assert_eq!(after["refund_status"], "partially_refunded");

    let shown = send(s.get(&location)).await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.json(), made);
    let foreign = send(
        s.http
            .get(s.url(&location))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await;
    foreign.assert_problem(404, "not_found");
    send(s.get("/v1/refunds/re_nope"))
        .await
        .assert_problem(404, "not_found");
}

async fn a_payment_key_reused_for_its_refund_is_422(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-1", "1000.00").await;
    let reused = send(refund(&s, &id, "order-1-pay", &json!({}))).await;
    reused.assert_problem(422, "idempotency_key_reused");
    assert!(s.sim.refunds().await.unwrap().is_empty());
    assert_eq!(payment(&s, &id).await["refund_status"], "none");
}

async fn concurrent_partial_refunds_never_exceed_the_charge(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-1", "1000.00").await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let request = refund(&s, &id, &format!("order-1-refund-{i}"), &rub("300.00"));
        tasks.push(tokio::spawn(async move { send(request).await }));
    }
    let mut succeeded = 0;
    for task in tasks {
        let answer: Answer = task.await.unwrap();
        match answer.status {
            201 => succeeded += 1,
            _ => answer.assert_problem(422, "refund_exceeds_amount"),
        }
    }
    assert_eq!(succeeded, 3);
    assert_eq!(s.sim.refunds().await.unwrap().len(), 3);
    assert_eq!(refunded_at_acquirer(&s).await, 90_000);
    let shown = payment(&s, &id).await;
    assert_eq!(shown["amount_refunded"]["value"], "900.00");
    assert_eq!(shown["refund_status"], "partially_refunded");
}

async fn a_full_refund_leaves_nothing_and_its_retry_still_returns_it(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-1", "1000.00").await;
    let full = send(refund(&s, &id, "order-1-refund-1", &json!({}))).await;
    assert_eq!(full.status, 201);
    assert_eq!(full.json()["amount"]["value"], "1000.00");
    let shown = payment(&s, &id).await;
    assert_eq!(shown["status"], "succeeded");
    assert_eq!(shown["refund_status"], "refunded");
    assert_eq!(shown["amount_refunded"]["value"], "1000.00");

    send(refund(&s, &id, "order-1-refund-2", &rub("0.01")))
        .await
        .assert_problem(422, "refund_exceeds_amount");
    send(refund(&s, &id, "order-1-refund-3", &json!({})))
        .await
        .assert_problem(422, "refund_exceeds_amount");
    // "Already exists" before any rule about the payment: the retry of the
    // refund that used the payment up gets that refund.
    let again = send(refund(&s, &id, "order-1-refund-1", &json!({}))).await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.bytes, full.bytes);
    assert_eq!(refunded_at_acquirer(&s).await, 100_000);
}

async fn a_lost_refund_answer_is_resolved_by_a_retry(backend: Backend) {
    let s = TestService::start(backend).await;
    // tok_timeout loses the first answer of the charge and of each refund.
    let pay_body = body("order-1", "1000.00", "tok_timeout");
    assert_eq!(send(s.pay("order-1-pay", &pay_body)).await.status, 202);
    let charged = send(s.pay("order-1-pay", &pay_body)).await;
    assert_eq!(charged.status, 201);
    let id = charged.json()["id"].as_str().unwrap().to_owned();

    let lost = send(refund(&s, &id, "order-1-refund-1", &rub("400.00"))).await;
    assert_eq!(lost.status, 202, "{}", String::from_utf8_lossy(&lost.bytes));
    assert_eq!(lost.json()["status"], "pending");
    assert!(lost.header("retry-after").is_some());
    // The acquirer did refund; we just do not know it yet.
    assert_eq!(s.sim.refunds().await.unwrap().len(), 1);
    assert_eq!(payment(&s, &id).await["refund_status"], "none");

    let resolved = send(refund(&s, &id, "order-1-refund-1", &rub("400.00"))).await;
    assert_eq!(resolved.status, 201);
    assert!(!resolved.replayed());
    assert_eq!(resolved.json()["status"], "succeeded");
    assert_eq!(resolved.json()["id"], lost.json()["id"]);
    let replay = send(refund(&s, &id, "order-1-refund-1", &rub("400.00"))).await;
    assert!(replay.replayed());
    assert_eq!(replay.bytes, resolved.bytes);

    assert_eq!(s.sim.refunds().await.unwrap().len(), 1);
    assert_eq!(refunded_at_acquirer(&s).await, 40_000);
    assert_eq!(payment(&s, &id).await["amount_refunded"]["value"], "400.00");
}

async fn a_declined_payment_is_not_refundable(backend: Backend) {
    let s = TestService::start(backend).await;
    let declined = send(s.pay("order-1-pay", &body("order-1", "1000.00", "tok_declined"))).await;
    assert_eq!(declined.status, 402);
    let id = declined.json()["payment"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for _ in 0..2 {
        // Refused before execution: not stored, so never a replay.
        let refused = send(refund(&s, &id, "order-1-refund-1", &json!({}))).await;
        refused.assert_problem(422, "payment_not_refundable");
        assert!(!refused.replayed());
        assert_eq!(refused.json()["payment_status"], "declined");
    }
    assert!(s.sim.refunds().await.unwrap().is_empty());
}

async fn a_pending_payment_is_not_refundable_yet(backend: Backend) {
    let s = TestService::start(backend).await;
    let pay_body = body("order-1", "1000.00", "tok_timeout");
    let pending = send(s.pay("order-1-pay", &pay_body)).await;
    assert_eq!(pending.status, 202);
    let id = pending.json()["id"].as_str().unwrap().to_owned();
    let refused = send(refund(&s, &id, "order-1-refund-1", &rub("100.00"))).await;
    refused.assert_problem(409, "payment_not_refundable");
    assert_eq!(refused.json()["payment_status"], "pending");

    // The refusal was not stored: once the payment succeeds, the same key refunds.
    assert_eq!(send(s.pay("order-1-pay", &pay_body)).await.status, 201);
    let lost = send(refund(&s, &id, "order-1-refund-1", &rub("100.00"))).await;
    assert_eq!(lost.status, 202);
    let made = send(refund(&s, &id, "order-1-refund-1", &rub("100.00"))).await;
    assert_eq!(made.status, 201);
    assert_eq!(refunded_at_acquirer(&s).await, 10_000);
}

async fn unknown_foreign_and_other_currency_refunds_are_refused(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = paid(&s, "order-1", "1000.00").await;
    send(refund(&s, "pay_nope", "r1", &json!({})))
        .await
        .assert_problem(404, "not_found");
    send(refund(
        &s,
        "pay_0190b2a4c8e07c3a9f1e2d3c4b5a6978",
        "r1",
        &json!({}),
    ))
    .await
    .assert_problem(404, "not_found");
    let foreign = send(
        s.http
            .post(s.url(&format!("/v1/payments/{id}/refunds")))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET))
            .header("idempotency-key", "r1")
            .json(&json!({})),
    )
    .await;
    foreign.assert_problem(404, "not_found");
    send(refund(
        &s,
        &id,
        "r1",
        &json!({"amount": {"value": "10.00", "currency": "USD"}}),
    ))
    .await
    .assert_problem(422, "currency_mismatch");
    send(refund(
        &s,
        &id,
        "r1",
        &json!({"amount": {"value": "-1", "currency": "RUB"}}),
    ))
    .await
    .assert_problem(422, "invalid_amount");
    send(refund(&s, &id, "r1", &json!({"extra": 1})))
        .await
        .assert_problem(422, "invalid_request");
    assert!(s.sim.refunds().await.unwrap().is_empty());
    // None of those refusals was stored: the key still refunds.
    assert_eq!(send(refund(&s, &id, "r1", &json!({}))).await.status, 201);
}

on_both_stores!(
    a_refund_is_replayed_byte_for_byte_and_shows_on_the_payment,
    a_payment_key_reused_for_its_refund_is_422,
    concurrent_partial_refunds_never_exceed_the_charge,
    a_full_refund_leaves_nothing_and_its_retry_still_returns_it,
    a_lost_refund_answer_is_resolved_by_a_retry,
    a_declined_payment_is_not_refundable,
    a_pending_payment_is_not_refundable_yet,
    unknown_foreign_and_other_currency_refunds_are_refused,
);
