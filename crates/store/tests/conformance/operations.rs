//! The operator console's reads across shops, and the operator's
//! credential: every shop's payments a page at a time, any payment and its
//! events, the shops without their secrets, the overview's counts.

use std::collections::HashSet;
use std::time::Duration;

use chargeonce_core::api_key::Mode;
use chargeonce_core::events::{AttemptOutcome, EventId, EventType, WebhookEndpoint};
use chargeonce_core::findings::{FindingKind, NewFinding, Resolution};
use chargeonce_core::store::StoreCounts;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{
    Claim, Cursor, Page, PageLimit, PageRequest, Payment, PaymentFilter, PaymentId, PaymentStatus,
    Reference, ShopId, ShopSecret, StoreError,
};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

fn page(limit: u32, cursor: Cursor<PaymentId>) -> PageRequest<PaymentId> {
    PageRequest {
        limit: PageLimit::new(limit).unwrap(),
        cursor,
    }
}

/// Claims a payment of `shop` with key and order `k`.
async fn claim_in(f: &Fixture, shop: &ShopId, k: &str) -> Payment {
    let claimed = f
        .store
        .claim_payment(&claim(shop, k, k), &new_payment(shop, k, k), LONG)
        .await
        .unwrap();
    let Claim::Acquired(acquired) = claimed else {
        panic!("a new claim")
    };
    acquired.payment
}

/// Every page of the cross-shop list from `cursor` on in its direction.
async fn walk(
    f: &Fixture,
    shop: Option<&ShopId>,
    filter: &PaymentFilter,
    limit: u32,
    mut cursor: Cursor<PaymentId>,
) -> Vec<Vec<PaymentId>> {
    let mut pages = Vec::new();
    loop {
        let Page { items, has_more } = f
            .store
            .all_payments(shop, Mode::Live, filter, &page(limit, cursor.clone()))
            .await
            .unwrap();
        assert!(items.len() <= limit as usize);
        for pair in items.windows(2) {
            assert!(
                (pair[0].created_at, pair[0].id.as_str())
                    > (pair[1].created_at, pair[1].id.as_str())
            );
        }
        let next = match (&cursor, items.first(), items.last()) {
            (Cursor::Before(_), Some(newest), _) => Cursor::Before(newest.id.clone()),
            (_, _, Some(oldest)) => Cursor::After(oldest.id.clone()),
            _ => cursor.clone(),
        };
        pages.push(items.into_iter().map(|p| p.id).collect());
        if !has_more {
            return pages;
        }
        cursor = next;
    }
}

/// The operator's secret is stored at the first start only; the flag
/// replaces it.
async fn the_operator_secret_is_stored_once_and_replaced_by_flag(f: Fixture) {
    let first = ShopSecret::from_string("first").hash();
    let second = ShopSecret::from_string("second").hash();
    assert_eq!(f.store.operator_secret().await.unwrap(), None);
    assert!(f.store.init_operator_secret(&first).await.unwrap());
    assert!(!f.store.init_operator_secret(&second).await.unwrap());
    assert_eq!(
        f.store.operator_secret().await.unwrap(),
        Some(first.clone())
    );
    f.store.set_operator_secret(&second).await.unwrap();
    assert_eq!(
        f.store.operator_secret().await.unwrap(),
        Some(second.clone())
    );
    assert!(!f.store.init_operator_secret(&first).await.unwrap());
    assert_eq!(f.store.operator_secret().await.unwrap(), Some(second));
    // Never a shop's: the shop's secret is where it was.
    let keys = f.store.shop_keys(&f.shop).await.unwrap().unwrap();
    assert!(keys[0].hash.verify(&ShopSecret::from_string("s")));
}

