//! The reconciler's findings, persisted: one row per identity however often
//! it is seen, resolved once (by the pass that refunded, or an operator),
//! and each new finding and resolution in its payment's history.

use std::collections::HashSet;

use chargeonce_core::findings::{
    Finding, FindingId, FindingKind, FindingQuery, NewFinding, Resolution,
};
use chargeonce_core::{Money, PaymentId, Reference, ShopId};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

/// A duplicate charge of `reference` at `shop`, with these charges.
fn duplicate(shop: &ShopId, reference: &str, charges: &[&str]) -> NewFinding {
    NewFinding {
        kind: FindingKind::DuplicateCharge,
        shop_id: shop.clone(),
        reference: Reference::new(reference).unwrap(),
        payment_id: None,
        charge_ids: charges.iter().map(|c| (*c).to_owned()).collect(),
        amount: Some(Money::parse("1500.00", "RUB").unwrap()),
        detail: format!("{} charges for {reference}", charges.len()),
        refunded: Vec::new(),
    }
}

/// An orphan charge (no payment, no amount known).
fn orphan(shop: &ShopId, reference: &str, charge: &str) -> NewFinding {
    NewFinding {
        kind: FindingKind::OrphanCharge,
        amount: None,
        ..duplicate(shop, reference, &[charge])
    }
}

async fn one(f: &Fixture, id: FindingId) -> Finding {
    f.store.finding(id).await.unwrap().unwrap()
}

async fn list(f: &Fixture, query: FindingQuery) -> Vec<FindingId> {
    f.store
        .findings(&query)
        .await
        .unwrap()
        .into_iter()
        .map(|finding| finding.id)
        .collect()
}

/// A payment's history as stored: `(kind, event)` of each entry, in order.
/// Read with plain SQL, beside the store (its own read of the history is
/// another role's).
async fn history(f: &Fixture, payment: &PaymentId) -> Vec<(String, serde_json::Value)> {
    let url = f.db.url();
    let rows: Vec<(String, String)> = if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let rows = sqlx::query_as(
            "SELECT kind, event FROM payment_history WHERE payment_id = ?1 ORDER BY seq",
        )
        .bind(payment.as_str())
        .fetch_all(&pool)
        .await
        .unwrap();
        pool.close().await;
        rows
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let rows = sqlx::query_as(
            "SELECT kind, event FROM payment_history WHERE payment_id = $1 ORDER BY seq",
        )
        .bind(payment.as_str())
        .fetch_all(&pool)
        .await
        .unwrap();
        pool.close().await;
        rows
    };
    rows.into_iter()
        .map(|(kind, event)| (kind, serde_json::from_str(&event).unwrap()))
        .collect()
}

/// Seen on three passes (its charges in another order on one), a finding
/// is one row: first seen kept, last seen and detail updated, three
/// sightings; the ids come back in the order given.
async fn a_finding_seen_again_is_one_row_with_its_sightings_counted(f: Fixture) {
    let first = duplicate(&f.shop, "order-1", &["ch_1", "ch_2"]);
    let other = orphan(&f.shop, "order-2", "ch_9");
    let ids = f
        .store
        .record_findings(&[first.clone(), other.clone()])
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    let recorded = one(&f, ids[0]).await;
    assert_eq!(recorded.kind, FindingKind::DuplicateCharge);
    assert_eq!(recorded.shop_id, f.shop);
    assert_eq!(recorded.reference.as_str(), "order-1");
    assert_eq!(recorded.payment_id, None);
    assert_eq!(recorded.charge_ids, ["ch_1", "ch_2"]);
    assert_eq!(recorded.amount, first.amount);
    assert_eq!(recorded.seen, 1);
    assert_eq!(recorded.first_seen, recorded.last_seen);
    assert_eq!(recorded.resolved, None);
    assert_eq!(one(&f, ids[1]).await.amount, None);

    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let again = NewFinding {
        detail: "still two charges".into(),
        charge_ids: vec!["ch_2".into(), "ch_1".into()],
        ..first.clone()
    };
    assert_eq!(
        f.store.record_findings(&[other, again]).await.unwrap(),
        [ids[1], ids[0]]
    );
    assert_eq!(f.store.record_findings(&[first]).await.unwrap(), [ids[0]]);
    let seen = one(&f, ids[0]).await;
    assert_eq!(seen.seen, 3);
    assert_eq!(seen.detail, "2 charges for order-1");
    assert_eq!(seen.first_seen, recorded.first_seen);
    assert!(seen.last_seen > recorded.last_seen);
    assert_eq!(one(&f, ids[1]).await.seen, 2);
    assert_eq!(
        f.store.finding(FindingId(ids[0].0 + 100)).await.unwrap(),
        None
    );
    assert_eq!(
        list(&f, FindingQuery::default()).await.len(),
        2,
        "one row per identity"
    );
}

