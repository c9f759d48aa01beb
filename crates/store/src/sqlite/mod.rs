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
//!
//! This file holds the type, its connection and migrations, the plumbing of
//! statements (`write`, `read`, `one`, `all`). Each role trait is
//! implemented in the file of its concern (`impl Refunds for SqliteStore` in
//! `refunds.rs`, `impl Keys` in `keys.rs`, which hands the claims to
//! `claim.rs`, `cancel.rs` and `finish.rs`, `impl Reconciliation` in
//! `reconciliation.rs`, which hands the settles to `events.rs`). The
//! PostgreSQL store (`../postgres/`) has the same files with the same
//! functions in the same order, so `diff postgres/refunds.rs
//! sqlite/refunds.rs` shows one script in two dialects.

use std::str::FromStr;
use std::time::Duration;

use chargeonce_core::StoreError;
use chargeonce_sqlite::rusqlite::{self, Connection, OptionalExtension};
use chargeonce_sqlite::{Database, Options, Stats, Write};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use time::OffsetDateTime;

use crate::PoolConfig;
use crate::rows::FromSqliteRow;

mod api_keys;
mod authorizations;
mod cancel;
mod claim;
mod endpoints;
mod errors;
mod events;
mod findings;
mod finish;
mod health;
mod history;
mod keys;
mod operator;
mod outbox;
mod payments;
mod reconciliation;
mod refunds;
mod shops;

use errors::{Fail, Result};

/// The clock in unix milliseconds, in SQL: `unix_ms_now()`, which every
/// connection of [`chargeonce_sqlite`] has ([`chargeonce_sqlite::UNIX_MS_NOW`];
/// `CAST(unixepoch('subsec') * 1000 AS INTEGER)` reads the same clock, at
/// several times the cost, paid by each row a write stamps).
macro_rules! now_ms {
    () => {
        "unix_ms_now()"
    };
}
pub(crate) use now_ms;

/// [`Store`](chargeonce_core::Store) on an SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    db: Database,
    /// This instance's name, written as the holder of the leases it takes.
    instance: std::sync::Arc<str>,
}

