//! The PostgreSQL store: production, shared by many service instances.
//!
//! Races between instances are settled by the `(shop_id, key)` primary key and the
//! one-live-payment-per-order partial unique index. Lease deadlines and expiry are
//! compared with the database's `now()`, so instance clocks never matter.
//!
//! This file holds the type, its connection and migrations. Each role trait
//! is implemented in the file of its concern (`impl Refunds for PgStore` in
//! `refunds.rs`, `impl Keys` in `keys.rs`, which hands the claims to
//! `claim.rs`, `cancel.rs` and `finish.rs`, `impl Reconciliation` in
//! `reconciliation.rs`, which hands the settles to `events.rs`). The SQLite
//! store (`../sqlite/`) has the same files with the same functions in the
//! same order, so `diff postgres/refunds.rs sqlite/refunds.rs` shows one
//! script in two dialects.

use std::str::FromStr;

use chargeonce_core::StoreError;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::PoolConfig;

/// How many times a claim (a payment's, a refund's, a cancel's) re-runs
/// when the row it conflicted with vanished between two statements (swept,
/// or its order's payment declined meanwhile).
const CLAIM_ATTEMPTS: usize = 3;

mod api_keys;
mod authorizations;
mod cancel;
mod claim;
mod connections;
mod endpoints;
mod errors;
mod events;
mod fanout;
mod findings;
mod finish;
mod finish_parts;
mod health;
mod history;
mod keys;
mod operator;
mod outbox;
mod payments;
mod pending;
mod reconciliation;
mod refunds;
mod shops;

use connections::Connections;
use errors::store_error;

/// [`Store`](chargeonce_core::Store) on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    conns: std::sync::Arc<Connections>,
    /// This instance's name, written as the holder of the leases it takes.
    instance: std::sync::Arc<str>,
    /// The shops lately seen with webhook endpoints: which form of a
    /// request's settling statement to try first ([`fanout`]).
    endpoint_hints: std::sync::Arc<fanout::EndpointHints>,
}

impl PgStore {
    /// Connects with a `postgres://` URL and runs the migrations.
    pub async fn connect(url: &str, config: &PoolConfig) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::other(format!("bad PostgreSQL URL: {e}")))?
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
        let store = Self {
            conns: std::sync::Arc::new(Connections::new(pool, config.acquire_timeout)),
            instance: config.instance.as_str().into(),
            endpoint_hints: std::sync::Arc::default(),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the embedded migrations (safe to run from several instances at
    /// once: sqlx takes an advisory lock).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres")
            .run(self.conns.pool())
            .await
            .map_err(|e| StoreError::other(format!("migration failed: {e}")))
    }

    /// The connection pool, for tests and tools.
    pub fn pool(&self) -> &PgPool {
        self.conns.pool()
    }

    /// A connection for one statement (or a few) that is not worth parking
    /// again: it goes back through the pool when dropped.
    async fn conn(&self) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, StoreError> {
        self.conns.take().await.map_err(store_error)
    }

    /// Closes every connection; later calls fail as `Unavailable`.
    pub async fn close(&self) {
        self.conns.close().await;
    }
}

/// Runs a query for at most one row and turns it into its domain value:
/// the PostgreSQL side of the SQLite store's `one`.
async fn one<'q, R, T, A>(
    store: &PgStore,
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, R, A>,
) -> Result<Option<T>, StoreError>
where
    A: 'q + sqlx::IntoArguments<sqlx::Postgres> + Send,
    R: Send + Unpin + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    T: TryFrom<R, Error = StoreError>,
{
    store
        .conns
        .run(async |conn| query.fetch_optional(conn).await)
        .await
        .map_err(store_error)?
        .map(T::try_from)
        .transpose()
}

/// Runs a query for all its rows and turns each into its domain value: the
/// PostgreSQL side of the SQLite store's `all`.
async fn all<'q, R, T, A>(
    store: &PgStore,
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, R, A>,
) -> Result<Vec<T>, StoreError>
where
    A: 'q + sqlx::IntoArguments<sqlx::Postgres> + Send,
    R: Send + Unpin + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    T: TryFrom<R, Error = StoreError>,
{
    store
        .conns
        .run(async |conn| query.fetch_all(conn).await)
        .await
        .map_err(store_error)?
        .into_iter()
        .map(T::try_from)
        .collect()
}
