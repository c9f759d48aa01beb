//! The SQLite schema's indexes, checked with SQLite's own counters.

#![allow(clippy::unwrap_used, missing_docs)]

use chargeonce_core::{Keys, Outbox, Payments, ShopId, ShopSecret, Shops};
use chargeonce_sqlite::rusqlite::{Connection, StatementStatus, params};
use chargeonce_store::{PoolConfig, SqliteStore};
use chargeonce_testkit::TestDb;

/// Creates `file` with the store's migrations applied up to `version`, the
/// schema as it was then (opening the store applies the rest).
async fn migrate_to(file: &std::path::Path, version: i64) {
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(file)
                .create_if_missing(true),
        )
        .await
        .unwrap();
    sqlx::migrate!("./migrations/sqlite")
        .run_to(version, &pool)
        .await
        .unwrap();
    pool.close().await;
}

/// SQLite settles a deferred foreign key from the parent's side too: every
/// payment or refund inserted looks up the key rows that point at it. Without
/// an index on the child column that is a scan of every stored key, per
/// payment (it was: fresh payments slowed with each key stored).
#[tokio::test]
async fn inserting_a_payment_or_a_refund_scans_no_table() {
    let db = TestDb::sqlite();
    let store = SqliteStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    store
        .add_shop(
            &ShopId::new("shop").unwrap(),
            &ShopSecret::from_string("s").hash(),
        )
        .await
        .unwrap();
    store.close().await;

    let conn = Connection::open(db.dir().join("chargeonce.db")).unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    conn.execute_batch("BEGIN").unwrap();
    for i in 0..2000 {
        conn.execute(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, updated_at) \
             VALUES (?1, 'shop', ?2, ?3, 100, 'RUB', 'tok_ok', 'succeeded', ?4, 0, 0)",
            params![
                format!("pay_{i}"),
                format!("key-{i}"),
                format!("order-{i}"),
                format!("acq-{i}")
            ],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
                 recovery_point, payment_id, response_status, response_body, created_at, \
                 expires_at) \
             VALUES ('shop', ?1, zeroblob(32), 'POST', '/v1/payments', 'finished', ?2, 201, \
                 x'7b7d', 0, 0)",
            params![format!("key-{i}"), format!("pay_{i}")],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO payment_history (payment_id, refund_id, at, kind, event) \
             VALUES (?1, NULL, 0, 'claimed', '{}')",
            params![format!("pay_{i}")],
        )
        .unwrap();
    }
    conn.execute_batch("COMMIT").unwrap();

    // A key that points at a payment not inserted yet (the claim's order),
    // then the payment and a refund, as the store writes them.
    conn.execute_batch("BEGIN").unwrap();
    conn.execute(
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
             recovery_point, payment_id, refund_id, created_at, expires_at) \
         VALUES ('shop', 'fresh', zeroblob(32), 'POST', '/v1/payments', 'payment_created', \
             'pay_fresh', NULL, 0, 0)",
        [],
    )
    .unwrap();
    let mut payment = conn
        .prepare(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, updated_at) \
             VALUES ('pay_fresh', 'shop', 'fresh', 'order-fresh', 100, 'RUB', 'tok_ok', \
                 'pending', 'acq-fresh', 0, 0)",
        )
        .unwrap();
    payment.execute([]).unwrap();
    assert_eq!(
        payment.get_status(StatementStatus::FullscanStep),
        0,
        "inserting a payment scanned a table"
    );
    let mut refund = conn
        .prepare(
            "INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, \
                 currency, status, acquirer_key, created_at, updated_at) \
             VALUES ('re_1', 'shop', 'pay_1', 'refund-key', 100, 'RUB', 'pending', 'acq-re', 0, 0)",
        )
        .unwrap();
    refund.execute([]).unwrap();
    assert_eq!(
        refund.get_status(StatementStatus::FullscanStep),
        0,
        "inserting a refund scanned a table"
    );
    // A history entry, as every write of the payment path appends them,
    // and a payment's history read back: a range of its index, in order.
    let mut entry = conn
        .prepare(
            "INSERT INTO payment_history (payment_id, refund_id, at, kind, event) \
             VALUES ('pay_fresh', NULL, 0, 'claimed', '{}')",
        )
        .unwrap();
    entry.execute([]).unwrap();
    assert_eq!(
        entry.get_status(StatementStatus::FullscanStep),
        0,
        "inserting a history entry scanned a table"
    );
    let mut history = conn
        .prepare(
            "SELECT seq, payment_id, refund_id, at, event FROM payment_history \
             WHERE payment_id = 'pay_7' \
               AND EXISTS (SELECT 1 FROM payments WHERE id = 'pay_7' AND shop_id = 'shop') \
             ORDER BY seq",
        )
        .unwrap();
    let read = history.query_map([], |_| Ok(())).unwrap().count();
    assert_eq!(read, 1);
    assert_eq!(
        history.get_status(StatementStatus::FullscanStep),
        0,
        "reading a payment's history scanned a table"
    );
    assert_eq!(
        history.get_status(StatementStatus::Sort),
        0,
        "reading a payment's history sorted it"
    );
    drop((payment, refund, entry, history));
    conn.execute_batch("COMMIT").unwrap();
}

