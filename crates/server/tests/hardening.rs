//! Hostile input, over real HTTP on both stores (issue 13): every route with
//! odd path bytes, bad queries, wrong methods and media types, oversized,
//! truncated and badly framed bodies, duplicate JSON members, amounts more
//! precise than their currency, unknown simulator tokens, and acquirer
//! webhooks built to burn CPU. Every answer the API gives is
//! `application/problem+json` with a code from the table in docs/api.md and
//! that code's status, and nothing is stored or charged.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chargeonce_core::webhook::{SIGNATURE_HEADER, WebhookSecret, sign};
use chargeonce_core::{IdempotencyKey, PaymentId, ShopId};
use chargeonce_testkit::on_both_stores;
use common::{Answer, Backend, SHOP, TestService, WEBHOOK_SECRET, body, raw_auth, send};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// Every route of `chargeonce_server::router` and its methods
/// (`the_route_table_is_the_routers` keeps it in step with lib.rs).
const ROUTES: &[(&str, &[&str])] = &[
    ("/v1/payments", &["GET", "POST"]),
    ("/v1/payments/{id}", &["GET"]),
    ("/v1/payments/{id}/history", &["GET"]),
    ("/v1/payments/{id}/cancel", &["POST"]),
    ("/v1/payments/{id}/refunds", &["GET", "POST"]),
    ("/v1/payments/{id}/captures", &["GET", "POST"]),
    ("/v1/payments/{id}/void", &["POST"]),
    ("/v1/captures/{id}", &["GET"]),
    ("/v1/refunds", &["GET"]),
    ("/v1/refunds/{id}", &["GET"]),
    ("/v1/idempotency-keys/{key}", &["GET"]),
    ("/v1/events", &["GET"]),
    ("/v1/events/{id}", &["GET"]),
    ("/v1/events/{id}/resend", &["POST"]),
    ("/v1/api-keys", &["GET", "POST"]),
    ("/v1/api-keys/{id}", &["GET"]),
    ("/v1/api-keys/{id}/roll", &["POST"]),
    ("/v1/api-keys/{id}/revoke", &["POST"]),
    ("/v1/webhook-endpoints", &["GET", "POST"]),
    ("/v1/webhook-endpoints/{id}", &["GET", "POST", "DELETE"]),
    ("/v1/webhook-endpoints/{id}/roll-secret", &["POST"]),
    ("/v1/webhooks/acquirer", &["POST"]),
    ("/healthz", &["GET"]),
    ("/readyz", &["GET"]),
];

/// Ids no resource can have: invalid UTF-8, overlong encodings, encoded
/// surrogates, code points past U+10FFFF, NUL, broken escapes, a long one.
fn hostile_ids() -> Vec<String> {
    let mut ids: Vec<String> = [
        "pay_%ff",
        "%ff",
        "%C0%AE",
        "%C0%80",
        "%E0%80%AF",
        "%ED%A0%80",
        "%F4%90%80%80",
        "%F8%88%80%80%80",
        "pay_%00",
        "pay_%zz",
        "pay_%",
        "pay_%2F..%2F..",
        "%C3%A9",
        "evt_%FE%FF",
        "re_%80",
    ]
    .map(str::to_owned)
    .to_vec();
    ids.push("a".repeat(4000));
    ids
}

/// The problem codes of docs/api.md's table, with their statuses (`None`:
/// the code goes with any status, `http_error`).
fn documented_codes() -> HashMap<String, Option<u16>> {
    let doc = include_str!("../../../docs/api.md");
    let table = doc
        .split("| status | code | when |")
        .nth(1)
        .expect("docs/api.md has the problem code table");
    let mut codes = HashMap::new();
    for line in table.lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let status: Option<u16> = match cells[1] {
            "*any*" => None,
            status => Some(status.parse().unwrap()),
        };
        let code = cells[2].trim_matches('`').to_owned();
        codes.insert(code, status);
    }
    assert!(codes.len() > 20, "{codes:?}");
    codes
}

