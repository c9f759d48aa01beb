//! PostgreSQL only: the one-statement claim and finish under the races their
//! correctness depends on, made deterministic by holding a competing
//! transaction open until the store's statement waits on it.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use chargeonce_core::events::EventQuery;
use chargeonce_core::store::prelude::*;
use chargeonce_core::{
    CardToken, Claim, ClaimRequest, EventRecorded, Fingerprint, FinishOutcome, IdempotencyKey,
    InboundEvent, KeyTiming, Lease, Money, NewPayment, Payment, PaymentRequest, PaymentStatus,
    RecoveryPoint, Reference, SettleOutcome, Settlement, ShopId, ShopSecret, StoreError,
    StoredResponse,
};
use chargeonce_store::{PgStore, PoolConfig};
use chargeonce_testkit::TestDb;
use sqlx::{Postgres, Transaction};

const TIMING: KeyTiming = KeyTiming {
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

/// A claim's rows, inserted in a transaction the test holds open.
async fn insert_claim(
    tx: &mut Transaction<'static, Postgres>,
    claim: &ClaimRequest,
    p: &NewPayment,
) {
    sqlx::query(
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point, \
             lease_token, locked_until, payment_id, created_at, expires_at) \
         VALUES ($1, $2, $3, 'POST', '/v1/payments', 'payment_created', gen_random_uuid(), \
             now() + interval '30 seconds', $4, now(), now() + interval '1 hour')",
    )
    .bind(claim.shop_id.as_str())
    .bind(claim.key.as_str())
    .bind(claim.fingerprint.as_bytes().as_slice())
    .bind(p.id.as_str())
    .execute(&mut **tx)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency, \
             token, status, acquirer_key, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)",
    )
    .bind(p.id.as_str())
    .bind(p.shop_id.as_str())
    .bind(p.idempotency_key.as_str())
    .bind(p.request.reference.as_str())
    .bind(p.request.amount.minor_units())
    .bind(p.request.amount.currency().code())
    .bind(p.request.token.as_str())
    .bind(p.acquirer_key.as_str())
    .bind(p.created_at)
    .execute(&mut **tx)
    .await
    .unwrap();
    sqlx::query("INSERT INTO pending_payments (created_at, payment_id) VALUES ($1, $2)")
        .bind(p.created_at)
        .bind(p.id.as_str())
        .execute(&mut **tx)
        .await
        .unwrap();
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

