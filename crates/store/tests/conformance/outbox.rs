//! Merchant events (the transactional outbox): one event per transition, claimed in payment order, leased, logged, resent.

use std::time::Duration;

use chargeonce_core::api_key::MakingRequest;
use chargeonce_core::endpoint::{
    EndpointId, EndpointRefusal, EndpointUpdate, EventFilter, MAX_ENDPOINTS, NewEndpoint, Origin,
};
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
    // No endpoint: the event goes nowhere (no delivery), pending as a whole.
    assert!(written.deliveries.is_empty());
    assert_eq!(written.delivery().state(), DeliveryState::Pending);
    assert_eq!(written.delivery().attempts, 0);
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
            Some((&refund_row, &refund_succeeded("re_1"))),
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
            Some((&refused_row, &failed)),
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
        Some((&refund_row, &refund_succeeded("re_1"))),
        "r1",
        LONG.ttl,
    )
    .await;
    // No endpoint yet: nothing is due, no delivery was written.
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );
    let nowhere = f.events(10, None, None).await;
    assert_eq!(nowhere.len(), 2);
    assert!(
        nowhere.iter().all(|e| e.deliveries.is_empty()),
        "{nowhere:?}"
    );
    // The operator's first endpoint gets the events that went nowhere.
    set_webhook(&f).await;
    let armed = f.events(10, None, None).await;
    assert!(
        armed.iter().all(|e| e.deliveries.len() == 1
            && e.delivery().next_attempt_at_ms < chargeonce_core::events::PARKED_UNTIL_MS),
        "{armed:?}"
    );

    // Only the payment's first event is due; the refund's waits for it.
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.event_type, EventType::PaymentSucceeded);
    assert_eq!(due[0].destination.url, "http://127.0.0.1:9/hooks");
    assert_eq!(due[0].destination.secret.expose(), "whsec_test");
    assert!(due[0].destination.previous_secret.is_none());
    assert_eq!(due[0].attempts, 0);
    let first = due[0].event.id.clone();
    let endpoint = due[0].destination.endpoint_id.clone();
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
            &f.shop,
            &first,
            &endpoint,
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
    assert_eq!(logged.delivery().attempts, 1);
    assert_eq!(logged.delivery().last_status, Some(500));
    assert_eq!(logged.delivery().state(), DeliveryState::Pending);
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
        .record_attempt(
            &f.shop,
            &first,
            &endpoint,
            &AttemptOutcome::Delivered { status: 200 },
        )
        .await
        .unwrap();
    let logged = f.store.event(&f.shop, &first).await.unwrap().unwrap();
    assert_eq!(logged.delivery().state(), DeliveryState::Delivered);
    assert_eq!(logged.delivery().attempts, 2);
    assert_eq!(logged.delivery().last_status, Some(200));
    assert_eq!(logged.delivery().last_error, None);

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
            &f.shop,
            &second,
            &endpoint,
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
    assert_eq!(logged.delivery().state(), DeliveryState::GaveUp);
    assert_eq!(
        logged.delivery().last_error.as_deref(),
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
    let (resent, due) = f
        .store
        .resend_event(&f.shop, &second, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(due, 1);
    assert_eq!(resent.delivery().state(), DeliveryState::Pending);
    assert_eq!(resent.delivery().attempts, 1);
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
            .resend_event(&other, &first, None)
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

/// A shop's own endpoint: made with its making request.
fn endpoint(f: &Fixture, events: &[&str], key: &str) -> NewEndpoint {
    NewEndpoint {
        id: EndpointId::generate(),
        shop_id: f.shop.clone(),
        origin: Origin::Api,
        url: format!("https://hooks.example/{key}"),
        filter: EventFilter::parse(events.iter().copied()).unwrap(),
        description: Some(key.to_owned()),
        secret: WebhookSecret::new(format!("whsec_{key}")),
        request: Some(MakingRequest {
            idempotency_key: key.to_owned(),
            fingerprint: [key.len() as u8; 32],
        }),
    }
}

/// Two endpoints with different filters each get a delivery of exactly the
/// events they want; each delivery is claimed, recorded and resent on its
/// own; a disabled endpoint's deliveries wait and a deleted one's are given
/// up.
async fn each_endpoint_gets_the_events_it_wants(f: Fixture) {
    let payments = f
        .store
        .add_endpoint(&endpoint(&f, &["payment.succeeded"], "payments"))
        .await
        .unwrap()
        .unwrap()
        .endpoint;
    let refunds = f
        .store
        .add_endpoint(&endpoint(
            &f,
            &["refund.succeeded", "refund.failed"],
            "refunds",
        ))
        .await
        .unwrap()
        .unwrap()
        .endpoint;
    assert_eq!(refunds.filter.as_stored(), "refund.failed,refund.succeeded");
    let paid = f.paid_payment("order-1").await;
    let refund = f.refund_acquired(&paid.id, "r1", Some("100.00")).await;
    let refund_row = refund.refund.clone().unwrap();
    f.finish_refund(
        &refund.lease,
        Some((&refund_row, &refund_succeeded("re_1"))),
        "r1",
        LONG.ttl,
    )
    .await;
    let events = f.events(10, None, None).await;
    let of = |t: EventType| events.iter().find(|e| e.event_type == t).unwrap();
    let to = |e: &Event| {
        e.deliveries
            .iter()
            .map(|d| d.endpoint_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        to(of(EventType::PaymentSucceeded)),
        vec![payments.id.clone()]
    );
    assert_eq!(to(of(EventType::RefundSucceeded)), vec![refunds.id.clone()]);

    // Each is due at once (per-payment order is per endpoint), with its
    // endpoint's URL and secret.
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 2, "{due:?}");
    for d in &due {
        let wanted = if d.event.event_type == EventType::PaymentSucceeded {
            &payments
        } else {
            &refunds
        };
        assert_eq!(d.destination.endpoint_id, wanted.id);
        assert_eq!(d.destination.url, wanted.url);
    }
    let refund_event = of(EventType::RefundSucceeded).id.clone();
    f.store
        .record_attempt(
            &f.shop,
            &refund_event,
            &refunds.id,
            &AttemptOutcome::Delivered { status: 200 },
        )
        .await
        .unwrap();
    let logged = f
        .store
        .event(&f.shop, &refund_event)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(logged.delivery().state(), DeliveryState::Delivered);

    // Disabled: its open delivery waits, new events skip it; enabled again:
    // due at once.
    let off = EndpointUpdate {
        enabled: Some(false),
        ..EndpointUpdate::default()
    };
    let updated = f
        .store
        .update_endpoint(&f.shop, &payments.id, &off)
        .await
        .unwrap()
        .unwrap();
    assert!(!updated.enabled);
    let payment_event = of(EventType::PaymentSucceeded).id.clone();
    f.store
        .record_attempt(
            &f.shop,
            &payment_event,
            &payments.id,
            &AttemptOutcome::Failed {
                status: Some(500),
                error: "HTTP 500".into(),
                retry_in: Duration::ZERO,
                give_up_after: Duration::from_secs(3600),
            },
        )
        .await
        .unwrap();
    let waiting = f
        .store
        .event(&f.shop, &payment_event)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        waiting.deliveries[0].delivery.next_attempt(),
        None,
        "parked"
    );
    assert!(
        f.store
            .claim_due_events(10, LONG.lease)
            .await
            .unwrap()
            .is_empty()
    );
    let second = f.paid_payment("order-2").await;
    let second_events = f.store.payment_events(&second.id).await.unwrap();
    assert!(
        second_events[0].deliveries.is_empty(),
        "a disabled endpoint gets no delivery"
    );
    let on = EndpointUpdate {
        enabled: Some(true),
        filter: Some(EventFilter::All),
        description: Some(None),
    };
    let updated = f
        .store
        .update_endpoint(&f.shop, &payments.id, &on)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.filter, EventFilter::All);
    assert_eq!(updated.description, None);
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].event.id, payment_event);
    assert_eq!(due[0].attempts, 1);

    // A resend to one endpoint; to one that does not want the type, none.
    let (_, resent) = f
        .store
        .resend_event(&f.shop, &refund_event, Some(&payments.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resent, 1, "the payments endpoint wants every type now");
    let (_, resent) = f
        .store
        .resend_event(&f.shop, &payment_event, Some(&refunds.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resent, 0);

    // Deleted: its open deliveries are given up, it is listed no more.
    let deleted = f
        .store
        .delete_endpoint(&f.shop, &payments.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deleted.id, payments.id);
    assert!(
        f.store
            .delete_endpoint(&f.shop, &payments.id)
            .await
            .unwrap()
            .is_none()
    );
    let gone = f
        .store
        .event(&f.shop, &payment_event)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.delivery().state(), DeliveryState::GaveUp);
    assert_eq!(
        gone.delivery().last_error.as_deref(),
        Some("the endpoint was deleted")
    );
    let listed = f.store.endpoints(&f.shop).await.unwrap();
    assert_eq!(
        listed.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        vec![refunds.id.clone()]
    );
    assert!(
        f.store
            .endpoint(&f.shop, &payments.id)
            .await
            .unwrap()
            .is_none()
    );
}

