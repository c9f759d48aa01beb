//! Authorizations: phase 1 (the claim of the key with the reservation of the
//! capture on its payment's hold), phase 3 (the fenced answer with the
//! hold's settlement and the capture's merchant event), and reading a
//! capture, or a payment's captures a page at a time.
//!
//! Every move of a hold locks its payment's row first (after the key row,
//! the order every transaction that takes both keeps), judges the move with
//! the hold's own rules (`chargeonce_core::authorization`), and writes the
//! hold back; the hold's rule (a CHECK until migration 0015, now triggers
//! that a payment charged at once never fires) keeps captured plus reserved
//! within the authorized amount whatever a statement does.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::authorization::{Authorization, Hold, ReleaseReason};
use chargeonce_core::capture::{release, reservation};
use chargeonce_core::events::NewEvent;
use chargeonce_core::history::{AcquirerAttempt, HistoryEvent, answered_events};
use chargeonce_core::store::{Authorizations, CaptureClaim, ReleaseClaim};
use chargeonce_core::{
    Capture, CaptureClaimRefusal, CaptureId, CaptureSettlement, CaptureStatus, ClaimRequest,
    Cursor, FinishOutcome, KeyTiming, Lease, LeaseToken, NewCapture, Page, PageRequest, Payment,
    PaymentCapture, PaymentId, RecoveryPoint, ReleaseClaimRefusal, ShopId, StoreError,
    StoredResponse, VoidSettlement,
};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{FromRow, Postgres, Row, Transaction};
use time::OffsetDateTime;

use super::finish_parts::{
    RowFinish, answer_only, answer_stored, bind_answer, deliveries, held_key,
};
use super::history::{Entries, insert_entries, record};
use super::keys::{KeyClaim, KeyTarget, insert_key_locking_payment};
use super::outbox::insert_event;
use super::{CLAIM_ATTEMPTS, PgStore, store_error};
use crate::codec::{acquired, capture_settlement_columns};
use crate::columns::{capture_columns, payment_columns};
use crate::rows::{CaptureRow, PaymentRow};
use crate::stored_body;

/// The newest page of one payment's captures (a range of
/// `captures_by_payment`): `$1` the shop, `$2` the payment, `$3` the limit.
const CAPTURES_NEWEST: &str = concat!(
    "SELECT ",
    capture_columns!(),
    " FROM captures WHERE shop_id = $1 AND payment_id = $2 \
     ORDER BY created_at DESC, id DESC LIMIT $3"
);

/// The page after a cursor of one payment's captures: `$1` to `$3` as in
/// [`CAPTURES_NEWEST`], `$4`, `$5` the cursor's `created_at` and id.
const CAPTURES_AFTER: &str = concat!(
    "SELECT ",
    capture_columns!(),
    " FROM captures WHERE shop_id = $1 AND payment_id = $2 \
       AND (created_at, id) < ($4, $5) ORDER BY created_at DESC, id DESC LIMIT $3"
);

/// The page before a cursor of one payment's captures, read oldest first:
/// `$1` to `$5` as in [`CAPTURES_AFTER`].
const CAPTURES_BEFORE: &str = concat!(
    "SELECT ",
    capture_columns!(),
    " FROM captures WHERE shop_id = $1 AND payment_id = $2 \
       AND (created_at, id) > ($4, $5) ORDER BY created_at, id LIMIT $3"
);

/// The payment `payment_id` of the shop, its row locked until the
/// transaction ends: every move of its hold waits here for the others.
///
/// Found by its primary key alone, its shop checked with `IS NOT DISTINCT
/// FROM` (the same as `=` on a NOT NULL column), as the finish does
/// (`finish.rs`): with `shop_id = $1` the planner, on tables it has no
/// statistics of, picks the live-order index that leads with `shop_id`
/// and reads the shop's every row (pgbench of bench/authorize_capture.sql
/// read 25 M index tuples in its first ten seconds so).
async fn lock_payment(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    payment_id: &PaymentId,
) -> Result<Option<Payment>, StoreError> {
    let row = sqlx::query_as::<_, PaymentRow>(concat!(
        "SELECT ",
        payment_columns!(),
        " FROM payments WHERE id = $2 AND shop_id IS NOT DISTINCT FROM $1 FOR UPDATE"
    ))
    .bind(shop_id.as_str())
    .bind(payment_id.as_str())
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    row.map(Payment::try_from).transpose()
}

