//! The HTTP contract of PRODUCT.md, row by row, over real HTTP, on both stores.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_acquirer::ChargeStatus;
use chargeonce_core::{KeyTiming, PaymentId, PaymentStatus, SettleOutcome, Settlement, ShopId};
use chargeonce_testkit::on_both_stores;
use common::{
    Answer, Backend, OTHER_SECRET, OTHER_SHOP, TestService, body, raw_answer, raw_status, send,
};
use serde_json::json;

async fn first_request_is_201_and_a_repeat_is_a_byte_identical_replay(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("order-1-pay", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(first.status, 201);
    assert!(!first.replayed());
    let payment = first.json();
    assert_eq!(payment["status"], "succeeded");
    assert_eq!(
        payment["amount"],
        json!({"value": "1500.00", "currency": "RUB"})
    );
    assert_eq!(payment["reference"], "order-1");
    assert_eq!(payment["shop_id"], common::SHOP);
    assert!(payment.get("payment_method").is_none() && payment.get("token").is_none());
    let location = format!("/v1/payments/{}", payment["id"].as_str().unwrap());
    assert_eq!(first.header("location"), Some(location.as_str()));

    // 50 sequential repeats, in both key forms: the same bytes, nothing executes again.
    for i in 0..50 {
        let key = if i % 2 == 0 {
            "order-1-pay"
        } else {
            "\"order-1-pay\""
        };
        let again = send(s.pay(key, &body("order-1", "1500.00", "tok_ok"))).await;
        assert_eq!(again.status, 201);
        assert_eq!(again.bytes, first.bytes, "replay must be byte-identical");
        assert!(again.replayed());
        assert_eq!(again.header("location"), first.header("location"));
        assert_eq!(again.header("content-type"), Some("application/json"));
    }
    assert_eq!(s.charges("order-1").await.len(), 1);
    // The resource read back is the same bytes too: members in one order.
    let read = send(s.get(&location)).await;
    assert_eq!(read.status, 200);
    assert_eq!(
        String::from_utf8_lossy(&read.bytes),
        String::from_utf8_lossy(&first.bytes),
        "GET answers the payment as its POST did"
    );
}

async fn a_reserialised_body_is_the_same_request(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("k", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(first.status, 201);
    let reordered = "{\n \"payment_method\" : {\"token\":\"tok_ok\"},\"reference\":\"order-1\",\n\
                     \"amount\":{ \"currency\":\"RUB\",\"value\":\"1500.00\"} }";
    let again = send(
        s.http
            .post(s.url("/v1/payments"))
            .basic_auth(common::SHOP, Some(common::SECRET))
            .header("idempotency-key", "k")
            .header("content-type", "application/json; charset=utf-8")
            .body(reordered),
    )
    .await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes);
    assert_eq!(s.ledger_len().await, 1);
}

async fn the_same_key_with_another_body_is_422_and_executes_nothing(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("k", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(first.status, 201);
    for changed in [
        body("order-1", "1600.00", "tok_ok"),
        body("order-2", "1500.00", "tok_ok"),
        body("order-1", "1500.00", "tok_declined"),
        json!({"amount": {"value": "1500.00", "currency": "USD"}, "reference": "order-1",
               "payment_method": {"token": "tok_ok"}}),
    ] {
        send(s.pay("k", &changed))
            .await
            .assert_problem(422, "idempotency_key_reused");
    }
    assert_eq!(s.ledger_len().await, 1, "a mismatch never executes");
    assert!(s.charges("order-2").await.is_empty());
    // The original is untouched: its replay is still the first answer.
    let again = send(s.pay("k", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(again.bytes, first.bytes);
}

async fn a_repeat_while_the_first_runs_is_409_with_retry_after(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-slow", "10.00", "tok_slow");
    let first = tokio::spawn(s.pay("slow", &b).send());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = send(s.pay("slow", &b)).await;
    second.assert_problem(409, "request_in_progress");
    assert!(
        second
            .header("retry-after")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    let first = Answer::of(first.await.unwrap().unwrap()).await;
    assert_eq!(first.status, 201);
    let third = send(s.pay("slow", &b)).await;
    assert_eq!(third.bytes, first.bytes);
    assert!(third.replayed());
    assert_eq!(s.charges("order-slow").await.len(), 1);
}

async fn concurrent_duplicates_charge_once(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-dup", "99.99", "tok_ok");
    let requests = (0..50).map(|_| s.pay("double-click", &b).send());
    let answers = futures::future::join_all(requests).await;
    let mut created = Vec::new();
    for answer in answers {
        let answer = Answer::of(answer.unwrap()).await;
        match answer.status {
            201 => created.push(answer.bytes),
            409 => answer.assert_problem(409, "request_in_progress"),
            other => panic!(
                "unexpected {other}: {}",
                String::from_utf8_lossy(&answer.bytes)
            ),
        }
    }
    assert!(!created.is_empty());
    assert!(
        created.iter().all(|b| *b == created[0]),
        "every 201 carries the same bytes"
    );
    assert_eq!(s.charges("order-dup").await.len(), 1);
}

async fn a_decline_is_definite_and_replayed(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-d", "5.00", "tok_declined");
    let first = send(s.pay("d", &b)).await;
    first.assert_problem(402, "payment_declined");
    let problem = first.json();
    assert_eq!(problem["decline_code"], "card_declined");
    assert_eq!(problem["payment"]["status"], "declined");
    let again = send(s.pay("d", &b)).await;
    assert_eq!(again.status, 402);
    assert_eq!(again.bytes, first.bytes);
    assert!(again.replayed());
    let charges = s.charges("order-d").await;
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].status, ChargeStatus::Declined);
    // A declined order may be paid again, under a new key.
    let retry = send(s.pay("d-2", &body("order-d", "5.00", "tok_ok"))).await;
    assert_eq!(retry.status, 201);
    assert_ne!(retry.json()["id"], problem["payment"]["id"]);

    let poor = send(s.pay("p", &body("order-p", "5.00", "tok_insufficient_funds"))).await;
    poor.assert_problem(402, "payment_declined");
    assert_eq!(poor.json()["decline_code"], "insufficient_funds");
}

async fn a_lost_acquirer_answer_is_202_then_resolved_by_retry(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-t", "1500.00", "tok_timeout");
    let first = send(s.pay("t", &b)).await;
    assert_eq!(first.status, 202);
    assert_eq!(first.json()["status"], "pending");
    assert!(first.header("retry-after").is_some());
    let id = first.json()["id"].as_str().unwrap().to_owned();
    let pending = send(s.get(&format!("/v1/payments/{id}"))).await;
    assert_eq!(pending.json()["status"], "pending");

    let retry = send(s.pay("t", &b)).await;
    assert_eq!(retry.status, 201);
    assert_eq!(retry.json()["status"], "succeeded");
    assert_eq!(retry.json()["id"], id.as_str());
    let charges = s.charges("order-t").await;
    assert_eq!(charges.len(), 1, "the retry re-drove the same acquirer key");
    assert_eq!(charges[0].acquirer_key.as_str(), format!("chargeonce-{id}"));
    let replay = send(s.pay("t", &b)).await;
    assert_eq!(replay.bytes, retry.bytes);
    assert!(replay.replayed());
}

async fn a_new_key_for_a_paid_order_returns_the_payment(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("k1", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(first.status, 201);
    let second = send(s.pay("k2", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.json()["id"], first.json()["id"]);
    assert_eq!(second.json()["status"], "succeeded");
    assert_eq!(s.charges("order-1").await.len(), 1, "3000 never charged");
    let replay = send(s.pay("k2", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(replay.status, 200);
    assert!(replay.replayed());
}

/// Key 1 pays 10.00 for an order; key 2 asks 25.00 for the same order. It
/// is not paid: 409 `order_already_paid` with the 10.00 payment, nothing
/// charged and nothing stored against key 2 (it answers the same again). So
/// a shop never ships a 25.00 cart charged 10.00 (issue 31).
async fn a_new_key_for_a_paid_order_with_another_amount_is_409(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("k1", &body("order-9", "10.00", "tok_ok"))).await;
    assert_eq!(first.status, 201);
    for _ in 0..2 {
        let other = send(s.pay("k2", &body("order-9", "25.00", "tok_ok"))).await;
        assert_eq!(
            other.status,
            409,
            "{}",
            String::from_utf8_lossy(&other.bytes)
        );
        assert!(!other.replayed(), "nothing stored against the key");
        let problem = other.json();
        assert_eq!(problem["code"], "order_already_paid");
        assert_eq!(problem["payment"]["id"], first.json()["id"]);
        assert_eq!(problem["payment"]["amount"]["value"], "10.00");
        assert_eq!(
            other.headers["content-type"], "application/problem+json",
            "a problem document"
        );
    }
    let key = s
        .store
        .key(
            &ShopId::new(common::SHOP).unwrap(),
            &chargeonce_core::IdempotencyKey::new("k2").unwrap(),
        )
        .await
        .unwrap();
    assert!(key.is_none(), "no key row left: {key:?}");
    // Another currency is another amount too.
    let usd = json!({"amount": {"value": "10.00", "currency": "USD"}, "reference": "order-9",
                     "payment_method": {"token": "tok_ok"}});
    let other = send(s.pay("k3", &usd)).await;
    assert_eq!(other.status, 409);
    assert_eq!(s.charges("order-9").await.len(), 1, "charged once");
}

/// An order whose payment is still pending, asked for another amount under
/// another key: 409, nothing stored; once that payment is declined the
/// order is free, and the same request pays with its own attempt.
async fn an_order_pending_with_another_amount_is_409_until_it_is_free(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("k1", &body("order-1", "10.00", "tok_timeout"))).await;
    assert_eq!(first.status, 202);
    let theirs = first.json()["id"].as_str().unwrap().to_owned();
    let mine = body("order-1", "25.00", "tok_ok");
    let refused = send(s.pay("k2", &mine)).await;
    assert_eq!(refused.status, 409);
    assert_eq!(refused.json()["code"], "order_already_paid");
    assert_eq!(refused.json()["payment"]["status"], "pending");
    decline_elsewhere(&s, &theirs).await;
    let own = send(s.pay("k2", &mine)).await;
    assert_eq!(own.status, 201, "{}", String::from_utf8_lossy(&own.bytes));
    assert_eq!(own.json()["amount"]["value"], "25.00");
    assert_ne!(own.json()["id"], theirs.as_str());
}

async fn a_new_key_for_an_order_in_flight_is_202_until_it_settles(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-1", "1500.00", "tok_slow");
    let first = tokio::spawn(s.pay("k1", &b).send());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Another key for the same order, while the first payment is at the acquirer.
    let second = send(s.pay("k2", &b)).await;
    assert_eq!(
        second.status,
        202,
        "{}",
        String::from_utf8_lossy(&second.bytes)
    );
    assert_eq!(second.json()["status"], "pending");
    let first = Answer::of(first.await.unwrap().unwrap()).await;
    assert_eq!(first.status, 201);
    assert_eq!(second.json()["id"], first.json()["id"]);
    // Nothing definite was stored for k2: now it gets the settled payment, for good.
    let settled = send(s.pay("k2", &b)).await;
    assert_eq!(settled.status, 200);
    assert!(!settled.replayed());
    assert_eq!(settled.json()["status"], "succeeded");
    let replay = send(s.pay("k2", &b)).await;
    assert!(replay.replayed());
    assert_eq!(replay.bytes, settled.bytes);
    assert_eq!(s.charges("order-1").await.len(), 1);
}

/// Declines the payment `id` (as a webhook or the reconciler would settle it).
async fn decline_elsewhere(s: &TestService, id: &str) {
    let settled = s
        .store
        .settle_payment(
            &ShopId::new(common::SHOP).unwrap(),
            &PaymentId::parse(id).unwrap(),
            &Settlement {
                status: PaymentStatus::Declined,
                provider_payment_id: Some("ch_elsewhere".into()),
                decline_code: Some("card_declined".into()),
            },
        )
        .await
        .unwrap();
    assert!(matches!(settled, SettleOutcome::Settled(_)), "{settled:?}");
}

/// A key that found its order's payment pending links to it (202). When that
/// payment is then declined, the order is free again: the key's next request
/// gets an attempt of its own, with its own card, never the other payment's
/// decline.
async fn a_key_linked_to_a_payment_that_declines_gets_its_own_attempt(backend: Backend) {
    let s = TestService::start(backend).await;
    let first = send(s.pay("k1", &body("order-1", "1500.00", "tok_timeout"))).await;
    assert_eq!(first.status, 202);
    let theirs = first.json()["id"].as_str().unwrap().to_owned();
    let mine = body("order-1", "1500.00", "tok_ok");
    let linked = send(s.pay("k2", &mine)).await;
    assert_eq!(linked.status, 202);
    assert_eq!(linked.json()["id"], theirs.as_str());
    // The first payment is declined (as a webhook or the reconciler would
    // settle it).
    decline_elsewhere(&s, &theirs).await;
    let own = send(s.pay("k2", &mine)).await;
    assert_eq!(own.status, 201, "{}", String::from_utf8_lossy(&own.bytes));
    assert_ne!(own.json()["id"], theirs.as_str(), "a payment of its own");
    assert_eq!(own.json()["status"], "succeeded");
    let replay = send(s.pay("k2", &mine)).await;
    assert!(replay.replayed());
    assert_eq!(replay.bytes, own.bytes);
    let charges = s.charges("order-1").await;
    assert!(
        charges
            .iter()
            .any(|c| Some(c.payment_id.as_str()) == own.json()["id"].as_str()),
        "charged with its own card: {charges:?}"
    );
}

async fn an_acquirer_slower_than_its_timeout_is_pending_then_resolved(backend: Backend) {
    let s = TestService::builder(backend)
        .slow(Duration::from_millis(1200))
        .acquirer_timeout(Duration::from_millis(300))
        .start()
        .await;
    let b = body("order-1", "1500.00", "tok_slow");
    let started = std::time::Instant::now();
    let first = send(s.pay("k", &b)).await;
    assert_eq!(first.status, 202);
    assert!(
        started.elapsed() < Duration::from_millis(1100),
        "the call was cut at its timeout"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let retry = send(s.pay("k", &b)).await;
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.bytes)
    );
    assert_eq!(retry.json()["status"], "succeeded");
    assert_eq!(retry.json()["id"], first.json()["id"]);
    assert_eq!(s.charges("order-1").await.len(), 1);
}

async fn an_expired_key_cannot_pay_an_order_twice(backend: Backend) {
    let timing = KeyTiming {
        lease: Duration::from_secs(30),
        ttl: Duration::from_millis(500),
    };
    let s = TestService::builder(backend).timing(timing).start().await;
    let first = send(s.pay("k", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(first.status, 201);
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Expired and swept: the key is new again, but the order is paid.
    let swept = chargeonce_workers::sweeper::sweep_once(s.store.as_ref(), 10)
        .await
        .unwrap();
    assert_eq!(swept, 1);
    let again = send(s.pay("k", &body("order-1", "1500.00", "tok_ok"))).await;
    assert_eq!(again.status, 200);
    assert!(!again.replayed());
    assert_eq!(again.json()["id"], first.json()["id"]);
    assert_eq!(s.charges("order-1").await.len(), 1);
    // An expired key, not yet swept, for a new order: a new payment.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let other = send(s.pay("k", &body("order-2", "1.00", "tok_ok"))).await;
    assert_eq!(other.status, 201);
    assert_eq!(s.charges("order-2").await.len(), 1);
}

async fn bad_keys_are_400_and_store_nothing(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-1", "1.00", "tok_ok");
    let no_key = s
        .http
        .post(s.url("/v1/payments"))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .json(&b);
    send(no_key)
        .await
        .assert_problem(400, "missing_idempotency_key");
    for bad in [
        "",
        "   ",
        "\"\"",
        "has space",
        "\"unterminated",
        "\"a\"b",
        "ключ",
    ] {
        let request = s
            .http
            .post(s.url("/v1/payments"))
            .basic_auth(common::SHOP, Some(common::SECRET))
            .header(
                "idempotency-key",
                reqwest::header::HeaderValue::from_bytes(bad.as_bytes()).unwrap(),
            )
            .json(&b);
        send(request)
            .await
            .assert_problem(400, "invalid_idempotency_key");
    }
    send(s.pay(&"k".repeat(256), &b))
        .await
        .assert_problem(400, "invalid_idempotency_key");
    assert_eq!(
        send(s.pay(&"k".repeat(255), &body("order-255", "1.00", "tok_ok")))
            .await
            .status,
        201
    );
    let two = s.pay("a", &b).header("idempotency-key", "b");
    send(two)
        .await
        .assert_problem(400, "duplicate_idempotency_key");
    // Bytes no client library sends: control characters and NUL. 400, never 5xx.
    let auth = common::raw_auth();
    let json_body = r#"{"amount":{"value":"1.00","currency":"RUB"},"reference":"raw","payment_method":{"token":"tok_ok"}}"#;
    for key in [&b"a\x01b"[..], b"a\x00b", b"a\x7fb", b"a\xffb"] {
        let mut raw = format!("POST /v1/payments HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nIdempotency-Key: ", json_body.len()).into_bytes();
        raw.extend_from_slice(key);
        raw.extend_from_slice(b"\r\n\r\n");
        raw.extend_from_slice(json_body.as_bytes());
        assert_eq!(raw_status(&s.base, &raw).await, 400, "key {key:?}");
    }
    assert_eq!(s.charges("order-1").await.len(), 0);
    assert_eq!(s.charges("raw").await.len(), 0);
    let listed = send(s.get("/v1/payments?reference=order-1")).await;
    assert_eq!(listed.json()["data"], json!([]));
}

async fn credentials_are_required_and_checked(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-1", "1.00", "tok_ok");
    let post = || {
        s.http
            .post(s.url("/v1/payments"))
            .header("idempotency-key", "k")
            .json(&b)
    };
    let cases = [
        post(),
        post().basic_auth(common::SHOP, Some("wrong")),
        post().basic_auth("no-such-shop", Some(common::SECRET)),
        post().basic_auth(common::SHOP, None::<&str>),
        post().bearer_auth(common::SECRET),
        post().header("authorization", "Basic !!!notbase64"),
    ];
    for request in cases {
        let answer = send(request).await;
        answer.assert_problem(401, "unauthorized");
        assert!(
            answer
                .header("www-authenticate")
                .unwrap()
                .starts_with("Basic")
        );
    }
    assert_eq!(s.ledger_len().await, 0);
    // A rejected request left nothing against its key: the fixed retry executes.
    assert_eq!(send(s.pay("k", &b)).await.status, 201);
}

async fn bad_bodies_are_rejected_before_anything_runs(backend: Backend) {
    let s = TestService::start(backend).await;
    let auth = |r: reqwest::RequestBuilder| {
        r.basic_auth(common::SHOP, Some(common::SECRET))
            .header("idempotency-key", "k")
    };
    // Refused on the declared length, before the body is read. (Sending the body
    // too would race the server's early close against the client's write.)
    let declared = format!(
        "POST /v1/payments HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: k\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        common::raw_auth(),
        70 * 1024
    );
    let (status, text) = raw_answer(&s.base, declared.as_bytes()).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("application/problem+json") && text.contains("payload_too_large"));
    let not_json = auth(s.http.post(s.url("/v1/payments")))
        .header("content-type", "text/plain")
        .body("{}");
    send(not_json)
        .await
        .assert_problem(415, "unsupported_media_type");
    let no_type = auth(s.http.post(s.url("/v1/payments"))).body("{}");
    send(no_type)
        .await
        .assert_problem(415, "unsupported_media_type");
    let broken = auth(s.http.post(s.url("/v1/payments")))
        .header("content-type", "application/json")
        .body("{\"amount\":");
    send(broken).await.assert_problem(400, "malformed_json");
    let invalid = [
        (
            json!({"amount": {"value": 1500.0, "currency": "RUB"}, "reference": "o", "payment_method": {"token": "tok_ok"}}),
            "invalid_request",
        ),
        (
            json!({"amount": {"value": "1500.00", "currency": "RUB"}, "payment_method": {"token": "tok_ok"}}),
            "invalid_request",
        ),
        (
            json!({"amount": {"value": "1.00", "currency": "RUB"}, "reference": "o", "payment_method": {"token": "tok_ok"}, "extra": 1}),
            "invalid_request",
        ),
        (body("o", "-1.00", "tok_ok"), "invalid_amount"),
        (body("o", "0", "tok_ok"), "invalid_amount"),
        (body("o", "1.001", "tok_ok"), "invalid_amount"),
        (body("o", "1e3", "tok_ok"), "invalid_amount"),
        (
            json!({"amount": {"value": "1.00", "currency": "ZZZ"}, "reference": "o", "payment_method": {"token": "tok_ok"}}),
            "unsupported_currency",
        ),
        (body("", "1.00", "tok_ok"), "invalid_request"),
        (body("o", "1.00", "tok with space"), "invalid_request"),
        (json!([1, 2]), "invalid_request"),
    ];
    for (bad, code) in invalid {
        send(auth(s.http.post(s.url("/v1/payments"))).json(&bad))
            .await
            .assert_problem(422, code);
    }
    assert_eq!(s.ledger_len().await, 0, "nothing was charged");
    // Nothing was stored against the key either: a corrected request executes.
    assert_eq!(
        send(s.pay("k", &body("o", "1.00", "tok_ok"))).await.status,
        201
    );
}

async fn keys_and_payments_belong_to_one_shop(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-1", "1500.00", "tok_ok");
    let a = send(s.pay("shared-key", &b)).await;
    assert_eq!(a.status, 201);
    let other = s
        .http
        .post(s.url("/v1/payments"))
        .basic_auth(OTHER_SHOP, Some(OTHER_SECRET))
        .header("idempotency-key", "shared-key")
        .json(&b);
    let b_answer = send(other).await;
    assert_eq!(
        b_answer.status, 201,
        "shop B's key is its own, never A's replay"
    );
    assert!(!b_answer.replayed());
    assert_eq!(b_answer.json()["shop_id"], OTHER_SHOP);
    assert_ne!(b_answer.json()["id"], a.json()["id"]);
    let id = a.json()["id"].as_str().unwrap().to_owned();
    let peek = s
        .http
        .get(s.url(&format!("/v1/payments/{id}")))
        .basic_auth(OTHER_SHOP, Some(OTHER_SECRET));
    send(peek).await.assert_problem(404, "not_found");
    let list = s
        .http
        .get(s.url("/v1/payments?reference=order-1"))
        .basic_auth(OTHER_SHOP, Some(OTHER_SECRET));
    let list = send(list).await.json();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert_eq!(list["data"][0]["shop_id"], OTHER_SHOP);
}

async fn payments_can_be_read_back(backend: Backend) {
    let s = TestService::start(backend).await;
    let created = send(s.pay("k", &body("order-1", "1500.00", "tok_ok"))).await;
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let got = send(s.get(&format!("/v1/payments/{id}"))).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json(), created.json());
    let list = send(s.get("/v1/payments?reference=order-1")).await;
    assert_eq!(
        list.json(),
        json!({"object": "list", "data": [created.json()], "has_more": false})
    );
    send(s.get("/v1/payments/pay_00000000000000000000000000000000"))
        .await
        .assert_problem(404, "not_found");
    send(s.get("/v1/payments/not-an-id"))
        .await
        .assert_problem(404, "not_found");
    let all = send(s.get("/v1/payments")).await;
    assert_eq!(
        all.json(),
        json!({"object": "list", "data": [created.json()], "has_more": false})
    );
    send(s.get("/v1/nothing-here"))
        .await
        .assert_problem(404, "not_found");
    send(s.http.delete(s.url("/v1/payments")))
        .await
        .assert_problem(405, "method_not_allowed");
}

async fn health_and_readiness(backend: Backend) {
    let s = TestService::start(backend).await;
    assert_eq!(
        send(s.http.get(s.url("/healthz"))).await.json(),
        json!({"status": "ok"})
    );
    assert_eq!(
        send(s.http.get(s.url("/readyz"))).await.json(),
        json!({"status": "ready"})
    );
    s.break_store().await;
    send(s.http.get(s.url("/readyz")))
        .await
        .assert_problem(503, "store_unavailable");
    assert_eq!(send(s.http.get(s.url("/healthz"))).await.status, 200);
}

async fn an_unreachable_store_is_503_and_nothing_is_charged(backend: Backend) {
    let s = TestService::start(backend).await;
    s.break_store().await;
    let answer = send(s.pay("k", &body("order-1", "1500.00", "tok_ok"))).await;
    answer.assert_problem(503, "store_unavailable");
    assert!(answer.header("retry-after").is_some());
    assert_eq!(s.ledger_len().await, 0, "fail closed: nothing executed");
}

on_both_stores!(
    first_request_is_201_and_a_repeat_is_a_byte_identical_replay,
    a_reserialised_body_is_the_same_request,
    the_same_key_with_another_body_is_422_and_executes_nothing,
    a_repeat_while_the_first_runs_is_409_with_retry_after,
    concurrent_duplicates_charge_once,
    a_decline_is_definite_and_replayed,
    a_lost_acquirer_answer_is_202_then_resolved_by_retry,
    a_new_key_for_a_paid_order_returns_the_payment,
    a_new_key_for_a_paid_order_with_another_amount_is_409,
    an_order_pending_with_another_amount_is_409_until_it_is_free,
    a_new_key_for_an_order_in_flight_is_202_until_it_settles,
    a_key_linked_to_a_payment_that_declines_gets_its_own_attempt,
    an_acquirer_slower_than_its_timeout_is_pending_then_resolved,
    an_expired_key_cannot_pay_an_order_twice,
    bad_keys_are_400_and_store_nothing,
    credentials_are_required_and_checked,
    bad_bodies_are_rejected_before_anything_runs,
    keys_and_payments_belong_to_one_shop,
    payments_can_be_read_back,
    health_and_readiness,
    an_unreachable_store_is_503_and_nothing_is_charged,
);
