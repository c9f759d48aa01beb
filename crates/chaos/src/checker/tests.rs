//! The checker on hand-made histories that break each invariant.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use chargeonce_core::history::{HistoryEvent, SettledBy};
use chargeonce_core::{AcquirerCall, AcquirerOutcomeKind, PaymentStatus};

use super::*;
use crate::args::ChaosArgs;
use crate::history::{AttemptRecord, CallKind, CallResult, Shown};
use crate::truth::{LedgerRefund, Truth};

/// A history as the store writes it for a payment its first request
/// settled: claimed, charged (`outcome`), settled to `status`, answered.
fn history(outcome: AcquirerOutcomeKind, status: PaymentStatus) -> Vec<HistoryEvent> {
    vec![
        HistoryEvent::Claimed {
            key: "k".into(),
            instance: "a:1".into(),
        },
        charge_call(outcome),
        settled(status),
        HistoryEvent::Answered {
            key: "k".into(),
            status: 201,
        },
    ]
}

fn charge_call(outcome: AcquirerOutcomeKind) -> HistoryEvent {
    HistoryEvent::AcquirerCall {
        call: AcquirerCall::Charge,
        outcome,
        latency_ms: 3,
        acquirer_key: "ak".into(),
        instance: "a:1".into(),
        reason: None,
    }
}

fn settled(status: PaymentStatus) -> HistoryEvent {
    HistoryEvent::Settled {
        status,
        by: SettledBy::Request { key: "k".into() },
    }
}

fn paid_history() -> Vec<HistoryEvent> {
    history(AcquirerOutcomeKind::Succeeded, PaymentStatus::Succeeded)
}

fn declined_history() -> Vec<HistoryEvent> {
    history(AcquirerOutcomeKind::Declined, PaymentStatus::Declined)
}

const SHOPS: [&str; 2] = ["shop_a", "shop_b"];

fn shops() -> Vec<String> {
    SHOPS.iter().map(|s| (*s).to_owned()).collect()
}

/// Intent 0 (shop_a, order-0) and intent 1 (shop_b, order-0): the same
/// key and reference in two shops.
fn intents() -> Vec<Intent> {
    let mut args = ChaosArgs::small(2, 1);
    args.decline_rate = 0.0;
    args.authorize_rate = 0.0;
    (0..2)
        .map(|i| Intent::generate(7, i, &args).unwrap())
        .collect()
}

fn paid(intent: &Intent, id: &str, charge: &str) -> (DbPayment, LedgerCharge) {
    let shop = SHOPS[intent.shop].to_owned();
    (
        DbPayment {
            id: id.into(),
            shop_id: shop.clone(),
            reference: intent.reference.clone(),
            amount_minor: intent.amount_minor,
            status: "succeeded".into(),
            provider_payment_id: Some(charge.into()),
            refunded_minor: 0,
            metadata: intent.metadata.clone(),
            manual: false,
            hold: String::new(),
            captured_minor: 0,
            taken_minor: intent.amount_minor,
        },
        LedgerCharge {
            id: charge.into(),
            shop_id: shop,
            payment_id: id.into(),
            reference: intent.reference.clone(),
            amount_minor: intent.amount_minor,
            succeeded: true,
            manual: false,
            captured_minor: 0,
            voided: false,
            closed: false,
            taken_minor: intent.amount_minor,
        },
    )
}

fn answer(status: u16, body: u8) -> AttemptRecord {
    AttemptRecord {
        status: Some(status),
        failure: None,
        replayed: false,
        body_sha256: Some([body; 32]),
        body: None,
        took: Duration::from_millis(5),
        sent_at: std::time::Instant::now(),
    }
}

fn call(
    intent: &Intent,
    kind: CallKind,
    result: CallResult,
    attempts: Vec<AttemptRecord>,
) -> CallRecord {
    CallRecord {
        intent: intent.index,
        kind,
        instance: 0,
        attempts,
        result,
        took: Duration::from_millis(5),
    }
}

fn shown(p: &DbPayment) -> Shown {
    Shown {
        id: p.id.clone(),
        shop_id: p.shop_id.clone(),
        status: p.status.clone(),
        amount_minor: p.amount_minor,
        parent: p.reference.clone(),
        metadata: p.metadata.clone(),
    }
}

