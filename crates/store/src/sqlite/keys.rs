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
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::{Connection, OptionalExtension, params};

use super::history::{record, repeat_columns, repeat_counts};
use super::{Result, SqliteStore, all, cancel, claim, finish, now_ms, one};
use crate::codec::{encode_headers, millis};
use crate::rows::{KeyInfoRow, KeyRow, StalledKeyRow};
use crate::stored_body;

/// The columns of a key row ([`KeyRow`]), with lease liveness judged by
/// SQLite's clock.
macro_rules! key_columns {
    () => {
        concat!(
            "shop_id, key, fingerprint, method, path, recovery_point, payment_id, \
             response_status, response_headers, response_body, \
             (lease_token IS NOT NULL AND locked_until > ",
            now_ms!(),
            ") AS lease_active, created_at AS created_at_ms, expires_at AS expires_at_ms, replays, \
             refund_id, capture_id, CASE WHEN lease_token IS NULL AND locked_until > ",
            now_ms!(),
            " THEN locked_until - ",
            now_ms!(),
            " END AS settling_ms"
        )
    };
}

/// What a new key row points at.
#[derive(Clone, Copy)]
pub(super) struct KeyTarget<'a> {
    pub(super) recovery_point: RecoveryPoint,
    pub(super) payment_id: &'a PaymentId,
    pub(super) refund_id: Option<&'a RefundId>,
    pub(super) capture_id: Option<&'a CaptureId>,
    /// The instance that takes the lease ([`SqliteStore`]'s name).
    pub(super) holder: &'a str,
}

/// Inserts a key row with a fresh lease, or re-claims an expired finished
/// one; `false` when the key exists otherwise (nothing written).
///
/// A fresh key is one insert. When the key exists, one read decides
/// whether it is a finished key whose expiry passed: then its repeats go
/// into its payment's history (as the sweep would have written them) and
/// the row is replaced; else it stays as it is. The writer is the only
/// one, so nothing changes between these statements.
pub(super) fn insert_key(
    conn: &Connection,
    claim: &ClaimRequest,
    target: KeyTarget<'_>,
    token: LeaseToken,
    timing: KeyTiming,
) -> Result<bool> {
    let mut insert = conn.prepare_cached(concat!(
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
             recovery_point, lease_token, locked_until, payment_id, refund_id, created_at, \
             expires_at, lease_holder, capture_id) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?10, ?6, ",
        now_ms!(),
        " + ?7, ?8, ?11, ",
        now_ms!(),
        ", ",
        now_ms!(),
        " + ?9, ?12, ?13) ON CONFLICT (shop_id, key) DO NOTHING"
    ))?;
    let values = params![
        claim.shop_id.as_str(),
        claim.key.as_str(),
        claim.fingerprint.as_bytes().as_slice(),
        claim.method,
        claim.path,
        token.as_uuid().to_string(),
        millis(timing.lease),
        target.payment_id.as_str(),
        millis(timing.ttl),
        target.recovery_point.as_str(),
        target.refund_id.map(RefundId::as_str),
        target.holder,
        target.capture_id.map(CaptureId::as_str),
    ];
    if insert.execute(values)? == 1 {
        return Ok(true);
    }
    if !expire_key(conn, &claim.shop_id, &claim.key)? {
        return Ok(false);
    }
    Ok(insert.execute(values)? == 1)
}

/// Deletes the key if it is finished and its expiry passed, with its
/// `key_expired` entry; `false` (nothing written) when it is not.
fn expire_key(conn: &Connection, shop_id: &ShopId, key: &IdempotencyKey) -> Result<bool> {
    let expired = conn
        .prepare_cached(concat!(
            "SELECT payment_id, refund_id, ",
            repeat_columns!(),
            " FROM idempotency_keys WHERE shop_id = ?1 AND key = ?2 \
               AND recovery_point = 'finished' AND expires_at <= ",
            now_ms!()
        ))?
        .query_row(params![shop_id.as_str(), key.as_str()], |row| {
            Ok((
                row.get::<_, Option<String>>(0)?,
                row.get::<_, Option<String>>(1)?,
                repeat_counts(row, 2),
            ))
        })
        .optional()?;
    let Some((payment_id, refund_id, repeats)) = expired else {
        return Ok(false);
    };
    conn.prepare_cached("DELETE FROM idempotency_keys WHERE shop_id = ?1 AND key = ?2")?
        .execute(params![shop_id.as_str(), key.as_str()])?;
    if let Some(payment_id) = payment_id {
        record(
            conn,
            &payment_id,
            refund_id.as_deref(),
            &HistoryEvent::KeyExpired {
                key: key.as_str().to_owned(),
                repeats: repeats?,
            },
        )?;
    }
    Ok(true)
}

