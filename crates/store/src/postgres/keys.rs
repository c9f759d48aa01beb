//! The key row: its insertion and fenced finish (shared by the claims and
//! finishes of payments and refunds), reading it back, and sweeping and
//! listing keys.

use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::CaptureId;
use chargeonce_core::history::{AcquirerAttempt, HistoryEvent};
use chargeonce_core::store::Keys;
use chargeonce_core::{
    Acquired, CancelClaim, Claim, ClaimRequest, Fingerprint, FinishOutcome, IdempotencyKey,
    KeyInfo, KeyRecord, KeyTiming, Lease, LeaseToken, NewPayment, Payment, PaymentId,
    RecoveryPoint, RefundId, Settlement, ShopId, StalledKey, StoreError, StoredResponse,
};
use sqlx::postgres::PgArguments;
use sqlx::{FromRow, PgExecutor, Postgres, Row, Transaction};

use super::finish_parts::{answer_stored, bind_answer};
use super::history::{Entries, RepeatsRow, insert_entries};
use super::{PgStore, cancel, claim, finish, pending, store_error};
use crate::codec::millis;
use crate::columns::payment_columns;
use crate::rows::{KeyInfoRow, KeyRow, PaymentRow, StalledKeyRow};

/// The columns of a key row ([`KeyRow`]), with lease liveness and times
/// judged by the database.
macro_rules! key_columns {
    () => {
        "shop_id, key, fingerprint, method, path, recovery_point, payment_id, \
         response_status::bigint AS response_status, response_headers, response_body, \
         (lease_token IS NOT NULL AND locked_until > now()) AS lease_active, refund_id, capture_id, \
         CASE WHEN lease_token IS NULL AND locked_until > now() \
              THEN ceil(extract(epoch FROM locked_until - now()) * 1000)::bigint END AS settling_ms, \
         floor(extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms, \
         floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_at_ms, replays"
    };
}

/// What a new key row points at.
#[derive(Clone, Copy)]
pub(super) struct KeyTarget<'a> {
    pub(super) recovery_point: RecoveryPoint,
    pub(super) payment_id: &'a PaymentId,
    pub(super) refund_id: Option<&'a RefundId>,
    pub(super) capture_id: Option<&'a CaptureId>,
    /// The instance that takes the lease ([`PgStore`]'s name).
    pub(super) holder: &'a str,
}

/// Inserts the key row; `false` when the key exists and is not an expired
/// finished key (nothing written).
pub(super) async fn insert_key(
    tx: &mut Transaction<'static, Postgres>,
    claim: &ClaimRequest,
    target: KeyTarget<'_>,
    lease: LeaseToken,
    timing: KeyTiming,
) -> Result<bool, StoreError> {
    // A fresh key: one statement. An existing one is claimed again only
    // when it is finished and expired: deleted first (its repeats left in
    // its payment's history), then inserted anew.
    if try_insert_key(tx, claim, target, lease, timing).await? {
        return Ok(true);
    }
    if !expire_key(tx, &claim.shop_id, &claim.key).await? {
        return Ok(false);
    }
    try_insert_key(tx, claim, target, lease, timing).await
}

