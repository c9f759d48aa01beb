//! Authorizations at the simulator: captures in parts until the last or
//! the hold is used up, a void of the rest, refunds of captured money only,
//! idempotent per key, lost answers, and the races settled in the ledger:
//! concurrent captures from two instances on one file never exceed the
//! authorization, and a void racing a capture leaves one outcome.

use std::sync::Arc;

use chargeonce_acquirer::Simulator;
use chargeonce_core::{
    Acquirer, AcquirerError, CaptureMethod, CaptureSettlement, ChargeRequest, ChargeResult, Money,
    RefundId, RefundRequest, RefundSettlement, VoidSettlement,
};

use crate::common::{TempDir, capture, file_sim, memory_sim, request, void};

/// An authorization of `value` RUB with `token`; the request and the
/// authorization's charge id.
async fn authorize(sim: &Simulator, value: &str, token: &str) -> (ChargeRequest, String) {
    let mut req = request(token);
    req.amount = Money::parse(value, "RUB").unwrap();
    req.capture_method = CaptureMethod::Manual;
    // `tok_timeout` loses the first answer: the same key again gets it.
    let answer = match sim.charge(&req).await {
        Err(AcquirerError::Unknown(_)) => sim.charge(&req).await,
        answer => answer,
    };
    let ChargeResult::Succeeded {
        provider_payment_id,
    } = answer.unwrap()
    else {
        panic!("authorized")
    };
    (req, provider_payment_id)
}

fn refund(req: &ChargeRequest, charge: &str, value: &str) -> RefundRequest {
    let id = RefundId::generate();
    RefundRequest {
        acquirer_key: id.acquirer_key(),
        shop_id: req.shop_id.clone(),
        payment_id: req.payment_id.clone(),
        refund_id: id,
        charge_id: charge.to_owned(),
        amount: Money::parse(value, "RUB").unwrap(),
        token: req.token.clone(),
    }
}

fn failed(code: &str) -> CaptureSettlement {
    CaptureSettlement::Failed { code: code.into() }
}

fn succeeded(answer: &CaptureSettlement) -> bool {
    matches!(answer, CaptureSettlement::Succeeded { .. })
}

/// What the ledger says the authorization took.
async fn taken(sim: &Simulator, charge: &str) -> (i64, bool, bool) {
    let entry = sim
        .ledger()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.id == charge)
        .unwrap();
    (entry.taken_minor(), entry.closed, entry.voided)
}

#[tokio::test]
async fn two_shipments_a_refund_of_captured_money_and_nothing_left_to_void() {
    let sim = memory_sim().await;
    let (req, charge) = authorize(&sim, "1500.00", "tok_ok").await;
    // An authorization holds money but has taken none: nothing to refund.
    assert_eq!(taken(&sim, &charge).await, (0, false, false));
    assert!(matches!(
        sim.refund_payment(&refund(&req, &charge, "1.00"))
            .await
            .unwrap(),
        RefundSettlement::Failed { .. }
    ));

    let first = capture(&req, &charge, "1000.00", false);
    let answer = sim.capture(&first).await.unwrap();
    assert!(succeeded(&answer));
    // The same key again: the same capture, nothing taken twice.
    assert_eq!(sim.capture(&first).await.unwrap(), answer);
    // The same key for another amount: the provider's key-reuse error,
    // never a refusal to trust.
    let mut reused = first.clone();
    reused.amount = Money::parse("1.00", "RUB").unwrap();
    assert!(matches!(
        sim.capture(&reused).await,
        Err(AcquirerError::Unknown(_))
    ));
    assert_eq!(
        sim.capture(&capture(&req, &charge, "500.01", false))
            .await
            .unwrap(),
        failed("capture_exceeds_authorization")
    );
    assert!(succeeded(
        &sim.capture(&capture(&req, &charge, "500.00", true))
            .await
            .unwrap()
    ));
    assert_eq!(taken(&sim, &charge).await, (150_000, true, false));
    assert_eq!(
        sim.capture(&capture(&req, &charge, "0.01", false))
            .await
            .unwrap(),
        failed("authorization_closed")
    );
    assert_eq!(
        sim.void(&void(&req, &charge)).await.unwrap(),
        VoidSettlement::Failed {
            code: "nothing_to_void".into()
        }
    );

    // Refunds give back captured money, and no more.
    assert!(matches!(
        sim.refund_payment(&refund(&req, &charge, "200.00"))
            .await
            .unwrap(),
        RefundSettlement::Succeeded { .. }
    ));
    assert!(matches!(
        sim.refund_payment(&refund(&req, &charge, "1300.01"))
            .await
            .unwrap(),
        RefundSettlement::Failed { .. }
    ));
    let report = sim.report().await.unwrap();
    assert_eq!(report.total_succeeded[0].amount_minor, 150_000);
}

