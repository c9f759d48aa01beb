//! The example merchant over real HTTP: the same signed event delivered many
//! times at once fulfils its order once; a forged or stale one does nothing.

#![allow(clippy::unwrap_used, missing_docs)]

use chargeonce_core::webhook::{self, WebhookSecret};
use chargeonce_example_merchant::{Merchant, router};
use serde_json::json;

const SECRET: &str = "whsec_example";

struct Running {
    base: String,
    merchant: Merchant,
    _dir: tempfile::TempDir,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("merchant.db").display());
    let merchant = Merchant::open(&url, WebhookSecret::new(SECRET))
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = router(merchant.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Running {
        base,
        merchant,
        _dir: dir,
    }
}

fn paid_event(event_id: &str, order: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": event_id,
        "type": "payment.succeeded",
        "created": 1_700_000_000_000_i64,
        "data": {"payment": {
            "id": "pay_0193a1b2c3d4e5f60718293a4b5c6d7e",
            "reference": order,
            "amount": {"value": "1500.00", "currency": "RUB"},
            "status": "succeeded",
            "decline_code": null,
        }},
    }))
    .unwrap()
}

async fn deliver(http: &reqwest::Client, base: &str, body: &[u8], secret: &str) -> u16 {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let signature = webhook::sign(&WebhookSecret::new(secret), now, body);
    http.post(format!("{base}/webhooks/chargeonce"))
        .header("content-type", "application/json")
        .header(webhook::SIGNATURE_HEADER, signature)
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicate_deliveries_fulfil_the_order_once() {
    let m = start().await;
    let http = reqwest::Client::new();
    assert_eq!(
        http.post(format!("{}/orders/order-1", m.base))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    let body = paid_event("evt_0193a1b2c3d4e5f60718293a4b5c6d7e", "order-1");
    let statuses =
        futures::future::join_all((0..16).map(|_| deliver(&http, &m.base, &body, SECRET))).await;
    assert!(statuses.iter().all(|s| *s == 204), "{statuses:?}");
    assert_eq!(
        m.merchant.order("order-1").await.unwrap(),
        Some(("paid".to_owned(), 1))
    );

    // Another event about the same order (another id) cannot fulfil it again:
    // the conditional update is the last line of defence.
    let other = paid_event("evt_0193a1b2c3d4e5f60718293a4b5c6d7f", "order-1");
    assert_eq!(deliver(&http, &m.base, &other, SECRET).await, 204);
    assert_eq!(
        m.merchant.order("order-1").await.unwrap(),
        Some(("paid".to_owned(), 1))
    );
    let shown: serde_json::Value = http
        .get(format!("{}/orders/order-1", m.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["fulfilments"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_or_forged_events_change_nothing() {
    let m = start().await;
    m.merchant.create_order("order-2").await.unwrap();
    let http = reqwest::Client::new();
    let body = paid_event("evt_0193a1b2c3d4e5f60718293a4b5c6d80", "order-2");
    assert_eq!(deliver(&http, &m.base, &body, "whsec_forged").await, 401);
    let unsigned = http
        .post(format!("{}/webhooks/chargeonce", m.base))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);
    assert_eq!(
        m.merchant.order("order-2").await.unwrap(),
        Some(("awaiting_payment".to_owned(), 0))
    );
    // A forged delivery did not mark the id seen: the real one still counts.
    assert_eq!(deliver(&http, &m.base, &body, SECRET).await, 204);
    assert_eq!(
        m.merchant.order("order-2").await.unwrap(),
        Some(("paid".to_owned(), 1))
    );
}

/// A header of `parts` short `v1=` signatures (none valid), signed now.
fn many_signatures(parts: usize) -> String {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    format!("t={now}{}", ",v1=00".repeat(parts))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_signatures_or_a_huge_body_is_refused_at_once() {
    let m = start().await;
    m.merchant.create_order("order-3").await.unwrap();
    let http = reqwest::Client::new();
    let started = std::time::Instant::now();
    // 10 000 signature parts over a 1 MiB body: refused on the body's size.
    // A client of its own: the server closes that connection, and a pooled
    // connection closed under a later request would fail it.
    let huge = reqwest::Client::new()
        .post(format!("{}/webhooks/chargeonce", m.base))
        .header("content-type", "application/json")
        .header(webhook::SIGNATURE_HEADER, many_signatures(10_000))
        .body(vec![b' '; 1 << 20])
        .send()
        .await
        .map(|r| r.status().as_u16());
    // The server may close before the client has written it all.
    assert!(matches!(huge, Ok(413)) || huge.is_err(), "{huge:?}");
    // 10 000 parts over an event-sized body: refused on the header, no MAC.
    let body = paid_event("evt_0193a1b2c3d4e5f60718293a4b5c6d81", "order-3");
    let flood = http
        .post(format!("{}/webhooks/chargeonce", m.base))
        .header("content-type", "application/json")
        .header(webhook::SIGNATURE_HEADER, many_signatures(10_000))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(flood.status(), 401);
    assert!(
        flood
            .text()
            .await
            .unwrap()
            .contains("signature header is not"),
        "refused as malformed"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        m.merchant.order("order-3").await.unwrap(),
        Some(("awaiting_payment".to_owned(), 0))
    );
    assert_eq!(deliver(&http, &m.base, &body, SECRET).await, 204);
}
