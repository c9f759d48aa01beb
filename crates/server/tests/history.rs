//! `GET /v1/payments/{id}/history` over real HTTP, on both stores: a
//! shop reads only its own payments' histories, and a fresh payment's
//! history tells its claim, its charge, its answer and its settlement, in
//! that order, with RFC 3339 times and its key's repeat counts.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_testkit::on_both_stores;
use common::{Backend, OTHER_SECRET, OTHER_SHOP, TestService, body, send};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

async fn pay(s: &TestService, reference: &str, token: &str) -> String {
    let answer = send(s.pay(
        &format!("{reference}-pay"),
        &body(reference, "1500.00", token),
    ))
    .await;
    let json = answer.json();
    match answer.status {
        201 => json["id"].as_str().unwrap().to_owned(),
        402 => json["payment"]["id"].as_str().unwrap().to_owned(),
        other => panic!("payment answered {other}: {json}"),
    }
}

async fn a_shop_reads_only_its_own_payments_history(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = pay(&s, "order-1", "tok_ok").await;
    let path = format!("/v1/payments/{id}/history");
    let mine = send(s.get(&path)).await;
    assert_eq!(mine.status, 200, "{}", String::from_utf8_lossy(&mine.bytes));
    let history = mine.json();
    assert_eq!(history["object"], "payment_history");
    assert_eq!(history["payment_id"], id.as_str());
    assert!(history["entries"].is_array());
    assert!(history["keys"].is_array());

    send(
        s.http
            .get(s.url(&path))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await
    .assert_problem(404, "not_found");
    send(s.get("/v1/payments/pay_0123456789abcdef0123456789abcdef/history"))
        .await
        .assert_problem(404, "not_found");
    send(s.get("/v1/payments/nope/history"))
        .await
        .assert_problem(404, "not_found");
    send(s.http.get(s.url(&path)))
        .await
        .assert_problem(401, "unauthorized");
}

fn types(history: &Value) -> Vec<String> {
    history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

/// Needs the stores' history role (the lead's merge of the store work).
async fn a_fresh_payments_history_tells_its_story_in_order(backend: Backend) {
    let s = TestService::start(backend).await;
    let id = pay(&s, "order-1", "tok_ok").await;
    let history = send(s.get(&format!("/v1/payments/{id}/history")))
        .await
        .json();
    let types = types(&history);
    let at = |kind: &str| {
        types
            .iter()
            .position(|t| t == kind)
            .unwrap_or_else(|| panic!("no {kind} entry in {history}"))
    };
    assert!(at("claimed") < at("acquirer_call"), "{types:?}");
    assert!(at("acquirer_call") < at("answered"), "{types:?}");
    assert!(types.contains(&"settled".to_owned()), "{types:?}");
    let entries = history["entries"].as_array().unwrap();
    let mut last_seq = i64::MIN;
    for entry in entries {
        let seq = entry["seq"].as_i64().unwrap();
        assert!(seq > last_seq, "increasing seq");
        last_seq = seq;
        OffsetDateTime::parse(entry["at"].as_str().unwrap(), &Rfc3339).unwrap();
    }
    let claimed = &entries[at("claimed")];
    assert_eq!(claimed["key"], "order-1-pay");
    let call = &entries[at("acquirer_call")];
    assert_eq!(call["call"], "charge");
    assert_eq!(call["outcome"], "succeeded");
    assert!(call["latency_ms"].is_u64());
    let answered = &entries[at("answered")];
    assert_eq!(answered["status"], 201);
    let settled = &entries[at("settled")];
    assert_eq!(settled["status"], "succeeded");
    assert_eq!(settled["by"], "request");
    assert_eq!(settled["key"], "order-1-pay");
    // Exactly one success.
    let successes = entries
        .iter()
        .filter(|e| e["type"] == "settled" && e["status"] == "succeeded")
        .count();
    assert_eq!(successes, 1);
    let keys = history["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "{history}");
    assert_eq!(keys[0]["key"], "order-1-pay");
    for kind in ["replays", "conflicts", "mismatches"] {
        assert!(keys[0][kind]["count"].is_u64(), "{history}");
    }
    // A declined payment settles declined, with its 402.
    let declined = pay(&s, "order-2", "tok_declined").await;
    let history = send(s.get(&format!("/v1/payments/{declined}/history")))
        .await
        .json();
    let entries = history["entries"].as_array().unwrap();
    assert!(
        entries
            .iter()
            .any(|e| e["type"] == "answered" && e["status"] == 402)
    );
    assert!(
        entries
            .iter()
            .any(|e| e["type"] == "settled" && e["status"] == "declined")
    );
}

/// A zombie's charge is in the story. The request's lease is taken over
/// while its charge is at the acquirer (another instance's take-over,
/// written here as its update of the key row): its finish is fenced off and
/// it answers 409, but the charge call it made is still in the payment's
/// history, named after its instance, with no answer of its own.
#[tokio::test]
async fn the_charge_of_a_request_that_lost_its_lease_is_in_the_history() {
    let s = TestService::start(Backend::Postgres).await;
    let request = s.pay("k-zombie", &body("order-zombie", "1500.00", "tok_slow"));
    // tok_slow: charged at once, answered 1.5 s later.
    let answer = tokio::spawn(async move { send(request).await });
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let charge = loop {
        if let Some(charge) = s.sim.ledger().await.unwrap().into_iter().next() {
            break charge;
        }
        assert!(tokio::time::Instant::now() < deadline, "no charge");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    let taken = sqlx::query(
        "UPDATE idempotency_keys SET lease_token = gen_random_uuid(), lease_holder = 'B' \
         WHERE key = 'k-zombie'",
    )
    .execute(s.pg().unwrap().pool())
    .await
    .unwrap();
    assert_eq!(taken.rows_affected(), 1);
    answer
        .await
        .unwrap()
        .assert_problem(409, "request_in_progress");

    let id = charge.payment_id.as_str();
    let history = send(s.get(&format!("/v1/payments/{id}/history")))
        .await
        .json();
    assert_eq!(types(&history), ["claimed", "acquirer_call"], "{history}");
    let call = &history["entries"][1];
    assert_eq!(call["call"], "charge");
    assert_eq!(call["outcome"], "succeeded");
    assert_eq!(call["instance"], history["entries"][0]["instance"]);
}

on_both_stores!(
    a_shop_reads_only_its_own_payments_history,
    a_fresh_payments_history_tells_its_story_in_order,
);
