//! The workers' side of the payment lifecycle, on both stores: the expirer
//! releases authorizations nobody captured in time (once, at the acquirer
//! too), and the completer ends captures and voids nobody retries.

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use chargeonce_testkit::{Backend, TestService, on_both_stores, send};
use chargeonce_workers::completer::{CompleterConfig, complete_once};
use chargeonce_workers::expirer::{ExpiryPass, expire_once};
use serde_json::{Value, json};

fn rub(value: &str) -> Value {
    json!({"value": value, "currency": "RUB"})
}

fn post(s: &TestService, path: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(path))
        .basic_auth(chargeonce_testkit::SHOP, Some(chargeonce_testkit::SECRET))
        .header("idempotency-key", key)
        .json(body)
}

/// Authorizes `value` RUB for `reference` with `token`; returns the
/// payment's id once authorized.
async fn authorize(s: &TestService, reference: &str, value: &str) -> String {
    let body = json!({
        "amount": rub(value),
        "reference": reference,
        "payment_method": {"token": "tok_ok"},
        "capture_method": "manual",
    });
    let answer = send(s.pay(&format!("{reference}-authorize"), &body)).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(answer.json()["status"], "authorized");
    answer.json()["id"].as_str().unwrap().to_owned()
}

async fn payment(s: &TestService, id: &str) -> Value {
    send(s.get(&format!("/v1/payments/{id}"))).await.json()
}

/// A service whose authorizations expire at once (the expirer decides by
/// the store's clock, so no test waits for time to pass).
async fn expiring_at_once(backend: Backend) -> TestService {
    TestService::builder(backend)
        .engine(|config| chargeonce_core::EngineConfig {
            authorization_ttl: Duration::ZERO,
            ..config
        })
        .start()
        .await
}

