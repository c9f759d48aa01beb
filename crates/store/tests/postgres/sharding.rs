//! Ready to distribute by shop (issue 36, migration 0016): every primary
//! key, unique index and foreign key of a service table includes `shop_id`,
//! read from PostgreSQL's catalog; and every statement the hot path runs
//! still finds its rows through an index, read from the plans PostgreSQL
//! makes for the very statements the store sent.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use chargeonce_core::store::{Cursor, PageRequest, PaymentFilter};
use chargeonce_core::webhook::EventKind;
use chargeonce_core::{
    CaptureSettlement, NewRefund, RefundAnswer, RefundClaim, RefundSettlement, ReleaseClaim,
    VoidSettlement,
};
use sqlx::{AssertSqlSafe, Executor as _, Row as _, SqlSafeStr as _, TypeInfo as _};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

use super::*;

/// The reference tables (the same rows on every node: no shop of their
/// own) and sqlx's bookkeeping: the only tables whose keys lack `shop_id`.
const REFERENCE_TABLES: [&str; 3] = ["shops", "operator_credential", "_sqlx_migrations"];

/// Partial indexes that hold only work in flight, read whole by design:
/// the unfinished keys (the pending payments still in their requests,
/// `postgres/pending.rs`), a few per request under way, never the table.
const IN_FLIGHT_INDEXES: [&str; 1] = ["idempotency_keys_unfinished"];

/// Every unique index (primary keys and unique constraints included) of a
/// service table, and every foreign key between service tables, includes
/// `shop_id`; every service table has the column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_a_service_table_includes_the_shop() {
    let pg = pg().await;
    let pool = pg.store.pool();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c \
         WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' \
           AND c.relname <> ALL($1) ORDER BY 1",
    )
    .bind(REFERENCE_TABLES)
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(tables.len() >= 10, "the service's tables: {tables:?}");
    for table in &tables {
        let has_shop: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute \
             WHERE attrelid = $1::regclass AND attname = 'shop_id' AND NOT attisdropped \
               AND attnotnull)",
        )
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap();
        assert!(has_shop, "{table} has no NOT NULL shop_id");
    }

    let unique_without_shop: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x \
         JOIN pg_class c ON c.oid = x.indrelid \
         WHERE c.relnamespace = 'public'::regnamespace AND c.relname <> ALL($1) \
           AND x.indisunique \
           AND NOT EXISTS (SELECT 1 FROM pg_attribute a \
               WHERE a.attrelid = x.indrelid AND a.attname = 'shop_id' \
                 AND a.attnum = ANY(x.indkey::int2[]))",
    )
    .bind(REFERENCE_TABLES)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(unique_without_shop, Vec::<String>::new());

    let unique: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid \
         WHERE c.relnamespace = 'public'::regnamespace AND c.relname <> ALL($1) \
           AND x.indisunique",
    )
    .bind(REFERENCE_TABLES)
    .fetch_one(pool)
    .await
    .unwrap();
    assert!(unique >= 12, "the check saw the unique indexes: {unique}");

    let foreign_without_shop: Vec<String> = sqlx::query_scalar(
        "SELECT conrelid::regclass::text || ': ' || pg_get_constraintdef(k.oid) \
         FROM pg_constraint k \
         WHERE k.contype = 'f' AND k.connamespace = 'public'::regnamespace \
           AND k.confrelid::regclass::text <> ALL($1) \
           AND NOT EXISTS (SELECT 1 FROM pg_attribute a \
               WHERE a.attrelid = k.conrelid AND a.attname = 'shop_id' \
                 AND a.attnum = ANY(k.conkey))",
    )
    .bind(REFERENCE_TABLES)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(foreign_without_shop, Vec::<String>::new());
}

