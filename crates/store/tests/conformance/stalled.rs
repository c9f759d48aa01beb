//! What the completer reads: unfinished keys whose lease ran out.

use std::time::Duration;

use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn stalled_keys_are_unfinished_keys_whose_lease_ran_out(f: Fixture) {
    let short = lease_of(100);
    f.claimed("expired", "order-1", short).await;
    f.claimed("alive", "order-2", LONG).await;
    let (done, payment) = f.claimed("done", "order-3", short).await;
    f.finished(&done, &payment, "r", LONG.ttl).await;
    let (released, _) = f.claimed("released", "order-4", LONG).await;
    assert!(f.store.release_lease(&released, &[]).await.unwrap());
    tokio::time::sleep(Duration::from_millis(250)).await;

    let stalled = f.store.stalled_keys(Duration::ZERO, 10).await.unwrap();
    let mut names: Vec<&str> = stalled.iter().map(|s| s.key.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["expired", "released"]);
    let expired = stalled
        .iter()
        .find(|s| s.key.as_str() == "expired")
        .unwrap();
    assert_eq!(expired.shop_id, f.shop);
    assert_eq!(expired.fingerprint, fp("expired", "order-1"));
    assert_eq!(
        f.store.stalled_keys(Duration::ZERO, 1).await.unwrap().len(),
        1
    );
    assert!(
        f.store
            .stalled_keys(Duration::from_secs(60), 10)
            .await
            .unwrap()
            .is_empty(),
        "not idle long enough"
    );
    // What the completer does with one: a take-over with its fingerprint.
    assert!(
        f.store
            .take_over(
                &expired.shop_id,
                &expired.key,
                &expired.fingerprint,
                LONG.lease
            )
            .await
            .unwrap()
            .is_some()
    );
    let left = f.store.stalled_keys(Duration::ZERO, 10).await.unwrap();
    assert_eq!(left.len(), 1, "the taken key holds a live lease again");
}

on_both_stores!(
    fixture =>
    stalled_keys_are_unfinished_keys_whose_lease_ran_out,
);
