//! Phase 1 of a payment (the claim of its key and the insertion of its
//! payment, or the link to its order's live payment), the take-over of an
//! expired lease, and the fenced writes to a lease: renew, release, park,
//! abandon.

use std::time::Duration;

use chargeonce_core::history::{AcquirerAttempt, HistoryEvent};
use chargeonce_core::store::{Authorizations, Payments, Refunds};
use chargeonce_core::{
    Acquired, AcquirerKey, CaptureMethod, Claim, ClaimRequest, Fingerprint, IdempotencyKey,
    KeyTiming, Lease, LeaseToken, NewPayment, Payment, RecoveryPoint, ShopId, StoreError,
};
use sqlx::postgres::PgArguments;
use sqlx::{Postgres, Transaction};

use super::history::{Entries, insert_entries};
use super::keys::{KeyTarget, bind_key_head, count_repeat, insert_key};
use super::{CLAIM_ATTEMPTS, PgStore, store_error};
use crate::codec::{acquired, initial_hold, millis};
use crate::columns::payment_columns;
use crate::rows::{PaymentRow, TakenKey, TakenKeyRow};

/// The unique index of a live payment per order (migration 0026). A
/// one-statement claim whose payment breaks it (the order has a live
/// payment) fails, so the statement writes nothing.
const ONE_LIVE_PAYMENT_PER_ORDER: &str = "payments_by_order";

/// Phase 1: the one-statement claim for the common case, the transaction
/// for the rest.
pub(super) async fn claim_payment(
    store: &PgStore,
    claim: &ClaimRequest,
    payment: &NewPayment,
    timing: KeyTiming,
) -> Result<Claim, StoreError> {
    // An authorization also enters the expirer's queue, in the claim's
    // transaction: the one-statement claim stays the hot path of payments
    // charged at once, untouched by it.
    if payment.request.capture_method == CaptureMethod::Manual {
        return claim_in_transaction(store, claim, payment, timing).await;
    }
    let token = LeaseToken::generate();
    match claim_in_one_statement(store, claim, payment, token, timing).await? {
        FastClaim::Created => {
            return Ok(Claim::Acquired(acquired(
                claim,
                token,
                RecoveryPoint::PaymentCreated,
                payment.to_payment(),
                None,
            )));
        }
        FastClaim::KeyExists => {
            // Re-read in a new statement: its snapshot includes the commit
            // of whoever inserted the key.
            if let Some(record) = count_repeat(store, claim).await? {
                return Ok(Claim::Exists(record));
            }
            // Swept meanwhile, or finished and expired: the transaction
            // decides (and reclaims an expired key).
        }
        // Nothing was written; the transaction links the order's payment.
        FastClaim::OrderTaken => {}
    }
    claim_in_transaction(store, claim, payment, timing).await
}

/// What the one-statement claim of a payment did.
enum FastClaim {
    /// The key row and the payment row are committed.
    Created,
    /// The key exists (in any state): nothing was written.
    KeyExists,
    /// The key was new but the order already has a live payment: the
    /// statement failed and nothing was written.
    OrderTaken,
}