/// The statements of the hot path (a payment claimed and finished, its
/// replay, a take-over, the webhook's and the reconciler's settle, a
/// refund, a capture and a void, the reads of a payment, its history and the list,
/// the completer's queue),
/// captured as the store sends them, each planned generically with
/// sequential scans priced out, on tables of 5 000 payments: none may read
/// a service table whole (sequentially, or along an index without a key
/// condition), so each has an index to find its rows by (a key that gained
/// `shop_id` and lost its prefix would show here as a scan).
#[tokio::test(flavor = "current_thread")]
async fn the_hot_paths_statements_use_an_index() {
    let pg = pg().await;
    let captured = captured(&pg, Path::Whole).await;
    let mut conn = pg.store.pool().acquire().await.unwrap();
    fill(&mut conn, &pg.shop).await;
    let mut checked = 0;
    conn.execute("SET enable_seqscan = off; SET plan_cache_mode = force_generic_plan")
        .await
        .unwrap();
    for sql in &captured {
        let Some(plan) = generic_plan(&mut conn, sql).await else {
            continue;
        };
        let scans = seq_scans(&plan);
        if std::env::var_os("SHOW_PLANS").is_some() {
            eprintln!(
                "---- {}\n{}",
                sql.lines().next().unwrap_or(""),
                summary(&plan)
            );
        }
        assert!(
            scans.is_empty(),
            "scans {scans:?} in the plan of\n{sql}\n{plan:#}"
        );
        checked += 1;
    }
    assert!(
        checked >= 12,
        "the hot path's statements were planned: {checked} of {}",
        captured.len()
    );
}

/// The requests' statements planned as a connection plans them on a new
/// database: generically (a prepared statement settles on its generic plan
/// after five runs and keeps it until the table's first ANALYZE), on
/// tables PostgreSQL has no statistics of yet, sequential scans allowed.
/// None may read `payments`, `idempotency_keys` or `refunds` whole: such a
/// plan is run by every request while the table grows (`finish_key` once
/// joined the key row to `payments` and scanned every payment on each
/// refund's finish; a take-over hashed every settled payment). The
/// completer's poll of its queue is left out: a join of the queue to
/// `payments`, a few times a second whatever the load, until autovacuum's
/// first ANALYZE of a new database.
#[tokio::test(flavor = "current_thread")]
async fn a_new_databases_plans_do_not_scan_the_growing_tables() {
    let pg = pg().await;
    let captured = captured(&pg, Path::Requests).await;
    let mut conn = pg.store.pool().acquire().await.unwrap();
    conn.execute("SET plan_cache_mode = force_generic_plan")
        .await
        .unwrap();
    let (mut checked, mut scanning) = (0, Vec::new());
    for sql in &captured {
        let Some(plan) = generic_plan(&mut conn, sql).await else {
            continue;
        };
        let growing: Vec<String> = seq_scans(&plan)
            .into_iter()
            .filter(|scan| {
                ["payments", "idempotency_keys", "refunds"]
                    .iter()
                    .any(|t| scan.ends_with(&format!(" of {t}")))
            })
            .collect();
        if !growing.is_empty() {
            scanning.push(format!("{growing:?} in the plan of\n{sql}\n{plan:#}"));
        }
        checked += 1;
    }
    assert!(scanning.is_empty(), "{}", scanning.join("\n\n"));
    assert!(checked >= 12, "planned: {checked} of {}", captured.len());
}

