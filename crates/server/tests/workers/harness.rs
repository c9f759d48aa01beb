//! A real server with metrics, webhooks and the in-process simulator, on a
//! real store, plus helpers to sign webhooks and plant charges.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use chargeonce_acquirer::{ChargeStatus, LedgerEntry, Simulator, SimulatorConfig};
use chargeonce_core::webhook::{SIGNATURE_HEADER, WebhookSecret, sign};
use chargeonce_core::{
    AcquirerKey, CardToken, Claim, ClaimRequest, Engine, EngineConfig, Fingerprint, IdempotencyKey,
    KeyTiming, Money, NewPayment, PaymentId, PaymentRequest, Reference, ShopId, ShopSecret, Store,
};
use chargeonce_server::{AppState, HttpRender, Metrics};
use chargeonce_testkit::TestDb;
use chargeonce_workers::reconciler::{Reconciler, ReconcilerConfig};
use serde_json::{Value, json};

pub const SHOP: &str = "shop-a";
pub const SECRET: &str = "sk_test_shop_a_0123456789";
pub const WEBHOOK_SECRET: &str = "whsec_test_0123456789";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

pub struct Harness {
    pub base: String,
    pub http: reqwest::Client,
    pub sim: Arc<Simulator>,
    pub store: Arc<dyn Store>,
    pub engine: Arc<Engine>,
    pub metrics: Arc<Metrics>,
    server: tokio::task::JoinHandle<()>,
    _db: TestDb,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.server.abort();
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
        let db = match backend {
            Backend::Postgres => TestDb::postgres().await,
            Backend::Sqlite => TestDb::sqlite(),
        };
        let store = chargeonce_store::connect(db.url(), &Default::default())
            .await
            .unwrap();
        store
            .add_shop(
                &ShopId::new(SHOP).unwrap(),
                &ShopSecret::new(SECRET).unwrap().hash(),
            )
            .await
            .unwrap();
        let sim = Arc::new(
            Simulator::open(
                &db.dir().join("ledger.db"),
                SimulatorConfig {
                    slow: Duration::from_millis(1500),
                },
            )
            .await
            .unwrap(),
        );
        let metrics = Arc::new(Metrics::new());
        let config = tune(EngineConfig {
            timing: KeyTiming {
                lease: Duration::from_secs(30),
                ttl: Duration::from_secs(3600),
            },
            ..EngineConfig::default()
        });
        let engine = Arc::new(
            Engine::new(store.clone(), sim.clone(), Arc::new(HttpRender), config)
                .unwrap()
                .with_observer(metrics.clone()),
        );
        let state = AppState::new(engine.clone())
            .with_metrics(metrics.clone())
            .with_webhook_secret(WebhookSecret::new(WEBHOOK_SECRET));
        let app = chargeonce_server::router(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            chargeonce_server::serve(listener, app, std::future::pending())
                .await
                .unwrap();
        });
        Self {
            base,
            http: reqwest::Client::new(),
            sim,
            store,
            engine,
            metrics,
            server,
            _db: db,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// POST /v1/payments as the shop.
    pub async fn pay(&self, key: &str, reference: &str, token: &str) -> (u16, Value) {
        let response = self
            .http
            .post(self.url("/v1/payments"))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", key)
            .json(&json!({
                "amount": {"value": "1500.00", "currency": "RUB"},
                "reference": reference,
                "payment_method": {"token": token},
            }))
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
        self.http
            .get(self.url(&format!("/v1/payments/{id}")))
            .basic_auth(SHOP, Some(SECRET))
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
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub fn reconciler(&self) -> Reconciler {
        Reconciler {
            store: self.store.clone(),
            acquirer: self.sim.clone(),
            ledger: self.sim.clone(),
            observer: self.metrics.clone(),
        }
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

/// Defines each listed test once per store.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(super::harness::Backend::Postgres).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(super::harness::Backend::Sqlite).await;
                }
            )*
        }
    };
}