/// The common case of phase 1 in one autocommitted statement (one round
/// trip): a data-modifying CTE inserts the key row, and the payment row
/// is inserted only from the key row it returned.
///
/// - Key new, order free: both rows commit together ([`FastClaim::Created`]).
/// - Key exists: `ON CONFLICT DO NOTHING` skips it (after waiting for a
///   concurrent inserter of the same key to end), no payment is
///   inserted, and nothing is written or locked
///   ([`FastClaim::KeyExists`]). The caller re-reads the key in a NEW
///   statement: this one's snapshot may predate the winner's commit.
/// - Key new, but the order has a live payment (possibly committed after
///   this statement's snapshot: the unique index sees it anyway, after
///   waiting for an inserter still in flight): the payment's insert breaks
///   `payments_by_order` and the whole statement is rolled back
///   ([`FastClaim::OrderTaken`]). The caller runs the transaction that
///   links the live payment.
///
/// The payment is a plain `INSERT`, not `ON CONFLICT DO NOTHING`: either
/// way a taken order ends the statement with an error, and a plain insert
/// is not speculative (PostgreSQL inserts a speculative row, checks its
/// arbiter index, then confirms the row with a WAL record of its own:
/// 48 B a payment, and the check's work, for a conflict that is an error
/// anyway). The key's insert stays `ON CONFLICT DO NOTHING`: a key that
/// exists is an answer, not an error.
///
/// The payment's first history entry ([`HistoryEvent::Claimed`]) is the
/// payment row itself (`claimed_by`, this instance): it commits, or rolls
/// back, with both rows, and costs no row of its own. Nor does the payment
/// enter the pending queue: while its key is unfinished the key row is what
/// finds it (see [`super::pending`]).
///
/// An expired finished key is not reclaimed here (that is an update of
/// the old row, left to the transaction): it comes back as `KeyExists`.
async fn claim_in_one_statement(
    store: &PgStore,
    claim: &ClaimRequest,
    payment: &NewPayment,
    lease: LeaseToken,
    timing: KeyTiming,
) -> Result<FastClaim, StoreError> {
    let statement = sqlx::query(
        // `$1` to `$9` as every key insert has them (`bind_key_head`).
        "WITH k AS ( \
             INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
                 recovery_point, lease_token, locked_until, payment_id, created_at, \
                 expires_at, lease_holder) \
             VALUES ($1, $2, $3, $4, $5, 'payment_created', $6, \
                 clock_timestamp() + $7::float8 * interval '1 millisecond', $8, now(), \
                 now() + $9::float8 * interval '1 millisecond', $18) \
             ON CONFLICT (shop_id, key) DO NOTHING \
             RETURNING 1), \
         p AS ( \
             INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, claimed_by, metadata, \
                 capture_method, hold, authorization_expires_at) \
             SELECT $8, $10, $11, $12, $13, $14, $15, 'pending', $16, $17, $18, $19, \
                 $20, $21, $22 FROM k \
             RETURNING id) \
         SELECT 1 FROM p",
    );
    let statement = bind_key_head(statement, claim, &payment.id, lease, timing);
    let statement = bind_payment_row(statement, payment, &store.instance);
    // The hot path: its connection is parked again after it.
    let created = store
        .conns
        .run(async |conn| statement.fetch_optional(conn).await)
        .await;
    match created {
        Ok(Some(_)) => Ok(FastClaim::Created),
        Ok(None) => Ok(FastClaim::KeyExists),
        Err(sqlx::Error::Database(error))
            if error.code().as_deref() == Some("23505")
                && error.constraint() == Some(ONE_LIVE_PAYMENT_PER_ORDER) =>
        {
            Ok(FastClaim::OrderTaken)
        }
        Err(error) => Err(store_error(error)),
    }
}

/// Phase 1 as one transaction of several statements, for what the
/// one-statement claim leaves: an order that already has a live payment
/// (the key is linked to it), an expired finished key (reclaimed), and a
/// key that vanished between two statements.
async fn claim_in_transaction(
    store: &PgStore,
    claim: &ClaimRequest,
    payment: &NewPayment,
    timing: KeyTiming,
) -> Result<Claim, StoreError> {
    for _ in 0..CLAIM_ATTEMPTS {
        let token = LeaseToken::generate();
        let mut tx = store.conns.begin().await.map_err(store_error)?;
        let target = KeyTarget {
            recovery_point: RecoveryPoint::PaymentCreated,
            payment_id: &payment.id,
            refund_id: None,
            holder: &store.instance,
            capture_id: None,
        };
        if insert_key(&mut tx, claim, target, token, timing).await? {
            let Some((recovery_point, linked)) =
                insert_payment(&mut tx, claim, payment, &store.instance).await?
            else {
                continue;
            };
            tx.commit().await.map_err(store_error)?;
            return Ok(Claim::Acquired(acquired(
                claim,
                token,
                recovery_point,
                linked,
                None,
            )));
        }
        tx.rollback().await.map_err(store_error)?;
        // Re-read in a new statement: its snapshot includes the winner's commit.
        if let Some(record) = count_repeat(store, claim).await? {
            return Ok(Claim::Exists(record));
        }
    }
    Err(StoreError::other(format!(
        "claim of key {} did not settle after {CLAIM_ATTEMPTS} attempts",
        claim.key
    )))
}

