//! Cursor lists of a shop's payments and refunds: keyset pages newest
//! first, stable while payments are inserted, both directions, filters, the
//! limit's bound and foreign cursors.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chargeonce_core::{
    Claim, Cursor, MAX_PAGE_LIMIT, Page, PageLimit, PageRequest, Payment, PaymentFilter, PaymentId,
    PaymentStatus, Reference, RefundId, ShopId, ShopSecret, Store, StoreError,
};
use chargeonce_testkit::on_both_stores;
use time::Duration as TimeDuration;

use crate::support::*;

/// A page request.
fn page<Id>(limit: u32, cursor: Cursor<Id>) -> PageRequest<Id> {
    PageRequest {
        limit: PageLimit::new(limit).unwrap(),
        cursor,
    }
}

/// Claims `n` payments of `shop` named `{prefix}{i}` (key and order),
/// `parallel` claims at a time.
async fn insert_payments(store: &Arc<dyn Store>, shop: &ShopId, prefix: &str, n: usize) {
    let parallel = 8;
    let mut tasks = Vec::new();
    for t in 0..parallel {
        let (store, shop, prefix) = (Arc::clone(store), shop.clone(), prefix.to_owned());
        tasks.push(tokio::spawn(async move {
            for i in (t..n).step_by(parallel) {
                let k = format!("{prefix}{i}");
                let claimed = store
                    .claim_payment(&claim(&shop, &k, &k), &new_payment(&shop, &k, &k), LONG)
                    .await
                    .unwrap();
                assert!(matches!(claimed, Claim::Acquired(_)));
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// Every page of the list from `start` on in its direction, with the
/// filter, `limit` at a time: the pages' ids in the order read.
async fn walk(
    store: &dyn Store,
    shop: &ShopId,
    filter: &PaymentFilter,
    limit: u32,
    backwards_from: Option<PaymentId>,
) -> Vec<Vec<Payment>> {
    let mut pages = Vec::new();
    let mut cursor = match backwards_from {
        Some(id) => Cursor::Before(id),
        None => Cursor::Newest,
    };
    loop {
        let Page { items, has_more } = store
            .list_payments(shop, filter, &page(limit, cursor.clone()))
            .await
            .unwrap();
        assert!(items.len() <= limit as usize);
        let next = match (&cursor, items.first(), items.last()) {
            (Cursor::Before(_), Some(newest), _) => Cursor::Before(newest.id.clone()),
            (_, _, Some(oldest)) => Cursor::After(oldest.id.clone()),
            _ => cursor.clone(),
        };
        pages.push(items);
        if !has_more {
            return pages;
        }
        cursor = next;
    }
}

/// Each page newest first by (created_at, id).
fn assert_newest_first(items: &[Payment]) {
    for pair in items.windows(2) {
        assert!(
            (pair[0].created_at, pair[0].id.as_str()) > (pair[1].created_at, pair[1].id.as_str()),
            "{:?} before {:?}",
            pair[0].id,
            pair[1].id
        );
    }
}

/// 1 000 payments paged through, forwards then backwards, while other tasks
/// keep inserting payments: every payment that existed before the walk
/// appears exactly once, and no id twice.
async fn a_walk_through_the_pages_misses_and_repeats_nothing_under_inserts(f: Fixture) {
    insert_payments(&f.store, &f.shop, "before-", 1000).await;
    let existing: HashSet<PaymentId> =
        walk(&*f.store, &f.shop, &PaymentFilter::default(), 100, None)
            .await
            .into_iter()
            .flatten()
            .map(|p| p.id)
            .collect();
    assert_eq!(existing.len(), 1000);

    let stop = Arc::new(AtomicBool::new(false));
    let mut inserters = Vec::new();
    for t in 0..2 {
        let (store, shop, stop) = (Arc::clone(&f.store), f.shop.clone(), Arc::clone(&stop));
        inserters.push(tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("during-{t}-{n}");
                store
                    .claim_payment(&claim(&shop, &k, &k), &new_payment(&shop, &k, &k), LONG)
                    .await
                    .unwrap();
                n += 1;
                tokio::task::yield_now().await;
            }
            n
        }));
    }

    let filter = PaymentFilter::default();
    let forwards = walk(&*f.store, &f.shop, &filter, 37, None).await;
    let oldest = forwards
        .iter()
        .flatten()
        .last()
        .map(|p| p.id.clone())
        .unwrap();
    let backwards = walk(&*f.store, &f.shop, &filter, 41, Some(oldest.clone())).await;
    stop.store(true, Ordering::Relaxed);
    let mut inserted = 0;
    for inserter in inserters {
        inserted += inserter.await.unwrap();
    }
    assert!(inserted > 0, "payments were inserted during the walk");

    for (name, pages) in [("forwards", &forwards), ("backwards", &backwards)] {
        let mut seen = HashSet::new();
        for items in pages {
            assert_newest_first(items);
            for p in items {
                assert!(seen.insert(p.id.clone()), "{name}: {} twice", p.id);
            }
        }
        let missing: Vec<_> = existing
            .iter()
            .filter(|id| !seen.contains(*id) && **id != oldest)
            .collect();
        assert!(missing.is_empty(), "{name}: {} missed", missing.len());
    }
    // Backwards pages come newest first, and the walk goes from the oldest up.
    let first_back = backwards.first().and_then(|p| p.last()).unwrap();
    let last_back = backwards.last().and_then(|p| p.first()).unwrap();
    assert!(first_back.created_at <= last_back.created_at);
}

/// A page before a cursor holds the rows just newer than it, newest first,
/// and says whether yet newer ones exist.
async fn pages_before_and_after_a_cursor_meet(f: Fixture) {
    insert_payments(&f.store, &f.shop, "p", 7).await;
    let filter = PaymentFilter::default();
    let all = f
        .store
        .list_payments(&f.shop, &filter, &page(10, Cursor::Newest))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 7);
    assert!(!all.has_more);
    let ids: Vec<PaymentId> = all.items.iter().map(|p| p.id.clone()).collect();

    let after = f
        .store
        .list_payments(&f.shop, &filter, &page(2, Cursor::After(ids[2].clone())))
        .await
        .unwrap();
    assert_eq!(
        after.items.iter().map(|p| &p.id).collect::<Vec<_>>(),
        [&ids[3], &ids[4]]
    );
    assert!(after.has_more);

    let before = f
        .store
        .list_payments(&f.shop, &filter, &page(2, Cursor::Before(ids[4].clone())))
        .await
        .unwrap();
    assert_eq!(
        before.items.iter().map(|p| &p.id).collect::<Vec<_>>(),
        [&ids[2], &ids[3]]
    );
    assert!(before.has_more, "ids 0 and 1 are newer");
    let newest = f
        .store
        .list_payments(&f.shop, &filter, &page(5, Cursor::Before(ids[2].clone())))
        .await
        .unwrap();
    assert_eq!(
        newest.items.iter().map(|p| &p.id).collect::<Vec<_>>(),
        [&ids[0], &ids[1]]
    );
    assert!(!newest.has_more);
    let end = f
        .store
        .list_payments(&f.shop, &filter, &page(5, Cursor::After(ids[6].clone())))
        .await
        .unwrap();
    assert!(end.items.is_empty() && !end.has_more);
}

/// Filters by status, order and created range; a cursor outside the
/// filter still names a place in the list.
async fn lists_filter_by_status_reference_and_created_range(f: Fixture) {
    insert_payments(&f.store, &f.shop, "open-", 4).await;
    let paid = f.paid_payment("paid-order").await;
    let all = f
        .store
        .list_payments(
            &f.shop,
            &PaymentFilter::default(),
            &page(100, Cursor::Newest),
        )
        .await
        .unwrap()
        .items;
    assert_eq!(all.len(), 5);

    let succeeded = PaymentFilter {
        status: Some(PaymentStatus::Succeeded.into()),
        ..PaymentFilter::default()
    };
    let listed = f
        .store
        .list_payments(&f.shop, &succeeded, &page(10, Cursor::Newest))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].id, paid.id);
    let pending = PaymentFilter {
        status: Some(PaymentStatus::Pending.into()),
        ..PaymentFilter::default()
    };
    let listed = f
        .store
        .list_payments(&f.shop, &pending, &page(10, Cursor::After(paid.id.clone())))
        .await
        .unwrap();
    assert!(
        listed
            .items
            .iter()
            .all(|p| p.status == PaymentStatus::Pending)
    );

    let by_reference = PaymentFilter {
        reference: Some(Reference::new("open-2").unwrap()),
        ..PaymentFilter::default()
    };
    let listed = f
        .store
        .list_payments(&f.shop, &by_reference, &page(10, Cursor::Newest))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].reference.as_str(), "open-2");

    // The created range [oldest, newest) leaves the newest out.
    let (newest, oldest) = (&all[0], &all[all.len() - 1]);
    let range = PaymentFilter {
        created_gte: Some(oldest.created_at),
        created_lt: Some(newest.created_at),
        ..PaymentFilter::default()
    };
    let listed = f
        .store
        .list_payments(&f.shop, &range, &page(10, Cursor::Newest))
        .await
        .unwrap();
    assert!(
        listed
            .items
            .iter()
            .all(|p| p.created_at < newest.created_at)
    );
    assert!(listed.items.iter().any(|p| p.id == oldest.id));
    let future = PaymentFilter {
        created_gte: Some(newest.created_at + TimeDuration::hours(1)),
        ..PaymentFilter::default()
    };
    let listed = f
        .store
        .list_payments(&f.shop, &future, &page(10, Cursor::Newest))
        .await
        .unwrap();
    assert!(listed.items.is_empty() && !listed.has_more);
}