/// What [`insert_key_locking_payment`] did.
pub(super) enum KeyClaim {
    /// The key row is inserted in the transaction, and the key's payment
    /// locked `FOR UPDATE` if it exists (`None`: no such payment of the
    /// shop).
    Inserted(Transaction<'static, Postgres>, Option<Box<LockedPayment>>),
    /// The key exists and is not an expired finished key: nothing was
    /// written or locked, the transaction is rolled back, and the repeat
    /// was counted and the key read back in a new statement (its snapshot
    /// includes the commit of whoever inserted the key). `None`: the key
    /// is gone meanwhile (swept, or finished and expired): claim again.
    Exists(Option<Box<KeyRecord>>),
}

/// A payment locked by [`insert_key_locking_payment`].
pub(super) struct LockedPayment {
    /// The payment.
    pub(super) payment: Payment,
    /// What its refunds in flight and done have reserved, in minor units.
    pub(super) refund_reserved_minor: i64,
}

/// [`insert_key`] and the lock of the key's payment (`target.payment_id`)
/// in one statement, for the claims that act on an existing payment
/// (refund, capture, void), and what a claim does when the key exists
/// (see [`KeyClaim::Exists`]). The payment's row lock serialises the
/// claims on one payment, so the judgement that follows sees every
/// committed reservation.
///
/// One round trip instead of two: the statement locks the payment only
/// when it inserted the key (the key row first, the payment row second,
/// as in every transaction that takes both), so a key that exists locks
/// nothing. The payment is found by its primary key alone, its shop
/// compared with `IS NOT DISTINCT FROM` (see `refunds::settle_refund`).
pub(super) async fn insert_key_locking_payment(
    store: &PgStore,
    mut tx: Transaction<'static, Postgres>,
    claim: &ClaimRequest,
    target: KeyTarget<'_>,
    lease: LeaseToken,
    timing: KeyTiming,
) -> Result<KeyClaim, StoreError> {
    let mut inserted =
        try_insert_key_locking_payment(&mut tx, claim, target, lease, timing).await?;
    if inserted.is_none() && expire_key(&mut tx, &claim.shop_id, &claim.key).await? {
        inserted = try_insert_key_locking_payment(&mut tx, claim, target, lease, timing).await?;
    }
    if let Some(locked) = inserted {
        return Ok(KeyClaim::Inserted(tx, locked));
    }
    tx.rollback().await.map_err(store_error)?;
    let record = count_repeat(store, claim).await?;
    Ok(KeyClaim::Exists(record.map(Box::new)))
}

/// The key row's insertion unless the key exists (`$1` to `$13`, bound by
/// [`bind_key`]), returning a row when it inserted.
macro_rules! insert_key_statement {
    () => {
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
             recovery_point, lease_token, locked_until, payment_id, created_at, expires_at, \
             refund_id, lease_holder, capture_id) \
         VALUES ($1, $2, $3, $4, $5, $10, $6, \
             clock_timestamp() + $7::float8 * interval '1 millisecond', $8, now(), \
             now() + $9::float8 * interval '1 millisecond', $11, $12, $13) \
         ON CONFLICT (shop_id, key) DO NOTHING \
         RETURNING 1"
    };
}

/// Binds the parameters every statement that inserts a key row gives it
/// first: `$1` the shop, `$2` the key, `$3` the fingerprint, `$4` the
/// method, `$5` the path, `$6` the lease token, `$7` the lease in
/// milliseconds, `$8` the payment, `$9` the time to live in milliseconds
/// (this statement's and the one-statement claim of a payment's).
pub(super) fn bind_key_head<'q>(
    query: sqlx::query::Query<'q, Postgres, PgArguments>,
    claim: &'q ClaimRequest,
    payment_id: &'q PaymentId,
    lease: LeaseToken,
    timing: KeyTiming,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    query
        .bind(claim.shop_id.as_str())
        .bind(claim.key.as_str())
        .bind(claim.fingerprint.as_bytes().as_slice())
        .bind(&claim.method)
        .bind(&claim.path)
        .bind(lease.as_uuid())
        .bind(millis(timing.lease) as f64)
        .bind(payment_id.as_str())
        .bind(millis(timing.ttl) as f64)
}

/// Binds `$1` to `$13` of [`insert_key_statement`].
fn bind_key<'q>(
    query: sqlx::query::Query<'q, Postgres, PgArguments>,
    claim: &'q ClaimRequest,
    target: KeyTarget<'q>,
    lease: LeaseToken,
    timing: KeyTiming,
) -> sqlx::query::Query<'q, Postgres, PgArguments> {
    bind_key_head(query, claim, target.payment_id, lease, timing)
        .bind(target.recovery_point.as_str())
        .bind(target.refund_id.map(RefundId::as_str))
        .bind(target.holder)
        .bind(target.capture_id.map(CaptureId::as_str))
}