/// Two shops' payments, paged through across shops both ways: each once,
/// newest first; one shop's list is its own; a cursor that is no payment
/// (of the shop, when one is given) is refused.
async fn all_payments_pages_across_shops_both_ways(f: Fixture) {
    let b = f.other_shop(&ShopSecret::from_string("b")).await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(claim_in(&f, &f.shop, &format!("a{i}")).await.id);
        ids.push(claim_in(&f, &b, &format!("b{i}")).await.id);
    }
    let filter = PaymentFilter::default();
    let forwards = walk(&f, None, &filter, 4, Cursor::Newest).await;
    assert_eq!(
        forwards.iter().map(Vec::len).collect::<Vec<_>>(),
        [4, 4, 4, 2]
    );
    let read: Vec<PaymentId> = forwards.into_iter().flatten().collect();
    assert_eq!(read.iter().collect::<HashSet<_>>().len(), 14);
    assert_eq!(
        read.iter().collect::<HashSet<_>>(),
        ids.iter().collect::<HashSet<_>>()
    );
    let oldest = read.last().unwrap().clone();
    let backwards: Vec<PaymentId> = walk(&f, None, &filter, 3, Cursor::Before(oldest.clone()))
        .await
        .into_iter()
        .rev()
        .flatten()
        .collect();
    assert_eq!(backwards, read[..13], "the same order, from the other end");

    // After one shop's payment and before another's, across shops.
    let after = f
        .store
        .all_payments(
            None,
            Mode::Live,
            &filter,
            &page(2, Cursor::After(read[3].clone())),
        )
        .await
        .unwrap();
    assert_eq!(
        after.items.iter().map(|p| &p.id).collect::<Vec<_>>(),
        [&read[4], &read[5]]
    );
    assert!(after.has_more);
    let before = f
        .store
        .all_payments(
            None,
            Mode::Live,
            &filter,
            &page(2, Cursor::Before(read[4].clone())),
        )
        .await
        .unwrap();
    assert_eq!(
        before.items.iter().map(|p| &p.id).collect::<Vec<_>>(),
        [&read[2], &read[3]]
    );
    assert!(before.has_more);

    // One shop: its own list, and its own cursors only.
    let of_b: Vec<PaymentId> = walk(&f, Some(&b), &filter, 3, Cursor::Newest)
        .await
        .into_iter()
        .flatten()
        .collect();
    let b_ids: Vec<&PaymentId> = read
        .iter()
        .filter(|id| ids.iter().position(|x| x == *id).unwrap() % 2 == 1)
        .collect();
    assert_eq!(of_b.iter().collect::<Vec<_>>(), b_ids);
    let a_payment = ids[0].clone();
    let foreign = f
        .store
        .all_payments(
            Some(&b),
            Mode::Live,
            &filter,
            &page(2, Cursor::After(a_payment.clone())),
        )
        .await;
    assert!(
        matches!(foreign, Err(StoreError::UnknownCursor(_))),
        "{foreign:?}"
    );
    // Across shops, any shop's payment is a cursor; a payment that does
    // not exist is not.
    assert!(
        f.store
            .all_payments(
                None,
                Mode::Live,
                &filter,
                &page(2, Cursor::After(a_payment))
            )
            .await
            .is_ok()
    );
    for cursor in [
        Cursor::After(PaymentId::generate()),
        Cursor::Before(PaymentId::generate()),
    ] {
        let unknown = f
            .store
            .all_payments(None, Mode::Live, &filter, &page(2, cursor))
            .await;
        assert!(
            matches!(unknown, Err(StoreError::UnknownCursor(_))),
            "{unknown:?}"
        );
    }

    // Filters apply across shops.
    f.settle(&ids[2], &succeeded()).await;
    let succeeded_only = PaymentFilter {
        status: Some(PaymentStatus::Succeeded.into()),
        ..PaymentFilter::default()
    };
    let found = walk(&f, None, &succeeded_only, 10, Cursor::Newest).await;
    assert_eq!(found, [vec![ids[2].clone()]]);
    let of_order = PaymentFilter {
        reference: Some(Reference::new("b3").unwrap()),
        ..PaymentFilter::default()
    };
    let found = walk(&f, None, &of_order, 10, Cursor::Newest).await;
    assert_eq!(found, [vec![ids[7].clone()]]);
}