/// The limit is bounded, and a full page says there is more.
async fn the_limit_is_bounded(f: Fixture) {
    assert_eq!(PageLimit::new(0), None);
    assert_eq!(PageLimit::new(MAX_PAGE_LIMIT + 1), None);
    insert_payments(&f.store, &f.shop, "p", 3).await;
    let one = f
        .store
        .list_payments(&f.shop, &PaymentFilter::default(), &page(1, Cursor::Newest))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    assert!(one.has_more);
    let three = f
        .store
        .list_payments(&f.shop, &PaymentFilter::default(), &page(3, Cursor::Newest))
        .await
        .unwrap();
    assert_eq!(three.items.len(), 3);
    assert!(!three.has_more, "exactly the limit: nothing more");
}

/// Another shop's payment, or an unknown id, is no cursor; another shop's
/// payments are never listed.
async fn a_foreign_cursor_is_refused(f: Fixture) {
    let other = f.other_shop(&ShopSecret::from_string("b")).await;
    insert_payments(&f.store, &other, "theirs-", 2).await;
    insert_payments(&f.store, &f.shop, "ours-", 2).await;
    let theirs = f
        .store
        .list_payments(&other, &PaymentFilter::default(), &page(10, Cursor::Newest))
        .await
        .unwrap()
        .items;
    assert_eq!(theirs.len(), 2);
    let ours = f
        .store
        .list_payments(
            &f.shop,
            &PaymentFilter::default(),
            &page(10, Cursor::Newest),
        )
        .await
        .unwrap()
        .items;
    assert_eq!(ours.len(), 2);
    assert!(ours.iter().all(|p| p.shop_id == f.shop));
    for cursor in [
        Cursor::After(theirs[0].id.clone()),
        Cursor::Before(theirs[0].id.clone()),
        Cursor::After(PaymentId::generate()),
    ] {
        let refused = f
            .store
            .list_payments(&f.shop, &PaymentFilter::default(), &page(10, cursor))
            .await;
        assert!(
            matches!(refused, Err(StoreError::UnknownCursor(_))),
            "{refused:?}"
        );
    }
}

