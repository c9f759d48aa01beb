//! The PostgreSQL store: production, shared by many service instances.
//!
//! Races between instances are settled by the `(shop_id, key)` primary key and the
//! one-live-payment-per-order partial unique index. Lease deadlines and expiry are
//! compared with the database's `now()`, so instance clocks never matter.

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
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{PgExecutor, Postgres, Row, Transaction};
use time::OffsetDateTime;

use crate::PoolConfig;
use crate::codec::{
    EventColumns, KeyColumns, PaymentColumns, RefundColumns, attempt_columns, encode_headers,
    endpoint, event_result, millis, new_refund_row, refund_settlement_columns, reservation,
    stalled_key, store_error,
};

/// The columns of a key row, with lease liveness and times judged by the database.
macro_rules! key_columns {
    () => {
        "shop_id, key, fingerprint, method, path, recovery_point, payment_id, \
         response_status::bigint AS response_status, response_headers, response_body, \
         (lease_token IS NOT NULL AND locked_until > now()) AS lease_active, refund_id, \
         CASE WHEN lease_token IS NULL AND locked_until > now() \
              THEN ceil(extract(epoch FROM locked_until - now()) * 1000)::bigint END AS settling_ms, \
         (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms, \
         (extract(epoch FROM expires_at) * 1000)::bigint AS expires_at_ms, replays"
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

/// The columns of an event row, with times as unix milliseconds.
macro_rules! event_columns {
    () => {
        "seq, id, shop_id, event_type, payment_id, refund_id, payload, \
         (extract(epoch FROM created_at) * 1000)::bigint AS created_at_ms, \
         attempts::bigint AS attempts, \
         (extract(epoch FROM next_attempt_at) * 1000)::bigint AS next_attempt_at_ms, \
         (extract(epoch FROM delivered_at) * 1000)::bigint AS delivered_at_ms, \
         (extract(epoch FROM gave_up_at) * 1000)::bigint AS gave_up_at_ms, \
         last_status::bigint AS last_status, last_error"
    };
}

/// How many times a claim re-runs when the row it conflicted with vanished
/// between two statements (swept, or its order's payment declined meanwhile).
const CLAIM_ATTEMPTS: usize = 3;

/// [`Store`] on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects with a `postgres://` URL and runs the migrations.
    pub async fn connect(url: &str, config: &PoolConfig) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Other(format!("bad PostgreSQL URL: {e}")))?
            .application_name("chargeonce")
            .options([("statement_timeout", "15s")]);
        // No ping before each acquire: a round trip per statement otherwise. A
        // dead connection fails one statement (Unavailable) and is dropped.
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .test_before_acquire(false)
            .acquire_timeout(config.acquire_timeout)
            .connect_with(options)
            .await
            .map_err(store_error)?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the embedded migrations (safe to run from several instances at
    /// once: sqlx takes an advisory lock).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Other(format!("migration failed: {e}")))
    }

    /// The connection pool, for tests and tools.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes every connection; later calls fail as `Unavailable`.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Counts one more request with an existing key and reads the key back,
    /// in one statement whose snapshot includes every commit made before it.
    /// `None` when the key is gone (swept) or is a finished key that expired,
    /// which a claim treats as new.
    async fn count_repeat(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "UPDATE idempotency_keys SET replays = replays + 1 \
             WHERE shop_id = $1 AND key = $2 \
               AND NOT (recovery_point = 'finished' AND expires_at <= now()) RETURNING ",
            key_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(key.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)?;
        row.map(|row| key_from_row(&row)).transpose()
    }

    /// Phase 3's fenced write of a key: stores the final response and ends the
    /// lease, only while `lease` still holds it. `false` (nothing written) when
    /// the lease was taken over.
    async fn finish_key<'e>(
        executor: impl PgExecutor<'e>,
        lease: &Lease,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let fenced = sqlx::query(
                "UPDATE idempotency_keys SET recovery_point = 'finished', response_status = $4, \
                     response_headers = $5, response_body = $6, lease_token = NULL, locked_until = NULL, \
                     expires_at = GREATEST(expires_at, now() + $7::float8 * interval '1 millisecond') \
                 WHERE shop_id = $1 AND key = $2 AND lease_token = $3 AND recovery_point <> 'finished'",
            )
            .bind(lease.shop_id.as_str())
            .bind(lease.key.as_str())
            .bind(lease.token.as_uuid())
            .bind(i32::from(response.status))
            .bind(encode_headers(&response.headers)?)
            .bind(response.body.as_slice())
            .bind(millis(ttl) as f64)
            .execute(executor)
            .await
            .map_err(store_error)?;
        Ok(fenced.rows_affected() == 1)
    }

    /// Writes a merchant event in the transaction of its transition.
    async fn insert_event(
        tx: &mut Transaction<'static, Postgres>,
        event: Option<NewEvent>,
    ) -> Result<(), StoreError> {
        let Some(event) = event else { return Ok(()) };
        // A shop without a webhook URL gets its events parked (not due), so
        // the relay's scan of due events never reads them; set_webhook makes
        // them due.
        let inserted = sqlx::query(
            "INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload, \
                 next_attempt_at) \
             SELECT $1, $2, $3, $4, $5, $6, \
                 CASE WHEN s.webhook_url IS NULL THEN to_timestamp($7::float8 / 1000) \
                      ELSE now() END \
             FROM shops s WHERE s.id = $2",
        )
        .bind(event.id.as_str())
        .bind(event.shop_id.as_str())
        .bind(event.event_type.as_str())
        .bind(event.payment_id.as_str())
        .bind(event.refund_id.as_ref().map(RefundId::as_str))
        .bind(event.payload.as_slice())
        .bind(PARKED_UNTIL_MS as f64)
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

    async fn read_key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM idempotency_keys WHERE shop_id = $1 AND key = $2"
        ))
        .bind(shop_id.as_str())
        .bind(key.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)?;
        row.map(|row| key_from_row(&row)).transpose()
    }

    /// Inserts the key row; `false` when the key exists and is not an expired
    /// finished key (nothing written).
    async fn insert_key(
        tx: &mut Transaction<'static, Postgres>,
        claim: &ClaimRequest,
        target: KeyTarget<'_>,
        lease: LeaseToken,
        timing: KeyTiming,
    ) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "INSERT INTO idempotency_keys AS k (shop_id, key, fingerprint, method, path, \
                 recovery_point, lease_token, locked_until, payment_id, created_at, expires_at, \
                 refund_id) \
             VALUES ($1, $2, $3, $4, $5, $10, $6, \
                 clock_timestamp() + $7::float8 * interval '1 millisecond', $8, now(), \
                 now() + $9::float8 * interval '1 millisecond', $11) \
             ON CONFLICT (shop_id, key) DO UPDATE SET \
                 fingerprint = EXCLUDED.fingerprint, method = EXCLUDED.method, \
                 path = EXCLUDED.path, recovery_point = EXCLUDED.recovery_point, \
                 lease_token = EXCLUDED.lease_token, locked_until = EXCLUDED.locked_until, \
                 payment_id = EXCLUDED.payment_id, refund_id = EXCLUDED.refund_id, \
                 response_status = NULL, \
                 response_headers = NULL, response_body = NULL, \
                 created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at \
             WHERE k.recovery_point = 'finished' AND k.expires_at <= now() \
             RETURNING 1",
        )
        .bind(claim.shop_id.as_str())
        .bind(claim.key.as_str())
        .bind(claim.fingerprint.as_bytes().as_slice())
        .bind(&claim.method)
        .bind(&claim.path)
        .bind(lease.as_uuid())
        .bind(millis(timing.lease) as f64)
        .bind(target.payment_id.as_str())
        .bind(millis(timing.ttl) as f64)
        .bind(target.recovery_point.as_str())
        .bind(target.refund_id.map(RefundId::as_str))
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)?;
        Ok(row.is_some())
    }

    /// Inserts the payment, or returns the order's live payment when it has one.
    async fn insert_payment(
        tx: &mut Transaction<'static, Postgres>,
        payment: &NewPayment,
    ) -> Result<Option<(RecoveryPoint, Payment)>, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let inserted = sqlx::query(
                "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                     currency, token, status, acquirer_key, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9) \
                 ON CONFLICT (shop_id, reference) WHERE status IN ('pending', 'succeeded') \
                 DO NOTHING RETURNING 1",
            )
            .bind(payment.id.as_str())
            .bind(payment.shop_id.as_str())
            .bind(payment.idempotency_key.as_str())
            .bind(payment.request.reference.as_str())
            .bind(payment.request.amount.minor_units())
            .bind(payment.request.amount.currency().code())
            .bind(payment.request.token.as_str())
            .bind(payment.acquirer_key.as_str())
            .bind(payment.created_at)
            .fetch_optional(&mut **tx)
            .await
            .map_err(store_error)?;
            if inserted.is_some() {
                return Ok(Some((RecoveryPoint::PaymentCreated, payment.to_payment())));
            }
            // A new statement sees the live payment the conflict waited for.
            let existing = sqlx::query(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE shop_id = $1 AND reference = $2 \
                  AND status IN ('pending', 'succeeded')"
            ))
            .bind(payment.shop_id.as_str())
            .bind(payment.request.reference.as_str())
            .fetch_optional(&mut **tx)
            .await
            .map_err(store_error)?;
            if let Some(row) = existing {
                let existing = payment_from_row(&row)?;
                sqlx::query(
                    "UPDATE idempotency_keys SET payment_id = $3, recovery_point = 'order_already_paid' \
             WHERE shop_id = $1 AND key = $2",
                )
                .bind(payment.shop_id.as_str())
                .bind(payment.idempotency_key.as_str())
                .bind(existing.id.as_str())
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
                return Ok(Some((RecoveryPoint::OrderAlreadyPaid, existing)));
            }
        }
        Ok(None)
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
    ///   this statement's snapshot: the arbiter index sees it anyway): the
    ///   payment insert is skipped, so the key row points at a payment that
    ///   does not exist and the deferred foreign key fails the implicit
    ///   commit; the whole statement is rolled back ([`FastClaim::OrderTaken`]).
    ///   The caller runs the transaction that links the live payment.
    ///
    /// An expired finished key is not reclaimed here (that is an update of
    /// the old row, left to the transaction): it comes back as `KeyExists`.
    async fn claim_in_one_statement(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        lease: LeaseToken,
        timing: KeyTiming,
    ) -> Result<FastClaim, StoreError> {
        let created = sqlx::query(
            "WITH k AS ( \
                 INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
                     recovery_point, lease_token, locked_until, payment_id, created_at, \
                     expires_at) \
                 VALUES ($1, $2, $3, $4, $5, 'payment_created', $6, \
                     clock_timestamp() + $7::float8 * interval '1 millisecond', $8, now(), \
                     now() + $9::float8 * interval '1 millisecond') \
                 ON CONFLICT (shop_id, key) DO NOTHING \
                 RETURNING 1) \
             INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at) \
             SELECT $8, $10, $11, $12, $13, $14, $15, 'pending', $16, $17 FROM k \
             ON CONFLICT (shop_id, reference) WHERE status IN ('pending', 'succeeded') \
             DO NOTHING \
             RETURNING 1",
        )
        .bind(claim.shop_id.as_str())
        .bind(claim.key.as_str())
        .bind(claim.fingerprint.as_bytes().as_slice())
        .bind(&claim.method)
        .bind(&claim.path)
        .bind(lease.as_uuid())
        .bind(millis(timing.lease) as f64)
        .bind(payment.id.as_str())
        .bind(millis(timing.ttl) as f64)
        .bind(payment.shop_id.as_str())
        .bind(payment.idempotency_key.as_str())
        .bind(payment.request.reference.as_str())
        .bind(payment.request.amount.minor_units())
        .bind(payment.request.amount.currency().code())
        .bind(payment.request.token.as_str())
        .bind(payment.acquirer_key.as_str())
        .bind(payment.created_at)
        .fetch_optional(&self.pool)
        .await;
        match created {
            Ok(Some(_)) => Ok(FastClaim::Created),
            Ok(None) => Ok(FastClaim::KeyExists),
            Err(sqlx::Error::Database(error))
                if error.code().as_deref() == Some("23503")
                    && error.constraint() == Some(KEY_PAYMENT_FK) =>
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
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let token = LeaseToken::generate();
            let mut tx = self.pool.begin().await.map_err(store_error)?;
            let target = KeyTarget {
                recovery_point: RecoveryPoint::PaymentCreated,
                payment_id: &payment.id,
                refund_id: None,
            };
            if Self::insert_key(&mut tx, claim, target, token, timing).await? {
                let Some((recovery_point, linked)) = Self::insert_payment(&mut tx, payment).await?
                else {
                    continue;
                };
                tx.commit().await.map_err(store_error)?;
                return Ok(Claim::Acquired(Acquired {
                    lease: Lease {
                        shop_id: claim.shop_id.clone(),
                        key: claim.key.clone(),
                        token,
                    },
                    recovery_point,
                    payment: linked,
                    refund: None,
                }));
            }
            tx.rollback().await.map_err(store_error)?;
            // Re-read in a new statement: its snapshot includes the winner's commit.
            if let Some(record) = self.count_repeat(&claim.shop_id, &claim.key).await? {
                return Ok(Claim::Exists(record));
            }
        }
        Err(StoreError::Other(format!(
            "claim of key {} did not settle after {CLAIM_ATTEMPTS} attempts",
            claim.key
        )))
    }
}

