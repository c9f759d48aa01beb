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
    PageRequest, Payment, PaymentId, RecoveryPoint, Refund, RefundAnswer, RefundClaim, RefundId,
    RefundRefusal, RefundStatus, ShopId, StoreError, StoredResponse,
};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, ToSql, params, params_from_iter};

use super::history::record;
use super::keys::{KeyTarget, count_repeat, insert_key, store_answer};
use super::outbox::insert_event;
use super::{Fail, Result, SqliteStore, all, now_ms, one, unix_ms};
use crate::codec::{acquired, new_refund_row, refund_settlement_columns};
use crate::columns::{payment_columns, refund_columns};
use crate::rows::{FromSqliteRow, PaymentRow, RefundRow};

/// One refund of one shop, on whichever connection.
pub(super) fn refund_in(
    conn: &Connection,
    shop_id: &ShopId,
    id: &RefundId,
) -> Result<Option<Refund>> {
    one::<RefundRow, _>(
        conn,
        concat!(
            "SELECT ",
            refund_columns!(),
            " FROM refunds WHERE shop_id = ?1 AND id = ?2"
        ),
        params![shop_id.as_str(), id.as_str()],
    )
}

// A shop's refund lists are each a range of `refunds_by_shop`, read from
// its end for the newest first; one payment's, each a range of
// `refunds_by_payment`. That index is named: the planner would rather walk
// the shop's index backwards, already in the list's order, than sort a
// payment's few refunds.

/// The newest page of a shop's refunds: `?1` the shop, `?2` null (the
/// refunds of every payment), `?3` the limit.
pub(super) const REFUNDS_NEWEST: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE shop_id = ?1 AND (?2 IS NULL OR payment_id = ?2) \
     ORDER BY created_at DESC, id DESC LIMIT ?3"
);

/// The page after a cursor of a shop's refunds: `?1` to `?3` as in
/// [`REFUNDS_NEWEST`], `?4`, `?5` the cursor's `created_at` and id.
pub(super) const REFUNDS_AFTER: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE shop_id = ?1 AND (?2 IS NULL OR payment_id = ?2) \
       AND (created_at, id) < (?4, ?5) ORDER BY created_at DESC, id DESC LIMIT ?3"
);

/// The page before a cursor of a shop's refunds, read oldest first: `?1` to
/// `?5` as in [`REFUNDS_AFTER`].
pub(super) const REFUNDS_BEFORE: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds WHERE shop_id = ?1 AND (?2 IS NULL OR payment_id = ?2) \
       AND (created_at, id) > (?4, ?5) ORDER BY created_at, id LIMIT ?3"
);

/// The newest page of one payment's refunds (`payment_id = ?2`): `?1` the
/// shop, `?3` the limit.
pub(super) const PAYMENT_REFUNDS_NEWEST: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds INDEXED BY refunds_by_payment WHERE payment_id = ?2 AND shop_id = ?1 \
     ORDER BY created_at DESC, id DESC LIMIT ?3"
);

/// The page after a cursor of one payment's refunds: `?1` to `?3` as in
/// [`PAYMENT_REFUNDS_NEWEST`], `?4`, `?5` the cursor's `created_at` and id.
pub(super) const PAYMENT_REFUNDS_AFTER: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds INDEXED BY refunds_by_payment WHERE payment_id = ?2 AND shop_id = ?1 \
       AND (created_at, id) < (?4, ?5) ORDER BY created_at DESC, id DESC LIMIT ?3"
);

/// The page before a cursor of one payment's refunds, read oldest first:
/// `?1` to `?5` as in [`PAYMENT_REFUNDS_AFTER`].
pub(super) const PAYMENT_REFUNDS_BEFORE: &str = concat!(
    "SELECT ",
    refund_columns!(),
    " FROM refunds INDEXED BY refunds_by_payment WHERE payment_id = ?2 AND shop_id = ?1 \
       AND (created_at, id) > (?4, ?5) ORDER BY created_at, id LIMIT ?3"
);

/// Where a refund list's cursor lies: the `(created_at, id)` of the shop's
/// refund `id` (of the payment, when given); [`StoreError::UnknownCursor`]
/// when there is none.
fn refund_cursor(
    conn: &Connection,
    shop_id: &ShopId,
    payment_id: Option<&PaymentId>,
    id: &RefundId,
) -> Result<(i64, String)> {
    let at: Option<i64> = conn
        .prepare_cached(
            "SELECT created_at FROM refunds WHERE shop_id = ?1 AND id = ?2 \
             AND (?3 IS NULL OR payment_id = ?3)",
        )?
        .query_row(
            params![
                shop_id.as_str(),
                id.as_str(),
                payment_id.map(PaymentId::as_str)
            ],
            |row| row.get(0),
        )
        .optional()?;
    match at {
        Some(at) => Ok((at, id.as_str().to_owned())),
        None => Err(StoreError::UnknownCursor(id.to_string()).into()),
    }
}

