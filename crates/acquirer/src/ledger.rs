//! The ledger: one row per charge attempt, in SQLite. All of the simulator's SQL
//! lives here.
//!
//! The file is in WAL mode with `synchronous=FULL`. Charges are written by
//! one writer thread per process that commits the charges arriving together
//! in one transaction and one fsync (group commit, [`chargeonce_sqlite`]);
//! several processes may share the file, their transactions then take turns
//! on SQLite's lock. The schema is migrated by sqlx's migrator.

use std::path::Path;
use std::time::Duration;

use chargeonce_core::{AcquirerKey, Currency, Money, PaymentId, Reference, ShopId};
use chargeonce_sqlite::rusqlite::{self, Connection, OptionalExtension, params};
use chargeonce_sqlite::{Database, Options, Write};
use sqlx::error::ErrorKind;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use time::OffsetDateTime;

use crate::{ChargeStatus, LedgerEntry, SimulatorError};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutboxEvent {
    /// The event id.
    pub id: String,
    /// The charge it is about.
    pub charge_id: String,
    /// `payment.succeeded`, ...
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefundRow {
    pub id: String,
    pub charge_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub created_at: i64,
}

/// A refund about to be recorded.
#[derive(Debug, Clone)]
pub(crate) struct NewRefundRow {
    /// Its id (`re_...`).
    pub id: String,
    /// The caller's reference (its refund id), if it gave one.
    pub reference: Option<String>,
    /// Unix ms.
    pub at: i64,
    /// Whether the acquirer key deduplicates it.
    pub deduplicated: bool,
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

impl From<chargeonce_sqlite::Failure> for RefundRefused {
    fn from(failure: chargeonce_sqlite::Failure) -> Self {
        Self::Ledger(SimulatorError::Unavailable(failure))
    }
}

/// A ledger row as SQLite returns it.
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

impl Row {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            acquirer_key: row.get("acquirer_key")?,
            shop_id: row.get("shop_id")?,
            payment_id: row.get("payment_id")?,
            reference: row.get("reference")?,
            amount_minor: row.get("amount_minor")?,
            currency: row.get("currency")?,
            status: row.get("status")?,
            decline_code: row.get("decline_code")?,
            created_at: row.get("created_at")?,
            refunded_minor: row.get("refunded_minor")?,
        })
    }
}

impl OutboxEvent {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            charge_id: row.get("charge_id")?,
            kind: row.get("type")?,
            payload: row.get("payload")?,
            created_at: row.get("created_at")?,
            due_at: row.get("due_at")?,
            attempts: row.get("attempts")?,
        })
    }
}

impl RefundRow {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get("id")?,
            charge_id: row.get("charge_id")?,
            amount_minor: row.get("amount_minor")?,
            currency: row.get("currency")?,
            created_at: row.get("created_at")?,
        })
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

/// Whether a rusqlite error is another process holding the file's lock.
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Collects a query's ledger rows.
fn entries(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<LedgerEntry>, SimulatorError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, Row::read)?;
    let mut out = Vec::new();
    for row in rows {
        out.push(LedgerEntry::try_from(row?)?);
    }
    Ok(out)
}

