//! The reconciler's findings, persisted: every finding a pass saw is
//! recorded in the store (not only those the report keeps), seen again on
//! a later pass without a second row, and a duplicate the pass refunded is
//! resolved as refunded; on both stores.

#![allow(clippy::unwrap_used, missing_docs)]

mod harness;

use chargeonce_core::PaymentId;
use chargeonce_core::findings::{FindingKind, FindingQuery, Resolution};
use chargeonce_testkit::on_both_stores;
use chargeonce_workers::reconciler::ReconcilerConfig;
use harness::{Backend, Harness, reconcile_now};

fn every_finding() -> FindingQuery {
    FindingQuery {
        limit: 100,
        ..FindingQuery::default()
    }
}

async fn every_finding_of_a_pass_is_recorded_and_a_refund_resolves_it(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, paid) = h.pay("k1", "order-1", "tok_ok").await;
    assert_eq!(status, 201);
    let ours = PaymentId::parse(paid["id"].as_str().unwrap()).unwrap();
    let duplicate = h.plant(&ours, "order-1", "a-second-key-for-order-1").await;
    let mut orphans = Vec::new();
    for i in 0..3 {
        let orphan = h
            .plant(
                &PaymentId::generate(),
                &format!("order-elsewhere-{i}"),
                &format!("unknown-{i}"),
            )
            .await;
        orphans.push(orphan.id);
    }

    // The report keeps two; the store gets all four.
    let keep_two = ReconcilerConfig {
        max_findings: 2,
        ..reconcile_now()
    };
    let report = h.reconciler().reconcile_once(&keep_two).await.unwrap();
    assert_eq!(report.findings.len(), 2, "{report}");
    assert_eq!(report.findings_omitted, 2, "{report}");
    let recorded = h.store.findings(&every_finding()).await.unwrap();
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    let dup = recorded
        .iter()
        .find(|f| f.kind == FindingKind::DuplicateCharge)
        .unwrap();
    assert_eq!(dup.payment_id.as_ref(), Some(&ours));
    assert!(dup.charge_ids.contains(&duplicate.id), "{dup:?}");
    assert_eq!(
        dup.amount.map(|m| m.minor_units()),
        Some(duplicate.amount.minor_units()),
        "the extra charge's money"
    );
    assert!(dup.resolved.is_none());
    let mut orphan_charges: Vec<String> = recorded
        .iter()
        .filter(|f| f.kind == FindingKind::OrphanCharge)
        .flat_map(|f| f.charge_ids.clone())
        .collect();
    orphan_charges.sort();
    orphans.sort();
    assert_eq!(orphan_charges, orphans);

    // Refunding the duplicate resolves its finding; the orphans are seen
    // again, without a second row.
    let refund = ReconcilerConfig {
        refund_duplicates: true,
        ..reconcile_now()
    };
    let report = h.reconciler().reconcile_once(&refund).await.unwrap();
    assert!(!report.is_clean(), "{report}");
    let recorded = h.store.findings(&every_finding()).await.unwrap();
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    let dup = recorded
        .iter()
        .find(|f| f.kind == FindingKind::DuplicateCharge)
        .unwrap();
    match &dup.resolved {
        Some((Resolution::Refunded { charge_ids }, _)) => {
            assert_eq!(charge_ids, &vec![duplicate.id.clone()]);
        }
        other => panic!("the duplicate is resolved as refunded: {other:?}"),
    }
    for orphan in recorded
        .iter()
        .filter(|f| f.kind == FindingKind::OrphanCharge)
    {
        assert_eq!(orphan.seen, 2, "{orphan:?}");
        assert!(orphan.resolved.is_none());
    }
    let open = h
        .store
        .findings(&FindingQuery {
            resolved: Some(false),
            ..every_finding()
        })
        .await
        .unwrap();
    assert_eq!(open.len(), 3, "{open:?}");
}

/// Findings are recorded a batch at a time during the pass (memory stays
/// bounded by the batch, not the window's disagreements): with a batch of
/// two and five orphans, every orphan is recorded, once.
async fn findings_recorded_in_batches_are_each_recorded_once(backend: Backend) {
    let h = Harness::start(backend).await;
    let mut orphans = Vec::new();
    for i in 0..5 {
        let orphan = h
            .plant(
                &PaymentId::generate(),
                &format!("order-elsewhere-{i}"),
                &format!("unknown-{i}"),
            )
            .await;
        orphans.push(orphan.id);
    }
    let small_batches = ReconcilerConfig {
        batch: 2,
        ..reconcile_now()
    };
    let report = h.reconciler().reconcile_once(&small_batches).await.unwrap();
    assert_eq!(report.findings.len(), 5, "{report}");
    let recorded = h.store.findings(&every_finding()).await.unwrap();
    let mut charges: Vec<String> = recorded
        .iter()
        .inspect(|f| assert_eq!(f.seen, 1, "recorded once: {f:?}"))
        .flat_map(|f| f.charge_ids.clone())
        .collect();
    charges.sort();
    orphans.sort();
    assert_eq!(charges, orphans);
}

on_both_stores!(
    every_finding_of_a_pass_is_recorded_and_a_refund_resolves_it,
    findings_recorded_in_batches_are_each_recorded_once,
);
