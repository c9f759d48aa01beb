//! Phase 1 of a payment (the claim of its key and the insertion of its
//! payment, or the link to its order's live payment), the take-over of an
//! expired lease, and the fenced writes to a lease: renew, release, park,
//! abandon.

use std::time::Duration;

use chargeonce_core::history::{AcquirerAttempt, HistoryEvent};
use chargeonce_core::{
    Acquired, Claim, ClaimRequest, Fingerprint, IdempotencyKey, KeyTiming, Lease, LeaseToken,
    NewPayment, Payment, RecoveryPoint, RefundId, ShopId, StoreError,
};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, params};

use super::authorizations::capture_in;
use super::history::{attempt_events, record, record_about_key};
use super::keys::{KeyTarget, count_repeat, insert_key};
use super::payments::payment_in;
use super::refunds::refund_in;
use super::{Result, SqliteStore, now_ms, one, unix_ms};
use crate::codec::{acquired, millis};
use crate::columns::payment_columns;
use crate::rows::{FromSqliteRow, PaymentRow, TakenKey, TakenKeyRow};

/// Phase 1, one write: the key row and the payment row, or the link to
/// the order's live payment.
pub(super) async fn claim_payment(
    store: &SqliteStore,
    claim: &ClaimRequest,
    payment: &NewPayment,
    timing: KeyTiming,
) -> Result<Claim, StoreError> {
    let (claim, payment) = (claim.clone(), payment.clone());
    let holder = store.instance.clone();
    store
        .write_new(move |conn| {
            let token = LeaseToken::generate();
            let target = KeyTarget {
                recovery_point: RecoveryPoint::PaymentCreated,
                payment_id: &payment.id,
                refund_id: None,
                holder: &holder,
                capture_id: None,
            };
            if !insert_key(conn, &claim, target, token, timing)? {
                let record = count_repeat(conn, &claim.shop_id, &claim.key, &claim.fingerprint)?
                    .ok_or_else(|| {
                        StoreError::other(format!(
                            "key {} conflicted but cannot be read",
                            claim.key
                        ))
                    })?;
                return Ok(Write::Commit(Claim::Exists(record)));
            }
            let (recovery_point, linked) =
                insert_payment(conn, &payment, &holder)?.ok_or_else(|| {
                    StoreError::other(format!(
                        "order of key {} has a live payment that cannot be read",
                        claim.key
                    ))
                })?;
            // A new payment's `claimed` entry is its row (`claimed_by`); a
            // link to the order's live payment is an entry of that payment.
            if recovery_point == RecoveryPoint::OrderAlreadyPaid {
                let entry = HistoryEvent::Linked {
                    key: claim.key.as_str().to_owned(),
                    instance: holder.to_string(),
                };
                record(conn, linked.id.as_str(), None, &entry)?;
            }
            Ok(Write::Commit(Claim::Acquired(acquired(
                &claim,
                token,
                recovery_point,
                linked,
                None,
            ))))
        })
        .await
}

/// Inserts the payment, claimed by `holder` (the row is its history's
/// `claimed` entry), or links the order's live payment when it has one.
fn insert_payment(
    conn: &Connection,
    payment: &NewPayment,
    holder: &str,
) -> Result<Option<(RecoveryPoint, Payment)>> {
    let inserted = conn
        .prepare_cached(concat!(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, updated_at, claimed_by, \
                 metadata, capture_method, hold, authorization_expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9, ",
            now_ms!(),
            ", ?10, ?11, ?12, ?13, ?14) ON CONFLICT (shop_id, reference, order_slot) DO NOTHING"
        ))?
        .execute(params![
            payment.id.as_str(),
            payment.shop_id.as_str(),
            payment.idempotency_key.as_str(),
            payment.request.reference.as_str(),
            payment.request.amount.minor_units(),
            payment.request.amount.currency().code(),
            payment.request.token.as_str(),
            payment.acquirer_key.as_str(),
            unix_ms(payment.created_at),
            holder,
            payment.request.metadata.to_stored(),
            payment.request.capture_method.as_str(),
            crate::codec::initial_hold(payment),
            payment.authorization_expires_at.map(unix_ms),
        ])?;
    if inserted == 1 {
        return Ok(Some((RecoveryPoint::PaymentCreated, payment.to_payment())));
    }
    // The writer is the only one: the live payment is there to read.
    let Some(existing): Option<Payment> = one::<PaymentRow, _>(
        conn,
        concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = ?1 AND reference = ?2 AND order_slot = ''"
        ),
        params![payment.shop_id.as_str(), payment.request.reference.as_str()],
    )?
    else {
        return Ok(None);
    };
    conn.prepare_cached(
        "UPDATE idempotency_keys SET payment_id = ?3, recovery_point = 'order_already_paid' \
         WHERE shop_id = ?1 AND key = ?2",
    )?
    .execute(params![
        payment.shop_id.as_str(),
        payment.idempotency_key.as_str(),
        existing.id.as_str(),
    ])?;
    Ok(Some((RecoveryPoint::OrderAlreadyPaid, existing)))
}