impl SqliteStore {
    /// Opens (creating if missing) an `sqlite://PATH` database and runs the migrations.
    pub async fn connect(url: &str, config: &PoolConfig) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::other(format!("bad SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let path = options.get_filename().to_owned();
        if path.as_os_str() == ":memory:" {
            return Err(StoreError::other(
                "the SQLite store needs a file (sqlite://PATH), not an in-memory database",
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
        .map_err(StoreError::unavailable)?;
        Ok(Self {
            db,
            instance: config.instance.as_str().into(),
        })
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
        .map_err(|e| StoreError::unavailable(format!("cannot open {}: {e}", path.display())))?;
    let result = migrate_with(&pool).await;
    pool.close().await;
    result
}

async fn migrate_with(pool: &sqlx::SqlitePool) -> Result<(), StoreError> {
    let applied = || async {
        let fail =
            |e: sqlx::Error| StoreError::other(format!("reading the applied migrations: {e}"));
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
        .map_err(|e| StoreError::other(format!("migration failed: {e}")))?;
    if applied().await? == before {
        return Ok(());
    }
    let broken: Vec<(String, Option<i64>)> =
        sqlx::query_as("SELECT \"table\", rowid FROM pragma_foreign_key_check")
            .fetch_all(pool)
            .await
            .map_err(|e| {
                StoreError::other(format!("checking foreign keys after migrating: {e}"))
            })?;
    if let Some((table, rowid)) = broken.first() {
        return Err(StoreError::corrupt(format!(
            "after migrating, {} rows break a foreign key (the first: {table} rowid {rowid:?})",
            broken.len()
        )));
    }
    Ok(())
}

/// The one row a query finds, if any, decoded as `R` and converted to `T`.
fn one<R, T>(
    conn: &Connection,
    sql: &'static str,
    params: impl rusqlite::Params,
) -> Result<Option<T>>
where
    R: FromSqliteRow,
    T: TryFrom<R, Error = StoreError>,
{
    let row = conn
        .prepare_cached(sql)?
        .query_row(params, R::from_sqlite)
        .optional()?;
    Ok(row.map(T::try_from).transpose()?)
}

/// Every row a query finds, each decoded as `R` and converted to `T`.
fn all<R, T>(conn: &Connection, sql: &'static str, params: impl rusqlite::Params) -> Result<Vec<T>>
where
    R: FromSqliteRow,
    T: TryFrom<R, Error = StoreError>,
{
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(T::try_from(R::from_sqlite(row)?)?);
    }
    Ok(out)
}

/// A time as SQLite stores it: unix milliseconds.
fn unix_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statements' clock is the function the connections have.
    #[test]
    fn now_ms_calls_the_connections_clock() {
        assert_eq!(now_ms!(), format!("{}()", chargeonce_sqlite::UNIX_MS_NOW));
    }

    /// What SQLite's planner does with `sql` (the details of `EXPLAIN QUERY
    /// PLAN`); the concern files' plan tests use it too.
    pub(super) fn plan(conn: &Connection, sql: &str) -> rusqlite::Result<String> {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
        let mut rows = stmt.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next()? {
            steps.push(row.get::<_, String>(3)?);
        }
        Ok(steps.join("; "))
    }

    #[tokio::test]
    async fn the_lists_are_ranges_of_the_shop_indexes_without_a_sort() {
        let dir = std::env::temp_dir().join(format!("chargeonce-plans-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("plans.db").display());
        let store = SqliteStore::connect(&url, &PoolConfig::default())
            .await
            .unwrap();
        let statements = [
            (payments::PAYMENTS_NEWEST, "payments_by_shop", false),
            (payments::PAYMENTS_AFTER, "payments_by_shop", true),
            (payments::PAYMENTS_BEFORE, "payments_by_shop", true),
            (refunds::REFUNDS_NEWEST, "refunds_by_shop", false),
            (refunds::REFUNDS_AFTER, "refunds_by_shop", true),
            (refunds::REFUNDS_BEFORE, "refunds_by_shop", true),
        ];
        for (sql, index, from_cursor) in statements {
            let plan = store.read(move |conn| Ok(plan(conn, sql)?)).await.unwrap();
            assert!(
                plan.contains(&format!("INDEX {index} (shop_id=?")),
                "{plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
            if from_cursor {
                // A cursor bounds the range itself: no scan from the newest.
                assert!(plan.contains("(created_at,id)"), "{plan}");
            }
        }
        // One order's payments and one payment's refunds: ranges of their
        // narrow indexes (a handful of rows, sorted by id where times tie),
        // never a walk of the whole shop.
        let order = "payments_by_order (shop_id=? AND reference=?";
        let payment = "refunds_by_payment (payment_id=?";
        let narrow = [
            (payments::ORDER_PAYMENTS_NEWEST, order),
            (payments::ORDER_PAYMENTS_AFTER, order),
            (payments::ORDER_PAYMENTS_BEFORE, order),
            (refunds::PAYMENT_REFUNDS_NEWEST, payment),
            (refunds::PAYMENT_REFUNDS_AFTER, payment),
            (refunds::PAYMENT_REFUNDS_BEFORE, payment),
        ];
        for (sql, range) in narrow {
            let plan = store.read(move |conn| Ok(plan(conn, sql)?)).await.unwrap();
            assert!(plan.contains(range), "{plan}");
        }
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The root pages of the indexes the program of `sql` opens for writing
    /// (`EXPLAIN`'s `OpenWrite` steps: p2 is the b-tree's root page).
    fn written_roots(conn: &Connection, sql: &str) -> rusqlite::Result<Vec<i64>> {
        let mut stmt = conn.prepare(&format!("EXPLAIN {sql}"))?;
        let mut rows = stmt.raw_query();
        let mut roots = Vec::new();
        while let Some(row) = rows.next()? {
            if row.get::<_, String>(1)? == "OpenWrite" {
                roots.push(row.get::<_, i64>(3)?);
            }
        }
        Ok(roots)
    }

    /// Migration 0010: the settle to `succeeded` (every fresh payment's)
    /// leaves `payments_by_order` alone, so the finish writes no random
    /// leaf of it; a decline rewrites its entry (the order's live slot is
    /// freed), and a claim inserts one.
    #[tokio::test]
    async fn only_a_decline_rewrites_the_orders_index_entry() {
        use chargeonce_core::PaymentStatus::{Declined, Succeeded};
        use payments::SettleBy::{AcquirerKey, Id};
        let dir = std::env::temp_dir().join(format!("chargeonce-slots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("slots.db").display());
        let store = SqliteStore::connect(&url, &PoolConfig::default())
            .await
            .unwrap();
        let (order, table, writes) = store
            .read(|conn| {
                let root = |name: &str| -> rusqlite::Result<i64> {
                    conn.query_row(
                        "SELECT rootpage FROM sqlite_schema WHERE name = ?1",
                        [name],
                        |row| row.get(0),
                    )
                };
                let (order, table) = (root("payments_by_order")?, root("payments")?);
                let mut writes = Vec::new();
                let settles = [
                    (Id, Succeeded),
                    (AcquirerKey, Succeeded),
                    (Id, Declined),
                    (AcquirerKey, Declined),
                ];
                for (by, status) in settles {
                    let sql = payments::settle_sql(by, status);
                    writes.push((status, written_roots(conn, sql)?));
                }
                Ok((order, table, writes))
            })
            .await
            .unwrap();
        for (status, written) in writes {
            assert!(written.contains(&table), "{status:?}: {written:?}");
            assert_eq!(
                written.contains(&order),
                status == Declined,
                "{status:?} settle, roots written {written:?}, payments_by_order at {order}"
            );
        }
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A payment's history is a range of its index, already in order; the
    /// history's other statements find their rows by a key.
    #[tokio::test]
    async fn the_history_is_read_by_its_index_without_a_sort() {
        let dir =
            std::env::temp_dir().join(format!("chargeonce-history-plans-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("plans.db").display());
        let store = SqliteStore::connect(&url, &PoolConfig::default())
            .await
            .unwrap();
        let rows = history::PAYMENT_HISTORY;
        let plan_of_rows = store.read(move |conn| Ok(plan(conn, rows)?)).await.unwrap();
        assert!(
            plan_of_rows.contains("INDEX payment_history_by_payment (payment_id=?)"),
            "{plan_of_rows}"
        );
        assert!(!plan_of_rows.contains("TEMP B-TREE"), "{plan_of_rows}");
        for sql in [rows, history::CLAIM_OF_PAYMENT, history::INSERT_ENTRY] {
            let plan = store.read(move |conn| Ok(plan(conn, sql)?)).await.unwrap();
            assert!(!plan.contains("SCAN"), "{plan}");
        }
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