#[tokio::test]
async fn a_void_releases_the_rest_and_ends_the_captures() {
    let sim = memory_sim().await;
    let (req, charge) = authorize(&sim, "1000.00", "tok_ok").await;
    assert!(succeeded(
        &sim.capture(&capture(&req, &charge, "300.00", false))
            .await
            .unwrap()
    ));
    let voided = sim.void(&void(&req, &charge)).await.unwrap();
    let VoidSettlement::Succeeded { released, .. } = &voided else {
        panic!("voided: {voided:?}")
    };
    assert_eq!(released, &Money::parse("700.00", "RUB").unwrap());
    // Its repeat is the same void.
    assert_eq!(sim.void(&void(&req, &charge)).await.unwrap(), voided);
    assert_eq!(
        sim.capture(&capture(&req, &charge, "1.00", false))
            .await
            .unwrap(),
        failed("authorization_voided")
    );
    assert_eq!(taken(&sim, &charge).await, (30_000, false, true));
    let report = sim.report().await.unwrap();
    assert_eq!(report.total_succeeded[0].amount_minor, 30_000);
}

#[tokio::test]
async fn captures_and_voids_of_what_is_not_an_authorization_are_refused() {
    let sim = memory_sim().await;
    let req = request("tok_ok");
    let ChargeResult::Succeeded {
        provider_payment_id: charged,
    } = sim.charge(&req).await.unwrap()
    else {
        panic!("charged")
    };
    assert_eq!(
        sim.capture(&capture(&req, &charged, "1.00", false))
            .await
            .unwrap(),
        failed("charge_not_capturable")
    );
    assert_eq!(
        sim.void(&void(&req, &charged)).await.unwrap(),
        VoidSettlement::Failed {
            code: "charge_not_capturable".into()
        }
    );
    let (declined_req, _) = (request("tok_declined"), ());
    let mut declined_req = declined_req;
    declined_req.capture_method = CaptureMethod::Manual;
    let declined = sim.charge(&declined_req).await.unwrap();
    assert!(!declined.is_succeeded());
    assert_eq!(
        sim.capture(&capture(
            &declined_req,
            declined.provider_payment_id(),
            "1.00",
            false
        ))
        .await
        .unwrap(),
        failed("charge_not_capturable")
    );
    assert_eq!(
        sim.capture(&capture(&req, "ch_nothing", "1.00", false))
            .await
            .unwrap(),
        failed("no_such_charge")
    );
}

#[tokio::test]
async fn a_lost_capture_answer_is_unknown_and_its_retry_gets_the_capture() {
    let sim = memory_sim().await;
    let (req, charge) = authorize(&sim, "100.00", "tok_timeout").await;
    let c = capture(&req, &charge, "40.00", false);
    assert!(matches!(
        sim.capture(&c).await,
        Err(AcquirerError::Unknown(_))
    ));
    assert!(succeeded(&sim.capture(&c).await.unwrap()));
    // A caller without keys finds it by our capture id.
    let found = sim.captures_for_capture(&c).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].amount, Money::parse("40.00", "RUB").unwrap());
    assert_eq!(taken(&sim, &charge).await.0, 4_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_captures_from_two_instances_take_the_authorization_exactly() {
    let dir = TempDir::new();
    let path = dir.ledger();
    let (a, b) = tokio::join!(file_sim(&path), file_sim(&path));
    let sims = [Arc::new(a), Arc::new(b)];
    let (req, charge) = authorize(&sims[0], "1000.00", "tok_ok").await;
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let sim = sims[i % 2].clone();
            let c = capture(&req, &charge, "100.00", false);
            tokio::spawn(async move { sim.capture(&c).await.unwrap() })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            CaptureSettlement::Succeeded { .. } => won += 1,
            // Each fits until ten took it all: then it is used up.
            other => assert_eq!(other, failed("authorization_closed")),
        }
    }
    assert_eq!(won, 10);
    assert_eq!(taken(&sims[1], &charge).await, (100_000, false, false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_void_racing_a_capture_leaves_one_outcome() {
    let dir = TempDir::new();
    let path = dir.ledger();
    let (a, b) = tokio::join!(file_sim(&path), file_sim(&path));
    let sims = [Arc::new(a), Arc::new(b)];
    let mut orders = [0; 2];
    for round in 0..20 {
        let (req, charge) = authorize(&sims[0], "100.00", "tok_ok").await;
        let c = capture(&req, &charge, "30.00", false);
        let v = void(&req, &charge);
        let (capturer, voider) = (sims[round % 2].clone(), sims[(round + 1) % 2].clone());
        let (captured, voided) = tokio::join!(
            tokio::spawn(async move { capturer.capture(&c).await.unwrap() }),
            tokio::spawn(async move { voider.void(&v).await.unwrap() }),
        );
        let (captured, voided) = (captured.unwrap(), voided.unwrap());
        let VoidSettlement::Succeeded { released, .. } = voided else {
            panic!("a void of an open authorization succeeds: {voided:?}")
        };
        let books = taken(&sims[round % 2], &charge).await;
        if succeeded(&captured) {
            // The capture came first: the void released the rest.
            assert_eq!(released.minor_units(), 7_000);
            assert_eq!(books, (3_000, false, true));
            orders[0] += 1;
        } else {
            assert_eq!(captured, failed("authorization_voided"));
            assert_eq!(released.minor_units(), 10_000);
            assert_eq!(books, (0, false, true));
            orders[1] += 1;
        }
    }
    assert_eq!(orders.iter().sum::<i32>(), 20, "{orders:?}");
}
