//! Refunds: phase 1 (the claim of the key with the reservation of the
//! refund's amount on its payment), phase 3 (the fenced answer with the
//! refund's settlement and merchant event), and reading a refund, or a
//! shop's refunds a page at a time.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::events::NewEvent;
use chargeonce_core::history::{AcquirerAttempt, HistoryEvent, answered_events};
use chargeonce_core::refund::reservation;
use chargeonce_core::store::Refunds;
use chargeonce_core::{
    ClaimRequest, Cursor, FinishOutcome, KeyTiming, Lease, LeaseToken, NewRefund, Page,
    PageRequest, PaymentId, RecoveryPoint, Refund, RefundAnswer, RefundClaim, RefundId,
    RefundRefusal, RefundStatus, ShopId, StoreError, StoredResponse,
};
use sqlx::{Postgres, Transaction};
use time::OffsetDateTime;

use super::finish::run_settle;
use super::finish_parts::{
    RowFinish, answer_only, answer_stored, bind_answer, deliveries, held_key,
};
use super::history::{Entries, insert_entries};
use super::keys::{KeyClaim, KeyTarget, LockedPayment, insert_key_locking_payment};
use super::{CLAIM_ATTEMPTS, PgStore, store_error};
use crate::codec::{acquired, new_refund_row, refund_settlement_columns};
use crate::columns::refund_columns;
use crate::rows::RefundRow;
use crate::stored_body;

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
/// claim) and inserts the refund, in one statement: the refund is written
/// only when the reservation was. Its payment's `refund_reserved` entry is
/// kept on the refund's row (migration 0029: the claiming instance and the
/// seq its history row would have had; the key, amount and currency are the
/// row's own). Whether it was.
async fn reserve_refund(
    tx: &mut Transaction<'static, Postgres>,
    created: &Refund,
    instance: &str,
) -> Result<bool, StoreError> {
    let written: i64 = sqlx::query_scalar(
        "WITH reserved AS ( \
             UPDATE payments SET refund_reserved_minor = refund_reserved_minor + $5, \
                 updated_at = now() \
             WHERE shop_id = $2 AND id = $3 AND status = 'succeeded' \
               AND refund_reserved_minor + $5 <= CASE WHEN capture_method = 'manual' \
                   THEN captured_minor ELSE amount_minor END \
             RETURNING id), \
         r AS ( \
             INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, \
                 currency, status, acquirer_key, created_at, claimed_by, reserve_seq) \
             SELECT $1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9, \
                 nextval('payment_history_seq_seq') FROM reserved \
             RETURNING 1) \
         SELECT count(*) FROM r",
    )
    .bind(created.id.as_str())
    .bind(created.shop_id.as_str())
    .bind(created.payment_id.as_str())
    .bind(created.idempotency_key.as_str())
    .bind(created.amount.minor_units())
    .bind(created.amount.currency().code())
    .bind(created.acquirer_key.as_str())
    .bind(created.created_at)
    .bind(instance)
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(written == 1)
}

