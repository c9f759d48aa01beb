//! What the schema keeps: history entries in serde's form, shop rows never
//! deleted nor renamed, a settle that updates in place, and migrations that
//! keep what was stored.

use super::*;

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
            .record_attempt(
                &pg.shop,
                &due[0].event.id,
                &due[0].destination.endpoint_id,
                &outcome,
            )
            .await
            .unwrap();
        pg.store
            .resend_event(&pg.shop, &due[0].event.id, None)
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
    let updated = sqlx::query("UPDATE shops SET secret_sha256 = secret_sha256 WHERE id = 'shop-a'")
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

/// The pending payments are exactly the payments that are pending, whichever
/// way they settle (their own finish, the reconciler, an acquirer webhook):
/// in flight through their unfinished keys, with no queue row written
/// (issue 38), and in the queue (`pending_payments`, migration 0009) once a
/// key finishes while its payment is still pending. A settle updates the
/// payment's row in place: a HOT update, no index entry written.
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
    let listed = |pg: &Pg| {
        let store = pg.store.clone();
        async move {
            let pending = store.pending_payments(Duration::ZERO, 10).await.unwrap();
            pending.iter().map(|p| p.id.to_string()).collect::<Vec<_>>()
        }
    };
    let all: Vec<&Payment> = payments.iter().map(|(_, p)| p).collect();
    // In flight: listed and counted through their keys, nothing queued.
    assert!(queued(&pg).await.is_empty());
    assert_eq!(listed(&pg).await, ids(&all));
    assert_eq!(pg.store.counts().await.unwrap().pending_payments, 4);

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
    assert!(queued(&pg).await.is_empty());
    assert_eq!(listed(&pg).await, ids(&left));
    assert_eq!(pg.store.counts().await.unwrap().pending_payments, 1);

    // Its key finishes with the outcome unknown: the payment is queued by
    // the same statement, still listed and counted once.
    let (last_lease, _) = &payments[3];
    let stored = pg
        .store
        .finish(last_lease, None, &response("unknown"), TIMING.ttl, &[])
        .await
        .unwrap();
    assert_eq!(stored, FinishOutcome::Stored);
    assert_eq!(queued(&pg).await, ids(&left));
    assert_eq!(listed(&pg).await, ids(&left));
    assert_eq!(pg.store.counts().await.unwrap().pending_payments, 1);

    // A queue row left behind by a settle that raced its enqueue is not
    // listed, and the key sweeper deletes it.
    let stale = pg.store.pool().clone();
    sqlx::query("INSERT INTO pending_payments (created_at, payment_id, shop_id) SELECT created_at, id, shop_id FROM payments WHERE id = $1")
        .bind(first.id.as_str())
        .execute(&stale)
        .await
        .unwrap();
    assert_eq!(listed(&pg).await, ids(&left));
    assert_eq!(pg.store.counts().await.unwrap().pending_payments, 1);
    pg.store.sweep_expired_keys(10).await.unwrap();
    assert_eq!(queued(&pg).await, ids(&left));

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

