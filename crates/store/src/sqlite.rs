//! The SQLite store: the embedded default, one file, one process.
//!
//! The file is in WAL mode with `synchronous=FULL`: nothing is answered
//! before it is on disk. Writes go to one writer thread that commits the
//! writes arriving together in one transaction and one fsync (group commit,
//! see [`chargeonce_sqlite`]); each store call is one write there, in a
//! savepoint of its own, so it is as atomic as its own transaction would be
//! and is undone alone when it decides to roll back. Reads run on reader
//! threads and see every committed write. The writer is the only one, so a
//! write sees no concurrent change between its statements. The clock is
//! SQLite's (the process's host).
//!
//! Migrations run through sqlx's migrator (the same `_sqlx_migrations` table
//! as ever); everything else is rusqlite, a blocking call per statement on
//! the thread that owns the connection.
//!
//! Statements on the payment path avoid `RETURNING`: SQLite collects a
//! `RETURNING` clause's rows in an ephemeral table, whose creation (a b-tree,
//! a pager, a page cache) cost more than the write itself. A write reads
//! its count of changed rows instead, and a changed row back by its key.

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
use chargeonce_sqlite::rusqlite::{self, Connection, OptionalExtension, params};
use chargeonce_sqlite::{Database, Failure, Options, Stats, Write};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use time::OffsetDateTime;

use crate::PoolConfig;
use crate::codec::{
    EventColumns, KeyColumns, PaymentColumns, RefundColumns, attempt_columns, encode_headers,
    endpoint, event_result, millis, new_refund_row, refund_settlement_columns, reservation,
    stalled_key,
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
            ") AS lease_active, created_at AS created_at_ms, expires_at AS expires_at_ms, replays, \
             refund_id, CASE WHEN lease_token IS NULL AND locked_until > ",
            now_ms!(),
            " THEN locked_until - ",
            now_ms!(),
            " END AS settling_ms"
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

/// A store error on its way back from an SQLite thread.
#[derive(Debug)]
struct Fail(StoreError);

impl From<StoreError> for Fail {
    fn from(error: StoreError) -> Self {
        Self(error)
    }
}

impl From<Failure> for Fail {
    fn from(failure: Failure) -> Self {
        Self(match failure {
            // Nothing of the call is in the file in any of these cases.
            Failure::Closed
            | Failure::NotRun(_)
            | Failure::RolledBack(_)
            | Failure::CommitFailed(_) => StoreError::Unavailable(failure.to_string()),
            Failure::Panicked(_) => StoreError::Other(failure.to_string()),
            Failure::Overloaded(_) => StoreError::Overloaded(failure.to_string()),
        })
    }
}

impl From<rusqlite::Error> for Fail {
    fn from(error: rusqlite::Error) -> Self {
        Self(sql_error(error))
    }
}

/// Classifies an SQLite error: another holder of the lock is `Unavailable`
/// (the caller answers 503 and executes nothing), bad rows are `Corrupt`.
fn sql_error(error: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match &error {
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(
                e.code,
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::CannotOpen
            ) =>
        {
            StoreError::Unavailable(error.to_string())
        }
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::InvalidColumnName(_)
        | rusqlite::Error::IntegralValueOutOfRange(..) => StoreError::Corrupt(error.to_string()),
        _ => StoreError::Other(error.to_string()),
    }
}

type Result<T, E = Fail> = std::result::Result<T, E>;

/// [`Store`] on an SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    db: Database,
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
        let path = options.get_filename().to_owned();
        if path.as_os_str() == ":memory:" {
            return Err(StoreError::Other(
                "the SQLite store needs a file (sqlite://PATH), not an in-memory database".into(),
            ));
        }
        migrate(options, &path).await?;
        let db = Database::open(
            &path,
            Options {
                busy_timeout: Duration::from_secs(5),
                foreign_keys: true,
                readers: usize::try_from(config.max_connections.clamp(1, 4)).unwrap_or(4),
                queue: config.write_queue,
                ..Options::default()
            },
        )
        .await
        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        Ok(Self { db })
    }

    /// Closes every connection; later calls fail as `Unavailable`.
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// How many transactions carried how many writes so far (group commit).
    pub fn writer_stats(&self) -> Stats {
        self.db.stats()
    }

    async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<Write<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.db.write(work).await.map_err(|Fail(e)| e)
    }

    /// A write that starts new work (a claim, a take-over, a webhook's
    /// record): refused with [`StoreError::Overloaded`], nothing done, when
    /// the writer's queue is full. Everything that finishes work already
    /// started goes through [`Self::write`], which is never refused.
    async fn write_new<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<Write<T>> + Send + 'static,
        T: Send + 'static,
    {
        self.db.write_or_shed(work).await.map_err(|Fail(e)| e)
    }

    async fn read<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.db.read(work).await.map_err(|Fail(e)| e)
    }
}

/// Applies the embedded migrations through sqlx's migrator, with foreign
/// keys off as SQLite's table-rebuild procedure requires; when any ran,
/// checks that every foreign key still holds.
async fn migrate(options: SqliteConnectOptions, path: &std::path::Path) -> Result<(), StoreError> {
    // Through a one-connection pool: sqlx's migrator on a bare `&mut`
    // connection makes this future unsendable.
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options.foreign_keys(false))
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot open {}: {e}", path.display())))?;
    let result = migrate_with(&pool).await;
    pool.close().await;
    result
}

