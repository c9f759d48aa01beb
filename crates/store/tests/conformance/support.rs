//! The fixture every scenario gets (a store on a fresh database, with one
//! shop), the requests and answers the scenarios build, and named setup
//! steps: a claimed key, a finished key, a paid payment, a claimed refund.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::authorization::Authorization;
use chargeonce_core::events::{Event, EventId, EventQuery, EventType};
use chargeonce_core::webhook::EventKind;
use chargeonce_core::{
    Acquired, AcquirerKey, CardToken, Claim, ClaimRequest, Fingerprint, FinishOutcome,
    IdempotencyKey, InboundEvent, KeyRecord, KeyTiming, Lease, Money, NewPayment, NewRefund,
    Payment, PaymentId, PaymentRequest, PaymentStatus, Reference, Refund, RefundAnswer,
    RefundClaim, RefundSettlement, SettleOutcome, Settlement, ShopId, ShopSecret, Store,
    StoredResponse,
};
use chargeonce_core::{
    Capture, CaptureClaim, CaptureSettlement, NewCapture, PaymentCapture, ReleaseClaim,
    VoidSettlement,
};
use chargeonce_store::PoolConfig;
use chargeonce_testkit::{Backend, TestDb};

/// Whether a finish stored its answer.
pub trait Stored {
    /// `true` for [`FinishOutcome::Stored`].
    fn stored(self) -> bool;
}

impl Stored for FinishOutcome {
    fn stored(self) -> bool {
        self == FinishOutcome::Stored
    }
}

/// Leases of 30 s, keys kept an hour.
pub const LONG: KeyTiming = KeyTiming {
    lease: Duration::from_secs(30),
    ttl: Duration::from_secs(3600),
};

/// A long lease, but a key that expires 1 ms after it is finished.
pub const INSTANT: KeyTiming = KeyTiming {
    lease: LONG.lease,
    ttl: Duration::from_millis(1),
};

/// A lease of `ms` milliseconds, keys kept an hour.
pub fn lease_of(ms: u64) -> KeyTiming {
    KeyTiming {
        lease: Duration::from_millis(ms),
        ..LONG
    }
}

/// A store on a fresh database, with the shop `shop-a`.
pub struct Fixture {
    pub store: Arc<dyn Store>,
    pub shop: ShopId,
    pub db: TestDb,
}

/// The fixture on `backend`.
pub async fn fixture(backend: Backend) -> Fixture {
    let db = backend.db().await;
    let store = chargeonce_store::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop-a").unwrap();
    store
        .add_shop(&shop, &ShopSecret::from_string("s").hash())
        .await
        .unwrap();
    Fixture { store, shop, db }
}

pub fn key(k: &str) -> IdempotencyKey {
    IdempotencyKey::new(k).unwrap()
}

pub fn claim(shop: &ShopId, k: &str, body: &str) -> ClaimRequest {
    ClaimRequest {
        shop_id: shop.clone(),
        key: key(k),
        fingerprint: Fingerprint::compute("POST", "/v1/payments", &serde_json::json!({"b": body}))
            .unwrap(),
        method: "POST".into(),
        path: "/v1/payments".into(),
    }
}

pub fn new_payment(shop: &ShopId, k: &str, reference: &str) -> NewPayment {
    NewPayment::new(
        shop.clone(),
        key(k),
        PaymentRequest {
            amount: Money::parse("1500.00", "RUB").unwrap(),
            reference: Reference::new(reference).unwrap(),
            token: CardToken::new("tok_ok").unwrap(),
            metadata: Default::default(),
            capture_method: chargeonce_core::CaptureMethod::Automatic,
        },
    )
}

pub fn fp(k: &str, body: &str) -> Fingerprint {
    claim(&ShopId::new("shop-a").unwrap(), k, body).fingerprint
}

pub fn response(body: &str) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    }
}

pub fn succeeded() -> Settlement {
    Settlement {
        status: PaymentStatus::Succeeded,
        provider_payment_id: Some("ch_1".into()),
        decline_code: None,
    }
}

pub fn declined() -> Settlement {
    Settlement {
        status: PaymentStatus::Declined,
        provider_payment_id: Some("ch_d".into()),
        decline_code: Some("card_declined".into()),
    }
}