async fn an_expired_authorization_is_released_once(backend: Backend) {
    let s = expiring_at_once(backend).await;
    let untouched = authorize(&s, "order-e1", "400.00").await;
    let partly = authorize(&s, "order-e2", "400.00").await;
    let taken = send(post(
        &s,
        &format!("/v1/payments/{partly}/captures"),
        "order-e2-capture-1",
        &json!({"amount": rub("150.00")}),
    ))
    .await;
    assert_eq!(taken.status, 201, "{}", taken.text());

    let pass = expire_once(&s.engine, 100).await.unwrap();
    assert_eq!(
        pass,
        ExpiryPass {
            released: 2,
            ..ExpiryPass::default()
        }
    );
    let expired = payment(&s, &untouched).await;
    assert_eq!(expired["status"], "expired");
    assert_eq!(expired["amount_capturable"], rub("0.00"));
    let finished = payment(&s, &partly).await;
    assert_eq!(
        finished["status"], "succeeded",
        "part captured, the rest released"
    );
    assert_eq!(finished["amount_captured"], rub("150.00"));
    for reference in ["order-e1", "order-e2"] {
        let charge = s.charges(reference).await.remove(0);
        assert!(charge.voided, "{reference} released at the acquirer");
    }
    let late = send(post(
        &s,
        &format!("/v1/payments/{untouched}/captures"),
        "order-e1-capture-late",
        &json!({}),
    ))
    .await;
    late.assert_problem(409, "payment_not_capturable");
    assert_eq!(late.json()["payment_status"], "expired");

    // The void the expirer asked for is in the payment's history, before
    // the release's end.
    let history = send(s.get(&format!("/v1/payments/{untouched}/history")))
        .await
        .json();
    let kinds: Vec<(String, String)> = history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                e["call"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let call = kinds
        .iter()
        .position(|k| k == &("acquirer_call".to_owned(), "void".to_owned()));
    let ended = kinds.iter().position(|(kind, _)| kind == "release_ended");
    assert!(call.is_some() && call < ended, "{kinds:?}");
    // A second pass (another instance's) finds nothing to do.
    let again = expire_once(&s.engine, 100).await.unwrap();
    assert_eq!(again, ExpiryPass::default());
    let events = send(s.get("/v1/events?type=payment.expired")).await.json();
    let expired_events = events["data"].as_array().unwrap();
    assert_eq!(expired_events.len(), 2, "{events}");
}

async fn a_capture_in_flight_holds_the_expiry_off(backend: Backend) {
    let s = TestService::builder(backend)
        .engine(|config| chargeonce_core::EngineConfig {
            authorization_ttl: Duration::ZERO,
            ..config
        })
        .slow(Duration::from_millis(700))
        .start()
        .await;
    // `tok_slow` answers every call late: the capture is in flight while
    // the expirer passes.
    let body = json!({
        "amount": rub("400.00"),
        "reference": "order-f",
        "payment_method": {"token": "tok_slow"},
        "capture_method": "manual",
    });
    let made = send(s.pay("order-f-authorize", &body)).await;
    assert_eq!(made.status, 201, "{}", made.text());
    let id = made.json()["id"].as_str().unwrap().to_owned();
    let capture = tokio::spawn(send(post(
        &s,
        &format!("/v1/payments/{id}/captures"),
        "order-f-capture-1",
        &json!({"amount": rub("100.00")}),
    )));
    // The capture's reservation shows once its claim committed.
    let mut reserved = false;
    for _ in 0..200 {
        if payment(&s, &id).await["amount_capturable"] == rub("300.00") {
            reserved = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(reserved, "the capture's claim committed");
    let held_off = expire_once(&s.engine, 100).await.unwrap();
    assert_eq!(
        held_off,
        ExpiryPass::default(),
        "nothing released mid-capture"
    );
    let answer = capture.await.unwrap();
    assert_eq!(answer.status, 201, "{}", answer.text());
    let pass = expire_once(&s.engine, 100).await.unwrap();
    assert_eq!(pass.released, 1);
    assert_eq!(payment(&s, &id).await["status"], "succeeded");
    let charge = s.charges("order-f").await.remove(0);
    assert_eq!(charge.captured_minor, 10_000);
    assert!(charge.voided);
}

async fn the_completer_ends_a_capture_and_a_void_nobody_retries(backend: Backend) {
    let s = TestService::builder(backend)
        .timing(chargeonce_core::KeyTiming {
            lease: Duration::from_millis(200),
            ttl: Duration::from_secs(3600),
        })
        .start()
        .await;
    // `tok_timeout` loses each first answer: the authorization's (retried
    // here), then the capture's and the void's (left to the completer).
    let body = json!({
        "amount": rub("900.00"),
        "reference": "order-c",
        "payment_method": {"token": "tok_timeout"},
        "capture_method": "manual",
    });
    let mut id = String::new();
    for _ in 0..10 {
        let answer = send(s.pay("order-c-authorize", &body)).await;
        if answer.status == 201 {
            id = answer.json()["id"].as_str().unwrap().to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(!id.is_empty(), "authorized");
    let lost = send(post(
        &s,
        &format!("/v1/payments/{id}/captures"),
        "order-c-capture-1",
        &json!({"amount": rub("200.00")}),
    ))
    .await;
    assert_eq!(lost.status, 202, "{}", lost.text());
    let capture_id = lost.json()["id"].as_str().unwrap().to_owned();

    let config = CompleterConfig {
        idle: Duration::ZERO,
        ..CompleterConfig::default()
    };
    let mut ended = false;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        complete_once(&s.engine, &config).await.unwrap();
        let shown = send(s.get(&format!("/v1/captures/{capture_id}")))
            .await
            .json();
        if shown["status"] == "succeeded" {
            ended = true;
            break;
        }
    }
    assert!(ended, "the completer ended the capture");
    let replay = send(post(
        &s,
        &format!("/v1/payments/{id}/captures"),
        "order-c-capture-1",
        &json!({"amount": rub("200.00")}),
    ))
    .await;
    assert!(
        replay.replayed(),
        "its answer was stored: {}",
        replay.text()
    );
    assert_eq!(replay.json()["status"], "succeeded");

    let lost_void = send(post(
        &s,
        &format!("/v1/payments/{id}/void"),
        "order-c-void",
        &json!({}),
    ))
    .await;
    assert_eq!(lost_void.status, 202, "{}", lost_void.text());
    let mut released = false;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        complete_once(&s.engine, &config).await.unwrap();
        if payment(&s, &id).await["amount_capturable"] == rub("0.00") {
            released = true;
            break;
        }
    }
    assert!(released, "the completer ended the void");
    let charge = s.charges("order-c").await.remove(0);
    assert_eq!(charge.captured_minor, 20_000, "captured once");
    assert!(charge.voided, "voided once");
    assert_eq!(payment(&s, &id).await["status"], "succeeded");
}

on_both_stores!(
    an_expired_authorization_is_released_once,
    a_capture_in_flight_holds_the_expiry_off,
    the_completer_ends_a_capture_and_a_void_nobody_retries,
);