/// An answer read off a raw socket.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Writes `request` (and half-closes when `close_write`), reads the answer.
async fn raw(base: &str, request: &[u8], close_write: bool) -> Raw {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    // The server may answer and close before all of it is written.
    let _ = stream.write_all(request).await;
    if close_write {
        let _ = stream.shutdown().await;
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(out.len());
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = out.get(split + 4..).unwrap_or_default().to_vec();
    if let Some(len) = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.truncate(len);
    }
    Raw {
        status,
        headers,
        body,
    }
}

/// A request as bytes: `Connection: close`, shop A's credentials unless
/// `auth` is false, an `Idempotency-Key`, and `body` with its length.
fn request(method: &str, target: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = format!(
        "{method} {target} HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: hostile-key\r\n\
         {extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        raw_auth(),
        body.len()
    )
    .into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

const JSON: &str = "Content-Type: application/json\r\n";

/// Asserts a documented problem: the media type, a code of the table, the
/// status the table gives it, and (where given) the expected code.
fn assert_documented(
    codes: &HashMap<String, Option<u16>>,
    what: &str,
    answer: &Raw,
    status: u16,
    code: &str,
) {
    assert_eq!(
        answer.status,
        status,
        "{what}: {answer:?} {}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json"),
        "{what}: {answer:?}"
    );
    if answer.body.is_empty() {
        return; // HEAD
    }
    let problem: Value =
        serde_json::from_slice(&answer.body).unwrap_or_else(|e| panic!("{what}: {e}: {answer:?}"));
    assert_eq!(problem["code"], code, "{what}: {problem}");
    assert_eq!(problem["status"], status, "{what}: {problem}");
    assert_eq!(
        codes.get(code),
        Some(&Some(status)),
        "{what}: `{code}` is not in docs/api.md's table with status {status}"
    );
    assert_eq!(problem["type"], format!("urn:chargeonce:problem:{code}"));
    assert!(problem["title"].is_string() && problem["detail"].is_string());
}

/// Nothing stored, nothing charged: no key, no payment, an empty ledger.
async fn assert_nothing_happened(s: &TestService) {
    let shop = ShopId::new(SHOP).unwrap();
    let key = IdempotencyKey::new("hostile-key").unwrap();
    assert!(s.store.key(&shop, &key).await.unwrap().is_none());
    let payments = s
        .store
        .payments_created_between(
            OffsetDateTime::UNIX_EPOCH,
            OffsetDateTime::now_utc() + Duration::from_secs(3600),
            None,
            100,
        )
        .await
        .unwrap();
    assert!(payments.is_empty(), "{payments:?}");
    assert_eq!(s.ledger_len().await, 0, "nothing charged");
}