/// The update that writes a hold back to its payment's row: `$1` the shop,
/// `$2` the payment, `$3` the hold, `$4` captured, `$5` reserved for the
/// captures in flight, `$6` how many are in flight.
macro_rules! hold_update {
    () => {
        "UPDATE payments SET hold = $3, captured_minor = $4, capture_reserved_minor = $5, \
             captures_in_flight = $6, updated_at = now(), \
             live_reference = payment_live_reference(status, $3, $4, reference) \
         WHERE id = $2 AND (shop_id, capture_method) IS NOT DISTINCT FROM ($1, 'manual')"
    };
}

/// Binds [`hold_update`]'s six parameters.
fn bind_hold<'q>(
    query: sqlx::query::Query<'q, Postgres, PgArguments>,
    shop_id: &'q ShopId,
    payment_id: &'q PaymentId,
    hold: &'q Authorization,
) -> Result<sqlx::query::Query<'q, Postgres, PgArguments>, StoreError> {
    Ok(query
        .bind(shop_id.as_str())
        .bind(payment_id.as_str())
        .bind(hold.hold().as_str())
        .bind(hold.captured_minor())
        .bind(hold.in_flight_minor())
        .bind(i32::try_from(hold.in_flight()).map_err(StoreError::corrupt_by)?))
}

/// Runs a statement that writes a hold (locked and judged) with what goes
/// with it, and that answers how many rows its hold update wrote: an error
/// unless one.
async fn write_with_hold(
    tx: &mut Transaction<'static, Postgres>,
    query: sqlx::query::Query<'_, Postgres, PgArguments>,
    payment_id: &PaymentId,
) -> Result<(), StoreError> {
    let row = query.fetch_one(&mut **tx).await.map_err(store_error)?;
    let written: i64 = row.try_get(0).map_err(store_error)?;
    if written != 1 {
        return Err(StoreError::other(format!(
            "the hold of payment {payment_id} could not be written"
        )));
    }
    Ok(())
}

/// Writes `hold` back to its payment's row (locked by [`lock_payment`]) and
/// `entries` to the payment's history, in one statement.
async fn write_hold(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    hold: &Authorization,
    entries: &Entries,
) -> Result<(), StoreError> {
    let query = sqlx::query(concat!(
        "WITH held AS (",
        hold_update!(),
        " RETURNING id, shop_id), \
         h AS (",
        insert_entries!(
            "(SELECT id AS payment_id, NULL::text AS refund_id, shop_id FROM held)",
            "$7",
            "$8"
        ),
        ") SELECT count(*) FROM held"
    ));
    let query = bind_hold(query, shop_id, payment_id, hold)?
        .bind(&entries.kinds)
        .bind(&entries.events);
    write_with_hold(tx, query, payment_id).await
}

/// Reserves `capture` on its payment's hold (`locked`: the payment as the
/// claim locked it, `None` when the shop has no such payment) and inserts
/// the capture row, or says why the hold cannot give it. The writes are one
/// statement: the capture is inserted only when the hold was written. The
/// payment's `capture_reserved` entry is kept on the capture's row
/// (migration 0030: the claiming `instance` and the seq its history row
/// would have had; the key, amount, currency and finality are the row's
/// own).
async fn reserve_capture(
    tx: &mut Transaction<'static, Postgres>,
    locked: Option<Payment>,
    capture: &NewCapture,
    instance: &str,
) -> Result<Result<(Payment, Capture), CaptureClaimRefusal>, StoreError> {
    let Some(payment) = locked else {
        return Ok(Err(CaptureClaimRefusal::PaymentNotFound));
    };
    let (hold, reserved, amount) = match reservation(&payment, capture) {
        Ok(reserved) => reserved,
        Err(refused) => return Ok(Err(refused)),
    };
    let created = capture.to_capture(amount, reserved.is_last());
    let query = sqlx::query(concat!(
        "WITH held AS (",
        hold_update!(),
        " RETURNING id), \
         c AS ( \
             INSERT INTO captures (shop_id, id, payment_id, idempotency_key, amount_minor, \
                 currency, is_final, status, acquirer_key, created_at, claimed_by, \
                 reserve_seq) \
             SELECT $1, $7, $2, $8, $9, $10, $11, 'pending', $12, $13, $14, \
                 nextval('payment_history_seq_seq') FROM held \
             RETURNING 1) \
         SELECT count(*) FROM c"
    ));
    let query = bind_hold(query, &capture.shop_id, &capture.payment_id, &hold)?
        .bind(created.id.as_str())
        .bind(created.idempotency_key.as_str())
        .bind(created.amount.minor_units())
        .bind(created.amount.currency().code())
        .bind(created.last)
        .bind(created.acquirer_key.as_str())
        .bind(created.created_at)
        .bind(instance);
    write_with_hold(tx, query, &capture.payment_id).await?;
    Ok(Ok((payment.with_hold(hold), created)))
}

