//! The gauges `/metrics` reads at each scrape, on a real server and a real
//! store, after real events: open findings by kind, merchant events due and
//! the oldest one's age, the SQLite writer's queue (depth while another
//! connection holds the file's write lock, and its limit) and the PostgreSQL
//! pool (connections by state, its maximum, the acquire waits).

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use chargeonce_core::ShopId;
use chargeonce_core::endpoint::EndpointUpdate;
use chargeonce_core::events::WebhookEndpoint;
use chargeonce_core::findings::{FindingKind, NewFinding};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{PaymentId, Reference};
use chargeonce_store::PoolConfig;
use chargeonce_testkit::on_both_stores;
use common::{Backend, SHOP, TestService, body, send};

/// One scrape of the operator listener's `/metrics`.
async fn scrape(s: &TestService) -> String {
    let answer = send(s.http.get(s.operator_url("/metrics"))).await;
    assert_eq!(answer.status, 200);
    String::from_utf8(answer.bytes).unwrap()
}

/// The value of the sample `series` (name and labels as exposed), if any.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

/// [`value`], which must be there.
fn must(text: &str, series: &str) -> f64 {
    value(text, series).unwrap_or_else(|| panic!("no `{series}` in:\n{text}"))
}

fn open_by_kind(text: &str, kind: &str) -> f64 {
    must(
        text,
        &format!("chargeonce_findings_open_by_kind{{kind=\"{kind}\"}}"),
    )
}

async fn pay(s: &TestService, reference: &str) -> String {
    let answer = send(s.pay(
        &format!("{reference}-pay"),
        &body(reference, "15.00", "tok_ok"),
    ))
    .await;
    assert_eq!(answer.status, 201, "{}", answer.json());
    answer.json()["id"].as_str().unwrap().to_owned()
}

