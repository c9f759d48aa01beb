//! The SQLite schema's indexes, checked with SQLite's own counters.

#![allow(clippy::unwrap_used, missing_docs)]

use chargeonce_core::{ShopId, ShopSecret, Store};
use chargeonce_sqlite::rusqlite::{Connection, StatementStatus, params};
use chargeonce_store::{PoolConfig, SqliteStore};
use chargeonce_testkit::TestDb;

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
    drop((payment, refund));
    conn.execute_batch("COMMIT").unwrap();
}