/// Migration 0006 rebuilds five tables to write their CHECK constraints
/// without `IN (...)` lists: every row survives, the constraints accept and
/// refuse the same values, event numbers keep growing, and the payment path
/// builds no ephemeral table any more.
#[tokio::test]
async fn rebuilding_the_tables_keeps_every_row_and_the_same_rules() {
    let db = TestDb::sqlite();
    let file = db.dir().join("chargeonce.db");
    // The schema as migration 0005 left it, with rows in every table.
    migrate_to(&file, 5).await;
    {
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch(
            "INSERT INTO shops (id, secret_sha256, created_at) VALUES ('shop', zeroblob(32), 0);
             INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
                 token, status, acquirer_key, provider_payment_id, created_at, updated_at,
                 refund_reserved_minor, refunded_minor)
             VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', 'shop', 'k1', 'order-1', 1000, 'RUB', 'tok_ok', 'succeeded',
                 'acq-1', 'ch_1', 10, 11, 400, 400);
             INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, currency,
                 status, acquirer_key, created_at, updated_at)
             VALUES ('re_0193a5c27d2e7b5c9f1e2a3b4c5d6e72', 'shop', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', 'k2', 400, 'RUB', 'succeeded', 'acq-re-1', 12, 13);
             INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point,
                 payment_id, response_status, response_headers, response_body, created_at,
                 expires_at, replays)
             VALUES ('shop', 'k1', zeroblob(32), 'POST', '/v1/payments', 'finished', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', 201,
                 '[]', x'7b7d', 10, 99, 3);
             INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point,
                 payment_id, refund_id, response_status, response_body, created_at, expires_at)
             VALUES ('shop', 'k2', zeroblob(32), 'POST', '/v1/payments/pay_1/refunds', 'finished',
                 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', 're_0193a5c27d2e7b5c9f1e2a3b4c5d6e72', 201, x'7b7d', 12, 99);
             INSERT INTO events (id, shop_id, event_type, payment_id, payload, created_at,
                 due_since, next_attempt_at)
             VALUES ('evt_1', 'shop', 'payment.succeeded', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', x'7b7d', 11, 11, 11),
                    ('evt_2', 'shop', 'refund.succeeded', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', x'7b7d', 13, 13, 13),
                    ('evt_3', 'shop', 'refund.succeeded', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', x'7b7d', 14, 14, 14);
             DELETE FROM events WHERE id = 'evt_3';
             INSERT INTO acquirer_events (event_id, event_type, acquirer_key, shop_id, result,
                 received_at)
             VALUES ('aev_1', 'payment.succeeded', 'acq-1', 'shop', 'settled', 11);",
        )
        .unwrap();
    }

    // Opening the store applies 0006.
    let store = SqliteStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop").unwrap();
    let payment = store
        .payment(
            &shop,
            &chargeonce_core::PaymentId::parse("pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(payment.amount.minor_units(), 1000);
    assert_eq!(payment.refunded_minor, 400);
    assert_eq!(payment.provider_payment_id.as_deref(), Some("ch_1"));
    let key = store
        .key(&shop, &chargeonce_core::IdempotencyKey::new("k1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.replays, 3);
    assert_eq!(key.response.unwrap().body, b"{}");
    store.close().await;

    let conn = Connection::open(&file).unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    let count = |table: &str| -> i64 {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    for (table, rows) in [
        ("payments", 1),
        ("refunds", 1),
        ("idempotency_keys", 2),
        ("events", 2),
        ("acquirer_events", 1),
    ] {
        assert_eq!(count(table), rows, "{table}");
    }
    let violations: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(violations, 0);
    // AUTOINCREMENT: the deleted evt_3 had seq 3; the next event gets 4.
    conn.execute(
        "INSERT INTO events (id, shop_id, event_type, payment_id, payload, created_at) \
         VALUES ('evt_4', 'shop', 'payment.declined', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', x'7b7d', 15)",
        [],
    )
    .unwrap();
    let seq: i64 = conn
        .query_row("SELECT seq FROM events WHERE id = 'evt_4'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(seq, 4);
    // The same values are refused as before.
    for refused in [
        "UPDATE payments SET status = 'refunded' WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70'",
        "UPDATE refunds SET status = 'declined' WHERE id = 're_0193a5c27d2e7b5c9f1e2a3b4c5d6e72'",
        "UPDATE idempotency_keys SET recovery_point = 'done' WHERE key = 'k1'",
        "UPDATE events SET event_type = 'payment.refunded' WHERE id = 'evt_1'",
        "UPDATE acquirer_events SET result = 'ignored' WHERE event_id = 'aev_1'",
    ] {
        let error = conn.execute(refused, []).unwrap_err();
        assert!(error.to_string().contains("CHECK"), "{refused}: {error}");
    }
    for accepted in [
        "UPDATE payments SET status = 'declined' WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70'",
        "UPDATE refunds SET status = 'failed' WHERE id = 're_0193a5c27d2e7b5c9f1e2a3b4c5d6e72'",
        "UPDATE events SET event_type = 'refund.failed' WHERE id = 'evt_2'",
        "UPDATE acquirer_events SET result = 'unknown_payment' WHERE event_id = 'aev_1'",
    ] {
        assert_eq!(conn.execute(accepted, []).unwrap(), 1, "{accepted}");
    }
    // The statements of a fresh payment compare inline: no ephemeral table.
    for sql in [
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency, \
             token, status, acquirer_key, created_at, updated_at) \
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e71', 'shop', 'k3', 'order-2', 100, 'RUB', 'tok_ok', 'pending', 'acq-2', 1, 1)",
        "UPDATE payments SET status = 'succeeded' WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e71' AND status = 'pending'",
        "UPDATE idempotency_keys SET recovery_point = 'finished', response_status = 201 \
         WHERE key = 'k1'",
        "INSERT INTO events (id, shop_id, event_type, payment_id, payload, created_at) \
         VALUES ('evt_5', 'shop', 'payment.succeeded', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e70', x'7b7d', 1)",
    ] {
        let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let ops: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            !ops.iter().any(|op| op == "OpenEphemeral"),
            "{sql} builds an ephemeral table"
        );
    }
}

/// Migration 0010 folds the order's two indexes into `payments_by_order`:
/// the payments stored before it keep their orders (the declined ones move
/// to slots of their own, the live one stays in the order's one live slot),
/// and the rules are the old ones: one live payment per order, any number
/// of declined ones.
#[tokio::test]
async fn one_index_per_order_keeps_the_orders_and_their_rule() {
    let db = TestDb::sqlite();
    let file = db.dir().join("chargeonce.db");
    migrate_to(&file, 9).await;
    let insert = "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                      currency, token, status, acquirer_key, created_at, updated_at) \
                  VALUES (?1, 'shop', ?1, ?2, 100, 'RUB', 'tok', ?3, ?1, ?4, ?4)";
    let payments = [
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e01",
            "order-1",
            "declined",
            1,
        ),
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e02",
            "order-1",
            "declined",
            2,
        ),
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e03",
            "order-1",
            "succeeded",
            3,
        ),
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e04",
            "order-2",
            "pending",
            4,
        ),
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e05",
            "order-3",
            "declined",
            5,
        ),
    ];
    {
        let conn = Connection::open(&file).unwrap();
        conn.execute(
            "INSERT INTO shops (id, secret_sha256, created_at) VALUES ('shop', zeroblob(32), 0)",
            [],
        )
        .unwrap();
        for (id, order, status, at) in payments {
            conn.execute(insert, params![id, order, status, at])
                .unwrap();
        }
    }

    // Opening the store applies 0010.
    let store = SqliteStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop").unwrap();
    let order = |r: &str| chargeonce_core::Reference::new(r).unwrap();
    let ids = |payments: Vec<chargeonce_core::Payment>| {
        payments
            .into_iter()
            .map(|p| p.id.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(store
            .payments_by_reference(&shop, &order("order-1"))
            .await
            .unwrap()),
        [
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e01",
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e02",
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e03"
        ]
    );
    assert_eq!(
        ids(store
            .payments_by_reference(&shop, &order("order-2"))
            .await
            .unwrap()),
        ["pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e04"]
    );
    store.close().await;

    let conn = Connection::open(&file).unwrap();
    let slots: Vec<(String, String)> = conn
        .prepare("SELECT id, order_slot FROM payments ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let expected = [
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e01",
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e01",
        ),
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e02",
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e02",
        ),
        ("pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e03", ""),
        ("pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e04", ""),
        (
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e05",
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e05",
        ),
    ];
    assert_eq!(
        slots,
        expected.map(|(id, slot)| (id.to_owned(), slot.to_owned()))
    );
    // An order with a live payment takes no second one; an order whose
    // payments were all declined takes one; declined ones have no bound.
    let error = conn
        .execute(
            insert,
            params![
                "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e06",
                "order-1",
                "pending",
                6
            ],
        )
        .unwrap_err();
    assert!(error.to_string().contains("UNIQUE"), "{error}");
    conn.execute(
        insert,
        params![
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e07",
            "order-3",
            "pending",
            7
        ],
    )
    .unwrap();
    conn.execute(
        "UPDATE payments SET status = 'declined', order_slot = id WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e07'",
        [],
    )
    .unwrap();
    conn.execute(
        insert,
        params![
            "pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e08",
            "order-3",
            "pending",
            8
        ],
    )
    .unwrap();
    // A live payment never leaves the live slot, and a declined one takes
    // no slot but its own.
    for refused in [
        "UPDATE payments SET order_slot = id WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e03'",
        "UPDATE payments SET order_slot = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e01' WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e02'",
    ] {
        let error = conn.execute(refused, []).unwrap_err();
        assert!(error.to_string().contains("CHECK"), "{refused}: {error}");
    }
}