/// Inserts the payment (claimed by `instance`: the row is its history's
/// [`HistoryEvent::Claimed`] entry), or links the order's live payment when
/// it has one, with a [`HistoryEvent::Linked`] entry on that payment in the
/// same statement.
async fn insert_payment(
    tx: &mut Transaction<'static, Postgres>,
    claim: &ClaimRequest,
    payment: &NewPayment,
    instance: &str,
) -> Result<Option<(RecoveryPoint, Payment)>, StoreError> {
    let linked = HistoryEvent::Linked {
        key: claim.key.as_str().to_owned(),
        instance: instance.to_owned(),
    };
    for _ in 0..CLAIM_ATTEMPTS {
        let query = sqlx::query(
            "WITH p AS ( \
                 INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                     currency, token, status, acquirer_key, created_at, claimed_by, metadata, \
                     capture_method, hold, authorization_expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $10, $11, $12, $13, $14) \
                 ON CONFLICT (reference, shop_id, (NULLIF(live_reference IS NOT NULL, false))) \
                 DO NOTHING \
                 RETURNING id) \
             SELECT id FROM p",
        );
        let inserted = bind_payment_row(query.bind(payment.id.as_str()), payment, instance)
            .fetch_optional(&mut **tx)
            .await
            .map_err(store_error)?;
        if inserted.is_some() {
            if let Some(expires_at) = payment.authorization_expires_at {
                sqlx::query(
                    "INSERT INTO authorization_expiries (shop_id, payment_id, expires_at) \
                     VALUES ($1, $2, $3)",
                )
                .bind(payment.shop_id.as_str())
                .bind(payment.id.as_str())
                .bind(expires_at)
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
            }
            return Ok(Some((RecoveryPoint::PaymentCreated, payment.to_payment())));
        }
        // A new statement sees the live payment the conflict waited for.
        let existing = sqlx::query_as::<_, PaymentRow>(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = $1 AND reference = $2 AND live_reference IS NOT NULL"
        ))
        .bind(payment.shop_id.as_str())
        .bind(payment.request.reference.as_str())
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)?;
        if let Some(row) = existing {
            let existing = Payment::try_from(row)?;
            sqlx::query(
                "WITH u AS ( \
                     UPDATE idempotency_keys \
                     SET payment_id = $3, recovery_point = 'order_already_paid' \
                     WHERE shop_id = $1 AND key = $2 RETURNING payment_id, shop_id) \
                 INSERT INTO payment_history (payment_id, shop_id, kind, event) \
                 SELECT payment_id, shop_id, 'linked', $4 FROM u",
            )
            .bind(payment.shop_id.as_str())
            .bind(payment.idempotency_key.as_str())
            .bind(existing.id.as_str())
            .bind(linked.to_json())
            .execute(&mut **tx)
            .await
            .map_err(store_error)?;
            return Ok(Some((RecoveryPoint::OrderAlreadyPaid, existing)));
        }
    }
    Ok(None)
}

/// Takes over an unfinished key whose lease expired, or that is parked while
/// its payment is settled already (a compare-and-set of its lease token),
/// and reads what it points at.
pub(super) async fn take_over(
    store: &PgStore,
    shop_id: &ShopId,
    key: &IdempotencyKey,
    fingerprint: &Fingerprint,
    lease: Duration,
) -> Result<Option<Acquired>, StoreError> {
    let token = LeaseToken::generate();
    // The entry ([`HistoryEvent::TakenOver`]) is written by the same
    // statement; its JSON is spliced around the recovery point the update
    // found (serde's compact form, checked by the conformance tests).
    // The payment's status is read as a scalar subquery (no row: NULL, not
    // taken), not with EXISTS: on a payments table without statistics the
    // generic plan hashed the EXISTS, a scan of every settled payment per
    // take-over (the plan test of a new database says so).
    let row = sqlx::query_as::<_, TakenKeyRow>(
        "WITH t AS ( \
             UPDATE idempotency_keys k SET lease_token = $3, lease_holder = $6, \
                 locked_until = clock_timestamp() + $4::float8 * interval '1 millisecond' \
             WHERE k.shop_id = $1 AND k.key = $2 AND k.fingerprint = $5 \
               AND k.recovery_point <> 'finished' \
               AND (k.locked_until IS NULL OR k.locked_until <= now() \
                    OR (k.lease_token IS NULL AND k.refund_id IS NULL \
                        AND k.capture_id IS NULL AND k.recovery_point <> 'void_requested' \
                        AND ( \
                        SELECT p.status FROM payments p WHERE p.id = k.payment_id \
                          AND p.shop_id IS NOT DISTINCT FROM k.shop_id) <> 'pending')) \
             RETURNING k.payment_id, k.refund_id, k.capture_id, k.recovery_point, k.shop_id), \
         h AS ( \
             INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
             SELECT payment_id, refund_id, shop_id, 'taken_over', \
                 '{\"type\":\"taken_over\",\"key\":' || to_json($2::text)::text \
                 || ',\"instance\":' || to_json($6::text)::text \
                 || ',\"recovery_point\":' || to_json(recovery_point)::text || '}' \
             FROM t WHERE payment_id IS NOT NULL) \
         SELECT payment_id, refund_id, capture_id, recovery_point FROM t",
    )
    .bind(shop_id.as_str())
    .bind(key.as_str())
    .bind(token.as_uuid())
    .bind(millis(lease) as f64)
    .bind(fingerprint.as_bytes().as_slice())
    .bind(store.instance.as_ref())
    .fetch_optional(&mut *store.conn().await?)
    .await
    .map_err(store_error)?;
    let Some(row) = row else { return Ok(None) };
    let TakenKey {
        recovery_point,
        payment_id,
        refund_id,
        capture_id,
    } = row.parse()?;
    let payment = store.payment(shop_id, &payment_id).await?.ok_or_else(|| {
        StoreError::corrupt(format!("key {key} points at missing payment {payment_id}"))
    })?;
    let refund = match refund_id {
        Some(id) => Some(Box::new(store.refund(shop_id, &id).await?.ok_or_else(
            || StoreError::corrupt(format!("key {key} points at missing refund {id}")),
        )?)),
        None => None,
    };
    let capture = match capture_id {
        Some(id) => Some(Box::new(store.capture(shop_id, &id).await?.ok_or_else(
            || StoreError::corrupt(format!("key {key} points at missing capture {id}")),
        )?)),
        None => None,
    };
    Ok(Some(Acquired {
        lease: Lease {
            shop_id: shop_id.clone(),
            key: key.clone(),
            token,
        },
        recovery_point,
        payment,
        refund,
        capture,
    }))
}

