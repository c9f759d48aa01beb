//! The lifecycle across two `chargeonce serve` processes sharing one
//! PostgreSQL database and one acquirer ledger: 20 captures of 100.00 under
//! 20 keys, sent at once half to each, against an authorization of 1000.00
//! capture exactly 1000.00; a void racing captures through both processes
//! ends one way, the same in the books and at the acquirer.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_testkit::TestDb;
use common::{Answer, SECRET, SHOP, Server, ServerConfig};
use serde_json::{Value, json};

/// Two servers on one database and one ledger.
async fn two_servers(db: &TestDb) -> (Server, Server) {
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    tokio::join!(
        Server::start(ServerConfig::new("A"), db.url(), &ledger),
        Server::start(ServerConfig::new("B"), db.url(), &ledger),
    )
}

async fn post(client: &reqwest::Client, url: String, key: String, body: Value) -> Answer {
    let response = client
        .post(url)
        .basic_auth(SHOP, Some(SECRET))
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap().to_vec();
    Answer {
        status,
        headers,
        body,
    }
}

async fn authorize(
    client: &reqwest::Client,
    server: &Server,
    reference: &str,
    value: &str,
) -> String {
    let body = json!({
        "amount": {"value": value, "currency": "RUB"},
        "reference": reference,
        "payment_method": {"token": "tok_ok"},
        "capture_method": "manual",
    });
    let made = post(
        client,
        server.url("/v1/payments"),
        format!("{reference}-authorize"),
        body,
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    assert_eq!(made.json()["status"], "authorized");
    made.payment_id()
}

/// What the acquirer captured of the authorization of `reference`, and
/// whether it voided its rest.
async fn at_acquirer(client: &reqwest::Client, server: &Server, reference: &str) -> (i64, bool) {
    let ledger = common::ledger(client, &server.operator_url("")).await;
    let charges = common::charges_for(&ledger, reference);
    assert_eq!(charges.len(), 1, "one authorization: {ledger}");
    (
        charges[0]["captured_minor"].as_i64().unwrap(),
        charges[0]["voided"].as_bool().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_captures_through_two_processes_capture_the_authorization_exactly() {
    let db = TestDb::postgres().await;
    let (a, b) = two_servers(&db).await;
    let client = common::client();
    let id = authorize(&client, &a, "order-split", "1000.00").await;
    let part = json!({"amount": {"value": "100.00", "currency": "RUB"}});
    let sends = (0..20).map(|n| {
        let server = if n % 2 == 0 { &a } else { &b };
        post(
            &client,
            server.url(&format!("/v1/payments/{id}/captures")),
            format!("order-split-capture-{n}"),
            part.clone(),
        )
    });
    let answers = futures::future::join_all(sends).await;
    let mut captured = 0;
    for answer in &answers {
        match answer.status {
            201 => captured += 1,
            422 => assert_eq!(answer.json()["code"], "capture_exceeds_capturable"),
            409 => assert_eq!(answer.json()["code"], "payment_not_capturable"),
            other => panic!("unexpected {other}: {}", answer.text()),
        }
    }
    assert_eq!(captured, 10, "exactly the authorization, in 100.00 parts");
    let (taken, voided) = at_acquirer(&client, &a, "order-split").await;
    assert_eq!(taken, 100_000);
    assert!(!voided);
    let shown = common::get_payment(&client, &b.base, &id).await.json();
    assert_eq!(shown["amount_captured"]["value"], "1000.00");
    assert_eq!(shown["status"], "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_void_racing_captures_through_two_processes_ends_one_way() {
    let db = TestDb::postgres().await;
    let (a, b) = two_servers(&db).await;
    let client = common::client();
    for round in 0..5 {
        let reference = format!("order-race-{round}");
        let id = authorize(&client, &a, &reference, "500.00").await;
        let part = json!({"amount": {"value": "100.00", "currency": "RUB"}});
        let captures = (0..3).map(|n| {
            let server = if n % 2 == 0 { &b } else { &a };
            post(
                &client,
                server.url(&format!("/v1/payments/{id}/captures")),
                format!("{reference}-capture-{n}"),
                part.clone(),
            )
        });
        let void = post(
            &client,
            a.url(&format!("/v1/payments/{id}/void")),
            format!("{reference}-void"),
            json!({}),
        );
        let (captured, voided) = tokio::join!(futures::future::join_all(captures), void);
        let taken: i64 = captured.iter().filter(|c| c.status == 201).count() as i64 * 10_000;
        for c in captured.iter().filter(|c| c.status != 201) {
            let code = c.json()["code"].as_str().unwrap().to_owned();
            assert!(
                code == "authorization_busy" || code == "payment_not_capturable",
                "{}",
                c.text()
            );
        }
        let (at_acquirer_taken, at_acquirer_voided) = at_acquirer(&client, &a, &reference).await;
        assert_eq!(
            at_acquirer_taken, taken,
            "the books' captures are the acquirer's"
        );
        match voided.status {
            200 => {
                assert!(at_acquirer_voided, "the void won at the acquirer too");
                let status = if taken == 0 { "voided" } else { "succeeded" };
                assert_eq!(voided.json()["status"], status);
            }
            409 => {
                assert_eq!(voided.json()["code"], "authorization_busy");
                assert!(!at_acquirer_voided, "a refused void released nothing");
            }
            other => panic!("unexpected void {other}: {}", voided.text()),
        }
        let shown = common::get_payment(&client, &b.base, &id).await.json();
        let captured_minor = {
            let v = shown["amount_captured"]["value"].as_str().unwrap();
            let (whole, cents) = v.split_once('.').unwrap();
            whole.parse::<i64>().unwrap() * 100 + cents.parse::<i64>().unwrap()
        };
        assert_eq!(
            captured_minor, taken,
            "one outcome, in the books and at the acquirer"
        );
    }
}
