//! Merchant events (the transactional outbox): one event per transition, claimed in payment order, leased, logged, resent.

use std::time::Duration;

use chargeonce_core::events::{
    AttemptOutcome, DeliveryState, Event, EventQuery, EventType, WebhookEndpoint,
};
use chargeonce_core::webhook::EventKind;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{
    EventRecorded, FinishOutcome, PaymentId, RefundSettlement, SettleOutcome, ShopId, ShopSecret,
};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn set_webhook(f: &Fixture) {
    let endpoint = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_test"),
    };
    assert!(f.store.set_webhook(&f.shop, Some(&endpoint)).await.unwrap());
}

async fn a_transition_writes_exactly_one_event_in_its_transaction(f: Fixture) {
    // A finish that lost its lease writes nothing: no settled payment, no event.
    let short = lease_of(200);
    let (old, payment) = f.claimed("k1", "order-1", short).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let taken = f.take_over("k1", "order-1").await.unwrap();
    let lost = f
        .finish(&old, Some((&payment, &succeeded())), "zombie", LONG.ttl)
        .await;
    assert_eq!(lost, FinishOutcome::LeaseLost);
    assert!(
        f.all_events().await.is_empty(),
        "a rolled back finish wrote an event"
    );

    // The owner's finish settles the payment and writes its event.
    f.finished(&taken.lease, &payment, "ok", LONG.ttl).await;
    let events = f.all_events().await;
    assert_eq!(events.len(), 1);
    let written = &events[0];
    assert_eq!(written.event_type, EventType::PaymentSucceeded);
    assert_eq!(written.payment_id, payment.id);
    assert_eq!(written.refund_id, None);
    assert_eq!(written.delivery.state(), DeliveryState::Pending);
    assert_eq!(written.delivery.attempts, 0);
    let body: serde_json::Value = serde_json::from_slice(&written.payload).unwrap();
    assert_eq!(body["id"], written.id.as_str());
    assert_eq!(body["type"], "payment.succeeded");
    assert_eq!(body["data"]["payment"]["reference"], "order-1");
    assert_eq!(body["data"]["payment"]["amount"]["value"], "1500.00");

    // Settling twice (reconciler, webhook) changes nothing the second time:
    // still one event per transition.
    let (_, second) = f.claimed("k2", "order-2", LONG).await;
    assert!(matches!(
        f.settle(&second.id, &declined()).await,
        SettleOutcome::Settled(_)
    ));
    assert!(matches!(
        f.settle(&second.id, &declined()).await,
        SettleOutcome::AlreadyFinal(_)
    ));
    let declined_events = f.events(10, None, Some(EventType::PaymentDeclined)).await;
    assert_eq!(declined_events.len(), 1);
    assert_eq!(declined_events[0].payment_id, second.id);

    // A finish that finds its payment settled meanwhile writes no second event.
    let (lease3, third) = f.claimed("k3", "order-3", LONG).await;
    f.settle(&third.id, &succeeded()).await;
    let late = f
        .finish(&lease3, Some((&third, &succeeded())), "late", LONG.ttl)
        .await;
    assert_eq!(late, FinishOutcome::PaymentAlreadySettled);
    // An acquirer webhook that settles a pending payment writes one event;
    // its redelivery writes none.
    let (_, fourth) = f.claimed("k4", "order-4", LONG).await;
    let inbound = event(
        "acq_evt_4",
        EventKind::Succeeded,
        &fourth.acquirer_key,
        &f.shop,
    );
    assert!(matches!(
        f.store.record_event(&inbound).await.unwrap(),
        EventRecorded::Settled(_)
    ));
    assert_eq!(
        f.store.record_event(&inbound).await.unwrap(),
        EventRecorded::Duplicate
    );
    let per_payment =
        |events: &[Event], id: &PaymentId| events.iter().filter(|e| &e.payment_id == id).count();
    let events = f.all_events().await;
    assert_eq!(events.len(), 4);
    for p in [&payment.id, &second.id, &third.id, &fourth.id] {
        assert_eq!(per_payment(&events, p), 1, "{p}");
    }

    // A refund that succeeds writes refund.succeeded; a lost refund finish nothing.
    let refund = f.refund_acquired(&payment.id, "r1", Some("100.00")).await;
    let refund_row = refund.refund.clone().unwrap();
    assert!(
        f.finish_refund(
            &refund.lease,
            Some((&refund_row.id, &refund_succeeded("re_1"))),
            "r1",
            LONG.ttl
        )
        .await
        .stored()
    );
    let refunds = f.events(10, None, Some(EventType::RefundSucceeded)).await;
    assert_eq!(refunds.len(), 1);
    assert_eq!(refunds[0].refund_id.as_ref(), Some(&refund_row.id));
    assert_eq!(refunds[0].payment_id, payment.id);
    let body: serde_json::Value = serde_json::from_slice(&refunds[0].payload).unwrap();
    assert_eq!(body["data"]["refund"]["amount"]["value"], "100.00");
    assert_eq!(body["data"]["refund"]["reference"], "order-1");

    // A refused refund writes refund.failed.
    let refused = f.refund_acquired(&payment.id, "r2", Some("50.00")).await;
    let refused_row = refused.refund.clone().unwrap();
    let failed = RefundSettlement::Failed {
        code: "refund_refused".into(),
    };
    assert!(
        f.finish_refund(
            &refused.lease,
            Some((&refused_row.id, &failed)),
            "r2",
            LONG.ttl
        )
        .await
        .stored()
    );
    let failed_events = f.events(10, None, Some(EventType::RefundFailed)).await;
    assert_eq!(failed_events.len(), 1);
    assert_eq!(failed_events[0].refund_id.as_ref(), Some(&refused_row.id));
    let body: serde_json::Value = serde_json::from_slice(&failed_events[0].payload).unwrap();
    assert_eq!(body["data"]["refund"]["failure_code"], "refund_refused");
    assert_eq!(f.all_events().await.len(), 6);
}

