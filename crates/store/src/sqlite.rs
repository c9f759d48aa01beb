//! The SQLite store: the embedded default, one file, one process.
//!
//! One writer connection and a small pool of readers over a WAL file with
//! `synchronous=FULL`. Write transactions begin `IMMEDIATE`, so they never fail
//! half-way when upgrading to a write. The clock is SQLite's (the process's host).

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::events::{
    AttemptOutcome, DueEvent, Event, EventId, EventQuery, NewEvent, PARKED_UNTIL_MS,
    WebhookEndpoint,
};
use chargeonce_core::{
    Acquired, AcquirerKey, Claim, ClaimRequest, EventRecorded, Fingerprint, FinishOutcome,
    IdempotencyKey, InboundEvent, KeyRecord, KeyTiming, Lease, LeaseToken, NewPayment, NewRefund,
    Payment, PaymentId, RecoveryPoint, Reference, Refund, RefundClaim, RefundId, RefundRefusal,
    RefundSettlement, RefundStatus, SecretHash, SettleOutcome, Settlement, ShopId, StalledKey,
    Store, StoreError, StoredResponse,
};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use time::OffsetDateTime;

use crate::PoolConfig;
use crate::codec::{
    EventColumns, KeyColumns, PaymentColumns, RefundColumns, attempt_columns, encode_headers,
    endpoint, event_result, millis, new_refund_row, refund_settlement_columns, reservation,
    stalled_key, store_error,
};

/// SQLite's clock in unix milliseconds.
macro_rules! now_ms {
    () => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
}

/// The columns of a key row, with lease liveness judged by SQLite's clock.
macro_rules! key_columns {
    () => {
        concat!(
            "shop_id, key, fingerprint, method, path, recovery_point, payment_id, \
             response_status, response_headers, response_body, \
             (lease_token IS NOT NULL AND locked_until > ",
            now_ms!(),
            ") AS lease_active, created_at AS created_at_ms, expires_at AS expires_at_ms, replays"
        )
    };
}

/// The columns of a payment row.
macro_rules! payment_columns {
    () => {
        "id, shop_id, idempotency_key, reference, amount_minor, currency, token, status, \
         acquirer_key, provider_payment_id, decline_code, created_at, refunded_minor"
    };
}

/// The columns of a refund row.
macro_rules! refund_columns {
    () => {
        "id, shop_id, payment_id, idempotency_key, amount_minor, currency, status, \
         acquirer_key, provider_refund_id, failure_code, created_at"
    };
}

/// The columns of an event row (times are unix milliseconds already).
macro_rules! event_columns {
    () => {
        "seq, id, shop_id, event_type, payment_id, refund_id, payload, \
         created_at AS created_at_ms, attempts, next_attempt_at AS next_attempt_at_ms, \
         delivered_at AS delivered_at_ms, gave_up_at AS gave_up_at_ms, last_status, last_error"
    };
}

