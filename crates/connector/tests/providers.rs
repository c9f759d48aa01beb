//! The service's adapter ([`HttpAcquirer`]) against fronts that answer a
//! charge the ways real providers answer a duplicate of a request they are
//! still processing: each answer is done, refused or unknown, a row each
//! (the table in `client.rs`).

#![allow(clippy::unwrap_used)]

use axum::http::StatusCode;
use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig};
use chargeonce_core::{
    Acquirer, AcquirerError, AcquirerKey, CardToken, ChargeRequest, ChargeResult, Money, PaymentId,
    Reference, ShopId,
};
use serde_json::{Value, json};

/// A charge of 1500.00 RUB for a new payment of `demo-shop`.
fn request() -> ChargeRequest {
    let payment_id = PaymentId::generate();
    ChargeRequest {
        acquirer_key: AcquirerKey::for_payment(&payment_id),
        shop_id: ShopId::new("demo-shop").unwrap(),
        reference: Reference::new(format!("order-{}", payment_id.as_str())).unwrap(),
        payment_id,
        amount: Money::parse("1500.00", "RUB").unwrap(),
        token: CardToken::new("tok_ok").unwrap(),
        capture_method: chargeonce_core::CaptureMethod::Automatic,
    }
}

/// What the adapter makes of a front that answers every charge with
/// `status` and `body` (`None`: the charge asked for, as the simulator
/// writes it).
async fn classified(status: u16, body: Option<Value>) -> &'static str {
    let charge = request();
    let answer = body.unwrap_or_else(|| charge_json(&charge));
    let app = axum::Router::new().route(
        "/v1/charges",
        axum::routing::post(move || {
            let answer = answer.clone();
            async move {
                (
                    StatusCode::from_u16(status).unwrap(),
                    [("content-type", "application/json")],
                    answer.to_string(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let acquirer =
        HttpAcquirer::new(&format!("http://{addr}"), HttpAcquirerConfig::default()).unwrap();
    let result = acquirer.charge(&charge).await;
    server.abort();
    match result {
        Ok(ChargeResult::Succeeded { .. }) => "done",
        Ok(ChargeResult::Declined { .. }) => "declined",
        Err(AcquirerError::Rejected(_)) => "refused",
        Err(AcquirerError::Unknown(_)) => "unknown",
        Err(AcquirerError::NotSent(_)) => "not_sent",
    }
}

fn charge_json(charge: &ChargeRequest) -> Value {
    json!({
        "id": "ch_1", "acquirer_key": charge.acquirer_key.as_str(),
        "shop_id": charge.shop_id.as_str(), "payment_id": charge.payment_id.as_str(),
        "reference": charge.reference.as_str(),
        "amount": {"value": charge.amount.to_decimal_string(), "currency": charge.amount.currency().code()},
        "status": "succeeded", "decline_code": null, "created_at": "2026-12-04T10:00:00Z"
    })
}

#[tokio::test]
async fn a_2xx_is_done_only_with_the_charge_asked_for() {
    assert_eq!(classified(200, None).await, "done");
    assert_eq!(classified(201, None).await, "done");
    assert_eq!(classified(208, None).await, "done", "208 with the charge");
    assert_eq!(
        classified(208, Some(json!({}))).await,
        "unknown",
        "PicPay's 208"
    );
    assert_eq!(
        classified(200, Some(json!({"received": true}))).await,
        "unknown"
    );
    assert_eq!(
        classified(202, Some(json!({"status": "processing"}))).await,
        "unknown"
    );
}

#[tokio::test]
async fn a_duplicate_in_progress_is_unknown() {
    assert_eq!(
        classified(409, Some(json!({"code": "request_in_progress"}))).await,
        "unknown",
        "BlueSnap, PPRO"
    );
    assert_eq!(
        classified(
            400,
            Some(json!({"code": "TransactionRequestIdempotencyKeyAlreadyExists"}))
        )
        .await,
        "unknown",
        "Primer"
    );
    assert_eq!(
        classified(
            422,
            Some(json!({"code": "unprocessable", "message": "request in progress"}))
        )
        .await,
        "unknown",
        "a generic gateway"
    );
}

#[tokio::test]
async fn a_refusal_that_says_nothing_more_is_a_refusal() {
    assert_eq!(
        classified(422, Some(json!({"code": "unprocessable_entity"}))).await,
        "refused"
    );
    assert_eq!(
        classified(400, Some(json!({"code": "invalid_card"}))).await,
        "refused"
    );
    assert_eq!(
        classified(402, Some(json!({"code": "payment_required"}))).await,
        "refused"
    );
}
