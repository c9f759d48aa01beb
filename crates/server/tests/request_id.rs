//! `Request-Id` on every answer, `request_id` in every problem made for the
//! request (never in a stored answer's bytes), and in the request's log
//! lines, over real HTTP.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chargeonce_server::limits::{RateLimit, RequestLimits};
use chargeonce_testkit::on_both_stores;
use common::{Answer, Backend, TestService, body, raw_answer, send};
use serde_json::Value;

/// The answer's `Request-Id`; panics without one.
fn id_of(answer: &Answer) -> String {
    answer
        .header("request-id")
        .unwrap_or_else(|| panic!("no Request-Id on a {}", answer.status))
        .to_owned()
}

/// A generated id: a UUID v7.
fn assert_generated(id: &str) {
    let uuid = uuid::Uuid::parse_str(id).unwrap_or_else(|_| panic!("not a UUID: {id}"));
    assert_eq!(uuid.get_version_num(), 7, "{id}");
}

/// A problem made for this request: `request_id` is the header's.
fn assert_problem_with_id(answer: &Answer, status: u16, code: &str) -> String {
    answer.assert_problem(status, code);
    let id = id_of(answer);
    assert_eq!(answer.json()["request_id"], id.as_str(), "{code}");
    id
}

async fn stored_answers_keep_their_bytes_and_only_the_header_changes(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-1", "1500.00", "tok_ok");
    let first = send(s.pay("k-ok", &b)).await;
    assert_eq!(first.status, 201);
    let again = send(s.pay("k-ok", &b)).await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes, "a replay is byte-identical");
    let (a, b2) = (id_of(&first), id_of(&again));
    assert_generated(&a);
    assert_generated(&b2);
    assert_ne!(a, b2, "each request has its own id");
    assert!(first.json().get("request_id").is_none());

    // A decline is a stored problem: the key's answer, with no request_id in
    // its body, first or replayed.
    let declined = body("order-d", "5.00", "tok_declined");
    let first = send(s.pay("k-d", &declined)).await;
    first.assert_problem(402, "payment_declined");
    assert!(first.json().get("request_id").is_none(), "stored bytes");
    let again = send(s.pay("k-d", &declined)).await;
    assert_eq!(again.status, 402);
    assert!(again.replayed());
    assert_eq!(again.bytes, first.bytes);
    assert_ne!(id_of(&first), id_of(&again));

    // The client's own id on a replay: in the header only.
    let mine = send(
        s.pay("k-d", &declined)
            .header("request-id", "client-replay-1"),
    )
    .await;
    assert!(mine.replayed());
    assert_eq!(mine.bytes, first.bytes);
    assert_eq!(id_of(&mine), "client-replay-1");

    // An answer made for this request (not stored) carries it in the body.
    let reused = send(s.pay("k-d", &body("order-d", "6.00", "tok_declined"))).await;
    assert_problem_with_id(&reused, 422, "idempotency_key_reused");
}