/// The list filters by state, kind, shop and payment, newest sighting
/// first, and bounds its limit.
async fn findings_are_listed_newest_sighting_first_and_filtered(f: Fixture) {
    let other_shop = f
        .other_shop(&chargeonce_core::ShopSecret::from_string("b"))
        .await;
    let payment = f.paid_payment("order-p").await;
    let about_payment = NewFinding {
        kind: FindingKind::Mismatch,
        payment_id: Some(payment.id.clone()),
        ..duplicate(&f.shop, "order-p", &["ch_p"])
    };
    let mut ids = Vec::new();
    for finding in [
        duplicate(&f.shop, "order-1", &["ch_1", "ch_2"]),
        orphan(&other_shop, "order-2", "ch_3"),
        about_payment,
    ] {
        // One pass each, so the sightings are in this order.
        ids.extend(f.store.record_findings(&[finding]).await.unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let all = list(&f, FindingQuery::default()).await;
    assert_eq!(all, [ids[2], ids[1], ids[0]]);
    // Seen again, the oldest becomes the newest.
    f.store
        .record_findings(&[duplicate(&f.shop, "order-1", &["ch_1", "ch_2"])])
        .await
        .unwrap();
    assert_eq!(
        list(&f, FindingQuery::default()).await,
        [ids[0], ids[2], ids[1]]
    );
    let of = |query: FindingQuery| list(&f, query);
    assert_eq!(
        of(FindingQuery {
            kind: Some(FindingKind::OrphanCharge),
            ..FindingQuery::default()
        })
        .await,
        [ids[1]]
    );
    assert_eq!(
        of(FindingQuery {
            shop_id: Some(f.shop.clone()),
            ..FindingQuery::default()
        })
        .await,
        [ids[0], ids[2]]
    );
    assert_eq!(
        of(FindingQuery {
            payment_id: Some(payment.id.clone()),
            ..FindingQuery::default()
        })
        .await,
        [ids[2]]
    );
    assert_eq!(
        of(FindingQuery {
            limit: 1,
            ..FindingQuery::default()
        })
        .await,
        [ids[0]]
    );
    f.store
        .resolve_finding(
            ids[1],
            &Resolution::Manual {
                by: "ops".into(),
                note: "known".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        of(FindingQuery {
            resolved: Some(true),
            ..FindingQuery::default()
        })
        .await,
        [ids[1]]
    );
    assert_eq!(
        of(FindingQuery {
            resolved: Some(false),
            ..FindingQuery::default()
        })
        .await,
        [ids[0], ids[2]]
    );
    // A limit beyond the bound reads at most the bound (here: all three).
    assert_eq!(
        of(FindingQuery {
            limit: 100_000,
            ..FindingQuery::default()
        })
        .await
        .len(),
        3
    );
}

/// A finding whose charges the pass refunded is resolved as refunded in the
/// same record; seen again later, it stays resolved.
async fn a_refunded_finding_is_resolved(f: Fixture) {
    let refunded = NewFinding {
        refunded: vec!["ch_2".into()],
        ..duplicate(&f.shop, "order-1", &["ch_1", "ch_2"])
    };
    let [id] = f.store.record_findings(&[refunded]).await.unwrap()[..] else {
        panic!("one id")
    };
    let finding = one(&f, id).await;
    let Some((resolution, at)) = finding.resolved.clone() else {
        panic!("resolved: {finding:?}")
    };
    assert_eq!(
        resolution,
        Resolution::Refunded {
            charge_ids: vec!["ch_2".into()]
        }
    );
    assert!(at >= finding.first_seen);
    assert!(
        list(
            &f,
            FindingQuery {
                resolved: Some(false),
                ..FindingQuery::default()
            }
        )
        .await
        .is_empty()
    );

    // Seen again (nothing refunded this time): counted, still resolved as before.
    f.store
        .record_findings(&[duplicate(&f.shop, "order-1", &["ch_1", "ch_2"])])
        .await
        .unwrap();
    let seen = one(&f, id).await;
    assert_eq!(seen.seen, 2);
    assert_eq!(seen.resolved, finding.resolved);
}

/// Resolving is once: a second resolution (an operator's double click, or
/// another operator) returns the finding as the first left it; a finding
/// that does not exist is `None`.
async fn resolving_twice_changes_nothing_the_second_time(f: Fixture) {
    let [id] = f
        .store
        .record_findings(&[orphan(&f.shop, "order-1", "ch_1")])
        .await
        .unwrap()[..]
    else {
        panic!("one id")
    };
    let manual = Resolution::Manual {
        by: "alice".into(),
        note: "refunded by hand at the acquirer".into(),
    };
    let resolved = f.store.resolve_finding(id, &manual).await.unwrap().unwrap();
    let Some((how, _)) = &resolved.resolved else {
        panic!("resolved: {resolved:?}")
    };
    assert_eq!(how, &manual);
    assert_eq!(one(&f, id).await, resolved);

    let again = f
        .store
        .resolve_finding(
            id,
            &Resolution::Manual {
                by: "bob".into(),
                note: "me too".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(again, Some(resolved.clone()));
    let refunded = Resolution::Refunded {
        charge_ids: vec!["ch_1".into()],
    };
    assert_eq!(
        f.store.resolve_finding(id, &refunded).await.unwrap(),
        Some(resolved)
    );
    assert_eq!(
        f.store
            .resolve_finding(FindingId(id.0 + 100), &manual)
            .await
            .unwrap(),
        None
    );
}

/// A new finding about a payment, and its resolution, each write one entry
/// in the payment's history; a finding seen again and a second resolution
/// write none.
async fn findings_about_a_payment_are_in_its_history(f: Fixture) {
    let payment = f.paid_payment("order-1").await;
    let before = history(&f, &payment.id).await.len();
    let mismatch = NewFinding {
        kind: FindingKind::Mismatch,
        payment_id: Some(payment.id.clone()),
        amount: None,
        ..duplicate(&f.shop, "order-1", &["ch_1"])
    };
    let [id] = f
        .store
        .record_findings(std::slice::from_ref(&mismatch))
        .await
        .unwrap()[..]
    else {
        panic!("one id")
    };
    f.store.record_findings(&[mismatch]).await.unwrap();
    let manual = Resolution::Manual {
        by: "ops".into(),
        note: "checked".into(),
    };
    f.store.resolve_finding(id, &manual).await.unwrap();
    f.store.resolve_finding(id, &manual).await.unwrap();

    // A duplicate refunded by its pass: found and resolved in one record.
    let refunded = NewFinding {
        payment_id: Some(payment.id.clone()),
        refunded: vec!["ch_3".into()],
        ..duplicate(&f.shop, "order-1", &["ch_1", "ch_3"])
    };
    let [dup] = f.store.record_findings(&[refunded]).await.unwrap()[..] else {
        panic!("one id")
    };
    // Not about a payment: nothing in any history.
    f.store
        .record_findings(&[orphan(&f.shop, "order-1", "ch_9")])
        .await
        .unwrap();

    let entries = history(&f, &payment.id).await;
    assert_eq!(
        entries[before..],
        [
            (
                "finding".to_owned(),
                serde_json::json!({"type": "finding", "finding_id": id.0, "kind": "mismatch"})
            ),
            (
                "finding_resolved".to_owned(),
                serde_json::json!({"type": "finding_resolved", "finding_id": id.0, "how": "manual"})
            ),
            (
                "finding".to_owned(),
                serde_json::json!({"type": "finding", "finding_id": dup.0, "kind": "duplicate_charge"})
            ),
            (
                "finding_resolved".to_owned(),
                serde_json::json!({"type": "finding_resolved", "finding_id": dup.0, "how": "refunded"})
            ),
        ]
    );
}

/// Passes of several instances recording the same findings at once (in
/// opposite orders): one row each, every sighting counted, one history
/// entry, no deadlock; nothing recorded is no write.
async fn concurrent_passes_record_each_finding_once(f: Fixture) {
    let payment = f.paid_payment("order-1").await;
    let before = history(&f, &payment.id).await.len();
    let about_payment = NewFinding {
        kind: FindingKind::Mismatch,
        payment_id: Some(payment.id.clone()),
        ..duplicate(&f.shop, "order-1", &["ch_1"])
    };
    let pass = vec![
        about_payment,
        orphan(&f.shop, "order-2", "ch_2"),
        orphan(&f.shop, "order-3", "ch_3"),
    ];
    let mut tasks = Vec::new();
    for (n, store) in f.instances(4).await.into_iter().enumerate() {
        let mut pass = pass.clone();
        if n % 2 == 1 {
            pass.reverse();
        }
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for _ in 0..5 {
                let mut got = store.record_findings(&pass).await.unwrap();
                if n % 2 == 1 {
                    got.reverse();
                }
                ids.push(got);
            }
            ids
        }));
    }
    let mut all_ids = HashSet::new();
    for task in tasks {
        for ids in task.await.unwrap() {
            all_ids.insert(ids);
        }
    }
    assert_eq!(all_ids.len(), 1, "the same ids, in the order given");
    let ids = all_ids.into_iter().next().unwrap();
    for id in &ids {
        assert_eq!(one(&f, *id).await.seen, 20);
    }
    assert_eq!(list(&f, FindingQuery::default()).await.len(), 3);
    let entries = history(&f, &payment.id).await;
    assert_eq!(entries.len() - before, 1, "{entries:?}");
    assert_eq!(entries[before].0, "finding");
    assert!(f.store.record_findings(&[]).await.unwrap().is_empty());
}

on_both_stores!(
    fixture =>
    a_finding_seen_again_is_one_row_with_its_sightings_counted,
    findings_are_listed_newest_sighting_first_and_filtered,
    a_refunded_finding_is_resolved,
    resolving_twice_changes_nothing_the_second_time,
    findings_about_a_payment_are_in_its_history,
    concurrent_passes_record_each_finding_once,
);
