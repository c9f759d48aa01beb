//! The cursor lists over real HTTP, on both stores: `GET /v1/payments`
//! (paging both ways, filters, `?reference=` as before), `GET /v1/refunds`
//! and `GET /v1/payments/{id}/refunds`, and their 400 problems.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::HashSet;

use chargeonce_testkit::on_both_stores;
use common::{Backend, OTHER_SECRET, OTHER_SHOP, TestService, body, send};
use serde_json::{Value, json};

/// Pays 100 RUB for `reference` (key `{reference}-pay`); the payment (a
/// declined one from its 402 problem).
async fn paid(s: &TestService, reference: &str, token: &str) -> Value {
    let answer = send(s.pay(
        &format!("{reference}-pay"),
        &body(reference, "100.00", token),
    ))
    .await;
    match answer.status {
        201 => answer.json(),
        402 => answer.json()["payment"].clone(),
        status => panic!("{status}: {}", String::from_utf8_lossy(&answer.bytes)),
    }
}

async fn list(s: &TestService, path: &str) -> Value {
    let answer = send(s.get(path)).await;
    assert_eq!(
        answer.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&answer.bytes)
    );
    let list = answer.json();
    assert_eq!(list["object"], "list");
    assert!(list["has_more"].is_boolean());
    list
}