/// The end of the first statement of a capture's or a void's finish:
/// `locked` locks the payment `$payment` (an SQL expression) names and
/// reads it, for the hold's move (every move of a hold waits on that lock:
/// [`lock_payment`], whose look-up by primary key this keeps); the row says
/// whether the lease held, the statement's own columns (`$also`, each
/// followed by a comma), whether the move could go on (`moved`), and the
/// payment's columns (null when it could not).
macro_rules! locked_payment {
    ($payment:literal, $moved:literal, $also:literal) => {
        concat!(
            "locked AS ( \
                 SELECT ",
            payment_columns!(),
            " FROM payments \
                 WHERE id = ",
            $payment,
            " AND shop_id IS NOT DISTINCT FROM $1 \
                 FOR UPDATE) \
             SELECT EXISTS (SELECT 1 FROM held) AS held, ",
            $also,
            $moved,
            " AS moved, locked.* \
             FROM (SELECT 1) one LEFT JOIN locked ON true"
        )
    };
}

/// The first statement of a capture's finish with its definite answer:
/// the key row locked (`held_key!`); `c` moves the capture from pending to
/// its answer (`$5` to `$7`), only if the lease held, and keeps its usual
/// finish on its row (`$9` to `$11`: the call's outcome and latency, the
/// answer's status; migration 0030) if the row says this instance (`$8`,
/// null when the finish is not the usual one) claimed it, which `kept`
/// tells; its payment locked and read (`locked_payment!`). Locks are taken
/// key row first, then the capture's, then the payment's, as the
/// statements this replaced took them.
const SETTLE_CAPTURE: &str = concat!(
    "WITH ",
    held_key!(),
    ", c AS ( \
         UPDATE captures SET status = $5, provider_capture_id = $6, failure_code = $7, \
             updated_at = now(), \
             (finish_seq, finish_at, finish_outcome, finish_latency_ms, finish_answer) = \
                 (SELECT nextval('payment_history_seq_seq'), now(), $9::text, $10::bigint, \
                      $11::smallint \
                  WHERE claimed_by = $8::text) \
         WHERE shop_id = $1 AND id = $4 AND status = 'pending' \
           AND EXISTS (SELECT 1 FROM held) \
         RETURNING payment_id, finish_seq IS NOT NULL AS kept), ",
    locked_payment!(
        "(SELECT payment_id FROM c)",
        "EXISTS (SELECT 1 FROM c)",
        "coalesce((SELECT kept FROM c), false) AS kept, "
    )
);

/// The first statement of a void's finish with its answer: the key row
/// locked (`held_key!`), then the payment `$4`, if the lease held
/// (`locked_payment!`); whether its hold is releasing is judged by the core.
const LOCK_FOR_VOID: &str = concat!(
    "WITH ",
    held_key!(),
    ", ",
    locked_payment!(
        "$4 AND EXISTS (SELECT 1 FROM held)",
        "EXISTS (SELECT 1 FROM locked)",
        ""
    )
);

/// The second statement of a capture's or a void's finish: writes the
/// payment's hold (`hold_update!`, `$1` to `$6`), stores the key's answer
/// (`$7` to `$12`; the key row is locked by the first statement), the
/// merchant event (`$13` to `$16`; none when `$13` is null) and one
/// delivery per enabled endpoint of the shop that wants it, and `$history`
/// (the form with the history entries in one row: the acquirer calls, the
/// answer and the move's end, `$17` and `$18`). How many rows the hold
/// update, the key's and the event's wrote.
macro_rules! finish_hold_move {
    ($history:expr) => {
        concat!(
            "WITH hold AS (",
            hold_update!(),
            " RETURNING id, shop_id), \
             f AS (",
            answer_stored!("$1", "$7", "$8", "$9", "$10", "$11", "$12"),
            " RETURNING payment_id, refund_id, shop_id), ",
            $history,
            " event AS ( \
                 INSERT INTO events (id, shop_id, event_type, payment_id, capture_id, payload) \
                 SELECT $13, hold.shop_id, $14, hold.id, $15, $16 FROM hold \
                 WHERE $13::text IS NOT NULL \
                 RETURNING seq, payment_id), ",
            deliveries!("$1", "$14"),
            " SELECT (SELECT count(*) FROM hold) AS hold, (SELECT count(*) FROM f) AS finished, \
                 (SELECT count(*) FROM event) AS event"
        )
    };
}

