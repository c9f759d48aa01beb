//! A key parked after an unknown outcome at an acquirer that ignores keys,
//! whose payment a webhook (or the reconciler) settles before the settle
//! window runs out: the answer its next repeat gets is stored before it is
//! given, and stays the key's answer after the payment changes (a refund).
//!
//! Found by chaos (issue 39): the parked key's repeat was answered from the
//! payment as it stood, unstored; the client refunded part of the payment,
//! and once the parking ran out the completer stored an answer that showed
//! the refund, so a late repeat of the key got a second, different answer.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_core::{
    IdempotencyKey, PaymentId, PaymentStatus, RecoveryPoint, Settlement, ShopId,
};
use chargeonce_testkit::on_both_stores;
use common::{Backend, SECRET, SHOP, TestService, body, send};
use serde_json::json;

async fn a_parked_keys_settled_payment_is_answered_once_and_stored(backend: Backend) {
    let s = TestService::builder(backend)
        .acquirer_ignores_keys()
        // tok_slow commits its charge, then answers after 600 ms: long
        // after the 200 ms the engine waits, so the outcome is unknown.
        .slow(Duration::from_millis(600))
        .engine(|config| chargeonce_core::EngineConfig {
            acquirer_timeout: Duration::from_millis(200),
            settle_window: Duration::from_secs(60),
            ..config
        })
        .start()
        .await;
    let key = "order-late-pay";
    let request = body("order-late", "15.00", "tok_slow");

    let first = send(s.pay(key, &request)).await;
    assert_eq!(first.status, 202, "unknown outcome: parked");
    let payment_id = first.json()["id"].as_str().unwrap().to_owned();
    let parked = send(s.pay(key, &request)).await;
    assert_eq!(parked.status, 202, "parked: not looked up yet");

    // The acquirer's webhook settles the payment with the charge it made.
    let charges = s.charges("order-late").await;
    assert_eq!(charges.len(), 1, "the first attempt's charge");
    let shop = ShopId::new(SHOP).unwrap();
    let id = PaymentId::parse(&payment_id).unwrap();
    s.store
        .settle_payment(
            &shop,
            &id,
            &Settlement {
                status: PaymentStatus::Succeeded,
                provider_payment_id: Some(charges[0].id.clone()),
                decline_code: None,
            },
        )
        .await
        .unwrap();

    let paid = send(s.pay(key, &request)).await;
    assert_eq!(paid.status, 201, "{}", String::from_utf8_lossy(&paid.bytes));
    assert_eq!(paid.json()["status"], "succeeded");
    let record = s
        .store
        .key(&shop, &IdempotencyKey::new(key).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record.recovery_point,
        RecoveryPoint::Finished,
        "the answer given is stored with it"
    );
    let stored = record.response.unwrap();
    assert_eq!(stored.status, 201);
    assert_eq!(
        stored.body, paid.bytes,
        "the stored answer is the one given"
    );

    // The payment changes: the key's answer does not.
    let refunded = send(
        s.http
            .post(s.url(&format!("/v1/payments/{payment_id}/refunds")))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", "order-late-refund")
            .json(&json!({"amount": {"value": "5.00", "currency": "RUB"}})),
    )
    .await;
    assert_eq!(refunded.status, 201);
    let replay = send(s.pay(key, &request)).await;
    assert_eq!(replay.status, 201);
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    assert_eq!(replay.bytes, paid.bytes, "one answer for the key");
    let record = s
        .store
        .key(&shop, &IdempotencyKey::new(key).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.response.unwrap().body, paid.bytes);
    assert_eq!(s.charges("order-late").await.len(), 1, "charged once");
}

on_both_stores!(a_parked_keys_settled_payment_is_answered_once_and_stored);
