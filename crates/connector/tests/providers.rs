//! The service's adapter ([`HttpAcquirer`]) against fronts that answer a
//! charge the ways real providers answer a duplicate of a request they are
//! still processing: each answer is done, refused or unknown, a row each
//! (the table in `client.rs`), and captures the same way (the table in
//! `moves.rs`).

#![allow(clippy::unwrap_used)]

use axum::http::StatusCode;
use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig};
use chargeonce_core::{
    Acquirer, AcquirerError, AcquirerKey, CaptureId, CaptureMethod, CaptureRequest,
    CaptureSettlement, CardToken, ChargeRequest, ChargeResult, Money, PaymentId, Reference, ShopId,
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

/// An adapter to a front that answers every request to `path` (a POST)
/// with `status` and `answer`; the server stops when the handle drops.
async fn front(path: &'static str, status: u16, answer: Value) -> (HttpAcquirer, Front) {
    let app = axum::Router::new().route(
        path,
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
    (acquirer, Front(server))
}

/// A front's server, stopped on drop.
struct Front(tokio::task::JoinHandle<Result<(), std::io::Error>>);

impl Drop for Front {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[tokio::test]
async fn an_authorization_answered_as_a_charge_made_at_once_is_unknown() {
    let mut charge = request();
    charge.capture_method = CaptureMethod::Manual;
    // A provider that ignored the capture method took the whole amount.
    let (acquirer, _front) = front("/v1/charges", 200, charge_json(&charge)).await;
    assert!(matches!(
        acquirer.charge(&charge).await,
        Err(AcquirerError::Unknown(reason)) if reason.contains("capture method")
    ));
    // The reverse: a hold where a charge was asked for.
    let at_once = request();
    let mut held = charge_json(&at_once);
    held["capture_method"] = json!("manual");
    let (acquirer, _front) = front("/v1/charges", 200, held).await;
    assert!(matches!(
        acquirer.charge(&at_once).await,
        Err(AcquirerError::Unknown(_))
    ));
}

/// A capture of 10.00 RUB of the authorization `ch_1`.
fn capture_request() -> CaptureRequest {
    let payment = request();
    let id = CaptureId::generate();
    CaptureRequest {
        acquirer_key: id.acquirer_key(),
        shop_id: payment.shop_id,
        payment_id: payment.payment_id,
        capture_id: id,
        charge_id: "ch_1".to_owned(),
        amount: Money::parse("10.00", "RUB").unwrap(),
        last: false,
        token: payment.token,
    }
}

/// What the adapter makes of a front answering a capture so.
async fn capture_classified(status: u16, answer: Value) -> String {
    let (acquirer, _front) = front("/v1/charges/ch_1/captures", status, answer).await;
    match acquirer.capture(&capture_request()).await {
        Ok(CaptureSettlement::Succeeded { .. }) => "done".to_owned(),
        Ok(CaptureSettlement::Failed { code }) => format!("failed {code}"),
        Err(AcquirerError::Rejected(_)) => "refused".to_owned(),
        Err(AcquirerError::Unknown(_)) => "unknown".to_owned(),
        Err(AcquirerError::NotSent(_)) => "not_sent".to_owned(),
    }
}

#[tokio::test]
async fn a_capture_is_done_only_as_asked_and_failed_only_as_the_table_says() {
    let capture = |minor: i64, charge: &str| json!({"id": "cp_1", "charge_id": charge, "amount_minor": minor, "currency": "RUB", "last": false});
    assert_eq!(capture_classified(200, capture(1000, "ch_1")).await, "done");
    assert_eq!(
        capture_classified(200, capture(2000, "ch_1")).await,
        "unknown",
        "another amount"
    );
    assert_eq!(
        capture_classified(200, capture(1000, "ch_2")).await,
        "unknown",
        "another authorization"
    );
    assert_eq!(
        capture_classified(200, json!({"status": "processing"})).await,
        "unknown"
    );
    assert_eq!(
        capture_classified(409, json!({"code": "authorization_closed"})).await,
        "failed authorization_closed"
    );
    assert_eq!(
        capture_classified(409, json!({"code": "request_in_progress"})).await,
        "unknown"
    );
    assert_eq!(
        capture_classified(404, json!({})).await,
        "not_sent",
        "a 404 without the acquirer's code is our URL"
    );
    assert_eq!(
        capture_classified(502, json!({"code": "authorization_closed"})).await,
        "unknown"
    );
}