pub fn new_refund(shop: &ShopId, payment: &PaymentId, k: &str, value: Option<&str>) -> NewRefund {
    NewRefund::new(
        shop.clone(),
        payment.clone(),
        key(k),
        value.map(|v| Money::parse(v, "RUB").unwrap()),
    )
}

pub fn refund_succeeded(id: &str) -> RefundSettlement {
    RefundSettlement::Succeeded {
        provider_refund_id: id.into(),
    }
}

impl Fixture {
    /// `n` stores on the fixture's database, as `n` service instances have: on
    /// PostgreSQL each with its own pool of 4 connections (the suite shares the
    /// server's connection limit with parallel tests); SQLite serves one
    /// process, so there it is the fixture's store `n` times.
    pub async fn instances(&self, n: usize) -> Vec<Arc<dyn Store>> {
        if self.db.url().starts_with("sqlite:") {
            return vec![Arc::clone(&self.store); n];
        }
        let config = PoolConfig {
            max_connections: 4,
            ..PoolConfig::default()
        };
        let mut stores = Vec::with_capacity(n);
        for _ in 0..n {
            stores.push(
                chargeonce_store::connect(self.db.url(), &config)
                    .await
                    .unwrap(),
            );
        }
        stores
    }

    /// Claims key `k` for a new order `reference` (its body is the
    /// reference): what phase 1 of a first request leaves.
    pub async fn claimed(&self, k: &str, reference: &str, timing: KeyTiming) -> (Lease, Payment) {
        match self.claim(k, reference, reference, timing).await {
            Claim::Acquired(a) => (a.lease, a.payment),
            Claim::Exists(record) => panic!("expected a new claim, got {record:?}"),
        }
    }

    /// A claim of key `k` with this body for the order `reference`, whatever it finds.
    pub async fn claim(&self, k: &str, body: &str, reference: &str, timing: KeyTiming) -> Claim {
        self.store
            .claim_payment(
                &claim(&self.shop, k, body),
                &new_payment(&self.shop, k, reference),
                timing,
            )
            .await
            .unwrap()
    }

    /// A claim of key `k` with this body for the order `reference` that must be new.
    pub async fn acquired(&self, k: &str, body: &str, reference: &str) -> Acquired {
        let Claim::Acquired(acquired) = self.claim(k, body, reference, LONG).await else {
            panic!("a new key is claimed")
        };
        acquired
    }

    /// Finishes under `lease`, storing the answer `body`.
    pub async fn finish(
        &self,
        lease: &Lease,
        settlement: Option<(&Payment, &Settlement)>,
        body: &str,
        ttl: Duration,
    ) -> FinishOutcome {
        self.store
            .finish(lease, settlement, &response(body), ttl, &[])
            .await
            .unwrap()
    }

    /// A finish under `lease` that settles `payment` as succeeded and stores
    /// the answer `body`, kept `ttl`; it must be stored.
    pub async fn finished(&self, lease: &Lease, payment: &Payment, body: &str, ttl: Duration) {
        assert!(
            self.finish(lease, Some((payment, &succeeded())), body, ttl)
                .await
                .stored()
        );
    }

    /// Key `k` claimed for the order `reference` under `timing`, then
    /// finished as succeeded (answer `r`, kept `timing.ttl`); the payment as
    /// it was claimed.
    pub async fn finished_key(&self, k: &str, reference: &str, timing: KeyTiming) -> Payment {
        let (lease, payment) = self.claimed(k, reference, timing).await;
        self.finished(&lease, &payment, "r", timing.ttl).await;
        payment
    }

    /// A succeeded payment of 1500.00 RUB (key `{reference}-pay`), as stored.
    pub async fn paid_payment(&self, reference: &str) -> Payment {
        let k = format!("{reference}-pay");
        let (lease, payment) = self.claimed(&k, reference, LONG).await;
        self.finished(&lease, &payment, "{}", LONG.ttl).await;
        self.payment(&payment.id).await
    }

    /// A take-over of key `k` with the fingerprint of `body`, for a long lease.
    pub async fn take_over(&self, k: &str, body: &str) -> Option<Acquired> {
        self.store
            .take_over(&self.shop, &key(k), &fp(k, body), LONG.lease)
            .await
            .unwrap()
    }

