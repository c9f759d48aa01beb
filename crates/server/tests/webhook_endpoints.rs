//! `/v1/webhook-endpoints` over real HTTP on both stores, with the relay
//! delivering to real (test) receivers: two endpoints with different filters
//! each receive exactly the event types they asked for, each signed with its
//! own secret; a create is once per Idempotency-Key (sequential and
//! concurrent repeats make one endpoint and show its secret once); a secret
//! roll puts two signatures on each delivery during its overlap; a disabled
//! endpoint's deliveries wait and a deleted one's are given up; a resend
//! goes to one endpoint; registration refuses internal addresses; every
//! hostile request is a problem with a code.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::webhook::{self, WebhookSecret};
use chargeonce_testkit::{Received, TestMerchant, on_both_stores};
use chargeonce_workers::egress::{Egress, EgressPolicy};
use chargeonce_workers::relay::{Relay, RelayConfig};
use common::{Backend, SECRET, SHOP, TestService, body, send};
use serde_json::{Value, json};

fn post(s: &TestService, path: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(path))
        .basic_auth(SHOP, Some(SECRET))
        .header("idempotency-key", key)
        .json(body)
}

fn relay(s: &TestService) -> Relay {
    let config = RelayConfig {
        backoff_base: Duration::from_millis(20),
        backoff_max: Duration::from_millis(40),
        ..RelayConfig::default()
    };
    Relay::new(
        s.store.clone(),
        config,
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
}

/// Makes an endpoint for `url` wanting `events`: its id and secret.
async fn endpoint(s: &TestService, url: &str, events: &[&str], key: &str) -> (String, String) {
    let made = send(post(
        s,
        "/v1/webhook-endpoints",
        key,
        &json!({"url": url, "enabled_events": events, "description": key}),
    ))
    .await;
    assert_eq!(made.status, 201, "{:?}", made.json());
    let json = made.json();
    (
        json["id"].as_str().unwrap().to_owned(),
        json["secret"].as_str().unwrap().to_owned(),
    )
}

async fn pay(s: &TestService, reference: &str, token: &str) -> String {
    let answer = send(s.pay(
        &format!("{reference}-pay"),
        &body(reference, "1500.00", token),
    ))
    .await;
    let json = answer.json();
    match answer.status {
        201 => json["id"].as_str().unwrap().to_owned(),
        402 => json["payment"]["id"].as_str().unwrap().to_owned(),
        other => panic!("payment answered {other}: {json}"),
    }
}

/// Runs relay passes until nothing is due.
async fn deliver_all(relay: &Relay) {
    for _ in 0..50 {
        if relay.run_once().await.unwrap().claimed == 0 {
            return;
        }
    }
    panic!("the relay never ran dry");
}

fn verifies(secret: &str, received: &Received) -> bool {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    webhook::verify(
        &WebhookSecret::new(secret),
        &received.signature,
        &received.body,
        now,
        webhook::TOLERANCE,
    )
    .is_ok()
}

fn types(received: &[Received]) -> Vec<String> {
    let mut types: Vec<String> = received.iter().map(|r| r.event_type.clone()).collect();
    types.sort();
    types
}

async fn two_endpoints_receive_exactly_the_types_they_asked_for(backend: Backend) {
    let s = TestService::start(backend).await;
    let payments = TestMerchant::start(Vec::new()).await;
    let refunds = TestMerchant::start(Vec::new()).await;
    let (payments_id, payments_secret) = endpoint(
        &s,
        &payments.url,
        &["payment.succeeded", "payment.declined"],
        "payments-endpoint",
    )
    .await;
    let (refunds_id, refunds_secret) =
        endpoint(&s, &refunds.url, &["refund.succeeded"], "refunds-endpoint").await;
    let paid = pay(&s, "order-1", "tok_ok").await;
    pay(&s, "order-2", "tok_declined").await;
    let refund = send(post(
        &s,
        &format!("/v1/payments/{paid}/refunds"),
        "order-1-refund",
        &json!({}),
    ))
    .await;
    assert_eq!(refund.status, 201, "{:?}", refund.json());
    deliver_all(&relay(&s)).await;

    let to_payments = payments.received();
    let to_refunds = refunds.received();
    assert_eq!(
        types(&to_payments),
        ["payment.declined", "payment.succeeded"]
    );
    assert_eq!(types(&to_refunds), ["refund.succeeded"]);
    // Each signed with its own endpoint's secret only.
    assert!(to_payments.iter().all(|r| verifies(&payments_secret, r)));
    assert!(!to_payments.iter().any(|r| verifies(&refunds_secret, r)));
    assert!(to_refunds.iter().all(|r| verifies(&refunds_secret, r)));

    // The events API shows each event's deliveries by endpoint.
    let events = send(s.get("/v1/events")).await.json();
    for event in events["data"].as_array().unwrap() {
        let wanted = if event["type"] == "refund.succeeded" {
            &refunds_id
        } else {
            &payments_id
        };
        let deliveries = event["deliveries"].as_array().unwrap();
        assert_eq!(deliveries.len(), 1, "{event}");
        assert_eq!(&deliveries[0]["endpoint_id"], wanted.as_str());
        assert_eq!(deliveries[0]["state"], "delivered");
        assert_eq!(event["delivery"]["state"], "delivered");
    }

    // A resend to one endpoint reaches it only.
    let refund_event = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "refund.succeeded")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/v1/events/{refund_event}/resend");
    send(post(
        &s,
        &path,
        "resend-1",
        &json!({"endpoint_id": payments_id}),
    ))
    .await
    .assert_problem(409, "no_webhook_endpoint");
    let resent = send(post(
        &s,
        &path,
        "resend-2",
        &json!({"endpoint_id": refunds_id}),
    ))
    .await;
    assert_eq!(resent.status, 202, "{:?}", resent.json());
    assert_eq!(resent.json()["deliveries"][0]["state"], "pending");
    deliver_all(&relay(&s)).await;
    assert_eq!(refunds.received().len(), 2);
    assert_eq!(payments.received().len(), 2);
    // With no body: every endpoint that wants it.
    let resent = send(
        s.http
            .post(s.url(&path))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", "resend-3"),
    )
    .await;
    assert_eq!(resent.status, 202, "{:?}", resent.json());
    send(post(
        &s,
        &path,
        "resend-4",
        &json!({"endpoint_id": "we_00000000000000000000000000000000"}),
    ))
    .await
    .assert_problem(404, "not_found");
}