/// Extends a lease held with this token.
pub(super) async fn renew_lease(
    store: &PgStore,
    lease: &Lease,
    duration: Duration,
) -> Result<bool, StoreError> {
    fenced(
        store,
        "UPDATE idempotency_keys \
         SET locked_until = clock_timestamp() + $4::float8 * interval '1 millisecond' \
         WHERE shop_id = $1 AND key = $2 AND lease_token = $3 AND recovery_point <> 'finished'",
        lease,
        Some(duration),
    )
    .await
}

/// Ends a lease (`$1`, `$2`, `$3`: its shop, key and token) and makes the
/// key free at once, with the entries of the acquirer calls made under the
/// lease (`$4`, `$5`: their kinds and events), written about the key's
/// payment and refund only if the update matched; it returns how many rows
/// the update changed.
const RELEASE_LEASE: &str = concat!(
    "WITH u AS ( \
         UPDATE idempotency_keys SET lease_token = NULL, locked_until = now() \
         WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
           AND recovery_point <> 'finished' \
         RETURNING payment_id, refund_id, shop_id), \
     h AS (",
    insert_entries!("u", "$4", "$5"),
    ") SELECT count(*) FROM u"
);

/// Ends a lease early: the next retry may take over at once.
pub(super) async fn release_lease(
    store: &PgStore,
    lease: &Lease,
    attempts: &[AcquirerAttempt],
) -> Result<bool, StoreError> {
    fenced_with_calls(store, RELEASE_LEASE, lease, None, attempts).await
}

/// Ends a lease (`$1`, `$2`, `$3`: its shop, key and token) but keeps the
/// key from being taken over for `$6` milliseconds, with the entries of the
/// acquirer calls made under the lease (`$4`, `$5`), as [`RELEASE_LEASE`];
/// it returns how many rows the update changed.
const PARK_LEASE: &str = concat!(
    "WITH u AS ( \
         UPDATE idempotency_keys SET lease_token = NULL, \
             locked_until = clock_timestamp() + $6::float8 * interval '1 millisecond' \
         WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
           AND recovery_point <> 'finished' \
         RETURNING payment_id, refund_id, shop_id), \
     h AS (",
    insert_entries!("u", "$4", "$5"),
    ") SELECT count(*) FROM u"
);

/// Ends a lease, but keeps the key from being taken over for `hold`.
pub(super) async fn park_lease(
    store: &PgStore,
    lease: &Lease,
    hold: Duration,
    attempts: &[AcquirerAttempt],
) -> Result<bool, StoreError> {
    fenced_with_calls(store, PARK_LEASE, lease, Some(hold), attempts).await
}

