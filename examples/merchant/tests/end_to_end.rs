//! chargeonce and the example merchant, both on real sockets: a payment's
//! event reaches the merchant through the outbox relay and fulfils the order;
//! a resend by hand (a duplicate delivery) does not fulfil it again.

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use chargeonce_core::ShopId;
use chargeonce_core::events::WebhookEndpoint;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_example_merchant::{Merchant, router};
use chargeonce_testkit::{Backend, SECRET, SHOP, TestService, body};
use chargeonce_workers::egress::{Egress, EgressPolicy};
use chargeonce_workers::relay::{Relay, RelayConfig};
use serde_json::Value;

async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

async fn wait_until<F: AsyncFn() -> bool>(what: &str, check: F) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payment_fulfils_its_order_once_through_the_relay() {
    let service = TestService::start(Backend::Sqlite).await;
    let store = service.store.clone();
    let shop = ShopId::new(SHOP).unwrap();

    let secret = WebhookSecret::generate();
    let merchant_db = format!(
        "sqlite://{}",
        service.db().dir().join("merchant.db").display()
    );
    let merchant = Merchant::open(&merchant_db, secret.clone()).await.unwrap();
    merchant.create_order("order-1").await.unwrap();
    let merchant_base = serve(router(merchant.clone())).await;
    let endpoint = WebhookEndpoint {
        url: format!("{merchant_base}/webhooks/chargeonce"),
        secret,
    };
    assert!(store.set_webhook(&shop, Some(&endpoint)).await.unwrap());

    let relay = Relay::new(
        store.clone(),
        RelayConfig {
            interval: Duration::from_millis(20),
            backoff_base: Duration::from_millis(50),
            ..RelayConfig::default()
        },
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
    .spawn();

    let paid = service
        .pay("order-1-pay", &body("order-1", "1500.00", "tok_ok"))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    wait_until("the order is paid", async || {
        merchant.order("order-1").await.unwrap() == Some(("paid".to_owned(), 1))
    })
    .await;

    // Resend the event by hand: delivered again, fulfilled no more.
    let events: Value = service
        .get("/v1/events")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = events["data"][0]["id"].as_str().unwrap().to_owned();
    let event_path = format!("/v1/events/{id}");
    let resent = service
        .http
        .post(service.url(&format!("{event_path}/resend")))
        .basic_auth(SHOP, Some(SECRET))
        .header("idempotency-key", "resend-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resent.status(), 202);
    wait_until("the resend is delivered", async || {
        let event: Value = service
            .get(&event_path)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        event["delivery"]["state"] == "delivered" && event["delivery"]["attempts"] == 2
    })
    .await;
    relay.abort();
    assert_eq!(
        merchant.order("order-1").await.unwrap(),
        Some(("paid".to_owned(), 1))
    );
}