    /// The key row of `k`, which must exist.
    pub async fn record(&self, k: &str) -> KeyRecord {
        self.store.key(&self.shop, &key(k)).await.unwrap().unwrap()
    }

    /// The payment `id` of the shop, which must exist.
    pub async fn payment(&self, id: &PaymentId) -> Payment {
        self.store.payment(&self.shop, id).await.unwrap().unwrap()
    }

    /// The payments of the order `reference`.
    pub async fn orders_of(&self, reference: &str) -> Vec<Payment> {
        let reference = Reference::new(reference).unwrap();
        self.store
            .payments_by_reference(&self.shop, &reference)
            .await
            .unwrap()
    }

    /// Adds the shop `shop-b` with this secret.
    pub async fn other_shop(&self, secret: &ShopSecret) -> ShopId {
        let other = ShopId::new("shop-b").unwrap();
        self.store.add_shop(&other, &secret.hash()).await.unwrap();
        other
    }

    /// A refund claim of key `k` (body `refund`) for `payment`.
    pub async fn claim_refund(
        &self,
        payment: &PaymentId,
        k: &str,
        value: Option<&str>,
        timing: KeyTiming,
    ) -> RefundClaim {
        self.store
            .claim_refund(
                &claim(&self.shop, k, "refund"),
                &new_refund(&self.shop, payment, k, value),
                timing,
            )
            .await
            .unwrap()
    }

    /// A refund claim that must be new.
    pub async fn refund_acquired(
        &self,
        payment: &PaymentId,
        k: &str,
        value: Option<&str>,
    ) -> Acquired {
        let RefundClaim::Acquired(acquired) = self.claim_refund(payment, k, value, LONG).await
        else {
            panic!("expected a refund claim");
        };
        acquired
    }

    /// Settles the shop's payment `id` (a webhook or the reconciler).
    pub async fn settle(&self, id: &PaymentId, settlement: &Settlement) -> SettleOutcome {
        self.store
            .settle_payment(&self.shop, id, settlement)
            .await
            .unwrap()
    }

    /// Finishes a refund key under `lease`, storing the answer `body`.
    pub async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<(&Refund, &RefundSettlement)>,
        body: &str,
        ttl: Duration,
    ) -> FinishOutcome {
        // The refund's event names its payment's order.
        let payment = match settlement {
            Some((refund, _)) => Some(self.payment(&refund.payment_id).await),
            None => None,
        };
        let answer = settlement
            .zip(payment.as_ref())
            .map(|((refund, settlement), payment)| RefundAnswer {
                refund,
                reference: payment.reference.as_str(),
                settlement,
            });
        self.store
            .finish_refund(lease, answer, &response(body), ttl, &[])
            .await
            .unwrap()
    }

    /// The shop's merchant events, newest first, one page.
    pub async fn events(
        &self,
        limit: u32,
        starting_after: Option<EventId>,
        event_type: Option<EventType>,
    ) -> Vec<Event> {
        self.store
            .events(
                &self.shop,
                &EventQuery {
                    limit,
                    starting_after,
                    event_type,
                },
            )
            .await
            .unwrap()
    }

    /// Every merchant event of the shop (up to 100).
    pub async fn all_events(&self) -> Vec<Event> {
        self.events(100, None, None).await
    }
}

/// An acquirer event of this kind about the payment with this acquirer key.
pub fn event(id: &str, kind: EventKind, key: &AcquirerKey, shop: &ShopId) -> InboundEvent {
    let settlement = match kind {
        EventKind::Processing => None,
        EventKind::Succeeded => Some(succeeded()),
        EventKind::Declined => Some(declined()),
    };
    InboundEvent {
        event_id: id.into(),
        kind,
        acquirer_key: key.clone(),
        shop_id: shop.clone(),
        settlement,
    }
}

/// An authorization of 1500.00 RUB for the order `reference` under key `k`
/// (`capture_method = manual`, held a day from creation).
pub fn new_authorization(shop: &ShopId, k: &str, reference: &str) -> NewPayment {
    let mut payment = new_payment(shop, k, reference);
    payment.request.capture_method = chargeonce_core::CaptureMethod::Manual;
    NewPayment::new(shop.clone(), key(k), payment.request)
        .with_authorization_ttl(Duration::from_secs(24 * 3600))
}