/// Migration 0013 keeps what was stored (the live order of a payment made
/// before it) and holds every authorization to its rules by CHECK, whatever
/// a statement writes: captures within the amount, refunds within what was
/// captured, a hold exactly on manual payments; an authorization released
/// with nothing captured frees its order, one that took money keeps it.
#[tokio::test]
async fn the_authorization_migration_keeps_orders_and_checks_every_hold() {
    let db = TestDb::postgres().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run_to(12, &pool)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO shops (id, secret_sha256) VALUES ('shop-a', sha256('s'));
         INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
             token, status, acquirer_key, created_at)
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea0', 'shop-a', 'k0', 'order-0', 1000, 'RUB',
             'tok_ok', 'succeeded', 'chargeonce-pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea0', now());",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run(&pool)
        .await
        .unwrap();
    let live: Option<String> = sqlx::query_scalar(
        "SELECT live_reference FROM payments WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea0'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        live.as_deref(),
        Some("order-0"),
        "the old payment keeps its order"
    );
    let insert = |id: &str, reference: &str, hold: &str| {
        format!(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, capture_method, hold, \
                 authorization_expires_at) \
             VALUES ('{id}', 'shop-a', 'k-{id}', '{reference}', 1000, 'RUB', 'tok_ok', \
                 'succeeded', 'chargeonce-{id}', now(), 'manual', '{hold}', now())"
        )
    };
    let a1 = "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea1";
    for accepted in [
        insert(a1, "order-1", "open"),
        format!(
            "UPDATE payments SET captured_minor = 400, capture_reserved_minor = 600, \
                 captures_in_flight = 2, hold = 'closing', refund_reserved_minor = 400 \
             WHERE id = '{a1}'"
        ),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(accepted))
            .execute(&pool)
            .await
            .unwrap();
    }
    for refused in [
        format!("UPDATE payments SET captured_minor = 500 WHERE id = '{a1}'"),
        format!("UPDATE payments SET refund_reserved_minor = 401 WHERE id = '{a1}'"),
        format!("UPDATE payments SET captures_in_flight = 0 WHERE id = '{a1}'"),
        format!("UPDATE payments SET hold = NULL WHERE id = '{a1}'"),
        format!("UPDATE payments SET hold = 'gone' WHERE id = '{a1}'"),
        "UPDATE payments SET hold = 'open' \
         WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea0'"
            .to_owned(),
        // Inserts are checked too (the rule is a trigger since migration
        // 0015): a hold the rule does not know, an expiry without a hold.
        insert("pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea8", "order-8", "gone"),
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
             currency, token, status, acquirer_key, created_at, authorization_expires_at) \
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea9', 'shop-a', 'k-9', 'order-9', 1000, \
             'RUB', 'tok_ok', 'pending', 'chargeonce-pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea9', now(), now())"
            .to_owned(),
    ] {
        let error = sqlx::query(sqlx::AssertSqlSafe(refused.clone()))
            .execute(&pool)
            .await
            .unwrap_err();
        let code = error.as_database_error().and_then(|e| e.code());
        assert_eq!(code.as_deref(), Some("23514"), "{refused}: {error}");
    }
    // Released with something captured: the order stays taken.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE payments SET capture_reserved_minor = 0, captures_in_flight = 0, \
             hold = 'released_void' WHERE id = '{a1}'"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let taken = sqlx::query(sqlx::AssertSqlSafe(insert(
        "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea2",
        "order-1",
        "open",
    )))
    .execute(&pool)
    .await
    .unwrap_err();
    let code = taken.as_database_error().and_then(|e| e.code());
    assert_eq!(code.as_deref(), Some("23505"), "{taken}");
    // Released with nothing captured: the order is free again.
    sqlx::query(sqlx::AssertSqlSafe(insert(
        "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea3",
        "order-3",
        "released_expiry",
    )))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(insert(
        "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ea4",
        "order-3",
        "open",
    )))
    .execute(&pool)
    .await
    .unwrap();
}