async fn every_refusal_carries_the_id_in_header_and_body(backend: Backend) {
    let s = TestService::start(backend).await;
    let b = body("order-1", "1.00", "tok_ok");

    let unknown_route = send(s.get("/v1/nothing-here")).await;
    assert_problem_with_id(&unknown_route, 404, "not_found");
    let unknown_payment = send(s.get("/v1/payments/pay_nope")).await;
    assert_problem_with_id(&unknown_payment, 404, "not_found");
    let wrong_method = send(s.http.delete(s.url("/v1/payments"))).await;
    assert_problem_with_id(&wrong_method, 405, "method_not_allowed");
    let no_key = send(
        s.http
            .post(s.url("/v1/payments"))
            .basic_auth(common::SHOP, Some(common::SECRET))
            .json(&b),
    )
    .await;
    assert_problem_with_id(&no_key, 400, "missing_idempotency_key");
    let no_auth = send(
        s.http
            .post(s.url("/v1/payments"))
            .header("idempotency-key", "k")
            .json(&b),
    )
    .await;
    assert_problem_with_id(&no_auth, 401, "unauthorized");
    let bad_amount = send(s.pay("k-amount", &body("o", "-1.00", "tok_ok"))).await;
    assert_problem_with_id(&bad_amount, 422, "invalid_amount");
    // The server answers 413 without reading the body and closes the
    // connection: not one for the client's pool (a later request on it
    // would meet a broken pipe).
    let too_large = send(
        s.pay("k-big", &body(&"x".repeat(70 * 1024), "1.00", "tok_ok"))
            .header("connection", "close"),
    )
    .await;
    assert_problem_with_id(&too_large, 413, "payload_too_large");

    // The 413 on the declared length alone, over a raw socket.
    let declared = format!(
        "POST /v1/payments HTTP/1.1\r\nHost: x\r\n{}Idempotency-Key: k\r\n\
         Request-Id: raw-413\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        common::raw_auth(),
        70 * 1024
    );
    let (status, text) = raw_answer(&s.base, declared.as_bytes()).await;
    assert_eq!(status, 413, "{text}");
    assert!(
        text.to_ascii_lowercase().contains("request-id: raw-413"),
        "{text}"
    );
    assert!(text.contains(r#""request_id":"raw-413""#), "{text}");

    // Successes that are not stored have it too (in the header).
    let health = send(s.http.get(s.url("/healthz"))).await;
    assert_eq!(health.status, 200);
    assert_generated(&id_of(&health));
}

async fn a_client_id_is_echoed_when_well_formed_and_replaced_otherwise(backend: Backend) {
    let s = TestService::start(backend).await;
    let mine = "trace:2026-12-02_abc.123";
    let echoed = send(s.get("/v1/payments/pay_nope").header("request-id", mine)).await;
    assert_eq!(assert_problem_with_id(&echoed, 404, "not_found"), mine);
    let paid = send(
        s.pay("k", &body("o-1", "1.00", "tok_ok"))
            .header("request-id", mine),
    )
    .await;
    assert_eq!(paid.status, 201);
    assert_eq!(id_of(&paid), mine);

    let long = "x".repeat(129);
    for bad in ["has space", "semi;colon", "a,b", long.as_str()] {
        let answer = send(s.get("/v1/payments/pay_nope").header("request-id", bad)).await;
        let id = assert_problem_with_id(&answer, 404, "not_found");
        assert_generated(&id);
    }
    // Two ids: neither is taken.
    let twice = send(
        s.get("/v1/payments/pay_nope")
            .header("request-id", "one")
            .header("request-id", "two"),
    )
    .await;
    let id = assert_problem_with_id(&twice, 404, "not_found");
    assert_generated(&id);
}

/// 429 and 503 `request_timeout`, answered by the limits layer.
async fn limits_answers_carry_the_id(backend: Backend) {
    let s = TestService::builder(backend)
        .slow(Duration::from_secs(2))
        .state(|state| {
            state
                .with_rate_limit(RateLimit {
                    per_second: 1,
                    burst: 2,
                })
                .with_request_limits(RequestLimits {
                    request_timeout: Duration::from_millis(200),
                    body_timeout: Duration::from_secs(10),
                })
        })
        .start()
        .await;
    let slow = send(s.pay("k-slow", &body("o-slow", "1.00", "tok_slow"))).await;
    assert_problem_with_id(&slow, 503, "request_timeout");
    let mut limited = None;
    for i in 0..5 {
        let answer = send(s.get(&format!("/v1/payments/pay_{i}"))).await;
        if answer.status == 429 {
            limited = Some(answer);
            break;
        }
    }
    let limited = limited.expect("a 429 within five requests at 1/s with a burst of 2");
    assert_problem_with_id(&limited, 429, "rate_limited");
}

on_both_stores!(
    stored_answers_keep_their_bytes_and_only_the_header_changes,
    every_refusal_carries_the_id_in_header_and_body,
    a_client_id_is_echoed_when_well_formed_and_replaced_otherwise,
    limits_answers_carry_the_id,
);

/// Log lines, kept in memory.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn json(&self) -> Vec<Value> {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// Whether a JSON log line is inside the span of the request with this id.
fn in_request(line: &Value, id: &str) -> bool {
    line["spans"]
        .as_array()
        .is_some_and(|spans| spans.iter().any(|span| span["request_id"] == id))
}

/// The JSON log (as `chargeonce serve --log-format json` writes it: the
/// current span and the span list): every line of a request, the engine
/// task's included, carries its request_id, and no line shows the
/// credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_log_line_of_a_request_carries_its_id() {
    let lines = Lines::default();
    let writer = lines.clone();
    tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_span_list(true)
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .try_init()
        .unwrap();
    let s = TestService::start(Backend::Sqlite).await;
    let paid = send(
        s.pay("log-key", &body("o-log", "1.00", "tok_ok"))
            .header("request-id", "log-test-1"),
    )
    .await;
    assert_eq!(paid.status, 201);
    // The span's events are written before the answer leaves the server.
    let logged = lines.json();
    let mine: Vec<&Value> = logged
        .iter()
        .filter(|line| in_request(line, "log-test-1"))
        .collect();
    let message = |line: &&Value| line["fields"]["message"].as_str().unwrap_or("").to_owned();
    let messages: Vec<String> = mine.iter().map(message).collect();
    assert!(
        messages.iter().any(|m| m == "key claimed"),
        "the engine task's line is in the request's span: {messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("finished processing request")),
        "{messages:?}"
    );
    let span = &mine[0]["spans"][0];
    assert_eq!(span["name"], "request");
    assert_eq!(span["method"], "POST");
    assert_eq!(span["path"], "/v1/payments");
    let everything = serde_json::to_string(&logged).unwrap();
    assert!(
        !everything.contains(common::SECRET),
        "no credentials in logs"
    );
    // Neither the header (as a logged field or header map entry) nor its
    // value: the words of payment holds ("authorization") may appear in logs.
    let lower = everything.to_ascii_lowercase();
    assert!(
        !lower.contains("\"authorization\":") && !lower.contains("authorization: "),
        "no Authorization header in logs"
    );
    assert!(!lower.contains("basic "), "no Basic credentials in logs");
}
