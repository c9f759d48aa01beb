//! A client that hangs up mid-request does not cut the payment short: it runs
//! to a stored end in the background, and a retry with the same key gets the
//! stored answer.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_testkit::TestDb;
use common::{Server, ServerConfig};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_hangs_up() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let server = Server::start(ServerConfig::new("S").sim_slow("4s"), db.url(), &ledger).await;
    let client = common::client();
    let key = common::new_key("hangup");
    let reference = "order-hangup-1";
    let body = common::payment_body(reference, "tok_slow");

    // The client gives up after 300 ms and drops the connection.
    let hasty = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let sent_at = Instant::now();
    let gave_up = common::try_pay(&hasty, &server.base, &key, &body).await;
    let error = gave_up.expect_err("the 4 s acquirer cannot answer within 300 ms");
    assert!(
        error.is_timeout(),
        "expected a client timeout, got {error:?}"
    );
    drop(hasty);

    // The payment still runs on the server: a retry now is told to wait.
    tokio::time::sleep_until(sent_at + Duration::from_millis(800)).await;
    common::pay(&client, &server.base, &key, &body)
        .await
        .assert_in_progress();

    // After the 4 s acquirer call, the stored response is replayed. (The
    // acquirer is that slow so that the retry above, sent at +800 ms, is
    // still inside it on a loaded machine.)
    tokio::time::sleep_until(sent_at + Duration::from_secs(5)).await;
    let retry = common::eventually("the stored answer", Duration::from_secs(5), || {
        let (client, base, key, body) = (
            client.clone(),
            server.base.clone(),
            key.clone(),
            body.clone(),
        );
        async move {
            let answer = common::pay(&client, &base, &key, &body).await;
            (answer.status != 409).then_some(answer)
        }
    })
    .await;
    assert_eq!(retry.status, 201, "{}", retry.text());
    assert!(
        retry.is_replay(),
        "the payment finished without its client, so this is a replay of the stored 201"
    );
    assert_eq!(retry.payment_status(), "succeeded", "{}", retry.text());

    let again = common::pay(&client, &server.base, &key, &body).await;
    again.assert_replay_of(&retry);

    let ledger = common::ledger(&client, &server.operator).await;
    assert_eq!(
        common::charges(&ledger).len(),
        1,
        "one charge in all: {ledger:#}"
    );
    common::assert_one_charge_of(&ledger, reference, &retry.json());
}

/// A clean stop (SIGTERM) waits for payments in flight, even one whose client
/// already hung up: it ends finished, not half-way behind a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_lets_payments_in_flight_finish() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let mut server = Server::start(ServerConfig::new("S").sim_slow("4s"), db.url(), &ledger).await;
    let key = common::new_key("sigterm");
    let body = common::payment_body("order-sigterm-1", "tok_slow");
    let hasty = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let gave_up = common::try_pay(&hasty, &server.base, &key, &body).await;
    assert!(
        gave_up.is_err(),
        "the 4 s acquirer cannot answer within 300 ms"
    );
    let (point, status) = common::pg_key_state(db.url(), &key).await.unwrap();
    assert_eq!(
        (point.as_str(), status.as_str()),
        ("payment_created", "pending")
    );

    let stopped_at = Instant::now();
    let exit = server.terminate();
    assert!(exit.success(), "a clean stop exits 0, got {exit:?}");
    assert!(
        stopped_at.elapsed() >= Duration::from_millis(1000),
        "the process waited for the payment in flight"
    );
    let (point, status) = common::pg_key_state(db.url(), &key).await.unwrap();
    assert_eq!((point.as_str(), status.as_str()), ("finished", "succeeded"));
}
