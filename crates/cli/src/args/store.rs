//! Where the data lives: `--database-url` (every subcommand that opens the
//! store) and the pool's flags (`chargeonce serve`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chargeonce_core::Store;
use chargeonce_store::PoolConfig;
use clap::Args;

/// The default store: an SQLite file in the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://chargeonce.db";

/// The store's URL (`chargeonce serve` words its help its own way).
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// `sqlite://PATH` or `postgres://...`.
    #[arg(long, env = "CHARGEONCE_DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    pub database_url: String,
}

impl DatabaseArgs {
    /// Opens the store with the given pool settings.
    pub async fn connect_with(&self, pool: &PoolConfig) -> anyhow::Result<Arc<dyn Store>> {
        chargeonce_store::connect(&self.database_url, pool)
            .await
            .context("opening the store")
    }

    /// Opens the store with the default pool settings.
    pub async fn connect(&self) -> anyhow::Result<Arc<dyn Store>> {
        self.connect_with(&PoolConfig::default()).await
    }

    /// Whether the store is the embedded SQLite one (one process).
    pub fn is_embedded(&self) -> bool {
        self.database_url.starts_with("sqlite:")
    }

    /// The URL's scheme (`sqlite`, `postgres`), for the listening line.
    pub fn scheme(&self) -> &str {
        self.database_url.split(':').next().unwrap_or_default()
    }
}

/// The store of a serving process: its URL and its pool.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Database connections per process.
    #[arg(long, env = "CHARGEONCE_MAX_CONNECTIONS", default_value_t = 16)]
    pub max_connections: u32,
    /// PostgreSQL: how long a request waits for a pooled connection before
    /// it is answered 503 `store_unavailable` (with `Retry-After`), having
    /// done nothing. Keep it under the clients' own timeouts, so that during
    /// a failover they get that answer rather than giving up first.
    #[arg(
        long,
        env = "CHARGEONCE_DATABASE_ACQUIRE_TIMEOUT",
        default_value = "5s",
        value_parser = positive_duration
    )]
    pub database_acquire_timeout: Duration,
    /// SQLite: most writes queued for the writer thread before new work (a
    /// new key's claim) is refused with 503 `store_overloaded`; work already
    /// started is never refused. `0`: no limit.
    #[arg(long, env = "CHARGEONCE_SQLITE_QUEUE", default_value_t = 4096)]
    pub sqlite_queue: usize,
    /// This instance's name, recorded as the holder of the leases it takes
    /// (shown by `GET /v1/idempotency-keys/{key}`). Default: `hostname:pid`.
    #[arg(long, env = "CHARGEONCE_INSTANCE")]
    pub instance: Option<String>,
}

impl StoreArgs {
    /// The pool's settings.
    pub fn pool(&self) -> PoolConfig {
        let mut pool = PoolConfig {
            max_connections: self.max_connections,
            acquire_timeout: self.database_acquire_timeout,
            write_queue: self.sqlite_queue,
            ..PoolConfig::default()
        };
        if let Some(instance) = &self.instance {
            pool.instance.clone_from(instance);
        }
        pool
    }

    /// Opens the store with the pool's settings.
    pub async fn connect(&self) -> anyhow::Result<Arc<dyn Store>> {
        self.database.connect_with(&self.pool()).await
    }
}

/// A duration above zero (`humantime`'s form: `500ms`, `5s`).
fn positive_duration(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(duration) if duration.is_zero() => Err("must be above zero".to_owned()),
        Ok(duration) => Ok(duration),
        Err(error) => Err(error.to_string()),
    }
}
