//! The test kit's service (metrics, webhooks, the in-process simulator, a
//! real store), plus helpers to pay, sign webhooks and plant charges.

#![allow(dead_code, unused_imports, clippy::unwrap_used)]

use std::ops::Deref;
use std::time::Duration;

use chargeonce_acquirer::{ChargeStatus, LedgerEntry};
use chargeonce_core::webhook::{SIGNATURE_HEADER, WebhookSecret, sign};
use chargeonce_core::{
    AcquirerKey, CardToken, Claim, ClaimRequest, EngineConfig, Fingerprint, IdempotencyKey,
    KeyTiming, Money, NewPayment, PaymentId, PaymentRequest, Reference, ShopId,
};
use chargeonce_testkit::{TestService, body};
use chargeonce_workers::reconciler::ReconcilerConfig;
use serde_json::{Value, json};

pub use chargeonce_testkit::{Backend, SECRET, SHOP, WEBHOOK_SECRET};

/// The service from the test kit, with the requests and plantings the
/// worker tests make.
pub struct Harness(TestService);

impl Deref for Harness {
    type Target = TestService;

    fn deref(&self) -> &TestService {
        &self.0
    }
}

impl Harness {
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, |config| config).await
    }

    pub async fn start_with(
        backend: Backend,
        tune: impl FnOnce(EngineConfig) -> EngineConfig,
    ) -> Self {
        Self(TestService::builder(backend).engine(tune).start().await)
    }

    /// POST /v1/payments as the shop.
    pub async fn pay(&self, key: &str, reference: &str, token: &str) -> (u16, Value) {
        let response = self
            .0
            .pay(key, &body(reference, "1500.00", token))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let mut body: Value = response.json().await.unwrap();
        body["_replayed"] = Value::Bool(replayed);
        (status, body)
    }

    pub async fn payment(&self, id: &str) -> Value {
        self.get(&format!("/v1/payments/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// POSTs a webhook body with a signature header of our choosing.
    pub async fn webhook_raw(&self, body: &str, signature: Option<String>) -> (u16, Value) {
        let mut request = self
            .http
            .post(self.url("/v1/webhooks/acquirer"))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(signature) = signature {
            request = request.header(SIGNATURE_HEADER, signature);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// POSTs an event signed now with the right secret.
    pub async fn webhook(&self, event: &Value) -> (u16, Value) {
        let body = event.to_string();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let signature = sign(&WebhookSecret::new(WEBHOOK_SECRET), now, body.as_bytes());
        self.webhook_raw(&body, Some(signature)).await
    }

    pub async fn metrics_text(&self) -> String {
        self.http
            .get(self.operator_url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The one charge the simulator holds for a payment.
    pub async fn charge_of(&self, payment_id: &str) -> LedgerEntry {
        let all: Vec<LedgerEntry> = self
            .sim
            .ledger()
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.payment_id.as_str() == payment_id)
            .collect();
        assert_eq!(all.len(), 1, "one charge for {payment_id}: {all:?}");
        all.into_iter().next().unwrap()
    }

    /// A pending payment claimed in the store alone: the acquirer never
    /// heard of it.
    pub async fn ghost(&self, key: &str, reference: &str) -> PaymentId {
        let key = IdempotencyKey::new(key).unwrap();
        let request = PaymentRequest {
            amount: Money::parse("10.00", "RUB").unwrap(),
            reference: Reference::new(reference).unwrap(),
            token: CardToken::new("tok_ok").unwrap(),
            metadata: Default::default(),
            capture_method: chargeonce_core::CaptureMethod::Automatic,
        };
        let shop = ShopId::new(SHOP).unwrap();
        let claim = ClaimRequest {
            shop_id: shop.clone(),
            key: key.clone(),
            fingerprint: Fingerprint::compute("POST", "/v1/payments", &json!({})).unwrap(),
            method: "POST".into(),
            path: "/v1/payments".into(),
        };
        let Claim::Acquired(acquired) = self
            .store
            .claim_payment(
                &claim,
                &NewPayment::new(shop, key, request),
                KeyTiming {
                    lease: Duration::from_secs(30),
                    ttl: Duration::from_secs(60),
                },
            )
            .await
            .unwrap()
        else {
            panic!("new key")
        };
        acquired.payment.id
    }

    /// Plants a succeeded charge in the acquirer's ledger, as if it had happened.
    pub async fn plant(&self, payment_id: &PaymentId, reference: &str, key: &str) -> LedgerEntry {
        let entry = LedgerEntry {
            id: format!("ch_{}", uuid::Uuid::now_v7().simple()),
            acquirer_key: AcquirerKey::from_stored(key.to_owned()),
            shop_id: ShopId::new(SHOP).unwrap(),
            payment_id: payment_id.clone(),
            reference: Reference::new(reference).unwrap(),
            amount: Money::parse("1500.00", "RUB").unwrap(),
            status: ChargeStatus::Succeeded,
            decline_code: None,
            created_at: time::OffsetDateTime::now_utc(),
            refunded_minor: 0,
            capture_method: chargeonce_core::CaptureMethod::Automatic,
            captured_minor: 0,
            closed: false,
            voided: false,
            trace_id: None,
        };
        self.sim.plant(&entry).await.unwrap();
        entry
    }
}

/// An acquirer event as JSON.
pub fn event(id: &str, kind: &str, charge: &LedgerEntry) -> Value {
    json!({
        "id": id,
        "type": kind,
        "created": 1,
        "data": {
            "charge_id": charge.id,
            "acquirer_key": charge.acquirer_key.as_str(),
            "shop_id": charge.shop_id.as_str(),
            "payment_id": charge.payment_id.as_str(),
            "reference": charge.reference.as_str(),
            "amount": {"value": charge.amount.to_decimal_string(), "currency": "RUB"},
            "decline_code": charge.decline_code,
        }
    })
}

pub fn reconcile_now() -> ReconcilerConfig {
    ReconcilerConfig {
        pending_after: Duration::ZERO,
        window: Duration::from_secs(3600),
        ..ReconcilerConfig::default()
    }
}