/// Inserts the key row unless the key exists.
async fn try_insert_key(
    tx: &mut Transaction<'static, Postgres>,
    claim: &ClaimRequest,
    target: KeyTarget<'_>,
    lease: LeaseToken,
    timing: KeyTiming,
) -> Result<bool, StoreError> {
    let query = bind_key(
        sqlx::query(insert_key_statement!()),
        claim,
        target,
        lease,
        timing,
    );
    let row = query.fetch_optional(&mut **tx).await.map_err(store_error)?;
    Ok(row.is_some())
}

/// Inserts the key row unless the key exists (`None`), and then locks its
/// payment if there is one.
async fn try_insert_key_locking_payment(
    tx: &mut Transaction<'static, Postgres>,
    claim: &ClaimRequest,
    target: KeyTarget<'_>,
    lease: LeaseToken,
    timing: KeyTiming,
) -> Result<Option<Option<Box<LockedPayment>>>, StoreError> {
    let query = bind_key(
        sqlx::query(concat!(
            "WITH key_row AS (",
            insert_key_statement!(),
            ") SELECT claimed.inserted, p.* \
             FROM (SELECT EXISTS (SELECT 1 FROM key_row) AS inserted) claimed \
             LEFT JOIN LATERAL ( \
                 SELECT ",
            payment_columns!(),
            ", refund_reserved_minor FROM payments \
                 WHERE id = $8 AND shop_id IS NOT DISTINCT FROM $1 AND claimed.inserted \
                 FOR UPDATE) p ON true"
        )),
        claim,
        target,
        lease,
        timing,
    );
    let row = query.fetch_one(&mut **tx).await.map_err(store_error)?;
    if !row.try_get::<bool, _>("inserted").map_err(store_error)? {
        return Ok(None);
    }
    if row
        .try_get::<Option<String>, _>("id")
        .map_err(store_error)?
        .is_none()
    {
        return Ok(Some(None));
    }
    let payment = Payment::try_from(PaymentRow::from_row(&row).map_err(store_error)?)?;
    let refund_reserved_minor = row.try_get("refund_reserved_minor").map_err(store_error)?;
    Ok(Some(Some(Box::new(LockedPayment {
        payment,
        refund_reserved_minor,
    }))))
}

/// Counts one more request with an existing key and reads the key back,
/// in one statement whose snapshot includes every commit made before it.
/// `None` when the key is gone (swept) or is a finished key that expired,
/// which a claim treats as new.
///
/// The repeat is classified by what the engine will answer it, from the
/// row as this statement found it: another fingerprint is a 422
/// (mismatch), a finished key a replay, a live lease a 409 (conflict);
/// anything else (an expired lease the engine takes over, a parked key)
/// only counts in the totals.
pub(super) async fn count_repeat(
    store: &PgStore,
    claim: &ClaimRequest,
) -> Result<Option<KeyRecord>, StoreError> {
    super::one(
        store,
        sqlx::query_as::<_, KeyRow>(concat!(
            "UPDATE idempotency_keys SET replays = replays + 1, last_repeat_at = now(), \
                 mismatched = mismatched + CASE WHEN fingerprint <> $3 THEN 1 ELSE 0 END, \
                 last_mismatched_at = CASE WHEN fingerprint <> $3 THEN now() \
                     ELSE last_mismatched_at END, \
                 replayed = replayed + CASE WHEN fingerprint = $3 \
                     AND recovery_point = 'finished' THEN 1 ELSE 0 END, \
                 last_replayed_at = CASE WHEN fingerprint = $3 \
                     AND recovery_point = 'finished' THEN now() ELSE last_replayed_at END, \
                 conflicted = conflicted + CASE WHEN fingerprint = $3 \
                     AND recovery_point <> 'finished' AND lease_token IS NOT NULL \
                     AND locked_until > now() THEN 1 ELSE 0 END, \
                 last_conflicted_at = CASE WHEN fingerprint = $3 \
                     AND recovery_point <> 'finished' AND lease_token IS NOT NULL \
                     AND locked_until > now() THEN now() ELSE last_conflicted_at END \
             WHERE shop_id = $1 AND key = $2 \
               AND NOT (recovery_point = 'finished' AND expires_at <= now()) RETURNING ",
            key_columns!()
        ))
        .bind(claim.shop_id.as_str())
        .bind(claim.key.as_str())
        .bind(claim.fingerprint.as_bytes().as_slice()),
    )
    .await
}

