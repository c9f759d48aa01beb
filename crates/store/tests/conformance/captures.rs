//! Authorizations: the hold stored with its payment, captures
//! reserved within it (the database settles races), refusals that write
//! nothing, settlements that take or give back, take-overs, and refunds of
//! captured money only.

use std::sync::Arc;

use chargeonce_core::authorization::{AuthorizationStatus, CaptureRefusal, Hold};
use chargeonce_core::events::EventType;
use chargeonce_core::{
    CaptureClaim, CaptureClaimRefusal, CaptureMethod, CaptureSettlement, CaptureStatus, Claim,
    Cursor, FinishOutcome, PageLimit, PageRequest, PaymentCapture, PaymentFilter, PaymentStatus,
    RecoveryPoint, RefundClaim, RefundRefusal, ReleaseClaim, ShownStatus, VoidSettlement,
};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn an_authorization_holds_its_amount_once_its_charge_succeeded(f: Fixture) {
    let new = new_authorization(&f.shop, "a1", "order-1");
    let Claim::Acquired(acquired) = f
        .store
        .claim_payment(&claim(&f.shop, "a1", "order-1"), &new, LONG)
        .await
        .unwrap()
    else {
        panic!("a new key is claimed")
    };
    let pending = f.payment(&acquired.payment.id).await;
    assert_eq!(pending.capture.method(), CaptureMethod::Manual);
    let PaymentCapture::Manual { hold, expires_at } = pending.capture else {
        panic!("an authorization")
    };
    assert_eq!(Some(expires_at), new.authorization_expires_at);
    assert_eq!(
        (hold.authorized_minor(), hold.hold()),
        (150_000, Hold::Open)
    );
    assert!(
        pending.authorization().is_none(),
        "nothing is held while the charge is pending"
    );
    f.finished(&acquired.lease, &acquired.payment, "{}", LONG.ttl)
        .await;
    let authorized = f.payment(&acquired.payment.id).await;
    assert_eq!(authorized.status, PaymentStatus::Succeeded);
    let hold = authorized.authorization().copied().unwrap();
    assert_eq!(hold.status(), AuthorizationStatus::Authorized);
    assert_eq!(hold.capturable_minor(), 150_000);
    // The order is taken while authorized: another key links to it.
    match f.claim("a2", "order-1", "order-1", LONG).await {
        Claim::Acquired(linked) => {
            assert_eq!(linked.recovery_point, RecoveryPoint::OrderAlreadyPaid)
        }
        other => panic!("expected a link, got {other:?}"),
    }
    // A payment charged at once holds nothing.
    let paid = f.paid_payment("order-2").await;
    assert_eq!(paid.capture, PaymentCapture::Automatic);
    assert!(paid.authorization().is_none());
}

