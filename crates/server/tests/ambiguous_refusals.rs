//! Moves resent to an acquirer that ignores keys and refused for what only a
//! resend makes ambiguous, on both stores: a capture refused because
//! another capture closed the authorization meanwhile (issue 34, found by
//! chaos seed 13), a refund refused because the charge was refunded at the
//! acquirer meanwhile. The resend rule confirms the refusal, and the move
//! ends failed with its code, its reservation given back.
//!
//! Before the fix, such a refusal was left unknown for ever: every holder
//! looked the move up (nothing), sent it again, was refused again and parked
//! the key, so the capture stayed pending and the authorization `closing`.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chargeonce_acquirer::Simulator;
use chargeonce_core::{
    Acquirer, AcquirerCapture, AcquirerCharge, AcquirerError, AcquirerKey, AcquirerRefund,
    CaptureRequest, CaptureSettlement, ChargeRequest, ChargeResult, KeyTiming, PaymentId,
    RefundRequest, RefundSettlement, ShopId, VoidRequest, VoidSettlement,
};
use chargeonce_testkit::on_both_stores;
use common::{Answer, Backend, TestService, send};
use serde_json::{Value, json};

/// The simulator, ignoring keys, behind a network that loses the next
/// capture or refund once `armed`: the engine sees an unknown outcome, and
/// the acquirer never sees the move.
struct LosesAMove {
    sim: Arc<Simulator>,
    armed: Arc<AtomicBool>,
}

impl LosesAMove {
    fn lost(&self) -> Option<AcquirerError> {
        self.armed
            .swap(false, Ordering::SeqCst)
            .then(|| AcquirerError::Unknown("acquirer connection failed".to_owned()))
    }
}

#[async_trait]
impl Acquirer for LosesAMove {
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError> {
        self.sim.charge(request).await
    }
    async fn status(&self, key: &AcquirerKey) -> Result<Option<AcquirerCharge>, AcquirerError> {
        self.sim.status(key).await
    }
    async fn charges_for_payment(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        self.sim.charges_for_payment(shop_id, payment_id).await
    }
    async fn refund_payment(
        &self,
        request: &RefundRequest,
    ) -> Result<RefundSettlement, AcquirerError> {
        if let Some(lost) = self.lost() {
            return Err(lost);
        }
        self.sim.refund_payment(request).await
    }
    async fn refunds_for_refund(
        &self,
        request: &RefundRequest,
    ) -> Result<Vec<AcquirerRefund>, AcquirerError> {
        self.sim.refunds_for_refund(request).await
    }
    fn is_idempotent(&self) -> bool {
        self.sim.is_idempotent()
    }
    async fn capture(&self, request: &CaptureRequest) -> Result<CaptureSettlement, AcquirerError> {
        if let Some(lost) = self.lost() {
            return Err(lost);
        }
        self.sim.capture(request).await
    }
    async fn void(&self, request: &VoidRequest) -> Result<VoidSettlement, AcquirerError> {
        self.sim.void(request).await
    }
    async fn captures_for_capture(
        &self,
        request: &CaptureRequest,
    ) -> Result<Vec<AcquirerCapture>, AcquirerError> {
        self.sim.captures_for_capture(request).await
    }
}

/// The service with [`LosesAMove`] in front of its acquirer: short
/// leases and a settle window of 1 s, so the confirmation comes soon.
async fn service(backend: Backend, armed: Arc<AtomicBool>) -> TestService {
    TestService::builder(backend)
        .acquirer_ignores_keys()
        .timing(KeyTiming {
            lease: Duration::from_secs(2),
            ttl: Duration::from_secs(3600),
        })
        .engine(|config| chargeonce_core::EngineConfig {
            acquirer_timeout: Duration::from_millis(500),
            settle_window: Duration::from_secs(1),
            retry_after: Duration::from_millis(100),
            ..config
        })
        .acquirer(move |sim| Arc::new(LosesAMove { sim, armed }))
        .start()
        .await
}

fn rub(value: &str) -> Value {
    json!({"value": value, "currency": "RUB"})
}

/// A `POST /v1/payments/{id}/{what}` (captures or refunds).
fn post(s: &TestService, id: &str, what: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(&format!("/v1/payments/{id}/{what}")))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .header("idempotency-key", key)
        .json(body)
}

async fn payment(s: &TestService, id: &str) -> Value {
    let answer = send(s.get(&format!("/v1/payments/{id}"))).await;
    assert_eq!(answer.status, 200);
    answer.json()
}

/// Retries while the answer is 202 or 409, after its `Retry-After` (in
/// whole seconds, at least one), up to 20 times.
async fn until_definite(s: &TestService, id: &str, what: &str, key: &str, body: &Value) -> Answer {
    for _ in 0..20 {
        let answer = send(post(s, id, what, key, body)).await;
        if answer.status != 202 && answer.status != 409 {
            return answer;
        }
        let wait = answer
            .header("retry-after")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1u64);
        tokio::time::sleep(Duration::from_secs(wait.max(1))).await;
    }
    panic!("no definite answer after 20 tries");
}