/// [`finish_hold_move!`] with its entries in a history row.
const FINISH_HOLD_MOVE: &str =
    finish_hold_move!(concat!("h AS (", insert_entries!("f", "$17", "$18"), "),"));

/// [`finish_hold_move!`] for a capture's usual finish, its entries kept on
/// the capture's row by the first statement.
const FINISH_HOLD_MOVE_KEPT: &str = finish_hold_move!("");

/// What the first statement of a capture's or a void's finish found.
enum HoldMove {
    /// The lease was taken over: nothing was written.
    LeaseLost,
    /// The capture was no longer pending, or the void's payment not found:
    /// nothing was written.
    Gone,
    /// The move goes on; its payment, locked.
    Locked(Box<Payment>),
}

impl HoldMove {
    /// Reads the row of [`SETTLE_CAPTURE`] or [`LOCK_FOR_VOID`].
    fn of(row: &PgRow, what: &dyn std::fmt::Display) -> Result<Self, StoreError> {
        if !row.try_get::<bool, _>("held").map_err(store_error)? {
            return Ok(Self::LeaseLost);
        }
        if !row.try_get::<bool, _>("moved").map_err(store_error)? {
            return Ok(Self::Gone);
        }
        // A capture's payment is never deleted; were it missing, its
        // columns would be null.
        if row
            .try_get::<Option<String>, _>("id")
            .map_err(store_error)?
            .is_none()
        {
            return Err(StoreError::corrupt(format!("{what} has no payment")));
        }
        let payment = Payment::try_from(PaymentRow::from_row(row).map_err(store_error)?)?;
        Ok(Self::Locked(Box::new(payment)))
    }
}

/// Runs [`SETTLE_CAPTURE`] for `capture`'s answer `settlement` in `tx`,
/// keeping its finish on the capture's row as `kept` if this `instance`
/// claimed it: what it found, and whether it kept the finish.
async fn settle_capture(
    tx: &mut Transaction<'static, Postgres>,
    lease: &Lease,
    capture: &Capture,
    settlement: &CaptureSettlement,
    kept: Option<(&str, RowFinish)>,
) -> Result<(HoldMove, bool), StoreError> {
    let (status, provider_capture_id, failure_code) = capture_settlement_columns(settlement);
    let (instance, kept) = kept.unzip();
    let row = sqlx::query(SETTLE_CAPTURE)
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .bind(capture.id.as_str())
        .bind(status.as_str())
        .bind(provider_capture_id)
        .bind(failure_code)
        .bind(instance)
        .bind(kept.as_ref().map(|k| k.outcome))
        .bind(kept.as_ref().map(|k| k.latency_ms))
        .bind(kept.as_ref().map(|k| k.answer_status))
        .fetch_one(&mut **tx)
        .await
        .map_err(store_error)?;
    let kept: bool = row.try_get("kept").map_err(store_error)?;
    Ok((
        HoldMove::of(&row, &format_args!("capture {}", capture.id))?,
        kept,
    ))
}

/// Runs [`LOCK_FOR_VOID`] for the void of `payment_id` in `tx`.
async fn lock_for_void(
    tx: &mut Transaction<'static, Postgres>,
    lease: &Lease,
    payment_id: &PaymentId,
) -> Result<HoldMove, StoreError> {
    let row = sqlx::query(LOCK_FOR_VOID)
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .bind(payment_id.as_str())
        .fetch_one(&mut **tx)
        .await
        .map_err(store_error)?;
    HoldMove::of(&row, &format_args!("void of payment {payment_id}"))
}

