//! Refunds: phase 1 (the claim of the key with the reservation of the
//! refund's amount on its payment), phase 3 (the fenced answer with the
//! refund's settlement and merchant event), and reading a refund, or a
//! shop's refunds a page at a time.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::events::NewEvent;
use chargeonce_core::history::{AcquirerAttempt, HistoryEvent};
use chargeonce_core::refund::reservation;
use chargeonce_core::store::Refunds;
use chargeonce_core::{
    ClaimRequest, Cursor, FinishOutcome, KeyTiming, Lease, LeaseToken, NewRefund, Page,
    PageRequest, PaymentId, RecoveryPoint, Refund, RefundClaim, RefundId, RefundRefusal,
    RefundSettlement, RefundStatus, ShopId, StoreError, StoredResponse,
};
use sqlx::{FromRow, Postgres, Row, Transaction};
use time::OffsetDateTime;

use super::history::{Entries, insert_entries};
use super::keys::{KeyClaim, KeyTarget, LockedPayment, finish_key, insert_key_locking_payment};
use super::outbox::insert_event;
use super::{CLAIM_ATTEMPTS, PgStore, store_error};
use crate::codec::{acquired, new_refund_row, refund_settlement_columns};
use crate::columns::refund_columns;
use crate::rows::RefundRow;

/// The newest page of a shop's refunds: `$1` the shop, `$2` null (the
/// refunds of every payment), `$3` the limit.
const REFUNDS_NEWEST: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE shop_id = $1 AND ($2::text IS NULL OR payment_id = $2) \
     ORDER BY created_at DESC, id DESC LIMIT $3"
);

/// The page after a cursor of a shop's refunds: `$1` to `$3` as in
/// [`REFUNDS_NEWEST`], `$4`, `$5` the cursor's `created_at` and id.
const REFUNDS_AFTER: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE shop_id = $1 AND ($2::text IS NULL OR payment_id = $2) \
       AND (created_at, id) < ($4, $5) ORDER BY created_at DESC, id DESC LIMIT $3"
);

/// The page before a cursor of a shop's refunds, read oldest first: `$1` to
/// `$5` as in [`REFUNDS_AFTER`].
const REFUNDS_BEFORE: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE shop_id = $1 AND ($2::text IS NULL OR payment_id = $2) \
       AND (created_at, id) > ($4, $5) ORDER BY created_at, id LIMIT $3"
);

/// The newest page of one payment's refunds (`payment_id = $2`, a range of
/// `refunds_by_payment`): `$1` the shop, `$3` the limit.
const PAYMENT_REFUNDS_NEWEST: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE payment_id = $2 AND shop_id = $1 \
     ORDER BY created_at DESC, id DESC LIMIT $3"
);

/// The page after a cursor of one payment's refunds: `$1` to `$3` as in
/// [`PAYMENT_REFUNDS_NEWEST`], `$4`, `$5` the cursor's `created_at` and id.
const PAYMENT_REFUNDS_AFTER: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE payment_id = $2 AND shop_id = $1 \
       AND (created_at, id) < ($4, $5) ORDER BY created_at DESC, id DESC LIMIT $3"
);

/// The page before a cursor of one payment's refunds, read oldest first:
/// `$1` to `$5` as in [`PAYMENT_REFUNDS_AFTER`].
const PAYMENT_REFUNDS_BEFORE: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE payment_id = $2 AND shop_id = $1 \
       AND (created_at, id) > ($4, $5) ORDER BY created_at, id LIMIT $3"
);

/// Where a refund list's cursor lies: the `(created_at, id)` of the shop's
/// refund `id` (of the payment, when given); [`StoreError::UnknownCursor`]
/// when there is none.
async fn refund_cursor(
    store: &PgStore,
    shop_id: &ShopId,
    payment_id: Option<&PaymentId>,
    id: &RefundId,
) -> Result<(OffsetDateTime, String), StoreError> {
    sqlx::query_as::<_, (OffsetDateTime, String)>(
        "SELECT created_at, id FROM refunds WHERE shop_id = $1 AND id = $2 \
         AND ($3::text IS NULL OR payment_id = $3)",
    )
    .bind(shop_id.as_str())
    .bind(id.as_str())
    .bind(payment_id.map(PaymentId::as_str))
    .fetch_optional(&mut *store.conn().await?)
    .await
    .map_err(store_error)?
    .ok_or_else(|| StoreError::UnknownCursor(id.to_string()))
}

