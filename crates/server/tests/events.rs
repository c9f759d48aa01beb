//! Merchant events over real HTTP, on both stores: the outbox relay posting
//! to a real (test) merchant server, retries with the same event id and a
//! valid signature, give-up and resend, per-payment order, an event that
//! survives a relay killed mid-delivery, and the shop-scoped events API.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::ShopId;
use chargeonce_core::events::{DeliveryState, EventId, WebhookEndpoint};
use chargeonce_core::webhook::{self, WebhookSecret};
use chargeonce_testkit::{Received, Reply, TestMerchant, on_both_stores};
use chargeonce_workers::egress::{Egress, EgressPolicy};
use chargeonce_workers::relay::{Relay, RelayConfig};
use common::{Backend, OTHER_SECRET, OTHER_SHOP, TestService, body, send};
use serde_json::{Value, json};

const HOOK_SECRET: &str = "whsec_merchant_a";

fn fast() -> RelayConfig {
    RelayConfig {
        interval: Duration::from_millis(20),
        request_timeout: Duration::from_secs(5),
        backoff_base: Duration::from_millis(40),
        backoff_max: Duration::from_millis(200),
        give_up_after: Duration::from_secs(30),
        lease_margin: Duration::from_millis(200),
        ..RelayConfig::default()
    }
}

async fn set_webhook(s: &TestService, url: &str) {
    let endpoint = WebhookEndpoint {
        url: url.to_owned(),
        secret: WebhookSecret::new(HOOK_SECRET),
    };
    let shop = ShopId::new(common::SHOP).unwrap();
    assert!(s.store.set_webhook(&shop, Some(&endpoint)).await.unwrap());
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

async fn events(s: &TestService, query: &str) -> Value {
    let answer = send(s.get(&format!("/v1/events{query}"))).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.bytes)
    );
    answer.json()
}

async fn event(s: &TestService, id: &str) -> Value {
    let answer = send(s.get(&format!("/v1/events/{id}"))).await;
    assert_eq!(answer.status, 200);
    answer.json()
}

/// Waits until the event's delivery state is `state`.
async fn wait_for_state(s: &TestService, id: &str, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let current = event(s, id).await;
        if current["delivery"]["state"] == state {
            return current;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "event never became {state}: {current}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn assert_signed(received: &Received) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(
        webhook::verify(
            &WebhookSecret::new(HOOK_SECRET),
            &received.signature,
            &received.body,
            now,
            webhook::TOLERANCE
        ),
        Ok(()),
        "signature of {}",
        received.event_id
    );
}