async fn a_resent_capture_refused_as_closed_fails_once_confirmed(backend: Backend) {
    let armed = Arc::new(AtomicBool::new(false));
    let s = service(backend, armed.clone()).await;
    let body = json!({
        "amount": rub("1000.00"),
        "reference": "order-s13",
        "payment_method": {"token": "tok_ok"},
        "capture_method": "manual",
    });
    let made = send(s.pay("order-s13-authorize", &body)).await;
    assert_eq!(made.status, 201, "{}", made.text());
    let id = made.json()["id"].as_str().unwrap().to_owned();

    // The first part's capture is lost on its way: unknown, reserved.
    armed.store(true, Ordering::SeqCst);
    let first_part = json!({"amount": rub("300.00")});
    let first = send(post(
        &s,
        &id,
        "captures",
        "order-s13-capture-1",
        &first_part,
    ))
    .await;
    assert_eq!(first.status, 202, "unknown outcome: {}", first.text());
    assert!(!armed.load(Ordering::SeqCst), "the loss happened");

    // The last part closes the authorization at the acquirer meanwhile.
    let last_part = json!({"amount": rub("200.00"), "final": true});
    let last = send(post(&s, &id, "captures", "order-s13-capture-2", &last_part)).await;
    assert_eq!(last.status, 201, "{}", last.text());
    assert_eq!(last.json()["status"], "succeeded");

    // The first part's retries: looked up (nothing), sent again, refused as
    // closed; confirmed by a look-up after the settle window: failed.
    let ended = until_definite(&s, &id, "captures", "order-s13-capture-1", &first_part).await;
    ended.assert_problem(ended.status, "capture_failed");
    let problem = ended.json();
    assert_eq!(problem["failure_code"], "authorization_closed", "{problem}");
    assert_eq!(problem["capture"]["status"], "failed");
    let replay = send(post(
        &s,
        &id,
        "captures",
        "order-s13-capture-1",
        &first_part,
    ))
    .await;
    assert_eq!(replay.status, ended.status);
    assert_eq!(replay.bytes, ended.bytes, "the answer stays");

    let shown = payment(&s, &id).await;
    assert_eq!(shown["amount_captured"], rub("200.00"), "{shown}");
    assert_eq!(shown["amount_capturable"], rub("0.00"), "{shown}");
    assert_eq!(
        shown["status"], "succeeded",
        "closed by its last capture: {shown}"
    );
    let charges = s.charges("order-s13").await;
    assert_eq!(charges.len(), 1);
    assert_eq!(
        charges[0].captured_minor, 20_000,
        "only the last part was taken"
    );
}

async fn a_resent_refund_refused_as_exceeding_fails_once_confirmed(backend: Backend) {
    let armed = Arc::new(AtomicBool::new(false));
    let s = service(backend, armed.clone()).await;
    let paid = send(s.pay("order-x-pay", &common::body("order-x", "1000.00", "tok_ok"))).await;
    assert_eq!(paid.status, 201, "{}", paid.text());
    let id = paid.json()["id"].as_str().unwrap().to_owned();

    // Our refund is lost on its way: unknown, reserved.
    armed.store(true, Ordering::SeqCst);
    let part = json!({"amount": rub("300.00")});
    let first = send(post(&s, &id, "refunds", "order-x-refund", &part)).await;
    assert_eq!(first.status, 202, "unknown outcome: {}", first.text());
    assert!(!armed.load(Ordering::SeqCst), "the loss happened");

    // The whole charge is refunded at the acquirer meanwhile (a person in
    // the provider's dashboard).
    let charges = s.charges("order-x").await;
    chargeonce_core::AcquirerLedger::refund(s.sim.as_ref(), &charges[0].id)
        .await
        .unwrap();

    let ended = until_definite(&s, &id, "refunds", "order-x-refund", &part).await;
    ended.assert_problem(ended.status, "refund_failed");
    let problem = ended.json();
    assert_eq!(
        problem["failure_code"], "refund_exceeds_charge",
        "{problem}"
    );
    assert_eq!(problem["refund"]["status"], "failed");
    let replay = send(post(&s, &id, "refunds", "order-x-refund", &part)).await;
    assert_eq!(replay.bytes, ended.bytes, "the answer stays");
    let charges = s.charges("order-x").await;
    assert_eq!(
        charges[0].refunded_minor, 100_000,
        "only the dashboard's refund"
    );
}

on_both_stores!(
    a_resent_capture_refused_as_closed_fails_once_confirmed,
    a_resent_refund_refused_as_exceeding_fails_once_confirmed,
);