/// Reserves a new refund's amount on its payment (locked and checked by the
/// claim), inserts the refund and its payment's `refund_reserved` entry, in
/// one statement: the refund and the entry are written only when the
/// reservation was. Whether it was.
async fn reserve_refund(
    tx: &mut Transaction<'static, Postgres>,
    created: &Refund,
    entries: &Entries,
) -> Result<bool, StoreError> {
    let written: i64 = sqlx::query_scalar(concat!(
        "WITH reserved AS ( \
             UPDATE payments SET refund_reserved_minor = refund_reserved_minor + $5, \
                 updated_at = now() \
             WHERE shop_id = $2 AND id = $3 AND status = 'succeeded' \
               AND refund_reserved_minor + $5 <= CASE WHEN capture_method = 'manual' \
                   THEN captured_minor ELSE amount_minor END \
             RETURNING id), \
         r AS ( \
             INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, \
                 currency, status, acquirer_key, created_at) \
             SELECT $1, $2, $3, $4, $5, $6, 'pending', $7, $8 FROM reserved \
             RETURNING payment_id, id AS refund_id, shop_id), \
         h AS (",
        insert_entries!("r", "$9", "$10"),
        ") SELECT count(*) FROM r"
    ))
    .bind(created.id.as_str())
    .bind(created.shop_id.as_str())
    .bind(created.payment_id.as_str())
    .bind(created.idempotency_key.as_str())
    .bind(created.amount.minor_units())
    .bind(created.amount.currency().code())
    .bind(created.acquirer_key.as_str())
    .bind(created.created_at)
    .bind(&entries.kinds)
    .bind(&entries.events)
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(written == 1)
}

/// The statement that applies a refund's definite answer (see
/// [`settle_refund`]); `$set` is what it does to the payment's amounts.
///
/// The refund, and then its payment, are found by their ids alone (the
/// payment's as a value, through a scalar subquery), their shop checked
/// with `IS NOT DISTINCT FROM` (`=` on a NOT NULL column), as
/// `lock_payment` finds a payment: with `shop_id = $1` the planner, on a
/// table it has few statistics of, picked `refunds_acquirer_key_key`, which
/// leads with `shop_id`, and would read the shop's every refund; and a join
/// to the refund's row may be planned as a scan of every payment (see
/// `finish_key`).
macro_rules! settle_refund_statement {
    ($set:literal) => {
        concat!(
            "WITH r AS ( \
                 UPDATE refunds SET status = $3, provider_refund_id = $4, failure_code = $5, \
                     updated_at = now() \
                 WHERE id = $2 AND shop_id IS NOT DISTINCT FROM $1 AND status = 'pending' \
                 RETURNING ",
            refund_columns!(),
            ", id AS refund_id), \
             p AS ( \
                 UPDATE payments p SET ",
            $set,
            ", updated_at = now() \
                 WHERE p.id = (SELECT payment_id FROM r) AND p.shop_id IS NOT DISTINCT FROM $1 \
                 RETURNING p.reference), \
             h AS (",
            insert_entries!("r", "$6", "$7"),
            ") SELECT r.*, p.reference FROM r LEFT JOIN p ON true"
        )
    };
}

/// Applies a refund's definite answer in one statement: the refund, still
/// pending, takes its final status; its payment counts the amount as
/// refunded, or gives the reservation back when the refund failed; the
/// payment's history gets the refund's end. The refund and its payment's
/// reference, or `None` when the refund was no longer pending.
async fn settle_refund(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    id: &RefundId,
    settlement: &RefundSettlement,
) -> Result<Option<(Refund, String)>, StoreError> {
    let (status, provider_refund_id, failure_code) = refund_settlement_columns(settlement);
    // Only the column that moves is named: a SET of `refund_reserved_minor`
    // would also fire the hold's trigger (0015), for nothing on a success.
    let sql = match status {
        RefundStatus::Succeeded => {
            settle_refund_statement!(
                "refunded_minor = p.refunded_minor + (SELECT amount_minor FROM r)"
            )
        }
        _ => settle_refund_statement!(
            "refund_reserved_minor = p.refund_reserved_minor - (SELECT amount_minor FROM r)"
        ),
    };
    let ended = Entries::of([HistoryEvent::RefundEnded { status }]);
    let row = sqlx::query(sql)
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .bind(status.as_str())
        .bind(provider_refund_id)
        .bind(failure_code)
        .bind(&ended.kinds)
        .bind(&ended.events)
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let refund = Refund::try_from(RefundRow::from_row(&row).map_err(store_error)?)?;
    let reference: Option<String> = row.try_get("reference").map_err(store_error)?;
    let reference =
        reference.ok_or_else(|| StoreError::corrupt(format!("refund {id} has no payment")))?;
    Ok(Some((refund, reference)))
}