/// Migration 0012 rebuilds payments, keys and events for cancel: every row
/// survives, a payment may now be `canceled` (leaving its order's live slot
/// for its own id, so the order can be paid again), a key may be a cancel's
/// (`cancel_requested`), an event may be `payment.canceled`, what was refused
/// still is, and event numbers keep growing past a deleted one.
#[tokio::test]
async fn the_cancel_rebuild_keeps_every_row_and_admits_canceled() {
    let db = TestDb::sqlite();
    let file = db.dir().join("chargeonce.db");
    migrate_to(&file, 11).await;
    {
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch(
            "INSERT INTO shops (id, secret_sha256, created_at) VALUES ('shop', zeroblob(32), 0);
             INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
                 token, status, acquirer_key, created_at, updated_at, claimed_by)
             VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e80', 'shop', 'k1', 'order-1', 1000, 'RUB',
                 'tok_ok', 'pending', 'acq-1', 10, 11, 'a:1');
             INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point,
                 payment_id, created_at, expires_at, replays, lease_holder)
             VALUES ('shop', 'k1', zeroblob(32), 'POST', '/v1/payments', 'payment_created',
                 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e80', 10, 99, 2, 'a:1');
             INSERT INTO events (id, shop_id, event_type, payment_id, payload, created_at,
                 due_since, next_attempt_at)
             VALUES ('evt_1', 'shop', 'payment.declined', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e80', x'7b7d', 11, 11, 11),
                    ('evt_2', 'shop', 'payment.declined', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e80', x'7b7d', 12, 12, 12);
             DELETE FROM events WHERE id = 'evt_2';",
        )
        .unwrap();
    }
    // Opening the store applies 0012.
    let store = SqliteStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop").unwrap();
    let key = store
        .key(&shop, &chargeonce_core::IdempotencyKey::new("k1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.replays, 2);
    store.close().await;

    let conn = Connection::open(&file).unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    let violations: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(violations, 0);
    for accepted in [
        "UPDATE payments SET status = 'canceled', order_slot = id \
         WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e80'",
        // The order is free again: a new live payment takes its slot.
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency, \
             token, status, acquirer_key, created_at, updated_at) \
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e81', 'shop', 'k2', 'order-1', 1000, 'RUB', \
             'tok_ok', 'pending', 'acq-2', 20, 20)",
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point, \
             payment_id, created_at, expires_at) \
         VALUES ('shop', 'c1', zeroblob(32), 'POST', '/v1/payments/x/cancel', 'cancel_requested', \
             'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e80', 21, 99)",
        "INSERT INTO events (id, shop_id, event_type, payment_id, payload, created_at) \
         VALUES ('evt_3', 'shop', 'payment.canceled', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e80', x'7b7d', 22)",
    ] {
        assert_eq!(conn.execute(accepted, []).unwrap(), 1, "{accepted}");
    }
    let seq: i64 = conn
        .query_row("SELECT seq FROM events WHERE id = 'evt_3'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(seq, 3, "the deleted event's number is not reused");
    for refused in [
        "UPDATE payments SET status = 'refunded' WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e81'",
        // A live payment may not leave its order's slot.
        "UPDATE payments SET order_slot = id WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e81'",
        "UPDATE idempotency_keys SET recovery_point = 'done' WHERE key = 'k1'",
        "UPDATE events SET event_type = 'payment.refunded' WHERE id = 'evt_1'",
    ] {
        let error = conn.execute(refused, []).unwrap_err();
        assert!(error.to_string().contains("CHECK"), "{refused}: {error}");
    }
}

/// Migration 0014 rebuilds payments, keys and events for authorizations:
/// every row survives (metadata included), a payment may hold an
/// authorization whose CHECK keeps captures within it and refunds within
/// what was captured, an authorization released with nothing captured
/// leaves its order's live slot, a key may be a capture's or a void's, an
/// event may be a capture's, what was refused still is, and event numbers
/// keep growing past a deleted one.
#[tokio::test]
async fn the_authorization_rebuild_keeps_every_row_and_the_hold_within_its_rules() {
    let db = TestDb::sqlite();
    let file = db.dir().join("chargeonce.db");
    migrate_to(&file, 13).await;
    {
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch(
            "INSERT INTO shops (id, secret_sha256, created_at) VALUES ('shop', zeroblob(32), 0);
             INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
                 token, status, acquirer_key, created_at, updated_at, claimed_by, metadata)
             VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e90', 'shop', 'k1', 'order-1', 1000, 'RUB',
                 'tok_ok', 'succeeded', 'acq-1', 10, 11, 'a:1', '{\"order\":\"1\"}');
             INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point,
                 payment_id, created_at, expires_at, replays, lease_holder)
             VALUES ('shop', 'k1', zeroblob(32), 'POST', '/v1/payments', 'payment_created',
                 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e90', 10, 99, 3, 'a:1');
             INSERT INTO events (id, shop_id, event_type, payment_id, payload, created_at,
                 due_since, next_attempt_at)
             VALUES ('evt_1', 'shop', 'payment.succeeded', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e90', x'7b7d', 11, 11, 11),
                    ('evt_2', 'shop', 'payment.succeeded', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e90', x'7b7d', 12, 12, 12);
             DELETE FROM events WHERE id = 'evt_2';",
        )
        .unwrap();
    }
    // Opening the store applies 0014.
    let store = SqliteStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let shop = ShopId::new("shop").unwrap();
    let paid = store
        .payment(
            &shop,
            &chargeonce_core::PaymentId::parse("pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e90").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paid.capture, chargeonce_core::PaymentCapture::Automatic);
    assert_eq!(
        paid.metadata.as_map().get("order").map(String::as_str),
        Some("1")
    );
    let key = store
        .key(&shop, &chargeonce_core::IdempotencyKey::new("k1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.replays, 3);
    store.close().await;

    let conn = Connection::open(&file).unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    let violations: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(violations, 0);
    let authorization = "INSERT INTO payments (id, shop_id, idempotency_key, reference, \
             amount_minor, currency, token, status, acquirer_key, created_at, updated_at, \
             capture_method, hold, authorization_expires_at) \
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91', 'shop', 'k2', 'order-2', 1000, 'RUB', \
             'tok_ok', 'succeeded', 'acq-2', 20, 20, 'manual', 'open', 99)";
    for accepted in [
        authorization,
        "UPDATE payments SET captured_minor = 400, capture_reserved_minor = 600, \
             captures_in_flight = 2, hold = 'closing' \
         WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
        "INSERT INTO captures (shop_id, id, payment_id, idempotency_key, amount_minor, currency, \
             is_final, status, acquirer_key, created_at, updated_at) \
         VALUES ('shop', 'cap_1', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91', 'c1', 600, 'RUB', 1, \
             'pending', 'chargeonce-cap_1', 21, 21)",
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point, \
             payment_id, capture_id, created_at, expires_at) \
         VALUES ('shop', 'c1', zeroblob(32), 'POST', '/v1/payments/x/captures', \
             'capture_created', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91', 'cap_1', 21, 99)",
        "INSERT INTO events (id, shop_id, event_type, payment_id, capture_id, payload, \
             created_at) \
         VALUES ('evt_3', 'shop', 'capture.succeeded', 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91', \
             'cap_1', x'7b7d', 22)",
        "UPDATE payments SET refund_reserved_minor = 400 \
         WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
    ] {
        assert_eq!(conn.execute(accepted, []).unwrap(), 1, "{accepted}");
    }
    let seq: i64 = conn
        .query_row("SELECT seq FROM events WHERE id = 'evt_3'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(seq, 3, "the deleted event's number is not reused");
    for refused in [
        // Captured plus reserved over the amount.
        "UPDATE payments SET captured_minor = 500 WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
        // Refunds over what was captured.
        "UPDATE payments SET refund_reserved_minor = 401 \
         WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
        // A reservation without a capture in flight, or the reverse.
        "UPDATE payments SET captures_in_flight = 0 WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
        // A hold on a payment charged at once; an authorization without one.
        "UPDATE payments SET hold = 'open' WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e90'",
        "UPDATE payments SET hold = NULL WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
        "UPDATE payments SET hold = 'gone' WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
        // An authorization that took money keeps its order.
        "UPDATE payments SET hold = 'released_void', order_slot = id, capture_reserved_minor = 0, \
             captures_in_flight = 0 WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e91'",
        "UPDATE idempotency_keys SET recovery_point = 'done' WHERE key = 'k1'",
        "UPDATE events SET event_type = 'capture.refunded' WHERE id = 'evt_1'",
        "UPDATE captures SET status = 'failed' WHERE id = 'cap_1'",
    ] {
        let error = conn.execute(refused, []).unwrap_err();
        assert!(error.to_string().contains("CHECK"), "{refused}: {error}");
    }
    // Released with nothing captured: the order is free again.
    conn.execute_batch(
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
             token, status, acquirer_key, created_at, updated_at, capture_method, hold,
             authorization_expires_at)
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e92', 'shop', 'k3', 'order-3', 1000, 'RUB',
             'tok_ok', 'succeeded', 'acq-3', 30, 30, 'manual', 'released_void', 99);
         UPDATE payments SET order_slot = id WHERE id = 'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e92';
         INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
             token, status, acquirer_key, created_at, updated_at)
         VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6e93', 'shop', 'k4', 'order-3', 1000, 'RUB',
             'tok_ok', 'pending', 'acq-4', 31, 31);",
    )
    .unwrap();
}

