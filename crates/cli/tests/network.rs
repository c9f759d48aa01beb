//! The service against the standalone acquirer over real HTTP: a service killed
//! mid-payment and finished by the completer with nobody retrying, a provider
//! without idempotency, the `reconcile` command, and webhooks end to end.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
mod net;

use std::time::Duration;

use chargeonce_testkit::TestDb;
use serde_json::json;

/// The service is SIGKILLed after the acquirer recorded the charge and before
/// the service recorded the answer. A new service process starts on the same
/// database; nobody retries. Its completer takes the key over once the dead
/// process's lease ran out, asks the acquirer again with the same key, and
/// finishes the payment: one charge, a stored answer, a replay for the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_completer_finishes_a_payment_after_the_service_is_killed() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    // tok_slow: charged at once, answered after 5 s.
    let acquirer = net::acquirer(&db.dir(), "127.0.0.1:0", &["--slow", "5s"]).await;
    let workers_off = ["--lease", "2s", "--no-completer", "--no-reconciler"];
    let mut first = net::service("S1", &db, &acquirer.base, &workers_off).await;
    let client = common::client();
    let key = common::new_key("killed");
    let body = common::payment_body("order-killed", "tok_slow");

    let in_flight = {
        let (client, base, key, body) = (
            client.clone(),
            first.base.clone(),
            key.clone(),
            body.clone(),
        );
        tokio::spawn(async move { common::try_pay(&client, &base, &key, &body).await })
    };
    let charge = common::eventually(
        "the charge at the acquirer",
        Duration::from_secs(10),
        || {
            let acquirer = &acquirer;
            async move { net::ledger_rows(acquirer).await.pop() }
        },
    )
    .await;
    let (point, status) = common::pg_key_state(db.url(), &key).await.unwrap();
    assert_eq!(
        (point.as_str(), status.as_str()),
        ("payment_created", "pending")
    );
    first.kill();
    assert!(
        in_flight.await.unwrap().is_err(),
        "the client lost its answer"
    );

    // A fresh process with the completer on; no client comes back.
    let second = net::service(
        "S2",
        &db,
        &acquirer.base,
        &[
            "--lease",
            "2s",
            "--completer-interval",
            "200ms",
            "--completer-idle",
            "0s",
            "--no-reconciler",
        ],
    )
    .await;
    let finished_at = common::eventually(
        "the completer to finish the key",
        Duration::from_secs(20),
        || {
            let url = db.url().to_owned();
            let key = key.clone();
            async move {
                common::pg_key_state(&url, &key)
                    .await
                    .filter(|(point, _)| point == "finished")
            }
        },
    )
    .await;
    assert_eq!(finished_at.1, "succeeded");
    let rows = net::ledger_rows(&acquirer).await;
    assert_eq!(rows.len(), 1, "charged once: {rows:#?}");
    let payment_id = charge["payment_id"].as_str().unwrap();
    let payment = common::get_payment(&client, &second.base, payment_id).await;
    assert_eq!(payment.json()["status"], "succeeded");
    assert_eq!(payment.json()["provider_payment_id"], charge["id"]);
    // The client, back at last, gets the completer's stored answer.
    let answer = common::pay(&client, &second.base, &key, &body).await;
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert!(answer.is_replay());
    assert_eq!(answer.json()["provider_payment_id"], charge["id"]);
    let metrics = reqwest::get(second.operator_url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("chargeonce_completer_runs_total{result=\"finished\"} 1"),
        "{metrics}"
    );
}

/// A provider without idempotency: the answer to the first charge is lost; a
/// retry with the same key must not charge again, so it looks the charge up
/// by our reference first and finishes with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_acquirer_idempotency_a_retry_looks_up_before_sending_again() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let acquirer = net::acquirer(
        &db.dir(),
        "127.0.0.1:0",
        &[
            "--no-idempotency",
            "--lost-answer-rate",
            "1",
            "--hang",
            "300ms",
        ],
    )
    .await;
    let service = net::service(
        "S",
        &db,
        &acquirer.base,
        &[
            "--acquirer-no-idempotency",
            "--acquirer-timeout",
            "2s",
            "--acquirer-settle-window",
            "2s",
            "--no-completer",
            "--no-reconciler",
        ],
    )
    .await;
    let client = common::client();
    let key = common::new_key("no-idem");
    let body = common::payment_body("order-no-idem", "tok_ok");
    let lost = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(lost.status, 202, "{}", lost.text());
    assert_eq!(
        net::ledger_rows(&acquirer).await.len(),
        1,
        "charged, answer lost"
    );

    // Every charge answer is still lost: a charge sent again would be a
    // second charge and another 202. A look-up records nothing, so its answer
    // is not lost after a commit: once the settle window has passed (the key
    // is parked until then: 202 again), the retry finds the first charge by
    // our reference and finishes with it.
    let parked = common::pay(&client, &service.base, &key, &body).await;
    assert_eq!(parked.status, 202, "parked: {}", parked.text());
    let retry =
        common::pay_until_definite(&client, &service.base, &key, &body, Duration::from_secs(15))
            .await;
    assert_eq!(retry.status, 201, "{}", retry.text());
    let rows = net::ledger_rows(&acquirer).await;
    assert_eq!(rows.len(), 1, "not sent again: {rows:#?}");
    assert_eq!(retry.json()["provider_payment_id"], rows[0]["id"]);
    let metrics = reqwest::get(service.operator_url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "chargeonce_acquirer_calls_total{mode=\"live\",call=\"lookup\",outcome=\"succeeded\"} 1"
        ),
        "{metrics}"
    );
    let (code, report) =
        net::reconcile(db.url(), &acquirer.base, &["--acquirer-no-idempotency"]).await;
    assert_eq!(code, 0, "{report:#}");
}

