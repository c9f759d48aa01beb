//! `POST /v1/payments/{id}/cancel` (issue 31): a pending payment ends
//! without charging the customer. The charge is looked up once the settle
//! window has passed, never sent again: found, it is kept and refunded in
//! full (one refund however many cancels); not found, the payment is
//! `canceled` and its order free, and a charge that lands later is refunded
//! by the reconciler and shown in the payment's history. The completer
//! gives up on a payment pending too long the same way.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_testkit::ServiceBuilder;
use chargeonce_testkit::on_both_stores;
use chargeonce_workers::completer::{CompleterConfig, complete_once};
use chargeonce_workers::reconciler::ReconcilerConfig;
use common::{Answer, Backend, SECRET, SHOP, TestService, body, send};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_millis(1500);

fn cancel(s: &TestService, payment_id: &str, key: &str) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(&format!("/v1/payments/{payment_id}/cancel")))
        .basic_auth(SHOP, Some(SECRET))
        .header("idempotency-key", key)
        .json(&json!({}))
}

/// Retries a cancel with its key until it is answered for good (each 202
/// says when to come back); the answer and how many 202s came first.
async fn cancel_until_ended(s: &TestService, payment_id: &str, key: &str) -> (Answer, usize) {
    for pending in 0..60 {
        let answer = send(cancel(s, payment_id, key)).await;
        if answer.status != 202 {
            return (answer, pending);
        }
        // The payment still pending, or kept and its refund pending.
        assert_ne!(answer.json()["status"], "canceled");
        let wait: u64 = answer.header("retry-after").unwrap().parse().unwrap();
        tokio::time::sleep(Duration::from_millis(wait.clamp(1, 2) * 250)).await;
    }
    panic!("the cancel never ended");
}

async fn history_types(s: &TestService, payment_id: &str) -> Vec<Value> {
    let history = send(s.get(&format!("/v1/payments/{payment_id}/history"))).await;
    assert_eq!(history.status, 200);
    history.json()["entries"].as_array().unwrap().clone()
}

fn service(backend: Backend) -> ServiceBuilder {
    TestService::builder(backend).engine(|config| chargeonce_core::EngineConfig {
        acquirer_timeout: Duration::from_millis(300),
        settle_window: SETTLE,
        ..config
    })
}

/// The charge is still in flight at the acquirer when the cancel looks it
/// up: nothing found, the payment is canceled; the charge lands later and
/// the reconciler refunds it, on the payment's history.
async fn a_cancel_that_finds_nothing_cancels_and_a_late_charge_is_refunded(backend: Backend) {
    let s = service(backend).slow(Duration::from_secs(4)).start().await;
    let request = body("order-c1", "15.00", "tok_late");
    let first = send(s.pay("pay-c1", &request)).await;
    assert_eq!(first.status, 202, "unknown outcome");
    let id = first.json()["id"].as_str().unwrap().to_owned();

    let (ended, pending) = cancel_until_ended(&s, &id, "cancel-c1").await;
    assert!(pending >= 1, "not looked up before the settle window");
    assert_eq!(
        ended.status,
        200,
        "{}",
        String::from_utf8_lossy(&ended.bytes)
    );
    assert_eq!(ended.json()["status"], "canceled");
    assert!(
        s.charges("order-c1").await.is_empty(),
        "nothing charged yet"
    );

    // Its answer is stored: a repeat replays it byte for byte.
    let replay = send(cancel(&s, &id, "cancel-c1")).await;
    assert!(replay.replayed());
    assert_eq!(replay.bytes, ended.bytes);
    // The payment's own key answers that it was canceled, for good.
    let paid = send(s.pay("pay-c1", &request)).await;
    paid.assert_problem(409, "payment_canceled");
    assert_eq!(paid.json()["payment"]["status"], "canceled");
    // A second cancel, under another key, answers the same payment.
    let again = send(cancel(&s, &id, "cancel-c1-again")).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["status"], "canceled");

    // The first attempt lands late anyway.
    for _ in 0..100 {
        if !s.charges("order-c1").await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let charges = s.charges("order-c1").await;
    assert_eq!(charges.len(), 1, "the late charge");
    let config = ReconcilerConfig::default();
    s.reconciler().reconcile_once(&config).await.unwrap();
    let charges = s.charges("order-c1").await;
    assert_eq!(
        charges[0].refunded_minor, 1500,
        "refunded in full: {charges:?}"
    );
    let types = history_types(&s, &id).await;
    let kinds: Vec<&str> = types.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"cancel_requested"), "{kinds:?}");
    assert!(kinds.contains(&"finding"), "{kinds:?}");
    assert!(kinds.contains(&"finding_resolved"), "{kinds:?}");
    // A second pass refunds nothing more.
    s.reconciler().reconcile_once(&config).await.unwrap();
    assert_eq!(s.charges("order-c1").await[0].refunded_minor, 1500);

    // The order is free: a new key pays it.
    let repaid = send(s.pay("pay-c1-new", &body("order-c1", "15.00", "tok_ok"))).await;
    assert_eq!(repaid.status, 201);
}