/// Endpoints whose filters overlap each get a delivery of the same event,
/// and each delivery is of that event (of this shop): none is written for
/// another event's number.
async fn overlapping_endpoints_each_get_the_event(f: Fixture) {
    // Earlier events (of no endpoint): a delivery written with a wrong
    // number would name one of them.
    let earlier = [
        f.paid_payment("order-0a").await,
        f.paid_payment("order-0b").await,
    ];
    let mut ids = Vec::new();
    for (events, key) in [
        (&["*"][..], "all-1"),
        (&["*"][..], "all-2"),
        (&["payment.succeeded"][..], "paid"),
        (&["refund.failed"][..], "refunds"),
    ] {
        let made = f.store.add_endpoint(&endpoint(&f, events, key)).await;
        ids.push(made.unwrap().unwrap().endpoint.id);
    }
    let paid = f.paid_payment("order-1").await;
    let events = f.store.payment_events(&paid.id).await.unwrap();
    assert_eq!(events.len(), 1);
    let mut to: Vec<_> = events[0]
        .deliveries
        .iter()
        .map(|d| d.endpoint_id.clone())
        .collect();
    to.sort();
    assert_eq!(to, ids[..3].to_vec(), "the three that want it");
    let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
    assert_eq!(due.len(), 3, "{due:?}");
    for d in &due {
        assert_eq!(d.event.id, events[0].id);
        assert_eq!(d.event.payment_id, paid.id);
    }
    for old in &earlier {
        let events = f.store.payment_events(&old.id).await.unwrap();
        assert!(events[0].deliveries.is_empty(), "{events:?}");
    }
}