/// Any shop's payment, its merchant events oldest first with their
/// delivery logs, and an event's shop.
async fn any_payment_and_its_events(f: Fixture) {
    let b = f.other_shop(&ShopSecret::from_string("b")).await;
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
    let of_b = claim_in(&f, &b, "b1").await;

    assert_eq!(
        f.store
            .any_payment(&of_b.id)
            .await
            .unwrap()
            .unwrap()
            .shop_id,
        b
    );
    assert_eq!(
        f.store.any_payment(&paid.id).await.unwrap().unwrap(),
        f.payment(&paid.id).await
    );
    assert_eq!(
        f.store.any_payment(&PaymentId::generate()).await.unwrap(),
        None
    );

    let events = f.store.payment_events(&paid.id).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.event_type).collect::<Vec<_>>(),
        [EventType::PaymentSucceeded, EventType::RefundSucceeded]
    );
    assert_eq!(events[1].refund_id, Some(refund_row.id.clone()));
    assert!(
        events
            .iter()
            .all(|e| e.payment_id == paid.id && e.shop_id == f.shop)
    );
    // No endpoint yet: no delivery. The operator's first endpoint gets the
    // events that went nowhere; the delivery log as the shop's own read
    // shows it.
    assert!(events.iter().all(|e| e.deliveries.is_empty()));
    let hook = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_test"),
    };
    assert!(f.store.set_webhook(&f.shop, Some(&hook)).await.unwrap());
    let events = f.store.payment_events(&paid.id).await.unwrap();
    assert!(events.iter().all(|e| e.deliveries.len() == 1));
    let endpoint = events[0].deliveries[0].endpoint_id.clone();
    f.store
        .record_attempt(
            &f.shop,
            &events[0].id,
            &endpoint,
            &AttemptOutcome::Delivered { status: 204 },
        )
        .await
        .unwrap();
    let logged = f.store.payment_events(&paid.id).await.unwrap();
    assert_eq!(logged[0].delivery().attempts, 1);
    assert_eq!(logged[0].delivery().last_status, Some(204));
    assert_eq!(logged[0].deliveries.len(), 1);
    assert_eq!(
        logged[0],
        f.store
            .event(&f.shop, &events[0].id)
            .await
            .unwrap()
            .unwrap()
    );
    assert!(f.store.payment_events(&of_b.id).await.unwrap().is_empty());
    assert!(
        f.store
            .payment_events(&PaymentId::generate())
            .await
            .unwrap()
            .is_empty()
    );

    assert_eq!(
        f.store.event_shop(&events[0].id).await.unwrap(),
        Some(f.shop.clone())
    );
    assert_eq!(
        f.store.event_shop(&EventId::generate()).await.unwrap(),
        None
    );
}

/// The shops, oldest first, with their webhook URL and never a secret.
async fn shops_are_listed_without_their_secrets(f: Fixture) {
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let b = f.other_shop(&ShopSecret::from_string("b")).await;
    let endpoint = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_test"),
    };
    f.store.set_webhook(&b, Some(&endpoint)).await.unwrap();
    let shops = f.store.shops().await.unwrap();
    assert_eq!(
        shops
            .iter()
            .map(|s| (s.shop_id.clone(), s.webhook_url.clone()))
            .collect::<Vec<_>>(),
        [
            (f.shop.clone(), None),
            (b, Some("http://127.0.0.1:9/hooks".to_owned()))
        ]
    );
    assert!(shops[0].created_at <= shops[1].created_at);
}

/// A shop's test mode is a namespace of its own, made with the shop: its
/// payments are never in live mode's lists (across shops or of the shop),
/// nor in live mode's pending queue, and the shops list names each shop once.
async fn test_mode_objects_stay_in_test_mode(f: Fixture) {
    let test = f.shop.in_mode(Mode::Test);
    let live_paid = claim_in(&f, &f.shop, "order-1").await;
    // The same key and order in test mode: another payment.
    let test_paid = claim_in(&f, &test, "order-1").await;
    assert_ne!(live_paid.id, test_paid.id);
    let filter = PaymentFilter::default();
    for (shop, mode, expected) in [
        (None, Mode::Live, &live_paid.id),
        (None, Mode::Test, &test_paid.id),
        (Some(&f.shop), Mode::Live, &live_paid.id),
        (Some(&f.shop), Mode::Test, &test_paid.id),
        (Some(&test), Mode::Live, &live_paid.id),
    ] {
        let listed = f
            .store
            .all_payments(shop, mode, &filter, &page(10, Cursor::Newest))
            .await
            .unwrap();
        let ids: Vec<&PaymentId> = listed.items.iter().map(|p| &p.id).collect();
        assert_eq!(ids, [expected], "{shop:?} {mode:?}");
        // Paged from a cursor, the mode still holds.
        let after = f
            .store
            .all_payments(
                shop,
                mode,
                &filter,
                &page(10, Cursor::Before(expected.clone())),
            )
            .await
            .unwrap();
        assert!(after.items.is_empty(), "{shop:?} {mode:?}");
    }
    let pending = |mode| f.store.pending_payments_of(Some(mode), Duration::ZERO, 10);
    let live_pending: Vec<PaymentId> = pending(Mode::Live)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    let test_pending: Vec<PaymentId> = pending(Mode::Test)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(
        (live_pending, test_pending),
        (vec![live_paid.id], vec![test_paid.id])
    );
    assert_eq!(
        f.store
            .pending_payments(Duration::ZERO, 10)
            .await
            .unwrap()
            .len(),
        2
    );
    let shops: Vec<ShopId> = f
        .store
        .shops()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.shop_id)
        .collect();
    assert_eq!(shops, std::slice::from_ref(&f.shop));
}