/// Two intents paid once each, a double click replayed identically.
fn clean() -> (Vec<Intent>, Vec<CallRecord>, Truth) {
    let intents = intents();
    let (p0, c0) = paid(&intents[0], "pay_0", "ch_0");
    let (p1, c1) = paid(&intents[1], "pay_1", "ch_1");
    let calls = vec![
        call(
            &intents[0],
            CallKind::Pay,
            CallResult::Paid(shown(&p0)),
            vec![answer(201, 1)],
        ),
        call(
            &intents[0],
            CallKind::DoubleClick,
            CallResult::Paid(shown(&p0)),
            vec![answer(201, 1)],
        ),
        call(
            &intents[1],
            CallKind::Pay,
            CallResult::Paid(shown(&p1)),
            vec![answer(201, 2)],
        ),
    ];
    let histories = [
        (p0.id.clone(), paid_history()),
        (p1.id.clone(), paid_history()),
    ]
    .into_iter()
    .collect();
    let truth = Truth {
        payments: vec![p0, p1],
        charges: vec![c0, c1],
        histories,
        ..Truth::default()
    };
    (intents, calls, truth)
}

fn invariants(intents: &[Intent], calls: &[CallRecord], truth: &Truth) -> Vec<&'static str> {
    let mut names: Vec<_> = check(intents, &shops(), calls, truth)
        .into_iter()
        .map(|v| v.invariant)
        .collect();
    names.dedup();
    names
}

#[test]
fn a_clean_history_passes() {
    let (intents, calls, truth) = clean();
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
}

/// Intent 1's payment canceled (its history says so), its charge landed
/// anyway: refunded in full it passes, holding money it is caught; a
/// cancel that says otherwise than the database is caught.
#[test]
fn a_canceled_payment_holding_money_is_caught() {
    let (intents, mut calls, mut truth) = clean();
    calls.pop();
    truth.payments[1].status = "canceled".into();
    truth.payments[1].provider_payment_id = None;
    truth.histories.insert(
        truth.payments[1].id.clone(),
        vec![
            HistoryEvent::Claimed {
                key: "k".into(),
                instance: "a:1".into(),
            },
            settled(PaymentStatus::Canceled),
        ],
    );
    let found = invariants(&intents, &calls, &truth);
    assert_eq!(found, vec!["canceled-holds-nothing"], "{found:?}");

    truth.ledger_refunds.push(LedgerRefund {
        charge_id: truth.charges[1].id.clone(),
        amount_minor: truth.charges[1].amount_minor,
    });
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);

    let mut told = shown(&truth.payments[1]);
    told.status = "succeeded".into();
    calls.push(call(
        &intents[1],
        CallKind::Cancel,
        CallResult::CancelEnded(told),
        vec![answer(200, 3)],
    ));
    let found = invariants(&intents, &calls, &truth);
    assert!(found.contains(&"answers-agree-with-database"), "{found:?}");
}

#[test]
fn a_second_charge_is_caught() {
    let (intents, calls, mut truth) = clean();
    let mut again = truth.charges[0].clone();
    again.id = "ch_dup".into();
    truth.charges.push(again);
    let found = invariants(&intents, &calls, &truth);
    assert!(
        found.contains(&"one-charge-per-succeeded-payment"),
        "{found:?}"
    );
    assert!(found.contains(&"one-charge-per-order"), "{found:?}");
    assert!(found.contains(&"ledger-total-equals-payments"), "{found:?}");
}

#[test]
fn a_second_payment_of_an_order_is_caught() {
    let (intents, calls, mut truth) = clean();
    let (p, c) = paid(&intents[0], "pay_other", "ch_other");
    truth.payments.push(p);
    truth.charges.push(c);
    assert!(invariants(&intents, &calls, &truth).contains(&"one-charge-per-order"));
}

#[test]
fn a_charge_for_a_declined_or_unknown_payment_is_caught() {
    let (intents, calls, mut truth) = clean();
    truth.payments[1].status = "declined".into();
    let found = invariants(&intents, &calls, &truth);
    assert!(
        found.contains(&"no-charge-per-declined-payment"),
        "{found:?}"
    );
    assert!(found.contains(&"answers-agree-with-database"), "{found:?}");

    let (intents, calls, mut truth) = clean();
    truth.payments.remove(1);
    let found = invariants(&intents, &calls, &truth);
    assert!(found.contains(&"no-unknown-charge"), "{found:?}");
}

#[test]
fn a_pending_queue_that_disagrees_is_caught() {
    let (intents, calls, mut truth) = clean();
    truth.pending_counted = 1;
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["pending-queue-agrees"]
    );
}