async fn every_route_answers_hostile_input_with_a_problem(backend: Backend) {
    let s = TestService::start(backend).await;
    let codes = documented_codes();
    let a_payment_id = PaymentId::generate();
    let a_payment_id = a_payment_id.as_str();

    // Odd bytes in every path parameter, with every method the route takes:
    // the id names nothing, as any unknown id: 404 not_found.
    for (path, methods) in ROUTES
        .iter()
        .filter(|(p, _)| p.contains("{id}") || p.contains("{key}"))
    {
        for method in *methods {
            for id in hostile_ids() {
                let target = path.replace("{id}", &id).replace("{key}", &id);
                let what = format!("{method} {}", &target[..target.len().min(80)]);
                let answer = raw(&s.base, &request(method, &target, JSON, b"{}"), false).await;
                assert_documented(&codes, &what, &answer, 404, "not_found");
            }
        }
    }

    // Every method a route does not take: 405, whatever its id.
    for (path, methods) in ROUTES {
        for method in [
            "GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "HEAD",
        ] {
            if methods.contains(&method) || (method == "HEAD" && methods.contains(&"GET")) {
                continue;
            }
            for id in [a_payment_id, "pay_%ff"] {
                let target = path.replace("{id}", id);
                let what = format!("{method} {target}");
                let answer = raw(&s.base, &request(method, &target, JSON, b"{}"), false).await;
                assert_documented(&codes, &what, &answer, 405, "method_not_allowed");
            }
        }
    }

    // Unknown routes, odd bytes included: 404.
    for target in [
        "/v1/%ff",
        "/v1/payments/x/%C0%AE",
        "/%ED%A0%80",
        "/v2/payments",
    ] {
        let answer = raw(&s.base, &request("GET", target, "", b""), false).await;
        assert_documented(&codes, target, &answer, 404, "not_found");
    }

    // Queries: only well-formed UTF-8, only the parameters a list takes.
    let bad_queries = [
        "/v1/events?limit=%ff",
        "/v1/events?limit=abc",
        "/v1/events?limit=-1",
        "/v1/events?limit=0",
        "/v1/events?limit=101",
        "/v1/events?limit=1&limit=2",
        "/v1/events?type=%ff",
        "/v1/events?type=payment.refunded",
        "/v1/events?starting_after=%C0%AE",
        "/v1/events?starting_after=pay_x",
        "/v1/events?bogus=1",
    ];
    for target in bad_queries {
        let answer = raw(&s.base, &request("GET", target, "", b""), false).await;
        assert_documented(&codes, target, &answer, 422, "invalid_request");
    }
    // The cursor lists answer bad parameters with 400s.
    let bad_list_queries = [
        "/v1/payments?reference=%ff",
        "/v1/payments?reference=%C0%AE",
        "/v1/payments?reference=%ED%A0%80",
        "/v1/payments?reference=%zz",
        "/v1/payments?reference=%",
        "/v1/payments?reference=a&reference=b",
        "/v1/payments?reference=a&unknown=1",
        "/v1/payments?%ff=a",
        "/v1/payments?reference=",
        "/v1/payments?limit=0",
        "/v1/payments?limit=101",
        "/v1/payments?status=refunded",
        "/v1/payments?created_lt=today",
        "/v1/refunds?limit=-1",
        "/v1/refunds?bogus=1",
    ];
    for target in bad_list_queries {
        let answer = raw(&s.base, &request("GET", target, "", b""), false).await;
        assert_documented(&codes, target, &answer, 400, "invalid_parameter");
    }
    for target in [
        "/v1/payments?starting_after=pay_x",
        "/v1/payments?ending_before=%C3%A9",
        "/v1/refunds?starting_after=pay_x",
    ] {
        let answer = raw(&s.base, &request("GET", target, "", b""), false).await;
        assert_documented(&codes, target, &answer, 400, "invalid_cursor");
    }

    // Bodies of the routes that take one.
    let refunds = format!("/v1/payments/{a_payment_id}/refunds");
    for target in ["/v1/payments", refunds.as_str()] {
        for content_type in [
            "",
            "Content-Type: text/plain\r\n",
            "Content-Type: application/jsonx\r\n",
            "Content-Type: application/x-www-form-urlencoded\r\n",
            "Content-Type: multipart/form-data; boundary=x\r\n",
        ] {
            let what = format!("POST {target} {content_type:?}");
            let answer = raw(
                &s.base,
                &request("POST", target, content_type, b"{}"),
                false,
            )
            .await;
            assert_documented(&codes, &what, &answer, 415, "unsupported_media_type");
        }
        // Declared over the limit: refused before the body is read.
        let oversized = format!(
            "POST {target} HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: hostile-key\r\n{JSON}\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            raw_auth(),
            70 * 1024
        );
        let answer = raw(&s.base, oversized.as_bytes(), false).await;
        assert_documented(&codes, "declared", &answer, 413, "payload_too_large");
        // Chunked over the limit: cut at the limit.
        let mut chunked = format!(
            "POST {target} HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: hostile-key\r\n{JSON}\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            raw_auth(),
        )
        .into_bytes();
        for _ in 0..70 {
            chunked.extend_from_slice(b"400\r\n");
            chunked.extend_from_slice(&[b' '; 1024]);
            chunked.extend_from_slice(b"\r\n");
        }
        let answer = raw(&s.base, &chunked, false).await;
        assert_documented(&codes, "chunked", &answer, 413, "payload_too_large");
        // Truncated: the client stops before the declared length.
        let truncated = format!(
            "POST {target} HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: hostile-key\r\n{JSON}\
             Content-Length: 100\r\nConnection: close\r\n\r\n{{\"amount\":",
            raw_auth(),
        );
        let answer = raw(&s.base, truncated.as_bytes(), true).await;
        assert_documented(&codes, "truncated", &answer, 400, "bad_request");
        // Broken chunked framing.
        let broken = format!(
            "POST {target} HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: hostile-key\r\n{JSON}\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n",
            raw_auth(),
        );
        let answer = raw(&s.base, broken.as_bytes(), false).await;
        assert_documented(&codes, "broken chunks", &answer, 400, "bad_request");
        // Not JSON, and JSON with a member twice, at the top or nested.
        for bad in [
            r#"{"amount":"#,
            "\u{feff}{}",
            r#"{"amount":{"value":"1.00","currency":"RUB"},"amount":{"value":"1.00","currency":"RUB"}}"#,
            r#"{"amount":{"value":"1.00","value":"2.00","currency":"RUB"}}"#,
        ] {
            let answer = raw(
                &s.base,
                &request("POST", target, JSON, bad.as_bytes()),
                false,
            )
            .await;
            assert_documented(&codes, bad, &answer, 400, "malformed_json");
        }
    }

    // Without credentials, every shop route is 401 before it looks at anything.
    for (path, methods) in ROUTES
        .iter()
        .filter(|(p, _)| p.starts_with("/v1/p") || p.starts_with("/v1/r") || p.starts_with("/v1/e"))
    {
        for method in *methods {
            let target = path.replace("{id}", "pay_%ff");
            let raw_request = format!(
                "{method} {target} HTTP/1.1\r\nHost: x\r\n{JSON}Content-Length: 2\r\n\
                 Connection: close\r\n\r\n{{}}"
            );
            let answer = raw(&s.base, raw_request.as_bytes(), false).await;
            assert_documented(&codes, &target, &answer, 401, "unauthorized");
        }
    }

    // What hyper itself refuses while parsing (a bad Content-Length, an
    // unknown transfer coding, a raw non-ASCII byte in the target) never
    // reaches the API: a bare 400 and a closed connection, documented as
    // such in docs/api.md. Nothing is executed either.
    for framing in [
        "Content-Length: abc\r\n",
        "Content-Length: 2\r\nContent-Length: 3\r\n",
        "Content-Length: -1\r\n",
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked, gzip\r\n",
    ] {
        let request = format!(
            "POST /v1/payments HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: hostile-key\r\n{JSON}\
             {framing}Connection: close\r\n\r\n{{}}",
            raw_auth()
        );
        let answer = raw(&s.base, request.as_bytes(), false).await;
        assert_eq!(answer.status, 400, "{framing:?}: {answer:?}");
        assert!(answer.body.is_empty(), "{framing:?}: {answer:?}");
    }
    let mut odd_target = b"GET /v1/payments/pay_".to_vec();
    odd_target.extend_from_slice(b"\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(raw(&s.base, &odd_target, false).await.status, 400);

    assert_nothing_happened(&s).await;
    // Nothing was stored against the key: the request done right executes.
    let ok = raw(
        &s.base,
        &request(
            "POST",
            "/v1/payments",
            JSON,
            body("order-1", "1.00", "tok_ok").to_string().as_bytes(),
        ),
        false,
    )
    .await;
    assert_eq!(ok.status, 201, "{ok:?}");
    assert_eq!(s.ledger_len().await, 1);
}

/// The routes of the router (each from a handler in the OpenAPI document:
/// `api_routes` in lib.rs builds both) are the routes walked above.
#[test]
fn the_route_table_is_the_routers() {
    let spec = serde_json::to_value(chargeonce_server::openapi::document()).unwrap();
    let mut routed: Vec<(String, Vec<String>)> = spec["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, item)| {
            let mut methods: Vec<String> = item
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| ["get", "post", "put", "patch", "delete"].contains(&k.as_str()))
                .map(|k| k.to_uppercase())
                .collect();
            methods.sort_unstable();
            (path.clone(), methods)
        })
        .collect();
    routed.sort_unstable();
    let mut walked: Vec<(String, Vec<String>)> = ROUTES
        .iter()
        .map(|(p, methods)| {
            let mut methods: Vec<String> = methods.iter().map(|m| (*m).to_owned()).collect();
            methods.sort_unstable();
            ((*p).to_owned(), methods)
        })
        .collect();
    walked.sort_unstable();
    assert_eq!(routed, walked);
}

