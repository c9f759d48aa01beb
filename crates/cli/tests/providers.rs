//! Providers that break their promises, over real HTTP: one that ignores
//! keys and records a charge (and a refund) after our timeout, one that
//! refuses requests for good (4xx), and one that cannot be reached, whose
//! 503 must stay true afterwards.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
mod net;

use std::time::Duration;

use chargeonce_testkit::TestDb;
use serde_json::{Value, json};

/// `POST /v1/payments/{id}/refunds` under `key`.
async fn refund(
    client: &reqwest::Client,
    base: &str,
    payment: &str,
    key: &str,
    body: &Value,
) -> (u16, Value) {
    let response = client
        .post(format!("{base}/v1/payments/{payment}/refunds"))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The refunds the acquirer holds for one of our refunds.
async fn acquirer_refunds(acquirer: &net::Proc, charge: &str, refund_id: &str) -> Vec<Value> {
    let list: Value = reqwest::get(acquirer.url(&format!(
        "/v1/charges/{charge}/refunds?reference={refund_id}"
    )))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    list["data"].as_array().cloned().unwrap_or_default()
}

/// A provider without idempotency that records a charge only after our
/// timeout fired (it was still in flight there). A retry right away must not
/// look it up (it is not there yet) and send it again: the key is parked for
/// the settle window, the retry answers 202, and only after the window is the
/// charge looked up, found, and the payment finished with it. The same for a
/// partial refund of that payment: one refund at the acquirer, not two, and
/// never a failure that would free its reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_without_idempotency_that_records_late_charges_and_refunds_once() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    // tok_late: recorded 1.5 s after the request arrived, whoever still waits.
    let acquirer = net::acquirer(
        &db.dir(),
        "127.0.0.1:0",
        &["--no-idempotency", "--slow", "1500ms"],
    )
    .await;
    let service = net::service(
        "S",
        &db,
        &acquirer.base,
        &[
            "--acquirer-no-idempotency",
            "--acquirer-timeout",
            "500ms",
            "--acquirer-settle-window",
            "3s",
            "--no-completer",
            "--no-reconciler",
        ],
    )
    .await;
    let client = common::client();
    let key = common::new_key("late");
    let body = common::payment_body("order-late", "tok_late");

    let first = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(first.status, 202, "{}", first.text());
    assert!(
        net::ledger_rows(&acquirer).await.is_empty(),
        "not recorded yet"
    );
    let early = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(early.status, 202, "parked, not looked up: {}", early.text());
    assert_eq!(early.payment_id(), first.payment_id());
    let retry_after: u64 = early.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1, "the rest of the settle window");

    // The charge the first attempt started appears at the acquirer.
    common::eventually("the late charge", Duration::from_secs(10), || {
        let acquirer = &acquirer;
        async move { (!net::ledger_rows(acquirer).await.is_empty()).then_some(()) }
    })
    .await;
    let paid =
        common::pay_until_definite(&client, &service.base, &key, &body, Duration::from_secs(15))
            .await;
    assert_eq!(paid.status, 201, "{}", paid.text());
    // Give a second charge, had one been sent, the time to be recorded.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let rows = net::ledger_rows(&acquirer).await;
    assert_eq!(rows.len(), 1, "charged once: {rows:#?}");
    assert_eq!(paid.json()["provider_payment_id"], rows[0]["id"]);

    // A partial refund of it, recorded late as well.
    let payment = paid.payment_id();
    let charge = rows[0]["id"].as_str().unwrap().to_owned();
    let part = json!({"amount": {"value": "500.00", "currency": "RUB"}});
    let refund_key = common::new_key("late-refund");
    let (status, pending) = refund(&client, &service.base, &payment, &refund_key, &part).await;
    assert_eq!(status, 202, "{pending}");
    let refund_id = pending["id"].as_str().unwrap().to_owned();
    let (status, early) = refund(&client, &service.base, &payment, &refund_key, &part).await;
    assert_eq!(status, 202, "parked, not sent again: {early}");
    let (status, refunded) = common::eventually(
        "the refund after the settle window",
        Duration::from_secs(20),
        || {
            let (client, base, payment, key, part) =
                (&client, &service.base, &payment, &refund_key, &part);
            async move {
                let (status, body) = refund(client, base, payment, key, part).await;
                (status != 202).then_some((status, body))
            }
        },
    )
    .await;
    assert_eq!(status, 201, "{refunded}");
    assert_eq!(refunded["status"], "succeeded");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let made = acquirer_refunds(&acquirer, &charge, &refund_id).await;
    assert_eq!(made.len(), 1, "refunded once: {made:#?}");
    assert_eq!(refunded["provider_refund_id"], made[0]["id"]);
    let rows = net::ledger_rows(&acquirer).await;
    assert_eq!(rows[0]["refunded_minor"], 50_000, "500.00 went back, once");
    let payment = common::get_payment(&client, &service.base, &payment).await;
    assert_eq!(payment.json()["amount_refunded"]["value"], "500.00");
}

