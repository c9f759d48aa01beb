//! Authorizations: phase 1 (the claim of the key with the reservation of the
//! capture on its payment's hold), phase 3 (the fenced answer with the
//! hold's settlement and the capture's merchant event), and reading a
//! capture, or a payment's captures a page at a time.
//!
//! The writer is the only one, so no other move of a hold comes between a
//! read of the payment and the write of its hold; each move is judged by
//! the hold's own rules (`chargeonce_core::authorization`), and the
//! table's CHECK keeps captured plus reserved within the authorized amount.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::authorization::{Authorization, Hold, ReleaseReason};
use chargeonce_core::capture::{release, reservation};
use chargeonce_core::events::NewEvent;
use chargeonce_core::history::{AcquirerAttempt, HistoryEvent};
use chargeonce_core::store::{Authorizations, CaptureClaim, ReleaseClaim};
use chargeonce_core::{
    Capture, CaptureClaimRefusal, CaptureId, CaptureSettlement, CaptureStatus, ClaimRequest,
    Cursor, FinishOutcome, KeyTiming, Lease, LeaseToken, NewCapture, Page, PageRequest, Payment,
    PaymentCapture, PaymentId, RecoveryPoint, ReleaseClaimRefusal, ShopId, StoreError,
    StoredResponse, VoidSettlement,
};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, ToSql, params, params_from_iter};

use super::history::record;
use super::keys::{KeyTarget, count_repeat, insert_key, store_answer};
use super::outbox::insert_event;
use super::payments::payment_in;
use super::{Fail, Result, SqliteStore, all, now_ms, one, unix_ms};
use crate::codec::{acquired, capture_settlement_columns};
use crate::columns::{capture_columns, payment_columns};
use crate::rows::{CaptureRow, PaymentRow};

/// The newest page of one payment's captures (a range of
/// `captures_by_payment`): `?1` the shop, `?2` the payment, `?3` the limit.
const CAPTURES_NEWEST: &str = concat!(
    "SELECT ",
    capture_columns!(),
    " FROM captures WHERE shop_id = ?1 AND payment_id = ?2 \
     ORDER BY created_at DESC, id DESC LIMIT ?3"
);

/// The page after a cursor of one payment's captures: `?1` to `?3` as in
/// [`CAPTURES_NEWEST`], `?4`, `?5` the cursor's `created_at` and id.
const CAPTURES_AFTER: &str = concat!(
    "SELECT ",
    capture_columns!(),
    " FROM captures WHERE shop_id = ?1 AND payment_id = ?2 \
       AND (created_at, id) < (?4, ?5) ORDER BY created_at DESC, id DESC LIMIT ?3"
);

/// The page before a cursor of one payment's captures, read oldest first:
/// `?1` to `?5` as in [`CAPTURES_AFTER`].
const CAPTURES_BEFORE: &str = concat!(
    "SELECT ",
    capture_columns!(),
    " FROM captures WHERE shop_id = ?1 AND payment_id = ?2 \
       AND (created_at, id) > (?4, ?5) ORDER BY created_at, id LIMIT ?3"
);

/// One capture of one shop, on whichever connection.
pub(super) fn capture_in(
    conn: &Connection,
    shop_id: &ShopId,
    id: &CaptureId,
) -> Result<Option<Capture>> {
    one::<CaptureRow, _>(
        conn,
        concat!(
            "SELECT ",
            capture_columns!(),
            " FROM captures WHERE shop_id = ?1 AND id = ?2"
        ),
        params![shop_id.as_str(), id.as_str()],
    )
}

/// Writes `hold` back to its payment's row; an authorization released with
/// nothing captured leaves its order's live slot for its own id, so the
/// order can be paid again.
fn write_hold(
    conn: &Connection,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    hold: &Authorization,
) -> Result<()> {
    let written = conn
        .prepare_cached(concat!(
            "UPDATE payments SET hold = ?3, captured_minor = ?4, capture_reserved_minor = ?5, \
                 captures_in_flight = ?6, \
                 order_slot = CASE WHEN (?3 = 'released_void' OR ?3 = 'released_expiry') \
                     AND ?4 = 0 THEN id ELSE order_slot END, \
                 updated_at = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND id = ?2 AND capture_method = 'manual'"
        ))?
        .execute(params![
            shop_id.as_str(),
            payment_id.as_str(),
            hold.hold().as_str(),
            hold.captured_minor(),
            hold.in_flight_minor(),
            hold.in_flight(),
        ])?;
    if written != 1 {
        return Err(Fail(StoreError::other(format!(
            "the hold of payment {payment_id} could not be written"
        ))));
    }
    Ok(())
}

