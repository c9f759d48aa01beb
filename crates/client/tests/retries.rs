//! Every retry path of the client against a real server (PostgreSQL and
//! SQLite), with a fault proxy where the network has to misbehave. Each test
//! ends by counting the acquirer's ledger: one charge per intent.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use chargeonce_client::{
    AttemptAnswer, Code, CreateRefund, Error, FailureKind, IdempotencyKey, Money, Outcome,
    PayResult, PaymentStatus, ProblemCode, RefundOutcome,
};
use chargeonce_testkit::on_both_stores;
use common::{Backend, Fault, FaultProxy, Served};

fn statuses(result: &PayResult) -> Vec<String> {
    result
        .attempts
        .iter()
        .map(|a| match &a.answer {
            AttemptAnswer::Http {
                status, replayed, ..
            } => format!("{status}{}", if *replayed { "r" } else { "" }),
            AttemptAnswer::Failed { kind, .. } => format!("{kind:?}"),
        })
        .collect()
}

fn paid(result: &PayResult) -> &chargeonce_client::Payment {
    match &result.outcome {
        Outcome::Paid(p) => p,
        other => panic!("expected Paid, got {other:?} after {:?}", statuses(result)),
    }
}

/// The first request executes once; nothing to retry.
async fn pays_on_the_first_attempt(backend: Backend) {
    let server = common::start(backend).await;
    let order = common::order("first");
    let key = common::pay_key(&order);
    let result = server
        .client()
        .pay(&key, &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert_eq!(paid(&result).status, PaymentStatus::Succeeded);
    assert_eq!(paid(&result).reference, order);
    assert_eq!(statuses(&result), ["201"]);
    assert_eq!(result.key.as_str(), format!("{order}-pay"));
    assert_eq!(server.charges_for(&order).await, 1);
}

/// The server commits, the answer is lost twice on the way back; the third
/// attempt with the same key gets the replay, and the bank charged once.
async fn lost_answers_are_retried_with_the_same_key(backend: Backend) {
    let server = common::start(backend).await;
    let proxy = FaultProxy::start(
        server.addr,
        &[Fault::LoseAnswer, Fault::LoseAnswer],
        Fault::Pass,
    )
    .await;
    let client = common::client_for(&proxy.base, common::fast_policy());
    let order = common::order("lost");
    let key = common::pay_key(&order);
    let result = client
        .pay(&key, &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert_eq!(statuses(&result), ["Lost", "Lost", "201r"]);
    assert!(result.replayed());
    assert_eq!(paid(&result).status, PaymentStatus::Succeeded);
    assert_eq!(server.charges_for(&order).await, 1, "one charge per intent");
    let ledger = server
        .client()
        .acquirer_ledger(&server.operator_base)
        .await
        .unwrap();
    assert_eq!(ledger.charges.len(), 1);
    assert_eq!(ledger.charges[0].payment_id, paid(&result).id);
}

/// The client times out after the server committed (the answer never comes);
/// the retry gets the replay.
async fn a_timeout_after_the_commit_is_retried(backend: Backend) {
    let server = common::start(backend).await;
    let proxy = FaultProxy::start(server.addr, &[Fault::ForwardThenHang], Fault::Pass).await;
    let policy = common::fast_policy().attempt_timeout(Duration::from_millis(1000));
    let client = common::client_for(&proxy.base, policy);
    let order = common::order("timeout");
    let result = client
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    let seen = statuses(&result);
    assert_eq!(seen[0], "Timeout", "{seen:?}");
    assert_eq!(seen.last().unwrap(), "201r", "{seen:?}");
    assert_eq!(server.charges_for(&order).await, 1);
}

/// A repeat while the first request runs gets 409 with Retry-After (no
/// `Prefer`), waits, and gets the replay.
async fn in_progress_409_is_retried_after_retry_after(backend: Backend) {
    let server = common::start(backend).await;
    let order = common::order("conflict");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_slow");
    let first = {
        let (client, key, request) = (server.client(), key.clone(), request.clone());
        tokio::spawn(async move { client.pay(&key, &request).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = server.client().pay(&key, &request).await.unwrap();
    let first = first.await.unwrap();
    assert_eq!(statuses(&first), ["201"]);
    assert_eq!(statuses(&second)[0], "409");
    assert_eq!(statuses(&second).last().unwrap(), "201r");
    assert!(
        second.attempts[0].retry_in.unwrap() >= Duration::from_secs(1),
        "honours Retry-After: {:?}",
        second.attempts[0].retry_in
    );
    assert_eq!(paid(&first).id, paid(&second).id);
    assert_eq!(server.charges_for(&order).await, 1);
}

/// With `Prefer: wait`, the repeat waits on the server and gets the first
/// request's answer at once: one attempt, no 409.
async fn prefer_wait_gets_the_first_answer_without_409(backend: Backend) {
    let server = common::start(backend).await;
    let order = common::order("prefer");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_slow");
    let first = {
        let (client, key, request) = (server.client(), key.clone(), request.clone());
        tokio::spawn(async move { client.pay(&key, &request).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let waiting = server
        .client()
        .with_policy(common::fast_policy().prefer_wait(Some(Duration::from_secs(4))));
    let second = waiting.pay(&key, &request).await.unwrap();
    let first = first.await.unwrap();
    assert_eq!(statuses(&second), ["201r"]);
    assert!(matches!(
        second.attempts[0].answer,
        AttemptAnswer::Http { waited: true, .. }
    ));
    assert_eq!(paid(&first).id, paid(&second).id);
    assert_eq!(server.charges_for(&order).await, 1);
}

/// The acquirer charged but its answer was lost: 202 pending, and the retry
/// with the same key gets 201 from the same charge.
async fn pending_202_is_retried_to_the_final_answer(backend: Backend) {
    let server = common::start(backend).await;
    let order = common::order("pending");
    let result = server
        .client()
        .pay(
            &common::pay_key(&order),
            &common::payment(&order, "tok_timeout"),
        )
        .await
        .unwrap();
    assert_eq!(statuses(&result), ["202", "201"]);
    assert!(matches!(
        result.attempts[0].answer,
        AttemptAnswer::Http {
            payment_status: Some("pending"),
            ..
        }
    ));
    assert!(result.attempts[0].retry_in.unwrap() >= Duration::from_secs(1));
    assert_eq!(paid(&result).status, PaymentStatus::Succeeded);
    assert_eq!(server.charges_for(&order).await, 1);
}

/// The database is gone: 503 with Retry-After on every attempt; when the
/// budget runs out the outcome is Uncertain, not an error, and nothing moved.
async fn store_down_503_ends_uncertain_when_the_budget_runs_out(backend: Backend) {
    let server = common::start(backend).await;
    assert!(server.client().ready().await.unwrap());
    server.break_store().await;
    assert!(!server.client().ready().await.unwrap());
    let policy = common::fast_policy().budget(Duration::from_millis(2500));
    let client = common::client_for(&server.base, policy);
    let order = common::order("store-down");
    let result = client
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert_eq!(result.outcome, Outcome::Uncertain { payment_id: None });
    assert!(result.attempt_count() >= 2, "{:?}", statuses(&result));
    // Every answer is 503 (the last attempt may instead run out of budget).
    assert!(
        result.attempts.iter().all(|a| matches!(
            &a.answer,
            AttemptAnswer::Http {
                status: 503,
                problem: Some(Code::Known(ProblemCode::StoreUnavailable)),
                ..
            } | AttemptAnswer::Failed {
                kind: FailureKind::Timeout,
                ..
            }
        )),
        "{:?}",
        statuses(&result)
    );
    assert_eq!(statuses(&result)[0], "503");
    assert_eq!(server.charges_for(&order).await, 0);
}

/// Every answer is lost until the budget runs out: Uncertain (the server did
/// charge, once). A later call with the same key learns the truth.
async fn lost_answers_until_the_budget_runs_out_are_uncertain(backend: Backend) {
    let server = common::start(backend).await;
    let proxy = FaultProxy::start(server.addr, &[], Fault::LoseAnswer).await;
    let policy = common::fast_policy().budget(Duration::from_millis(1200));
    let client = common::client_for(&proxy.base, policy);
    let order = common::order("budget");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_ok");
    let result = client.pay(&key, &request).await.unwrap();
    assert_eq!(result.outcome, Outcome::Uncertain { payment_id: None });
    assert!(result.attempt_count() >= 2);
    // Every answer was lost (the last attempt may instead run out of budget).
    assert!(
        result.attempts.iter().all(|a| matches!(
            a.answer,
            AttemptAnswer::Failed {
                kind: FailureKind::Lost | FailureKind::Timeout,
                ..
            }
        )),
        "{:?}",
        statuses(&result)
    );
    assert!(matches!(
        result.attempts[0].answer,
        AttemptAnswer::Failed {
            kind: FailureKind::Lost,
            ..
        }
    ));
    assert_eq!(server.charges_for(&order).await, 1, "it did charge, once");

    // Later, with the network fixed: the same key gets the first result.
    let later = server.client().pay(&key, &request).await.unwrap();
    assert_eq!(statuses(&later), ["201r"]);
    assert_eq!(server.charges_for(&order).await, 1);
}

/// The budget runs out while the payment is pending: the outcome names it.
async fn uncertain_names_the_pending_payment(backend: Backend) {
    let server = common::start(backend).await;
    // Shorter than the 202's Retry-After (1 s): no retry fits.
    let policy = common::fast_policy().budget(Duration::from_millis(950));
    let client = common::client_for(&server.base, policy);
    let order = common::order("pending-budget");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_timeout");
    let result = client.pay(&key, &request).await.unwrap();
    assert_eq!(statuses(&result), ["202"]);
    let Outcome::Uncertain {
        payment_id: Some(id),
    } = &result.outcome
    else {
        panic!(
            "expected Uncertain with the payment, got {:?}",
            result.outcome
        );
    };
    let later = server.client().pay(&key, &request).await.unwrap();
    assert_eq!(&paid(&later).id, id);
    assert_eq!(server.charges_for(&order).await, 1);
}

/// The same key with another amount is a client bug: a distinct error after
/// one attempt, nothing executed, the first payment untouched.
async fn a_changed_amount_is_key_reused_and_not_retried(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let order = common::order("changed");
    let key = common::pay_key(&order);
    let first = client
        .pay(&key, &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    let mut changed = common::payment(&order, "tok_ok");
    changed.amount = chargeonce_client::Money::parse("1350.00", "RUB").unwrap();
    let error = client.pay(&key, &changed).await.unwrap_err();
    let Error::KeyReused { problem, attempts } = &error else {
        panic!("expected KeyReused, got {error:?}");
    };
    assert_eq!(*attempts, 1);
    assert_eq!(problem.status, 422);
    assert_eq!(problem.code, ProblemCode::IdempotencyKeyReused);
    assert_eq!(server.charges_for(&order).await, 1);
    let again = client.payment(&paid(&first).id).await.unwrap();
    assert_eq!(again.amount, paid(&first).amount);
}

/// A decline is a definite answer: one attempt, replayed on repeat.
async fn a_decline_is_definite_and_not_retried(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let order = common::order("declined");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_declined");
    let result = client.pay(&key, &request).await.unwrap();
    assert_eq!(statuses(&result), ["402"]);
    let Outcome::Declined(payment) = &result.outcome else {
        panic!("expected Declined, got {:?}", result.outcome);
    };
    assert_eq!(payment.status, PaymentStatus::Declined);
    assert_eq!(payment.decline_code.as_deref(), Some("card_declined"));
    let again = client.pay(&key, &request).await.unwrap();
    assert_eq!(statuses(&again), ["402r"]);
    assert_eq!(again.outcome, result.outcome);
}

/// Ten concurrent requests with one key (a double, triple... click): one
/// payment, one charge, every caller told the same.
async fn concurrent_clicks_share_one_payment(backend: Backend) {
    let server = common::start(backend).await;
    let order = common::order("clicks");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_ok");
    let client = server
        .client()
        .with_policy(common::fast_policy().prefer_wait(Some(Duration::from_secs(3))));
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (client, key, request) = (client.clone(), key.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            client.pay(&key, &request).await.unwrap()
        }));
    }
    let mut ids = std::collections::HashSet::new();
    let mut executed = 0;
    for task in tasks {
        let result = task.await.unwrap();
        ids.insert(paid(&result).id.clone());
        if !result.replayed() {
            executed += 1;
        }
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(executed, 1, "one request executed, the others were replays");
    assert_eq!(server.charges_for(&order).await, 1);
}

/// The key expired on the server; paying the order again returns its payment
/// (the server's guard, 200), and `pay_order` finds it without sending.
async fn after_the_key_expired_the_order_is_not_charged_again(backend: Backend) {
    let server = common::start_with(backend, |service| {
        service.engine(|mut config| {
            config.timing.ttl = Duration::from_secs(1);
            config
        })
    })
    .await;
    let client = server.client();
    let order = common::order("expired");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_ok");
    let first = client.pay(&key, &request).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1300)).await;

    let again = client.pay(&key, &request).await.unwrap();
    assert_eq!(
        statuses(&again),
        ["200"],
        "a new request, answered with the order's payment"
    );
    assert_eq!(paid(&again).id, paid(&first).id);

    let checked = client.pay_order(&key, &request).await.unwrap();
    assert!(checked.found_before_paying);
    assert_eq!(checked.attempt_count(), 0);
    assert_eq!(paid(&checked).id, paid(&first).id);
    assert_eq!(server.charges_for(&order).await, 1);
}

/// Reads: one payment, an order's payments, and a typed 404.
async fn reads_are_typed(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let order = common::order("reads");
    let paid_now = client
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    let payment = paid(&paid_now);
    assert_eq!(&client.payment(&payment.id).await.unwrap(), payment);
    assert_eq!(
        client.payments_for(&order).await.unwrap(),
        vec![payment.clone()]
    );
    assert!(
        client
            .payments_for("no-such-order")
            .await
            .unwrap()
            .is_empty()
    );
    let missing = client
        .payment("pay_0000000000000000000000000000000a")
        .await
        .unwrap_err();
    assert_eq!(missing.problem().unwrap().code, ProblemCode::NotFound);
    let odd = client.payment("../../sim/ledger").await.unwrap_err();
    assert_eq!(
        odd.problem().unwrap().code,
        ProblemCode::NotFound,
        "ids are path-escaped"
    );
}

/// A refund under its own key: the answer is lost twice, the third attempt
/// with the same key gets the replay (the same bytes as the first answer),
/// and the payment shows the money given back once.
async fn refunds_lost_answers_are_retried_with_the_same_key(backend: Backend) {
    let server = common::start(backend).await;
    let order = common::order("refund-lost");
    let payment = server
        .client()
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    let payment_id = paid(&payment).id.clone();
    let proxy = FaultProxy::start(
        server.addr,
        &[Fault::LoseAnswer, Fault::LoseAnswer],
        Fault::Pass,
    )
    .await;
    let client = common::client_for(&proxy.base, common::fast_policy());
    let key = IdempotencyKey::for_operation(&order, "refund-1").unwrap();
    let request = CreateRefund::partial(Money::parse("300.00", "RUB").unwrap());
    let result = client.refund(&payment_id, &key, &request).await.unwrap();
    let RefundOutcome::Refunded(refund) = &result.outcome else {
        panic!("expected Refunded, got {:?}", result.outcome);
    };
    assert_eq!(refund.payment_id, payment_id);
    assert_eq!(refund.amount, Money::parse("300.00", "RUB").unwrap());
    let seen: Vec<_> = result.attempts.iter().map(|a| a.answer.clone()).collect();
    assert!(
        matches!(
            seen[..],
            [
                AttemptAnswer::Failed { .. },
                AttemptAnswer::Failed { .. },
                AttemptAnswer::Http {
                    status: 201,
                    replayed: true,
                    ..
                }
            ]
        ),
        "{seen:?}"
    );

    // Once more, directly: the same bytes again.
    let again = server
        .client()
        .refund(&payment_id, &key, &request)
        .await
        .unwrap();
    assert_eq!(again.outcome, result.outcome);
    assert_eq!(again.attempts[0].body, result.attempts[2].body);
    let read = server.client().payment(&payment_id).await.unwrap();
    assert_eq!(read.status, PaymentStatus::Succeeded);
}

/// More than what is left is a refusal (an error, not retried); reusing the
/// payment's key for a refund is `KeyReused`.
async fn refund_refusals_are_errors(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let order = common::order("refund-refused");
    let pay_key = common::pay_key(&order);
    let payment = client
        .pay(&pay_key, &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    let payment_id = paid(&payment).id.clone();
    let too_much = CreateRefund::partial(Money::parse("1000000.00", "RUB").unwrap());
    let key = IdempotencyKey::for_operation(&order, "refund-1").unwrap();
    match client.refund(&payment_id, &key, &too_much).await {
        Err(Error::Rejected { problem, attempts }) => {
            assert_eq!(problem.code, ProblemCode::RefundExceedsAmount);
            assert_eq!(attempts, 1);
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    match client
        .refund(&payment_id, &pay_key, &CreateRefund::full())
        .await
    {
        Err(Error::KeyReused { .. }) => {}
        other => panic!("expected KeyReused, got {other:?}"),
    }
    let full = client
        .refund(&payment_id, &key, &CreateRefund::full())
        .await
        .unwrap();
    assert!(
        matches!(full.outcome, RefundOutcome::Refunded(_)),
        "{full:?}"
    );
}

on_both_stores!(
    pays_on_the_first_attempt,
    lost_answers_are_retried_with_the_same_key,
    a_timeout_after_the_commit_is_retried,
    in_progress_409_is_retried_after_retry_after,
    prefer_wait_gets_the_first_answer_without_409,
    pending_202_is_retried_to_the_final_answer,
    store_down_503_ends_uncertain_when_the_budget_runs_out,
    lost_answers_until_the_budget_runs_out_are_uncertain,
    uncertain_names_the_pending_payment,
    a_changed_amount_is_key_reused_and_not_retried,
    a_decline_is_definite_and_not_retried,
    concurrent_clicks_share_one_payment,
    after_the_key_expired_the_order_is_not_charged_again,
    reads_are_typed,
    refunds_lost_answers_are_retried_with_the_same_key,
    refund_refusals_are_errors,
);

// Paths that do not depend on the store: run on SQLite only.

/// `429` with `Retry-After: 1` from something in front of the API: retried
/// no sooner than asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn too_many_requests_429_honours_retry_after() {
    let server = common::start(Backend::Sqlite).await;
    let proxy = FaultProxy::start(server.addr, &[Fault::TooManyRequests], Fault::Pass).await;
    let client = common::client_for(&proxy.base, common::fast_policy());
    let order = common::order("429");
    let result = client
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert_eq!(statuses(&result), ["429", "201"]);
    let gap = result.attempts[1].sent_at - result.attempts[0].sent_at;
    assert!(gap >= Duration::from_secs(1), "waited {gap:?}");
    assert_eq!(server.charges_for(&order).await, 1);
}

/// The server's own per-shop rate limit: `429 rate_limited` with
/// `Retry-After`, retried with the same key no sooner than asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_shops_rate_limit_429_honours_retry_after() {
    let server = common::start_with(Backend::Sqlite, |service| {
        service.state(|state| {
            state.with_rate_limit(chargeonce_server::limits::RateLimit {
                per_second: 1,
                burst: 1,
            })
        })
    })
    .await;
    let client = server.client();
    let first = common::order("rl-1");
    client
        .pay(&common::pay_key(&first), &common::payment(&first, "tok_ok"))
        .await
        .unwrap();
    let order = common::order("rl-2");
    let result = client
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert_eq!(statuses(&result), ["429", "201"]);
    let gap = result.attempts[1].sent_at - result.attempts[0].sent_at;
    assert!(gap >= Duration::from_secs(1), "waited {gap:?}");
    assert_eq!(server.charges_for(&order).await, 1);
}

/// A `503` from a gateway, then the API answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_5xx_is_retried() {
    let server = common::start(Backend::Sqlite).await;
    let proxy = FaultProxy::start(server.addr, &[Fault::Unavailable], Fault::Pass).await;
    let client = common::client_for(&proxy.base, common::fast_policy());
    let order = common::order("503");
    let result = client
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert_eq!(statuses(&result), ["503", "201"]);
    assert_eq!(server.charges_for(&order).await, 1);
}

/// Nothing listens yet (connection refused), then the service comes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connection_refused_until_the_server_comes_up() {
    let server = common::start(Backend::Sqlite).await;
    let addr = common::free_addr().await;
    let client = common::client_for(&format!("http://{addr}"), common::fast_policy());
    let order = common::order("refused");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_ok");
    let paying = tokio::spawn(async move { client.pay(&key, &request).await.unwrap() });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let _proxy = FaultProxy::serve(listener, server.addr, &[], Fault::Pass);
    let result = paying.await.unwrap();
    let kinds = statuses(&result);
    assert!(kinds.len() >= 2, "{kinds:?}");
    assert!(
        kinds[..kinds.len() - 1].iter().all(|k| k == "Connect"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().unwrap(), "201");
    assert_eq!(server.charges_for(&order).await, 1);
}

/// Refusals are errors after one attempt: wrong credentials (401) and an
/// invalid field (422 invalid_request).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refusals_are_errors_and_not_retried() {
    let server = common::start(Backend::Sqlite).await;
    let order = common::order("refused-4xx");
    let wrong = chargeonce_client::Client::builder(&server.base, common::SHOP, "sk_wrong")
        .retry_policy(common::fast_policy())
        .build()
        .unwrap();
    let error = wrong
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Rejected { attempts: 1, .. }),
        "{error:?}"
    );
    assert_eq!(error.problem().unwrap().code, ProblemCode::Unauthorized);

    let error = server
        .client()
        .pay(
            &common::pay_key(&order),
            &common::payment(&order, "tok with space"),
        )
        .await
        .unwrap_err();
    assert_eq!(error.problem().unwrap().code, ProblemCode::InvalidRequest);
    assert_eq!(error.attempts(), 1);
    assert_eq!(server.charges_for(&order).await, 0);
}

/// The budget covers the waits: a call never runs much past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_budget_bounds_the_call() {
    let addr = common::free_addr().await;
    let policy = common::fast_policy().budget(Duration::from_millis(500));
    let client = common::client_for(&format!("http://{addr}"), policy);
    let started = Instant::now();
    let order = common::order("nobody");
    let result = client
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert_eq!(result.outcome, Outcome::Uncertain { payment_id: None });
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert!(result.attempt_count() >= 2);
}

/// The first attempt's answer is lost after the server charged; the retry is
/// refused by something in between. That refusal proves nothing about the
/// first attempt: the result is Uncertain, never an error inviting a new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_after_a_lost_answer_is_uncertain_not_an_error() {
    let server = common::start(Backend::Sqlite).await;
    let proxy = FaultProxy::start(
        server.addr,
        &[Fault::LoseAnswer, Fault::GatewayRefuses],
        Fault::Pass,
    )
    .await;
    let client = common::client_for(&proxy.base, common::fast_policy());
    let order = common::order("refused-after-lost");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_ok");
    let result = client.pay(&key, &request).await.unwrap();
    assert!(
        matches!(result.outcome, Outcome::Uncertain { .. }),
        "{:?}",
        result.outcome
    );
    assert_eq!(result.attempt_count(), 2);
    assert_eq!(
        server.charges_for(&order).await,
        1,
        "the first attempt did charge"
    );
    // Trying again later with the same key settles it, charging nothing more.
    let again = client.pay(&key, &request).await.unwrap();
    assert!(matches!(again.outcome, Outcome::Paid(_)));
    assert!(again.replayed());
    assert_eq!(server.charges_for(&order).await, 1);
}
