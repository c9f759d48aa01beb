//! A payment's `metadata`: kept, returned, replayed, part of the request's
//! fingerprint, and refused whole (nothing stored or charged) outside its
//! limits, on both stores.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_core::{PaymentId, ShopId};
use chargeonce_testkit::on_both_stores;
use common::{Backend, TestService, body, send};
use serde_json::{Map, Value, json};

/// A payment body for `reference` with `metadata`.
fn with_metadata(reference: &str, metadata: Value) -> Value {
    let mut b = body(reference, "1500.00", "tok_ok");
    b["metadata"] = metadata;
    b
}

async fn metadata_is_kept_returned_and_replayed(backend: Backend) {
    let s = TestService::start(backend).await;
    let metadata = json!({"order_id": "6735", "customer": "cus_42", "note": "привет, мир"});
    let sent = with_metadata("order-1", metadata.clone());
    let first = send(s.pay("order-1-pay", &sent)).await;
    assert_eq!(first.status, 201);
    let payment = first.json();
    assert_eq!(payment["metadata"], metadata);

    // The replay, the read and the list give the same pairs (the same bytes).
    let again = send(s.pay("order-1-pay", &sent)).await;
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes);
    let id = payment["id"].as_str().unwrap();
    let read = send(s.get(&format!("/v1/payments/{id}"))).await;
    assert_eq!(read.bytes, first.bytes);
    let list = send(s.get("/v1/payments?reference=order-1")).await;
    assert_eq!(list.json()["data"][0]["metadata"], metadata);

    // The store holds them, read back through the domain type.
    let stored = s
        .store
        .payment(
            &ShopId::new(common::SHOP).unwrap(),
            &PaymentId::parse(id).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.metadata.get("note"), Some("привет, мир"));
    assert_eq!(stored.metadata.iter().count(), 3);

    // A payment without metadata shows an empty object.
    let plain = send(s.pay("order-2-pay", &body("order-2", "10.00", "tok_ok"))).await;
    assert_eq!(plain.json()["metadata"], json!({}));
}

async fn other_metadata_under_the_same_key_is_another_request(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("k", &with_metadata("order-1", json!({"a": "1"})))).await;
    assert_eq!(first.status, 201);
    for changed in [
        with_metadata("order-1", json!({"a": "2"})),
        with_metadata("order-1", json!({"a": "1", "b": "1"})),
        with_metadata("order-1", json!({})),
        body("order-1", "1500.00", "tok_ok"),
    ] {
        send(s.pay("k", &changed))
            .await
            .assert_problem(422, "idempotency_key_reused");
    }
    assert_eq!(s.ledger_len().await, 1, "a mismatch never executes");
    // Member order inside metadata is not a change (canonical JSON).
    let reordered = json!({
        "metadata": {"a": "1"},
        "payment_method": {"token": "tok_ok"},
        "reference": "order-1",
        "amount": {"currency": "RUB", "value": "1500.00"},
    });
    let again = send(s.pay("k", &reordered)).await;
    assert_eq!(again.bytes, first.bytes);
}

/// `n` pairs `k0`..`kn` with short values.
fn pairs(n: usize) -> Value {
    Value::Object(
        (0..n)
            .map(|i| (format!("k{i}"), Value::String(format!("v{i}"))))
            .collect::<Map<_, _>>(),
    )
}

async fn metadata_outside_its_limits_is_refused_whole(backend: Backend) {
    let s = TestService::start(backend).await;
    let key_41 = "k".repeat(41);
    let refused = [
        (pairs(51), "metadata"),
        (
            json!({ key_41.clone(): "v" }),
            "metadata.kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk…",
        ),
        (json!({"k": "v".repeat(501)}), "metadata.k"),
        (json!({"": "v"}), "metadata"),
        (json!({"a\u{7}b": "v"}), "metadata"),
    ];
    for (i, (metadata, field)) in refused.into_iter().enumerate() {
        let answer = send(s.pay(&format!("k{i}"), &with_metadata("order-1", metadata))).await;
        answer.assert_problem(422, "invalid_request");
        assert_eq!(answer.json()["field"], field);
    }
    for (i, metadata) in [
        json!({"n": 1}),
        json!({"n": null}),
        json!({"n": {"nested": "x"}}),
        json!(["a", "b"]),
        json!("a=b"),
    ]
    .into_iter()
    .enumerate()
    {
        send(s.pay(&format!("t{i}"), &with_metadata("order-1", metadata)))
            .await
            .assert_problem(422, "invalid_request");
    }
    assert_eq!(s.ledger_len().await, 0, "a refusal executes nothing");
    let list = send(s.get("/v1/payments")).await;
    assert_eq!(list.json()["data"], json!([]), "and stores nothing");

    // At the limits: 50 pairs, a 40-character key, a 500-character value.
    let mut edge = pairs(49);
    edge["к".repeat(40)] = Value::String("ж".repeat(500));
    let answer = send(s.pay("edge", &with_metadata("order-1", edge.clone()))).await;
    assert_eq!(
        answer.status,
        201,
        "{}",
        String::from_utf8_lossy(&answer.bytes)
    );
    assert_eq!(answer.json()["metadata"], edge);
}

on_both_stores!(
    metadata_is_kept_returned_and_replayed,
    other_metadata_under_the_same_key_is_another_request,
    metadata_outside_its_limits_is_refused_whole,
);