/// A capture of `payment` under key `k`: `value` (`None`: the rest), `last`.
pub fn new_capture(
    shop: &ShopId,
    payment: &PaymentId,
    k: &str,
    value: Option<&str>,
    last: bool,
) -> NewCapture {
    NewCapture::new(
        shop.clone(),
        payment.clone(),
        key(k),
        value.map(|v| Money::parse(v, "RUB").unwrap()),
        last,
    )
}

impl Fixture {
    /// An authorized payment of 1500.00 RUB (key `{reference}-auth`), as
    /// stored: its charge succeeded, its hold open (for a day).
    pub async fn authorized_payment(&self, reference: &str) -> Payment {
        self.authorized_for(reference, Duration::from_secs(24 * 3600))
            .await
    }

    /// An authorized payment as [`Fixture::authorized_payment`], its hold
    /// expiring `ttl` after its creation.
    pub async fn authorized_for(&self, reference: &str, ttl: Duration) -> Payment {
        let k = format!("{reference}-auth");
        let new = new_authorization(&self.shop, &k, reference).with_authorization_ttl(ttl);
        let Claim::Acquired(acquired) = self
            .store
            .claim_payment(&claim(&self.shop, &k, reference), &new, LONG)
            .await
            .unwrap()
        else {
            panic!("a new key is claimed")
        };
        self.finished(&acquired.lease, &acquired.payment, "{}", LONG.ttl)
            .await;
        self.payment(&acquired.payment.id).await
    }

    /// A capture claim of key `k` (body `capture`) for `payment`.
    pub async fn claim_capture(
        &self,
        payment: &PaymentId,
        k: &str,
        value: Option<&str>,
        last: bool,
    ) -> CaptureClaim {
        self.store
            .claim_capture(
                &claim(&self.shop, k, "capture"),
                &new_capture(&self.shop, payment, k, value, last),
                LONG,
            )
            .await
            .unwrap()
    }

    /// A capture claim that must be new.
    pub async fn capture_acquired(
        &self,
        payment: &PaymentId,
        k: &str,
        value: Option<&str>,
        last: bool,
    ) -> Acquired {
        match self.claim_capture(payment, k, value, last).await {
            CaptureClaim::Acquired(acquired) => acquired,
            other => panic!("expected a capture claim, got {other:?}"),
        }
    }

    /// Finishes a capture key under `lease`, storing the answer `body`.
    pub async fn finish_capture(
        &self,
        lease: &Lease,
        settlement: Option<(&Capture, &CaptureSettlement)>,
        body: &str,
    ) -> FinishOutcome {
        self.store
            .finish_capture(lease, settlement, &response(body), LONG.ttl, &[])
            .await
            .unwrap()
    }

    /// A void claim of key `k` (body `void`) for `payment`.
    pub async fn claim_void(&self, payment: &PaymentId, k: &str) -> ReleaseClaim {
        self.store
            .claim_void(&claim(&self.shop, k, "void"), payment, LONG)
            .await
            .unwrap()
    }

    /// Finishes a void key under `lease`, storing the answer `body`.
    pub async fn finish_void(
        &self,
        lease: &Lease,
        settlement: Option<(&PaymentId, &VoidSettlement)>,
        body: &str,
    ) -> FinishOutcome {
        self.store
            .finish_void(lease, settlement, &response(body), LONG.ttl, &[])
            .await
            .unwrap()
    }

    /// The kinds of the payment's history entries, in order.
    pub async fn history_kinds(&self, id: &PaymentId) -> Vec<&'static str> {
        self.store
            .payment_history(Some(&self.shop), id)
            .await
            .unwrap()
            .iter()
            .map(|e| e.event.kind())
            .collect()
    }

    /// The hold of the shop's payment `id`, which must be an authorization.
    pub async fn hold(&self, id: &PaymentId) -> Authorization {
        match self.payment(id).await.capture {
            PaymentCapture::Manual { hold, .. } => hold,
            PaymentCapture::Automatic => panic!("payment {id} holds nothing"),
        }
    }
}

/// The acquirer's capture `id` succeeded.
pub fn capture_succeeded(id: &str) -> CaptureSettlement {
    CaptureSettlement::Succeeded {
        provider_capture_id: id.into(),
    }
}
