//! A key's repeats by answer: each repeat that reaches the store is
//! classified in the statement that counts it (a replay, a 409, a 422),
//! instances add the ones they answered themselves in batches, and a swept
//! key leaves its counts in its payment's history.

use std::time::Duration;

use chargeonce_core::history::{HistoryEvent, RepeatCounts, RepeatKind, RepeatTally};
use chargeonce_core::{Claim, KeyInfo, KeyTiming, RefundClaim, ShopSecret};
use chargeonce_testkit::on_both_stores;
use time::OffsetDateTime;

use crate::support::*;

impl Fixture {
    /// The introspection of key `k`, which must exist.
    async fn info(&self, k: &str) -> KeyInfo {
        self.store
            .key_info(&self.shop, &key(k))
            .await
            .unwrap()
            .unwrap()
    }

    /// A repeat of key `k` with this body, which must find the key.
    async fn repeat(&self, k: &str, body: &str, reference: &str) {
        assert!(matches!(
            self.claim(k, body, reference, LONG).await,
            Claim::Exists(_)
        ));
    }
}

/// A time at a whole second (stored times are milliseconds).
fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

/// The same request while the first one runs is a conflict, another
/// request with the key a mismatch, the same request once it finished a
/// replay; a request that may resume the key (its lease ran out) only adds
/// to the totals. Each with the time of its last.
async fn each_repeat_is_counted_by_its_answer(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    f.repeat("k1", "order-1", "order-1").await;
    let info = f.info("k1").await;
    assert_eq!(info.repeats_by.conflicts.count, 1);
    let conflicted = info.repeats_by.conflicts.last_at.expect("a 409");
    assert!(conflicted >= info.created_at);
    assert_eq!(info.repeats_by.replays.count, 0);
    assert_eq!(info.repeats_by.mismatches.count, 0);

    f.repeat("k1", "another order", "order-1").await;
    f.repeat("k1", "another order", "order-1").await;
    let info = f.info("k1").await;
    assert_eq!(info.repeats_by.mismatches.count, 2);
    assert!(info.repeats_by.mismatches.last_at.expect("a 422") >= conflicted);
    assert_eq!(info.repeats_by.conflicts.count, 1, "a 422 is no 409");

    f.finished(&lease, &payment, "r", LONG.ttl).await;
    f.repeat("k1", "order-1", "order-1").await;
    let info = f.info("k1").await;
    let by = info.repeats_by;
    assert_eq!(
        (by.replays.count, by.conflicts.count, by.mismatches.count),
        (1, 1, 2)
    );
    let replayed = by.replays.last_at.expect("a replay");
    assert!(replayed >= by.mismatches.last_at.unwrap());
    assert_eq!(info.repeats, 4, "the totals count every repeat");
    assert_eq!(info.last_repeat_at, Some(replayed));

    // Its lease ran out: the request will take the key over, which is
    // neither a replay nor a 409 nor a 422.
    f.claimed("k2", "order-2", lease_of(100)).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    f.repeat("k2", "order-2", "order-2").await;
    let info = f.info("k2").await;
    assert_eq!(info.repeats, 1);
    assert_eq!(info.repeats_by, RepeatCounts::default());

    // A parked key answers "pending": not a 409 either.
    let (lease, _) = f.claimed("k3", "order-3", LONG).await;
    assert!(
        f.store
            .park_lease(&lease, Duration::from_secs(30), &[])
            .await
            .unwrap()
    );
    f.repeat("k3", "order-3", "order-3").await;
    let info = f.info("k3").await;
    assert_eq!(
        (info.repeats, info.repeats_by),
        (1, RepeatCounts::default())
    );
}

/// A refund key's repeats are classified the same way.
async fn a_refund_keys_repeats_are_counted_by_their_answer(f: Fixture) {
    let paid = f.paid_payment("order-1").await;
    f.refund_acquired(&paid.id, "r1", Some("1.00")).await;
    assert!(matches!(
        f.claim_refund(&paid.id, "r1", Some("1.00"), LONG).await,
        RefundClaim::Exists(_)
    ));
    let info = f.info("r1").await;
    assert_eq!(info.repeats_by.conflicts.count, 1);
    assert_eq!(info.repeats, 1);
}

