//! A server process SIGKILLed in the middle of a payment: once its lease runs
//! out, another process on the same database takes the key over and finishes
//! the payment, and the acquirer's ledger still holds exactly one charge.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_testkit::TestDb;
use common::{Server, ServerConfig};
use sqlx::Connection as _;
use tokio::time::Instant;

/// The lease both processes use.
const LEASE: Duration = Duration::from_secs(2);

/// Long enough for the dead process's last lease renewal to run out (it
/// renews every third of the lease, to `now() + lease`).
const LEASE_EXPIRY_WAIT: Duration = Duration::from_millis(2500);

/// A (slow acquirer) and B, on one database and one ledger, both with a 2 s lease.
async fn a_and_b(db: &TestDb) -> (Server, Server) {
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    tokio::join!(
        Server::start(
            ServerConfig::new("A").lease("2s").sim_slow("5s"),
            db.url(),
            &ledger
        ),
        Server::start(ServerConfig::new("B").lease("2s"), db.url(), &ledger),
    )
}

/// After A dies, B answers as the contract says: 409 while A's lease lives,
/// then (after a take-over) 201 succeeded, then byte-identical replays; and
/// the ledger holds the one charge of that payment. Returns the 201's payment.
async fn b_finishes_the_payment(
    db: &TestDb,
    b: &Server,
    killed_at: Instant,
    key: &str,
    reference: &str,
    body: &str,
) -> serde_json::Value {
    let client = common::client();
    // Right after the kill, A's lease is still live: B must not take over yet.
    let early = common::pay(&client, &b.base, key, body).await;
    assert!(
        killed_at.elapsed() < LEASE,
        "the early retry came too late to prove anything ({:?})",
        killed_at.elapsed()
    );
    early.assert_in_progress();

    tokio::time::sleep_until(killed_at + LEASE_EXPIRY_WAIT).await;
    let retry = common::pay(&client, &b.base, key, body).await;
    assert_eq!(
        retry.status,
        201,
        "the take-over finishes the payment: {}",
        retry.text()
    );
    assert_eq!(retry.payment_status(), "succeeded", "{}", retry.text());
    let payment = retry.json();
    assert_eq!(payment["reference"], reference);

    let ledger = common::ledger(&client, &b.operator).await;
    assert_eq!(
        common::charges(&ledger).len(),
        1,
        "one charge in all: {ledger:#}"
    );
    let charge = common::assert_one_charge_of(&ledger, reference, &payment);
    let (status, acquirer_key) = common::pg_payment(db.url(), &retry.payment_id())
        .await
        .expect("the payment is stored");
    assert_eq!(status, "succeeded");
    assert_eq!(charge["acquirer_key"], acquirer_key.as_str());

    let again = common::pay(&client, &b.base, key, body).await;
    again.assert_replay_of(&retry);

    let stored = common::get_payment(&client, &b.base, &retry.payment_id()).await;
    assert_eq!(stored.status, 200);
    assert_eq!(stored.json()["status"], "succeeded");
    payment
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_between_phases() {
    let db = TestDb::postgres().await;
    let (mut a, b) = a_and_b(&db).await;
    let client = common::client();
    let key = common::new_key("crash");
    let reference = "order-crash-1";
    let body = common::payment_body(reference, "tok_slow");

    // A takes the payment; its acquirer commits the charge, then sleeps 5 s.
    let in_flight = {
        let (client, base, key, body) = (client.clone(), a.base.clone(), key.clone(), body.clone());
        tokio::spawn(async move { common::try_pay(&client, &base, &key, &body).await })
    };
    let charge = common::eventually("the charge in the ledger", Duration::from_secs(10), || {
        let (client, base) = (client.clone(), b.operator.clone());
        async move { common::charges_for(&common::ledger(&client, &base).await, reference).pop() }
    })
    .await;
    // Between the acquirer's commit and our phase 3: the key is unfinished.
    assert!(
        !in_flight.is_finished(),
        "A must still be waiting on its slow acquirer"
    );
    let (point, status) = common::pg_key_state(db.url(), &key)
        .await
        .expect("A claimed the key");
    assert_eq!(
        (point.as_str(), status.as_str()),
        ("payment_created", "pending")
    );

    a.kill();
    let killed_at = Instant::now();
    assert!(!a.is_running());
    let lost = in_flight.await.expect("request task");
    assert!(
        lost.is_err(),
        "A's client must lose its connection, got {lost:?}"
    );

    let payment = b_finishes_the_payment(&db, &b, killed_at, &key, reference, &body).await;
    // B finished A's payment: the same payment and the same charge, not new ones.
    assert_eq!(payment["id"], charge["payment_id"]);
    assert_eq!(payment["provider_payment_id"], charge["id"]);
}

/// A dies after claiming the key but before the acquirer recorded anything:
/// the test holds the ledger's write lock (SQLite `BEGIN IMMEDIATE`), so A's
/// charge blocks inside the acquirer; A is killed there and the lock released.
/// B then takes over and charges, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_before_the_acquirer_recorded_the_charge() {
    let db = TestDb::postgres().await;
    let (mut a, b) = a_and_b(&db).await;
    let client = common::client();
    let key = common::new_key("crash-early");
    let reference = "order-crash-2";
    let body = common::payment_body(reference, "tok_ok");

    // The servers created the ledger file; hold its write lock.
    let ledger_url = format!("sqlite://{}", common::ledger_path(&db.dir()).display());
    let mut lock = sqlx::SqliteConnection::connect(&ledger_url)
        .await
        .expect("open the ledger");
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut lock)
        .await
        .expect("take the ledger write lock");

    let in_flight = {
        let (client, base, key, body) = (client.clone(), a.base.clone(), key.clone(), body.clone());
        tokio::spawn(async move { common::try_pay(&client, &base, &key, &body).await })
    };
    // Phase 1 committed: the key and the pending payment exist.
    let (point, status) = common::eventually("A's claim", Duration::from_secs(10), || {
        common::pg_key_state(db.url(), &key)
    })
    .await;
    assert_eq!(
        (point.as_str(), status.as_str()),
        ("payment_created", "pending")
    );
    // Give A a moment to reach the (blocked) acquirer call.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !in_flight.is_finished(),
        "A must be stuck in the acquirer call"
    );
    assert!(
        common::charges(&common::ledger(&client, &b.operator).await).is_empty(),
        "nothing may be charged yet"
    );

    a.kill();
    let killed_at = Instant::now();
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut lock)
        .await
        .expect("release the ledger lock");
    lock.close().await.expect("close the ledger connection");
    let lost = in_flight.await.expect("request task");
    assert!(
        lost.is_err(),
        "A's client must lose its connection, got {lost:?}"
    );
    assert!(
        common::charges(&common::ledger(&client, &b.operator).await).is_empty(),
        "A died before charging"
    );

    let payment = b_finishes_the_payment(&db, &b, killed_at, &key, reference, &body).await;
    let id = payment["id"].as_str().unwrap();
    assert_eq!(
        common::pg_key_state(db.url(), &key)
            .await
            .map(|(point, _)| point)
            .as_deref(),
        Some("finished")
    );
    assert!(id.starts_with("pay_"), "payment id {id}");
}