/// Takes over an unfinished key whose lease expired, or that is parked while
/// its payment is settled already (a compare-and-set of its lease token),
/// and reads what it points at.
pub(super) async fn take_over(
    store: &SqliteStore,
    shop_id: &ShopId,
    key: &IdempotencyKey,
    fingerprint: &Fingerprint,
    lease: Duration,
) -> Result<Option<Acquired>, StoreError> {
    let (shop_id, key, fingerprint) = (shop_id.clone(), key.clone(), *fingerprint);
    let holder = store.instance.clone();
    store
        .write_new(move |conn| {
            let token = LeaseToken::generate();
            let taken = conn
                .prepare_cached(concat!(
                    "UPDATE idempotency_keys SET lease_token = ?3, lease_holder = ?6, \
                     locked_until = ",
                    now_ms!(),
                    " + ?4 WHERE shop_id = ?1 AND key = ?2 AND fingerprint = ?5 \
                   AND recovery_point <> 'finished' \
                   AND (locked_until IS NULL OR locked_until <= ",
                    now_ms!(),
                    " OR (lease_token IS NULL AND refund_id IS NULL AND capture_id IS NULL \
                       AND recovery_point <> 'void_requested' AND EXISTS ( \
                       SELECT 1 FROM payments p WHERE p.shop_id = idempotency_keys.shop_id \
                         AND p.id = idempotency_keys.payment_id AND p.status <> 'pending')))"
                ))?
                .execute(params![
                    shop_id.as_str(),
                    key.as_str(),
                    token.as_uuid().to_string(),
                    millis(lease),
                    fingerprint.as_bytes().as_slice(),
                    &*holder,
                ])?;
            if taken == 0 {
                return Ok(Write::Commit(None));
            }
            let row: TakenKeyRow = conn
                .prepare_cached(
                    "SELECT payment_id, refund_id, capture_id, recovery_point FROM idempotency_keys \
                 WHERE shop_id = ?1 AND key = ?2",
                )?
                .query_row(
                    params![shop_id.as_str(), key.as_str()],
                    TakenKeyRow::from_sqlite,
                )?;
            let TakenKey {
                recovery_point,
                payment_id,
                refund_id,
                capture_id,
            } = row.parse()?;
            record(
                conn,
                payment_id.as_str(),
                refund_id.as_ref().map(RefundId::as_str),
                &HistoryEvent::TakenOver {
                    key: key.as_str().to_owned(),
                    instance: holder.to_string(),
                    recovery_point,
                },
            )?;
            let payment = payment_in(conn, &shop_id, &payment_id)?.ok_or_else(|| {
                StoreError::corrupt(format!("key {key} points at missing payment {payment_id}"))
            })?;
            let refund = match refund_id {
                Some(id) => Some(Box::new(refund_in(conn, &shop_id, &id)?.ok_or_else(
                    || StoreError::corrupt(format!("key {key} points at missing refund {id}")),
                )?)),
                None => None,
            };
            let capture = match capture_id {
                Some(id) => Some(Box::new(capture_in(conn, &shop_id, &id)?.ok_or_else(
                    || StoreError::corrupt(format!("key {key} points at missing capture {id}")),
                )?)),
                None => None,
            };
            Ok(Write::Commit(Some(Acquired {
                lease: Lease {
                    shop_id,
                    key,
                    token,
                },
                recovery_point,
                payment,
                refund,
                capture,
            })))
        })
        .await
}

