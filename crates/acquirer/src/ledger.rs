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
        };
        Ok(entry)
    }
}

fn unix_millis(at: OffsetDateTime) -> i64 {
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

fn is_migrate_contention(error: &sqlx::migrate::MigrateError) -> bool {
    use sqlx::migrate::MigrateError;
    match error {
        MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _) => is_contention(e),
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

    /// Records an attempt unless its acquirer key is already in the ledger.
    /// `true` when this call wrote the row: the caller is the first execution.
    /// One statement, so it is atomic across connections and processes.
    pub(crate) async fn insert(&self, entry: &LedgerEntry) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "INSERT INTO acquirer_ledger \
               (id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, \
                status, decline_code, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
             ON CONFLICT (acquirer_key) DO NOTHING",
        )
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
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The attempt recorded under an acquirer key, if any.
    pub(crate) async fn find(&self, key: &str) -> Result<Option<LedgerEntry>, SimulatorError> {
        let row: Option<Row> = sqlx::query_as(
            "SELECT id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, \
                    status, decline_code, created_at \
             FROM acquirer_ledger WHERE acquirer_key = ?1",
        )
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.map(LedgerEntry::try_from).transpose()
    }

    /// Every attempt, oldest first.
    pub(crate) async fn all(&self) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, \
                    status, decline_code, created_at \
             FROM acquirer_ledger ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(LedgerEntry::try_from).collect()
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