/// A create is once per idempotency key (the same request replays, another
/// is refused), the cap counts live endpoints, a secret roll keeps the old
/// secret signing for its overlap and is once per key too.
async fn endpoints_are_made_and_rolled_once(f: Fixture) {
    let first = endpoint(&f, &["*"], "k1");
    let made = f.store.add_endpoint(&first).await.unwrap().unwrap();
    assert!(!made.replayed);
    let again = f.store.add_endpoint(&first).await.unwrap().unwrap();
    assert!(again.replayed);
    assert_eq!(again.endpoint, made.endpoint);
    let mut other = endpoint(&f, &["*"], "k1");
    other.request.as_mut().unwrap().fingerprint = [9; 32];
    assert_eq!(
        f.store.add_endpoint(&other).await.unwrap(),
        Err(EndpointRefusal::RequestReused)
    );
    // Another shop's endpoints are apart.
    let b = f.other_shop(&ShopSecret::from_string("b")).await;
    assert!(
        f.store
            .endpoint(&b, &made.endpoint.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(f.store.endpoints(&b).await.unwrap().is_empty());

    // The cap: 16 live endpoints; a repeat is still answered at it.
    for i in 1..MAX_ENDPOINTS {
        f.store
            .add_endpoint(&endpoint(&f, &["*"], &format!("cap-{i}")))
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(
        f.store
            .add_endpoint(&endpoint(&f, &["*"], "one-too-many"))
            .await
            .unwrap(),
        Err(EndpointRefusal::TooMany)
    );
    assert!(
        f.store
            .add_endpoint(&first)
            .await
            .unwrap()
            .unwrap()
            .replayed
    );

    // A roll: the old secret signs beside the new one until the overlap
    // ends; its repeat changes nothing; the key with another roll is refused.
    let id = made.endpoint.id.clone();
    let roll = MakingRequest {
        idempotency_key: "roll-1".into(),
        fingerprint: [1; 32],
    };
    let new = WebhookSecret::new("whsec_new");
    let rolled = f
        .store
        .roll_endpoint_secret(&f.shop, &id, &new, Duration::from_secs(3600), &roll)
        .await
        .unwrap()
        .unwrap();
    assert!(!rolled.replayed);
    assert!(rolled.endpoint.previous_secret_until_ms.is_some());
    let repeat = f
        .store
        .roll_endpoint_secret(
            &f.shop,
            &id,
            &WebhookSecret::new("whsec_other"),
            Duration::from_secs(3600),
            &roll,
        )
        .await
        .unwrap()
        .unwrap();
    assert!(repeat.replayed);
    let reused = MakingRequest {
        fingerprint: [2; 32],
        ..roll.clone()
    };
    assert_eq!(
        f.store
            .roll_endpoint_secret(&f.shop, &id, &new, Duration::ZERO, &reused)
            .await
            .unwrap(),
        Err(EndpointRefusal::RequestReused)
    );
    f.paid_payment("order-roll").await;
    let due = f.store.claim_due_events(100, LONG.lease).await.unwrap();
    let mine = due
        .iter()
        .find(|d| d.destination.endpoint_id == id)
        .expect("a delivery to the rolled endpoint");
    assert_eq!(mine.destination.secret.expose(), "whsec_new");
    assert_eq!(
        mine.destination
            .previous_secret
            .as_ref()
            .map(|s| s.expose()),
        Some("whsec_k1".to_owned())
    );
    // A roll with no overlap stops the old secret at once; the sweep wipes it.
    let now_roll = MakingRequest {
        idempotency_key: "roll-2".into(),
        fingerprint: [3; 32],
    };
    f.store
        .roll_endpoint_secret(
            &f.shop,
            &id,
            &WebhookSecret::new("whsec_newer"),
            Duration::ZERO,
            &now_roll,
        )
        .await
        .unwrap()
        .unwrap();
    assert!(f.store.forget_rolled_webhook_secrets().await.unwrap() >= 1);
    let swept = f.store.endpoint(&f.shop, &id).await.unwrap().unwrap();
    assert_eq!(swept.previous_secret_until_ms, None);
    let unknown = f
        .store
        .roll_endpoint_secret(
            &f.shop,
            &EndpointId::generate(),
            &new,
            Duration::ZERO,
            &MakingRequest {
                idempotency_key: "roll-3".into(),
                fingerprint: [4; 32],
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(unknown, Err(EndpointRefusal::NoEndpoint(_))),
        "{unknown:?}"
    );
}

on_both_stores!(
    fixture =>
    a_transition_writes_exactly_one_event_in_its_transaction,
    events_are_claimed_in_payment_order_leased_and_logged,
    each_endpoint_gets_the_events_it_wants,
    overlapping_endpoints_each_get_the_event,
    endpoints_are_made_and_rolled_once,
);
