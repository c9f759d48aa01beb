//! Test mode at the HTTP layer, on both stores: a `test` key's requests
//! make and see only the shop's test-mode objects, and its money goes to
//! test mode's simulator, never to the live acquirer.
//!
//! - A test payment and a live payment with the same idempotency key and
//!   order reference are two payments (each replayed to its own mode); the
//!   live acquirer's ledger holds only the live one, the test simulator's
//!   only the test one; each mode's look-ups, lists and events hold only
//!   its own objects, each marked `livemode`.
//! - A test key makes, lists and rolls test keys only (the same
//!   idempotency key in the two modes makes two keys), and test webhook
//!   endpoints that live mode never lists.
//! - Each mode's reconciler compares that mode's payments with that mode's
//!   acquirer: a test payment left pending is settled from the test ledger
//!   and is never a finding of live mode.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_core::ShopId;
use chargeonce_core::api_key::{Mode, Scope};
use chargeonce_core::keyring::{self, KeyRequest};
use chargeonce_core::webhook::{SIGNATURE_HEADER, WebhookSecret, sign};
use chargeonce_testkit::on_both_stores;
use chargeonce_workers::reconciler::ReconcilerConfig;
use common::{Backend, SECRET, SHOP, TestService, WEBHOOK_SECRET, body, send};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// A full test-mode key of shop A; its secret.
async fn test_key(s: &TestService) -> String {
    let shop = ShopId::new(SHOP).unwrap();
    let request = KeyRequest {
        mode: Mode::Test,
        scope: Scope::Full,
        description: Some("test mode".into()),
        expires_at: None,
    };
    let made = keyring::make(s.store.as_ref(), &shop, request)
        .await
        .unwrap()
        .unwrap();
    let secret = made.secret.expose().to_owned();
    assert!(secret.starts_with("sk_test_"), "{secret}");
    secret
}

fn pay(s: &TestService, secret: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
    s.http
        .post(s.url("/v1/payments"))
        .basic_auth(SHOP, Some(secret))
        .header("Idempotency-Key", key)
        .json(body)
}

fn get(s: &TestService, secret: &str, path: &str) -> reqwest::RequestBuilder {
    s.http.get(s.url(path)).basic_auth(SHOP, Some(secret))
}

fn post(
    s: &TestService,
    secret: &str,
    path: &str,
    key: &str,
    body: Value,
) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(path))
        .basic_auth(SHOP, Some(secret))
        .header("Idempotency-Key", key)
        .json(&body)
}

