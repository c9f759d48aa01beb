//! The ledger: one row per charge attempt, in SQLite. All of the simulator's SQL
//! lives here.

use std::path::Path;
use std::time::Duration;

use chargeonce_core::{AcquirerKey, Currency, Money, PaymentId, Reference, ShopId};
use sqlx::error::ErrorKind;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use time::OffsetDateTime;

use crate::{ChargeStatus, LedgerEntry, SimulatorError};

/// How long a statement waits for another connection (or process) to release
/// the write lock before giving up with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections per process on a ledger file. Writes serialise in SQLite anyway;
/// a few connections let reads run beside a write.
const FILE_POOL_SIZE: u32 = 4;

/// How often opening is tried when another process holds the lock (first open
/// of a new file: switching to WAL, running the migration).
const OPEN_ATTEMPTS: u32 = 10;

/// The migrations bookkeeping table. Not sqlx's default, so the ledger could
/// share a database file with another component's migrations without either
/// seeing the other's as "missing".
const MIGRATIONS_TABLE: &str = "_chargeonce_acquirer_migrations";

/// The columns of a ledger row, with the refunded amount joined in. Every
/// query that reads charges selects these, `FROM acquirer_ledger l`.
macro_rules! charge_columns {
    () => {
        "l.id, l.acquirer_key, l.shop_id, l.payment_id, l.reference, l.amount_minor, \
         l.currency, l.status, l.decline_code, l.created_at, \
         COALESCE((SELECT SUM(r.amount_minor) FROM acquirer_refunds r WHERE r.charge_id = l.id), 0) \
             AS refunded_minor \
         FROM acquirer_ledger l"
    };
}

/// A webhook event waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct OutboxEvent {
    /// The event id.
    pub id: String,
    /// The charge it is about.
    pub charge_id: String,
    /// `payment.succeeded`, ...
    #[sqlx(rename = "type")]
    pub kind: String,
    /// The JSON delivered.
    pub payload: String,
    /// Unix ms of creation.
    pub created_at: i64,
    /// Unix ms of the next attempt.
    pub due_at: i64,
    /// Attempts made.
    pub attempts: i64,
}

/// A refund as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct RefundRow {
    pub id: String,
    pub charge_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub created_at: i64,
}

/// Why a refund was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RefundRefused {
    /// No such charge.
    #[error("no charge `{0}`")]
    NoSuchCharge(String),
    /// A declined charge moved no money.
    #[error("charge `{0}` was declined; nothing to refund")]
    Declined(String),
    /// The refund would give back more than what is left of the charge.
    #[error("refund exceeds what is left of charge `{0}`")]
    ExceedsCharge(String),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] SimulatorError),
}

/// A ledger row as SQLite returns it.
#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    acquirer_key: String,
    shop_id: String,
    payment_id: String,
    reference: String,
    amount_minor: i64,
    currency: String,
    status: String,
    decline_code: Option<String>,
    created_at: i64,
    refunded_minor: i64,
}

impl TryFrom<Row> for LedgerEntry {
    type Error = SimulatorError;

    fn try_from(row: Row) -> Result<Self, Self::Error> {
        let corrupt = |reason: String| SimulatorError::Corrupt {
            id: row.id.clone(),
            reason,
        };
        let currency = Currency::from_code(&row.currency).map_err(|e| corrupt(e.to_string()))?;
        let entry = LedgerEntry {
            id: row.id.clone(),
            acquirer_key: AcquirerKey::from_stored(row.acquirer_key.clone()),
            shop_id: ShopId::new(row.shop_id.as_str()).map_err(|e| corrupt(e.to_string()))?,
            payment_id: PaymentId::parse(&row.payment_id).map_err(|e| corrupt(e.to_string()))?,
            reference: Reference::new(row.reference.as_str())
                .map_err(|e| corrupt(e.to_string()))?,
            amount: Money::from_minor(row.amount_minor, currency)
                .map_err(|e| corrupt(e.to_string()))?,
            status: ChargeStatus::parse(&row.status)
                .ok_or_else(|| corrupt(format!("unknown status `{}`", row.status)))?,
            decline_code: row.decline_code.clone(),
            created_at: from_unix_millis(row.created_at).map_err(corrupt)?,
            refunded_minor: row.refunded_minor,
        };
        Ok(entry)
    }
}

