//! Short storm and mixed runs against an in-process server on SQLite: the
//! exactly-once checks must pass (and the ledger must agree).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chargeonce_bench::{Config, Scenario, Target};
use chargeonce_testkit::{Backend, SECRET, SHOP, TestService};

/// The test kit's service on SQLite, with the simulator's `/sim/ledger` and
/// the ceiling routes, and a `tok_slow` of 1 s.
async fn start() -> TestService {
    TestService::builder(Backend::Sqlite)
        .slow(Duration::from_secs(1))
        // One shop at full speed: the per-shop rate limit off, as bench/run does.
        .state(|state| state.with_rate_limit(chargeonce_server::limits::RateLimit::OFF))
        .sim_routes()
        .routes(chargeonce_server::bench_ceiling::router)
        .start()
        .await
}

fn config(scenario: Scenario, connections: usize) -> Config {
    Config {
        scenario,
        connections,
        duration: Duration::from_millis(1500),
        ledger_check: true,
        progress: false,
        flood: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn storm_executes_each_key_once() {
    let service = start().await;
    let target = Target::new(&service.base, SHOP, SECRET, 50)
        .unwrap()
        .with_ledger_base(Some(&service.operator_base));
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
    let service = start().await;
    let target = Target::new(&service.base, SHOP, SECRET, 8)
        .unwrap()
        .with_ledger_base(Some(&service.operator_base));
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
    let service = start().await;
    let target = Target::new(&service.base, SHOP, SECRET, 4)
        .unwrap()
        .with_ledger_base(Some(&service.operator_base));
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
    let service = start().await;
    let target = Target::new(&service.base, SHOP, "wrong", 2).unwrap();
    let mut config = config(Scenario::Fresh, 2);
    config.duration = Duration::from_millis(300);
    let report = chargeonce_bench::run(&target, &config).await.unwrap();
    assert!(!report.passed);
    assert!(report.violations > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn authorize_capture_and_refund_execute_both_requests_of_a_turn() {
    let service = start().await;
    let target = Target::new(&service.base, SHOP, SECRET, 4)
        .unwrap()
        .with_ledger_base(Some(&service.operator_base));
    for scenario in [Scenario::AuthorizeCapture, Scenario::Refund] {
        let mut config = config(scenario, 4);
        config.duration = Duration::from_millis(500);
        let report = chargeonce_bench::run(&target, &config).await.unwrap();
        assert!(report.passed, "{}", report.to_text());
        assert!(report.executions > 0, "{}", report.to_text());
        // Two answers a turn, every one a first execution (201).
        assert_eq!(
            report.statuses.get("201").copied().unwrap_or(0),
            report.requests,
            "{}",
            report.to_text()
        );
        assert!(
            report.requests >= 2 * report.executions,
            "{}",
            report.to_text()
        );
        let ledger = report.ledger.clone().unwrap();
        assert_eq!((ledger.charged_twice, ledger.missing), (0, 0));
    }
}
