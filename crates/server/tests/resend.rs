//! The resend rule, end to end on both stores (issue 31): an acquirer,
//! idempotent on our key, answers a duplicate of a charge it is still
//! processing its own way (422, 409, 400 or 208, as providers do). The
//! client's retry must never be told "declined" while the first attempt may
//! still land, the merchant's new attempt for the order must not charge it
//! again, and the order ends with one charge.
//!
//! Before the rule, the retry's 422 was a refusal, the look-up right after
//! it found nothing yet, the payment was declined (402) and its order freed:
//! the merchant paid again under a new key (201), the first charge then
//! landed, and the person was charged twice.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_acquirer::{ChargeStatus, Faults, InFlightDuplicate};
use chargeonce_testkit::on_both_stores;
use common::{Answer, Backend, TestService, body, send};

/// `tok_late` records its charge 1.5 s after the request, whoever waits;
/// the engine gives up after 200 ms.
async fn service(backend: Backend, duplicate: InFlightDuplicate) -> TestService {
    let s = TestService::builder(backend)
        .slow(Duration::from_millis(1500))
        .engine(|config| chargeonce_core::EngineConfig {
            acquirer_timeout: Duration::from_millis(200),
            settle_window: Duration::from_secs(3),
            retry_after: Duration::from_millis(100),
            ..config
        })
        .start()
        .await;
    s.sim
        .set_faults(Faults {
            in_flight_duplicate: duplicate,
            ..Faults::default()
        })
        .unwrap();
    s
}

async fn a_refused_duplicate_of_a_charge_in_flight_never_frees_the_order(
    backend: Backend,
    duplicate: InFlightDuplicate,
) {
    let s = service(backend, duplicate).await;
    let order = body("order-late", "1500.00", "tok_late");

    let first = send(s.pay("key-1", &order)).await;
    assert_eq!(first.status, 202, "the acquirer is still processing");
    // The client's retry, while the first charge is in flight: the
    // acquirer answers the duplicate as the fault says.
    let retry = send(s.pay("key-1", &order)).await;
    assert_eq!(
        retry.status,
        202,
        "{duplicate:?}: a refused resend is not a decline: {}",
        String::from_utf8_lossy(&retry.bytes)
    );
    // The merchant, not told "declined", still tries another key: the order
    // has a live payment, so nothing is charged.
    let other = send(s.pay("key-2", &order)).await;
    assert_ne!(other.status, 201, "{duplicate:?}: the order is not free");
    assert_ne!(other.status, 402);

    // The first charge lands; the key ends with it.
    let paid = until_definite(&s, "key-1", &order).await;
    assert_eq!(
        paid.status,
        201,
        "{duplicate:?}: {}",
        String::from_utf8_lossy(&paid.bytes)
    );
    let charges = s.charges("order-late").await;
    let succeeded: Vec<_> = charges
        .iter()
        .filter(|c| c.status == ChargeStatus::Succeeded)
        .collect();
    assert_eq!(
        succeeded.len(),
        1,
        "{duplicate:?}: charged once: {charges:#?}"
    );
    assert_eq!(paid.json()["provider_payment_id"], succeeded[0].id.as_str());
    let again = send(s.pay("key-2", &order)).await;
    assert_eq!(again.status, 200, "key 2 links to the order's payment");
    assert_eq!(again.json()["id"], paid.json()["id"]);
    assert_eq!(s.charges("order-late").await.len(), 1, "nothing sent again");
}

/// Retries `key` until its answer is not 202 (at most 15 s).
async fn until_definite(s: &TestService, key: &str, order: &serde_json::Value) -> Answer {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let answer = send(s.pay(key, order)).await;
        if answer.status != 202 && answer.status != 409 {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still pending: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.bytes)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn a_bare_422(backend: Backend) {
    a_refused_duplicate_of_a_charge_in_flight_never_frees_the_order(
        backend,
        InFlightDuplicate::Unprocessable,
    )
    .await;
}

async fn a_409(backend: Backend) {
    a_refused_duplicate_of_a_charge_in_flight_never_frees_the_order(
        backend,
        InFlightDuplicate::Conflict,
    )
    .await;
}

async fn primers_400(backend: Backend) {
    a_refused_duplicate_of_a_charge_in_flight_never_frees_the_order(
        backend,
        InFlightDuplicate::BadRequest,
    )
    .await;
}

async fn an_empty_208(backend: Backend) {
    a_refused_duplicate_of_a_charge_in_flight_never_frees_the_order(
        backend,
        InFlightDuplicate::AlreadyReported,
    )
    .await;
}

/// A resumed attempt that cannot reach the acquirer says so, and that an
/// earlier attempt may have charged: never "nothing has been sent yet"
/// (issue 31: the first attempt's charge was recorded, its answer lost).
async fn a_resumed_attempt_that_reaches_nothing_says_an_earlier_one_may_have_charged(
    backend: Backend,
) {
    let s = TestService::start(backend).await;
    let order = body("order-lost", "15.00", "tok_timeout");
    let lost = send(s.pay("lost-1", &order)).await;
    assert_eq!(lost.status, 202, "the first answer is lost");
    assert_eq!(s.charges("order-lost").await.len(), 1, "but it charged");
    // The acquirer is gone now: the retry reaches nothing.
    s.sim.close().await;
    let retry = send(s.pay("lost-1", &order)).await;
    assert_eq!(
        retry.status,
        503,
        "{}",
        String::from_utf8_lossy(&retry.bytes)
    );
    let problem = retry.json();
    assert_eq!(problem["code"], "acquirer_unavailable");
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        !detail.contains("nothing has been sent yet"),
        "the first attempt did reach it: {detail}"
    );
    assert!(detail.contains("may have charged"), "{detail}");
    assert!(detail.contains("this attempt sent nothing"), "{detail}");
}

on_both_stores!(
    a_bare_422,
    a_409,
    primers_400,
    an_empty_208,
    a_resumed_attempt_that_reaches_nothing_says_an_earlier_one_may_have_charged,
);