async fn migrate_with(pool: &sqlx::SqlitePool) -> Result<(), StoreError> {
    let applied = || async {
        let fail =
            |e: sqlx::Error| StoreError::Other(format!("reading the applied migrations: {e}"));
        let bookkept: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema \
                 WHERE type = 'table' AND name = '_sqlx_migrations')",
        )
        .fetch_one(pool)
        .await
        .map_err(fail)?;
        if !bookkept {
            return Ok(0);
        }
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM _sqlx_migrations")
            .fetch_one(pool)
            .await
            .map_err(fail)
    };
    let before = applied().await?;
    sqlx::migrate!("./migrations/sqlite")
        .run(pool)
        .await
        .map_err(|e| StoreError::Other(format!("migration failed: {e}")))?;
    if applied().await? == before {
        return Ok(());
    }
    let broken: Vec<(String, Option<i64>)> =
        sqlx::query_as("SELECT \"table\", rowid FROM pragma_foreign_key_check")
            .fetch_all(pool)
            .await
            .map_err(|e| {
                StoreError::Other(format!("checking foreign keys after migrating: {e}"))
            })?;
    if let Some((table, rowid)) = broken.first() {
        return Err(StoreError::Corrupt(format!(
            "after migrating, {} rows break a foreign key (the first: {table} rowid {rowid:?})",
            broken.len()
        )));
    }
    Ok(())
}

// ------------------------------------------------------------ write steps
//
// Each runs on the writer thread inside the current write's savepoint.

/// Phase 3's fenced write of a key: stores the final response and ends the
/// lease, only while `lease` still holds it. `false` (nothing written) when
/// the lease was taken over.
fn finish_key(
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
            response.body.as_slice(),
            millis(ttl),
        ])?;
    Ok(fenced == 1)
}

/// Writes a merchant event in the transaction of its transition.
fn insert_event(conn: &Connection, event: Option<NewEvent>) -> Result<()> {
    let Some(event) = event else { return Ok(()) };
    // A shop without a webhook URL gets its events parked (not due), so
    // the relay's scan of due events never reads them; set_webhook makes
    // them due.
    let inserted = conn
        .prepare_cached(concat!(
            "INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload, \
                 created_at, due_since, next_attempt_at) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ",
            now_ms!(),
            ", ",
            now_ms!(),
            ", CASE WHEN s.webhook_url IS NULL THEN ?7 ELSE ",
            now_ms!(),
            " END FROM shops s WHERE s.id = ?2"
        ))?
        .execute(params![
            event.id.as_str(),
            event.shop_id.as_str(),
            event.event_type.as_str(),
            event.payment_id.as_str(),
            event.refund_id.as_ref().map(RefundId::as_str),
            event.payload.as_slice(),
            PARKED_UNTIL_MS,
        ])?;
    if inserted != 1 {
        return Err(Fail(StoreError::Corrupt(format!(
            "event {} for unknown shop {}",
            event.id, event.shop_id
        ))));
    }
    Ok(())
}

/// Counts one more request with an existing key and reads it back.
fn count_repeat(
    conn: &Connection,
    shop_id: &ShopId,
    key: &IdempotencyKey,
) -> Result<Option<KeyRecord>> {
    let counted = conn
        .prepare_cached(
            "UPDATE idempotency_keys SET replays = replays + 1 WHERE shop_id = ?1 AND key = ?2",
        )?
        .execute(params![shop_id.as_str(), key.as_str()])?;
    if counted == 0 {
        return Ok(None);
    }
    key_in(conn, shop_id, key)
}

/// One key of one shop, on whichever connection.
fn key_in(conn: &Connection, shop_id: &ShopId, key: &IdempotencyKey) -> Result<Option<KeyRecord>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        key_columns!(),
        " FROM idempotency_keys WHERE shop_id = ?1 AND key = ?2"
    ))?
    .query_row(params![shop_id.as_str(), key.as_str()], |row| {
        Ok(key_from_row(row))
    })
    .optional()?
    .transpose()
}

/// Inserts a key row with a fresh lease, or re-claims an expired finished
/// one; `false` when the key exists otherwise (nothing written).
fn insert_key(
    conn: &Connection,
    claim: &ClaimRequest,
    target: KeyTarget<'_>,
    token: LeaseToken,
    timing: KeyTiming,
) -> Result<bool> {
    let inserted = conn
        .prepare_cached(concat!(
            "INSERT INTO idempotency_keys AS k (shop_id, key, fingerprint, method, path, \
                 recovery_point, lease_token, locked_until, payment_id, refund_id, created_at, \
                 expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?10, ?6, ",
            now_ms!(),
            " + ?7, ?8, ?11, ",
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
            now_ms!()
        ))?
        .execute(params![
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
        ])?;
    // 1: inserted, or an expired finished key re-claimed; 0: it exists.
    Ok(inserted == 1)
}

/// What a new key row points at.
#[derive(Clone, Copy)]
struct KeyTarget<'a> {
    recovery_point: RecoveryPoint,
    payment_id: &'a PaymentId,
    refund_id: Option<&'a RefundId>,
}

