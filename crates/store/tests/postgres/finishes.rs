//! A finish that waited on a take-over, a settlement or a rolled-back
//! competitor writes what the one statement allows; and it finds its
//! payment by primary key however many the shop has.

use super::*;

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
    against_open(&pg.store, tx, commit, declined_finish(pg, lease, payment))
        .await
        .unwrap()
}

/// Our finish of `lease` with a decline, to run beside a competitor.
fn declined_finish(
    pg: &Pg,
    lease: &Lease,
    payment: &Payment,
) -> impl Future<Output = Result<FinishOutcome, StoreError>> + Send + 'static {
    let store = Arc::clone(&pg.store);
    let (lease, payment) = (lease.clone(), payment.clone());
    async move {
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
    }
}

// Each binds the key ($1) and its payment ($2).
const TAKE_OVER: &str = "UPDATE idempotency_keys SET lease_token = gen_random_uuid() \
                         WHERE key = $1 AND payment_id = $2";
const SETTLE: &str = "WITH settled AS (UPDATE payments SET status = 'succeeded', \
                          provider_payment_id = 'ch_theirs' \
                      WHERE idempotency_key = $1 AND id = $2 RETURNING id, created_at, shop_id) \
                      DELETE FROM pending_payments q USING settled \
                      WHERE q.created_at = settled.created_at AND q.payment_id = settled.id \
                        AND q.shop_id = settled.shop_id";
const LOCK_KEY: &str = "SELECT 1 FROM idempotency_keys WHERE key = $1 AND payment_id = $2 \
                        FOR UPDATE";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finish_that_waited_for_a_take_over_writes_nothing() {
    let pg = pg().await;
    let (lease, payment) = acquired(&pg, "k1", "order-1").await;
    assert_eq!(
        finish_against_open(&pg, &lease, &payment, TAKE_OVER, true).await,
        FinishOutcome::LeaseLost
    );
    assert_unfinished(&pg, "k1", RecoveryPoint::PaymentCreated).await;
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
    assert_unfinished(&pg, "k1", RecoveryPoint::PaymentCreated).await;
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
    assert_unfinished(&pg, "k1", RecoveryPoint::PaymentCreated).await;
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
    // A backend's statistics reach the views when it has been idle a while
    // (ten seconds in PostgreSQL 15), later on a loaded machine: the
    // deadline only bounds a failure, the loop ends on the reads.
    let deadline = Instant::now() + Duration::from_secs(90);
    let after = loop {
        let now = index_reads(&pg).await;
        // 20 finishes (and 20 claims' foreign key checks) use the primary key:
        // exactly 40, since events no longer check their payment.
        if reads_of(&now, "payments_pkey").0 >= reads_of(&before, "payments_pkey").0 + 40 {
            break now;
        }
        assert!(Instant::now() < deadline, "statistics never arrived");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for index in ["payments_by_order", "payments_by_shop_newest"] {
        let read = reads_of(&after, index).1 - reads_of(&before, index).1;
        // The claims' arbiter probes read the live index: about one entry each.
        assert!(read <= 60, "{index}: {read} entries read for 20 payments");
    }
}

/// The usual finish writes a delivery for every endpoint that wants its
/// event, whichever form of its statement the instance tries first. Its form
/// for a shop without endpoints is guarded in its own snapshot: an endpoint
/// added through another instance (this one's hint knows nothing of it)
/// still gets its delivery, the finish then written as entries; after that
/// the shop's finishes keep the compact form and write their deliveries.
/// A shop without an endpoint gets the compact form and no delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finish_delivers_to_an_endpoint_its_instance_never_saw() {
    use chargeonce_core::endpoint::{EndpointId, EventFilter, NewEndpoint, Origin};
    use chargeonce_core::webhook::WebhookSecret;

    let pg = pg().await;
    let other = PgStore::connect(pg._db.url(), &PoolConfig::default())
        .await
        .unwrap();
    // Finishes a new payment as its claimant does; (compact, deliveries).
    let pay = async |k: &str| -> (bool, i64) {
        let (lease, payment) = acquired(&pg, k, k).await;
        let finished = finish_charged(&pg, &lease, &payment, &charge(&payment, None)).await;
        assert_eq!(finished, FinishOutcome::Stored);
        assert_eq!(
            history(&pg, &payment.id).await,
            ["claimed", "acquirer_call", "answered", "settled"]
        );
        sqlx::query_as(
            "SELECT p.finish_seq IS NOT NULL, \
                 (SELECT count(*) FROM event_deliveries d WHERE d.payment_id = p.id) \
             FROM payments p WHERE p.id = $1",
        )
        .bind(payment.id.as_str())
        .fetch_one(pg.store.pool())
        .await
        .unwrap()
    };
    assert_eq!(pay("k-alone").await, (true, 0), "no endpoint");
    other
        .add_endpoint(&NewEndpoint {
            id: EndpointId::generate(),
            shop_id: pg.shop.clone(),
            origin: Origin::Api,
            url: "https://hooks.example/all".into(),
            filter: EventFilter::parse(["*"]).unwrap(),
            description: None,
            secret: WebhookSecret::new("whsec_all"),
            request: None,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pay("k-unseen").await, (false, 1), "guard met the endpoint");
    assert_eq!(pay("k-seen").await, (true, 1), "the form with deliveries");
    assert_eq!(events(&pg).await, 3);
}
