//! Which payments are pending on PostgreSQL, without writing a queue row
//! for every payment (issue 38).
//!
//! A pending payment is found one of two ways:
//!
//! - **in flight**: a key that is not finished points at it. Phase 1 writes
//!   the key row and the payment row in one statement, and the key stays
//!   unfinished until phase 3 ends it (a crash leaves it so, for the
//!   completer), so every payment a request is still working on, or left
//!   half done, is reached through `idempotency_keys_unfinished`, the key
//!   table's partial index of exactly those rows;
//! - **queued**: a row of `pending_payments`. The one write that finishes a
//!   key without settling its payment (`finish_key`: an answer stored while
//!   the acquirer's outcome is still unknown) enqueues the payment in the
//!   same statement if it is pending.
//!
//! So the set is exact where it matters: no pending payment is missing from
//! it (a payment is never made pending again, and every key that stops being
//! unfinished either settled its payment or enqueued it). A queue row can
//! outlive its payment's pending state: the enqueue reads the payment in its
//! statement's snapshot, so a settle that commits meanwhile leaves the row
//! behind. Every read therefore joins the payment and keeps it only while it
//! is pending, and the key sweeper deletes such rows ([`drop_settled`]).
//!
//! Before this, the claim inserted a queue row for every payment and its
//! settle deleted it a few milliseconds later: a heap tuple, an index entry
//! and a delete record per payment, for a payment that settles in its own
//! request nearly always.

use chargeonce_core::StoreError;
use sqlx::{Postgres, Transaction};

use super::store_error;

/// The pending payments as rows of `(created_at, id, shop_id)`: the queued
/// ones still pending and the in-flight ones (see the module's docs), each
/// once. `$queued` and `$in_flight` are conditions on the queue row `q` and
/// on the key row `k` (the payment is `p` in both), added to each part so
/// that each can use its index; `$each` ends each part (an `ORDER BY 1, 2
/// LIMIT` keeps a reader's limit inside both: the queue part then reads its
/// primary key in order, its `created_at` being the payment's).
macro_rules! pending_set {
    ($queued:literal, $in_flight:literal, $each:literal) => {
        concat!(
            "(SELECT q.created_at, q.payment_id AS id, q.shop_id FROM pending_payments q \
                  JOIN payments p ON p.id = q.payment_id AND p.shop_id = q.shop_id \
              WHERE p.status = 'pending' AND ",
            $queued,
            " ",
            $each,
            ") UNION \
             (SELECT p.created_at, p.id, p.shop_id FROM idempotency_keys k \
                  JOIN payments p ON p.id = k.payment_id AND p.shop_id = k.shop_id \
              WHERE k.recovery_point <> 'finished' AND p.status = 'pending' AND ",
            $in_flight,
            " ",
            $each,
            ")"
        )
    };
}
pub(super) use pending_set;

/// Deletes the queue rows whose payment is no longer pending (left behind
/// by a settle that raced an enqueue; see the module's docs).
pub(super) async fn drop_settled(
    tx: &mut Transaction<'static, Postgres>,
) -> Result<u64, StoreError> {
    let dropped = sqlx::query(
        "DELETE FROM pending_payments q USING payments p \
         WHERE p.id = q.payment_id AND p.shop_id = q.shop_id AND p.status <> 'pending'",
    )
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(dropped.rows_affected())
}