/// Reserves `refund`'s amount on its payment and inserts the refund row, or
/// says why the payment cannot give it. The writer is the only one: no
/// other refund moves the reservation between its read and its update.
fn reserve_refund(
    conn: &Connection,
    refund: &NewRefund,
) -> Result<std::result::Result<(Payment, Refund), RefundRefusal>> {
    let found = conn
        .prepare_cached(concat!(
            "SELECT ",
            payment_columns!(),
            ", refund_reserved_minor FROM payments WHERE shop_id = ?1 AND id = ?2"
        ))?
        .query_row(
            params![refund.shop_id.as_str(), refund.payment_id.as_str()],
            |row| {
                let reserved: i64 = row.get("refund_reserved_minor")?;
                Ok((PaymentRow::from_sqlite(row)?, reserved))
            },
        )
        .optional()?;
    let decided = match found {
        None => Err(RefundRefusal::PaymentNotFound),
        Some((row, reserved)) => {
            let payment = Payment::try_from(row)?;
            reservation(&payment, reserved, refund.amount).map(|amount| (payment, amount))
        }
    };
    let (payment, amount) = match decided {
        Ok(found) => found,
        Err(refused) => return Ok(Err(refused)),
    };
    let reserved = conn
        .prepare_cached(concat!(
            "UPDATE payments SET refund_reserved_minor = refund_reserved_minor + ?3, \
                 updated_at = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND id = ?2 AND status = 'succeeded' \
               AND refund_reserved_minor + ?3 <= CASE WHEN capture_method = 'manual' \
                   THEN captured_minor ELSE amount_minor END"
        ))?
        .execute(params![
            refund.shop_id.as_str(),
            refund.payment_id.as_str(),
            amount.minor_units(),
        ])?;
    if reserved != 1 {
        return Err(Fail(StoreError::other(format!(
            "refund reservation on payment {} failed after its check",
            refund.payment_id
        ))));
    }
    let created = new_refund_row(refund, amount);
    conn.prepare_cached(concat!(
        "INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, \
             currency, status, acquirer_key, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8, ",
        now_ms!(),
        ")"
    ))?
    .execute(params![
        created.id.as_str(),
        created.shop_id.as_str(),
        created.payment_id.as_str(),
        created.idempotency_key.as_str(),
        created.amount.minor_units(),
        created.amount.currency().code(),
        created.acquirer_key.as_str(),
        unix_ms(created.created_at),
    ])?;
    Ok(Ok((payment, created)))
}

#[async_trait]
impl Refunds for SqliteStore {
    /// Phase 1 of a refund, one write.
    #[tracing::instrument(level = "debug", name = "store.claim_refund", skip_all, fields(db.system = "sqlite"))]
    async fn claim_refund(
        &self,
        claim: &ClaimRequest,
        refund: &NewRefund,
        timing: KeyTiming,
    ) -> Result<RefundClaim, StoreError> {
        let (claim, refund) = (claim.clone(), refund.clone());
        let holder = self.instance.clone();
        self.write_new(move |conn| {
            let token = LeaseToken::generate();
            let target = KeyTarget {
                recovery_point: RecoveryPoint::RefundCreated,
                payment_id: &refund.payment_id,
                refund_id: Some(&refund.id),
                capture_id: None,
                holder: &holder,
            };
            if !insert_key(conn, &claim, target, token, timing)? {
                let record = count_repeat(conn, &claim.shop_id, &claim.key, &claim.fingerprint)?
                    .ok_or_else(|| {
                        StoreError::other(format!(
                            "key {} conflicted but cannot be read",
                            claim.key
                        ))
                    })?;
                return Ok(Write::Commit(RefundClaim::Exists(record)));
            }
            let (payment, created) = match reserve_refund(conn, &refund)? {
                Ok(reserved) => reserved,
                Err(refused) => return Ok(Write::Rollback(RefundClaim::Refused(refused))),
            };
            record(
                conn,
                created.payment_id.as_str(),
                Some(created.id.as_str()),
                &HistoryEvent::RefundReserved {
                    key: claim.key.as_str().to_owned(),
                    amount_minor: created.amount.minor_units(),
                    currency: created.amount.currency().code().to_owned(),
                    instance: holder.to_string(),
                },
            )?;
            Ok(Write::Commit(RefundClaim::Acquired(acquired(
                &claim,
                token,
                RecoveryPoint::RefundCreated,
                payment,
                Some(created),
            ))))
        })
        .await
    }