/// Copies the finished payment `k-fresh` (its key, its history, its
/// event) into 5 000 more, and into 5 000 pending ones in the completer's
/// queue, as a shop that has been taking payments has them (more than a
/// queue holds, so its reads must be by key too), and has the planner
/// count them: on empty tables it estimates one
/// row and picks plans no busy database would.
async fn fill(conn: &mut sqlx::PgConnection, shop: &ShopId) {
    const COPIES: [&str; 6] = [
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
             currency, token, status, acquirer_key, provider_payment_id, created_at, claimed_by) \
         SELECT 'pay_fill_' || g, shop_id, 'k-fill-' || g, 'order-fill-' || g, amount_minor, \
             currency, token, status, NULL, provider_payment_id, \
             created_at - g * interval '1 second', claimed_by \
         FROM payments, generate_series(1, 5000) g \
         WHERE shop_id = $1 AND idempotency_key = 'k-fresh'",
        // And 5 000 still pending, in the completer's queue.
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
             currency, token, status, acquirer_key, created_at, claimed_by) \
         SELECT 'pay_wait_' || g, shop_id, 'k-wait-' || g, 'order-wait-' || g, amount_minor, \
             currency, token, 'pending', NULL, \
             created_at - g * interval '1 second', claimed_by \
         FROM payments, generate_series(1, 5000) g \
         WHERE shop_id = $1 AND idempotency_key = 'k-fresh'",
        "INSERT INTO pending_payments (created_at, payment_id, shop_id) \
         SELECT created_at, id, shop_id FROM payments \
         WHERE shop_id = $1 AND id LIKE 'pay_wait_%'",
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
             recovery_point, payment_id, created_at, expires_at, response_status, \
             response_headers, response_body) \
         SELECT shop_id, 'k-fill-' || g, fingerprint, method, path, recovery_point, \
             'pay_fill_' || g, created_at, expires_at, response_status, response_headers, \
             response_body \
         FROM idempotency_keys, generate_series(1, 5000) g \
         WHERE shop_id = $1 AND key = 'k-fresh'",
        "INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
         SELECT 'pay_fill_' || g, refund_id, shop_id, kind, event \
         FROM payment_history h, generate_series(1, 5000) g \
         WHERE shop_id = $1 AND payment_id = ( \
             SELECT payment_id FROM idempotency_keys WHERE shop_id = $1 AND key = 'k-fresh')",
        "INSERT INTO events (id, shop_id, event_type, payment_id, payload) \
         SELECT 'evt_fill_' || g, shop_id, event_type, 'pay_fill_' || g, payload \
         FROM events, generate_series(1, 5000) g \
         WHERE shop_id = $1 AND payment_id = ( \
             SELECT payment_id FROM idempotency_keys WHERE shop_id = $1 AND key = 'k-fresh')",
    ];
    for copy in COPIES {
        let done = sqlx::query(copy)
            .bind(shop.as_str())
            .execute(&mut *conn)
            .await
            .unwrap();
        assert!(done.rows_affected() >= 5000, "{copy}");
    }
    conn.execute("ANALYZE").await.unwrap();
}

/// What of the hot path [`captured`] runs.
enum Path {
    /// Every operation: the requests', then the completer's read.
    Whole,
    /// Only the requests' operations.
    Requests,
}

/// The statements `path` sends, captured as the store sends them.
async fn captured(pg: &Pg, path: Path) -> Vec<String> {
    let statements = Statements::default();
    let subscriber = tracing_subscriber::registry().with(statements.clone());
    let guard = tracing::subscriber::set_default(subscriber);
    match path {
        Path::Whole => run_the_hot_path(pg).await,
        Path::Requests => run_the_requests(pg).await,
    }
    drop(guard);
    statements.take()
}

/// Runs every store operation of the hot path once: the requests', then
/// the completer's read of its queue.
async fn run_the_hot_path(pg: &Pg) {
    run_the_requests(pg).await;
    pg.store.pending_payments(Duration::ZERO, 10).await.unwrap();
}

