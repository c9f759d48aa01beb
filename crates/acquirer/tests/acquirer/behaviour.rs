//! What each token does, idempotency, and refused key reuse.

use std::time::Instant;

use chargeonce_acquirer::{
    CARD_DECLINED, ChargeStatus, INSUFFICIENT_FUNDS, KEY_REUSED, LOST_ANSWER, Simulator,
    UNKNOWN_TOKEN, tokens,
};
use chargeonce_core::{Acquirer, AcquirerError, ChargeResult, Money, PaymentId, Reference, ShopId};

use crate::common::{TempDir, file_sim, memory_sim, request};

fn succeeded_id(result: &ChargeResult) -> &str {
    match result {
        ChargeResult::Succeeded {
            provider_payment_id,
        } => provider_payment_id,
        other => panic!("expected success, got {other:?}"),
    }
}

#[tokio::test]
async fn same_key_twice_is_one_row_and_the_same_answer() {
    let sim = memory_sim().await;
    let req = request(tokens::OK);
    let first = sim.charge(&req).await.unwrap();
    let again = sim.charge(&req).await.unwrap();
    assert_eq!(first, again);
    assert!(succeeded_id(&first).starts_with("ch_"));

    let ledger = sim.ledger().await.unwrap();
    assert_eq!(ledger.len(), 1);
    let entry = &ledger[0];
    assert_eq!(entry.id, succeeded_id(&first));
    assert_eq!(entry.acquirer_key, req.acquirer_key);
    assert_eq!(entry.shop_id, req.shop_id);
    assert_eq!(entry.payment_id, req.payment_id);
    assert_eq!(entry.reference, req.reference);
    assert_eq!(entry.amount, req.amount);
    assert_eq!(entry.status, ChargeStatus::Succeeded);
    assert_eq!(entry.decline_code, None);
    assert_eq!(
        sim.find(&req.acquirer_key).await.unwrap().as_ref(),
        Some(entry)
    );
}

#[tokio::test]
async fn different_keys_are_different_charges() {
    let sim = memory_sim().await;
    let a = sim.charge(&request(tokens::OK)).await.unwrap();
    let b = sim.charge(&request(tokens::OK)).await.unwrap();
    assert_ne!(succeeded_id(&a), succeeded_id(&b));
    let ledger = sim.ledger().await.unwrap();
    assert_eq!(ledger.len(), 2);
    assert_eq!(ledger[0].id, succeeded_id(&a), "ordered by created_at, id");
}

#[tokio::test]
async fn an_unknown_token_is_declined_not_charged() {
    let sim = memory_sim().await;
    for token in ["tok_declinde", "tok_unknown_to_the_simulator", "tok_OK"] {
        let req = request(token);
        let first = sim.charge(&req).await.unwrap();
        let ChargeResult::Declined { code, .. } = &first else {
            panic!("{token}: expected a decline, got {first:?}");
        };
        assert_eq!(code, UNKNOWN_TOKEN, "{token}");
        assert_eq!(sim.charge(&req).await.unwrap(), first, "replayed");
    }
    let ledger = sim.ledger().await.unwrap();
    assert_eq!(ledger.len(), 3);
    assert!(
        ledger.iter().all(|c| c.status == ChargeStatus::Declined
            && c.decline_code.as_deref() == Some(UNKNOWN_TOKEN))
    );
}

#[tokio::test]
async fn declines_are_recorded_and_replayed() {
    let sim = memory_sim().await;
    for (token, code) in [
        (tokens::DECLINED, CARD_DECLINED),
        (tokens::INSUFFICIENT_FUNDS, INSUFFICIENT_FUNDS),
    ] {
        let req = request(token);
        let first = sim.charge(&req).await.unwrap();
        let ChargeResult::Declined {
            provider_payment_id,
            code: got,
        } = &first
        else {
            panic!("{token}: expected a decline, got {first:?}");
        };
        assert_eq!(got, code);
        assert!(provider_payment_id.starts_with("ch_"));
        assert_eq!(sim.charge(&req).await.unwrap(), first, "{token}: replayed");

        let entry = sim.find(&req.acquirer_key).await.unwrap().unwrap();
        assert_eq!(entry.status, ChargeStatus::Declined);
        assert_eq!(entry.decline_code.as_deref(), Some(code));
        assert_eq!(&entry.id, provider_payment_id);
    }
    assert_eq!(sim.ledger().await.unwrap().len(), 2);
    let report = sim.report().await.unwrap();
    assert!(report.total_succeeded.is_empty(), "declines move no money");
}

