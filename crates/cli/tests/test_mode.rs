//! Test mode end to end (issue 35), with the real binary: a test key made
//! with `chargeonce shops keys add --mode test`, used against two `chargeonce
//! serve` processes on one PostgreSQL database and one live simulator
//! ledger. The same idempotency key and order reference in test and live
//! mode make two payments; the live acquirer's ledger never holds the test
//! one (it went to test mode's simulator, whose ledger holds it alone); each
//! instance answers each mode's repeat with that mode's payment. With
//! `--test-acquirer-url`, test mode's money goes to that `chargeonce
//! acquirer` (one simulator every instance shares) and live mode's stays
//! where it was; the live acquirer's URL is refused as test mode's.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
mod net;

use chargeonce_testkit::TestDb;
use common::{SECRET, SHOP, Server, ServerConfig};
use serde_json::Value;

/// Makes a test key of the shop with the CLI; its secret.
async fn test_key(db: &TestDb) -> String {
    let out = tokio::process::Command::new(common::bin())
        .args(["shops", "keys", "add", "--mode", "test", "--scope", "full"])
        .args(["--shop", SHOP, "--database-url", db.url()])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("(test, full) made"), "{stdout}");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("secret key (shown once, store it now): "))
        .unwrap()
        .to_owned()
}

/// `POST /v1/payments` of order `reference` with `secret` and `key`.
async fn pay(server: &Server, secret: &str, key: &str, reference: &str) -> (u16, Value) {
    let response = common::client()
        .post(server.url("/v1/payments"))
        .basic_auth(SHOP, Some(secret))
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(common::payment_body(reference, "tok_ok"))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// The charges of order `reference` in the simulator ledger the operator
/// listener serves under `ledger` (`/sim` for live mode, `/sim-test`).
async fn charges(server: &Server, ledger: &str, reference: &str) -> Vec<Value> {
    let url = server.operator_url(&format!("{ledger}/ledger"));
    let body = common::get_json(&common::client(), &url).await;
    common::charges_for(&body, reference)
}

/// The charges of order `reference` of namespace `shop` at the `chargeonce
/// acquirer` at `base` (`GET /v1/charges`).
async fn acquirer_charges(base: &str, shop: &str, reference: &str) -> Vec<Value> {
    let url = format!("{base}/v1/charges?shop_id={shop}&reference={reference}");
    let body = common::get_json(&common::client(), &url).await;
    body["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_test_payment_never_reaches_the_live_acquirer() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let (a, b) = tokio::join!(
        Server::start(ServerConfig::new("A"), db.url(), &ledger),
        Server::start(ServerConfig::new("B"), db.url(), &ledger),
    );
    let test = test_key(&db).await;
    assert!(test.starts_with("sk_test_"));

    let (status, live) = pay(&a, SECRET, "same-key", "order-tm").await;
    assert_eq!(status, 201, "{live}");
    let (status, tested) = pay(&b, &test, "same-key", "order-tm").await;
    assert_eq!(status, 201, "{tested}");
    assert_ne!(live["id"], tested["id"]);
    assert_eq!(
        (&live["livemode"], &tested["livemode"]),
        (&Value::Bool(true), &Value::Bool(false))
    );

    // Each mode's repeat, on the other instance: its own payment.
    for (server, secret, expected) in [(&b, SECRET, &live), (&a, test.as_str(), &tested)] {
        let (status, again) = pay(server, secret, "same-key", "order-tm").await;
        assert_eq!(status, 201, "{again}");
        assert_eq!(again["id"], expected["id"]);
    }

    // The live ledger (shared by both instances) holds the live charge
    // only; the test payment is in test mode's simulator alone.
    let live_charges = charges(&a, "/sim", "order-tm").await;
    assert_eq!(live_charges.len(), 1, "{live_charges:?}");
    assert_eq!(live_charges[0]["payment_id"], live["id"]);
    let test_charges = charges(&b, "/sim-test", "order-tm").await;
    assert_eq!(test_charges.len(), 1, "{test_charges:?}");
    assert_eq!(test_charges[0]["payment_id"], tested["id"]);
    assert_eq!(test_charges[0]["shop_id"], format!("{SHOP}.test"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_mode_can_use_a_shared_simulator_over_http() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let test_acquirer = net::acquirer(&db.dir(), "127.0.0.1:0", &[]).await;
    let ledger = common::ledger_path(&db.dir());
    // The flags live as long as the test.
    let url: &'static str = Box::leak(test_acquirer.base.clone().into_boxed_str());
    let server = Server::start(
        ServerConfig::new("A").args(&["--test-acquirer-url", url]),
        db.url(),
        &ledger,
    )
    .await;
    let test = test_key(&db).await;
    let (status, tested) = pay(&server, &test, "shared-key", "order-shared").await;
    assert_eq!(status, 201, "{tested}");
    let (status, live) = pay(&server, SECRET, "shared-key", "order-shared").await;
    assert_eq!(status, 201, "{live}");

    // Test mode's charge is at the shared simulator, under the test mode's
    // shop id; live mode's is in the embedded simulator alone.
    let found =
        acquirer_charges(&test_acquirer.base, &format!("{SHOP}.test"), "order-shared").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["payment_id"], tested["id"]);
    let none = acquirer_charges(&test_acquirer.base, SHOP, "order-shared").await;
    assert!(none.is_empty(), "{none:?}");
    let live_charges = charges(&server, "/sim", "order-shared").await;
    assert_eq!(live_charges.len(), 1, "{live_charges:?}");
    assert_eq!(live_charges[0]["payment_id"], live["id"]);

    // Live mode's acquirer can never be test mode's.
    let refused = tokio::process::Command::new(common::bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--operator-listen",
            "off",
        ])
        .args(["--database-url", db.url(), "--no-demo-shop"])
        .args(["--acquirer-url", &test_acquirer.base])
        .args(["--test-acquirer-url", &format!("{}/", test_acquirer.base)])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("must not be live mode's"), "{stderr}");
}