/// A shop's refunds, and one payment's, newest first, paged the same way;
/// a refund of another payment is no cursor in a payment's list.
async fn refunds_are_listed_by_shop_and_by_payment(f: Fixture) {
    let first = f.paid_payment("order-1").await;
    let second = f.paid_payment("order-2").await;
    let mut of_first = Vec::new();
    for (i, payment) in [&first, &second, &first, &second, &first]
        .iter()
        .enumerate()
    {
        let acquired = f
            .refund_acquired(&payment.id, &format!("r{i}"), Some("100.00"))
            .await;
        let refund = acquired.refund.unwrap();
        if payment.id == first.id {
            of_first.push(refund.id.clone());
        }
    }
    let all = f
        .store
        .list_refunds(&f.shop, None, &page(10, Cursor::Newest))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 5);
    assert!(!all.has_more);
    for pair in all.items.windows(2) {
        assert!(
            (pair[0].created_at, pair[0].id.as_str()) > (pair[1].created_at, pair[1].id.as_str())
        );
    }
    // Two at a time through the first payment's three refunds.
    let page1 = f
        .store
        .list_refunds(&f.shop, Some(&first.id), &page(2, Cursor::Newest))
        .await
        .unwrap();
    assert_eq!(page1.items.len(), 2);
    assert!(page1.has_more);
    let page2 = f
        .store
        .list_refunds(
            &f.shop,
            Some(&first.id),
            &page(2, Cursor::After(page1.items[1].id.clone())),
        )
        .await
        .unwrap();
    assert_eq!(page2.items.len(), 1);
    assert!(!page2.has_more);
    let mut listed: Vec<RefundId> = page1
        .items
        .iter()
        .chain(&page2.items)
        .map(|r| r.id.clone())
        .collect();
    assert!(listed.iter().all(|id| of_first.contains(id)));
    listed.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
    listed.dedup();
    assert_eq!(listed.len(), 3);
    let back = f
        .store
        .list_refunds(
            &f.shop,
            Some(&first.id),
            &page(5, Cursor::Before(page2.items[0].id.clone())),
        )
        .await
        .unwrap();
    assert_eq!(back.items, page1.items);
    assert!(!back.has_more);

    let of_second = all
        .items
        .iter()
        .find(|r| r.payment_id == second.id)
        .unwrap();
    let refused = f
        .store
        .list_refunds(
            &f.shop,
            Some(&first.id),
            &page(5, Cursor::After(of_second.id.clone())),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::UnknownCursor(_))),
        "{refused:?}"
    );
    let other = f.other_shop(&ShopSecret::from_string("b")).await;
    let foreign = f
        .store
        .list_refunds(&other, None, &page(5, Cursor::After(of_second.id.clone())))
        .await;
    assert!(
        matches!(foreign, Err(StoreError::UnknownCursor(_))),
        "{foreign:?}"
    );
    let nothing = f
        .store
        .list_refunds(&other, Some(&first.id), &page(5, Cursor::Newest))
        .await
        .unwrap();
    assert!(nothing.items.is_empty());
}

on_both_stores!(
    fixture =>
    a_walk_through_the_pages_misses_and_repeats_nothing_under_inserts,
    pages_before_and_after_a_cursor_meet,
    lists_filter_by_status_reference_and_created_range,
    the_limit_is_bounded,
    a_foreign_cursor_is_refused,
    refunds_are_listed_by_shop_and_by_payment,
);
