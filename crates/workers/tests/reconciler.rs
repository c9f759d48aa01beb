//! The reconciler at scale, in small: windows of many slices, findings that
//! span slices and passes, and incremental passes of the background worker,
//! on both stores and the real simulator.

#![allow(clippy::unwrap_used, missing_docs)]

mod harness;

use std::time::Duration;

use chargeonce_acquirer::{ChargeStatus, LedgerEntry};
use chargeonce_core::{
    AcquirerKey, Money, PaymentId, PaymentStatus, Reference, Settlement, ShopId,
};
use chargeonce_testkit::on_both_stores;
use chargeonce_workers::reconciler::{
    Finding, FindingKind, PassKind, ReconcileReport, ReconcilerConfig, ReconcilerState,
};
use harness::{Backend, Harness, reconcile_now};
use time::OffsetDateTime;

/// Slices of 25 charges, pages of 10 payments.
fn small_slices() -> ReconcilerConfig {
    ReconcilerConfig {
        batch: 10,
        slice_charges: 25,
        ..reconcile_now()
    }
}

fn shop() -> ShopId {
    ShopId::new(harness::SHOP).unwrap()
}

/// `n` payments through the API (every seventh declined), keys and orders
/// prefixed with `prefix`.
async fn pay_many(h: &Harness, prefix: &str, n: usize) {
    for i in 0..n {
        let token = if i % 7 == 3 { "tok_declined" } else { "tok_ok" };
        let (status, body) = h
            .pay(
                &format!("{prefix}-{i}"),
                &format!("order-{prefix}-{i}"),
                token,
            )
            .await;
        assert!(status == 201 || status == 402, "{status}: {body}");
    }
}

/// Plants a succeeded charge of 1500.00 RUB with a chosen id and time.
async fn plant_at(
    h: &Harness,
    id: String,
    payment_id: &PaymentId,
    reference: &str,
    created_at: OffsetDateTime,
) -> LedgerEntry {
    let entry = LedgerEntry {
        acquirer_key: AcquirerKey::from_stored(format!("planted-{id}")),
        id,
        shop_id: shop(),
        payment_id: payment_id.clone(),
        reference: Reference::new(reference).unwrap(),
        amount: Money::parse("1500.00", "RUB").unwrap(),
        status: ChargeStatus::Succeeded,
        decline_code: None,
        created_at,
        refunded_minor: 0,
        capture_method: chargeonce_core::CaptureMethod::Automatic,
        captured_minor: 0,
        closed: false,
        voided: false,
        trace_id: None,
    };
    h.sim.plant(&entry).await.unwrap();
    entry
}

fn new_charge_id() -> String {
    format!("ch_{}", uuid::Uuid::now_v7().simple())
}

/// Settles a payment of ours behind the acquirer's back (a bug to find).
async fn settle(h: &Harness, id: &PaymentId, status: PaymentStatus, charge_id: &str) {
    h.store
        .settle_payment(
            &shop(),
            id,
            &Settlement {
                status,
                provider_payment_id: Some(charge_id.to_owned()),
                decline_code: (status == PaymentStatus::Declined).then(|| "card_declined".into()),
            },
        )
        .await
        .unwrap();
}

fn of_kind(report: &ReconcileReport, kind: FindingKind) -> Vec<&Finding> {
    report.findings.iter().filter(|f| f.kind == kind).collect()
}

fn payment_id(body: &serde_json::Value) -> PaymentId {
    PaymentId::parse(body["id"].as_str().unwrap()).unwrap()
}

/// Many more payments than a slice or a page: all compared, clean, and the
/// pass never held more than a slice of charges and a slice, a page and a
/// carry of payments.
async fn a_window_of_many_slices_is_compared_in_bounded_memory(backend: Backend) {
    let h = Harness::start(backend).await;
    let n = 120;
    pay_many(&h, "bulk", n).await;
    let config = small_slices();
    let report = h.reconciler().reconcile_once(&config).await.unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.pass, PassKind::Full);
    assert_eq!((report.payments_compared, report.charges_compared), (n, n));
    assert!(report.slices >= n / 25, "{report}");
    assert!(report.peak_charges_held <= 25, "{report}");
    assert!(report.peak_payments_held <= 25 + 10 + 10, "{report}");
    // Targeted look-ups only where a payment and its charge fall on two
    // sides of a slice's edge.
    assert!(
        report.store_lookups + report.acquirer_lookups <= n / 4,
        "{report}"
    );

    // Slices as large as the books: the same answer.
    let whole = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert!(whole.is_clean(), "{whole}");
    assert_eq!((whole.payments_compared, whole.charges_compared), (n, n));
    assert_eq!(whole.peak_charges_held, n, "{whole}");
}