/// The counts of the keys asked that exist, in the order asked; another
/// shop's keys and unknown keys are left out.
async fn key_repeats_reads_the_counts_of_existing_keys(f: Fixture) {
    f.claimed("k1", "order-1", LONG).await;
    f.repeat("k1", "order-1", "order-1").await;
    f.repeat("k1", "other", "order-1").await;
    f.claimed("k2", "order-2", LONG).await;
    let other = f.other_shop(&ShopSecret::from_string("b")).await;

    let found = f
        .store
        .key_repeats(&f.shop, &[key("k2"), key("nope"), key("k1")])
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].key, key("k2"));
    assert_eq!(found[0].repeats, RepeatCounts::default());
    assert_eq!(found[1].key, key("k1"));
    assert_eq!(found[1].repeats, f.info("k1").await.repeats_by);
    assert_eq!(found[1].repeats.conflicts.count, 1);
    assert_eq!(found[1].repeats.mismatches.count, 1);

    assert!(
        f.store
            .key_repeats(&other, &[key("k1"), key("k2")])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(f.store.key_repeats(&f.shop, &[]).await.unwrap().is_empty());
}

/// Repeats an instance answered itself add to the key's counts and totals;
/// each last time is the later of the stored one and the one given; a key
/// that is gone is skipped.
async fn add_repeats_adds_to_the_counts_and_skips_missing_keys(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    f.finished(&lease, &payment, "r", LONG.ttl).await;
    f.repeat("k1", "order-1", "order-1").await;
    let before = f.info("k1").await;
    let stored_replay = before.repeats_by.replays.last_at.unwrap();
    let (earlier, later) = (at(1_000_000_000), at(4_000_000_000));

    f.store
        .add_repeats(&[
            RepeatTally {
                shop_id: f.shop.clone(),
                key: key("k1"),
                kind: RepeatKind::Replay,
                count: 3,
                last_at: earlier,
            },
            RepeatTally {
                shop_id: f.shop.clone(),
                key: key("k1"),
                kind: RepeatKind::Conflict,
                count: 2,
                last_at: earlier,
            },
            RepeatTally {
                shop_id: f.shop.clone(),
                key: key("gone"),
                kind: RepeatKind::Mismatch,
                count: 5,
                last_at: later,
            },
        ])
        .await
        .unwrap();
    let info = f.info("k1").await;
    assert_eq!(info.repeats_by.replays.count, 4);
    assert_eq!(
        info.repeats_by.replays.last_at,
        Some(stored_replay),
        "an earlier time keeps the stored one"
    );
    assert_eq!(info.repeats_by.conflicts.count, 2);
    assert_eq!(info.repeats_by.conflicts.last_at, Some(earlier));
    assert_eq!(info.repeats_by.mismatches.count, 0);
    assert_eq!(info.repeats, 6);
    assert_eq!(info.last_repeat_at, before.last_repeat_at);
    assert!(
        f.store
            .key_info(&f.shop, &key("gone"))
            .await
            .unwrap()
            .is_none()
    );

    // A later time replaces the stored one, in the totals too.
    f.store
        .add_repeats(&[RepeatTally {
            shop_id: f.shop.clone(),
            key: key("k1"),
            kind: RepeatKind::Mismatch,
            count: 1,
            last_at: later,
        }])
        .await
        .unwrap();
    let info = f.info("k1").await;
    assert_eq!(info.repeats_by.mismatches.count, 1);
    assert_eq!(info.repeats_by.mismatches.last_at, Some(later));
    assert_eq!(info.repeats, 7);
    assert_eq!(info.last_repeat_at, Some(later));
    f.store.add_repeats(&[]).await.unwrap();
}