/// Runs one write that ends a lease ([`RELEASE_LEASE`], [`PARK_LEASE`]), with
/// [`HistoryEvent::AcquirerCall`] entries of `attempts`; `$6` (when given)
/// is a duration in milliseconds. `true` when it changed the key row,
/// `false` when the lease was taken over (and nothing was written).
async fn fenced_with_calls(
    store: &PgStore,
    sql: &'static str,
    lease: &Lease,
    duration: Option<Duration>,
    attempts: &[AcquirerAttempt],
) -> Result<bool, StoreError> {
    let entries = Entries::of(attempts.iter().map(|a| a.to_event(&store.instance)));
    let mut query = sqlx::query_scalar::<_, i64>(sql)
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .bind(&entries.kinds)
        .bind(&entries.events);
    if let Some(duration) = duration {
        query = query.bind(millis(duration) as f64);
    }
    let done = query
        .fetch_one(&mut *store.conn().await?)
        .await
        .map_err(store_error)?;
    Ok(done == 1)
}

/// The entries of acquirer calls made under a lease that was then lost,
/// about the payment (and refund) the key points at now: one statement,
/// not fenced.
pub(super) async fn record_lost_lease_calls(
    store: &PgStore,
    lease: &Lease,
    attempts: &[AcquirerAttempt],
) -> Result<(), StoreError> {
    if attempts.is_empty() {
        return Ok(());
    }
    let entries = Entries::of(attempts.iter().map(|a| a.to_event(&store.instance)));
    sqlx::query(concat!(
        "WITH k AS (SELECT payment_id, refund_id, shop_id FROM idempotency_keys \
                    WHERE shop_id = $1 AND key = $2) ",
        insert_entries!("k", "$3", "$4")
    ))
    .bind(lease.shop_id.as_str())
    .bind(lease.key.as_str())
    .bind(&entries.kinds)
    .bind(&entries.events)
    .execute(&mut *store.conn().await?)
    .await
    .map_err(store_error)?;
    Ok(())
}

/// Deletes an unfinished key that only links to its order's payment.
pub(super) async fn abandon_key(store: &PgStore, lease: &Lease) -> Result<bool, StoreError> {
    fenced(
        store,
        "DELETE FROM idempotency_keys \
         WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
           AND recovery_point = 'order_already_paid'",
        lease,
        None,
    )
    .await
}

/// Runs one write fenced by a lease: `$1`, `$2`, `$3` are its shop, key and
/// token, `$4` (when given) a duration in milliseconds. `true` when it
/// changed the key row, `false` when the lease was taken over.
async fn fenced(
    store: &PgStore,
    sql: &'static str,
    lease: &Lease,
    duration: Option<Duration>,
) -> Result<bool, StoreError> {
    let mut query = sqlx::query(sql)
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid());
    if let Some(duration) = duration {
        query = query.bind(millis(duration) as f64);
    }
    let done = query
        .execute(&mut *store.conn().await?)
        .await
        .map_err(store_error)?;
    Ok(done.rows_affected() == 1)
}

/// The acquirer key a new payment row stores: none (migration 0025), as it
/// is derived from the payment's id; a key that is not would be stored, for
/// the row's check to refuse it rather than the key be lost.
fn stored_acquirer_key(payment: &NewPayment) -> Option<&str> {
    (payment.acquirer_key != AcquirerKey::for_payment(&payment.id))
        .then(|| payment.acquirer_key.as_str())
}

/// Binds a new payment's row after its id, in the order both inserts of a
/// payment name its columns: the shop, the key, the order, the amount and
/// its currency, the token, the acquirer key, the creation time, the
/// claiming instance, the metadata, the capture method, the hold and the
/// authorization's expiry.
fn bind_payment_row<'q>(
    query: sqlx::query::Query<'q, Postgres, PgArguments>,
    payment: &'q NewPayment,
    instance: &'q str,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    query
        .bind(payment.shop_id.as_str())
        .bind(payment.idempotency_key.as_str())
        .bind(payment.request.reference.as_str())
        .bind(payment.request.amount.minor_units())
        .bind(payment.request.amount.currency().code())
        .bind(payment.request.token.as_str())
        .bind(stored_acquirer_key(payment))
        .bind(payment.created_at)
        .bind(instance)
        .bind(payment.request.metadata.to_stored())
        .bind(payment.request.capture_method.as_str())
        .bind(initial_hold(payment))
        .bind(payment.authorization_expires_at)
}