#[tokio::test]
async fn timeout_commits_then_loses_only_the_first_answer() {
    let sim = memory_sim().await;
    let req = request(tokens::TIMEOUT);
    assert_eq!(
        sim.charge(&req).await,
        Err(AcquirerError::Unknown(LOST_ANSWER.to_owned()))
    );
    let entry = sim.find(&req.acquirer_key).await.unwrap().unwrap();
    assert_eq!(
        entry.status,
        ChargeStatus::Succeeded,
        "charged before the answer was lost"
    );

    let second = sim.charge(&req).await.unwrap();
    assert_eq!(succeeded_id(&second), entry.id);
    assert_eq!(sim.charge(&req).await.unwrap(), second);
    assert_eq!(sim.ledger().await.unwrap().len(), 1);
}

#[tokio::test]
async fn slow_answers_late_once_then_at_once() {
    let sim = memory_sim().await;
    let slow = sim.config().slow;
    let req = request(tokens::SLOW);

    let started = Instant::now();
    let first = sim.charge(&req).await.unwrap();
    assert!(started.elapsed() >= slow, "first execution waits {slow:?}");

    let started = Instant::now();
    let again = sim.charge(&req).await.unwrap();
    assert!(started.elapsed() < slow / 2, "a repeat answers at once");
    assert_eq!(first, again);
    assert_eq!(sim.ledger().await.unwrap().len(), 1);
}

#[tokio::test]
async fn slow_charge_is_committed_before_the_answer() {
    let sim = memory_sim().await;
    let req = request(tokens::SLOW);
    let charge = sim.charge(&req);
    let peek = async {
        tokio::time::sleep(sim.config().slow / 4).await;
        sim.find(&req.acquirer_key).await.unwrap()
    };
    let (result, seen) = tokio::join!(charge, peek);
    let seen = seen.expect("the row exists while the answer is still delayed");
    assert_eq!(succeeded_id(&result.unwrap()), seen.id);
}

#[tokio::test]
async fn key_reused_with_other_parameters_is_refused_and_not_recorded() {
    let sim = memory_sim().await;
    let original = request(tokens::OK);
    let first = sim.charge(&original).await.unwrap();

    let mut variants = Vec::new();
    let mut r = original.clone();
    r.amount = Money::parse("1600.00", "RUB").unwrap();
    variants.push(("amount", r));
    let mut r = original.clone();
    r.amount = Money::parse("1500.00", "USD").unwrap();
    variants.push(("currency", r));
    let mut r = original.clone();
    r.shop_id = ShopId::new("other-shop").unwrap();
    variants.push(("shop", r));
    let mut r = original.clone();
    r.reference = Reference::new("order-other").unwrap();
    variants.push(("reference", r));
    let mut r = original.clone();
    r.payment_id = PaymentId::generate();
    variants.push(("payment id", r));

    for (what, variant) in variants {
        match sim.charge(&variant).await {
            Err(AcquirerError::Unknown(reason)) => {
                assert!(reason.starts_with(KEY_REUSED), "{what}: {reason}");
            }
            other => panic!("{what}: expected an idempotency error, got {other:?}"),
        }
    }

    let ledger = sim.ledger().await.unwrap();
    assert_eq!(ledger.len(), 1, "refusals are not recorded");
    assert_eq!(ledger[0].amount, original.amount);
    // The original is still answered as before, and a different token does not
    // change a recorded answer.
    assert_eq!(sim.charge(&original).await.unwrap(), first);
    let mut other_token = original.clone();
    other_token.token = chargeonce_core::CardToken::new(tokens::DECLINED).unwrap();
    assert_eq!(sim.charge(&other_token).await.unwrap(), first);
}

#[tokio::test]
async fn the_ledger_file_survives_a_reopen() {
    let dir = TempDir::new();
    let req = request(tokens::OK);
    let first = {
        let sim = file_sim(&dir.ledger()).await;
        let result = sim.charge(&req).await.unwrap();
        sim.close().await;
        result
    };
    let sim = file_sim(&dir.ledger()).await;
    assert_eq!(
        sim.charge(&req).await.unwrap(),
        first,
        "replayed after the reopen"
    );
    let ledger = sim.ledger().await.unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].id, succeeded_id(&first));
}

#[tokio::test]
async fn a_closed_ledger_is_not_a_lost_charge() {
    let sim = memory_sim().await;
    sim.close().await;
    assert!(matches!(
        sim.charge(&request(tokens::OK)).await,
        Err(AcquirerError::NotSent(_))
    ));
    assert!(sim.ledger().await.is_err());
}

#[tokio::test]
async fn opening_a_directory_is_an_error() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.ledger()).unwrap();
    let error = Simulator::open(&dir.ledger(), crate::common::config())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("ledger.sqlite3"), "{error}");
}

#[tokio::test]
async fn many_sequential_charges_stay_ordered() {
    let sim = memory_sim().await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(succeeded_id(&sim.charge(&request(tokens::OK)).await.unwrap()).to_owned());
    }
    let ledger: Vec<String> = sim
        .ledger()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ledger, ids);
}