/// Counts one more request with an existing key, by what it will be
/// answered, and reads it back. One statement both classifies and counts
/// (every expression of an `UPDATE` sees the row as it was): another
/// fingerprint is a mismatch (422), else a finished key a replay, else a
/// live lease a conflict (409); a request that may resume the key (its
/// lease ran out) only adds to the totals.
pub(super) fn count_repeat(
    conn: &Connection,
    shop_id: &ShopId,
    key: &IdempotencyKey,
    fingerprint: &Fingerprint,
) -> Result<Option<KeyRecord>> {
    let counted = conn
        .prepare_cached(concat!(
            "UPDATE idempotency_keys SET replays = replays + 1, last_repeat_at = ",
            now_ms!(),
            ", mismatched = mismatched + (fingerprint <> ?3), \
             last_mismatched_at = CASE WHEN fingerprint <> ?3 THEN ",
            now_ms!(),
            " ELSE last_mismatched_at END, \
             replayed = replayed + (fingerprint = ?3 AND recovery_point = 'finished'), \
             last_replayed_at = CASE WHEN fingerprint = ?3 AND recovery_point = 'finished' \
                 THEN ",
            now_ms!(),
            " ELSE last_replayed_at END, \
             conflicted = conflicted + (fingerprint = ?3 AND recovery_point <> 'finished' \
                 AND lease_token IS NOT NULL AND locked_until > ",
            now_ms!(),
            "), last_conflicted_at = CASE WHEN fingerprint = ?3 \
                 AND recovery_point <> 'finished' AND lease_token IS NOT NULL \
                 AND locked_until > ",
            now_ms!(),
            " THEN ",
            now_ms!(),
            " ELSE last_conflicted_at END \
             WHERE shop_id = ?1 AND key = ?2"
        ))?
        .execute(params![
            shop_id.as_str(),
            key.as_str(),
            fingerprint.as_bytes().as_slice()
        ])?;
    if counted == 0 {
        return Ok(None);
    }
    key_in(conn, shop_id, key)
}

/// Phase 3's fenced write of a key with its history: the final response
/// stored (as [`finish_key`]) and the entries of the answer (the acquirer
/// calls, the answer) recorded on the key's payment. `false` (nothing
/// written) when the lease was taken over.
pub(super) fn store_answer(
    conn: &Connection,
    lease: &Lease,
    response: &StoredResponse,
    ttl: Duration,
    attempts: &[AcquirerAttempt],
    instance: &str,
) -> Result<bool> {
    if !finish_key(conn, lease, response, ttl)? {
        return Ok(false);
    }
    let events = chargeonce_core::history::answered_events(lease, response, attempts, instance);
    super::history::record_about_key(conn, lease.shop_id.as_str(), lease.key.as_str(), &events)?;
    Ok(true)
}

/// Phase 3's fenced write of a key: stores the final response and ends the
/// lease, only while `lease` still holds it. `false` (nothing written) when
/// the lease was taken over.
pub(super) fn finish_key(
    conn: &Connection,
    lease: &Lease,
    response: &StoredResponse,
    ttl: Duration,
) -> Result<bool> {
    let fenced = conn
        .prepare_cached(concat!(
            "UPDATE idempotency_keys SET recovery_point = 'finished', response_status = ?4, \
                 response_headers = ?5, response_body = ?6, lease_token = NULL, \
                 locked_until = NULL, expires_at = MAX(expires_at, ",
            now_ms!(),
            " + ?7) \
             WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
               AND recovery_point <> 'finished'"
        ))?
        .execute(params![
            lease.shop_id.as_str(),
            lease.key.as_str(),
            lease.token.as_uuid().to_string(),
            i64::from(response.status),
            encode_headers(&response.headers)?,
            stored_body::uncompressed(&response.body).as_ref(),
            millis(ttl),
        ])?;
    Ok(fenced == 1)
}

