//! # chargeonce-store
//!
//! The two implementations of [`chargeonce_core::Store`]: [`PgStore`] for
//! production (many service instances on one PostgreSQL database) and
//! [`SqliteStore`], the embedded default (one file, one process). Every SQL
//! statement of the service lives in this crate and its `migrations/` folders;
//! migrations run when a store connects.
//!
//! ```no_run
//! # async fn demo() -> Result<(), chargeonce_core::StoreError> {
//! let store = chargeonce_store::connect("sqlite://chargeonce.db", &Default::default()).await?;
//! store.ping().await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::{Store, StoreError};

mod codec;
mod columns;
mod finding_rows;
mod key_rows;
pub mod postgres;
mod rows;
pub mod sqlite;
mod stored_body;
mod stored_headers;

/// The SQLite writer's counters ([`SqliteStore::writer_stats`]).
pub use chargeonce_sqlite::Stats as SqliteWriterStats;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// Connection pool settings.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Most connections open at once (readers, for SQLite; it has one writer).
    pub max_connections: u32,
    /// How long a request waits for a connection before the store counts as unavailable.
    pub acquire_timeout: Duration,
    /// SQLite only: the most writes waiting for the writer thread before a
    /// call that starts new work (a claim, a take-over, a webhook's record)
    /// is refused with [`StoreError::Overloaded`], having done nothing. Calls
    /// that finish work already started are never refused. Zero: no limit.
    /// (PostgreSQL's waiting is bounded by `acquire_timeout` instead.)
    pub write_queue: usize,
    /// This instance's name, written on every lease it takes (at a claim or
    /// a take-over) so that key introspection can say who holds a key; by
    /// default `hostname:pid` ([`default_instance`]). Never secret: the
    /// lease's fencing token is stored beside it and never shown.
    pub instance: String,
}

/// The default instance name: `hostname:pid` (the host's name from
/// `HOSTNAME` or `/etc/hostname`, `localhost` when neither says).
pub fn default_instance() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            write_queue: chargeonce_sqlite::DEFAULT_QUEUE,
            instance: default_instance(),
        }
    }
}

/// Opens the store a URL names: `postgres://...` (or `postgresql://...`) or
/// `sqlite://PATH` (created if missing). Runs the migrations.
pub async fn connect(url: &str, config: &PoolConfig) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url, config).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url, config).await?))
    } else {
        Err(StoreError::other(format!(
            "unsupported database URL scheme `{}:` (use postgres://... or sqlite://PATH)",
            url.split(':').next().unwrap_or_default()
        )))
    }
}