/// Extends a lease held with this token.
pub(super) async fn renew_lease(
    store: &SqliteStore,
    lease: &Lease,
    duration: Duration,
) -> Result<bool, StoreError> {
    fenced(
        store,
        concat!(
            "UPDATE idempotency_keys SET locked_until = ",
            now_ms!(),
            " + ?4 WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
               AND recovery_point <> 'finished'"
        ),
        lease,
        Some(duration),
        &[],
    )
    .await
}

/// Ends a lease early: the next retry may take over at once.
pub(super) async fn release_lease(
    store: &SqliteStore,
    lease: &Lease,
    attempts: &[AcquirerAttempt],
) -> Result<bool, StoreError> {
    fenced(
        store,
        concat!(
            "UPDATE idempotency_keys SET lease_token = NULL, locked_until = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
               AND recovery_point <> 'finished'"
        ),
        lease,
        None,
        attempts,
    )
    .await
}

/// Ends a lease, but keeps the key from being taken over for `hold`.
pub(super) async fn park_lease(
    store: &SqliteStore,
    lease: &Lease,
    hold: Duration,
    attempts: &[AcquirerAttempt],
) -> Result<bool, StoreError> {
    fenced(
        store,
        concat!(
            "UPDATE idempotency_keys SET lease_token = NULL, locked_until = ",
            now_ms!(),
            " + ?4 WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
               AND recovery_point <> 'finished'"
        ),
        lease,
        Some(hold),
        attempts,
    )
    .await
}

/// The entries of acquirer calls made under a lease that was then lost,
/// about the payment (and refund) the key points at now; not fenced.
pub(super) async fn record_lost_lease_calls(
    store: &SqliteStore,
    lease: &Lease,
    attempts: &[AcquirerAttempt],
) -> Result<(), StoreError> {
    if attempts.is_empty() {
        return Ok(());
    }
    let (shop_id, key) = (lease.shop_id.clone(), lease.key.clone());
    let events = attempt_events(attempts, &store.instance);
    store
        .write(move |conn| {
            record_about_key(conn, shop_id.as_str(), key.as_str(), &events)?;
            Ok(Write::Commit(()))
        })
        .await
}

/// Deletes an unfinished key that only links to its order's payment.
pub(super) async fn abandon_key(store: &SqliteStore, lease: &Lease) -> Result<bool, StoreError> {
    fenced(
        store,
        "DELETE FROM idempotency_keys \
         WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
           AND recovery_point = 'order_already_paid'",
        lease,
        None,
        &[],
    )
    .await
}

/// Runs one write fenced by a lease: `?1`, `?2`, `?3` are its shop, key and
/// token, `?4` (when given) a duration in milliseconds. `true` when it
/// changed the key row, `false` when the lease was taken over. When it
/// changed it, `attempts` (the acquirer calls made under the lease) go into
/// the key's payment's history in the same write.
async fn fenced(
    store: &SqliteStore,
    sql: &'static str,
    lease: &Lease,
    duration: Option<Duration>,
    attempts: &[AcquirerAttempt],
) -> Result<bool, StoreError> {
    let lease = lease.clone();
    let attempts = attempts.to_vec();
    let instance = store.instance.clone();
    store
        .write(move |conn| {
            let mut stmt = conn.prepare_cached(sql)?;
            let (shop_id, key, token) = (
                lease.shop_id.as_str(),
                lease.key.as_str(),
                lease.token.as_uuid().to_string(),
            );
            let done = match duration {
                Some(duration) => stmt.execute(params![shop_id, key, token, millis(duration)])?,
                None => stmt.execute(params![shop_id, key, token])?,
            };
            if done == 1 && !attempts.is_empty() {
                record_about_key(conn, shop_id, key, &attempt_events(&attempts, &instance))?;
            }
            Ok(Write::Commit(done == 1))
        })
        .await
}