/// Runs a claim of `k` for `reference` while a transaction holding the
/// claim of `other` for the same order (uncommitted) is committed or rolled
/// back, once the claim waits for it. Returns the claim and the other
/// payment.
async fn claim_against_open(
    pg: &Pg,
    k: &str,
    other: &str,
    commit: bool,
) -> (Claim, NewPayment, NewPayment) {
    let theirs = new_payment(&pg.shop, other, "order-1");
    let mut tx = pg.store.pool().begin().await.unwrap();
    insert_claim(&mut tx, &claim(&pg.shop, other), &theirs).await;
    let ours = new_payment(&pg.shop, k, "order-1");
    let task = {
        let store = Arc::clone(&pg.store);
        let (c, p) = (claim(&pg.shop, k), ours.clone());
        tokio::spawn(async move { store.claim_payment(&c, &p, TIMING).await })
    };
    until_blocked(&pg.store).await;
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
    (task.await.unwrap().unwrap(), ours, theirs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_another_keys_payment_of_its_order_links_it() {
    let pg = pg().await;
    let (claimed, ours, theirs) = claim_against_open(&pg, "k2", "k1", true).await;
    let Claim::Acquired(a) = claimed else {
        panic!("k2 is new")
    };
    assert_eq!(a.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(a.payment, theirs.to_payment());
    assert!(
        pg.store
            .payment(&pg.shop, &ours.id)
            .await
            .unwrap()
            .is_none()
    );
    let record = pg.store.key(&pg.shop, &key("k2")).await.unwrap().unwrap();
    assert_eq!(record.payment_id, Some(theirs.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(record.replays, 0);
    // The one-statement claim that failed at its commit wrote no entry;
    // the transaction wrote the link on the live payment.
    assert!(history(&pg, &ours.id).await.is_empty());
    assert_eq!(history(&pg, &theirs.id).await, ["linked"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_a_rolled_back_payment_of_its_order_creates_its_own() {
    let pg = pg().await;
    let (claimed, ours, _) = claim_against_open(&pg, "k2", "k1", false).await;
    let Claim::Acquired(a) = claimed else {
        panic!("k2 is new")
    };
    assert_eq!(a.recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(a.payment, ours.to_payment());
    assert!(pg.store.key(&pg.shop, &key("k1")).await.unwrap().is_none());
    assert_eq!(history(&pg, &ours.id).await, ["claimed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_its_key_reads_the_winner_in_a_new_statement() {
    // The winner commits after the claim's statement began: its snapshot
    // cannot see the key, the re-read must.
    let pg = pg().await;
    let (claimed, ours, theirs) = claim_against_open(&pg, "k1", "k1", true).await;
    let Claim::Exists(record) = claimed else {
        panic!("the key was claimed first")
    };
    assert_eq!(record.payment_id, Some(theirs.id.clone()));
    assert!(record.lease_active);
    assert_eq!(record.replays, 1);
    let info = pg
        .store
        .key_info(&pg.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        info.repeats_by.conflicts.count, 1,
        "a 409: its lease is alive"
    );
    assert!(
        pg.store
            .payment(&pg.shop, &ours.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(history(&pg, &ours.id).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_its_key_rolled_back_claims_it() {
    let pg = pg().await;
    let (claimed, ours, _) = claim_against_open(&pg, "k1", "k1", false).await;
    let Claim::Acquired(a) = claimed else {
        panic!("the other claim rolled back")
    };
    assert_eq!(a.recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(a.payment, ours.to_payment());
}

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

/// Runs a finish of `lease` with a decline while `competitor` (statements
/// in an open transaction) is committed or rolled back, once the finish
/// waits for it.
async fn finish_against_open(
    pg: &Pg,
    lease: &Lease,
    payment: &Payment,
    competitor: &'static str,
    commit: bool,
) -> FinishOutcome {
    let mut tx = pg.store.pool().begin().await.unwrap();
    sqlx::query(competitor)
        .bind(lease.key.as_str())
        .bind(payment.id.as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    let task = {
        let store = Arc::clone(&pg.store);
        let (lease, payment) = (lease.clone(), payment.clone());
        tokio::spawn(async move {
            let declined = settlement(PaymentStatus::Declined, "ch_ours");
            store
                .finish(
                    &lease,
                    Some((&payment, &declined)),
                    &response("ours"),
                    TIMING.ttl,
                    &[],
                )
                .await
        })
    };
    until_blocked(&pg.store).await;
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
    task.await.unwrap().unwrap()
}

// Each binds the key ($1) and its payment ($2).
const TAKE_OVER: &str = "UPDATE idempotency_keys SET lease_token = gen_random_uuid() \
                         WHERE key = $1 AND payment_id = $2";
const SETTLE: &str = "WITH settled AS (UPDATE payments SET status = 'succeeded', \
                          provider_payment_id = 'ch_theirs' \
                      WHERE idempotency_key = $1 AND id = $2 RETURNING id, created_at) \
                      DELETE FROM pending_payments q USING settled \
                      WHERE q.created_at = settled.created_at AND q.payment_id = settled.id";
const LOCK_KEY: &str = "SELECT 1 FROM idempotency_keys WHERE key = $1 AND payment_id = $2 \
                        FOR UPDATE";

async fn assert_key_unfinished(pg: &Pg, k: &str) {
    let record = pg.store.key(&pg.shop, &key(k)).await.unwrap().unwrap();
    assert_eq!(record.recovery_point, RecoveryPoint::PaymentCreated);
    assert!(record.response.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finish_that_waited_for_a_take_over_writes_nothing() {
    let pg = pg().await;
    let (lease, payment) = acquired(&pg, "k1", "order-1").await;
    assert_eq!(
        finish_against_open(&pg, &lease, &payment, TAKE_OVER, true).await,
        FinishOutcome::LeaseLost
    );
    assert_key_unfinished(&pg, "k1").await;
    assert_eq!(
        pg.store.payment(&pg.shop, &payment.id).await.unwrap(),
        Some(payment.clone())
    );
    assert_eq!(events(&pg).await, 0);
    assert_eq!(history(&pg, &payment.id).await, ["claimed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finish_that_waited_for_a_settlement_writes_nothing() {
    let pg = pg().await;
    let (lease, payment) = acquired(&pg, "k1", "order-1").await;
    assert_eq!(
        finish_against_open(&pg, &lease, &payment, SETTLE, true).await,
        FinishOutcome::PaymentAlreadySettled
    );
    assert_key_unfinished(&pg, "k1").await;
    let record = pg.store.key(&pg.shop, &key("k1")).await.unwrap().unwrap();
    assert!(record.lease_active, "the lease is still ours");
    let stored = pg
        .store
        .payment(&pg.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.provider_payment_id.as_deref(), Some("ch_theirs"));
    assert_eq!(events(&pg).await, 0);
    assert_eq!(history(&pg, &payment.id).await, ["claimed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finish_sees_a_settlement_committed_after_it_began() {
    // The finish waits on the key row (locked, not changed, by the open
    // transaction); meanwhile the payment is settled and committed, after
    // the finish's snapshot was taken. The finish must see it anyway.
    let pg = pg().await;
    let (lease, payment) = acquired(&pg, "k1", "order-1").await;
    let mut tx = pg.store.pool().begin().await.unwrap();
    sqlx::query(LOCK_KEY)
        .bind(lease.key.as_str())
        .bind(payment.id.as_str())
        .execute(&mut *tx)
        .await
        .unwrap();
    let task = {
        let store = Arc::clone(&pg.store);
        let (lease, payment) = (lease.clone(), payment.clone());
        tokio::spawn(async move {
            let declined = settlement(PaymentStatus::Declined, "ch_ours");
            store
                .finish(
                    &lease,
                    Some((&payment, &declined)),
                    &response("ours"),
                    TIMING.ttl,
                    &[],
                )
                .await
        })
    };
    until_blocked(&pg.store).await;
    sqlx::query(SETTLE)
        .bind(lease.key.as_str())
        .bind(payment.id.as_str())
        .execute(pg.store.pool())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        task.await.unwrap().unwrap(),
        FinishOutcome::PaymentAlreadySettled
    );
    assert_key_unfinished(&pg, "k1").await;
    let stored = pg
        .store
        .payment(&pg.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.provider_payment_id.as_deref(), Some("ch_theirs"));
    assert_eq!(events(&pg).await, 0);
    assert_eq!(history(&pg, &payment.id).await, ["claimed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finish_that_waited_for_a_rolled_back_competitor_writes_everything() {
    let pg = pg().await;
    for (i, competitor) in [TAKE_OVER, SETTLE].into_iter().enumerate() {
        let k = format!("k{i}");
        let (lease, payment) = acquired(&pg, &k, &format!("order-{i}")).await;
        assert_eq!(
            finish_against_open(&pg, &lease, &payment, competitor, false).await,
            FinishOutcome::Stored
        );
        let record = pg.store.key(&pg.shop, &key(&k)).await.unwrap().unwrap();
        assert_eq!(record.recovery_point, RecoveryPoint::Finished);
        assert_eq!(record.response.unwrap().body, b"ours");
        let stored = pg
            .store
            .payment(&pg.shop, &payment.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.status, PaymentStatus::Declined);
        assert_eq!(events(&pg).await, i + 1);
        assert_eq!(
            history(&pg, &payment.id).await,
            ["claimed", "answered", "settled"]
        );
    }
}

/// The entries whose JSON a statement builds around the values it found
/// (a take-over's recovery point, a delivery attempt's number and result)
/// are stored exactly as serde writes them, as are the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn history_entries_are_stored_in_serdes_form() {
    use chargeonce_core::events::{AttemptOutcome, WebhookEndpoint};
    use chargeonce_core::history::HistoryEvent;
    use chargeonce_core::webhook::WebhookSecret;

    let pg = pg().await;
    let endpoint = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_test"),
    };
    pg.store
        .set_webhook(&pg.shop, Some(&endpoint))
        .await
        .unwrap();
    let short = KeyTiming {
        lease: Duration::from_millis(50),
        ..TIMING
    };
    // A key with quotes and a backslash: escaped as serde escapes them.
    let k = "k\"1\\";
    let (_, payment) = match pg
        .store
        .claim_payment(
            &claim(&pg.shop, k),
            &new_payment(&pg.shop, k, "order-1"),
            short,
        )
        .await
        .unwrap()
    {
        Claim::Acquired(a) => (a.lease, a.payment),
        Claim::Exists(_) => panic!("new key"),
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let taken = pg
        .store
        .take_over(
            &pg.shop,
            &key(k),
            &claim(&pg.shop, k).fingerprint,
            TIMING.lease,
        )
        .await
        .unwrap()
        .unwrap();
    let charged = settlement(PaymentStatus::Succeeded, "ch");
    assert_eq!(
        pg.store
            .finish(
                &taken.lease,
                Some((&payment, &charged)),
                &response("ok"),
                TIMING.ttl,
                &[]
            )
            .await
            .unwrap(),
        FinishOutcome::Stored
    );
    for outcome in [
        AttemptOutcome::Failed {
            status: Some(503),
            error: "no".into(),
            retry_in: Duration::from_secs(60),
            give_up_after: Duration::from_secs(3600),
        },
        AttemptOutcome::Failed {
            status: None,
            error: "no".into(),
            retry_in: Duration::from_secs(60),
            give_up_after: Duration::ZERO,
        },
        AttemptOutcome::Delivered { status: 200 },
    ] {
        let due = pg.store.claim_due_events(10, TIMING.lease).await.unwrap();
        assert_eq!(due.len(), 1);
        pg.store
            .record_attempt(&due[0].event.id, &outcome)
            .await
            .unwrap();
        pg.store
            .resend_event(&pg.shop, &due[0].event.id)
            .await
            .unwrap()
            .unwrap();
    }
    // The finish's two entries share a row (migration 0010); the others
    // are one a write.
    let rows: Vec<String> = sqlx::query_scalar("SELECT kind FROM payment_history ORDER BY seq")
        .fetch_all(pg.store.pool())
        .await
        .unwrap();
    assert_eq!(rows[..2], ["taken_over", "answered,settled"]);
    assert_eq!(rows.len(), 8);
    let stored: Vec<(String, String)> = sqlx::query_as(
        "SELECT split_part(h.kind, ',', x.n::int), x.event::text \
         FROM payment_history h CROSS JOIN LATERAL json_array_elements( \
             CASE WHEN left(h.event, 1) = '[' THEN h.event::json \
                  ELSE json_build_array(h.event::json) END) WITH ORDINALITY AS x(event, n) \
         ORDER BY h.seq, x.n",
    )
    .fetch_all(pg.store.pool())
    .await
    .unwrap();
    let kinds: Vec<&str> = stored.iter().map(|(kind, _)| kind.as_str()).collect();
    // The `claimed` entry is the payment row's `claimed_by`, not a row.
    assert_eq!(
        kinds,
        [
            "taken_over",
            "answered",
            "settled",
            "event_attempt",
            "event_resent",
            "event_attempt",
            "event_resent",
            "event_attempt",
            "event_resent",
        ]
    );
    for (kind, json) in &stored {
        let event = HistoryEvent::from_json(json).unwrap();
        assert_eq!(event.kind(), kind);
        assert_eq!(&event.to_json(), json);
    }
}

/// Reads of `payments` indexes so far: (index, scans, entries read).
async fn index_reads(pg: &Pg) -> Vec<(String, i64, i64)> {
    sqlx::query_as(
        "SELECT indexrelname::text, idx_scan, idx_tup_read FROM pg_stat_user_indexes \
         WHERE relname = 'payments' ORDER BY indexrelname",
    )
    .fetch_all(pg.store.pool())
    .await
    .unwrap()
}

fn reads_of(reads: &[(String, i64, i64)], index: &str) -> (i64, i64) {
    reads
        .iter()
        .find(|(name, _, _)| name == index)
        .map_or((0, 0), |(_, scans, read)| (*scans, *read))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finish_finds_its_payment_by_primary_key_however_many_the_shop_has() {
    // Without statistics (a new database, or autovacuum off) the planner
    // once read every live payment of the shop per finish, through the
    // partial index of live payments by order.
    let pg = pg().await;
    let paid = |i: usize| {
        let pg = &pg;
        async move {
            let (lease, payment) = acquired(pg, &format!("k{i}"), &format!("order-{i}")).await;
            let charged = settlement(PaymentStatus::Succeeded, "ch");
            assert!(
                pg.store
                    .finish(
                        &lease,
                        Some((&payment, &charged)),
                        &response("ok"),
                        TIMING.ttl,
                        &[]
                    )
                    .await
                    .unwrap()
                    == FinishOutcome::Stored
            );
        }
    };
    for i in 0..300 {
        paid(i).await;
    }
    // Statistics reach the views within about ten seconds of a backend
    // going idle; wait until the primary key's scans stop moving.
    let settled = || async {
        let mut last = index_reads(&pg).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let now = index_reads(&pg).await;
            if now == last || Instant::now() > deadline {
                return now;
            }
            last = now;
        }
    };
    let before = settled().await;
    for i in 300..320 {
        paid(i).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let now = index_reads(&pg).await;
        // 20 finishes (and 20 claims' foreign key checks) use the primary key.
        if reads_of(&now, "payments_pkey").0 >= reads_of(&before, "payments_pkey").0 + 40 {
            break now;
        }
        assert!(Instant::now() < deadline, "statistics never arrived");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for index in ["payments_one_live_per_order", "payments_by_shop_newest"] {
        let read = reads_of(&after, index).1 - reads_of(&before, index).1;
        // The claims' arbiter probes read the live index: about one entry each.
        assert!(read <= 60, "{index}: {read} entries read for 20 payments");
    }
}

/// A node that is no longer the leader (demoted, or a standby reached
/// between a promotion and HAProxy's switch) refuses writes with 25006
/// (read_only_sql_transaction). Nothing was written, so the call is
/// `Unavailable` (503 `store_unavailable`, retry with the same key), not an
/// unclassified error that would answer 500.
#[tokio::test]
async fn a_write_refused_by_a_read_only_node_is_unavailable() {
    let pg = pg().await;
    // One connection, made read-only as every connection to a standby is.
    let one = PoolConfig {
        max_connections: 1,
        ..PoolConfig::default()
    };
    let read_only = PgStore::connect(pg._db.url(), &one).await.unwrap();
    sqlx::query("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        .execute(read_only.pool())
        .await
        .unwrap();
    let c = claim(&pg.shop, "k-read-only");
    let p = new_payment(&pg.shop, "k-read-only", "order-read-only");
    let error = read_only.claim_payment(&c, &p, TIMING).await.unwrap_err();
    assert!(
        matches!(error, StoreError::Unavailable { .. }),
        "a read-only node's refusal must be Unavailable: {error:?}"
    );
    let keys: i64 = sqlx::query_scalar("SELECT count(*) FROM idempotency_keys")
        .fetch_one(pg.store.pool())
        .await
        .unwrap();
    assert_eq!(keys, 0, "nothing was written");
}

/// A shop's rows name it without a foreign key (no lock on the shop's row per
/// write, migration 0008): in its place a shop row can be neither deleted,
/// renamed nor truncated, so every stored `shop_id` still names a shop. Its
/// other columns stay writable (the webhook settings).
#[tokio::test]
async fn a_shop_row_is_never_deleted_nor_renamed() {
    let pg = pg().await;
    let pool = pg.store.pool();
    let refused = |sql: &'static str| async move {
        let error = sqlx::query(sql).execute(pool).await.unwrap_err();
        let db = error.as_database_error().expect("a database error");
        assert_eq!(db.code().as_deref(), Some("23001"), "{sql}: {db}");
    };
    refused("DELETE FROM shops WHERE id = 'shop-a'").await;
    refused("UPDATE shops SET id = 'shop-b' WHERE id = 'shop-a'").await;
    refused("TRUNCATE shops CASCADE").await;
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM shops WHERE id = 'shop-a'")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(kept, 1);
    let updated = sqlx::query("UPDATE shops SET webhook_url = NULL WHERE id = 'shop-a'")
        .execute(pool)
        .await
        .unwrap();
    assert_eq!(updated.rows_affected(), 1);

    // Writing a payment locks no shop row: another transaction holding the
    // shop's row FOR UPDATE does not hold the claim up.
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM shops WHERE id = 'shop-a' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let c = claim(&pg.shop, "k-shop-locked");
    let p = new_payment(&pg.shop, "k-shop-locked", "order-shop-locked");
    let claimed = tokio::time::timeout(
        Duration::from_secs(10),
        pg.store.claim_payment(&c, &p, TIMING),
    )
    .await
    .expect("the claim waited for the shop's row");
    assert!(matches!(claimed.unwrap(), Claim::Acquired(_)));
    holder.rollback().await.unwrap();
}

/// The pending queue (`pending_payments`, migration 0009) holds exactly the
/// pending payments whichever way they settle (their own finish, the
/// reconciler, an acquirer webhook), and a settle updates the payment's row
/// in place: a HOT update, no index entry written.
#[tokio::test]
async fn a_settle_takes_the_payment_off_the_queue_and_updates_its_row_in_place() {
    let pg = pg().await;
    let mut payments = Vec::new();
    for i in 0..4 {
        payments.push(acquired(&pg, &format!("k-q{i}"), &format!("order-q{i}")).await);
    }
    let queued = |pg: &Pg| {
        let pool = pg.store.pool().clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT payment_id FROM pending_payments ORDER BY created_at, payment_id",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    let ids = |ps: &[&Payment]| ps.iter().map(|p| p.id.to_string()).collect::<Vec<_>>();
    let all: Vec<&Payment> = payments.iter().map(|(_, p)| p).collect();
    assert_eq!(queued(&pg).await, ids(&all));

    let (lease, first) = &payments[0];
    let charged = settlement(PaymentStatus::Succeeded, "ch_0");
    let stored = pg
        .store
        .finish(
            lease,
            Some((first, &charged)),
            &response("ok"),
            TIMING.ttl,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(stored, FinishOutcome::Stored);
    let declined = settlement(PaymentStatus::Declined, "ch_1");
    let settled = pg
        .store
        .settle_payment(&pg.shop, &payments[1].1.id, &declined)
        .await
        .unwrap();
    assert!(matches!(settled, SettleOutcome::Settled(_)), "{settled:?}");
    let webhook = InboundEvent {
        event_id: "evt_q2".into(),
        kind: chargeonce_core::webhook::EventKind::Succeeded,
        acquirer_key: payments[2].1.acquirer_key.clone(),
        shop_id: pg.shop.clone(),
        settlement: Some(settlement(PaymentStatus::Succeeded, "ch_2")),
    };
    let recorded = pg.store.record_event(&webhook).await.unwrap();
    assert!(
        matches!(recorded, EventRecorded::Settled(_)),
        "{recorded:?}"
    );

    let left = [&payments[3].1];
    assert_eq!(queued(&pg).await, ids(&left));
    let pending = pg.store.pending_payments(Duration::ZERO, 10).await.unwrap();
    assert_eq!(
        pending.iter().map(|p| p.id.to_string()).collect::<Vec<_>>(),
        ids(&left)
    );
    assert_eq!(pg.store.counts().await.unwrap().pending_payments, 1);

    // The declined payment freed its order; the succeeded ones hold theirs.
    let again = pg
        .store
        .claim_payment(
            &claim(&pg.shop, "k-q1-again"),
            &new_payment(&pg.shop, "k-q1-again", "order-q1"),
            TIMING,
        )
        .await
        .unwrap();
    match again {
        Claim::Acquired(a) => assert_eq!(a.recovery_point, RecoveryPoint::PaymentCreated),
        Claim::Exists(_) => panic!("new key"),
    }
    let linked = pg
        .store
        .claim_payment(
            &claim(&pg.shop, "k-q0-again"),
            &new_payment(&pg.shop, "k-q0-again", "order-q0"),
            TIMING,
        )
        .await
        .unwrap();
    match linked {
        Claim::Acquired(a) => {
            assert_eq!(a.recovery_point, RecoveryPoint::OrderAlreadyPaid);
            assert_eq!(a.payment.id, first.id);
        }
        Claim::Exists(_) => panic!("new key"),
    }

    // The two that succeeded were HOT updates; the decline was not, as it
    // must not be: it takes the payment's entry out of the live-order index,
    // which frees the order. (Statistics arrive within about a second of a
    // backend going idle.)
    let deadline = Instant::now() + Duration::from_secs(30);
    let (updates, hot) = loop {
        let (updates, hot): (i64, i64) = sqlx::query_as(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'payments'",
        )
        .fetch_one(pg.store.pool())
        .await
        .unwrap();
        if updates >= 3 || Instant::now() > deadline {
            break (updates, hot);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!((updates, hot), (3, 2));
}

/// A store migrated from before issue 19's migrations (0008 to 0010) keeps
/// what it held: the pending payment joins the pending queue, an order with
/// a declined and a pending payment keeps its live one, and the history
/// entries already stored (one a row) read back with the `seq`s they had,
/// the new ones after them.
#[tokio::test]
async fn the_migrations_of_issue_19_keep_what_was_stored() {
    use chargeonce_core::history::{HistoryEvent, SettledBy};

    let db = TestDb::postgres().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run_to(7, &pool)
        .await
        .unwrap();
    let shop = ShopId::new("shop-a").unwrap();
    sqlx::query("INSERT INTO shops (id, secret_sha256) VALUES ('shop-a', sha256('s'))")
        .execute(&pool)
        .await
        .unwrap();
    let old = [
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e01",
            "k-declined",
            "declined",
        ),
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e02",
            "k-pending",
            "pending",
        ),
    ];
    for (i, (id, k, status)) in old.iter().enumerate() {
        sqlx::query(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at) \
             VALUES ($1, 'shop-a', $2, 'order-1', 1500, 'RUB', 'tok_ok', $3, \
                 'chargeonce-' || $1, now() - interval '1 minute' + $4 * interval '1 second')",
        )
        .bind(id)
        .bind(k)
        .bind(status)
        .bind(i as f64)
        .execute(&pool)
        .await
        .unwrap();
    }
    let claimed = HistoryEvent::Claimed {
        key: "k-pending".into(),
        instance: "old:1".into(),
    };
    sqlx::query(
        "INSERT INTO payment_history (payment_id, kind, event) VALUES ($1, 'claimed', $2), \
             ($1, 'claimed', $2)",
    )
    .bind(old[1].0)
    .bind(claimed.to_json())
    .execute(&pool)
    .await
    .unwrap();
    let seqs_before: Vec<i64> = sqlx::query_scalar("SELECT seq FROM payment_history ORDER BY seq")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;

    let store = PgStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let pending = store.pending_payments(Duration::ZERO, 10).await.unwrap();
    assert_eq!(
        pending.iter().map(|p| p.id.to_string()).collect::<Vec<_>>(),
        [old[1].0]
    );
    assert_eq!(store.counts().await.unwrap().pending_payments, 1);
    // The order's live payment is the pending one: a new key is linked to it.
    match store
        .claim_payment(
            &claim(&shop, "k-new"),
            &new_payment(&shop, "k-new", "order-1"),
            TIMING,
        )
        .await
        .unwrap()
    {
        Claim::Acquired(a) => {
            assert_eq!(a.recovery_point, RecoveryPoint::OrderAlreadyPaid);
            assert_eq!(a.payment.id.to_string(), old[1].0);
        }
        Claim::Exists(_) => panic!("new key"),
    }
    let id = chargeonce_core::PaymentId::parse(old[1].0).unwrap();
    let settled = store
        .settle_payment(&shop, &id, &settlement(PaymentStatus::Succeeded, "ch_1"))
        .await
        .unwrap();
    assert!(matches!(settled, SettleOutcome::Settled(_)), "{settled:?}");

    let history = store.payment_history(None, &id).await.unwrap();
    let seqs: Vec<i64> = history.iter().map(|e| e.seq).collect();
    assert_eq!(seqs[..2], seqs_before[..]);
    assert!(seqs[2] > seqs[1] && seqs[2] % 16 == 0, "{seqs:?}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let events: Vec<HistoryEvent> = history.into_iter().map(|e| e.event).collect();
    assert_eq!(events[..2], [claimed.clone(), claimed]);
    assert!(matches!(
        events[2..],
        [
            HistoryEvent::Linked { .. },
            HistoryEvent::Settled {
                status: PaymentStatus::Succeeded,
                by: SettledBy::Reconciler
            }
        ]
    ));
    assert!(
        store
            .pending_payments(Duration::ZERO, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// sqlx's pool tests each connection given back to it, a `Sync` round trip
/// per statement. A statement that ran to its end parks its connection in
/// the store instead (crates/store/src/postgres/connections.rs), and the
/// next statement takes it. With one connection, the parked one then serves
/// every kind of caller: a statement refused on a constraint, a
/// transaction, the probe; none
/// waits on the pool for a connection that sits parked.
#[tokio::test]
async fn a_parked_connection_serves_the_next_caller_of_any_kind() {
    let pg = pg().await;
    let one = PoolConfig {
        max_connections: 1,
        acquire_timeout: Duration::from_secs(2),
        ..PoolConfig::default()
    };
    let store = PgStore::connect(pg._db.url(), &one).await.unwrap();
    let fresh = |k: &str| {
        (
            claim(&pg.shop, k),
            new_payment(&pg.shop, k, &format!("order-{k}")),
        )
    };
    let (c, p) = fresh("k-parked-1");
    let Claim::Acquired(a) = store.claim_payment(&c, &p, TIMING).await.unwrap() else {
        panic!("a new key is acquired");
    };
    let finished = store
        .finish(
            &a.lease,
            Some((
                &a.payment,
                &settlement(PaymentStatus::Succeeded, "ch_parked"),
            )),
            &response("ok"),
            TIMING.ttl,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::Stored);
    // Parked, not given back to the pool: the pool counts it as taken.
    assert_eq!(store.pool().size(), 1);
    assert_eq!(
        store.pool().num_idle(),
        0,
        "the finish's connection is parked"
    );
    // A second key for the same order: the one-statement claim fails on the
    // order's unique index (its connection parked again after the refusal),
    // then a transaction links the order's payment. Then the probe and a new
    // payment: all get the one connection within the acquire timeout.
    let started = Instant::now();
    let second = claim(&pg.shop, "k-parked-2");
    let same_order = new_payment(&pg.shop, "k-parked-2", "order-k-parked-1");
    let Claim::Acquired(linked) = store
        .claim_payment(&second, &same_order, TIMING)
        .await
        .unwrap()
    else {
        panic!("a new key is acquired");
    };
    assert_eq!(linked.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(linked.payment.id, a.payment.id);
    store.ping().await.unwrap();
    let (c, p) = fresh("k-parked-3");
    assert!(matches!(
        store.claim_payment(&c, &p, TIMING).await.unwrap(),
        Claim::Acquired(_)
    ));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "nobody waited out the timeout"
    );
    store.close().await;
}

/// A caller that goes away while its transaction's `BEGIN` is on the wire (a
/// webhook whose sender hung up: hyper drops the handler) leaves no
/// transaction open on the connection. sqlx 0.9.0 did (transact-rs/sqlx#4393,
/// fixed in 0.9.1): the connection went back to the pool inside a
/// transaction nothing would end, and the next statements on it, claims
/// among them, answered as committed while they were not. A chaos run in CI
/// (stop 29) lost two claimed payments that way and charged their orders
/// twice.
///
/// The window is one round trip, and the first poll lands in it unless
/// PostgreSQL answers `BEGIN` before that poll reads its socket; a few rounds
/// make a pass by that luck (under the bug) practically impossible.
#[tokio::test]
async fn a_transaction_cancelled_at_its_begin_leaves_the_next_claim_committed() {
    let pg = pg().await;
    let one = PoolConfig {
        max_connections: 1,
        acquire_timeout: Duration::from_secs(5),
        ..PoolConfig::default()
    };
    let store = PgStore::connect(pg._db.url(), &one).await.unwrap();
    for round in 0..5 {
        // A claim parks the one connection, so the next caller takes it at
        // once and its first poll sends `BEGIN`.
        let k = format!("k-cancel-{round}");
        let (claimed, payment) = (
            claim(&pg.shop, &k),
            new_payment(&pg.shop, &k, &format!("order-{k}")),
        );
        let Claim::Acquired(acquired) = store
            .claim_payment(&claimed, &payment, TIMING)
            .await
            .unwrap()
        else {
            panic!("a new key is acquired");
        };
        // Another session sees the claim: it is committed, not inside a
        // transaction left open by the caller cancelled in the round before.
        let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM payments WHERE id = $1")
            .bind(acquired.payment.id.as_str())
            .fetch_one(pg.store.pool())
            .await
            .unwrap();
        assert_eq!(
            seen, 1,
            "round {round}: the claim is visible to another session"
        );
        let event = InboundEvent {
            event_id: format!("evt_cancelled_{round}"),
            kind: chargeonce_core::webhook::EventKind::Succeeded,
            acquirer_key: payment.acquirer_key.clone(),
            shop_id: pg.shop.clone(),
            settlement: Some(settlement(PaymentStatus::Succeeded, "ch_nobody")),
        };
        {
            let mut recording = std::pin::pin!(store.record_event(&event));
            assert!(
                futures::poll!(recording.as_mut()).is_pending(),
                "the first poll waits for PostgreSQL"
            );
        }
        // The dropped caller's connection goes back to the pool (sqlx tests
        // it in a task of its own); the next claim is to get it from there.
        let deadline = Instant::now() + Duration::from_secs(5);
        while store.pool().num_idle() != 1 {
            assert!(
                Instant::now() < deadline,
                "the connection came back to the pool"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    store.close().await;
}
