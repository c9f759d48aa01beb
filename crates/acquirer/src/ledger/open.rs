//! Opening a ledger: the file (WAL, `synchronous=FULL`, the migration, taking
//! turns with other processes that open it at the same time) or in memory.

use std::path::Path;
use std::time::Duration;

use chargeonce_sqlite::rusqlite;
use chargeonce_sqlite::{Database, Options, Write};
use sqlx::error::ErrorKind;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::Ledger;
use crate::SimulatorError;

/// How long a statement waits for another connection (or process) to release
/// the write lock before giving up with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reader connections per process on a ledger file, beside its one writer.
const READERS: usize = 4;

/// How often opening is tried when another process holds the lock (first open
/// of a new file: switching to WAL, running the migration).
const OPEN_ATTEMPTS: u32 = 10;

/// The migrations bookkeeping table. Not sqlx's default, so the ledger could
/// share a database file with another component's migrations without either
/// seeing the other's as "missing".
const MIGRATIONS_TABLE: &str = "_chargeonce_acquirer_migrations";

impl Ledger {
    /// Opens (and creates if missing) a ledger file: WAL, `synchronous=FULL`,
    /// a busy timeout, and the migration. Several processes may do this at once.
    pub(crate) async fn open(path: &Path) -> Result<Self, SimulatorError> {
        let mut attempt = 1;
        loop {
            match Self::open_once(path).await {
                Err(error) if attempt < OPEN_ATTEMPTS && error.is_contention() => {
                    tracing::debug!(%error, attempt, "acquirer ledger busy while opening; retrying");
                    tokio::time::sleep(Duration::from_millis(25 * u64::from(attempt))).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn open_once(path: &Path) -> Result<Self, SimulatorError> {
        // The schema first, through sqlx's migrator (one connection).
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(BUSY_TIMEOUT * 3)
            .connect_with(options)
            .await
            .map_err(|source| SimulatorError::Open {
                path: path.to_owned(),
                source,
            })?;
        let mut migrator = sqlx::migrate!();
        migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
        let migrated = migrator.run(&pool).await;
        pool.close().await;
        migrated?;
        let db = Database::open(
            path,
            Options {
                busy_timeout: BUSY_TIMEOUT,
                foreign_keys: false,
                readers: READERS,
                ..Options::default()
            },
        )
        .await?;
        Ok(Self { db })
    }

    /// Opens a private in-memory ledger (for tests), with the same schema.
    pub(crate) async fn in_memory() -> Result<Self, SimulatorError> {
        let db = Database::in_memory(Options {
            busy_timeout: BUSY_TIMEOUT,
            foreign_keys: false,
            ..Options::default()
        })
        .await?;
        let migrator = sqlx::migrate!();
        let scripts: Vec<String> = migrator.iter().map(|m| m.sql.as_str().to_owned()).collect();
        db.write(move |conn| -> Result<_, SimulatorError> {
            for script in &scripts {
                conn.execute_batch(script)?;
            }
            Ok(Write::Commit(()))
        })
        .await?;
        Ok(Self { db })
    }
}

/// Whether an sqlx error is another connection holding the lock (or winning
/// the race to create the schema), so that trying again will succeed.
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
/// opening again finds the migration applied. A `CREATE` meets "already
/// exists", an `ALTER TABLE ... ADD COLUMN` "duplicate column name".
fn is_migrate_contention(error: &sqlx::migrate::MigrateError) -> bool {
    use sqlx::migrate::MigrateError;
    match error {
        MigrateError::Execute(e) => is_contention(e),
        MigrateError::ExecuteMigration(e, _) => {
            is_contention(e)
                || matches!(e, sqlx::Error::Database(db)
                    if db.message().contains("already exists")
                        || db.message().contains("duplicate column name"))
        }
        _ => false,
    }
}

/// Whether a rusqlite error is another process holding the file's lock.
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl SimulatorError {
    fn is_contention(&self) -> bool {
        match self {
            Self::Open { source, .. } => is_contention(source),
            Self::Migrate(e) => is_migrate_contention(e),
            Self::OpenLedger(chargeonce_sqlite::OpenError::Sqlite { source, .. })
            | Self::Database(source) => is_busy(source),
            Self::OpenLedger(_) | Self::Unavailable(_) | Self::Corrupt { .. } => false,
        }
    }
}