/// Phase 3's fenced write of a key: stores the final response and ends the
/// lease, only while `lease` still holds it, with the history `entries`
/// (about the key's payment and refund) in the same statement. `false`
/// (nothing written) when the lease was taken over. A payment the key
/// leaves pending enters the pending queue in the same statement: it is no
/// longer in flight ([`super::pending`]).
///
/// That payment is found by its id as a value (the key row's, through a
/// scalar subquery) and its shop with `IS NOT DISTINCT FROM`, not by a join
/// to the key row: a connection keeps the generic plan it settles on after
/// five runs, and on a payments table without statistics yet (a new
/// database) the join was planned as a scan of every payment, run again by
/// each finish of a refund, capture or void until the connection ended.
pub(super) async fn finish_key<'e>(
    executor: impl PgExecutor<'e>,
    lease: &Lease,
    response: &StoredResponse,
    ttl: Duration,
    entries: &Entries,
) -> Result<bool, StoreError> {
    let statement = sqlx::query(concat!(
        "WITH f AS (",
        answer_stored!("$1", "$2", "$3", "$4", "$5", "$6", "$7"),
        " RETURNING payment_id, refund_id, shop_id), \
         queued AS ( \
             INSERT INTO pending_payments (created_at, payment_id, shop_id) \
             SELECT p.created_at, p.id, p.shop_id FROM payments p \
             WHERE p.id = (SELECT payment_id FROM f) AND p.shop_id IS NOT DISTINCT FROM $1 \
               AND p.status = 'pending' ON CONFLICT DO NOTHING), \
         h AS (",
        insert_entries!("f", "$8", "$9"),
        ") SELECT count(*) FROM f"
    ))
    .bind(lease.shop_id.as_str())
    .bind(lease.key.as_str())
    .bind(lease.token.as_uuid());
    let fenced: i64 = bind_answer(statement, response, ttl)?
        .bind(&entries.kinds)
        .bind(&entries.events)
        .fetch_one(executor)
        .await
        .map_err(store_error)?
        .try_get(0)
        .map_err(store_error)?;
    Ok(fenced == 1)
}

/// What a deleted key row returns for its `KeyExpired` entry; times to the
/// millisecond, as every other read of a key gives them (and SQLite keeps them).
macro_rules! swept_columns {
    () => {
        "shop_id, key, payment_id, refund_id, \
         replayed, date_trunc('milliseconds', last_replayed_at) AS last_replayed_at, \
         conflicted, date_trunc('milliseconds', last_conflicted_at) AS last_conflicted_at, \
         mismatched, date_trunc('milliseconds', last_mismatched_at) AS last_mismatched_at"
    };
}

/// Deletes a finished key whose expiry passed, before it is claimed again,
/// leaving its repeats in its payment's history as the sweep would
/// (otherwise the claim's overwrite would lose them). Nothing when the key
/// is not such a key (`false`).
async fn expire_key(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    key: &IdempotencyKey,
) -> Result<bool, StoreError> {
    let expired = sqlx::query_as::<_, SweptRow>(concat!(
        "DELETE FROM idempotency_keys \
         WHERE shop_id = $1 AND key = $2 AND recovery_point = 'finished' \
           AND expires_at <= now() \
         RETURNING ",
        swept_columns!()
    ))
    .bind(shop_id.as_str())
    .bind(key.as_str())
    .fetch_all(&mut **tx)
    .await
    .map_err(store_error)?;
    let deleted = !expired.is_empty();
    record_expired(tx, expired).await?;
    Ok(deleted)
}