/// One key of one shop, on whichever connection.
pub(super) fn key_in(
    conn: &Connection,
    shop_id: &ShopId,
    key: &IdempotencyKey,
) -> Result<Option<KeyRecord>> {
    one::<KeyRow, _>(
        conn,
        concat!(
            "SELECT ",
            key_columns!(),
            " FROM idempotency_keys WHERE shop_id = ?1 AND key = ?2"
        ),
        params![shop_id.as_str(), key.as_str()],
    )
}

#[async_trait]
impl Keys for SqliteStore {
    #[tracing::instrument(level = "debug", name = "store.claim_payment", skip_all, fields(db.system = "sqlite"))]
    async fn claim_payment(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError> {
        claim::claim_payment(self, claim, payment, timing).await
    }

    #[tracing::instrument(level = "debug", name = "store.take_over", skip_all, fields(db.system = "sqlite"))]
    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError> {
        claim::take_over(self, shop_id, key, fingerprint, lease).await
    }

    #[tracing::instrument(level = "debug", name = "store.renew_lease", skip_all, fields(db.system = "sqlite"))]
    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError> {
        claim::renew_lease(self, lease, duration).await
    }

    #[tracing::instrument(level = "debug", name = "store.release_lease", skip_all, fields(db.system = "sqlite"))]
    async fn release_lease(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) -> Result<bool, StoreError> {
        claim::release_lease(self, lease, attempts).await
    }

    #[tracing::instrument(level = "debug", name = "store.park_lease", skip_all, fields(db.system = "sqlite"))]
    async fn park_lease(
        &self,
        lease: &Lease,
        hold: Duration,
        attempts: &[AcquirerAttempt],
    ) -> Result<bool, StoreError> {
        claim::park_lease(self, lease, hold, attempts).await
    }

    #[tracing::instrument(level = "debug", name = "store.record_lost_lease_calls", skip_all, fields(db.system = "sqlite"))]
    async fn record_lost_lease_calls(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) -> Result<(), StoreError> {
        claim::record_lost_lease_calls(self, lease, attempts).await
    }

    #[tracing::instrument(level = "debug", name = "store.abandon_key", skip_all, fields(db.system = "sqlite"))]
    async fn abandon_key(&self, lease: &Lease) -> Result<bool, StoreError> {
        claim::abandon_key(self, lease).await
    }

    #[tracing::instrument(level = "debug", name = "store.claim_cancel", skip_all, fields(db.system = "sqlite"))]
    async fn claim_cancel(
        &self,
        claim: &ClaimRequest,
        payment_id: &PaymentId,
        timing: KeyTiming,
    ) -> Result<CancelClaim, StoreError> {
        cancel::claim_cancel(self, claim, payment_id, timing).await
    }

    #[tracing::instrument(level = "debug", name = "store.request_cancel", skip_all, fields(db.system = "sqlite"))]
    async fn request_cancel(
        &self,
        shop_id: &ShopId,
        payment_id: &PaymentId,
        key: Option<&IdempotencyKey>,
    ) -> Result<Option<Payment>, StoreError> {
        cancel::request_cancel(self, shop_id, payment_id, key).await
    }

    #[tracing::instrument(level = "debug", name = "store.finish", skip_all, fields(db.system = "sqlite"))]
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
    #[tracing::instrument(level = "debug", name = "store.key", skip_all, fields(db.system = "sqlite"))]
    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let (shop_id, key) = (shop_id.clone(), key.clone());
        self.read(move |conn| key_in(conn, &shop_id, &key)).await
    }