/// The overview's counts: pending payments (and when the oldest was
/// created), open findings (all, and by kind), events neither delivered nor
/// given up, and those of them due (of shops with a webhook URL) with the
/// oldest one's `due_since`.
async fn the_counts_follow_the_rows(f: Fixture) {
    assert_eq!(f.store.counts().await.unwrap(), StoreCounts::default());
    let b = f.other_shop(&ShopSecret::from_string("b")).await;
    let oldest = claim_in(&f, &f.shop, "pending-1").await;
    claim_in(&f, &b, "pending-2").await;
    let paid = f.paid_payment("order-1").await;
    let finding = |charge: &str| NewFinding {
        kind: FindingKind::OrphanCharge,
        shop_id: b.clone(),
        reference: Reference::new("order-x").unwrap(),
        payment_id: None,
        charge_ids: vec![charge.to_owned()],
        amount: None,
        detail: "no payment".into(),
        refunded: Vec::new(),
    };
    let ids = f
        .store
        .record_findings(&[finding("ch_1"), finding("ch_2")])
        .await
        .unwrap();
    // The paid payment's event went nowhere (the shop has no endpoint): no
    // delivery is owed.
    assert_eq!(
        f.store.counts().await.unwrap(),
        StoreCounts {
            pending_payments: 2,
            open_findings: 2,
            open_findings_by_kind: [0, 2, 0, 0],
            undelivered_events: 0,
            due_events: 0,
            oldest_due_at: None,
            oldest_pending_at: Some(oldest.created_at),
        }
    );
    assert_eq!(
        f.store
            .counts()
            .await
            .unwrap()
            .open_findings_of(FindingKind::OrphanCharge),
        2
    );
    // The operator's first endpoint makes it due, due since then.
    let before = time::OffsetDateTime::now_utc();
    let endpoint = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_test"),
    };
    f.store.set_webhook(&f.shop, Some(&endpoint)).await.unwrap();
    let after = time::OffsetDateTime::now_utc();
    let counts = f.store.counts().await.unwrap();
    assert_eq!((counts.undelivered_events, counts.due_events), (1, 1));
    let due_since = counts.oldest_due_at.expect("due since the webhook was set");
    let slack = time::Duration::seconds(1);
    assert!(
        due_since >= before - slack && due_since <= after + slack,
        "{before} <= {due_since} <= {after}"
    );
    f.store
        .resolve_finding(
            ids[0],
            &Resolution::Manual {
                by: "ops".into(),
                note: "ok".into(),
            },
        )
        .await
        .unwrap();
    let event = f.store.payment_events(&paid.id).await.unwrap().remove(0);
    f.store
        .record_attempt(
            &f.shop,
            &event.id,
            &event.deliveries[0].endpoint_id,
            &AttemptOutcome::Delivered { status: 200 },
        )
        .await
        .unwrap();
    assert_eq!(
        f.store.counts().await.unwrap(),
        StoreCounts {
            pending_payments: 2,
            open_findings: 1,
            open_findings_by_kind: [0, 1, 0, 0],
            undelivered_events: 0,
            due_events: 0,
            oldest_due_at: None,
            oldest_pending_at: Some(oldest.created_at),
        }
    );
}

on_both_stores!(
    fixture =>
    the_operator_secret_is_stored_once_and_replaced_by_flag,
    all_payments_pages_across_shops_both_ways,
    any_payment_and_its_events,
    shops_are_listed_without_their_secrets,
    the_counts_follow_the_rows,
    test_mode_objects_stay_in_test_mode,
);
