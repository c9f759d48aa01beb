//! What the reconciler reads and writes: pending payments, payments in a window, settlements.

use std::time::Duration;

use chargeonce_core::{AcquirerKey, Claim, PaymentStatus, SettleOutcome, ShopId, ShopSecret};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn pending_payments_are_listed_oldest_first(f: Fixture) {
    let (_, first) = f.claimed("k1", "order-1", LONG).await;
    let (_, second) = f.claimed("k2", "order-2", LONG).await;
    let (_, third) = f.claimed("k3", "order-3", LONG).await;
    f.settle(&second.id, &succeeded()).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let pending = f.store.pending_payments(Duration::ZERO, 10).await.unwrap();
    let ids: Vec<_> = pending.iter().map(|p| p.id.clone()).collect();
    assert_eq!(ids, [first.id.clone(), third.id]);
    assert_eq!(
        f.store.pending_payments(Duration::ZERO, 1).await.unwrap()[0].id,
        first.id
    );
    assert!(
        f.store
            .pending_payments(Duration::from_secs(3600), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn payments_in_a_window_are_paged_by_id(f: Fixture) {
    let other = f.other_shop(&ShopSecret::generate()).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let (_, p) = f
            .claimed(&format!("k{i}"), &format!("order-{i}"), LONG)
            .await;
        ids.push(p.id);
    }
    let Claim::Acquired(b) = f
        .store
        .claim_payment(
            &claim(&other, "k0", "order-0"),
            &new_payment(&other, "k0", "order-0"),
            LONG,
        )
        .await
        .unwrap()
    else {
        panic!("new key")
    };
    ids.push(b.payment.id);
    ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let now = time::OffsetDateTime::now_utc();
    let from = now - time::Duration::hours(1);
    let to = now + time::Duration::hours(1);
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = f
            .store
            .payments_created_between(from, to, after.as_ref(), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2);
        if page.is_empty() {
            break;
        }
        after = page.last().map(|p| p.id.clone());
        seen.extend(page.into_iter().map(|p| p.id));
    }
    assert_eq!(seen, ids, "every shop, each once, by id");
    let earlier = f
        .store
        .payments_created_between(from - time::Duration::hours(1), from, None, 10)
        .await
        .unwrap();
    assert!(earlier.is_empty());
}

async fn settling_moves_only_pending_payments(f: Fixture) {
    let (_, payment) = f.claimed("k1", "order-1", LONG).await;
    let SettleOutcome::Settled(settled) = f.settle(&payment.id, &succeeded()).await else {
        panic!("pending -> succeeded")
    };
    assert_eq!(settled.status, PaymentStatus::Succeeded);
    assert_eq!(settled.provider_payment_id.as_deref(), Some("ch_1"));
    let SettleOutcome::AlreadyFinal(unchanged) = f.settle(&payment.id, &declined()).await else {
        panic!("a final state never changes")
    };
    assert_eq!(unchanged, settled);
    let other = ShopId::new("shop-b").unwrap();
    assert_eq!(
        f.store
            .settle_payment(&other, &payment.id, &succeeded())
            .await
            .unwrap(),
        SettleOutcome::NotFound
    );
    assert_eq!(
        f.store
            .payment_by_acquirer_key(&payment.acquirer_key)
            .await
            .unwrap(),
        Some(settled)
    );
    assert_eq!(
        f.store
            .payment_by_acquirer_key(&AcquirerKey::from_stored("chargeonce-nobody".into()))
            .await
            .unwrap(),
        None
    );
}

on_both_stores!(
    fixture =>
    pending_payments_are_listed_oldest_first,
    payments_in_a_window_are_paged_by_id,
    settling_moves_only_pending_payments,
);
