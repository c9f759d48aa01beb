//! `Prefer: wait=N` (RFC 7240) on `POST /v1/payments`: a repeat that arrives
//! while the first request runs waits for its result instead of a 409.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use chargeonce_testkit::on_both_stores;
use common::{Backend, TestService, body, send};

/// Starts the first request (the acquirer is slow) and returns its task.
fn first_request(
    server: &TestService,
    key: &str,
    body: &serde_json::Value,
) -> tokio::task::JoinHandle<common::Answer> {
    let request = server.pay(key, body);
    tokio::spawn(send(request))
}

/// The repeat waits and gets the first answer, byte for byte, as a replay.
async fn a_repeat_waits_for_the_first_answer(backend: Backend) {
    let server = TestService::start(backend).await;
    let body = body("order-prefer-1", "1500.00", "tok_slow");
    let first = first_request(&server, "prefer-1", &body);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let repeat = send(server.pay("prefer-1", &body).header("prefer", "wait=10")).await;
    let first = first.await.unwrap();
    assert_eq!(first.status, 201);
    assert_eq!(
        repeat.status,
        201,
        "{}",
        String::from_utf8_lossy(&repeat.bytes)
    );
    assert!(repeat.replayed());
    assert_eq!(repeat.bytes, first.bytes, "the first answer, byte for byte");
    assert_eq!(repeat.header("preference-applied"), Some("wait=10"));
    assert_eq!(repeat.header("location"), first.header("location"));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(server.charges("order-prefer-1").await.len(), 1);
}

/// Without `Prefer`, or with a malformed one, the repeat gets 409 at once.
async fn without_a_valid_prefer_the_repeat_gets_409(backend: Backend) {
    let server = TestService::builder(backend)
        .slow(Duration::from_secs(4))
        .start()
        .await;
    let body = body("order-prefer-2", "1500.00", "tok_slow");
    let first = first_request(&server, "prefer-2", &body);
    tokio::time::sleep(Duration::from_millis(300)).await;
    for prefer in [
        None,
        Some("wait=soon"),
        Some("wait=0"),
        Some("respond-async"),
    ] {
        let started = Instant::now();
        let mut request = server.pay("prefer-2", &body);
        if let Some(prefer) = prefer {
            request = request.header("prefer", prefer);
        }
        let repeat = send(request).await;
        repeat.assert_problem(409, "request_in_progress");
        assert!(repeat.header("retry-after").is_some());
        assert_eq!(repeat.header("preference-applied"), None, "{prefer:?}");
        assert!(started.elapsed() < Duration::from_millis(900), "{prefer:?}");
    }
    assert_eq!(first.await.unwrap().status, 201);
}

/// A wait shorter than the first request: 409 once it is over, saying it waited.
async fn a_short_wait_ends_in_409(backend: Backend) {
    let server = TestService::builder(backend)
        .slow(Duration::from_secs(4))
        .start()
        .await;
    let body = body("order-prefer-3", "1500.00", "tok_slow");
    let first = first_request(&server, "prefer-3", &body);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let repeat = send(server.pay("prefer-3", &body).header("prefer", "wait=1")).await;
    let waited = started.elapsed();
    repeat.assert_problem(409, "request_in_progress");
    assert_eq!(repeat.header("preference-applied"), Some("wait=1"));
    // It waited its second, and no longer: the payment takes 4 s, and a wait
    // that ran on to its end would have been answered 201, not 409.
    assert!(waited >= Duration::from_millis(950), "waited {waited:?}");
    assert_eq!(first.await.unwrap().status, 201);
}

/// The first request ends without a final answer (the acquirer timed out:
/// 202 pending); the waiting repeat resumes it, as the client's retry would,
/// and answers with the final result. Still one charge.
async fn a_waiting_repeat_resumes_a_pending_payment(backend: Backend) {
    let server = TestService::builder(backend)
        .slow(Duration::from_secs(3))
        .acquirer_timeout(Duration::from_millis(600))
        .start()
        .await;
    let body = body("order-prefer-4", "1500.00", "tok_slow");
    let first = first_request(&server, "prefer-4", &body);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let repeat = send(server.pay("prefer-4", &body).header("prefer", "wait=10")).await;
    let first = first.await.unwrap();
    assert_eq!(
        first.status,
        202,
        "{}",
        String::from_utf8_lossy(&first.bytes)
    );
    assert_eq!(
        repeat.status,
        201,
        "{}",
        String::from_utf8_lossy(&repeat.bytes)
    );
    assert_eq!(repeat.json()["status"], "succeeded");
    assert_eq!(repeat.json()["id"], first.json()["id"]);
    assert_eq!(repeat.header("preference-applied"), Some("wait=10"));
    assert_eq!(server.charges("order-prefer-4").await.len(), 1);
}

/// A request that finds nothing running ignores the preference.
async fn prefer_on_a_first_request_changes_nothing(backend: Backend) {
    let server = TestService::start(backend).await;
    let body = body("order-prefer-5", "1500.00", "tok_ok");
    let first = send(server.pay("prefer-5", &body).header("prefer", "wait=5")).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.header("preference-applied"), None);
    let replay = send(server.pay("prefer-5", &body).header("prefer", "wait=5")).await;
    assert!(replay.replayed());
    assert_eq!(replay.bytes, first.bytes);
    assert_eq!(replay.header("preference-applied"), None);
}

on_both_stores!(
    a_repeat_waits_for_the_first_answer,
    without_a_valid_prefer_the_repeat_gets_409,
    a_short_wait_ends_in_409,
    a_waiting_repeat_resumes_a_pending_payment,
    prefer_on_a_first_request_changes_nothing,
);
