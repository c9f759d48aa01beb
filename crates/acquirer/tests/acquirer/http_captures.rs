//! Authorizations over real HTTP, through the service's adapter: the
//! capture method travels with the charge, captures and voids are definite,
//! idempotent per key and found by reference, their refusals are definite,
//! and the network's faults leave them unknown until a repeat learns them.

use std::time::Duration;

use chargeonce_acquirer::{Faults, tokens};
use chargeonce_connector::HttpAcquirer;
use chargeonce_core::{
    Acquirer, AcquirerError, CaptureMethod, CaptureSettlement, ChargeRequest, ChargeResult, Money,
    VoidSettlement,
};

use crate::common::{Standalone, adapter, capture, request, start, void};

/// An authorization of 100.00 RUB over HTTP: the request and its charge id.
async fn authorize(acquirer: &HttpAcquirer, token: &str) -> (ChargeRequest, String) {
    let mut req = request(token);
    req.amount = Money::parse("100.00", "RUB").unwrap();
    req.capture_method = CaptureMethod::Manual;
    let answer = match acquirer.charge(&req).await {
        Err(AcquirerError::Unknown(_)) => acquirer.charge(&req).await,
        answer => answer,
    };
    let Ok(ChargeResult::Succeeded {
        provider_payment_id,
    }) = answer
    else {
        panic!("authorized: {answer:?}")
    };
    (req, provider_payment_id)
}

fn taken(result: Result<CaptureSettlement, AcquirerError>) -> String {
    match result {
        Ok(CaptureSettlement::Succeeded {
            provider_capture_id,
        }) => provider_capture_id,
        other => panic!("expected a capture, got {other:?}"),
    }
}

fn refused(result: Result<CaptureSettlement, AcquirerError>) -> String {
    match result {
        Ok(CaptureSettlement::Failed { code }) => code,
        other => panic!("expected a definite refusal, got {other:?}"),
    }
}

/// What the ledger says the authorization `charge` has: captured minor
/// units, closed, voided.
async fn hold(s: &Standalone, charge: &str) -> (i64, bool, bool) {
    let entry = s
        .sim
        .ledger()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.id == charge)
        .unwrap();
    (entry.captured_minor, entry.closed, entry.voided)
}

#[tokio::test]
async fn captures_and_a_void_over_http_are_definite_and_idempotent_per_key() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    let (req, charge) = authorize(&acquirer, tokens::OK).await;
    let status = acquirer.status(&req.acquirer_key).await.unwrap().unwrap();
    assert_eq!(status.capture_method, CaptureMethod::Manual);
    assert_eq!(status.taken_minor, 0, "an authorization took nothing yet");

    let first = capture(&req, &charge, "30.00", false);
    let id = taken(acquirer.capture(&first).await);
    assert_eq!(taken(acquirer.capture(&first).await), id, "replayed");
    let found = acquirer.captures_for_capture(&first).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].id.as_str(), found[0].amount),
        (id.as_str(), first.amount)
    );

    let over = capture(&req, &charge, "70.01", false);
    assert_eq!(
        refused(acquirer.capture(&over).await),
        "capture_exceeds_authorization"
    );
    assert!(
        acquirer
            .captures_for_capture(&over)
            .await
            .unwrap()
            .is_empty()
    );

    let released = match acquirer.void(&void(&req, &charge)).await {
        Ok(VoidSettlement::Succeeded { released, .. }) => released,
        other => panic!("voided: {other:?}"),
    };
    assert_eq!(released, Money::parse("70.00", "RUB").unwrap());
    assert_eq!(
        acquirer.void(&void(&req, &charge)).await.unwrap(),
        acquirer.void(&void(&req, &charge)).await.unwrap(),
        "a void's repeat answers the first"
    );
    let after = capture(&req, &charge, "1.00", false);
    assert_eq!(
        refused(acquirer.capture(&after).await),
        "authorization_voided"
    );
    assert_eq!(hold(&s, &charge).await, (3000, false, true));
}