/// An order's charges in slices far apart are one duplicate, found once, in
/// both orders (the stray first or ours first), and never an orphan; the
/// refund gives back the stray and keeps ours.
async fn duplicates_across_slices_are_found_once_and_refunded(backend: Backend) {
    let h = Harness::start(backend).await;
    let stray_early = plant_at(
        &h,
        new_charge_id(),
        &PaymentId::generate(),
        "order-early",
        OffsetDateTime::now_utc(),
    )
    .await;
    let (status, late) = h.pay("k-late", "order-late", "tok_ok").await;
    assert_eq!(status, 201);
    pay_many(&h, "bulk", 60).await;
    let (status, early) = h.pay("k-early", "order-early", "tok_ok").await;
    assert_eq!(status, 201);
    pay_many(&h, "bulk2", 60).await;
    let late_id = payment_id(&late);
    let ours_late = h.charge_of(late_id.as_str()).await;
    let stray_late = plant_at(
        &h,
        new_charge_id(),
        &late_id,
        "order-late",
        OffsetDateTime::now_utc(),
    )
    .await;
    let ours_early = h.charge_of(early["id"].as_str().unwrap()).await;

    let report = h
        .reconciler()
        .reconcile_once(&small_slices())
        .await
        .unwrap();
    assert!(report.slices >= 5, "{report}");
    assert_eq!(report.findings.len(), 2, "{report}");
    let dups = of_kind(&report, FindingKind::DuplicateCharge);
    assert_eq!(dups.len(), 2, "{report}");
    let by_order = |order: &str| *dups.iter().find(|f| f.reference == order).unwrap();
    let d = by_order("order-early");
    assert_eq!(
        d.charge_ids,
        [stray_early.id.clone(), ours_early.id.clone()]
    );
    assert_eq!(d.payment_id.as_deref(), early["id"].as_str());
    let d = by_order("order-late");
    assert_eq!(d.charge_ids, [ours_late.id.clone(), stray_late.id.clone()]);
    assert_eq!(d.payment_id.as_deref(), Some(late_id.as_str()));

    let refund = ReconcilerConfig {
        refund_duplicates: true,
        ..small_slices()
    };
    let report = h.reconciler().reconcile_once(&refund).await.unwrap();
    let mut refunded: Vec<String> = of_kind(&report, FindingKind::DuplicateCharge)
        .iter()
        .flat_map(|f| f.refunded.clone())
        .collect();
    refunded.sort();
    let mut expected = vec![stray_early.id.clone(), stray_late.id.clone()];
    expected.sort();
    assert_eq!(refunded, expected, "{report}");
    let after = h
        .reconciler()
        .reconcile_once(&small_slices())
        .await
        .unwrap();
    assert!(after.is_clean(), "{after}");
    for charge in h.sim.ledger().await.unwrap() {
        let given_back = charge.id == stray_early.id || charge.id == stray_late.id;
        assert_eq!(
            charge.refunded_minor > 0,
            given_back,
            "only the strays: {charge:?}"
        );
    }
}