/// [`Store`] on an SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    readers: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if missing) an `sqlite://PATH` database and runs the migrations.
    pub async fn connect(url: &str, config: &PoolConfig) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Other(format!("bad SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        // No ping before each acquire (see the PostgreSQL store).
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(config.acquire_timeout)
            .connect_with(options.clone())
            .await
            .map_err(store_error)?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&writer)
            .await
            .map_err(|e| StoreError::Other(format!("migration failed: {e}")))?;
        let readers = SqlitePoolOptions::new()
            .max_connections(config.max_connections.clamp(1, 8))
            .test_before_acquire(false)
            .acquire_timeout(config.acquire_timeout)
            .connect_with(options.read_only(true))
            .await
            .map_err(store_error)?;
        Ok(Self { writer, readers })
    }

    /// Closes every connection; later calls fail as `Unavailable`.
    pub async fn close(&self) {
        self.writer.close().await;
        self.readers.close().await;
    }

    /// Phase 3's fenced write of a key: stores the final response and ends the
    /// lease, only while `lease` still holds it. `false` (nothing written) when
    /// the lease was taken over.
    async fn finish_key(
        tx: &mut Transaction<'static, Sqlite>,
        lease: &Lease,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let fenced = sqlx::query(concat!(
            "UPDATE idempotency_keys SET recovery_point = 'finished', response_status = ?4, \
                     response_headers = ?5, response_body = ?6, lease_token = NULL, \
                     locked_until = NULL, expires_at = MAX(expires_at, ",
            now_ms!(),
            " + ?7) \
                 WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
                   AND recovery_point <> 'finished'"
        ))
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid().to_string())
        .bind(i64::from(response.status))
        .bind(encode_headers(&response.headers)?)
        .bind(response.body.as_slice())
        .bind(millis(ttl))
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
        Ok(fenced.rows_affected() == 1)
    }

    /// Writes a merchant event in the transaction of its transition.
    async fn insert_event(
        tx: &mut Transaction<'static, Sqlite>,
        event: Option<NewEvent>,
    ) -> Result<(), StoreError> {
        let Some(event) = event else { return Ok(()) };
        // A shop without a webhook URL gets its events parked (not due), so
        // the relay's scan of due events never reads them; set_webhook makes
        // them due.
        let inserted = sqlx::query(concat!(
            "INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload, \
                 created_at, due_since, next_attempt_at) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ", CASE WHEN s.webhook_url IS NULL THEN ?7 ELSE ",
            now_ms!(),
            " END FROM shops s WHERE s.id = ?2"
        ))
        .bind(event.id.as_str())
        .bind(event.shop_id.as_str())
        .bind(event.event_type.as_str())
        .bind(event.payment_id.as_str())
        .bind(event.refund_id.as_ref().map(RefundId::as_str))
        .bind(event.payload.as_slice())
        .bind(PARKED_UNTIL_MS)
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
        if inserted.rows_affected() != 1 {
            return Err(StoreError::Corrupt(format!(
                "event {} for unknown shop {}",
                event.id, event.shop_id
            )));
        }
        Ok(())
    }

    async fn write_tx(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(store_error)
    }

    /// Counts one more request with an existing key and reads it back.
    async fn count_repeat_in(
        tx: &mut Transaction<'static, Sqlite>,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "UPDATE idempotency_keys SET replays = replays + 1 \
             WHERE shop_id = ?1 AND key = ?2 RETURNING ",
            key_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(key.as_str())
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)?;
        row.map(|row| key_from_row(&row)).transpose()
    }

    /// Inserts the payment, or links the order's live payment when it has one.
    async fn insert_payment(
        tx: &mut Transaction<'static, Sqlite>,
        payment: &NewPayment,
    ) -> Result<Option<(RecoveryPoint, Payment)>, StoreError> {
        let inserted = sqlx::query(concat!(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9, ",
            now_ms!(),
            ") ON CONFLICT (shop_id, reference) WHERE status IN ('pending', 'succeeded') \
             DO NOTHING RETURNING 1"
        ))
        .bind(payment.id.as_str())
        .bind(payment.shop_id.as_str())
        .bind(payment.idempotency_key.as_str())
        .bind(payment.request.reference.as_str())
        .bind(payment.request.amount.minor_units())
        .bind(payment.request.amount.currency().code())
        .bind(payment.request.token.as_str())
        .bind(payment.acquirer_key.as_str())
        .bind(unix_ms(payment.created_at))
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)?;
        if inserted.is_some() {
            return Ok(Some((RecoveryPoint::PaymentCreated, payment.to_payment())));
        }
        // The writer holds the database lock: the live payment is there to read.
        let existing = sqlx::query(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = ?1 AND reference = ?2 \
              AND status IN ('pending', 'succeeded')"
        ))
        .bind(payment.shop_id.as_str())
        .bind(payment.request.reference.as_str())
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)?;
        let Some(row) = existing else { return Ok(None) };
        let existing = payment_from_row(&row)?;
        sqlx::query(
            "UPDATE idempotency_keys SET payment_id = ?3, recovery_point = 'order_already_paid' \
             WHERE shop_id = ?1 AND key = ?2",
        )
        .bind(payment.shop_id.as_str())
        .bind(payment.idempotency_key.as_str())
        .bind(existing.id.as_str())
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
        Ok(Some((RecoveryPoint::OrderAlreadyPaid, existing)))
    }
}

fn unix_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn from_unix_ms(ms: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| StoreError::Corrupt(format!("timestamp {ms}: {e}")))
}

fn event_from_row(row: &SqliteRow) -> Result<(i64, Event), StoreError> {
    EventColumns {
        seq: row.try_get("seq").map_err(store_error)?,
        id: row.try_get("id").map_err(store_error)?,
        shop_id: row.try_get("shop_id").map_err(store_error)?,
        event_type: row.try_get("event_type").map_err(store_error)?,
        payment_id: row.try_get("payment_id").map_err(store_error)?,
        refund_id: row.try_get("refund_id").map_err(store_error)?,
        payload: row.try_get("payload").map_err(store_error)?,
        created_at_ms: row.try_get("created_at_ms").map_err(store_error)?,
        attempts: row.try_get("attempts").map_err(store_error)?,
        next_attempt_at_ms: row.try_get("next_attempt_at_ms").map_err(store_error)?,
        delivered_at_ms: row.try_get("delivered_at_ms").map_err(store_error)?,
        gave_up_at_ms: row.try_get("gave_up_at_ms").map_err(store_error)?,
        last_status: row.try_get("last_status").map_err(store_error)?,
        last_error: row.try_get("last_error").map_err(store_error)?,
    }
    .into_event()
}