/// Migration 0014 moves the expirer's queue off the payments table: an
/// authorization still to release (or still pending) enters the queue with
/// its expiry, one that ended does not, and the partial index is gone.
#[tokio::test]
async fn the_expiry_queue_migration_keeps_every_hold_to_release() {
    let db = TestDb::postgres().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run_to(13, &pool)
        .await
        .unwrap();
    let insert = |id: &str, status: &str, hold: &str| {
        format!(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, capture_method, hold, \
                 authorization_expires_at) \
             VALUES ('{id}', 'shop-a', 'k-{id}', 'order-{id}', 1000, 'RUB', 'tok_ok', \
                 '{status}', 'chargeonce-{id}', now(), 'manual', '{hold}', now())"
        )
    };
    let open = "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6eb1";
    let pending = "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6eb2";
    let voided = "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6eb3";
    sqlx::query("INSERT INTO shops (id, secret_sha256) VALUES ('shop-a', sha256('s'))")
        .execute(&pool)
        .await
        .unwrap();
    for statement in [
        insert(open, "succeeded", "open"),
        insert(pending, "pending", "open"),
        insert(voided, "succeeded", "released_void"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::migrate!("./migrations/postgres")
        .run(&pool)
        .await
        .unwrap();
    let queued: Vec<String> =
        sqlx::query_scalar("SELECT payment_id FROM authorization_expiries ORDER BY payment_id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(queued, vec![open.to_owned(), pending.to_owned()]);
    let index: Option<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE indexname = 'payments_holds_expiring'",
    )
    .fetch_optional(&pool)
    .await
    .unwrap();
    assert_eq!(index, None, "the payments table carries no expiry index");
}

/// Migration 0020 makes a shop's one URL its operator endpoint with its
/// events' delivery state (parked events of a shop without a URL get none),
/// and keeps which events of a shop whose URL was removed were delivered or
/// given up (on a deleted placeholder), so that a URL set again sends only
/// what was never delivered.
#[tokio::test]
async fn the_endpoints_migration_keeps_every_events_delivery_state() {
    let db = TestDb::postgres().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run_to(19, &pool)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO shops (id, secret_sha256, webhook_url, webhook_secret,
             webhook_previous_secret, webhook_previous_secret_until)
         VALUES ('with-url', sha256('a'), 'https://a.example/hooks', 'whsec_a', 'whsec_a0',
             now() + interval '1 hour');
         INSERT INTO shops (id, secret_sha256) VALUES ('url-removed', sha256('b'));
         INSERT INTO shops (id, secret_sha256) VALUES ('never', sha256('c'));
         INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
             token, status, acquirer_key, created_at)
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec1', 'with-url', 'k1', 'o1', 100, 'RUB',
                 'tok_ok', 'succeeded', 'chargeonce-pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec1', now()),
                ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec2', 'url-removed', 'k2', 'o2', 100, 'RUB',
                 'tok_ok', 'succeeded', 'chargeonce-pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec2', now()),
                ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec3', 'never', 'k3', 'o3', 100, 'RUB',
                 'tok_ok', 'succeeded', 'chargeonce-pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec3', now());
         INSERT INTO events (id, shop_id, event_type, payment_id, payload, next_attempt_at,
             attempts, delivered_at, gave_up_at, last_status, last_error)
         VALUES
           ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec1', 'with-url', 'payment.succeeded',
            'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec1', '{}', now(), 2, now(), NULL, 200, NULL),
           ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec2', 'with-url', 'payment.succeeded',
            'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec1', '{}', now(), 1, NULL, NULL, 500, 'HTTP 500'),
           ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec3', 'url-removed', 'payment.succeeded',
            'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec2', '{}', now(), 1, now(), NULL, 200, NULL),
           ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec4', 'url-removed', 'payment.succeeded',
            'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec2', '{}', now(), 0, NULL, NULL, NULL, NULL),
           ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec5', 'never', 'payment.succeeded',
            'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ec3', '{}', '9999-12-31T23:59:59Z', 0,
            NULL, NULL, NULL, NULL);",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run(&pool)
        .await
        .unwrap();
    let endpoints: Vec<(String, String, bool, Option<String>, bool)> = sqlx::query_as(
        "SELECT shop_id, url, enabled, previous_secret, deleted_at IS NOT NULL \
         FROM webhook_endpoints ORDER BY shop_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        endpoints,
        vec![
            ("url-removed".into(), String::new(), false, None, true),
            (
                "with-url".into(),
                "https://a.example/hooks".into(),
                true,
                Some("whsec_a0".into()),
                false
            ),
        ]
    );
    let deliveries: Vec<(String, i32, bool, Option<String>)> = sqlx::query_as(
        "SELECT e.id, d.attempts, d.delivered_at IS NOT NULL, d.last_error \
         FROM event_deliveries d JOIN events e ON e.seq = d.event_seq AND e.shop_id = d.shop_id \
         ORDER BY e.id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        deliveries,
        vec![
            ("evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec1".into(), 2, true, None),
            (
                "evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec2".into(),
                1,
                false,
                Some("HTTP 500".into())
            ),
            ("evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec3".into(), 1, true, None),
        ]
    );

    // A URL set again for the shop that had removed its own: only the event
    // never delivered is sent.
    drop(pool);
    let store = PgStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("url-removed").unwrap();
    let endpoint = chargeonce_core::events::WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: chargeonce_core::webhook::WebhookSecret::new("whsec_b"),
    };
    assert!(store.set_webhook(&shop, Some(&endpoint)).await.unwrap());
    let due = store.claim_due_events(10, TIMING.lease).await.unwrap();
    let ids: Vec<&str> = due.iter().map(|d| d.event.id.as_str()).collect();
    assert!(
        ids.contains(&"evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec2"),
        "{ids:?}"
    );
    assert!(
        ids.contains(&"evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec4"),
        "{ids:?}"
    );
    assert!(
        !ids.contains(&"evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ec3"),
        "{ids:?}"
    );
    assert_eq!(ids.len(), 2, "{ids:?}");
}

