//! What can go wrong with the simulator's ledger.

use std::path::PathBuf;

/// An error of the simulator's ledger (opening, migrating or reading it).
///
/// Charging never returns this type: [`chargeonce_core::Acquirer::charge`] maps
/// ledger failures to [`chargeonce_core::AcquirerError`], as a real acquirer's
/// network failures would be.
#[derive(Debug, thiserror::Error)]
pub enum SimulatorError {
    /// The ledger database could not be opened or created for its migration.
    #[error("cannot open the acquirer ledger at {path}: {source}")]
    Open {
        /// The ledger file.
        path: PathBuf,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },
    /// The ledger's writer or reader connections could not be opened.
    #[error("cannot open the acquirer ledger: {0}")]
    OpenLedger(#[from] chargeonce_sqlite::OpenError),
    /// The ledger's schema could not be brought up to date.
    #[error("cannot migrate the acquirer ledger: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query on the ledger failed.
    #[error("acquirer ledger query failed: {0}")]
    Database(#[from] chargeonce_sqlite::rusqlite::Error),
    /// The ledger's threads did not run the call, or undid it (closed,
    /// busy past the timeout, a failed commit): nothing of it was written.
    #[error("acquirer ledger unavailable: {0}")]
    Unavailable(#[from] chargeonce_sqlite::Failure),
    /// A stored row does not hold what the simulator writes.
    #[error("acquirer ledger row {id} is corrupt: {reason}")]
    Corrupt {
        /// The row's id (or acquirer key when the id itself is unreadable).
        id: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Why the simulator refused a refund (the ledger's answer, as the
/// simulator gives it).
#[derive(Debug, thiserror::Error)]
pub enum RefundError {
    /// No such charge.
    #[error("no charge `{0}`")]
    NoSuchCharge(String),
    /// The charge was declined: no money to give back.
    #[error("charge `{0}` was declined; nothing to refund")]
    Declined(String),
    /// The refund would give back more than what is left of the charge.
    #[error("refund exceeds what is left of charge `{0}`")]
    ExceedsCharge(String),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] SimulatorError),
}

impl From<chargeonce_sqlite::Failure> for RefundError {
    fn from(failure: chargeonce_sqlite::Failure) -> Self {
        Self::Ledger(SimulatorError::Unavailable(failure))
    }
}

/// Why the simulator refused a capture or a void of an authorization (the
/// ledger's answer). Each is definite: nothing was taken or released.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// No such charge.
    #[error("no charge `{0}`")]
    NoSuchCharge(String),
    /// The charge is not an authorization: it was charged at once, or declined.
    #[error("charge `{0}` is not an authorization that can be captured or voided")]
    NotCapturable(String),
    /// The authorization's rest was released by a void.
    #[error("authorization `{0}` was voided")]
    Voided(String),
    /// The authorization was closed by its last capture or fully captured.
    #[error("authorization `{0}` is closed: its last capture was taken")]
    Closed(String),
    /// The capture would take more than what is left of the authorization.
    #[error("capture exceeds what is left of authorization `{0}`")]
    ExceedsAuthorization(String),
    /// The key was used for another capture (another charge or amount), as
    /// a real provider's idempotency error: nothing was recorded, and
    /// nothing can be concluded about the key's first request.
    #[error("acquirer key `{0}` was used for another request")]
    KeyReused(String),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] SimulatorError),
}

impl From<chargeonce_sqlite::Failure> for CaptureError {
    fn from(failure: chargeonce_sqlite::Failure) -> Self {
        Self::Ledger(SimulatorError::Unavailable(failure))
    }
}