    /// One key of one shop as introspection shows it (times in unix
    /// milliseconds); an expired finished key is gone.
    #[tracing::instrument(level = "debug", name = "store.key_info", skip_all, fields(db.system = "sqlite"))]
    async fn key_info(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyInfo>, StoreError> {
        let (shop_id, key) = (shop_id.clone(), key.clone());
        self
            .read(move |conn| {
                one::<KeyInfoRow, _>(
                    conn,
                    concat!(
                        "SELECT key, recovery_point, method, path, fingerprint, \
                             created_at AS created_at_ms, last_repeat_at AS last_repeat_at_ms, \
                             replays, expires_at AS expires_at_ms, \
                             lease_token IS NOT NULL AS leased, lease_holder, \
                             locked_until AS locked_until_ms, response_status, payment_id, refund_id, \
                             capture_id, replayed, last_replayed_at AS last_replayed_at_ms, \
                             conflicted, last_conflicted_at AS last_conflicted_at_ms, \
                             mismatched, last_mismatched_at AS last_mismatched_at_ms \
                         FROM idempotency_keys WHERE shop_id = ?1 AND key = ?2 \
                           AND NOT (recovery_point = 'finished' AND expires_at <= ",
                        now_ms!(),
                        ")"
                    ),
                    params![shop_id.as_str(), key.as_str()],
                )
            })
            .await
    }

    /// Deletes up to `batch` finished keys whose expiry has passed, each with
    /// a `key_expired` entry (its repeats) in its payment's history. The keys
    /// are read first, then deleted one by one by rowid: the writer is the only
    /// one, so nothing changes between the two, and the entries are built by
    /// serde, the one shape they are read back with.
    #[tracing::instrument(level = "debug", name = "store.sweep_expired_keys", skip_all, fields(db.system = "sqlite"))]
    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError> {
        self.write(move |conn| {
            let expired = {
                let mut stmt = conn.prepare_cached(concat!(
                    "SELECT rowid, key, payment_id, refund_id, ",
                    repeat_columns!(),
                    " FROM idempotency_keys \
                         WHERE recovery_point = 'finished' AND expires_at <= ",
                    now_ms!(),
                    " ORDER BY expires_at LIMIT ?1"
                ))?;
                let mut rows = stmt.query(params![i64::from(batch)])?;
                let mut expired = Vec::new();
                while let Some(row) = rows.next()? {
                    let rowid: i64 = row.get(0)?;
                    let key: String = row.get(1)?;
                    let payment_id: Option<String> = row.get(2)?;
                    let refund_id: Option<String> = row.get(3)?;
                    let repeats = repeat_counts(row, 4)?;
                    expired.push((rowid, key, payment_id, refund_id, repeats));
                }
                expired
            };
            let mut delete =
                conn.prepare_cached("DELETE FROM idempotency_keys WHERE rowid = ?1")?;
            let mut deleted = 0u64;
            for (rowid, key, payment_id, refund_id, repeats) in expired {
                deleted += u64::try_from(delete.execute(params![rowid])?).unwrap_or(0);
                if let Some(payment_id) = payment_id {
                    record(
                        conn,
                        &payment_id,
                        refund_id.as_deref(),
                        &HistoryEvent::KeyExpired { key, repeats },
                    )?;
                }
            }
            Ok(Write::Commit(deleted))
        })
        .await
    }

    /// Unfinished keys whose lease ran out at least `idle` ago, longest idle first.
    #[tracing::instrument(level = "debug", name = "store.stalled_keys", skip_all, fields(db.system = "sqlite"))]
    async fn stalled_keys(
        &self,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<StalledKey>, StoreError> {
        self.read(move |conn| {
            all::<StalledKeyRow, _>(
                conn,
                concat!(
                    "SELECT shop_id, key, fingerprint FROM idempotency_keys \
                     WHERE recovery_point <> 'finished' \
                       AND (locked_until IS NULL OR locked_until <= ",
                    now_ms!(),
                    " - ?1) ORDER BY locked_until NULLS FIRST LIMIT ?2"
                ),
                params![millis(idle), i64::from(limit)],
            )
        })
        .await
    }
}