async fn a_merchant_failing_three_times_gets_the_event_once_acknowledged(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(vec![
        Reply::Status(500),
        Reply::Status(500),
        Reply::Status(500),
    ])
    .await;
    set_webhook(&s, &merchant.url).await;
    let payment_id = pay(&s, "order-1", "tok_ok").await;
    let listed = events(&s, "").await;
    let id = listed["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed["data"][0]["type"], "payment.succeeded");
    assert_eq!(listed["data"][0]["payment_id"], payment_id.as_str());

    let metrics = Arc::new(chargeonce_server::Metrics::new());
    let relay = Relay::new(
        s.store.clone(),
        fast(),
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
    .with_observer(metrics.clone())
    .spawn();
    let delivered = wait_for_state(&s, &id, "delivered").await;
    // Acknowledged: never sent again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    relay.abort();
    let received = merchant.received();
    assert_eq!(received.len(), 4, "three 500s then one 200");
    for r in &received {
        assert_eq!(r.event_id, id, "the same id on every attempt");
        assert_eq!(r.event_type, "payment.succeeded");
        assert_eq!(r.body, received[0].body, "the same bytes on every attempt");
        assert_signed(r);
    }
    let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(sent["id"], id.as_str());
    assert_eq!(sent["data"]["payment"]["id"], payment_id.as_str());
    assert_eq!(sent["data"], delivered["data"]);
    assert_eq!(delivered["delivery"]["attempts"], 4);
    assert_eq!(delivered["delivery"]["last_status"], 200);
    assert!(delivered["delivery"]["delivered_at"].is_string());
    assert_eq!(delivered["delivery"]["last_error"], Value::Null);
    let text = metrics.render();
    assert!(
        text.contains("chargeonce_event_deliveries_total{mode=\"live\",result=\"failed\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("chargeonce_event_deliveries_total{mode=\"live\",result=\"delivered\"} 1")
    );
}

async fn an_event_is_given_up_after_the_configured_time_and_resent_by_hand(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(vec![]).await;
    merchant.answer_from_now_on(503);
    set_webhook(&s, &merchant.url).await;
    pay(&s, "order-1", "tok_declined").await;
    let id = events(&s, "?type=payment.declined").await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let relay = Relay::new(
        s.store.clone(),
        RelayConfig {
            give_up_after: Duration::from_millis(500),
            ..fast()
        },
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
    .with_observer(s.metrics.clone())
    .spawn();
    let gave_up = wait_for_state(&s, &id, "gave_up").await;
    let attempts = gave_up["delivery"]["attempts"].as_u64().unwrap();
    assert!(attempts >= 2);
    assert_eq!(gave_up["delivery"]["last_status"], 503);
    assert!(gave_up["delivery"]["gave_up_at"].is_string());
    let tried = merchant.received().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        merchant.received().len(),
        tried,
        "no attempt after giving up"
    );
    // `/metrics`: the last attempt counted as `gave_up`, the ones before as
    // `failed`; the event is no longer due.
    let scraped = send(s.http.get(s.operator_url("/metrics"))).await;
    let text = String::from_utf8(scraped.bytes).unwrap();
    assert!(
        text.contains("chargeonce_event_deliveries_total{mode=\"live\",result=\"gave_up\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "chargeonce_event_deliveries_total{{mode=\"live\",result=\"failed\"}} {}\n",
            attempts - 1
        )),
        "{text}"
    );
    assert!(text.contains("chargeonce_events_due 0\n"), "{text}");
    assert!(
        text.contains("chargeonce_events_due_oldest_age_seconds 0.0\n"),
        "{text}"
    );

    // Resend by hand (the merchant is back): delivered, with the same id.
    merchant.answer_from_now_on(200);
    let missing_key = send(
        s.http
            .post(s.url(&format!("/v1/events/{id}/resend")))
            .basic_auth(common::SHOP, Some(common::SECRET)),
    )
    .await;
    missing_key.assert_problem(400, "missing_idempotency_key");
    let resent = send(
        s.http
            .post(s.url(&format!("/v1/events/{id}/resend")))
            .basic_auth(common::SHOP, Some(common::SECRET))
            .header("idempotency-key", "resend-1"),
    )
    .await;
    assert_eq!(resent.status, 202);
    // The answer is read after the resend's write, and the relay is
    // running: it may have delivered it already (1 run in 10 here).
    let state = resent.json()["delivery"]["state"].clone();
    assert!(state == "pending" || state == "delivered", "{state}");
    wait_for_state(&s, &id, "delivered").await;
    relay.abort();
    let received = merchant.received();
    assert!(received.iter().all(|r| r.event_id == id));
    assert_signed(received.last().unwrap());
}

async fn events_of_one_payment_are_delivered_in_order(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(vec![Reply::Status(500), Reply::Status(500)]).await;
    set_webhook(&s, &merchant.url).await;
    let payment_id = pay(&s, "order-1", "tok_ok").await;
    let refund = send(
        s.http
            .post(s.url(&format!("/v1/payments/{payment_id}/refunds")))
            .basic_auth(common::SHOP, Some(common::SECRET))
            .header("idempotency-key", "order-1-refund")
            .json(&json!({})),
    )
    .await;
    assert_eq!(
        refund.status,
        201,
        "{}",
        String::from_utf8_lossy(&refund.bytes)
    );
    let listed = events(&s, "").await;
    let ids: Vec<String> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        listed["data"][0]["type"], "refund.succeeded",
        "newest first"
    );
    assert_eq!(listed["data"][1]["type"], "payment.succeeded");

    let relay = Relay::new(
        s.store.clone(),
        fast(),
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
    .spawn();
    wait_for_state(&s, &ids[0], "delivered").await;
    relay.abort();
    let types: Vec<String> = merchant
        .received()
        .iter()
        .map(|r| r.event_type.clone())
        .collect();
    // The refund's event waited for the payment's, retried twice.
    assert_eq!(
        types,
        [
            "payment.succeeded",
            "payment.succeeded",
            "payment.succeeded",
            "refund.succeeded"
        ]
    );
}

async fn an_event_committed_before_a_relay_dies_is_still_delivered(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(vec![Reply::Hang]).await;
    set_webhook(&s, &merchant.url).await;
    // The transition commits with its event; no relay runs yet.
    pay(&s, "order-1", "tok_ok").await;
    let id = events(&s, "").await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stored = s
        .store
        .event(
            &ShopId::new(common::SHOP).unwrap(),
            &EventId::parse(&id).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.delivery().state(), DeliveryState::Pending);
    assert_eq!(stored.delivery().attempts, 0);

    // A relay takes it and dies mid-delivery (aborted while the POST hangs).
    let config = RelayConfig {
        request_timeout: Duration::from_secs(1),
        ..fast()
    };
    let first = Relay::new(
        s.store.clone(),
        config,
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
    .spawn();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while merchant.received().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.abort();
    let _ = first.await;
    let after_kill = event(&s, &id).await;
    assert_eq!(
        after_kill["delivery"]["state"], "pending",
        "the row survives"
    );
    assert_eq!(
        after_kill["delivery"]["attempts"], 0,
        "no attempt was recorded"
    );

    // A new relay delivers it once the dead one's lease is over.
    let second = Relay::new(
        s.store.clone(),
        config,
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
    .spawn();
    let delivered = wait_for_state(&s, &id, "delivered").await;
    second.abort();
    assert_eq!(delivered["delivery"]["attempts"], 1);
    let received = merchant.received();
    assert_eq!(received.len(), 2);
    assert!(received.iter().all(|r| r.event_id == id));
    assert_signed(&received[1]);
}

async fn events_are_kept_apart_between_shops(backend: Backend) {
    let s = TestService::start(backend).await;
    pay(&s, "order-1", "tok_ok").await;
    pay(&s, "order-2", "tok_declined").await;
    let mine = events(&s, "").await;
    assert_eq!(mine["object"], "list");
    assert_eq!(mine["data"].as_array().unwrap().len(), 2);
    assert_eq!(mine["has_more"], false);
    let newest = mine["data"][0]["id"].as_str().unwrap().to_owned();
    let oldest = mine["data"][1]["id"].as_str().unwrap().to_owned();
    assert_eq!(mine["data"][0]["type"], "payment.declined");
    // No webhook set: pending, never attempted.
    assert_eq!(mine["data"][0]["delivery"]["state"], "pending");

    let page = events(&s, "?limit=1").await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_more"], true);
    let next = events(&s, &format!("?limit=1&starting_after={newest}")).await;
    assert_eq!(next["data"][0]["id"], oldest.as_str());
    assert_eq!(next["has_more"], false);
    let succeeded = events(&s, "?type=payment.succeeded").await;
    assert_eq!(succeeded["data"].as_array().unwrap().len(), 1);
    assert_eq!(succeeded["data"][0]["id"], oldest.as_str());
    send(s.get("/v1/events?limit=0"))
        .await
        .assert_problem(422, "invalid_request");
    send(s.get("/v1/events?type=payment.pending"))
        .await
        .assert_problem(422, "invalid_request");
    send(s.get("/v1/events/evt_nope"))
        .await
        .assert_problem(404, "not_found");

    // The other shop sees nothing of it.
    let theirs = send(
        s.http
            .get(s.url("/v1/events"))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await;
    assert_eq!(theirs.status, 200);
    assert_eq!(theirs.json()["data"], json!([]));
    send(
        s.http
            .get(s.url(&format!("/v1/events/{oldest}")))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await
    .assert_problem(404, "not_found");
    send(
        s.http
            .post(s.url(&format!("/v1/events/{oldest}/resend")))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET))
            .header("idempotency-key", "steal"),
    )
    .await
    .assert_problem(404, "not_found");
    send(s.http.get(s.url("/v1/events")))
        .await
        .assert_problem(401, "unauthorized");
}

/// A rolled signing secret: during the overlap each delivery carries a
/// signature with each secret, either verifies; after it, only the new one.
async fn a_rolled_secret_signs_beside_the_new_one_during_the_overlap(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(Vec::new()).await;
    set_webhook(&s, &merchant.url).await;
    let shop = ShopId::new(common::SHOP).unwrap();
    let old = WebhookSecret::new(HOOK_SECRET);
    let new = WebhookSecret::new("whsec_merchant_a_rolled");
    let hour = Duration::from_secs(3600);
    let until = s
        .store
        .roll_webhook_secret(&shop, &new, hour)
        .await
        .unwrap();
    assert!(until.unwrap() > time::OffsetDateTime::now_utc() + Duration::from_secs(3500));
    let nobody = ShopId::new("nobody").unwrap();
    let roll = s.store.roll_webhook_secret(&nobody, &new, hour).await;
    assert_eq!(roll.unwrap(), None);
    // A roll to the secret it signs with already rotates nothing.
    let same = s.store.roll_webhook_secret(&shop, &new, hour).await;
    assert_eq!(same.unwrap(), None);

    let relay = Relay::new(
        s.store.clone(),
        fast(),
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap();
    pay(&s, "order-1", "tok_ok").await;
    assert_eq!(relay.run_once().await.unwrap().delivered, 1);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let first = merchant.received().pop().unwrap();
    assert_eq!(
        first.signature.matches("v1=").count(),
        2,
        "{}",
        first.signature
    );
    for secret in [&old, &new] {
        assert_eq!(
            webhook::verify(
                secret,
                &first.signature,
                &first.body,
                now,
                webhook::TOLERANCE
            ),
            Ok(())
        );
    }

    // A roll with no overlap: the secret it replaces stops signing at once
    // (an overlap that ended, as the store's clock says).
    let newest = WebhookSecret::new("whsec_merchant_a_newest");
    let roll = s.store.roll_webhook_secret(&shop, &newest, Duration::ZERO);
    assert!(roll.await.unwrap().is_some());
    pay(&s, "order-2", "tok_ok").await;
    assert_eq!(relay.run_once().await.unwrap().delivered, 1);
    let second = merchant.received().pop().unwrap();
    assert_eq!(
        second.signature.matches("v1=").count(),
        1,
        "{}",
        second.signature
    );
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(
        webhook::verify(
            &newest,
            &second.signature,
            &second.body,
            now,
            webhook::TOLERANCE
        ),
        Ok(())
    );
    assert!(
        webhook::verify(
            &new,
            &second.signature,
            &second.body,
            now,
            webhook::TOLERANCE
        )
        .is_err()
    );

    // Setting the webhook anew drops a rolled-over secret too.
    // The secret the 0 s roll replaced is wiped by the sweeper's pass; the
    // one in its overlap is not.
    assert_eq!(s.store.forget_rolled_webhook_secrets().await.unwrap(), 1);
    let roll = s.store.roll_webhook_secret(&shop, &new, hour);
    assert!(roll.await.unwrap().is_some());
    assert_eq!(s.store.forget_rolled_webhook_secrets().await.unwrap(), 0);
    set_webhook(&s, &merchant.url).await;
    pay(&s, "order-3", "tok_ok").await;
    assert_eq!(relay.run_once().await.unwrap().delivered, 1);
    let third = merchant.received().pop().unwrap();
    assert_eq!(
        third.signature.matches("v1=").count(),
        1,
        "{}",
        third.signature
    );
}

on_both_stores!(
    a_rolled_secret_signs_beside_the_new_one_during_the_overlap,
    a_merchant_failing_three_times_gets_the_event_once_acknowledged,
    an_event_is_given_up_after_the_configured_time_and_resent_by_hand,
    events_of_one_payment_are_delivered_in_order,
    an_event_committed_before_a_relay_dies_is_still_delivered,
    events_are_kept_apart_between_shops,
);