async fn duplicate_members_are_refused_at_any_depth(backend: Backend) {
    let s = TestService::start(backend).await;
    let pay = |json: &str| {
        s.http
            .post(s.url("/v1/payments"))
            .basic_auth(SHOP, Some(common::SECRET))
            .header("idempotency-key", "hostile-key")
            .header("content-type", "application/json")
            .body(json.to_owned())
    };
    let cases = [
        (
            r#"{"amount":{"value":"1500.00","currency":"RUB"},"amount":{"value":"1.00","currency":"RUB"},"reference":"order-1","payment_method":{"token":"tok_ok"}}"#,
            "\"amount\"",
        ),
        (
            r#"{"amount":{"value":"1500.00","currency":"RUB"},"reference":"order-1","reference":"order-2","payment_method":{"token":"tok_ok"}}"#,
            "\"reference\"",
        ),
        (
            r#"{"amount":{"value":"1500.00","currency":"RUB","value":"1.00"},"reference":"order-1","payment_method":{"token":"tok_ok"}}"#,
            "\"amount.value\"",
        ),
        (
            r#"{"amount":{"value":"1500.00","currency":"RUB"},"reference":"order-1","payment_method":{"token":"tok_ok","token":"tok_declined"}}"#,
            "\"payment_method.token\"",
        ),
        (
            r#"{"amount":{"value":"1500.00","currency":"RUB"},"reference":"order-1","payment_method":{"token":"tok_ok"},"reference":"order-1"}"#,
            "\"reference\"",
        ),
    ];
    for (json, named) in cases {
        let answer = send(pay(json)).await;
        answer.assert_problem(400, "malformed_json");
        let detail = answer.json()["detail"].as_str().unwrap().to_owned();
        assert!(
            detail.contains(&format!("duplicate member name {named}")),
            "{json}: {detail}"
        );
    }
    // A refund body too.
    let paid = send(s.pay("pay-key", &body("order-9", "10.00", "tok_ok"))).await;
    assert_eq!(paid.status, 201);
    let id = paid.json()["id"].as_str().unwrap().to_owned();
    let refund = s
        .http
        .post(s.url(&format!("/v1/payments/{id}/refunds")))
        .basic_auth(SHOP, Some(common::SECRET))
        .header("idempotency-key", "refund-key")
        .header("content-type", "application/json")
        .body(r#"{"amount":{"value":"1.00","currency":"RUB"},"amount":{"value":"10.00","currency":"RUB"}}"#);
    send(refund).await.assert_problem(400, "malformed_json");
    let charges = s.sim.ledger().await.unwrap();
    assert_eq!(charges.len(), 1, "only the good payment");
    assert_eq!(charges[0].amount.minor_units(), 1000);
    assert!(s.sim.refunds().await.unwrap().is_empty());
    assert!(
        s.store
            .key(
                &ShopId::new(SHOP).unwrap(),
                &IdempotencyKey::new("hostile-key").unwrap()
            )
            .await
            .unwrap()
            .is_none()
    );
}

async fn amounts_more_precise_than_their_currency_are_refused(backend: Backend) {
    let s = TestService::start(backend).await;
    for (value, currency, minor_units) in [
        ("1500.00", "JPY", 0),
        ("1500.0", "JPY", 0),
        ("1.5000", "KWD", 3),
        ("1.000", "RUB", 2),
        ("1500.000", "RUB", 2),
    ] {
        let b = json!({
            "amount": {"value": value, "currency": currency},
            "reference": "order-1",
            "payment_method": {"token": "tok_ok"},
        });
        let answer = send(s.pay("k", &b)).await;
        answer.assert_problem(422, "invalid_amount");
        let detail = answer.json()["detail"].as_str().unwrap().to_owned();
        assert!(
            detail.contains(&format!(
                "{currency} amounts have at most {minor_units} decimal places"
            )),
            "{value} {currency}: {detail}"
        );
    }
    assert_eq!(s.ledger_len().await, 0);
    // Exactly the minor units, or fewer, are fine.
    for (n, (value, currency, shown)) in [
        ("1500", "JPY", "1500"),
        ("1.5", "KWD", "1.500"),
        ("1.500", "KWD", "1.500"),
        ("1500.00", "RUB", "1500.00"),
    ]
    .into_iter()
    .enumerate()
    {
        let b = json!({
            "amount": {"value": value, "currency": currency},
            "reference": format!("order-ok-{n}"),
            "payment_method": {"token": "tok_ok"},
        });
        let answer = send(s.pay(&format!("ok-{n}"), &b)).await;
        assert_eq!(answer.status, 201, "{value} {currency}");
        assert_eq!(answer.json()["amount"]["value"], shown);
    }
    // A refund's amount follows the same rule.
    let paid = send(s.pay("pay-rub", &body("order-rub", "10.00", "tok_ok"))).await;
    let id = paid.json()["id"].as_str().unwrap().to_owned();
    let refund = s
        .http
        .post(s.url(&format!("/v1/payments/{id}/refunds")))
        .basic_auth(SHOP, Some(common::SECRET))
        .header("idempotency-key", "refund-1")
        .json(&json!({"amount": {"value": "1.000", "currency": "RUB"}}));
    send(refund).await.assert_problem(422, "invalid_amount");
    assert_eq!(s.ledger_len().await, 5);
}

async fn an_unknown_simulator_token_is_declined(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-typo", "10.00", "tok_declinde");
    let first = send(s.pay("typo", &b)).await;
    first.assert_problem(402, "payment_declined");
    assert_eq!(first.json()["decline_code"], "unknown_token");
    assert_eq!(first.json()["payment"]["status"], "declined");
    let again = send(s.pay("typo", &b)).await;
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes);
    let charges = s.charges("order-typo").await;
    assert_eq!(charges.len(), 1);
    assert_eq!(
        charges[0].status,
        chargeonce_acquirer::ChargeStatus::Declined
    );
    assert_eq!(charges[0].decline_code.as_deref(), Some("unknown_token"));
    // Every documented token still does what it says.
    for (n, (token, status)) in [
        ("tok_ok", 201),
        ("tok_declined", 402),
        ("tok_insufficient_funds", 402),
        ("tok_timeout", 202),
    ]
    .into_iter()
    .enumerate()
    {
        let answer = send(s.pay(&format!("k-{n}"), &body(&format!("o-{n}"), "1.00", token))).await;
        assert_eq!(answer.status, status, "{token}");
    }
}