#[test]
fn a_pending_payment_is_caught() {
    let (intents, calls, mut truth) = clean();
    let (mut p, _) = paid(&intents[1], "pay_pending", "ch_none");
    p.status = "pending".into();
    p.provider_payment_id = None;
    p.reference = "order-9".into();
    truth.payments.push(p);
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["every-intent-definite"]
    );
}

#[test]
fn a_replay_with_other_bytes_is_caught() {
    let (intents, mut calls, truth) = clean();
    calls[1].attempts = vec![answer(201, 9)];
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["replays-identical"]
    );
}

/// A replays-identical violation names both answers (status, call,
/// instance, time, body), what the second differs in, and the story of
/// the payment: the report alone explains it.
#[test]
fn a_replay_with_other_bytes_names_both_answers() {
    let (intents, mut calls, mut truth) = clean();
    truth.histories.insert("pay_0".into(), paid_history());
    let body = |refunded: &str| -> Option<std::sync::Arc<[u8]>> {
        let json = serde_json::json!({"id": "pay_0", "status": "succeeded",
            "amount_refunded": {"value": refunded, "currency": "RUB"}});
        Some(serde_json::to_vec(&json).unwrap().into())
    };
    calls[0].attempts[0].body = body("0.00");
    let mut later = answer(201, 9);
    later.body = body("5.00");
    later.replayed = true;
    later.sent_at = calls[0].attempts[0].sent_at + Duration::from_secs(2);
    calls[1].instance = 2;
    calls[1].attempts = vec![answer(503, 0), later];
    let found = check(&intents, &shops(), &calls, &truth);
    assert_eq!(found.len(), 1, "{found:#?}");
    let evidence = found[0].evidence.join("\n");
    assert!(
        evidence.contains(
            "answer 1: 201 to the Pay call's attempt 1 of 1 via instance 0, sent +0.000s"
        ),
        "{evidence}"
    );
    assert!(
        evidence.contains("answer 2: 201 to the DoubleClick call's attempt 2 of 2 via instance 2, sent +2.000s (took 5 ms), replayed"),
        "{evidence}"
    );
    assert!(
        evidence.contains("differs from answer 1 in amount_refunded.value: \"0.00\" -> \"5.00\""),
        "{evidence}"
    );
    assert!(
        evidence.contains("payment pay_0 (shop_a/order-0)"),
        "{evidence}"
    );
    assert!(evidence.contains("ledger charge ch_0"), "{evidence}");
    assert!(
        evidence.contains("history 3: {\"type\":\"settled\""),
        "{evidence}"
    );
}

#[test]
fn another_shops_answer_is_caught() {
    let (intents, mut calls, truth) = clean();
    // Shop a's client is shown shop b's payment of the same key.
    let other = shown(&truth.payments[1]);
    calls[0].result = CallResult::Paid(other);
    let found = invariants(&intents, &calls, &truth);
    assert!(found.contains(&"no-cross-shop-answer"), "{found:?}");
}

#[test]
fn metadata_other_than_sent_is_caught_in_the_answer_or_the_database() {
    let (intents, mut calls, mut truth) = clean();
    assert!(!intents[0].metadata.is_empty(), "intent 0 sends metadata");
    let CallResult::Paid(shown) = &mut calls[0].result else {
        panic!("intent 0's first call is paid")
    };
    shown.metadata.insert("intent".into(), "another".into());
    assert!(invariants(&intents, &calls, &truth).contains(&"metadata-as-sent"));
    let (_, calls, _) = clean();
    truth.payments[0].metadata.clear();
    assert!(invariants(&intents, &calls, &truth).contains(&"metadata-as-sent"));
}

#[test]
fn a_changed_body_accepted_is_caught_and_its_refusal_is_not() {
    let (intents, mut calls, truth) = clean();
    calls.push(call(
        &intents[0],
        CallKind::ChangedBody,
        CallResult::Refused {
            status: 422,
            code: "idempotency_key_reused".into(),
        },
        vec![answer(422, 3)],
    ));
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
    let p0 = shown(&truth.payments[0]);
    calls.last_mut().unwrap().result = CallResult::Paid(p0);
    assert!(invariants(&intents, &calls, &truth).contains(&"changed-body-refused"));
}

