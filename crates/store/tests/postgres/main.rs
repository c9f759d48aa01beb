//! PostgreSQL only: the one-statement claim and finish under the races their
//! correctness depends on, made deterministic by holding a competing
//! transaction open until the store's statement waits on it
//! ([`against_open`]); the schema's stored forms and migrations; the
//! connections under a read-only node, a parked connection and a cancelled
//! `BEGIN`; keys ready to distribute by shop, and the hot path's statements
//! on their indexes. One file a concern; the fixture and the race helper
//! here.

#![allow(clippy::unwrap_used, missing_docs)]

mod claims;
mod connections;
mod finishes;
mod schema;
mod sharding;
mod turn_finishes;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chargeonce_core::events::EventQuery;
use chargeonce_core::store::prelude::*;
use chargeonce_core::{
    Capture, CaptureClaim, CaptureMethod, CardToken, Claim, ClaimRequest, EventRecorded,
    Fingerprint, FinishOutcome, IdempotencyKey, InboundEvent, KeyTiming, Lease, Money, NewCapture,
    NewPayment, Payment, PaymentRequest, PaymentStatus, RecoveryPoint, Reference, SettleOutcome,
    Settlement, ShopId, ShopSecret, StoreError, StoredResponse,
};
use chargeonce_store::{PgStore, PoolConfig};
use chargeonce_testkit::TestDb;
use sqlx::{Postgres, Transaction};

pub(crate) const TIMING: KeyTiming = KeyTiming {
    lease: Duration::from_secs(30),
    ttl: Duration::from_secs(3600),
};

struct Pg {
    store: Arc<PgStore>,
    shop: ShopId,
    _db: TestDb,
}

async fn pg() -> Pg {
    let db = TestDb::postgres().await;
    let store = PgStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop-a").unwrap();
    store
        .add_shop(&shop, &ShopSecret::from_string("s").hash())
        .await
        .unwrap();
    Pg {
        store: Arc::new(store),
        shop,
        _db: db,
    }
}

fn key(k: &str) -> IdempotencyKey {
    IdempotencyKey::new(k).unwrap()
}

fn claim(shop: &ShopId, k: &str) -> ClaimRequest {
    ClaimRequest {
        shop_id: shop.clone(),
        key: key(k),
        fingerprint: Fingerprint::compute("POST", "/v1/payments", &serde_json::json!({"k": k}))
            .unwrap(),
        method: "POST".into(),
        path: "/v1/payments".into(),
    }
}

fn new_payment(shop: &ShopId, k: &str, reference: &str) -> NewPayment {
    NewPayment::new(
        shop.clone(),
        key(k),
        PaymentRequest {
            amount: Money::parse("15.00", "RUB").unwrap(),
            reference: Reference::new(reference).unwrap(),
            token: CardToken::new("tok_ok").unwrap(),
            metadata: Default::default(),
            capture_method: chargeonce_core::CaptureMethod::Automatic,
        },
    )
}

fn settlement(status: PaymentStatus, charge: &str) -> Settlement {
    Settlement {
        status,
        provider_payment_id: Some(charge.into()),
        decline_code: (status == PaymentStatus::Declined).then(|| "card_declined".into()),
    }
}

fn response(body: &str) -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    }
}

/// The one charge a claimant makes for `payment`, with `reason` if given.
/// With it (and no reason) a finish is the claimant's usual one, kept on
/// the payment's row (migration 0024): the hot path's form.
fn charge(payment: &Payment, reason: Option<&str>) -> chargeonce_core::history::AcquirerAttempt {
    chargeonce_core::history::AcquirerAttempt {
        call: chargeonce_core::AcquirerCall::Charge,
        outcome: chargeonce_core::AcquirerOutcomeKind::Succeeded,
        latency: Duration::from_millis(4),
        acquirer_key: chargeonce_core::AcquirerKey::for_payment(&payment.id)
            .as_str()
            .to_owned(),
        reason: reason.map(str::to_owned),
    }
}