/// A signature header of `parts` short `v1=` parts, timestamped now.
fn flood(parts: usize) -> String {
    let now = OffsetDateTime::now_utc().unix_timestamp();
    format!("t={now}{}", ",v1=00".repeat(parts))
}

fn event_body(reference: &str) -> String {
    json!({
        "id": "evt_flood", "type": "payment.succeeded", "created": 1,
        "data": {"charge_id": "ch_x", "acquirer_key": "chargeonce-pay_x", "shop_id": SHOP,
                 "payment_id": "pay_x", "reference": reference,
                 "amount": {"value": "1.00", "currency": "RUB"}, "decline_code": null}
    })
    .to_string()
}

async fn webhook(s: &TestService, signature: &str, body: Vec<u8>) -> Answer {
    send(
        s.http
            .post(s.url("/v1/webhooks/acquirer"))
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, signature)
            .body(body),
    )
    .await
}

async fn a_webhook_built_to_burn_cpu_is_refused_at_once(backend: Backend) {
    let s = TestService::start(backend).await;
    let codes = documented_codes();
    let started = Instant::now();
    // A payment sent at the same time completes.
    let payment = {
        let request = s.pay("during-flood", &body("order-flood", "10.00", "tok_ok"));
        tokio::spawn(async move { Answer::of(request.send().await.unwrap()).await })
    };
    // 10 000 v1 parts over a 1 MiB body: refused on the declared size,
    // before the body is read.
    let huge = format!(
        "POST /v1/webhooks/acquirer HTTP/1.1\r\nHost: x\r\n{JSON}{SIGNATURE_HEADER}: {}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        flood(10_000),
        1 << 20
    );
    let answer = raw(&s.base, huge.as_bytes(), false).await;
    assert_documented(&codes, "1 MiB", &answer, 413, "payload_too_large");
    // The same, chunked: cut at 64 KiB.
    let one = format!(
        "t={},v1={}",
        OffsetDateTime::now_utc().unix_timestamp(),
        "0".repeat(64)
    );
    let mut chunked = format!(
        "POST /v1/webhooks/acquirer HTTP/1.1\r\nHost: x\r\n{JSON}{SIGNATURE_HEADER}: {one}\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )
    .into_bytes();
    for _ in 0..70 {
        chunked.extend_from_slice(b"400\r\n");
        chunked.extend_from_slice(&[b' '; 1024]);
        chunked.extend_from_slice(b"\r\n");
    }
    let answer = raw(&s.base, &chunked, false).await;
    assert_documented(&codes, "chunked", &answer, 413, "payload_too_large");
    // 10 000 parts over an event: malformed, refused without a MAC.
    let answer = webhook(&s, &flood(10_000), event_body("order-flood").into_bytes()).await;
    answer.assert_problem(400, "missing_signature");
    // Eight wrong signatures over a 60 KiB body: one MAC, invalid.
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let eight = format!("t={now}{}", format!(",v1={}", "ab".repeat(32)).repeat(8));
    let padded = format!("{}{}", event_body("order-flood"), " ".repeat(60 * 1024));
    webhook(&s, &eight, padded.clone().into_bytes())
        .await
        .assert_problem(401, "invalid_signature");
    // Nine: over the cap.
    let nine = format!("t={now}{}", format!(",v1={}", "ab".repeat(32)).repeat(9));
    webhook(&s, &nine, padded.clone().into_bytes())
        .await
        .assert_problem(400, "missing_signature");
    // Signed right but an hour old: stale.
    let secret = WebhookSecret::new(WEBHOOK_SECRET);
    let stale = sign(&secret, now - 3600, padded.as_bytes());
    webhook(&s, &stale, padded.clone().into_bytes())
        .await
        .assert_problem(401, "stale_signature");
    // Signed right, with a member twice: read strictly.
    let twice = r#"{"id":"evt_2","id":"evt_3","type":"payment.succeeded"}"#;
    let signed = sign(&secret, now, twice.as_bytes());
    webhook(&s, &signed, twice.as_bytes().to_vec())
        .await
        .assert_problem(400, "malformed_json");
    let paid = tokio::time::timeout(Duration::from_secs(10), payment)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paid.status, 201);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a generous bound, not a benchmark: {:?}",
        started.elapsed()
    );
    assert_eq!(s.ledger_len().await, 1, "only the payment");
}

on_both_stores!(
    every_route_answers_hostile_input_with_a_problem,
    duplicate_members_are_refused_at_any_depth,
    amounts_more_precise_than_their_currency_are_refused,
    an_unknown_simulator_token_is_declined,
    a_webhook_built_to_burn_cpu_is_refused_at_once,
);