/// A provider that refuses a charge for good (HTTP 400): the payment ends
/// declined (`acquirer_rejected`), stored and replayed byte for byte, and
/// its order is free for the next attempt under another key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_charge_refused_for_good_ends_declined_and_frees_the_order() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let acquirer = net::acquirer(&db.dir(), "127.0.0.1:0", &["--reject-rate", "1"]).await;
    let service = net::service(
        "S",
        &db,
        &acquirer.base,
        &[
            "--completer-interval",
            "100ms",
            "--completer-idle",
            "100ms",
            "--no-reconciler",
        ],
    )
    .await;
    let client = common::client();
    let body = common::payment_body("order-rejected", "tok_ok");
    let first = common::pay(&client, &service.base, "order-rejected-pay", &body).await;
    assert_eq!(first.status, 402, "{}", first.text());
    let problem = first.json();
    assert_eq!(problem["code"], "payment_declined");
    assert_eq!(problem["payment"]["status"], "declined");
    assert_eq!(problem["payment"]["decline_code"], "acquirer_rejected");
    assert!(problem["payment"]["provider_payment_id"].is_null());
    let replay = common::pay(&client, &service.base, "order-rejected-pay", &body).await;
    replay.assert_replay_of(&first);

    // The completer finds nothing to resend: a rejected payment is final.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics = reqwest::get(service.operator_url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "chargeonce_acquirer_calls_total{mode=\"live\",call=\"charge\",outcome=\"refused\"} 1"
        ),
        "one call, never re-sent: {metrics}"
    );

    net::set_faults(&acquirer, json!({})).await;
    let second = common::pay(&client, &service.base, "order-rejected-pay-2", &body).await;
    assert_eq!(second.status, 201, "the order is free: {}", second.text());
    assert_ne!(
        second.payment_id(),
        first.json()["payment"]["id"].as_str().unwrap()
    );
    assert_eq!(net::ledger_rows(&acquirer).await.len(), 1);
    let (code, report) = net::reconcile(db.url(), &acquirer.base, &[]).await;
    assert_eq!(
        code, 0,
        "a rejected payment is no missing charge: {report:#}"
    );
}

