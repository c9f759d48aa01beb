//! The payment lifecycle over real HTTP, on both stores: authorize, capture
//! in parts under their own keys (replayed byte for byte), refund captured
//! money only, void what is left; refusals that execute nothing; concurrent
//! captures that never exceed the authorization; a void racing captures
//! with one outcome, the same in the books and at the acquirer; a lost
//! capture answer resolved by its retry.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_testkit::on_both_stores;
use common::{Backend, OTHER_SECRET, OTHER_SHOP, TestService, send};
use serde_json::{Value, json};

fn rub(value: &str) -> Value {
    json!({"value": value, "currency": "RUB"})
}

fn post(s: &TestService, path: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(path))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .header("idempotency-key", key)
        .json(body)
}

fn capture(s: &TestService, id: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
    post(s, &format!("/v1/payments/{id}/captures"), key, body)
}

fn void(s: &TestService, id: &str, key: &str) -> reqwest::RequestBuilder {
    post(s, &format!("/v1/payments/{id}/void"), key, &json!({}))
}

fn part(value: &str) -> Value {
    json!({"amount": rub(value)})
}

/// Authorizes `value` RUB for `reference` with `token`; returns the
/// payment as answered.
async fn authorized(s: &TestService, reference: &str, value: &str, token: &str) -> Value {
    let body = json!({
        "amount": rub(value),
        "reference": reference,
        "payment_method": {"token": token},
        "capture_method": "manual",
    });
    let answer = send(s.pay(&format!("{reference}-authorize"), &body)).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    answer.json()
}

async fn payment(s: &TestService, id: &str) -> Value {
    let answer = send(s.get(&format!("/v1/payments/{id}"))).await;
    assert_eq!(answer.status, 200);
    answer.json()
}

/// The acquirer's record of the authorization of `reference`.
async fn at_acquirer(s: &TestService, reference: &str) -> chargeonce_acquirer::LedgerEntry {
    let mut charges = s.charges(reference).await;
    assert_eq!(charges.len(), 1, "one authorization at the acquirer");
    charges.remove(0)
}

async fn newcomer_authorizes_captures_twice_and_refunds(backend: Backend) {
    let s = TestService::start(backend).await;
    let made = authorized(&s, "order-1", "1500.00", "tok_ok").await;
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(made["status"], "authorized");
    assert_eq!(made["capture_method"], "manual");
    assert_eq!(made["amount_capturable"], rub("1500.00"));
    assert_eq!(made["amount_captured"], rub("0.00"));
    assert!(made["authorization_expires_at"].is_string());
    let held = at_acquirer(&s, "order-1").await;
    assert_eq!(held.taken_minor(), 0, "an authorization takes nothing");

    // Nothing captured yet: nothing to refund.
    let early = send(post(
        &s,
        &format!("/v1/payments/{id}/refunds"),
        "order-1-refund-early",
        &json!({"amount": rub("1.00")}),
    ))
    .await;
    early.assert_problem(422, "refund_exceeds_amount");

    let first = send(capture(&s, &id, "order-1-capture-1", &part("1000.00"))).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let one = first.json();
    assert!(one["id"].as_str().unwrap().starts_with("cap_"));
    assert_eq!(one["object"], "capture");
    assert_eq!(one["status"], "succeeded");
    assert_eq!(one["final"], false);
    assert_eq!(one["amount"], rub("1000.00"));
    assert!(one["provider_capture_id"].is_string());
    let location = format!("/v1/captures/{}", one["id"].as_str().unwrap());
    assert_eq!(first.header("location"), Some(location.as_str()));
    for _ in 0..3 {
        let again = send(capture(&s, &id, "order-1-capture-1", &part("1000.00"))).await;
        assert!(again.replayed());
        assert_eq!(again.bytes, first.bytes, "a replay is byte-identical");
    }
    let between = payment(&s, &id).await;
    assert_eq!(between["status"], "partially_captured");
    assert_eq!(between["amount_capturable"], rub("500.00"));
    assert_eq!(between["amount_captured"], rub("1000.00"));

    // The same key with another body is a client bug: 422, nothing moves.
    send(capture(&s, &id, "order-1-capture-1", &part("10.00")))
        .await
        .assert_problem(422, "idempotency_key_reused");
    // More than is left: refused before anything executed, not stored.
    let over = send(capture(&s, &id, "order-1-capture-2", &part("500.01"))).await;
    over.assert_problem(422, "capture_exceeds_capturable");
    assert_eq!(over.json()["amount_capturable"], rub("500.00"));

    let second = send(capture(
        &s,
        &id,
        "order-1-capture-2",
        &json!({"amount": rub("500.00"), "final": true}),
    ))
    .await;
    assert_eq!(second.status, 201, "{}", second.text());
    assert_eq!(second.json()["final"], true);
    let done = payment(&s, &id).await;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["amount_capturable"], rub("0.00"));
    assert_eq!(done["amount_captured"], rub("1500.00"));

    let refund = send(post(
        &s,
        &format!("/v1/payments/{id}/refunds"),
        "order-1-refund-1",
        &json!({"amount": rub("200.00")}),
    ))
    .await;
    assert_eq!(refund.status, 201, "{}", refund.text());
    let after = payment(&s, &id).await;
    assert_eq!(after["amount_refunded"], rub("200.00"));

    // Used up: no more captures, no void.
    send(capture(&s, &id, "order-1-capture-3", &part("1.00")))
        .await
        .assert_problem(409, "payment_not_capturable");
    send(void(&s, &id, "order-1-void"))
        .await
        .assert_problem(409, "payment_not_voidable");

    let list = send(s.get(&format!("/v1/payments/{id}/captures"))).await;
    assert_eq!(list.status, 200);
    let captures = list.json()["data"].as_array().unwrap().clone();
    assert_eq!(captures.len(), 2);
    assert_eq!(captures[1], one, "newest first");
    assert_eq!(send(s.get(&location)).await.json(), one);
    let foreign = send(
        s.http
            .get(s.url(&location))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await;
    foreign.assert_problem(404, "not_found");

    let ledger = at_acquirer(&s, "order-1").await;
    assert_eq!(ledger.captured_minor, 150_000);
    assert_eq!(ledger.refunded_minor, 20_000);
    assert!(ledger.closed);
}