/// A delivery written while its endpoint was being deleted (the event's
/// statement read the endpoint live; the delete's update of open deliveries
/// could not see the new row) is given up by the next claim, and one written
/// while its endpoint was being disabled is parked: none stays open for
/// ever, none is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_that_raced_its_endpoints_delete_is_given_up() {
    use chargeonce_core::api_key::MakingRequest;
    use chargeonce_core::endpoint::{
        DELETED, EndpointId, EndpointUpdate, EventFilter, NewEndpoint, Origin,
    };
    use chargeonce_core::webhook::WebhookSecret;
    let pg = pg().await;
    let make = |key: &str| NewEndpoint {
        id: EndpointId::generate(),
        shop_id: pg.shop.clone(),
        origin: Origin::Api,
        url: format!("https://hooks.example/{key}"),
        filter: EventFilter::All,
        description: None,
        secret: WebhookSecret::new(format!("whsec_{key}")),
        request: Some(MakingRequest {
            idempotency_key: key.to_owned(),
            fingerprint: [key.len() as u8; 32],
        }),
    };
    let mut ids = Vec::new();
    for key in ["kept", "deleted", "disabled-one"] {
        let made = pg.store.add_endpoint(&make(key)).await.unwrap().unwrap();
        ids.push(made.endpoint.id);
    }
    // An event with its three deliveries; two of them rewritten by a
    // transaction the test holds open across the delete and the disable,
    // as an event's statement that read the endpoints before them.
    let k = "race-1";
    let acquired = match pg
        .store
        .claim_payment(
            &claim(&pg.shop, k),
            &new_payment(&pg.shop, k, "order-1"),
            TIMING,
        )
        .await
        .unwrap()
    {
        Claim::Acquired(a) => a,
        Claim::Exists(_) => panic!("new key"),
    };
    pg.store
        .finish(
            &acquired.lease,
            Some((
                &acquired.payment,
                &settlement(PaymentStatus::Succeeded, "ch"),
            )),
            &response("ok"),
            TIMING.ttl,
            &[],
        )
        .await
        .unwrap();
    let pool = pg.store.pool();
    sqlx::query("DELETE FROM event_deliveries WHERE endpoint_id <> $1")
        .bind(ids[0].as_str())
        .execute(pool)
        .await
        .unwrap();
    let mut racing = pool.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id) \
         SELECT d.shop_id, d.event_seq, x.id, d.payment_id \
         FROM event_deliveries d, unnest($1::text[]) AS x(id)",
    )
    .bind(vec![ids[1].to_string(), ids[2].to_string()])
    .execute(&mut *racing)
    .await
    .unwrap();
    pg.store
        .delete_endpoint(&pg.shop, &ids[1])
        .await
        .unwrap()
        .unwrap();
    let off = EndpointUpdate {
        enabled: Some(false),
        ..EndpointUpdate::default()
    };
    pg.store
        .update_endpoint(&pg.shop, &ids[2], &off)
        .await
        .unwrap()
        .unwrap();
    racing.commit().await.unwrap();

    let due = pg.store.claim_due_events(10, TIMING.lease).await.unwrap();
    assert_eq!(due.len(), 1, "{due:?}");
    assert_eq!(due[0].destination.endpoint_id, ids[0]);
    let event = &due[0].event;
    let stored = pg.store.event(&pg.shop, &event.id).await.unwrap().unwrap();
    let of = |id: &EndpointId| {
        stored
            .deliveries
            .iter()
            .find(|d| &d.endpoint_id == id)
            .unwrap()
            .delivery
            .clone()
    };
    assert_eq!(of(&ids[1]).last_error.as_deref(), Some(DELETED));
    assert!(of(&ids[1]).gave_up_at_ms.is_some());
    assert_eq!(of(&ids[2]).next_attempt(), None, "parked");
    assert!(of(&ids[2]).gave_up_at_ms.is_none());
    let counts = pg.store.counts().await.unwrap();
    assert_eq!(counts.due_events, 1, "only the kept endpoint's: {counts:?}");
}

/// Migration 0021 gives every shop its test mode's namespace (`{shop}.test`,
/// mode `test`), lists the shop once, refuses a row whose mode is not its
/// id's, and scopes an API key's idempotency key by mode.
#[tokio::test]
async fn the_test_mode_migration_gives_every_shop_its_namespace() {
    let db = TestDb::postgres().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run_to(20, &pool)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO shops (id, secret_sha256) VALUES ('old-shop', sha256('a'));
         INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, idempotency_key,
             request_sha256)
         VALUES ('old-shop', 'key_1', 'live', 'full', sha256('k1'), 'make-1', sha256('r'));",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run(&pool)
        .await
        .unwrap();
    let shops: Vec<(String, String)> = sqlx::query_as("SELECT id, mode FROM shops ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        shops,
        [
            ("old-shop".to_owned(), "live".to_owned()),
            ("old-shop.test".to_owned(), "test".to_owned())
        ]
    );
    // A row's mode is its id's.
    let wrong = sqlx::query(
        "INSERT INTO shops (id, secret_sha256, mode) VALUES ('x', sha256('b'), 'test')",
    )
    .execute(&pool)
    .await;
    assert!(wrong.is_err(), "{wrong:?}");
    // The same making request's key in test mode is another key's.
    sqlx::query(
        "INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, idempotency_key,
             request_sha256)
         VALUES ('old-shop', 'key_2', 'test', 'full', sha256('k2'), 'make-1', sha256('r'))",
    )
    .execute(&pool)
    .await
    .unwrap();
    let again = sqlx::query(
        "INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, idempotency_key,
             request_sha256)
         VALUES ('old-shop', 'key_3', 'test', 'full', sha256('k3'), 'make-1', sha256('r'))",
    )
    .execute(&pool)
    .await;
    assert!(again.is_err(), "one per shop, mode and key: {again:?}");
    pool.close().await;
    let store = PgStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let listed: Vec<ShopId> = store
        .shops()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.shop_id)
        .collect();
    assert_eq!(listed, [ShopId::new("old-shop").unwrap()]);
}