/// Reserves `capture` on its payment's hold and inserts the capture row,
/// or says why the hold cannot give it.
fn reserve_capture(
    conn: &Connection,
    capture: &NewCapture,
) -> Result<std::result::Result<(Payment, Capture), CaptureClaimRefusal>> {
    let Some(payment) = payment_in(conn, &capture.shop_id, &capture.payment_id)? else {
        return Ok(Err(CaptureClaimRefusal::PaymentNotFound));
    };
    let (hold, reserved, amount) = match reservation(&payment, capture) {
        Ok(reserved) => reserved,
        Err(refused) => return Ok(Err(refused)),
    };
    write_hold(conn, &capture.shop_id, &capture.payment_id, &hold)?;
    let created = capture.to_capture(amount, reserved.is_last());
    conn.prepare_cached(concat!(
        "INSERT INTO captures (shop_id, id, payment_id, idempotency_key, amount_minor, \
             currency, is_final, status, acquirer_key, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9, ",
        now_ms!(),
        ")"
    ))?
    .execute(params![
        created.shop_id.as_str(),
        created.id.as_str(),
        created.payment_id.as_str(),
        created.idempotency_key.as_str(),
        created.amount.minor_units(),
        created.amount.currency().code(),
        created.last,
        created.acquirer_key.as_str(),
        unix_ms(created.created_at),
    ])?;
    Ok(Ok((payment.with_hold(hold), created)))
}

/// Applies a capture's definite answer: the capture, still pending, moves
/// to its final status and its payment's hold takes (or gives back) its
/// amount. `None` when the capture was no longer pending.
fn settle_capture(
    conn: &Connection,
    shop_id: &ShopId,
    id: &CaptureId,
    settlement: &CaptureSettlement,
) -> Result<Option<(Capture, Payment)>> {
    let (status, provider_capture_id, failure_code) = capture_settlement_columns(settlement);
    let settled = conn
        .prepare_cached(concat!(
            "UPDATE captures SET status = ?3, provider_capture_id = ?4, failure_code = ?5, \
                 updated_at = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND id = ?2 AND status = 'pending'"
        ))?
        .execute(params![
            shop_id.as_str(),
            id.as_str(),
            status.as_str(),
            provider_capture_id,
            failure_code,
        ])?;
    if settled == 0 {
        return Ok(None);
    }
    let capture = capture_in(conn, shop_id, id)?
        .ok_or_else(|| StoreError::other(format!("capture {id} vanished while settled")))?;
    let payment = payment_in(conn, shop_id, &capture.payment_id)?
        .ok_or_else(|| StoreError::corrupt(format!("capture {id} has no payment")))?;
    let PaymentCapture::Manual { hold, .. } = payment.capture else {
        return Err(Fail(StoreError::corrupt(format!(
            "capture {id} of payment {} that holds nothing",
            capture.payment_id
        ))));
    };
    let succeeded = status == CaptureStatus::Succeeded;
    let hold = hold.capture_settled(capture.reservation(), succeeded);
    write_hold(conn, shop_id, &capture.payment_id, &hold)?;
    Ok(Some((capture, payment.with_hold(hold))))
}

/// Ends a release of the payment's hold, when it is releasing for
/// `reason`: released, or open again. `None` when it was not.
fn settle_release(
    conn: &Connection,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    reason: ReleaseReason,
    released: bool,
) -> Result<Option<Payment>> {
    let Some(payment) = payment_in(conn, shop_id, payment_id)? else {
        return Ok(None);
    };
    let hold = match payment.capture {
        PaymentCapture::Manual { hold, .. } if hold.hold() == Hold::Releasing(reason) => hold,
        _ => return Ok(None),
    };
    let hold = hold.release_settled(released);
    write_hold(conn, shop_id, payment_id, &hold)?;
    let ended = HistoryEvent::ReleaseEnded { reason, released };
    record(conn, payment_id.as_str(), None, &ended)?;
    Ok(Some(payment.with_hold(hold)))
}