fn payment_from_row(row: &SqliteRow) -> Result<Payment, StoreError> {
    let created_at: i64 = row.try_get("created_at").map_err(store_error)?;
    let columns = PaymentColumns {
        id: row.try_get("id").map_err(store_error)?,
        shop_id: row.try_get("shop_id").map_err(store_error)?,
        idempotency_key: row.try_get("idempotency_key").map_err(store_error)?,
        reference: row.try_get("reference").map_err(store_error)?,
        amount_minor: row.try_get("amount_minor").map_err(store_error)?,
        currency: row.try_get("currency").map_err(store_error)?,
        token: row.try_get("token").map_err(store_error)?,
        status: row.try_get("status").map_err(store_error)?,
        acquirer_key: row.try_get("acquirer_key").map_err(store_error)?,
        provider_payment_id: row.try_get("provider_payment_id").map_err(store_error)?,
        decline_code: row.try_get("decline_code").map_err(store_error)?,
        created_at: from_unix_ms(created_at)?,
        refunded_minor: row.try_get("refunded_minor").map_err(store_error)?,
    };
    columns.into_payment()
}

fn refund_from_row(row: &SqliteRow) -> Result<Refund, StoreError> {
    let created_at: i64 = row.try_get("created_at").map_err(store_error)?;
    let columns = RefundColumns {
        id: row.try_get("id").map_err(store_error)?,
        shop_id: row.try_get("shop_id").map_err(store_error)?,
        payment_id: row.try_get("payment_id").map_err(store_error)?,
        idempotency_key: row.try_get("idempotency_key").map_err(store_error)?,
        amount_minor: row.try_get("amount_minor").map_err(store_error)?,
        currency: row.try_get("currency").map_err(store_error)?,
        status: row.try_get("status").map_err(store_error)?,
        acquirer_key: row.try_get("acquirer_key").map_err(store_error)?,
        provider_refund_id: row.try_get("provider_refund_id").map_err(store_error)?,
        failure_code: row.try_get("failure_code").map_err(store_error)?,
        created_at: from_unix_ms(created_at)?,
    };
    columns.into_refund()
}

fn key_from_row(row: &SqliteRow) -> Result<KeyRecord, StoreError> {
    let columns = KeyColumns {
        shop_id: row.try_get("shop_id").map_err(store_error)?,
        key: row.try_get("key").map_err(store_error)?,
        fingerprint: row.try_get("fingerprint").map_err(store_error)?,
        method: row.try_get("method").map_err(store_error)?,
        path: row.try_get("path").map_err(store_error)?,
        recovery_point: row.try_get("recovery_point").map_err(store_error)?,
        payment_id: row.try_get("payment_id").map_err(store_error)?,
        response_status: row.try_get("response_status").map_err(store_error)?,
        response_headers: row.try_get("response_headers").map_err(store_error)?,
        response_body: row.try_get("response_body").map_err(store_error)?,
        lease_active: row.try_get("lease_active").map_err(store_error)?,
        created_at_ms: row.try_get("created_at_ms").map_err(store_error)?,
        expires_at_ms: row.try_get("expires_at_ms").map_err(store_error)?,
        replays: row.try_get("replays").map_err(store_error)?,
    };
    columns.into_record()
}