/// The usual finish (the claimant charged once and settled the payment by
/// its answer) is kept on the payment's row, not as a history row
/// (migration 0024), and reads back as the same entries, at the seq their
/// row would have had: a row written after it sorts after it. A finish that
/// is not the claimant's as it stands (here: the charge has a reason) is
/// written as entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claimants_finish_is_kept_on_the_payment_row() {
    use chargeonce_core::history::{HistoryEvent, SettledBy};

    let pg = pg().await;
    let rows = async |payment: &Payment| -> Vec<String> {
        sqlx::query_scalar("SELECT kind FROM payment_history WHERE payment_id = $1 ORDER BY seq")
            .bind(payment.id.as_str())
            .fetch_all(pg.store.pool())
            .await
            .unwrap()
    };
    let mut histories = Vec::new();
    for (k, reason) in [("k-usual", None), ("k-reason", Some("slow"))] {
        let (lease, payment) = acquired(&pg, k, k).await;
        let attempt = charge(&payment, reason);
        let finished = finish_charged(&pg, &lease, &payment, &attempt).await;
        assert_eq!(finished, FinishOutcome::Stored);
        let read = pg.store.payment_history(None, &payment.id).await.unwrap();
        let instance = match &read[0].event {
            HistoryEvent::Claimed { instance, .. } => instance.clone(),
            other => panic!("{other:?}"),
        };
        let events: Vec<HistoryEvent> = read.iter().map(|e| e.event.clone()).collect();
        assert_eq!(
            events,
            [
                HistoryEvent::Claimed {
                    key: k.into(),
                    instance: instance.clone(),
                },
                attempt.to_event(&instance),
                HistoryEvent::Answered {
                    key: k.into(),
                    status: 201,
                },
                HistoryEvent::Settled {
                    status: PaymentStatus::Succeeded,
                    by: SettledBy::Request { key: k.into() },
                },
            ]
        );
        histories.push((payment, read));
    }
    let (usual, usual_read) = &histories[0];
    let (with_reason, reason_read) = &histories[1];
    assert!(
        rows(usual).await.is_empty(),
        "kept on the row, no history row"
    );
    assert_eq!(rows(with_reason).await, ["acquirer_call,answered,settled"]);
    // Both drew their seqs from the history's one sequence, in the order
    // they were written; the row's three entries are consecutive.
    let seqs = |read: &[chargeonce_core::history::HistoryEntry]| -> Vec<i64> {
        read.iter().map(|e| e.seq).collect()
    };
    let first = usual_read[1].seq;
    assert_eq!(seqs(usual_read), [0, first, first + 1, first + 2]);
    assert!(reason_read[1].seq > first + 2, "{reason_read:?}");
    assert!(usual_read[1..].iter().all(|e| e.at == usual_read[1].at));
    // A later entry of the usual payment (its key's expiry, written as a
    // row when the key is swept) sorts after the row's entries.
    sqlx::query("UPDATE idempotency_keys SET expires_at = now() - interval '1 second'")
        .execute(pg.store.pool())
        .await
        .unwrap();
    pg.store.sweep_expired_keys(100).await.unwrap();
    let kinds = history(&pg, &usual.id).await;
    assert_eq!(
        kinds,
        [
            "claimed",
            "acquirer_call",
            "answered",
            "settled",
            "key_expired"
        ]
    );
    let read = pg.store.payment_history(None, &usual.id).await.unwrap();
    assert!(read.windows(2).all(|w| w[0].seq < w[1].seq), "{read:?}");
}

/// Migration 0025: a payment's acquirer key is derived, not stored. A row
/// written before keeps its copy and is still found by its key, as a new
/// row (no copy) is; a copy that is not the derivation is refused.
#[tokio::test]
async fn the_acquirer_key_migration_finds_old_and_new_payments_by_their_key() {
    let db = TestDb::postgres().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run_to(24, &pool)
        .await
        .unwrap();
    let old = "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ed1";
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO shops (id, secret_sha256) VALUES ('shop-a', sha256('s'));
         INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
             token, status, acquirer_key, created_at)
         VALUES ('{old}', 'shop-a', 'k-old', 'order-old', 100, 'RUB', 'tok_ok', 'succeeded',
             'chargeonce-{old}', now());"
    )))
    .execute(&pool)
    .await
    .unwrap();
    drop(pool);
    let store = PgStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop-a").unwrap();
    let (_, new) = match store
        .claim_payment(
            &claim(&shop, "k-new"),
            &new_payment(&shop, "k-new", "order-new"),
            TIMING,
        )
        .await
        .unwrap()
    {
        Claim::Acquired(a) => (a.lease, a.payment),
        Claim::Exists(_) => panic!("new key"),
    };
    let stored: Option<String> =
        sqlx::query_scalar("SELECT acquirer_key FROM payments WHERE id = $1")
            .bind(new.id.as_str())
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(stored, None, "a new row keeps no copy");
    let old = chargeonce_core::PaymentId::parse(old).unwrap();
    for id in [&old, &new.id] {
        let key = chargeonce_core::AcquirerKey::for_payment(id);
        let found = store.payment_by_acquirer_key(&key).await.unwrap().unwrap();
        assert_eq!((&found.id, &found.acquirer_key), (id, &key));
    }
    assert!(
        store
            .payment_by_acquirer_key(&chargeonce_core::AcquirerKey::for_void(&new.id))
            .await
            .unwrap()
            .is_none()
    );
    let refused =
        sqlx::query("UPDATE payments SET acquirer_key = 'chargeonce-pay_other' WHERE id = $1")
            .bind(new.id.as_str())
            .execute(store.pool())
            .await
            .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("payments_acquirer_key_derived"),
        "{refused}"
    );
}

