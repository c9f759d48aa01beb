//! What can go wrong with the simulator's ledger.

use std::path::PathBuf;

/// An error of the simulator's ledger (opening, migrating or reading it).
///
/// Charging never returns this type: [`chargeonce_core::Acquirer::charge`] maps
/// ledger failures to [`chargeonce_core::AcquirerError`], as a real acquirer's
/// network failures would be.
#[derive(Debug, thiserror::Error)]
pub enum SimulatorError {
    /// The ledger database could not be opened or created.
    #[error("cannot open the acquirer ledger at {path}: {source}")]
    Open {
        /// The ledger file (`:memory:` for an in-memory ledger).
        path: PathBuf,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// The ledger's schema could not be brought up to date.
    #[error("cannot migrate the acquirer ledger: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query on the ledger failed.
    #[error("acquirer ledger query failed: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored row does not hold what the simulator writes.
    #[error("acquirer ledger row {id} is corrupt: {reason}")]
    Corrupt {
        /// The row's id (or acquirer key when the id itself is unreadable).
        id: String,
        /// What is wrong with it.
        reason: String,
    },
}