/// Whether the payment's authorization expired by the store's clock.
fn expired(conn: &Connection, shop_id: &ShopId, payment_id: &PaymentId) -> Result<bool> {
    let expired: Option<bool> = conn
        .prepare_cached(concat!(
            "SELECT authorization_expires_at <= ",
            now_ms!(),
            " FROM payments WHERE shop_id = ?1 AND id = ?2"
        ))?
        .query_row(params![shop_id.as_str(), payment_id.as_str()], |row| {
            row.get::<_, Option<bool>>(0)
        })
        .optional()?
        .flatten();
    Ok(expired == Some(true))
}

/// Where a capture list's cursor lies: the `(created_at, id)` of the
/// payment's capture `id`; [`StoreError::UnknownCursor`] when there is none.
fn capture_cursor(
    conn: &Connection,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    id: &CaptureId,
) -> Result<(i64, String)> {
    let at: Option<i64> = conn
        .prepare_cached(
            "SELECT created_at FROM captures \
             WHERE shop_id = ?1 AND id = ?2 AND payment_id = ?3",
        )?
        .query_row(
            params![shop_id.as_str(), id.as_str(), payment_id.as_str()],
            |row| row.get(0),
        )
        .optional()?;
    match at {
        Some(at) => Ok((at, id.as_str().to_owned())),
        None => Err(StoreError::UnknownCursor(id.to_string()).into()),
    }
}

#[async_trait]
impl Authorizations for SqliteStore {
    /// Phase 1 of a capture, one write.
    #[tracing::instrument(level = "debug", name = "store.claim_capture", skip_all, fields(db.system = "sqlite"))]
    async fn claim_capture(
        &self,
        claim: &ClaimRequest,
        capture: &NewCapture,
        timing: KeyTiming,
    ) -> Result<CaptureClaim, StoreError> {
        let (claim, capture) = (claim.clone(), capture.clone());
        let holder = self.instance.clone();
        self.write_new(move |conn| {
            let token = LeaseToken::generate();
            let target = KeyTarget {
                recovery_point: RecoveryPoint::CaptureCreated,
                payment_id: &capture.payment_id,
                refund_id: None,
                capture_id: Some(&capture.id),
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
                return Ok(Write::Commit(CaptureClaim::Exists(record)));
            }
            let (payment, created) = match reserve_capture(conn, &capture)? {
                Ok(reserved) => reserved,
                Err(refused) => return Ok(Write::Rollback(CaptureClaim::Refused(refused))),
            };
            record(
                conn,
                created.payment_id.as_str(),
                None,
                &HistoryEvent::CaptureReserved {
                    capture_id: created.id.as_str().to_owned(),
                    key: claim.key.as_str().to_owned(),
                    amount_minor: created.amount.minor_units(),
                    currency: created.amount.currency().code().to_owned(),
                    last: created.last,
                    instance: holder.to_string(),
                },
            )?;
            let mut acquired =
                acquired(&claim, token, RecoveryPoint::CaptureCreated, payment, None);
            acquired.capture = Some(Box::new(created));
            Ok(Write::Commit(CaptureClaim::Acquired(acquired)))
        })
        .await
    }