#[test]
fn unknown_outcomes_are_accepted_either_way() {
    let (intents, mut calls, mut truth) = clean();
    // Intent 1's only call is uncertain: charged once is fine...
    calls[2].result = CallResult::Uncertain;
    calls[2].attempts = vec![AttemptRecord {
        status: None,
        failure: Some(chargeonce_client::FailureKind::Lost),
        replayed: false,
        body_sha256: None,
        body: None,
        took: Duration::from_secs(3),
        sent_at: std::time::Instant::now(),
    }];
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
    // ...and so is not charged at all.
    truth.payments[1].status = "declined".into();
    truth.charges[1].succeeded = false;
    truth
        .histories
        .insert(truth.payments[1].id.clone(), declined_history());
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
}

#[test]
fn a_succeeded_payment_settled_never_or_twice_is_caught() {
    let (intents, calls, mut truth) = clean();
    let id = truth.payments[0].id.clone();
    // Never: the history lost the settlement (or the store never wrote it).
    truth
        .histories
        .get_mut(&id)
        .unwrap()
        .retain(|e| !e.settled_succeeded());
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["history-has-one-settlement"]
    );
    // No history at all.
    truth.histories.remove(&id);
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["history-has-one-settlement"]
    );
    // Twice: settled by the request and again by a webhook.
    let mut twice = paid_history();
    twice.push(HistoryEvent::Settled {
        status: PaymentStatus::Succeeded,
        by: SettledBy::Webhook {
            event_id: "evt_1".into(),
        },
    });
    truth.histories.insert(id.clone(), twice);
    let found = check(&intents, &shops(), &calls, &truth);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].invariant, "history-has-one-settlement");
    assert!(found[0].detail.contains("2 times"), "{found:?}");
    // Once, by the reconciler after an unknown outcome: clean.
    let once = vec![
        charge_call(AcquirerOutcomeKind::Unknown),
        HistoryEvent::Settled {
            status: PaymentStatus::Succeeded,
            by: SettledBy::Reconciler,
        },
    ];
    truth.histories.insert(id, once);
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
}

#[test]
fn a_history_contradicting_the_payment_is_caught() {
    // A succeeded payment whose charge the acquirer declined.
    let (intents, calls, mut truth) = clean();
    let id = truth.payments[0].id.clone();
    truth
        .histories
        .get_mut(&id)
        .unwrap()
        .insert(1, charge_call(AcquirerOutcomeKind::Declined));
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["history-has-one-settlement"]
    );

    // A declined payment: settled declined once, and nothing else.
    let (intents, mut calls, mut truth) = clean();
    calls.truncate(2);
    truth.payments[1].status = "declined".into();
    truth.charges[1].succeeded = false;
    let id = truth.payments[1].id.clone();
    truth.histories.insert(id.clone(), declined_history());
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
    // Settled to succeeded too.
    let mut both = declined_history();
    both.push(settled(PaymentStatus::Succeeded));
    truth.histories.insert(id.clone(), both);
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["history-has-one-settlement"]
    );
    // A charge the acquirer took.
    let mut taken = declined_history();
    taken.insert(1, charge_call(AcquirerOutcomeKind::Succeeded));
    truth.histories.insert(id.clone(), taken);
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["history-has-one-settlement"]
    );
    // Never settled.
    truth.histories.remove(&id);
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["history-has-one-settlement"]
    );
}

#[test]
fn refunds_beyond_the_amount_or_unrecorded_are_caught() {
    let (intents, calls, mut truth) = clean();
    truth.ledger_refunds.push(LedgerRefund {
        charge_id: "ch_0".into(),
        amount_minor: truth.payments[0].amount_minor + 1,
    });
    let found = invariants(&intents, &calls, &truth);
    assert!(found.contains(&"refunds-agree"), "{found:?}");
    assert!(found.contains(&"refunds-within-amount"), "{found:?}");
}

#[test]
fn a_valid_request_refused_is_caught() {
    let (intents, mut calls, truth) = clean();
    calls[1].result = CallResult::Refused {
        status: 422,
        code: "idempotency_key_reused".into(),
    };
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["valid-requests-answered"]
    );
}

