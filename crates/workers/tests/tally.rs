//! The tally flusher: a repeat answered from the server's response cache
//! (the store never sees it), a replay or a 422, ends up in its key's
//! counts after a flush, a
//! last flush at shutdown loses none, and a failed flush keeps the tallies
//! for the next; on both stores.

#![allow(clippy::unwrap_used, missing_docs)]

mod harness;

use std::time::Duration;

use chargeonce_core::history::RepeatCounts;
use chargeonce_core::{IdempotencyKey, ShopId};
use chargeonce_testkit::{TestService, body, on_both_stores};
use chargeonce_workers::tally::{TallyFlusher, TallyFlusherConfig};
use harness::{Backend, Harness};

async fn repeats_of(h: &Harness, key: &str) -> RepeatCounts {
    h.store
        .key_info(
            &ShopId::new(harness::SHOP).unwrap(),
            &IdempotencyKey::new(key).unwrap(),
        )
        .await
        .unwrap()
        .unwrap()
        .repeats_by
}

async fn a_replay_answered_from_the_cache_is_counted_after_a_flush(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, first) = h.pay("k1", "order-1", "tok_ok").await;
    assert_eq!(status, 201, "{first}");
    let (status, again) = h.pay("k1", "order-1", "tok_ok").await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["_replayed"], true);
    assert_eq!(
        repeats_of(&h, "k1").await.replays.count,
        0,
        "answered from the cache: the store did not see it"
    );
    assert_eq!(h.engine.repeat_tallies().len(), 1);

    let mut flusher = TallyFlusher::new(h.engine.clone());
    assert_eq!(flusher.flush_once().await.unwrap(), 1);
    let repeats = repeats_of(&h, "k1").await;
    assert_eq!(repeats.replays.count, 1, "{repeats:?}");
    assert!(repeats.replays.last_at.is_some());
    assert_eq!(repeats.conflicts.count, 0);
    assert!(h.engine.repeat_tallies().is_empty());
    assert_eq!(flusher.flush_once().await.unwrap(), 0, "nothing new");

    // The same key for another amount: 422 from the cache, counted as a mismatch.
    let changed = TestService::pay(&h, "k1", &body("order-1", "99.00", "tok_ok"))
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status().as_u16(), 422);
    assert_eq!(flusher.flush_once().await.unwrap(), 1);
    assert_eq!(repeats_of(&h, "k1").await.mismatches.count, 1);

    // The running flusher flushes once more when stopped.
    let running = TallyFlusher::new(h.engine.clone()).spawn(TallyFlusherConfig {
        interval: Duration::from_secs(3600),
    });
    h.pay("k1", "order-1", "tok_ok").await;
    h.pay("k1", "order-1", "tok_ok").await;
    running.stop(Duration::from_secs(10)).await;
    assert_eq!(repeats_of(&h, "k1").await.replays.count, 3);

    // The store out of reach: the cache still answers, the flush fails and
    // keeps the tally for the next one.
    h.break_store().await;
    let (status, cached) = h.pay("k1", "order-1", "tok_ok").await;
    assert_eq!(status, 201, "{cached}");
    assert!(flusher.flush_once().await.is_err());
    let kept = h.engine.take_repeat_tallies();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].count, 1);
}

on_both_stores!(a_replay_answered_from_the_cache_is_counted_after_a_flush);