/// Runs every store operation a request of the hot path makes, once.
async fn run_the_requests(pg: &Pg) {
    let (lease, payment) = acquired(pg, "k-fresh", "order-fresh").await;
    let charged = settlement(PaymentStatus::Succeeded, "ch_fresh");
    let finished = pg
        .store
        .finish(
            &lease,
            Some((&payment, &charged)),
            &response("ok"),
            TIMING.ttl,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::Stored);
    // With the one charge a real request makes, the finish takes its usual
    // form (kept on the payment's row, guarded for a shop without
    // endpoints), the statement a fresh payment runs; the one above is the
    // form with history entries (no charge recorded).
    let (lease, usual) = acquired(pg, "k-usual", "order-usual").await;
    let finished = finish_charged(pg, &lease, &usual, &charge(&usual, None)).await;
    assert_eq!(finished, FinishOutcome::Stored);
    let replay = pg
        .store
        .claim_payment(
            &claim(&pg.shop, "k-fresh"),
            &new_payment(&pg.shop, "k-fresh", "order-fresh"),
            TIMING,
        )
        .await
        .unwrap();
    assert!(matches!(replay, Claim::Exists(_)), "the replay's key");

    // A lease that has run out at once: taken over by the retry.
    let expired = KeyTiming {
        lease: Duration::ZERO,
        ..TIMING
    };
    let (_, lost) = match pg
        .store
        .claim_payment(
            &claim(&pg.shop, "k-lost"),
            &new_payment(&pg.shop, "k-lost", "order-lost"),
            expired,
        )
        .await
        .unwrap()
    {
        Claim::Acquired(a) => (a.lease, a.payment),
        Claim::Exists(_) => panic!("new key"),
    };
    let taken = pg
        .store
        .take_over(
            &pg.shop,
            &key("k-lost"),
            &claim(&pg.shop, "k-lost").fingerprint,
            TIMING.lease,
        )
        .await
        .unwrap()
        .expect("taken over");
    pg.store.release_lease(&taken.lease, &[]).await.unwrap();

    let (_, hooked) = acquired(pg, "k-hook", "order-hook").await;
    let event = InboundEvent {
        event_id: "evt_hook".into(),
        kind: EventKind::Succeeded,
        acquirer_key: hooked.acquirer_key.clone(),
        shop_id: pg.shop.clone(),
        settlement: Some(settlement(PaymentStatus::Succeeded, "ch_hook")),
    };
    assert!(matches!(
        pg.store.record_event(&event).await.unwrap(),
        EventRecorded::Settled(_)
    ));
    let settled = pg
        .store
        .settle_payment(
            &pg.shop,
            &lost.id,
            &settlement(PaymentStatus::Succeeded, "ch_lost"),
        )
        .await
        .unwrap();
    assert!(matches!(settled, SettleOutcome::Settled(_)));

    // A refund of the hooked payment (the fill copies only `k-fresh`'s
    // rows): the claim's reservation, the finish's settlement.
    let refund_claim = pg
        .store
        .claim_refund(
            &claim(&pg.shop, "k-refund"),
            &NewRefund::new(pg.shop.clone(), hooked.id.clone(), key("k-refund"), None),
            TIMING,
        )
        .await
        .unwrap();
    let RefundClaim::Acquired(refunding) = refund_claim else {
        panic!("a new refund key");
    };
    let refund = refunding.refund.as_ref().expect("the claim's refund");
    let refunded = RefundSettlement::Succeeded {
        provider_refund_id: "re_hot".into(),
    };
    let finished = pg
        .store
        .finish_refund(
            &refunding.lease,
            Some(RefundAnswer {
                refund,
                reference: refunding.payment.reference.as_str(),
                settlement: &refunded,
            }),
            &response("refunded"),
            TIMING.ttl,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::Stored);

    // A capture of an authorization: the claim's reservation on its hold,
    // the finish's two statements.
    let (lease, _, capture) = capture_acquired(pg, "k-auth", "k-capture").await;
    let captured = CaptureSettlement::Succeeded {
        provider_capture_id: "cp_hot".into(),
    };
    let finished = pg
        .store
        .finish_capture(
            &lease,
            Some((&capture, &captured)),
            &response("captured"),
            TIMING.ttl,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::Stored);

    // A void of another authorization: its claim, its finish's two statements.
    let held = authorized(pg, "k-held").await;
    let voiding = pg
        .store
        .claim_void(&claim(&pg.shop, "k-void"), &held.id, TIMING)
        .await
        .unwrap();
    let ReleaseClaim::Acquired(voiding) = voiding else {
        panic!("a new void key");
    };
    let voided = VoidSettlement::Succeeded {
        provider_void_id: "vd_hot".into(),
        released: held.amount,
    };
    let finished = pg
        .store
        .finish_void(
            &voiding.lease,
            Some((&held.id, &voided)),
            &response("voided"),
            TIMING.ttl,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::Stored);

    pg.store.payment(&pg.shop, &payment.id).await.unwrap();
    pg.store
        .payment_history(Some(&pg.shop), &payment.id)
        .await
        .unwrap();
    pg.store.payment_history(None, &payment.id).await.unwrap();
    pg.store.key(&pg.shop, &key("k-fresh")).await.unwrap();
    let page = PageRequest {
        cursor: Cursor::After(payment.id.clone()),
        limit: chargeonce_core::store::PageLimit::default(),
    };
    pg.store
        .list_payments(&pg.shop, &PaymentFilter::default(), &page)
        .await
        .unwrap();
}