/// Intent 1 only authorized, then captured 100 of it under `capture-1`
/// and voided the rest: a truth where books and ledger agree.
fn authorized_captured_voided() -> (Vec<Intent>, Vec<CallRecord>, Truth) {
    let (intents, mut calls, mut truth) = clean();
    let p = &mut truth.payments[1];
    p.manual = true;
    p.hold = "released_void".into();
    p.captured_minor = 100;
    p.taken_minor = 100;
    let c = &mut truth.charges[1];
    c.manual = true;
    c.captured_minor = 100;
    c.voided = true;
    c.taken_minor = 100;
    truth.captures.push(crate::truth::DbCapture {
        id: "cap_1".into(),
        shop_id: truth.payments[1].shop_id.clone(),
        payment_id: truth.payments[1].id.clone(),
        status: "succeeded".into(),
        amount_minor: 100,
        at_acquirer: vec![100],
    });
    let captured = Shown {
        id: "cap_1".into(),
        shop_id: truth.payments[1].shop_id.clone(),
        status: "succeeded".into(),
        amount_minor: 100,
        parent: truth.payments[1].id.clone(),
        metadata: Default::default(),
    };
    calls.push(call(
        &intents[1],
        CallKind::Capture(1),
        CallResult::Captured(captured),
        vec![answer(201, 3)],
    ));
    let voided = Shown {
        status: "succeeded".into(),
        ..shown(&truth.payments[1])
    };
    calls.push(call(
        &intents[1],
        CallKind::Void,
        CallResult::Voided(voided),
        vec![answer(200, 4)],
    ));
    (intents, calls, truth)
}

#[test]
fn an_authorization_that_agrees_passes() {
    let (intents, calls, truth) = authorized_captured_voided();
    assert_eq!(check(&intents, &shops(), &calls, &truth), vec![]);
}

#[test]
fn a_capture_the_acquirer_does_not_hold_is_caught() {
    let (intents, calls, mut truth) = authorized_captured_voided();
    truth.captures[0].at_acquirer.clear();
    truth.charges[1].captured_minor = 0;
    truth.charges[1].taken_minor = 0;
    let found = invariants(&intents, &calls, &truth);
    assert!(found.contains(&"captures-agree"), "{found:?}");
    assert!(found.contains(&"ledger-total-equals-payments"), "{found:?}");
}

#[test]
fn captures_beyond_the_authorization_are_caught() {
    let (intents, calls, mut truth) = authorized_captured_voided();
    let over = truth.payments[1].amount_minor + 1;
    truth.charges[1].captured_minor = over;
    let found = invariants(&intents, &calls, &truth);
    assert!(
        found.contains(&"captures-within-authorization"),
        "{found:?}"
    );
}

#[test]
fn a_release_the_acquirer_did_not_make_is_caught() {
    let (intents, calls, mut truth) = authorized_captured_voided();
    truth.charges[1].voided = false;
    assert_eq!(invariants(&intents, &calls, &truth), vec!["release-agrees"]);
}

#[test]
fn a_capture_after_the_release_is_caught() {
    let (intents, calls, mut truth) = authorized_captured_voided();
    let id = truth.payments[1].id.clone();
    let capture_id = "cap_1".to_owned();
    let history = truth.histories.entry(id).or_default();
    history.push(HistoryEvent::ReleaseEnded {
        reason: chargeonce_core::authorization::ReleaseReason::Void,
        released: true,
    });
    history.push(HistoryEvent::CaptureEnded {
        capture_id,
        status: chargeonce_core::CaptureStatus::Succeeded,
    });
    assert_eq!(
        invariants(&intents, &calls, &truth),
        vec!["no-capture-after-release"]
    );
}

#[test]
fn a_capture_or_void_answer_the_books_contradict_is_caught() {
    let (intents, calls, mut truth) = authorized_captured_voided();
    truth.captures[0].status = "failed".into();
    truth.captures[0].at_acquirer.clear();
    truth.payments[1].captured_minor = 0;
    truth.payments[1].taken_minor = 0;
    truth.charges[1].captured_minor = 0;
    truth.charges[1].taken_minor = 0;
    let found = invariants(&intents, &calls, &truth);
    assert!(found.contains(&"answers-agree-with-database"), "{found:?}");

    let (intents, calls, mut truth) = authorized_captured_voided();
    truth.payments[1].hold = "open".into();
    truth.charges[1].voided = false;
    let found = invariants(&intents, &calls, &truth);
    assert_eq!(found, vec!["answers-agree-with-database"], "{found:?}");
}

#[test]
fn a_pending_capture_or_a_hold_still_moving_is_not_definite() {
    let (intents, calls, mut truth) = authorized_captured_voided();
    truth.payments[1].hold = "releasing_void".into();
    truth.charges[1].voided = false;
    let found = invariants(&intents, &calls, &truth);
    assert!(found.contains(&"every-intent-definite"), "{found:?}");
}