/// The ids of a list answer's `data`.
fn ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn one_key_and_reference_make_a_payment_in_each_mode(backend: Backend) {
    let s = TestService::builder(backend).sim_routes().start().await;
    let test = test_key(&s).await;
    let order = body("order-tm1", "15.00", "tok_ok");

    let live_paid = send(pay(&s, SECRET, "tm-key-1", &order)).await;
    assert_eq!(live_paid.status, 201, "{}", live_paid.text());
    let test_paid = send(pay(&s, &test, "tm-key-1", &order)).await;
    assert_eq!(test_paid.status, 201, "{}", test_paid.text());
    let (live, tested) = (live_paid.json(), test_paid.json());
    assert_ne!(live["id"], tested["id"], "two payments");
    assert_eq!(
        (live["livemode"].clone(), tested["livemode"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(tested["shop_id"], SHOP, "the shop's own id in either mode");
    assert_eq!(tested["status"], "succeeded");

    // Each mode's repeat answers its own payment.
    let live_again = send(pay(&s, SECRET, "tm-key-1", &order)).await;
    let test_again = send(pay(&s, &test, "tm-key-1", &order)).await;
    assert_eq!(live_again.json()["id"], live["id"]);
    assert_eq!(test_again.json()["id"], tested["id"]);
    assert_eq!(test_again.header("idempotent-replayed"), Some("true"));

    // The live acquirer never saw the test payment; test mode's simulator
    // saw only it.
    let live_charges = s.charges("order-tm1").await;
    assert_eq!(live_charges.len(), 1, "{live_charges:?}");
    assert_eq!(
        live_charges[0].payment_id.as_str(),
        live["id"].as_str().unwrap()
    );
    let mut test_charges = s.test_sim.ledger().await.unwrap();
    test_charges.retain(|c| c.reference.as_str() == "order-tm1");
    assert_eq!(test_charges.len(), 1, "{test_charges:?}");
    assert_eq!(
        test_charges[0].payment_id.as_str(),
        tested["id"].as_str().unwrap()
    );

    // Look-ups and lists see only their mode.
    let test_id = tested["id"].as_str().unwrap();
    let live_id = live["id"].as_str().unwrap();
    send(get(&s, SECRET, &format!("/v1/payments/{test_id}")))
        .await
        .assert_problem(404, "not_found");
    send(get(&s, &test, &format!("/v1/payments/{live_id}")))
        .await
        .assert_problem(404, "not_found");
    let shown = send(get(&s, &test, &format!("/v1/payments/{test_id}"))).await;
    assert_eq!(shown.json()["livemode"], false);
    assert_eq!(
        ids(&send(get(&s, SECRET, "/v1/payments")).await.json()),
        [live_id]
    );
    assert_eq!(
        ids(&send(get(&s, &test, "/v1/payments")).await.json()),
        [test_id]
    );

    // Each mode's events: its own payment's, marked.
    let events = send(get(&s, &test, "/v1/events")).await.json();
    let data = events["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{events}");
    assert_eq!(data[0]["payment_id"], test_id);
    assert_eq!(data[0]["livemode"], false);
    let live_events = send(get(&s, SECRET, "/v1/events")).await.json();
    assert_eq!(live_events["data"][0]["payment_id"], live_id);
    assert_eq!(live_events["data"][0]["livemode"], true);

    // A refund of the test payment goes to the test simulator too.
    let refunded = send(post(
        &s,
        &test,
        &format!("/v1/payments/{test_id}/refunds"),
        "tm-refund-1",
        json!({"amount": {"value": "5.00", "currency": "RUB"}}),
    ))
    .await;
    assert_eq!(refunded.status, 201, "{}", refunded.text());
    assert_eq!(refunded.json()["livemode"], false);
    assert_eq!(
        s.charges("order-tm1").await[0].refunded_minor,
        0,
        "live untouched"
    );
    let mut test_charges = s.test_sim.ledger().await.unwrap();
    test_charges.retain(|c| c.reference.as_str() == "order-tm1");
    assert_eq!(test_charges[0].refunded_minor, 500);
}

async fn a_test_key_manages_only_test_keys_and_endpoints(backend: Backend) {
    let s = TestService::start(backend).await;
    let test = test_key(&s).await;

    // The same idempotency key in the two modes makes two keys.
    let made_test = send(post(
        &s,
        &test,
        "/v1/api-keys",
        "tm-make",
        json!({"scope": "read_only"}),
    ))
    .await;
    assert_eq!(made_test.status, 201, "{}", made_test.text());
    let made_live = send(post(
        &s,
        SECRET,
        "/v1/api-keys",
        "tm-make",
        json!({"scope": "read_only"}),
    ))
    .await;
    assert_eq!(made_live.status, 201, "{}", made_live.text());
    let (made_test, made_live) = (made_test.json(), made_live.json());
    assert_ne!(made_test["id"], made_live["id"]);
    assert_eq!(made_test["livemode"], false);
    assert!(
        made_test["secret"]
            .as_str()
            .unwrap()
            .starts_with("sk_test_")
    );
    assert_eq!(made_live["livemode"], true);
    assert!(
        made_live["secret"]
            .as_str()
            .unwrap()
            .starts_with("sk_live_")
    );

    // Each mode lists and reaches its own keys only.
    let test_keys = send(get(&s, &test, "/v1/api-keys")).await.json();
    assert!(
        test_keys["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["livemode"] == false)
    );
    assert_eq!(
        test_keys["data"].as_array().unwrap().len(),
        2,
        "{test_keys}"
    );
    let live_keys = send(get(&s, SECRET, "/v1/api-keys")).await.json();
    assert!(
        live_keys["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["livemode"] == true)
    );
    let live_id = made_live["id"].as_str().unwrap();
    send(get(&s, &test, &format!("/v1/api-keys/{live_id}")))
        .await
        .assert_problem(404, "not_found");
    send(post(
        &s,
        &test,
        &format!("/v1/api-keys/{live_id}/revoke"),
        "tm-revoke",
        json!({}),
    ))
    .await
    .assert_problem(404, "not_found");
    send(post(
        &s,
        &test,
        &format!("/v1/api-keys/{live_id}/roll"),
        "tm-roll",
        json!({}),
    ))
    .await
    .assert_problem(404, "not_found");

    // Webhook endpoints: a test one is test mode's alone.
    let endpoint = send(post(
        &s,
        &test,
        "/v1/webhook-endpoints",
        "tm-endpoint",
        json!({"url": "http://127.0.0.1:9/hooks", "enabled_events": ["*"]}),
    ))
    .await;
    assert_eq!(endpoint.status, 201, "{}", endpoint.text());
    assert_eq!(endpoint.json()["livemode"], false);
    let id = endpoint.json()["id"].as_str().unwrap().to_owned();
    assert!(ids(&send(get(&s, SECRET, "/v1/webhook-endpoints")).await.json()).is_empty());
    send(get(&s, SECRET, &format!("/v1/webhook-endpoints/{id}")))
        .await
        .assert_problem(404, "not_found");
    assert_eq!(
        ids(&send(get(&s, &test, "/v1/webhook-endpoints")).await.json()),
        [id]
    );
}

async fn each_modes_reconciler_keeps_to_its_own_acquirer(backend: Backend) {
    let s = TestService::builder(backend).sim_routes().start().await;
    let test = test_key(&s).await;
    // `tok_timeout` loses the first answer: the payment stays pending,
    // charged at the test simulator.
    let paid = send(pay(
        &s,
        &test,
        "tm-pending",
        &body("order-tm3", "15.00", "tok_timeout"),
    ))
    .await;
    assert_eq!(paid.status, 202, "{}", paid.text());
    let id = paid.json()["id"].as_str().unwrap().to_owned();
    let settled = send(pay(
        &s,
        SECRET,
        "tm-live",
        &body("order-tm3", "15.00", "tok_ok"),
    ))
    .await;
    assert_eq!(settled.status, 201, "{}", settled.text());

    let config = ReconcilerConfig {
        pending_after: std::time::Duration::ZERO,
        ..ReconcilerConfig::default()
    };
    let live = s.reconciler().reconcile_once(&config).await.unwrap();
    assert!(live.is_clean(), "{live}");
    assert_eq!(
        live.pending_checked, 0,
        "the test payment is not live mode's"
    );
    assert!(live.resolved.is_empty());

    let mut reconciler = s.reconciler();
    reconciler.mode = Mode::Test;
    reconciler.acquirer = s.test_sim.clone();
    reconciler.ledger = s.test_sim.clone();
    let tested = reconciler.reconcile_once(&config).await.unwrap();
    assert!(tested.is_clean(), "{tested}");
    assert_eq!(tested.pending_checked, 1);
    assert_eq!(tested.resolved.len(), 1, "{tested}");
    assert_eq!(tested.resolved[0].payment_id, id);
    let shown = send(get(&s, &test, &format!("/v1/payments/{id}")))
        .await
        .json();
    assert_eq!(shown["status"], "succeeded");
    assert_eq!(
        s.charges("order-tm3").await.len(),
        1,
        "the live payment's only"
    );
}

/// The acquirer that signs `/v1/webhooks/acquirer` is live mode's: an
/// event naming a test payment (its namespace, its acquirer key) settles
/// nothing; the test payment stays pending for test mode's own reconciler.
async fn the_live_acquirers_webhooks_never_settle_a_test_payment(backend: Backend) {
    let s = TestService::start(backend).await;
    let test = test_key(&s).await;
    let paid = send(pay(
        &s,
        &test,
        "tm-hook",
        &body("order-tm4", "15.00", "tok_timeout"),
    ))
    .await;
    assert_eq!(paid.status, 202, "{}", paid.text());
    let id = paid.json()["id"].as_str().unwrap().to_owned();
    let event = json!({
        "id": "evt_tm4", "type": "payment.succeeded",
        "created": OffsetDateTime::now_utc().unix_timestamp(),
        "data": {"charge_id": "ch_forged", "acquirer_key": format!("chargeonce-{id}"),
                 "shop_id": format!("{SHOP}.test"), "payment_id": id, "reference": "order-tm4",
                 "amount": {"value": "15.00", "currency": "RUB"}, "decline_code": null}
    })
    .to_string();
    let signature = sign(
        &WebhookSecret::new(WEBHOOK_SECRET),
        OffsetDateTime::now_utc().unix_timestamp(),
        event.as_bytes(),
    );
    let answer = send(
        s.http
            .post(s.url("/v1/webhooks/acquirer"))
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, signature)
            .body(event),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["result"], "unknown_payment");
    let shown = send(get(&s, &test, &format!("/v1/payments/{id}")))
        .await
        .json();
    assert_eq!(shown["status"], "pending", "{shown}");
}

on_both_stores!(
    the_live_acquirers_webhooks_never_settle_a_test_payment,
    one_key_and_reference_make_a_payment_in_each_mode,
    a_test_key_manages_only_test_keys_and_endpoints,
    each_modes_reconciler_keeps_to_its_own_acquirer,
);
