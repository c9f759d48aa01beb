//! `GET /v1/idempotency-keys/{key}` over real HTTP, on both stores: a key
//! in progress (its holder and deadline, never its token), finished (its
//! status and payment), repeated, a refund's key, and 404s.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_core::{
    CardToken, ClaimRequest, Fingerprint, IdempotencyKey, KeyTiming, Money, NewPayment,
    PaymentRequest, Reference, ShopId,
};
use chargeonce_testkit::on_both_stores;
use common::{Backend, OTHER_SECRET, OTHER_SHOP, SHOP, TestService, body, send};
use serde_json::{Value, json};

async fn key(s: &TestService, key: &str) -> Value {
    let answer = send(s.get(&format!("/v1/idempotency-keys/{key}"))).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.bytes)
    );
    answer.json()
}

async fn a_finished_key_shows_its_answer_and_repeats(backend: Backend) {
    let s = TestService::start(backend).await;
    let created = send(s.pay("k-1", &body("order-1", "100.00", "tok_ok"))).await;
    assert_eq!(created.status, 201);
    let payment = created.json();
    let info = key(&s, "k-1").await;
    assert_eq!(info["object"], "idempotency_key");
    assert_eq!(info["key"], "k-1");
    assert_eq!(info["state"], "finished");
    assert_eq!(info["recovery_point"], "finished");
    assert_eq!(info["response_status"], 201);
    assert_eq!(info["payment_id"], payment["id"]);
    assert_eq!(info["refund_id"], Value::Null);
    assert_eq!(info["lease"], Value::Null);
    assert_eq!(info["request"]["method"], "POST");
    assert_eq!(info["request"]["path"], "/v1/payments");
    let fingerprint = info["request"]["fingerprint"].as_str().unwrap();
    assert_eq!(fingerprint.len(), 64);
    assert!(fingerprint.bytes().all(|b| b.is_ascii_hexdigit()));
    for at in ["created_at", "expires_at"] {
        let at = info[at].as_str().unwrap();
        time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).unwrap();
    }
    assert!(info.get("lease_token").is_none());
    assert!(!info.to_string().contains("token\""));
    assert_eq!(info["repeats"], 0);
    assert_eq!(info["last_repeat_at"], Value::Null);
}

async fn a_key_in_progress_shows_its_holder_and_deadline(backend: Backend) {
    let s = TestService::start(backend).await;
    let shop = ShopId::new(SHOP).unwrap();
    let k = IdempotencyKey::new("held/1").unwrap();
    let request = json!({"b": 1});
    s.store
        .claim_payment(
            &ClaimRequest {
                shop_id: shop.clone(),
                key: k.clone(),
                fingerprint: Fingerprint::compute("POST", "/v1/payments", &request).unwrap(),
                method: "POST".into(),
                path: "/v1/payments".into(),
            },
            &NewPayment::new(
                shop,
                k,
                PaymentRequest {
                    amount: Money::parse("5.00", "RUB").unwrap(),
                    reference: Reference::new("order-held").unwrap(),
                    token: CardToken::new("tok_ok").unwrap(),
                    metadata: Default::default(),
                    capture_method: chargeonce_core::CaptureMethod::Automatic,
                },
            ),
            KeyTiming {
                lease: Duration::from_secs(30),
                ttl: Duration::from_secs(3600),
            },
        )
        .await
        .unwrap();
    // The `/` of the key is percent-encoded in the path.
    let info = key(&s, "held%2F1").await;
    assert_eq!(info["key"], "held/1");
    assert_eq!(info["state"], "in_progress");
    assert_eq!(info["recovery_point"], "payment_created");
    assert_eq!(info["response_status"], Value::Null);
    let lease = &info["lease"];
    assert!(
        lease["holder"].as_str().is_some_and(|h| !h.is_empty()),
        "{info}"
    );
    assert!(lease["expires_at"].is_string());
    assert_eq!(
        lease.as_object().unwrap().len(),
        2,
        "holder and deadline only"
    );
    assert_eq!(
        (info["repeats"].clone(), info["last_repeat_at"].clone()),
        (json!(0), Value::Null)
    );

    // A repeat (with another body: a 422 mismatch) reaches the store: counted.
    let reused = send(s.pay("held/1", &body("order-held", "5.00", "tok_ok"))).await;
    reused.assert_problem(422, "idempotency_key_reused");
    let info = key(&s, "held%2F1").await;
    assert_eq!(info["repeats"], 1, "{info}");
    assert!(info["last_repeat_at"].is_string());
}

async fn a_refund_key_names_its_refund(backend: Backend) {
    let s = TestService::start(backend).await;
    let payment = send(s.pay("k-pay", &body("order-1", "100.00", "tok_ok")))
        .await
        .json();
    let id = payment["id"].as_str().unwrap();
    let refund = send(
        s.http
            .post(s.url(&format!("/v1/payments/{id}/refunds")))
            .basic_auth(SHOP, Some(common::SECRET))
            .header("idempotency-key", "k-refund")
            .json(&json!({})),
    )
    .await;
    assert_eq!(refund.status, 201);
    let info = key(&s, "k-refund").await;
    assert_eq!(info["refund_id"], refund.json()["id"]);
    assert_eq!(info["payment_id"], payment["id"]);
    assert_eq!(
        info["request"]["path"],
        format!("/v1/payments/{id}/refunds")
    );
}

async fn unknown_foreign_and_invalid_keys_are_404(backend: Backend) {
    let s = TestService::start(backend).await;
    send(s.pay("k-1", &body("order-1", "100.00", "tok_ok"))).await;
    let theirs = send(
        s.http
            .get(s.url("/v1/idempotency-keys/k-1"))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await;
    theirs.assert_problem(404, "not_found");
    for path in [
        "/v1/idempotency-keys/nope",
        "/v1/idempotency-keys/%ff",
        "/v1/idempotency-keys/a%20b",
        "/v1/idempotency-keys/%C3%A9",
    ] {
        send(s.get(path)).await.assert_problem(404, "not_found");
    }
    let too_long = "x".repeat(256);
    send(s.get(&format!("/v1/idempotency-keys/{too_long}")))
        .await
        .assert_problem(404, "not_found");
    send(s.http.get(s.url("/v1/idempotency-keys/k-1")))
        .await
        .assert_problem(401, "unauthorized");
}

on_both_stores!(
    a_finished_key_shows_its_answer_and_repeats,
    a_key_in_progress_shows_its_holder_and_deadline,
    a_refund_key_names_its_refund,
    unknown_foreign_and_invalid_keys_are_404,
);