async fn captures_reserve_within_the_hold_and_settle(f: Fixture) {
    let payment = f.authorized_payment("order-1").await;
    let first = f
        .capture_acquired(&payment.id, "c1", Some("500.00"), false)
        .await;
    assert_eq!(first.recovery_point, RecoveryPoint::CaptureCreated);
    let capture = first.capture.clone().unwrap();
    assert_eq!(capture.status, CaptureStatus::Pending);
    assert_eq!(
        (capture.amount.minor_units(), capture.last),
        (50_000, false)
    );
    assert_eq!(capture.acquirer_key, capture.id.acquirer_key());
    let hold = f.hold(&payment.id).await;
    assert_eq!((hold.in_flight_minor(), hold.in_flight()), (50_000, 1));
    assert_eq!(
        first.payment.capture,
        PaymentCapture::Manual {
            hold,
            expires_at: match payment.capture {
                PaymentCapture::Manual { expires_at, .. } => expires_at,
                PaymentCapture::Automatic => panic!("an authorization"),
            },
        },
        "the claim answers with the hold it wrote"
    );
    // More than is capturable: refused, nothing written, not even the key.
    match f
        .claim_capture(&payment.id, "c2", Some("1000.01"), false)
        .await
    {
        CaptureClaim::Refused(CaptureClaimRefusal::ExceedsCapturable {
            capturable_minor, ..
        }) => assert_eq!(capturable_minor, 100_000),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(f.store.key(&f.shop, &key("c2")).await.unwrap().is_none());
    // An existing key is found before any rule about the hold.
    assert!(matches!(
        f.claim_capture(&payment.id, "c1", Some("500.00"), false)
            .await,
        CaptureClaim::Exists(_)
    ));

    let stored = f
        .finish_capture(
            &first.lease,
            Some((&capture, &capture_succeeded("cp_1"))),
            "c1",
        )
        .await;
    assert_eq!(stored, FinishOutcome::Stored);
    let settled = f
        .store
        .capture(&f.shop, &capture.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(settled.status, CaptureStatus::Succeeded);
    assert_eq!(settled.provider_capture_id.as_deref(), Some("cp_1"));
    let hold = f.hold(&payment.id).await;
    assert_eq!((hold.captured_minor(), hold.in_flight()), (50_000, 0));
    assert_eq!(hold.status(), AuthorizationStatus::PartiallyCaptured);
    // Settled once.
    assert_eq!(
        f.finish_capture(
            &first.lease,
            Some((&capture, &capture_succeeded("cp_1"))),
            "c1"
        )
        .await,
        FinishOutcome::LeaseLost
    );

    // The rest, as the last capture: closes the hold while in flight.
    let rest = f.capture_acquired(&payment.id, "c3", None, false).await;
    let rest_capture = rest.capture.clone().unwrap();
    assert_eq!(
        (rest_capture.amount.minor_units(), rest_capture.last),
        (100_000, true)
    );
    assert_eq!(f.hold(&payment.id).await.hold(), Hold::Closing);
    assert!(matches!(
        f.claim_capture(&payment.id, "c4", Some("1.00"), false)
            .await,
        CaptureClaim::Refused(CaptureClaimRefusal::Refused(CaptureRefusal::InProgress))
    ));
    // A refusal gives the reservation back and reopens the hold.
    let refused = CaptureSettlement::Failed {
        code: "authorization_closed".into(),
    };
    assert!(
        f.finish_capture(&rest.lease, Some((&rest_capture, &refused)), "c3")
            .await
            .stored()
    );
    let failed = f
        .store
        .capture(&f.shop, &rest_capture.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.status, CaptureStatus::Failed);
    assert_eq!(failed.failure_code.as_deref(), Some("authorization_closed"));
    let hold = f.hold(&payment.id).await;
    assert_eq!(
        (hold.hold(), hold.captured_minor(), hold.in_flight_minor()),
        (Hold::Open, 50_000, 0)
    );

    // The rest again, succeeding: the hold is captured, the payment succeeded.
    let last = f.capture_acquired(&payment.id, "c5", None, true).await;
    let last_capture = last.capture.clone().unwrap();
    assert!(
        f.finish_capture(
            &last.lease,
            Some((&last_capture, &capture_succeeded("cp_2"))),
            "c5"
        )
        .await
        .stored()
    );
    let hold = f.hold(&payment.id).await;
    assert_eq!(
        (hold.hold(), hold.captured_minor()),
        (Hold::Captured, 150_000)
    );
    assert_eq!(hold.status(), AuthorizationStatus::Succeeded);
    assert!(matches!(
        f.claim_capture(&payment.id, "c6", Some("1.00"), false)
            .await,
        CaptureClaim::Refused(CaptureClaimRefusal::Refused(CaptureRefusal::Closed(
            AuthorizationStatus::Succeeded
        )))
    ));

    // The payment's history tells each capture's reservation and end.
    let kinds = f.history_kinds(&payment.id).await;
    let moves: Vec<_> = kinds
        .iter()
        .filter(|k| k.starts_with("capture_"))
        .copied()
        .collect();
    assert_eq!(
        moves,
        [
            "capture_reserved",
            "capture_ended",
            "capture_reserved",
            "capture_ended",
            "capture_reserved",
            "capture_ended"
        ],
        "{kinds:?}"
    );
    // Each ended capture told the merchant, in order.
    let types: Vec<EventType> = f.all_events().await.iter().map(|e| e.event_type).collect();
    assert_eq!(
        types[..3],
        [
            EventType::CaptureSucceeded,
            EventType::CaptureFailed,
            EventType::CaptureSucceeded
        ],
        "newest first: {types:?}"
    );
    // The payment's captures, newest first, a page at a time.
    let page = f
        .store
        .list_captures(
            &f.shop,
            &payment.id,
            &PageRequest {
                limit: PageLimit::new(2).unwrap(),
                cursor: Cursor::Newest,
            },
        )
        .await
        .unwrap();
    let ids: Vec<_> = page.items.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids, [last_capture.id.clone(), rest_capture.id.clone()]);
    assert!(page.has_more);
    let next = f
        .store
        .list_captures(
            &f.shop,
            &payment.id,
            &PageRequest {
                limit: PageLimit::new(2).unwrap(),
                cursor: Cursor::After(rest_capture.id.clone()),
            },
        )
        .await
        .unwrap();
    assert_eq!(next.items.len(), 1);
    assert_eq!(next.items[0].id, capture.id);
}

async fn captures_of_payments_that_hold_nothing_are_refused_and_not_stored(f: Fixture) {
    let paid = f.paid_payment("order-1").await;
    assert_eq!(
        refusal(f.claim_capture(&paid.id, "c1", Some("1.00"), false).await),
        CaptureClaimRefusal::NotAnAuthorization
    );
    let pending = f
        .store
        .claim_payment(
            &claim(&f.shop, "a2", "order-2"),
            &new_authorization(&f.shop, "a2", "order-2"),
            LONG,
        )
        .await
        .unwrap();
    let Claim::Acquired(pending) = pending else {
        panic!("a new key is claimed")
    };
    assert_eq!(
        refusal(
            f.claim_capture(&pending.payment.id, "c2", None, false)
                .await
        ),
        CaptureClaimRefusal::NotAuthorized(PaymentStatus::Pending)
    );
    let missing = chargeonce_core::PaymentId::generate();
    assert_eq!(
        refusal(f.claim_capture(&missing, "c3", None, false).await),
        CaptureClaimRefusal::PaymentNotFound
    );
    let authorized = f.authorized_payment("order-3").await;
    let mut dollars = new_capture(&f.shop, &authorized.id, "c4", None, false);
    dollars.amount = Some(chargeonce_core::Money::parse("1.00", "USD").unwrap());
    let claimed = f
        .store
        .claim_capture(&claim(&f.shop, "c4", "capture"), &dollars, LONG)
        .await
        .unwrap();
    assert_eq!(refusal(claimed), CaptureClaimRefusal::CurrencyMismatch);
    for k in ["c1", "c2", "c3", "c4"] {
        assert!(
            f.store.key(&f.shop, &key(k)).await.unwrap().is_none(),
            "{k}"
        );
    }
    assert_eq!(f.hold(&authorized.id).await.in_flight(), 0);
}

fn refusal(claim: CaptureClaim) -> CaptureClaimRefusal {
    match claim {
        CaptureClaim::Refused(refused) => refused,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn concurrent_capture_claims_never_exceed_the_hold(f: Fixture) {
    let payment = f.authorized_payment("order-1").await;
    // Four instances (PostgreSQL: four pools) race 20 captures of 500.00 on
    // a hold of 1500.00: the payment's row lock lets exactly three in.
    let instances = f.instances(4).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = Arc::clone(&instances[i % instances.len()]);
        let (shop, id) = (f.shop.clone(), payment.id.clone());
        tasks.push(tokio::spawn(async move {
            let k = format!("c{i}");
            store
                .claim_capture(
                    &claim(&shop, &k, "capture"),
                    &new_capture(&shop, &id, &k, Some("500.00"), false),
                    LONG,
                )
                .await
                .unwrap()
        }));
    }
    let mut acquired = 0;
    for task in tasks {
        match task.await.unwrap() {
            CaptureClaim::Acquired(_) => acquired += 1,
            CaptureClaim::Refused(CaptureClaimRefusal::ExceedsCapturable { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(acquired, 3);
    let hold = f.hold(&payment.id).await;
    assert_eq!((hold.in_flight_minor(), hold.in_flight()), (150_000, 3));
    assert_eq!(hold.capturable_minor(), 0);
}

async fn a_capture_key_is_taken_over_with_its_capture_and_not_before(f: Fixture) {
    let payment = f.authorized_payment("order-1").await;
    let first = f
        .capture_acquired(&payment.id, "c1", Some("100.00"), false)
        .await;
    // Parked (an acquirer call of unknown outcome): the payment being
    // authorized says nothing of the capture, so no take-over yet.
    assert!(
        f.store
            .park_lease(&first.lease, std::time::Duration::from_secs(60), &[])
            .await
            .unwrap()
    );
    assert!(f.take_over("c1", "capture").await.is_none());
    let second = f
        .capture_acquired(&payment.id, "c2", Some("100.00"), false)
        .await;
    assert!(f.store.release_lease(&second.lease, &[]).await.unwrap());
    let taken = f.take_over("c2", "capture").await.unwrap();
    assert_eq!(taken.recovery_point, RecoveryPoint::CaptureCreated);
    assert_eq!(taken.capture, second.capture);
    let capture = taken.capture.clone().unwrap();
    assert_eq!(
        f.finish_capture(
            &second.lease,
            Some((&capture, &capture_succeeded("x"))),
            "old"
        )
        .await,
        FinishOutcome::LeaseLost
    );
    assert!(
        f.finish_capture(
            &taken.lease,
            Some((&capture, &capture_succeeded("x"))),
            "new"
        )
        .await
        .stored()
    );
    assert_eq!(f.record("c2").await.recovery_point, RecoveryPoint::Finished);
    assert_eq!(f.record("c2").await.capture_id, Some(capture.id.clone()));
    assert_eq!(f.hold(&payment.id).await.captured_minor(), 10_000);
}

async fn an_authorization_refunds_captured_money_only(f: Fixture) {
    let payment = f.authorized_payment("order-1").await;
    assert!(matches!(
        f.claim_refund(&payment.id, "r1", Some("1.00"), LONG).await,
        RefundClaim::Refused(RefundRefusal::ExceedsAmount { available_minor: 0 })
    ));
    let part = f
        .capture_acquired(&payment.id, "c1", Some("400.00"), false)
        .await;
    let capture = part.capture.clone().unwrap();
    assert!(
        f.finish_capture(
            &part.lease,
            Some((&capture, &capture_succeeded("cp"))),
            "c1"
        )
        .await
        .stored()
    );
    match f
        .claim_refund(&payment.id, "r2", Some("400.01"), LONG)
        .await
    {
        RefundClaim::Refused(RefundRefusal::ExceedsAmount { available_minor }) => {
            assert_eq!(available_minor, 40_000)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let RefundClaim::Acquired(all) = f.claim_refund(&payment.id, "r3", None, LONG).await else {
        panic!("a refund of what was captured")
    };
    assert_eq!(all.refund.unwrap().amount.minor_units(), 40_000);
}

/// A shop's payments filtered by the status the API shows: an
/// authorization's own once it stands (authorized, partially captured,
/// voided), a payment charged at once as its charge.
async fn payments_are_listed_by_the_status_they_show(f: Fixture) {
    let untouched = f.authorized_payment("order-1").await;
    let partly = f.authorized_payment("order-2").await;
    let taken = f
        .capture_acquired(&partly.id, "c1", Some("100.00"), false)
        .await;
    let capture = taken.capture.as_deref().unwrap();
    f.finish_capture(
        &taken.lease,
        Some((capture, &capture_succeeded("cp_1"))),
        "{}",
    )
    .await;
    let voided = f.authorized_payment("order-3").await;
    let ReleaseClaim::Acquired(void) = f.claim_void(&voided.id, "v1").await else {
        panic!("a void of an open hold")
    };
    let released = VoidSettlement::Succeeded {
        provider_void_id: "vd_1".into(),
        released: voided.amount,
    };
    f.finish_void(&void.lease, Some((&voided.id, &released)), "{}")
        .await;
    let paid = f.paid_payment("order-4").await;
    let listed = |status: ShownStatus| {
        let filter = PaymentFilter {
            status: Some(status),
            ..PaymentFilter::default()
        };
        let store = f.store.clone();
        let shop = f.shop.clone();
        async move {
            store
                .list_payments(
                    &shop,
                    &filter,
                    &PageRequest {
                        limit: PageLimit::DEFAULT,
                        cursor: Cursor::Newest,
                    },
                )
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|p| p.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(ShownStatus::Authorized).await, vec![untouched.id]);
    assert_eq!(
        listed(ShownStatus::PartiallyCaptured).await,
        vec![partly.id]
    );
    assert_eq!(listed(ShownStatus::Voided).await, vec![voided.id]);
    assert_eq!(listed(ShownStatus::Succeeded).await, vec![paid.id]);
    assert!(listed(ShownStatus::Expired).await.is_empty());
}

on_both_stores!(
    fixture =>
    an_authorization_holds_its_amount_once_its_charge_succeeded,
    captures_reserve_within_the_hold_and_settle,
    captures_of_payments_that_hold_nothing_are_refused_and_not_stored,
    concurrent_capture_claims_never_exceed_the_hold,
    a_capture_key_is_taken_over_with_its_capture_and_not_before,
    an_authorization_refunds_captured_money_only,
    payments_are_listed_by_the_status_they_show,
);