#[async_trait]
impl Refunds for PgStore {
    /// Phase 1 of a refund, one transaction.
    #[tracing::instrument(level = "debug", name = "store.claim_refund", skip_all, fields(db.system = "postgresql"))]
    async fn claim_refund(
        &self,
        claim: &ClaimRequest,
        refund: &NewRefund,
        timing: KeyTiming,
    ) -> Result<RefundClaim, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let token = LeaseToken::generate();
            let tx = self.conns.begin().await.map_err(store_error)?;
            let target = KeyTarget {
                recovery_point: RecoveryPoint::RefundCreated,
                payment_id: &refund.payment_id,
                refund_id: Some(&refund.id),
                capture_id: None,
                holder: &self.instance,
            };
            // The payment's row lock serialises refunds of one payment: the
            // check and the conditional update below see every committed
            // reservation.
            let (mut tx, locked) =
                match insert_key_locking_payment(self, tx, claim, target, token, timing).await? {
                    KeyClaim::Inserted(tx, locked) => (tx, locked),
                    KeyClaim::Exists(Some(record)) => return Ok(RefundClaim::Exists(*record)),
                    KeyClaim::Exists(None) => continue,
                };
            let decided = match locked {
                None => Err(RefundRefusal::PaymentNotFound),
                Some(locked) => {
                    let LockedPayment {
                        payment,
                        refund_reserved_minor,
                    } = *locked;
                    reservation(&payment, refund_reserved_minor, refund.amount)
                        .map(|amount| (payment, amount))
                }
            };
            let (payment, amount) = match decided {
                Ok(found) => found,
                Err(refused) => {
                    tx.rollback().await.map_err(store_error)?;
                    return Ok(RefundClaim::Refused(refused));
                }
            };
            let created = new_refund_row(refund, amount);
            let reserved = HistoryEvent::RefundReserved {
                key: claim.key.as_str().to_owned(),
                amount_minor: amount.minor_units(),
                currency: amount.currency().code().to_owned(),
                instance: self.instance.to_string(),
            };
            if !reserve_refund(&mut tx, &created, &Entries::of([reserved])).await? {
                tx.rollback().await.map_err(store_error)?;
                return Err(StoreError::other(format!(
                    "refund reservation on payment {} failed after its check",
                    refund.payment_id
                )));
            }
            tx.commit().await.map_err(store_error)?;
            return Ok(RefundClaim::Acquired(acquired(
                claim,
                token,
                RecoveryPoint::RefundCreated,
                payment,
                Some(created),
            )));
        }
        Err(StoreError::other(format!(
            "claim of key {} did not settle after {CLAIM_ATTEMPTS} attempts",
            claim.key
        )))
    }

    /// Phase 3 of a refund, one transaction, fenced by the lease token, with
    /// its history entries (the acquirer calls, the answer, the refund's end).
    #[tracing::instrument(level = "debug", name = "store.finish_refund", skip_all, fields(db.system = "postgresql"))]
    async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<(&RefundId, &RefundSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        let entries = Entries::answered(lease, response, attempts, &self.instance);
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        if !finish_key(&mut *tx, lease, response, ttl, &entries).await? {
            tx.rollback().await.map_err(store_error)?;
            return Ok(FinishOutcome::LeaseLost);
        }
        if let Some((refund_id, settlement)) = settlement {
            let Some((refund, reference)) =
                settle_refund(&mut tx, &lease.shop_id, refund_id, settlement).await?
            else {
                tx.rollback().await.map_err(store_error)?;
                return Ok(FinishOutcome::PaymentAlreadySettled);
            };
            insert_event(&mut tx, NewEvent::refund_settled(&refund, &reference)).await?;
        }
        tx.commit().await.map_err(store_error)?;
        Ok(FinishOutcome::Stored)
    }

    /// One refund of one shop.
    #[tracing::instrument(level = "debug", name = "store.refund", skip_all, fields(db.system = "postgresql"))]
    async fn refund(&self, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, RefundRow>(concat!(
                "SELECT ",
                refund_columns!(),
                " FROM refunds WHERE shop_id = $1 AND id = $2"
            ))
            .bind(shop_id.as_str())
            .bind(id.as_str()),
        )
        .await
    }

    /// One page of a shop's refunds (of one payment), newest first by
    /// `(created_at, id)`.
    #[tracing::instrument(level = "debug", name = "store.list_refunds", skip_all, fields(db.system = "postgresql"))]
    async fn list_refunds(
        &self,
        shop_id: &ShopId,
        payment_id: Option<&PaymentId>,
        page: &PageRequest<RefundId>,
    ) -> Result<Page<Refund>, StoreError> {
        let at = match &page.cursor {
            Cursor::Newest => None,
            Cursor::After(id) | Cursor::Before(id) => {
                Some(refund_cursor(self, shop_id, payment_id, id).await?)
            }
        };
        let sql = match (payment_id, &page.cursor) {
            (None, Cursor::Newest) => REFUNDS_NEWEST,
            (None, Cursor::After(_)) => REFUNDS_AFTER,
            (None, Cursor::Before(_)) => REFUNDS_BEFORE,
            (Some(_), Cursor::Newest) => PAYMENT_REFUNDS_NEWEST,
            (Some(_), Cursor::After(_)) => PAYMENT_REFUNDS_AFTER,
            (Some(_), Cursor::Before(_)) => PAYMENT_REFUNDS_BEFORE,
        };
        let mut query = sqlx::query_as::<_, RefundRow>(sql)
            .bind(shop_id.as_str())
            .bind(payment_id.map(PaymentId::as_str))
            .bind(i64::from(page.limit.get()) + 1);
        if let Some((created_at, id)) = at {
            query = query.bind(created_at).bind(id);
        }
        let rows: Vec<Refund> = super::all(self, query).await?;
        Ok(Page::from_probe(rows, page))
    }
}