async fn an_endpoint_is_made_once_and_its_secret_shown_once(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(Vec::new()).await;
    let ask = json!({"url": merchant.url, "enabled_events": ["*"]});
    // Eight concurrent first requests with one key: one endpoint, one secret.
    let tries = (0..8).map(|_| send(post(&s, "/v1/webhook-endpoints", "ep-1", &ask)));
    let answers = futures::future::join_all(tries).await;
    assert!(
        answers.iter().all(|a| a.status == 201),
        "{:?}",
        answers[0].json()
    );
    let secrets: Vec<String> = answers
        .iter()
        .filter(|a| a.header("idempotent-replayed").is_none())
        .map(|a| a.json()["secret"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(secrets.len(), 1, "one answer made it and showed its secret");
    assert!(secrets[0].starts_with("whsec_"));
    let ids: std::collections::HashSet<String> = answers
        .iter()
        .map(|a| a.json()["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 1);
    let id = ids.into_iter().next().unwrap();
    for replay in answers
        .iter()
        .filter(|a| a.header("idempotent-replayed").is_some())
    {
        assert!(
            replay.json().get("secret").is_none(),
            "a replay has no secret"
        );
        assert_eq!(replay.header("cache-control"), Some("no-store"));
    }
    // The same key with another request is refused.
    send(post(
        &s,
        "/v1/webhook-endpoints",
        "ep-1",
        &json!({"url": merchant.url, "enabled_events": ["refund.failed"]}),
    ))
    .await
    .assert_problem(422, "idempotency_key_reused");

    // Read back without a secret.
    let listed = send(s.get("/v1/webhook-endpoints")).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert!(listed["data"][0].get("secret").is_none());
    let got = send(s.get(&format!("/v1/webhook-endpoints/{id}"))).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["enabled_events"], json!(["*"]));
    assert_eq!(got.json()["managed_by_operator"], false);

    // Update: types, off, description.
    let path = format!("/v1/webhook-endpoints/{id}");
    let changed = send(post(
        &s,
        &path,
        "ep-1-update",
        &json!({"enabled_events": ["refund.failed", "payment.succeeded"], "enabled": false, "description": "orders"}),
    ))
    .await;
    assert_eq!(changed.status, 200, "{:?}", changed.json());
    let changed = changed.json();
    assert_eq!(
        changed["enabled_events"],
        json!(["payment.succeeded", "refund.failed"])
    );
    assert_eq!(changed["enabled"], false);
    assert_eq!(changed["description"], "orders");
    // Disabled: a payment writes no delivery for it.
    pay(&s, "order-off", "tok_ok").await;
    let events = send(s.get("/v1/events")).await.json();
    assert_eq!(events["data"][0]["deliveries"], json!([]));
    assert_eq!(events["data"][0]["delivery"]["state"], "pending");
    assert_eq!(
        events["data"][0]["delivery"]["next_attempt_at"],
        Value::Null
    );
    // Enabled again: the next one is delivered.
    let on = send(post(
        &s,
        &path,
        "ep-1-on",
        &json!({"enabled": true, "description": ""}),
    ))
    .await;
    assert_eq!(on.json()["description"], Value::Null);
    pay(&s, "order-on", "tok_ok").await;
    deliver_all(&relay(&s)).await;
    assert_eq!(types(&merchant.received()), ["payment.succeeded"]);

    // Deleted: gone from reads, a second delete 404, no more deliveries.
    let deleted = send(s.http.delete(s.url(&path)).basic_auth(SHOP, Some(SECRET))).await;
    assert_eq!(deleted.status, 200, "{:?}", deleted.json());
    send(s.http.delete(s.url(&path)).basic_auth(SHOP, Some(SECRET)))
        .await
        .assert_problem(404, "not_found");
    send(s.get(&path)).await.assert_problem(404, "not_found");
    pay(&s, "order-gone", "tok_ok").await;
    deliver_all(&relay(&s)).await;
    assert_eq!(merchant.received().len(), 1);
    // A repeat of its create answers it as deleted, and makes nothing.
    let again = send(post(&s, "/v1/webhook-endpoints", "ep-1", &ask)).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.json()["id"], id.as_str());
    assert_eq!(again.json()["enabled"], false);
    let listed = send(s.get("/v1/webhook-endpoints")).await.json();
    assert_eq!(listed["data"], json!([]));
}

async fn a_secret_roll_signs_twice_during_its_overlap(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(Vec::new()).await;
    let (id, old) = endpoint(&s, &merchant.url, &["*"], "roll-endpoint").await;
    let path = format!("/v1/webhook-endpoints/{id}/roll-secret");
    let rolled = send(post(
        &s,
        &path,
        "roll-1",
        &json!({"expire_old_in_seconds": 3600}),
    ))
    .await;
    assert_eq!(rolled.status, 200, "{:?}", rolled.json());
    assert_eq!(rolled.header("cache-control"), Some("no-store"));
    let rolled = rolled.json();
    let new = rolled["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rolled["previous_secret_expires_at"].is_string());
    // Its repeat changes nothing and shows no secret.
    let again = send(post(
        &s,
        &path,
        "roll-1",
        &json!({"expire_old_in_seconds": 3600}),
    ))
    .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert!(again.json().get("secret").is_none());
    send(post(&s, &path, "roll-1", &json!({})))
        .await
        .assert_problem(422, "idempotency_key_reused");

    pay(&s, "order-1", "tok_ok").await;
    deliver_all(&relay(&s)).await;
    let delivered = merchant.received().pop().unwrap();
    assert_eq!(delivered.signature.matches("v1=").count(), 2);
    assert!(verifies(&old, &delivered));
    assert!(verifies(&new, &delivered));

    // A roll with no overlap: only the newest secret signs.
    let now = send(post(
        &s,
        &path,
        "roll-2",
        &json!({"expire_old_in_seconds": 0}),
    ))
    .await;
    let newest = now.json()["secret"].as_str().unwrap().to_owned();
    pay(&s, "order-2", "tok_ok").await;
    deliver_all(&relay(&s)).await;
    let delivered = merchant.received().pop().unwrap();
    assert_eq!(delivered.signature.matches("v1=").count(), 1);
    assert!(verifies(&newest, &delivered));
    assert!(!verifies(&new, &delivered));
    send(post(
        &s,
        &path,
        "roll-3",
        &json!({"expire_old_in_seconds": 604_801}),
    ))
    .await
    .assert_problem(422, "invalid_request");
}

/// With the service's own judge (https only, public addresses only), the
/// issue's internal URLs are refused at registration and nothing is made.
async fn internal_urls_are_refused_at_registration(backend: Backend) {
    let s = TestService::builder(backend)
        .state(|state| state.with_url_check(Arc::new(Egress::new(EgressPolicy::strict()))))
        .start()
        .await;
    for (i, url) in [
        "http://127.0.0.1:5432/",
        "https://127.0.0.1:5432/",
        "https://169.254.169.254/latest/meta-data",
        "https://10.0.0.1/",
        "https://localhost/hooks",
        "https://[::1]/",
        "http://hooks.example/",
        "ftp://hooks.example/",
        "not a url",
        "",
    ]
    .iter()
    .enumerate()
    {
        let answer = send(post(
            &s,
            "/v1/webhook-endpoints",
            &format!("bad-{i}"),
            &json!({"url": url, "enabled_events": ["*"]}),
        ))
        .await;
        answer.assert_problem(422, "invalid_request");
        let detail = answer.json()["detail"].as_str().unwrap().to_owned();
        assert!(
            !detail.contains("127.0.0.1") || url.contains("127.0.0.1"),
            "{detail}"
        );
    }
    let listed = send(s.get("/v1/webhook-endpoints")).await.json();
    assert_eq!(listed["data"], json!([]));
}

async fn hostile_requests_are_problems_and_make_nothing(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(Vec::new()).await;
    for (i, bad) in [
        json!({"url": merchant.url}),
        json!({"url": merchant.url, "enabled_events": []}),
        json!({"url": merchant.url, "enabled_events": ["payment.pending"]}),
        json!({"url": merchant.url, "enabled_events": ["*", "refund.failed"]}),
        json!({"url": merchant.url, "enabled_events": "*"}),
        json!({"url": merchant.url, "enabled_events": ["*"], "extra": 1}),
        json!({"url": merchant.url, "enabled_events": ["*"], "description": "a".repeat(201)}),
        json!({"url": format!("{}?{}", merchant.url, "a".repeat(2100)), "enabled_events": ["*"]}),
        json!({"url": 5, "enabled_events": ["*"]}),
    ]
    .iter()
    .enumerate()
    {
        send(post(
            &s,
            "/v1/webhook-endpoints",
            &format!("hostile-{i}"),
            bad,
        ))
        .await
        .assert_problem(422, "invalid_request");
    }
    let ok = json!({"url": merchant.url, "enabled_events": ["*"]});
    send(
        s.http
            .post(s.url("/v1/webhook-endpoints"))
            .basic_auth(SHOP, Some(SECRET))
            .json(&ok),
    )
    .await
    .assert_problem(400, "missing_idempotency_key");
    for path in [
        "/v1/webhook-endpoints/we_00000000000000000000000000000000",
        "/v1/webhook-endpoints/nonsense",
        "/v1/webhook-endpoints/evt_00000000000000000000000000000000",
    ] {
        send(s.get(path)).await.assert_problem(404, "not_found");
        send(post(&s, path, "upd", &json!({"enabled": false})))
            .await
            .assert_problem(404, "not_found");
        send(post(&s, &format!("{path}/roll-secret"), "roll", &json!({})))
            .await
            .assert_problem(404, "not_found");
    }
    let listed = send(s.get("/v1/webhook-endpoints")).await.json();
    assert_eq!(listed["data"], json!([]));

    // Another shop's endpoint is not found; a read_only key sees none.
    let (id, _) = endpoint(&s, &merchant.url, &["*"], "mine").await;
    send(
        s.http
            .get(s.url(&format!("/v1/webhook-endpoints/{id}")))
            .basic_auth(common::OTHER_SHOP, Some(common::OTHER_SECRET)),
    )
    .await
    .assert_problem(404, "not_found");
    let ro = send(post(
        &s,
        "/v1/api-keys",
        "ro-key",
        &json!({"scope": "read_only"}),
    ))
    .await
    .json()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    send(
        s.http
            .get(s.url("/v1/webhook-endpoints"))
            .basic_auth(SHOP, Some(ro.as_str())),
    )
    .await
    .assert_problem(403, "insufficient_scope");

    // The cap: 16 endpoints.
    for i in 1..16 {
        endpoint(&s, &merchant.url, &["*"], &format!("cap-{i}")).await;
    }
    send(post(&s, "/v1/webhook-endpoints", "cap-16", &ok))
        .await
        .assert_problem(409, "webhook_endpoint_limit_reached");
}

on_both_stores!(
    two_endpoints_receive_exactly_the_types_they_asked_for,
    an_endpoint_is_made_once_and_its_secret_shown_once,
    a_secret_roll_signs_twice_during_its_overlap,
    internal_urls_are_refused_at_registration,
    hostile_requests_are_problems_and_make_nothing,
);