#[tokio::test]
async fn refusals_name_the_state_of_the_charge() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    // A charge made at once holds nothing to capture or void.
    let at_once = request(tokens::OK);
    let ChargeResult::Succeeded {
        provider_payment_id: charged,
    } = acquirer.charge(&at_once).await.unwrap()
    else {
        panic!("charged")
    };
    let part = capture(&at_once, &charged, "1.00", false);
    assert_eq!(
        refused(acquirer.capture(&part).await),
        "charge_not_capturable"
    );
    assert!(matches!(
        acquirer.void(&void(&at_once, &charged)).await,
        Ok(VoidSettlement::Failed { code }) if code == "charge_not_capturable"
    ));
    // No such charge.
    let nothing = capture(&at_once, "ch_missing", "1.00", false);
    assert_eq!(refused(acquirer.capture(&nothing).await), "no_such_charge");
    // The last capture closes the hold: nothing more to capture or void.
    let (req, charge) = authorize(&acquirer, tokens::OK).await;
    taken(
        acquirer
            .capture(&capture(&req, &charge, "40.00", true))
            .await,
    );
    let more = capture(&req, &charge, "1.00", false);
    assert_eq!(
        refused(acquirer.capture(&more).await),
        "authorization_closed"
    );
    assert!(matches!(
        acquirer.void(&void(&req, &charge)).await,
        Ok(VoidSettlement::Failed { code }) if code == "nothing_to_void"
    ));
    assert_eq!(hold(&s, &charge).await, (4000, true, false));
}

#[tokio::test]
async fn a_capture_key_reused_for_another_amount_is_unknown() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    let (req, charge) = authorize(&acquirer, tokens::OK).await;
    let first = capture(&req, &charge, "10.00", false);
    taken(acquirer.capture(&first).await);
    let mut other = first.clone();
    other.amount = Money::parse("20.00", "RUB").unwrap();
    assert!(matches!(
        acquirer.capture(&other).await,
        Err(AcquirerError::Unknown(reason)) if reason.contains("idempotency_key_reused")
    ));
    assert_eq!(hold(&s, &charge).await, (1000, false, false));
}

#[tokio::test]
async fn network_faults_leave_captures_and_voids_unknown_until_a_repeat_learns_them() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_millis(300));
    let (req, charge) = authorize(&acquirer, tokens::OK).await;

    // A 5xx before any work: unknown to the adapter, nothing captured.
    s.sim
        .set_faults(Faults {
            error_rate: 1.0,
            ..Faults::default()
        })
        .unwrap();
    let part = capture(&req, &charge, "25.00", false);
    assert!(matches!(
        acquirer.capture(&part).await,
        Err(AcquirerError::Unknown(_))
    ));
    assert!(matches!(
        acquirer.void(&void(&req, &charge)).await,
        Err(AcquirerError::Unknown(_))
    ));
    assert_eq!(hold(&s, &charge).await, (0, false, false));

    // Every answer lost after the ledger recorded the move.
    s.sim
        .set_faults(Faults {
            lost_answer_rate: 1.0,
            hang_ms: 600,
            ..Faults::default()
        })
        .unwrap();
    for _ in 0..6 {
        assert!(matches!(
            acquirer.capture(&part).await,
            Err(AcquirerError::Unknown(_))
        ));
    }
    assert_eq!(
        hold(&s, &charge).await,
        (2500, false, false),
        "captured once"
    );
    s.sim.set_faults(Faults::default()).unwrap();
    let id = taken(acquirer.capture(&part).await);
    assert_eq!(
        acquirer.captures_for_capture(&part).await.unwrap()[0].id,
        id
    );

    // The token that loses the first answer of each move.
    let (req, charge) = authorize(&acquirer, tokens::TIMEOUT).await;
    let part = capture(&req, &charge, "10.00", false);
    assert!(matches!(
        acquirer.capture(&part).await,
        Err(AcquirerError::Unknown(_))
    ));
    taken(acquirer.capture(&part).await);
    assert!(matches!(
        acquirer.void(&void(&req, &charge)).await,
        Err(AcquirerError::Unknown(_))
    ));
    assert!(matches!(
        acquirer.void(&void(&req, &charge)).await,
        Ok(VoidSettlement::Succeeded { released, .. }) if released == Money::parse("90.00", "RUB").unwrap()
    ));
    assert_eq!(hold(&s, &charge).await, (1000, false, true));
}

#[tokio::test]
async fn a_bad_capture_request_is_refused_before_any_work() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    let (_, charge) = authorize(&acquirer, tokens::OK).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/charges/{charge}/captures", s.base);
    let no_key = http.post(&url).send().await.unwrap();
    assert_eq!(no_key.status(), 400);
    let bad = http
        .post(&url)
        .header("idempotency-key", "k1")
        .body(r#"{"amount_minor": "lots"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let listed: serde_json::Value = http.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["data"], serde_json::json!([]));
    assert_eq!(hold(&s, &charge).await, (0, false, false));
}