/// A new database migrated to `version`, with `rows` written there (the
/// rows a later migration must keep), then migrated to the last version.
async fn migrated_with(version: i64, rows: &'static str) -> (TestDb, sqlx::PgPool) {
    let db = TestDb::postgres().await;
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run_to(version, &pool)
        .await
        .unwrap();
    sqlx::raw_sql(rows).execute(&pool).await.unwrap();
    sqlx::migrate!("./migrations/postgres")
        .run(&pool)
        .await
        .unwrap();
    (db, pool)
}

/// Each statement fails as a CHECK constraint named by its rule would
/// have failed it: SQLSTATE 23514, the rule's name as the constraint's and
/// in the message.
async fn assert_refused(pool: &sqlx::PgPool, refused: &[(String, impl AsRef<str>)]) {
    for (statement, rule) in refused {
        let rule = rule.as_ref();
        let error = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(pool)
            .await
            .unwrap_err();
        let db_error = error.as_database_error().unwrap();
        assert_eq!(db_error.code().as_deref(), Some("23514"), "{statement}");
        assert_eq!(db_error.constraint(), Some(rule), "{statement}");
        assert!(error.to_string().contains(rule), "{statement}: {error}");
    }
}

/// Migration 0027 moved the row rules of payments, keys and events from
/// CHECK constraints into triggers, and `live_reference` from a generated
/// column into the payments' trigger (on insert) and the statements (on
/// update, checked by the trigger): every rule still refuses what its CHECK
/// refused, with the same SQLSTATE and constraint name, in inserts and in
/// updates; `live_reference` cannot be written wrong; the rows written
/// before keep their order. Migration 0028 split the payments' update
/// trigger in three by columns; every rule still refuses an update of any
/// of its columns.
#[tokio::test]
async fn the_row_rules_moved_into_triggers_refuse_what_their_checks_refused() {
    let (_db, pool) = migrated_with(
        26,
        "INSERT INTO shops (id, secret_sha256) VALUES ('shop-a', sha256('s'));
         INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
             token, status, created_at)
         VALUES ('pay_old', 'shop-a', 'k-old', 'order-old', 1000, 'RUB', 'tok_ok', 'pending',
             now());",
    )
    .await;
    let live = async |id: &str| -> Option<String> {
        sqlx::query_scalar("SELECT live_reference FROM payments WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(live("pay_old").await.as_deref(), Some("order-old"));
    let payment = |id: &str, columns: &str, values: &str| {
        format!(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, created_at{columns}) \
             VALUES ('{id}', 'shop-a', 'k-{id}', 'order-{id}', 1000, 'RUB', 'tok_ok', \
                 'pending', now(){values})"
        )
    };
    let key = |key: &str, columns: &str, values: &str| {
        format!(
            "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
                 recovery_point, payment_id, expires_at{columns}) \
             VALUES ('shop-a', '{key}', sha256('x'), 'POST', '/v1/payments', \
                 'payment_created', 'pay_old', now(){values})"
        )
    };
    let event = |id: &str, event_type: &str| {
        format!(
            "INSERT INTO events (id, shop_id, event_type, payment_id, payload) \
             VALUES ('{id}', 'shop-a', '{event_type}', 'pay_old', '\\x7b7d')"
        )
    };
    let refused = [
        (
            payment("p1", "", "").replace("1000,", "0,"),
            "payments_amount_minor_check",
        ),
        (
            payment("p2", "", "").replace("'RUB'", "'RUBL'"),
            "payments_currency_check",
        ),
        (
            payment("p3", "", "").replace("'pending'", "'paid'"),
            "payments_status_check",
        ),
        (
            payment("p4", ", metadata", ", 'x'"),
            "payments_metadata_check",
        ),
        (
            payment("p5", ", acquirer_key", ", 'chargeonce-other'"),
            "payments_acquirer_key_derived",
        ),
        (
            payment("p6", ", refund_reserved_minor", ", 1001"),
            "payments_refunds_within_amount",
        ),
        (
            payment("p7", ", finish_seq", ", 1"),
            "payments_finish_whole",
        ),
        (payment("p8", ", hold", ", 'open'"), "payments_hold_check"),
        (
            payment("p9", ", captured_minor", ", 5"),
            "payments_hold_check",
        ),
        (
            "UPDATE payments SET status = 'paid' WHERE id = 'pay_old'".into(),
            "payments_status_check",
        ),
        (
            "UPDATE payments SET refunded_minor = 1 WHERE id = 'pay_old'".into(),
            "payments_refunds_within_amount",
        ),
        (
            "UPDATE payments SET finish_seq = 1, finish_at = now(), finish_outcome = 'charged', \
                 finish_latency_ms = 1, finish_answer = 201 WHERE id = 'pay_old'"
                .into(),
            "payments_finish_whole",
        ),
        (
            "UPDATE payments SET acquirer_key = 'chargeonce-pay_other' WHERE id = 'pay_old'".into(),
            "payments_acquirer_key_derived",
        ),
        (
            "UPDATE payments SET metadata = '[]' WHERE id = 'pay_old'".into(),
            "payments_metadata_check",
        ),
        // Migration 0028 split the update trigger by the columns of its
        // rules: an update of any column of a rule still checks it.
        (
            "UPDATE payments SET refund_reserved_minor = 1001 WHERE id = 'pay_old'".into(),
            "payments_refunds_within_amount",
        ),
        (
            "UPDATE payments SET amount_minor = 0 WHERE id = 'pay_old'".into(),
            "payments_amount_minor_check",
        ),
        (
            "UPDATE payments SET currency = 'RUBL' WHERE id = 'pay_old'".into(),
            "payments_currency_check",
        ),
        (
            "UPDATE payments SET reference = 'order-new' WHERE id = 'pay_old'".into(),
            "payments_live_reference",
        ),
        (
            "UPDATE payments SET finish_answer = 201 WHERE id = 'pay_old'".into(),
            "payments_finish_whole",
        ),
        (
            key("k1", "", "").replace("sha256('x')", "'\\x00'"),
            "idempotency_keys_fingerprint_check",
        ),
        (
            key("k2", "", "").replace("'payment_created'", "'lost'"),
            "idempotency_keys_recovery_point_check",
        ),
        (
            key("k3", ", response_status", ", 201"),
            "idempotency_keys_check",
        ),
        (event("evt_1", "payment.lost"), "events_event_type_check"),
    ];
    assert_refused(&pool, &refused).await;
    // What the rules admit is admitted, and a key's update is checked too.
    for statement in [
        payment("p10", ", metadata", ", '{\"a\":\"b\"}'"),
        key("k4", "", ""),
        event("evt_2", "payment.succeeded"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&pool)
            .await
            .unwrap_or_else(|error| panic!("{statement}: {error}"));
    }
    let error =
        sqlx::query("UPDATE idempotency_keys SET recovery_point = 'finished' WHERE key = 'k4'")
            .execute(&pool)
            .await
            .unwrap_err();
    assert_eq!(
        error.as_database_error().unwrap().constraint(),
        Some("idempotency_keys_check")
    );
    // `live_reference` is the row's: an insert gets it set whatever it
    // says; an update must set it as `payment_live_reference` says (the
    // store's statements do), or it is refused. A second live payment of an
    // order still collides, a decline frees the order.
    sqlx::query(sqlx::AssertSqlSafe(payment(
        "p12",
        ", live_reference",
        ", 'order-x'",
    )))
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(live("p12").await.as_deref(), Some("order-p12"));
    for wrong in [
        "UPDATE payments SET live_reference = 'order-x' WHERE id = 'p10'",
        "UPDATE payments SET status = 'declined' WHERE id = 'p10'",
    ] {
        let error = sqlx::query(wrong).execute(&pool).await.unwrap_err();
        let db_error = error.as_database_error().unwrap();
        assert_eq!(db_error.code().as_deref(), Some("23514"), "{wrong}");
        assert_eq!(
            db_error.constraint(),
            Some("payments_live_reference"),
            "{wrong}"
        );
    }
    assert_eq!(live("p10").await.as_deref(), Some("order-p10"));
    let taken = sqlx::query(sqlx::AssertSqlSafe(
        payment("p11", "", "").replace("'order-p11'", "'order-p10'"),
    ))
    .execute(&pool)
    .await
    .unwrap_err();
    assert_eq!(
        taken.as_database_error().unwrap().code().as_deref(),
        Some("23505")
    );
    sqlx::query(
        "UPDATE payments SET status = 'declined', \
             live_reference = payment_live_reference('declined', hold, captured_minor, reference) \
         WHERE id = 'p10'",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(live("p10").await, None);
    sqlx::query(sqlx::AssertSqlSafe(
        payment("p11", "", "").replace("'order-p11'", "'order-p10'"),
    ))
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(live("p11").await.as_deref(), Some("order-p10"));
}