async fn a_void_releases_the_rest_once(backend: Backend) {
    let s = TestService::start(backend).await;
    // Nothing captured: voided.
    let id = authorized(&s, "order-v1", "300.00", "tok_ok").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let voided = send(void(&s, &id, "order-v1-void")).await;
    assert_eq!(voided.status, 200, "{}", voided.text());
    assert_eq!(voided.json()["status"], "voided");
    assert_eq!(voided.json()["amount_capturable"], rub("0.00"));
    let again = send(void(&s, &id, "order-v1-void")).await;
    assert!(again.replayed());
    assert_eq!(again.bytes, voided.bytes);
    send(void(&s, &id, "order-v1-void-2"))
        .await
        .assert_problem(409, "payment_not_voidable");
    send(capture(&s, &id, "order-v1-capture", &json!({})))
        .await
        .assert_problem(409, "payment_not_capturable");
    assert!(at_acquirer(&s, "order-v1").await.voided);

    // Part captured: succeeded, the rest released.
    let id = authorized(&s, "order-v2", "300.00", "tok_ok").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let taken = send(capture(&s, &id, "order-v2-capture-1", &part("100.00"))).await;
    assert_eq!(taken.status, 201);
    let released = send(void(&s, &id, "order-v2-void")).await;
    assert_eq!(released.status, 200, "{}", released.text());
    let shown = released.json();
    assert_eq!(shown["status"], "succeeded");
    assert_eq!(shown["amount_captured"], rub("100.00"));
    assert_eq!(shown["amount_capturable"], rub("0.00"));
    let ledger = at_acquirer(&s, "order-v2").await;
    assert!(ledger.voided);
    assert_eq!(ledger.captured_minor, 10_000);

    // A void on a payment charged at once, a body that is not `{}`, a
    // payment of another shop: refused, nothing stored.
    let at_once = send(s.pay("order-v3-pay", &common::body("order-v3", "10.00", "tok_ok"))).await;
    let at_once_id = at_once.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(at_once.json()["capture_method"], "automatic");
    assert_eq!(at_once.json()["amount_captured"], rub("10.00"));
    send(void(&s, &at_once_id, "order-v3-void"))
        .await
        .assert_problem(409, "payment_not_voidable");
    send(capture(&s, &at_once_id, "order-v3-capture", &json!({})))
        .await
        .assert_problem(409, "payment_not_capturable");
    send(post(
        &s,
        &format!("/v1/payments/{at_once_id}/void"),
        "order-v3-void-body",
        &json!({"all": true}),
    ))
    .await
    .assert_problem(422, "invalid_request");
    let foreign = send(
        s.http
            .post(s.url(&format!("/v1/payments/{id}/void")))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET))
            .header("idempotency-key", "foreign-void")
            .json(&json!({})),
    )
    .await;
    foreign.assert_problem(404, "not_found");
    assert!(
        s.store
            .key(
                &chargeonce_core::ShopId::new(common::SHOP).unwrap(),
                &key("order-v3-void")
            )
            .await
            .unwrap()
            .is_none(),
        "a refusal stores nothing against the key"
    );
}

fn key(k: &str) -> chargeonce_core::IdempotencyKey {
    chargeonce_core::IdempotencyKey::new(k).unwrap()
}