/// A swept key leaves its repeats, as its row counted them, in its
/// payment's history; the history is the shop's only.
async fn a_swept_key_leaves_its_repeats_in_the_history(f: Fixture) {
    let brief = KeyTiming {
        ttl: Duration::from_millis(400),
        ..LONG
    };
    let (lease, payment) = f.claimed("k1", "order-1", brief).await;
    f.repeat("k1", "order-1", "order-1").await;
    f.repeat("k1", "other", "order-1").await;
    f.finished(&lease, &payment, "r", brief.ttl).await;
    f.repeat("k1", "order-1", "order-1").await;
    let counted = f.info("k1").await.repeats_by;
    assert_eq!(
        (
            counted.replays.count,
            counted.conflicts.count,
            counted.mismatches.count
        ),
        (1, 1, 1)
    );
    // A key without repeats, swept with it.
    let quiet = f.finished_key("k2", "order-2", INSTANT).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(f.store.sweep_expired_keys(10).await.unwrap(), 2);

    let history = f
        .store
        .payment_history(Some(&f.shop), &payment.id)
        .await
        .unwrap();
    assert!(matches!(
        history.first().map(|e| &e.event),
        Some(HistoryEvent::Claimed { key, .. }) if key == "k1"
    ));
    let last = history.last().unwrap();
    assert_eq!(
        last.event,
        HistoryEvent::KeyExpired {
            key: "k1".into(),
            repeats: counted,
        }
    );
    assert_eq!(last.payment_id, payment.id);
    assert_eq!(last.refund_id, None);
    assert!(history.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(history.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(
        f.store.payment_history(None, &payment.id).await.unwrap(),
        history,
        "the console reads the same"
    );

    let quiet = f
        .store
        .payment_history(Some(&f.shop), &quiet.id)
        .await
        .unwrap();
    assert_eq!(
        quiet.last().map(|e| &e.event),
        Some(&HistoryEvent::KeyExpired {
            key: "k2".into(),
            repeats: RepeatCounts::default(),
        })
    );

    let other = f.other_shop(&ShopSecret::from_string("b")).await;
    assert!(
        f.store
            .payment_history(Some(&other), &payment.id)
            .await
            .unwrap()
            .is_empty()
    );
}

/// A finished key claimed again after its expiry leaves its repeats in
/// its payment's history as the sweep would have, and starts counting anew.
async fn a_reclaimed_key_leaves_its_repeats_in_the_history(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", INSTANT).await;
    f.repeat("k1", "order-1", "order-1").await;
    let counted = f.info("k1").await.repeats_by;
    assert_eq!(counted.conflicts.count, 1);
    f.finished(&lease, &payment, "r", INSTANT.ttl).await;
    tokio::time::sleep(Duration::from_millis(20)).await;

    // The order is paid: the key's new life links to the same payment.
    let again = f.acquired("k1", "order-1", "order-1").await;
    assert_eq!(again.payment.id, payment.id);
    let info = f.info("k1").await;
    assert_eq!(
        (info.repeats, info.repeats_by),
        (0, RepeatCounts::default())
    );

    let history = f
        .store
        .payment_history(Some(&f.shop), &payment.id)
        .await
        .unwrap();
    let tail: Vec<_> = history
        .iter()
        .rev()
        .take(2)
        .rev()
        .map(|e| &e.event)
        .collect();
    assert_eq!(
        tail[0],
        &HistoryEvent::KeyExpired {
            key: "k1".into(),
            repeats: counted,
        }
    );
    assert!(matches!(tail[1], HistoryEvent::Linked { key, .. } if key == "k1"));
}

on_both_stores!(
    fixture =>
    each_repeat_is_counted_by_its_answer,
    a_refund_keys_repeats_are_counted_by_their_answer,
    key_repeats_reads_the_counts_of_existing_keys,
    add_repeats_adds_to_the_counts_and_skips_missing_keys,
    a_swept_key_leaves_its_repeats_in_the_history,
    a_reclaimed_key_leaves_its_repeats_in_the_history,
);