/// Migration 0031 moved the row rules of refunds and captures from CHECK
/// constraints into triggers, as 0027 did for the hot path's tables: every
/// rule still refuses what its CHECK refused, with the same SQLSTATE and
/// constraint name, in inserts and in updates of any of its columns; what
/// the rules admit is admitted, and the rows written before stay.
#[tokio::test]
async fn the_turns_row_rules_moved_into_triggers_refuse_what_their_checks_refused() {
    let (_db, pool) = migrated_with(
        30,
        "INSERT INTO shops (id, secret_sha256) VALUES ('shop-a', sha256('s'));
         INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
             token, status, created_at)
         VALUES ('pay_old', 'shop-a', 'k-old', 'order-old', 1000, 'RUB', 'tok_ok', 'succeeded',
             now());
         INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, currency,
             status, acquirer_key, created_at)
         VALUES ('re_old', 'shop-a', 'pay_old', 'kr-old', 100, 'RUB', 'pending', 'ak-re_old',
             now());
         INSERT INTO captures (shop_id, id, payment_id, idempotency_key, amount_minor, currency,
             is_final, status, acquirer_key, created_at)
         VALUES ('shop-a', 'cap_old', 'pay_old', 'kc-old', 100, 'RUB', true, 'pending',
             'ak-cap_old', now());",
    )
    .await;
    let refund = |id: &str, columns: &str, values: &str| {
        format!(
            "INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, \
                 currency, status, acquirer_key, created_at{columns}) \
             VALUES ('{id}', 'shop-a', 'pay_old', 'k-{id}', 100, 'RUB', 'pending', 'ak-{id}', \
                 now(){values})"
        )
    };
    let capture = |id: &str, columns: &str, values: &str| {
        format!(
            "INSERT INTO captures (shop_id, id, payment_id, idempotency_key, amount_minor, \
                 currency, is_final, status, acquirer_key, created_at{columns}) \
             VALUES ('shop-a', '{id}', 'pay_old', 'k-{id}', 100, 'RUB', false, 'pending', \
                 'ak-{id}', now(){values})"
        )
    };
    let finish = "finish_seq = 1, finish_at = now(), finish_outcome = 'succeeded', \
                  finish_latency_ms = 1, finish_answer = 201";
    let mut refused: Vec<(String, String)> = Vec::new();
    for (table, row) in [
        ("refunds", &refund as &dyn Fn(&str, &str, &str) -> String),
        ("captures", &capture),
    ] {
        let old = if table == "refunds" {
            "re_old"
        } else {
            "cap_old"
        };
        let rule = |name: &str| format!("{table}_{name}");
        refused.extend([
            (
                row("x1", "", "").replace("100,", "0,"),
                rule("amount_minor_check"),
            ),
            (
                row("x2", "", "").replace("'RUB'", "'RUBL'"),
                rule("currency_check"),
            ),
            (
                row("x3", "", "").replace("'pending'", "'lost'"),
                rule("status_check"),
            ),
            (row("x4", ", claimed_by", ", 'a:1'"), rule("reserve_whole")),
            (row("x5", ", reserve_seq", ", 16"), rule("reserve_whole")),
            (row("x6", ", finish_answer", ", 201"), rule("finish_whole")),
            (
                format!("UPDATE {table} SET amount_minor = 0 WHERE id = '{old}'"),
                rule("amount_minor_check"),
            ),
            (
                format!("UPDATE {table} SET currency = 'RUBL' WHERE id = '{old}'"),
                rule("currency_check"),
            ),
            (
                format!("UPDATE {table} SET status = 'lost' WHERE id = '{old}'"),
                rule("status_check"),
            ),
            (
                format!("UPDATE {table} SET reserve_seq = 16 WHERE id = '{old}'"),
                rule("reserve_whole"),
            ),
            // A finish kept on a row claimed before the migration (no
            // `claimed_by`): refused, as on a pending row.
            (
                format!("UPDATE {table} SET {finish}, status = 'succeeded' WHERE id = '{old}'"),
                rule("finish_whole"),
            ),
            (
                format!("UPDATE {table} SET finish_outcome = 'succeeded' WHERE id = '{old}'"),
                rule("finish_whole"),
            ),
        ]);
    }
    refused.push((
        capture("x7", ", failure_code", ", 'no'"),
        "captures_check".into(),
    ));
    refused.push((
        "UPDATE captures SET status = 'failed' WHERE id = 'cap_old'".into(),
        "captures_check".into(),
    ));
    assert_refused(&pool, &refused).await;
    // What the rules admit is admitted: a claimed row, and its usual finish.
    for (table, statement) in [
        (
            "refunds",
            refund("re_new", ", claimed_by, reserve_seq", ", 'a:1', 32"),
        ),
        (
            "captures",
            capture("cap_new", ", claimed_by, reserve_seq", ", 'a:1', 48"),
        ),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&pool)
            .await
            .unwrap_or_else(|error| panic!("{statement}: {error}"));
        let id = if table == "refunds" {
            "re_new"
        } else {
            "cap_new"
        };
        let ended = format!("UPDATE {table} SET {finish}, status = 'succeeded' WHERE id = '{id}'");
        sqlx::query(sqlx::AssertSqlSafe(ended.clone()))
            .execute(&pool)
            .await
            .unwrap_or_else(|error| panic!("{ended}: {error}"));
    }
    let rows: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM refunds) + (SELECT count(*) FROM captures)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(rows, 4, "the rows before, and the two admitted");
}
