//! The acquirer commits the charge but its answer is lost: the service answers
//! 202 pending, and a retry with the same key resolves it to the one charge.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_testkit::TestDb;
use common::{Server, ServerConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timeout_after_commit_is_resolved_by_retry() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let server = Server::start(ServerConfig::new("S"), db.url(), &ledger).await;
    let client = common::client();
    let key = common::new_key("timeout");
    let reference = "order-timeout-1";
    let body = common::payment_body(reference, "tok_timeout");

    // The charge is committed at the acquirer, but its answer never arrives.
    let pending = common::pay(&client, &server.base, &key, &body).await;
    assert_eq!(pending.status, 202, "{}", pending.text());
    assert!(!pending.is_replay());
    assert_eq!(pending.header("content-type"), Some("application/json"));
    assert_eq!(pending.payment_status(), "pending");
    let id = pending.payment_id();
    assert_eq!(
        pending.json()["provider_payment_id"],
        serde_json::Value::Null
    );
    assert!(
        pending.header("retry-after").is_some(),
        "202 must say when to retry"
    );
    assert_eq!(
        pending.header("location"),
        Some(format!("/v1/payments/{id}").as_str())
    );
    let (status, acquirer_key) = common::pg_payment(db.url(), &id)
        .await
        .expect("payment stored");
    assert_eq!(status, "pending");

    // The acquirer did charge.
    let charges = common::charges(&common::ledger(&client, &server.operator).await);
    assert_eq!(charges.len(), 1, "{charges:#?}");
    assert_eq!(charges[0]["payment_id"], id.as_str());

    // A retry with the same key resumes the same acquirer call and learns the outcome.
    let retry = common::pay(&client, &server.base, &key, &body).await;
    assert_eq!(retry.status, 201, "{}", retry.text());
    assert_eq!(retry.payment_status(), "succeeded", "{}", retry.text());
    assert_eq!(retry.payment_id(), id, "the same payment, not a new one");

    let ledger = common::ledger(&client, &server.operator).await;
    assert_eq!(
        common::charges(&ledger).len(),
        1,
        "still one charge: {ledger:#}"
    );
    let charge = common::assert_one_charge_of(&ledger, reference, &retry.json());
    assert_eq!(
        charge["acquirer_key"],
        acquirer_key.as_str(),
        "the payment's own acquirer key"
    );
    let (status, _) = common::pg_payment(db.url(), &id).await.unwrap();
    assert_eq!(status, "succeeded");

    // From now on the final answer is replayed.
    let again = common::pay(&client, &server.base, &key, &body).await;
    again.assert_replay_of(&retry);
    let stored = common::get_payment(&client, &server.base, &id).await;
    assert_eq!(stored.status, 200);
    assert_eq!(stored.json()["status"], "succeeded");
}