/// Writes the `KeyExpired` entry of each deleted key row that has a payment.
async fn record_expired(
    tx: &mut Transaction<'static, Postgres>,
    swept: Vec<SweptRow>,
) -> Result<(), StoreError> {
    let mut shops = Vec::new();
    let mut payments = Vec::new();
    let mut refunds = Vec::new();
    let mut events = Vec::new();
    for row in swept {
        let Some(payment_id) = row.payment_id else {
            continue;
        };
        let event = HistoryEvent::KeyExpired {
            repeats: row.repeats.counts(),
            key: row.repeats.key,
        };
        shops.push(row.shop_id);
        payments.push(payment_id);
        refunds.push(row.refund_id);
        events.push(event.to_json());
    }
    if !events.is_empty() {
        sqlx::query(
            "INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event) \
             SELECT e.payment_id, e.refund_id, e.shop_id, 'key_expired', e.event \
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY \
                 AS e(payment_id, refund_id, event, shop_id, n) \
             ORDER BY e.n",
        )
        .bind(payments)
        .bind(refunds)
        .bind(events)
        .bind(shops)
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
    }
    Ok(())
}

/// A swept key row: what its history entry needs.
#[derive(sqlx::FromRow)]
struct SweptRow {
    shop_id: String,
    payment_id: Option<String>,
    refund_id: Option<String>,
    #[sqlx(flatten)]
    repeats: RepeatsRow,
}