pub(crate) fn unix_millis(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

fn from_unix_millis(ms: i64) -> Result<OffsetDateTime, String> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| format!("created_at {ms}: {e}"))
}

/// Whether an error is another connection holding the lock (or winning the
/// race to create the schema), so that trying again will succeed.
fn is_contention(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => {
            // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with any extended code.
            let busy = db
                .code()
                .and_then(|code| code.parse::<i32>().ok())
                .is_some_and(|code| matches!(code & 0xff, 5 | 6));
            busy || db.kind() == ErrorKind::UniqueViolation
        }
        _ => false,
    }
}

/// Whether a migration failed because another opener ran it at the same
/// time (SQLite's migrator takes no lock): its transaction rolled back, and
/// opening again finds the migration applied.
fn is_migrate_contention(error: &sqlx::migrate::MigrateError) -> bool {
    use sqlx::migrate::MigrateError;
    match error {
        MigrateError::Execute(e) => is_contention(e),
        MigrateError::ExecuteMigration(e, _) => {
            is_contention(e)
                || matches!(e, sqlx::Error::Database(db) if db.message().contains("already exists"))
        }
        _ => false,
    }
}

/// The ledger table behind a connection pool.
#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    pool: SqlitePool,
}

impl Ledger {
    /// Opens (and creates if missing) a ledger file: WAL, `synchronous=FULL`,
    /// a busy timeout, and the migration. Several processes may do this at once.
    pub(crate) async fn open(path: &Path) -> Result<Self, SimulatorError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT);
        let pool_options = SqlitePoolOptions::new()
            .max_connections(FILE_POOL_SIZE)
            .acquire_timeout(BUSY_TIMEOUT * 3);
        let mut attempt = 1;
        loop {
            match Self::connect(path, pool_options.clone(), options.clone()).await {
                Err(error) if attempt < OPEN_ATTEMPTS && error.is_contention() => {
                    tracing::debug!(%error, attempt, "acquirer ledger busy while opening; retrying");
                    tokio::time::sleep(Duration::from_millis(25 * u64::from(attempt))).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    /// Opens a private in-memory ledger (for tests). One connection that never
    /// expires: an in-memory database lives only as long as its connections.
    pub(crate) async fn in_memory() -> Result<Self, SimulatorError> {
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool_options = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None);
        Self::connect(Path::new(":memory:"), pool_options, options).await
    }

    async fn connect(
        path: &Path,
        pool_options: SqlitePoolOptions,
        options: SqliteConnectOptions,
    ) -> Result<Self, SimulatorError> {
        let pool =
            pool_options
                .connect_with(options)
                .await
                .map_err(|source| SimulatorError::Open {
                    path: path.to_owned(),
                    source,
                })?;
        let mut migrator = sqlx::migrate!();
        migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
        if let Err(error) = migrator.run(&pool).await {
            pool.close().await;
            return Err(error.into());
        }
        Ok(Self { pool })
    }

    /// Records an attempt, with the webhook events it causes, in one
    /// transaction. With `deduplicated`, nothing is written when the acquirer
    /// key is already in the ledger (an idempotent acquirer); otherwise the row
    /// is always added. `true` when this call wrote the row: the caller is the
    /// first execution. Atomic across connections and processes.
    pub(crate) async fn insert(
        &self,
        entry: &LedgerEntry,
        deduplicated: bool,
        events: &[OutboxEvent],
    ) -> Result<bool, sqlx::Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let sql = if deduplicated {
            "INSERT INTO acquirer_ledger \
               (id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, \
                status, decline_code, created_at, deduplicated) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 1) \
             ON CONFLICT (acquirer_key) WHERE deduplicated = 1 DO NOTHING"
        } else {
            "INSERT INTO acquirer_ledger \
               (id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, \
                status, decline_code, created_at, deduplicated) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0)"
        };
        let done = sqlx::query(sql)
            .bind(&entry.id)
            .bind(entry.acquirer_key.as_str())
            .bind(entry.shop_id.as_str())
            .bind(entry.payment_id.as_str())
            .bind(entry.reference.as_str())
            .bind(entry.amount.minor_units())
            .bind(entry.amount.currency().code())
            .bind(entry.status.as_str())
            .bind(entry.decline_code.as_deref())
            .bind(unix_millis(entry.created_at))
            .execute(&mut *tx)
            .await?;
        let inserted = done.rows_affected() == 1;
        if inserted {
            for event in events {
                sqlx::query(
                    "INSERT INTO acquirer_events \
                       (id, charge_id, type, payload, created_at, due_at, attempts) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                )
                .bind(&event.id)
                .bind(&event.charge_id)
                .bind(&event.kind)
                .bind(&event.payload)
                .bind(event.created_at)
                .bind(event.due_at)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(inserted)
    }

    /// The attempt an idempotent acquirer recorded under a key, if any.
    /// Rows recorded without idempotency are not found by key.
    pub(crate) async fn find(&self, key: &str) -> Result<Option<LedgerEntry>, SimulatorError> {
        let row: Option<Row> = sqlx::query_as(concat!(
            "SELECT ",
            charge_columns!(),
            " WHERE l.acquirer_key = ?1 AND l.deduplicated = 1"
        ))
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.map(LedgerEntry::try_from).transpose()
    }

    /// One charge by its id.
    pub(crate) async fn charge(&self, id: &str) -> Result<Option<LedgerEntry>, SimulatorError> {
        let row: Option<Row> =
            sqlx::query_as(concat!("SELECT ", charge_columns!(), " WHERE l.id = ?1"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(LedgerEntry::try_from).transpose()
    }

    /// Every attempt for a caller's payment (its reference), oldest first.
    pub(crate) async fn for_payment(
        &self,
        shop_id: &str,
        payment_id: &str,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            charge_columns!(),
            " WHERE l.shop_id = ?1 AND l.payment_id = ?2 ORDER BY l.created_at, l.id"
        ))
        .bind(shop_id)
        .bind(payment_id)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(LedgerEntry::try_from).collect()
    }

    /// Every attempt recorded in `[from, to)` (unix ms), oldest first.
    pub(crate) async fn between(
        &self,
        from: i64,
        to: i64,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            charge_columns!(),
            " WHERE l.created_at >= ?1 AND l.created_at < ?2 ORDER BY l.created_at, l.id"
        ))
        .bind(from)
        .bind(to)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(LedgerEntry::try_from).collect()
    }

    /// Up to `limit` attempts recorded in `[from, to)` (unix ms), in
    /// `(created_at, id)` order, after the attempt `after` (unix ms and id;
    /// `None`: from the start). Keyset pagination on the
    /// `acquirer_ledger_created_at` index, so a page costs its own rows.
    pub(crate) async fn page(
        &self,
        from: i64,
        to: i64,
        after: Option<(i64, &str)>,
        limit: u32,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        // One lower bound, as a row value: SQLite starts the index range
        // there. (With `created_at >= from` beside it, it started at `from`
        // and filtered every row up to the cursor: a pass over a window was
        // quadratic.) `(from, '')` is `created_at >= from`: ids are not empty.
        let (after_ms, after_id) = match after {
            Some(cursor) if cursor > (from, "") => cursor,
            _ => (from, ""),
        };
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            charge_columns!(),
            " WHERE (l.created_at, l.id) > (?1, ?2) AND l.created_at < ?3 \
             ORDER BY l.created_at, l.id LIMIT ?4"
        ))
        .bind(after_ms)
        .bind(after_id)
        .bind(to)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(LedgerEntry::try_from).collect()
    }

    /// Every attempt for one order reference of one shop, oldest first (the
    /// `acquirer_ledger_reference` index).
    pub(crate) async fn for_reference(
        &self,
        shop_id: &str,
        reference: &str,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            charge_columns!(),
            " WHERE l.shop_id = ?1 AND l.reference = ?2 ORDER BY l.created_at, l.id"
        ))
        .bind(shop_id)
        .bind(reference)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(LedgerEntry::try_from).collect()
    }

    /// Every attempt, oldest first.
    pub(crate) async fn all(&self) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            charge_columns!(),
            " ORDER BY l.created_at, l.id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(LedgerEntry::try_from).collect()
    }

    /// Refunds (part of) a succeeded charge, once per `acquirer_key`: a
    /// repeat returns the first refund under that key (and `false`). `None`
    /// refunds what is left of the charge. One statement checks and inserts,
    /// so concurrent refunds never exceed the charge.
    pub(crate) async fn refund(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        refund_id: &str,
        at: i64,
    ) -> Result<(RefundRow, bool), RefundRefused> {
        if let Some(found) = self.refund_by_key(acquirer_key).await? {
            return Ok((found, false));
        }
        let charge = self
            .charge(charge_id)
            .await?
            .ok_or_else(|| RefundRefused::NoSuchCharge(charge_id.to_owned()))?;
        if charge.status != crate::ChargeStatus::Succeeded {
            return Err(RefundRefused::Declined(charge_id.to_owned()));
        }
        let total = charge.amount.minor_units();
        let amount = amount_minor.unwrap_or(total - charge.refunded_minor);
        if amount <= 0 {
            return Err(RefundRefused::ExceedsCharge(charge_id.to_owned()));
        }
        let inserted = sqlx::query(
            "INSERT INTO acquirer_refunds (id, charge_id, acquirer_key, amount_minor, currency, \
                 created_at) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6 \
             WHERE (SELECT COALESCE(SUM(amount_minor), 0) FROM acquirer_refunds \
                    WHERE charge_id = ?2) + ?4 <= ?7 \
             ON CONFLICT (acquirer_key) DO NOTHING",
        )
        .bind(refund_id)
        .bind(charge_id)
        .bind(acquirer_key)
        .bind(amount)
        .bind(charge.amount.currency().code())
        .bind(at)
        .bind(total)
        .execute(&self.pool)
        .await
        .map_err(SimulatorError::from)?;
        match self.refund_by_key(acquirer_key).await? {
            Some(row) => Ok((row, inserted.rows_affected() == 1)),
            None => Err(RefundRefused::ExceedsCharge(charge_id.to_owned())),
        }
    }

    async fn refund_by_key(&self, acquirer_key: &str) -> Result<Option<RefundRow>, SimulatorError> {
        Ok(sqlx::query_as(
            "SELECT id, charge_id, amount_minor, currency, created_at \
             FROM acquirer_refunds WHERE acquirer_key = ?1",
        )
        .bind(acquirer_key)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Every refund, oldest first.
    pub(crate) async fn refunds(&self) -> Result<Vec<RefundRow>, SimulatorError> {
        Ok(sqlx::query_as(
            "SELECT id, charge_id, amount_minor, currency, created_at \
             FROM acquirer_refunds ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Up to `limit` undelivered events due at `now` (unix ms), by due time.
    pub(crate) async fn due_events(
        &self,
        now: i64,
        limit: u32,
    ) -> Result<Vec<OutboxEvent>, SimulatorError> {
        Ok(sqlx::query_as(
            "SELECT id, charge_id, type, payload, created_at, due_at, attempts \
             FROM acquirer_events WHERE delivered_at IS NULL AND due_at <= ?1 \
             ORDER BY due_at, id LIMIT ?2",
        )
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Marks events delivered (a 2xx came back), in one transaction.
    pub(crate) async fn delivered(&self, ids: &[String], at: i64) -> Result<(), SimulatorError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        for id in ids {
            sqlx::query(
                "UPDATE acquirer_events SET delivered_at = ?2, attempts = attempts + 1 \
                 WHERE id = ?1",
            )
            .bind(id)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Counts a failed attempt and sets the next one.
    pub(crate) async fn retry_later(&self, id: &str, due_at: i64) -> Result<(), SimulatorError> {
        sqlx::query(
            "UPDATE acquirer_events SET due_at = ?2, attempts = attempts + 1 WHERE id = ?1",
        )
        .bind(id)
        .bind(due_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// How many events are not delivered yet.
    pub(crate) async fn undelivered(&self) -> Result<i64, SimulatorError> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM acquirer_events WHERE delivered_at IS NULL")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Closes every connection (checkpointing the WAL when it is the last).
    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }
}

impl SimulatorError {
    fn is_contention(&self) -> bool {
        match self {
            Self::Open { source, .. } | Self::Database(source) => is_contention(source),
            Self::Migrate(e) => is_migrate_contention(e),
            Self::Corrupt { .. } => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::entry::now_millis;

    #[test]
    fn millis_round_trip() {
        let at = now_millis();
        assert_eq!(from_unix_millis(unix_millis(at)).unwrap(), at);
    }
}
