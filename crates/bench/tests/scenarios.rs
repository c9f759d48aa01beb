//! Short storm and mixed runs against an in-process server on SQLite: the
//! exactly-once checks must pass (and the ledger must agree).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use chargeonce_acquirer::{Simulator, SimulatorConfig};
use chargeonce_bench::{Config, Scenario, Target};
use chargeonce_core::{Engine, EngineConfig, ShopId, ShopSecret, Shops};
use chargeonce_server::{AppState, HttpRender};
use chargeonce_store::{PoolConfig, SqliteStore};
use chargeonce_testkit::TestDb;

const SHOP: &str = "bench-shop";
const SECRET: &str = "sk_bench_0123456789";

/// A server on a real socket (SQLite store, simulator, `/sim/ledger`, ceiling routes).
async fn start() -> (String, TestDb) {
    let db = TestDb::sqlite();
    let store = Arc::new(
        SqliteStore::connect(db.url(), &PoolConfig::default())
            .await
            .unwrap(),
    );
    store
        .add_shop(
            &ShopId::new(SHOP).unwrap(),
            &ShopSecret::new(SECRET).unwrap().hash(),
        )
        .await
        .unwrap();
    let sim = Arc::new(
        Simulator::open(
            &db.dir().join("ledger.db"),
            SimulatorConfig {
                slow: Duration::from_secs(1),
            },
        )
        .await
        .unwrap(),
    );
    let engine = Arc::new(
        Engine::new(
            store,
            sim.clone(),
            Arc::new(HttpRender),
            EngineConfig::default(),
        )
        .unwrap(),
    );
    // One shop at full speed: the per-shop rate limit off, as bench/run does.
    let state = AppState::new(engine).with_rate_limit(chargeonce_server::limits::RateLimit::OFF);
    let app = chargeonce_server::router(state.clone())
        .nest("/sim", chargeonce_acquirer::router(sim))
        .merge(chargeonce_server::bench_ceiling::router(state));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(chargeonce_server::serve(
        listener,
        app,
        std::future::pending(),
    ));
    (base, db)
}

fn config(scenario: Scenario, connections: usize) -> Config {
    Config {
        scenario,
        connections,
        duration: Duration::from_millis(1500),
        ledger_check: true,
        progress: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn storm_executes_each_key_once() {
    let (base, _db) = start().await;
    let target = Target::new(&base, SHOP, SECRET, 50).unwrap();
    let report = chargeonce_bench::run(&target, &config(Scenario::Storm, 50))
        .await
        .unwrap();
    assert!(report.passed, "{}", report.to_text());
    let storm = report.storm.clone().unwrap();
    assert!(storm.keys >= 1, "{}", report.to_text());
    assert_eq!(storm.executions, storm.keys, "{}", report.to_text());
    assert_eq!(storm.max_executions_per_key, 1);
    assert_eq!(storm.requests, storm.keys * 50);
    let ledger = report.ledger.clone().unwrap();
    // The unmeasured warm-up wave is charged too.
    assert_eq!(ledger.charges, storm.keys + 1, "{}", report.to_text());
    assert_eq!((ledger.charged_twice, ledger.missing), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mixed_replays_and_refuses_mismatches() {
    let (base, _db) = start().await;
    let target = Target::new(&base, SHOP, SECRET, 8).unwrap();
    let report = chargeonce_bench::run(&target, &config(Scenario::Mixed, 8))
        .await
        .unwrap();
    assert!(report.passed, "{}", report.to_text());
    assert!(report.executions > 0);
    assert!(report.replayed > 0, "{}", report.to_text());
    assert!(
        report.statuses.get("422").copied().unwrap_or(0) > 0,
        "{}",
        report.to_text()
    );
    let ledger = report.ledger.clone().unwrap();
    assert_eq!((ledger.charged_twice, ledger.missing), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ceiling_and_replay_pass() {
    let (base, _db) = start().await;
    let target = Target::new(&base, SHOP, SECRET, 4).unwrap();
    for scenario in [Scenario::Ceiling, Scenario::Noop, Scenario::Replay] {
        let mut config = config(scenario, 4);
        config.duration = Duration::from_millis(500);
        let report = chargeonce_bench::run(&target, &config).await.unwrap();
        assert!(report.passed, "{}", report.to_text());
        assert!(report.requests > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wrong_credentials_fail_the_run() {
    let (base, _db) = start().await;
    let target = Target::new(&base, SHOP, "wrong", 2).unwrap();
    let mut config = config(Scenario::Fresh, 2);
    config.duration = Duration::from_millis(300);
    let report = chargeonce_bench::run(&target, &config).await.unwrap();
    assert!(!report.passed);
    assert!(report.violations > 0);
}
