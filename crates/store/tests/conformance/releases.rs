//! Releases: a void under its own key and the expiry of holds nobody
//! captured, each judged under the payment's lock (nothing in flight, once),
//! with its merchant event; an authorization released with nothing captured
//! frees its order, one that took money keeps it.

use std::time::Duration;

use chargeonce_core::authorization::{
    AuthorizationStatus, CaptureRefusal, Hold, ReleaseReason, ReleaseRefusal,
};
use chargeonce_core::events::EventType;
use chargeonce_core::{
    CaptureClaim, CaptureClaimRefusal, Claim, FinishOutcome, RecoveryPoint, ReleaseClaim,
    ReleaseClaimRefusal, VoidSettlement,
};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

fn voided() -> VoidSettlement {
    VoidSettlement::Succeeded {
        provider_void_id: "vd_1".into(),
        released: chargeonce_core::Money::parse("1500.00", "RUB").unwrap(),
    }
}

fn refused(claim: ReleaseClaim) -> ReleaseClaimRefusal {
    match claim {
        ReleaseClaim::Refused(refused) => refused,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn a_void_releases_the_rest_once_and_frees_an_uncaptured_order(f: Fixture) {
    let payment = f.authorized_payment("order-1").await;
    let ReleaseClaim::Acquired(void) = f.claim_void(&payment.id, "v1").await else {
        panic!("a void claim")
    };
    assert_eq!(void.recovery_point, RecoveryPoint::VoidRequested);
    assert_eq!(f.record("v1").await.payment_id, Some(payment.id.clone()));
    let releasing = Hold::Releasing(ReleaseReason::Void);
    assert_eq!(void.payment.authorization().unwrap().hold(), releasing);
    assert_eq!(f.hold(&payment.id).await.hold(), releasing);
    // Nothing else moves the hold meanwhile, and the same key finds its row.
    assert_eq!(
        refused(f.claim_void(&payment.id, "v2").await),
        ReleaseClaimRefusal::Refused(ReleaseRefusal::ReleaseInProgress)
    );
    assert!(f.store.key(&f.shop, &key("v2")).await.unwrap().is_none());
    assert!(matches!(
        f.claim_capture(&payment.id, "c1", Some("1.00"), false)
            .await,
        CaptureClaim::Refused(CaptureClaimRefusal::Refused(CaptureRefusal::InProgress))
    ));
    assert!(matches!(
        f.claim_void(&payment.id, "v1").await,
        ReleaseClaim::Exists(_)
    ));

    assert!(
        f.finish_void(&void.lease, Some((&payment.id, &voided())), "v1")
            .await
            .stored()
    );
    let hold = f.hold(&payment.id).await;
    assert_eq!(hold.hold(), Hold::Released(ReleaseReason::Void));
    assert_eq!(hold.status(), AuthorizationStatus::Voided);
    let events = f.all_events().await;
    assert_eq!(events[0].event_type, EventType::PaymentVoided);
    let body: serde_json::Value = serde_json::from_slice(&events[0].payload).unwrap();
    assert_eq!(body["data"]["payment"]["status"], "voided");
    assert_eq!(
        refused(f.claim_void(&payment.id, "v3").await),
        ReleaseClaimRefusal::Refused(ReleaseRefusal::Closed(AuthorizationStatus::Voided))
    );
    // Nothing was taken: the order is free for a new payment.
    match f.claim("p2", "order-1", "order-1", LONG).await {
        Claim::Acquired(again) => {
            assert_eq!(again.recovery_point, RecoveryPoint::PaymentCreated);
            assert_ne!(again.payment.id, payment.id);
        }
        other => panic!("expected a new payment, got {other:?}"),
    }
}

async fn a_void_waits_for_captures_and_keeps_an_order_that_took_money(f: Fixture) {
    let payment = f.authorized_payment("order-1").await;
    let part = f
        .capture_acquired(&payment.id, "c1", Some("500.00"), false)
        .await;
    assert_eq!(
        refused(f.claim_void(&payment.id, "v1").await),
        ReleaseClaimRefusal::Refused(ReleaseRefusal::CapturesInProgress)
    );
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
    // A void the acquirer refuses opens the hold again.
    let ReleaseClaim::Acquired(first) = f.claim_void(&payment.id, "v2").await else {
        panic!("a void claim")
    };
    let nothing = VoidSettlement::Failed {
        code: "nothing_to_void".into(),
    };
    assert!(
        f.finish_void(&first.lease, Some((&payment.id, &nothing)), "v2")
            .await
            .stored()
    );
    assert_eq!(f.hold(&payment.id).await.hold(), Hold::Open);
    let ReleaseClaim::Acquired(second) = f.claim_void(&payment.id, "v3").await else {
        panic!("a void claim")
    };
    assert!(
        f.finish_void(&second.lease, Some((&payment.id, &voided())), "v3")
            .await
            .stored()
    );
    let hold = f.hold(&payment.id).await;
    assert_eq!(
        (hold.hold(), hold.captured_minor()),
        (Hold::Released(ReleaseReason::Void), 50_000)
    );
    let history = f
        .store
        .payment_history(Some(&f.shop), &payment.id)
        .await
        .unwrap();
    let releases: Vec<_> = history
        .iter()
        .filter_map(|e| match &e.event {
            chargeonce_core::history::HistoryEvent::ReleaseEnded { released, .. } => {
                Some(*released)
            }
            _ => None,
        })
        .collect();
    assert_eq!(releases, [false, true], "refused, then released");
    assert_eq!(hold.status(), AuthorizationStatus::Succeeded);
    // A second end of a release already ended writes nothing.
    let ReleaseClaim::Refused(_) = f.claim_void(&payment.id, "v4").await else {
        panic!("closed")
    };
    // Money was taken: the order stays the payment's.
    match f.claim("p2", "order-1", "order-1", LONG).await {
        Claim::Acquired(linked) => {
            assert_eq!(linked.recovery_point, RecoveryPoint::OrderAlreadyPaid);
            assert_eq!(linked.payment.id, payment.id);
        }
        other => panic!("expected a link, got {other:?}"),
    }
}

async fn voids_of_payments_that_hold_nothing_are_refused_and_not_stored(f: Fixture) {
    let paid = f.paid_payment("order-1").await;
    assert_eq!(
        refused(f.claim_void(&paid.id, "v1").await),
        ReleaseClaimRefusal::NotAnAuthorization
    );
    let missing = chargeonce_core::PaymentId::generate();
    assert_eq!(
        refused(f.claim_void(&missing, "v2").await),
        ReleaseClaimRefusal::PaymentNotFound
    );
    for k in ["v1", "v2"] {
        assert!(
            f.store.key(&f.shop, &key(k)).await.unwrap().is_none(),
            "{k}"
        );
    }
}

async fn expired_holds_are_found_released_once_and_resumed(f: Fixture) {
    let expired = f.authorized_for("order-1", Duration::ZERO).await;
    let held = f.authorized_payment("order-2").await;
    let found = f.store.expired_authorizations(10).await.unwrap();
    let ids: Vec<_> = found.iter().map(|p| p.id.clone()).collect();
    assert_eq!(
        ids,
        std::slice::from_ref(&expired.id),
        "only the expired hold"
    );
    assert!(
        f.store
            .begin_expiry(&f.shop, &held.id)
            .await
            .unwrap()
            .is_none()
    );

    let begun = f
        .store
        .begin_expiry(&f.shop, &expired.id)
        .await
        .unwrap()
        .unwrap();
    let releasing = Hold::Releasing(ReleaseReason::Expiry);
    assert_eq!(begun.authorization().unwrap().hold(), releasing);
    // Begun again (a worker resuming after a crash): the same release.
    let resumed = f
        .store
        .begin_expiry(&f.shop, &expired.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resumed.authorization().unwrap().hold(), releasing);
    assert_eq!(f.store.expired_authorizations(10).await.unwrap().len(), 1);
    assert!(matches!(
        f.claim_capture(&expired.id, "c1", Some("1.00"), false)
            .await,
        CaptureClaim::Refused(CaptureClaimRefusal::Refused(CaptureRefusal::InProgress))
    ));
    assert_eq!(
        refused(f.claim_void(&expired.id, "v1").await),
        ReleaseClaimRefusal::Refused(ReleaseRefusal::ReleaseInProgress)
    );

    let ended = f
        .store
        .end_expiry(&f.shop, &expired.id, true, &[])
        .await
        .unwrap()
        .unwrap();
    let hold = *ended.authorization().unwrap();
    assert_eq!(hold.status(), AuthorizationStatus::Expired);
    assert_eq!(f.hold(&expired.id).await, hold);
    assert!(
        f.store
            .end_expiry(&f.shop, &expired.id, true, &[])
            .await
            .unwrap()
            .is_none(),
        "ended once"
    );
    assert!(f.store.expired_authorizations(10).await.unwrap().is_empty());
    let kinds = f.history_kinds(&expired.id).await;
    assert_eq!(
        kinds
            .iter()
            .filter(|k| k.starts_with("release_"))
            .collect::<Vec<_>>(),
        [&"release_requested", &"release_ended"],
        "begun once, ended once: {kinds:?}"
    );
    assert_eq!(
        f.all_events().await[0].event_type,
        EventType::PaymentExpired
    );
    assert_eq!(
        f.finish_void(
            &f.capture_acquired(&held.id, "c2", Some("1.00"), false)
                .await
                .lease,
            Some((&held.id, &voided())),
            "c2"
        )
        .await,
        FinishOutcome::PaymentAlreadySettled,
        "a void's end on a hold that is not releasing writes nothing"
    );
}

/// A hold whose final capture is in flight when it expires is not
/// released meanwhile (the capture holds the rest), and, the acquirer
/// refusing that capture, it is open again and still expires: the
/// expirer's queue keeps a hold that is still moving.
async fn a_hold_open_again_after_a_refused_final_capture_still_expires(f: Fixture) {
    let expired = f.authorized_for("order-1", Duration::ZERO).await;
    let last = f.capture_acquired(&expired.id, "c1", None, true).await;
    assert!(
        f.store.expired_authorizations(10).await.unwrap().is_empty(),
        "a final capture in flight: nothing to release"
    );
    let capture = last.capture.as_deref().unwrap();
    let refused = chargeonce_core::CaptureSettlement::Failed {
        code: "acquirer_rejected".into(),
    };
    f.finish_capture(&last.lease, Some((capture, &refused)), "{}")
        .await;
    assert_eq!(f.hold(&expired.id).await.hold(), Hold::Open);
    let due = f.store.expired_authorizations(10).await.unwrap();
    assert_eq!(
        due.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
        vec![expired.id.clone()],
        "open again, it expires"
    );
}

on_both_stores!(
    fixture =>
    a_void_releases_the_rest_once_and_frees_an_uncaptured_order,
    a_void_waits_for_captures_and_keeps_an_order_that_took_money,
    voids_of_payments_that_hold_nothing_are_refused_and_not_stored,
    expired_holds_are_found_released_once_and_resumed,
    a_hold_open_again_after_a_refused_final_capture_still_expires,
);