/// Orphans on a slice's edge (in the millisecond a full page ends on, either
/// side of the charge there) and in the clock slack at both ends of the
/// window are each found once; one outside the slack is not compared.
async fn an_orphan_at_a_slice_edge_is_found_once(backend: Backend) {
    let h = Harness::start(backend).await;
    pay_many(&h, "bulk", 60).await;
    let nobody = PaymentId::generate();
    let now = OffsetDateTime::now_utc();
    let minutes = time::Duration::minutes;
    let mut orphans = Vec::new();
    for at in [now - minutes(64), now + minutes(4)] {
        let reference = format!("order-orphan-{}", orphans.len());
        orphans.push(plant_at(&h, new_charge_id(), &nobody, &reference, at).await);
    }
    // The first page of 25 ends on the 25th charge: two more in its
    // millisecond, one on each side of it.
    let ledger = h.sim.ledger().await.unwrap();
    let edge = ledger.get(24).unwrap();
    for id in [format!("{}z", edge.id), format!("ch_{}", "0".repeat(32))] {
        let reference = format!("order-orphan-{}", orphans.len());
        orphans.push(plant_at(&h, id, &nobody, &reference, edge.created_at).await);
    }
    plant_at(
        &h,
        new_charge_id(),
        &nobody,
        "order-outside",
        now - minutes(66),
    )
    .await;

    let report = h
        .reconciler()
        .reconcile_once(&small_slices())
        .await
        .unwrap();
    assert_eq!(report.charges_compared, 60 + 4, "{report}");
    assert_eq!(report.findings.len(), 4, "{report}");
    let mut found: Vec<String> = of_kind(&report, FindingKind::OrphanCharge)
        .iter()
        .flat_map(|f| f.charge_ids.clone())
        .collect();
    found.sort();
    let mut expected: Vec<String> = orphans.iter().map(|c| c.id.clone()).collect();
    expected.sort();
    assert_eq!(found, expected, "{report}");
}

/// A payment we call final in the oldest slice of the window, with no charge
/// at the acquirer, is found among many good ones.
async fn a_missing_charge_in_an_old_slice_is_found(backend: Backend) {
    let h = Harness::start(backend).await;
    let lost = h.ghost("k-ghost", "order-ghost").await;
    settle(&h, &lost, PaymentStatus::Succeeded, "ch_never_made").await;
    pay_many(&h, "bulk", 60).await;
    let report = h
        .reconciler()
        .reconcile_once(&small_slices())
        .await
        .unwrap();
    assert!(report.slices >= 3, "{report}");
    assert_eq!(report.payments_compared, 61);
    assert_eq!(report.findings.len(), 1, "{report}");
    assert_eq!(report.findings[0].kind, FindingKind::MissingCharge);
    assert_eq!(
        report.findings[0].payment_id.as_deref(),
        Some(lost.as_str())
    );
}