/// Migration 0018 makes a shop's one URL its operator endpoint with its
/// events' delivery state (parked events get none), keeps which events of a
/// shop whose URL was removed were delivered (on a deleted placeholder), and
/// drops the delivery columns from the events: a URL set again sends only
/// what was never delivered.
#[tokio::test]
async fn the_endpoints_migration_keeps_every_events_delivery_state() {
    let db = TestDb::sqlite();
    let file = db.dir().join("chargeonce.db");
    migrate_to(&file, 17).await;
    {
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch(
            "INSERT INTO shops (id, secret_sha256, created_at, webhook_url, webhook_secret)
             VALUES ('with-url', zeroblob(32), 0, 'https://a.example/hooks', 'whsec_a'),
                    ('url-removed', zeroblob(32), 0, NULL, NULL);
             INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency,
                 token, status, acquirer_key, created_at, updated_at)
             VALUES ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ed1', 'with-url', 'k1', 'o1', 100, 'RUB',
                     'tok_ok', 'succeeded', 'acq-1', 1, 1),
                    ('pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ed2', 'url-removed', 'k2', 'o2', 100, 'RUB',
                     'tok_ok', 'succeeded', 'acq-2', 1, 1);
             INSERT INTO events (id, shop_id, event_type, payment_id, payload, created_at,
                 due_since, next_attempt_at, attempts, delivered_at, last_status)
             VALUES ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed1', 'with-url', 'payment.succeeded',
                     'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ed1', x'7b7d', 1, 1, 1, 2, 5, 200),
                    ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed2', 'with-url', 'payment.succeeded',
                     'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ed1', x'7b7d', 2, 2, 2, 1, NULL, 500),
                    ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed3', 'url-removed', 'payment.succeeded',
                     'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ed2', x'7b7d', 3, 3, 3, 1, 6, 200),
                    ('evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed4', 'url-removed', 'payment.succeeded',
                     'pay_0193a5c27d2e7b5c9f1e2a3b4c5d6ed2', x'7b7d', 4, 4, 253402300799000, 0,
                     NULL, NULL);",
        )
        .unwrap();
    }
    // Opening the store applies 0018.
    let store = SqliteStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let conn = Connection::open(&file).unwrap();
    let rows: Vec<(String, i64, bool)> = conn
        .prepare(
            "SELECT e.id, d.attempts, d.delivered_at IS NOT NULL FROM event_deliveries d \
             JOIN events e ON e.seq = d.event_seq ORDER BY e.id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows,
        vec![
            ("evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed1".into(), 2, true),
            ("evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed2".into(), 1, false),
            ("evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed3".into(), 1, true),
        ]
    );
    let columns: i64 = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('events') \
             WHERE name IN ('next_attempt_at', 'delivered_at', 'attempts')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(columns, 0, "the delivery columns left the events");
    let shop = ShopId::new("url-removed").unwrap();
    let endpoint = chargeonce_core::events::WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: chargeonce_core::webhook::WebhookSecret::new("whsec_b"),
    };
    assert!(store.set_webhook(&shop, Some(&endpoint)).await.unwrap());
    let due = store
        .claim_due_events(10, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let ids: Vec<&str> = due.iter().map(|d| d.event.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed2",
            "evt_0193a5c27d2e7b5c9f1e2a3b4c5d6ed4"
        ],
        "the open event of the URL kept, the never-delivered one of the URL set again"
    );
}