async fn events_are_claimed_in_payment_order_leased_and_logged(f: Fixture) {
    let payment = f.paid_payment("order-1").await;
    let refund = f.refund_acquired(&payment.id, "r1", Some("100.00")).await;
    let refund_row = refund.refund.clone().unwrap();
    f.finish_refund(
        &refund.lease,
        Some((&refund_row.id, &refund_succeeded("re_1"))),
        "r1",
        LONG.ttl,
    )
    .await;
    // No webhook yet: nothing is due, and the events are parked (the relay's
    // scan of due events does not read them).
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );
    let parked = f.events(10, None, None).await;
    assert_eq!(parked.len(), 2);
    assert!(
        parked
            .iter()
            .all(|e| e.delivery.next_attempt_at_ms == chargeonce_core::events::PARKED_UNTIL_MS),
        "{parked:?}"
    );
    set_webhook(&f).await;
    let armed = f.events(10, None, None).await;
    assert!(
        armed
            .iter()
            .all(|e| e.delivery.next_attempt_at_ms < chargeonce_core::events::PARKED_UNTIL_MS),
        "{armed:?}"
    );

    // Only the payment's first event is due; the refund's waits for it.
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.event_type, EventType::PaymentSucceeded);
    assert_eq!(due[0].endpoint.url, "http://127.0.0.1:9/hooks");
    let first = due[0].event.id.clone();
    // Leased: another relay gets nothing meanwhile.
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );

    // A failed attempt: due again later, still blocking the refund event.
    let gave_up = f
        .store
        .record_attempt(
            &first,
            &AttemptOutcome::Failed {
                status: Some(500),
                error: "HTTP 500".into(),
                retry_in: Duration::from_millis(300),
                give_up_after: Duration::from_secs(3600),
            },
        )
        .await
        .unwrap();
    assert!(!gave_up, "a failure before the give-up time is retried");
    let logged = f.store.event(&f.shop, &first).await.unwrap().unwrap();
    assert_eq!(logged.delivery.attempts, 1);
    assert_eq!(logged.delivery.last_status, Some(500));
    assert_eq!(logged.delivery.state(), DeliveryState::Pending);
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.id, first);
    f.store
        .record_attempt(&first, &AttemptOutcome::Delivered { status: 200 })
        .await
        .unwrap();
    let logged = f.store.event(&f.shop, &first).await.unwrap().unwrap();
    assert_eq!(logged.delivery.state(), DeliveryState::Delivered);
    assert_eq!(logged.delivery.attempts, 2);
    assert_eq!(logged.delivery.last_status, Some(200));
    assert_eq!(logged.delivery.last_error, None);

    // Now the refund's event; a failure past the give-up time gives up.
    let due = f
        .store
        .claim_due_events(10, Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    let second = due[0].event.id.clone();
    assert_eq!(due[0].event.event_type, EventType::RefundSucceeded);
    let gave_up = f
        .store
        .record_attempt(
            &second,
            &AttemptOutcome::Failed {
                status: None,
                error: "connection refused".into(),
                retry_in: Duration::from_secs(1),
                give_up_after: Duration::ZERO,
            },
        )
        .await
        .unwrap();
    assert!(gave_up, "a failure past the give-up time gives up");
    let logged = f.store.event(&f.shop, &second).await.unwrap().unwrap();
    assert_eq!(logged.delivery.state(), DeliveryState::GaveUp);
    assert_eq!(
        logged.delivery.last_error.as_deref(),
        Some("connection refused")
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );

    // Resent by hand: due again at once, same id.
    let resent = f
        .store
        .resend_event(&f.shop, &second)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resent.delivery.state(), DeliveryState::Pending);
    assert_eq!(resent.delivery.attempts, 1);
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.id, second);

    // Newest first, paged; another shop sees none of it.
    let page = f.events(1, None, None).await;
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].id, second);
    let next = f.events(10, Some(second.clone()), None).await;
    assert_eq!(
        next.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        vec![first.clone()]
    );
    let other = f.other_shop(&ShopSecret::from_string("b")).await;
    assert!(f.store.event(&other, &first).await.unwrap().is_none());
    assert!(
        f.store
            .resend_event(&other, &first)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        f.store
            .events(
                &other,
                &EventQuery {
                    limit: 10,
                    starting_after: None,
                    event_type: None
                }
            )
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !f.store
            .set_webhook(&ShopId::new("nobody").unwrap(), None)
            .await
            .unwrap()
    );
}

on_both_stores!(
    fixture =>
    a_transition_writes_exactly_one_event_in_its_transaction,
    events_are_claimed_in_payment_order_leased_and_logged,
);