/// Inserts the payment, or links the order's live payment when it has one.
fn insert_payment(
    conn: &Connection,
    payment: &NewPayment,
) -> Result<Option<(RecoveryPoint, Payment)>> {
    let inserted = conn
        .prepare_cached(concat!(
            "INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor, \
                 currency, token, status, acquirer_key, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?9, ",
            now_ms!(),
            ") ON CONFLICT (shop_id, reference) WHERE status IN ('pending', 'succeeded') \
             DO NOTHING"
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
        ])?;
    if inserted == 1 {
        return Ok(Some((RecoveryPoint::PaymentCreated, payment.to_payment())));
    }
    // The writer is the only one: the live payment is there to read.
    let Some(existing) = conn
        .prepare_cached(concat!(
            "SELECT ",
            payment_columns!(),
            " FROM payments WHERE shop_id = ?1 AND reference = ?2 \
              AND status IN ('pending', 'succeeded')"
        ))?
        .query_row(
            params![payment.shop_id.as_str(), payment.request.reference.as_str()],
            |row| Ok(payment_from_row(row)),
        )
        .optional()?
        .transpose()?
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

/// One payment of one shop, on whichever connection.
fn payment_in(conn: &Connection, shop_id: &ShopId, id: &PaymentId) -> Result<Option<Payment>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        payment_columns!(),
        " FROM payments WHERE shop_id = ?1 AND id = ?2"
    ))?
    .query_row(params![shop_id.as_str(), id.as_str()], |row| {
        Ok(payment_from_row(row))
    })
    .optional()?
    .transpose()
}

/// One refund of one shop, on whichever connection.
fn refund_in(conn: &Connection, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        refund_columns!(),
        " FROM refunds WHERE shop_id = ?1 AND id = ?2"
    ))?
    .query_row(params![shop_id.as_str(), id.as_str()], |row| {
        Ok(refund_from_row(row))
    })
    .optional()?
    .transpose()
}

/// Which row a settlement names.
#[derive(Clone, Copy)]
enum SettleBy {
    /// The payment's id.
    Id,
    /// The payment's acquirer key (webhooks).
    AcquirerKey,
}

/// One event of one shop, on whichever connection.
fn event_in(conn: &Connection, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        event_columns!(),
        " FROM events WHERE shop_id = ?1 AND id = ?2"
    ))?
    .query_row(params![shop_id.as_str(), id.as_str()], |row| {
        Ok(event_from_row(row).map(|(_, event)| event))
    })
    .optional()?
    .transpose()
}

/// The conditional update `pending` -> final and the read of the row back,
/// for a payment named by id or by acquirer key.
fn settle_sql(by: SettleBy) -> (&'static str, &'static str) {
    match by {
        SettleBy::Id => (
            concat!(
                "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
                     updated_at = ",
                now_ms!(),
                " WHERE id = ?1 AND shop_id = ?2 AND status = 'pending'"
            ),
            concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE id = ?1 AND shop_id = ?2"
            ),
        ),
        SettleBy::AcquirerKey => (
            concat!(
                "UPDATE payments SET status = ?3, provider_payment_id = ?4, decline_code = ?5, \
                     updated_at = ",
                now_ms!(),
                " WHERE acquirer_key = ?1 AND shop_id = ?2 AND status = 'pending'"
            ),
            concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE acquirer_key = ?1 AND shop_id = ?2"
            ),
        ),
    }
}

/// Settles a pending payment (`pending` -> final, a conditional update);
/// `false` when no pending payment matched.
fn settle_row(
    conn: &Connection,
    by: SettleBy,
    which: &str,
    shop_id: &ShopId,
    settlement: &Settlement,
) -> Result<bool> {
    let settled = conn.prepare_cached(settle_sql(by).0)?.execute(params![
        which,
        shop_id.as_str(),
        settlement.status.as_str(),
        settlement.provider_payment_id,
        settlement.decline_code,
    ])?;
    Ok(settled == 1)
}

/// [`settle_row`], and the settled row read back; `None` when no pending
/// payment matched.
fn settle_where(
    conn: &Connection,
    by: SettleBy,
    which: &str,
    shop_id: &ShopId,
    settlement: &Settlement,
) -> Result<Option<Payment>> {
    if !settle_row(conn, by, which, shop_id, settlement)? {
        return Ok(None);
    }
    conn.prepare_cached(settle_sql(by).1)?
        .query_row(params![which, shop_id.as_str()], |row| {
            Ok(payment_from_row(row))
        })?
        .map(Some)
}

// ------------------------------------------------------------ rows

fn unix_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn from_unix_ms(ms: i64) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| Fail(StoreError::Corrupt(format!("timestamp {ms}: {e}"))))
}

fn event_from_row(row: &rusqlite::Row<'_>) -> Result<(i64, Event)> {
    Ok(EventColumns {
        seq: row.get("seq")?,
        id: row.get("id")?,
        shop_id: row.get("shop_id")?,
        event_type: row.get("event_type")?,
        payment_id: row.get("payment_id")?,
        refund_id: row.get("refund_id")?,
        payload: row.get("payload")?,
        created_at_ms: row.get("created_at_ms")?,
        attempts: row.get("attempts")?,
        next_attempt_at_ms: row.get("next_attempt_at_ms")?,
        delivered_at_ms: row.get("delivered_at_ms")?,
        gave_up_at_ms: row.get("gave_up_at_ms")?,
        last_status: row.get("last_status")?,
        last_error: row.get("last_error")?,
    }
    .into_event()?)
}

fn payment_from_row(row: &rusqlite::Row<'_>) -> Result<Payment> {
    Ok(PaymentColumns {
        id: row.get("id")?,
        shop_id: row.get("shop_id")?,
        idempotency_key: row.get("idempotency_key")?,
        reference: row.get("reference")?,
        amount_minor: row.get("amount_minor")?,
        currency: row.get("currency")?,
        token: row.get("token")?,
        status: row.get("status")?,
        acquirer_key: row.get("acquirer_key")?,
        provider_payment_id: row.get("provider_payment_id")?,
        decline_code: row.get("decline_code")?,
        created_at: from_unix_ms(row.get("created_at")?)?,
        refunded_minor: row.get("refunded_minor")?,
    }
    .into_payment()?)
}