/// Migration 0019 gives every shop its test mode's namespace (`{shop}.test`,
/// mode `test`) and scopes an API key's idempotency key by mode.
#[tokio::test]
async fn the_test_mode_migration_gives_every_shop_its_namespace() {
    let db = TestDb::sqlite();
    let file = db.dir().join("chargeonce.db");
    migrate_to(&file, 18).await;
    {
        let conn = Connection::open(&file).unwrap();
        conn.execute_batch(
            "INSERT INTO shops (id, secret_sha256, created_at) VALUES ('old-shop', zeroblob(32), 0);
             INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, created_at,
                 idempotency_key, request_sha256)
             VALUES ('old-shop', 'key_1', 'live', 'full', zeroblob(32), 0, 'make-1',
                 zeroblob(32));",
        )
        .unwrap();
    }
    let store = SqliteStore::connect(db.url(), &PoolConfig::default())
        .await
        .unwrap();
    let listed: Vec<ShopId> = chargeonce_core::store::Operator::shops(&store)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.shop_id)
        .collect();
    assert_eq!(listed, [ShopId::new("old-shop").unwrap()]);
    drop(store);
    let conn = Connection::open(&file).unwrap();
    let mut shops = conn
        .prepare("SELECT id, mode FROM shops ORDER BY id")
        .unwrap();
    let shops: Vec<(String, String)> = shops
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        shops,
        [
            ("old-shop".to_owned(), "live".to_owned()),
            ("old-shop.test".to_owned(), "test".to_owned())
        ]
    );
    // A row's mode is its id's.
    assert!(
        conn.execute(
            "INSERT INTO shops (id, secret_sha256, created_at, mode) VALUES ('x', zeroblob(32), 0, 'test')",
            [],
        )
        .is_err()
    );
    let insert = |id: &str, hash: u8| {
        conn.execute(
            "INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, created_at,
                 idempotency_key, request_sha256)
             VALUES ('old-shop', ?1, 'test', 'full', ?2, 0, 'make-1', zeroblob(32))",
            params![id, vec![hash; 32]],
        )
    };
    insert("key_2", 2).unwrap();
    assert!(insert("key_3", 3).is_err(), "one per shop, mode and key");
}