#[async_trait]
impl Keys for PgStore {
    #[tracing::instrument(level = "debug", name = "store.claim_payment", skip_all, fields(db.system = "postgresql"))]
    async fn claim_payment(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError> {
        claim::claim_payment(self, claim, payment, timing).await
    }

    #[tracing::instrument(level = "debug", name = "store.take_over", skip_all, fields(db.system = "postgresql"))]
    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError> {
        claim::take_over(self, shop_id, key, fingerprint, lease).await
    }

    #[tracing::instrument(level = "debug", name = "store.renew_lease", skip_all, fields(db.system = "postgresql"))]
    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError> {
        claim::renew_lease(self, lease, duration).await
    }

    #[tracing::instrument(level = "debug", name = "store.release_lease", skip_all, fields(db.system = "postgresql"))]
    async fn release_lease(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) -> Result<bool, StoreError> {
        claim::release_lease(self, lease, attempts).await
    }

    #[tracing::instrument(level = "debug", name = "store.park_lease", skip_all, fields(db.system = "postgresql"))]
    async fn park_lease(
        &self,
        lease: &Lease,
        hold: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<bool, StoreError> {
        claim::park_lease(self, lease, hold, attempts).await
    }

    #[tracing::instrument(level = "debug", name = "store.record_lost_lease_calls", skip_all, fields(db.system = "postgresql"))]
    async fn record_lost_lease_calls(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) -> Result<(), StoreError> {
        claim::record_lost_lease_calls(self, lease, attempts).await
    }

    #[tracing::instrument(level = "debug", name = "store.abandon_key", skip_all, fields(db.system = "postgresql"))]
    async fn abandon_key(&self, lease: &Lease) -> Result<bool, StoreError> {
        claim::abandon_key(self, lease).await
    }

    #[tracing::instrument(level = "debug", name = "store.claim_cancel", skip_all, fields(db.system = "postgresql"))]
    async fn claim_cancel(
        &self,
        claim: &ClaimRequest,
        payment_id: &PaymentId,
        timing: KeyTiming,
    ) -> Result<CancelClaim, StoreError> {
        cancel::claim_cancel(self, claim, payment_id, timing).await
    }

    #[tracing::instrument(level = "debug", name = "store.request_cancel", skip_all, fields(db.system = "postgresql"))]
    async fn request_cancel(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        key: Option<&IdempotencyKey>,
    ) -> Result<Option<Payment>, StoreError> {
        cancel::request_cancel(self, shop_id, payment_id, key).await
    }

    #[tracing::instrument(level = "debug", name = "store.finish", skip_all, fields(db.system = "postgresql"))]
    async fn finish(
        &self,
        lease: &Lease,
        settlement: Option<(&Payment, &Settlement)>,
        response: &StoredResponse,
        ttl: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<FinishOutcome, StoreError> {
        finish::finish(self, lease, settlement, response, ttl, attempts).await
    }

    /// One key of one shop.
    #[tracing::instrument(level = "debug", name = "store.key", skip_all, fields(db.system = "postgresql"))]
    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, KeyRow>(concat!(
                "SELECT ",
                key_columns!(),
                " FROM idempotency_keys WHERE shop_id = $1 AND key = $2"
            ))
            .bind(shop_id.as_str())
            .bind(key.as_str()),
        )
        .await
    }

    /// One key of one shop as introspection shows it (times in unix
    /// milliseconds, by the database's clock); an expired finished key is gone.
    #[tracing::instrument(level = "debug", name = "store.key_info", skip_all, fields(db.system = "postgresql"))]
    async fn key_info(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyInfo>, StoreError> {
        super::one(
            self,
            sqlx::query_as::<_, KeyInfoRow>(
                "SELECT key, recovery_point, method, path, fingerprint, \
                     floor(extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms, \
                     floor(extract(epoch FROM last_repeat_at) * 1000)::bigint AS last_repeat_at_ms, \
                     replays, floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_at_ms, \
                     lease_token IS NOT NULL AS leased, lease_holder, \
                     floor(extract(epoch FROM locked_until) * 1000)::bigint AS locked_until_ms, \
                     response_status::bigint AS response_status, payment_id, refund_id, \
                     capture_id, replayed, \
                     floor(extract(epoch FROM last_replayed_at) * 1000)::bigint AS last_replayed_at_ms, \
                     conflicted, \
                     floor(extract(epoch FROM last_conflicted_at) * 1000)::bigint AS last_conflicted_at_ms, \
                     mismatched, \
                     floor(extract(epoch FROM last_mismatched_at) * 1000)::bigint AS last_mismatched_at_ms \
                 FROM idempotency_keys WHERE shop_id = $1 AND key = $2 \
                   AND NOT (recovery_point = 'finished' AND expires_at <= now())",
            )
            .bind(shop_id.as_str())
            .bind(key.as_str()),
        )
        .await
    }

    /// Deletes up to `batch` finished keys whose expiry has passed, and writes
    /// into each one's payment history how often it was repeated
    /// ([`HistoryEvent::KeyExpired`]), in the same transaction.
    #[tracing::instrument(level = "debug", name = "store.sweep_expired_keys", skip_all, fields(db.system = "postgresql"))]
    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError> {
        let mut tx = self.conns.begin().await.map_err(store_error)?;
        let swept = sqlx::query_as::<_, SweptRow>(concat!(
            "DELETE FROM idempotency_keys WHERE (shop_id, key) IN ( \
                 SELECT shop_id, key FROM idempotency_keys \
                 WHERE recovery_point = 'finished' AND expires_at <= now() \
                 ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) \
             RETURNING ",
            swept_columns!()
        ))
        .bind(i64::from(batch))
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        let count = swept.len() as u64;
        record_expired(&mut tx, swept).await?;
        pending::drop_settled(&mut tx).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(count)
    }

    /// Unfinished keys whose lease ran out at least `idle` ago, longest idle first.
    #[tracing::instrument(level = "debug", name = "store.stalled_keys", skip_all, fields(db.system = "postgresql"))]
    async fn stalled_keys(
        &self,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<StalledKey>, StoreError> {
        super::all(
            self,
            sqlx::query_as::<_, StalledKeyRow>(
                "SELECT shop_id, key, fingerprint FROM idempotency_keys \
                 WHERE recovery_point <> 'finished' \
                   AND (locked_until IS NULL \
                        OR locked_until <= now() - $1::float8 * interval '1 millisecond') \
                 ORDER BY locked_until NULLS FIRST LIMIT $2",
            )
            .bind(millis(idle) as f64)
            .bind(i64::from(limit)),
        )
        .await
    }
}