/// The first ledger row a query returns.
fn entry(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Option<LedgerEntry>, SimulatorError> {
    conn.prepare_cached(sql)?
        .query_row(params, Row::read)
        .optional()?
        .map(LedgerEntry::try_from)
        .transpose()
}

/// A refund by its acquirer key, on whichever connection.
fn refund_by_key(
    conn: &Connection,
    acquirer_key: &str,
) -> Result<Option<RefundRow>, SimulatorError> {
    Ok(conn
        .prepare_cached(
            "SELECT id, charge_id, amount_minor, currency, created_at \
             FROM acquirer_refunds WHERE acquirer_key = ?1",
        )?
        .query_row(params![acquirer_key], RefundRow::read)
        .optional()?)
}

/// The ledger tables behind a writer thread and reader threads.
#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    db: Database,
}

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

    /// Records an attempt, with the webhook events it causes, atomically. With
    /// `deduplicated`, nothing is written when the acquirer key is already in
    /// the ledger (an idempotent acquirer); otherwise the row is always added.
    /// `true` when this call wrote the row: the caller is the first execution.
    /// Atomic across connections and processes; answered once durable.
    pub(crate) async fn insert(
        &self,
        entry: &LedgerEntry,
        deduplicated: bool,
        events: &[OutboxEvent],
    ) -> Result<bool, SimulatorError> {
        let entry = entry.clone();
        let events = events.to_vec();
        self.db
            .write(move |conn| {
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
                let inserted = conn.prepare_cached(sql)?.execute(params![
                    entry.id,
                    entry.acquirer_key.as_str(),
                    entry.shop_id.as_str(),
                    entry.payment_id.as_str(),
                    entry.reference.as_str(),
                    entry.amount.minor_units(),
                    entry.amount.currency().code(),
                    entry.status.as_str(),
                    entry.decline_code,
                    unix_millis(entry.created_at),
                ])? == 1;
                if inserted {
                    for event in &events {
                        conn.prepare_cached(
                            "INSERT INTO acquirer_events \
                               (id, charge_id, type, payload, created_at, due_at, attempts) \
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                        )?
                        .execute(params![
                            event.id,
                            event.charge_id,
                            event.kind,
                            event.payload,
                            event.created_at,
                            event.due_at,
                        ])?;
                    }
                }
                Ok(Write::Commit(inserted))
            })
            .await
    }

    /// The attempt an idempotent acquirer recorded under a key, if any.
    /// Rows recorded without idempotency are not found by key.
    pub(crate) async fn find(&self, key: &str) -> Result<Option<LedgerEntry>, SimulatorError> {
        let key = key.to_owned();
        self.db
            .read(move |conn| {
                entry(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.acquirer_key = ?1 AND l.deduplicated = 1"
                    ),
                    params![key],
                )
            })
            .await
    }

    /// One charge by its id.
    pub(crate) async fn charge(&self, id: &str) -> Result<Option<LedgerEntry>, SimulatorError> {
        let id = id.to_owned();
        self.db
            .read(move |conn| {
                entry(
                    conn,
                    concat!("SELECT ", charge_columns!(), " WHERE l.id = ?1"),
                    params![id],
                )
            })
            .await
    }

    /// Every attempt for a caller's payment (its reference), oldest first.
    pub(crate) async fn for_payment(
        &self,
        shop_id: &str,
        payment_id: &str,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let (shop_id, payment_id) = (shop_id.to_owned(), payment_id.to_owned());
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.shop_id = ?1 AND l.payment_id = ?2 ORDER BY l.created_at, l.id"
                    ),
                    params![shop_id, payment_id],
                )
            })
            .await
    }

    /// Every attempt recorded in `[from, to)` (unix ms), oldest first.
    pub(crate) async fn between(
        &self,
        from: i64,
        to: i64,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.created_at >= ?1 AND l.created_at < ?2 \
                          ORDER BY l.created_at, l.id"
                    ),
                    params![from, to],
                )
            })
            .await
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
        let (after_ms, after_id) = (after_ms, after_id.to_owned());
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE (l.created_at, l.id) > (?1, ?2) AND l.created_at < ?3 \
                         ORDER BY l.created_at, l.id LIMIT ?4"
                    ),
                    params![after_ms, after_id, to, i64::from(limit)],
                )
            })
            .await
    }

    /// Every attempt for one order reference of one shop, oldest first (the
    /// `acquirer_ledger_reference` index).
    pub(crate) async fn for_reference(
        &self,
        shop_id: &str,
        reference: &str,
    ) -> Result<Vec<LedgerEntry>, SimulatorError> {
        let (shop_id, reference) = (shop_id.to_owned(), reference.to_owned());
        self.db
            .read(move |conn| {
                entries(
                    conn,
                    concat!(
                        "SELECT ",
                        charge_columns!(),
                        " WHERE l.shop_id = ?1 AND l.reference = ?2 ORDER BY l.created_at, l.id"
                    ),
                    params![shop_id, reference],
                )
            })
            .await
    }

    /// Every attempt, oldest first.
    pub(crate) async fn all(&self) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.db
            .read(|conn| {
                entries(
                    conn,
                    concat!("SELECT ", charge_columns!(), " ORDER BY l.created_at, l.id"),
                    [],
                )
            })
            .await
    }

    /// Refunds (part of) a succeeded charge. `deduplicated`: once per
    /// `acquirer_key`, a repeat returns the first refund under that key (and
    /// `false`); otherwise every call is a new refund, as at a provider that
    /// ignores keys. `None` refunds what is left of the charge. One write
    /// checks and inserts, so concurrent refunds never exceed the charge.
    pub(crate) async fn refund(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        new: NewRefundRow,
    ) -> Result<(RefundRow, bool), RefundRefused> {
        let (charge_id, acquirer_key) = (charge_id.to_owned(), acquirer_key.to_owned());
        self.db
            .write(move |conn| {
                if new.deduplicated
                    && let Some(found) = refund_by_key(conn, &acquirer_key)?
                {
                    return Ok(Write::Commit((found, false)));
                }
                let charge = entry(
                    conn,
                    concat!("SELECT ", charge_columns!(), " WHERE l.id = ?1"),
                    params![charge_id],
                )?
                .ok_or_else(|| RefundRefused::NoSuchCharge(charge_id.clone()))?;
                if charge.status != crate::ChargeStatus::Succeeded {
                    return Err(RefundRefused::Declined(charge_id));
                }
                let total = charge.amount.minor_units();
                let amount = amount_minor.unwrap_or(total - charge.refunded_minor);
                if amount <= 0 || charge.refunded_minor + amount > total {
                    return Err(RefundRefused::ExceedsCharge(charge_id));
                }
                conn.prepare_cached(
                    "INSERT INTO acquirer_refunds (id, charge_id, acquirer_key, reference, \
                         amount_minor, currency, created_at, deduplicated) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(SimulatorError::from)?
                .execute(params![
                    new.id,
                    charge_id,
                    acquirer_key,
                    new.reference,
                    amount,
                    charge.amount.currency().code(),
                    new.at,
                    new.deduplicated,
                ])
                .map_err(SimulatorError::from)?;
                Ok(Write::Commit((
                    RefundRow {
                        id: new.id,
                        charge_id,
                        amount_minor: amount,
                        currency: charge.amount.currency().code().to_owned(),
                        created_at: new.at,
                    },
                    true,
                )))
            })
            .await
    }

    /// The refunds of a charge made under the caller's `reference`, oldest first.
    pub(crate) async fn refunds_for_reference(
        &self,
        charge_id: &str,
        reference: &str,
    ) -> Result<Vec<RefundRow>, SimulatorError> {
        let (charge_id, reference) = (charge_id.to_owned(), reference.to_owned());
        self.db
            .read(move |conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, charge_id, amount_minor, currency, created_at \
                     FROM acquirer_refunds WHERE charge_id = ?1 AND reference = ?2 \
                     ORDER BY created_at, id",
                )?;
                let rows = stmt.query_map(params![charge_id, reference], RefundRow::read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    /// Every refund, oldest first.
    pub(crate) async fn refunds(&self) -> Result<Vec<RefundRow>, SimulatorError> {
        self.db
            .read(|conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, charge_id, amount_minor, currency, created_at \
                     FROM acquirer_refunds ORDER BY created_at, id",
                )?;
                let rows = stmt.query_map([], RefundRow::read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    /// Up to `limit` undelivered events due at `now` (unix ms), by due time.
    pub(crate) async fn due_events(
        &self,
        now: i64,
        limit: u32,
    ) -> Result<Vec<OutboxEvent>, SimulatorError> {
        self.db
            .read(move |conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, charge_id, type, payload, created_at, due_at, attempts \
                     FROM acquirer_events WHERE delivered_at IS NULL AND due_at <= ?1 \
                     ORDER BY due_at, id LIMIT ?2",
                )?;
                let rows = stmt.query_map(params![now, i64::from(limit)], OutboxEvent::read)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
    }

    /// Marks events delivered (a 2xx came back), in one transaction.
    pub(crate) async fn delivered(&self, ids: &[String], at: i64) -> Result<(), SimulatorError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids = ids.to_vec();
        self.db
            .write(move |conn| -> Result<_, SimulatorError> {
                let mut stmt = conn.prepare_cached(
                    "UPDATE acquirer_events SET delivered_at = ?2, attempts = attempts + 1 \
                     WHERE id = ?1",
                )?;
                for id in &ids {
                    stmt.execute(params![id, at])?;
                }
                Ok(Write::Commit(()))
            })
            .await
    }

    /// Counts a failed attempt and sets the next one.
    pub(crate) async fn retry_later(&self, id: &str, due_at: i64) -> Result<(), SimulatorError> {
        let id = id.to_owned();
        self.db
            .write(move |conn| -> Result<_, SimulatorError> {
                conn.prepare_cached(
                    "UPDATE acquirer_events SET due_at = ?2, attempts = attempts + 1 WHERE id = ?1",
                )?
                .execute(params![id, due_at])?;
                Ok(Write::Commit(()))
            })
            .await
    }

    /// How many events are not delivered yet.
    pub(crate) async fn undelivered(&self) -> Result<i64, SimulatorError> {
        self.db
            .read(|conn| -> Result<_, SimulatorError> {
                Ok(conn
                    .prepare_cached(
                        "SELECT count(*) FROM acquirer_events WHERE delivered_at IS NULL",
                    )?
                    .query_row([], |row| row.get(0))?)
            })
            .await
    }

    /// Closes every connection (checkpointing the WAL when it is the last).
    pub(crate) async fn close(&self) {
        self.db.close().await;
    }
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