/// What the one-statement claim of a payment did.
enum FastClaim {
    /// The key row and the payment row are committed.
    Created,
    /// The key exists (in any state): nothing was written.
    KeyExists,
    /// The key was new but the order already has a live payment: the
    /// statement failed at its commit and nothing was written.
    OrderTaken,
}

/// The deferred foreign key from a key row to its payment. A one-statement
/// claim whose payment insert was skipped (the order has a live payment)
/// violates it at commit, so the statement writes nothing.
const KEY_PAYMENT_FK: &str = "idempotency_keys_payment_id_fkey";

/// What a new key row points at.
#[derive(Clone, Copy)]
struct KeyTarget<'a> {
    recovery_point: RecoveryPoint,
    payment_id: &'a PaymentId,
    refund_id: Option<&'a RefundId>,
}

fn refund_from_row(row: &PgRow) -> Result<Refund, StoreError> {
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
        created_at: row.try_get("created_at").map_err(store_error)?,
    };
    columns.into_refund()
}

fn event_from_row(row: &PgRow) -> Result<(i64, Event), StoreError> {
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

fn payment_from_row(row: &PgRow) -> Result<Payment, StoreError> {
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
        created_at: row.try_get("created_at").map_err(store_error)?,
        refunded_minor: row.try_get("refunded_minor").map_err(store_error)?,
    };
    columns.into_payment()
}