/// A refund's finish with its definite answer, in one autocommitted
/// statement (one round trip, one snapshot), as a payment's settling
/// statement is (`finish.rs`, whose reasoning this follows); `$set` is what
/// it does to the payment's amounts, `$kept` and `$guard` what the usual
/// finish adds to the refund's update (its entries kept on the row, only on
/// the row of the refund this instance claimed), `$history` the part that
/// writes the entries otherwise.
///
/// - `held` locks the key row if this lease still holds it.
/// - `r` moves the refund from pending to its answer, only if `held` found
///   the lease; `p` counts its amount on the payment (refunded, or its
///   reservation given back).
/// - `f` stores the response, only if the refund moved; the history
///   entries (the acquirer calls, the answer and the refund's end) are
///   kept on the refund's row by `r` (migration 0029) or written in one
///   history row by `h`; `event` writes the refund's merchant event and
///   `deliveries` one delivery per enabled endpoint of the shop that wants it.
///
/// So all of them write or none does: `held` false, the lease was taken
/// over; held but not settled, the refund was settled before (by an
/// earlier holder of the key whose finish was cut: nobody else settles a
/// refund), or, in the usual finish's form, its row says another instance
/// claimed it. The division aborts the statement, and so writes nothing,
/// were the parts ever to disagree. Locks are taken key row first, then
/// the refund's, then the payment's, as the transaction of three
/// statements this replaced took them.
///
/// The refund, and then its payment, are found by their ids alone (the
/// payment's as a value, through a scalar subquery), their shop checked
/// with `IS NOT DISTINCT FROM` (`=` on a NOT NULL column), as
/// `lock_payment` finds a payment: with `shop_id = $1` the planner, on a
/// table it has few statistics of, picked `refunds_acquirer_key_key`, which
/// leads with `shop_id`, and would read the shop's every refund; and a join
/// to the refund's row may be planned as a scan of every payment (see
/// `finish_key`). The key's payment is a refund's, never pending, so unlike
/// `finish_key` this enqueues nothing.
///
/// Parameters: `$1` to `$7` the key and its answer (`answer_stored!`), `$8`
/// the refund, `$9` to `$11` its settlement's columns, `$12` to `$14` its
/// event; from `$15` on, the form's own.
macro_rules! settle_refund_statement {
    ($set:literal, $kept:literal, $guard:literal, $history:expr) => {
        concat!(
            "WITH ",
            held_key!(),
            ", r AS ( \
                 UPDATE refunds SET status = $9, provider_refund_id = $10, failure_code = $11, \
                     updated_at = now()",
            $kept,
            " WHERE id = $8 AND shop_id IS NOT DISTINCT FROM $1 AND status = 'pending' \
                   AND EXISTS (SELECT 1 FROM held)",
            $guard,
            " RETURNING payment_id, id AS refund_id, shop_id, amount_minor), \
             p AS ( \
                 UPDATE payments p SET ",
            $set,
            ", updated_at = now() \
                 WHERE p.id = (SELECT payment_id FROM r) AND p.shop_id IS NOT DISTINCT FROM $1 \
                 RETURNING 1), \
             f AS (",
            answer_stored!("$1", "$2", "$3", "$4", "$5", "$6", "$7"),
            " AND EXISTS (SELECT 1 FROM r) \
                 RETURNING payment_id, refund_id, shop_id), ",
            $history,
            " event AS ( \
                 INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload) \
                 SELECT $12, r.shop_id, $13, r.payment_id, r.refund_id, $14 FROM r \
                 RETURNING seq, payment_id), ",
            deliveries!("$1", "$13"),
            " SELECT held, settled, \
                 1 / CASE WHEN settled = paid AND settled = finished AND settled = event \
                     THEN 1 ELSE 0 END AS whole \
             FROM (SELECT EXISTS (SELECT 1 FROM held) AS held, \
                          EXISTS (SELECT 1 FROM r) AS settled, \
                          EXISTS (SELECT 1 FROM p) AS paid, \
                          EXISTS (SELECT 1 FROM f) AS finished, \
                          EXISTS (SELECT 1 FROM event) AS event) parts"
        )
    };
}

/// The two forms of [`settle_refund_statement!`] for one change of the
/// payment's amounts (`$set`): the usual finish, its entries kept on the
/// refund's row that this instance (`$16`) claimed (`$15`, `$17`, `$18`:
/// the call's outcome and latency, the answer's status), and any other,
/// its entries in a history row (`$15`, `$16`: their kinds and events).
macro_rules! settle_refund_forms {
    ($set:literal) => {
        (
            settle_refund_statement!(
                $set,
                ", (finish_seq, finish_at, finish_outcome, finish_latency_ms, finish_answer) = \
                     (nextval('payment_history_seq_seq'), now(), $15::text, $17::bigint, \
                      $18::smallint)",
                " AND claimed_by = $16",
                ""
            ),
            settle_refund_statement!(
                $set,
                "",
                "",
                concat!("h AS (", insert_entries!("f", "$15", "$16"), "),")
            ),
        )
    };
}