/// The generic plan of `sql` as JSON, its parameters typed as the server
/// describes them and bound to NULL (a generic plan does not look at
/// them); `None` for what has no plan (`BEGIN`, `COMMIT`).
async fn generic_plan(conn: &mut sqlx::PgConnection, sql: &str) -> Option<serde_json::Value> {
    let verb = sql.split_whitespace().next()?.to_ascii_uppercase();
    if !["SELECT", "WITH", "INSERT", "UPDATE", "DELETE"].contains(&verb.as_str()) {
        return None;
    }
    let described = (&mut *conn)
        .describe(AssertSqlSafe(sql).into_sql_str())
        .await
        .unwrap();
    let types: Vec<String> = match described.parameters() {
        Some(sqlx::Either::Left(types)) => types.iter().map(|t| t.name().to_owned()).collect(),
        _ => Vec::new(),
    };
    let prepare = if types.is_empty() {
        format!("PREPARE hot AS {sql}")
    } else {
        format!("PREPARE hot ({}) AS {sql}", types.join(", "))
    };
    conn.execute(AssertSqlSafe(prepare)).await.unwrap();
    let nulls = vec!["NULL"; types.len()].join(", ");
    let explain = if types.is_empty() {
        "EXPLAIN (FORMAT JSON) EXECUTE hot".to_owned()
    } else {
        format!("EXPLAIN (FORMAT JSON) EXECUTE hot({nulls})")
    };
    let row = sqlx::query(AssertSqlSafe(explain))
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    conn.execute("DEALLOCATE hot").await.unwrap();
    Some(row.get::<serde_json::Value, _>(0))
}

/// The plan's nodes one a line (node, table, index, key condition), for
/// `SHOW_PLANS=1`.
fn summary(node: &serde_json::Value) -> String {
    let mut out = String::new();
    fn go(node: &serde_json::Value, out: &mut String) {
        match node {
            serde_json::Value::Object(f) => {
                if let Some(t) = f.get("Node Type") {
                    out.push_str(&format!(
                        "  {} {} {} cond={}\n",
                        t,
                        f.get("Relation Name")
                            .map(|v| v.to_string())
                            .unwrap_or_default(),
                        f.get("Index Name")
                            .map(|v| v.to_string())
                            .unwrap_or_default(),
                        f.get("Index Cond")
                            .map(|v| v.to_string())
                            .unwrap_or_default()
                    ));
                }
                f.values().for_each(|v| go(v, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| go(v, out)),
            _ => {}
        }
    }
    go(node, &mut out);
    out
}

/// The service tables a plan reads whole: sequentially, or along an index
/// without a condition on its key.
fn seq_scans(plan: &serde_json::Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(plan, &mut found);
    found
}

fn walk(node: &serde_json::Value, found: &mut Vec<String>) {
    match node {
        serde_json::Value::Object(fields) => {
            let kind = fields.get("Node Type").and_then(|t| t.as_str());
            let table = fields.get("Relation Name").and_then(|t| t.as_str());
            let whole = match kind {
                Some("Seq Scan") => true,
                // An index read from end to end finds nothing by its key,
                // unless it holds only the rows in flight.
                Some("Index Scan" | "Index Only Scan") => {
                    !fields.contains_key("Index Cond")
                        && !fields
                            .get("Index Name")
                            .and_then(|n| n.as_str())
                            .is_some_and(|n| IN_FLIGHT_INDEXES.contains(&n))
                }
                _ => false,
            };
            if let Some(table) = table.filter(|t| whole && !REFERENCE_TABLES.contains(t)) {
                found.push(format!("{} of {table}", kind.unwrap_or("?")));
            }
            fields.values().for_each(|value| walk(value, found));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, found)),
        _ => {}
    }
}

/// The distinct statements sqlx logged (target `sqlx::query`), in the
/// order first seen.
#[derive(Clone, Default)]
struct Statements(Arc<Mutex<Vec<String>>>);

impl Statements {
    fn take(&self) -> Vec<String> {
        let all = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        let mut seen = BTreeSet::new();
        all.into_iter()
            .filter(|sql| seen.insert(sql.clone()))
            .collect()
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Statements {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut fields = StatementFields::default();
        event.record(&mut fields);
        // sqlx logs a short statement whole as its summary, a long one in
        // `db.statement` (with a shortened summary).
        let sql = if fields.statement.trim().is_empty() {
            fields.summary
        } else {
            fields.statement
        };
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sql.trim().to_owned());
    }
}

#[derive(Default)]
struct StatementFields {
    summary: String,
    statement: String,
}

impl Visit for StatementFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => self.summary = value.to_owned(),
            "db.statement" => self.statement = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "summary" => self.summary = format!("{value:?}"),
            "db.statement" => self.statement = format!("{value:?}"),
            _ => {}
        }
    }
}