/// The charge went through but its answer was lost: the cancel's look-up
/// finds it, the payment is kept succeeded and refunded in full, once,
/// whatever the number of cancels.
async fn a_cancel_that_finds_the_charge_refunds_it_once(backend: Backend) {
    let s = service(backend).start().await;
    let request = body("order-c2", "20.00", "tok_timeout");
    let first = send(s.pay("pay-c2", &request)).await;
    assert_eq!(first.status, 202, "the answer was lost");
    let id = first.json()["id"].as_str().unwrap().to_owned();

    let (a, b) = tokio::join!(
        cancel_until_ended(&s, &id, "cancel-c2-a"),
        cancel_until_ended(&s, &id, "cancel-c2-b")
    );
    for (ended, _) in [&a, &b] {
        assert_eq!(
            ended.status,
            200,
            "{}",
            String::from_utf8_lossy(&ended.bytes)
        );
        assert_eq!(ended.json()["status"], "succeeded");
        assert_eq!(ended.json()["amount_refunded"]["value"], "20.00");
        assert_eq!(ended.json()["refund_status"], "refunded");
    }
    let refunds = send(s.get(&format!("/v1/payments/{id}/refunds"))).await;
    assert_eq!(
        refunds.json()["data"].as_array().unwrap().len(),
        1,
        "one refund"
    );
    let charges = s.charges("order-c2").await;
    assert_eq!(charges.len(), 1, "charged once");
    assert_eq!(charges[0].refunded_minor, 2000, "given back in full");
    // The payment's key got the charge's answer.
    let paid = send(s.pay("pay-c2", &request)).await;
    assert_eq!(paid.status, 201);
    assert!(paid.replayed());
}

/// A payment final before the cancel came cannot be canceled; a payment
/// nobody has, or a body that is not `{}`, is refused with nothing stored.
async fn a_final_payment_is_not_cancelable(backend: Backend) {
    let s = service(backend).start().await;
    let paid = send(s.pay("pay-c3", &body("order-c3", "5.00", "tok_ok"))).await;
    assert_eq!(paid.status, 201);
    let id = paid.json()["id"].as_str().unwrap().to_owned();
    let refused = send(cancel(&s, &id, "cancel-c3")).await;
    refused.assert_problem(409, "payment_not_cancelable");
    assert_eq!(refused.json()["payment"]["status"], "succeeded");
    let replay = send(cancel(&s, &id, "cancel-c3")).await;
    assert!(replay.replayed());
    assert_eq!(replay.bytes, refused.bytes);

    let declined = send(s.pay("pay-c3d", &body("order-c3d", "5.00", "tok_declined"))).await;
    let declined_id = declined.json()["payment"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    send(cancel(&s, &declined_id, "cancel-c3d"))
        .await
        .assert_problem(409, "payment_not_cancelable");

    let nobody = "pay_0192f0c4a0b07c8e9a1b2c3d4e5f6a7b";
    send(cancel(&s, nobody, "cancel-c3x"))
        .await
        .assert_problem(404, "not_found");
    send(cancel(&s, "pay_nope", "cancel-c3y"))
        .await
        .assert_problem(404, "not_found");
    let odd = send(
        s.http
            .post(s.url(&format!("/v1/payments/{id}/cancel")))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", "cancel-c3z")
            .json(&json!({"reason": "x"})),
    )
    .await;
    odd.assert_problem(422, "invalid_request");
    // The same key for another payment's cancel is a misuse.
    send(cancel(&s, nobody, "cancel-c3"))
        .await
        .assert_problem(422, "idempotency_key_reused");
}

/// The completer gives up on a payment still pending past its give-up
/// time: it cancels it the same way (nothing found: `canceled`).
async fn the_completer_gives_up_on_a_payment_pending_too_long(backend: Backend) {
    let s = service(backend).slow(Duration::from_secs(30)).start().await;
    let first = send(s.pay("pay-c4", &body("order-c4", "7.00", "tok_late"))).await;
    assert_eq!(first.status, 202);
    let id = first.json()["id"].as_str().unwrap().to_owned();
    let config = CompleterConfig {
        idle: Duration::ZERO,
        give_up_after: Duration::ZERO,
        ..CompleterConfig::default()
    };
    let mut status = Value::Null;
    for _ in 0..40 {
        complete_once(&s.engine, &config).await.unwrap();
        let payment = send(s.get(&format!("/v1/payments/{id}"))).await;
        status = payment.json()["status"].clone();
        if status != "pending" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(status, "canceled");
    let types = history_types(&s, &id).await;
    let given_up = types
        .iter()
        .find(|e| e["type"] == "cancel_requested")
        .unwrap();
    assert!(given_up.get("key").is_none(), "nobody's key: {given_up}");
    let answer = send(s.pay("pay-c4", &body("order-c4", "7.00", "tok_late"))).await;
    answer.assert_problem(409, "payment_canceled");
}

on_both_stores!(
    a_cancel_that_finds_nothing_cancels_and_a_late_charge_is_refunded,
    a_cancel_that_finds_the_charge_refunds_it_once,
    a_final_payment_is_not_cancelable,
    the_completer_gives_up_on_a_payment_pending_too_long,
);