/// Writes what a capture's or a void's answer does after its first
/// statement (see [`finish_hold_move!`]): the `payment`'s hold (as the
/// answer moved it), the key's answer, the `event` if any, and the
/// `entries` (none when the first statement kept them on the capture's row).
async fn write_hold_move(
    tx: &mut Transaction<'static, Postgres>,
    lease: &Lease,
    payment: &Payment,
    response: &StoredResponse,
    ttl: Duration,
    entries: Option<&Entries>,
    event: Option<&NewEvent>,
) -> Result<(), StoreError> {
    let payment_id = &payment.id;
    let PaymentCapture::Manual { hold, .. } = &payment.capture else {
        return Err(StoreError::corrupt(format!(
            "payment {payment_id} holds nothing"
        )));
    };
    let sql = match entries {
        Some(_) => FINISH_HOLD_MOVE,
        None => FINISH_HOLD_MOVE_KEPT,
    };
    let query = bind_hold(sqlx::query(sql), &lease.shop_id, payment_id, hold)?
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid());
    let mut query = bind_answer(query, response, ttl)?
        .bind(event.map(|e| e.id.as_str()))
        .bind(event.map(|e| e.event_type.as_str()))
        .bind(event.and_then(|e| e.capture_id.as_ref().map(CaptureId::as_str)))
        .bind(event.map(|e| stored_body::compressed(&e.payload).into_owned()));
    if let Some(entries) = entries {
        query = query.bind(&entries.kinds).bind(&entries.events);
    }
    let row = query.fetch_one(&mut **tx).await.map_err(store_error)?;
    let written: [i64; 3] = [
        row.try_get("hold").map_err(store_error)?,
        row.try_get("finished").map_err(store_error)?,
        row.try_get("event").map_err(store_error)?,
    ];
    if written != [1, 1, i64::from(event.is_some())] {
        // Dropping the transaction rolls it back: nothing is kept.
        return Err(StoreError::other(format!(
            "the finish of key {} wrote {written:?} (hold, answer, event) for payment {payment_id}",
            lease.key
        )));
    }
    Ok(())
}

/// The payment and its hold, when the hold is releasing for `reason`.
fn releasing(payment: Payment, reason: ReleaseReason) -> Option<(Payment, Authorization)> {
    match payment.capture {
        PaymentCapture::Manual { hold, .. } if hold.hold() == Hold::Releasing(reason) => {
            Some((payment, hold))
        }
        _ => None,
    }
}

/// Ends a release of the payment's hold (locked), when it is releasing
/// for `reason`: released, or open again. `None` when it was not.
async fn settle_release(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    reason: ReleaseReason,
    released: bool,
) -> Result<Option<Payment>, StoreError> {
    let locked = lock_payment(tx, shop_id, payment_id).await?;
    let Some((payment, hold)) = locked.and_then(|payment| releasing(payment, reason)) else {
        return Ok(None);
    };
    let hold = hold.release_settled(released);
    let ended = HistoryEvent::ReleaseEnded { reason, released };
    write_hold(tx, shop_id, payment_id, &hold, &Entries::of([ended])).await?;
    Ok(Some(payment.with_hold(hold)))
}

/// Whether the payment's authorization expired by the database's clock.
async fn expired(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    payment_id: &PaymentId,
) -> Result<bool, StoreError> {
    let expired: Option<bool> = sqlx::query_scalar(
        "SELECT authorization_expires_at <= now() FROM payments WHERE shop_id = $1 AND id = $2",
    )
    .bind(shop_id.as_str())
    .bind(payment_id.as_str())
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?
    .flatten();
    Ok(expired == Some(true))
}

/// Where a capture list's cursor lies: the `(created_at, id)` of the
/// payment's capture `id`; [`StoreError::UnknownCursor`] when there is none.
async fn capture_cursor(
    store: &PgStore,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    id: &CaptureId,
) -> Result<(OffsetDateTime, String), StoreError> {
    sqlx::query_as::<_, (OffsetDateTime, String)>(
        "SELECT created_at, id FROM captures \
         WHERE shop_id = $1 AND id = $2 AND payment_id = $3",
    )
    .bind(shop_id.as_str())
    .bind(id.as_str())
    .bind(payment_id.as_str())
    .fetch_optional(&mut *store.conn().await?)
    .await
    .map_err(store_error)?
    .ok_or_else(|| StoreError::UnknownCursor(id.to_string()))
}