/// `chargeonce reconcile` finds a duplicate charge and an orphan planted in
/// the acquirer's ledger, says so, exits 2, and refunds the duplicate when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_reconcile_command_reports_planted_duplicates_and_orphans() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let acquirer = net::acquirer(&db.dir(), "127.0.0.1:0", &[]).await;
    let service = net::service("S", &db, &acquirer.base, &["--no-reconciler"]).await;
    let client = common::client();
    let paid = common::pay(
        &client,
        &service.base,
        "order-1-pay",
        &common::payment_body("order-1", "tok_ok"),
    )
    .await;
    assert_eq!(paid.status, 201);
    let (code, report) = net::reconcile(db.url(), &acquirer.base, &[]).await;
    assert_eq!(code, 0, "clean before planting: {report:#}");

    let http = reqwest::Client::new();
    for plant in [
        json!({"acquirer_key": "second-key-for-order-1", "shop_id": common::SHOP,
               "payment_id": paid.payment_id(), "reference": "order-1",
               "amount": {"value": "1500.00", "currency": "RUB"}}),
        json!({"acquirer_key": "nobody-knows", "shop_id": common::SHOP,
               "payment_id": "pay_0190f0e0a0b07c8d9e0f102132435465", "reference": "order-stray",
               "amount": {"value": "99.00", "currency": "RUB"}}),
    ] {
        let planted = http
            .post(acquirer.url("/admin/charges"))
            .json(&plant)
            .send()
            .await
            .unwrap();
        assert_eq!(planted.status().as_u16(), 201);
    }
    let (code, report) = net::reconcile(db.url(), &acquirer.base, &[]).await;
    assert_eq!(code, 2, "findings exit 2: {report:#}");
    assert_eq!(
        net::finding_kinds(&report),
        ["duplicate_charge", "orphan_charge"]
    );
    assert_eq!(report["findings"][0]["reference"], "order-1");
    assert_eq!(report["findings"][1]["reference"], "order-stray");

    let (code, report) = net::reconcile(db.url(), &acquirer.base, &["--refund-duplicates"]).await;
    assert_eq!(code, 2);
    let refunded = report["findings"][0]["refunded"].as_array().unwrap();
    assert_eq!(refunded.len(), 1);
    assert_ne!(
        refunded[0],
        paid.json()["provider_payment_id"],
        "ours is kept"
    );
    let (code, report) = net::reconcile(db.url(), &acquirer.base, &[]).await;
    assert_eq!(code, 2);
    assert_eq!(
        net::finding_kinds(&report),
        ["orphan_charge"],
        "the duplicate is refunded"
    );
}

/// Webhooks end to end, duplicated and reordered on purpose: a payment whose
/// answer was lost is settled by the acquirer's event, with nobody retrying,
/// and every duplicate is acknowledged without a second state change.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acquirer_webhooks_settle_lost_answers() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let port = net::free_port();
    let acquirer_url = format!("http://127.0.0.1:{port}");
    let service = net::service(
        "S",
        &db,
        &acquirer_url,
        &["--no-completer", "--no-reconciler"],
    )
    .await;
    let hook = service.url("/v1/webhooks/acquirer");
    let acquirer = net::acquirer(
        &db.dir(),
        &format!("127.0.0.1:{port}"),
        &[
            "--webhook-url",
            &hook,
            "--webhook-secret",
            net::WEBHOOK_SECRET,
            "--webhook-duplicate-rate",
            "1",
            "--webhook-reorder-rate",
            "0.5",
            "--webhook-reorder-delay",
            "200ms",
        ],
    )
    .await;
    let client = common::client();
    let mut ids = Vec::new();
    for i in 0..5 {
        let answer = common::pay(
            &client,
            &service.base,
            &format!("lost-{i}"),
            &common::payment_body(&format!("order-lost-{i}"), "tok_timeout"),
        )
        .await;
        assert_eq!(answer.status, 202, "{}", answer.text());
        ids.push(answer.payment_id());
    }
    for id in &ids {
        common::eventually(
            "the webhook to settle the payment",
            Duration::from_secs(15),
            || {
                let (client, base, id) = (client.clone(), service.base.clone(), id.clone());
                async move {
                    let payment = common::get_payment(&client, &base, &id).await.json();
                    (payment["status"] == "succeeded").then_some(())
                }
            },
        )
        .await;
    }
    let metrics = common::eventually("every delivery", Duration::from_secs(15), || {
        let url = service.operator_url("/metrics");
        async move {
            let text = reqwest::get(url).await.unwrap().text().await.unwrap();
            // 5 charges x 2 events x 2 deliveries.
            let count = |result: &str| -> u64 {
                text.lines()
                    .find(|l| {
                        l.starts_with(&format!("chargeonce_webhooks_total{{result=\"{result}\"}}"))
                    })
                    .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                    .unwrap_or(0)
            };
            let total = count("applied") + count("duplicate") + count("no_change");
            (total >= 20).then_some(text)
        }
    })
    .await;
    assert!(
        metrics.contains("chargeonce_webhooks_total{result=\"applied\"} 5"),
        "{metrics}"
    );
    assert!(!metrics.contains("result=\"conflict\""), "{metrics}");
    assert_eq!(net::ledger_rows(&acquirer).await.len(), 5);
}
