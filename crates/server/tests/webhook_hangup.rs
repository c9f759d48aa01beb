//! An acquirer that hangs up on its webhook delivery while the service's
//! store write is still running does not cut that write: the event is
//! recorded and the payment settled all the same.
//!
//! Inline in the handler, the write was dropped with it: cut before its
//! `COMMIT`, it was rolled back (the acquirer would send it again), cut
//! after, it was committed, and sqlx, not knowing that, sent a `ROLLBACK`
//! outside any transaction, PostgreSQL's "there is no transaction in
//! progress" of issue 39. PostgreSQL only: on SQLite the writer thread owns
//! the transaction, and a cut caller only drops its answer channel.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_core::webhook::{SIGNATURE_HEADER, WebhookSecret, sign};
use common::{Backend, SHOP, TestService, WEBHOOK_SECRET, body, send};
use serde_json::json;
use sqlx::Connection as _;
use time::OffsetDateTime;
use tokio::io::AsyncWriteExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_webhook_hung_up_on_during_its_store_write_is_recorded_all_the_same() {
    let s = TestService::builder(Backend::Postgres)
        .acquirer_timeout(Duration::from_millis(200))
        .slow(Duration::from_millis(600))
        .start()
        .await;
    // A payment left pending: the acquirer's answer came too late.
    let pending = send(s.pay("order-cut-pay", &body("order-cut", "15.00", "tok_slow"))).await;
    assert_eq!(pending.status, 202);
    let payment = pending.json();
    let payment_id = payment["id"].as_str().unwrap().to_owned();
    let charge = s.charges("order-cut").await.remove(0);

    // The payment's row is locked, so the webhook's write waits on it.
    let mut locker = sqlx::PgConnection::connect(s.db_url()).await.unwrap();
    let mut lock = locker.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM payments WHERE id = $1 FOR UPDATE")
        .bind(&payment_id)
        .execute(&mut *lock)
        .await
        .unwrap();

    let event = json!({
        "id": "evt_cut", "type": "payment.succeeded",
        "created": OffsetDateTime::now_utc().unix_timestamp(),
        "data": {"charge_id": charge.id, "acquirer_key": charge.acquirer_key.as_str(),
                 "shop_id": SHOP, "payment_id": payment_id, "reference": "order-cut",
                 "amount": {"value": "15.00", "currency": "RUB"}, "decline_code": null}
    })
    .to_string();
    let signature = sign(
        &WebhookSecret::new(WEBHOOK_SECRET),
        OffsetDateTime::now_utc().unix_timestamp(),
        event.as_bytes(),
    );
    let request = format!(
        "POST /v1/webhooks/acquirer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         {SIGNATURE_HEADER}: {signature}\r\nContent-Length: {}\r\n\r\n{event}",
        event.len()
    );
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();

    // The write is inside PostgreSQL, waiting for the row: hang up.
    let mut watcher = sqlx::PgConnection::connect(s.db_url()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = 'chargeonce' AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the webhook's write never waited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(stream);
    // Time for the server to see the hang-up and drop the handler: there
    // is no event to wait on for that from outside.
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.commit().await.unwrap();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status: String = sqlx::query_scalar("SELECT status FROM payments WHERE id = $1")
            .bind(&payment_id)
            .fetch_one(&mut watcher)
            .await
            .unwrap();
        if status == "succeeded" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the event hung up on was lost: the payment is {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recorded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM acquirer_events WHERE event_id = 'evt_cut'")
            .fetch_one(&mut watcher)
            .await
            .unwrap();
    assert_eq!(recorded, 1, "the event is recorded once");
}