/// Finishes a refund key with its refund's definite answer
/// (`settle_refund_statement!`): whether the lease held, and whether the
/// refund was still pending (and so everything was written). The usual
/// finish is kept on the refund's row; where that row says another
/// instance claimed the refund (a take-over), the statement writes nothing
/// and the form with a history row runs (it checks the lease again).
async fn settle_refund(
    store: &PgStore,
    lease: &Lease,
    answer: &RefundAnswer<'_>,
    response: &StoredResponse,
    ttl: Duration,
    attempts: &[AcquirerAttempt],
) -> Result<(bool, bool), StoreError> {
    let (status, provider_refund_id, failure_code) = refund_settlement_columns(answer.settlement);
    // The refund's id and amount and its payment's order never change, so
    // its event can be built before the statement that settles it.
    let event = NewEvent::refund_settled(&answer.settled(), answer.reference).ok_or_else(|| {
        StoreError::other(format!(
            "finish of key {} with a refund answer that is not final",
            lease.key
        ))
    })?;
    let mut events = answered_events(lease, response, attempts, &store.instance);
    events.push(HistoryEvent::RefundEnded { status });
    // Only the column that moves is named: a SET of `refund_reserved_minor`
    // would also fire the hold's trigger (0015), for nothing on a success.
    let (kept_sql, entries_sql) = match status {
        RefundStatus::Succeeded => {
            settle_refund_forms!("refunded_minor = p.refunded_minor + (SELECT amount_minor FROM r)")
        }
        _ => settle_refund_forms!(
            "refund_reserved_minor = p.refund_reserved_minor - (SELECT amount_minor FROM r)"
        ),
    };
    let statement = |sql| -> Result<_, StoreError> {
        let statement = sqlx::query(sql)
            .bind(lease.shop_id.as_str())
            .bind(lease.key.as_str())
            .bind(lease.token.as_uuid());
        Ok(bind_answer(statement, response, ttl)?
            .bind(answer.id().as_str())
            .bind(status.as_str())
            .bind(provider_refund_id.clone())
            .bind(failure_code.clone())
            .bind(event.id.as_str())
            .bind(event.event_type.as_str())
            .bind(stored_body::compressed(&event.payload).into_owned()))
    };
    let kept = RowFinish::of_turn(
        answer.refund.acquirer_key.as_str(),
        lease,
        &store.instance,
        &events,
    );
    if let Some(kept) = kept {
        let (held, settled) = run_settle(
            store,
            lease,
            statement(kept_sql)?
                .bind(kept.outcome)
                .bind(&*store.instance)
                .bind(kept.latency_ms)
                .bind(kept.answer_status),
        )
        .await?;
        if !held || settled {
            return Ok((held, settled));
        }
    }
    let entries = Entries::of(events);
    run_settle(
        store,
        lease,
        statement(entries_sql)?
            .bind(entries.kinds)
            .bind(entries.events),
    )
    .await
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
            if !reserve_refund(&mut tx, &created, &self.instance).await? {
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

    /// Phase 3 of a refund, one statement fenced by the lease token, with
    /// its history entries (the acquirer calls, the answer, the refund's end).
    #[tracing::instrument(level = "debug", name = "store.finish_refund", skip_all, fields(db.system = "postgresql"))]
    async fn finish_refund(
        &self,
        lease: &Lease,
        answer: Option<RefundAnswer<'_>>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        let Some(answer) = answer else {
            let entries = Entries::answered(lease, response, attempts, &self.instance);
            return answer_only(self, lease, response, ttl, &entries).await;
        };
        let (held, settled) = settle_refund(self, lease, &answer, response, ttl, attempts).await?;
        Ok(match (held, settled) {
            (false, _) => FinishOutcome::LeaseLost,
            (true, false) => FinishOutcome::PaymentAlreadySettled,
            (true, true) => FinishOutcome::Stored,
        })
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
