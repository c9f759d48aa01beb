//! `GET /sim/ledger`: the JSON shape, through the router as the service nests it.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use chargeonce_acquirer::{router, tokens};
use chargeonce_core::{Acquirer, Money};
use serde_json::Value;
use tower::ServiceExt;

use crate::common::{memory_sim, request};

async fn get_ledger(app: axum::Router) -> (StatusCode, String, Value) {
    let response = app
        .oneshot(Request::get("/sim/ledger").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, content_type, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn empty_ledger() {
    let sim = Arc::new(memory_sim().await);
    let app = axum::Router::new().nest("/sim", router(sim));
    let (status, content_type, body) = get_ledger(app).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "application/json");
    assert_eq!(
        body,
        serde_json::json!({"charges": [], "total_succeeded": []})
    );
}

#[tokio::test]
async fn ledger_lists_charges_and_sums_what_moved() {
    let sim = Arc::new(memory_sim().await);
    let rub = request(tokens::OK);
    sim.charge(&rub).await.unwrap();
    let mut small = request(tokens::TIMEOUT);
    small.amount = Money::parse("0.5", "RUB").unwrap();
    assert!(
        sim.charge(&small).await.is_err(),
        "lost answer, but charged"
    );
    let declined = request(tokens::DECLINED);
    sim.charge(&declined).await.unwrap();
    let mut yen = request(tokens::OK);
    yen.amount = Money::parse("5", "JPY").unwrap();
    sim.charge(&yen).await.unwrap();

    let app = axum::Router::new().nest("/sim", router(Arc::clone(&sim)));
    let (status, _, body) = get_ledger(app).await;
    assert_eq!(status, StatusCode::OK);

    assert_eq!(
        body["total_succeeded"],
        serde_json::json!([
            {"currency": "JPY", "amount": "5", "count": 1},
            {"currency": "RUB", "amount": "1500.50", "count": 2},
        ])
    );

    let charges = body["charges"].as_array().unwrap();
    assert_eq!(charges.len(), 4);
    let entries = sim.ledger().await.unwrap();
    for (json, entry) in charges.iter().zip(&entries) {
        assert_eq!(
            json["id"],
            entry.id.as_str(),
            "same order as Simulator::ledger"
        );
    }

    let first = &charges[0];
    let mut keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "acquirer_key",
            "amount",
            "amount_minor",
            "created_at",
            "decline_code",
            "id",
            "payment_id",
            "reference",
            "refunded_minor",
            "shop_id",
            "status",
        ]
    );
    assert_eq!(first["acquirer_key"], rub.acquirer_key.as_str());
    assert_eq!(first["shop_id"], "demo-shop");
    assert_eq!(first["payment_id"], rub.payment_id.as_str());
    assert_eq!(first["reference"], rub.reference.as_str());
    assert_eq!(
        first["amount"],
        serde_json::json!({"value": "1500.00", "currency": "RUB"})
    );
    assert_eq!(first["amount_minor"], 150_000);
    assert_eq!(first["status"], "succeeded");
    assert_eq!(first["decline_code"], Value::Null);
    let created_at = first["created_at"].as_str().unwrap();
    let parsed =
        time::OffsetDateTime::parse(created_at, &time::format_description::well_known::Rfc3339)
            .unwrap();
    assert_eq!(parsed, entries[0].created_at);
    assert!(
        created_at.ends_with('Z') && created_at.len() == 24,
        "{created_at}"
    );

    assert_eq!(charges[1]["amount"]["value"], "0.50");
    assert_eq!(charges[1]["amount_minor"], 50);
    assert_eq!(charges[2]["status"], "declined");
    assert_eq!(charges[2]["decline_code"], "card_declined");
    assert_eq!(
        charges[3]["amount"],
        serde_json::json!({"value": "5", "currency": "JPY"})
    );
}

#[tokio::test]
async fn unreadable_ledger_is_a_problem_document() {
    let sim = Arc::new(memory_sim().await);
    sim.close().await;
    let app = axum::Router::new().nest("/sim", router(sim));
    let (status, content_type, body) = get_ledger(app).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(content_type, "application/problem+json");
    assert_eq!(body["code"], "ledger_unavailable");
    assert_eq!(body["status"], 500);
}