    /// Phase 3 of a refund, one write, fenced by the lease token.
    #[tracing::instrument(level = "debug", name = "store.finish_refund", skip_all, fields(db.system = "sqlite"))]
    async fn finish_refund(
        &self,
        lease: &Lease,
        answer: Option<RefundAnswer<'_>>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        let lease = lease.clone();
        // The refund is read back after its settle for its event: one
        // writer, no round trips, so nothing is gained by building it first.
        let settlement = answer.map(|a| (a.id().clone(), a.settlement.clone()));
        let response = response.clone();
        let attempts = attempts.to_vec();
        let instance = self.instance.clone();
        self.write(move |conn| {
            if !store_answer(conn, &lease, &response, ttl, &attempts, &instance)? {
                return Ok(Write::Rollback(FinishOutcome::LeaseLost));
            }
            let Some((refund_id, settlement)) = settlement else {
                return Ok(Write::Commit(FinishOutcome::Stored));
            };
            let (status, provider_refund_id, failure_code) = refund_settlement_columns(&settlement);
            let settled = conn
                .prepare_cached(concat!(
                    "UPDATE refunds SET status = ?3, provider_refund_id = ?4, failure_code = ?5, \
                         updated_at = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2 AND status = 'pending'"
                ))?
                .execute(params![
                    lease.shop_id.as_str(),
                    refund_id.as_str(),
                    status.as_str(),
                    provider_refund_id,
                    failure_code,
                ])?;
            if settled == 0 {
                return Ok(Write::Rollback(FinishOutcome::PaymentAlreadySettled));
            }
            let refund = refund_in(conn, &lease.shop_id, &refund_id)?.ok_or_else(|| {
                StoreError::other(format!("refund {refund_id} vanished while settled"))
            })?;
            let update = match status {
                RefundStatus::Succeeded => concat!(
                    "UPDATE payments SET refunded_minor = refunded_minor + ?3, updated_at = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2"
                ),
                _ => concat!(
                    "UPDATE payments SET refund_reserved_minor = refund_reserved_minor - ?3, \
                         updated_at = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2"
                ),
            };
            conn.prepare_cached(update)?.execute(params![
                lease.shop_id.as_str(),
                refund.payment_id.as_str(),
                refund.amount.minor_units(),
            ])?;
            let reference: String = conn
                .prepare_cached("SELECT reference FROM payments WHERE shop_id = ?1 AND id = ?2")?
                .query_row(
                    params![lease.shop_id.as_str(), refund.payment_id.as_str()],
                    |row| row.get("reference"),
                )?;
            record(
                conn,
                refund.payment_id.as_str(),
                Some(refund.id.as_str()),
                &HistoryEvent::RefundEnded { status },
            )?;
            insert_event(conn, NewEvent::refund_settled(&refund, &reference))?;
            Ok(Write::Commit(FinishOutcome::Stored))
        })
        .await
    }

    /// One refund of one shop.
    #[tracing::instrument(level = "debug", name = "store.refund", skip_all, fields(db.system = "sqlite"))]
    async fn refund(&self, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| refund_in(conn, &shop_id, &id)).await
    }

    /// One page of a shop's refunds (of one payment), newest first by
    /// `(created_at, id)`.
    #[tracing::instrument(level = "debug", name = "store.list_refunds", skip_all, fields(db.system = "sqlite"))]
    async fn list_refunds(
        &self,
        shop_id: &ShopId,
        payment_id: Option<&PaymentId>,
        page: &PageRequest<RefundId>,
    ) -> Result<Page<Refund>, StoreError> {
        let (shop_id, payment_id, page) = (shop_id.clone(), payment_id.cloned(), page.clone());
        self.read(move |conn| {
            let payment_id = payment_id.as_ref();
            let sql = match (payment_id, &page.cursor) {
                (None, Cursor::Newest) => REFUNDS_NEWEST,
                (None, Cursor::After(_)) => REFUNDS_AFTER,
                (None, Cursor::Before(_)) => REFUNDS_BEFORE,
                (Some(_), Cursor::Newest) => PAYMENT_REFUNDS_NEWEST,
                (Some(_), Cursor::After(_)) => PAYMENT_REFUNDS_AFTER,
                (Some(_), Cursor::Before(_)) => PAYMENT_REFUNDS_BEFORE,
            };
            let cursor = match &page.cursor {
                Cursor::Newest => None,
                Cursor::After(id) | Cursor::Before(id) => {
                    Some(refund_cursor(conn, &shop_id, payment_id, id)?)
                }
            };
            let payment = payment_id.map(PaymentId::as_str);
            let limit = i64::from(page.limit.get()) + 1;
            let shop = shop_id.as_str();
            let mut values: Vec<&dyn ToSql> = vec![&shop as &dyn ToSql, &payment, &limit];
            if let Some((at, id)) = &cursor {
                values.extend([at as &dyn ToSql, id]);
            }
            let rows: Vec<Refund> = all::<RefundRow, _>(conn, sql, params_from_iter(values))?;
            Ok(Page::from_probe(rows, &page))
        })
        .await
    }
}