fn ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn payments_are_paged_newest_first_both_ways(backend: Backend) {
    let s = TestService::start(backend).await;
    let mut made = Vec::new();
    for i in 0..5 {
        made.push(
            paid(&s, &format!("order-{i}"), "tok_ok").await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    made.reverse();
    let first = list(&s, "/v1/payments?limit=2").await;
    assert_eq!(ids(&first), made[..2]);
    assert_eq!(first["has_more"], true);
    assert_eq!(first["data"][0]["object"], "payment");
    let second = list(
        &s,
        &format!("/v1/payments?limit=2&starting_after={}", made[1]),
    )
    .await;
    assert_eq!(ids(&second), made[2..4]);
    assert_eq!(second["has_more"], true);
    let last = list(
        &s,
        &format!("/v1/payments?limit=2&starting_after={}", made[3]),
    )
    .await;
    assert_eq!(ids(&last), made[4..]);
    assert_eq!(last["has_more"], false);
    let back = list(
        &s,
        &format!("/v1/payments?limit=2&ending_before={}", made[4]),
    )
    .await;
    assert_eq!(ids(&back), made[2..4]);
    assert_eq!(back["has_more"], true);
    let top = list(
        &s,
        &format!("/v1/payments?limit=2&ending_before={}", made[2]),
    )
    .await;
    assert_eq!(ids(&top), made[..2]);
    assert_eq!(top["has_more"], false);
    // Default limit 10: all five.
    let all = list(&s, "/v1/payments").await;
    assert_eq!(ids(&all), made);
    assert_eq!(all["has_more"], false);
    // Another shop sees none of them.
    let theirs = send(
        s.http
            .get(s.url("/v1/payments"))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await;
    assert_eq!(theirs.json()["data"], json!([]));
}

async fn payments_are_filtered(backend: Backend) {
    let s = TestService::start(backend).await;
    let ok = paid(&s, "order-ok", "tok_ok").await;
    let declined = paid(&s, "order-no", "tok_declined").await;
    let by_status = list(&s, "/v1/payments?status=declined").await;
    assert_eq!(ids(&by_status), [declined["id"].as_str().unwrap()]);
    let by_reference = list(&s, "/v1/payments?reference=order-ok").await;
    assert_eq!(by_reference["data"], json!([ok]));
    let created = ok["created_at"].as_str().unwrap().replace('+', "%2B");
    let since = list(&s, &format!("/v1/payments?created_gte={created}")).await;
    let since: HashSet<String> = ids(&since).into_iter().collect();
    assert!(since.contains(ok["id"].as_str().unwrap()));
    let before = list(&s, &format!("/v1/payments?created_lt={created}")).await;
    assert!(!ids(&before).contains(&ok["id"].as_str().unwrap().to_owned()));
    let none = list(&s, "/v1/payments?created_gte=2999-01-01T00:00:00Z").await;
    assert_eq!(none["data"], json!([]));
}

async fn bad_list_parameters_are_400_problems(backend: Backend) {
    let s = TestService::start(backend).await;
    let payment = paid(&s, "order-1", "tok_ok").await;
    let id = payment["id"].as_str().unwrap();
    for path in [
        "/v1/payments?limit=0",
        "/v1/payments?limit=101",
        "/v1/payments?limit=abc",
        "/v1/payments?limit=1&limit=2",
        "/v1/payments?bogus=1",
        "/v1/payments?status=refunded",
        "/v1/payments?created_gte=yesterday",
        "/v1/payments?reference=%ff",
        "/v1/refunds?limit=500",
        "/v1/refunds?status=x",
    ] {
        send(s.get(path))
            .await
            .assert_problem(400, "invalid_parameter");
    }
    send(s.get(&format!(
        "/v1/payments?starting_after={id}&ending_before={id}"
    )))
    .await
    .assert_problem(400, "invalid_parameter");
    send(s.get("/v1/payments?starting_after=pay_x"))
        .await
        .assert_problem(400, "invalid_cursor");
    // Another shop's payment is no cursor.
    let theirs = send(
        s.http
            .post(s.url("/v1/payments"))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET))
            .header("idempotency-key", "theirs")
            .json(&body("their-order", "1.00", "tok_ok")),
    )
    .await
    .json();
    let theirs = theirs["id"].as_str().unwrap();
    send(s.get(&format!("/v1/payments?starting_after={theirs}")))
        .await
        .assert_problem(400, "invalid_cursor");
    send(s.get(&format!("/v1/payments?ending_before={theirs}")))
        .await
        .assert_problem(400, "invalid_cursor");
    // Unauthenticated: 401 before anything else.
    let anonymous = send(s.http.get(s.url("/v1/payments?limit=0"))).await;
    anonymous.assert_problem(401, "unauthorized");
}

async fn refunds_are_listed_for_the_shop_and_for_a_payment(backend: Backend) {
    let s = TestService::start(backend).await;
    let one = paid(&s, "order-1", "tok_ok").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let two = paid(&s, "order-2", "tok_ok").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refund = |payment: &str, key: &str| {
        s.http
            .post(s.url(&format!("/v1/payments/{payment}/refunds")))
            .basic_auth(common::SHOP, Some(common::SECRET))
            .header("idempotency-key", key)
            .json(&json!({"amount": {"value": "10.00", "currency": "RUB"}}))
    };
    let mut of_one = Vec::new();
    for (i, payment) in [&one, &two, &one].iter().enumerate() {
        let answer = send(refund(payment, &format!("r{i}"))).await;
        assert_eq!(
            answer.status,
            201,
            "{}",
            String::from_utf8_lossy(&answer.bytes)
        );
        if *payment == &one {
            of_one.push(answer.json()["id"].as_str().unwrap().to_owned());
        }
    }
    of_one.reverse();
    let all = list(&s, "/v1/refunds").await;
    assert_eq!(all["data"].as_array().unwrap().len(), 3);
    assert_eq!(all["data"][0]["object"], "refund");
    let first = list(&s, &format!("/v1/payments/{one}/refunds?limit=1")).await;
    assert_eq!(ids(&first), of_one[..1]);
    assert_eq!(first["has_more"], true);
    let next = list(
        &s,
        &format!(
            "/v1/payments/{one}/refunds?limit=1&starting_after={}",
            of_one[0]
        ),
    )
    .await;
    assert_eq!(ids(&next), of_one[1..]);
    assert_eq!(next["has_more"], false);
    // A refund of another payment is no cursor in this payment's list.
    let of_two = ids(&list(&s, &format!("/v1/payments/{two}/refunds")).await);
    send(s.get(&format!(
        "/v1/payments/{one}/refunds?starting_after={}",
        of_two[0]
    )))
    .await
    .assert_problem(400, "invalid_cursor");
    send(s.get("/v1/payments/pay_00000000000000000000000000000000/refunds"))
        .await
        .assert_problem(404, "not_found");
    let theirs = send(
        s.http
            .get(s.url(&format!("/v1/payments/{one}/refunds")))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await;
    theirs.assert_problem(404, "not_found");
}

on_both_stores!(
    payments_are_paged_newest_first_both_ways,
    payments_are_filtered,
    bad_list_parameters_are_400_problems,
    refunds_are_listed_for_the_shop_and_for_a_payment,
);