async fn concurrent_captures_never_exceed_the_authorization(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = authorized(&s, "order-c", "1000.00", "tok_ok").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut tasks = Vec::new();
    for n in 0..20 {
        let request = capture(&s, &id, &format!("order-c-capture-{n}"), &part("100.00"));
        tasks.push(tokio::spawn(send(request)));
    }
    let mut captured = 0;
    for task in tasks {
        let answer = task.await.unwrap();
        match answer.status {
            201 => captured += 1,
            // Too much while parts are in flight; used up once they ended.
            422 => answer.assert_problem(422, "capture_exceeds_capturable"),
            409 => answer.assert_problem(409, "payment_not_capturable"),
            other => panic!("unexpected {other}: {}", answer.text()),
        }
    }
    assert_eq!(captured, 10, "exactly the authorization, in 100.00 parts");
    let shown = payment(&s, &id).await;
    assert_eq!(shown["amount_captured"], rub("1000.00"));
    assert_eq!(shown["status"], "succeeded", "used up by parts");
    let ledger = at_acquirer(&s, "order-c").await;
    assert_eq!(ledger.captured_minor, 100_000);
}

async fn a_void_racing_captures_leaves_one_outcome(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = authorized(&s, "order-r", "500.00", "tok_ok").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let captures: Vec<_> = (0..4)
        .map(|n| {
            let request = capture(&s, &id, &format!("order-r-capture-{n}"), &part("100.00"));
            tokio::spawn(send(request))
        })
        .collect();
    let voided = tokio::spawn(send(void(&s, &id, "order-r-void")));
    let mut captured_minor = 0;
    for task in captures {
        let answer = task.await.unwrap();
        match answer.status {
            201 => captured_minor += 10_000,
            409 => {
                let code = answer.json()["code"].as_str().unwrap().to_owned();
                assert!(
                    code == "payment_not_capturable" || code == "authorization_busy",
                    "{}",
                    answer.text()
                );
            }
            other => panic!("unexpected {other}: {}", answer.text()),
        }
    }
    let void_answer = voided.await.unwrap();
    let ledger = at_acquirer(&s, "order-r").await;
    let shown = payment(&s, &id).await;
    match void_answer.status {
        200 => {
            assert!(ledger.voided, "the void won at the acquirer too");
            let status = if captured_minor == 0 {
                "voided"
            } else {
                "succeeded"
            };
            assert_eq!(shown["status"], status);
        }
        409 => {
            void_answer.assert_problem(409, "authorization_busy");
            assert!(!ledger.voided, "a refused void released nothing");
        }
        other => panic!("unexpected void {other}: {}", void_answer.text()),
    }
    assert_eq!(ledger.captured_minor, captured_minor);
    let captured = render_minor(&shown["amount_captured"]);
    assert_eq!(
        captured, captured_minor,
        "the books agree with the acquirer"
    );
}

fn render_minor(amount: &Value) -> i64 {
    let value = amount["value"].as_str().unwrap();
    let (whole, cents) = value.split_once('.').unwrap();
    whole.parse::<i64>().unwrap() * 100 + cents.parse::<i64>().unwrap()
}

async fn a_lost_capture_answer_is_resolved_by_its_retry(backend: Backend) {
    let s = TestService::start(backend).await;
    // `tok_timeout` loses the answer of each first execution: the
    // authorization's, then the capture's. Retries with the same keys
    // (after the Retry-After the 202 gives) get them, executed once.
    let body = json!({
        "amount": rub("800.00"),
        "reference": "order-t",
        "payment_method": {"token": "tok_timeout"},
        "capture_method": "manual",
    });
    let made = until_definite(|| send(s.pay("order-t-authorize", &body))).await;
    assert_eq!(made.status, 201, "{}", made.text());
    let made = made.json();
    assert_eq!(made["status"], "authorized");
    let id = made["id"].as_str().unwrap().to_owned();

    let first = send(capture(&s, &id, "order-t-capture-1", &part("300.00"))).await;
    assert_eq!(first.status, 202, "unknown outcome: {}", first.text());
    assert_eq!(first.json()["status"], "pending");
    let held = payment(&s, &id).await;
    assert_eq!(
        held["amount_capturable"],
        rub("500.00"),
        "a capture of unknown outcome keeps its amount reserved"
    );
    let retried =
        until_definite(|| send(capture(&s, &id, "order-t-capture-1", &part("300.00")))).await;
    assert_eq!(retried.status, 201, "{}", retried.text());
    assert_eq!(retried.json()["status"], "succeeded");
    let ledger = at_acquirer(&s, "order-t").await;
    assert_eq!(ledger.captured_minor, 30_000, "captured once");
    assert_eq!(payment(&s, &id).await["amount_captured"], rub("300.00"));
}

/// Retries a request while it answers 202 or 409 (as a client does, after
/// its `Retry-After`), up to 20 times.
async fn until_definite<F, Fut>(mut request: F) -> common::Answer
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = common::Answer>,
{
    for _ in 0..20 {
        let answer = request().await;
        if answer.status != 202 && answer.status != 409 {
            return answer;
        }
        let wait = answer
            .header("retry-after")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
    }
    panic!("no definite answer after 20 tries");
}

on_both_stores!(
    newcomer_authorizes_captures_twice_and_refunds,
    a_void_releases_the_rest_once,
    concurrent_captures_never_exceed_the_authorization,
    a_void_racing_captures_leaves_one_outcome,
    a_lost_capture_answer_is_resolved_by_its_retry,
);
