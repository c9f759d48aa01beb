//! chargeonce and the example merchant, both on real sockets: a payment's
//! event reaches the merchant through the outbox relay and fulfils the order;
//! a resend by hand (a duplicate delivery) does not fulfil it again.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use chargeonce_acquirer::{Simulator, SimulatorConfig};
use chargeonce_core::events::WebhookEndpoint;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{Engine, EngineConfig, ShopId, ShopSecret};
use chargeonce_example_merchant::{Merchant, router};
use chargeonce_server::{AppState, HttpRender};
use chargeonce_testkit::TestDb;
use chargeonce_workers::relay::{self, RelayConfig};
use serde_json::{Value, json};

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
    let db = TestDb::sqlite();
    let store = chargeonce_store::connect(db.url(), &Default::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop-a").unwrap();
    store
        .add_shop(
            &shop,
            &ShopSecret::new("sk_a_0123456789abcdef").unwrap().hash(),
        )
        .await
        .unwrap();

    let secret = WebhookSecret::generate();
    let merchant_db = format!("sqlite://{}", db.dir().join("merchant.db").display());
    let merchant = Merchant::open(&merchant_db, secret.clone()).await.unwrap();
    merchant.create_order("order-1").await.unwrap();
    let merchant_base = serve(router(merchant.clone())).await;
    let endpoint = WebhookEndpoint {
        url: format!("{merchant_base}/webhooks/chargeonce"),
        secret,
    };
    assert!(store.set_webhook(&shop, Some(&endpoint)).await.unwrap());

    let sim = Arc::new(
        Simulator::open(&db.dir().join("ledger.db"), SimulatorConfig::default())
            .await
            .unwrap(),
    );
    let engine = Arc::new(
        Engine::new(
            store.clone(),
            sim,
            Arc::new(HttpRender),
            EngineConfig::default(),
        )
        .unwrap(),
    );
    let api = serve(chargeonce_server::router(AppState::new(engine))).await;
    let relay = relay::spawn(
        store.clone(),
        RelayConfig {
            interval: Duration::from_millis(20),
            backoff_base: Duration::from_millis(50),
            ..RelayConfig::default()
        },
    )
    .unwrap();

    let http = reqwest::Client::new();
    let paid = http
        .post(format!("{api}/v1/payments"))
        .basic_auth("shop-a", Some("sk_a_0123456789abcdef"))
        .header("idempotency-key", "order-1-pay")
        .json(&json!({
            "amount": {"value": "1500.00", "currency": "RUB"},
            "reference": "order-1",
            "payment_method": {"token": "tok_ok"},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    wait_until("the order is paid", async || {
        merchant.order("order-1").await.unwrap() == Some(("paid".to_owned(), 1))
    })
    .await;

    // Resend the event by hand: delivered again, fulfilled no more.
    let events: Value = http
        .get(format!("{api}/v1/events"))
        .basic_auth("shop-a", Some("sk_a_0123456789abcdef"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = events["data"][0]["id"].as_str().unwrap().to_owned();
    let event_url = format!("{api}/v1/events/{id}");
    let resent = http
        .post(format!("{event_url}/resend"))
        .basic_auth("shop-a", Some("sk_a_0123456789abcdef"))
        .header("idempotency-key", "resend-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resent.status(), 202);
    wait_until("the resend is delivered", async || {
        let event: Value = http
            .get(&event_url)
            .basic_auth("shop-a", Some("sk_a_0123456789abcdef"))
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