/// The background worker's passes: a full one first, then one that compares
/// only what is new (here two charges, no payment) and still finds what
/// spans passes: a duplicate whose second charge comes an hour after the
/// first, a duplicate that waited for a pending payment and is refunded once
/// it settled, a mismatch and a missing charge on payments that were pending
/// when their part of the window was compared, and a new orphan. A full pass
/// from nothing (a restarted worker) agrees.
async fn incremental_passes_compare_what_is_new_and_find_what_spans_them(backend: Backend) {
    let h = Harness::start(backend).await;
    let minutes = time::Duration::minutes;
    let real = OffsetDateTime::now_utc();
    pay_many(&h, "bulk", 30).await;
    let (status, dup) = h.pay("k-dup", "order-dup", "tok_ok").await;
    assert_eq!(status, 201);
    let (status, pend) = h.pay("k-pend", "order-pend", "tok_timeout").await;
    assert_eq!(status, 202);
    let lost = h.ghost("k-ghost", "order-ghost").await;
    let stray_wait = plant_at(
        &h,
        new_charge_id(),
        &PaymentId::generate(),
        "order-wait",
        OffsetDateTime::now_utc(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (status, wait) = h.pay("k-wait", "order-wait", "tok_timeout").await;
    assert_eq!(status, 202);

    let config = ReconcilerConfig {
        window: Duration::from_secs(2 * 3600),
        pending_after: Duration::from_secs(3600),
        refund_duplicates: true,
        ..small_slices()
    };
    let mut state = ReconcilerState::new();
    let n1 = real + minutes(10);
    let first = h
        .reconciler()
        .reconcile_at(&config, &mut state, n1)
        .await
        .unwrap();
    assert_eq!(first.pass, PassKind::Full, "{first}");
    assert_eq!(first.payments_compared, 34, "{first}");
    assert_eq!(first.findings.len(), 1, "{first}");
    let waiting = &first.findings[0];
    assert_eq!(
        (waiting.kind, waiting.reference.as_str()),
        (FindingKind::DuplicateCharge, "order-wait")
    );
    assert!(
        waiting.refunded.is_empty(),
        "our payment is pending: {first}"
    );
    assert_eq!(state.rechecks(), 3, "the pending payments");
    assert_eq!(state.revisits(), 1, "the waiting duplicate");
    assert_eq!(state.compared_to(), Some(n1));

    // An hour later: a second charge for order-dup, a new orphan; two
    // payments settled wrongly behind the acquirer's back.
    let stray_dup = plant_at(
        &h,
        new_charge_id(),
        &PaymentId::generate(),
        "order-dup",
        real + minutes(60),
    )
    .await;
    let orphan = plant_at(
        &h,
        new_charge_id(),
        &PaymentId::generate(),
        "order-orphan",
        real + minutes(62),
    )
    .await;
    let pend_id = payment_id(&pend);
    let pend_charge = h.charge_of(pend_id.as_str()).await;
    settle(&h, &pend_id, PaymentStatus::Declined, &pend_charge.id).await;
    settle(&h, &lost, PaymentStatus::Succeeded, "ch_never_made").await;

    let n2 = real + minutes(70);
    let settle_now = ReconcilerConfig {
        pending_after: Duration::ZERO,
        ..config
    };
    let second = h
        .reconciler()
        .reconcile_at(&settle_now, &mut state, n2)
        .await
        .unwrap();
    assert_eq!(second.pass, PassKind::Incremental, "{second}");
    assert_eq!(second.resolved.len(), 1, "k-wait settles: {second}");
    assert_eq!(
        (second.payments_compared, second.charges_compared),
        (0, 2),
        "only what is new: {second}"
    );
    assert_eq!(second.findings.len(), 5, "{second}");
    let dups = of_kind(&second, FindingKind::DuplicateCharge);
    let dup_charge = h.charge_of(dup["id"].as_str().unwrap()).await;
    let d = dups.iter().find(|f| f.reference == "order-dup").unwrap();
    assert_eq!(d.charge_ids, [dup_charge.id.clone(), stray_dup.id.clone()]);
    assert_eq!(d.refunded, vec![stray_dup.id.clone()]);
    let d = dups.iter().find(|f| f.reference == "order-wait").unwrap();
    assert_eq!(
        d.refunded,
        vec![stray_wait.id.clone()],
        "refunded once settled"
    );
    let m = of_kind(&second, FindingKind::Mismatch);
    assert_eq!(m.len(), 1, "{second}");
    assert_eq!(m[0].payment_id.as_deref(), Some(pend_id.as_str()));
    let m = of_kind(&second, FindingKind::MissingCharge);
    assert_eq!(m[0].payment_id.as_deref(), Some(lost.as_str()));
    let o = of_kind(&second, FindingKind::OrphanCharge);
    assert_eq!(o[0].charge_ids, vec![orphan.id.clone()]);
    let wait_charge = h.charge_of(wait["id"].as_str().unwrap()).await;
    for charge in h.sim.ledger().await.unwrap() {
        let given_back = charge.id == stray_dup.id || charge.id == stray_wait.id;
        assert_eq!(charge.refunded_minor > 0, given_back, "{charge:?}");
    }
    assert_eq!(wait_charge.refunded_minor, 0, "ours is kept");
    assert_eq!(state.rechecks(), 0, "all final now");
    assert_eq!(state.revisits(), 0, "nothing left to refund");

    // A minute later nothing is new.
    let third = h
        .reconciler()
        .reconcile_at(&settle_now, &mut state, n2 + minutes(1))
        .await
        .unwrap();
    assert_eq!(third.pass, PassKind::Incremental);
    assert!(third.is_clean(), "{third}");
    assert_eq!((third.payments_compared, third.charges_compared), (0, 0));

    // A restarted worker's full pass finds what is still wrong.
    let restarted = h
        .reconciler()
        .reconcile_at(&settle_now, &mut ReconcilerState::new(), n2)
        .await
        .unwrap();
    assert_eq!(restarted.pass, PassKind::Full);
    let kinds: Vec<FindingKind> = restarted.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FindingKind::OrphanCharge,
            FindingKind::MissingCharge,
            FindingKind::Mismatch
        ],
        "{restarted}"
    );
}

on_both_stores!(
    a_window_of_many_slices_is_compared_in_bounded_memory,
    duplicates_across_slices_are_found_once_and_refunded,
    an_orphan_at_a_slice_edge_is_found_once,
    a_missing_charge_in_an_old_slice_is_found,
    incremental_passes_compare_what_is_new_and_find_what_spans_them,
);