#[async_trait]
impl Store for SqliteStore {
    async fn claim_payment(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError> {
        let token = LeaseToken::generate();
        let mut tx = self.write_tx().await?;
        let inserted = sqlx::query(concat!(
            "INSERT INTO idempotency_keys AS k (shop_id, key, fingerprint, method, path, \
                 recovery_point, lease_token, locked_until, payment_id, created_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'payment_created', ?6, ",
            now_ms!(),
            " + ?7, ?8, ",
            now_ms!(),
            ", ",
            now_ms!(),
            " + ?9) \
             ON CONFLICT (shop_id, key) DO UPDATE SET \
                 fingerprint = excluded.fingerprint, method = excluded.method, \
                 path = excluded.path, recovery_point = excluded.recovery_point, \
                 lease_token = excluded.lease_token, locked_until = excluded.locked_until, \
                 payment_id = excluded.payment_id, refund_id = excluded.refund_id, \
                 response_status = NULL, \
                 response_headers = NULL, response_body = NULL, \
                 created_at = excluded.created_at, expires_at = excluded.expires_at \
             WHERE k.recovery_point = 'finished' AND k.expires_at <= ",
            now_ms!(),
            " RETURNING 1"
        ))
        .bind(claim.shop_id.as_str())
        .bind(claim.key.as_str())
        .bind(claim.fingerprint.as_bytes().as_slice())
        .bind(&claim.method)
        .bind(&claim.path)
        .bind(token.as_uuid().to_string())
        .bind(millis(timing.lease))
        .bind(payment.id.as_str())
        .bind(millis(timing.ttl))
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        if inserted.is_none() {
            let record = Self::count_repeat_in(&mut tx, &claim.shop_id, &claim.key).await?;
            tx.commit().await.map_err(store_error)?;
            return record.map(Claim::Exists).ok_or_else(|| {
                StoreError::Other(format!("key {} conflicted but cannot be read", claim.key))
            });
        }
        let Some((recovery_point, linked)) = Self::insert_payment(&mut tx, payment).await? else {
            return Err(StoreError::Other(format!(
                "order of key {} has a live payment that cannot be read",
                claim.key
            )));
        };
        tx.commit().await.map_err(store_error)?;
        let lease = Lease {
            shop_id: claim.shop_id.clone(),
            key: claim.key.clone(),
            token,
        };
        Ok(Claim::Acquired(Acquired {
            lease,
            recovery_point,
            payment: linked,
            refund: None,
        }))
    }

    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError> {
        let token = LeaseToken::generate();
        let row = sqlx::query(concat!(
            "UPDATE idempotency_keys SET lease_token = ?3, locked_until = ",
            now_ms!(),
            " + ?4 WHERE shop_id = ?1 AND key = ?2 AND fingerprint = ?5 \
               AND recovery_point <> 'finished' \
               AND (locked_until IS NULL OR locked_until <= ",
            now_ms!(),
            ") RETURNING payment_id, refund_id, recovery_point"
        ))
        .bind(shop_id.as_str())
        .bind(key.as_str())
        .bind(token.as_uuid().to_string())
        .bind(millis(lease))
        .bind(fingerprint.as_bytes().as_slice())
        .fetch_optional(&self.writer)
        .await
        .map_err(store_error)?;
        let Some(row) = row else { return Ok(None) };
        let payment_id: String = row.try_get("payment_id").map_err(store_error)?;
        let recovery_point: String = row.try_get("recovery_point").map_err(store_error)?;
        let recovery_point = RecoveryPoint::parse(&recovery_point)
            .ok_or_else(|| StoreError::Corrupt(format!("recovery point `{recovery_point}`")))?;
        let payment_id =
            PaymentId::parse(&payment_id).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let payment = self.payment(shop_id, &payment_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("key {key} points at missing payment {payment_id}"))
        })?;
        let refund_id: Option<String> = row.try_get("refund_id").map_err(store_error)?;
        let refund = match refund_id {
            Some(id) => {
                let id = RefundId::parse(&id).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Some(Box::new(self.refund(shop_id, &id).await?.ok_or_else(
                    || StoreError::Corrupt(format!("key {key} points at missing refund {id}")),
                )?))
            }
            None => None,
        };
        let lease = Lease {
            shop_id: shop_id.clone(),
            key: key.clone(),
            token,
        };
        Ok(Some(Acquired {
            lease,
            recovery_point,
            payment,
            refund,
        }))
    }

    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError> {
        let done = sqlx::query(concat!(
            "UPDATE idempotency_keys SET locked_until = ",
            now_ms!(),
            " + ?4 WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
               AND recovery_point <> 'finished'"
        ))
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid().to_string())
        .bind(millis(duration))
        .execute(&self.writer)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError> {
        let done = sqlx::query(concat!(
            "UPDATE idempotency_keys SET locked_until = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
               AND recovery_point <> 'finished'"
        ))
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid().to_string())
        .execute(&self.writer)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    async fn finish(
        &self,
        lease: &Lease,
        settlement: Option<(&Payment, &Settlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError> {
        let mut tx = self.write_tx().await?;
        if !Self::finish_key(&mut tx, lease, response, ttl).await? {
            tx.rollback().await.map_err(store_error)?;
            return Ok(FinishOutcome::LeaseLost);
        }
        if let Some((payment, settlement)) = settlement {
            let payment_id = &payment.id;
            let settled = sqlx::query(concat!(
                "UPDATE payments SET status = ?2, provider_payment_id = ?3, decline_code = ?4, \
                     updated_at = ",
                now_ms!(),
                " WHERE id = ?1 AND shop_id = ?5 AND status = 'pending' RETURNING ",
                payment_columns!()
            ))
            .bind(payment_id.as_str())
            .bind(settlement.status.as_str())
            .bind(&settlement.provider_payment_id)
            .bind(&settlement.decline_code)
            .bind(lease.shop_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_error)?;
            let Some(settled) = settled else {
                tx.rollback().await.map_err(store_error)?;
                return Ok(FinishOutcome::PaymentAlreadySettled);
            };
            let payment = payment_from_row(&settled)?;
            Self::insert_event(&mut tx, NewEvent::payment_settled(&payment)).await?;
        }
        tx.commit().await.map_err(store_error)?;
        Ok(FinishOutcome::Stored)
    }

    async fn claim_refund(
        &self,
        claim: &ClaimRequest,
        refund: &NewRefund,
        timing: KeyTiming,
    ) -> Result<RefundClaim, StoreError> {
        let token = LeaseToken::generate();
        let mut tx = self.write_tx().await?;
        let inserted = sqlx::query(concat!(
            "INSERT INTO idempotency_keys AS k (shop_id, key, fingerprint, method, path, \
                 recovery_point, lease_token, locked_until, payment_id, refund_id, created_at, \
                 expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'refund_created', ?6, ",
            now_ms!(),
            " + ?7, ?8, ?10, ",
            now_ms!(),
            ", ",
            now_ms!(),
            " + ?9) \
             ON CONFLICT (shop_id, key) DO UPDATE SET \
                 fingerprint = excluded.fingerprint, method = excluded.method, \
                 path = excluded.path, recovery_point = excluded.recovery_point, \
                 lease_token = excluded.lease_token, locked_until = excluded.locked_until, \
                 payment_id = excluded.payment_id, refund_id = excluded.refund_id, \
                 response_status = NULL, response_headers = NULL, response_body = NULL, \
                 created_at = excluded.created_at, expires_at = excluded.expires_at \
             WHERE k.recovery_point = 'finished' AND k.expires_at <= ",
            now_ms!(),
            " RETURNING 1"
        ))
        .bind(claim.shop_id.as_str())
        .bind(claim.key.as_str())
        .bind(claim.fingerprint.as_bytes().as_slice())
        .bind(&claim.method)
        .bind(&claim.path)
        .bind(token.as_uuid().to_string())
        .bind(millis(timing.lease))
        .bind(refund.payment_id.as_str())
        .bind(millis(timing.ttl))
        .bind(refund.id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        if inserted.is_none() {
            let record = Self::count_repeat_in(&mut tx, &claim.shop_id, &claim.key).await?;
            tx.commit().await.map_err(store_error)?;
            return record.map(RefundClaim::Exists).ok_or_else(|| {
                StoreError::Other(format!("key {} conflicted but cannot be read", claim.key))
            });
        }
        // The writer holds the database lock: no other refund moves the
        // reservation between this read and the update.
        let row = sqlx::query(concat!(
            "SELECT ",
            payment_columns!(),
            ", refund_reserved_minor FROM payments WHERE shop_id = ?1 AND id = ?2"
        ))
        .bind(refund.shop_id.as_str())
        .bind(refund.payment_id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        let decided = match row {
            None => Err(RefundRefusal::PaymentNotFound),
            Some(row) => {
                let reserved: i64 = row.try_get("refund_reserved_minor").map_err(store_error)?;
                let payment = payment_from_row(&row)?;
                reservation(&payment, reserved, refund).map(|amount| (payment, amount))
            }
        };
        let (payment, amount) = match decided {
            Ok(found) => found,
            Err(refused) => {
                tx.rollback().await.map_err(store_error)?;
                return Ok(RefundClaim::Refused(refused));
            }
        };
        let reserved = sqlx::query(concat!(
            "UPDATE payments SET refund_reserved_minor = refund_reserved_minor + ?3, updated_at = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND id = ?2 AND status = 'succeeded' \
               AND refund_reserved_minor + ?3 <= amount_minor"
        ))
        .bind(refund.shop_id.as_str())
        .bind(refund.payment_id.as_str())
        .bind(amount.minor_units())
        .execute(&mut *tx)
        .await
        .map_err(store_error)?;
        if reserved.rows_affected() != 1 {
            tx.rollback().await.map_err(store_error)?;
            return Err(StoreError::Other(format!(
                "refund reservation on payment {} failed after its check",
                refund.payment_id
            )));
        }
        let created = new_refund_row(refund, amount);
        sqlx::query(concat!(
            "INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, \
                 currency, status, acquirer_key, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8, ",
            now_ms!(),
            ")"
        ))
        .bind(created.id.as_str())
        .bind(created.shop_id.as_str())
        .bind(created.payment_id.as_str())
        .bind(created.idempotency_key.as_str())
        .bind(created.amount.minor_units())
        .bind(created.amount.currency().code())
        .bind(created.acquirer_key.as_str())
        .bind(unix_ms(created.created_at))
        .execute(&mut *tx)
        .await
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        Ok(RefundClaim::Acquired(Acquired {
            lease: Lease {
                shop_id: claim.shop_id.clone(),
                key: claim.key.clone(),
                token,
            },
            recovery_point: RecoveryPoint::RefundCreated,
            payment,
            refund: Some(Box::new(created)),
        }))
    }

    async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<(&RefundId, &RefundSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError> {
        let mut tx = self.write_tx().await?;
        if !Self::finish_key(&mut tx, lease, response, ttl).await? {
            tx.rollback().await.map_err(store_error)?;
            return Ok(FinishOutcome::LeaseLost);
        }
        if let Some((refund_id, settlement)) = settlement {
            let (status, provider_refund_id, failure_code) = refund_settlement_columns(settlement);
            let settled = sqlx::query(concat!(
                "UPDATE refunds SET status = ?3, provider_refund_id = ?4, failure_code = ?5, \
                     updated_at = ",
                now_ms!(),
                " WHERE shop_id = ?1 AND id = ?2 AND status = 'pending' RETURNING ",
                refund_columns!()
            ))
            .bind(lease.shop_id.as_str())
            .bind(refund_id.as_str())
            .bind(status.as_str())
            .bind(provider_refund_id)
            .bind(failure_code)
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_error)?;
            let Some(settled) = settled else {
                tx.rollback().await.map_err(store_error)?;
                return Ok(FinishOutcome::PaymentAlreadySettled);
            };
            let refund = refund_from_row(&settled)?;
            let update = match status {
                RefundStatus::Succeeded => concat!(
                    "UPDATE payments SET refunded_minor = refunded_minor + ?3, updated_at = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2 RETURNING reference"
                ),
                _ => concat!(
                    "UPDATE payments SET refund_reserved_minor = refund_reserved_minor - ?3, \
                         updated_at = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2 RETURNING reference"
                ),
            };
            let payment = sqlx::query(update)
                .bind(lease.shop_id.as_str())
                .bind(refund.payment_id.as_str())
                .bind(refund.amount.minor_units())
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
            let reference: String = payment.try_get("reference").map_err(store_error)?;
            Self::insert_event(&mut tx, NewEvent::refund_settled(&refund, &reference)).await?;
        }
        tx.commit().await.map_err(store_error)?;
        Ok(FinishOutcome::Stored)
    }

    async fn refund(&self, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            refund_columns!(),
            " FROM refunds WHERE shop_id = ?1 AND id = ?2"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.readers)
        .await
        .map_err(store_error)?;
        row.map(|row| refund_from_row(&row)).transpose()
    }

    async fn payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = ?1 AND id = ?2"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.readers)
        .await
        .map_err(store_error)?;
        row.map(|row| payment_from_row(&row)).transpose()
    }

    async fn payments_by_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<Payment>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = ?1 AND reference = ?2 ORDER BY created_at, id"
        ))
        .bind(shop_id.as_str())
        .bind(reference.as_str())
        .fetch_all(&self.readers)
        .await
        .map_err(store_error)?;
        rows.iter().map(payment_from_row).collect()
    }

    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM idempotency_keys WHERE shop_id = ?1 AND key = ?2"
        ))
        .bind(shop_id.as_str())
        .bind(key.as_str())
        .fetch_optional(&self.readers)
        .await
        .map_err(store_error)?;
        row.map(|row| key_from_row(&row)).transpose()
    }

    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError> {
        let done = sqlx::query(concat!(
            "DELETE FROM idempotency_keys WHERE rowid IN ( \
                 SELECT rowid FROM idempotency_keys \
                 WHERE recovery_point = 'finished' AND expires_at <= ",
            now_ms!(),
            " ORDER BY expires_at LIMIT ?1)"
        ))
        .bind(i64::from(batch))
        .execute(&self.writer)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected())
    }

    async fn stalled_keys(
        &self,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<StalledKey>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT shop_id, key, fingerprint FROM idempotency_keys \
             WHERE recovery_point <> 'finished' \
               AND (locked_until IS NULL OR locked_until <= ",
            now_ms!(),
            " - ?1) ORDER BY locked_until NULLS FIRST LIMIT ?2"
        ))
        .bind(millis(idle))
        .bind(i64::from(limit))
        .fetch_all(&self.readers)
        .await
        .map_err(store_error)?;
        rows.iter()
            .map(|row| {
                let fingerprint: Vec<u8> = row.try_get("fingerprint").map_err(store_error)?;
                stalled_key(
                    row.try_get("shop_id").map_err(store_error)?,
                    row.try_get("key").map_err(store_error)?,
                    &fingerprint,
                )
            })
            .collect()
    }

    async fn pending_payments(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE status = 'pending' AND created_at <= ",
            now_ms!(),
            " - ?1 ORDER BY created_at LIMIT ?2"
        ))
        .bind(millis(older_than))
        .bind(i64::from(limit))
        .fetch_all(&self.readers)
        .await
        .map_err(store_error)?;
        rows.iter().map(payment_from_row).collect()
    }

    async fn payments_created_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&PaymentId>,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE created_at >= ?1 AND created_at < ?2 \
               AND id > COALESCE(?3, '') ORDER BY id LIMIT ?4"
        ))
        .bind(unix_ms(from))
        .bind(unix_ms(to))
        .bind(after.map(PaymentId::as_str))
        .bind(i64::from(limit))
        .fetch_all(&self.readers)
        .await
        .map_err(store_error)?;
        rows.iter().map(payment_from_row).collect()
    }

    async fn payment_by_acquirer_key(
        &self,
        key: &AcquirerKey,
    ) -> Result<Option<Payment>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE acquirer_key = ?1"
        ))
        .bind(key.as_str())
        .fetch_optional(&self.readers)
        .await
        .map_err(store_error)?;
        row.map(|row| payment_from_row(&row)).transpose()
    }

    async fn settle_payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, StoreError> {
        let mut tx = self.write_tx().await?;
        let row = sqlx::query(concat!(
            "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
                 updated_at = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND id = ?2 AND status = 'pending' RETURNING ",
            payment_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .bind(settlement.status.as_str())
        .bind(&settlement.provider_payment_id)
        .bind(&settlement.decline_code)
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        let outcome = match row {
            Some(row) => {
                let payment = payment_from_row(&row)?;
                Self::insert_event(&mut tx, NewEvent::payment_settled(&payment)).await?;
                SettleOutcome::Settled(payment)
            }
            None => {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE shop_id = ?1 AND id = ?2"
                ))
                .bind(shop_id.as_str())
                .bind(id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
                match row {
                    Some(row) => SettleOutcome::AlreadyFinal(payment_from_row(&row)?),
                    None => SettleOutcome::NotFound,
                }
            }
        };
        tx.commit().await.map_err(store_error)?;
        Ok(outcome)
    }

    async fn record_event(&self, event: &InboundEvent) -> Result<EventRecorded, StoreError> {
        let mut tx = self.write_tx().await?;
        let inserted = sqlx::query(concat!(
            "INSERT INTO acquirer_events \
                 (event_id, event_type, acquirer_key, shop_id, result, received_at) \
             VALUES (?1, ?2, ?3, ?4, 'unchanged', ",
            now_ms!(),
            ") ON CONFLICT (event_id) DO NOTHING RETURNING 1"
        ))
        .bind(&event.event_id)
        .bind(event.kind.as_str())
        .bind(event.acquirer_key.as_str())
        .bind(event.shop_id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        if inserted.is_none() {
            tx.rollback().await.map_err(store_error)?;
            return Ok(EventRecorded::Duplicate);
        }
        let mut settled = None;
        if let Some(settlement) = &event.settlement {
            settled = sqlx::query(concat!(
                "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
                     updated_at = ",
                now_ms!(),
                " WHERE acquirer_key = ?1 AND shop_id = ?2 AND status = 'pending' RETURNING ",
                payment_columns!()
            ))
            .bind(event.acquirer_key.as_str())
            .bind(event.shop_id.as_str())
            .bind(settlement.status.as_str())
            .bind(&settlement.provider_payment_id)
            .bind(&settlement.decline_code)
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_error)?;
        }
        let recorded = match settled {
            Some(row) => {
                let payment = payment_from_row(&row)?;
                Self::insert_event(&mut tx, NewEvent::payment_settled(&payment)).await?;
                EventRecorded::Settled(payment)
            }
            None => {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE acquirer_key = ?1 AND shop_id = ?2"
                ))
                .bind(event.acquirer_key.as_str())
                .bind(event.shop_id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_error)?;
                match row {
                    Some(row) => EventRecorded::Unchanged(payment_from_row(&row)?),
                    None => EventRecorded::UnknownPayment,
                }
            }
        };
        sqlx::query("UPDATE acquirer_events SET result = ?2 WHERE event_id = ?1")
            .bind(&event.event_id)
            .bind(event_result(&recorded))
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        Ok(recorded)
    }

    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await.map_err(store_error)?;
        let done =
            sqlx::query("UPDATE shops SET webhook_url = ?2, webhook_secret = ?3 WHERE id = ?1")
                .bind(shop_id.as_str())
                .bind(endpoint.map(|e| e.url.as_str()))
                .bind(endpoint.map(|e| e.secret.expose()))
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
        if endpoint.is_some() {
            // Events parked while the shop had no URL are due now; their
            // give-up clock starts now.
            sqlx::query(concat!(
                "UPDATE events SET next_attempt_at = ",
                now_ms!(),
                ", due_since = ",
                now_ms!(),
                " WHERE shop_id = ?1 AND delivered_at IS NULL AND gave_up_at IS NULL \
                   AND next_attempt_at >= ?2"
            ))
            .bind(shop_id.as_str())
            .bind(PARKED_UNTIL_MS)
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
        }
        tx.commit().await.map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE shop_id = ?1 AND (?2 IS NULL OR event_type = ?2) \
               AND (?3 IS NULL \
                    OR seq < (SELECT seq FROM events WHERE shop_id = ?1 AND id = ?3)) \
             ORDER BY seq DESC LIMIT ?4"
        ))
        .bind(shop_id.as_str())
        .bind(query.event_type.map(|t| t.as_str()))
        .bind(query.starting_after.as_ref().map(EventId::as_str))
        .bind(i64::from(query.limit))
        .fetch_all(&self.readers)
        .await
        .map_err(store_error)?;
        rows.iter()
            .map(|row| event_from_row(row).map(|(_, event)| event))
            .collect()
    }

    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE shop_id = ?1 AND id = ?2"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.readers)
        .await
        .map_err(store_error)?;
        row.map(|row| event_from_row(&row).map(|(_, event)| event))
            .transpose()
    }

    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError> {
        let mut tx = self.write_tx().await?;
        let row = sqlx::query(concat!(
            "UPDATE events SET delivered_at = NULL, gave_up_at = NULL, locked_until = NULL, \
                 next_attempt_at = ",
            now_ms!(),
            ", due_since = ",
            now_ms!(),
            " WHERE shop_id = ?1 AND id = ?2 RETURNING ",
            event_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        row.map(|row| event_from_row(&row).map(|(_, event)| event))
            .transpose()
    }

    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError> {
        // A read first, so an idle relay does not queue on the one writer.
        let any_due = sqlx::query(concat!(
            "SELECT 1 FROM events e JOIN shops s ON s.id = e.shop_id \
             WHERE s.webhook_url IS NOT NULL \
               AND e.delivered_at IS NULL AND e.gave_up_at IS NULL \
               AND e.next_attempt_at <= ",
            now_ms!(),
            " AND (e.locked_until IS NULL OR e.locked_until <= ",
            now_ms!(),
            ") LIMIT 1"
        ))
        .fetch_optional(&self.readers)
        .await
        .map_err(store_error)?;
        if any_due.is_none() {
            return Ok(Vec::new());
        }
        let mut tx = self.write_tx().await?;
        // One writer: the IMMEDIATE transaction is the claim's lock. An event
        // waits while an earlier one of its payment is still open.
        let rows = sqlx::query(concat!(
            "UPDATE events SET locked_until = ",
            now_ms!(),
            " + ?2 WHERE seq IN ( \
                 SELECT e.seq FROM events e JOIN shops s ON s.id = e.shop_id \
                 WHERE s.webhook_url IS NOT NULL \
                   AND e.delivered_at IS NULL AND e.gave_up_at IS NULL \
                   AND e.next_attempt_at <= ",
            now_ms!(),
            " AND (e.locked_until IS NULL OR e.locked_until <= ",
            now_ms!(),
            ") AND NOT EXISTS (SELECT 1 FROM events p WHERE p.payment_id = e.payment_id \
                       AND p.seq < e.seq AND p.delivered_at IS NULL AND p.gave_up_at IS NULL) \
                 ORDER BY e.seq LIMIT ?1) \
             RETURNING ",
            event_columns!()
        ))
        .bind(i64::from(limit))
        .bind(millis(lease))
        .fetch_all(&mut *tx)
        .await
        .map_err(store_error)?;
        let mut claimed = rows
            .iter()
            .map(event_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        claimed.sort_by_key(|(seq, _)| *seq);
        // One read of each shop's endpoint per claim, not one per event.
        let mut endpoints: HashMap<ShopId, WebhookEndpoint> = HashMap::new();
        let mut due = Vec::with_capacity(claimed.len());
        for (_, event) in claimed {
            let endpoint = if let Some(known) = endpoints.get(&event.shop_id) {
                known.clone()
            } else {
                let row =
                    sqlx::query("SELECT webhook_url, webhook_secret FROM shops WHERE id = ?1")
                        .bind(event.shop_id.as_str())
                        .fetch_one(&mut *tx)
                        .await
                        .map_err(store_error)?;
                let found = endpoint(
                    row.try_get("webhook_url").map_err(store_error)?,
                    row.try_get("webhook_secret").map_err(store_error)?,
                )
                .ok_or_else(|| {
                    StoreError::Corrupt(format!("shop {} lost its webhook", event.shop_id))
                })?;
                endpoints.insert(event.shop_id.clone(), found.clone());
                found
            };
            due.push(DueEvent { event, endpoint });
        }
        tx.commit().await.map_err(store_error)?;
        Ok(due)
    }

    async fn record_attempt(
        &self,
        id: &EventId,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError> {
        let (status, error, delivered, retry_ms, give_up_ms) = attempt_columns(outcome);
        let query = if delivered {
            sqlx::query(concat!(
                "UPDATE events SET attempts = attempts + 1, last_status = ?2, last_error = NULL, \
                     delivered_at = COALESCE(delivered_at, ",
                now_ms!(),
                "), locked_until = NULL WHERE id = ?1"
            ))
            .bind(id.as_str())
            .bind(status)
        } else {
            sqlx::query(concat!(
                "UPDATE events SET attempts = attempts + 1, last_status = ?2, last_error = ?3, \
                     locked_until = NULL, \
                     gave_up_at = CASE WHEN delivered_at IS NULL AND ",
                now_ms!(),
                " >= due_since + ?5 THEN ",
                now_ms!(),
                " ELSE gave_up_at END, next_attempt_at = MIN(",
                now_ms!(),
                " + ?4, due_since + ?5) WHERE id = ?1"
            ))
            .bind(id.as_str())
            .bind(status)
            .bind(error)
            .bind(retry_ms)
            .bind(give_up_ms)
        };
        query.execute(&self.writer).await.map_err(store_error)?;
        Ok(())
    }

    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        let done = sqlx::query(concat!(
            "INSERT INTO shops (id, secret_sha256, created_at) VALUES (?1, ?2, ",
            now_ms!(),
            ") ON CONFLICT (id) DO NOTHING"
        ))
        .bind(shop_id.as_str())
        .bind(secret.as_bytes().as_slice())
        .execute(&self.writer)
        .await
        .map_err(store_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::ShopExists(shop_id.to_string()));
        }
        Ok(())
    }

    async fn shop_secret(&self, shop_id: &ShopId) -> Result<Option<SecretHash>, StoreError> {
        let row = sqlx::query("SELECT secret_sha256 FROM shops WHERE id = ?1")
            .bind(shop_id.as_str())
            .fetch_optional(&self.readers)
            .await
            .map_err(store_error)?;
        let Some(row) = row else { return Ok(None) };
        let bytes: Vec<u8> = row.try_get("secret_sha256").map_err(store_error)?;
        SecretHash::from_bytes(&bytes)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt(format!("secret hash of shop {shop_id}")))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.readers)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