    /// Phase 3 of a capture, one write, fenced by the lease token.
    #[tracing::instrument(level = "debug", name = "store.finish_capture", skip_all, fields(db.system = "sqlite"))]
    async fn finish_capture(
        &self,
        lease: &Lease,
        settlement: Option<(&Capture, &CaptureSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        let lease = lease.clone();
        // The capture is read back after its settle: one writer, no round
        // trips, so nothing is gained by building its event first.
        let settlement = settlement.map(|(capture, s)| (capture.id.clone(), s.clone()));
        let response = response.clone();
        let attempts = attempts.to_vec();
        let instance = self.instance.clone();
        self.write(move |conn| {
            if !store_answer(conn, &lease, &response, ttl, &attempts, &instance)? {
                return Ok(Write::Rollback(FinishOutcome::LeaseLost));
            }
            let Some((id, settlement)) = settlement else {
                return Ok(Write::Commit(FinishOutcome::Stored));
            };
            let Some((capture, payment)) = settle_capture(conn, &lease.shop_id, &id, &settlement)?
            else {
                return Ok(Write::Rollback(FinishOutcome::PaymentAlreadySettled));
            };
            record(
                conn,
                capture.payment_id.as_str(),
                None,
                &HistoryEvent::CaptureEnded {
                    capture_id: capture.id.as_str().to_owned(),
                    status: capture.status,
                },
            )?;
            let event = NewEvent::capture_settled(&capture, payment.reference.as_str());
            insert_event(conn, event)?;
            Ok(Write::Commit(FinishOutcome::Stored))
        })
        .await
    }

    /// A void key's claim, one write.
    #[tracing::instrument(level = "debug", name = "store.claim_void", skip_all, fields(db.system = "sqlite"))]
    async fn claim_void(
        &self,
        claim: &ClaimRequest,
        payment_id: &PaymentId,
        timing: KeyTiming,
    ) -> Result<ReleaseClaim, StoreError> {
        let (claim, payment_id) = (claim.clone(), payment_id.clone());
        let holder = self.instance.clone();
        self.write_new(move |conn| {
            let token = LeaseToken::generate();
            let target = KeyTarget {
                recovery_point: RecoveryPoint::VoidRequested,
                payment_id: &payment_id,
                refund_id: None,
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
                return Ok(Write::Commit(ReleaseClaim::Exists(record)));
            }
            let judged = match payment_in(conn, &claim.shop_id, &payment_id)? {
                None => Err(ReleaseClaimRefusal::PaymentNotFound),
                Some(payment) => release(&payment, ReleaseReason::Void).map(|(h, _)| (payment, h)),
            };
            let (payment, hold) = match judged {
                Ok(judged) => judged,
                Err(refused) => return Ok(Write::Rollback(ReleaseClaim::Refused(refused))),
            };
            write_hold(conn, &claim.shop_id, &payment_id, &hold)?;
            record(
                conn,
                payment_id.as_str(),
                None,
                &HistoryEvent::ReleaseRequested {
                    reason: ReleaseReason::Void,
                    key: Some(claim.key.as_str().to_owned()),
                    instance: holder.to_string(),
                },
            )?;
            let payment = payment.with_hold(hold);
            Ok(Write::Commit(ReleaseClaim::Acquired(acquired(
                &claim,
                token,
                RecoveryPoint::VoidRequested,
                payment,
                None,
            ))))
        })
        .await
    }

    /// The end of a void key, one write, fenced by the lease token.
    #[tracing::instrument(level = "debug", name = "store.finish_void", skip_all, fields(db.system = "sqlite"))]
    async fn finish_void(
        &self,
        lease: &Lease,
        settlement: Option<(&PaymentId, &VoidSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        let lease = lease.clone();
        let settlement = settlement.map(|(id, s)| (id.clone(), s.clone()));
        let response = response.clone();
        let attempts = attempts.to_vec();
        let instance = self.instance.clone();
        self.write(move |conn| {
            if !store_answer(conn, &lease, &response, ttl, &attempts, &instance)? {
                return Ok(Write::Rollback(FinishOutcome::LeaseLost));
            }
            let Some((payment_id, settlement)) = settlement else {
                return Ok(Write::Commit(FinishOutcome::Stored));
            };
            let released = matches!(settlement, VoidSettlement::Succeeded { .. });
            let ended = settle_release(
                conn,
                &lease.shop_id,
                &payment_id,
                ReleaseReason::Void,
                released,
            )?;
            let Some(payment) = ended else {
                return Ok(Write::Rollback(FinishOutcome::PaymentAlreadySettled));
            };
            insert_event(conn, NewEvent::authorization_released(&payment))?;
            Ok(Write::Commit(FinishOutcome::Stored))
        })
        .await
    }

    /// Expired holds still open, or releasing for the expiry.
    #[tracing::instrument(level = "debug", name = "store.expired_authorizations", skip_all, fields(db.system = "sqlite"))]
    async fn expired_authorizations(&self, limit: u32) -> Result<Vec<Payment>, StoreError> {
        self.read(move |conn| {
            all::<PaymentRow, _>(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE (hold = 'open' OR hold = 'releasing_expiry') \
                       AND authorization_expires_at <= ",
                    now_ms!(),
                    " AND status = 'succeeded' ORDER BY authorization_expires_at LIMIT ?1"
                ),
                params![i64::from(limit)],
            )
        })
        .await
    }

    /// Begins the release of an expired hold, one write.
    #[tracing::instrument(level = "debug", name = "store.begin_expiry", skip_all, fields(db.system = "sqlite"))]
    async fn begin_expiry(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let (shop_id, payment_id) = (shop_id.clone(), payment_id.clone());
        let holder = self.instance.clone();
        self.write(move |conn| {
            let Some(payment) = payment_in(conn, &shop_id, &payment_id)? else {
                return Ok(Write::Rollback(None));
            };
            let releasing = Hold::Releasing(ReleaseReason::Expiry);
            if payment.authorization().map(|h| h.hold()) == Some(releasing) {
                return Ok(Write::Rollback(Some(payment)));
            }
            if !expired(conn, &shop_id, &payment_id)? {
                return Ok(Write::Rollback(None));
            }
            let Ok((hold, _)) = release(&payment, ReleaseReason::Expiry) else {
                return Ok(Write::Rollback(None));
            };
            write_hold(conn, &shop_id, &payment_id, &hold)?;
            let asked = HistoryEvent::ReleaseRequested {
                reason: ReleaseReason::Expiry,
                key: None,
                instance: holder.to_string(),
            };
            record(conn, payment_id.as_str(), None, &asked)?;
            Ok(Write::Commit(Some(payment.with_hold(hold))))
        })
        .await
    }

    /// Ends the release of an expired hold, one write.
    #[tracing::instrument(level = "debug", name = "store.end_expiry", skip_all, fields(db.system = "sqlite"))]
    async fn end_expiry(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        released: bool,
        attempts: &[AcquirerAttempt],
    ) -> Result<Option<Payment>, StoreError> {
        let (shop_id, payment_id) = (shop_id.clone(), payment_id.clone());
        let calls: Vec<HistoryEvent> = attempts
            .iter()
            .map(|a| a.to_event(&self.instance))
            .collect();
        self.write(move |conn| {
            for call in &calls {
                record(conn, payment_id.as_str(), None, call)?;
            }
            let ended =
                settle_release(conn, &shop_id, &payment_id, ReleaseReason::Expiry, released)?;
            let Some(payment) = ended else {
                return Ok(Write::Rollback(None));
            };
            insert_event(conn, NewEvent::authorization_released(&payment))?;
            Ok(Write::Commit(Some(payment)))
        })
        .await
    }

    /// One capture of one shop.
    #[tracing::instrument(level = "debug", name = "store.capture", skip_all, fields(db.system = "sqlite"))]
    async fn capture(
        &self,
        shop_id: &ShopId,
        id: &CaptureId,
    ) -> Result<Option<Capture>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| capture_in(conn, &shop_id, &id)).await
    }

    /// One page of a payment's captures, newest first by `(created_at, id)`.
    #[tracing::instrument(level = "debug", name = "store.list_captures", skip_all, fields(db.system = "sqlite"))]
    async fn list_captures(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        page: &PageRequest<CaptureId>,
    ) -> Result<Page<Capture>, StoreError> {
        let (shop_id, payment_id, page) = (shop_id.clone(), payment_id.clone(), page.clone());
        self.read(move |conn| {
            let (sql, cursor) = match &page.cursor {
                Cursor::Newest => (CAPTURES_NEWEST, None),
                Cursor::After(id) => (
                    CAPTURES_AFTER,
                    Some(capture_cursor(conn, &shop_id, &payment_id, id)?),
                ),
                Cursor::Before(id) => (
                    CAPTURES_BEFORE,
                    Some(capture_cursor(conn, &shop_id, &payment_id, id)?),
                ),
            };
            let limit = i64::from(page.limit.get()) + 1;
            let (shop, payment) = (shop_id.as_str(), payment_id.as_str());
            let mut values: Vec<&dyn ToSql> = vec![&shop as &dyn ToSql, &payment, &limit];
            if let Some((at, id)) = &cursor {
                values.extend([at as &dyn ToSql, id]);
            }
            let rows: Vec<Capture> = all::<CaptureRow, _>(conn, sql, params_from_iter(values))?;
            Ok(Page::from_probe(rows, &page))
        })
        .await
    }
}
