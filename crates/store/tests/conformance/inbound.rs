//! The acquirer's events: recorded once, settling only pending payments.

use std::sync::Arc;

use chargeonce_core::webhook::EventKind;
use chargeonce_core::{AcquirerKey, EventRecorded, PaymentStatus, ShopId};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn events_are_recorded_once_and_only_settle_pending_payments(f: Fixture) {
    let (_, payment) = f.claimed("k1", "order-1", LONG).await;
    let key = payment.acquirer_key.clone();
    let EventRecorded::Unchanged(p) = f
        .store
        .record_event(&event("evt_0", EventKind::Processing, &key, &f.shop))
        .await
        .unwrap()
    else {
        panic!("processing moves nothing")
    };
    assert_eq!(p.status, PaymentStatus::Pending);
    let EventRecorded::Settled(p) = f
        .store
        .record_event(&event("evt_1", EventKind::Succeeded, &key, &f.shop))
        .await
        .unwrap()
    else {
        panic!("pending -> succeeded")
    };
    assert_eq!(p.status, PaymentStatus::Succeeded);
    assert_eq!(
        f.store
            .record_event(&event("evt_1", EventKind::Succeeded, &key, &f.shop))
            .await
            .unwrap(),
        EventRecorded::Duplicate
    );
    // Late and contradicting events change nothing.
    for (id, kind) in [
        ("evt_2", EventKind::Declined),
        ("evt_3", EventKind::Processing),
    ] {
        let EventRecorded::Unchanged(p) = f
            .store
            .record_event(&event(id, kind, &key, &f.shop))
            .await
            .unwrap()
        else {
            panic!("{id}: final states never change")
        };
        assert_eq!(p.status, PaymentStatus::Succeeded);
    }
    let unknown = AcquirerKey::from_stored("chargeonce-pay_unknown".into());
    assert_eq!(
        f.store
            .record_event(&event("evt_4", EventKind::Succeeded, &unknown, &f.shop))
            .await
            .unwrap(),
        EventRecorded::UnknownPayment
    );
    assert_eq!(
        f.store
            .record_event(&event("evt_4", EventKind::Succeeded, &unknown, &f.shop))
            .await
            .unwrap(),
        EventRecorded::Duplicate
    );
    // Another shop's event never touches this shop's payment.
    let (_, second) = f.claimed("k2", "order-2", LONG).await;
    let other = ShopId::new("shop-b").unwrap();
    assert_eq!(
        f.store
            .record_event(&event(
                "evt_5",
                EventKind::Succeeded,
                &second.acquirer_key,
                &other
            ))
            .await
            .unwrap(),
        EventRecorded::UnknownPayment
    );
    let still = f.payment(&second.id).await;
    assert_eq!(still.status, PaymentStatus::Pending);
}

async fn concurrent_deliveries_of_one_event_apply_once(f: Fixture) {
    let (_, payment) = f.claimed("k1", "order-1", LONG).await;
    let f = Arc::new(f);
    let tasks = (0..20).map(|_| {
        let f = Arc::clone(&f);
        let key = payment.acquirer_key.clone();
        tokio::spawn(async move {
            f.store
                .record_event(&event("evt_dup", EventKind::Succeeded, &key, &f.shop))
                .await
        })
    });
    let mut applied = 0;
    for result in futures::future::join_all(tasks).await {
        match result.unwrap().unwrap() {
            EventRecorded::Duplicate => {}
            EventRecorded::Settled(_) => applied += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(applied, 1);
}

on_both_stores!(
    fixture =>
    events_are_recorded_once_and_only_settle_pending_payments,
    concurrent_deliveries_of_one_event_apply_once,
);