/// The acquirer cannot be reached: the 503 says nothing was sent yet AND
/// that the payment will be sent, and both stay true: nobody retries, the
/// completer sends it once the acquirer is back (one charge), and the
/// client's later retry with the same key gets that payment.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_503_acquirer_unavailable_says_what_will_happen_and_it_happens() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let port = net::free_port();
    let acquirer_url = format!("http://127.0.0.1:{port}");
    let service = net::service(
        "S",
        &db,
        &acquirer_url,
        &[
            "--completer-interval",
            "200ms",
            "--completer-idle",
            "200ms",
            "--no-reconciler",
        ],
    )
    .await;
    let client = common::client();
    let key = common::new_key("unreachable");
    let body = common::payment_body("order-unreachable", "tok_ok");
    let refused = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(refused.header("retry-after").is_some());
    let problem = refused.json();
    assert_eq!(problem["code"], "acquirer_unavailable");
    assert_eq!(problem["will_be_sent"], true);
    assert_eq!(problem["payment"]["status"], "pending");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("nothing has been sent yet"), "{detail}");
    assert!(detail.contains("will be sent"), "{detail}");
    let payment_id = problem["payment"]["id"].as_str().unwrap().to_owned();

    let acquirer = net::acquirer(&db.dir(), &format!("127.0.0.1:{port}"), &[]).await;
    let row = common::eventually("the completer's charge", Duration::from_secs(20), || {
        let acquirer = &acquirer;
        async move { net::ledger_rows(acquirer).await.pop() }
    })
    .await;
    assert_eq!(row["payment_id"], payment_id.as_str());
    // The ledger row can be there before the completer has stored the
    // answer: until then a retry is told 409 `request_in_progress`, retry.
    let later = common::eventually("the completer's answer", Duration::from_secs(20), || {
        let (client, base, key, body) = (&client, &service.base, &key, &body);
        async move {
            let answer = common::pay(client, base, key, body).await;
            (answer.status != 409).then_some(answer)
        }
    })
    .await;
    assert_eq!(later.status, 201, "{}", later.text());
    assert_eq!(later.payment_id(), payment_id);
    assert_eq!(net::ledger_rows(&acquirer).await.len(), 1, "charged once");
}

/// A refusal of a *resent* request proves nothing about the attempt
/// resumed (the resend rule): a charge whose answer was lost, then refused
/// when sent again (and its look-up refused too), stays pending, never a
/// decline that frees the order, and nobody looks again before the settle
/// window has passed; then the look-up finds the first charge. A
/// refund refused when sent again is looked up and found, never a failure
/// that frees its reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_resend_is_never_taken_for_a_decline_or_a_failed_refund() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let acquirer = net::acquirer(&db.dir(), "127.0.0.1:0", &[]).await;
    let service = net::service(
        "S",
        &db,
        &acquirer.base,
        &[
            "--no-completer",
            "--no-reconciler",
            "--acquirer-timeout",
            "1s",
            "--acquirer-settle-window",
            "2s",
        ],
    )
    .await;
    let client = common::client();
    // tok_timeout: the first answer to the charge (and to its first refund) is lost.
    let key = common::new_key("refused-resend");
    let body = common::payment_body("order-refused-resend", "tok_timeout");
    let lost = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(lost.status, 202, "{}", lost.text());
    net::set_faults(&acquirer, json!({"reject_rate": 1.0})).await;
    let refused = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(refused.status, 202, "not a decline: {}", refused.text());
    assert_eq!(refused.json()["status"], "pending");
    net::set_faults(&acquirer, json!({})).await;
    let parked = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(
        parked.status,
        202,
        "parked for the window: {}",
        parked.text()
    );
    let paid =
        common::pay_until_definite(&client, &service.base, &key, &body, Duration::from_secs(15))
            .await;
    assert_eq!(paid.status, 201, "{}", paid.text());
    let rows = net::ledger_rows(&acquirer).await;
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(paid.json()["provider_payment_id"], rows[0]["id"]);

    let payment = paid.payment_id();
    let part = json!({"amount": {"value": "500.00", "currency": "RUB"}});
    let refund_key = common::new_key("refused-resend-refund");
    let (status, pending) = refund(&client, &service.base, &payment, &refund_key, &part).await;
    assert_eq!(status, 202, "the first refund answer is lost: {pending}");
    // The resent refund is refused; its look-up by reference (which the
    // simulator's fault injector does not refuse) finds the first one.
    net::set_faults(&acquirer, json!({"reject_rate": 1.0})).await;
    let (status, refunded) = refund(&client, &service.base, &payment, &refund_key, &part).await;
    assert_eq!(status, 201, "the refund found, not a failure: {refunded}");
    assert_eq!(refunded["status"], "succeeded");
    net::set_faults(&acquirer, json!({})).await;
    let (status, replay) = refund(&client, &service.base, &payment, &refund_key, &part).await;
    assert_eq!((status, &replay), (201, &refunded));
    let rows = net::ledger_rows(&acquirer).await;
    assert_eq!(rows[0]["refunded_minor"], 50_000, "500.00 went back, once");
}