#[async_trait]
impl Authorizations for PgStore {
    /// Phase 1 of a capture, one transaction.
    #[tracing::instrument(level = "debug", name = "store.claim_capture", skip_all, fields(db.system = "postgresql"))]
    async fn claim_capture(
        &self,
        claim: &ClaimRequest,
        capture: &NewCapture,
        timing: KeyTiming,
    ) -> Result<CaptureClaim, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let token = LeaseToken::generate();
            let tx = self.conns.begin().await.map_err(store_error)?;
            let target = KeyTarget {
                recovery_point: RecoveryPoint::CaptureCreated,
                payment_id: &capture.payment_id,
                refund_id: None,
                capture_id: Some(&capture.id),
                holder: &self.instance,
            };
            let (mut tx, locked) =
                match insert_key_locking_payment(self, tx, claim, target, token, timing).await? {
                    KeyClaim::Inserted(tx, locked) => (tx, locked.map(|locked| locked.payment)),
                    KeyClaim::Exists(Some(record)) => return Ok(CaptureClaim::Exists(*record)),
                    KeyClaim::Exists(None) => continue,
                };
            let reserved = reserve_capture(&mut tx, locked, capture, &self.instance).await?;
            let (payment, created) = match reserved {
                Ok(reserved) => reserved,
                Err(refused) => {
                    tx.rollback().await.map_err(store_error)?;
                    return Ok(CaptureClaim::Refused(refused));
                }
            };
            tx.commit().await.map_err(store_error)?;
            let mut acquired = acquired(claim, token, RecoveryPoint::CaptureCreated, payment, None);
            acquired.capture = Some(Box::new(created));
            return Ok(CaptureClaim::Acquired(acquired));
        }
        Err(StoreError::other(format!(
            "claim of key {} did not settle after {CLAIM_ATTEMPTS} attempts",
            claim.key
        )))
    }

    /// Phase 3 of a capture, fenced by the lease token, with its history
    /// entries (the acquirer calls, the answer, the capture's end): one
    /// statement without an answer; with one, a transaction of two (the
    /// capture settled and its payment locked; then the hold, the answer,
    /// the entries and the event), the hold's move judged between them.
    #[tracing::instrument(level = "debug", name = "store.finish_capture", skip_all, fields(db.system = "postgresql"))]
    async fn finish_capture(
        &self,
        lease: &Lease,
        settlement: Option<(&Capture, &CaptureSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        let mut events = answered_events(lease, response, attempts, &self.instance);
        let Some((capture, settlement)) = settlement else {
            return answer_only(self, lease, response, ttl, &Entries::of(events)).await;
        };
        // The capture's ids, amount and finality never change, so its
        // settled form, entries and event are built here, not read back.
        let settled = capture.clone().settled(settlement);
        events.push(HistoryEvent::CaptureEnded {
            capture_id: settled.id.as_str().to_owned(),
            status: settled.status,
        });
        let kept = RowFinish::of_turn(
            capture.acquirer_key.as_str(),
            lease,
            &self.instance,
            &events,
        )
        .map(|kept| (&*self.instance, kept));
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let (moved, kept) = settle_capture(&mut tx, lease, capture, settlement, kept).await?;
        let payment = match moved {
            HoldMove::Locked(payment) => *payment,
            HoldMove::LeaseLost => {
                tx.rollback().await.map_err(store_error)?;
                return Ok(FinishOutcome::LeaseLost);
            }
            HoldMove::Gone => {
                tx.rollback().await.map_err(store_error)?;
                return Ok(FinishOutcome::PaymentAlreadySettled);
            }
        };
        let PaymentCapture::Manual { hold, .. } = payment.capture else {
            return Err(StoreError::corrupt(format!(
                "capture {} of payment {} that holds nothing",
                capture.id, payment.id
            )));
        };
        let succeeded = settled.status == CaptureStatus::Succeeded;
        let hold = hold.capture_settled(settled.reservation(), succeeded);
        let event =
            NewEvent::capture_settled(&settled, payment.reference.as_str()).ok_or_else(|| {
                StoreError::other(format!(
                    "finish of key {} with a capture answer that is not final",
                    lease.key
                ))
            })?;
        let payment = payment.with_hold(hold);
        // Kept on the capture's row by the first statement, or written now.
        let entries = (!kept).then(|| Entries::of(events));
        write_hold_move(
            &mut tx,
            lease,
            &payment,
            response,
            ttl,
            entries.as_ref(),
            Some(&event),
        )
        .await?;
        tx.commit().await.map_err(store_error)?;
        Ok(FinishOutcome::Stored)
    }

    /// A void key's claim, one transaction.
    #[tracing::instrument(level = "debug", name = "store.claim_void", skip_all, fields(db.system = "postgresql"))]
    async fn claim_void(
        &self,
        claim: &ClaimRequest,
        payment_id: &PaymentId,
        timing: KeyTiming,
    ) -> Result<ReleaseClaim, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let token = LeaseToken::generate();
            let tx = self.conns.begin().await.map_err(store_error)?;
            let target = KeyTarget {
                recovery_point: RecoveryPoint::VoidRequested,
                payment_id,
                refund_id: None,
                capture_id: None,
                holder: &self.instance,
            };
            let (mut tx, locked) =
                match insert_key_locking_payment(self, tx, claim, target, token, timing).await? {
                    KeyClaim::Inserted(tx, locked) => (tx, locked.map(|locked| locked.payment)),
                    KeyClaim::Exists(Some(record)) => return Ok(ReleaseClaim::Exists(*record)),
                    KeyClaim::Exists(None) => continue,
                };
            let judged = match locked {
                None => Err(ReleaseClaimRefusal::PaymentNotFound),
                Some(payment) => release(&payment, ReleaseReason::Void).map(|(h, _)| (payment, h)),
            };
            let (payment, hold) = match judged {
                Ok(judged) => judged,
                Err(refused) => {
                    tx.rollback().await.map_err(store_error)?;
                    return Ok(ReleaseClaim::Refused(refused));
                }
            };
            let asked = HistoryEvent::ReleaseRequested {
                reason: ReleaseReason::Void,
                key: Some(claim.key.as_str().to_owned()),
                instance: self.instance.to_string(),
            };
            write_hold(
                &mut tx,
                &claim.shop_id,
                payment_id,
                &hold,
                &Entries::of([asked]),
            )
            .await?;
            tx.commit().await.map_err(store_error)?;
            let payment = payment.with_hold(hold);
            return Ok(ReleaseClaim::Acquired(acquired(
                claim,
                token,
                RecoveryPoint::VoidRequested,
                payment,
                None,
            )));
        }
        Err(StoreError::other(format!(
            "claim of key {} did not settle after {CLAIM_ATTEMPTS} attempts",
            claim.key
        )))
    }

    /// The end of a void key, fenced by the lease token, with its history
    /// entries (the acquirer calls, the answer, the release's end): one
    /// statement without an answer; with one, a transaction of two (the
    /// payment locked and read; then the hold, the answer, the entries and
    /// the event, if the hold was released), the release judged between them.
    #[tracing::instrument(level = "debug", name = "store.finish_void", skip_all, fields(db.system = "postgresql"))]
    async fn finish_void(
        &self,
        lease: &Lease,
        settlement: Option<(&PaymentId, &VoidSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        let mut entries = Entries::answered(lease, response, attempts, &self.instance);
        let Some((payment_id, settlement)) = settlement else {
            return answer_only(self, lease, response, ttl, &entries).await;
        };
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let locked = match lock_for_void(&mut tx, lease, payment_id).await? {
            HoldMove::Locked(payment) => Some(*payment),
            HoldMove::LeaseLost => {
                tx.rollback().await.map_err(store_error)?;
                return Ok(FinishOutcome::LeaseLost);
            }
            HoldMove::Gone => None,
        };
        let reason = ReleaseReason::Void;
        let Some((payment, hold)) = locked.and_then(|payment| releasing(payment, reason)) else {
            tx.rollback().await.map_err(store_error)?;
            return Ok(FinishOutcome::PaymentAlreadySettled);
        };
        let released = matches!(settlement, VoidSettlement::Succeeded { .. });
        let hold = hold.release_settled(released);
        entries.push(&HistoryEvent::ReleaseEnded { reason, released });
        let payment = payment.with_hold(hold);
        let event = NewEvent::authorization_released(&payment);
        write_hold_move(
            &mut tx,
            lease,
            &payment,
            response,
            ttl,
            Some(&entries),
            event.as_ref(),
        )
        .await?;
        tx.commit().await.map_err(store_error)?;
        Ok(FinishOutcome::Stored)
    }

    /// Expired holds still open, or releasing for the expiry.
    #[tracing::instrument(level = "debug", name = "store.expired_authorizations", skip_all, fields(db.system = "postgresql"))]
    async fn expired_authorizations(&self, limit: u32) -> Result<Vec<Payment>, StoreError> {
        // The queue's due rows whose hold has ended (used up, released, or
        // never authorized) leave it first. A hold still moving stays: a
        // final capture or a void in flight that the acquirer refuses
        // leaves it open again, to expire.
        sqlx::query(
            "DELETE FROM authorization_expiries e \
             WHERE e.expires_at <= now() AND NOT EXISTS ( \
                 SELECT 1 FROM payments p \
                 WHERE p.shop_id = e.shop_id AND p.id = e.payment_id \
                     AND (p.status = 'pending' OR p.hold IN ('open', 'closing', \
                          'releasing_void', 'releasing_expiry')))",
        )
        .execute(&mut *self.conn().await?)
        .await
        .map_err(store_error)?;
        super::all(
            self,
            sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments \
                 WHERE (shop_id, id) IN ( \
                     SELECT shop_id, payment_id FROM authorization_expiries \
                     WHERE expires_at <= now()) \
                   AND status = 'succeeded' AND hold IN ('open', 'releasing_expiry') \
                 ORDER BY authorization_expires_at LIMIT $1"
            ))
            .bind(i64::from(limit)),
        )
        .await
    }

    /// Begins the release of an expired hold, one transaction.
    #[tracing::instrument(level = "debug", name = "store.begin_expiry", skip_all, fields(db.system = "postgresql"))]
    async fn begin_expiry(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let Some(payment) = lock_payment(&mut tx, shop_id, payment_id).await? else {
            return Ok(None);
        };
        let releasing = Hold::Releasing(ReleaseReason::Expiry);
        if payment.authorization().map(|h| h.hold()) == Some(releasing) {
            return Ok(Some(payment));
        }
        if !expired(&mut tx, shop_id, payment_id).await? {
            return Ok(None);
        }
        let Ok((hold, _)) = release(&payment, ReleaseReason::Expiry) else {
            return Ok(None);
        };
        let asked = HistoryEvent::ReleaseRequested {
            reason: ReleaseReason::Expiry,
            key: None,
            instance: self.instance.to_string(),
        };
        write_hold(&mut tx, shop_id, payment_id, &hold, &Entries::of([asked])).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(Some(payment.with_hold(hold)))
    }

    /// Ends the release of an expired hold, one transaction.
    #[tracing::instrument(level = "debug", name = "store.end_expiry", skip_all, fields(db.system = "postgresql"))]
    async fn end_expiry(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        released: bool,
        attempts: &[AcquirerAttempt],
    ) -> Result<Option<Payment>, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        if !attempts.is_empty() {
            let calls = Entries::of(attempts.iter().map(|a| a.to_event(&self.instance)));
            record(
                &mut *tx,
                shop_id.as_str(),
                payment_id.as_str(),
                None,
                &calls,
            )
            .await?;
        }
        let ended = settle_release(
            &mut tx,
            shop_id,
            payment_id,
            ReleaseReason::Expiry,
            released,
        )
        .await?;
        let Some(payment) = ended else {
            return Ok(None);
        };
        insert_event(&mut tx, NewEvent::authorization_released(&payment)).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(Some(payment))
    }

    /// One capture of one shop.
    #[tracing::instrument(level = "debug", name = "store.capture", skip_all, fields(db.system = "postgresql"))]
    async fn capture(
        &self,
        shop_id: &ShopId,
        id: &CaptureId,
    ) -> Result<Option<Capture>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, CaptureRow>(concat!(
                "SELECT ",
                capture_columns!(),
                " FROM captures WHERE shop_id = $1 AND id = $2"
            ))
            .bind(shop_id.as_str())
            .bind(id.as_str()),
        )
        .await
    }

    /// One page of a payment's captures, newest first by `(created_at, id)`.
    #[tracing::instrument(level = "debug", name = "store.list_captures", skip_all, fields(db.system = "postgresql"))]
    async fn list_captures(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        page: &PageRequest<CaptureId>,
    ) -> Result<Page<Capture>, StoreError> {
        let (sql, at) = match &page.cursor {
            Cursor::Newest => (CAPTURES_NEWEST, None),
            Cursor::After(id) => (
                CAPTURES_AFTER,
                Some(capture_cursor(self, shop_id, payment_id, id).await?),
            ),
            Cursor::Before(id) => (
                CAPTURES_BEFORE,
                Some(capture_cursor(self, shop_id, payment_id, id).await?),
            ),
        };
        let mut query = sqlx::query_as::<_, CaptureRow>(sql)
            .bind(shop_id.as_str())
            .bind(payment_id.as_str())
            .bind(i64::from(page.limit.get()) + 1);
        if let Some((created_at, id)) = at {
            query = query.bind(created_at).bind(id);
        }
        let rows: Vec<Capture> = super::all(self, query).await?;
        Ok(Page::from_probe(rows, page))
    }
}