fn refund_from_row(row: &rusqlite::Row<'_>) -> Result<Refund> {
    Ok(RefundColumns {
        id: row.get("id")?,
        shop_id: row.get("shop_id")?,
        payment_id: row.get("payment_id")?,
        idempotency_key: row.get("idempotency_key")?,
        amount_minor: row.get("amount_minor")?,
        currency: row.get("currency")?,
        status: row.get("status")?,
        acquirer_key: row.get("acquirer_key")?,
        provider_refund_id: row.get("provider_refund_id")?,
        failure_code: row.get("failure_code")?,
        created_at: from_unix_ms(row.get("created_at")?)?,
    }
    .into_refund()?)
}

fn key_from_row(row: &rusqlite::Row<'_>) -> Result<KeyRecord> {
    Ok(KeyColumns {
        shop_id: row.get("shop_id")?,
        key: row.get("key")?,
        fingerprint: row.get("fingerprint")?,
        method: row.get("method")?,
        path: row.get("path")?,
        recovery_point: row.get("recovery_point")?,
        payment_id: row.get("payment_id")?,
        response_status: row.get("response_status")?,
        response_headers: row.get("response_headers")?,
        response_body: row.get("response_body")?,
        lease_active: row.get("lease_active")?,
        refund_id: row.get("refund_id")?,
        settling_ms: row.get("settling_ms")?,
        created_at_ms: row.get("created_at_ms")?,
        expires_at_ms: row.get("expires_at_ms")?,
        replays: row.get("replays")?,
    }
    .into_record()?)
}

/// Collects a query's rows, each decoded by `decode`.
fn all<T>(
    conn: &Connection,
    sql: &'static str,
    params: impl rusqlite::Params,
    decode: impl Fn(&rusqlite::Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode(row)?);
    }
    Ok(out)
}

#[async_trait]
impl Store for SqliteStore {
    async fn claim_payment(
        &self,
        claim: &ClaimRequest,
        payment: &NewPayment,
        timing: KeyTiming,
    ) -> Result<Claim, StoreError> {
        let (claim, payment) = (claim.clone(), payment.clone());
        self.write_new(move |conn| {
            let token = LeaseToken::generate();
            let target = KeyTarget {
                recovery_point: RecoveryPoint::PaymentCreated,
                payment_id: &payment.id,
                refund_id: None,
            };
            if !insert_key(conn, &claim, target, token, timing)? {
                let record = count_repeat(conn, &claim.shop_id, &claim.key)?.ok_or_else(|| {
                    StoreError::Other(format!("key {} conflicted but cannot be read", claim.key))
                })?;
                return Ok(Write::Commit(Claim::Exists(record)));
            }
            let (recovery_point, linked) = insert_payment(conn, &payment)?.ok_or_else(|| {
                StoreError::Other(format!(
                    "order of key {} has a live payment that cannot be read",
                    claim.key
                ))
            })?;
            Ok(Write::Commit(Claim::Acquired(Acquired {
                lease: Lease {
                    shop_id: claim.shop_id,
                    key: claim.key,
                    token,
                },
                recovery_point,
                payment: linked,
                refund: None,
            })))
        })
        .await
    }

