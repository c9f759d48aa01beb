//! The pool's connections under a read-only node, a parked connection and
//! a `BEGIN` cancelled by its caller.

use super::*;

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
