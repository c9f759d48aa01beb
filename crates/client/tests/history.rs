//! A payment's history read by the client against a real server
//! (PostgreSQL and SQLite): a payment paid once, replayed, then asked
//! again with another amount under its key, reads as one claim, one
//! charge, one answer and one settlement.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_client::{
    CreatePayment, Error, HistoryAcquirerCall, HistoryCallOutcome, HistoryEvent, HistorySettledBy,
    Money, Outcome, ProblemCode,
};
use chargeonce_testkit::on_both_stores;
use common::{Backend, Served};

async fn a_payments_history_is_read(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let order = common::order("history");
    let key = common::pay_key(&order);
    let first = client
        .pay(&key, &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    let Outcome::Paid(payment) = first.outcome else {
        panic!("paid: {:?}", first.outcome);
    };
    let replay = client
        .pay(&key, &common::payment(&order, "tok_ok"))
        .await
        .unwrap();
    assert!(matches!(replay.outcome, Outcome::Paid(ref p) if p.id == payment.id));
    let changed = CreatePayment::new(Money::parse("30.00", "RUB").unwrap(), &order, "tok_ok");
    match client.pay(&key, &changed).await {
        Err(Error::KeyReused { problem, .. }) => assert_eq!(problem.status, 422),
        other => panic!("a 422: {other:?}"),
    }

    let history = client.payment_history(&payment.id).await.unwrap();
    assert_eq!(history.payment_id, payment.id);
    let events: Vec<&HistoryEvent> = history.entries.iter().map(|e| &e.event).collect();
    assert!(
        matches!(events[0], HistoryEvent::Claimed { key: k, .. } if k == key.as_str()),
        "{events:?}"
    );
    let charges: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                HistoryEvent::AcquirerCall {
                    call: HistoryAcquirerCall::Charge,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(charges.len(), 1, "one charge: {events:?}");
    assert!(matches!(
        charges[0],
        HistoryEvent::AcquirerCall {
            outcome: HistoryCallOutcome::Succeeded,
            ..
        }
    ));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, HistoryEvent::Answered { status: 201, .. }))
    );
    assert!(events.iter().any(|e| matches!(
        e,
        HistoryEvent::Settled { by: HistorySettledBy::Request, key: Some(k), .. } if k == key.as_str()
    )));
    assert!(history.entries.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(
        history
            .keys
            .iter()
            .map(|k| k.key.as_str())
            .collect::<Vec<_>>(),
        [key.as_str()]
    );

    match client
        .payment_history("pay_00000000000000000000000000000000")
        .await
    {
        Err(Error::Rejected { problem, .. }) => assert_eq!(problem.code, ProblemCode::NotFound),
        other => panic!("{other:?}"),
    }
}

on_both_stores!(a_payments_history_is_read);