    async fn take_over(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        lease: Duration,
    ) -> Result<Option<Acquired>, StoreError> {
        let (shop_id, key, fingerprint) = (shop_id.clone(), key.clone(), *fingerprint);
        self.write_new(move |conn| {
            let token = LeaseToken::generate();
            let taken = conn
                .prepare_cached(concat!(
                    "UPDATE idempotency_keys SET lease_token = ?3, locked_until = ",
                    now_ms!(),
                    " + ?4 WHERE shop_id = ?1 AND key = ?2 AND fingerprint = ?5 \
                       AND recovery_point <> 'finished' \
                       AND (locked_until IS NULL OR locked_until <= ",
                    now_ms!(),
                    ")"
                ))?
                .execute(params![
                    shop_id.as_str(),
                    key.as_str(),
                    token.as_uuid().to_string(),
                    millis(lease),
                    fingerprint.as_bytes().as_slice(),
                ])?;
            if taken == 0 {
                return Ok(Write::Commit(None));
            }
            let (payment_id, refund_id, recovery_point) = conn
                .prepare_cached(
                    "SELECT payment_id, refund_id, recovery_point FROM idempotency_keys \
                     WHERE shop_id = ?1 AND key = ?2",
                )?
                .query_row(params![shop_id.as_str(), key.as_str()], |row| {
                    Ok((
                        row.get::<_, String>("payment_id")?,
                        row.get::<_, Option<String>>("refund_id")?,
                        row.get::<_, String>("recovery_point")?,
                    ))
                })?;
            let corrupt = |what: String| Fail(StoreError::Corrupt(what));
            let recovery_point = RecoveryPoint::parse(&recovery_point)
                .ok_or_else(|| corrupt(format!("recovery point `{recovery_point}`")))?;
            let payment_id = PaymentId::parse(&payment_id).map_err(|e| corrupt(e.to_string()))?;
            let payment = payment_in(conn, &shop_id, &payment_id)?.ok_or_else(|| {
                corrupt(format!("key {key} points at missing payment {payment_id}"))
            })?;
            let refund = match refund_id {
                Some(id) => {
                    let id = RefundId::parse(&id).map_err(|e| corrupt(e.to_string()))?;
                    Some(Box::new(refund_in(conn, &shop_id, &id)?.ok_or_else(
                        || corrupt(format!("key {key} points at missing refund {id}")),
                    )?))
                }
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
            })))
        })
        .await
    }

    async fn renew_lease(&self, lease: &Lease, duration: Duration) -> Result<bool, StoreError> {
        let lease = lease.clone();
        self.write(move |conn| {
            let done = conn
                .prepare_cached(concat!(
                    "UPDATE idempotency_keys SET locked_until = ",
                    now_ms!(),
                    " + ?4 WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
                       AND recovery_point <> 'finished'"
                ))?
                .execute(params![
                    lease.shop_id.as_str(),
                    lease.key.as_str(),
                    lease.token.as_uuid().to_string(),
                    millis(duration),
                ])?;
            Ok(Write::Commit(done == 1))
        })
        .await
    }

    async fn park_lease(&self, lease: &Lease, hold: Duration) -> Result<bool, StoreError> {
        let lease = lease.clone();
        let hold = millis(hold);
        self.write(move |conn| {
            let done = conn
                .prepare_cached(concat!(
                    "UPDATE idempotency_keys SET lease_token = NULL, locked_until = ",
                    now_ms!(),
                    " + ?4 WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
                       AND recovery_point <> 'finished'"
                ))?
                .execute(params![
                    lease.shop_id.as_str(),
                    lease.key.as_str(),
                    lease.token.as_uuid().to_string(),
                    hold,
                ])?;
            Ok(Write::Commit(done == 1))
        })
        .await
    }

    async fn abandon_key(&self, lease: &Lease) -> Result<bool, StoreError> {
        let lease = lease.clone();
        self.write(move |conn| {
            let done = conn
                .prepare_cached(
                    "DELETE FROM idempotency_keys \
                     WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
                       AND recovery_point = 'order_already_paid'",
                )?
                .execute(params![
                    lease.shop_id.as_str(),
                    lease.key.as_str(),
                    lease.token.as_uuid().to_string(),
                ])?;
            Ok(Write::Commit(done == 1))
        })
        .await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError> {
        let lease = lease.clone();
        self.write(move |conn| {
            let done = conn
                .prepare_cached(concat!(
                    "UPDATE idempotency_keys SET locked_until = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND key = ?2 AND lease_token = ?3 \
                       AND recovery_point <> 'finished'"
                ))?
                .execute(params![
                    lease.shop_id.as_str(),
                    lease.key.as_str(),
                    lease.token.as_uuid().to_string(),
                ])?;
            Ok(Write::Commit(done == 1))
        })
        .await
    }

    async fn finish(
        &self,
        lease: &Lease,
        settlement: Option<(&Payment, &Settlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError> {
        let lease = lease.clone();
        let settlement = settlement.map(|(payment, s)| (payment.clone(), s.clone()));
        let response = response.clone();
        self.write(move |conn| {
            if !finish_key(conn, &lease, &response, ttl)? {
                return Ok(Write::Rollback(FinishOutcome::LeaseLost));
            }
            if let Some((payment, settlement)) = settlement {
                if !settle_row(
                    conn,
                    SettleBy::Id,
                    payment.id.as_str(),
                    &lease.shop_id,
                    &settlement,
                )? {
                    return Ok(Write::Rollback(FinishOutcome::PaymentAlreadySettled));
                }
                // A payment's order and amount never change: the event is
                // built from the caller's payment, settled.
                insert_event(
                    conn,
                    NewEvent::payment_settled(&payment.settled(&settlement)),
                )?;
            }
            Ok(Write::Commit(FinishOutcome::Stored))
        })
        .await
    }

    async fn claim_refund(
        &self,
        claim: &ClaimRequest,
        refund: &NewRefund,
        timing: KeyTiming,
    ) -> Result<RefundClaim, StoreError> {
        let (claim, refund) = (claim.clone(), refund.clone());
        self.write_new(move |conn| {
            let token = LeaseToken::generate();
            let target = KeyTarget {
                recovery_point: RecoveryPoint::RefundCreated,
                payment_id: &refund.payment_id,
                refund_id: Some(&refund.id),
            };
            if !insert_key(conn, &claim, target, token, timing)? {
                let record = count_repeat(conn, &claim.shop_id, &claim.key)?.ok_or_else(|| {
                    StoreError::Other(format!("key {} conflicted but cannot be read", claim.key))
                })?;
                return Ok(Write::Commit(RefundClaim::Exists(record)));
            }
            // The writer is the only one: no other refund moves the
            // reservation between this read and the update.
            let found = conn
                .prepare_cached(concat!(
                    "SELECT ",
                    payment_columns!(),
                    ", refund_reserved_minor FROM payments WHERE shop_id = ?1 AND id = ?2"
                ))?
                .query_row(
                    params![refund.shop_id.as_str(), refund.payment_id.as_str()],
                    |row| {
                        Ok(row
                            .get::<_, i64>("refund_reserved_minor")
                            .map_err(Fail::from)
                            .and_then(|reserved| Ok((payment_from_row(row)?, reserved))))
                    },
                )
                .optional()?
                .transpose()?;
            let decided = match found {
                None => Err(RefundRefusal::PaymentNotFound),
                Some((payment, reserved)) => {
                    reservation(&payment, reserved, &refund).map(|amount| (payment, amount))
                }
            };
            let (payment, amount) = match decided {
                Ok(found) => found,
                Err(refused) => return Ok(Write::Rollback(RefundClaim::Refused(refused))),
            };
            let reserved = conn
                .prepare_cached(concat!(
                    "UPDATE payments SET refund_reserved_minor = refund_reserved_minor + ?3, \
                         updated_at = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2 AND status = 'succeeded' \
                       AND refund_reserved_minor + ?3 <= amount_minor"
                ))?
                .execute(params![
                    refund.shop_id.as_str(),
                    refund.payment_id.as_str(),
                    amount.minor_units(),
                ])?;
            if reserved != 1 {
                return Err(Fail(StoreError::Other(format!(
                    "refund reservation on payment {} failed after its check",
                    refund.payment_id
                ))));
            }
            let created = new_refund_row(&refund, amount);
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
            Ok(Write::Commit(RefundClaim::Acquired(Acquired {
                lease: Lease {
                    shop_id: claim.shop_id,
                    key: claim.key,
                    token,
                },
                recovery_point: RecoveryPoint::RefundCreated,
                payment,
                refund: Some(Box::new(created)),
            })))
        })
        .await
    }

    async fn finish_refund(
        &self,
        lease: &Lease,
        settlement: Option<(&RefundId, &RefundSettlement)>,
        response: &StoredResponse,
        ttl: Duration,
    ) -> Result<FinishOutcome, StoreError> {
        let lease = lease.clone();
        let settlement = settlement.map(|(id, s)| (id.clone(), s.clone()));
        let response = response.clone();
        self.write(move |conn| {
            if !finish_key(conn, &lease, &response, ttl)? {
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
                StoreError::Other(format!("refund {refund_id} vanished while settled"))
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
            insert_event(conn, NewEvent::refund_settled(&refund, &reference))?;
            Ok(Write::Commit(FinishOutcome::Stored))
        })
        .await
    }

    async fn refund(&self, shop_id: &ShopId, id: &RefundId) -> Result<Option<Refund>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| refund_in(conn, &shop_id, &id)).await
    }

    async fn payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| payment_in(conn, &shop_id, &id)).await
    }

    async fn payments_by_reference(
        &self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<Payment>, StoreError> {
        let (shop_id, reference) = (shop_id.clone(), reference.clone());
        self.read(move |conn| {
            all(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE shop_id = ?1 AND reference = ?2 \
                      ORDER BY created_at, id"
                ),
                params![shop_id.as_str(), reference.as_str()],
                payment_from_row,
            )
        })
        .await
    }

    async fn key(
        &self,
        shop_id: &ShopId,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let (shop_id, key) = (shop_id.clone(), key.clone());
        self.read(move |conn| key_in(conn, &shop_id, &key)).await
    }

    async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError> {
        self.write(move |conn| {
            let deleted = conn
                .prepare_cached(concat!(
                    "DELETE FROM idempotency_keys WHERE rowid IN ( \
                         SELECT rowid FROM idempotency_keys \
                         WHERE recovery_point = 'finished' AND expires_at <= ",
                    now_ms!(),
                    " ORDER BY expires_at LIMIT ?1)"
                ))?
                .execute(params![i64::from(batch)])?;
            Ok(Write::Commit(u64::try_from(deleted).unwrap_or(u64::MAX)))
        })
        .await
    }

    async fn stalled_keys(
        &self,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<StalledKey>, StoreError> {
        self.read(move |conn| {
            all(
                conn,
                concat!(
                    "SELECT shop_id, key, fingerprint FROM idempotency_keys \
                     WHERE recovery_point <> 'finished' \
                       AND (locked_until IS NULL OR locked_until <= ",
                    now_ms!(),
                    " - ?1) ORDER BY locked_until NULLS FIRST LIMIT ?2"
                ),
                params![millis(idle), i64::from(limit)],
                |row| {
                    let fingerprint: Vec<u8> = row.get("fingerprint")?;
                    Ok(stalled_key(
                        row.get("shop_id")?,
                        row.get("key")?,
                        &fingerprint,
                    )?)
                },
            )
        })
        .await
    }

    async fn pending_payments(
        &self,
        older_than: Duration,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        self.read(move |conn| {
            all(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE status = 'pending' AND created_at <= ",
                    now_ms!(),
                    " - ?1 ORDER BY created_at LIMIT ?2"
                ),
                params![millis(older_than), i64::from(limit)],
                payment_from_row,
            )
        })
        .await
    }

    async fn payments_created_between(
        &self,
        from: OffsetDateTime,
        to: OffsetDateTime,
        after: Option<&PaymentId>,
        limit: u32,
    ) -> Result<Vec<Payment>, StoreError> {
        let after = after.cloned();
        self.read(move |conn| {
            all(
                conn,
                concat!(
                    "SELECT ",
                    payment_columns!(),
                    " FROM payments WHERE created_at >= ?1 AND created_at < ?2 \
                       AND id > COALESCE(?3, '') ORDER BY id LIMIT ?4"
                ),
                params![
                    unix_ms(from),
                    unix_ms(to),
                    after.as_ref().map(PaymentId::as_str),
                    i64::from(limit),
                ],
                payment_from_row,
            )
        })
        .await
    }

    async fn payment_by_acquirer_key(
        &self,
        key: &AcquirerKey,
    ) -> Result<Option<Payment>, StoreError> {
        let key = key.clone();
        self.read(move |conn| {
            conn.prepare_cached(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE acquirer_key = ?1"
            ))?
            .query_row(params![key.as_str()], |row| Ok(payment_from_row(row)))
            .optional()?
            .transpose()
        })
        .await
    }

    async fn settle_payment(
        &self,
        shop_id: &ShopId,
        id: &PaymentId,
        settlement: &Settlement,
    ) -> Result<SettleOutcome, StoreError> {
        let (shop_id, id, settlement) = (shop_id.clone(), id.clone(), settlement.clone());
        self.write(move |conn| {
            let outcome =
                match settle_where(conn, SettleBy::Id, id.as_str(), &shop_id, &settlement)? {
                    Some(payment) => {
                        insert_event(conn, NewEvent::payment_settled(&payment))?;
                        SettleOutcome::Settled(payment)
                    }
                    None => match payment_in(conn, &shop_id, &id)? {
                        Some(payment) => SettleOutcome::AlreadyFinal(payment),
                        None => SettleOutcome::NotFound,
                    },
                };
            Ok(Write::Commit(outcome))
        })
        .await
    }

    async fn record_event(&self, event: &InboundEvent) -> Result<EventRecorded, StoreError> {
        let event = event.clone();
        self.write_new(move |conn| {
            let inserted = conn
                .prepare_cached(concat!(
                    "INSERT INTO acquirer_events \
                         (event_id, event_type, acquirer_key, shop_id, result, received_at) \
                     VALUES (?1, ?2, ?3, ?4, 'unchanged', ",
                    now_ms!(),
                    ") ON CONFLICT (event_id) DO NOTHING"
                ))?
                .execute(params![
                    event.event_id,
                    event.kind.as_str(),
                    event.acquirer_key.as_str(),
                    event.shop_id.as_str(),
                ])?;
            if inserted == 0 {
                return Ok(Write::Rollback(EventRecorded::Duplicate));
            }
            let settled = match &event.settlement {
                Some(settlement) => settle_where(
                    conn,
                    SettleBy::AcquirerKey,
                    event.acquirer_key.as_str(),
                    &event.shop_id,
                    settlement,
                )?,
                None => None,
            };
            let recorded = match settled {
                Some(payment) => {
                    insert_event(conn, NewEvent::payment_settled(&payment))?;
                    EventRecorded::Settled(payment)
                }
                None => {
                    let found = conn
                        .prepare_cached(concat!(
                            "SELECT ",
                            payment_columns!(),
                            " FROM payments WHERE acquirer_key = ?1 AND shop_id = ?2"
                        ))?
                        .query_row(
                            params![event.acquirer_key.as_str(), event.shop_id.as_str()],
                            |row| Ok(payment_from_row(row)),
                        )
                        .optional()?
                        .transpose()?;
                    match found {
                        Some(payment) => EventRecorded::Unchanged(payment),
                        None => EventRecorded::UnknownPayment,
                    }
                }
            };
            conn.prepare_cached("UPDATE acquirer_events SET result = ?2 WHERE event_id = ?1")?
                .execute(params![event.event_id, event_result(&recorded)])?;
            Ok(Write::Commit(recorded))
        })
        .await
    }

    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError> {
        let (shop_id, endpoint) = (shop_id.clone(), endpoint.cloned());
        self.write(move |conn| {
            let done = conn
                .prepare_cached(
                    "UPDATE shops SET webhook_url = ?2, webhook_secret = ?3 WHERE id = ?1",
                )?
                .execute(params![
                    shop_id.as_str(),
                    endpoint.as_ref().map(|e| e.url.as_str()),
                    endpoint.as_ref().map(|e| e.secret.expose()),
                ])?;
            if endpoint.is_some() {
                // Events parked while the shop had no URL are due now; their
                // give-up clock starts now.
                conn.prepare_cached(concat!(
                    "UPDATE events SET next_attempt_at = ",
                    now_ms!(),
                    ", due_since = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND delivered_at IS NULL AND gave_up_at IS NULL \
                       AND next_attempt_at >= ?2"
                ))?
                .execute(params![shop_id.as_str(), PARKED_UNTIL_MS])?;
            }
            Ok(Write::Commit(done == 1))
        })
        .await
    }

    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError> {
        let (shop_id, query) = (shop_id.clone(), query.clone());
        self.read(move |conn| {
            all(
                conn,
                concat!(
                    "SELECT ",
                    event_columns!(),
                    " FROM events WHERE shop_id = ?1 AND (?2 IS NULL OR event_type = ?2) \
                       AND (?3 IS NULL \
                            OR seq < (SELECT seq FROM events WHERE shop_id = ?1 AND id = ?3)) \
                     ORDER BY seq DESC LIMIT ?4"
                ),
                params![
                    shop_id.as_str(),
                    query.event_type.map(|t| t.as_str()),
                    query.starting_after.as_ref().map(EventId::as_str),
                    i64::from(query.limit),
                ],
                |row| event_from_row(row).map(|(_, event)| event),
            )
        })
        .await
    }

    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.read(move |conn| event_in(conn, &shop_id, &id)).await
    }

    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError> {
        let (shop_id, id) = (shop_id.clone(), id.clone());
        self.write_new(move |conn| {
            let resent = conn
                .prepare_cached(concat!(
                    "UPDATE events SET delivered_at = NULL, gave_up_at = NULL, \
                         locked_until = NULL, next_attempt_at = ",
                    now_ms!(),
                    ", due_since = ",
                    now_ms!(),
                    " WHERE shop_id = ?1 AND id = ?2"
                ))?
                .execute(params![shop_id.as_str(), id.as_str()])?;
            if resent == 0 {
                return Ok(Write::Commit(None));
            }
            event_in(conn, &shop_id, &id).map(Write::Commit)
        })
        .await
    }

    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError> {
        // A read first, so an idle relay does not queue on the one writer.
        let any_due = self
            .read(|conn| {
                Ok(conn
                    .prepare_cached(concat!(
                        "SELECT 1 FROM events e JOIN shops s ON s.id = e.shop_id \
                         WHERE s.webhook_url IS NOT NULL \
                           AND e.delivered_at IS NULL AND e.gave_up_at IS NULL \
                           AND e.next_attempt_at <= ",
                        now_ms!(),
                        " AND (e.locked_until IS NULL OR e.locked_until <= ",
                        now_ms!(),
                        ") LIMIT 1"
                    ))?
                    .query_row([], |_| Ok(()))
                    .optional()?
                    .is_some())
            })
            .await?;
        if !any_due {
            return Ok(Vec::new());
        }
        self.write(move |conn| {
            // One writer: nobody claims between these statements. An event
            // waits while an earlier one of its payment is still open. (One
            // RETURNING per relay poll, for many rows: it stays.)
            let mut claimed = all(
                conn,
                concat!(
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
                               AND p.seq < e.seq AND p.delivered_at IS NULL \
                               AND p.gave_up_at IS NULL) \
                         ORDER BY e.seq LIMIT ?1) \
                     RETURNING ",
                    event_columns!()
                ),
                params![i64::from(limit), millis(lease)],
                event_from_row,
            )?;
            claimed.sort_by_key(|(seq, _)| *seq);
            // One read of each shop's endpoint per claim, not one per event.
            let mut endpoints: HashMap<ShopId, WebhookEndpoint> = HashMap::new();
            let mut due = Vec::with_capacity(claimed.len());
            for (_, event) in claimed {
                let endpoint = match endpoints.get(&event.shop_id) {
                    Some(known) => known.clone(),
                    None => {
                        let (url, secret) = conn
                            .prepare_cached(
                                "SELECT webhook_url, webhook_secret FROM shops WHERE id = ?1",
                            )?
                            .query_row(params![event.shop_id.as_str()], |row| {
                                Ok((row.get("webhook_url")?, row.get("webhook_secret")?))
                            })?;
                        let found = endpoint(url, secret).ok_or_else(|| {
                            StoreError::Corrupt(format!("shop {} lost its webhook", event.shop_id))
                        })?;
                        endpoints.insert(event.shop_id.clone(), found.clone());
                        found
                    }
                };
                due.push(DueEvent { event, endpoint });
            }
            Ok(Write::Commit(due))
        })
        .await
    }

    async fn record_attempt(
        &self,
        id: &EventId,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError> {
        let id = id.clone();
        let (status, error, delivered, retry_ms, give_up_ms) = attempt_columns(outcome);
        self.write(move |conn| {
            if delivered {
                conn.prepare_cached(concat!(
                    "UPDATE events SET attempts = attempts + 1, last_status = ?2, \
                         last_error = NULL, delivered_at = COALESCE(delivered_at, ",
                    now_ms!(),
                    "), locked_until = NULL WHERE id = ?1"
                ))?
                .execute(params![id.as_str(), status])?;
            } else {
                conn.prepare_cached(concat!(
                    "UPDATE events SET attempts = attempts + 1, last_status = ?2, \
                         last_error = ?3, locked_until = NULL, \
                         gave_up_at = CASE WHEN delivered_at IS NULL AND ",
                    now_ms!(),
                    " >= due_since + ?5 THEN ",
                    now_ms!(),
                    " ELSE gave_up_at END, next_attempt_at = MIN(",
                    now_ms!(),
                    " + ?4, due_since + ?5) WHERE id = ?1"
                ))?
                .execute(params![
                    id.as_str(),
                    status,
                    error,
                    retry_ms,
                    give_up_ms
                ])?;
            }
            Ok(Write::Commit(()))
        })
        .await
    }

    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError> {
        let (shop_id, secret) = (shop_id.clone(), secret.clone());
        self.write(move |conn| {
            let added = conn
                .prepare_cached(concat!(
                    "INSERT INTO shops (id, secret_sha256, created_at) VALUES (?1, ?2, ",
                    now_ms!(),
                    ") ON CONFLICT (id) DO NOTHING"
                ))?
                .execute(params![shop_id.as_str(), secret.as_bytes().as_slice()])?;
            if added == 0 {
                return Err(Fail(StoreError::ShopExists(shop_id.to_string())));
            }
            Ok(Write::Commit(()))
        })
        .await
    }

    async fn shop_secret(&self, shop_id: &ShopId) -> Result<Option<SecretHash>, StoreError> {
        let shop_id = shop_id.clone();
        self.read(move |conn| {
            let Some(bytes) = conn
                .prepare_cached("SELECT secret_sha256 FROM shops WHERE id = ?1")?
                .query_row(params![shop_id.as_str()], |row| row.get::<_, Vec<u8>>(0))
                .optional()?
            else {
                return Ok(None);
            };
            SecretHash::from_bytes(&bytes).map(Some).ok_or_else(|| {
                Fail(StoreError::Corrupt(format!(
                    "secret hash of shop {shop_id}"
                )))
            })
        })
        .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.read(|conn| {
            conn.prepare_cached("SELECT 1")?.query_row([], |_| Ok(()))?;
            Ok(())
        })
        .await
    }
}