/// Finishes `payment` as its claimant does after `attempt`: the charge
/// succeeded, the answer is stored and the payment settled.
async fn finish_charged(
    pg: &Pg,
    lease: &Lease,
    payment: &Payment,
    attempt: &chargeonce_core::history::AcquirerAttempt,
) -> FinishOutcome {
    pg.store
        .finish(
            lease,
            Some((payment, &settlement(PaymentStatus::Succeeded, "ch"))),
            &response("ok"),
            TIMING.ttl,
            std::slice::from_ref(attempt),
        )
        .await
        .unwrap()
}

/// Waits until some statement in this database waits for a lock.
async fn until_blocked(store: &PgStore) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the statement never waited");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The race scaffold every test here shares: runs `op` while `tx` (a
/// competing transaction the test left open) holds what `op` needs; once
/// `op` waits on it, commits (`commit`) or rolls `tx` back, and returns
/// what `op` gave.
async fn against_open<T: Send + 'static>(
    store: &PgStore,
    tx: Transaction<'static, Postgres>,
    commit: bool,
    op: impl Future<Output = T> + Send + 'static,
) -> T {
    let task = tokio::spawn(op);
    until_blocked(store).await;
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
    task.await.unwrap()
}

async fn events(pg: &Pg) -> usize {
    pg.store
        .events(
            &pg.shop,
            &EventQuery {
                limit: 100,
                starting_after: None,
                event_type: None,
            },
        )
        .await
        .unwrap()
        .len()
}

/// The kinds of a payment's history entries, oldest first, as the store
/// reads them (the `claimed` entry is the payment row's; the others are
/// history rows).
async fn history(pg: &Pg, payment: &chargeonce_core::PaymentId) -> Vec<String> {
    pg.store
        .payment_history(None, payment)
        .await
        .unwrap()
        .iter()
        .map(|entry| entry.event.kind().to_owned())
        .collect()
}

/// Key `k` is still at `point`, with no answer stored.
async fn assert_unfinished(pg: &Pg, k: &str, point: RecoveryPoint) {
    let record = pg.store.key(&pg.shop, &key(k)).await.unwrap().unwrap();
    assert_eq!(record.recovery_point, point);
    assert!(record.response.is_none());
}

/// A new key's claim of a payment for `reference`: its lease and payment.
async fn acquired(pg: &Pg, k: &str, reference: &str) -> (Lease, Payment) {
    match pg
        .store
        .claim_payment(
            &claim(&pg.shop, k),
            &new_payment(&pg.shop, k, reference),
            TIMING,
        )
        .await
        .unwrap()
    {
        Claim::Acquired(a) => (a.lease, a.payment),
        Claim::Exists(_) => panic!("new key"),
    }
}

/// A payment authorized under key `k` (its hold open, its order `k`'s).
async fn authorized(pg: &Pg, k: &str) -> Payment {
    let mut new = new_payment(&pg.shop, k, &format!("order-{k}"));
    new.request.capture_method = CaptureMethod::Manual;
    let new = NewPayment::new(pg.shop.clone(), key(k), new.request)
        .with_authorization_ttl(Duration::from_secs(3600));
    let Claim::Acquired(authorizing) = pg
        .store
        .claim_payment(&claim(&pg.shop, k), &new, TIMING)
        .await
        .unwrap()
    else {
        panic!("a new key");
    };
    let (lease, payment) = (authorizing.lease, authorizing.payment);
    let finished = finish_charged(pg, &lease, &payment, &charge(&payment, None)).await;
    assert_eq!(finished, FinishOutcome::Stored);
    payment
}

/// A payment [`authorized`] under key `k` and a new capture key `c`'s
/// claim of all of it, as the last capture: the capture's lease, the
/// payment, the capture.
async fn capture_acquired(pg: &Pg, k: &str, c: &str) -> (Lease, Payment, Capture) {
    let payment = authorized(pg, k).await;
    let new = NewCapture::new(pg.shop.clone(), payment.id.clone(), key(c), None, true);
    let claimed = pg
        .store
        .claim_capture(&claim(&pg.shop, c), &new, TIMING)
        .await
        .unwrap();
    let CaptureClaim::Acquired(acquired) = claimed else {
        panic!("a new capture key: {claimed:?}");
    };
    let capture = acquired.capture.expect("the claim's capture");
    (acquired.lease, acquired.payment, *capture)
}