/// The findings by kind and the events due follow the store's rows: a
/// finding recorded shows under its kind (the others at 0, the total
/// beside); a payment's event for a shop without a webhook endpoint goes
/// nowhere (no delivery owed) until the operator sets one, then it is due
/// and ages; a disabled endpoint's delivery is parked (undelivered, not due).
async fn the_store_gauges_follow_findings_and_events(backend: Backend) {
    let s = TestService::start(backend).await;
    let text = scrape(&s).await;
    for kind in FindingKind::ALL {
        assert_eq!(open_by_kind(&text, kind.as_str()), 0.0, "{text}");
    }
    assert_eq!(must(&text, "chargeonce_events_due"), 0.0);
    assert_eq!(must(&text, "chargeonce_events_due_oldest_age_seconds"), 0.0);

    let payment_id = pay(&s, "order-1").await;
    let shop = ShopId::new(SHOP).unwrap();
    s.store
        .record_findings(&[NewFinding {
            kind: FindingKind::DuplicateCharge,
            shop_id: shop.clone(),
            reference: Reference::new("order-1").unwrap(),
            payment_id: Some(PaymentId::parse(&payment_id).unwrap()),
            charge_ids: vec!["ch_1".into(), "ch_2".into()],
            amount: None,
            detail: "two charges".into(),
            refunded: Vec::new(),
        }])
        .await
        .unwrap();
    let text = scrape(&s).await;
    assert_eq!(open_by_kind(&text, "duplicate_charge"), 1.0, "{text}");
    assert_eq!(open_by_kind(&text, "orphan_charge"), 0.0);
    assert_eq!(must(&text, "chargeonce_findings_open"), 1.0);
    // Nowhere: the shop has no webhook endpoint.
    assert_eq!(must(&text, "chargeonce_events_undelivered"), 0.0);
    assert_eq!(must(&text, "chargeonce_events_due"), 0.0);

    let endpoint = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_gauges"),
    };
    assert!(s.store.set_webhook(&shop, Some(&endpoint)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let text = scrape(&s).await;
    assert_eq!(must(&text, "chargeonce_events_due"), 1.0, "{text}");
    let age = must(&text, "chargeonce_events_due_oldest_age_seconds");
    assert!((1.0..60.0).contains(&age), "due for {age} s");

    // Its endpoint disabled: parked, undelivered but not due.
    let endpoints = s.store.endpoints(&shop).await.unwrap();
    let off = EndpointUpdate {
        enabled: Some(false),
        ..EndpointUpdate::default()
    };
    s.store
        .update_endpoint(&shop, &endpoints[0].id, &off)
        .await
        .unwrap()
        .unwrap();
    let text = scrape(&s).await;
    assert_eq!(must(&text, "chargeonce_events_undelivered"), 1.0, "{text}");
    assert_eq!(must(&text, "chargeonce_events_due"), 0.0, "{text}");
}

/// Each store exports its own pressure gauges and not the other's: the
/// SQLite writer's queue (its limit is `--sqlite-queue`), or the PostgreSQL
/// pool (its maximum, connections by state, the acquire waits so far).
async fn each_store_exports_its_own_pressure(backend: Backend) {
    let s = TestService::builder(backend)
        .pool(PoolConfig {
            max_connections: 7,
            write_queue: 123,
            ..PoolConfig::default()
        })
        .start()
        .await;
    pay(&s, "order-1").await;
    let text = scrape(&s).await;
    match backend {
        Backend::Sqlite => {
            assert_eq!(must(&text, "chargeonce_sqlite_write_queue_limit"), 123.0);
            assert_eq!(must(&text, "chargeonce_sqlite_write_queue_depth"), 0.0);
            assert!(!text.contains("chargeonce_pg_pool"), "{text}");
        }
        Backend::Postgres => {
            assert!(!text.contains("chargeonce_sqlite_write_queue"), "{text}");
            assert_eq!(must(&text, "chargeonce_pg_pool_max_connections"), 7.0);
            let idle = must(&text, "chargeonce_pg_pool_connections{state=\"idle\"}");
            let in_use = must(&text, "chargeonce_pg_pool_connections{state=\"in_use\"}");
            assert!(idle + in_use >= 1.0 && idle + in_use <= 7.0, "{text}");
            assert!(
                must(&text, "chargeonce_pg_pool_acquire_wait_seconds_count") >= 1.0,
                "{text}"
            );
            assert!(
                text.contains("chargeonce_pg_pool_acquire_wait_seconds_bucket{le=\"+Inf\"}"),
                "{text}"
            );
            assert!(text.contains("# TYPE chargeonce_pg_pool_acquire_wait_seconds histogram"));
        }
    }
}

on_both_stores!(
    the_store_gauges_follow_findings_and_events,
    each_store_exports_its_own_pressure,
);

/// Connections taken from the store's pool count as `in_use` until they go
/// back; the idle ones and the in-use ones never exceed the maximum.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pg_pool_connections_held_count_as_in_use() {
    let s = TestService::builder(Backend::Postgres)
        .pool(PoolConfig {
            max_connections: 5,
            ..PoolConfig::default()
        })
        .start()
        .await;
    let pool = s.pg().unwrap().pool().clone();
    let held = [
        pool.acquire().await.unwrap(),
        pool.acquire().await.unwrap(),
        pool.acquire().await.unwrap(),
    ];
    let text = scrape(&s).await;
    let in_use = must(&text, "chargeonce_pg_pool_connections{state=\"in_use\"}");
    let idle = must(&text, "chargeonce_pg_pool_connections{state=\"idle\"}");
    // The three held, and the scrape's own statement's may still count.
    assert!(in_use >= 3.0, "{text}");
    assert!(in_use + idle <= 5.0, "{text}");
    assert_eq!(must(&text, "chargeonce_pg_pool_max_connections"), 5.0);
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = scrape(&s).await;
        let in_use = must(&text, "chargeonce_pg_pool_connections{state=\"in_use\"}");
        if in_use <= 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "still {in_use} in use:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// While another connection holds the SQLite file's write lock, the writer
/// waits on it (its busy timeout is 5 s) and the payments sent meanwhile
/// queue behind it: the depth shows them; once the lock goes they are
/// written and the depth is 0 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_queue_depth_shows_writes_waiting_behind_a_lock() {
    use sqlx::Connection as _;
    let s = TestService::start(Backend::Sqlite).await;
    let text = scrape(&s).await;
    assert_eq!(must(&text, "chargeonce_sqlite_write_queue_depth"), 0.0);
    assert_eq!(
        must(&text, "chargeonce_sqlite_write_queue_limit"),
        chargeonce_sqlite_default_queue()
    );

    let mut locker = sqlx::SqliteConnection::connect(s.db_url()).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();
    // The first payment's claim takes the writer into the lock's wait; the
    // ones sent after it queue.
    let first = tokio::spawn({
        let request = s.pay("locked-0", &body("locked-0", "15.00", "tok_ok"));
        async move { send(request).await.status }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let queued: Vec<_> = (1..=3)
        .map(|n| {
            let reference = format!("locked-{n}");
            let request = s.pay(&reference, &body(&reference, "15.00", "tok_ok"));
            tokio::spawn(async move { send(request).await.status })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(3);
    let depth = loop {
        let text = scrape(&s).await;
        let depth = must(&text, "chargeonce_sqlite_write_queue_depth");
        if depth >= 1.0 || Instant::now() >= deadline {
            break depth;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    locker.close().await.unwrap();
    assert!(depth >= 1.0, "no write seen waiting behind the lock");
    assert_eq!(first.await.unwrap(), 201);
    for payment in queued {
        assert_eq!(payment.await.unwrap(), 201);
    }
    let text = scrape(&s).await;
    assert_eq!(must(&text, "chargeonce_sqlite_write_queue_depth"), 0.0);
}

/// The default `--sqlite-queue`.
fn chargeonce_sqlite_default_queue() -> f64 {
    PoolConfig::default().write_queue as f64
}
