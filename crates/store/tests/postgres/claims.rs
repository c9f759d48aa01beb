//! A claim that waited on another transaction's rows for its key or its
//! order reads what that transaction left, in a new statement.

use super::*;

/// A claim's rows, inserted in a transaction the test holds open.
async fn insert_claim(
    tx: &mut Transaction<'static, Postgres>,
    claim: &ClaimRequest,
    p: &NewPayment,
) {
    sqlx::query(
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, recovery_point, \
             lease_token, locked_until, payment_id, created_at, expires_at) \
         VALUES ($1, $2, $3, 'POST', '/v1/payments', 'payment_created', gen_random_uuid(), \
             now() + interval '30 seconds', $4, now(), now() + interval '1 hour')",
    )
    .bind(claim.shop_id.as_str())
    .bind(claim.key.as_str())
    .bind(claim.fingerprint.as_bytes().as_slice())
    .bind(p.id.as_str())
    .execute(&mut **tx)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, currency, \
             token, status, acquirer_key, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9)",
    )
    .bind(p.id.as_str())
    .bind(p.shop_id.as_str())
    .bind(p.idempotency_key.as_str())
    .bind(p.request.reference.as_str())
    .bind(p.request.amount.minor_units())
    .bind(p.request.amount.currency().code())
    .bind(p.request.token.as_str())
    .bind(p.acquirer_key.as_str())
    .bind(p.created_at)
    .execute(&mut **tx)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO pending_payments (created_at, payment_id, shop_id) VALUES ($1, $2, $3)",
    )
    .bind(p.created_at)
    .bind(p.id.as_str())
    .bind(p.shop_id.as_str())
    .execute(&mut **tx)
    .await
    .unwrap();
}

/// Runs a claim of `k` for `reference` while a transaction holding the
/// claim of `other` for the same order (uncommitted) is committed or rolled
/// back, once the claim waits for it. Returns the claim and the other
/// payment.
async fn claim_against_open(
    pg: &Pg,
    k: &str,
    other: &str,
    commit: bool,
) -> (Claim, NewPayment, NewPayment) {
    let theirs = new_payment(&pg.shop, other, "order-1");
    let mut tx = pg.store.pool().begin().await.unwrap();
    insert_claim(&mut tx, &claim(&pg.shop, other), &theirs).await;
    let ours = new_payment(&pg.shop, k, "order-1");
    let store = Arc::clone(&pg.store);
    let (c, p) = (claim(&pg.shop, k), ours.clone());
    let claimed = against_open(&pg.store, tx, commit, async move {
        store.claim_payment(&c, &p, TIMING).await
    })
    .await;
    (claimed.unwrap(), ours, theirs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_another_keys_payment_of_its_order_links_it() {
    let pg = pg().await;
    let (claimed, ours, theirs) = claim_against_open(&pg, "k2", "k1", true).await;
    let Claim::Acquired(a) = claimed else {
        panic!("k2 is new")
    };
    assert_eq!(a.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(a.payment, theirs.to_payment());
    assert!(
        pg.store
            .payment(&pg.shop, &ours.id)
            .await
            .unwrap()
            .is_none()
    );
    let record = pg.store.key(&pg.shop, &key("k2")).await.unwrap().unwrap();
    assert_eq!(record.payment_id, Some(theirs.id.clone()));
    assert_eq!(record.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(record.replays, 0);
    // The one-statement claim that failed at its commit wrote no entry;
    // the transaction wrote the link on the live payment.
    assert!(history(&pg, &ours.id).await.is_empty());
    assert_eq!(history(&pg, &theirs.id).await, ["linked"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_a_rolled_back_payment_of_its_order_creates_its_own() {
    let pg = pg().await;
    let (claimed, ours, _) = claim_against_open(&pg, "k2", "k1", false).await;
    let Claim::Acquired(a) = claimed else {
        panic!("k2 is new")
    };
    assert_eq!(a.recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(a.payment, ours.to_payment());
    assert!(pg.store.key(&pg.shop, &key("k1")).await.unwrap().is_none());
    assert_eq!(history(&pg, &ours.id).await, ["claimed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_its_key_reads_the_winner_in_a_new_statement() {
    // The winner commits after the claim's statement began: its snapshot
    // cannot see the key, the re-read must.
    let pg = pg().await;
    let (claimed, ours, theirs) = claim_against_open(&pg, "k1", "k1", true).await;
    let Claim::Exists(record) = claimed else {
        panic!("the key was claimed first")
    };
    assert_eq!(record.payment_id, Some(theirs.id.clone()));
    assert!(record.lease_active);
    assert_eq!(record.replays, 1);
    let info = pg
        .store
        .key_info(&pg.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        info.repeats_by.conflicts.count, 1,
        "a 409: its lease is alive"
    );
    assert!(
        pg.store
            .payment(&pg.shop, &ours.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(history(&pg, &ours.id).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_that_waited_for_its_key_rolled_back_claims_it() {
    let pg = pg().await;
    let (claimed, ours, _) = claim_against_open(&pg, "k1", "k1", false).await;
    let Claim::Acquired(a) = claimed else {
        panic!("the other claim rolled back")
    };
    assert_eq!(a.recovery_point, RecoveryPoint::PaymentCreated);
    assert_eq!(a.payment, ours.to_payment());
}