fn key_from_row(row: &PgRow) -> Result<KeyRecord, StoreError> {
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
        refund_id: row.try_get("refund_id").map_err(store_error)?,
        settling_ms: row.try_get("settling_ms").map_err(store_error)?,
        created_at_ms: row.try_get("created_at_ms").map_err(store_error)?,
        expires_at_ms: row.try_get("expires_at_ms").map_err(store_error)?,
        replays: row.try_get("replays").map_err(store_error)?,
    };
    columns.into_record()
}

#[async_trait]
impl Store for PgStore {
    async fn claim_payment(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError> {
        let token = LeaseToken::generate();
        match self
            .claim_in_one_statement(claim, payment, token, timing)
            .await?
        {
            FastClaim::Created => {
                return Ok(Claim::Acquired(Acquired {
                    lease: Lease {
                        shop_id: claim.shop_id.clone(),
                        key: claim.key.clone(),
                        token,
                    },
                    recovery_point: RecoveryPoint::PaymentCreated,
                    payment: payment.to_payment(),
                    refund: None,
                }));
            }
            FastClaim::KeyExists => {
                // Re-read in a new statement: its snapshot includes the commit
                // of whoever inserted the key.
                if let Some(record) = self.count_repeat(&claim.shop_id, &claim.key).await? {
                    return Ok(Claim::Exists(record));
                }
                // Swept meanwhile, or finished and expired: the transaction
                // decides (and reclaims an expired key).
            }
            // Nothing was written; the transaction links the order's payment.
            FastClaim::OrderTaken => {}
        }
        self.claim_in_transaction(claim, payment, timing).await
    }

    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError> {
        let token = LeaseToken::generate();
        let row = sqlx::query(
            "UPDATE idempotency_keys SET lease_token = $3, \
                 locked_until = clock_timestamp() + $4::float8 * interval '1 millisecond' \
             WHERE shop_id = $1 AND key = $2 AND fingerprint = $5 \
               AND recovery_point <> 'finished' \
               AND (locked_until IS NULL OR locked_until <= now()) \
             RETURNING payment_id, refund_id, recovery_point",
        )
        .bind(shop_id.as_str())
        .bind(key.as_str())
        .bind(token.as_uuid())
        .bind(millis(lease) as f64)
        .bind(fingerprint.as_bytes().as_slice())
        .fetch_optional(&self.pool)
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
        let done = sqlx::query(
            "UPDATE idempotency_keys \
             SET locked_until = clock_timestamp() + $4::float8 * interval '1 millisecond' \
             WHERE shop_id = $1 AND key = $2 AND lease_token = $3 AND recovery_point <> 'finished'",
        )
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .bind(millis(duration) as f64)
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    async fn park_lease(&self, lease: &Lease, hold: Duration) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE idempotency_keys SET lease_token = NULL, \
                 locked_until = clock_timestamp() + $4::float8 * interval '1 millisecond' \
             WHERE shop_id = $1 AND key = $2 AND lease_token = $3 AND recovery_point <> 'finished'",
        )
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .bind(millis(hold) as f64)
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    async fn abandon_key(&self, lease: &Lease) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM idempotency_keys \
             WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
               AND recovery_point = 'order_already_paid'",
        )
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE idempotency_keys SET locked_until = now() \
             WHERE shop_id = $1 AND key = $2 AND lease_token = $3 AND recovery_point <> 'finished'",
        )
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .execute(&self.pool)
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
        let Some((payment, settlement)) = settlement else {
            // One fenced statement: it writes or it does not.
            return Ok(
                if Self::finish_key(&self.pool, lease, response, ttl).await? {
                    FinishOutcome::Stored
                } else {
                    FinishOutcome::LeaseLost
                },
            );
        };
        // The payment's order and amount never change, so its event can be
        // built before the statement that settles it.
        let event =
            NewEvent::payment_settled(&payment.clone().settled(settlement)).ok_or_else(|| {
                StoreError::Other(format!(
                    "finish of key {} with a settlement that is not final",
                    lease.key
                ))
            })?;
        // One autocommitted statement (one round trip, one implicit
        // transaction, one snapshot for every part):
        // - `held` locks the key row if this lease still holds it. A row lock
        //   waits for a concurrent take-over to end and then re-checks the
        //   row's latest version, so this is exact, and it stays true until
        //   the commit: nobody else can change the row meanwhile.
        // - `settled` moves the payment from pending, only if `held` found
        //   the lease. An update re-checks the latest version of the row too,
        //   so a settlement committed by a webhook or the reconciler after
        //   this statement began is seen and leaves the payment alone.
        // - `finished` stores the response, only if the payment moved; the
        //   key row is locked by `held`, so it always can.
        // - `event` writes the merchant event, only if the payment moved.
        // So either all three writes happen or none does (held = false:
        // the lease was taken over; held but not settled: the payment was
        // settled meanwhile). The division is a tripwire for that argument:
        // were the three counts ever to disagree, it would abort the
        // statement, and its implicit transaction would write nothing.
        // Locks are taken key row first, payment row second, as in every
        // other transaction that takes both.
        //
        // The payment is found by its primary key alone: its shop and status
        // are checked with `IS NOT DISTINCT FROM` (the same as `=` on these
        // NOT NULL columns), which the planner cannot match to an index. With
        // plain `shop_id = $1 AND status = 'pending'` it picks a partial index
        // instead (`payments_one_live_per_order` by shop before the table is
        // analysed: every live payment of the shop read per finish;
        // `payments_pending` after), which halved pgbench's payments/s here.
        let row = sqlx::query(
            "WITH held AS MATERIALIZED ( \
                 SELECT 1 FROM idempotency_keys \
                 WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
                   AND recovery_point <> 'finished' \
                 FOR NO KEY UPDATE), \
             settled AS ( \
                 UPDATE payments SET status = $8, provider_payment_id = $9, \
                     decline_code = $10, updated_at = now() \
                 WHERE id = $11 AND (shop_id, status) IS NOT DISTINCT FROM ($1, 'pending') \
                   AND EXISTS (SELECT 1 FROM held) \
                 RETURNING id), \
             finished AS ( \
                 UPDATE idempotency_keys SET recovery_point = 'finished', \
                     response_status = $4, response_headers = $5, response_body = $6, \
                     lease_token = NULL, locked_until = NULL, \
                     expires_at = GREATEST(expires_at, \
                         now() + $7::float8 * interval '1 millisecond') \
                 WHERE shop_id = $1 AND key = $2 AND lease_token = $3 \
                   AND recovery_point <> 'finished' \
                   AND EXISTS (SELECT 1 FROM settled) \
                 RETURNING 1), \
             event AS ( \
                 INSERT INTO events (id, shop_id, event_type, payment_id, payload, \
                     next_attempt_at) \
                 SELECT $12, $1, $13, settled.id, $14, \
                     (SELECT CASE WHEN s.webhook_url IS NULL \
                                  THEN to_timestamp($15::float8 / 1000) ELSE now() END \
                      FROM shops s WHERE s.id = $1) \
                 FROM settled \
                 RETURNING 1) \
             SELECT h.held, s.n AS settled, \
                 1 / CASE WHEN s.n = f.n AND s.n = e.n THEN 1 ELSE 0 END AS whole \
             FROM (SELECT EXISTS (SELECT 1 FROM held) AS held) h, \
                  (SELECT count(*) AS n FROM settled) s, \
                  (SELECT count(*) AS n FROM finished) f, \
                  (SELECT count(*) AS n FROM event) e",
        )
        .bind(lease.shop_id.as_str())
        .bind(lease.key.as_str())
        .bind(lease.token.as_uuid())
        .bind(i32::from(response.status))
        .bind(encode_headers(&response.headers)?)
        .bind(response.body.as_slice())
        .bind(millis(ttl) as f64)
        .bind(settlement.status.as_str())
        .bind(&settlement.provider_payment_id)
        .bind(&settlement.decline_code)
        .bind(payment.id.as_str())
        .bind(event.id.as_str())
        .bind(event.event_type.as_str())
        .bind(event.payload.as_slice())
        .bind(PARKED_UNTIL_MS as f64)
        .fetch_one(&self.pool)
        .await
        .map_err(|error| match error {
            sqlx::Error::Database(db) if db.code().as_deref() == Some("22012") => {
                StoreError::Other(format!(
                    "finish of key {}: its writes disagreed, so none was made",
                    lease.key
                ))
            }
            other => store_error(other),
        })?;
        let held: bool = row.try_get("held").map_err(store_error)?;
        let settled: i64 = row.try_get("settled").map_err(store_error)?;
        Ok(match (held, settled) {
            (false, _) => FinishOutcome::LeaseLost,
            (true, 0) => FinishOutcome::PaymentAlreadySettled,
            (true, _) => FinishOutcome::Stored,
        })
    }

    async fn claim_refund(
        &self,
        claim: &ClaimRequest,
        refund: &NewRefund,
        timing: KeyTiming,
    ) -> Result<RefundClaim, StoreError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let token = LeaseToken::generate();
            let mut tx = self.pool.begin().await.map_err(store_error)?;
            let target = KeyTarget {
                recovery_point: RecoveryPoint::RefundCreated,
                payment_id: &refund.payment_id,
                refund_id: Some(&refund.id),
            };
            if !Self::insert_key(&mut tx, claim, target, token, timing).await? {
                tx.rollback().await.map_err(store_error)?;
                // Re-read in a new statement: its snapshot includes the winner's commit.
                if let Some(record) = self.count_repeat(&claim.shop_id, &claim.key).await? {
                    return Ok(RefundClaim::Exists(record));
                }
                continue;
            }
            // The row lock serialises refunds of one payment: the check and
            // the conditional update below see every committed reservation.
            let row = sqlx::query(concat!(
                "SELECT ",
                payment_columns!(),
                ", refund_reserved_minor FROM payments WHERE shop_id = $1 AND id = $2 \
                 FOR UPDATE"
            ))
            .bind(refund.shop_id.as_str())
            .bind(refund.payment_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_error)?;
            let decided = match row {
                None => Err(RefundRefusal::PaymentNotFound),
                Some(row) => {
                    let reserved: i64 =
                        row.try_get("refund_reserved_minor").map_err(store_error)?;
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
            let reserved = sqlx::query(
                "UPDATE payments SET refund_reserved_minor = refund_reserved_minor + $3, \
                     updated_at = now() \
                 WHERE shop_id = $1 AND id = $2 AND status = 'succeeded' \
                   AND refund_reserved_minor + $3 <= amount_minor",
            )
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
            sqlx::query(
                "INSERT INTO refunds (id, shop_id, payment_id, idempotency_key, amount_minor, \
                     currency, status, acquirer_key, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)",
            )
            .bind(created.id.as_str())
            .bind(created.shop_id.as_str())
            .bind(created.payment_id.as_str())
            .bind(created.idempotency_key.as_str())
            .bind(created.amount.minor_units())
            .bind(created.amount.currency().code())
            .bind(created.acquirer_key.as_str())
            .bind(created.created_at)
            .execute(&mut *tx)
            .await
            .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            return Ok(RefundClaim::Acquired(Acquired {
                lease: Lease {
                    shop_id: claim.shop_id.clone(),
                    key: claim.key.clone(),
                    token,
                },
                recovery_point: RecoveryPoint::RefundCreated,
                payment,
                refund: Some(Box::new(created)),
            }));
        }
        Err(StoreError::Other(format!(
            "claim of key {} did not settle after {CLAIM_ATTEMPTS} attempts",
            claim.key
        )))
    }

    async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<(&RefundId, &RefundSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError> {
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        if !Self::finish_key(&mut *tx, lease, response, ttl).await? {
            tx.rollback().await.map_err(store_error)?;
            return Ok(FinishOutcome::LeaseLost);
        }
        if let Some((refund_id, settlement)) = settlement {
            let (status, provider_refund_id, failure_code) = refund_settlement_columns(settlement);
            let settled = sqlx::query(concat!(
                "UPDATE refunds SET status = $3, provider_refund_id = $4, failure_code = $5, \
                     updated_at = now() \
                 WHERE shop_id = $1 AND id = $2 AND status = 'pending' RETURNING ",
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
                RefundStatus::Succeeded => {
                    "UPDATE payments SET refunded_minor = refunded_minor + $3, updated_at = now() \
                     WHERE shop_id = $1 AND id = $2 RETURNING reference"
                }
                _ => {
                    "UPDATE payments SET refund_reserved_minor = refund_reserved_minor - $3, \
                         updated_at = now() \
                     WHERE shop_id = $1 AND id = $2 RETURNING reference"
                }
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
            " FROM refunds WHERE shop_id = $1 AND id = $2"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.pool)
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
            " FROM payments WHERE shop_id = $1 AND id = $2"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.pool)
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
            " FROM payments WHERE shop_id = $1 AND reference = $2 ORDER BY created_at, id"
        ))
        .bind(shop_id.as_str())
        .bind(reference.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(store_error)?;
        rows.iter().map(payment_from_row).collect()
    }

    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        self.read_key(shop_id, key).await
    }

    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM idempotency_keys WHERE (shop_id, key) IN ( \
                 SELECT shop_id, key FROM idempotency_keys \
                 WHERE recovery_point = 'finished' AND expires_at <= now() \
                 ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)",
        )
        .bind(i64::from(batch))
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        Ok(done.rows_affected())
    }

    async fn stalled_keys(
        &self,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<StalledKey>, StoreError> {
        let rows = sqlx::query(
            "SELECT shop_id, key, fingerprint FROM idempotency_keys \
             WHERE recovery_point <> 'finished' \
               AND (locked_until IS NULL \
                    OR locked_until <= now() - $1::float8 * interval '1 millisecond') \
             ORDER BY locked_until NULLS FIRST LIMIT $2",
        )
        .bind(millis(idle) as f64)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
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
            " FROM payments WHERE status = 'pending' \
               AND created_at <= now() - $1::float8 * interval '1 millisecond' \
             ORDER BY created_at LIMIT $2"
        ))
        .bind(millis(older_than) as f64)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
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
            " FROM payments WHERE created_at >= $1 AND created_at < $2 \
               AND id > COALESCE($3::text, '') ORDER BY id LIMIT $4"
        ))
        .bind(from)
        .bind(to)
        .bind(after.map(PaymentId::as_str))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
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
            " FROM payments WHERE acquirer_key = $1"
        ))
        .bind(key.as_str())
        .fetch_optional(&self.pool)
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
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        let row = sqlx::query(concat!(
            "UPDATE payments SET status = $3, provider_payment_id = $4, decline_code = $5, \
                 updated_at = now() \
             WHERE shop_id = $1 AND id = $2 AND status = 'pending' RETURNING ",
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
        if let Some(row) = row {
            let payment = payment_from_row(&row)?;
            Self::insert_event(&mut tx, NewEvent::payment_settled(&payment)).await?;
            tx.commit().await.map_err(store_error)?;
            return Ok(SettleOutcome::Settled(payment));
        }
        tx.rollback().await.map_err(store_error)?;
        Ok(match self.payment(shop_id, id).await? {
            Some(payment) => SettleOutcome::AlreadyFinal(payment),
            None => SettleOutcome::NotFound,
        })
    }

    async fn record_event(&self, event: &InboundEvent) -> Result<EventRecorded, StoreError> {
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        let inserted = sqlx::query(
            "INSERT INTO acquirer_events (event_id, event_type, acquirer_key, shop_id, result) \
             VALUES ($1, $2, $3, $4, 'unchanged') ON CONFLICT (event_id) DO NOTHING RETURNING 1",
        )
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
                "UPDATE payments SET status = $3, provider_payment_id = $4, decline_code = $5, \
                     updated_at = now() \
                 WHERE acquirer_key = $1 AND shop_id = $2 AND status = 'pending' RETURNING ",
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
                    " FROM payments WHERE acquirer_key = $1 AND shop_id = $2"
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
        sqlx::query("UPDATE acquirer_events SET result = $2 WHERE event_id = $1")
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
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        let done =
            sqlx::query("UPDATE shops SET webhook_url = $2, webhook_secret = $3 WHERE id = $1")
                .bind(shop_id.as_str())
                .bind(endpoint.map(|e| e.url.as_str()))
                .bind(endpoint.map(|e| e.secret.expose()))
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
        if endpoint.is_some() {
            // Events parked while the shop had no URL are due now; their
            // give-up clock starts now.
            sqlx::query(
                "UPDATE events SET next_attempt_at = now(), due_since = now() \
                 WHERE shop_id = $1 AND delivered_at IS NULL AND gave_up_at IS NULL \
                   AND next_attempt_at >= to_timestamp($2::float8 / 1000)",
            )
            .bind(shop_id.as_str())
            .bind(PARKED_UNTIL_MS as f64)
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
            " FROM events WHERE shop_id = $1 AND ($2::text IS NULL OR event_type = $2) \
               AND ($3::text IS NULL \
                    OR seq < (SELECT seq FROM events WHERE shop_id = $1 AND id = $3)) \
             ORDER BY seq DESC LIMIT $4"
        ))
        .bind(shop_id.as_str())
        .bind(query.event_type.map(|t| t.as_str()))
        .bind(query.starting_after.as_ref().map(EventId::as_str))
        .bind(i64::from(query.limit))
        .fetch_all(&self.pool)
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
            " FROM events WHERE shop_id = $1 AND id = $2"
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.pool)
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
        let row = sqlx::query(concat!(
            "UPDATE events SET delivered_at = NULL, gave_up_at = NULL, locked_until = NULL, \
                 next_attempt_at = now(), due_since = now() \
             WHERE shop_id = $1 AND id = $2 RETURNING ",
            event_columns!()
        ))
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)?;
        row.map(|row| event_from_row(&row).map(|(_, event)| event))
            .transpose()
    }

    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(store_error)?;
        // SKIP LOCKED: concurrent relays claim disjoint events. An event
        // waits while an earlier one of its payment is still open (leased
        // or not), so a payment's events go out in commit order.
        let rows = sqlx::query(concat!(
            "UPDATE events SET locked_until = now() + $2::float8 * interval '1 millisecond' \
             WHERE seq IN ( \
                 SELECT e.seq FROM events e JOIN shops s ON s.id = e.shop_id \
                 WHERE s.webhook_url IS NOT NULL \
                   AND e.delivered_at IS NULL AND e.gave_up_at IS NULL \
                   AND e.next_attempt_at <= now() \
                   AND (e.locked_until IS NULL OR e.locked_until <= now()) \
                   AND NOT EXISTS (SELECT 1 FROM events p WHERE p.payment_id = e.payment_id \
                       AND p.seq < e.seq AND p.delivered_at IS NULL AND p.gave_up_at IS NULL) \
                 ORDER BY e.seq LIMIT $1 FOR UPDATE OF e SKIP LOCKED) \
             RETURNING ",
            event_columns!()
        ))
        .bind(i64::from(limit))
        .bind(millis(lease) as f64)
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
                    sqlx::query("SELECT webhook_url, webhook_secret FROM shops WHERE id = $1")
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
        let status = status.map(|s| s as i32);
        let query = if delivered {
            sqlx::query(
                "UPDATE events SET attempts = attempts + 1, last_status = $2, last_error = NULL, \
                     delivered_at = COALESCE(delivered_at, now()), locked_until = NULL \
                 WHERE id = $1",
            )
            .bind(id.as_str())
            .bind(status)
        } else {
            // The last retry is due at the give-up time at the latest; an
            // attempt that fails at or after it gives up.
            sqlx::query(
                "UPDATE events SET attempts = attempts + 1, last_status = $2, last_error = $3, \
                     locked_until = NULL, \
                     gave_up_at = CASE WHEN delivered_at IS NULL \
                         AND now() >= due_since + $5::float8 * interval '1 millisecond' \
                         THEN now() ELSE gave_up_at END, \
                     next_attempt_at = LEAST(now() + $4::float8 * interval '1 millisecond', \
                         due_since + $5::float8 * interval '1 millisecond') \
                 WHERE id = $1",
            )
            .bind(id.as_str())
            .bind(status)
            .bind(error)
            .bind(retry_ms as f64)
            .bind(give_up_ms as f64)
        };
        query.execute(&self.pool).await.map_err(store_error)?;
        Ok(())
    }

    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        let done = sqlx::query(
            "INSERT INTO shops (id, secret_sha256) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
        )
        .bind(shop_id.as_str())
        .bind(secret.as_bytes().as_slice())
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::ShopExists(shop_id.to_string()));
        }
        Ok(())
    }

    async fn shop_secret(&self, shop_id: &ShopId) -> Result<Option<SecretHash>, StoreError> {
        let row = sqlx::query("SELECT secret_sha256 FROM shops WHERE id = $1")
            .bind(shop_id.as_str())
            .fetch_optional(&self.pool)
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
            .execute(&self.pool)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
